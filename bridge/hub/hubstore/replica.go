package hubstore

// The hub side of a platform with several hubs: the replica of what the
// hub's own installations need, kept in the hub's database so that a hub
// restarted while its platform is away serves what it knew.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// ReplicaState returns where the replica stands.
func (s *Store) ReplicaState(ctx context.Context) (bridge.ReplicaState, error) {
	var st bridge.ReplicaState
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT cursor, cursor_tag, synced_at, applied FROM replica_state WHERE id = 1`).Scan(&st.Cursor, &st.CursorTag, &at, &st.Applied)
	if errors.Is(err, sql.ErrNoRows) {
		return bridge.ReplicaState{}, nil
	}
	if err != nil {
		return st, err
	}
	st.Synced, st.SyncedAt = true, store.FromMillis(at)
	return st, nil
}

// ApplyBatch applies a batch from the platform and stores its cursor in the
// same transaction, so a hub killed at any point has either applied a batch
// and moved its cursor past it, or neither: nothing is missed and nothing
// applied twice. A snapshot replaces the whole replica. at is when the
// platform answered.
func (s *Store) ApplyBatch(ctx context.Context, b *bridge.ChangeBatch, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := s.now()
	gone := store.Millis(now.Add(bridge.RefreshLifetime))
	if b.Snapshot {
		// What the snapshot does not hold again is gone: tombstones for
		// all, removed below for each installation it brings.
		if _, err := tx.ExecContext(ctx, `INSERT INTO replica_gone_installations (id, kept_until) SELECT id, ? FROM replica_installations WHERE true
			ON CONFLICT (id) DO UPDATE SET kept_until = max(kept_until, excluded.kept_until)`, gone); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM replica_installations`, `DELETE FROM replica_tokens`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
	}
	// Locations regained: their whole state follows in this batch.
	for _, loc := range b.Locations {
		if err := dropReplicaLocation(ctx, tx, gone, `location_id = ?`, loc); err != nil {
			return err
		}
	}
	// A revoked grant or a refresh storm brings thousands of tokens: each
	// statement is prepared once for the batch, not once a record.
	if err := execEach(ctx, tx, `INSERT INTO replica_installations (id, client_id, user_id, location_id, switch_ids, member, legacy, updated_at, refresh_until, see_only)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET client_id = excluded.client_id, user_id = excluded.user_id,
			location_id = excluded.location_id, switch_ids = excluded.switch_ids, member = excluded.member, legacy = excluded.legacy,
			updated_at = excluded.updated_at, refresh_until = excluded.refresh_until, see_only = excluded.see_only`, b.Installations, func(in bridge.ReplicaInstallation) ([]any, error) {
		sw, err := json.Marshal(in.SwitchIDs)
		var refresh sql.NullInt64 // NULL: the platform did not say (an older one)
		if in.RefreshUntil != nil {
			refresh = sql.NullInt64{Int64: optUnix(*in.RefreshUntil), Valid: true}
		}
		if err != nil {
			return nil, err
		}
		var seeOnly sql.NullString // NULL: none
		if len(in.SeeOnly) > 0 {
			so, err := json.Marshal(in.SeeOnly)
			if err != nil {
				return nil, err
			}
			seeOnly = sql.NullString{String: string(so), Valid: true}
		}
		return []any{in.ID, in.ClientID, in.UserID, in.LocationID, string(sw), in.Member, in.Legacy, store.Millis(in.UpdatedAt), refresh, seeOnly}, nil
	}); err != nil {
		return err
	}
	if err := execEach(ctx, tx, `INSERT INTO replica_tokens (hash, installation_id, expires_at, revoked) VALUES (?, ?, ?, ?)
			ON CONFLICT (hash) DO UPDATE SET installation_id = excluded.installation_id, expires_at = excluded.expires_at, revoked = excluded.revoked`,
		b.Tokens, func(t bridge.ReplicaToken) ([]any, error) {
			return []any{t.Hash, t.InstallationID, store.Millis(t.ExpiresAt), t.Revoked}, nil
		}); err != nil {
		return err
	}
	// A record the platform sends is no longer gone (a location handed
	// back, a snapshot after a restore).
	if err := execEach(ctx, tx, `DELETE FROM replica_gone_installations WHERE id = ?`, b.Installations, func(in bridge.ReplicaInstallation) ([]any, error) {
		return []any{in.ID}, nil
	}); err != nil {
		return err
	}
	if err := execEach(ctx, tx, `DELETE FROM replica_gone_tokens WHERE hash = ?`, b.Tokens, func(t bridge.ReplicaToken) ([]any, error) {
		return []any{t.Hash}, nil
	}); err != nil {
		return err
	}
	if err := execEach(ctx, tx, `INSERT INTO replica_gone_installations (id, kept_until) VALUES (?, ?)
			ON CONFLICT (id) DO UPDATE SET kept_until = max(kept_until, excluded.kept_until)`, b.DeletedInstallations, func(id string) ([]any, error) {
		return []any{id, gone}, nil
	}); err != nil {
		return err
	}
	for _, q := range []string{`DELETE FROM replica_installations WHERE id = ?`, `DELETE FROM replica_tokens WHERE installation_id = ?`} {
		if err := execEach(ctx, tx, q, b.DeletedInstallations, func(id string) ([]any, error) { return []any{id}, nil }); err != nil {
			return err
		}
	}
	// A token the replica held is kept until a day past its expiry, as
	// the replica keeps expired tokens (PruneReplica); one it never held
	// for as long as any token could live. One already past that (an
	// expired token the platform pruned) needs none.
	if err := execEach(ctx, tx, `INSERT INTO replica_gone_tokens (hash, kept_until)
			SELECT ?, coalesce((SELECT expires_at FROM replica_tokens WHERE hash = ?) + ?, ?) AS k WHERE k > ?
			ON CONFLICT (hash) DO UPDATE SET kept_until = max(kept_until, excluded.kept_until)`, b.DeletedTokens, func(h []byte) ([]any, error) {
		return []any{h, h, expiredKept.Milliseconds(), gone, store.Millis(now)}, nil
	}); err != nil {
		return err
	}
	if err := execEach(ctx, tx, `DELETE FROM replica_tokens WHERE hash = ?`, b.DeletedTokens, func(h []byte) ([]any, error) { return []any{h}, nil }); err != nil {
		return err
	}
	if b.Snapshot || len(b.Locations) > 0 || len(b.DeletedInstallations) > 0 || len(b.DeletedTokens) > 0 {
		if err := boundTombstones(ctx, tx); err != nil {
			return err
		}
	}
	applied := 0
	if !b.Empty() {
		applied = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO replica_state (id, cursor, cursor_tag, synced_at, applied) VALUES (1, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor, cursor_tag = excluded.cursor_tag,
			synced_at = excluded.synced_at, applied = replica_state.applied + excluded.applied`,
		b.Cursor, b.CursorTag, store.Millis(at), applied); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.replicaGen.Add(1)
	return nil
}

// execEach runs query in tx once for each record, with the arguments args
// makes of it, preparing it once when there is more than one record.
func execEach[T any](ctx context.Context, tx *sql.Tx, query string, records []T, args func(T) ([]any, error)) error {
	if len(records) == 0 {
		return nil
	}
	exec := func(a ...any) error { _, err := tx.ExecContext(ctx, query, a...); return err }
	if len(records) > 1 {
		st, err := tx.PrepareContext(ctx, query)
		if err != nil {
			return err
		}
		defer st.Close()
		exec = func(a ...any) error { _, err := st.ExecContext(ctx, a...); return err }
	}
	for _, r := range records {
		a, err := args(r)
		if err != nil {
			return err
		}
		if err := exec(a...); err != nil {
			return err
		}
	}
	return nil
}

// dropReplicaLocation deletes the replica's installations matching cond
// (over replica_installations) and their tokens, and keeps a tombstone of
// each installation until keptUntil: a location handed to another hub, or
// whose whole state the platform sends again, holds none of them any more
// (those it sends again lose their tombstone).
func dropReplicaLocation(ctx context.Context, tx *sql.Tx, keptUntil int64, cond string, args ...any) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO replica_gone_installations (id, kept_until) SELECT id, ? FROM replica_installations WHERE `+cond+`
		ON CONFLICT (id) DO UPDATE SET kept_until = max(kept_until, excluded.kept_until)`, append([]any{keptUntil}, args...)...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM replica_tokens WHERE installation_id IN
		(SELECT id FROM replica_installations WHERE `+cond+`)`, args...); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM replica_installations WHERE `+cond, args...)
	return err
}

