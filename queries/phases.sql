-- phases: what the host saw, per op, before the first failure, while rebuilding (from the
-- failure to the last rebuild_end after it, or to the run's end if a rebuild never ended;
-- "degraded" instead when no rebuild started after the failure, as with no spare) and
-- after: requests, MB/s (10^6 bytes per second over the part of the phase in which that op
-- was active: from its first arrival to its last completion), IOPS, mean and p99 latency in
-- ms. A run with no failure has one phase, "all".
-- Views: ios, events.
WITH f AS (
    SELECT run, min(time_ns) AS failure_ns FROM events WHERE event = 'failure' GROUP BY run
), e AS (
    SELECT f.run, f.failure_ns,
           (SELECT max(time_ns) FROM events x WHERE x.run = f.run AND x.event = 'rebuild_end'
              AND x.time_ns >= f.failure_ns) AS end_ns,
           EXISTS (SELECT 1 FROM events x WHERE x.run = f.run AND x.event = 'rebuild_start'
                     AND x.time_ns >= f.failure_ns) AS rebuilt
    FROM f
), r AS (
    SELECT run, min(arrival_ns) AS t0, max(complete_ns) AS t1 FROM ios GROUP BY run
), ph AS (
    SELECT r.run, 'all' AS phase, 0 AS k, r.t0 AS a, r.t1 + 1 AS b FROM r
    WHERE r.run NOT IN (SELECT run FROM f)
    UNION ALL SELECT r.run, 'before', 1, r.t0, e.failure_ns FROM r JOIN e USING (run)
    UNION ALL SELECT r.run, CASE WHEN e.rebuilt THEN 'rebuilding' ELSE 'degraded' END, 2,
           e.failure_ns, coalesce(e.end_ns, r.t1 + 1)
    FROM r JOIN e USING (run)
    UNION ALL SELECT r.run, 'after', 3, e.end_ns, r.t1 + 1 FROM r JOIN e USING (run)
    WHERE e.end_ns IS NOT NULL AND e.end_ns <= r.t1
), act AS (
    SELECT run, op, min(arrival_ns) AS oa, max(complete_ns) + 1 AS ob FROM ios GROUP BY run, op
), qv AS NOT MATERIALIZED (
    SELECT {'run': ph.run, 'k': ph.k, 'op': act.op} AS g, i.latency_ns AS x
    FROM ph JOIN act ON act.run = ph.run
    JOIN ios i ON i.run = ph.run AND i.op = act.op AND i.complete_ns >= ph.a
                AND i.complete_ns < ph.b
), p99 AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g, value / 1e6 AS p99_ms FROM exact_quantiles('qv', [0.99])
), agg AS (
SELECT
    ph.run, ph.phase, CASE WHEN act.op = 0 THEN 'read' ELSE 'write' END AS op,
    count(i.latency_ns)                                              AS requests,
    greatest(least(ph.b, act.ob) - greatest(ph.a, act.oa), 0) / 1e9 AS active_s,
    coalesce(sum(i.size_bytes), 0) / 1e6
        / nullif(greatest(least(ph.b, act.ob) - greatest(ph.a, act.oa), 0) / 1e9, 0)
                                                                     AS mb_per_s,
    count(i.latency_ns)
        / nullif(greatest(least(ph.b, act.ob) - greatest(ph.a, act.oa), 0) / 1e9, 0) AS iops,
    avg(i.latency_ns) / 1e6                                          AS mean_ms,
    ph.k, act.op AS op_code
FROM ph JOIN act ON act.run = ph.run
LEFT JOIN ios i ON i.run = ph.run AND i.op = act.op AND i.complete_ns >= ph.a
                 AND i.complete_ns < ph.b
GROUP BY ph.run, ph.phase, ph.k, act.op, ph.a, ph.b, act.oa, act.ob
)
SELECT agg.* EXCLUDE (k, op_code), p99.p99_ms
FROM agg LEFT JOIN p99 ON p99.g = {'run': agg.run, 'k': agg.k, 'op': agg.op_code}
ORDER BY agg.run, agg.k, agg.op_code
