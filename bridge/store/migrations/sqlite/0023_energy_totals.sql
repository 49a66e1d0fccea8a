-- Each metering switch's energy total as the hub keeps it across restarts
-- and kill -9: the hub's running total (kWh, never decreasing), the
-- device's own counter when it was taken (their difference is what the
-- device's resets added), and when. The MQTT driver writes a switch's row
-- at most once every 10 minutes while its plug reports, at once after a
-- counter reset, and at shutdown; readings themselves stay in memory.
CREATE TABLE energy_totals (
    switch_id  TEXT    PRIMARY KEY,
    total_kwh  REAL    NOT NULL,
    device_kwh REAL    NOT NULL,
    at         INTEGER NOT NULL
);
