-- The embedded MQTT broker's onboarding login and who announced each
-- discovered device (SQLite migration 0022, whose comments explain them).
-- A hub keeps them in its SQLite; they are here too so that both
-- dialects' schemas stay one. No trigger: none of it is in the change log.
CREATE TABLE mqtt_onboarding (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    password_hash BYTEA   NOT NULL,
    opened_at     BIGINT  NOT NULL,
    expires_at    BIGINT  NOT NULL
);
ALTER TABLE discovered_devices ADD COLUMN client_id TEXT NOT NULL DEFAULT '';
ALTER TABLE discovered_devices ADD COLUMN login TEXT NOT NULL DEFAULT '';
