package accounts

// The platform's registry of hubs and the inventories they report.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// CreateHub registers a hub. ECONFLICT when the name is taken.
func (db *Store) CreateHub(ctx context.Context, h *bridge.RegisteredHub) error {
	now := db.now()
	_, err := db.db.ExecContext(ctx, `INSERT INTO hubs (id, name, base_url, secret_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
		h.ID, h.Name, h.BaseURL, h.SecretHash, store.Millis(now))
	if store.IsUnique(err) {
		return bridge.Errorf(bridge.ECONFLICT, "a hub named %q exists already", h.Name)
	}
	if err == nil {
		h.CreatedAt = store.FromMillis(store.Millis(now))
	}
	return err
}

// Hub returns a registered hub with its inventory; ENOTFOUND when there is
// none.
func (db *Store) Hub(ctx context.Context, id string) (*bridge.RegisteredHub, error) {
	hubs, err := db.hubs(ctx, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(hubs) == 0 {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no hub %q", id)
	}
	return hubs[0], nil
}

// Hubs lists the registered hubs by name, each with its inventory.
func (db *Store) Hubs(ctx context.Context) ([]*bridge.RegisteredHub, error) {
	return db.hubs(ctx, ``)
}

func (db *Store) hubs(ctx context.Context, where string, args ...any) ([]*bridge.RegisteredHub, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, name, base_url, secret_hash, created_at, last_seen_at, version, cursor, conflict, conflict_at FROM hubs `+where+` ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	var out []*bridge.RegisteredHub
	byID := map[string]*bridge.RegisteredHub{}
	for rows.Next() {
		h := &bridge.RegisteredHub{}
		var created, seen, conflictAt int64
		if err := rows.Scan(&h.ID, &h.Name, &h.BaseURL, &h.SecretHash, &created, &seen, &h.Version, &h.Cursor, &h.Conflict, &conflictAt); err != nil {
			rows.Close()
			return nil, err
		}
		h.CreatedAt = store.FromMillis(created)
		if seen > 0 {
			h.LastSeen = store.FromMillis(seen)
		}
		if conflictAt > 0 {
			h.ConflictAt = store.FromMillis(conflictAt)
		}
		out = append(out, h)
		byID[h.ID] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// One hub's request reads that hub's locations only: reading every
	// hub's made each of N hubs' polls cost N.
	hubCond, hubArgs := "", []any(nil)
	if where != "" {
		hubCond, hubArgs = "WHERE l.hub_id IN (SELECT id FROM hubs "+where+")", args
	}
	locs, err := remoteLocations(ctx, tx, hubCond, hubArgs...)
	if err != nil {
		return nil, err
	}
	for _, l := range locs {
		if h := byID[l.HubID]; h != nil {
			h.Locations = append(h.Locations, l)
		}
	}
	return out, nil
}

// remoteLocations reads the locations of the hubs cond (over
// hub_locations l) picks, every hub's when it is empty, with their
// switches, by location id.
func remoteLocations(ctx context.Context, tx *sql.Tx, cond string, args ...any) ([]bridge.RemoteLocation, error) {
	rows, err := tx.QueryContext(ctx, `SELECT l.location_id, l.hub_id, l.name, s.switch_id, s.name, s.commands
		FROM hub_locations l LEFT JOIN hub_switches s ON s.location_id = l.location_id `+cond+` ORDER BY l.location_id, s.pos`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bridge.RemoteLocation
	for rows.Next() {
		var l bridge.RemoteLocation
		var swID, swName, cmds sql.NullString
		if err := rows.Scan(&l.ID, &l.HubID, &l.Name, &swID, &swName, &cmds); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].ID != l.ID {
			out = append(out, l)
		}
		if swID.Valid {
			last := &out[len(out)-1]
			sw := bridge.RemoteSwitch{ID: swID.String, Name: swName.String}
			for _, c := range strings.Split(cmds.String, ",") {
				if c != "" {
					sw.Commands = append(sw.Commands, bridge.Command(c))
				}
			}
			last.Switches = append(last.Switches, sw)
		}
	}
	return out, rows.Err()
}

// HubLocation returns the hub location with id and the hub holding it;
// ENOTFOUND when no hub holds it.
func (db *Store) HubLocation(ctx context.Context, id int64) (*bridge.RemoteLocation, error) {
	var hubID string
	err := db.db.QueryRowContext(ctx, `SELECT hub_id FROM hub_locations WHERE location_id = ?`, id).Scan(&hubID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no hub holds location %d", id)
	}
	if err != nil {
		return nil, err
	}
	h, err := db.Hub(ctx, hubID)
	if err != nil {
		return nil, err
	}
	for i := range h.Locations {
		if h.Locations[i].ID == id {
			return &h.Locations[i], nil
		}
	}
	return nil, bridge.Errorf(bridge.ENOTFOUND, "no hub holds location %d", id)
}

// SetHubSecret replaces a hub's secret hash: its old secret stops working
// at its next call. ENOTFOUND for no such hub.
func (db *Store) SetHubSecret(ctx context.Context, id string, hash []byte) error {
	res, err := db.db.ExecContext(ctx, `UPDATE hubs SET secret_hash = ? WHERE id = ?`, hash, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no hub %q", id)
	}
	return nil
}

// RemoveHub unregisters a hub and uninstalls every installation in its
// locations (their tokens go with them), in one transaction. It returns how
// many installations it removed; ENOTFOUND for no such hub.
func (db *Store) RemoveHub(ctx context.Context, id string) (int, error) {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM installations WHERE location_id IN (SELECT location_id FROM hub_locations WHERE hub_id = ?)`, id)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	// The tombstone lets the removed hub learn it was removed (and empty
	// its replica) rather than keep serving it as it would through a
	// platform outage.
	if _, err := tx.ExecContext(ctx, `INSERT INTO removed_hubs (id, name, secret_hash, removed_at)
		SELECT id, name, secret_hash, ? FROM hubs WHERE id = ?
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, secret_hash = excluded.secret_hash, removed_at = excluded.removed_at`, store.Millis(db.now()), id); err != nil {
		return 0, err
	}
	res, err = tx.ExecContext(ctx, `DELETE FROM hubs WHERE id = ?`, id)
	if err != nil {
		return 0, err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return 0, bridge.Errorf(bridge.ENOTFOUND, "no hub %q", id)
	}
	return int(n), tx.Commit()
}

