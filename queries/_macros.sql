-- Macros every query may call, created on each connection (pipeline/query.py connect); not a
-- named query (the leading underscore keeps it out of `blocklab query --list`).
--
-- exact_quantiles(src, qs): the exact quantiles qs (a list of fractions 0 to 1) of x in each
-- group g of the table or CTE named src (columns g, any type, and x, a number; null x are
-- left out), one row (g, q, value) per group and quantile. value interpolates linearly
-- between the order statistics at floor((n - 1) q) and the next, as quantile_cont and
-- numpy.quantile do (to the last bit, or one unit in it where DuckDB's C++ rounds the
-- multiply-add differently).
--
-- Why not quantile_cont: it keeps every value of a group in memory (8 bytes each; 8 GB over a
-- billion requests) and cannot spill, so a DuckDB memory limit makes it fail instead. Here
-- two hash aggregates, which DuckDB spills to disk, do the work: the first counts x per
-- group and log-spaced bucket (1,024 per octave; any non-decreasing function of x would do),
-- which gives each bucket's first rank; the second counts the distinct x of the few buckets
-- holding a wanted rank, which gives each value's first rank. Memory then grows with the
-- number of buckets and of distinct values in those buckets, not with the rows; for integer
-- x (nanoseconds) the distinct values of a bucket are at most its width, 0.07 % of its value
-- at 1,024 buckets an octave, however many rows. At 256 an octave the second aggregate of
-- latency-cdf's 208 points over a billion requests spilled 12 GB and peaked at 1.7 GB RSS
-- (572 s); at 1,024 over 20 M requests its peak is 366 MB instead of 737 MB, 11 s instead of
-- 13 s; at 2,048 and more the first aggregate of latency-summary's groups no longer fits
-- 40 MB without spilling (tests/test_exact_quantiles.py). The values
-- (v) are read twice, NOT MATERIALIZED: DuckDB materializes a CTE read more than once, and
-- that copy of every row grew the process past the memory limit (run-latency under a 256 MB
-- limit, peak RSS 392 MB at 10 M requests and 449 MB at 30 M; not materialized 196 and 205).
CREATE OR REPLACE MACRO exact_quantiles(src, qs) AS TABLE
WITH v AS NOT MATERIALIZED (  -- read twice, never held: see the note above
    SELECT g, x, CAST(floor(log2(greatest(x, 0) + 1) * 1024) AS BIGINT) AS bk
    FROM query_table(src) WHERE x IS NOT NULL
), b AS (
    SELECT g, bk, count(*) AS c FROM v GROUP BY ALL
), cb AS (
    SELECT g, bk, c, sum(c) OVER (PARTITION BY g ORDER BY bk) - c AS before,
           sum(c) OVER (PARTITION BY g) AS n
    FROM b
), t AS (
    SELECT DISTINCT g, n, q, (n - 1) * q AS pos, CAST(floor((n - 1) * q) AS BIGINT) AS lo,
           least(CAST(floor((n - 1) * q) AS BIGINT) + 1, n - 1) AS hi
    FROM (SELECT DISTINCT g, n FROM cb), (SELECT CAST(unnest(qs) AS DOUBLE) AS q)
), tr AS (
    SELECT g, lo AS r FROM t UNION SELECT g, hi FROM t
), tb AS (
    SELECT DISTINCT cb.g, cb.bk, cb.before FROM tr JOIN cb
        ON cb.g IS NOT DISTINCT FROM tr.g AND tr.r >= cb.before AND tr.r < cb.before + cb.c
), need AS (  -- the few (group, bucket) pairs, as one small list
    SELECT list(DISTINCT {'g': g, 'bk': bk}) AS l FROM tb
), vv AS (
    -- a filter against that list, not a join: DuckDB may build a join's hash table on the
    -- values' side (its estimate of tb is large), which does not fit a memory limit
    -- (measured: 10 M values, two grouping sets, 100 MB: out of memory); struct equality
    -- matches null groups as IS NOT DISTINCT FROM does
    SELECT v.g, v.bk, v.x, count(*) AS c
    FROM v WHERE list_contains((SELECT l FROM need), {'g': v.g, 'bk': v.bk})
    GROUP BY ALL
), vc AS (
    SELECT vv.g, vv.x, vv.c,
           tb.before + sum(vv.c) OVER (PARTITION BY vv.g, vv.bk ORDER BY vv.x) - vv.c AS first
    FROM vv JOIN tb ON vv.g IS NOT DISTINCT FROM tb.g AND vv.bk = tb.bk
), rv AS (
    SELECT tr.g, tr.r, vc.x FROM tr JOIN vc
        ON vc.g IS NOT DISTINCT FROM tr.g AND tr.r >= vc.first AND tr.r < vc.first + vc.c
)
SELECT t.g, t.q, CAST(a.x AS DOUBLE) + (t.pos - t.lo) * (CAST(z.x AS DOUBLE) - a.x) AS value
FROM t JOIN rv a ON a.g IS NOT DISTINCT FROM t.g AND a.r = t.lo
       JOIN rv z ON z.g IS NOT DISTINCT FROM t.g AND z.r = t.hi;

