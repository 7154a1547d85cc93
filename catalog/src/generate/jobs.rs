//! A Slurm accounting log (`sacct -P`) and a node-to-switch map that match a generated trace,
//! with the answers the job reports must find. The trace's own job holds all its nodes from
//! 20 s before the run to 3 s after it, with batch, extern and MPI (`.0`) steps. Around it a
//! fixed cast, placed relative to the run: a job that ended before and one that starts after
//! the run on the same nodes (no overlap), a running job (End 'Unknown') and a finished one that
//! share nodes during the whole run, a job on other nodes of the same switch that starts half
//! way through, a job on another switch, and a pending job without nodes. Switches group
//! `NODES_PER_SWITCH` consecutive nodes. The expected neighbours are computed from the records
//! by the rules the reports state (overlap with the run window, then shared nodes, then id), so
//! they hold for any trace size; times are whole seconds, as sacct prints them.

use serde::{Deserialize, Serialize};

use super::GroundTruth;
use crate::jobs::hostlist;
use crate::jobs::time::format_timestamp;

/// Nodes per switch of the generated switch map.
pub const NODES_PER_SWITCH: usize = 8;
const NS: i64 = 1_000_000_000;
/// When the log was exported (seconds after the run): a running job's Elapsed counts to here.
const EXPORTED_AFTER_S: i64 = 7_200;

/// One job of the log, as sacct would report its allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: i64,
    pub name: String,
    pub user: String,
    pub state: String,
    /// Unix seconds; None prints 'Unknown'.
    pub start_s: Option<i64>,
    pub end_s: Option<i64>,
    pub nodes: Vec<String>,
    /// Steps logged besides the allocation: batch, extern, 0.
    pub steps: Vec<String>,
}

/// A job that ran beside the trace during its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Neighbour {
    pub job_id: i64,
    /// Seconds of the run window during which the job held its nodes.
    pub overlap_s: f64,
    pub shared_nodes: usize,
    pub shared_switches: usize,
}

/// The log, the switch map, and what the reports must find in them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsTruth {
    /// The job that ran the trace.
    pub job_id: i64,
    /// Every job in the log, the trace's first.
    pub jobs: Vec<JobRecord>,
    /// (node, switch) for every node in the log.
    pub switches: Vec<(String, String)>,
    /// Other jobs on the trace's nodes during the run, by overlap (longest first), shared
    /// nodes (most first), job id.
    pub neighbours_by_node: Vec<Neighbour>,
    /// The same for jobs on the trace's switches, given the switch map.
    pub neighbours_by_switch: Vec<Neighbour>,
}

fn node(k: usize) -> String {
    format!("node{k:03}")
}

fn switch_of(name: &str) -> String {
    let k: usize = name.trim_start_matches("node").parse().unwrap_or(0);
    format!("sw{:02}", k / NODES_PER_SWITCH)
}

