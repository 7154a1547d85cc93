-- message_summary.sql — point-to-point traffic of a trace at a glance.
--
-- Purpose: how much is sent within and between nodes, by message size, and how long it takes,
--          the first question to ask of a trace whose communication is slow.
-- Inputs:  the default trace (`commdb TRACE -f queries/message_summary.sql`).
-- Output:  one row per (locality, size class): locality ('intra', 'inter' or 'unknown'),
--          size_class (power-of-two lower bound in bytes), messages, total_bytes,
--          avg_ns / p50_ns / p95_ns / max_ns (transmission time recv_ts - send_ts),
--          unmatched (messages missing their send or receive).

\echo Point-to-point messages per locality and size class (times in ns)
SELECT
    CASE WHEN intra_node THEN 'intra' WHEN NOT intra_node THEN 'inter' ELSE 'unknown' END AS locality,
    CASE WHEN bytes = 0 THEN 0 ELSE CAST(power(2, floor(log2(bytes))) AS BIGINT) END AS size_class,
    count(*) AS messages,
    sum(bytes) AS total_bytes,
    CAST(round(avg(duration)) AS BIGINT) AS avg_ns,
    CAST(approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY duration) AS BIGINT) AS p50_ns,
    CAST(approx_percentile_cont(0.95) WITHIN GROUP (ORDER BY duration) AS BIGINT) AS p95_ns,
    max(duration) AS max_ns,
    count(*) FILTER (WHERE duration IS NULL) AS unmatched
FROM messages
GROUP BY 1, 2
ORDER BY 1, 2;
