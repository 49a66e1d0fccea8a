-- One platform, several hubs. Numbered 0010 so that migrations written
-- alongside (0005-0009) come first.

-- The platform's registry of hubs (switchbridge hub add). secret_hash is
-- SHA-256 of a 256-bit random secret; cursor is the change sequence the hub
-- acknowledged last.
CREATE TABLE hubs (
    id           TEXT    PRIMARY KEY,
    name         TEXT    NOT NULL UNIQUE,
    base_url     TEXT    NOT NULL,
    secret_hash  BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL DEFAULT 0,
    version      TEXT    NOT NULL DEFAULT '',
    cursor       INTEGER NOT NULL DEFAULT 0
);
-- The locations and switches each hub reported in its inventory. A
-- location belongs to one hub at most (its primary key).
CREATE TABLE hub_locations (
    location_id INTEGER PRIMARY KEY,
    hub_id      TEXT    NOT NULL REFERENCES hubs (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL
);
CREATE INDEX hub_locations_hub ON hub_locations (hub_id);
CREATE TABLE hub_switches (
    location_id INTEGER NOT NULL REFERENCES hub_locations (location_id) ON DELETE CASCADE,
    pos         INTEGER NOT NULL,
    switch_id   TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    commands    TEXT    NOT NULL, -- comma separated: on,off
    PRIMARY KEY (location_id, pos)
);

-- The change log a hub's replica follows: every write that touches what a
-- hub serves appends (kind, location, key) here through the triggers
-- below, whichever code or process makes it, in the same transaction. The
-- feed turns entries into the current record or a tombstone. seq never
-- goes back (AUTOINCREMENT); change_floor is the highest seq compaction
-- dropped: a hub whose cursor is below it must fetch a snapshot.
CREATE TABLE changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL, -- installation, token, member, location
    location_id INTEGER NOT NULL,
    key         TEXT    NOT NULL, -- installation id, hex token hash, user id, hub id
    at          INTEGER NOT NULL
);
CREATE INDEX changes_at ON changes (at);
CREATE TABLE change_floor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO change_floor (id, seq) VALUES (1, 0);

CREATE TRIGGER changes_installation_insert AFTER INSERT ON installations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('installation', NEW.location_id, NEW.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER changes_installation_update AFTER UPDATE ON installations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('installation', NEW.location_id, NEW.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', OLD.location_id, OLD.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    WHERE OLD.location_id <> NEW.location_id;
END;
CREATE TRIGGER changes_installation_delete AFTER DELETE ON installations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('installation', OLD.location_id, OLD.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER changes_installation_switches_insert AFTER INSERT ON installation_switches BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
CREATE TRIGGER changes_installation_switches_delete AFTER DELETE ON installation_switches BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = OLD.installation_id;
END;
CREATE TRIGGER changes_token_insert AFTER INSERT ON tokens BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'token', location_id, hex(NEW.hash), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
CREATE TRIGGER changes_token_update AFTER UPDATE OF revoked_at, expires_at, installation_id ON tokens BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'token', location_id, hex(NEW.hash), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
CREATE TRIGGER changes_token_delete AFTER DELETE ON tokens BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'token', location_id, hex(OLD.hash), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = OLD.installation_id;
END;
CREATE TRIGGER changes_member_insert AFTER INSERT ON user_locations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('member', NEW.location_id, CAST(NEW.user_id AS TEXT), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER changes_member_delete AFTER DELETE ON user_locations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('member', OLD.location_id, CAST(OLD.user_id AS TEXT), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER changes_member_update AFTER UPDATE ON user_locations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('member', OLD.location_id, CAST(OLD.user_id AS TEXT), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('member', NEW.location_id, CAST(NEW.user_id AS TEXT), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
-- A location a hub takes on: its installations and tokens go to that hub.
CREATE TRIGGER changes_hub_location_insert AFTER INSERT ON hub_locations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('location', NEW.location_id, NEW.hub_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

-- The hub side: the replica of what this hub's installations need, and
-- the cursor it is at, written in the same transaction as each batch.
CREATE TABLE replica_installations (
    id          TEXT    PRIMARY KEY,
    client_id   TEXT    NOT NULL,
    user_id     INTEGER NOT NULL,
    location_id INTEGER NOT NULL,
    switch_ids  TEXT    NOT NULL, -- JSON array, in the user's order
    member      INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE replica_tokens (
    hash            BLOB    PRIMARY KEY,
    installation_id TEXT    NOT NULL,
    expires_at      INTEGER NOT NULL,
    revoked         INTEGER NOT NULL
);
CREATE INDEX replica_tokens_installation ON replica_tokens (installation_id);
CREATE TABLE replica_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    cursor    INTEGER NOT NULL,
    synced_at INTEGER NOT NULL, -- when the platform last answered
    applied   INTEGER NOT NULL  -- batches applied, for tests and the log
);
