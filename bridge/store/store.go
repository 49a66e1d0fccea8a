// Package store keeps what users create (accounts, apps, installations,
// authorization codes, access tokens) and each switch's last value in an
// embedded SQLite database (pure Go, WAL mode), so all of it survives a
// restart or a kill -9. Secrets are stored only as hashes.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/switchbridge/switchbridge/bridge"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is the store.
type DB struct {
	db  *sql.DB
	now func() time.Time

	// The statements every API request or reported state runs, prepared
	// once: the pure-Go SQLite spends more time preparing a statement than
	// running one of these.
	tokenStmt, installationStmt, installationSwitchesStmt, saveValueStmt *sql.Stmt
}

// FileName is the database's name inside the data directory.
const FileName = "switchbridge.db"

// Open opens (creating if need be) the database in dataDir and brings its
// schema up to date. It fails with a clear message when the directory cannot
// be created or written.
func Open(ctx context.Context, dataDir string) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	probe, err := os.CreateTemp(dataDir, ".write-test-*")
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return OpenFile(ctx, filepath.Join(dataDir, FileName))
}

// OpenFile opens the database file at path.
func OpenFile(ctx context.Context, path string) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)") // WAL + NORMAL: durable across a process kill; a power cut may lose the last commit
	q.Set("_txlock", "immediate")           // writers queue on busy_timeout instead of failing half way
	sdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(4)
	db := &DB{db: sdb, now: time.Now}
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	for _, p := range []struct {
		dst *(*sql.Stmt)
		q   string
	}{
		{&db.tokenStmt, selectToken},
		{&db.installationStmt, selectInstallation},
		{&db.installationSwitchesStmt, selectInstallationSwitches},
		{&db.saveValueStmt, saveSwitchValue},
	} {
		if *p.dst, err = sdb.PrepareContext(ctx, p.q); err != nil {
			sdb.Close()
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
	}
	return db, nil
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Close closes the database.
func (db *DB) Close() error {
	for _, st := range []*sql.Stmt{db.tokenStmt, db.installationStmt, db.installationSwitchesStmt, db.saveValueStmt} {
		if st != nil {
			st.Close()
		}
	}
	return db.db.Close()
}

func (db *DB) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var version int
	if err := db.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > len(names) {
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d); use a newer switchbridge", version, len(names))
	}
	for i := version; i < len(names); i++ {
		body, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := db.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", names[i], err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func unix(t time.Time) int64 { return t.UnixMilli() }

func fromUnix(ms int64) time.Time { return time.UnixMilli(ms) }

// ---- users

// CreateUser adds a user. ECONFLICT when the name is taken.
func (db *DB) CreateUser(ctx context.Context, name string, passwordHash []byte, locations []int64) (*bridge.User, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?)`, name, passwordHash, unix(now))
	if err != nil {
		if isUnique(err) {
			return nil, bridge.Errorf(bridge.ECONFLICT, "user %q exists already", name)
		}
		return nil, err
	}
	id, _ := res.LastInsertId()
	for _, l := range dedupe(locations) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_locations (user_id, location_id) VALUES (?, ?)`, id, l); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &bridge.User{ID: id, Name: name, PasswordHash: passwordHash, Locations: dedupe(locations), CreatedAt: fromUnix(unix(now))}, nil
}

