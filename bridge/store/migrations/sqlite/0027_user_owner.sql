-- The owner role: a user with owner 1 may use the console, the owner's
-- web pages; 0, the default, is a user who only installs apps, as every
-- user was before. The flag stays on the platform: no trigger logs its
-- change, so it never reaches a hub's replica.
ALTER TABLE users ADD COLUMN owner INTEGER NOT NULL DEFAULT 0;
