-- A logged-in session's CSRF token is derived from its cookie, no longer
-- stored (SQLite migration 0017, whose comment explains it).
ALTER TABLE login_sessions DROP COLUMN csrf;