/// The scheduler log of a generated trace; None when the trace has no absolute start.
pub fn scheduler_log(truth: &GroundTruth) -> Option<JobsTruth> {
    let start_ns = truth.config.start_wallclock_ns?;
    let (run_start, run_end) = (start_ns, start_ns + truth.duration_ns);
    let mut trace_nodes: Vec<String> = truth.nodes.clone();
    trace_nodes.sort();
    trace_nodes.dedup();
    let n = trace_nodes.len();
    let (t0, t1) = (run_start.div_euclid(NS), (run_end + NS - 1).div_euclid(NS));
    let d = (t1 - t0).max(1);
    let far = ((n + 3) / NODES_PER_SWITCH + 1) * NODES_PER_SWITCH;
    let job = |job_id, name: &str, user: &str, state: &str, start, end, nodes: Vec<String>, steps: &[&str]| JobRecord {
        job_id,
        name: name.into(),
        user: user.into(),
        state: state.into(),
        start_s: start,
        end_s: end,
        nodes,
        steps: steps.iter().map(|s| s.to_string()).collect(),
    };
    let mut shared_running: Vec<String> = trace_nodes.iter().take(2).cloned().collect();
    shared_running.push(node(n + 3));
    let jobs = vec![
        job(
            41_000,
            truth.config.pattern.name(),
            "alice",
            "COMPLETED",
            Some(t0 - 20),
            Some(t1 + 3),
            trace_nodes.clone(),
            &["batch", "extern", "0"],
        ),
        job(40_990, "pre_proc", "bob", "COMPLETED", Some(t0 - 7_200), Some(t0 - 30), trace_nodes.clone(), &["batch"]),
        job(40_995, "ml_train", "carol", "RUNNING", Some(t0 - 100), None, shared_running, &["batch", "extern"]),
        job(
            40_996,
            "post_shared",
            "dave",
            "COMPLETED",
            Some(t0 - 600),
            Some(t1 + 600),
            vec![trace_nodes[n - 1].clone(), node(n)],
            &["batch"],
        ),
        job(
            41_005,
            "io_burst",
            "erin",
            "COMPLETED",
            Some(t0 + d / 2),
            Some(t1 + 3_600),
            vec![node(n + 1), node(n + 2)],
            &["batch"],
        ),
        job(
            41_010,
            "far_away",
            "frank",
            "COMPLETED",
            Some(t0 - 60),
            Some(t1 + 60),
            vec![node(far), node(far + 1)],
            &["batch"],
        ),
        job(41_020, "next_job", "bob", "COMPLETED", Some(t1 + 60), Some(t1 + 3_660), trace_nodes.clone(), &["batch"]),
        job(41_030, "queued", "erin", "PENDING", None, None, Vec::new(), &[]),
    ];
    let mut all_nodes: Vec<String> = jobs.iter().flat_map(|j| j.nodes.iter().cloned()).collect();
    all_nodes.sort();
    all_nodes.dedup();
    let switches: Vec<(String, String)> = all_nodes.iter().map(|n| (n.clone(), switch_of(n))).collect();
    let trace_switches: Vec<String> = trace_nodes.iter().map(|n| switch_of(n)).collect();
    let mut neighbours: Vec<Neighbour> = jobs[1..]
        .iter()
        .filter_map(|j| {
            let start = j.start_s? * NS;
            let end = j.end_s.map_or(i64::MAX, |e| e * NS);
            let overlap = end.min(run_end) - start.max(run_start);
            let mut switches: Vec<String> = j.nodes.iter().map(|n| switch_of(n)).collect();
            switches.sort();
            switches.dedup();
            (overlap > 0).then(|| Neighbour {
                job_id: j.job_id,
                overlap_s: overlap as f64 / NS as f64,
                shared_nodes: j.nodes.iter().filter(|n| trace_nodes.contains(n)).count(),
                shared_switches: switches.iter().filter(|s| trace_switches.contains(s)).count(),
            })
        })
        .collect();
    neighbours.sort_by(|a, b| {
        b.overlap_s.total_cmp(&a.overlap_s).then(b.shared_nodes.cmp(&a.shared_nodes)).then(a.job_id.cmp(&b.job_id))
    });
    let by_switch: Vec<Neighbour> = neighbours.iter().filter(|x| x.shared_switches > 0).cloned().collect();
    neighbours.retain(|x| x.shared_nodes > 0);
    Some(JobsTruth { job_id: 41_000, jobs, switches, neighbours_by_node: neighbours, neighbours_by_switch: by_switch })
}

