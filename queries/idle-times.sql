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
WITH r AS NOT MATERIALIZED (  -- read again, not spilled: see ra
    SELECT run, device, devno, arrival_ns AS a, complete_ns AS c
    FROM device_ios
    WHERE complete_ns IS NOT NULL AND complete_ns >= arrival_ns
      AND ($device = '' OR device = $device)
), dev AS MATERIALIZED (  -- one row per device, numbered once: its first arrival and last
    -- completion
    SELECT row_number() OVER () AS id, *
    FROM (SELECT run, device, min(devno) AS devno, min(a) AS a0, max(c) AS c1
          FROM r GROUP BY run, device)
), ra AS NOT MATERIALIZED (
    -- r and ra are read again from the run's Parquet by each reader, not materialized: DuckDB
    -- materializes a CTE read more than once, a spilled copy of every request (over 20 M
    -- requests: 1.8 GB of spill and 7.7 s materialized, 0.5 GB and 5.4 s not)
    SELECT dev.id AS g, r.a, r.c FROM r JOIN dev ON dev.run = r.run AND dev.device = r.device
), gaps AS (
    -- an idle period ends at a request that arrives after every earlier one completed, and
    -- began at the latest of those completions, in bounded memory (interval_gaps,
    -- queries/_macros.sql); busy periods are the idle periods + 1, busy time the span from
    -- first arrival to last completion less the idle time
    SELECT g AS id, e - s AS idle FROM interval_gaps('ra')
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
