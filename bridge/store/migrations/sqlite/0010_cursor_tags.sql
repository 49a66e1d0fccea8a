-- A hub's cursor names a point of the change log by its sequence and the
-- tag of the entry there (see changeTag). A platform restored from a
-- backup goes on from the backup's sequence with other entries, so a
-- cursor a hub took past the backup no longer matches and the hub fetches
-- a snapshot, where a bare sequence would resume past changes it never
-- saw. change_floor keeps the tag of the newest entry compaction dropped.
ALTER TABLE change_floor ADD COLUMN tag TEXT NOT NULL DEFAULT '';
ALTER TABLE replica_state ADD COLUMN cursor_tag TEXT NOT NULL DEFAULT '';
