//! commdb on a cluster (the `cluster` feature): a scheduler and two executors started as
//! separate processes on 127.0.0.1, each on ports of its own, and the client sending them
//! queries over a store cut into many parts. Every saved report, the README tour and a set of
//! analyses must give the embedded engine's rows; both executors must run tasks of one job;
//! failures (an executor killed mid-query, nothing at the scheduler's address, a port in use, a
//! store the cluster cannot see) must give an error that names what went wrong, never a hang.
#![cfg(feature = "cluster")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A process of the cluster, killed when dropped; its stderr goes to `log`.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(log: &Path, args: &[&str]) -> Process {
        Process::start_with(Command::new(env!("CARGO_BIN_EXE_commdb")), log, args)
    }

    fn start_with(mut command: Command, log: &Path, args: &[&str]) -> Process {
        let file = std::fs::File::create(log).unwrap();
        let child = command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(file).spawn().unwrap();
        Process { child, log: log.to_path_buf() }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log holds `count` lines containing `text`.
    fn wait_for(&self, text: &str, count: usize, seconds: u64) {
        let until = Instant::now() + Duration::from_secs(seconds);
        while self.log().matches(text).count() < count {
            assert!(Instant::now() < until, "no '{text}' x{count} within {seconds} s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on, with the next one free too (an executor takes two).
fn free_ports() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// A scheduler and `executors` executors (1 vcore each), all registered.
struct Cluster {
    scheduler: Process,
    executors: Vec<Process>,
    address: String,
    /// Where each executor serves its shuffle files, which names it.
    binds: Vec<String>,
}

impl Cluster {
    fn start(dir: &Path, executors: usize, executor_args: &[&str]) -> Cluster {
        Cluster::start_with(dir, &[], executors, executor_args)
    }

    /// A cluster whose scheduler is given `scheduler_args` too.
    fn start_with(dir: &Path, scheduler_args: &[&str], executors: usize, executor_args: &[&str]) -> Cluster {
        let address = format!("127.0.0.1:{}", free_ports());
        let scheduler_args = [&["scheduler", "--bind", &address][..], scheduler_args].concat();
        let scheduler = Process::start(&dir.join("scheduler.log"), &scheduler_args);
        scheduler.wait_for("listening", 1, 30);
        let (mut started, mut binds) = (Vec::new(), Vec::new());
        for i in 0..executors {
            let bind = format!("127.0.0.1:{}", free_ports());
            let mut args = vec!["executor", "--scheduler", &address, "--bind", &bind, "--vcores", "1"];
            args.extend_from_slice(executor_args);
            let executor = Process::start(&dir.join(format!("executor{i}.log")), &args);
            executor.wait_for("asking the scheduler for tasks", 1, 30);
            started.push(executor);
            binds.push(bind);
        }
        Cluster { scheduler, executors: started, address, binds }
    }

    fn url(&self) -> String {
        format!("df://{}", self.address)
    }

    /// The jobs each executor ran tasks of.
    fn jobs(&self) -> Vec<std::collections::BTreeSet<String>> {
        self.executors
            .iter()
            .map(|e| {
                e.log()
                    .lines()
                    .filter_map(|l| l.split(" job ").nth(1)?.split_whitespace().next().map(str::to_string))
                    .collect()
            })
            .collect()
    }
}

/// A store of 32 ranks converted from OTF2 in parts of 2,000 rows (at least 8 parts a table).
fn store(dir: &Path) -> PathBuf {
    store_of(dir, "store", &[])
}

/// The store `name` of the same run but for the generator's options `changed`.
fn store_of(dir: &Path, name: &str, changed: &[&str]) -> PathBuf {
    let archive = dir.join(if name == "store" { "otf2".to_string() } else { format!("otf2-{name}") });
    let mut args = vec![
        "generate",
        archive.to_str().unwrap(),
        "--ranks",
        "32",
        "--iterations",
        "30",
        "--imbalance",
        "3:2",
        "--background-traffic",
        "1ms:2ms:4",
        "--format",
        "otf2",
    ];
    // An option given in `changed` replaces the default's value.
    for pair in changed.chunks(2) {
        match args.iter().position(|a| *a == pair[0]) {
            Some(at) if pair.len() == 2 => args[at + 1] = pair[1],
            _ => args.extend_from_slice(pair),
        }
    }
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = dir.join(name);
    let anchor = archive.join("traces.otf2");
    let o = run(&["convert", anchor.to_str().unwrap(), store.to_str().unwrap(), "--part-rows", "2000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let parts = std::fs::read_dir(store.join("events")).unwrap().count();
    assert!(parts >= 8, "the store's events are in {parts} parts");
    store
}

/// The run of `store` converted into a store of one part (its default part size).
fn one_part(dir: &Path) -> PathBuf {
    let one = dir.join("one-part");
    let anchor = dir.join("otf2").join("traces.otf2");
    let o = run(&["convert", anchor.to_str().unwrap(), one.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    one
}

/// The output of `args` over the store, embedded or on the cluster at `url`.
fn answer(store: &Path, url: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut all = vec![store.to_str().unwrap(), "-q", "--format", "csv"];
    if let Some(url) = url {
        all.extend(["--cluster", url]);
    }
    all.extend_from_slice(args);
    let o = run(&all);
    // A process ended by a signal says nothing on stderr: the status says how it ended.
    let said = format!("{} ({})", stderr(&o), o.status);
    (o.status.success(), stdout(&o), said)
}

/// Lines sorted, for answers whose order no ORDER BY fixes.
fn sorted(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

/// The same CSV, but that numbers (with the same unit after them) may differ by `tolerance`
/// (relative).
fn assert_close(a: &str, b: &str, tolerance: f64, what: &str) {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(la.len(), lb.len(), "{what}:\n{a}\n{b}");
    for (x, y) in la.iter().zip(&lb) {
        let (fx, fy): (Vec<&str>, Vec<&str>) = (x.split(',').collect(), y.split(',').collect());
        assert_eq!(fx.len(), fy.len(), "{what}: {x} / {y}");
        for (u, v) in fx.iter().zip(&fy) {
            if u == v {
                continue;
            }
            // A list's items are fields too: `"[2.5`, ` 3.1]"`.
            let split = |t: &str| -> Option<(f64, String)> {
                let t = t.trim_start_matches(['"', '[', ' ']);
                let end =
                    t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e')).unwrap_or(t.len());
                Some((t[..end].parse().ok()?, t[end..].to_string()))
            };
            let (Some((nu, su)), Some((nv, sv))) = (split(u), split(v)) else { panic!("{what}: {u} / {v}") };
            assert!(su == sv && (nu - nv).abs() <= tolerance * nu.abs().max(nv.abs()), "{what}: {u} / {v}");
        }
    }
}

/// Every table function commdb declares, called as it must be on the store (files where it
/// reads one), gives the embedded rows on the cluster at `url` (floats to 1e-9): the
/// analyses that spread and those that run in one task alike. The calls run in one process
/// each way, each answer after a line that names it.
fn every_table_function(store: &Path, url: &str) {
    let data = root().join("tests").join("data");
    let parquet = tempfile::tempdir().unwrap();
    let ranks = parquet.path().join("ranks.parquet");
    let o =
        run(&[store.to_str().unwrap(), "-q", "-c", &format!("COPY (SELECT rank FROM ranks) TO '{}'", ranks.display())]);
    assert!(o.status.success(), "{}", stderr(&o));
    let call = |name: &str| match name {
        "read_sacct" => format!("read_sacct('{}')", data.join("sacct_jobs.txt").display()),
        "read_csv" => format!("read_csv('{}')", data.join("three_ranks.csv").display()),
        "read_parquet" => format!("read_parquet('{}')", ranks.display()),
        "read_swf" | "swf_header" => format!("{name}('{}')", data.join("small.swf").display()),
        "lod_calls" | "lod_messages" | "lod_collectives" => format!("{name}(pixels => 100)"),
        "compare_runs" => "compare_runs(a => 'public', b => 'public', by => 'rank')".to_string(),
        "scaling" => "scaling(runs => 'public,public')".to_string(),
        _ => format!("{name}()"),
    };
    let functions: Vec<&str> =
        commdb_udfs::functions().iter().filter(|f| f.kind() == commdb_udfs::Kind::Table).map(|f| f.name).collect();
    assert!(functions.len() > 40, "{functions:?}");
    let mut args: Vec<String> = Vec::new();
    for name in &functions {
        args.push("-c".into());
        args.push(format!("SELECT '@@ {name}' AS function"));
        args.push("-c".into());
        args.push(format!("SELECT * FROM {}", call(name)));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let embedded = answer(store, None, &args);
    let distributed = answer(store, Some(url), &args);
    assert!(embedded.0, "every table function embedded: {}", embedded.2);
    assert!(distributed.0, "every table function on the cluster: {}", distributed.2);
    let sections = |text: &str| -> Vec<(String, String)> {
        text.split("@@ ")
            .skip(1)
            .map(|part| {
                let (name, rest) = part.split_once('\n').unwrap_or((part, ""));
                // The next marker's header line ends this answer.
                let rest = rest.strip_suffix("function\n").unwrap_or(rest);
                (name.trim().to_string(), rest.to_string())
            })
            .collect()
    };
    let (e, d) = (sections(&embedded.1), sections(&distributed.1));
    assert_eq!(e.len(), functions.len(), "{}", embedded.1);
    assert_eq!(d.len(), functions.len(), "{}", distributed.1);
    for ((name, a), (_, b)) in e.iter().zip(&d) {
        assert!(a.lines().count() >= 1, "{name}: no header");
        assert_close(&sorted(b).join("\n"), &sorted(a).join("\n"), 1e-9, name);
    }
}

/// The SQL of the README's tour.
fn readme_tour() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("```sql\n-- 1. What is this run?").expect("the README's tour");
    let body = &readme[start + "```sql\n".len()..];
    body[..body.find("```").unwrap()].to_string()
}

#[test]
fn a_cluster_gives_the_embedded_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // The same run with rank 5 computing twice as long from iteration 15, for the comparisons.
    let after = store_of(dir.path(), "after", &["--slow-rank", "5:2:15"]);
    let attach_after = format!("ATTACH '{}' AS b", after.display());
    let cluster = Cluster::start(dir.path(), 2, &[]);
    let url = cluster.url();

    // Every saved report, byte for byte.
    let mut reports: Vec<PathBuf> =
        std::fs::read_dir(root().join("queries")).unwrap().map(|e| e.unwrap().path()).collect();
    reports.sort();
    assert!(reports.len() >= 10);
    let sacct = dir.path().join("otf2").join("sacct.txt");
    let switches = dir.path().join("otf2").join("switches.csv");
    let logs = ["--jobs", sacct.to_str().unwrap(), "--switches", switches.to_str().unwrap()];
    for report in &reports {
        let file = report.to_str().unwrap();
        let text = std::fs::read_to_string(report).unwrap();
        // Job reports read a scheduler log (attached as a table, read in the client).
        let mut args: Vec<&str> = Vec::new();
        if text.lines().take_while(|l| l.starts_with("--")).any(|l| l.contains("--jobs")) {
            args.extend(logs);
        }
        // Reports that compare two runs read the run after as b.
        let compares = text.lines().take_while(|l| l.starts_with("--")).any(|l| l.contains("AS b\""));
        if compares {
            args.extend(["-c", &attach_after]);
        }
        args.extend(["-f", file]);
        let embedded = answer(&store, None, &args);
        let distributed = answer(&store, Some(&url), &args);
        assert!(embedded.0, "{file} embedded: {}", embedded.2);
        assert!(distributed.0, "{file} on the cluster: {}", distributed.2);
        if compares {
            // Means and shares summed in another order differ in their last digits (and rows
            // of shares equal but for them may change places).
            assert_close(&sorted(&distributed.1).join("\n"), &sorted(&embedded.1).join("\n"), 1e-9, file);
        } else if text.contains("approx_") {
            // Approximate percentiles (a t-digest) depend on how the rows were split.
            assert_close(&distributed.1, &embedded.1, 0.02, file);
        } else if text.contains("delta_histogram") {
            // ScalaTrace's bins follow how the values were split among partial histograms (the
            // cluster sweeps its parts in separate tasks): the totals are exact, the bins hold
            // every value.
            let (embedded_totals, embedded_bins) = split_bins(&embedded.1);
            let (distributed_totals, distributed_bins) = split_bins(&distributed.1);
            assert_eq!(distributed_totals, embedded_totals, "{file}");
            assert_eq!(bin_counts(&distributed_bins), bin_counts(&embedded_bins), "{file}");
        } else {
            assert_eq!(distributed.1, embedded.1, "{file}");
        }
    }

    // The README's tour, and analyses of every shape, with views and a second store attached.
    let tour = readme_tour();
    let tour: Vec<&str> = tour.lines().filter(|l| !l.trim_start().starts_with("--")).collect();
    let tour = tour.join("\n");
    let mut queries: Vec<String> = tour.split(';').filter(|q| q.contains("SELECT")).map(str::to_string).collect();
    for q in [
        "SELECT * FROM comm_matrix()",
        "SELECT * FROM lod_calls(pixels => 200)",
        "SELECT * FROM time_profile()",
        "SELECT * FROM call_tree()",
        "SELECT * FROM compute_deltas()",
        "SELECT * FROM latency_criteria()",
        "SELECT * FROM message_latency()",
        "SELECT * FROM attribution('messages', '1ms')",
        "SELECT * FROM load_imbalance()",
        "SELECT * FROM wait_states()",
        "SELECT * FROM critical_path()",
        "SELECT * FROM ideal_replay()",
        "SELECT * FROM dag_edges()",
        "SELECT * FROM process_regions()",
        "SELECT * FROM iterations()",
        "SELECT * FROM iteration_profile()",
        "SELECT * FROM scaling(runs => 'public,public')",
        "SELECT rank, wallclock(min(ts)) FROM events GROUP BY rank",
        "SELECT node FROM ranks LIMIT 3",
        "SELECT src, dst, count(*), sum(bytes) FROM messages WHERE send_ts BETWEEN 1000000 AND 2000000 GROUP BY 1, 2",
        // Relations given as a query or a CTE travel with the call.
        "SELECT * FROM wait_states((SELECT * FROM messages WHERE send_ts > 1500000))",
        "WITH late AS (SELECT * FROM messages WHERE send_ts > 1500000) SELECT * FROM comm_partners(late)",
        "SELECT * FROM rank_diagnosis((SELECT * FROM messages WHERE src < 4), collectives => (SELECT * FROM collectives))",
    ] {
        queries.push(q.to_string());
    }
    for q in &queries {
        let embedded = answer(&store, None, &["-c", q]);
        let distributed = answer(&store, Some(&url), &["-c", q]);
        assert!(embedded.0, "{q} embedded: {}", embedded.2);
        assert!(distributed.0, "{q} on the cluster: {}", distributed.2);
        // Sums of floating-point values taken in another order may differ in the last digits.
        assert_close(&sorted(&distributed.1).join("\n"), &sorted(&embedded.1).join("\n"), 1e-9, q);
    }
    every_table_function(&store, &url);
    let attached = format!(
        "CREATE VIEW late AS SELECT * FROM messages WHERE send_ts > 1500000; ATTACH '{}' AS b; \
         SELECT (SELECT count(*) FROM rank_diagnosis('late')) AS diagnosed, \
                (SELECT sum(bytes) FROM comm_matrix('b.messages')) AS bytes, \
                (SELECT count(*) FROM b.events e JOIN ranks r ON e.rank = r.rank) AS events",
        store.display()
    );
    let embedded = answer(&store, None, &["-c", &attached]);
    let distributed = answer(&store, Some(&url), &["-c", &attached]);
    assert!(distributed.0, "{}", distributed.2);
    assert_eq!(distributed.1, embedded.1);

    // Two runs compared by every key, and the iterations that read two runs' tables.
    for by in ["region", "rank", "node", "pair", "size_class", "iteration"] {
        let q = format!("SELECT * FROM compare_runs(b => 'b', by => '{by}')");
        let embedded = answer(&store, None, &["-c", &attach_after, "-c", &q]);
        let distributed = answer(&store, Some(&url), &["-c", &attach_after, "-c", &q]);
        assert!(embedded.0, "{q} embedded: {}", embedded.2);
        assert!(distributed.0, "{q} on the cluster: {}", distributed.2);
        assert_close(&sorted(&distributed.1).join("\n"), &sorted(&embedded.1).join("\n"), 1e-9, &q);
        if by == "rank" {
            assert!(distributed.1.lines().nth(1).is_some_and(|l| l.starts_with("5,compute_ns,")), "{}", distributed.1);
        }
    }

    // COPY writes what the cluster computed.
    let copied = dir.path().join("matrix.csv");
    let copy = format!("COPY (SELECT * FROM comm_matrix() ORDER BY src, dst) TO '{}'", copied.display());
    let distributed = answer(&store, Some(&url), &["-c", &copy]);
    assert!(distributed.0, "{}", distributed.2);
    let embedded = answer(&store, None, &["-c", "SELECT * FROM comm_matrix() ORDER BY src, dst"]);
    // The executors' CSV writer quotes every field (Ballista 55 carries DataFusion's CSV
    // options so): the same values.
    assert_eq!(std::fs::read_to_string(&copied).unwrap().replace('"', ""), embedded.1);

    // Both executors ran tasks of one job, and the analyses ran there.
    let jobs = cluster.jobs();
    assert!(jobs[0].intersection(&jobs[1]).next().is_some(), "no job ran on both executors: {jobs:?}");
    let logs: String = cluster.executors.iter().map(Process::log).collect();
    assert!(logs.contains("<- wait_states"), "{logs}");
    assert!(cluster.scheduler.log().contains("listening"));
}

/// The analyses that spread run a task per part of their first input on both executors: the
/// sweeps by rank over the calls (a store's parts hold whole ranks), the folds over the
/// messages as partials merged in one task. Each executor's memory budget is one the embedded
/// engine cannot sweep the store's calls in, yet the answers are the embedded engine's (with
/// room).
#[test]
fn analyses_spread_over_both_executors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let budget = "512KiB";
    let cluster = Cluster::start(dir.path(), 2, &["--memory-limit", budget]);
    for (function, query, embedded_over_budget) in [
        ("lod_calls", "SELECT * FROM lod_calls('calls', 100000)", true),
        ("time_profile", "SELECT * FROM time_profile(bins => 50)", true),
        ("call_tree", "SELECT * FROM call_tree()", false),
        ("comm_matrix", "SELECT * FROM comm_matrix()", false),
        ("message_histogram", "SELECT * FROM message_histogram()", false),
        ("load_imbalance", "SELECT * FROM load_imbalance()", false),
    ] {
        if embedded_over_budget {
            let limited = answer(&store, None, &["--memory-limit", budget, "-c", query]);
            assert!(!limited.0 && limited.2.contains("memory budget"), "{query} embedded in {budget}: {}", limited.2);
        }
        spreads(&cluster, &store, function, query);
    }
    // The criteria's parts are merged in send-time order, which holds a batch of every part
    // at once (more than the budget above): with room.
    drop(cluster);
    let cluster = Cluster::start(dir.path(), 2, &[]);
    spreads(&cluster, &store, "latency_criteria", "SELECT * FROM latency_criteria(max_samples => 50)");
    // attribution's windows, a task per part of the messages, on the criteria their parts gave.
    spreads(&cluster, &store, "latency_criteria", "SELECT * FROM attribution('messages', '1ms')");
    spreads(&cluster, &store, "attribution", "SELECT * FROM attribution('messages', '1ms')");
    // Each message's latency, a task per part of the messages, each reading the criteria.
    spreads(&cluster, &store, "message_latency", "SELECT * FROM message_latency()");
    // The traffic between ranks, a task per part of the messages; their merge partitions it.
    spreads(&cluster, &store, "remap_suggestion", "SELECT * FROM remap_suggestion()");
    spreads(&cluster, &store, "remap_summary", "SELECT * FROM remap_summary(weight => 'bytes')");
    // latency_trend's bins, a task per part of the messages; their merge classifies them.
    spreads(&cluster, &store, "latency_trend", "SELECT * FROM latency_trend()");
    spreads(&cluster, &store, "latency_trend", "SELECT * FROM latency_trend(bin_ns => '2ms', window => 3)");

    // A warning an analysis raises while it runs on an executor is in the executor's log.
    let few = "SELECT count(*) FROM message_latency(min_messages => 1000000)";
    let (ok, _, err) = answer(&store, Some(&cluster.url()), &["-c", few]);
    assert!(ok, "{err}");
    let logs: String = cluster.executors.iter().map(Process::log).collect();
    assert!(logs.contains("notice: message_latency:") && logs.contains("have no latency criterion"), "{logs}");
}

/// The wait states spread (docs/scale.md, "waits folded, then per rank"): each part of the
/// messages gives its candidates, exchanged by the rank that waited; the collectives are
/// exchanged by instance; the waits go to the task that holds their rank's calls, a task per
/// part of the calls. The rows are the embedded engine's, with threads (OpenMP waits) and
/// without, with call paths and without, and so are `rank_diagnosis`' (which sums them); also
/// where the messages and collectives are in one part and the calls in several (their waits
/// are then read by each task of the calls, which keeps its ranks'). The critical path and its
/// profile find their waits so too, keep each location's exits where its calls lie, walk them
/// in one task and name the path's pieces where their calls lie (docs/scale.md, "The critical
/// path"); over a store of one part and over a view they run each step in one task. The delay
/// costs walk the waits in one task.
#[test]
fn the_waits_spread_over_the_executors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let threads = store_of(dir.path(), "threads", &["--threads", "4", "--iterations", "12"]);
    let cluster = Cluster::start(dir.path(), 2, &[]);
    // On a cluster, a partition per part of the calls at least: a task holds a part's share
    // of the ranks whatever the size of the trace.
    let calls_parts = std::fs::read_dir(store.join("calls")).unwrap().count();
    assert!(calls_parts > 2, "the calls are in {calls_parts} parts");
    let setting =
        "SELECT value FROM information_schema.df_settings WHERE name = 'datafusion.execution.target_partitions'";
    let (ok, out, err) = answer(&store, Some(&cluster.url()), &["-c", setting]);
    assert!(ok, "{err}");
    let partitions: usize = out.lines().last().unwrap().trim().parse().unwrap();
    assert!(partitions >= calls_parts, "{partitions} partitions for {calls_parts} parts of the calls");
    for store in [&store, &threads] {
        spreads(&cluster, store, "wait_states", "SELECT * FROM wait_states()");
        spreads(&cluster, store, "wait_states", "SELECT rank, pattern, wait_ns, ts, partner FROM wait_states()");
        for function in ["critical_path", "critical_path_profile", "delay_costs"] {
            spreads(&cluster, store, function, &format!("SELECT * FROM {function}()"));
        }
    }
    spreads(&cluster, &store, "wait_states", "SELECT * FROM rank_diagnosis()");
    // Without a region around each rank's run and without the compute between calls (as
    // Extrae's traces and selective instrumentation have): the path crosses time no region
    // covers, which the pieces' step names from the calls near the pieces only.
    let bare = store_of(dir.path(), "bare", &["--no-enclosing-region", "--uninstrumented-compute"]);
    for function in ["critical_path", "critical_path_profile", "delay_costs"] {
        spreads(&cluster, &bare, function, &format!("SELECT * FROM {function}()"));
    }

    // The messages and collectives in one part, the calls (of 4 threads a rank) in several:
    // parts of messages hold a quarter of the rows of others.
    let few = dir.path().join("few");
    let (ok, count, err) = answer(&threads, None, &["-c", "SELECT 4 * count(*) + 4 FROM messages"]);
    assert!(ok, "{err}");
    let rows = count.lines().last().unwrap().trim().to_string();
    let anchor = dir.path().join("otf2-threads").join("traces.otf2");
    let o = run(&["convert", anchor.to_str().unwrap(), few.to_str().unwrap(), "--part-rows", &rows]);
    assert!(o.status.success(), "{}", stderr(&o));
    let parts = |table: &str| std::fs::read_dir(few.join(table)).unwrap().count();
    assert_eq!((parts("messages"), parts("collectives")), (1, 1));
    assert!(parts("calls") >= 2, "the calls are in {} parts", parts("calls"));
    for function in ["wait_states", "critical_path", "critical_path_profile", "delay_costs"] {
        spreads(&cluster, &few, function, &format!("SELECT * FROM {function}()"));
    }
    // A store of one part, and a view: each step in one task.
    let one = one_part(dir.path());
    let view = "CREATE VIEW late AS SELECT * FROM calls WHERE end_ts > 1000000";
    for (store, query) in [
        (&one, "SELECT * FROM critical_path()"),
        (&one, "SELECT * FROM critical_path_profile()"),
        (&one, "SELECT * FROM delay_costs()"),
        (&store, "SELECT * FROM critical_path('late')"),
        (&store, "SELECT * FROM delay_costs('late')"),
    ] {
        let (e, d) = (
            answer(store, None, &["-c", view, "-c", query]),
            answer(
                store,
                Some(&cluster.url()),
                &["-c", "SET datafusion.execution.target_partitions = 8", "-c", view, "-c", query],
            ),
        );
        assert!(e.0 && d.0, "{query}: {e:?} {d:?}");
        let (e, d) = (sorted(&e.1).join("\n"), sorted(&d.1).join("\n"));
        assert_close(&d, &e, 1e-9, &format!("{query} over {}", store.display()));
    }

    let explain = |query: &str| {
        let parts = "SET datafusion.execution.target_partitions = 8";
        let (ok, out, err) = answer(&store, Some(&cluster.url()), &["-c", parts, "-c", &format!("EXPLAIN {query}")]);
        assert!(ok, "{err}");
        out
    };
    let plan = explain("SELECT * FROM wait_states()");
    for step in [
        "wait_states: analysis, streamed, each part's late senders and receivers, a task per part of its first input",
        "the message waits of each rank's calls, its rows exchanged by rank, a task per partition of the exchange",
        "the waits of each collective instance, its rows exchanged by comm, instance, a task per partition of the exchange",
        "over the waits its messages and collectives gave, a task per part of its first input, with the rows of its ranks' part",
        "partitioning=Hash([CASE WHEN rank@0 >= ",
    ] {
        assert!(plan.contains(step), "no '{step}' in\n{plan}");
    }
    assert!(!plan.contains("one task reading its inputs whole"), "{plan}");
    // Without call paths too: the threads' own waits need each part's calls.
    let plan = explain("SELECT rank, wait_ns FROM wait_states()");
    assert!(plan.contains("with the rows of its ranks' part"), "{plan}");
    assert!(!plan.contains("one task reading its inputs whole"), "{plan}");
    // The critical path: each location's exits where its calls lie, the walk over them once,
    // the path's pieces named where their calls lie.
    let plan = explain("SELECT * FROM critical_path()");
    for step in [
        "critical_path: analysis, streamed by rank, each location's exits: the stretches and waits the walk can leave it at, a task per part of its first input, with the rows of its ranks' part",
        "critical_path: analysis, streamed, the walk over every location's exits, one task reading its inputs whole",
        "critical_path: analysis, streamed by rank, the path's pieces named where their calls lie, a task per part of its first input, with the rows of its ranks' part",
        "critical_path: analysis, the path's segments, numbered, one task reading its inputs whole",
    ] {
        assert!(plan.contains(step), "no '{step}' in\n{plan}");
    }
    // The walk reads the parts' exits as they come: a merge would hold every part at once.
    assert!(!plan.contains("SortPreservingMergeExec"), "{plan}");
    reads_one_exchange(&plan, "the walk over every location's exits");
    // The walk's task exchanges the path's pieces by route itself: each piece's task reads its own.
    exchanges_by_route(&plan, "the walk over every location's exits");
    // The delay costs: each wait's interval from the waits once, each side of each wait
    // measured where its calls lie, the costs handed on once over the sides.
    let plan = explain("SELECT * FROM delay_costs()");
    for step in [
        "delay_costs: analysis, streamed, each part's late senders and receivers, a task per part of its first input",
        "delay_costs: analysis, streamed, the waits of each collective instance, its rows exchanged by comm, instance",
        "delay_costs: analysis, streamed, each location's first instant, a task per part of its first input",
        "delay_costs: analysis, streamed, each wait's synchronisation interval, to its two ranks, one task reading its inputs whole",
        "delay_costs: analysis, streamed by rank, each side of each wait, measured where its calls lie, a task per part of its first input, with the rows of its ranks' part",
        "delay_costs: analysis, streamed, the costs handed on from wait to wait, one task reading its inputs whole",
    ] {
        assert!(plan.contains(step), "no '{step}' in\n{plan}");
    }
    assert!(!plan.contains("over the waits its messages and collectives gave"), "{plan}");
    // The hand-on puts the sides in order itself (analysis/src/merged.rs), not a merge in the plan.
    assert!(!plan.contains("SortPreservingMergeExec"), "{plan}");
    reads_one_exchange(&plan, "the costs handed on from wait to wait");
    // The intervals' task exchanges them by route itself: each side's task reads its ranks' own.
    exchanges_by_route(&plan, "each wait's synchronisation interval");
    // The intervals' step folds its two inputs as they come: each through one exchange (or of
    // one partition already), never a coalescing of a shuffle read per partition.
    reads_one_exchange(&plan, "each wait's synchronisation interval");
    let mut lines = plan.lines().skip_while(|l| !l.contains("each wait's synchronisation interval"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let at = lines.next().map(indent).unwrap_or_default();
    let inputs: Vec<&str> = lines.take_while(|l| indent(l) > at).filter(|l| indent(l) == at + 2).collect();
    assert_eq!(inputs.len(), 2, "{plan}");
    assert!(inputs.iter().all(|l| !l.contains("CoalescePartitionsExec")), "{inputs:?}\n{plan}");
}

/// The DAG spreads (docs/scale.md, "The DAG"): each part of the messages gives their halves,
/// exchanged by rank for Algorithm 2, the nodes numbered from each rank's count; the edges
/// pair the halves' nodes and the messages' sizes by range of msg_id. The rows are the embedded engine's, on clocks that
/// agree, on skewed clocks (messages received before they are sent, which the check for a
/// cycle goes through) and on a store of one part; a cycle fails both the same way.
#[test]
fn the_dag_spreads_over_the_executors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let cluster = Cluster::start(dir.path(), 2, &[]);
    for function in ["dag_nodes", "dag_edges"] {
        spreads(&cluster, &store, function, &format!("SELECT * FROM {function}()"));
    }
    spreads(&cluster, &store, "dag_edges", "SELECT * FROM dag_edges(min_messages => 2, bucket_bytes => 1024)");

    // Skewed clocks, left uncorrected: about half the messages arrive before they leave.
    let archive = dir.path().join("otf2-skew");
    let o = run(&[
        "generate",
        archive.to_str().unwrap(),
        "--ranks",
        "16",
        "--iterations",
        "20",
        "--clock-skew",
        "--format",
        "otf2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let skewed = dir.path().join("skewed");
    let anchor = archive.join("traces.otf2");
    let convert = ["convert", "--clock-correction", "off", anchor.to_str().unwrap(), skewed.to_str().unwrap()];
    let o = run(&[&convert[..], &["--part-rows", "500"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let (ok, early, err) =
        answer(&skewed, None, &["-c", "SELECT count(*) FILTER (WHERE recv_ts <= send_ts) > 100 FROM messages"]);
    assert!(ok && early.contains("true"), "{early} {err}");
    for function in ["dag_nodes", "dag_edges"] {
        spreads(&cluster, &skewed, function, &format!("SELECT * FROM {function}()"));
    }

    // Each rank receives the other's message before sending its own: a cycle, embedded and
    // on the cluster; and the store in one part.
    let crossing = dir.path().join("crossing");
    let o = run(&["convert", root().join("tests/data/crossing.csv").to_str().unwrap(), crossing.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let one = one_part(dir.path());
    for function in ["dag_nodes", "dag_edges"] {
        let query = format!("SELECT * FROM {function}()");
        let embedded = answer(&crossing, None, &["-c", &query]);
        let distributed = answer(&crossing, Some(&cluster.url()), &["-c", &query]);
        for (ok, _, err) in [embedded, distributed] {
            assert!(!ok && err.contains("dag: the dependencies run in a cycle through rank"), "{err}");
        }
        let (e, d) = (answer(&one, None, &["-c", &query]), answer(&one, Some(&cluster.url()), &["-c", &query]));
        assert!(e.0 && d.0, "{query} on one part: {e:?} {d:?}");
        assert_eq!(sorted(&e.1), sorted(&d.1), "{query} on one part");
    }

    let parts = "SET datafusion.execution.target_partitions = 8";
    let (ok, plan, err) =
        answer(&store, Some(&cluster.url()), &["-c", parts, "-c", "EXPLAIN SELECT * FROM dag_edges()"]);
    assert!(ok, "{err}");
    for step in [
        "dag_edges: analysis, streamed, each message's halves, per part of the messages, a task per part of its first input",
        "each rank's nodes counted (Algorithm 2), its rows exchanged by rank, a task per partition of the exchange",
        "the check for a cycle, one task reading its inputs whole",
        "each half's node (Algorithm 2), its rows exchanged by rank, a task per partition of the exchange",
        "each message's size, duration and latency, a task per part of its first input",
        "dag_edges: analysis, streamed, the edges, each message's pieces together, its rows exchanged by id_range, a task per partition of the exchange",
    ] {
        assert!(plan.contains(step), "no '{step}' in\n{plan}");
    }
}

/// The replay spreads (docs/scale.md, "The replay"): each message goes to its sender's part,
/// its send is placed where the sender's calls lie, its receive and the collective members
/// where theirs lie, with each rank's MPI calls as a row, and the replay runs over them in
/// one task. The rows are the embedded engine's, with eager and rendezvous sends, with
/// threads, on a store of one part, and on views whose messages lack a rank, name a rank
/// without calls or fall outside every call (counted as unplaced, as embedded); times that
/// contradict the messages fail both the same way.
#[test]
fn the_replay_spreads_over_the_executors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let threads = store_of(dir.path(), "threads", &["--threads", "4", "--iterations", "12"]);
    let cluster = Cluster::start(dir.path(), 2, &[]);
    for store in [&store, &threads] {
        for function in ["ideal_replay", "transfer_efficiency"] {
            spreads(&cluster, store, function, &format!("SELECT * FROM {function}()"));
        }
    }
    spreads(&cluster, &store, "ideal_replay", "SELECT * FROM ideal_replay(eager_limit => 0)");
    spreads(&cluster, &store, "transfer_efficiency", "SELECT * FROM transfer_efficiency(eager_limit => 1000000000)");
    spreads(&cluster, &store, "ideal_replay", "SELECT rank, pair, ideal_end FROM ideal_replay()");

    // Views (each step in one task), with every kind of side the replay leaves out.
    let views = [
        "CREATE VIEW c AS SELECT * FROM (VALUES (0, 'main', 0, 100), (0, 'MPI_Send', 0, 5), (0, 'MPI_Recv', 25, 35), \
         (0, 'MPI_Send', 50, 52), (0, 'MPI_Send', 60, 61), (0, 'MPI_Allreduce', 70, 80), (1, 'main', 0, 100), \
         (1, 'MPI_Recv', 8, 12), (1, 'MPI_Send', 20, 30), (1, 'MPI_Recv', 38, 42), (1, 'MPI_Allreduce', 72, 80), \
         (2, 'main', 0, 100), (2, 'compute', 10, 20)) AS t(rank, region, start_ts, end_ts)",
        // Eager, rendezvous, no sender, no receiver, a receiver without calls, both sides
        // between calls.
        "CREATE VIEW m AS SELECT * FROM (VALUES (0, 1, 8, 0, 5, NULL, 10), (1, 0, 100000, 20, NULL, 25, 30), \
         (NULL, 1, 8, NULL, NULL, 40, 40), (0, NULL, 8, 50, 50, NULL, NULL), (0, 7, 8, 60, 60, 60, 60), \
         (0, 1, 8, 62, 62, 45, 45)) AS t(src, dst, bytes, send_call_start, send_complete_ts, recv_post_ts, recv_call_start)",
        // Two members, one without a communicator, one on a rank without MPI calls.
        "CREATE VIEW k AS SELECT * FROM (VALUES (0, 0, 0, 70, 80), (0, 0, 1, 72, 80), (NULL, 0, 1, 72, 80), \
         (0, 1, 2, 15, 15)) AS t(comm, instance, rank, begin_ts, end_ts)",
    ];
    let mut args: Vec<&str> = views.iter().flat_map(|v| ["-c", *v]).collect();
    let queries = [
        "SELECT * FROM ideal_replay('c', messages => 'm', collectives => 'k')",
        "SELECT * FROM transfer_efficiency('c', messages => 'm', collectives => 'k')",
        "SELECT rank, unplaced FROM transfer_efficiency('c', messages => 'm', collectives => 'k') ORDER BY rank NULLS LAST",
    ];
    args.extend(queries.iter().flat_map(|q| ["-c", *q]));
    let (e, d) = (answer(&store, None, &args), answer(&store, Some(&cluster.url()), &args));
    assert!(e.0 && d.0, "{e:?} {d:?}");
    // Both sides of the last message fall between calls, and the member on rank 2 has no MPI
    // call to fall in; the sides of rank 7, which has no calls, are not counted.
    assert!(e.1.contains("rank,unplaced\n0,2\n1,2\n2,2\n,6\n"), "the sides left out, counted: {}", e.1);
    assert_close(&sorted(&d.1).join("\n"), &sorted(&e.1).join("\n"), 1e-9, "the replay over views");

    // Times that contradict the messages: the same error, naming the same call.
    let cycle = [
        "-c",
        "CREATE VIEW cc AS SELECT * FROM (VALUES (0, 'MPI_Recv', 0, 10), (0, 'MPI_Send', 20, 30), \
         (1, 'MPI_Recv', 0, 10), (1, 'MPI_Send', 20, 30)) AS t(rank, region, start_ts, end_ts)",
        "-c",
        "CREATE VIEW cm AS SELECT * FROM (VALUES (0, 1, 8, 20, 30, 0, 0), (1, 0, 8, 20, 30, 0, 0)) \
         AS t(src, dst, bytes, send_call_start, send_complete_ts, recv_post_ts, recv_call_start)",
        "-c",
        "CREATE VIEW ck AS SELECT 0 AS comm, 0 AS instance, 0 AS rank, 0 AS begin_ts, 0 AS end_ts WHERE false",
        "-c",
        "SELECT * FROM transfer_efficiency('cc', messages => 'cm', collectives => 'ck')",
    ];
    for (ok, _, err) in [answer(&store, None, &cycle), answer(&store, Some(&cluster.url()), &cycle)] {
        assert!(!ok && err.contains("rank 0's MPI call at 0..10 waits for operations posted after it"), "{err}");
    }

    // A store of one part: each step in one task.
    let one = one_part(dir.path());
    for query in ["SELECT * FROM ideal_replay()", "SELECT * FROM transfer_efficiency()"] {
        let (e, d) = (answer(&one, None, &["-c", query]), answer(&one, Some(&cluster.url()), &["-c", query]));
        assert!(e.0 && d.0, "{query} on one part: {e:?} {d:?}");
        assert_close(&sorted(&d.1).join("\n"), &sorted(&e.1).join("\n"), 1e-9, query);
    }

    let parts = "SET datafusion.execution.target_partitions = 8";
    let (ok, plan, err) =
        answer(&store, Some(&cluster.url()), &["-c", parts, "-c", "EXPLAIN SELECT * FROM ideal_replay()"]);
    assert!(ok, "{err}");
    for step in [
        "ideal_replay: analysis, streamed, each message, to its sender's part, a task per part of its first input",
        "ideal_replay: analysis, streamed by rank, the sends placed in their calls, to their receivers' parts, a task per part of its first input, with the rows of its ranks' part",
        "ideal_replay: analysis, streamed by rank, the receives and collective members placed in their calls, and each rank's MPI calls, a task per part of its first input, with the rows of its ranks' part",
        "ideal_replay: analysis, streamed, the replay over every rank's MPI calls and what each waits for, one task reading its inputs whole",
    ] {
        assert!(plan.contains(step), "no '{step}' in\n{plan}");
    }
}

/// The node of `plan` (EXPLAIN's text) whose line holds `node` reads its first input through an
/// exchange by hash into one partition (`commdb_cluster::one_reader`), not a coalescing of a
/// shuffle read per partition.
fn reads_one_exchange(plan: &str, node: &str) {
    let mut lines = plan.lines().skip_while(|l| !l.contains(node));
    assert!(lines.next().is_some(), "no '{node}' in\n{plan}");
    let below = lines.next().unwrap_or_default();
    assert!(
        below.contains("RepartitionExec: partitioning=Hash(") && below.contains("], 1)"),
        "{node}: {below}\n{plan}"
    );
}

/// The stage of the step of one task whose line in `plan` (EXPLAIN's text, with its stages)
/// holds `node` writes its rows exchanged by route into the 8 partitions of the routed tasks
/// that read them ([`commdb_analysis::routes::Routes::exchanged`]), not one partition that each
/// of those tasks would read whole.
fn exchanges_by_route(plan: &str, node: &str) {
    let lines: Vec<&str> = plan.lines().collect();
    let found = lines.windows(3).any(|w| {
        w[0].contains("ShuffleWriterExec: partitioning=Hash([CASE WHEN rank@0 >= ")
            && w[0].ends_with(", 8)")
            && w[1].contains("Padded: one partition as the first of 8")
            && w[2].contains(node)
    });
    assert!(found, "no stage of '{node}' exchanged by route in\n{plan}");
}

/// `query` on the cluster gives the embedded engine's rows, and the stage that reads the
/// store's parts runs the analysis `function` itself on both executors in one job.
fn spreads(cluster: &Cluster, store: &Path, function: &str, query: &str) {
    let embedded = answer(store, None, &["-c", query]);
    assert!(embedded.0, "{query} embedded: {}", embedded.2);
    // More parts than executors, so that both pull tasks of each analysis; the executors pull
    // tasks as they free up, so one may take them all: a few tries.
    let parts = "SET datafusion.execution.target_partitions = 8";
    let sweep = format!("<- {function} <- StoreScan <- DataSourceExec");
    for _ in 0..5 {
        let distributed = answer(store, Some(&cluster.url()), &["-c", parts, "-c", query]);
        assert!(distributed.0, "{query} on the cluster: {}", distributed.2);
        // Sums of floating-point values taken in another order may differ in the last digits.
        let (distributed, embedded) = (sorted(&distributed.1).join("\n"), sorted(&embedded.1).join("\n"));
        assert_close(&distributed, &embedded, 1e-9, query);
        let jobs: Vec<std::collections::BTreeSet<String>> = cluster
            .executors
            .iter()
            .map(|e| {
                e.log()
                    .lines()
                    .filter(|l| l.contains(&sweep))
                    .filter_map(|l| l.split(" job ").nth(1)?.split_whitespace().next().map(str::to_string))
                    .collect()
            })
            .collect();
        if jobs[0].intersection(&jobs[1]).next().is_some() {
            return;
        }
    }
    panic!("{function} never ran on both executors in one job:\n{}", cluster.executors[0].log());
}

#[test]
fn failures_name_what_failed_and_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());

    // Nothing at the scheduler's address.
    let nobody = format!("df://127.0.0.1:{}", free_ports());
    let started = Instant::now();
    let (ok, _, err) = answer(&store, Some(&nobody), &["-c", "SELECT 1"]);
    assert!(!ok && err.contains(&nobody["df://".len()..]), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));

    // A trace that is not a store.
    let o = run(&["--cluster", &nobody, "generate:ranks=4", "-c", "SELECT 1"]);
    assert!(!o.status.success() && stderr(&o).contains("commdb convert"), "{}", stderr(&o));

    let cluster = Cluster::start(dir.path(), 2, &[]);

    // A port in use.
    let taken = cluster.address.clone();
    let o = run(&["executor", "--scheduler", &taken, "--bind", &taken]);
    assert!(!o.status.success() && stderr(&o).contains(&taken), "{}", stderr(&o));
    let o = run(&["scheduler", "--bind", &taken]);
    assert!(!o.status.success() && stderr(&o).contains(&taken), "{}", stderr(&o));
    // An executor whose scheduler does not answer.
    let o =
        run(&["executor", "--scheduler", &nobody["df://".len()..], "--bind", &format!("127.0.0.1:{}", free_ports())]);
    assert!(!o.status.success() && stderr(&o).contains(&nobody["df://".len()..]), "{}", stderr(&o));

    // An executor killed in the middle of a query: an error, or the answer after a retry.
    let mut cluster = cluster;
    let slow = "SELECT count(*) FROM events a JOIN events b ON a.rank = b.rank AND a.ts < b.ts";
    let mut client = commdb();
    client.args([store.to_str().unwrap(), "-q", "--cluster", &cluster.url(), "-c", slow]);
    let started = Instant::now();
    let mut child = client.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while cluster.executors.iter().all(|e| !e.log().contains("HashJoinExec") && !e.log().contains("JoinExec")) {
        assert!(Instant::now() < until, "the join never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(cluster.executors.remove(0));
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the query hung after an executor died");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success() || !stderr(&o).is_empty());

    // SIGTERM stops the other executor and the scheduler cleanly.
    let mut survivors: Vec<Process> = cluster.executors.drain(..).collect();
    survivors.push(cluster.scheduler);
    for p in &mut survivors {
        let term = Command::new("kill").args(["-TERM", &p.child.id().to_string()]).status().unwrap();
        assert!(term.success());
        let until = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = p.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < until, "no stop within 10 s of SIGTERM:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{}", p.log());
        assert!(p.log().contains(": stopped"), "{}", p.log());
    }
}

/// The analyses that answer "why", which read whole relations in one task.
const WHY: [&str; 11] = [
    "wait_states",
    "rank_diagnosis",
    "critical_path",
    "critical_path_profile",
    "delay_costs",
    "ideal_replay",
    "transfer_efficiency",
    "vector_clocks",
    "dag_nodes",
    "dag_edges",
    "latency_trend",
];

/// A client running a query on the cluster, its output going to files (a pipe nobody reads
/// while it runs would stop it once full).
struct Client {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

/// The client running `query` on the cluster.
fn client(store: &Path, url: &str, query: &str) -> Client {
    let dir = store.parent().unwrap();
    let (out, err) = (dir.join("client.out"), dir.join("client.err"));
    let mut client = commdb();
    client.args([store.to_str().unwrap(), "-q", "--format", "csv", "--cluster", url, "-c", query]);
    client.stdout(std::fs::File::create(&out).unwrap()).stderr(std::fs::File::create(&err).unwrap());
    Client { child: client.spawn().unwrap(), out, err }
}

/// Wait for the client to end within `seconds`, and give whether it succeeded, its output and
/// its errors; past that, fail with the cluster's logs.
fn ended(mut client: Client, seconds: u64, what: &str, cluster: &Cluster) -> (bool, String, String) {
    let until = Instant::now() + Duration::from_secs(seconds);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    loop {
        if let Some(status) = client.child.try_wait().unwrap() {
            return (status.success(), read(&client.out), format!("{} ({status})", read(&client.err)));
        }
        if Instant::now() > until {
            let _ = client.child.kill();
            let executors: Vec<String> = cluster.executors.iter().map(Process::log).collect();
            panic!(
                "{what}: the client still waits after {seconds} s\nclient: {}\nscheduler:\n{}\nexecutors:\n{}",
                read(&client.err),
                cluster.scheduler.log(),
                executors.join("\n--\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The address an executor serves its shuffle files on, as its log's first line says.
fn address_of(executor: &Process) -> String {
    let log = executor.log();
    let line = log.lines().find(|l| l.contains("serving shuffles on ")).unwrap_or_default();
    line.split("serving shuffles on ").nth(1).and_then(|r| r.split(',').next()).unwrap_or_default().to_string()
}

/// The executor that first logs, past `seen` (each executor's log length when the query
/// began), a task whose plan runs one of the "why" analyses; None when the client ended first.
fn running_why(cluster: &Cluster, seen: &[usize], client: &mut Client) -> Option<usize> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        for (i, e) in cluster.executors.iter().enumerate() {
            let log = e.log();
            let new = log.get(seen[i]..).unwrap_or_default();
            if new.lines().any(|l| l.contains(": task ") && WHY.iter().any(|f| l.contains(&format!("<- {f}")))) {
                return Some(i);
            }
        }
        if client.child.try_wait().unwrap().is_some() {
            return None;
        }
        assert!(Instant::now() < until, "no analysis task within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_lost_process_never_hangs_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_of(dir.path(), "why", &["--ranks", "64", "--iterations", "60"]);
    let mut cluster = Cluster::start(dir.path(), 2, &[]);
    let url = cluster.url();
    let (mut landed, mut answered) = (0, 0);
    for (n, function) in WHY.iter().enumerate() {
        let query = format!("SELECT * FROM {function}()");
        let embedded = answer(&store, None, &["-c", &query]);
        assert!(embedded.0, "{query} embedded: {}", embedded.2);
        // An executor is killed (SIGKILL) while it runs the analysis's task: the query is
        // answered by the other, after Ballista gives the lost one up and runs its tasks again.
        let seen: Vec<usize> = cluster.executors.iter().map(|e| e.log().len()).collect();
        let mut running = client(&store, &url, &query);
        let mut killed = None;
        if let Some(victim) = running_why(&cluster, &seen, &mut running) {
            killed = Some(address_of(&cluster.executors[victim]));
            drop(cluster.executors.remove(victim));
            landed += 1;
        }
        // The answer is the embedded one, or the query fails naming the stage that lost its
        // input and the executor lost: a task reading the lost executor's shuffle file
        // mid-stream fails with the broken connection, which Ballista 55 does not run again
        // (it does a failed fetch).
        let (ok, out, err) = ended(running, 90, &query, &cluster);
        if ok {
            assert_close(&sorted(&out).join("\n"), &sorted(&embedded.1).join("\n"), 1e-9, &query);
            answered += 1;
        } else {
            assert!(err.contains("failed due to stage "), "{query} after an executor was lost: {err}");
            let named = format!("lost while it ran: the executor at {} (stage", killed.clone().unwrap_or_default());
            assert!(err.contains(&named), "{query} after an executor was lost: no '{named}' in {err}");
        }
        // A new executor, started now, takes part in the next query.
        let bind = format!("127.0.0.1:{}", free_ports());
        let log = dir.path().join(format!("joined{n}.log"));
        let args = ["executor", "--scheduler", &cluster.address, "--bind", &bind, "--vcores", "1"];
        let joined = Process::start(&log, &args);
        joined.wait_for("asking the scheduler for tasks", 1, 30);
        cluster.executors.push(joined);
        while cluster.executors.len() > 2 {
            drop(cluster.executors.remove(0));
        }
    }
    println!("{landed} of {} executors were killed while they ran the analysis's task", WHY.len());
    println!("{answered} of {} queries answered after the kill, the others failed naming the stage", WHY.len());
    assert!(answered >= WHY.len() / 2, "only {answered} of {} queries answered after the kill", WHY.len());
    assert!(landed >= WHY.len() / 2, "only {landed} of {} kills landed in an analysis's task", WHY.len());
    // The executors that joined after a kill ran tasks of later queries.
    let first_joined = &cluster.executors[0];
    assert!(first_joined.log().contains(": task "), "{}", first_joined.log());

    // Every executor lost mid-query: the query fails once none has come back, naming why.
    let seen: Vec<usize> = cluster.executors.iter().map(|e| e.log().len()).collect();
    let mut running = client(&store, &url, "SELECT * FROM critical_path()");
    if let Some(victim) = running_why(&cluster, &seen, &mut running) {
        let address = address_of(&cluster.executors[victim]);
        cluster.executors.clear();
        let (ok, _, err) = ended(running, 40, "every executor lost", &cluster);
        assert!(!ok && err.contains("all executors were lost"), "{err}");
        // The executor that was running the analysis is named, with its stage.
        let named = format!("the executor at {address} (stage");
        assert!(err.contains("lost while it ran: ") && err.contains(&named), "no '{named}' in {err}");
    }

    // The scheduler lost mid-query: the client fails within 10 s, naming it.
    let joined: Vec<Process> = (0..2)
        .map(|i| {
            let bind = format!("127.0.0.1:{}", free_ports());
            let args = ["executor", "--scheduler", &cluster.address, "--bind", &bind, "--vcores", "1"];
            let e = Process::start(&dir.path().join(format!("last{i}.log")), &args);
            e.wait_for("asking the scheduler for tasks", 1, 30);
            e
        })
        .collect();
    cluster.executors = joined;
    let seen: Vec<usize> = cluster.executors.iter().map(|e| e.log().len()).collect();
    let mut running = client(&store, &url, "SELECT * FROM delay_costs()");
    assert!(running_why(&cluster, &seen, &mut running).is_some(), "delay_costs ended before it could be cut");
    let killed = Instant::now();
    cluster.scheduler.child.kill().unwrap();
    let (ok, _, said) = ended(running, 10, "the scheduler lost", &cluster);
    assert!(killed.elapsed() < Duration::from_secs(10));
    assert!(!ok && said.contains(&format!("the scheduler at {}", cluster.address)), "{said}");
}

#[test]
fn a_cluster_keeps_to_its_data_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let inside = store_of(&data, "store", &[]);
    let outside = store_of(dir.path(), "outside", &[]);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("ranks.csv"), "rank,node\n0,n0\n").unwrap();
    // A link inside the data directory that leads out of it.
    std::os::unix::fs::symlink(&elsewhere, data.join("link")).unwrap();

    // Reachable from other machines, a process must be told its directories (and the
    // cluster's secret, given here).
    let free = format!("0.0.0.0:{}", free_ports());
    let with_secret = |args: &[&str]| {
        let mut c = commdb();
        c.env("COMMDB_CLUSTER_SECRET", "a secret of the cluster, long enough").args(args);
        c.output().unwrap()
    };
    let o = with_secret(&["scheduler", "--bind", &free]);
    assert!(!o.status.success() && stderr(&o).contains("--data-dir"), "{}", stderr(&o));
    let o = with_secret(&["executor", "--scheduler", "127.0.0.1:1", "--bind", &free]);
    assert!(!o.status.success() && stderr(&o).contains("--data-dir"), "{}", stderr(&o));
    let o = run(&["executor", "--scheduler", "127.0.0.1:1", "--data-dir", "/no/such/dir"]);
    assert!(!o.status.success() && stderr(&o).contains("/no/such/dir"), "{}", stderr(&o));

    let keep = ["--data-dir", data.to_str().unwrap()];
    let cluster = Cluster::start_with(dir.path(), &keep, 1, &keep);
    let url = cluster.url();

    // Inside: read and written.
    let (ok, out, err) = answer(&inside, Some(&url), &["-c", "SELECT count(*) > 0 AS some FROM messages"]);
    assert!(ok && out.contains("true"), "{err}");
    let written = data.join("copied.csv");
    let copy = format!("COPY (SELECT rank FROM ranks) TO '{}'", written.display());
    let (ok, _, err) = answer(&inside, Some(&url), &["-c", &copy]);
    assert!(ok && written.exists(), "{err}");

    // Outside, directly or through the link: refused, naming the path, and nothing written.
    let csv = elsewhere.join("ranks.csv");
    let linked = data.join("link").join("ranks.csv");
    let target = elsewhere.join("copied.csv");
    let through_link = data.join("link").join("copied2.csv");
    let refused = [
        (format!("SELECT * FROM read_csv('{}')", csv.display()), csv.display().to_string()),
        (format!("SELECT * FROM '{}'", csv.display()), csv.display().to_string()),
        (format!("SELECT * FROM read_csv('{}')", linked.display()), csv.display().to_string()),
        (format!("COPY (SELECT rank FROM ranks) TO '{}'", target.display()), target.display().to_string()),
        (format!("COPY (SELECT rank FROM ranks) TO '{}'", through_link.display()), "copied2.csv".to_string()),
    ];
    for (query, named) in &refused {
        let (ok, _, err) = answer(&inside, Some(&url), &["-c", query]);
        assert!(!ok && err.contains("outside them") && err.contains(named.as_str()), "{query}: {err}");
    }
    assert!(!target.exists() && !elsewhere.join("copied2.csv").exists());
    // An Arrow IPC file is written through a sink that does not tell its place: refused, even
    // inside the data directories.
    let arrow = data.join("copied.arrow");
    let copy = format!("COPY (SELECT rank FROM ranks) TO '{}' STORED AS ARROW", arrow.display());
    let (ok, _, err) = answer(&inside, Some(&url), &["-c", &copy]);
    assert!(!ok && err.contains("only CSV, JSON and Parquet"), "{err}");
    assert!(!arrow.exists());
    let (ok, _, err) = answer(&outside, Some(&url), &["-c", "SELECT count(*) FROM messages"]);
    assert!(!ok && err.contains("outside them") && err.contains(outside.to_str().unwrap()), "{err}");
    assert!(!err.contains("Status {"), "the scheduler's refusal in plain words: {err}");

    // An executor keeps to its directories whatever its scheduler lets through.
    drop(cluster);
    let cluster = Cluster::start_with(dir.path(), &[], 1, &keep);
    let bind = &cluster.binds[0];
    let copy = format!("COPY (SELECT rank FROM ranks) TO '{}'", target.display());
    let (ok, _, err) = answer(&inside, Some(&cluster.url()), &["-c", &copy]);
    assert!(!ok && err.contains(&format!("executor {bind} reads and writes only under")), "{err}");
    assert!(!target.exists());
}

#[test]
fn only_who_has_the_clusters_secret_gets_in() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let secret = file("secret", "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e\n", 0o600);
    let wrong = file("wrong", "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1f\n", 0o600);
    let shared = file("shared", "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e\n", 0o644);

    // Off loopback a process needs the secret; a file others may read is no secret; nor is a
    // short one.
    let free = format!("0.0.0.0:{}", free_ports());
    let o = run(&["scheduler", "--bind", &free, "--data-dir", dir.path().to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("COMMDB_CLUSTER_SECRET"), "{}", stderr(&o));
    let o = run(&["scheduler", "--secret-file", &shared]);
    assert!(!o.status.success() && stderr(&o).contains("chmod 600"), "{}", stderr(&o));
    let o = commdb().env("COMMDB_CLUSTER_SECRET", "short").args(["scheduler"]).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("at least 16"), "{}", stderr(&o));

    let address = format!("127.0.0.1:{}", free_ports());
    let scheduler =
        Process::start(&dir.path().join("scheduler.log"), &["scheduler", "--bind", &address, "--secret-file", &secret]);
    scheduler.wait_for("listening", 1, 30);
    // An executor without the secret, or with another, is refused and says so.
    let executor = |secret: Option<&str>| {
        let mut args = vec!["executor", "--scheduler", &address, "--vcores", "1"];
        let bind = format!("127.0.0.1:{}", free_ports());
        args.extend(["--bind", &bind]);
        if let Some(s) = secret {
            args.extend(["--secret-file", s]);
        }
        args.iter().map(|a| a.to_string()).collect::<Vec<String>>()
    };
    let o = run(&executor(None).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success() && stderr(&o).contains("needs the cluster's secret"), "{}", stderr(&o));
    let o = run(&executor(Some(&wrong)).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success() && stderr(&o).contains("differs"), "{}", stderr(&o));
    // Two with it (one from the environment) register and exchange shuffle files.
    let mut with_env = Command::new(env!("CARGO_BIN_EXE_commdb"));
    with_env.env("COMMDB_CLUSTER_SECRET", "7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e");
    let first = Process::start_with(
        with_env,
        &dir.path().join("executor0.log"),
        &executor(None).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let second = Process::start(
        &dir.path().join("executor1.log"),
        &executor(Some(&secret)).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for e in [&first, &second] {
        e.wait_for("asking the scheduler for tasks", 1, 30);
    }
    let url = format!("df://{address}");

    // A client without the secret or with another is refused before any query runs; nothing
    // is written.
    let target = dir.path().join("copied.csv");
    let copy = format!("COPY (SELECT rank FROM ranks) TO '{}'", target.display());
    let (ok, _, err) = answer(&store, Some(&url), &["-c", &copy]);
    assert!(!ok && err.contains(&format!("scheduler {address} needs the cluster's secret")), "{err}");
    let (ok, _, err) = answer(&store, Some(&url), &["--secret-file", &wrong, "-c", &copy]);
    assert!(!ok && err.contains("differs"), "{err}");
    assert!(!target.exists());

    // With it, the answers are the embedded ones, over both executors.
    let query = "SELECT rank, count(*) AS waits, sum(wait_ns) AS ns FROM wait_states() GROUP BY rank ORDER BY rank";
    let parts = "SET datafusion.execution.target_partitions = 8";
    let embedded = answer(&store, None, &["-c", query]);
    let (ok, out, err) = answer(&store, Some(&url), &["--secret-file", &secret, "-c", parts, "-c", query]);
    assert!(ok, "{err}");
    assert_eq!(out, embedded.1);
    let (ok, _, err) = answer(&store, Some(&url), &["--secret-file", &secret, "-c", &copy]);
    assert!(ok && target.exists(), "{err}");
    assert!(first.log().contains(": task ") && second.log().contains(": task "));
    // The secret is in no log and in no process's arguments.
    for log in [scheduler.log(), first.log(), second.log()] {
        assert!(!log.contains("7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e"), "{log}");
    }
}

#[test]
fn a_store_the_cluster_cannot_see_is_named() {
    // The cluster runs in a mount namespace where the store's directory is hidden, as on
    // machines that do not share the client's filesystem.
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let probe = Command::new("unshare").args(["-m", "true"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        println!(
            "skipped: `unshare -m` is not permitted here (it needs root), so no process can be kept from the store"
        );
        return;
    }
    let hidden = store.display().to_string();
    let address = format!("127.0.0.1:{}", free_ports());
    let bin = env!("CARGO_BIN_EXE_commdb");
    let script = format!(
        "mount -t tmpfs none '{hidden}' && {{ '{bin}' scheduler --bind {address} & sleep 1; \
         exec '{bin}' executor --scheduler {address} --bind 127.0.0.1:{}; }}",
        free_ports()
    );
    let mut shell = Command::new("unshare");
    shell.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    let processes = Process::start_with(shell, &dir.path().join("hidden.log"), &[]);
    // The scheduler runs in the background of the namespace's shell: stopped even if the test fails.
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = Command::new("pkill").args(["-f", &self.0]).status();
        }
    }
    let _stop = Stop(format!("scheduler --bind {address}"));
    processes.wait_for("asking the scheduler for tasks", 1, 30);
    let (ok, _, err) = answer(&store, Some(&format!("df://{address}")), &["-c", "SELECT count(*) FROM messages"]);
    assert!(!ok && err.contains(&hidden), "{err}");
}

/// A query's order holds on the cluster as in one process, where DataFusion keeps a table's
/// order through an exchange (a shuffle does not keep it): the rows come in the same order.
#[test]
fn an_order_holds_on_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let cluster = Cluster::start(dir.path(), 2, &[]);
    let parts = "SET datafusion.execution.target_partitions = 8";
    for query in [
        "SELECT rank, count(*), min(start_ts) FROM calls GROUP BY rank ORDER BY rank",
        "SELECT rank, thread, sum(end_ts - start_ts) FROM calls GROUP BY rank, thread ORDER BY rank, thread",
        "SELECT rank, start_ts, region FROM calls ORDER BY rank, start_ts, region LIMIT 50",
        "SELECT src, count(*) FROM messages GROUP BY src ORDER BY src DESC",
    ] {
        let embedded = answer(&store, None, &["-c", query]);
        let distributed = answer(&store, Some(&cluster.url()), &["-c", parts, "-c", query]);
        assert!(embedded.0 && distributed.0, "{query}: {embedded:?} {distributed:?}");
        assert_eq!(distributed.1, embedded.1, "{query}");
    }
}

/// Flip a bit in the middle of the first chunk of `column` in the Parquet part at `file`.
fn damage_column(file: &Path, column: &str) {
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&std::fs::File::open(file).unwrap())
        .unwrap();
    let chunk = meta.row_group(0).columns().iter().find(|c| c.column_path().string() == column).unwrap();
    let (start, n) = chunk.byte_range();
    let mut bytes = std::fs::read(file).unwrap();
    bytes[(start + n / 2) as usize] ^= 0x10;
    std::fs::write(file, &bytes).unwrap();
}

/// The executors check what their tasks read of a store's parts against the manifest, as one
/// process does: a damaged column of a part fails the query that reads it with an error naming
/// the part and the column, a query that reads the part's other columns is answered, and
/// neither the client nor the scheduler reads a part.
#[test]
fn a_damaged_part_is_named_by_the_executor_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let part = store.join("calls").join("part-00001.parquet");
    damage_column(&part, "end_ts");
    let cluster = Cluster::start(dir.path(), 2, &[]);
    let url = cluster.url();
    let (ok, _, err) = answer(&store, Some(&url), &["-c", "SELECT sum(end_ts - start_ts) FROM calls"]);
    assert!(!ok && err.contains("part-00001.parquet") && err.contains("end_ts"), "{err}");
    // The other columns of the part are whole, and answer as in one process.
    let query = "SELECT rank, count(*), min(start_ts) FROM calls GROUP BY rank ORDER BY rank";
    let (embedded, distributed) = (answer(&store, None, &["-c", query]), answer(&store, Some(&url), &["-c", query]));
    assert!(embedded.0 && distributed.0, "{embedded:?} {distributed:?}");
    assert_eq!(distributed.1, embedded.1);
    // An analysis that reads the damaged column fails the same way on the cluster.
    let (ok, _, err) = answer(&store, Some(&url), &["-c", "SELECT count(*) FROM critical_path()"]);
    assert!(!ok && err.contains("part-00001.parquet") && err.contains("end_ts"), "{err}");
}

/// A delta report's answer cut where its histograms' header starts: the totals, the bins.
fn split_bins(answer: &str) -> (String, String) {
    let at = answer.find("region,path,bin,").expect("the report's histograms");
    (answer[..at].to_string(), answer[at..].to_string())
}

/// The values the bins of each (region, path) hold in all (column `count`), in key order.
fn bin_counts(bins: &str) -> Vec<(String, i64)> {
    let mut lines = bins.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let count = header.iter().position(|c| *c == "count").unwrap();
    let mut totals: std::collections::BTreeMap<String, i64> = Default::default();
    for line in lines.filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        *totals.entry(format!("{},{}", fields[0], fields[1])).or_default() += fields[count].parse::<i64>().unwrap();
    }
    totals.into_iter().collect()
}
