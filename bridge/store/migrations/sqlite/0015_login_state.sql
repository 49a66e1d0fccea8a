-- The login pages' state, in the database so that every process serving
-- the pages sees the same (on PostgreSQL, several platform processes
-- behind one address): logged-in sessions, the key that signs login forms
-- and messages, and the counts of failed logins. None of it is anything a
-- user created; losing it only means logging in again.

-- A logged-in session, by the SHA-256 of its cookie: the cookie itself is
-- never kept, so reading the table gives no one a login. password is a
-- digest of the user's password hash at login (a password changed since
-- ends the session); csrf is the token the session's forms carry.
CREATE TABLE login_sessions (
    hash       BLOB    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    password   BLOB    NOT NULL,
    csrf       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX login_sessions_user ON login_sessions (user_id, created_at);
CREATE INDEX login_sessions_expiry ON login_sessions (expires_at);
CREATE INDEX login_sessions_age ON login_sessions (created_at);

-- Keys made once and then used by every process: the first process that
-- needs one stores it (INSERT ... ON CONFLICT DO NOTHING), every process
-- then reads the one stored.
CREATE TABLE signing_keys (
    name       TEXT    PRIMARY KEY,
    key        BLOB    NOT NULL,
    created_at INTEGER NOT NULL
);

-- Failed logins per throttling key. A key names a user and an address, so
-- only its keyed hash is kept. failures restarts at 1 when last_at is
-- older than the throttle forgets.
CREATE TABLE login_failures (
    key      BLOB    PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_at  INTEGER NOT NULL
);
CREATE INDEX login_failures_last ON login_failures (last_at);
