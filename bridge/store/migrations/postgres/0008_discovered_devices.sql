-- The devices the MQTT driver heard announce themselves (SQLite migration
-- 0021, whose comments explain the table). A hub keeps them in its SQLite;
-- the table is here too so that both dialects' schemas stay one. No
-- trigger: none of it is in the change log.
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
    last_seen          BIGINT  NOT NULL
);
