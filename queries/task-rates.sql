-- task-rates: how fast each background task (rebuild, parity initialization) processed data
-- at its start: the bytes its drive operations read and wrote per second over the first
-- `sample_s` seconds after the task began. This is the rate array vendors quote "sampled at
-- the beginning of rebuild / initialization" as "the total amount of processed data per
-- second" (Coraid, SR Performance Updates in Release SR20071022): a RAID-5 rebuild of n
-- drives reads n - 1 and writes one, so it processes n times what it rebuilds. Operations
-- count by the bytes they carried, prorated when they straddle the end of the sample. Needs
-- the run's drive operations (blocklab replay --drive-ops).
-- Views: events, drive_ops.
-- Param: sample_s = 10.0  seconds after the task's start to count (> 0).
WITH p AS (
    SELECT CASE WHEN $sample_s > 0 THEN CAST(round($sample_s * 1e9) AS BIGINT)
                ELSE error('sample_s must be positive') END AS sample_ns
), t AS (
    SELECT run, event, min(time_ns) AS start_ns
    FROM events WHERE event IN ('rebuild_start', 'init_start')
    GROUP BY run, event
), ops AS (
    SELECT t.run, t.event, t.start_ns, p.sample_ns,
           o.write, o.sectors * 512 AS bytes, o.start_ns AS op_start, o.complete_ns AS op_end
    FROM t, p JOIN drive_ops o ON o.run = t.run
    WHERE ((t.event = 'rebuild_start' AND o.kind IN (3, 4))
           OR (t.event = 'init_start' AND o.kind = 5))
      AND o.complete_ns > t.start_ns AND o.start_ns < t.start_ns + p.sample_ns
)
SELECT
    run,
    CASE event WHEN 'rebuild_start' THEN 'rebuild' ELSE 'init' END AS task,
    start_ns / 1e9                                                   AS start_s,
    sample_ns / 1e9                                                  AS sample_s,
    count(*)                                                         AS drive_ops,
    sum(bytes * (least(op_end, start_ns + sample_ns) - greatest(op_start, start_ns))
        / greatest(op_end - op_start, 1)) FILTER (WHERE NOT write)
        / 1e6 / (sample_ns / 1e9)                                    AS read_mb_per_s,
    coalesce(sum(bytes * (least(op_end, start_ns + sample_ns) - greatest(op_start, start_ns))
        / greatest(op_end - op_start, 1)) FILTER (WHERE write), 0)
        / 1e6 / (sample_ns / 1e9)                                    AS write_mb_per_s,
    sum(bytes * (least(op_end, start_ns + sample_ns) - greatest(op_start, start_ns))
        / greatest(op_end - op_start, 1)) / 1e6 / (sample_ns / 1e9)  AS processed_mb_per_s
FROM ops
GROUP BY run, event, start_ns, sample_ns
ORDER BY run, start_s;
