//! The cluster against the embedded engine, whole processes: a scheduler and 1 or 2 executors
//! (1 vcore each) started on 127.0.0.1 from a commdb built with the `cluster` feature, and
//! queries over a store run by a client with `--cluster`, then by the embedded engine. Prints,
//! per query, the client's wall time and peak memory, and each cluster process's peak memory
//! (VmHWM; a cluster is started for each query), and whether the rows are the embedded
//! engine's (floats to 1e-9). A last setting gives each of N executors (2 unless given) a
//! `--memory-limit` of the embedded process's peak for that query over N (at most 1 GiB): the
//! analyses that spread still answer, each executor holding its share.
//!
//! `COMMDB_BIN=PATH cargo bench -p commdb-shell --bench cluster -- [--limited] STORE [ROUNDS] [N]
//! [QUERY...]`, PATH a release commdb built with `--features cluster` (the bench itself only
//! starts processes); QUERY names some of the queries below (all unless given); `--limited`
//! runs only the embedded engine and the last setting (at 1 B events the others take hours).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// (label, SQL) measured in every setting.
const QUERIES: [(&str, &str); 20] = [
    ("trivial", "SELECT 1"),
    ("scan", "SELECT count(*), sum(bytes), max(recv_ts) FROM messages"),
    ("aggregate", "SELECT count(*) FROM (SELECT rank, count(*), sum(duration) FROM calls GROUP BY rank)"),
    ("comm_matrix", "SELECT count(*), sum(bytes) FROM comm_matrix()"),
    ("latency_criteria", "SELECT count(*), sum(criterion_ns) FROM latency_criteria()"),
    ("lod_calls", "SELECT count(*), sum(time_in_slot_ns) FROM lod_calls(pixels => 1920)"),
    ("time_profile", "SELECT count(*), sum(time_ns) FROM time_profile()"),
    ("attribution", "SELECT count(*), sum(messages) FROM attribution(window_ns => '10ms')"),
    (
        "window 10 ms",
        "CREATE VIEW w AS SELECT * FROM messages WHERE send_ts BETWEEN 100000000 AND 110000000; \
         SELECT count(*), sum(delayed_share) FROM attribution('w', window_ns => '1ms')",
    ),
    ("wait_states", "SELECT count(*), sum(wait_ns) FROM wait_states()"),
    ("wait_states paths", "SELECT count(*), sum(wait_ns), count(path), count(thread) FROM wait_states()"),
    (
        "rank_diagnosis",
        "SELECT cause, count(*), sum(waits_suffered_ns), sum(waits_caused_ns) FROM rank_diagnosis() GROUP BY cause ORDER BY cause",
    ),
    ("critical_path", "SELECT count(*), sum(duration) FROM critical_path()"),
    ("critical_path_profile", "SELECT count(*), sum(path_ns) FROM critical_path_profile()"),
    ("delay_costs", "SELECT count(*), sum(cost_ns) FROM delay_costs()"),
    ("remap_suggestion", "SELECT count(*), count(DISTINCT suggested_node) FROM remap_suggestion()"),
    ("dag_nodes", "SELECT count(*), sum(node_id), sum(sends), sum(bytes_recv), sum(load_balance) FROM dag_nodes()"),
    ("dag_edges", "SELECT count(*), sum(from_node), sum(to_node), sum(latency) FROM dag_edges()"),
    ("ideal_replay", "SELECT count(*), sum(mpi_ideal_ns), sum(ideal_end), sum(trf_cumulative) FROM ideal_replay()"),
    (
        "transfer_efficiency",
        "SELECT count(*), sum(ideal_ns), sum(efficiency), sum(unplaced) FROM transfer_efficiency()",
    ),
];

/// Whether two outputs hold the same rows, in any order, numbers that are not whole equal to
/// 1e-9 of their size (sums of floating-point values taken in another order).
fn same_rows(a: &str, b: &str) -> bool {
    let sorted = |t: &str| {
        let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    let (a, b) = (sorted(a), sorted(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let (xs, ys): (Vec<&str>, Vec<&str>) = (x.split(',').collect(), y.split(',').collect());
            xs.len() == ys.len()
                && xs.iter().zip(&ys).all(|(p, q)| {
                    p == q
                        || matches!((p.parse::<f64>(), q.parse::<f64>()), (Ok(u), Ok(v)) if (u - v).abs() <= 1e-9 * u.abs().max(v.abs()))
                })
        })
}

fn binary() -> PathBuf {
    std::env::var_os("COMMDB_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_commdb")), PathBuf::from)
}

/// The peak resident memory of a live process, MiB.
fn peak_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn free_port() -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

