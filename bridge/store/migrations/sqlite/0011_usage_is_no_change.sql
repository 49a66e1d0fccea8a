-- When an installation was last used is no change for its hub: the
-- replica holds none of it. Until now every update of an installation,
-- last_used_at included, was logged as a change, so each use the platform
-- recorded sent the installation to its hub again.
DROP TRIGGER changes_installation_update;
CREATE TRIGGER changes_installation_update AFTER UPDATE OF client_id, user_id, location_id, updated_at ON installations BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    VALUES ('installation', NEW.location_id, NEW.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', OLD.location_id, OLD.id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    WHERE OLD.location_id <> NEW.location_id;
END;
