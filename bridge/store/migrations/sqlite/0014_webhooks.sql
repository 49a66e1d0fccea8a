-- Webhooks and their durable outbox (the events issue). An installation's
-- client registers URLs; each switch change is queued per webhook and
-- switch (a newer change replaces a queued one: version grows) and
-- delivered until the receiver takes it. No foreign key to installations:
-- on a hub of a platform they live in the replica; the dispatcher drops
-- the webhooks of an installation that is gone.
CREATE TABLE webhooks (
    id               TEXT    PRIMARY KEY,
    installation_id  TEXT    NOT NULL,
    url              TEXT    NOT NULL,
    secret           TEXT    NOT NULL,
    old_secret       TEXT    NOT NULL DEFAULT '',
    old_secret_until INTEGER NOT NULL DEFAULT 0,
    disabled_reason  TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    last_success_at  INTEGER NOT NULL DEFAULT 0,
    last_failure_at  INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    failing_since    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (installation_id, url)
);
CREATE TABLE webhook_outbox (
    webhook_id TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    switch_id  TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    msg_id     TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    queued_at  INTEGER NOT NULL,
    next_at    INTEGER NOT NULL,
    PRIMARY KEY (webhook_id, switch_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);
