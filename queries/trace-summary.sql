-- trace-summary: headline figures of one trace: counts and bytes by operation, duration,
-- read ratio, IOPS, MB/s (10^6 bytes per second), and latency mean/p50/p99 where known.
-- View: trace (one row per request, blocklab trace schema).
WITH t AS (
    SELECT * FROM trace
), agg AS (
    SELECT
        count(*)                                         AS requests,
        count(*) FILTER (WHERE op = 0)                   AS reads,
        count(*) FILTER (WHERE op = 1)                   AS writes,
        count(*) FILTER (WHERE op = 2)                   AS discards,
        count(*) FILTER (WHERE op = 3)                   AS flushes,
        count(*) FILTER (WHERE op = 4)                   AS others,
        coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0)  AS read_bytes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0)  AS write_bytes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 2), 0)  AS discard_bytes,
        min(time_ns)                                     AS first_ns,
        max(greatest(time_ns, coalesce(complete_ns, time_ns))) AS last_ns,
        count(latency_ns)                                AS with_latency,
        avg(latency_ns)                                  AS lat_mean_ns,
        count(DISTINCT device)                           AS device_count
    FROM t
), qv AS (
    SELECT 0 AS g, latency_ns AS x FROM t
), lat AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT list(value ORDER BY q) AS lat_q FROM exact_quantiles('qv', [0.5, 0.99])
)
SELECT
    requests, reads, writes, discards, flushes, others,
    read_bytes, write_bytes, discard_bytes,
    coalesce((last_ns - first_ns) / 1e9, 0.0)            AS duration_s,
    CASE WHEN reads + writes > 0 THEN reads / (reads + writes) END AS read_ratio,
    CASE WHEN last_ns > first_ns THEN requests / ((last_ns - first_ns) / 1e9) END AS iops,
    CASE WHEN last_ns > first_ns
         THEN (read_bytes + write_bytes) / 1e6 / ((last_ns - first_ns) / 1e9) END AS mb_per_s,
    with_latency,
    lat_mean_ns / 1e6                                    AS latency_mean_ms,
    lat_q[1] / 1e6                                       AS latency_p50_ms,
    lat_q[2] / 1e6                                       AS latency_p99_ms,
    device_count
FROM agg, lat;
