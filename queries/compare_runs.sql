-- compare_runs.sql — what changed between two runs: what got slower, where, since when, and
-- through which communication.
--
-- Purpose: after a code change, a new MPI library, another node count or another placement,
--          name the differences that exceed run-to-run noise (compare_runs; the test is in
--          docs/guide.md) and where they arise.
-- Inputs:  the run before as the default trace and the run after attached as b:
--          commdb before/ -c "ATTACH 'after/' AS b" -f queries/compare_runs.sql
--          (runs of different rank counts compare by region, size class and iteration only:
--          the sections by rank and by pair then stop with the reason).
-- Output:  1. what got slower: the differences beyond noise by region (key, metric, before,
--             after, change, ratio, share of the metric's change);
--          2. since when: the first iteration whose duration differs beyond noise, how many
--             do, and the mean change of those;
--          3. through which communication: the message size classes, then the pairs of
--             ranks, whose traffic or transmission time differs beyond noise;
--          4. where: the ranks whose computation, MPI time or waiting differs beyond noise,
--             the cause (computation, traffic) before the waiting.
--          Times are shown with the unit that reads best, ratios with two decimals.

\echo What got slower: differences beyond noise, by region
SELECT
    key AS region,
    metric,
    CASE WHEN metric LIKE '%_ns' THEN format_duration(CAST(a AS BIGINT)) ELSE CAST(a AS VARCHAR) END AS before,
    CASE WHEN metric LIKE '%_ns' THEN format_duration(CAST(b AS BIGINT)) ELSE CAST(b AS VARCHAR) END AS after,
    CASE WHEN metric LIKE '%_ns' THEN format_duration(CAST(difference AS BIGINT)) ELSE CAST(difference AS VARCHAR) END AS change,
    round(ratio, 2) AS ratio,
    round(100 * share, 1) AS share_pct
FROM compare_runs(b => 'b', by => 'region')
WHERE significant
LIMIT 15;

\echo Since when: the iterations whose duration differs beyond noise
SELECT
    min(CAST(key AS BIGINT)) AS first_iteration,
    max(CAST(key AS BIGINT)) AS last_iteration,
    count(*) AS iterations,
    format_duration(CAST(avg(difference) AS BIGINT)) AS mean_change
FROM compare_runs(b => 'b', by => 'iteration')
WHERE significant AND metric = 'duration_ns';

\echo Through which communication: message sizes whose traffic differs beyond noise
SELECT key AS size, metric, round(a, 1) AS before, round(b, 1) AS after, round(ratio, 2) AS ratio
FROM compare_runs(b => 'b', by => 'size_class')
WHERE significant;

\echo ... and the pairs of ranks
SELECT key AS pair, metric, round(a, 1) AS before, round(b, 1) AS after, round(ratio, 2) AS ratio
FROM compare_runs(b => 'b', by => 'pair')
WHERE significant
LIMIT 10;

\echo Where: the ranks whose time differs beyond noise, causes first
SELECT
    key AS rank,
    metric,
    format_duration(CAST(a AS BIGINT)) AS before,
    format_duration(CAST(b AS BIGINT)) AS after,
    round(ratio, 2) AS ratio,
    round(100 * share, 1) AS share_pct
FROM compare_runs(b => 'b', by => 'rank')
WHERE significant AND metric LIKE '%_ns'
LIMIT 15;
