-- latency-cdf: the distribution of host request latency by run and operation, as points
-- (fraction, latency_ms): the latency below which that fraction of the requests completed,
-- at fractions 0, 0.005, ..., 0.995 and through the tail at 0.998, 0.999, 0.9995, 0.9999,
-- 0.99995, 0.99999 and 1 (the maximum); exact, interpolated between ranks as quantile_cont (exact_quantiles, queries/_macros.sql).
-- View: ios.
WITH f AS (
    SELECT list_concat([i / 200 FOR i IN range(0, 200)],
                       [0.998, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1.0]) AS fr
), qv AS NOT MATERIALIZED (
    SELECT {'run': run, 'op': op} AS g, latency_ns AS x FROM ios
), n AS (
    SELECT run, op, count(*) AS requests FROM ios GROUP BY run, op
), fr AS (
    SELECT unnest(fr) AS fraction FROM f
), q AS (  -- exact, in bounded memory (queries/_macros.sql)
    SELECT g, q, value FROM exact_quantiles('qv', (SELECT fr FROM f))
)
SELECT n.run,
       CASE n.op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(n.op AS VARCHAR) END AS op,
       n.requests, fr.fraction, q.value / 1e6 AS latency_ms
FROM n CROSS JOIN fr
JOIN q ON q.g = {'run': n.run, 'op': n.op} AND q.q = fr.fraction
ORDER BY n.run, op, fr.fraction;
