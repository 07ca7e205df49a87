-- latency-cdf: the distribution of host request latency by run and operation, as points
-- (fraction, latency_ms): the latency below which that fraction of the requests completed,
-- at fractions 0, 0.005, ..., 0.995 and through the tail at 0.998, 0.999, 0.9995, 0.9999,
-- 0.99995, 0.99999 and 1 (the maximum); exact, interpolated between ranks as quantile_cont.
-- View: ios.
WITH f AS (
    SELECT list_concat([i / 200 FOR i IN range(0, 200)],
                       [0.995, 0.998, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1.0]) AS fr
), q AS (
    SELECT
        run,
        CASE op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(op AS VARCHAR) END AS op,
        count(*) AS requests,
        quantile_cont(latency_ns, [i / 200 FOR i IN range(0, 200)]) AS q1,
        quantile_cont(latency_ns, [0.995, 0.998, 0.999, 0.9995, 0.9999, 0.99995, 0.99999,
                                   1.0]) AS q2
    FROM ios
    GROUP BY run, op
)
SELECT run, op, requests, unnest(f.fr) AS fraction,
       unnest(list_concat(q1, q2)) / 1e6 AS latency_ms
FROM q, f
ORDER BY run, op, fraction;
