-- attribution_report.sql — why communication is slow, window by window, and who waits.
--
-- Purpose: turn measurements into causes and actions (PCLVis section 6): per time window, is
--          the latency due to the placement of ranks on nodes (mapping), to unbalanced
--          communication (pattern) or to other traffic on the network (background_traffic),
--          with the evidence and the recommended action; then the wait states behind it.
-- Inputs:  the default trace (`commdb TRACE -f queries/attribution_report.sql`). Windows are a
--          fiftieth of the run, rounded to a 1-2-5 step; write attribution(window_ns => WINDOW_NS) for
--          another width, and max_inter_share / max_load_ratio / max_fluctuation / slow_level
--          to move the thresholds. Latency is measured against the whole trace.
-- Output:  1. causes over the run: cause, windows, first, last, recommendation;
--          2. every window: window_from, cause, messages, slow_pct (L >= 2), inter_pct,
--             avoidable_pct (off-node messages a fitted placement keeps on a node),
--             load_ratio (busiest rank over the median rank), traffic_fluctuation (the cause
--             first, so that it stays in view on an 80-column terminal);
--          3. wait states per pattern: pattern, waits, total, the partner waited for most;
--          4. the remapping (O1), when the trace knows its nodes: ranks_per_node, messages,
--             inter_messages_before / _after, inter_bytes_before / _after, reduction_pct,
--             kept_current (the current placement is already as good), then the ranks to move:
--             rank, current_node, suggested_node.
--          Times and sizes are shown with the unit that reads best, shares in percent.

\echo Causes over the run: what slows communication, where, and what to do
SELECT
    cause,
    count(*) AS windows,
    format_duration(min(window_start)) AS first,
    format_duration(max(window_end)) AS last,
    min(recommendation) AS recommendation
FROM attribution()
GROUP BY cause
ORDER BY windows DESC, cause;

\echo Every window: slow messages, inter-node share, load ratio and traffic fluctuation behind the cause
SELECT
    format_duration(window_start) AS window_from,
    cause,
    messages,
    round(100 * slow_share, 1) AS slow_pct,
    round(100 * inter_share, 1) AS inter_pct,
    round(100 * avoidable_share, 1) AS avoidable_pct,
    round(load_ratio, 2) AS load_ratio,
    round(traffic_fluctuation, 3) AS traffic_fluctuation
FROM attribution()
ORDER BY window_start;

\echo Wait states per pattern, and the rank waited for most
SELECT pattern, waits, format_duration(total_ns) AS total, partner AS waited_for_most
FROM (
    SELECT
        pattern,
        partner,
        sum(count(*)) OVER (PARTITION BY pattern) AS waits,
        sum(sum(wait_ns)) OVER (PARTITION BY pattern) AS total_ns,
        row_number() OVER (PARTITION BY pattern ORDER BY sum(wait_ns) DESC, partner) AS place
    FROM wait_states()
    GROUP BY pattern, partner
)
WHERE place = 1
ORDER BY total_ns DESC;

\echo Remapping (O1): inter-node traffic before and after the suggested placement
SELECT ranks_per_node, messages, inter_messages_before, inter_messages_after,
       format_bytes(inter_bytes_before) AS inter_bytes_before, format_bytes(inter_bytes_after) AS inter_bytes_after,
       round(100 * reduction, 1) AS reduction_pct, kept_current
FROM remap_summary();

\echo Ranks to move to another node
SELECT rank, current_node, suggested_node
FROM remap_suggestion()
WHERE current_node IS DISTINCT FROM suggested_node
ORDER BY rank;
