//! `--demo`: what the shell prints when it opens the demo trace (`generate::demo_config`: a
//! generated 64-rank stencil with a bad rank placement and a phase of background traffic), the
//! queries to start from.

/// Printed when the demo opens.
pub const EXAMPLES: &str = "\
Demo trace: 64 ranks on 4 nodes, 2-D stencil, neighbours placed on different nodes,
background traffic slowing inter-node messages between 8 ms and 14 ms.
Try:
  -- transmission time within and between nodes
  SELECT intra_node, count(*) AS messages, avg(duration) AS avg_ns FROM messages GROUP BY intra_node;
  -- when were inter-node messages slow? (1 ms bins)
  SELECT send_ts / 1000000 AS ms, avg(duration) AS avg_ns FROM messages WHERE NOT intra_node GROUP BY 1 ORDER BY 1;
  -- who talks to whom, and which MPI calls take the time
  SELECT * FROM comm_matrix(by => 'node', value => 'bytes') ORDER BY share DESC;
  SELECT path, sum(exclusive_ns) AS ns FROM call_tree() GROUP BY path ORDER BY ns DESC;
  -- why is it slow, window by window, and what would a better placement save?
  SELECT window_start, cause, recommendation FROM attribution(window_ns => 1000000) WHERE cause <> 'none';
  SELECT inter_messages_before, inter_messages_after, reduction FROM remap_summary();
  -- and which ranks, and why
  SELECT rank, node, cause, evidence FROM rank_diagnosis() WHERE cause <> 'none' ORDER BY rank;
  -- what determines the run's end, and who causes the waiting
  SELECT region, path_share, imbalance_ns FROM critical_path_profile() WHERE rank IS NULL ORDER BY path_ns DESC;
  SELECT rank, region, cost_ns FROM delay_costs() ORDER BY cost_ns DESC LIMIT 10;
  -- the saved reports: -f queries/attribution_report.sql, critical_path.sql, ...
\\? lists the shell's commands, \\d the tables.";
