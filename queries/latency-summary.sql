-- latency-summary: host request latency by run, operation and size class: requests, mean,
-- p50, p90, p99, p99.9 and max in milliseconds. The size class is the smallest power of two
-- of bytes at or above the request's size; the row with an empty size class (`all`) covers
-- every size of that operation. Percentiles are exact (linear interpolation between the two
-- nearest ranks, as quantile_cont and numpy.quantile do), in bounded memory (exact_quantiles,
-- queries/_macros.sql).
-- View: ios.
WITH r AS (
    SELECT
        run,
        CASE op WHEN 0 THEN 'read' WHEN 1 THEN 'write' ELSE CAST(op AS VARCHAR) END AS op,
        CASE WHEN size_bytes <= 0 THEN 0
             ELSE CAST(pow(2, ceil(log2(size_bytes))) AS BIGINT) END AS size_class_bytes,
        latency_ns
    FROM ios
), qv AS NOT MATERIALIZED (  -- the two grouping sets' values, for exact_quantiles
    SELECT {'run': run, 'op': op, 'size': size_class_bytes} AS g, latency_ns AS x FROM r
    UNION ALL
    SELECT {'run': run, 'op': op, 'size': CAST(NULL AS BIGINT)}, latency_ns FROM r
), qs AS (
    SELECT g, list(value ORDER BY q) AS q
    FROM exact_quantiles('qv', [0.5, 0.9, 0.99, 0.999]) GROUP BY g
), agg AS (
    SELECT
        run, op, size_class_bytes,
        count(*)                                                   AS requests,
        avg(latency_ns)                                            AS mean_ns,
        max(latency_ns)                                            AS max_ns
    FROM r
    GROUP BY GROUPING SETS ((run, op, size_class_bytes), (run, op))
)
SELECT
    agg.run, op, size_class_bytes, requests,
    mean_ns / 1e6  AS mean_ms,
    q[1] / 1e6     AS p50_ms,
    q[2] / 1e6     AS p90_ms,
    q[3] / 1e6     AS p99_ms,
    q[4] / 1e6     AS p999_ms,
    max_ns / 1e6   AS max_ms
FROM agg LEFT JOIN qs
    ON qs.g IS NOT DISTINCT FROM {'run': agg.run, 'op': agg.op, 'size': agg.size_class_bytes}
ORDER BY agg.run, op, size_class_bytes NULLS FIRST;