// RetainReplicaLocations drops from the replica every installation (and
// its tokens) outside locs, the locations the hub holds now: a hub that
// gave a location up must not go on serving it, and would miss its
// uninstalls (the platform sends a hub the changes of the locations it
// holds). It returns how many installations it dropped.
func (s *Store) RetainReplicaLocations(ctx context.Context, locs []int64) (int, error) {
	ids, err := json.Marshal(locs)
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int
	cond := `location_id NOT IN (SELECT value FROM json_each(?))`
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM replica_installations WHERE `+cond, string(ids)).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	if err := dropReplicaLocation(ctx, tx, store.Millis(s.now().Add(bridge.RefreshLifetime)), cond, string(ids)); err != nil {
		return 0, err
	}
	if err := boundTombstones(ctx, tx); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	s.replicaGen.Add(1)
	return n, nil
}

// ClearReplica empties the replica and forgets its cursor: the hub was
// removed from its platform.
func (s *Store) ClearReplica(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM replica_tokens`, `DELETE FROM replica_installations`, `DELETE FROM replica_state`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.replicaGen.Add(1)
	return nil
}

// PruneReplica drops replica tokens that expired more than a day before
// now (token expiry is local, the platform sends no change for it), and
// tombstones past their time.
func (s *Store) PruneReplica(ctx context.Context, now time.Time) error {
	for _, q := range []string{`DELETE FROM replica_tokens WHERE expires_at < ?`,
		`DELETE FROM replica_gone_installations WHERE kept_until < ?`, `DELETE FROM replica_gone_tokens WHERE kept_until < ?`} {
		at := store.Millis(now)
		if strings.Contains(q, "expires_at") {
			at = store.Millis(now.Add(-expiredKept))
		}
		if _, err := s.db.ExecContext(ctx, q, at); err != nil {
			return err
		}
	}
	return nil
}

