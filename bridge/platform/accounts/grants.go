package accounts

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// CreateCode stores the hash of a new authorization code.
func (db *Store) CreateCode(ctx context.Context, hash []byte, c bridge.AuthCode) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO codes (hash, client_id, redirect_uri, installation_id, expires_at, code_challenge) VALUES (?, ?, ?, ?, ?, ?)`,
		hash, c.ClientID, c.RedirectURI, c.InstallationID, store.Millis(c.ExpiresAt), c.CodeChallenge)
	return err
}

// RedeemCode exchanges an authorization code for tokens in one
// transaction, so of two concurrent redemptions exactly one wins.
//
// check sees what the code is bound to (client, redirect URI); if it returns
// an error the code is left as it was and that error is returned. A code
// that was redeemed before is bridge.ErrCodeReused, and its installation's
// grant is revoked (RFC 6749 §4.1.2: every token issued from it, and
// whatever those were refreshed into). An unknown or expired code is
// bridge.ErrCodeInvalid.
func (db *Store) RedeemCode(ctx context.Context, codeHash []byte, check func(bridge.AuthCode) error, issued bridge.TokenPair) (*bridge.AuthCode, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var c bridge.AuthCode
	var expires int64
	var used sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT client_id, redirect_uri, installation_id, expires_at, used_at, code_challenge FROM codes WHERE hash = ?`, codeHash).
		Scan(&c.ClientID, &c.RedirectURI, &c.InstallationID, &expires, &used, &c.CodeChallenge)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.ErrCodeInvalid
	}
	if err != nil {
		return nil, err
	}
	c.ExpiresAt = store.FromMillis(expires)
	if err := check(c); err != nil {
		return nil, err
	}
	if used.Valid {
		if err := revokeGrant(ctx, tx, c.InstallationID, now); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		return nil, bridge.ErrCodeReused
	}
	if !now.Before(c.ExpiresAt) {
		return nil, bridge.ErrCodeInvalid
	}
	res, err := tx.ExecContext(ctx, `UPDATE codes SET used_at = ? WHERE hash = ? AND used_at IS NULL`, store.Millis(now), codeHash)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, bridge.ErrCodeReused
	}
	if err := insertTokens(ctx, tx, c.InstallationID, codeHash, issued, now); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &c, nil
}

// insertTokens stores the hashes of tokens just issued for an
// installation; codeHash is the code they were exchanged for, nil for none.
func insertTokens(ctx context.Context, tx *sql.Tx, installationID string, codeHash []byte, issued bridge.TokenPair, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (hash, installation_id, code_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		issued.AccessHash, installationID, codeHash, store.Millis(now), store.Millis(issued.AccessExpiresAt)); err != nil {
		return err
	}
	if issued.RefreshHash == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO refresh_tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		issued.RefreshHash, installationID, store.Millis(now), store.Millis(issued.RefreshExpiresAt))
	return err
}

// revokeGrant revokes every access and refresh token of an installation:
// what a replayed code, a reused refresh token or the revocation of a
// refresh token takes back. The installation itself stays; its user can
// authorize the app again.
func revokeGrant(ctx context.Context, tx *sql.Tx, installationID string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE installation_id = ? AND revoked_at IS NULL`, store.Millis(now), installationID); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET revoked_at = ? WHERE installation_id = ? AND revoked_at IS NULL`, store.Millis(now), installationID)
	return err
}

// Refresh spends a refresh token and stores the tokens issued in its place
// (RFC 6749 §6, rotated as RFC 9700 §4.14.2 asks), in one transaction.
//
// check sees what the token is bound to (its client) and may refuse it,
// leaving it unspent. A token spent before is bridge.ErrRefreshReused, and
// its installation's grant is revoked: either the client or a thief holds
// the token issued in its place, and the hub cannot tell which. An unknown,
// expired or revoked token is bridge.ErrRefreshInvalid.
func (db *Store) Refresh(ctx context.Context, refreshHash []byte, check func(bridge.RefreshToken) error, issued bridge.TokenPair) (*bridge.RefreshToken, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var rt bridge.RefreshToken
	var expires int64
	var used, revoked sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT r.installation_id, i.client_id, r.expires_at, r.used_at, r.revoked_at
		FROM refresh_tokens r JOIN installations i ON i.id = r.installation_id WHERE r.hash = ?`, refreshHash).
		Scan(&rt.InstallationID, &rt.ClientID, &expires, &used, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.ErrRefreshInvalid
	}
	if err != nil {
		return nil, err
	}
	rt.ExpiresAt = store.FromMillis(expires)
	if err := check(rt); err != nil {
		return nil, err
	}
	switch {
	case revoked.Valid:
		// Revoked with its grant already: nothing more to take back, and
		// a newer authorization of the installation must not suffer for
		// an old token.
		return nil, bridge.ErrRefreshInvalid
	case used.Valid:
		if err := revokeGrant(ctx, tx, rt.InstallationID, now); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		return nil, bridge.ErrRefreshReused
	case !now.Before(rt.ExpiresAt):
		return nil, bridge.ErrRefreshInvalid
	}
	if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET used_at = ? WHERE hash = ?`, store.Millis(now), refreshHash); err != nil {
		return nil, err
	}
	if err := insertTokens(ctx, tx, rt.InstallationID, nil, issued, now); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &rt, nil
}

