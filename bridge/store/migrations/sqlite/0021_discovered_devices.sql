-- The devices the MQTT driver heard announce themselves (Tasmota,
-- Shelly, Zigbee2MQTT, Home Assistant discovery) that the owner may adopt:
-- the running hub rewrites the list as it changes (at most once a second,
-- at most 256 rows), and `switchbridge devices` reads it. entry is the
-- switch entry of the config (a YAML flow mapping) that would use the
-- device; used_by the configured switch that already does, '' for none;
-- online NULL while the device has not said.
CREATE TABLE discovered_devices (
    id                 TEXT    PRIMARY KEY,
    firmware           TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    version            TEXT    NOT NULL,
    command_topic      TEXT    NOT NULL,
    state_topic        TEXT    NOT NULL,
    availability_topic TEXT    NOT NULL,
    online             INTEGER,
    entry              TEXT    NOT NULL,
    used_by            TEXT    NOT NULL,
    last_seen          INTEGER NOT NULL
);
