-- The audit log: one row per switch per command sent through the
-- installation API. A command's rows reach the database the way its
-- values do: as lines of the value journal, in the same write as the
-- values, folded into this table with them. request_id is the
-- X-Request-Id of the command's answer. Pruned by age and by count
-- (audit.max_age, audit.max_rows).
CREATE TABLE audit_log (
    at              INTEGER NOT NULL,
    installation_id TEXT    NOT NULL,
    client_id       TEXT    NOT NULL,
    user_id         INTEGER NOT NULL,
    switch_id       TEXT    NOT NULL,
    command         TEXT    NOT NULL,
    outcome         TEXT    NOT NULL,
    latency_ms      INTEGER NOT NULL,
    request_id      TEXT    NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_installation ON audit_log (installation_id, at);
