-- Refresh tokens (RFC 6749 §6), looked up by SHA-256 hash only. Each
-- refresh spends one (used_at) and issues the next; a spent one presented
-- again revokes its installation's grant (RFC 9700 §4.14.2), so spent ones
-- are kept until they expire.
CREATE TABLE refresh_tokens (
    hash            BLOB    PRIMARY KEY,
    installation_id TEXT    NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER,
    revoked_at      INTEGER
);
CREATE INDEX refresh_tokens_installation ON refresh_tokens (installation_id);
-- Revoking a grant revokes every access token of its installation.
CREATE INDEX tokens_installation ON tokens (installation_id);

-- Legacy apps (app create --legacy) accept access_token in the query
-- string; access_token_lifetime (milliseconds, 0: the hub's
-- oauth.token_lifetime) is the app's own access-token lifetime.
ALTER TABLE apps ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE apps ADD COLUMN access_token_lifetime INTEGER NOT NULL DEFAULT 0;
