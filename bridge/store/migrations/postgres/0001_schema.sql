-- The platform's schema on PostgreSQL (15 or newer): the same tables,
-- columns and meanings as the SQLite schema after its migration 0014, so
-- that one set of queries serves both. PostgreSQL migrations are numbered
-- on their own: this file is the whole SQLite schema up to 0014, and the
-- next change of the schema is postgres/0002, whatever SQLite's number for
-- it. The comments of the SQLite migrations explain each table; the ones
-- here explain what differs.
--
-- Types: SQLite INTEGER is BIGINT (Go scans every integer into int64),
-- BLOB is BYTEA, TEXT is TEXT. Flags stay 0/1 integers, not BOOLEAN, so a
-- row reads the same on both engines. Times are unix milliseconds.
--
-- The whole file runs in one transaction (PostgreSQL's DDL is
-- transactional), so a failure leaves no half-made schema.

-- Which PostgreSQL migration the database is at: exactly one row (the
-- unique index on a constant allows no second). It stands in for SQLite's
-- PRAGMA user_version. The migration runner sets it after each file, in
-- that file's transaction; 0 is only ever seen inside this one. Runners
-- serialise on the advisory lock 8314334732869791073 (the ASCII bytes
-- "sbschema"), so two processes starting at once do not both migrate.
CREATE TABLE schema_version (
    version BIGINT NOT NULL
);
CREATE UNIQUE INDEX schema_version_one_row ON schema_version ((true));
INSERT INTO schema_version (version) VALUES (0);

-- Accounts of the platform role. users.id is given by the writer, from
-- id_high_water (below), never by a default: in SQLite it is a plain
-- INTEGER PRIMARY KEY, and every insert names its id.
CREATE TABLE users (
    id            BIGINT  PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    password_hash BYTEA   NOT NULL,
    created_at    BIGINT  NOT NULL
);
CREATE TABLE user_locations (
    user_id     BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    location_id BIGINT NOT NULL,
    PRIMARY KEY (user_id, location_id)
);

