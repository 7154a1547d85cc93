-- attribution_report.sql — why communication is slow, window by window, and who waits.
--
-- Purpose: turn measurements into causes and actions (PCLVis section 6): per time window, is
--          the latency due to the placement of ranks on nodes (mapping), to unbalanced
--          communication (pattern) or to other traffic on the network (background_traffic),
--          with the evidence and the recommended action; then the wait states behind it.
-- Inputs:  the default trace (`commdb TRACE -f queries/attribution_report.sql`). Windows are a
--          fiftieth of the run, rounded to a 1-2-5 step; write attribution(WINDOW_NS) for
--          another width, and max_inter_share / max_load_ratio / max_fluctuation / slow_level
--          to move the thresholds. Latency is measured against the whole trace.
-- Output:  1. causes over the run: cause, windows, first_ms, last_ms, recommendation;
--          2. every window: window_start_ms, messages, slow_share (L >= 2), inter_share,
--             avoidable_share (off-node messages a fitted placement keeps on a node),
--             load_ratio (busiest rank over the median rank), traffic_fluctuation, cause;
--          3. wait states per pattern: pattern, waits, total_ms, the partner waited for most;
--          4. the remapping (O1), when the trace knows its nodes: ranks_per_node, messages,
--             inter_messages_before / _after, inter_bytes_before / _after, reduction,
--             kept_current (the current placement is already as good), then the ranks to move:
--             rank, current_node, suggested_node.

\echo Causes over the run: what slows communication, where, and what to do
SELECT
    cause,
    count(*) AS windows,
    round(min(window_start) / 1e6, 3) AS first_ms,
    round(max(window_end) / 1e6, 3) AS last_ms,
    min(recommendation) AS recommendation
FROM attribution()
GROUP BY cause
ORDER BY windows DESC, cause;

\echo Every window: slow messages, inter-node share, load ratio and traffic fluctuation behind the cause
SELECT
    round(window_start / 1e6, 3) AS window_start_ms,
    messages,
    round(slow_share, 3) AS slow_share,
    round(inter_share, 3) AS inter_share,
    round(avoidable_share, 3) AS avoidable_share,
    round(load_ratio, 2) AS load_ratio,
    round(traffic_fluctuation, 3) AS traffic_fluctuation,
    cause
FROM attribution()
ORDER BY window_start;

\echo Wait states per pattern, and the rank waited for most
SELECT pattern, waits, total_ms, partner AS waited_for_most
FROM (
    SELECT
        pattern,
        partner,
        sum(count(*)) OVER (PARTITION BY pattern) AS waits,
        round(sum(sum(wait_ns)) OVER (PARTITION BY pattern) / 1e6, 3) AS total_ms,
        row_number() OVER (PARTITION BY pattern ORDER BY sum(wait_ns) DESC, partner) AS place
    FROM wait_states()
    GROUP BY pattern, partner
)
WHERE place = 1
ORDER BY total_ms DESC;

\echo Remapping (O1): inter-node traffic before and after the suggested placement
SELECT ranks_per_node, messages, inter_messages_before, inter_messages_after, inter_bytes_before,
       inter_bytes_after, round(reduction, 4) AS reduction, kept_current
FROM remap_summary();

\echo Ranks to move to another node
SELECT rank, current_node, suggested_node
FROM remap_suggestion()
WHERE current_node IS DISTINCT FROM suggested_node
ORDER BY rank;
