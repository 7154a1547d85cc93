-- latency_report.sql — where is communication slow? (PCLVis section 4)
--
-- Purpose: learn the normal transmission time per locality and size bucket from the trace,
--          list the most delayed messages, and rank communication regions by their latency.
-- Inputs:  the default trace's messages (`commdb TRACE -f queries/latency_report.sql`); to
--          narrow it, replace 'messages' by a view of it.
-- Output:  four tables —
--   1. criteria: locality, size_bucket (lower bound in bytes), criterion, samples, messages,
--      status;
--   2. worst 20 delayed messages: msg_id, src, dst, latency (first, to stay in view on an
--      80-column terminal), locality, bytes, sent_at (time into the run), time
--      (transmission), criterion;
--   3. regions, worst first: region, ranks, messages, rl (mean latency L of the messages sent
--      by the region's ranks), delayed_pct, max_latency;
--   4. localities: locality, messages, delayed, delayed_pct, mean_latency.
--   Sizes are in bytes, times shown with the unit that reads best, shares in percent.

\echo Latency criteria: median transmission time per locality and size bucket
SELECT locality, size_bucket, format_duration(CAST(round(criterion_ns) AS BIGINT)) AS criterion,
       samples, messages, status
FROM latency_criteria('messages')
ORDER BY locality, size_bucket;

\echo The 20 most delayed messages (latency L = duration / criterion)
SELECT msg_id, src, dst, round(latency, 2) AS latency,
       CASE WHEN intra_node THEN 'intra' WHEN NOT intra_node THEN 'inter' ELSE 'unknown' END AS locality,
       bytes, format_duration(send_ts) AS sent_at, format_duration(duration) AS time,
       format_duration(CAST(round(criterion_ns) AS BIGINT)) AS criterion
FROM message_latency('messages')
WHERE delayed
ORDER BY latency DESC, msg_id
LIMIT 20;

\echo Communication regions, worst mean latency first
SELECT r.region,
       count(DISTINCT r.rank) AS ranks,
       count(*) AS messages,
       round(avg(m.latency), 3) AS rl,
       round(100 * avg(CAST(m.delayed AS DOUBLE)), 1) AS delayed_pct,
       round(max(m.latency), 2) AS max_latency
FROM message_latency('messages') m JOIN process_regions('messages') r ON m.src = r.rank
GROUP BY r.region
ORDER BY rl DESC NULLS LAST, r.region;

\echo Delayed messages per locality
SELECT CASE WHEN intra_node THEN 'intra' WHEN NOT intra_node THEN 'inter' ELSE 'unknown' END AS locality,
       count(*) AS messages,
       count(*) FILTER (WHERE delayed) AS delayed,
       round(100 * avg(CAST(delayed AS DOUBLE)), 1) AS delayed_pct,
       round(avg(latency), 3) AS mean_latency
FROM message_latency('messages')
GROUP BY 1
ORDER BY 1;