// RevokeToken revokes a token of client clientID (RFC 7009), whichever
// kind it is: an access token is revoked alone; a refresh token revokes
// its installation's grant, every access and refresh token of it. A token
// that is unknown or another client's revokes nothing (RevokedNothing).
func (db *Store) RevokeToken(ctx context.Context, hash []byte, clientID string) (bridge.Revoked, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return bridge.RevokedNothing, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE hash = ?
		AND installation_id IN (SELECT id FROM installations WHERE client_id = ?)`, store.Millis(now), hash, clientID)
	if err != nil {
		return bridge.RevokedNothing, err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return bridge.RevokedAccessToken, tx.Commit()
	}
	var installationID string
	err = tx.QueryRowContext(ctx, `SELECT r.installation_id FROM refresh_tokens r JOIN installations i ON i.id = r.installation_id
		WHERE r.hash = ? AND i.client_id = ?`, hash, clientID).Scan(&installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return bridge.RevokedNothing, nil
	}
	if err != nil {
		return bridge.RevokedNothing, err
	}
	if err := revokeGrant(ctx, tx, installationID, now); err != nil {
		return bridge.RevokedNothing, err
	}
	return bridge.RevokedGrant, tx.Commit()
}

// CreateToken stores an access token issued without a code (switchbridge
// install, for developers). ENOTFOUND when the installation is gone (an
// uninstall in between).
func (db *Store) CreateToken(ctx context.Context, hash []byte, installationID string, expires time.Time) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		hash, installationID, store.Millis(db.now()), store.Millis(expires))
	if store.IsForeignKey(err) {
		return bridge.Errorf(bridge.ENOTFOUND, "installation %s was removed while its token was issued: install again", installationID)
	}
	return err
}

// Token returns what an access token hash is bound to; bridge.ErrTokenUnknown when
// no such token was issued.
func (db *Store) Token(ctx context.Context, hash []byte) (*bridge.AccessToken, error) {
	var t bridge.AccessToken
	var expires int64
	var revoked sql.NullInt64
	err := db.preparedRow(ctx, selectToken, hash).Scan(&t.InstallationID, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.ErrTokenUnknown
	}
	if err != nil {
		return nil, db.db.Note(err)
	}
	t.ExpiresAt = store.FromMillis(expires)
	t.Revoked = revoked.Valid
	return &t, nil
}

const selectToken = `SELECT installation_id, expires_at, revoked_at FROM tokens WHERE hash = ?`

// TokenGrant returns an access token with its installation, whether the
// installing user still belongs to its location, and whether its app is
// legacy, in one read: the token check runs it for every request, so a
// revocation or an uninstall, by this process or another, counts at the
// next one. bridge.ErrTokenUnknown when no such token was issued (or its
// installation is gone, which takes its tokens along).
func (db *Store) TokenGrant(ctx context.Context, hash []byte) (*bridge.TokenGrant, error) {
	var g bridge.TokenGrant
	in := &g.Installation
	var expires, created, updated int64
	var revoked sql.NullInt64
	var switches, seeOnly sql.NullString
	err := db.preparedRow(ctx, selectTokenGrant, hash).Scan(&g.InstallationID, &expires, &revoked,
		&in.ClientID, &in.UserID, &in.LocationID, &created, &updated, &g.Legacy, &g.Member, &switches, &seeOnly)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.ErrTokenUnknown
	}
	if err != nil {
		return nil, db.db.Note(err)
	}
	g.ExpiresAt = store.FromMillis(expires)
	g.Revoked = revoked.Valid
	in.ID = g.InstallationID
	in.CreatedAt, in.UpdatedAt = store.FromMillis(created), store.FromMillis(updated)
	if switches.String != "" {
		// Switch ids hold no newline (config.SwitchIDPattern).
		in.SwitchIDs = strings.Split(switches.String, "\n")
	}
	if seeOnly.String != "" {
		in.SeeOnly = strings.Split(seeOnly.String, "\n")
	}
	return &g, nil
}

const selectTokenGrant = `SELECT t.installation_id, t.expires_at, t.revoked_at,
	i.client_id, i.user_id, i.location_id, i.created_at, i.updated_at, a.legacy,
	EXISTS (SELECT 1 FROM user_locations m WHERE m.user_id = i.user_id AND m.location_id = i.location_id),
	(SELECT string_agg(s.switch_id, '
' ORDER BY s.pos) FROM installation_switches s WHERE s.installation_id = i.id),
	(SELECT string_agg(s.switch_id, '
' ORDER BY s.pos) FROM installation_switches s WHERE s.installation_id = i.id AND s.see_only <> 0)
	FROM tokens t JOIN installations i ON i.id = t.installation_id JOIN apps a ON a.client_id = i.client_id
	WHERE t.hash = ?`

// Prune deletes codes and tokens that expired more than a day before now,
// so the database does not grow without bound. Used codes and spent
// refresh tokens are kept until then so a replay is still recognised.
func (db *Store) Prune(ctx context.Context, now time.Time) error {
	cutoff := store.Millis(now.Add(-24 * time.Hour))
	if _, err := db.db.ExecContext(ctx, `DELETE FROM codes WHERE expires_at < ?`, cutoff); err != nil {
		return err
	}
	if _, err := db.db.ExecContext(ctx, `DELETE FROM tokens WHERE expires_at < ?`, cutoff); err != nil {
		return err
	}
	_, err := db.db.ExecContext(ctx, `DELETE FROM refresh_tokens WHERE expires_at < ?`, cutoff)
	return err
}

// GrantLive reports whether anyone holds a live token of an installation's
// grant at now: an access token neither revoked nor expired, or a refresh
// token neither spent, revoked nor expired. A grant without one was taken
// back (a reused code or refresh token, a revocation) or let lapse; only
// a new authorization issues a token for it again. False for an
// installation that is gone.
func (db *Store) GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error) {
	var live bool
	err := db.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE installation_id = ?1 AND revoked_at IS NULL AND expires_at > ?2)
		OR EXISTS (SELECT 1 FROM refresh_tokens WHERE installation_id = ?1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?2)`,
		installationID, store.Millis(now)).Scan(&live)
	return live, db.db.Note(err)
}
