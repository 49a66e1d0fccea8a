-- The embedded MQTT broker's client ids and their logins (SQLite migration
-- 0018, whose comments explain the table). A hub keeps them in its SQLite;
-- the table is here too so that both dialects' schemas stay one (a
-- single box moved to PostgreSQL copies it). No trigger: none of it is in
-- the change log.
CREATE TABLE mqtt_client_ids (
    client_id TEXT   PRIMARY KEY,
    login     TEXT   NOT NULL,
    bound_at  BIGINT NOT NULL,
    last_at   BIGINT NOT NULL
);
CREATE INDEX mqtt_client_ids_login ON mqtt_client_ids (login, last_at);