// expiredKept is how long the replica keeps a token past its expiry.
const expiredKept = 24 * time.Hour

// MaxTombstones bounds each kind of tombstone a hub keeps (installations,
// tokens): past it, those due to go first are dropped first. Beyond that
// many deletions within a token's lifetime, the oldest are answered as a
// token the hub has not seen (a sync, or 503 while the link is down).
const MaxTombstones = 50_000

// tombstoneBound is MaxTombstones, smaller in tests.
var tombstoneBound = MaxTombstones

// boundTombstones drops the tombstones past MaxTombstones of each kind,
// those due to go first first.
func boundTombstones(ctx context.Context, tx *sql.Tx) error {
	for _, t := range []string{"replica_gone_installations", "replica_gone_tokens"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE rowid IN (SELECT rowid FROM `+t+` ORDER BY kept_until
			LIMIT max(0, (SELECT count(*) FROM `+t+`) - ?))`, tombstoneBound); err != nil {
			return err
		}
	}
	return nil
}

// Tombstones returns how many tombstones the replica keeps, installations
// and tokens together.
func (s *Store) Tombstones(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM replica_gone_installations) + (SELECT count(*) FROM replica_gone_tokens)`).Scan(&n)
	return n, err
}

// Replica is the hub's replica read as an access.GrantSource: the token
// check at a hub answers from it.
type Replica struct{ s *Store }

// Replica returns the replica view of the store.
func (s *Store) Replica() *Replica { return &Replica{s: s} }

// TokenGrant reads a token hash with its installation and whether the
// installing user still belongs to its location, in one query;
// bridge.ErrTokenUnknown when the replica has no such token or its
// installation. Legacy is the app's legacy flag as replicated with the
// installation.
func (r *Replica) TokenGrant(ctx context.Context, hash []byte) (*bridge.TokenGrant, error) {
	var g bridge.TokenGrant
	var expires, updated int64
	var switches string
	var seeOnly sql.NullString
	in := &g.Installation
	err := r.s.db.QueryRowContext(ctx, `SELECT t.installation_id, t.expires_at, t.revoked,
			i.id, i.client_id, i.user_id, i.location_id, i.switch_ids, i.updated_at, i.member, i.legacy, i.see_only
		FROM replica_tokens t JOIN replica_installations i ON i.id = t.installation_id
		WHERE t.hash = ?`, hash).
		Scan(&g.InstallationID, &expires, &g.Revoked, &in.ID, &in.ClientID, &in.UserID, &in.LocationID, &switches, &updated, &g.Member, &g.Legacy, &seeOnly)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.ErrTokenUnknown
	}
	if err != nil {
		return nil, r.s.db.Note(err)
	}
	g.ExpiresAt = store.FromMillis(expires)
	in.UpdatedAt = store.FromMillis(updated)
	in.CreatedAt = in.UpdatedAt
	if err := unmarshalSeeOnly(seeOnly, &in.SeeOnly); err != nil {
		return nil, err
	}
	return &g, json.Unmarshal([]byte(switches), &in.SwitchIDs)
}

