-- When an installation's tokens last reached the hub, for the connected
-- apps page; NULL: never. Written behind the requests (UsageWriter), at
-- most once a minute per installation.
ALTER TABLE installations ADD COLUMN last_used_at INTEGER;

-- The access generation: a counter that every write which takes access
-- away or changes what a grant holds moves, in that write's own
-- transaction, whichever process makes it (the daemon, the CLI). A process
-- that caches grants reads it before using a cached grant and drops its
-- cache when it moved, so a removal ends access at once, with no cache
-- window. The triggers move it, so no writer can forget to: a token revoked
-- or deleted, an installation deleted (also by cascade from its app or
-- user) or re-pointed, its switches changed, a membership ended.
CREATE TABLE access_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO access_generation (id, n) VALUES (1, 0);

CREATE TRIGGER access_token_revoked AFTER UPDATE OF revoked_at ON tokens
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_token_deleted AFTER DELETE ON tokens
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_installation_deleted AFTER DELETE ON installations
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_installation_moved AFTER UPDATE OF client_id, user_id, location_id ON installations
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_switches_added AFTER INSERT ON installation_switches
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_switches_removed AFTER DELETE ON installation_switches
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_membership_ended AFTER DELETE ON user_locations
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
