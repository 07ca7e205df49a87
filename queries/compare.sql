-- compare: runs side by side on the headline figures, one row per figure and one column per
-- run: requests, duration_s (first arrival to last completion), iops, mb_per_s,
-- read_mb_per_s and write_mb_per_s (10^6 bytes per second over the duration), latency
-- mean_ms, p50_ms, p99_ms, p999_ms, max_ms, read_p99_ms, write_p99_ms, the drives' busy
-- fraction (busy time over the run's span of intervals: drive_busy_mean over the drives,
-- drive_busy_max the busiest), failures and data_loss events, and lost_requests (ios.lost:
-- a real array fails them; the latencies leave them out). A run with no requests has its
-- column too (requests 0, no rates or latencies), where it dropped out of the table.
-- Views: ios, drive_busy, events, runs.
WITH h0 AS (
    SELECT
        run,
        count(*)                                                   AS requests,
        (max(complete_ns) - min(arrival_ns)) / 1e9                 AS duration_s,
        coalesce(sum(size_bytes), 0)                               AS bytes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0)         AS read_bytes,
        coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0)         AS write_bytes,
        avg(latency_ns) / 1e6                                      AS mean_ms,
        max(latency_ns) / 1e6                                      AS max_ms,
        count(*) FILTER (WHERE lost)                               AS lost
    FROM ios GROUP BY run
), h AS (
    SELECT * FROM h0
    UNION ALL
    SELECT run, 0, NULL, 0, 0, 0, NULL, NULL, 0 FROM runs WHERE run NOT IN (SELECT run FROM h0)
), qv AS NOT MATERIALIZED (  -- every request (op -1) and each op's, for exact_quantiles
    SELECT {'run': run, 'op': -1} AS g, latency_ns AS x FROM ios
    UNION ALL
    SELECT {'run': run, 'op': op}, latency_ns FROM ios WHERE op IN (0, 1)
), qs AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g.run AS run, g.op AS op, list(value ORDER BY q) AS q
    FROM exact_quantiles('qv', [0.5, 0.99, 0.999]) GROUP BY g
), d AS (
    SELECT run, avg(f) AS busy_mean, max(f) AS busy_max
    FROM (SELECT run, drive, sum(busy_ns) / sum(interval_ns) AS f
          FROM drive_busy GROUP BY run, drive HAVING sum(interval_ns) > 0)
    GROUP BY run
), e AS (
    SELECT run, count(*) FILTER (WHERE event = 'failure') AS failures,
           count(*) FILTER (WHERE event = 'data_loss') AS data_loss
    FROM events GROUP BY run
), long AS (
    SELECT h.run, u.ord, u.metric, u.value
    FROM h LEFT JOIN d USING (run) LEFT JOIN e USING (run)
    LEFT JOIN qs qa ON qa.run = h.run AND qa.op = -1
    LEFT JOIN qs qr ON qr.run = h.run AND qr.op = 0
    LEFT JOIN qs qw ON qw.run = h.run AND qw.op = 1,
    LATERAL (VALUES
        (1, 'requests', CAST(h.requests AS DOUBLE)),
        (2, 'duration_s', h.duration_s),
        (3, 'iops', CASE WHEN h.duration_s > 0 THEN h.requests / h.duration_s END),
        (4, 'mb_per_s', CASE WHEN h.duration_s > 0 THEN h.bytes / 1e6 / h.duration_s END),
        (5, 'read_mb_per_s',
            CASE WHEN h.duration_s > 0 THEN h.read_bytes / 1e6 / h.duration_s END),
        (6, 'write_mb_per_s',
            CASE WHEN h.duration_s > 0 THEN h.write_bytes / 1e6 / h.duration_s END),
        (7, 'mean_ms', h.mean_ms),
        (8, 'p50_ms', qa.q[1] / 1e6),
        (9, 'p99_ms', qa.q[2] / 1e6),
        (10, 'p999_ms', qa.q[3] / 1e6),
        (11, 'max_ms', h.max_ms),
        (12, 'read_p99_ms', qr.q[2] / 1e6),
        (13, 'write_p99_ms', qw.q[2] / 1e6),
        (14, 'drive_busy_mean', d.busy_mean),
        (15, 'drive_busy_max', d.busy_max),
        (16, 'failures', CAST(coalesce(e.failures, 0) AS DOUBLE)),
        (17, 'data_loss', CAST(coalesce(e.data_loss, 0) AS DOUBLE)),
        (18, 'lost_requests', CAST(h.lost AS DOUBLE))
    ) AS u(ord, metric, value)
)
SELECT * EXCLUDE (ord) FROM (
    PIVOT long ON run USING first(value) GROUP BY ord, metric
)
ORDER BY ord;
