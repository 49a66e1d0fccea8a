-- A hub's poll reads the change log's entries for its own locations after
-- its cursor. Without this index it read every entry after the cursor and
-- kept its own: one change touching every hub's location (an app deleted,
-- a user removed) made each of N hubs read N entries.
CREATE INDEX changes_location_seq ON changes (location_id, seq);
