-- transfer_efficiency.sql — how much faster the run would be on an ideal network, and when
-- the data transfer costs most.
--
-- Purpose: separate the time lost to data transfer (which a faster network or less traffic
--          would save) from computation and from waiting for late partners (which it would
--          not), per rank and over time, as the transfer-efficiency monitors do.
-- Inputs:  the default trace (`commdb TRACE -f queries/transfer_efficiency.sql`); messages up
--          to 64 KiB count as eager, write ideal_replay(eager_limit => N) to change it.
-- Output:  1. overall and the 5 ranks with the lowest efficiency: rank (NULL = the whole run),
--             observed, ideal, efficiency_pct (ideal / observed), unplaced (message sides
--             outside any MPI call);
--          2. over time, in about 20 steps of the run: step_start, pairs, transfer,
--             efficiency_pct (simulated / observed time of the pairs ending in the step), so the
--             phases where transfer costs time stand out;
--          3. the MPI regions that lose most to transfer: region, calls, transfer, observed,
--             ideal.
--          Times are shown with the unit that reads best (format_duration), efficiencies in
--          percent.

\echo Transfer efficiency: the whole run and the 5 least efficient ranks
SELECT rank, format_duration(observed_ns) AS observed, format_duration(ideal_ns) AS ideal,
       round(100 * efficiency, 2) AS efficiency_pct, unplaced
FROM (
    SELECT *, row_number() OVER (ORDER BY rank IS NOT NULL, efficiency, rank) AS place
    FROM transfer_efficiency()
)
WHERE place <= 6
ORDER BY rank IS NOT NULL, efficiency, rank;

\echo Transfer efficiency over time
SELECT
    format_duration(step * w) AS step_start,
    count(*) AS pairs,
    format_duration(sum(transfer_ns)) AS transfer,
    round(100 * sum(compute_ns + mpi_ideal_ns) / CAST(greatest(sum(compute_ns + mpi_observed_ns), 1) AS DOUBLE), 2) AS efficiency_pct
FROM (
    SELECT r.*, s.w, r.observed_end / s.w AS step
    FROM ideal_replay() r
    CROSS JOIN (SELECT lod_resolution(min(start_ts), max(end_ts), 20) AS w FROM calls) s
)
GROUP BY step, w
ORDER BY step;

\echo MPI regions that lose most to transfer
SELECT
    region,
    count(*) AS calls,
    format_duration(sum(transfer_ns)) AS transfer,
    format_duration(sum(mpi_observed_ns)) AS observed,
    format_duration(sum(mpi_ideal_ns)) AS ideal
FROM ideal_replay()
GROUP BY region
ORDER BY sum(transfer_ns) DESC, region
LIMIT 10;
