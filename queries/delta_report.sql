-- delta_report.sql — repeated MPI calls described by their delta times, ScalaTrace style.
--
-- Purpose: summarise every (MPI region, path) — path being the MPI call before it — by the
--          compute time before the call and the call's own time, with dynamically balanced
--          histograms instead of time stamps, so imbalance between ranks shows as a spread or
--          a second group of bins, and name the ranks at the extremes.
-- Inputs:  the default trace (`commdb TRACE -f queries/delta_report.sql`).
-- Output:  1. per (region, path), most frequent first: region, path, calls, ranks,
--             compute_mean_us, compute_min_us / compute_max_us with min_rank / max_rank,
--             comm_mean_us, comm_max_us with comm_max_rank;
--          2. the compute-delta histograms of the 5 (region, path) pairs with the most compute
--             before them, one row per bin: region, path, bin, lo_us, hi_us, count, mean_us,
--             sd_us.

\echo Compute deltas per region and call path, most frequent first
SELECT
    region,
    path,
    h['count'] AS calls,
    ranks,
    format_duration(h['total'] / h['count']) AS compute_mean,
    format_duration(h['min']) AS compute_min,
    h['min_rank'] AS min_rank,
    format_duration(h['max']) AS compute_max,
    h['max_rank'] AS max_rank,
    format_duration(c['total'] / c['count']) AS comm_mean,
    format_duration(c['max']) AS comm_max,
    c['max_rank'] AS comm_max_rank
FROM (
    SELECT region, path, count(DISTINCT rank) AS ranks,
           delta_histogram(compute_delta_ns, 5, rank) AS h,
           delta_histogram(comm_delta_ns, 5, rank) AS c
    FROM compute_deltas()
    GROUP BY region, path
)
ORDER BY calls DESC, region, path;

\echo Compute-delta histograms of the 5 region and path pairs with the most compute
SELECT
    region,
    path,
    row_number() OVER (PARTITION BY region, path ORDER BY b['lo']) AS bin,
    format_duration(b['lo']) AS lo,
    format_duration(b['hi']) AS hi,
    b['count'] AS count,
    format_duration(b['mean']) AS mean,
    format_duration(sqrt(b['variance'])) AS sd
FROM (
    SELECT region, path, unnest(h['bins']) AS b
    FROM (
        SELECT region, path, delta_histogram(compute_delta_ns, 5, rank) AS h
        FROM compute_deltas()
        GROUP BY region, path
        ORDER BY sum(compute_delta_ns) DESC, region, path
        LIMIT 5
    )
)
ORDER BY region, path, bin;
