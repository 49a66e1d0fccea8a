-- A hub's poll reads the change log's entries for its own locations after
-- its cursor. Without this index it read every entry after the cursor and
-- kept its own: one change touching every hub's location (an app deleted,
-- a user removed) made each of N hubs read N entries.
CREATE INDEX changes_location_seq ON changes (location_id, seq);

-- A hub's snapshot, and a change of its locations, read the installations
-- (and through them the tokens) of its locations: without this index each
-- read every installation on the platform.
CREATE INDEX installations_location ON installations (location_id);
