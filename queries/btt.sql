-- btt: btt's per-device figures from a trace that has the block layer's event times: the
-- intervals Q2G, G2I, I2D, Q2D, D2C and Q2C in ms (n, mean, min, p50, p90, p99, max; device
-- `all` pools every device, as btt's ALL), and the seek distances in sectors between
-- successive requests of a device, in queue order (Q2Q seek) and in issue order (D2D seek),
-- with their mode (the most frequent distance; the smallest of equals). An interval counts
-- the requests that have both of its times; Q is the request's arrival (time_ns), and rows
-- flagged partial (queued before the trace began) are left out of Q2* and of the Q2Q seeks.
-- A seek distance is btt's (btt/seek.c): 0 when the request overlaps the previous one, else
-- the distance from the previous end (forward) or start (backward), absolute; the first
-- request of a device is measured from sector 0. End = sector + size_bytes / 512 (rounded
-- down). Devices are major,minor for Linux traces.
-- View: trace.
WITH t AS (
    SELECT
        trace.run, request, time_ns, getrq_ns, insert_ns, issue_ns, complete_ns, sector,
        size_bytes, (flags & 512) <> 0 AS partial,
        CASE WHEN coalesce(tr.linux_devices, false)
             THEN CAST(device >> 20 AS VARCHAR) || ',' || CAST(device & 1048575 AS VARCHAR)
             ELSE CAST(device AS VARCHAR) END AS dev,
        device
    FROM trace LEFT JOIN traces tr ON tr.run = trace.run
), iv AS (
    SELECT run, dev, device, 1 AS ord, 'Q2G' AS metric, getrq_ns - time_ns AS v FROM t
        WHERE getrq_ns IS NOT NULL AND NOT partial
    UNION ALL
    SELECT run, dev, device, 2, 'G2I', insert_ns - getrq_ns FROM t
        WHERE insert_ns IS NOT NULL AND getrq_ns IS NOT NULL
    UNION ALL
    SELECT run, dev, device, 3, 'I2D', issue_ns - insert_ns FROM t
        WHERE issue_ns IS NOT NULL AND insert_ns IS NOT NULL
    UNION ALL
    SELECT run, dev, device, 4, 'Q2D', issue_ns - time_ns FROM t
        WHERE issue_ns IS NOT NULL AND NOT partial
    UNION ALL
    SELECT run, dev, device, 5, 'D2C', complete_ns - issue_ns FROM t
        WHERE complete_ns IS NOT NULL AND issue_ns IS NOT NULL
    UNION ALL
    SELECT run, dev, device, 6, 'Q2C', complete_ns - time_ns FROM t
        WHERE complete_ns IS NOT NULL AND NOT partial
), iv_q AS (  -- the two grouping sets' values, for exact_quantiles
    SELECT {'run': run, 'ord': ord, 'dev': dev} AS g, v / 1e6 AS x FROM iv
    UNION ALL
    SELECT {'run': run, 'ord': ord, 'dev': CAST(NULL AS VARCHAR)}, v / 1e6 FROM iv
), iv_qs AS (
    SELECT g, list(value ORDER BY q) AS q FROM exact_quantiles('iv_q', [0.5, 0.9, 0.99])
    GROUP BY g
), iv_stats AS (
    SELECT
        a.run, CASE WHEN a.all_rows = 1 THEN 'all' ELSE a.dev END AS device,
        a.all_rows AS all_first, a.devno, a.ord, a.metric, 'ms' AS unit, a.n, a.mean, a.min,
        iv_qs.q, a.max, CAST(NULL AS DOUBLE) AS mode
    FROM (
        SELECT run, dev, GROUPING(dev) AS all_rows, min(device) AS devno, ord, metric,
               count(*) AS n, avg(v) / 1e6 AS mean, min(v) / 1e6 AS min, max(v) / 1e6 AS max
        FROM iv
        GROUP BY GROUPING SETS ((run, ord, metric, dev), (run, ord, metric))
    ) a
    LEFT JOIN iv_qs ON iv_qs.g IS NOT DISTINCT FROM {'run': a.run, 'ord': a.ord, 'dev': a.dev}
), seq AS (
    SELECT run, dev, device, 7 AS ord, 'Q2Q seek' AS metric, sector AS st,
           sector + (size_bytes >> 9) AS en,
           lag(sector, 1, 0) OVER (PARTITION BY run, device ORDER BY time_ns, request) AS ls,
           lag(sector + (size_bytes >> 9), 1, 0)
               OVER (PARTITION BY run, device ORDER BY time_ns, request) AS le
    FROM t WHERE NOT partial
    UNION ALL
    SELECT run, dev, device, 8, 'D2D seek', sector, sector + (size_bytes >> 9),
           lag(sector, 1, 0) OVER (PARTITION BY run, device ORDER BY issue_ns, request),
           lag(sector + (size_bytes >> 9), 1, 0)
               OVER (PARTITION BY run, device ORDER BY issue_ns, request)
    FROM t WHERE issue_ns IS NOT NULL
), dist AS (
    SELECT run, dev, device, ord, metric,
           abs(CASE WHEN (ls <= st AND st <= le) OR (ls <= en AND en <= le) THEN 0
                    WHEN st > le THEN st - le
                    ELSE st - ls END) AS d
    FROM seq
), modes AS (
    SELECT run, dev, ord, first(d ORDER BY c DESC, d ASC) AS mode
    FROM (SELECT run, dev, ord, d, count(*) AS c FROM dist GROUP BY ALL)
    GROUP BY run, dev, ord
), seek_q AS (
    SELECT {'run': run, 'ord': ord, 'dev': dev} AS g, d AS x FROM dist
), seek_qs AS (
    SELECT g, list(value ORDER BY q) AS q FROM exact_quantiles('seek_q', [0.5, 0.9, 0.99])
    GROUP BY g
), seek_stats AS (
    SELECT
        a.run, a.dev AS device, 0 AS all_first, a.devno, a.ord, a.metric,
        'sectors' AS unit, a.n, a.mean, a.min, seek_qs.q, a.max
    FROM (
        SELECT run, dev, min(device) AS devno, ord, metric, count(*) AS n, avg(d) AS mean,
               min(d) AS min, max(d) AS max
        FROM dist
        GROUP BY run, dev, ord, metric
    ) a
    LEFT JOIN seek_qs ON seek_qs.g = {'run': a.run, 'ord': a.ord, 'dev': a.dev}
), rows AS (
    SELECT * FROM iv_stats
    UNION ALL BY NAME
    SELECT s.*, CAST(m.mode AS DOUBLE) AS mode
    FROM seek_stats s JOIN modes m ON m.run = s.run AND m.dev = s.device AND m.ord = s.ord
)
SELECT run, device, metric, unit, n, mean, min, q[1] AS p50, q[2] AS p90, q[3] AS p99, max,
       mode
FROM rows
ORDER BY run, all_first DESC, devno, ord;
