-- run-latency: how many requests the runs given replayed, with their mean and their q-th
-- quantile latency in ms, exactly: the quantile interpolates between the two order
-- statistics around (n - 1) x q, as numpy's quantile and DuckDB's quantile_cont do, but reads
-- them off a sort (ORDER BY ... OFFSET), which DuckDB spills to disk, so a run of a billion
-- requests needs no more memory than the connection's limit (quantile_cont keeps every value
-- in memory). replay prints this for the run it wrote.
-- Views: ios.
-- Param: q = 0.99  the quantile, 0 to 1.
WITH k AS (
    SELECT count(*) AS n, avg(latency_ns) AS mean_ns,
           CASE WHEN $q >= 0 AND $q <= 1 THEN (count(*) - 1) * $q
                ELSE error('q must be between 0 and 1') END AS pos
    FROM ios
), two AS (
    SELECT latency_ns FROM ios ORDER BY latency_ns
    LIMIT 2 OFFSET (SELECT CAST(greatest(floor(pos), 0) AS BIGINT) FROM k)
)
SELECT n AS requests,
       mean_ns / 1e6 AS mean_ms,
       ((SELECT min(latency_ns) FROM two)
        + (pos - floor(pos)) * ((SELECT max(latency_ns) FROM two)
                                - (SELECT min(latency_ns) FROM two))) / 1e6 AS quantile_ms
FROM k;
