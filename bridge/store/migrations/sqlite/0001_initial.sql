-- Accounts of the platform role.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    password_hash BLOB    NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE TABLE user_locations (
    user_id     INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    location_id INTEGER NOT NULL,
    PRIMARY KEY (user_id, location_id)
);

-- OAuth clients. secret_hash is SHA-256 of a 256-bit random secret.
CREATE TABLE apps (
    client_id   TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL,
    secret_hash BLOB    NOT NULL,
    owner_id    INTEGER NOT NULL REFERENCES users (id),
    published   INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);
CREATE TABLE app_redirect_uris (
    client_id TEXT    NOT NULL REFERENCES apps (client_id) ON DELETE CASCADE,
    pos       INTEGER NOT NULL,
    uri       TEXT    NOT NULL,
    PRIMARY KEY (client_id, pos)
);

CREATE TABLE installations (
    id          TEXT    PRIMARY KEY,
    client_id   TEXT    NOT NULL REFERENCES apps (client_id) ON DELETE CASCADE,
    user_id     INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    location_id INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (client_id, user_id, location_id)
);
CREATE TABLE installation_switches (
    installation_id TEXT    NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    pos             INTEGER NOT NULL,
    switch_id       TEXT    NOT NULL,
    PRIMARY KEY (installation_id, pos)
);

-- Authorization codes and access tokens, looked up by SHA-256 hash only.
CREATE TABLE codes (
    hash            BLOB    PRIMARY KEY,
    client_id       TEXT    NOT NULL,
    redirect_uri    TEXT    NOT NULL,
    installation_id TEXT    NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER
);
CREATE TABLE tokens (
    hash            BLOB    PRIMARY KEY,
    installation_id TEXT    NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    code_hash       BLOB,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    revoked_at      INTEGER
);
CREATE INDEX tokens_code_hash ON tokens (code_hash);

-- The last value each switch reported, for start-up restore.
CREATE TABLE switch_states (
    switch_id  TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
