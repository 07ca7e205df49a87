-- run-latency: how many requests the runs given replayed, how many of them were lost (ios.lost,
-- their latency null), and the others' mean and q-th quantile latency in ms, exactly: the
-- quantile interpolates between the two order statistics around (n - 1) x q, as numpy's
-- quantile and DuckDB's quantile_cont do, through exact_quantiles (queries/_macros.sql),
-- whose memory grows with the distinct latencies near the quantile, not with the requests.
-- replay prints this for the run it wrote.
-- Views: ios.
-- Param: q = 0.99  the quantile, 0 to 1.
WITH k AS (
    SELECT count(*) AS n, count(*) FILTER (WHERE lost) AS nlost, avg(latency_ns) AS mean_ns,
           CASE WHEN $q >= 0 AND $q <= 1 THEN $q
                ELSE error('q must be between 0 and 1') END AS q
    FROM ios
), v AS NOT MATERIALIZED (
    SELECT 0 AS g, latency_ns AS x FROM ios
)
SELECT n AS requests,
       nlost AS lost,
       mean_ns / 1e6 AS mean_ms,
       (SELECT value FROM exact_quantiles('v', [(SELECT q FROM k)])) / 1e6 AS quantile_ms
FROM k;
