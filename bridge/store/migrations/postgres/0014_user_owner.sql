-- The owner role (SQLite migration 0027, whose comments explain it): 1 for
-- a user who may use the console, 0 for one who only installs apps.
ALTER TABLE users ADD COLUMN owner BIGINT NOT NULL DEFAULT 0;