// RemovedHubSecret returns the secret hash a removed hub had; ENOTFOUND
// when no hub with that id was removed.
func (db *Store) RemovedHubSecret(ctx context.Context, id string) ([]byte, error) {
	var hash []byte
	err := db.db.QueryRowContext(ctx, `SELECT secret_hash FROM removed_hubs WHERE id = ?`, id).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no removed hub %q", id)
	}
	return hash, err
}

// SetInventory records what a hub reported: its software version and its
// locations with their switches, replacing what it reported before. A
// location another hub holds, or one reserved (reserved reports the
// platform's own), is refused with ECONFLICT naming the location but not
// the hub holding it (a hub learns nothing of other hubs; the error's
// Holder says which, for the platform's log), and nothing is changed. A location the hub did not hold before enters the change log,
// so the hub receives that location's installations.
func (db *Store) SetInventory(ctx context.Context, hubID, version string, locs []bridge.RemoteLocation, reserved func(int64) bool) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	keep := make(map[int64]bool, len(locs))
	for _, l := range locs {
		if reserved != nil && reserved(l.ID) {
			return bridge.Errorf(bridge.ECONFLICT, "location %d is one of the platform's own locations", l.ID)
		}
		var other, name string
		err := tx.QueryRowContext(ctx, `SELECT h.id, h.name FROM hub_locations l JOIN hubs h ON h.id = l.hub_id WHERE l.location_id = ? AND l.hub_id <> ?`,
			l.ID, hubID).Scan(&other, &name)
		switch {
		case err == nil:
			return &bridge.LocationHeldError{Err: bridge.Errorf(bridge.ECONFLICT, "location %d is held by another hub", l.ID),
				Holder: fmt.Sprintf("hub %s (%s)", name, other)}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		keep[l.ID] = true
	}
	held, err := int64s(ctx, tx, `SELECT location_id FROM hub_locations WHERE hub_id = ?`, hubID)
	if err != nil {
		return err
	}
	for _, id := range held {
		if !keep[id] {
			if _, err := tx.ExecContext(ctx, `DELETE FROM hub_locations WHERE location_id = ?`, id); err != nil {
				return err
			}
		}
	}
	for _, l := range locs {
		// An upsert: the insert trigger fires only for a location new to
		// the hub.
		if _, err := tx.ExecContext(ctx, `INSERT INTO hub_locations (location_id, hub_id, name) VALUES (?, ?, ?)
			ON CONFLICT (location_id) DO UPDATE SET name = excluded.name`, l.ID, hubID, l.Name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM hub_switches WHERE location_id = ?`, l.ID); err != nil {
			return err
		}
		for i, s := range l.Switches {
			cmds := make([]string, len(s.Commands))
			for j, c := range s.Commands {
				cmds[j] = string(c)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO hub_switches (location_id, pos, switch_id, name, commands) VALUES (?, ?, ?, ?, ?)`,
				l.ID, i, s.ID, s.Name, strings.Join(cmds, ",")); err != nil {
				return err
			}
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE hubs SET version = ?, last_seen_at = ? WHERE id = ?`, version, store.Millis(db.now()), hubID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no hub %q", hubID)
	}
	return tx.Commit()
}

// TouchHub records that a hub called and the cursor it acknowledged.
func (db *Store) TouchHub(ctx context.Context, id string, cursor int64, at time.Time) error {
	_, err := db.db.ExecContext(ctx, `UPDATE hubs SET last_seen_at = ?, cursor = ? WHERE id = ?`, store.Millis(at), cursor, id)
	return err
}

// SetHubConflict records why the platform refused a second process that
// called with hub id's credentials, and when.
func (db *Store) SetHubConflict(ctx context.Context, id, why string, at time.Time) error {
	_, err := db.db.ExecContext(ctx, `UPDATE hubs SET conflict = ?, conflict_at = ? WHERE id = ?`, why, store.Millis(at), id)
	return err
}

// int64s runs a query of one integer column.
func int64s(ctx context.Context, q store.Querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
