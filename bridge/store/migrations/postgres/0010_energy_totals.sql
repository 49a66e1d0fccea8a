-- Each metering switch's energy total (SQLite migration 0023, whose
-- comments explain the table). A hub keeps them in its SQLite; the table
-- is here too so that both dialects' schemas stay one. No trigger: none
-- of it is in the change log.
CREATE TABLE energy_totals (
    switch_id  TEXT             PRIMARY KEY,
    total_kwh  DOUBLE PRECISION NOT NULL,
    device_kwh DOUBLE PRECISION NOT NULL,
    at         BIGINT           NOT NULL
);
