package accounts

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// Install records that a user installed an app into a location with the
// given switches. Installing the same app into the same location of the
// same user again updates that installation (same id, the new switch
// selection) rather than adding a second one. It fills in.ID and the times.
func (db *Store) Install(ctx context.Context, in *bridge.Installation) error {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id string
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT id, created_at FROM installations WHERE client_id = ? AND user_id = ? AND location_id = ?`,
		in.ClientID, in.UserID, in.LocationID).Scan(&id, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		id = newInstallationID()
		created = store.Millis(now)
		if _, err := tx.ExecContext(ctx, `INSERT INTO installations (id, client_id, user_id, location_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, in.ClientID, in.UserID, in.LocationID, created, store.Millis(now)); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE installations SET updated_at = ? WHERE id = ?`, store.Millis(now), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM installation_switches WHERE installation_id = ?`, id); err != nil {
			return err
		}
	}
	for _, s := range in.SeeOnly {
		if !slices.Contains(in.SwitchIDs, s) {
			return bridge.Errorf(bridge.EINVALID, "switch %q is see-only but not among the installation's switches", s)
		}
	}
	for i, s := range in.SwitchIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_switches (installation_id, pos, switch_id, see_only) VALUES (?, ?, ?, ?)`,
			id, i, s, bridge.IsSeeOnly(in.SeeOnly, s)); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	in.ID, in.CreatedAt, in.UpdatedAt = id, store.FromMillis(created), store.FromMillis(store.Millis(now))
	return nil
}

// SetSeeOnly grants one switch of an installation see-only (seeOnly true)
// or see and switch. The triggers move the access generation and log the
// installation for the hubs, so a cached grant and a linked hub's replica
// follow at once. ENOTFOUND when the installation does not hold the switch.
func (db *Store) SetSeeOnly(ctx context.Context, installationID, switchID string, seeOnly bool) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE installation_switches SET see_only = ? WHERE installation_id = ? AND switch_id = ?`,
		seeOnly, installationID, switchID)
	if err != nil {
		return db.db.Note(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "installation %q holds no switch %q", installationID, switchID)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE installations SET updated_at = ? WHERE id = ?`, store.Millis(db.now()), installationID); err != nil {
		return err
	}
	return tx.Commit()
}

// Installation returns an installation; ENOTFOUND when there is none.
func (db *Store) Installation(ctx context.Context, id string) (*bridge.Installation, error) {
	in := &bridge.Installation{}
	var created, updated int64
	var used sql.NullInt64
	err := db.preparedRow(ctx, selectInstallation, id).
		Scan(&in.ID, &in.ClientID, &in.UserID, &in.LocationID, &created, &updated, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no installation %q", id)
	}
	if err != nil {
		return nil, db.db.Note(err)
	}
	in.CreatedAt, in.UpdatedAt = store.FromMillis(created), store.FromMillis(updated)
	if used.Valid {
		in.LastUsedAt = store.FromMillis(used.Int64)
	}
	rows, err := db.prepared(ctx, selectInstallationSwitches, id)
	if err != nil {
		return nil, db.db.Note(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var seeOnly bool
		if err := rows.Scan(&s, &seeOnly); err != nil {
			return nil, db.db.Note(err)
		}
		in.SwitchIDs = append(in.SwitchIDs, s)
		if seeOnly {
			in.SeeOnly = append(in.SeeOnly, s)
		}
	}
	return in, db.db.Note(rows.Err())
}

const (
	selectInstallation         = `SELECT id, client_id, user_id, location_id, created_at, updated_at, last_used_at FROM installations WHERE id = ?`
	selectInstallationSwitches = `SELECT switch_id, see_only <> 0 FROM installation_switches WHERE installation_id = ? ORDER BY pos`
)

// Installations lists every installation, oldest first.
func (db *Store) Installations(ctx context.Context) ([]*bridge.Installation, error) {
	return db.FindInstallations(ctx, InstallationFilter{})
}

// InstallationFilter narrows FindInstallations; a zero field matches all.
type InstallationFilter = bridge.InstallationFilter

// InstallationsOf lists a user's installations, oldest first: the
// connected apps page.
func (db *Store) InstallationsOf(ctx context.Context, userID int64) ([]*bridge.Installation, error) {
	if userID == 0 {
		return nil, nil // no user has id 0; the zero filter would match all
	}
	return db.FindInstallations(ctx, InstallationFilter{UserID: userID})
}

// FindInstallations lists the installations f matches, oldest first.
func (db *Store) FindInstallations(ctx context.Context, f InstallationFilter) ([]*bridge.Installation, error) {
	// Oldest first; those of one millisecond in the order they were made
	// on SQLite (rowid), by id on PostgreSQL, which keeps no such order.
	order := "rowid"
	if db.db.Dialect() == store.Postgres {
		order = "id"
	}
	ids, err := db.strings(ctx, `SELECT id FROM installations
		WHERE (?1 = CAST(0 AS BIGINT) OR user_id = ?1) AND (?2 = '' OR client_id = ?2) ORDER BY created_at, `+order, f.UserID, f.ClientID)
	if err != nil {
		return nil, err
	}
	out := make([]*bridge.Installation, 0, len(ids))
	for _, id := range ids {
		in, err := db.Installation(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// Uninstall deletes an installation with its switches, codes and tokens
// (ENOTFOUND when there is none). The access generation moves in the same
// transaction, so every process stops honouring its tokens at once.
func (db *Store) Uninstall(ctx context.Context, id string) error {
	res, err := db.db.ExecContext(ctx, `DELETE FROM installations WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no installation %q", id)
	}
	return nil
}

// MarkUsed records when installations' tokens were last used, in one
// transaction; a time older than the one recorded is ignored. An
// installation deleted meanwhile is skipped.
func (db *Store) MarkUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for id, at := range used {
		if _, err := tx.ExecContext(ctx, `UPDATE installations SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)`, store.Millis(at), id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// MarkUsedAtHub records what hub hubID reports of when installations'
// tokens were last used there, like MarkUsed, for the installations in
// the hub's locations only: a hub cannot speak for another's. It returns
// how many it recorded.
func (db *Store) MarkUsedAtHub(ctx context.Context, hubID string, used map[string]time.Time) (int, error) {
	if len(used) == 0 {
		return 0, nil
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n := 0
	for id, at := range used {
		res, err := tx.ExecContext(ctx, `UPDATE installations SET last_used_at = CASE WHEN last_used_at > ?1 THEN last_used_at ELSE ?1 END
			WHERE id = ?2 AND location_id IN (SELECT location_id FROM hub_locations WHERE hub_id = ?3)`, store.Millis(at), id, hubID)
		if err != nil {
			return 0, err
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, tx.Commit()
}

// CountInstallations returns how many installations exist.
func (db *Store) CountInstallations(ctx context.Context) (int, error) {
	var n int
	err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM installations`).Scan(&n)
	return n, err
}

func newInstallationID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