func dedupe(ids []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// UserByName returns a user; ENOTFOUND when there is none.
func (db *DB) UserByName(ctx context.Context, name string) (*bridge.User, error) {
	return db.user(ctx, `WHERE name = ?`, name)
}

// UserByID returns a user; ENOTFOUND when there is none.
func (db *DB) UserByID(ctx context.Context, id int64) (*bridge.User, error) {
	return db.user(ctx, `WHERE id = ?`, id)
}

func (db *DB) user(ctx context.Context, where string, arg any) (*bridge.User, error) {
	u := &bridge.User{}
	var created int64
	err := db.db.QueryRowContext(ctx, `SELECT id, name, password_hash, created_at FROM users `+where, arg).
		Scan(&u.ID, &u.Name, &u.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		if name, ok := arg.(string); ok {
			return nil, bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
		}
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no user with id %v", arg)
	}
	if err != nil {
		return nil, err
	}
	u.CreatedAt = fromUnix(created)
	u.Locations, err = db.userLocations(ctx, u.ID)
	return u, err
}

func (db *DB) userLocations(ctx context.Context, id int64) ([]int64, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT location_id FROM user_locations WHERE user_id = ? ORDER BY location_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var l int64
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Users lists every user by name.
func (db *DB) Users(ctx context.Context) ([]*bridge.User, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT name FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*bridge.User, 0, len(names))
	for _, n := range names {
		u, err := db.UserByName(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// SetPassword replaces a user's password hash; ENOTFOUND for no such user.
func (db *DB) SetPassword(ctx context.Context, name string, passwordHash []byte) error {
	res, err := db.db.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE name = ?`, passwordHash, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
	}
	return nil
}

// ---- apps

// CreateApp registers an app. ECONFLICT when the client id is taken.
func (db *DB) CreateApp(ctx context.Context, a *bridge.App) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = db.now()
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO apps (client_id, name, secret_hash, owner_id, published, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		a.ClientID, a.Name, a.SecretHash, a.OwnerID, a.Published, unix(a.CreatedAt))
	if err != nil {
		if isUnique(err) {
			return bridge.Errorf(bridge.ECONFLICT, "app %q exists already", a.ClientID)
		}
		if isForeignKey(err) {
			return bridge.Errorf(bridge.ENOTFOUND, "owner %d does not exist", a.OwnerID)
		}
		return err
	}
	for i, u := range a.RedirectURIs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_redirect_uris (client_id, pos, uri) VALUES (?, ?, ?)`, a.ClientID, i, u); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// App returns the app with a client id; ENOTFOUND when there is none.
func (db *DB) App(ctx context.Context, clientID string) (*bridge.App, error) {
	a := &bridge.App{}
	var created int64
	err := db.db.QueryRowContext(ctx, `SELECT client_id, name, secret_hash, owner_id, published, created_at FROM apps WHERE client_id = ?`, clientID).
		Scan(&a.ClientID, &a.Name, &a.SecretHash, &a.OwnerID, &a.Published, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no app with client id %q", clientID)
	}
	if err != nil {
		return nil, err
	}
	a.CreatedAt = fromUnix(created)
	rows, err := db.db.QueryContext(ctx, `SELECT uri FROM app_redirect_uris WHERE client_id = ? ORDER BY pos`, clientID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		a.RedirectURIs = append(a.RedirectURIs, u)
	}
	return a, rows.Err()
}

// Apps lists every app by creation time.
func (db *DB) Apps(ctx context.Context) ([]*bridge.App, error) {
	ids, err := db.strings(ctx, `SELECT client_id FROM apps ORDER BY created_at, client_id`)
	if err != nil {
		return nil, err
	}
	out := make([]*bridge.App, 0, len(ids))
	for _, id := range ids {
		a, err := db.App(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// PublishApp marks an app published; ENOTFOUND for no such app.
func (db *DB) PublishApp(ctx context.Context, clientID string) error {
	return db.updateApp(ctx, `UPDATE apps SET published = 1 WHERE client_id = ?`, clientID)
}

// SetAppSecret replaces an app's secret hash; ENOTFOUND for no such app.
func (db *DB) SetAppSecret(ctx context.Context, clientID string, secretHash []byte) error {
	return db.updateApp(ctx, `UPDATE apps SET secret_hash = ? WHERE client_id = ?`, secretHash, clientID)
}

// SetAppRedirectURIs replaces an app's redirect URIs.
func (db *DB) SetAppRedirectURIs(ctx context.Context, clientID string, uris []string) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM app_redirect_uris WHERE client_id = ?`, clientID); err != nil {
		return err
	}
	for i, u := range uris {
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_redirect_uris (client_id, pos, uri) VALUES (?, ?, ?)`, clientID, i, u); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (db *DB) updateApp(ctx context.Context, q string, args ...any) error {
	res, err := db.db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no app with client id %q", args[len(args)-1])
	}
	return nil
}

// ---- installations

// Install records that a user installed an app into a location with the
// given switches. Installing the same app into the same location of the
// same user again updates that installation (same id, the new switch
// selection) rather than adding a second one. It fills in.ID and the times.
func (db *DB) Install(ctx context.Context, in *bridge.Installation) error {
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
		created = unix(now)
		if _, err := tx.ExecContext(ctx, `INSERT INTO installations (id, client_id, user_id, location_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, in.ClientID, in.UserID, in.LocationID, created, unix(now)); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE installations SET updated_at = ? WHERE id = ?`, unix(now), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM installation_switches WHERE installation_id = ?`, id); err != nil {
			return err
		}
	}
	for i, s := range in.SwitchIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO installation_switches (installation_id, pos, switch_id) VALUES (?, ?, ?)`, id, i, s); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	in.ID, in.CreatedAt, in.UpdatedAt = id, fromUnix(created), fromUnix(unix(now))
	return nil
}

// Installation returns an installation; ENOTFOUND when there is none.
func (db *DB) Installation(ctx context.Context, id string) (*bridge.Installation, error) {
	in := &bridge.Installation{}
	var created, updated int64
	err := db.installationStmt.QueryRowContext(ctx, id).
		Scan(&in.ID, &in.ClientID, &in.UserID, &in.LocationID, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no installation %q", id)
	}
	if err != nil {
		return nil, err
	}
	in.CreatedAt, in.UpdatedAt = fromUnix(created), fromUnix(updated)
	rows, err := db.installationSwitchesStmt.QueryContext(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		in.SwitchIDs = append(in.SwitchIDs, s)
	}
	return in, rows.Err()
}

const (
	selectInstallation         = `SELECT id, client_id, user_id, location_id, created_at, updated_at FROM installations WHERE id = ?`
	selectInstallationSwitches = `SELECT switch_id FROM installation_switches WHERE installation_id = ? ORDER BY pos`
)

// Installations lists every installation, oldest first.
func (db *DB) Installations(ctx context.Context) ([]*bridge.Installation, error) {
	ids, err := db.strings(ctx, `SELECT id FROM installations ORDER BY created_at, id`)
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

// CountInstallations returns how many installations exist.
func (db *DB) CountInstallations(ctx context.Context) (int, error) {
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

func (db *DB) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := db.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// ---- switch state

// The last write wins: callers write values in the order they learnt them.
// Comparing the stored times instead would let a wall-clock step back (a
// Pi has no clock of its own until NTP answers) silently discard new values.
const saveSwitchValue = `INSERT INTO switch_states (switch_id, value, updated_at) VALUES (?, ?, ?)
	ON CONFLICT (switch_id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

// SaveSwitchValue stores a switch's last known value.
func (db *DB) SaveSwitchValue(ctx context.Context, switchID string, v bridge.Value, at time.Time) error {
	_, err := db.saveValueStmt.ExecContext(ctx, switchID, string(v), unix(at))
	return err
}

// SwitchValue is one switch's value at a time, for SaveSwitchValues.
type SwitchValue struct {
	SwitchID string
	Value    bridge.Value
	At       time.Time
}

// SaveSwitchValues stores many values in one transaction, in order (a later
// value for the same switch wins): one disk write for a command that
// switched a hundred plugs.
func (db *DB) SaveSwitchValues(ctx context.Context, vs []SwitchValue) error {
	if len(vs) == 0 {
		return nil
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, db.saveValueStmt)
	defer stmt.Close()
	for _, v := range vs {
		if _, err := stmt.ExecContext(ctx, v.SwitchID, string(v.Value), unix(v.At)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// SwitchValues returns every stored switch value by switch id.
func (db *DB) SwitchValues(ctx context.Context) (map[string]bridge.Value, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT switch_id, value FROM switch_states`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bridge.Value{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		out[id] = bridge.Value(v)
	}
	return out, rows.Err()
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func isForeignKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}
