-- A hub's tombstones: what the platform's change feed deleted from the
-- replica (installations, token hashes, the installations of a location
-- handed over), kept until no token of theirs could still be alive, so a
-- hub refuses them (401) without asking its platform, however slow or
-- down its link. A record the platform sends again removes its tombstone.
CREATE TABLE replica_gone_installations (
    id         TEXT    PRIMARY KEY,
    kept_until INTEGER NOT NULL
);
CREATE INDEX replica_gone_installations_kept ON replica_gone_installations (kept_until);
CREATE TABLE replica_gone_tokens (
    hash       BLOB    PRIMARY KEY,
    kept_until INTEGER NOT NULL
);
CREATE INDEX replica_gone_tokens_kept ON replica_gone_tokens (kept_until);
