-- orion-points: what each data point of an Orion matrix gave (a trace from blocklab synth
-- orion and its run folder, given together): the point's small and large outstanding I/Os
-- (a stream's outstanding count, summed over the point's streams of small and of large
-- I/Os; small I/Os are the trace's smallest size), requests, IOPS and MB/s (10^6 bytes a
-- second) over the point (first arrival to last completion), and the mean latency of its
-- small I/Os in ms. Orion reports the same per point: IOPS of its small I/Os and MB/s of its
-- large ones.
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
), fig AS (
    SELECT phase, count(*) AS requests,
           count(*) FILTER (WHERE is_small) AS small_requests,
           CAST(sum(size_bytes) FILTER (WHERE NOT is_small) AS DOUBLE) AS large_bytes,
           CAST(sum(size_bytes) AS DOUBLE) AS bytes,
           (max(complete_ns) - min(arrival_ns)) / 1e9 AS span_s,
           avg(latency_ns) FILTER (WHERE is_small) / 1e6 AS small_mean_ms
    FROM io GROUP BY phase
)
SELECT p.phase, p.small_outstanding, p.large_outstanding, f.requests,
       f.requests / f.span_s                        AS iops,
       f.small_requests / f.span_s                  AS small_iops,
       f.bytes / 1e6 / f.span_s                     AS mb_per_s,
       coalesce(f.large_bytes, 0) / 1e6 / f.span_s  AS large_mb_per_s,
       f.small_mean_ms
FROM pts p JOIN fig f USING (phase)
ORDER BY p.phase;
