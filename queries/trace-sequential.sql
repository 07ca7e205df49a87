-- trace-sequential: the fraction of data requests (reads and writes) that start exactly where
-- the previous data request of the same device and operation ended (in arrival order).
-- View: trace.
WITH d AS (
    SELECT
        sector,
        lag(sector + (size_bytes + 511) // 512) OVER (
            PARTITION BY device, op ORDER BY time_ns, sector
        ) AS prev_end
    FROM trace
    WHERE op IN (0, 1)
)
SELECT
    count(*)                                        AS data_requests,
    count(*) FILTER (WHERE sector = prev_end)       AS sequential,
    CASE WHEN count(*) > 0
         THEN count(*) FILTER (WHERE sector = prev_end) / count(*) END AS sequential_fraction
FROM d;
