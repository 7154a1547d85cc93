//! commdb-udfs: commdb's SQL functions for MPI trace analysis, one module per family, all
//! registered by `register_all`. `functions()` lists each with its parameters, signature and a
//! one-line description (the shell's `\df` and docs/reference.md show them). Analysis table functions
//! take the relation to read as their first argument (a table or view name, default the
//! trace's base table), so users narrow time, ranks or regions with an ordinary view.

pub mod attribution;
pub mod bounded;
pub mod causality;
pub mod clock;
pub mod common;
pub mod counters;
pub mod critical;
pub mod delays;
pub mod deltas;
pub mod diagnosis;
pub mod jobs;
pub mod latency;
pub mod lod;
pub mod plan;
pub mod profile;
pub mod reference;
pub mod regions;
pub mod remap;
pub mod replay;
pub mod summaries;
pub mod trend;
pub mod units;
pub mod waits;
pub mod wallclock;

use std::sync::Arc;

use commdb_catalog::Session;
use datafusion::catalog::TableFunctionImpl;

/// Documentation of one SQL function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionDoc {
    pub name: &'static str,
    /// scalar, aggregate, window or table
    pub kind: &'static str,
    /// Parameter names in order; named arguments (`name => value`) use them.
    pub parameters: &'static [&'static str],
    pub signature: &'static str,
    pub description: &'static str,
}

