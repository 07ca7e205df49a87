-- size-sweep: each run's transfer size and what the host got, by operation: size_bytes (the
-- run's one request size; empty when its requests differ in size), requests, mb_per_s and
-- iops (10^6 bytes and requests per second from the first arrival to the last completion of
-- the run), mean_ms and p99_ms latency. Runs that each use one size and differ in it form a
-- size sweep (bandwidth against transfer size).
-- View: ios.
WITH span AS (
    SELECT run, (max(complete_ns) - min(arrival_ns)) / 1e9 AS duration_s,
           count(DISTINCT size_bytes) AS sizes, min(size_bytes) AS size
    FROM ios GROUP BY run
), qv AS NOT MATERIALIZED (
    SELECT {'run': run, 'op': op} AS g, latency_ns AS x FROM ios
), p99 AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g.run AS run, g.op AS op, value / 1e6 AS p99_ms FROM exact_quantiles('qv', [0.99])
), per AS (
    SELECT a.run,
           CASE a.op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(a.op AS VARCHAR) END AS op,
           a.requests, a.bytes, a.mean_ms, p99.p99_ms
    FROM (SELECT run, op, count(*) AS requests, sum(size_bytes) AS bytes,
                 avg(latency_ns) / 1e6 AS mean_ms
          FROM ios GROUP BY ALL) a
    LEFT JOIN p99 ON p99.run = a.run AND p99.op = a.op
)
SELECT
    per.run, per.op,
    CASE WHEN span.sizes = 1 THEN span.size END                              AS size_bytes,
    per.requests,
    CASE WHEN span.duration_s > 0 THEN per.bytes / 1e6 / span.duration_s END AS mb_per_s,
    CASE WHEN span.duration_s > 0 THEN per.requests / span.duration_s END    AS iops,
    per.mean_ms, per.p99_ms
FROM per JOIN span USING (run)
ORDER BY size_bytes NULLS LAST, per.run, per.op;
