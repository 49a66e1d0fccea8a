-- The audit log (SQLite migration 0025, whose comments explain the table).
-- A hub keeps its own in its SQLite; the table is here too so that both
-- dialects' schemas stay one. No trigger: none of it is in the change log.
CREATE TABLE audit_log (
    at              BIGINT NOT NULL,
    installation_id TEXT   NOT NULL,
    client_id       TEXT   NOT NULL,
    user_id         BIGINT NOT NULL,
    switch_id       TEXT   NOT NULL,
    command         TEXT   NOT NULL,
    outcome         TEXT   NOT NULL,
    latency_ms      BIGINT NOT NULL,
    request_id      TEXT   NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_installation ON audit_log (installation_id, at);