const DOCS: &[FunctionDoc] = &[
    FunctionDoc {
        name: "clock_model",
        kind: "table",
        parameters: clock::MODEL_ARGS,
        signature: "clock_model([rel => 'clock_sync']) -> rank, segment, local_from, local_to, slope, offset_ns, method, samples_used, samples_dropped, rms_residual_ns",
        description: "per rank and segment, the clock model fitted from the sync samples: master ~ slope * local + offset_ns (Intel Trace Collector clock sync)",
    },
    FunctionDoc {
        name: "clock_violations",
        kind: "table",
        parameters: clock::VIOLATION_ARGS,
        signature: "clock_violations([rel => 'messages']) -> msg_id, src, dst, send_ts, recv_ts, violation_ns",
        description: "matched messages received before they were sent, by how much (ns)",
    },
    FunctionDoc {
        name: "latency_criteria",
        kind: "table",
        parameters: latency::CRITERIA_ARGS,
        signature: "latency_criteria([rel => 'messages'], bucket_bytes => 50, max_samples => 10000, min_messages => 5) -> locality, size_bucket, criterion_ns, samples, messages, status",
        description: "median transmission time per locality (intra/inter node) and message-size bucket (PCLVis 4.1)",
    },
    FunctionDoc {
        name: "message_latency",
        kind: "table",
        parameters: latency::MESSAGE_LATENCY_ARGS,
        signature: "message_latency([rel => 'messages'], bucket_bytes => 50, max_samples => 10000, min_messages => 5, criteria => NULL) -> rel's columns, criterion_ns, latency, delayed",
        description: "every message with its criterion (the whole trace's, or criteria => a latency_criteria-shaped relation), latency L = duration / criterion and delayed = L > 1 (PCLVis 4.1)",
    },
    FunctionDoc {
        name: "process_distance",
        kind: "table",
        parameters: regions::DISTANCE_ARGS,
        signature: "process_distance([rel => 'messages']) -> p, q, distance",
        description: "free-energy distance of every pair of ranks connected in the communication graph (PCLVis 4.2)",
    },
    FunctionDoc {
        name: "process_regions",
        kind: "table",
        parameters: regions::REGION_ARGS,
        signature: "process_regions([rel => 'messages'], threshold => NULL) -> rank, region, region_size",
        description: "communication regions: average-linkage clusters of ranks, cut at the dendrogram's widest gap (or at threshold, the paper's fixed rule) (PCLVis 4.2)",
    },
    FunctionDoc {
        name: "process_dendrogram",
        kind: "table",
        parameters: regions::DISTANCE_ARGS,
        signature: "process_dendrogram([rel => 'messages']) -> step, cluster_a, cluster_b, distance, size",
        description: "the merge steps of the average-linkage clustering, to choose a region threshold",
    },
    FunctionDoc {
        name: "region_graph",
        kind: "table",
        parameters: regions::REGION_GRAPH_ARGS,
        signature: "region_graph([rel => 'messages'], threshold => NULL, bucket_bytes => 50, max_samples => 10000, min_messages => 5, criteria => NULL) -> region_a, region_b, messages, bytes, mean_latency",
        description: "messages, bytes and mean latency L between (and within) communication regions",
    },
    FunctionDoc {
        name: "vector_clocks",
        kind: "table",
        parameters: causality::vector_clock::VECTOR_CLOCK_ARGS,
        signature: "vector_clocks([rel => 'messages'], collectives => NULL, max_cells => 268435456) -> rank, seq, ts, kind, msg_id, comm, instance, vc",
        description: "the vector clock of every send, receive (and collective, given a collectives relation) in logical order; vc[i] counts events of the i-th rank",
    },
    FunctionDoc {
        name: "happens_before",
        kind: "scalar",
        parameters: &["a", "b"],
        signature: "happens_before(a, b) -> boolean",
        description: "vector clock a happened before b: a <= b element-wise and a != b",
    },
    FunctionDoc {
        name: "concurrent",
        kind: "scalar",
        parameters: &["a", "b"],
        signature: "concurrent(a, b) -> boolean",
        description: "neither vector clock happened before the other (and they differ)",
    },
    FunctionDoc {
        name: "dag_nodes",
        kind: "table",
        parameters: causality::dag::DAG_ARGS,
        signature: "dag_nodes([rel => 'messages']) -> node_id, rank, first_ts, last_ts, sends, recvs, bytes_sent, bytes_recv, load_balance",
        description: "nodes of the communication-dependency DAG: per rank, runs of receives followed by sends (PCLVis Algorithm 2)",
    },
    FunctionDoc {
        name: "dag_edges",
        kind: "table",
        parameters: causality::dag::DAG_EDGE_ARGS,
        signature: "dag_edges([rel => 'messages'], bucket_bytes => 50, max_samples => 10000, min_messages => 5, criteria => NULL) -> from_node, to_node, msg_id, bytes, duration, latency",
        description: "edges of the communication-dependency DAG: each matched message from its send's node to its receive's node",
    },
    FunctionDoc {
        name: "load_balance",
        kind: "table",
        parameters: causality::balance::BALANCE_ARGS,
        signature: "load_balance([rel => 'messages']) -> rank, messages, lb",
        description: "messages sent plus received per rank and LB = |mc - mean| / mean absolute deviation (PCLVis equations 9-10)",
    },
    FunctionDoc {
        name: "latency_trend",
        kind: "table",
        parameters: trend::TREND_ARGS,
        signature: "latency_trend(bin_ns [, rel => 'messages'], window => 5, growth_rise => 0.25, high_level => 1.5, bucket_bytes => 50, max_samples => 10000, min_messages => 5, criteria => NULL) -> segment, kind, t_start, t_end, messages, mean_latency, delayed_messages, points_ts, points_latency",
        description: "mean latency per time bin abstracted into growth, steady_high and compressed periods, thresholds relative to the relation's average latency (PCLVis 5.1)",
    },
    FunctionDoc {
        name: "attribution",
        kind: "table",
        parameters: attribution::ATTRIBUTION_ARGS,
        signature: "attribution([window_ns] [, rel => 'messages'], max_inter_share => 0.75, max_load_ratio => 1.5, max_fluctuation => 0.5, slow_level => 2, bucket_bytes => 50, max_samples => 10000, min_messages => 5, criteria => NULL) -> window_start, window_end, messages, delayed_share, slow_share, inter_node, intra_node, inter_share, avoidable_share, offnode_cost, load_balance_mean, load_balance_max, load_ratio, traffic_fluctuation, cause, recommendation",
        description: "per time window, the cause of latency (mapping, pattern, background_traffic, none) by rules that do not depend on the number of ranks, and the paper's recommended action (PCLVis 6)",
    },
    FunctionDoc {
        name: "remap_suggestion",
        kind: "table",
        parameters: remap::REMAP_ARGS,
        signature: "remap_suggestion([ranks_per_node] [, rel => 'messages'], weight => 'messages') -> rank, current_node, suggested_node",
        description: "a placement of ranks on nodes (at most ranks_per_node each) that cuts less traffic between nodes: METIS multilevel k-way, never worse than the current one",
    },
    FunctionDoc {
        name: "comm_matrix",
        kind: "table",
        parameters: summaries::MATRIX_ARGS,
        signature: "comm_matrix([rel => 'messages'], by => 'rank', value => 'messages') -> src, dst, messages, bytes, mean_duration_ns, value, share",
        description: "the communication matrix: per sender and receiver (by 'rank' or 'node'), messages, bytes and mean transmission time; value is the quantity chosen ('messages', 'bytes' or 'duration': the total transmission ns) and share its part of the total over all pairs",
    },
    FunctionDoc {
        name: "message_histogram",
        kind: "table",
        parameters: summaries::HISTOGRAM_ARGS,
        signature: "message_histogram([rel => 'messages'], bins => NULL) -> bin, bytes_from, bytes_to, messages, bytes, mean_duration_ns, share",
        description: "messages by size: power-of-two classes [bytes_from, bytes_to) (0 bytes, 1, 2-3, 4-7, ...) as MPI profilers report them, or `bins` equal-width bins from the smallest to the largest message; share of the messages",
    },
    FunctionDoc {
        name: "load_imbalance",
        kind: "table",
        parameters: summaries::IMBALANCE_ARGS,
        signature: "load_imbalance([rel => 'calls'], metric => 'duration') -> region, ranks, total_ns, mean_ns, min_ns, min_rank, max_ns, max_rank, load_balance, imbalance_pct",
        description: "per region, its time ('duration': inclusive, or 'exclusive') summed per rank and compared across the ranks that enter it: load_balance = mean / max (POP), imbalance_pct = (max - mean) / max x 100 (Scalasca)",
    },
    FunctionDoc {
        name: "rank_diagnosis",
        kind: "table",
        parameters: diagnosis::DIAGNOSIS_ARGS,
        signature: "rank_diagnosis([rel => 'messages'], by => 'rank', collectives => 'collectives', max_inter_share => 0.75) -> rank, node, sent, received, mean_latency, delayed_share, inter_share, waits_suffered_ns, waits_caused_ns, moved_by_remap, cause (by => 'node': node, ranks, sent, received, mean_latency, delayed_share, inter_share, waits_suffered_ns, waits_caused_ns, cause)",
        description: "which ranks (or nodes) communicate slowly and why: latency and inter-node share of their messages, waiting suffered and caused, and the cause that fits (late, mapping, waits_for_others, none)",
    },
    FunctionDoc {
        name: "time_profile",
        kind: "table",
        parameters: profile::TIME_PROFILE_ARGS,
        signature: "time_profile([rel => 'calls'], bins => 100) -> bin, bin_start, bin_end, region, time_ns, share",
        description: "per equal time bin and region, the time the streams spent with that region innermost (a region's time over all bins is its exclusive time); share of the bin's time over all streams",
    },
    FunctionDoc {
        name: "call_tree",
        kind: "table",
        parameters: profile::CALL_TREE_ARGS,
        signature: "call_tree([rel => 'calls']) -> path, depth, region, rank, calls, inclusive_ns, exclusive_ns",
        description: "the calling-context tree: per call path ('main/compute') and rank, calls, inclusive and exclusive time (a path whose start lies outside rel begins with '...')",
    },
    FunctionDoc {
        name: "call_metrics",
        kind: "table",
        parameters: counters::CALL_METRICS_ARGS,
        signature: "call_metrics([rel => 'calls'], metrics => 'metrics', mode => NULL) -> call_id, rank, thread, region, metric, inclusive, exclusive",
        description: "per call and recorded metric (hardware counters), what it counted between enter and leave (inclusive) and without the calls nested in it (exclusive), read by the metric's mode in metric_definitions (or mode => 'accumulated_start' | 'relative_last' | 'relative_next')",
    },
    FunctionDoc {
        name: "remap_summary",
        kind: "table",
        parameters: remap::REMAP_ARGS,
        signature: "remap_summary([ranks_per_node] [, rel => 'messages'], weight => 'messages') -> ranks, ranks_per_node, messages, bytes, inter_messages_before, inter_messages_after, inter_bytes_before, inter_bytes_after, reduction, kept_current",
        description: "inter-node messages and bytes of the current placement and of remap_suggestion's, and the reduction",
    },
    FunctionDoc {
        name: "ideal_replay",
        kind: "table",
        parameters: replay::REPLAY_ARGS,
        signature: "ideal_replay([rel => 'calls'], eager_limit => 65536, messages => 'messages', collectives => 'collectives') -> rank, pair, region, compute_ns, mpi_observed_ns, mpi_ideal_ns, transfer_ns, observed_end, ideal_end, trf_local, trf_cumulative",
        description: "the run replayed on an ideal network (zero latency, infinite bandwidth): per rank and compute/MPI pair (region NULL for the compute after the last call), observed and simulated MPI time and the transfer efficiency (equations 2-3)",
    },
    FunctionDoc {
        name: "transfer_efficiency",
        kind: "table",
        parameters: replay::REPLAY_ARGS,
        signature: "transfer_efficiency([rel => 'calls'], eager_limit => 65536, messages => 'messages', collectives => 'collectives') -> rank, observed_ns, ideal_ns, efficiency, unplaced",
        description: "per rank and overall (rank NULL): observed and ideal-network runtime and their ratio",
    },
    FunctionDoc {
        name: "compute_deltas",
        kind: "table",
        parameters: deltas::DELTA_ARGS,
        signature: "compute_deltas([rel => 'calls']) -> rank, call_seq, region, compute_delta_ns, comm_delta_ns, path",
        description: "every MPI call with the compute time before it, its duration and its path (the stack signatures of the previous MPI call and of this one), as ScalaTrace records delta times",
    },
    FunctionDoc {
        name: "delta_histogram",
        kind: "aggregate",
        parameters: &["value", "bins", "rank", "scheme"],
        signature: "delta_histogram(value [, bins [, rank [, scheme]]]) -> {count, total, min, max, min_rank, max_rank, bins: [{lo, hi, count, mean, variance}]}",
        description: "ScalaTrace's dynamically balanced histogram (default 5 bins; scheme 'source' = Algorithm 2, 'balanced' = commdb's refinement), exact count, total, min and max and the ranks holding them",
    },
    FunctionDoc {
        name: "wait_states",
        kind: "table",
        parameters: waits::WAIT_ARGS,
        signature: "wait_states([rel => 'messages'], collectives => 'collectives') -> rank, pattern, wait_ns, ts, msg_id, comm, instance, partner",
        description: "Scalasca wait states, one row per wait: late_sender, late_receiver, and per collective operation wait_at_barrier, wait_at_nxn, late_broadcast, early_reduce, early_scan (wait_at_collective for operations without a pattern)",
    },
    FunctionDoc {
        name: "critical_path",
        kind: "table",
        parameters: critical::CRITICAL_PATH_ARGS,
        signature: "critical_path([rel => 'calls'], messages => 'messages', collectives => 'collectives') -> seq, rank, region, start_ts, end_ts, kind, duration",
        description: "the chain of activities that determines the run's end (Scalasca's critical path), walked back from the last rank's end: a call that waited continues on the rank it waited for; kind compute, mpi or transfer (a receive after its late sender started)",
    },
    FunctionDoc {
        name: "critical_path_profile",
        kind: "table",
        parameters: critical::CRITICAL_PATH_ARGS,
        signature: "critical_path_profile([rel => 'calls'], messages => 'messages', collectives => 'collectives') -> region, rank, path_ns, path_share, mean_ns, imbalance_ns",
        description: "per region and rank (rank NULL: the region over all ranks) the time on the critical path and its share of the run; per region its mean exclusive time per rank and the critical-path imbalance, path time beyond that mean (Scalasca)",
    },
    FunctionDoc {
        name: "delay_costs",
        kind: "table",
        parameters: critical::CRITICAL_PATH_ARGS,
        signature: "delay_costs([rel => 'calls'], messages => 'messages', collectives => 'collectives') -> rank, region, cost_ns, direct_ns, propagated_ns",
        description: "the root causes of waiting (Scalasca's delay costs): every wait's time given to the regions where the rank waited for did more than the waiter since they last synchronised (direct), and through chains of waits to their causes (propagated); rank and region NULL for waiting nothing explains; the costs add up to all waiting",
    },
    FunctionDoc {
        name: "lod_resolution",
        kind: "scalar",
        parameters: &["t0", "t1", "pixels"],
        signature: "lod_resolution(t0, t1, pixels) -> resolution_ns",
        description: "the smallest 1-2-5 step (ns) at or above (t1 - t0) / pixels, for a timeline of that many pixels",
    },
    FunctionDoc {
        name: "lod_calls",
        kind: "table",
        parameters: lod::LOD_CALL_ARGS,
        signature: "lod_calls(resolution_ns [, t0, t1] [, rel => 'calls'], pixels => N, per => 'thread') -> slot_start, slot_end, rank, thread, region, time_in_slot_ns, share",
        description: "per time slot and thread (or per rank, per => 'rank'), the region with the most exclusive time, on the trace's slot grid (Intel Trace Analyzer level of detail)",
    },
    FunctionDoc {
        name: "lod_messages",
        kind: "table",
        parameters: lod::LOD_ARGS,
        signature: "lod_messages(resolution_ns [, t0, t1] [, rel => 'messages'], pixels => N) -> src, dst, send_slot, recv_slot, messages, bytes_avg, duration_avg, latency_avg, first_send_ts, last_recv_ts",
        description: "messages merged per (src, dst, send slot, receive slot), counts exact",
    },
    FunctionDoc {
        name: "lod_collectives",
        kind: "table",
        parameters: lod::LOD_ARGS,
        signature: "lod_collectives(resolution_ns [, t0, t1] [, rel => 'collectives'], pixels => N) -> comm, first_slot, op, instances, duration_avg, participants",
        description: "collective operations merged per (communicator, slot of first begin); op 'mixed' when they differ",
    },
    FunctionDoc {
        name: "read_sacct",
        kind: "table",
        parameters: jobs::PATH_ARGS,
        signature: "read_sacct(path) -> jobid, job_id, array_task, het_component, step, then the file's columns typed (start_time, end_time, elapsed_s, nodes, ...)",
        description: "a Slurm sacct -P / -p output with its header; known columns typed, node lists expanded, others kept as text",
    },
    FunctionDoc {
        name: "read_swf",
        kind: "table",
        parameters: jobs::PATH_ARGS,
        signature: "read_swf(path) -> job_number, submit_time, wait_time, run_time, procs, ..., think_time, submit_ts, start_ts, end_ts",
        description: "a Standard Workload Format log (plain or gzip), -1 as NULL; absolute times when the header gives UnixStartTime",
    },
    FunctionDoc {
        name: "swf_header",
        kind: "table",
        parameters: jobs::PATH_ARGS,
        signature: "swf_header(path) -> key, value",
        description: "the '; Key: Value' header comments of a Standard Workload Format log",
    },
    FunctionDoc {
        name: "expand_hostlist",
        kind: "scalar",
        parameters: &["text"],
        signature: "expand_hostlist(text) -> list of host names",
        description: "a Slurm host list such as node[001-004,010] or rack[1-2]-n[01-02] expanded, zero padding kept",
    },
    FunctionDoc {
        name: "format_duration",
        kind: "scalar",
        parameters: &["ns"],
        signature: "format_duration(ns) -> text",
        description: "a time in nanoseconds with the unit that reads best, four significant digits: 38.3 us, 1.204 s",
    },
    FunctionDoc {
        name: "format_bytes",
        kind: "scalar",
        parameters: &["n"],
        signature: "format_bytes(n) -> text",
        description: "a size in bytes in binary units, four significant digits: 64 KiB, 1.5 MiB",
    },
    FunctionDoc {
        name: "wallclock",
        kind: "scalar",
        parameters: &["ts", "trace"],
        signature: "wallclock(ts [, trace]) -> UTC timestamp",
        description: "a trace time as absolute UTC time, from trace_info.start_wallclock of the default (or named) trace; NULL and a warning when unknown",
    },
];

