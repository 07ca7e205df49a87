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
), r AS NOT MATERIALIZED (  -- r, rt, srt: read again, never spilled (see rt)
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
), tb AS MATERIALIZED (
    -- In bounded memory: a window partitioned by run or device alone ran out of DuckDB's
    -- memory limit (3 M requests under 100 MB), so every window here is over a bucket of a
    -- run's requests by arrival time (or of a device's ranges by sector), about 256 rows
    -- each and at most 2^20 buckets, or over one row per bucket; a bucket's windows start
    -- from a row that carries what its earlier buckets left (their last arrival, the end of
    -- the last request of the same device and operation, the reach of their sector ranges).
    -- One row per run: a number, first arrival, bucket width, and the mean gap between
    -- arrivals rounded down (the gaps add up to the last arrival less the first).
    SELECT row_number() OVER () AS rid, *  -- (tb is MATERIALIZED: numbered once)
    FROM (SELECT run, min(time_ns) AS t0,
                 (max(time_ns) - min(time_ns)) // least(greatest(count(*) // 256, 1), 1048576)
                     + 1 AS w,
                 (max(time_ns) - min(time_ns)) // greatest(count(*) - 1, 1) AS m
          FROM r GROUP BY run)
), rt AS NOT MATERIALIZED (
    -- the requests are read again from the Parquet files by each reader, not materialized:
    -- DuckDB materializes a CTE read more than once, a spilled copy of every request (over
    -- 20 M requests: 5.1 GB of spill and 59 s materialized, 3.9 GB and 41 s not; the rest
    -- is the windows' sorts)
    SELECT tb.rid, (r.time_ns - tb.t0) // tb.w AS k, r.time_ns, r.device, r.op, r.sector,
           r.end_sector, r.size_bytes
    FROM r JOIN tb ON tb.run = r.run
), sq AS MATERIALIZED (  -- one row per run, device and operation (read, write): a number
    SELECT row_number() OVER () AS sid, *
    FROM (SELECT DISTINCT rid, device, op FROM rt WHERE op IN (0, 1))
), srt AS NOT MATERIALIZED (  -- (sk: the device and operation's number and the bucket, one
    -- number: buckets are below 2^20; one key where two were makes the window's input, which
    -- DuckDB spills, narrower)
    SELECT sq.sid * 1048576 + rt.k AS sk, rt.time_ns, rt.sector, rt.end_sector
    FROM rt JOIN sq ON sq.rid = rt.rid AND sq.device = rt.device AND sq.op = rt.op
), seq_last AS (  -- the end of the previous bucket's last request of each device and operation
    SELECT sk, lag(last_end) OVER (PARTITION BY sk // 1048576 ORDER BY sk) AS before_end
    FROM (SELECT sk, max_by(end_sector, (time_ns, sector, end_sector)) AS last_end
          FROM srt GROUP BY ALL)
), seq_rows AS (  -- (the carried row first: its time is null)
    SELECT sk, time_ns, sector, end_sector FROM srt
    UNION ALL
    SELECT sk, NULL, NULL, before_end FROM seq_last WHERE before_end IS NOT NULL
), seqs AS (
    -- requests of the same device and operation in (time, sector) order; ties of both in
    -- the order of their end, as a file sorted by all three lists them
    SELECT tb.run,
           avg(CASE WHEN sector = prev_end THEN 1.0 ELSE 0.0 END) AS sequential_fraction
    FROM (SELECT sk, time_ns, sector,
                 lag(end_sector) OVER (PARTITION BY sk ORDER BY time_ns ASC NULLS FIRST,
                                       sector, end_sector) AS prev_end
          FROM seq_rows) x
    JOIN sq ON sq.sid = x.sk // 1048576 JOIN tb ON tb.rid = sq.rid
    WHERE x.time_ns IS NOT NULL
    GROUP BY tb.run
), gap_rows AS (  -- each bucket's arrivals after a row with the earlier buckets' last arrival
    -- (rk: the run's number and the bucket, one number, as srt's sk). The carried arrival is
    -- before every arrival of the bucket (buckets are ranges of time), so it is first in time
    -- order, and its own gap, the first of each bucket, is null: no mark is needed
    SELECT rid * 1048576 + k AS rk, time_ns FROM rt
    UNION ALL
    SELECT rid * 1048576 + k, before_t
    FROM (SELECT rid, k, max(t_max) OVER (PARTITION BY rid ORDER BY k
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                     AS before_t
          FROM (SELECT rid, k, max(time_ns) AS t_max FROM rt GROUP BY ALL))
    WHERE before_t IS NOT NULL
), gap AS (  -- read by exact_quantiles and the sums: kept (a window's result), as numbers only
    SELECT tb.rid, x.g, x.g - tb.m AS d
    FROM (SELECT rk, time_ns - lag(time_ns) OVER (PARTITION BY rk ORDER BY time_ns) AS g
          FROM gap_rows) x
    JOIN tb ON tb.rid = x.rk // 1048576
    WHERE g IS NOT NULL
), gap_q AS (
    SELECT gap.rid AS g, gap.g / 1e6 AS x FROM gap
), gq AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g AS rid, list(value ORDER BY q) AS q FROM exact_quantiles('gap_q', [0.5, 0.99])
    GROUP BY g
), gaps AS (
    -- cv: the population standard deviation from exact sums of the gaps less m (d), not
    -- stddev_pop, whose floating-point sums depend on the order DuckDB's threads meet the
    -- rows: var = mean(d^2) - mean(d)^2, where 0 <= mean(d) < 1
    SELECT tb.run, a.mean_ms, a.cv, gq.q, a.max_ms
    FROM (SELECT rid, avg(g) / 1e6 AS mean_ms,
                 sqrt(greatest(CAST(sum(CAST(d AS HUGEINT) * d) AS DOUBLE) / count(*)
                               - pow(CAST(sum(d) AS DOUBLE) / count(*), 2), 0)) / avg(g) AS cv,
                 max(g) / 1e6 AS max_ms
          FROM gap GROUP BY rid) a
    JOIN tb ON tb.rid = a.rid
    LEFT JOIN gq ON gq.rid = a.rid
), wdev AS MATERIALIZED (
    -- one row per run and device that reads or writes: a number, the span of its ranges (all,
    -- reads, writes) and the bucket width of its starts (about 256 a bucket, at most 2^20)
    SELECT row_number() OVER () AS id, *,
           (s1 - s0) // least(greatest(n // 256, 1), 1048576) + 1 AS w
    FROM (SELECT rid, device, count(*) AS n, min(sector) AS s0, max(sector) AS s1,
                 max(end_sector) AS e1,
                 min(sector) FILTER (WHERE op = 0) AS s0r,
                 max(end_sector) FILTER (WHERE op = 0) AS e1r,
                 min(sector) FILTER (WHERE op = 1) AS s0w,
                 max(end_sector) FILTER (WHERE op = 1) AS e1w
          FROM rt WHERE op IN (0, 1) AND size_bytes > 0 GROUP BY rid, device)
), wk AS NOT MATERIALIZED (  -- each read and write: its device's number and bucket (one number,
    -- as srt's sk), operation and range
    SELECT wdev.id * 1048576 + (rt.sector - wdev.s0) // wdev.w AS gk, rt.op,
           rt.sector AS a, rt.end_sector AS c
    FROM rt JOIN wdev ON wdev.rid = rt.rid AND wdev.device = rt.device
    WHERE rt.op IN (0, 1) AND rt.size_bytes > 0
), wb AS (  -- per bucket: the furthest end of the device's earlier buckets, reads and writes
    SELECT gk,
           max(c_r) OVER (PARTITION BY gk // 1048576 ORDER BY gk
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_r,
           max(c_w) OVER (PARTITION BY gk // 1048576 ORDER BY gk
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_w
    FROM (SELECT gk, max(c) FILTER (WHERE op = 0) AS c_r, max(c) FILTER (WHERE op = 1) AS c_w
          FROM wk GROUP BY gk)
), wseq AS (  -- each bucket's ranges after rows (starts null, first) that carry those ends
    SELECT gk, op, a, c FROM wk
    UNION ALL
    SELECT gk, 0, NULL, before_r FROM wb WHERE before_r IS NOT NULL
    UNION ALL
    SELECT gk, 1, NULL, before_w FROM wb WHERE before_w IS NOT NULL
), ws_gaps AS (
    -- sectors between islands of addressed sectors: a new island starts where no earlier
    -- range (in sector order) reaches; of all ranges, of the reads', of the writes', in one
    -- window over each request once (before: interval_gaps, queries/_macros.sql, over each
    -- request twice, as one of all and one of its operation: the window's input, which
    -- DuckDB spills, was twice as long). Ordered by start alone, as interval_gaps is: among
    -- equal starts only the first in the order can start an island (ends are at or past
    -- starts), of all and of each operation alike, so the gaps do not depend on ties
    SELECT gk // 1048576 AS id,
           coalesce(sum(a - pe) FILTER (WHERE a > pe), 0) AS gap_all,
           coalesce(sum(a - pe_r) FILTER (WHERE op = 0 AND a > pe_r), 0) AS gap_r,
           coalesce(sum(a - pe_w) FILTER (WHERE op = 1 AND a > pe_w), 0) AS gap_w
    FROM (SELECT gk, op, a,
                 max(c) OVER win AS pe,
                 max(c) FILTER (WHERE op = 0) OVER win AS pe_r,
                 max(c) FILTER (WHERE op = 1) OVER win AS pe_w
          FROM wseq
          WINDOW win AS (PARTITION BY gk ORDER BY a ASC NULLS FIRST
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
    GROUP BY 1
), ws AS (  -- the union of the ranges: each device's span less its gaps
    SELECT tb.run,
           coalesce(sum(CAST(d.e1 - d.s0 AS HUGEINT) - coalesce(g.gap_all, 0)), 0) * 512
               AS all_bytes,
           coalesce(sum(CAST(d.e1r - d.s0r AS HUGEINT) - coalesce(g.gap_r, 0))
                        FILTER (WHERE d.s0r IS NOT NULL), 0) * 512 AS read_bytes,
           coalesce(sum(CAST(d.e1w - d.s0w AS HUGEINT) - coalesce(g.gap_w, 0))
                        FILTER (WHERE d.s0w IS NOT NULL), 0) * 512 AS write_bytes
    FROM wdev d LEFT JOIN ws_gaps g ON g.id = d.id
    JOIN tb ON tb.rid = d.rid
    GROUP BY tb.run
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
    -- the top extents of each run kept by arg_min (a heap of `top` rows per run), not a
    -- window over every extent of the run
    SELECT run, 3 AS sec, 'hottest_extents' AS section, place AS k,
           CAST(x.device AS VARCHAR) || ':' || CAST(x.first_sector AS VARCHAR) AS item,
           CAST(x.n AS DOUBLE) AS value
    FROM (SELECT run, unnest(l) AS x, generate_subscripts(l, 1) AS place
          FROM (SELECT run,
                       arg_min({'device': device, 'first_sector': first_sector, 'n': n},
                               {'n': -n, 'device': device, 'first_sector': first_sector},
                               greatest((SELECT top FROM p), 1)) AS l
                FROM (SELECT run, device, sector // p.extent_sectors * p.extent_sectors
                                 AS first_sector, count(*) AS n
                      FROM r, p WHERE op IN (0, 1) GROUP BY ALL)
                GROUP BY run)), p
    WHERE place <= p.top
)
SELECT run, section, item, value FROM (
    SELECT * FROM summary UNION ALL SELECT * FROM sizes UNION ALL SELECT * FROM hot
)
ORDER BY run, sec, k;
