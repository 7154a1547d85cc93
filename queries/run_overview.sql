-- run_overview.sql — one page about a trace: size, placement, traffic, time, pairs.
--
-- Purpose: the first look at an unfamiliar trace, before any deeper analysis: how big the run
--          was, where its ranks ran, how much it sent within and between nodes, where the time
--          went and who talks to whom.
-- Inputs:  the default trace (`commdb TRACE -f queries/run_overview.sql`).
-- Output:  1. one row: name, format, ranks, nodes, ranks_per_node (max), threads, started
--             (UTC, NULL when the trace has no absolute start), duration, events, messages,
--             unmatched (messages missing a send or receive), collectives (operations, counted
--             once per instance), warnings, clock_correction;
--          2. traffic per locality ('intra', 'inter', 'unknown'): messages, total_bytes, bytes_pct
--             (of all bytes), avg_size, avg_time / max_time (transmission time);
--          3. the 10 regions with the most exclusive time over all ranks: region, calls,
--             exclusive_time, time_pct (of all ranks' time, ranks x duration), avg_per_call;
--          4. the 10 rank pairs that exchange the most bytes: src, dst, src_node, dst_node,
--             messages, total_bytes, avg_time.
--          Times and sizes are shown with the unit that reads best (format_duration,
--          format_bytes), shares in percent.

\echo The run: ranks, nodes, duration, events and warnings
SELECT
    i.name,
    i.format,
    i.ranks,
    (SELECT count(DISTINCT node) FROM ranks) AS nodes,
    (SELECT max(c) FROM (SELECT count(*) AS c FROM ranks WHERE node IS NOT NULL GROUP BY node)) AS ranks_per_node,
    i.locations AS threads,
    i.start_wallclock AS started,
    format_duration(i.duration_ns) AS duration,
    i.events,
    (SELECT count(*) FROM messages) AS messages,
    (SELECT count(*) FROM messages WHERE duration IS NULL) AS unmatched,
    (SELECT count(*) FROM (SELECT DISTINCT comm, instance FROM collectives)) AS collectives,
    i.warnings,
    i.clock_correction
FROM trace_info i;

\echo Traffic per locality
SELECT
    CASE WHEN intra_node THEN 'intra' WHEN NOT intra_node THEN 'inter' ELSE 'unknown' END AS locality,
    count(*) AS messages,
    format_bytes(sum(bytes)) AS total_bytes,
    round(100 * sum(bytes) / CAST((SELECT greatest(sum(bytes), 1) FROM messages) AS DOUBLE), 1) AS bytes_pct,
    format_bytes(CAST(round(avg(bytes)) AS BIGINT)) AS avg_size,
    format_duration(CAST(round(avg(duration)) AS BIGINT)) AS avg_time,
    format_duration(max(duration)) AS max_time
FROM messages
GROUP BY 1
ORDER BY 1;

\echo The 10 regions with the most exclusive time over all ranks
SELECT
    CAST(region AS VARCHAR) AS region,
    count(*) AS calls,
    format_duration(sum(exclusive)) AS exclusive_time,
    round(100 * sum(exclusive) / CAST((SELECT greatest(ranks * duration_ns, 1) FROM trace_info) AS DOUBLE), 1) AS time_pct,
    format_duration(CAST(round(avg(exclusive)) AS BIGINT)) AS avg_per_call
FROM calls
GROUP BY 1
ORDER BY sum(exclusive) DESC, region
LIMIT 10;

\echo The 10 rank pairs that exchange the most bytes
SELECT
    src,
    dst,
    CAST(min(src_node) AS VARCHAR) AS src_node,
    CAST(min(dst_node) AS VARCHAR) AS dst_node,
    count(*) AS messages,
    format_bytes(sum(bytes)) AS total_bytes,
    format_duration(CAST(round(avg(duration)) AS BIGINT)) AS avg_time
FROM messages
GROUP BY src, dst
ORDER BY sum(bytes) DESC, src, dst
LIMIT 10;
