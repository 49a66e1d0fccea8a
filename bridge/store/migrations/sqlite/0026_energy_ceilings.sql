-- Each energy record's ceiling (kWh, at least total_kwh): the most the hub
-- shows of the switch's total while the row is the one stored. A restart
-- starts the total there at least, so that a total shown before a kill -9
-- never goes back, even when the plug's counter reset while the hub was
-- down and passed device_kwh. Written with the row (no write of its own);
-- 0 in rows from before: the total is the ceiling then.
ALTER TABLE energy_totals ADD COLUMN ceiling_kwh REAL NOT NULL DEFAULT 0;
