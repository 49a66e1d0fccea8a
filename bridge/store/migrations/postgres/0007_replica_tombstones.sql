-- A hub's tombstones, as SQLite's 0020 (the schema is the same everywhere,
-- whatever role uses it; a hub's replica is on SQLite).
CREATE TABLE replica_gone_installations (
    id         TEXT   PRIMARY KEY,
    kept_until BIGINT NOT NULL
);
CREATE INDEX replica_gone_installations_kept ON replica_gone_installations (kept_until);
CREATE TABLE replica_gone_tokens (
    hash       BYTEA  PRIMARY KEY,
    kept_until BIGINT NOT NULL
);
CREATE INDEX replica_gone_tokens_kept ON replica_gone_tokens (kept_until);
