-- iostat: what `iostat -x` would have shown, per run, device and interval: r/s, w/s, rkB/s,
-- wkB/s, rrqm/s, wrqm/s, r_await, w_await (ms), aqu-sz, rareq-sz, wareq-sz (kB) and %util,
-- with sysstat's definitions (man/iostat.in; iostat.c) over the kernel's counters
-- (Documentation/admin-guide/iostats.rst), computed from each request's arrival and completion.
-- Counts, kB, merges and await are taken at completion, as the kernel counts them; await is
-- arrival to completion (time in queue and in service); aqu-sz is the time-average number of
-- requests in progress (arrival to completion) over the interval (iostats field 11); %util is
-- the share of the interval with at least one request in progress (field 10). Reads and
-- writes are ops read and write; discards, flushes and others count in aqu-sz and %util only.
-- kB are 1024 bytes. Intervals run from 0 to the run's last completion (the last may be
-- short: interval_s); an interval with no read has r_await and rareq-sz 0, as iostat prints.
-- View: device_ios.
-- Param: interval_s = 1.0  interval length in seconds (at least 1 microsecond).
-- Param: device = ''  only this device (as the device column writes it); '' = every device.
-- Threads: 1  (over 300 M requests on two threads it ran out of DuckDB's 1 GB: its windows,
-- sorts and aggregates at once, each thread with its own; on one, 1.3 GB of RSS and 6 min)
WITH p AS (
    SELECT CASE WHEN $interval_s >= 1e-6 THEN CAST(round($interval_s * 1e9) AS BIGINT)
                ELSE error('interval_s must be at least 1e-6 seconds') END AS iv
), dv AS MATERIALIZED (  -- one row per run and device with a completed request: a number
    SELECT row_number() OVER () AS g, *
    FROM (SELECT run, device, min(devno) AS devno FROM device_ios
          WHERE complete_ns IS NOT NULL AND complete_ns >= arrival_ns GROUP BY run, device)
), r_all AS NOT MATERIALIZED (
    -- read from Parquet by each of its readers, not kept: kept once (DuckDB spills it past its
    -- limit) it cost about 30 bytes of temporary disk a request, and the query at a billion
    -- requests about 72 GB in all (10 M requests under a 200 MB limit: 647 -> 360 MB, 19.7 ->
    -- 13.0 s; the same rows). The scans at once need more memory than one copy: 55 MB on one
    -- thread where the copy fit in 50 (tests/test_query_memory.py gives this query 60), far
    -- below the 1 GB that DuckDB has by default. A request carries its device's number (dv),
    -- not its run's and device's names: half the width to sort and to join
    SELECT dv.g, d.op, d.arrival_ns AS a, d.complete_ns AS c, d.size_bytes, d.merges
    FROM device_ios d JOIN dv ON dv.run = d.run AND dv.device = d.device
    WHERE d.complete_ns IS NOT NULL AND d.complete_ns >= d.arrival_ns
), span AS (  -- per device: its run's last completion and last interval
    SELECT dv.g, s.end_ns, s.last_k
    FROM dv JOIN (SELECT dv.run, max(m.c1) AS end_ns,
                         greatest((max(m.c1) - 1) // any_value(p.iv), 0) AS last_k
                  FROM (SELECT g, max(c) AS c1 FROM r_all GROUP BY g) m
                  JOIN dv ON dv.g = m.g, p
                  GROUP BY dv.run) s ON s.run = dv.run
), r AS NOT MATERIALIZED (  -- (see r_all)
    SELECT * FROM r_all
    WHERE $device = '' OR g IN (SELECT g FROM dv WHERE device = $device)
), done AS (
    SELECT r.g, least(r.c // p.iv, span.last_k) AS k,
           count(*) FILTER (WHERE op = 0)                          AS rd,
           count(*) FILTER (WHERE op = 1)                          AS wr,
           coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0)      AS rd_bytes,
           coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0)      AS wr_bytes,
           coalesce(sum(merges) FILTER (WHERE op = 0), 0)          AS rd_merges,
           coalesce(sum(merges) FILTER (WHERE op = 1), 0)          AS wr_merges,
           coalesce(sum(c - a) FILTER (WHERE op = 0), 0)           AS rd_ticks_ns,
           coalesce(sum(c - a) FILTER (WHERE op = 1), 0)           AS wr_ticks_ns
    FROM r JOIN span ON span.g = r.g, p
    GROUP BY ALL
), queue AS (
    -- each request adds the part of its time in progress that falls in the interval; the
    -- intervals are unnested in the select list: a LATERAL generate_series is joined back to
    -- the distinct requests in a hash table, which holds every request (measured on this
    -- part alone over 3 M requests: out of memory under 40 MB; unnested, 0.6 s under 40 MB)
    SELECT g, k, sum(least(c, (k + 1) * iv) - greatest(a, k * iv)) AS queue_ns
    FROM (SELECT r.g, r.a, r.c, p.iv,
                 unnest(generate_series(r.a // p.iv, (r.c - 1) // p.iv)) AS k
          FROM r, p WHERE r.c > r.a)
    GROUP BY ALL
), dev AS MATERIALIZED (  -- one row per device: its first arrival and last completion
    SELECT g AS id, min(a) AS a0, max(c) AS c1 FROM r GROUP BY g
), ra AS NOT MATERIALIZED (  -- (see r_all)
    SELECT g, a, c FROM r
), gaps AS (
    -- %util in bounded memory: busy time is the device's span from first arrival to last
    -- completion less its idle gaps (interval_gaps, queries/_macros.sql: a window over a
    -- device's whole stream ran out of DuckDB's memory limit, 3 M requests under 60 MB)
    SELECT g AS id, s, e FROM interval_gaps('ra')
), util AS (
    -- busy time in each interval: the device's span from its first arrival to its last
    -- completion less its idle gaps, each cut at the interval's bounds
    SELECT id AS g, k,
           sum(sign * (least(e, (k + 1) * iv) - greatest(s, k * iv))) AS busy_ns
    FROM (SELECT id, s, e, iv, sign, unnest(generate_series(s // iv, (e - 1) // iv)) AS k
          FROM (SELECT id, a0 AS s, c1 AS e, 1 AS sign FROM dev WHERE c1 > a0
                UNION ALL
                SELECT id, s, e, -1 FROM gaps), p)
    GROUP BY ALL
), grid AS (
    SELECT dv.run, dv.device, dv.devno, dev.id AS g, k.k,
           least(p.iv, span.end_ns - k.k * p.iv) AS len_ns, k.k * p.iv AS t_ns
    FROM dev JOIN dv ON dv.g = dev.id JOIN span ON span.g = dev.id, p,
         LATERAL generate_series(0, span.last_k) AS k(k)
)
SELECT
    grid.run,
    grid.device,
    grid.t_ns / 1e9                                                       AS t_s,
    grid.len_ns / 1e9                                                     AS interval_s,
    coalesce(done.rd, 0) / (grid.len_ns / 1e9)                            AS "r/s",
    coalesce(done.wr, 0) / (grid.len_ns / 1e9)                            AS "w/s",
    coalesce(done.rd_bytes, 0) / 1024 / (grid.len_ns / 1e9)               AS "rkB/s",
    coalesce(done.wr_bytes, 0) / 1024 / (grid.len_ns / 1e9)               AS "wkB/s",
    coalesce(done.rd_merges, 0) / (grid.len_ns / 1e9)                     AS "rrqm/s",
    coalesce(done.wr_merges, 0) / (grid.len_ns / 1e9)                     AS "wrqm/s",
    CASE WHEN done.rd > 0 THEN done.rd_ticks_ns / done.rd / 1e6 ELSE 0.0 END AS r_await,
    CASE WHEN done.wr > 0 THEN done.wr_ticks_ns / done.wr / 1e6 ELSE 0.0 END AS w_await,
    coalesce(queue.queue_ns, 0) / grid.len_ns                             AS "aqu-sz",
    CASE WHEN done.rd > 0 THEN done.rd_bytes / 1024 / done.rd ELSE 0.0 END AS "rareq-sz",
    CASE WHEN done.wr > 0 THEN done.wr_bytes / 1024 / done.wr ELSE 0.0 END AS "wareq-sz",
    100 * coalesce(util.busy_ns, 0) / grid.len_ns                         AS "%util"
FROM grid
LEFT JOIN done ON done.g = grid.g AND done.k = grid.k
LEFT JOIN queue ON queue.g = grid.g AND queue.k = grid.k
LEFT JOIN util ON util.g = grid.g AND util.k = grid.k
WHERE grid.len_ns > 0
ORDER BY grid.run, grid.k, grid.devno, grid.device;