-- OAuth clients. published, require_pkce and legacy are 0 or 1;
-- access_token_lifetime is in milliseconds (0: the default lifetime).
CREATE TABLE apps (
    client_id             TEXT   PRIMARY KEY,
    name                  TEXT   NOT NULL,
    secret_hash           BYTEA  NOT NULL,
    owner_id              BIGINT NOT NULL REFERENCES users (id),
    published             BIGINT NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    require_pkce          BIGINT NOT NULL DEFAULT 0,
    legacy                BIGINT NOT NULL DEFAULT 0,
    access_token_lifetime BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE app_redirect_uris (
    client_id TEXT   NOT NULL REFERENCES apps (client_id) ON DELETE CASCADE,
    pos       BIGINT NOT NULL,
    uri       TEXT   NOT NULL,
    PRIMARY KEY (client_id, pos)
);

-- SQLite lists installations ORDER BY created_at, rowid: there is no
-- rowid here, so queries must order by a column (created_at, id).
CREATE TABLE installations (
    id           TEXT   PRIMARY KEY,
    client_id    TEXT   NOT NULL REFERENCES apps (client_id) ON DELETE CASCADE,
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    location_id  BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    UNIQUE (client_id, user_id, location_id)
);
CREATE TABLE installation_switches (
    installation_id TEXT   NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    pos             BIGINT NOT NULL,
    switch_id       TEXT   NOT NULL,
    PRIMARY KEY (installation_id, pos)
);

CREATE TABLE codes (
    hash            BYTEA  PRIMARY KEY,
    client_id       TEXT   NOT NULL,
    redirect_uri    TEXT   NOT NULL,
    installation_id TEXT   NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT,
    code_challenge  TEXT   NOT NULL DEFAULT ''
);
CREATE TABLE tokens (
    hash            BYTEA  PRIMARY KEY,
    installation_id TEXT   NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    code_hash       BYTEA,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    revoked_at      BIGINT
);
CREATE INDEX tokens_code_hash ON tokens (code_hash);
CREATE INDEX tokens_installation ON tokens (installation_id);

CREATE TABLE refresh_tokens (
    hash            BYTEA  PRIMARY KEY,
    installation_id TEXT   NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT,
    revoked_at      BIGINT
);
CREATE INDEX refresh_tokens_installation ON refresh_tokens (installation_id);

-- A hub's tables (switch values, the journal mark, the replica) are kept
-- too: the schema is the same everywhere, whatever role uses it.
CREATE TABLE switch_states (
    switch_id  TEXT   PRIMARY KEY,
    value      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE journal_fold (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL,
    size       BIGINT NOT NULL
);

-- The platform's hubs and their inventories.
CREATE TABLE hubs (
    id           TEXT   PRIMARY KEY,
    name         TEXT   NOT NULL UNIQUE,
    base_url     TEXT   NOT NULL,
    secret_hash  BYTEA  NOT NULL,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL DEFAULT 0,
    version      TEXT   NOT NULL DEFAULT '',
    cursor       BIGINT NOT NULL DEFAULT 0,
    conflict     TEXT   NOT NULL DEFAULT '',
    conflict_at  BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE hub_locations (
    location_id BIGINT PRIMARY KEY,
    hub_id      TEXT   NOT NULL REFERENCES hubs (id) ON DELETE CASCADE,
    name        TEXT   NOT NULL
);
CREATE INDEX hub_locations_hub ON hub_locations (hub_id);
CREATE TABLE hub_switches (
    location_id BIGINT NOT NULL REFERENCES hub_locations (location_id) ON DELETE CASCADE,
    pos         BIGINT NOT NULL,
    switch_id   TEXT   NOT NULL,
    name        TEXT   NOT NULL,
    commands    TEXT   NOT NULL, -- comma separated: on,off
    PRIMARY KEY (location_id, pos)
);
CREATE TABLE removed_hubs (
    id          TEXT   PRIMARY KEY,
    name        TEXT   NOT NULL,
    secret_hash BYTEA  NOT NULL,
    removed_at  BIGINT NOT NULL
);

-- The change log hubs follow. seq is what SQLite's AUTOINCREMENT gives:
-- never reused, even once compaction emptied the table. BY DEFAULT (not
-- ALWAYS) so that a platform moved from SQLite keeps its sequences; the
-- mover then sets the sequence past the highest one it copied. CACHE 1 (the
-- default, spelt out because it matters): a session caching values would
-- hand out sequences out of the order in which the appends are serialised
-- (see switchbridge_log_change).
CREATE TABLE changes (
    seq         BIGINT GENERATED BY DEFAULT AS IDENTITY (CACHE 1) PRIMARY KEY,
    kind        TEXT   NOT NULL, -- installation, token, member, location, hub
    location_id BIGINT NOT NULL,
    key         TEXT   NOT NULL, -- installation id, HEX token hash, user id, hub id
    at          BIGINT NOT NULL
);
CREATE INDEX changes_at ON changes (at);
CREATE TABLE change_floor (
    id  BIGINT PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL,
    tag TEXT   NOT NULL DEFAULT ''
);
INSERT INTO change_floor (id, seq) VALUES (1, 0);

-- The hub side: its replica of the platform and the cursor it is at.
CREATE TABLE replica_installations (
    id          TEXT   PRIMARY KEY,
    client_id   TEXT   NOT NULL,
    user_id     BIGINT NOT NULL,
    location_id BIGINT NOT NULL,
    switch_ids  TEXT   NOT NULL, -- JSON array, in the user's order
    member      BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    legacy      BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE replica_tokens (
    hash            BYTEA  PRIMARY KEY,
    installation_id TEXT   NOT NULL,
    expires_at      BIGINT NOT NULL,
    revoked         BIGINT NOT NULL
);
CREATE INDEX replica_tokens_installation ON replica_tokens (installation_id);
CREATE TABLE replica_state (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    cursor     BIGINT NOT NULL,
    synced_at  BIGINT NOT NULL,
    applied    BIGINT NOT NULL,
    cursor_tag TEXT   NOT NULL DEFAULT ''
);

-- The highest id ever given, per kind of id (users only, so far).
CREATE TABLE id_high_water (
    name  TEXT   PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO id_high_water (name, value) VALUES ('users', 0);

-- Webhooks and their outbox.
CREATE TABLE webhooks (
    id               TEXT   PRIMARY KEY,
    installation_id  TEXT   NOT NULL,
    url              TEXT   NOT NULL,
    secret           TEXT   NOT NULL,
    old_secret       TEXT   NOT NULL DEFAULT '',
    old_secret_until BIGINT NOT NULL DEFAULT 0,
    disabled_reason  TEXT   NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    last_success_at  BIGINT NOT NULL DEFAULT 0,
    last_failure_at  BIGINT NOT NULL DEFAULT 0,
    last_error       TEXT   NOT NULL DEFAULT '',
    failing_since    BIGINT NOT NULL DEFAULT 0,
    UNIQUE (installation_id, url)
);
CREATE TABLE webhook_outbox (
    webhook_id TEXT   NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    switch_id  TEXT   NOT NULL,
    version    BIGINT NOT NULL,
    msg_id     TEXT   NOT NULL,
    payload    BYTEA  NOT NULL,
    attempts   BIGINT NOT NULL DEFAULT 0,
    queued_at  BIGINT NOT NULL,
    next_at    BIGINT NOT NULL,
    PRIMARY KEY (webhook_id, switch_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);

-- The access generation (SQLite migration 0005): moved by the triggers
-- below, in the transaction of every write that takes access away.
CREATE TABLE access_generation (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    n  BIGINT NOT NULL
);
INSERT INTO access_generation (id, n) VALUES (1, 0);

-- Now in unix milliseconds, truncated as SQLite's CAST(... AS INTEGER)
-- truncates. The clock, not the transaction's start: an entry's time is
-- when it was appended, as with SQLite's 'now'.
CREATE FUNCTION switchbridge_now_ms() RETURNS BIGINT
LANGUAGE sql VOLATILE AS $$
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- Appends one entry to the change log; every change-log trigger goes
-- through here.
--
-- A hub's cursor is a sequence, and it asks for what came after it. SQLite
-- runs one writer at a time, so sequences commit in order. PostgreSQL hands
-- out sequences as transactions ask, before they commit: a transaction
-- that took 10 and commits after one that took 11 would put 10 behind a
-- cursor already at 11, and that hub would never see it. So an append first
-- takes a transaction-level advisory lock, held until commit or rollback,
-- and takes its sequence only then: the next transaction to append waits
-- until this one has ended, and sequences commit in their order. PostgreSQL
-- makes a committed transaction visible before it releases its locks, so
-- the later sequences cannot be seen before the earlier ones.
--
-- The key is the fixed number 8314317162041730917, the ASCII bytes
-- "sbchange" read as a big-endian integer; advisory locks are per
-- database, so it concerns only this database's switchbridge.
--
-- NOTIFY wakes the long polls of every platform process; PostgreSQL
-- delivers it at commit, once per transaction however many entries it
-- made, and never for one rolled back. It is only a wake-up: the log is
-- what the feed reads.
CREATE FUNCTION switchbridge_log_change(change_kind TEXT, change_location BIGINT, change_key TEXT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(8314317162041730917);
    INSERT INTO changes (kind, location_id, key, at)
    VALUES (change_kind, change_location, change_key, switchbridge_now_ms());
    PERFORM pg_notify('switchbridge_changes', '');
END
$$;

-- Moves the access generation and tells every process (channel
-- switchbridge_access, at commit) so they may drop cached grants at once.
--
-- It takes the change log's lock first. Most writes that move the counter
-- also append to the change log, and the counter's single row is a lock of
-- its own: taking the two always in this order means two such writes wait
-- for one another instead of each holding one lock and deadlocking on the
-- other.
CREATE FUNCTION switchbridge_bump_access() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(8314317162041730917);
    UPDATE access_generation SET n = n + 1 WHERE id = 1;
    PERFORM pg_notify('switchbridge_access', '');
END
$$;

-- The access triggers (SQLite migrations 0005 and 0007): the same events
-- move the counter. UPDATE OF fires, as in SQLite, when the statement sets
-- the column, whether or not its value changes.
CREATE FUNCTION access_generation_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_bump_access();
    RETURN NULL;
END
$$;
CREATE TRIGGER access_token_revoked AFTER UPDATE OF revoked_at ON tokens
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_token_deleted AFTER DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_installation_deleted AFTER DELETE ON installations
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_installation_moved AFTER UPDATE OF client_id, user_id, location_id ON installations
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_switches_added AFTER INSERT ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_switches_removed AFTER DELETE ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_membership_ended AFTER DELETE ON user_locations
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER access_app_legacy AFTER UPDATE OF legacy ON apps
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();

-- The change-log triggers (SQLite migrations 0008, 0009 and 0011), one
-- function each, named as its trigger. Those that look an installation up
-- log nothing when it is gone: a token or switch deleted by the cascade of
-- its installation's delete is covered by the installation's own entry,
-- as in SQLite, where the installation row is gone before the cascade too.

CREATE FUNCTION changes_installation_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', NEW.location_id, NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_installation_insert AFTER INSERT ON installations
    FOR EACH ROW EXECUTE FUNCTION changes_installation_insert();

-- As replaced in SQLite 0011: last_used_at alone is no change.
CREATE FUNCTION changes_installation_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', NEW.location_id, NEW.id);
    IF OLD.location_id <> NEW.location_id THEN
        PERFORM switchbridge_log_change('installation', OLD.location_id, OLD.id);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_installation_update AFTER UPDATE OF client_id, user_id, location_id, updated_at ON installations
    FOR EACH ROW EXECUTE FUNCTION changes_installation_update();

CREATE FUNCTION changes_installation_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', OLD.location_id, OLD.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_installation_delete AFTER DELETE ON installations
    FOR EACH ROW EXECUTE FUNCTION changes_installation_delete();

CREATE FUNCTION changes_installation_switches_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', i.location_id, i.id)
    FROM installations i WHERE i.id = NEW.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_installation_switches_insert AFTER INSERT ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION changes_installation_switches_insert();

CREATE FUNCTION changes_installation_switches_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', i.location_id, i.id)
    FROM installations i WHERE i.id = OLD.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_installation_switches_delete AFTER DELETE ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION changes_installation_switches_delete();

-- A token's key is its hash in upper-case hex, as SQLite's hex() writes
-- it, so that logs moved from SQLite and logs made here agree.
CREATE FUNCTION changes_token_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('token', i.location_id, upper(encode(NEW.hash, 'hex')))
    FROM installations i WHERE i.id = NEW.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_token_insert AFTER INSERT ON tokens
    FOR EACH ROW EXECUTE FUNCTION changes_token_insert();

CREATE FUNCTION changes_token_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('token', i.location_id, upper(encode(NEW.hash, 'hex')))
    FROM installations i WHERE i.id = NEW.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_token_update AFTER UPDATE OF revoked_at, expires_at, installation_id ON tokens
    FOR EACH ROW EXECUTE FUNCTION changes_token_update();

CREATE FUNCTION changes_token_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('token', i.location_id, upper(encode(OLD.hash, 'hex')))
    FROM installations i WHERE i.id = OLD.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_token_delete AFTER DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION changes_token_delete();

CREATE FUNCTION changes_member_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('member', NEW.location_id, NEW.user_id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_member_insert AFTER INSERT ON user_locations
    FOR EACH ROW EXECUTE FUNCTION changes_member_insert();

CREATE FUNCTION changes_member_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('member', OLD.location_id, OLD.user_id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_member_delete AFTER DELETE ON user_locations
    FOR EACH ROW EXECUTE FUNCTION changes_member_delete();

CREATE FUNCTION changes_member_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('member', OLD.location_id, OLD.user_id::text);
    PERFORM switchbridge_log_change('member', NEW.location_id, NEW.user_id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_member_update AFTER UPDATE ON user_locations
    FOR EACH ROW EXECUTE FUNCTION changes_member_update();

-- A location a hub takes on. An upsert (INSERT ... ON CONFLICT DO UPDATE)
-- of a location the hub holds already fires the update triggers, not this
-- one, on both engines.
CREATE FUNCTION changes_hub_location_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('location', NEW.location_id, NEW.hub_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_hub_location_insert AFTER INSERT ON hub_locations
    FOR EACH ROW EXECUTE FUNCTION changes_hub_location_insert();

-- A hub removed or given a new secret; location 0 is no location.
CREATE FUNCTION changes_hub_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('hub', 0, OLD.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_hub_delete AFTER DELETE ON hubs
    FOR EACH ROW EXECUTE FUNCTION changes_hub_delete();

CREATE FUNCTION changes_hub_secret() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('hub', 0, NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_hub_secret AFTER UPDATE OF secret_hash ON hubs
    FOR EACH ROW EXECUTE FUNCTION changes_hub_secret();

-- A change of an app's legacy flag is a change of each of its
-- installations; setting it to what it was is none (SQLite's IS NOT).
CREATE FUNCTION changes_app_legacy() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', i.location_id, i.id)
    FROM installations i WHERE i.client_id = NEW.client_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_app_legacy AFTER UPDATE OF legacy ON apps
    FOR EACH ROW WHEN (OLD.legacy IS DISTINCT FROM NEW.legacy)
    EXECUTE FUNCTION changes_app_legacy();

-- A user id is never given twice (SQLite migration 0012): a new user's id
-- must be above the highest ever given, which it then becomes.
CREATE FUNCTION users_id_not_reused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id <= (SELECT value FROM id_high_water WHERE name = 'users') THEN
        RAISE EXCEPTION 'a user id may not be given twice';
    END IF;
    UPDATE id_high_water SET value = NEW.id WHERE name = 'users';
    RETURN NULL;
END
$$;
CREATE TRIGGER users_id_not_reused AFTER INSERT ON users
    FOR EACH ROW EXECUTE FUNCTION users_id_not_reused();