// AccessGeneration moves with every batch of the platform's changes the
// replica applies: only this process writes the replica.
func (r *Replica) AccessGeneration(context.Context) (int64, error) {
	return r.s.replicaGen.Load(), nil
}

// Installation returns a replicated installation; ENOTFOUND when the hub
// holds none with that id.
func (r *Replica) Installation(ctx context.Context, id string) (*bridge.Installation, error) {
	in := &bridge.Installation{}
	var updated int64
	var switches string
	var seeOnly sql.NullString
	err := r.s.db.QueryRowContext(ctx, `SELECT id, client_id, user_id, location_id, switch_ids, updated_at, see_only FROM replica_installations WHERE id = ?`, id).
		Scan(&in.ID, &in.ClientID, &in.UserID, &in.LocationID, &switches, &updated, &seeOnly)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no installation %q on this hub", id)
	}
	if err != nil {
		return nil, r.s.db.Note(err)
	}
	in.UpdatedAt = store.FromMillis(updated)
	in.CreatedAt = in.UpdatedAt
	if err := unmarshalSeeOnly(seeOnly, &in.SeeOnly); err != nil {
		return nil, err
	}
	return in, json.Unmarshal([]byte(switches), &in.SwitchIDs)
}

// unmarshalSeeOnly reads a replicated installation's see-only ids; NULL is
// none (migration 0024).
func unmarshalSeeOnly(s sql.NullString, into *[]string) error {
	if !s.Valid {
		return nil
	}
	return json.Unmarshal([]byte(s.String), into)
}

// GrantLive reports whether anyone holds a live token of a replicated
// installation's grant at now: an access token neither revoked nor
// expired, or a refresh token the platform said is live until after now
// (or, from an older platform that does not say, the grant is taken to be
// held). False when the hub holds no such installation.
func (r *Replica) GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error) {
	var live bool
	err := r.s.db.QueryRowContext(ctx, `SELECT i.refresh_until IS NULL OR i.refresh_until > ?1
			OR EXISTS (SELECT 1 FROM replica_tokens t WHERE t.installation_id = i.id AND t.revoked = 0 AND t.expires_at > ?1)
		FROM replica_installations i WHERE i.id = ?2`, store.Millis(now), installationID).Scan(&live)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return live, r.s.db.Note(err)
}

// InstallationGone reports whether the platform deleted the installation
// from the replica (uninstalled, or its location handed over) within the
// time its tokens could live, and has not sent it again since.
func (r *Replica) InstallationGone(ctx context.Context, id string) (bool, error) {
	return r.gone(ctx, `SELECT EXISTS (SELECT 1 FROM replica_gone_installations WHERE id = ? AND kept_until >= ?)`, id)
}

// TokenGone reports whether the platform deleted the token hash from the
// replica within the time the token could live, and has not sent it again
// since.
func (r *Replica) TokenGone(ctx context.Context, hash []byte) (bool, error) {
	return r.gone(ctx, `SELECT EXISTS (SELECT 1 FROM replica_gone_tokens WHERE hash = ? AND kept_until >= ?)`, hash)
}

func (r *Replica) gone(ctx context.Context, q string, key any) (bool, error) {
	var ok bool
	if err := r.s.db.QueryRowContext(ctx, q, key, store.Millis(r.s.now())).Scan(&ok); err != nil {
		return false, r.s.db.Note(err)
	}
	return ok, nil
}

// ReplicaCounts returns how many installations and tokens the replica holds.
func (s *Store) ReplicaCounts(ctx context.Context) (installations, tokens int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM replica_installations), (SELECT count(*) FROM replica_tokens)`).Scan(&installations, &tokens)
	return
}
