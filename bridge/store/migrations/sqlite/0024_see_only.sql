-- See-only grants: a switch of an installation may be granted to be seen
-- but not switched (see_only 1); 0, the default, is see and switch, as
-- every grant was before. The replica carries the see-only ids of each
-- installation as a JSON array; NULL is a record replicated before this
-- version, or from an older platform, which had none.
ALTER TABLE installation_switches ADD COLUMN see_only INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replica_installations ADD COLUMN see_only TEXT;

-- Making a switch see-only takes access away, so it moves the access
-- generation as removing it would (0005); its installation is logged for
-- the hubs as for any change of its switches (0008).
CREATE TRIGGER access_switches_see_only AFTER UPDATE OF see_only ON installation_switches BEGIN
    UPDATE access_generation SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER changes_installation_switches_see_only AFTER UPDATE OF see_only ON installation_switches BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
