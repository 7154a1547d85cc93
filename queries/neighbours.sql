-- neighbours.sql — other jobs that ran beside this trace: the background-traffic suspects.
--
-- Purpose: when latency grows for no reason inside the application, look at who shared the
--          nodes (memory bandwidth, NIC) or the switches (links, buffers) during the run.
-- Inputs:  the default trace and a Slurm log attached as table `jobs`, optionally a
--          node-to-switch map (CSV `node,switch`) attached as table `switches`:
--          `commdb TRACE --jobs sacct.txt [--switches switches.csv] -f queries/neighbours.sql`
--          (fields and time zone as for jobs_for_trace.sql). Without a map every node counts as
--          its own switch, so only jobs on the trace's own nodes are listed. The trace's own job
--          (all its nodes, the whole run, the latest start of such jobs) is left out. Needs the
--          trace's absolute start (trace_info.start_wallclock).
-- Output:  one row per other job (allocation) that held a node on one of the trace's switches
--          while the trace ran, longest overlap first: jobid, job_name, user, state, start_time,
--          end_time (NULL while running), overlap_s (seconds of the run window the job held its
--          nodes), shared_nodes (trace nodes it held), shared_switches, shares ('node' or
--          'switch'), nodes (its node list as sacct printed it).

CREATE TABLE IF NOT EXISTS switches (node VARCHAR, switch VARCHAR);

\echo Other jobs on the trace's nodes or switches during the run, longest overlap first
WITH run AS (
    SELECT
        CAST(wallclock(min(ts)) AS BIGINT) AS run_start,
        CAST(wallclock(max(ts)) AS BIGINT) AS run_end
    FROM events
),
trace_nodes AS (
    SELECT DISTINCT CAST(node AS VARCHAR) AS node FROM ranks WHERE node IS NOT NULL
),
-- a node missing from the map is its own switch
trace_switches AS (
    SELECT DISTINCT coalesce(CAST(s.switch AS VARCHAR), t.node) AS switch
    FROM trace_nodes t LEFT JOIN switches s ON CAST(s.node AS VARCHAR) = t.node
),
allocations AS (
    SELECT
        j.jobid,
        j.job_name,
        j."user",
        j.state,
        j.start_time,
        j.end_time,
        j.node_list,
        j.nodes,
        -- least and greatest skip NULLs: no run window, no overlap
        CASE WHEN r.run_start IS NOT NULL THEN
            round((least(coalesce(CAST(j.end_time AS BIGINT), r.run_end), r.run_end)
                - greatest(CAST(j.start_time AS BIGINT), r.run_start)) / 1e9, 3)
        END AS overlap_s
    FROM jobs j CROSS JOIN run r
    WHERE j.step IS NULL AND j.start_time IS NOT NULL AND j.nodes IS NOT NULL
),
touch AS (
    SELECT
        jn.jobid,
        count(DISTINCT t.node) AS shared_nodes,
        count(DISTINCT ts.switch) AS shared_switches
    FROM (SELECT jobid, unnest(nodes) AS node FROM allocations) jn
    LEFT JOIN switches s ON CAST(s.node AS VARCHAR) = jn.node
    LEFT JOIN trace_nodes t ON t.node = jn.node
    LEFT JOIN trace_switches ts ON ts.switch = coalesce(CAST(s.switch AS VARCHAR), jn.node)
    GROUP BY jn.jobid
),
own AS (
    SELECT a.jobid
    FROM allocations a JOIN touch u ON u.jobid = a.jobid
    CROSS JOIN run r
    WHERE u.shared_nodes = (SELECT count(*) FROM trace_nodes)
        AND CAST(a.start_time AS BIGINT) <= r.run_start
        AND (a.end_time IS NULL OR CAST(a.end_time AS BIGINT) >= r.run_end)
    ORDER BY a.start_time DESC
    LIMIT 1
)
SELECT
    a.jobid,
    a.job_name,
    a."user",
    a.state,
    a.start_time,
    a.end_time,
    a.overlap_s,
    u.shared_nodes,
    u.shared_switches,
    CASE WHEN u.shared_nodes > 0 THEN 'node' ELSE 'switch' END AS shares,
    a.node_list AS nodes
FROM allocations a
JOIN touch u ON u.jobid = a.jobid
WHERE u.shared_switches > 0
    AND a.overlap_s > 0
    AND a.jobid NOT IN (SELECT jobid FROM own)
ORDER BY a.overlap_s DESC, u.shared_nodes DESC, a.jobid;
