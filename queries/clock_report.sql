-- clock_report.sql — how the ranks' clocks were corrected, and what still runs backwards.
--
-- Purpose: before trusting any latency, check that clock correction had sync data, which model
--          each rank got, how well it fits its samples and which messages still arrive before
--          they are sent.
-- Inputs:  the default trace (`commdb TRACE -f queries/clock_report.sql`); open it with
--          `--clock-correction off` to see the violations of the recorded times.
-- Output:  1. one row: clock_correction, sync samples, sessions, clock_violations;
--          2. per rank: method, segments, rate_min_ppm / rate_max_ppm (the model's slope - 1 in
--             ppm, i.e. how fast the master clock runs against the rank's), offset_at_zero,
--             samples_used, samples_dropped, rms_residual (times with their unit);
--          3. the 10 sender/receiver pairs with most violations: src, dst, violations,
--             worst, mean (times with their unit);
--          4. clock warnings: code, count, message.

\echo Clock correction: sync samples and messages still received before they were sent
SELECT
    i.clock_correction,
    (SELECT count(*) FROM clock_sync) AS sync_samples,
    (SELECT count(DISTINCT session) FROM clock_sync) AS sessions,
    i.clock_violations
FROM trace_info i;

\echo Clock model per rank: method, segments and rate
SELECT
    rank,
    min(method) AS method,
    count(*) AS segments,
    round((min(slope) - 1) * 1e6, 3) AS rate_min_ppm,
    round((max(slope) - 1) * 1e6, 3) AS rate_max_ppm,
    format_duration(min(offset_ns) FILTER (WHERE segment = 0)) AS offset_at_zero,
    min(samples_used) AS samples_used,
    min(samples_dropped) AS samples_dropped,
    format_duration(min(rms_residual_ns)) AS rms_residual
FROM clock_model()
GROUP BY rank
ORDER BY rank;

\echo The 10 sender/receiver pairs with most clock violations
SELECT
    src,
    dst,
    count(*) AS violations,
    format_duration(max(violation_ns)) AS worst,
    format_duration(avg(violation_ns)) AS mean
FROM clock_violations()
GROUP BY src, dst
ORDER BY violations DESC, max(violation_ns) DESC
LIMIT 10;

\echo Clock warnings
SELECT code, count, message
FROM warnings
WHERE code LIKE 'clock%' OR code LIKE 'clc%'
ORDER BY code;
