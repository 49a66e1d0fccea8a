package accounts

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// CreateApp registers an app. ECONFLICT when the client id is taken.
func (db *Store) CreateApp(ctx context.Context, a *bridge.App) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = db.now()
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO apps (client_id, name, secret_hash, owner_id, published, require_pkce, legacy, access_token_lifetime, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ClientID, a.Name, a.SecretHash, a.OwnerID, a.Published, a.RequirePKCE, a.Legacy, a.AccessTokenLifetime.Milliseconds(), store.Millis(a.CreatedAt))
	if err != nil {
		if store.IsUnique(err) {
			return bridge.Errorf(bridge.ECONFLICT, "app %q exists already", a.ClientID)
		}
		if store.IsForeignKey(err) {
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
func (db *Store) App(ctx context.Context, clientID string) (*bridge.App, error) {
	a := &bridge.App{}
	var created, lifetime int64
	err := db.db.QueryRowContext(ctx, `SELECT client_id, name, secret_hash, owner_id, published, require_pkce, legacy, access_token_lifetime, created_at FROM apps WHERE client_id = ?`, clientID).
		Scan(&a.ClientID, &a.Name, &a.SecretHash, &a.OwnerID, &a.Published, &a.RequirePKCE, &a.Legacy, &lifetime, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no app with client id %q", clientID)
	}
	if err != nil {
		return nil, err
	}
	a.CreatedAt = store.FromMillis(created)
	a.AccessTokenLifetime = time.Duration(lifetime) * time.Millisecond
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
func (db *Store) Apps(ctx context.Context) ([]*bridge.App, error) {
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

// SetAppPublished lets every user install an app, or only its owner;
// ENOTFOUND for no such app. Installations already made are kept.
func (db *Store) SetAppPublished(ctx context.Context, clientID string, published bool) error {
	return db.updateApp(ctx, `UPDATE apps SET published = ? WHERE client_id = ?`, published, clientID)
}

// SetAppSecret replaces an app's secret hash; ENOTFOUND for no such app.
func (db *Store) SetAppSecret(ctx context.Context, clientID string, secretHash []byte) error {
	return db.updateApp(ctx, `UPDATE apps SET secret_hash = ? WHERE client_id = ?`, secretHash, clientID)
}

// SetAppLegacy turns an app's legacy mode on or off; ENOTFOUND for no such
// app. A running hub reads it at each request.
func (db *Store) SetAppLegacy(ctx context.Context, clientID string, legacy bool) error {
	return db.updateApp(ctx, `UPDATE apps SET legacy = ? WHERE client_id = ?`, legacy, clientID)
}

// SetAppAccessTokenLifetime sets the lifetime of the access tokens an app
// is issued from now on (zero: the hub's default); ENOTFOUND for no such
// app. Tokens issued before keep their expiry.
func (db *Store) SetAppAccessTokenLifetime(ctx context.Context, clientID string, d time.Duration) error {
	return db.updateApp(ctx, `UPDATE apps SET access_token_lifetime = ? WHERE client_id = ?`, d.Milliseconds(), clientID)
}

// SetAppRedirectURIs replaces an app's redirect URIs.
func (db *Store) SetAppRedirectURIs(ctx context.Context, clientID string, uris []string) error {
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

func (db *Store) updateApp(ctx context.Context, q string, args ...any) error {
	res, err := db.db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no app with client id %q", args[len(args)-1])
	}
	return nil
}

// DeleteApp removes an app and uninstalls it everywhere: its redirect URIs,
// installations, codes and tokens go with it, in one transaction that moves
// the access generation. ENOTFOUND for no such app.
func (db *Store) DeleteApp(ctx context.Context, clientID string) error {
	return db.updateApp(ctx, `DELETE FROM apps WHERE client_id = ?`, clientID)
}
