-- latency-summary: host request latency by run, operation and size class: requests, mean,
-- p50, p90, p99, p99.9 and max in milliseconds. The size class is the smallest power of two
-- of bytes at or above the request's size; the row with an empty size class (`all`) covers
-- every size of that operation. Percentiles are exact (linear interpolation between the two
-- nearest ranks, as quantile_cont and numpy.quantile do), in bounded memory (exact_quantiles,
-- queries/_macros.sql).
-- View: ios.
--
-- Nothing here is held or spilled per request: a request's group is one integer (the run's
-- number, its op code and the size class's exponent) and its rows are read again by each
-- pass instead of being kept (r and qv are NOT MATERIALIZED). The names are put back on the
-- few result rows. When r carried the run's name and the operation's as strings and was
-- materialized (DuckDB materializes a CTE read more than once), a billion-request run filled
-- 24 GB of spill and stopped; over 20 M requests that version peaked at 1.28 GB RSS, this
-- one at 0.38 GB with no spill (tests/test_exact_quantiles.py).
WITH ids AS (  -- each run's number
    SELECT run, CAST(row_number() OVER (ORDER BY run) AS BIGINT) AS rid FROM runs
), r AS NOT MATERIALIZED (  -- read three times, never held
    SELECT ids.rid, ios.op,
           CASE WHEN size_bytes <= 0 THEN -1
                ELSE CAST(ceil(log2(size_bytes)) AS BIGINT) END AS lg,  -- class 2^lg bytes
           latency_ns
    FROM ios JOIN ids ON ids.run = ios.run
), qv AS NOT MATERIALIZED (  -- the two grouping sets' values, for exact_quantiles
    -- g = (run, op, size class); 127 in the last place stands for every size (lg + 1 <= 64)
    SELECT (rid * 256 + op) * 128 + lg + 1 AS g, latency_ns AS x FROM r
    UNION ALL
    SELECT (rid * 256 + op) * 128 + 127, latency_ns FROM r
), qs AS (
    SELECT g, list(value ORDER BY q) AS q
    FROM exact_quantiles('qv', [0.5, 0.9, 0.99, 0.999]) GROUP BY g
), agg AS (
    SELECT
        rid, op, lg,
        count(*)                                                   AS requests,
        avg(latency_ns)                                            AS mean_ns,
        max(latency_ns)                                            AS max_ns
    FROM r
    GROUP BY GROUPING SETS ((rid, op, lg), (rid, op))
)
SELECT
    ids.run,
    CASE agg.op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(agg.op AS VARCHAR) END AS op,
    CASE WHEN agg.lg IS NULL THEN NULL WHEN agg.lg < 0 THEN 0
         ELSE CAST(1 AS BIGINT) << agg.lg END                     AS size_class_bytes,
    requests,
    mean_ns / 1e6  AS mean_ms,
    q[1] / 1e6     AS p50_ms,
    q[2] / 1e6     AS p90_ms,
    q[3] / 1e6     AS p99_ms,
    q[4] / 1e6     AS p999_ms,
    max_ns / 1e6   AS max_ms
FROM agg JOIN ids ON ids.rid = agg.rid
LEFT JOIN qs ON qs.g = (agg.rid * 256 + agg.op) * 128 + coalesce(agg.lg + 1, 127)
ORDER BY ids.run, op, size_class_bytes NULLS FIRST;
