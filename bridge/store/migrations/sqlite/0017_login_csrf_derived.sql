-- A logged-in session's CSRF token is derived from its cookie (an HMAC
-- under the login pages' signing key) instead of being kept in plain text
-- beside the cookie's hash: reading the table then gives no one a token a
-- form would pass with, as for every other secret. Sessions stay logged
-- in; a form one had open before the upgrade is refused once, as expired,
-- and passes reloaded. The tokens dropped here (and any copy of them left
-- in free pages) pass no form from now on: the derived token is checked.
ALTER TABLE login_sessions DROP COLUMN csrf;
