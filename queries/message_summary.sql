-- message_summary.sql — point-to-point traffic of a trace at a glance.
--
-- Purpose: how much is sent within and between nodes, by message size, and how long it takes,
--          the first question to ask of a trace whose communication is slow.
-- Inputs:  the default trace (`commdb TRACE -f queries/message_summary.sql`).
-- Output:  one row per (locality, size class): locality ('intra', 'inter' or 'unknown'),
--          size_class (power-of-two lower bound), messages, total_bytes,
--          avg / p50 / p95 / max (transmission time recv_ts - send_ts), unmatched (messages
--          missing their send or receive). Times and sizes are shown with the unit that reads
--          best (format_duration, format_bytes).

\echo Point-to-point messages per locality and size class
SELECT
    CASE WHEN intra_node THEN 'intra' WHEN NOT intra_node THEN 'inter' ELSE 'unknown' END AS locality,
    format_bytes(CASE WHEN bytes = 0 THEN 0 ELSE CAST(power(2, floor(log2(bytes))) AS BIGINT) END) AS size_class,
    count(*) AS messages,
    format_bytes(sum(bytes)) AS total_bytes,
    format_duration(CAST(round(avg(duration)) AS BIGINT)) AS avg,
    format_duration(CAST(approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY duration) AS BIGINT)) AS p50,
    format_duration(CAST(approx_percentile_cont(0.95) WITHIN GROUP (ORDER BY duration) AS BIGINT)) AS p95,
    format_duration(max(duration)) AS max,
    count(*) FILTER (WHERE duration IS NULL) AS unmatched
FROM messages
GROUP BY 1, 2
ORDER BY 1, min(bytes);
