-- Deliveries follow the grant (SQLite migration 0020): the replica's
-- installations carry when their last live refresh token expires, and a
-- refresh token issued, spent or revoked sends its installation to its
-- hub again.
ALTER TABLE replica_installations ADD COLUMN refresh_until BIGINT;

CREATE FUNCTION changes_refresh_token() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchbridge_log_change('installation', i.location_id, i.id)
    FROM installations i WHERE i.id = NEW.installation_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER changes_refresh_token_insert AFTER INSERT ON refresh_tokens
    FOR EACH ROW EXECUTE FUNCTION changes_refresh_token();
CREATE TRIGGER changes_refresh_token_update AFTER UPDATE OF used_at, revoked_at, expires_at ON refresh_tokens
    FOR EACH ROW WHEN (OLD.used_at IS NULL AND OLD.revoked_at IS NULL)
    EXECUTE FUNCTION changes_refresh_token();
