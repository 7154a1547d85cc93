-- wait_report.sql — where ranks wait for each other, Scalasca style.
--
-- Purpose: split the time inside MPI into waiting for a late partner (late sender, late
--          receiver, wait at collective) and name who is late, the usual first step before
--          blaming the network.
-- Inputs:  the default trace (`commdb TRACE -f queries/wait_report.sql`).
-- Output:  1. per pattern: pattern, waits, total, time_pct (of the run time of every rank's CPU threads), longest;
--          2. the 10 ranks others wait for most: partner, waits, total, patterns;
--          3. the 10 longest waits: rank, pattern, wait, at (time into the run), msg_id,
--             instance, partner.
--          Times are shown with the unit that reads best (format_duration), shares in percent.

\echo Wait states per pattern
SELECT
    pattern,
    count(*) AS waits,
    format_duration(sum(wait_ns)) AS total,
    round(100 * sum(wait_ns) / CAST((SELECT greatest((SELECT count(*) FROM locations WHERE kind = 'cpu') * duration_ns, 1) FROM trace_info) AS DOUBLE), 2) AS time_pct,
    format_duration(max(wait_ns)) AS longest
FROM wait_states()
GROUP BY pattern
ORDER BY sum(wait_ns) DESC;

\echo The 10 ranks others wait for most
SELECT
    partner,
    count(*) AS waits,
    format_duration(sum(wait_ns)) AS total,
    string_agg(DISTINCT pattern, ',' ORDER BY pattern) AS patterns
FROM wait_states()
GROUP BY partner
ORDER BY sum(wait_ns) DESC, partner
LIMIT 10;

\echo The 10 longest waits
SELECT rank, pattern, format_duration(wait_ns) AS wait, format_duration(ts) AS at, msg_id, instance, partner
FROM wait_states()
ORDER BY wait_ns DESC, rank, ts
LIMIT 10;
