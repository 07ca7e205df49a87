-- drive-utilization: per run, drive and interval: busy fraction (busy time / interval; the
-- busy time of operations served at once is summed, so a drive serving several at once can
-- exceed 1), mean queue depth (operations at the drive, queued or in service, averaged over
-- the interval), operations and IOPS, MB/s (10^6 bytes per second) of the operations started,
-- with the drive's group and role from meta.json.
-- Views: drive_busy, drives.
-- Param: interval_s = 0.0  merge the run's intervals into intervals of this many seconds
--   (0: the run's own interval, meta.json interval_ns).
WITH p AS (
    SELECT CASE WHEN $interval_s >= 0 THEN CAST(round($interval_s * 1e9) AS BIGINT)
                ELSE error('interval_s must be at least 0') END AS iv
), b AS (
    SELECT
        run, drive, "group",
        CASE WHEN p.iv > 0 THEN time_ns // p.iv * p.iv ELSE time_ns END AS t_ns,
        CAST(sum(interval_ns) AS BIGINT)  AS interval_ns,
        CAST(sum(busy_ns) AS BIGINT)      AS busy_ns,
        CAST(sum(ops) AS BIGINT)          AS ops,
        CAST(sum(bytes) AS BIGINT)        AS bytes,
        CAST(sum(queue_op_ns) AS BIGINT)  AS queue_op_ns
    FROM drive_busy, p
    GROUP BY ALL
)
SELECT
    b.run, b.drive, b."group", d.role,
    b.t_ns / 1e9                           AS t_s,
    b.interval_ns / 1e9                    AS interval_s,
    b.busy_ns / b.interval_ns              AS busy_fraction,
    b.queue_op_ns / b.interval_ns          AS queue_depth,
    b.ops,
    b.ops / (b.interval_ns / 1e9)          AS iops,
    b.bytes / 1e6 / (b.interval_ns / 1e9)  AS mb_per_s
FROM b LEFT JOIN drives d ON d.run = b.run AND d.drive = b.drive
WHERE b.interval_ns > 0
ORDER BY b.run, b.drive, t_s;
