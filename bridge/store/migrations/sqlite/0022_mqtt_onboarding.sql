-- The embedded MQTT broker's onboarding login (switchbridge devices
-- listen): while it is open, until expires_at, a device not yet adopted may
-- log in as switchbridge-onboarding with the password whose SHA-256 is
-- password_hash, to announce itself. One row at most; none while it is
-- closed. The password is 128 random bits, so a plain hash keeps it as
-- well as a slow one would.
CREATE TABLE mqtt_onboarding (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    password_hash BLOB    NOT NULL,
    opened_at     INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
-- Which client, under which login, announced each discovered device, ''
-- when the broker is not the hub's own: adopting the device binds that
-- client id to the device's new login.
ALTER TABLE discovered_devices ADD COLUMN client_id TEXT NOT NULL DEFAULT '';
ALTER TABLE discovered_devices ADD COLUMN login TEXT NOT NULL DEFAULT '';
