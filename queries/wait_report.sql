-- wait_report.sql — where ranks wait for each other, Scalasca style.
--
-- Purpose: split the time inside MPI into waiting for a late partner (late sender, late
--          receiver, wait at collective) and name who is late, the usual first step before
--          blaming the network.
-- Inputs:  the default trace (`commdb TRACE -f queries/wait_report.sql`).
-- Output:  1. per pattern: pattern, waits, total_ms, share (of all ranks' run time), max_us;
--          2. the 10 ranks others wait for most: partner, waits, total_ms, patterns;
--          3. the 10 longest waits: rank, pattern, wait_us, ts, msg_id, instance, partner.

\echo Wait states per pattern
SELECT
    pattern,
    count(*) AS waits,
    round(sum(wait_ns) / 1e6, 3) AS total_ms,
    round(sum(wait_ns) / CAST((SELECT greatest(ranks * duration_ns, 1) FROM trace_info) AS DOUBLE), 4) AS share,
    round(max(wait_ns) / 1e3, 3) AS max_us
FROM wait_states()
GROUP BY pattern
ORDER BY total_ms DESC;

\echo The 10 ranks others wait for most
SELECT
    partner,
    count(*) AS waits,
    round(sum(wait_ns) / 1e6, 3) AS total_ms,
    string_agg(DISTINCT pattern, ',') AS patterns
FROM wait_states()
GROUP BY partner
ORDER BY total_ms DESC, partner
LIMIT 10;

\echo The 10 longest waits
SELECT rank, pattern, round(wait_ns / 1e3, 3) AS wait_us, ts, msg_id, instance, partner
FROM wait_states()
ORDER BY wait_ns DESC, rank, ts
LIMIT 10;
