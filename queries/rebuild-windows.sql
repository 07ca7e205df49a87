-- rebuild-windows: each drive failure with its rebuild window and what the host saw in it.
-- The window runs from the failure to the end of the rebuild: the first rebuild_end of the
-- same run and group at or after the failure, naming the same drive if one does (else any
-- drive of the group); a rebuild that never ended closes the window at the run's last
-- completion, which it includes (rebuild_done false). Foreground figures count the host
-- requests (ios) that completed inside the window, and before the failure (the `before_s`
-- seconds before it, or everything before it; from the run's first arrival at the earliest):
-- MB/s and p99 latency in ms, with the ratios window / before. MB/s is 10^6 bytes a second
-- over the part of the span the host's I/O covered (the run's first arrival to its last
-- completion): a rebuild that outlasts the trace does not dilute the window's MB/s with time
-- the host sent nothing (window_host_s says how much of the window that was).
-- Views: events, ios.
-- Param: before_s = 0.0  seconds before the failure to compare with (0: from the run's start).
WITH p AS (
    SELECT CASE WHEN $before_s >= 0 THEN CAST(round($before_s * 1e9) AS BIGINT)
                ELSE error('before_s must be at least 0') END AS before_ns
), f AS (
    SELECT run, "group", drive, time_ns AS failure_ns,
           row_number() OVER (PARTITION BY run ORDER BY time_ns, drive) AS failure
    FROM events WHERE event = 'failure'
), ends AS (
    SELECT run, "group", drive, event, time_ns FROM events
    WHERE event IN ('rebuild_start', 'rebuild_end')
), fe AS (
    -- each failure's rebuild start and end: the first at or after it of its drive, else of
    -- its group. Joins and aggregates, not correlated subqueries: DuckDB estimated those at
    -- 10^11 rows and built its hash join of the windows and ios on ios, which held every
    -- request (a replay of 3 M requests with a failure: out of memory under 100 MB)
    SELECT f.run, f.failure,
           coalesce(min(e.time_ns) FILTER (WHERE e.event = 'rebuild_start'
                                             AND e.drive = f.drive),
                    min(e.time_ns) FILTER (WHERE e.event = 'rebuild_start')) AS start_ns,
           coalesce(min(e.time_ns) FILTER (WHERE e.event = 'rebuild_end' AND e.drive = f.drive),
                    min(e.time_ns) FILTER (WHERE e.event = 'rebuild_end')) AS end_ns
    FROM f LEFT JOIN ends e
        ON e.run = f.run AND e."group" = f."group" AND e.time_ns >= f.failure_ns
    GROUP BY f.run, f.failure
), run_span AS (
    SELECT run, max(complete_ns) AS run_end_ns, min(arrival_ns) AS run_start_ns
    FROM ios GROUP BY run
), w AS (
    SELECT f.*, fe.start_ns, fe.end_ns, rs.run_end_ns, rs.run_start_ns
    FROM f JOIN fe ON fe.run = f.run AND fe.failure = f.failure
    LEFT JOIN run_span rs ON rs.run = f.run
), spans AS (
    SELECT
        w.*,
        end_ns IS NOT NULL                                   AS rebuild_done,
        coalesce(end_ns, greatest(run_end_ns, failure_ns))   AS win_end_ns,
        -- the bound the window's completions stay below: past the last completion when the
        -- rebuild never ended (the window closes at it, and holds it)
        coalesce(end_ns, greatest(run_end_ns + 1, failure_ns)) AS win_lim_ns,
        CASE WHEN p.before_ns > 0
             THEN greatest(failure_ns - p.before_ns, least(coalesce(run_start_ns, 0), failure_ns))
             ELSE least(coalesce(run_start_ns, 0), failure_ns) END AS base_start_ns
    FROM w, p
), fg AS (
    SELECT
        s.run, s.failure,
        count(*) FILTER (WHERE i.complete_ns >= s.failure_ns AND i.complete_ns < s.win_lim_ns)
            AS window_requests,
        sum(i.size_bytes) FILTER (WHERE i.complete_ns >= s.failure_ns
                                    AND i.complete_ns < s.win_lim_ns) AS window_bytes,
        count(*) FILTER (WHERE i.complete_ns >= s.base_start_ns
                           AND i.complete_ns < s.failure_ns) AS before_requests,
        sum(i.size_bytes) FILTER (WHERE i.complete_ns >= s.base_start_ns
                                    AND i.complete_ns < s.failure_ns) AS before_bytes
    FROM spans s LEFT JOIN ios i ON i.run = s.run
    GROUP BY s.run, s.failure
), qv AS NOT MATERIALIZED (  -- latencies in each window (w 1) and before it (w 0), for exact_quantiles
    SELECT {'run': s.run, 'failure': s.failure, 'w': 1} AS g, i.latency_ns AS x
    FROM spans s JOIN ios i ON i.run = s.run
        AND i.complete_ns >= s.failure_ns AND i.complete_ns < s.win_lim_ns
    UNION ALL
    SELECT {'run': s.run, 'failure': s.failure, 'w': 0}, i.latency_ns
    FROM spans s JOIN ios i ON i.run = s.run
        AND i.complete_ns >= s.base_start_ns AND i.complete_ns < s.failure_ns
), p99 AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g, value AS p99_ns FROM exact_quantiles('qv', [0.99])
), fig AS (
    SELECT
        s.run, s.failure, s."group", s.drive, s.rebuild_done,
        s.failure_ns / 1e9                                   AS failure_s,
        s.start_ns / 1e9                                     AS rebuild_start_s,
        s.end_ns / 1e9                                       AS rebuild_end_s,
        (s.win_end_ns - s.failure_ns) / 1e9                  AS window_s,
        greatest(least(s.win_end_ns, s.run_end_ns)
                 - greatest(s.failure_ns, s.run_start_ns), 0) / 1e9 AS window_host_s,
        (s.end_ns - s.start_ns) / 1e9                        AS rebuild_s,
        fg.before_requests,
        CASE WHEN least(s.failure_ns, s.run_end_ns) > s.base_start_ns
             THEN coalesce(fg.before_bytes, 0) / 1e6
                  / ((least(s.failure_ns, s.run_end_ns) - s.base_start_ns) / 1e9)
             END                                             AS before_mb_per_s,
        pb.p99_ns / 1e6                                      AS before_p99_ms,
        fg.window_requests,
        CASE WHEN least(s.win_end_ns, s.run_end_ns) > greatest(s.failure_ns, s.run_start_ns)
             THEN coalesce(fg.window_bytes, 0) / 1e6
                  / ((least(s.win_end_ns, s.run_end_ns)
                      - greatest(s.failure_ns, s.run_start_ns)) / 1e9)
             END                                             AS window_mb_per_s,
        pw.p99_ns / 1e6                                      AS window_p99_ms
    FROM spans s JOIN fg USING (run, failure)
    LEFT JOIN p99 pw ON pw.g = {'run': s.run, 'failure': s.failure, 'w': 1}
    LEFT JOIN p99 pb ON pb.g = {'run': s.run, 'failure': s.failure, 'w': 0}
)
SELECT
    run, failure, "group", drive, failure_s, rebuild_start_s, rebuild_end_s, rebuild_done,
    window_s, window_host_s, rebuild_s,
    before_requests, before_mb_per_s, before_p99_ms,
    window_requests, window_mb_per_s, window_p99_ms,
    CASE WHEN before_mb_per_s > 0 THEN window_mb_per_s / before_mb_per_s END AS mb_per_s_ratio,
    CASE WHEN before_p99_ms > 0 THEN window_p99_ms / before_p99_ms END       AS p99_ratio
FROM fig
ORDER BY run, failure;
