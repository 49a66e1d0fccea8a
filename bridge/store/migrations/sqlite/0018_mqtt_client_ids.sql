-- The embedded MQTT broker's client ids and the login each belongs to: the
-- first login that connects with a client id keeps it, so that another
-- plug login cannot take it (and the session and messages that come with
-- it) while its plug is offline. The owner frees one with `switchbridge
-- mqtt release-client-id`. last_at is the binding's last use: a login
-- keeps a bounded number, its least recently used going first.
CREATE TABLE mqtt_client_ids (
    client_id TEXT    PRIMARY KEY,
    login     TEXT    NOT NULL,
    bound_at  INTEGER NOT NULL,
    last_at   INTEGER NOT NULL
);
CREATE INDEX mqtt_client_ids_login ON mqtt_client_ids (login, last_at);
