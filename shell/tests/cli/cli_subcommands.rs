//! The subcommands end to end: generate, convert, info, export, cache and --demo, Paraver and CSV
//! traces, traces bigger than the memory budget opened through cache stores, and the options each
//! refuses.

use std::process::Stdio;

use crate::common::*;

#[test]
fn paraver_traces_open_from_the_command_line_and_convert_to_stores() {
    let dir = tempfile::tempdir().unwrap();
    let gen_dir = dir.path().join("pv");
    let o = run(&["generate", gen_dir.to_str().unwrap(), "--ranks", "8", "--iterations", "3", "--format", "paraver"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = dir.path().join("store");
    let o = run(&["convert", gen_dir.to_str().unwrap(), store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sql = "SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM states) AS s, (SELECT format FROM trace_info) AS f";
    let a = run(&[gen_dir.join("trace.prv").to_str().unwrap(), "-q", "--format", "csv", "-c", sql]);
    let b = run(&[store.to_str().unwrap(), "-q", "--format", "csv", "-c", sql]);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(stdout(&a).lines().nth(1).unwrap(), "60,8,paraver");
    assert_eq!(stdout(&b).lines().nth(1).unwrap(), "60,8,paraver", "the store keeps the Paraver tables");
    // A second application that samples a node counter: its samples are metrics of its nodes'
    // locations, the ranks stay the MPI application's.
    let counted = dir.path().join("counted");
    let o =
        run(&["generate", counted.to_str().unwrap(), "--ranks", "8", "--format", "paraver", "--node-counters", "1ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sql = "SELECT (SELECT count(*) FROM ranks) AS r, (SELECT count(DISTINCT rank) FROM metrics WHERE metric = 'Node memory reads') AS n";
    let c = run(&[counted.join("trace.prv").to_str().unwrap(), "-q", "--format", "csv", "-c", sql]);
    assert_eq!(stdout(&c).lines().nth(1), Some("8,2"), "{}", stderr(&c));
    // An archive as Score-P 1.x wrote them reads back with the same messages.
    let old = dir.path().join("old");
    let o = run(&["generate", old.to_str().unwrap(), "--ranks", "8", "--format", "otf2", "--otf2-version", "1.4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sql = "SELECT (SELECT count(*) FROM messages) AS m, (SELECT format_version FROM trace_info) AS v";
    let c = run(&[old.join("traces.otf2").to_str().unwrap(), "-q", "--format", "csv", "-c", sql]);
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(old.join("ground_truth.json")).unwrap()).unwrap();
    let expected = format!("{},1.4.0", truth["messages"]);
    assert_eq!(stdout(&c).lines().nth(1), Some(expected.as_str()), "{}", stderr(&c));
    assert_eq!(std::fs::read(old.join("traces.otf2")).unwrap()[9..11], [1, 4]);
    for (args, says) in [
        (
            &["--otf2-version", "1.6", "--format", "otf2"][..],
            "--otf2-version: expected 1.0 to 1.5, 2.0 to 2.3 or 3.0, got 1.6",
        ),
        (&["--otf2-version", "1.4"][..], "--otf2-version applies to --format otf2, not to --format parquet"),
        (&["--gpu", "--format", "paraver"][..], "--gpu applies to --format otf2 or parquet"),
        (&["--late-launch", "1:5us"][..], "--late-launch applies to GPU traces: give --gpu with it"),
        (&["--gpu", "--threads", "2"][..], "gpu and threads are not generated together"),
    ] {
        let o = run(&[&["generate", dir.path().join("y").to_str().unwrap()][..], args].concat());
        assert!(!o.status.success() && stderr(&o).contains(says), "{}", stderr(&o));
    }
    let o = run(&["generate", dir.path().join("x").to_str().unwrap(), "--node-counters", "1ms"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--node-counters applies to --format paraver"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn generate_convert_info_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let o = run(&[
        "generate",
        out.to_str().unwrap(),
        "--ranks",
        "8",
        "--iterations",
        "4",
        "--imbalance",
        "1:2",
        "--clock-skew",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ground_truth.json")).unwrap()).unwrap();
    let o = run(&[out.to_str().unwrap(), "-q", "--format", "csv", "-c", "SELECT count(*) AS n FROM messages"]);
    assert_eq!(stdout(&o).lines().nth(1).unwrap(), truth["messages"].to_string());

    let store = dir.path().join("store");
    let o =
        run(&["convert", &data("three_ranks.csv"), store.to_str().unwrap(), "--nodes", &data("three_ranks_nodes.csv")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["info", store.to_str().unwrap()]);
    let info = stdout(&o);
    assert!(info.contains("rows in messages") && info.contains("unmatched_send"), "{info}");
    let o = run(&[
        store.to_str().unwrap(),
        "-q",
        "--format",
        "csv",
        "-c",
        "SELECT count(*) FILTER (WHERE intra_node) FROM messages",
    ]);
    assert_eq!(stdout(&o).lines().nth(1), Some("1"));
}

#[test]
fn demo_opens_with_examples() {
    let o = run(&["--demo", "-c", "SELECT count(DISTINCT node) AS nodes, count(*) AS ranks FROM ranks"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("Try:"));
    assert!(stdout(&o).contains("     4 |    64"), "{}", stdout(&o));
    // Every example query it suggests runs on it.
    let examples: Vec<String> =
        stderr(&o).lines().map(str::trim).filter(|l| l.starts_with("SELECT")).map(str::to_string).collect();
    assert!(examples.len() >= 5, "{}", stderr(&o));
    let mut args = vec!["--demo".to_string(), "-q".to_string()];
    for e in &examples {
        args.extend(["-c".to_string(), e.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn generate_writes_a_scheduler_log_only_for_a_dated_run() {
    let dir = tempfile::tempdir().unwrap();
    let (dated, undated) = (dir.path().join("dated"), dir.path().join("undated"));
    let o = run(&[
        "generate",
        dated.to_str().unwrap(),
        "--ranks",
        "4",
        "--iterations",
        "2",
        "--start",
        "2026-04-01T12:00:00",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sacct = std::fs::read_to_string(dated.join("sacct.txt")).unwrap();
    assert!(sacct.contains("41000|stencil2d|alice|batch|COMPLETED|2026-04-01T11:59:40|"), "{sacct}");
    assert!(dated.join("switches.csv").exists());
    let o = run(&["generate", undated.to_str().unwrap(), "--ranks", "4", "--iterations", "2", "--start", "none"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!undated.join("sacct.txt").exists());
    let o = run(&[undated.to_str().unwrap(), "--format", "csv", "-q", "-c", "SELECT start_wallclock FROM trace_info"]);
    assert_eq!(stdout(&o), "start_wallclock\n\n");
    let o = run(&["generate", undated.to_str().unwrap(), "--start", "noon"]);
    assert!(stderr(&o).contains("start 'noon': expected YYYY-MM-DDTHH:MM:SS (UTC) or none"), "{}", stderr(&o));
}

#[test]
fn an_interrupted_convert_leaves_the_old_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.display().to_string();
    let o = run(&["convert", SMALL, &s]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Kill a convert of a larger trace into the same store at several moments: the store at
    // that path is always a whole one, the old or the new, never a partial one.
    for wait_ms in [50, 200, 600] {
        let mut child = commdb()
            .args(["convert", "generate:ranks=64,iterations=400", &s])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        let _ = child.kill();
        let _ = child.wait();
        let o = run(&[&s, "-q", "--format", "csv", "-c", "SELECT count(*) AS n FROM ranks"]);
        assert!(o.status.success(), "after {wait_ms} ms: {}", stderr(&o));
        let n = stdout(&o).lines().nth(1).unwrap_or_default().to_string();
        assert!(n == "4" || n == "64", "after {wait_ms} ms: {n} ranks");
    }
    // Converting into a directory that holds other files is refused.
    let other = dir.path().join("notes");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("todo.txt"), "keep").unwrap();
    let o = run(&["convert", SMALL, &other.display().to_string()]);
    assert!(!o.status.success() && stderr(&o).contains("not a commdb store"), "{}", stderr(&o));
    let o = run(&["convert", &s, &s]);
    assert!(!o.status.success() && stderr(&o).contains("read from there"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(other.join("todo.txt")).unwrap(), "keep");
}

#[test]
fn nodes_apply_to_otf2_and_options_a_store_cannot_honour_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("otf2");
    let o = run(&[
        "generate",
        archive.to_str().unwrap(),
        "--ranks",
        "4",
        "--ranks-per-node",
        "2",
        "--iterations",
        "2",
        "--format",
        "otf2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(&nodes, "rank,node\n0,a\n1,b\n2,a\n3,b\n").unwrap();
    let anchor = archive.join("traces.otf2").display().to_string();
    let o = run(&[
        &anchor,
        "--nodes",
        nodes.to_str().unwrap(),
        "-q",
        "--format",
        "csv",
        "-c",
        "SELECT string_agg(node, '' ORDER BY rank) AS n FROM ranks",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().nth(1), Some("abab"));
    // A store's placement and clock correction were fixed when it was converted.
    let store = dir.path().join("store");
    let o = run(&["convert", "generate:ranks=4,iterations=2,clock-skew", store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = store.display().to_string();
    let o = run(&[&s, "--nodes", nodes.to_str().unwrap(), "-q", "-c", "SELECT 1"]);
    assert!(!o.status.success() && stderr(&o).contains("give the nodes file when converting"), "{}", stderr(&o));
    let o = run(&[&s, "--clock-correction", "off", "-q", "-c", "SELECT 1"]);
    assert!(!o.status.success() && stderr(&o).contains("--clock-correction off"), "{}", stderr(&o));
    let o = run(&[&s, "-q", "-c", "SELECT 1"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn export_writes_chrome_json_and_refuses_what_it_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.json");
    let o = run(&["export", SMALL, "--format", "chrome", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("open it in ui.perfetto.dev"), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(json["traceEvents"].as_array().is_some_and(|e| e.iter().any(|e| e["ph"] == "X")));

    let o = run(&["export", SMALL, "--format", "vampir", "-o", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("unknown export format 'vampir': expected 'chrome', 'otf2' or 'paraver'"),
        "{}",
        stderr(&o)
    );
    let o = run(&["export", SMALL, "--format", "chrome", "-o", dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
}

#[test]
fn export_writes_a_paraver_trace_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("prv");
    let o = run(&["export", SMALL, "--format", "paraver", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("open") && stderr(&o).contains(".prv in Paraver"), "{}", stderr(&o));
    let prv = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "prv"))
        .expect("a .prv");
    let count = |trace: &str| {
        let o = run(&[
            trace,
            "-q",
            "--format",
            "csv",
            "-c",
            "SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM ranks) AS r",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(count(prv.to_str().unwrap()), count(SMALL));
}

#[test]
fn export_writes_an_otf2_archive_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("archive");
    let o = run(&["export", SMALL, "--format", "otf2", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("traces.otf2; open it with Vampir"), "{}", stderr(&o));
    let anchor = out.join("traces.otf2");
    let answers = |trace: &str| {
        let sql = "SELECT (SELECT count(*) FROM events) AS e, (SELECT count(*) FROM messages) AS m, \
                   (SELECT sum(bytes) FROM messages) AS b, (SELECT count(*) FROM collectives) AS c";
        let o = run(&[trace, "-q", "--format", "csv", "-c", sql]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(answers(anchor.to_str().unwrap()), answers(SMALL));
    // Written again, the archive is replaced whole; nothing is left beside it.
    let o = run(&["export", SMALL, "--format", "otf2", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["traces", "traces.def", "traces.otf2"]);
}

/// `SELECT count(*) AS n FROM table` on `trace` under the memory budget `budget`, with cache
/// stores in `cache`: the count and what commdb said on stderr.
fn count_within(trace: &std::path::Path, table: &str, budget: &str, cache: &std::path::Path) -> (String, String) {
    let o = commdb()
        .args([trace.to_str().unwrap(), "--memory-limit", budget, "--format", "csv", "-c"])
        .arg(format!("SELECT count(*) AS n FROM {table}"))
        .env("COMMDB_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (stdout(&o).lines().nth(1).unwrap_or("").to_string(), stderr(&o))
}

#[test]
fn an_archive_bigger_than_the_budget_opens_through_a_cache_store_reused_until_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (archive, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let generate = |iterations: &str| {
        let o = run(&[
            "generate",
            archive.to_str().unwrap(),
            "--ranks",
            "16",
            "--iterations",
            iterations,
            "--format",
            "otf2",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(archive.join("ground_truth.json")).unwrap()).unwrap();
        truth["messages"].to_string()
    };
    let anchor = archive.join("traces.otf2");
    let count = |budget: &str| count_within(&anchor, "messages", budget, &cache);
    let messages = generate("60");
    let (n, err) = count("2MB");
    assert_eq!(n, messages);
    assert!(err.contains("converting") && err.contains("into the cache store"), "{err}");
    let stores: Vec<_> = std::fs::read_dir(cache.join("stores")).unwrap().flatten().collect();
    assert_eq!(stores.len(), 1);
    assert!(stores[0].path().join("store").join("manifest.json").is_file());
    // Opened again unchanged: the cache store is reused, its tables scanned in their files.
    let (n, err) = count("2MB");
    assert_eq!(n, messages);
    assert!(!err.contains("converting"), "{err}");
    assert!(err.contains(&format!("{messages} messages (scanned in the store's files)")), "{err}");
    // The archive changed: it is converted again.
    let messages = generate("64");
    let (n, err) = count("2MB");
    assert_eq!(n, messages);
    assert!(err.contains("into the cache store"), "{err}");
    // Within the budget it is read into memory, as before.
    let (n, err) = count("4GB");
    assert_eq!(n, messages);
    assert!(!err.contains("cache store"), "{err}");
}

#[test]
fn a_paraver_trace_bigger_than_the_budget_opens_through_a_cache_store_and_converts_in_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, cache) = (dir.path().join("run"), dir.path().join("cache"));
    let o = run(&["generate", run_dir.to_str().unwrap(), "--ranks", "16", "--iterations", "40", "--format", "paraver"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("ground_truth.json")).unwrap()).unwrap();
    let messages = truth["messages"].to_string();
    let prv = run_dir.join("trace.prv");
    let count = |budget: &str| count_within(&prv, "messages", budget, &cache);
    let (n, err) = count("1MB");
    assert_eq!(n, messages);
    assert!(err.contains("converting") && err.contains("into the cache store"), "{err}");
    let (n, err) = count("1MB");
    assert_eq!(n, messages);
    assert!(!err.contains("converting"), "{err}");
    let (n, err) = count("4GB");
    assert_eq!(n, messages);
    assert!(!err.contains("cache store"), "{err}");
    // commdb cache lists the cache store and removes it.
    let cache_cmd = |args: &[&str]| {
        let o = commdb().arg("cache").args(args).env("COMMDB_CACHE_DIR", &cache).stdin(Stdio::null()).output().unwrap();
        (o.status.success(), stdout(&o), stderr(&o))
    };
    let (ok, out, err) = cache_cmd(&[]);
    assert!(ok, "{err}");
    assert!(out.contains("trace.prv") && out.contains("GiB") && out.contains("1 cache store(s)"), "{out}");
    let (ok, _, err) = cache_cmd(&["no-such-trace", "--clear"]);
    assert!(!ok && err.contains("no cache store") && err.contains("no-such-trace"), "{err}");
    let (ok, _, err) = cache_cmd(&["--clear", "trace.prv"]);
    assert!(ok && err.contains("removed 1 cache store(s)"), "{err}");
    let (ok, out, _) = cache_cmd(&[]);
    assert!(ok && out.contains("no cache stores"), "{out}");
    let o = commdb().args(["cache", "--nodes", "x.csv"]).env("COMMDB_CACHE_DIR", &cache).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("--nodes applies to reading a trace"), "{}", stderr(&o));
    // commdb convert reads it in groups of ranks too.
    let store = dir.path().join("store");
    let o = run(&["convert", prv.to_str().unwrap(), store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{messages} messages")) && stderr(&o).contains("groups of ranks"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_csv_trace_bigger_than_the_budget_opens_through_a_cache_store() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let csv = dir.path().join("events.csv");
    std::fs::copy(data("nonblocking_events.csv"), &csv).unwrap();
    let count = |budget: &str| count_within(&csv, "calls", budget, &cache);
    let (in_memory, err) = count("4GB");
    assert!(!err.contains("cache store"), "{err}");
    let (n, err) = count("1KB");
    assert_eq!(n, in_memory);
    assert!(err.contains("converting") && err.contains("into the cache store"), "{err}");
    let (n, err) = count("1KB");
    assert_eq!(n, in_memory);
    assert!(!err.contains("converting"), "{err}");
}

/// `--demo` stands for the trace wherever one is read: the shell, report, export and info;
/// where no trace is read (generate, convert, cache) it is refused, as is a trace and --demo
/// together, or neither.
#[test]
fn demo_stands_for_the_trace_of_report_export_and_info() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("demo.html");
    let o = run(&["report", "--demo", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("64"), "{}", &page[..page.len().min(400)]);
    let json = dir.path().join("demo.json");
    let o = run(&["export", "--demo", "--format", "chrome", "-o", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata(&json).unwrap().len() > 1000);
    let o = run(&["info", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("64"), "{}", stdout(&o));
    let o = run(&["report"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("report: which trace? Give its path, or --demo"), "{}", stderr(&o));
    let o = run(&["info", SMALL, "--demo"]);
    assert!(stderr(&o).contains("info: give a trace or --demo, not both"), "{}", stderr(&o));
    let o = run(&["generate", dir.path().join("g").to_str().unwrap(), "--demo"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--demo opens the generated demo trace"), "{}", stderr(&o));
}

/// What `/proc/PID/status` says of transparent huge pages for a shell that is reading its
/// script from standard input: the first answer that is `until` (within `seconds`), or the last
/// seen; None where the kernel does not say.
fn huge_pages_of_a_running_shell(allow: Option<&str>, until: &str, seconds: u64) -> Option<String> {
    let mut command = commdb();
    command.env_remove("MIMALLOC_ALLOW_THP");
    if let Some(value) = allow {
        command.env("MIMALLOC_ALLOW_THP", value);
    }
    let mut child =
        command.args([SMALL, "-q"]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let started = std::time::Instant::now();
    let mut seen = None;
    while started.elapsed() < std::time::Duration::from_secs(seconds) {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        seen = text.lines().find_map(|l| l.strip_prefix("THP_enabled:")).map(|v| v.trim().to_string());
        if seen.is_none() || seen.as_deref() == Some(until) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(child.stdin.take());
    child.wait().unwrap();
    seen
}

#[test]
fn the_shell_turns_transparent_huge_pages_off_unless_told_otherwise() {
    let Some(default) = huge_pages_of_a_running_shell(None, "0", 20) else {
        eprintln!("skipped: this kernel's /proc/PID/status has no THP_enabled line");
        return;
    };
    assert_eq!(default, "0", "huge pages are off for the process by default");
    // Given time to turn them off, with MIMALLOC_ALLOW_THP it leaves them as they are.
    assert_eq!(
        huge_pages_of_a_running_shell(Some("1"), "0", 3).as_deref(),
        Some("1"),
        "MIMALLOC_ALLOW_THP leaves them"
    );
}
