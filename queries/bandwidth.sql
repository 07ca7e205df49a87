-- bandwidth: host MB/s (10^6 bytes per second) and IOPS per interval, by run and operation,
-- counting each request in the interval of its completion; intervals run from 0 to the run's
-- last completion, the last one short when the run ends inside it (interval_s: its length,
-- by which its rates are divided, as iostat divides its last), and those with no completion
-- show 0.
-- View: ios.
-- Param: interval_s = 1.0  interval length in seconds (at least 1 microsecond).
WITH p AS (
    SELECT CASE WHEN $interval_s >= 1e-6 THEN CAST(round($interval_s * 1e9) AS BIGINT)
                ELSE error('interval_s must be at least 1e-6 seconds') END AS iv
), span AS (  -- per run: its last completion and the interval that holds it (a completion
    -- exactly at an interval's start ends the interval before: no interval of length 0)
    SELECT run, max(complete_ns) AS end_ns,
           greatest((max(complete_ns) - 1) // any_value(p.iv), 0) AS last_k
    FROM ios, p
    GROUP BY run
), per AS (
    SELECT ios.run, op, least(complete_ns // p.iv, span.last_k) AS k, count(*) AS requests,
           CAST(sum(size_bytes) AS BIGINT) AS bytes
    FROM ios JOIN span ON span.run = ios.run, p
    GROUP BY ALL
), ops AS (
    SELECT DISTINCT run, op FROM per
), grid AS (
    SELECT ops.run, ops.op, g.k, least(p.iv, span.end_ns - g.k * p.iv) AS len_ns
    FROM ops JOIN span USING (run), p, LATERAL generate_series(0, span.last_k) AS g(k)
)
SELECT
    grid.run,
    CASE grid.op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(grid.op AS VARCHAR) END AS op,
    grid.k * p.iv / 1e9                                    AS t_s,
    grid.len_ns / 1e9                                      AS interval_s,
    coalesce(per.requests, 0)                              AS requests,
    coalesce(per.bytes, 0)                                 AS bytes,
    coalesce(per.bytes, 0) / 1e6 / (grid.len_ns / 1e9)     AS mb_per_s,
    coalesce(per.requests, 0) / (grid.len_ns / 1e9)        AS iops
FROM grid CROSS JOIN p
LEFT JOIN per ON per.run = grid.run AND per.op = grid.op AND per.k = grid.k
WHERE grid.len_ns > 0
ORDER BY grid.run, op, t_s;