/// Every function commdb registers.
pub fn functions() -> &'static [FunctionDoc] {
    DOCS
}

/// DataFusion's documentation of a commdb scalar or aggregate function, from its entry in
/// `functions()`: what `SHOW FUNCTIONS` and `information_schema.routines` show as its
/// description and syntax. (DataFusion 55 gives table functions no such place.)
pub fn documentation(name: &str) -> Option<&'static datafusion::logical_expr::Documentation> {
    use datafusion::logical_expr::{DocSection, Documentation};
    static BUILT: std::sync::OnceLock<std::collections::HashMap<&'static str, Documentation>> =
        std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let section = DocSection { include: true, label: "commdb", description: None };
            DOCS.iter()
                .filter(|d| d.kind != "table")
                .map(|d| {
                    let mut b = Documentation::builder(section.clone(), d.description, d.signature);
                    for p in d.parameters {
                        b = b.with_argument(*p, format!("see the signature: {}", d.signature));
                    }
                    (d.name, b.build())
                })
                .collect()
        })
        .get(name)
}

fn implementation(name: &str) -> Option<Arc<dyn TableFunctionImpl>> {
    Some(match name {
        "clock_model" => Arc::new(clock::ClockModel),
        "clock_violations" => Arc::new(clock::ClockViolations),
        "latency_criteria" => Arc::new(latency::LatencyCriteria),
        "message_latency" => Arc::new(latency::MessageLatency),
        "process_distance" => Arc::new(regions::ProcessDistance),
        "process_regions" => Arc::new(regions::ProcessRegions),
        "process_dendrogram" => Arc::new(regions::ProcessDendrogram),
        "region_graph" => Arc::new(regions::RegionGraph),
        "lod_calls" => Arc::new(lod::LodCalls),
        "vector_clocks" => Arc::new(causality::vector_clock::VectorClocks),
        "dag_nodes" => Arc::new(causality::dag::DagNodes),
        "dag_edges" => Arc::new(causality::dag::DagEdges),
        "load_balance" => Arc::new(causality::balance::LoadBalance),
        "latency_trend" => Arc::new(trend::LatencyTrend),
        "wait_states" => Arc::new(waits::WaitStates),
        "attribution" => Arc::new(attribution::Attribution),
        "remap_suggestion" => Arc::new(remap::RemapSuggestion),
        "remap_summary" => Arc::new(remap::RemapSummary),
        "ideal_replay" => Arc::new(replay::IdealReplay),
        "transfer_efficiency" => Arc::new(replay::TransferEfficiency),
        "compute_deltas" => Arc::new(deltas::ComputeDeltas),
        "read_sacct" => Arc::new(jobs::ReadSacct),
        "read_swf" => Arc::new(jobs::ReadSwf),
        "swf_header" => Arc::new(jobs::SwfHeader),
        "lod_messages" => Arc::new(lod::LodMessages),
        "lod_collectives" => Arc::new(lod::LodCollectives),
        "comm_matrix" => Arc::new(summaries::CommMatrix),
        "message_histogram" => Arc::new(summaries::MessageHistogram),
        "load_imbalance" => Arc::new(summaries::LoadImbalance),
        "time_profile" => Arc::new(profile::TimeProfile),
        "rank_diagnosis" => Arc::new(diagnosis::RankDiagnosis),
        "call_tree" => Arc::new(profile::CallTree),
        "call_metrics" => Arc::new(counters::CallMetrics),
        "critical_path" => Arc::new(critical::CriticalPath),
        "critical_path_profile" => Arc::new(critical::CriticalPathProfile),
        "delay_costs" => Arc::new(delays::DelayCosts),
        _ => return None,
    })
}

