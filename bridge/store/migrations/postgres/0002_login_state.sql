-- The login pages' state (SQLite migration 0015, whose comments explain
-- the tables): logged-in sessions, the shared signing key and the counts
-- of failed logins, so that every platform process behind one address
-- sees the same. No trigger: none of it is in the change log, and none of
-- it moves the access generation.
CREATE TABLE login_sessions (
    hash       BYTEA  PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    password   BYTEA  NOT NULL,
    csrf       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX login_sessions_user ON login_sessions (user_id, created_at);
CREATE INDEX login_sessions_expiry ON login_sessions (expires_at);
CREATE INDEX login_sessions_age ON login_sessions (created_at);

CREATE TABLE signing_keys (
    name       TEXT   PRIMARY KEY,
    key        BYTEA  NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE login_failures (
    key      BYTEA  PRIMARY KEY,
    failures BIGINT NOT NULL,
    last_at  BIGINT NOT NULL
);
CREATE INDEX login_failures_last ON login_failures (last_at);