/// `[D-]HH:MM:SS`.
fn elapsed(seconds: i64) -> String {
    let s = seconds.max(0);
    let (days, rest) = (s / 86_400, s % 86_400);
    let hms = format!("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    if days > 0 { format!("{days}-{hms}") } else { hms }
}

impl JobsTruth {
    /// The log as `sacct -P -o JobID,JobName,User,Partition,State,Start,End,Elapsed,NNodes,NodeList`.
    pub fn sacct_text(&self) -> String {
        let exported = self.jobs[0].end_s.unwrap_or(0) + EXPORTED_AFTER_S;
        let time = |t: Option<i64>| t.map_or_else(|| "Unknown".to_string(), |s| format_timestamp(s * NS));
        let mut out = String::from("JobID|JobName|User|Partition|State|Start|End|Elapsed|NNodes|NodeList\n");
        for j in &self.jobs {
            let run = j.start_s.map_or(0, |s| j.end_s.unwrap_or(exported) - s);
            let list = if j.nodes.is_empty() { "None assigned".to_string() } else { hostlist::compress(&j.nodes) };
            let (start, end) = (time(j.start_s), time(j.end_s));
            out += &format!(
                "{}|{}|{}|batch|{}|{start}|{end}|{}|{}|{list}\n",
                j.job_id,
                j.name,
                j.user,
                j.state,
                elapsed(run),
                j.nodes.len().max(1)
            );
            for step in &j.steps {
                let (nodes, name, s, e) = match step.as_str() {
                    "batch" => (vec![j.nodes[0].clone()], "batch", j.start_s, j.end_s),
                    "extern" => (j.nodes.clone(), "extern", j.start_s, j.end_s),
                    _ => (j.nodes.clone(), j.name.as_str(), j.start_s.map(|s| s + 19), j.end_s.map(|e| e - 2)),
                };
                let run = s.map_or(0, |s| e.unwrap_or(exported) - s);
                out += &format!(
                    "{}.{step}|{name}|||{}|{}|{}|{}|{}|{}\n",
                    j.job_id,
                    j.state,
                    time(s),
                    time(e),
                    elapsed(run),
                    nodes.len(),
                    hostlist::compress(&nodes)
                );
            }
        }
        out
    }

    /// The switch map as CSV `node,switch`.
    pub fn switch_map_csv(&self) -> String {
        let mut out = String::from("node,switch\n");
        for (node, switch) in &self.switches {
            out += &format!("{node},{switch}\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{GeneratorConfig, generate};

    fn truth(spec: &str) -> JobsTruth {
        let cfg = GeneratorConfig::parse_spec(spec).unwrap();
        scheduler_log(&generate(&cfg).unwrap().truth).unwrap()
    }

    #[test]
    fn neighbours_follow_the_cast() {
        // 16 ranks on 4 nodes of switch sw00; io_burst's nodes 5 and 6 are on sw00 too.
        let t = truth("ranks=16,iterations=5,compute=400ms");
        let ids = |v: &[Neighbour]| v.iter().map(|x| x.job_id).collect::<Vec<_>>();
        assert_eq!(ids(&t.neighbours_by_node), [40_995, 40_996]);
        assert_eq!(ids(&t.neighbours_by_switch), [40_995, 40_996, 41_005]);
        assert_eq!(t.neighbours_by_node[0].shared_nodes, 2);
        assert!(t.neighbours_by_switch[2].overlap_s < t.neighbours_by_switch[0].overlap_s);
    }

    #[test]
    fn sacct_text_reads_back() {
        let t = truth("ranks=8,iterations=2");
        let text = t.sacct_text();
        let batch = crate::jobs::sacct::parse(text.as_bytes(), std::path::Path::new("sacct.txt")).unwrap();
        let allocations = t.jobs.len();
        let steps: usize = t.jobs.iter().map(|j| j.steps.len()).sum();
        assert_eq!(batch.num_rows(), allocations + steps);
        assert!(text.contains("41000|stencil2d|alice|batch|COMPLETED|2026-03-02T07:59:40|"), "{text}");
        assert!(text.contains("41000.0|stencil2d|||COMPLETED|2026-03-02T07:59:59|"), "{text}");
        assert!(text.contains("|node[000-001]\n"), "{text}");
        assert!(text.contains("41030|queued|erin|batch|PENDING|Unknown|Unknown|00:00:00|1|None assigned"), "{text}");
        assert!(t.switch_map_csv().starts_with("node,switch\nnode000,sw00\n"));
    }

    #[test]
    fn no_log_without_a_start() {
        let cfg = GeneratorConfig::parse_spec("ranks=4,start=none").unwrap();
        assert!(scheduler_log(&generate(&cfg).unwrap().truth).is_none());
    }
}
