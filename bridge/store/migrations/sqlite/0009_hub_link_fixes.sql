-- Fixes to the hub link (migration 0008).

-- A removed hub (hub remove) keeps a tombstone with its secret hash, so
-- that the removed hub can still authenticate, only to be told it was
-- removed: it then empties its replica instead of serving it until its
-- tokens expire.
CREATE TABLE removed_hubs (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL,
    secret_hash BLOB    NOT NULL,
    removed_at  INTEGER NOT NULL
);

-- A hub removed or given a new secret: its long polls end at once (the
-- platform checks its credentials again), so the removed hub learns it
-- without waiting for a poll to time out. Location 0 is no location.
CREATE TRIGGER changes_hub_delete AFTER DELETE ON hubs BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('hub', 0, OLD.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER changes_hub_secret AFTER UPDATE OF secret_hash ON hubs BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('hub', 0, NEW.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

-- Legacy apps (tokens in the query string) work at hubs too: each
-- replicated installation carries its app's legacy flag, and a change of
-- the flag is a change of every installation of the app.
ALTER TABLE replica_installations ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER changes_app_legacy AFTER UPDATE OF legacy ON apps WHEN OLD.legacy IS NOT NEW.legacy BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE client_id = NEW.client_id;
END;
