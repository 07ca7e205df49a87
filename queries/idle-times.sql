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
), ordered AS (
    SELECT run, device, devno, a, c,
           max(c) OVER (PARTITION BY run, device ORDER BY a, c
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM r
), islands AS (
    SELECT run, device, devno, a, c,
           sum(CASE WHEN prev_end IS NULL OR a > prev_end THEN 1 ELSE 0 END)
               OVER (PARTITION BY run, device ORDER BY a, c ROWS UNBOUNDED PRECEDING) AS isl
    FROM ordered
), busy AS (
    SELECT run, device, min(devno) AS devno, isl, min(a) AS s, max(c) AS e
    FROM islands GROUP BY run, device, isl
), gaps AS (
    SELECT run, device, devno, s, e,
           lead(s) OVER (PARTITION BY run, device ORDER BY s) - e AS idle
    FROM busy
), qv AS (
    SELECT {'run': run, 'device': device} AS g, idle AS x FROM gaps
), qs AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g, list(value ORDER BY q) AS q
    FROM exact_quantiles('qv', [0.5, 0.9, 0.99]) GROUP BY g
), agg AS (
SELECT
    run, device,
    count(*)                                          AS busy_periods,
    sum(e - s) / 1e9                                  AS busy_s,
    count(idle)                                       AS idle_periods,
    coalesce(sum(idle), 0) / 1e9                      AS idle_s,
    coalesce(sum(idle), 0) / nullif(max(e) - min(s), 0) AS idle_fraction,
    avg(idle) / 1e6                                   AS mean_ms,
    min(devno) AS devno,
    max(idle) / 1e6                                   AS max_ms,
    count(*) FILTER (WHERE idle < 100000)                         AS "<0.1ms",
    count(*) FILTER (WHERE idle >= 100000 AND idle < 1000000)     AS "0.1-1ms",
    count(*) FILTER (WHERE idle >= 1000000 AND idle < 10000000)   AS "1-10ms",
    count(*) FILTER (WHERE idle >= 10000000 AND idle < 100000000) AS "10-100ms",
    count(*) FILTER (WHERE idle >= 100000000 AND idle < 1000000000) AS "0.1-1s",
    count(*) FILTER (WHERE idle >= 1000000000)                    AS ">=1s"
FROM gaps
GROUP BY run, device
)
SELECT agg.run, agg.device, busy_periods, busy_s, idle_periods, idle_s, idle_fraction, mean_ms,
       qs.q[1] / 1e6 AS p50_ms, qs.q[2] / 1e6 AS p90_ms, qs.q[3] / 1e6 AS p99_ms,
       agg.* EXCLUDE (run, device, busy_periods, busy_s, idle_periods, idle_s, idle_fraction,
                      mean_ms, devno)
FROM agg LEFT JOIN qs ON qs.g = {'run': agg.run, 'device': agg.device}
ORDER BY agg.run, agg.devno, agg.device;
