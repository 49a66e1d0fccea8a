-- Each energy record's ceiling (SQLite migration 0026, whose comments
-- explain it).
ALTER TABLE energy_totals ADD COLUMN ceiling_kwh DOUBLE PRECISION NOT NULL DEFAULT 0;
