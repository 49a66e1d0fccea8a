package accounts

// The change log a hub's replica follows: what the triggers of
// migration 0008 append to, read as current records and tombstones for the
// locations of one hub.

import (
	"context"
	"database/sql"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// ChangeSeq returns the newest change sequence (0 for none yet).
func (db *Store) ChangeSeq(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	err := db.db.QueryRowContext(ctx, `SELECT max(seq) FROM changes`).Scan(&n)
	return n.Int64, err
}

// ChangedLocations returns the locations of the changes after seq after up
// to and including seq upto, each once.
func (db *Store) ChangedLocations(ctx context.Context, after, upto int64) ([]int64, error) {
	return int64s(ctx, db.db, `SELECT DISTINCT location_id FROM changes WHERE seq > ? AND seq <= ?`, after, upto)
}

// HubLocationIDs returns the ids of the locations a hub holds.
func (db *Store) HubLocationIDs(ctx context.Context, hubID string) ([]int64, error) {
	return int64s(ctx, db.db, `SELECT location_id FROM hub_locations WHERE hub_id = ? ORDER BY location_id`, hubID)
}

// Changes returns what changed for the locations of hub hubID after
// cursor: the current record of every installation and token a change
// touched, a tombstone for those gone (or no longer in the hub's
// locations), and the new cursor. It reads one snapshot of the database, so
// the records are those as of the cursor returned. ErrCursorGone when the
// log cannot resume from cursor (bridge.ErrCursorGone).
func (db *Store) Changes(ctx context.Context, hubID string, cursor int64) (*bridge.ChangeBatch, error) {
	b, _, err := db.changes(ctx, hubID, cursor)
	return b, err
}

// changes is Changes, and also returns how many queries it ran to read
// records (beyond its three reads of the change log).
func (db *Store) changes(ctx context.Context, hubID string, cursor int64) (*bridge.ChangeBatch, int, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	newest, floor, tag, err := store.NewestChange(ctx, tx)
	if err != nil {
		return nil, 0, err
	}
	if cursor < floor || cursor > newest {
		return nil, 0, bridge.ErrCursorGone
	}
	b := &bridge.ChangeBatch{Cursor: newest, CursorTag: tag}
	if cursor == newest {
		return b, 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT c.kind, c.location_id, c.key FROM changes c
		JOIN hub_locations l ON l.location_id = c.location_id AND l.hub_id = ?
		WHERE c.seq > ? AND c.seq <= ? ORDER BY c.seq`, hubID, cursor, newest)
	if err != nil {
		return nil, 0, err
	}
	type member struct {
		user string
		loc  int64
	}
	installs, tokens := map[string]bool{}, map[string]bool{}
	var installOrder, tokenOrder []string
	var members []member
	var locs []int64
	seenMember, seenLoc := map[member]bool{}, map[int64]bool{}
	for rows.Next() {
		var kind, key string
		var loc int64
		if err := rows.Scan(&kind, &loc, &key); err != nil {
			rows.Close()
			return nil, 0, err
		}
		switch kind {
		case "installation":
			if !installs[key] {
				installs[key] = true
				installOrder = append(installOrder, key)
			}
		case "token":
			if !tokens[key] {
				tokens[key] = true
				tokenOrder = append(tokenOrder, key)
			}
		case "member":
			if m := (member{key, loc}); !seenMember[m] {
				seenMember[m] = true
				members = append(members, m)
			}
		case "location":
			if !seenLoc[loc] {
				seenLoc[loc] = true
				locs = append(locs, loc)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	r := feedReader{tx: tx, hubID: hubID, now: db.now(), seen: map[string]bool{}, seenTok: map[string]bool{}}
	for _, l := range locs {
		if err := r.location(ctx, b, l); err != nil {
			return nil, 0, err
		}
	}
	b.Locations = locs
	for _, m := range members {
		uid, _ := strconv.ParseInt(m.user, 10, 64)
		if err := r.installationsWhere(ctx, b, `i.user_id = ? AND i.location_id = ?`, uid, m.loc); err != nil {
			return nil, 0, err
		}
	}
	// The records the log names, read a chunk of keys a query: under a
	// refresh storm a batch names hundreds of tokens. A key the query
	// does not return is gone, or no longer in the hub's locations.
	var ids []string
	for _, id := range installOrder {
		if !r.seen[id] {
			ids = append(ids, id)
		}
	}
	if err := r.installationsByID(ctx, b, ids); err != nil {
		return nil, 0, err
	}
	var hashes [][]byte
	for _, key := range tokenOrder {
		if hash, err := hex.DecodeString(key); err == nil && !r.seenTok[string(hash)] {
			hashes = append(hashes, hash)
		}
	}
	if err := r.tokensByHash(ctx, b, hashes); err != nil {
		return nil, 0, err
	}
	return b, r.reads, nil
}

// Snapshot returns every installation in the locations of hub hubID, with
// its tokens not yet expired, and the cursor they are current at.
func (db *Store) Snapshot(ctx context.Context, hubID string) (*bridge.ChangeBatch, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	newest, _, tag, err := store.NewestChange(ctx, tx)
	if err != nil {
		return nil, err
	}
	b := &bridge.ChangeBatch{Cursor: newest, CursorTag: tag, Snapshot: true}
	r := feedReader{tx: tx, hubID: hubID, now: db.now(), seen: map[string]bool{}, seenTok: map[string]bool{}}
	if err := r.installationsWhere(ctx, b, `true`); err != nil {
		return nil, err
	}
	if err := r.tokensWhere(ctx, b, `t.expires_at > ?`, store.Millis(r.now)); err != nil {
		return nil, err
	}
	return b, nil
}

// feedReader reads current records for one hub inside one transaction,
// each record once.
type feedReader struct {
	tx      *sql.Tx
	hubID   string
	now     time.Time
	seen    map[string]bool // installation ids added
	seenTok map[string]bool // token hashes added
	reads   int             // queries run
}

// location adds every installation of a location and its live tokens.
func (r *feedReader) location(ctx context.Context, b *bridge.ChangeBatch, loc int64) error {
	if err := r.installationsWhere(ctx, b, `i.location_id = ?`, loc); err != nil {
		return err
	}
	return r.tokensWhere(ctx, b, `i.location_id = ? AND t.expires_at > ?`, loc, store.Millis(r.now))
}

// installationsWhere adds the installations in the hub's locations that
// match cond (over installations i).
func (r *feedReader) installationsWhere(ctx context.Context, b *bridge.ChangeBatch, cond string, args ...any) error {
	return r.readInstallations(ctx, `SELECT `+installationColumns+` FROM installations i
		JOIN hub_locations l ON l.location_id = i.location_id AND l.hub_id = ?
		WHERE `+cond+` ORDER BY i.created_at, i.id`, append([]any{r.hubID}, args...), func(in bridge.ReplicaInstallation) {
		if !r.seen[in.ID] {
			r.seen[in.ID] = true
			b.Installations = append(b.Installations, in)
		}
	})
}

// installationsByID adds the installation of each of ids, in their order,
// and a tombstone for each not in the hub's locations (gone, or moved out
// of them).
//
// The query looks the chunk's ids up first, then their locations, for the
// reason tokensByHash gives.
func (r *feedReader) installationsByID(ctx context.Context, b *bridge.ChangeBatch, ids []string) error {
	return inChunks(ids, func(chunk []string, list string, args []any) error {
		found := make(map[string]bridge.ReplicaInstallation, len(chunk))
		err := r.readInstallations(ctx, `WITH i AS MATERIALIZED (SELECT id, client_id, user_id, location_id, updated_at
				FROM installations WHERE id IN (`+list+`))
			SELECT `+installationColumns+` FROM i CROSS JOIN hub_locations l
			WHERE l.location_id = i.location_id AND l.hub_id = ?`,
			append(args, r.hubID), func(in bridge.ReplicaInstallation) { found[in.ID] = in })
		if err != nil {
			return err
		}
		for _, id := range chunk {
			in, ok := found[id]
			switch {
			case !ok:
				b.DeletedInstallations = append(b.DeletedInstallations, id)
			case !r.seen[id]:
				r.seen[id] = true
				b.Installations = append(b.Installations, in)
			}
		}
		return nil
	})
}

// installationColumns are the columns readInstallations scans, over
// installations i.
const installationColumns = `i.id, i.client_id, i.user_id, i.location_id, i.updated_at,
	(SELECT a.legacy FROM apps a WHERE a.client_id = i.client_id),
	EXISTS (SELECT 1 FROM user_locations m WHERE m.user_id = i.user_id AND m.location_id = i.location_id),
	(SELECT string_agg(s.switch_id, '
' ORDER BY s.pos) FROM installation_switches s WHERE s.installation_id = i.id),
	(SELECT string_agg(s.switch_id, '
' ORDER BY s.pos) FROM installation_switches s WHERE s.installation_id = i.id AND s.see_only <> 0),
	(SELECT max(r.expires_at) FROM refresh_tokens r WHERE r.installation_id = i.id AND r.used_at IS NULL AND r.revoked_at IS NULL)`

// readInstallations runs q, which selects installationColumns, and calls
// add with each installation it returns.
func (r *feedReader) readInstallations(ctx context.Context, q string, args []any, add func(bridge.ReplicaInstallation)) error {
	r.reads++
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var in bridge.ReplicaInstallation
		var updated int64
		var legacy sql.NullBool
		var switches, seeOnly sql.NullString
		var refresh sql.NullInt64
		if err := rows.Scan(&in.ID, &in.ClientID, &in.UserID, &in.LocationID, &updated, &legacy, &in.Member, &switches, &seeOnly, &refresh); err != nil {
			return err
		}
		// The zero time when no refresh token is live; an expired one
		// is compared with the hub's clock there.
		until := time.Time{}
		if refresh.Valid {
			until = store.FromMillis(refresh.Int64)
		}
		in.RefreshUntil = &until
		in.SwitchIDs = []string{}
		if switches.String != "" {
			// Switch ids hold no newline (config.SwitchIDPattern).
			in.SwitchIDs = strings.Split(switches.String, "\n")
		}
		if seeOnly.String != "" {
			in.SeeOnly = strings.Split(seeOnly.String, "\n")
		}
		in.UpdatedAt = store.FromMillis(updated)
		in.Legacy = legacy.Bool
		add(in)
	}
	return rows.Err()
}

// tokensWhere adds the tokens of installations in the hub's locations that
// match cond (over tokens t and installations i).
func (r *feedReader) tokensWhere(ctx context.Context, b *bridge.ChangeBatch, cond string, args ...any) error {
	return r.readTokens(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN installations i ON i.id = t.installation_id
		JOIN hub_locations l ON l.location_id = i.location_id AND l.hub_id = ?
		WHERE `+cond+` ORDER BY t.created_at, t.hash`, append([]any{r.hubID}, args...), func(t bridge.ReplicaToken) {
		if !r.seenTok[string(t.Hash)] {
			r.seenTok[string(t.Hash)] = true
			b.Tokens = append(b.Tokens, t)
		}
	})
}

// tokensByHash adds the token of each of hashes, in their order, expired
// or revoked as well, and a tombstone for each not of an installation in
// the hub's locations (gone, or moved out of them).
//
// The query looks the chunk's hashes up first, then their installations
// and locations: as a plain join both engines may plan it the other way
// round when they take the hub's installations to be few, and read every
// token of them (thousands for a grant refreshed all day) to keep the
// chunk's. PostgreSQL evaluates a MATERIALIZED common table expression on
// its own; SQLite keeps the order of the tables of a CROSS JOIN
// (PostgreSQL takes it as a plain join).
func (r *feedReader) tokensByHash(ctx context.Context, b *bridge.ChangeBatch, hashes [][]byte) error {
	return inChunks(hashes, func(chunk [][]byte, list string, args []any) error {
		found := make(map[string]bridge.ReplicaToken, len(chunk))
		err := r.readTokens(ctx, `WITH t AS MATERIALIZED (SELECT hash, installation_id, expires_at, revoked_at
				FROM tokens WHERE hash IN (`+list+`))
			SELECT `+tokenColumns+` FROM t CROSS JOIN installations i CROSS JOIN hub_locations l
			WHERE i.id = t.installation_id AND l.location_id = i.location_id AND l.hub_id = ?`,
			append(args, r.hubID), func(t bridge.ReplicaToken) { found[string(t.Hash)] = t })
		if err != nil {
			return err
		}
		for _, h := range chunk {
			t, ok := found[string(h)]
			switch {
			case !ok:
				b.DeletedTokens = append(b.DeletedTokens, h)
			case !r.seenTok[string(h)]:
				r.seenTok[string(h)] = true
				b.Tokens = append(b.Tokens, t)
			}
		}
		return nil
	})
}

// tokenColumns are the columns readTokens scans, over tokens t.
const tokenColumns = `t.hash, t.installation_id, t.expires_at, t.revoked_at IS NOT NULL`

// readTokens runs q, which selects tokenColumns, and calls add with each
// token it returns.
func (r *feedReader) readTokens(ctx context.Context, q string, args []any, add func(bridge.ReplicaToken)) error {
	r.reads++
	rows, err := r.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var t bridge.ReplicaToken
		var expires int64
		if err := rows.Scan(&t.Hash, &t.InstallationID, &expires, &t.Revoked); err != nil {
			return err
		}
		t.ExpiresAt = store.FromMillis(expires)
		add(t)
	}
	return rows.Err()
}

// feedChunkSizes are the lengths of the IN lists that read the records a
// batch names: a few fixed lengths, so that these queries are a fixed set
// of texts (on PostgreSQL the driver prepares each text once a connection
// and keeps it), the largest for the hundreds of tokens of a refresh
// storm, the smallest for the one key of a quiet poll.
var feedChunkSizes = [...]int{1, 8, 128}

// inLists holds "?, ?, ?" for each of feedChunkSizes.
var inLists = func() map[int]string {
	m := map[int]string{}
	for _, n := range feedChunkSizes {
		m[n] = strings.Repeat("?, ", n-1) + "?"
	}
	return m
}()

// inChunks calls read for each chunk of keys, in their order, at most the
// largest of feedChunkSizes long, with the IN list of the smallest size
// that holds the chunk and the list's arguments: the chunk's keys, padded
// by repeating its last.
func inChunks[K any](keys []K, read func(chunk []K, list string, args []any) error) error {
	for len(keys) > 0 {
		size := feedChunkSizes[len(feedChunkSizes)-1]
		for _, n := range feedChunkSizes {
			if n >= len(keys) {
				size = n
				break
			}
		}
		chunk := keys[:min(size, len(keys))]
		keys = keys[len(chunk):]
		args := make([]any, size)
		for i := range args {
			args[i] = chunk[min(i, len(chunk)-1)]
		}
		if err := read(chunk, inLists[size], args); err != nil {
			return err
		}
	}
	return nil
}

// CompactChanges drops change log entries older than before, keeping at
// most keep of the newest, and raises the floor to the newest entry
// dropped: a hub whose cursor is below it fetches a snapshot. It returns
// how many it dropped.
func (db *Store) CompactChanges(ctx context.Context, before time.Time, keep int) (int64, error) {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var top sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM changes WHERE at < ? OR seq <= (SELECT max(seq) FROM changes) - ?`,
		store.Millis(before), keep).Scan(&top); err != nil {
		return 0, err
	}
	if !top.Valid {
		return 0, nil
	}
	last, err := store.ChangeAt(ctx, tx, top.Int64)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM changes WHERE seq <= ?`, top.Int64)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `UPDATE change_floor SET seq = ?, tag = ? WHERE id = 1 AND seq < ?`,
		top.Int64, last.Tag(), top.Int64); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
