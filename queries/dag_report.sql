-- dag_report.sql — how messages chain ranks together, and which links of the chain are slow.
--
-- Purpose: follow latency along dependencies (PCLVis section 5): the communication-dependency
--          DAG groups each rank's receives and the sends they enable into nodes; a slow edge
--          delays everything downstream of it, and an unbalanced rank shows up as a node that
--          talks far more than its peers.
-- Inputs:  the default trace (`commdb TRACE -f queries/dag_report.sql`); to narrow it, create a
--          view of messages (a time window, some ranks) and replace 'messages' below by it. To
--          draw the DAG: \dot dag.dot SELECT * FROM dag_edges(); SELECT node_id,
--          'rank ' || rank AS label, load_balance FROM dag_nodes()
-- Output:  1. one row: nodes, edges, ranks, delayed_edges (latency L > 1), delayed_pct,
--             max_lb (largest load balance LB);
--          2. the 10 least balanced ranks: rank, messages (sent + received), lb;
--          3. the 20 slowest edges: msg_id, from_node, from_rank, to_node, to_rank, bytes,
--             time (transmission), latency;
--          4. the 10 nodes with the most delayed incoming edges: node_id, rank, first, last
--             (times into the run), recvs, delayed_in, mean_latency_in, load_balance.
--          Sizes are in bytes, times shown with the unit that reads best, shares in percent.

\echo Dependency DAG of the slowest period: size and delayed edges
SELECT
    (SELECT count(*) FROM dag_nodes()) AS nodes,
    count(*) AS edges,
    (SELECT count(*) FROM load_balance()) AS ranks,
    count(*) FILTER (WHERE latency > 1) AS delayed_edges,
    round(100 * count(*) FILTER (WHERE latency > 1) / CAST(greatest(count(*), 1) AS DOUBLE), 1) AS delayed_pct,
    (SELECT round(max(lb), 3) FROM load_balance()) AS max_lb
FROM dag_edges();

\echo The 10 least balanced ranks (load balance lb)
SELECT rank, messages, round(lb, 3) AS lb
FROM load_balance()
ORDER BY lb DESC, rank
LIMIT 10;

\echo The 20 slowest edges (latency L)
SELECT
    e.msg_id,
    e.from_node,
    f.rank AS from_rank,
    e.to_node,
    t.rank AS to_rank,
    e.bytes,
    format_duration(e.duration) AS time,
    round(e.latency, 3) AS latency
FROM dag_edges() e
JOIN dag_nodes() f ON f.node_id = e.from_node
JOIN dag_nodes() t ON t.node_id = e.to_node
ORDER BY 8 DESC NULLS LAST, 1
LIMIT 20;

\echo The 10 nodes with the most delayed incoming edges
SELECT
    n.node_id,
    n.rank,
    format_duration(n.first_ts) AS first,
    format_duration(n.last_ts) AS last,
    n.recvs,
    count(*) FILTER (WHERE e.latency > 1) AS delayed_in,
    round(avg(e.latency), 3) AS mean_latency_in,
    round(n.load_balance, 3) AS load_balance
FROM dag_nodes() n
JOIN dag_edges() e ON e.to_node = n.node_id
GROUP BY n.node_id, n.rank, n.first_ts, n.last_ts, n.recvs, n.load_balance
ORDER BY delayed_in DESC, mean_latency_in DESC NULLS LAST, n.node_id
LIMIT 10;
