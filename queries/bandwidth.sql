-- bandwidth: host MB/s (10^6 bytes per second) and IOPS per interval, by run and operation,
-- counting each request in the interval of its completion; intervals run from 0 to the last
-- completion, and those with no completion show 0.
-- View: ios.
-- Param: interval_s = 1.0  interval length in seconds (at least 1 microsecond).
WITH p AS (
    SELECT CASE WHEN $interval_s >= 1e-6 THEN CAST(round($interval_s * 1e9) AS BIGINT)
                ELSE error('interval_s must be at least 1e-6 seconds') END AS iv
), per AS (
    SELECT run, op, complete_ns // p.iv AS k, count(*) AS requests,
           CAST(sum(size_bytes) AS BIGINT) AS bytes
    FROM ios, p
    GROUP BY run, op, k
), span AS (
    SELECT run, max(k) AS last_k FROM per GROUP BY run
), ops AS (
    SELECT DISTINCT run, op FROM per
), grid AS (
    SELECT ops.run, ops.op, g.k
    FROM ops JOIN span USING (run), LATERAL generate_series(0, span.last_k) AS g(k)
)
SELECT
    grid.run,
    CASE grid.op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(grid.op AS VARCHAR) END AS op,
    grid.k * p.iv / 1e9                                    AS t_s,
    coalesce(per.requests, 0)                              AS requests,
    coalesce(per.bytes, 0)                                 AS bytes,
    coalesce(per.bytes, 0) / 1e6 / (p.iv / 1e9)            AS mb_per_s,
    coalesce(per.requests, 0) / (p.iv / 1e9)               AS iops
FROM grid CROSS JOIN p
LEFT JOIN per ON per.run = grid.run AND per.op = grid.op AND per.k = grid.k
ORDER BY grid.run, op, t_s;
