package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Code is what an authorization code is bound to.
type Code struct {
	ClientID       string
	RedirectURI    string
	InstallationID string
	ExpiresAt      time.Time
	CodeChallenge  string // PKCE S256 challenge, "" when none
}

// Token is what an access token is bound to.
type Token struct {
	InstallationID string
	ExpiresAt      time.Time
	Revoked        bool
}

// Errors of code redemption and token lookup.
var (
	ErrCodeInvalid  = errors.New("authorization code is unknown or expired")
	ErrCodeReused   = errors.New("authorization code was used already; the token it issued is revoked")
	ErrTokenUnknown = errors.New("access token is unknown")
)

// CreateCode stores the hash of a new authorization code.
func (db *DB) CreateCode(ctx context.Context, hash []byte, c Code) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO codes (hash, client_id, redirect_uri, installation_id, expires_at, code_challenge) VALUES (?, ?, ?, ?, ?, ?)`,
		hash, c.ClientID, c.RedirectURI, c.InstallationID, unix(c.ExpiresAt), c.CodeChallenge)
	return err
}

// RedeemCode exchanges an authorization code for an access token in one
// transaction, so of two concurrent redemptions exactly one wins.
//
// check sees what the code is bound to (client, redirect URI); if it returns
// an error the code is left as it was and that error is returned. A code
// that was redeemed before is ErrCodeReused, and every token it issued is
// revoked. An unknown or expired code is ErrCodeInvalid.
func (db *DB) RedeemCode(ctx context.Context, codeHash []byte, check func(Code) error, tokenHash []byte, tokenExpires time.Time) (*Code, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var c Code
	var expires int64
	var used sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT client_id, redirect_uri, installation_id, expires_at, used_at, code_challenge FROM codes WHERE hash = ?`, codeHash).
		Scan(&c.ClientID, &c.RedirectURI, &c.InstallationID, &expires, &used, &c.CodeChallenge)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrCodeInvalid
	}
	if err != nil {
		return nil, err
	}
	c.ExpiresAt = fromUnix(expires)
	if err := check(c); err != nil {
		return nil, err
	}
	if used.Valid {
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE code_hash = ? AND revoked_at IS NULL`, unix(now), codeHash); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		return nil, ErrCodeReused
	}
	if !now.Before(c.ExpiresAt) {
		return nil, ErrCodeInvalid
	}
	res, err := tx.ExecContext(ctx, `UPDATE codes SET used_at = ? WHERE hash = ? AND used_at IS NULL`, unix(now), codeHash)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, ErrCodeReused
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (hash, installation_id, code_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		tokenHash, c.InstallationID, codeHash, unix(now), unix(tokenExpires)); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &c, nil
}

// CreateToken stores an access token issued without a code (switchbridge
// install, for developers).
func (db *DB) CreateToken(ctx context.Context, hash []byte, installationID string, expires time.Time) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		hash, installationID, unix(db.now()), unix(expires))
	return err
}

// Token returns what an access token hash is bound to; ErrTokenUnknown when
// no such token was issued.
func (db *DB) Token(ctx context.Context, hash []byte) (*Token, error) {
	var t Token
	var expires int64
	var revoked sql.NullInt64
	err := db.tokenStmt.QueryRowContext(ctx, hash).Scan(&t.InstallationID, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrTokenUnknown
	}
	if err != nil {
		return nil, err
	}
	t.ExpiresAt = fromUnix(expires)
	t.Revoked = revoked.Valid
	return &t, nil
}

const selectToken = `SELECT installation_id, expires_at, revoked_at FROM tokens WHERE hash = ?`

// Prune deletes codes and tokens that expired more than a day before now,
// so the database does not grow without bound. Used codes are kept until
// then so a replay is still recognised.
func (db *DB) Prune(ctx context.Context, now time.Time) error {
	cutoff := unix(now.Add(-24 * time.Hour))
	if _, err := db.db.ExecContext(ctx, `DELETE FROM codes WHERE expires_at < ?`, cutoff); err != nil {
		return err
	}
	_, err := db.db.ExecContext(ctx, `DELETE FROM tokens WHERE expires_at < ?`, cutoff)
	return err
}
