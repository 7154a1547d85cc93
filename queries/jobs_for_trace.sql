-- jobs_for_trace.sql — which batch job ran this trace, and which of its steps.
--
-- Purpose: tie a trace to the scheduler's record of its run (job id, user, partition, nodes,
--          state), the starting point for every join with the batch system.
-- Inputs:  the default trace and a Slurm log attached as table `jobs`:
--          `commdb TRACE --jobs sacct.txt -f queries/jobs_for_trace.sql`, the log exported with
--          `sacct -P -o JobID,JobName,User,Partition,State,Start,End,Elapsed,NNodes,NodeList`
--          (in UTC: `TZ=UTC sacct ...`, as trace times are UTC). The run window is the first to
--          the last event through wallclock(); it is NULL when the trace has no absolute start,
--          and then only the node columns can tell.
-- Output:  up to 10 jobs holding at least one of the trace's nodes, the matches first: jobid,
--          job_name, user, partition, state, start_time, end_time, nodes_covered (trace nodes in
--          the job's node list) of trace_nodes, contains_run (the job's window holds the run
--          window; a job still running has no end), start_offset_s (job start minus run start:
--          a multiple of 3600 hints at a time-zone mismatch), matches (all trace nodes and the
--          whole run), run_steps (the job's steps that also hold both, e.g. '0,extern').

\echo Jobs holding the trace's nodes, the trace's own job first
WITH run AS (
    SELECT wallclock(min(ts)) AS run_start, wallclock(max(ts)) AS run_end FROM events
),
trace_nodes AS (
    SELECT DISTINCT CAST(node AS VARCHAR) AS node FROM ranks WHERE node IS NOT NULL
),
covered AS (
    SELECT jn.jobid, count(DISTINCT jn.node) AS nodes_covered
    FROM (SELECT jobid, unnest(nodes) AS node FROM jobs WHERE nodes IS NOT NULL) jn
    JOIN trace_nodes t ON t.node = jn.node
    GROUP BY jn.jobid
),
candidates AS (
    SELECT
        j.jobid,
        split_part(j.jobid, '.', 1) AS allocation,
        j.step,
        j.job_name,
        j."user",
        j.partition,
        j.state,
        j.start_time,
        j.end_time,
        c.nodes_covered,
        (SELECT count(*) FROM trace_nodes) AS trace_nodes,
        j.start_time <= r.run_start AND (j.end_time IS NULL OR j.end_time >= r.run_end) AS contains_run,
        round((CAST(j.start_time AS BIGINT) - CAST(r.run_start AS BIGINT)) / 1e9, 1) AS start_offset_s
    FROM jobs j
    JOIN covered c ON c.jobid = j.jobid
    CROSS JOIN run r
    WHERE j.start_time IS NOT NULL
),
run_steps AS (
    SELECT allocation, string_agg(step, ',' ORDER BY step) AS run_steps
    FROM candidates
    WHERE step IS NOT NULL AND contains_run AND nodes_covered = trace_nodes
    GROUP BY allocation
)
SELECT
    a.jobid,
    a.job_name,
    a."user",
    a.partition,
    a.state,
    a.start_time,
    a.end_time,
    a.nodes_covered,
    a.trace_nodes,
    a.contains_run,
    a.start_offset_s,
    a.nodes_covered = a.trace_nodes AND a.contains_run AS matches,
    s.run_steps
FROM candidates a
LEFT JOIN run_steps s ON s.allocation = a.jobid
WHERE a.step IS NULL
ORDER BY matches DESC NULLS LAST, a.nodes_covered DESC, abs(a.start_offset_s) NULLS LAST, a.jobid
LIMIT 10;
