-- idle-times: per run and device, the distribution of idle periods: the gaps between busy
-- periods, a busy period being a stretch of time with at least one request in progress
-- (arrival to completion, as %util of the iostat query; btt's activity data, btt guide
-- section 5, draws the same on/off periods). Busy periods and seconds, idle periods and
-- seconds, the idle fraction of the time from the device's first arrival to its last
-- completion, the idle periods' mean, p50, p90, p99 and max in ms, and their counts by
-- length: < 0.1 ms, 0.1-1 ms, 1-10 ms, 10-100 ms, 0.1-1 s, >= 1 s. The time before the first
-- arrival and after the last completion is not an idle period.
-- View: device_ios.
-- Param: device = ''  only this device (as the device column writes it); '' = every device.
WITH r AS (
    SELECT run, device, devno, arrival_ns AS a, complete_ns AS c
    FROM device_ios
    WHERE complete_ns IS NOT NULL AND complete_ns >= arrival_ns
      AND ($device = '' OR device = $device)
), dev AS (
    -- In bounded memory: a window partitioned by device alone ran out of DuckDB's memory limit
    -- (measured: 3 M requests under 80 MB, 10 M under 100 MB), so every window here is over a
    -- time bucket of a device (about 256 requests, up to 2^20 buckets) or over one row per
    -- bucket. An idle period ends at a request that arrives after every earlier one (in
    -- arrival order) completed, and began at the latest of those completions (prev_end):
    -- prev_end is a running max over the request's bucket that starts from the last completion
    -- of the buckets before it. Busy periods are the idle periods + 1; busy time is the span
    -- from first arrival to last completion less the idle time.
    --
    -- One row per device: a number, first arrival, last completion, bucket width.
    SELECT row_number() OVER () AS id, *
    FROM (SELECT run, device, min(devno) AS devno, min(a) AS a0, max(c) AS c1,
                 (max(a) - min(a)) // least(greatest(count(*) // 256, 1), 1048576) + 1 AS w
          FROM r GROUP BY run, device)
), rk AS (
    SELECT dev.id, r.a, r.c, (r.a - dev.a0) // dev.w AS k
    FROM r JOIN dev ON dev.run = r.run AND dev.device = r.device
), bk AS (  -- per bucket: the last completion of the buckets before it
    SELECT id, k,
           max(c_max) OVER (PARTITION BY id ORDER BY k
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_c
    FROM (SELECT id, k, max(c) AS c_max FROM rk GROUP BY ALL)
), seq AS (  -- each bucket's requests after a first row that carries before_c
    SELECT id, k, 0 AS first, a, c FROM rk
    UNION ALL
    SELECT id, k, -1, NULL, before_c FROM bk WHERE before_c IS NOT NULL
), pv AS (
    SELECT id, first, a,
           max(c) OVER (PARTITION BY id, k ORDER BY first, a, c
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM seq
), gaps AS (
    SELECT id, a - prev_end AS idle FROM pv WHERE first = 0 AND a > prev_end
), qv AS (
    SELECT id AS g, idle AS x FROM gaps
), qs AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g, list(value ORDER BY q) AS q
    FROM exact_quantiles('qv', [0.5, 0.9, 0.99]) GROUP BY g
), agg AS (
    SELECT
        id,
        count(idle)                                       AS idle_periods,
        sum(idle)                                         AS idle_ns,
        avg(idle) / 1e6                                   AS mean_ms,
        max(idle) / 1e6                                   AS max_ms,
        count(*) FILTER (WHERE idle < 100000)                         AS "<0.1ms",
        count(*) FILTER (WHERE idle >= 100000 AND idle < 1000000)     AS "0.1-1ms",
        count(*) FILTER (WHERE idle >= 1000000 AND idle < 10000000)   AS "1-10ms",
        count(*) FILTER (WHERE idle >= 10000000 AND idle < 100000000) AS "10-100ms",
        count(*) FILTER (WHERE idle >= 100000000 AND idle < 1000000000) AS "0.1-1s",
        count(*) FILTER (WHERE idle >= 1000000000)                    AS ">=1s"
    FROM gaps GROUP BY id
)
SELECT dev.run, dev.device,
       coalesce(agg.idle_periods, 0) + 1                                   AS busy_periods,
       (CAST(dev.c1 - dev.a0 AS HUGEINT) - coalesce(agg.idle_ns, 0)) / 1e9 AS busy_s,
       coalesce(agg.idle_periods, 0)                                       AS idle_periods,
       coalesce(agg.idle_ns, 0) / 1e9                                      AS idle_s,
       coalesce(agg.idle_ns, 0) / nullif(dev.c1 - dev.a0, 0)              AS idle_fraction,
       agg.mean_ms,
       qs.q[1] / 1e6 AS p50_ms, qs.q[2] / 1e6 AS p90_ms, qs.q[3] / 1e6 AS p99_ms,
       agg.max_ms,
       coalesce(agg."<0.1ms", 0) AS "<0.1ms", coalesce(agg."0.1-1ms", 0) AS "0.1-1ms",
       coalesce(agg."1-10ms", 0) AS "1-10ms", coalesce(agg."10-100ms", 0) AS "10-100ms",
       coalesce(agg."0.1-1s", 0) AS "0.1-1s", coalesce(agg.">=1s", 0) AS ">=1s"
FROM dev LEFT JOIN agg ON agg.id = dev.id
LEFT JOIN qs ON qs.g = dev.id
ORDER BY dev.run, dev.devno, dev.device;
