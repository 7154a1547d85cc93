-- critical_path.sql — what determines the run's end, and the biggest waits.
--
-- Purpose: the regions and ranks on the critical path (Scalasca), with the critical-path
--          imbalance that says where balancing the work would shorten the run, and the longest
--          waits with the rank each waited for.
-- Inputs:  the default trace (`commdb TRACE -f queries/critical_path.sql`).
-- Output:  1. per region on the path: path time, share of the run (%), mean exclusive time per
--             location (a rank's thread; per rank in an MPI-only run), imbalance (path time
--             beyond that mean);
--          2. the 10 ranks with most time on the path: rank, path time, share (%), regions;
--          3. the 10 longest waits: rank, pattern, wait, at (time into the run), the rank
--             waited for, and whether that rank is on the critical path;
--          4. who caused the waiting (delay costs): the 10 ranks and regions whose excess time
--             caused most of it, directly and through chains of waits, with their share (%).
--          Times are shown with their unit (format_duration).

\echo Regions on the critical path, longest first
SELECT
    region,
    format_duration(path_ns) AS path,
    round(path_share * 100, 2) AS path_pct,
    format_duration(mean_ns) AS mean_per_location,
    format_duration(imbalance_ns) AS imbalance
FROM critical_path_profile()
WHERE rank IS NULL
ORDER BY path_ns DESC, region;

\echo The 10 ranks with most time on the critical path
SELECT
    rank,
    format_duration(sum(duration)) AS path,
    round(sum(duration) * 100.0 / (SELECT max(end_ts) - min(start_ts) FROM critical_path()), 2) AS path_pct,
    string_agg(DISTINCT region, ',' ORDER BY region) AS regions
FROM critical_path()
GROUP BY rank
ORDER BY sum(duration) DESC, rank
LIMIT 10;

\echo The 10 longest waits, and whether the rank waited for is on the critical path
WITH on_path AS (SELECT DISTINCT rank FROM critical_path())
SELECT
    w.rank,
    w.pattern,
    format_duration(w.wait_ns) AS wait,
    format_duration(w.ts) AS at,
    w.partner AS waited_for,
    p.rank IS NOT NULL AS partner_on_path
FROM wait_states() w
LEFT JOIN on_path p ON p.rank = w.partner
ORDER BY w.wait_ns DESC, w.rank, w.ts
LIMIT 10;

\echo Who caused the waiting: the 10 largest delay costs
SELECT
    rank,
    region,
    format_duration(cost_ns) AS cost,
    format_duration(direct_ns) AS direct,
    format_duration(propagated_ns) AS propagated,
    round(cost_ns * 100 / sum(cost_ns) OVER (), 2) AS cost_pct
FROM delay_costs()
ORDER BY cost_ns DESC, rank, region
LIMIT 10;