fn wait_for(log: &Path, text: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log).unwrap_or_default().contains(text) {
        assert!(Instant::now() < until, "{}: no '{text}'", log.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scheduler and `n` executors, killed when dropped, with their shuffle files in `dir`
/// (removed with it).
struct Cluster {
    processes: Vec<(String, Child)>,
    url: String,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(n: usize, executor_args: &[&str]) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let address = format!("127.0.0.1:{}", free_port());
        let spawn = |args: &[&str], log: &Path| {
            let file = std::fs::File::create(log).unwrap();
            Command::new(binary()).args(args).stdout(Stdio::null()).stderr(file).spawn().unwrap()
        };
        let log = dir.join("scheduler.log");
        let mut processes = vec![("scheduler".to_string(), spawn(&["scheduler", "--bind", &address], &log))];
        wait_for(&log, "listening");
        for i in 0..n {
            let bind = format!("127.0.0.1:{}", free_port());
            let log = dir.join(format!("executor{i}.log"));
            let work = dir.join(format!("work{i}"));
            std::fs::create_dir_all(&work).unwrap();
            let work = work.display().to_string();
            let mut args =
                vec!["executor", "--scheduler", &address, "--bind", &bind, "--vcores", "1", "--work-dir", &work];
            args.extend_from_slice(executor_args);
            processes.push((format!("executor {i}"), spawn(&args, &log)));
            wait_for(&log, "asking the scheduler for tasks");
        }
        Cluster { processes, url: format!("df://{address}"), _dir: tmp }
    }

    /// The largest peak of an executor, MiB.
    fn executor_peak(&self) -> f64 {
        self.processes
            .iter()
            .filter(|(name, _)| name.starts_with("executor"))
            .map(|(_, c)| peak_mib(c.id()))
            .fold(0.0, f64::max)
    }

    /// Each executor's resident peak, MiB.
    fn executor_peaks(&self) -> Vec<f64> {
        self.processes.iter().filter(|(name, _)| name.starts_with("executor")).map(|(_, c)| peak_mib(c.id())).collect()
    }

    fn peaks(&self) -> String {
        let peaks: Vec<String> =
            self.processes.iter().map(|(name, c)| format!("{name} {:.0} MiB", peak_mib(c.id()))).collect();
        peaks.join(", ")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.processes {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run `sql` over `store` in a client process: (wall seconds, client peak MiB, output).
fn client(store: &str, cluster: Option<&str>, sql: &str) -> (f64, f64, String) {
    try_client(store, cluster, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// `client`, or the client's error.
fn try_client(store: &str, cluster: Option<&str>, sql: &str) -> Result<(f64, f64, String), String> {
    let bin = binary().display().to_string();
    let mut args = vec!["-f", "%M", "--", &bin, store, "-q", "--format", "csv"];
    if let Some(url) = cluster {
        args.extend(["--cluster", url]);
    }
    args.extend(["-c", sql]);
    let started = Instant::now();
    let o = Command::new("/usr/bin/time").args(&args).stdin(Stdio::null()).output().expect("/usr/bin/time");
    let wall = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(err.lines().find(|l| l.contains("error")).unwrap_or(&err).to_string());
    }
    let peak_kb: f64 = err.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(0.0);
    Ok((wall, peak_kb / 1024.0, String::from_utf8_lossy(&o.stdout).into_owned()))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let limited_only = args.iter().any(|a| a == "--limited");
    args.retain(|a| a != "--limited");
    let Some(store) = args.first() else {
        eprintln!("usage: COMMDB_BIN=PATH cargo bench -p commdb-shell --bench cluster -- STORE [ROUNDS]");
        return;
    };
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(1);
    let executors: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(2);
    let chosen: Vec<(&str, &str)> =
        QUERIES.iter().copied().filter(|(label, _)| args.len() < 4 || args[3..].iter().any(|a| a == label)).collect();
    println!("store {store}, commdb {}, best of {rounds}", binary().display());
    let mut embedded = Vec::new();
    for &(label, sql) in &chosen {
        let best = (0..rounds).map(|_| client(store, None, sql)).min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        println!("embedded      {label:18} {:7.2} s  peak {:6.0} MiB", best.0, best.1);
        embedded.push(best);
    }
    for n in if limited_only { vec![] } else { vec![1, executors] } {
        for ((label, sql), base) in chosen.iter().zip(&embedded) {
            let cluster = Cluster::start(n, &[]);
            let best =
                (0..rounds).map(|_| client(store, Some(&cluster.url), sql)).min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
            let same = if same_rows(&best.2, &base.2) { "same rows" } else { "DIFFERENT rows" };
            println!(
                "{n} executor(s) {label:18} {:7.2} s  ({:.2}x embedded)  {same}  client {:.0} MiB, {}",
                best.0,
                best.0 / base.0.max(1e-9),
                best.1,
                cluster.peaks()
            );
        }
    }
    // Each executor allowed its share of the memory the embedded process took for the query.
    let mut table = Vec::new();
    for ((label, sql), base) in chosen.iter().zip(&embedded) {
        let mib = (base.1 / executors as f64).floor().clamp(1.0, 1024.0);
        let limit = format!("{mib}M");
        let cluster = Cluster::start(executors, &["--memory-limit", &limit]);
        match try_client(store, Some(&cluster.url), sql) {
            Ok(r) => {
                let same = if same_rows(&r.2, &base.2) { "same rows" } else { "DIFFERENT rows" };
                println!(
                    "{executors} executors of {limit:>6} {label:18} {:7.2} s  ({:.2}x embedded)  {same}  largest executor peak {:.2}x its limit: {}",
                    r.0,
                    r.0 / base.0.max(1e-9),
                    cluster.executor_peak() / mib,
                    cluster.peaks()
                );
                let peaks: Vec<String> = cluster.executor_peaks().iter().map(|p| format!("{p:.0}")).collect();
                table.push(format!(
                    "| {label} | {:.2} s, {:.0} MiB | {:.2} s ({:.2}x), limit {mib} MiB | {} | {:.2} | {same} |",
                    base.0,
                    base.1,
                    r.0,
                    r.0 / base.0.max(1e-9),
                    peaks.join(", "),
                    cluster.executor_peak() / mib
                ));
            }
            Err(e) => {
                println!("{executors} executors of {limit:>6} {label:18} failed: {e}");
                table.push(format!("| {label} | {:.2} s, {:.0} MiB | failed: {e} | | | |", base.0, base.1));
            }
        }
    }
    // The same as one table, to paste into docs/performance.md.
    if !table.is_empty() {
        println!();
        println!(
            "| query | embedded | {executors} executors at 1/{executors} of its peak | executor peaks (MiB) | largest peak / limit | rows |"
        );
        println!("|---|---|---|---|---|---|");
        for row in table {
            println!("{row}");
        }
    }
}
