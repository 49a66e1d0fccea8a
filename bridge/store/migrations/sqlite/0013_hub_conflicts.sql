-- The platform records the last time it refused a second process that
-- called with a hub's credentials while the hub's link was live, so that
-- `hub list` (another process) can show it.
ALTER TABLE hubs ADD COLUMN conflict TEXT NOT NULL DEFAULT '';
ALTER TABLE hubs ADD COLUMN conflict_at INTEGER NOT NULL DEFAULT 0;
