-- trace-sizes: request size histogram in power-of-two buckets (bucket = the smallest power of
-- two >= size, in bytes; 0 for empty requests such as flushes), reads and writes separately.
-- View: trace.
SELECT
    CASE WHEN size_bytes <= 0 THEN 0
         ELSE CAST(pow(2, ceil(log2(size_bytes))) AS BIGINT) END AS bucket_bytes,
    count(*)                              AS requests,
    count(*) FILTER (WHERE op = 0)        AS reads,
    count(*) FILTER (WHERE op = 1)        AS writes
FROM trace
GROUP BY bucket_bytes
ORDER BY bucket_bytes;
