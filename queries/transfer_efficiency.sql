-- transfer_efficiency.sql — how much faster the run would be on an ideal network, and when
-- the data transfer costs most.
--
-- Purpose: separate the time lost to data transfer (which a faster network or less traffic
--          would save) from computation and from waiting for late partners (which it would
--          not), per rank and over time, as the transfer-efficiency monitors do.
-- Inputs:  the default trace (`commdb TRACE -f queries/transfer_efficiency.sql`); messages up
--          to 64 KiB count as eager, write ideal_replay(eager_limit => N) to change it.
-- Output:  1. overall and the 5 ranks with the lowest efficiency: rank (NULL = the whole run),
--             observed_ms, ideal_ms, efficiency (ideal / observed), unplaced (message sides
--             outside any MPI call);
--          2. over time, in about 20 steps of the run: step_start_ms, pairs, transfer_ms,
--             efficiency (simulated / observed time of the pairs ending in the step), so the
--             phases where transfer costs time stand out;
--          3. the MPI regions that lose most to transfer: region, calls, transfer_ms,
--             observed_ms, ideal_ms.

\echo Transfer efficiency: the whole run and the 5 least efficient ranks
SELECT rank, round(observed_ns / 1e6, 3) AS observed_ms, round(ideal_ns / 1e6, 3) AS ideal_ms,
       round(efficiency, 4) AS efficiency, unplaced
FROM (
    SELECT *, row_number() OVER (ORDER BY rank IS NOT NULL, efficiency, rank) AS place
    FROM transfer_efficiency()
)
WHERE place <= 6
ORDER BY rank IS NOT NULL, efficiency, rank;

\echo Transfer efficiency over time
SELECT
    round(step * w / 1e6, 3) AS step_start_ms,
    count(*) AS pairs,
    round(sum(transfer_ns) / 1e6, 3) AS transfer_ms,
    round(sum(compute_ns + mpi_ideal_ns) / CAST(greatest(sum(compute_ns + mpi_observed_ns), 1) AS DOUBLE), 4) AS efficiency
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
    round(sum(transfer_ns) / 1e6, 3) AS transfer_ms,
    round(sum(mpi_observed_ns) / 1e6, 3) AS observed_ms,
    round(sum(mpi_ideal_ns) / 1e6, 3) AS ideal_ms
FROM ideal_replay()
GROUP BY region
ORDER BY transfer_ms DESC, region
LIMIT 10;
