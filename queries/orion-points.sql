-- orion-points: what each data point of an Orion matrix gave (a trace from blocklab synth
-- orion and its run folder, given together): the point's small and large outstanding I/Os
-- (a stream's outstanding count, summed over the point's streams of small and of large
-- I/Os; small I/Os are the trace's smallest size), requests, IOPS and MB/s (10^6 bytes a
-- second) over the point (first arrival to last completion; in a point of both kinds, to
-- the last completion of the kind that ran out first, counting what completed by then),
-- and the mean latency of its small I/Os in ms. Orion reports the same per point: IOPS of
-- its small I/Os and MB/s of its large ones.
-- Views: ios, trace.
WITH small AS (
    SELECT min(size_bytes) AS size FROM trace
), s AS (
    SELECT stream, any_value(phase) AS phase, any_value(outstanding) AS outst,
           min(size_bytes) = (SELECT size FROM small) AS is_small
    FROM trace GROUP BY stream
), pts AS (
    SELECT phase,
           CAST(coalesce(sum(outst) FILTER (WHERE is_small), 0) AS BIGINT)     AS small_outstanding,
           CAST(coalesce(sum(outst) FILTER (WHERE NOT is_small), 0) AS BIGINT) AS large_outstanding
    FROM s GROUP BY phase
), io AS (
    SELECT s.phase, s.is_small, i.arrival_ns, i.complete_ns, i.size_bytes, i.latency_ns
    FROM ios i JOIN s USING (stream)
), ends AS (
    -- where the point's mix ended: Orion sustains both loads for the point's duration, while
    -- the trace gives each stream a count, so in a mixed point one kind runs out first and
    -- the other goes on alone; the point is measured while both ran (a review found a third
    -- of a point large-only, and its small IOPS 592 where 860 while both ran)
    SELECT phase, min(arrival_ns) AS t0,
           CASE WHEN bool_or(is_small) AND bool_or(NOT is_small)
                THEN least(max(complete_ns) FILTER (WHERE is_small),
                           max(complete_ns) FILTER (WHERE NOT is_small))
                ELSE max(complete_ns) END AS t1
    FROM io GROUP BY phase
), fig AS (
    SELECT io.phase, count(*) AS requests,
           count(*) FILTER (WHERE is_small) AS small_requests,
           CAST(sum(size_bytes) FILTER (WHERE NOT is_small) AS DOUBLE) AS large_bytes,
           CAST(sum(size_bytes) AS DOUBLE) AS bytes,
           (any_value(e.t1) - any_value(e.t0)) / 1e9 AS span_s,
           avg(latency_ns) FILTER (WHERE is_small) / 1e6 AS small_mean_ms
    FROM io JOIN ends e ON e.phase = io.phase AND io.complete_ns <= e.t1
    GROUP BY io.phase
)
SELECT p.phase, p.small_outstanding, p.large_outstanding, f.requests,
       f.requests / f.span_s                        AS iops,
       f.small_requests / f.span_s                  AS small_iops,
       f.bytes / 1e6 / f.span_s                     AS mb_per_s,
       coalesce(f.large_bytes, 0) / 1e6 / f.span_s  AS large_mb_per_s,
       f.small_mean_ms
FROM pts p JOIN fig f USING (phase)
ORDER BY p.phase;
