-- Deliveries follow the grant: a hub sends an installation's webhooks
-- nothing while no one holds a live token of its grant. A linked hub
-- learns of the access tokens through its replica already; of the refresh
-- tokens it learns from the installation record, which now carries when
-- its last live refresh token expires (refresh_until, 0: none). NULL is a
-- record replicated before this version, or from an older platform: the
-- hub takes the grant to be held, as it did, until the record comes again
-- (the platform sends it at the next refresh or revocation).
ALTER TABLE replica_installations ADD COLUMN refresh_until INTEGER;

-- So a refresh token issued, spent or revoked sends its installation to
-- the hub again. Revoking one already spent or revoked changes nothing a
-- hub holds: a grant refreshed hourly keeps thousands of spent ones.
CREATE TRIGGER changes_refresh_token_insert AFTER INSERT ON refresh_tokens BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
CREATE TRIGGER changes_refresh_token_update AFTER UPDATE OF used_at, revoked_at, expires_at ON refresh_tokens
WHEN OLD.used_at IS NULL AND OLD.revoked_at IS NULL BEGIN
    INSERT INTO changes (kind, location_id, key, at)
    SELECT 'installation', location_id, id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM installations WHERE id = NEW.installation_id;
END;
