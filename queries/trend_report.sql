-- trend_report.sql — when latency built up and when it stayed high.
--
-- Purpose: the temporal view of PCLVis section 5.1: message latency L (transmission time over
--          the criterion of its size and locality) averaged per time bin, abstracted into
--          growth periods, steady-high periods and compressed quiet stretches, so the periods
--          worth a closer look stand out; then who sent the delayed messages in them.
-- Inputs:  the default trace (`commdb TRACE -f queries/trend_report.sql`). Bins are about a
--          hundredth of the run (a 1-2-5 step); for another width write latency_trend(bin_ns => BIN_NS),
--          and window => N, growth_rise => X, high_level => Y to change the classification.
-- Output:  1. the segments: segment, kind ('growth', 'steady_high', 'compressed'), starts,
--             ends (times into the run, with the unit that reads best), messages, mean_latency, delayed_messages (L > 1), points (the bins
--             kept: every bin of growth and steady-high periods, first/middle/last otherwise);
--          2. per growth or steady-high segment, the 5 sender/receiver pairs with most delayed
--             messages in it: segment, kind, src, dst, locality, delayed, mean_latency.

\echo Latency over time: growth and steady-high segments
SELECT
    segment,
    kind,
    format_duration(t_start) AS starts,
    format_duration(t_end) AS ends,
    messages,
    round(mean_latency, 3) AS mean_latency,
    delayed_messages,
    cardinality(points_ts) AS points
FROM latency_trend()
ORDER BY segment;

\echo Per segment, the 5 sender/receiver pairs with most delayed messages
SELECT segment, kind, src, dst, locality, delayed, mean_latency
FROM (
    SELECT
        s.segment,
        s.kind,
        m.src,
        m.dst,
        CASE WHEN m.intra_node THEN 'intra' ELSE 'inter' END AS locality,
        count(*) FILTER (WHERE m.latency > 1) AS delayed,
        round(avg(m.latency), 3) AS mean_latency,
        row_number() OVER (PARTITION BY s.segment ORDER BY count(*) FILTER (WHERE m.latency > 1) DESC, m.src, m.dst) AS place
    FROM latency_trend() s
    JOIN message_latency() m ON m.send_ts >= s.t_start AND m.send_ts < s.t_end
    WHERE s.kind <> 'compressed'
    GROUP BY s.segment, s.kind, m.src, m.dst, m.intra_node
)
WHERE place <= 5
ORDER BY segment, place;