/// A table function whose analyses' plan nodes carry its name.
#[derive(Debug)]
struct Named {
    name: &'static str,
    inner: Arc<dyn TableFunctionImpl>,
}

impl TableFunctionImpl for Named {
    fn call_with_args(
        &self,
        args: datafusion::catalog::TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn datafusion::catalog::TableProvider>> {
        let provider = self.inner.call_with_args(args)?;
        Ok(match provider.downcast_ref::<common::Derived>() {
            Some(derived) => Arc::new(derived.named(self.name)),
            None => provider,
        })
    }
}

/// Register every commdb function in the session, with the parameter names that named
/// arguments use.
pub fn register_all(session: &mut Session) {
    let budget = match session.context().runtime_env().memory_pool.memory_limit() {
        datafusion::execution::memory_pool::MemoryLimit::Finite(bytes) => bytes,
        _ => commdb_catalog::session::default_memory_limit(),
    };
    bounded::register(session.context(), budget);
    session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(lod::LodResolution::default()));
    session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(jobs::ExpandHostlist::default()));
    for order in
        [causality::vector_clock::ClockOrder::happens_before(), causality::vector_clock::ClockOrder::concurrent()]
    {
        session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(order));
    }
    session.context().register_udaf(datafusion::logical_expr::AggregateUDF::from(deltas::DeltaHistogram::default()));
    session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(units::Format::duration()));
    session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(units::Format::bytes()));
    let wallclock = wallclock::Wallclock::new(session.starts(), session.notices());
    session.context().register_udf(datafusion::logical_expr::ScalarUDF::from(wallclock));
    for doc in DOCS {
        if let Some(inner) = implementation(doc.name) {
            session.context().register_udtf(doc.name, Arc::new(Named { name: doc.name, inner }));
            session.register_parameter_names(doc.name, doc.parameters);
        }
    }
}
