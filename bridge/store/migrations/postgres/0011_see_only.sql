-- See-only grants (SQLite migration 0024, whose comments explain the
-- columns): a switch granted to be seen but not switched, and the replica's
-- see-only ids; the same triggers on a change of see_only.
ALTER TABLE installation_switches ADD COLUMN see_only BIGINT NOT NULL DEFAULT 0;
ALTER TABLE replica_installations ADD COLUMN see_only TEXT;

CREATE TRIGGER access_switches_see_only AFTER UPDATE OF see_only ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION access_generation_bump();
CREATE TRIGGER changes_installation_switches_see_only AFTER UPDATE OF see_only ON installation_switches
    FOR EACH ROW EXECUTE FUNCTION changes_installation_switches_insert();
