-- workload: what a workload looks like, one figure per row (section, item, value) by run:
-- section `summary`: requests, reads, writes, read_ratio (reads / reads and writes),
-- read_bytes_ratio, mean_size_bytes, duration_s (first to last arrival), iops,
-- sequential_fraction (reads and writes starting where the previous one of the same device
-- and operation ended, in arrival order), interarrival_mean_ms, interarrival_cv (standard
-- deviation / mean), interarrival_p50_ms, interarrival_p99_ms, interarrival_max_ms (gaps
-- between successive arrivals of the run), working_set_bytes, working_set_read_bytes and
-- working_set_write_bytes (distinct bytes addressed: the union of the requests' sector
-- ranges per device); section `size_histogram`: requests (reads and writes) per size
-- class, the smallest power of two of bytes at or above the size; section
-- `hottest_extents`: the most addressed extents, item `DEVICE:FIRST_SECTOR`, value the
-- requests starting in it. Reads traces and the runs' ios alike (the requests view).
-- View: requests.
-- Param: extent_kib = 1024  extent size for hottest_extents, KiB.
-- Param: top = 10  how many extents hottest_extents lists per run.
WITH p AS (
    SELECT CASE WHEN $extent_kib >= 1 THEN CAST($extent_kib AS BIGINT) * 2
                ELSE error('extent_kib must be at least 1') END AS extent_sectors,
           CASE WHEN $top >= 0 THEN CAST($top AS BIGINT)
                ELSE error('top must be at least 0') END AS top
), r AS (
    SELECT run, time_ns, device, sector, size_bytes, op,
           sector + (size_bytes + 511) // 512 AS end_sector
    FROM requests
), basic AS (
    SELECT
        run,
        count(*)                                               AS requests,
        count(*) FILTER (WHERE op = 0)                         AS reads,
        count(*) FILTER (WHERE op = 1)                         AS writes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0)     AS read_bytes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0)     AS write_bytes,
        avg(size_bytes) FILTER (WHERE op IN (0, 1))            AS mean_size,
        (max(time_ns) - min(time_ns)) / 1e9                    AS duration_s
    FROM r GROUP BY run
), seqs AS (
    SELECT run,
           avg(CASE WHEN sector = prev_end THEN 1.0 ELSE 0.0 END) AS sequential_fraction
    FROM (SELECT run, sector,
                 lag(end_sector) OVER (PARTITION BY run, device, op
                                       ORDER BY time_ns, sector) AS prev_end
          FROM r WHERE op IN (0, 1))
    GROUP BY run
), gap AS (
    SELECT * FROM (SELECT run, time_ns - lag(time_ns) OVER (PARTITION BY run ORDER BY time_ns) AS g
                   FROM r)
    WHERE g IS NOT NULL
), gap_q AS (
    SELECT gap.run AS g, gap.g / 1e6 AS x FROM gap
), gq AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g AS run, list(value ORDER BY q) AS q FROM exact_quantiles('gap_q', [0.5, 0.99])
    GROUP BY g
), gaps AS (
    SELECT a.run, a.mean_ms, a.cv, gq.q, a.max_ms
    FROM (SELECT run, avg(g) / 1e6 AS mean_ms, stddev_pop(g) / avg(g) AS cv,
                 max(g) / 1e6 AS max_ms
          FROM gap GROUP BY run) a
    LEFT JOIN gq ON gq.run = a.run
), ws_in AS (
    SELECT run, 'all' AS kind, device, sector AS s, end_sector AS e FROM r
        WHERE op IN (0, 1) AND size_bytes > 0
    UNION ALL
    SELECT run, CASE op WHEN 0 THEN 'read' ELSE 'write' END, device, sector, end_sector FROM r
        WHERE op IN (0, 1) AND size_bytes > 0
), ws_runs AS (
    -- a new island of addressed sectors starts where no earlier range (in sector order)
    -- reaches
    SELECT run, kind, device, s, e,
           max(e) OVER (PARTITION BY run, kind, device ORDER BY s, e
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM ws_in
), ws_isl AS (
    SELECT run, kind, device, s, e,
           sum(CASE WHEN reach IS NULL OR s > reach THEN 1 ELSE 0 END)
               OVER (PARTITION BY run, kind, device ORDER BY s, e ROWS UNBOUNDED PRECEDING)
               AS island
    FROM ws_runs
), ws AS (
    SELECT run,
           coalesce(sum(hi - lo) FILTER (WHERE kind = 'all'), 0) * 512   AS all_bytes,
           coalesce(sum(hi - lo) FILTER (WHERE kind = 'read'), 0) * 512  AS read_bytes,
           coalesce(sum(hi - lo) FILTER (WHERE kind = 'write'), 0) * 512 AS write_bytes
    FROM (SELECT run, kind, device, island, min(s) AS lo, max(e) AS hi
          FROM ws_isl GROUP BY ALL)
    GROUP BY run
), summary AS (
    SELECT b.run, 1 AS sec, 'summary' AS section, u.k, u.item, u.value
    FROM basic b
    LEFT JOIN seqs USING (run) LEFT JOIN gaps USING (run) LEFT JOIN ws USING (run),
    LATERAL (VALUES
        (1, 'requests', CAST(b.requests AS DOUBLE)),
        (2, 'reads', CAST(b.reads AS DOUBLE)),
        (3, 'writes', CAST(b.writes AS DOUBLE)),
        (4, 'read_ratio', CASE WHEN b.reads + b.writes > 0
                               THEN b.reads / (b.reads + b.writes) END),
        (5, 'read_bytes_ratio', CASE WHEN b.read_bytes + b.write_bytes > 0
                                     THEN b.read_bytes / (b.read_bytes + b.write_bytes) END),
        (6, 'mean_size_bytes', b.mean_size),
        (7, 'duration_s', b.duration_s),
        (8, 'iops', CASE WHEN b.duration_s > 0 THEN b.requests / b.duration_s END),
        (9, 'sequential_fraction', seqs.sequential_fraction),
        (10, 'interarrival_mean_ms', gaps.mean_ms),
        (11, 'interarrival_cv', gaps.cv),
        (12, 'interarrival_p50_ms', gaps.q[1]),
        (13, 'interarrival_p99_ms', gaps.q[2]),
        (14, 'interarrival_max_ms', gaps.max_ms),
        (15, 'working_set_bytes', CAST(coalesce(ws.all_bytes, 0) AS DOUBLE)),
        (16, 'working_set_read_bytes', CAST(coalesce(ws.read_bytes, 0) AS DOUBLE)),
        (17, 'working_set_write_bytes', CAST(coalesce(ws.write_bytes, 0) AS DOUBLE))
    ) AS u(k, item, value)
), sizes AS (
    SELECT run, 2 AS sec, 'size_histogram' AS section, bucket AS k,
           CAST(bucket AS VARCHAR) AS item, CAST(count(*) AS DOUBLE) AS value
    FROM (SELECT run, CASE WHEN size_bytes <= 0 THEN 0
                           ELSE CAST(pow(2, ceil(log2(size_bytes))) AS BIGINT) END AS bucket
          FROM r WHERE op IN (0, 1))
    GROUP BY run, bucket
), hot AS (
    SELECT run, 3 AS sec, 'hottest_extents' AS section, place AS k,
           CAST(device AS VARCHAR) || ':' || CAST(first_sector AS VARCHAR) AS item,
           CAST(n AS DOUBLE) AS value
    FROM (SELECT run, device, first_sector, n,
                 row_number() OVER (PARTITION BY run ORDER BY n DESC, device, first_sector)
                     AS place
          FROM (SELECT run, device, sector // p.extent_sectors * p.extent_sectors
                           AS first_sector, count(*) AS n
                FROM r, p WHERE op IN (0, 1) GROUP BY ALL)), p
    WHERE place <= p.top
)
SELECT run, section, item, value FROM (
    SELECT * FROM summary UNION ALL SELECT * FROM sizes UNION ALL SELECT * FROM hot
)
ORDER BY run, sec, k;
