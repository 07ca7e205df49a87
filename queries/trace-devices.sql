-- trace-devices: per device: requests, reads, writes, bytes each way, and the first and last
-- arrival in seconds. View: trace.
SELECT
    device,
    count(*)                                      AS requests,
    count(*) FILTER (WHERE op = 0)                AS reads,
    count(*) FILTER (WHERE op = 1)                AS writes,
    coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0) AS read_bytes,
    coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0) AS write_bytes,
    min(time_ns) / 1e9                            AS first_s,
    max(time_ns) / 1e9                            AS last_s
FROM trace
GROUP BY device
ORDER BY device;