-- interval_gaps(src): the gaps between the intervals [a, c) of each group g (a number) of the
-- table or CTE named src (columns g, a, c with c >= a), one row (g, s, e) per gap, in the
-- order of a: a gap ends at an interval that starts (e = its a) after every interval that
-- started before it ended, and began at the latest of their ends (s); the time before the
-- first start and after the last end is not a gap. With a request's arrival and completion
-- these are a device's idle periods (idle-times, iostat's %util); with a request's first and
-- end sector, the sectors between the islands a device's requests address (workload's
-- working set).
--
-- In bounded memory: a window partitioned by a group alone holds the group's whole stream
-- and ran out of DuckDB's memory limit (3 M requests under 60-80 MB, 10 M under 100 MB), so
-- every window here is over a bucket of a group's starts (about 256 intervals, up to 2^20
-- buckets) or over one row per bucket: s is a running max of ends over the interval's
-- bucket, started from a first row that carries the last end of the buckets before.
CREATE OR REPLACE MACRO interval_gaps(src) AS TABLE
WITH r AS NOT MATERIALIZED (  -- read twice, never held (as exact_quantiles' v)
    SELECT g, a, c FROM query_table(src)
), w AS MATERIALIZED (  -- per group: a number from 0, first start and bucket width
    SELECT row_number() OVER () - 1 AS gid, *
    FROM (SELECT g, min(a) AS a0,
                 (max(a) - min(a)) // least(greatest(count(*) // 256, 1), 1048576) + 1 AS w
          FROM r GROUP BY g)
), rk AS (  -- each interval's group number and bucket as one number (buckets are below 2^20;
    -- a whole number whatever a's type: // divides DOUBLE and DECIMAL without truncating, and
    -- a fraction there packed nothing; any bucket that does not decrease with a will do)
    SELECT w.gid * 1048576 + least(CAST(floor((r.a - w.a0) / w.w) AS BIGINT), 1048575) AS gk,
           r.a, r.c
    FROM r JOIN w ON w.g = r.g
), bk AS (  -- per bucket: the last end of the group's buckets before it
    SELECT gk,
           max(c_max) OVER (PARTITION BY gk // 1048576 ORDER BY gk
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_c
    FROM (SELECT gk, max(c) AS c_max FROM rk GROUP BY gk)
), seq AS (  -- each bucket's intervals after a first row (a null) that carries before_c
    SELECT gk, a, c FROM rk
    UNION ALL
    SELECT gk, NULL, before_c FROM bk WHERE before_c IS NOT NULL
), pv AS (
    -- ordered by start: among intervals of equal start the first in the order gets the
    -- latest end before them, and the others an end at or past their start (c >= a), so no
    -- gap; the gaps do not depend on how ties are ordered, but for an interval with no end
    -- (a null c), which goes after those of its start that have one, as before. Three small
    -- keys (the bucket number, the start, whether c is null) instead of four: the window's
    -- input, which DuckDB spills, is narrower
    SELECT gk, a,
           max(c) OVER (PARTITION BY gk ORDER BY a ASC NULLS FIRST, c IS NULL
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM seq
)
SELECT w.g, pv.prev_end AS s, pv.a AS e
FROM pv JOIN w ON w.gid = pv.gk // 1048576 WHERE pv.a > pv.prev_end;
