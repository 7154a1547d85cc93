//! The `commdb` binary end to end: scripts and their exit codes, output formats, subcommands,
//! errors for bad input, and every saved query in queries/ on a generated trace.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

#[test]
fn script_stops_at_the_first_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("report.sql");
    std::fs::write(
        &script,
        "-- a report\nSELECT count(*) FROM messages;\n\nSELECT\n  nonsense FROM messages;\nSELECT 42;\n",
    )
    .unwrap();
    let o = run(&[SMALL, "-q", "-f", script.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    // The file's line of the error, its column, and a caret under it.
    assert!(err.contains("report.sql:5:3: Schema error: No field named nonsense."), "{err}");
    assert!(err.contains("\n5 |   nonsense FROM messages\n  |   ^\n"), "{err}");
    assert!(!stdout(&o).contains("42"));
}

#[test]
fn commands_run_in_order_and_formats_are_machine_readable() {
    let o = run(&[SMALL, "-q", "--format", "csv", "-c", "SELECT src, dst FROM messages ORDER BY msg_id LIMIT 2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().next(), Some("src,dst"));
    assert_eq!(stdout(&o).lines().count(), 3);

    let o = run(&[SMALL, "-q", "--format", "json", "-c", "SELECT rank, node FROM ranks ORDER BY rank"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[1]["node"], "node000");

    let o = run(&[SMALL, "-q", "--format", "ndjson", "-c", "SELECT kind FROM events LIMIT 3"]);
    assert_eq!(stdout(&o).lines().filter(|l| l.starts_with("{\"kind\"")).count(), 3);

    let o = run(&[SMALL, "-q", "--format", "markdown", "-c", "SELECT 1 AS a"]);
    assert!(stdout(&o).starts_with("| a |\n| ---: |\n| 1 |"), "{}", stdout(&o));

    let o = run(&[SMALL, "-q", "--format", "tsv", "-c", "SELECT 1 AS a, 'x' AS b"]);
    assert_eq!(stdout(&o), "a\tb\n1\tx\n");

    let o = run(&[SMALL, "-c", "SELECT 1 AS first", "-c", "SELECT 2 AS second"]);
    let out = stdout(&o);
    assert!(out.find("first").unwrap() < out.find("second").unwrap());
    assert!(out.contains("1 row ("), "{out}");
}

#[test]
fn output_file_and_row_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.csv");
    let o = run(&[SMALL, "-q", "--format", "csv", "-o", file.to_str().unwrap(), "-c", "SELECT * FROM events"]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().count() > 100);
    let o = run(&[SMALL, "--max-rows", "5", "-c", "SELECT * FROM events"]);
    assert!(stdout(&o).contains("not shown (--max-rows 5)"), "{}", stdout(&o));
    // Quiet output leaves footers out, but still says on stderr that rows were left out.
    let o = run(&[SMALL, "-q", "--max-rows", "3", "-c", "SELECT * FROM events"]);
    assert_eq!(stdout(&o).lines().count(), 5, "{}", stdout(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not shown (--max-rows 3)"), "{o:?}");
    let o = run(&[SMALL, "-q", "--max-rows", "3", "-c", "SELECT * FROM ranks LIMIT 2"]);
    assert!(o.stderr.is_empty(), "{o:?}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let o = run(&["/no/such/trace.csv", "-c", "SELECT 1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/no/such/trace.csv: no such file or directory"), "{}", stderr(&o));

    let o = run(&[&data("bad_type.csv"), "-c", "SELECT 1"]);
    assert!(
        stderr(&o).contains("bad_type.csv:4: column 'type': expected send or recv, found 'sned'"),
        "{}",
        stderr(&o)
    );

    let o = run(&[SMALL, "-c", "SELEC 1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("-c#1:1:"), "{}", stderr(&o));

    // A CSV line with an unclosed quote says so, not that the record has too few fields.
    let dir = tempfile::tempdir().unwrap();
    let quoted = dir.path().join("quote.csv");
    let text = std::fs::read_to_string(data("wait_states.csv")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[3] = lines[3].replacen(",", ",\"", 1);
    std::fs::write(&quoted, lines.join("\n")).unwrap();
    let o = run(&[quoted.to_str().unwrap(), "-c", "SELECT count(*) FROM events"]);
    assert!(stderr(&o).contains("quote.csv:4: a quoted field on this line is never closed"), "{}", stderr(&o));

    // A table built when a query first uses it fails as reading the trace, naming the file.
    let archive = dir.path().join("otf2");
    let o = run(&["generate", archive.to_str().unwrap(), "--ranks", "4", "--iterations", "5", "--format", "otf2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let evt = archive.join("traces/0.evt");
    let size = std::fs::metadata(&evt).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&evt).unwrap().set_len(size / 2).unwrap();
    let o = run(&[archive.join("traces.otf2").to_str().unwrap(), "-c", "SELECT count(*) FROM messages"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("reading trace otf2 failed (reading the events"), "{err}");
    assert!(err.contains("0.evt at byte"), "{err}");
    // An anchor cut short says that it ends early.
    let anchor = archive.join("traces.otf2");
    let size = std::fs::metadata(&anchor).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&anchor).unwrap().set_len(size - 12).unwrap();
    let o = run(&[anchor.to_str().unwrap(), "-c", "SELECT 1"]);
    assert!(stderr(&o).contains("the anchor file ends early"), "{}", stderr(&o));

    let o = run(&["generate", "/tmp/never", "--pattern", "hexagon"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("pattern must be stencil2d, ring, alltoall or master-worker"), "{}", stderr(&o));

    // Options that do not apply are errors, never ignored.
    let o = run(&[SMALL, "--time-unit", "us", "-c", "SELECT 1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--time-unit us applies to CSV traces"), "{}", stderr(&o));
    let o = run(&["generate", "/tmp/never", "--nodes", &data("three_ranks_nodes.csv")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--nodes applies to reading a trace, not to generate"), "{}", stderr(&o));
    assert!(!Path::new("/tmp/never").exists());
}

#[test]
fn unknown_names_get_the_closest_known_one() {
    let o = run(&[SMALL, "-c", "SELECT * FROM atribution()"]);
    assert!(
        stderr(&o).contains("table function 'atribution' not found; did you mean 'attribution'?"),
        "{}",
        stderr(&o)
    );
    // With a caret under the name, as an unknown table gets.
    assert!(stderr(&o).contains("1 | SELECT * FROM atribution()\n  |               ^"), "{}", stderr(&o));
    let o = run(&[SMALL, "-c", "SELECT * FROM mesages"]);
    assert!(stderr(&o).contains("did you mean 'messages'?"), "{}", stderr(&o));
    // Tables are named as the user writes them, not with DataFusion's catalog and schema.
    assert!(stderr(&o).contains("table 'mesages' not found"), "{}", stderr(&o));
    let o = run(&[SMALL, "-c", "SELECT * FROM zzzzzzzz"]);
    assert!(!stderr(&o).contains("did you mean"), "{}", stderr(&o));
    let o = run(&["generate", "/tmp/never", "--pattern", "rign"]);
    assert!(stderr(&o).contains("did you mean 'ring'?"), "{}", stderr(&o));
    // help, quit and exit as words, as psql takes them.
    let o = run(&[SMALL, "-q", "-c", "help", "-c", "quit", "-c", "SELECT 42 AS never"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\\d NAME") && !stdout(&o).contains("never"), "{}", stdout(&o));
}

#[test]
fn help_names_every_format_the_readers_accept() {
    let o = run(&["--help"]);
    let text = stdout(&o);
    for format in ["OTF2", "Paraver", "*.prv.gz", "CSV", "commdb store", "generate:"] {
        assert!(text.contains(format), "--help does not name {format}: {text}");
    }
    let o = run(&["generate", "--help"]);
    assert!(stdout(&o).contains("paraver"), "{}", stdout(&o));
}

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
fn script_from_stdin_and_backslash_commands() {
    use std::io::Write;
    let mut child = commdb().args([SMALL, "-q"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"\\format csv\nSELECT count(*) AS n\n  FROM ranks;\n\\d ranks\n\\dt mess*\n\\q\nSELECT 'not reached';\n",
        )
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert!(out.starts_with("n\n4\n"), "{out}");
    assert!(out.contains("node,Utf8,yes,host name of the node the rank ran on"), "{out}");
    // \\dt PATTERN: the tables whose name matches, messages and not events.
    assert!(out.contains(",messages,") && !out.contains(",events,"), "{out}");
    assert!(!out.contains("not reached"));
}

/// A generated trace written with its scheduler log (sacct.txt) and switch map (switches.csv).
fn generated_run(dir: &Path, ranks: &str) -> commdb_catalog::generate::GroundTruth {
    let out = dir.to_str().unwrap();
    let o =
        run(&["generate", out, "--ranks", ranks, "--iterations", "10", "--compute", "300ms", "--sync-sessions", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("ground_truth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn saved_queries_run_on_a_generated_trace() {
    let run_dir = tempfile::tempdir().unwrap();
    generated_run(run_dir.path(), "16");
    let sacct = run_dir.path().join("sacct.txt");
    let switches = run_dir.path().join("switches.csv");
    let dir = root().join("queries");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sql") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("-- "), "{} needs a header comment", path.display());
            // Job reports read a scheduler log: they run on a written trace with its log.
            let o = if text.lines().take_while(|l| l.starts_with("--")).any(|l| l.contains("--jobs")) {
                run(&[
                    run_dir.path().to_str().unwrap(),
                    "--jobs",
                    sacct.to_str().unwrap(),
                    "--switches",
                    switches.to_str().unwrap(),
                    "-q",
                    "-f",
                    path.to_str().unwrap(),
                ])
            } else {
                run(&[
                    "generate:ranks=16,iterations=10,background-traffic=1ms:1.5ms:4,sync-sessions=1",
                    "-q",
                    "-f",
                    path.to_str().unwrap(),
                ])
            };
            assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
            assert!(stdout(&o).lines().count() > 2, "{} printed no rows", path.display());
            n += 1;
        }
    }
    assert!(n > 0);
}

/// Tab-separated rows of a report (header skipped).
fn report_rows(args: &[&str]) -> Vec<Vec<String>> {
    let o = run(args);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).lines().skip(1).map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

#[test]
fn job_reports_find_the_generated_job_and_its_neighbours() {
    // 16 ranks fill nodes 0-3 of switch sw00; 64 ranks fill nodes 0-15 (sw00, sw01), so the
    // job on the next nodes is on another switch.
    for ranks in ["16", "64"] {
        let dir = tempfile::tempdir().unwrap();
        let truth = generated_run(dir.path(), ranks).jobs.expect("a generated trace has a start and a log");
        let trace = dir.path().to_str().unwrap().to_string();
        let sacct = dir.path().join("sacct.txt").display().to_string();
        let switches = dir.path().join("switches.csv").display().to_string();
        let q = |name: &str| root().join("queries").join(name).display().to_string();

        let jobs_for_trace = q("jobs_for_trace.sql");
        let rows = report_rows(&[&trace, "--jobs", &sacct, "--format", "tsv", "-q", "-f", &jobs_for_trace]);
        let (first, rest) = rows.split_first().expect("a matching job");
        assert_eq!(first[0], truth.job_id.to_string(), "{rows:?}");
        assert_eq!((first[11].as_str(), first[12].as_str()), ("true", "0,extern"), "{rows:?}");
        assert!(rest.iter().all(|r| r[11] == "false"), "only one job holds the whole run: {rows:?}");

        let neighbours = q("neighbours.sql");
        for (with_map, expected) in [(false, &truth.neighbours_by_node), (true, &truth.neighbours_by_switch)] {
            let mut args = vec![trace.as_str(), "--jobs", &sacct, "--format", "tsv", "-q", "-f", &neighbours];
            if with_map {
                args.extend(["--switches", switches.as_str()]);
            }
            let rows = report_rows(&args);
            let got: Vec<(String, f64, String)> =
                rows.iter().map(|r| (r[0].clone(), r[6].parse().unwrap(), r[7].clone())).collect();
            assert_eq!(got.len(), expected.len(), "ranks={ranks} map={with_map}: {rows:?}");
            for (g, e) in got.iter().zip(expected.iter()) {
                assert_eq!(g.0, e.job_id.to_string(), "ranks={ranks} map={with_map}: {rows:?}");
                assert!((g.1 - e.overlap_s).abs() < 0.01, "overlap {} vs {}: {rows:?}", g.1, e.overlap_s);
                assert_eq!(g.2, e.shared_nodes.to_string());
            }
        }
    }
}

#[test]
fn trend_and_dag_reports_show_what_was_injected() {
    let trend = root().join("queries/trend_report.sql").display().to_string();
    let ramp = "generate:ranks=16,iterations=400,latency-ramp=10ms:20ms:4,background-traffic=20ms:30ms:4";
    let rows = report_rows(&[ramp, "--format", "tsv", "-q", "-f", &trend]);
    let kinds: Vec<&str> = rows.iter().take_while(|r| r[0] != "segment").map(|r| r[1].as_str()).collect();
    assert_eq!(kinds, ["compressed", "growth", "steady_high", "compressed"], "{rows:?}");
    let delayed_pairs = rows.iter().skip_while(|r| r[0] != "segment").skip(1).count();
    assert_eq!(delayed_pairs, 10, "5 pairs for each of the two periods: {rows:?}");

    // Rank 5 of a 4x4 stencil sends and receives 3x as many messages on each of its channels.
    let dag = root().join("queries/dag_report.sql").display().to_string();
    let imbalanced = "generate:ranks=16,iterations=5,imbalance=5:3";
    let rows = report_rows(&[imbalanced, "--format", "tsv", "-q", "-f", &dag]);
    assert_eq!(rows[0][2], "16", "{rows:?}");
    assert_eq!(rows[2][0], "5", "the least balanced rank comes first: {rows:?}");
}

#[test]
fn attribution_report_names_each_injected_cause() {
    let report = root().join("queries/attribution_report.sql").display().to_string();
    for (scenario, cause) in [
        ("", "none"),
        (",bad-mapping", "mapping"),
        (",imbalance=5:3", "pattern"),
        (",background-traffic=2ms:3ms:4", "background_traffic"),
    ] {
        let trace = format!("generate:ranks=16,iterations=60{scenario}");
        let rows = report_rows(&[&trace, "--format", "tsv", "-q", "-f", &report]);
        let causes: Vec<&str> = rows.iter().take_while(|r| r[0] != "window_from").map(|r| r[0].as_str()).collect();
        assert!(causes.contains(&cause), "{scenario}: {causes:?}");
        let expected = if cause == "background_traffic" { vec!["none", cause] } else { vec![cause] };
        let mut sorted = causes.clone();
        sorted.sort_unstable();
        let mut want = expected.clone();
        want.sort_unstable();
        assert_eq!(sorted, want, "{scenario}: {rows:?}");
    }
}

#[test]
fn dot_exports_the_dependency_dag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dag.dot");
    let cmd = format!(
        "\\dot {} SELECT * FROM dag_edges(); SELECT node_id, 'rank ' || rank AS label, load_balance FROM dag_nodes()",
        file.display()
    );
    let o = run(&[SMALL, "-c", &cmd, "-c", "SELECT count(*) AS n FROM dag_nodes()", "--format", "csv", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let nodes: usize = stdout(&o).lines().nth(1).unwrap().parse().unwrap();
    let dot = std::fs::read_to_string(&file).unwrap();
    assert!(dot.starts_with("digraph commdb {") && dot.trim_end().ends_with('}'), "{dot}");
    // 4 ranks in a 2x2 stencil, 3 iterations: 8 messages per iteration, all matched.
    assert_eq!(dot.matches(" -> ").count(), 24, "{dot}");
    assert_eq!(dot.matches("[label=\"rank ").count(), nodes, "{dot}");
    let o = run(&[SMALL, "-c", "\\dot only-a-file"]);
    assert!(stderr(&o).contains("usage: \\dot FILE EDGES_SQL"), "{}", stderr(&o));
}

#[test]
fn wallclock_warns_when_the_trace_has_no_absolute_start() {
    let o = run(&[&data("three_ranks.csv"), "--format", "csv", "-q", "-c", "SELECT wallclock(0) AS t"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "t\n\n");
    assert_eq!(
        stderr(&o).trim(),
        "warning: wallclock: trace 'three_ranks' has no absolute start time (trace_info.start_wallclock is NULL); the result is NULL"
    );
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
fn job_reports_on_the_shared_trace_without_an_absolute_start() {
    let shared = root().parent().unwrap().join("shared/data/otf2/ping-pong");
    if !shared.exists() {
        println!("skip: ../shared/data is absent");
        return;
    }
    // The Score-P archive records no date: jobs match by node only, and wallclock() warns.
    let sacct = data("sacct_quartz.txt");
    let trace = shared.display().to_string();
    let report = root().join("queries/jobs_for_trace.sql").display().to_string();
    let o = run(&[&trace, "--jobs", &sacct, "--format", "csv", "-q", "-f", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].starts_with("912,ping_pong,alice,pdebug,COMPLETED,"), "{out}");
    assert!(rows[0].ends_with(",1,1,,,,"), "covers the one node; window unknown: {out}");
    assert!(rows[1].starts_with("913,"), "{out}");
    assert!(stderr(&o).contains("warning: wallclock: trace 'ping_pong' has no absolute start time"), "{}", stderr(&o));

    let report = root().join("queries/neighbours.sql").display().to_string();
    let o = run(&[&trace, "--jobs", &sacct, "--format", "csv", "-q", "-f", &report]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 1, "no run window, no neighbours: {}", stdout(&o));

    // The shared sacct samples lack Start and NodeList: the report names the missing column.
    let samples = root().parent().unwrap().join("shared/data/scheduler/sacct_parsable_samples.txt");
    let report = root().join("queries/jobs_for_trace.sql").display().to_string();
    let o = run(&[&trace, "--jobs", samples.to_str().unwrap(), "-q", "-f", &report]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("No field named nodes"), "{}", stderr(&o));
}

#[test]
fn latency_report_shows_the_injected_background_traffic() {
    // Inter-node messages sent between 2 ms and 3 ms are 4x slower (+-20% noise).
    let trace = "generate:ranks=16,ranks-per-node=4,iterations=60,background-traffic=2ms:3ms:4";
    let report = root().join("queries/latency_report.sql");
    let o = run(&[trace, "-q", "--format", "csv", "-f", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let worst: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("msg_id,"))
        .skip(1)
        .take_while(|l| !l.starts_with("region,"))
        .collect();
    assert_eq!(worst.len(), 20, "{out}");
    for row in worst {
        let f: Vec<&str> = row.split(',').collect();
        let (latency, locality, sent_at): (f64, &str, &str) = (f[3].parse().unwrap(), f[4], f[6]);
        assert_eq!(locality, "inter", "{row}");
        // sent_at reads as milliseconds: between 2 and 3 ms.
        let ms: f64 = sent_at.strip_suffix(" ms").and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        assert!((2.0..3.0).contains(&ms), "{row}");
        assert!((3.0..=5.5).contains(&latency), "latency {latency} does not show the factor 4: {row}");
    }
}

#[test]
fn saved_reports_and_the_catalogue_read_whole_in_a_terminal_of_80_columns() {
    // In a terminal of 80 columns, every table of the saved reports, \d and \df shows every
    // column and every character of every cell (text wraps instead of being cut), no line is
    // wider than the terminal, and each report's key columns are in its header.
    let trace = "generate:ranks=16,ranks-per-node=4,iterations=20,background-traffic=2ms:3ms:4";
    let squeeze = |s: &str| s.replace(' ', "");
    let mut checked = 0;
    let mut keys_seen = Vec::new();
    let mut cases: Vec<Vec<String>> = vec![
        vec!["-c".into(), "\\d messages".into()],
        vec!["-c".into(), "\\df".into()],
        vec!["-c".into(), "\\df attribution".into()],
        vec!["-c".into(), "\\dt".into()],
    ];
    for entry in std::fs::read_dir(root().join("queries")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // Job reports need a scheduler log; saved_queries_run_on_a_generated_trace runs them.
        if path.extension().is_some_and(|e| e == "sql") && !text.contains("--jobs") {
            cases.push(vec!["-f".into(), path.display().to_string()]);
        }
    }
    for case in &cases {
        let args: Vec<&str> =
            [trace, "-q", "--max-rows", "50"].into_iter().chain(case.iter().map(String::as_str)).collect();
        let Some(screen) = in_terminal("fit", &args, 80) else { return };
        let wide_args: Vec<&str> = args.iter().copied().chain(["--width", "0"]).collect();
        let o = run(&wide_args);
        assert!(o.status.success(), "{case:?}: {}", stderr(&o));
        let wide = stdout(&o);
        // Titles (\\echo) are text the terminal wraps; tables must fit.
        let table_lines = screen.lines().filter(|l| l.contains('|') || l.starts_with("--"));
        assert!(
            table_lines.into_iter().all(|l| l.chars().count() <= 80),
            "{case:?}: a row is wider than 80:\n{screen}"
        );
        assert!(!screen.contains('…') && !screen.contains("not shown (\\x"), "{case:?}: something is cut:\n{screen}");
        let (narrow, whole) = (tables_in(&screen), tables_in(&wide));
        assert!(!whole.is_empty(), "{case:?}: no table in\n{wide}");
        for table in &whole {
            let header: Vec<String> = table.header.iter().map(|h| squeeze(h)).collect();
            let Some(shown) = narrow.iter().find(|t| t.header.iter().map(|h| squeeze(h)).collect::<Vec<_>>() == header)
            else {
                // A table that cannot show every column even wrapped is printed expanded.
                assert!(screen.contains("-[ RECORD 1 ]"), "{case:?}: table {header:?} is missing:\n{screen}");
                continue;
            };
            assert_eq!(shown.rows.len(), table.rows.len(), "{case:?}: {header:?}");
            for (a, b) in shown.rows.iter().zip(&table.rows) {
                let (a, b): (Vec<String>, Vec<String>) =
                    (a.iter().map(|c| squeeze(c)).collect(), b.iter().map(|c| squeeze(c)).collect());
                assert_eq!(a, b, "{case:?}: a row reads differently at 80 columns:\n{screen}");
            }
            checked += 1;
            keys_seen.extend(header);
        }
    }
    assert!(checked >= cases.len(), "only {checked} tables compared");
    for key in ["latency", "cause", "recommendation", "meaning", "description"] {
        assert!(keys_seen.iter().any(|h| h == key), "no table shows {key} at 80 columns");
    }
}

#[test]
fn a_cell_wider_than_the_formatter_allows_is_cut_not_a_panic() {
    // Rust's width argument stops at 65,535: wider cells used to abort the shell.
    let o = run(&["-q", "-c", "SELECT repeat('x', 70000) AS wide, 1 AS n"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row = out.lines().nth(2).unwrap_or_default();
    assert!(row.contains('…') && row.chars().count() < 1_100, "{}", &row[..row.len().min(200)]);
    // Other formats keep every character.
    let o = run(&["-q", "--format", "csv", "-c", "SELECT repeat('x', 70000) AS wide"]);
    assert!(o.status.success() && stdout(&o).contains(&"x".repeat(70_000)), "{}", stderr(&o));
}

#[test]
fn a_failing_command_is_named_by_its_place() {
    let o = run(&["-q", "-c", "SELECT 1", "-c", "SELECT 2", "-c", "SELECT\n  nope"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("-c#3:2:3:"), "{}", stderr(&o));
    // Parser errors in plain words, at their place.
    let o = run(&["-q", "-c", "SELECT count( FROM t"]);
    let err = stderr(&o);
    assert!(
        err.contains(
            "-c#1:1:20: syntax error: expected ), found t\n1 | SELECT count( FROM t\n  |                    ^"
        ),
        "{err}"
    );
    assert!(!err.contains("ParserError"), "{err}");
}

#[test]
fn output_replaces_its_target_only_after_success_and_never_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result.csv");
    std::fs::write(&out, "kept\n").unwrap();
    let target = out.display().to_string();
    // The second statement fails: the old file stays, and no temporary file is left behind.
    let o = run(&[SMALL, "-q", "--format", "csv", "-o", &target, "-c", "SELECT 1 AS a", "-c", "SELECT nope"]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file was left");
    let o = run(&[SMALL, "-q", "--format", "csv", "-o", &target, "-c", "SELECT 1 AS a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n1\n");
    // Writing over the trace that was opened is refused, and the trace is untouched.
    let trace = dir.path().join("trace.csv");
    std::fs::copy(root().join("tests/data/latency.csv"), &trace).unwrap();
    let before = std::fs::read(&trace).unwrap();
    let t = trace.display().to_string();
    let o = run(&[&t, "-q", "-o", &t, "-c", "SELECT 1"]);
    assert!(!o.status.success() && stderr(&o).contains("is read from"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&trace).unwrap(), before);
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
fn long_operator_chains_are_planned_and_run() {
    let sum = format!("SELECT 1{} AS n", "+1".repeat(2_100));
    let ors: String = (1..=3_000).map(|i| format!(" OR src = {i}")).collect();
    let ors = format!("SELECT count(*) AS n FROM (VALUES (1)) t(src) WHERE src = 0{ors}");
    let ands: String = (1..=3_000).map(|i| format!(" AND src <> {}", i + 1)).collect();
    let ands = format!("SELECT count(*) AS n FROM (VALUES (1)) t(src) WHERE src >= 0{ands}");
    for (sql, want) in [(sum, "2101"), (ors, "1"), (ands, "1")] {
        let o = run(&["-q", "--format", "csv", "-c", &sql]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o).lines().nth(1), Some(want));
    }
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
fn scripts_print_every_row_and_max_rows_zero_means_all() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("many.sql");
    std::fs::write(&script, "SELECT value FROM generate_series(1, 100);\n").unwrap();
    let rows = |o: &Output| stdout(o).lines().filter(|l| l.trim().parse::<i64>().is_ok()).count();
    let o = run(&["-f", script.to_str().unwrap()]);
    assert!(o.status.success() && rows(&o) == 100, "{}", stderr(&o));
    assert!(!stdout(&o).contains("not shown"), "{}", stdout(&o));
    let o = run(&["-c", "SELECT value FROM generate_series(1, 100)"]);
    assert_eq!(rows(&o), 40);
    assert!(stdout(&o).contains("60 not shown"), "{}", stdout(&o));
    let o = run(&["--max-rows", "0", "-c", "SELECT value FROM generate_series(1, 100)"]);
    assert_eq!(rows(&o), 100);
    let o = run(&["--max-rows", "5", "-f", script.to_str().unwrap()]);
    assert_eq!(rows(&o), 5);
}

#[test]
fn list_tables_shows_each_trace_table_once() {
    let o = run(&[SMALL, "-q", "--format", "csv", "-c", "CREATE VIEW v AS SELECT * FROM messages", "-c", "\\d"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().filter(|l| l.ends_with(",messages,BASE TABLE")).count(), 1, "{out}");
    assert!(out.contains("generated (default),messages") && out.contains("public,v,VIEW"), "{out}");
}

#[test]
fn ctrl_c_cancels_a_long_query_and_the_next_one_answers() {
    let Some(pane) = Pane::start("ctrlc", "generate:ranks=16,iterations=60", 120) else { return };
    let join = "SELECT count(*) FROM messages a, messages b, messages c WHERE a.bytes + b.bytes + c.bytes < 0\\;";
    pane.keys(&[join, "Enter"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    pane.keys(&["C-c"]);
    let screen = pane.wait_for("query cancelled", 10);
    assert!(screen.contains("query cancelled"), "{screen}");
    pane.keys(&["SELECT 41 + 1 AS answer\\;", "Enter"]);
    let screen = pane.wait_for(" 42", 10);
    assert!(screen.contains(" 42"), "the next query did not answer: {screen}");
}

#[test]
fn statements_over_several_lines_get_a_continuation_prompt_completion_knows_aliases_and_tables_fit() {
    let Some(pane) = Pane::start("lines", SMALL, 80) else { return };
    pane.keys(&["SELECT 41", "Enter"]);
    let screen = pane.wait_for("...>", 10);
    assert!(screen.lines().any(|l| l.starts_with("   ...> ")), "{screen}");
    pane.keys(&["+ 1 AS answer\\;", "Enter"]);
    let screen = pane.wait_for(" 42", 10);
    assert!(screen.contains("answer") && screen.contains(" 42"), "{screen}");
    // Ctrl-C drops the statement being typed.
    pane.keys(&["C-l", "SELECT 'dropped'", "Enter"]);
    let screen = pane.wait_for("'dropped'\n   ...>", 10);
    assert!(screen.contains("'dropped'\n   ...>"), "{screen}");
    pane.keys(&["C-c"]);
    pane.keys(&["SELECT 'kept' AS w\\;", "Enter"]);
    let screen = pane.wait_for(" kept", 10);
    assert!(screen.contains(" kept") && !screen.contains(" dropped\n"), "{screen}");
    // Tab completes a column through the statement's alias.
    pane.keys(&["C-l", "SELECT count(*) AS n FROM messages m WHERE m.send_t", "Tab"]);
    let screen = pane.wait_for("m.send_ts", 10);
    assert!(screen.contains("WHERE m.send_ts"), "{screen}");
    pane.keys(&[" >= 0\\;", "Enter"]);
    let screen = pane.wait_for("1 row", 10);
    assert!(screen.contains(" n\n"), "{screen}");
    // An error shows the line and a caret under the place.
    pane.keys(&["C-l", "SELECT", "Enter"]);
    pane.wait_for("SELECT\n   ...>", 10);
    pane.keys(&["  nope FROM messages\\;", "Enter"]);
    let screen = pane.wait_for("^", 10);
    assert!(screen.contains("error at line 2, column 3: Schema error: No field named nope"), "{screen}");
    assert!(screen.contains("2 |   nope FROM messages\n  |   ^"), "{screen}");
    // A table too wide for the pane even wrapped is printed expanded.
    pane.keys(&["C-l", "SELECT * FROM messages LIMIT 2\\;", "Enter"]);
    let screen = pane.wait_for("RECORD 2", 10);
    assert!(screen.contains("-[ RECORD 2 ]") && screen.contains("\nduration "), "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "a line is wider than the pane: {screen}");
}

#[test]
fn a_query_over_the_memory_budget_fails_naming_it() {
    let sql = "SELECT count(*) FROM events a JOIN events b ON a.ts = b.ts AND a.rank = b.rank";
    // The trace is a store (scanned in place): the join, not the trace, passes the budget.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let o = run(&["generate", store.to_str().unwrap(), "--ranks", "64", "--iterations", "100"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["--memory-limit", "4M", store.to_str().unwrap(), "-q", "-c", sql]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("memory budget for queries (4 MiB)"), "{}", stderr(&o));
    // A generated trace that would not fit the budget is refused with its estimate, before
    // anything is allocated.
    let o = run(&["--memory-limit", "200M", "generate:ranks=1048576,iterations=1000000", "-q", "-c", "SELECT 1"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("would hold about") && e.contains("GiB in memory") && e.contains("--format otf2"), "{e}");
    let o = run(&["--memory-limit", "200M", "-q", "-c", "ATTACH 'generate:ranks=4096,iterations=10000' AS big"]);
    assert!(!o.status.success() && stderr(&o).contains("more than the memory budget (0.20 GiB)"), "{}", stderr(&o));
    let o = run(&["--memory-limit", "2G", "generate:ranks=16,iterations=10", "-q", "-c", sql]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["--memory-limit", "lots", "-c", "SELECT 1"]);
    assert!(!o.status.success() && stderr(&o).contains("expected a size such as 8G"), "{}", stderr(&o));
}

#[test]
fn wide_tables_fit_the_width_and_expanded_display_shows_every_column() {
    let sql = "SELECT * FROM messages ORDER BY msg_id LIMIT 2";
    let o = run(&[SMALL, "-q", "--width", "80", "--expanded", "off", "-c", sql]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
    assert!(out.starts_with(" msg_id | src | dst"), "{out}");
    assert!(out.contains("more columns not shown (\\x on shows every column): "), "{out}");
    // Without a width (not a terminal) every column is shown whole.
    let whole = stdout(&run(&[SMALL, "-q", "-c", sql]));
    assert!(whole.lines().next().unwrap().contains("duration") && !whole.contains("not shown"), "{whole}");
    for args in [
        vec!["--expanded", "on"],
        vec!["--width", "80"],
        vec!["--expanded", "auto", "--width", "80"],
        vec!["-c", "\\x"],
    ] {
        let mut all = vec![SMALL, "-q"];
        all.extend(&args);
        all.extend(["-c", sql]);
        let out = stdout(&run(&all));
        assert!(out.starts_with("-[ RECORD 1 ]"), "{args:?}: {out}");
        let keyed = |name: &str| out.lines().any(|l| l.starts_with(&format!("{name} ")) && l.contains(" | "));
        assert!(keyed("duration") && keyed("send_complete_call_start"), "{args:?}: {out}");
        assert!(out.contains("-[ RECORD 2 ]"), "{args:?}: {out}");
    }
    // auto: a table that fits is printed as a table.
    let out =
        stdout(&run(&[SMALL, "-q", "--expanded", "auto", "--width", "80", "-c", "SELECT rank FROM ranks LIMIT 1"]));
    assert!(out.starts_with(" rank\n"), "{out}");
    let o = run(&[SMALL, "-q", "-c", "\\x sideways"]);
    assert!(
        stderr(&o).contains("\\x: unknown expanded display 'sideways': expected on, off or auto"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn durations_on_the_command_line_need_a_unit_and_a_place_in_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g").display().to_string();
    let o = run(&["generate", &out, "--background-traffic", "8:14:5"]);
    assert!(stderr(&o).contains("duration '8': give its unit (ns, us, ms or s), e.g. 8ms"), "{}", stderr(&o));
    let o = run(&["generate", &out, "--ranks", "4", "--iterations", "2", "--latency-ramp", "8s:14s:5"]);
    assert!(stderr(&o).contains("latency-ramp starts at 8000 ms, but the run lasts"), "{}", stderr(&o));
    assert!(!Path::new(&out).exists(), "nothing is written for a refused run");
    let o = run(&["generate", &out, "--ranks", "4", "--iterations", "20", "--background-traffic", "100us:300us:4"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn every_option_has_a_line_of_help() {
    for args in [vec!["-h"], vec!["generate", "-h"]] {
        let o = run(&args);
        let help = stdout(&o);
        let lines: Vec<&str> = help.lines().collect();
        let options: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].trim_start().starts_with('-')).collect();
        assert!(options.len() > 10, "{help}");
        for i in options {
            // `--name <VALUE>  what it does`, or the text on the next, further indented line.
            let line = lines[i];
            // A bare `[default: ...]` is not help.
            let words = |t: &str| !t.trim().is_empty() && !t.trim().starts_with('[');
            let same_line = line.trim_start().split_once("  ").is_some_and(|(_, text)| words(text));
            let next = lines.get(i + 1).is_some_and(|n| {
                let t = n.trim_start();
                words(t) && !t.starts_with('-') && n.len() - t.len() > line.len() - line.trim_start().len()
            });
            let described = same_line || next;
            assert!(described, "{args:?}: no help for '{}'", line.trim());
        }
    }
}

#[test]
fn a_trace_too_small_for_criteria_says_so_and_which_argument_helps() {
    let tiny = "generate:ranks=2,ranks-per-node=1,pattern=ring,iterations=2";
    let o = run(&[tiny, "-q", "-c", "SELECT count(latency) AS n FROM message_latency()"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(" 0"), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: message_latency: 4 of 4 messages have no latency criterion"), "{err}");
    assert!(err.contains("min_messages => 2"), "{err}");
    // With the argument it names, every message has one, and nothing is said.
    let o = run(&[tiny, "-q", "-c", "SELECT count(latency) AS n FROM message_latency(min_messages => 2)"]);
    assert!(stdout(&o).contains(" 4") && !stderr(&o).contains("warning"), "{}{}", stdout(&o), stderr(&o));
    // A trace of a realistic size has a criterion for every message: no warning.
    let o = run(&["generate:ranks=64,iterations=10", "-q", "-c", "SELECT count(*) FROM attribution()"]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// A report's output: every table has a title above it, and the whole equals
/// `shell/tests/golden/NAME.txt` (`UPDATE_GOLDEN=1` rewrites it).
fn check_golden(report: &Path, out: &str) {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden");
    let lines: Vec<&str> = out.lines().collect();
    for (i, l) in lines.iter().enumerate().skip(1) {
        if l.starts_with("---") || l.starts_with("-+") {
            let title = lines.get(i.wrapping_sub(2)).copied().unwrap_or("");
            assert!(
                !title.is_empty() && !title.contains(" | "),
                "{}: a table without a title: {out}",
                report.display()
            );
        }
    }
    let file = golden.join(report.file_stem().unwrap()).with_extension("txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(&golden).unwrap();
        std::fs::write(&file, out).unwrap();
    } else {
        let want = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(out, want, "{} differs from {} (UPDATE_GOLDEN=1 rewrites it)", report.display(), file.display());
    }
}

/// The job reports as a reader sees them, on a generated 16-rank run with its Slurm log and
/// switch map.
#[test]
fn job_reports_match_their_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    generated_run(dir.path(), "16");
    let trace = dir.path().to_str().unwrap().to_string();
    let sacct = dir.path().join("sacct.txt").display().to_string();
    let switches = dir.path().join("switches.csv").display().to_string();
    for name in ["jobs_for_trace.sql", "neighbours.sql"] {
        let report = root().join("queries").join(name);
        let path = report.display().to_string();
        let o = run(&[&trace, "--jobs", &sacct, "--switches", &switches, "-c", "\\timing off", "-f", &path]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        check_golden(&report, &stdout(&o));
    }
}

/// The saved reports as a reader sees them on a fixed generated trace: titles, columns and
/// units, compared with `shell/tests/golden/NAME.txt` (`UPDATE_GOLDEN=1` rewrites them; read
/// the diff before committing). Reports that need a scheduler log are checked above.
#[test]
fn reports_match_their_golden_files() {
    let mut checked = 0;
    let mut reports: Vec<PathBuf> = std::fs::read_dir(root().join("queries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    reports.sort();
    for path in reports {
        let text = std::fs::read_to_string(&path).unwrap();
        if text.lines().take_while(|l| l.starts_with("--")).any(|l| l.contains("--jobs")) {
            continue;
        }
        let spec = "generate:ranks=16,iterations=10,background-traffic=1ms:1.5ms:4,sync-sessions=1";
        let o = run(&[spec, "--max-rows", "25", "-c", "\\timing off", "-f", path.to_str().unwrap()]);
        assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
        check_golden(&path, &stdout(&o));
        checked += 1;
    }
    assert!(checked >= 10, "{checked} reports checked");
}

#[test]
fn a_missing_data_file_in_from_is_named_as_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("out.parquet").display().to_string();
    let o = run(&["-q", "-c", &format!("SELECT * FROM '{missing}'")]);
    assert!(stderr(&o).contains(&format!("{missing}: no such file")), "{}", stderr(&o));
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "x").unwrap();
    let t = text.display().to_string();
    let o = run(&["-q", "-c", &format!("SELECT * FROM '{t}'")]);
    assert!(stderr(&o).contains("not a file a query reads"), "{}", stderr(&o));
    let csv = dir.path().join("ranks.csv");
    std::fs::write(&csv, "rank,node\n0,a\n1,b\n").unwrap();
    let o = run(&["-q", "--format", "csv", "-c", &format!("SELECT count(*) AS n FROM '{}'", csv.display())]);
    assert_eq!(stdout(&o), "n\n2\n", "{}", stderr(&o));
}

#[test]
fn analyses_are_plan_nodes_that_explain_shows_without_running() {
    let o = run(&[
        SMALL,
        "-q",
        "--format",
        "csv",
        "-c",
        "EXPLAIN SELECT rank FROM transfer_efficiency() WHERE rank IS NULL",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("transfer_efficiency: analysis, streamed, projection=[rank]"), "{out}");
    assert!(out.contains("TableScan: transfer_efficiency()"), "{out}");
    assert!(!out.contains("metrics=["), "{out}");
    let o = run(&[SMALL, "-q", "--format", "csv", "-c", "EXPLAIN ANALYZE SELECT count(*) FROM ideal_replay()"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = out.lines().find(|l| l.contains("ideal_replay: analysis")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("output_rows=") && line.contains("elapsed_compute="), "{line}");
}

/// README's ten-minute tour on the demo says what the demo shows; these are its figures.
#[test]
fn the_readme_tour_finds_what_it_says_on_the_demo() {
    let o = run(&[
        "--demo",
        "-q",
        "--format",
        "csv",
        "-c",
        "SELECT cause, count(*) AS ranks FROM rank_diagnosis() GROUP BY cause ORDER BY ranks DESC",
        "-c",
        "SELECT kind, t_start, t_end FROM latency_trend() WHERE kind <> 'compressed'",
        "-c",
        "SELECT count(*) AS windows FROM attribution('1ms') WHERE cause LIKE '%background_traffic%' AND window_start >= 8000000 AND window_end <= 14000000",
        "-c",
        "SELECT inter_messages_before, inter_messages_after FROM remap_summary()",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("cause,ranks\nmapping,64\n"), "{out}");
    assert!(out.contains("steady_high,8000000,14000000"), "{out}");
    assert!(out.contains("windows\n6\n"), "{out}");
    assert!(out.contains("44800,6400"), "{out}");
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

    let o = run(&["export", SMALL, "--format", "otf2", "-o", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("export: unknown format 'otf2': expected chrome"), "{}", stderr(&o));
    let o = run(&["export", SMALL, "--format", "chrome", "-o", dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
}

/// Chromium when installed (Debian's `chromium`), else None with the reason printed.
fn chromium() -> Option<&'static str> {
    let found = Command::new("chromium").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if found.is_ok_and(|s| s.success()) {
        Some("chromium")
    } else {
        println!("skipped: chromium is not installed (apt-get install chromium), charts are not rendered");
        None
    }
}

/// Run headless Chromium on `file` with `args`, within a minute.
fn headless(browser: &str, file: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .args([
            "60",
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run chromium")
}

#[test]
fn charts_are_drawn_and_render_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let charts = [
        ("bars.svg", "SELECT region, sum(exclusive) / 1e6 AS ms FROM calls GROUP BY 1 ORDER BY 2 DESC"),
        (
            "lines.svg",
            "SELECT send_ts / 1000000 AS ms, avg(duration) AS mean_ns, max(duration) AS max_ns FROM messages GROUP BY 1",
        ),
        ("matrix.svg", "SELECT src, dst, sum(bytes) AS bytes FROM messages GROUP BY 1, 2"),
    ];
    for (file, sql) in charts {
        let path = dir.path().join(file);
        let o = run(&["--demo", "-c", sql, "--chart", path.to_str().unwrap()]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        assert!(stderr(&o).contains("wrote a chart of"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "the result is drawn, not printed: {}", stdout(&o));
    }
    let svg = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert_eq!(svg("bars.svg").matches("<polyline").count(), 0);
    assert_eq!(svg("lines.svg").matches("<polyline").count(), 2);
    assert!(svg("matrix.svg").contains("Each cell is one (src, dst) row"));
    // \chart in a script, and what it refuses.
    let script = dir.path().join("report.sql");
    std::fs::write(
        &script,
        format!("\\chart {}/ranks.svg SELECT rank, node_index FROM ranks;\n", dir.path().display()),
    )
    .unwrap();
    let o = run(&["--demo", "-f", script.to_str().unwrap()]);
    assert!(o.status.success() && dir.path().join("ranks.svg").exists(), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "SELECT 1", "-c", "SELECT 2", "--chart", "x.svg"]);
    assert!(stderr(&o).contains("draws the result of one query"), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "\\chart out.png SELECT 1, 2"]);
    assert!(stderr(&o).contains("give a file named *.svg"), "{}", stderr(&o));
    let o = run(&["--demo", "-c", "SELECT 'a' AS x, 'b' AS y", "--chart", dir.path().join("t.svg").to_str().unwrap()]);
    assert!(stderr(&o).contains("no numeric column"), "{}", stderr(&o));

    let Some(browser) = chromium() else { return };
    let blank = dir.path().join("blank.svg");
    std::fs::write(&blank, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"600\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/></svg>").unwrap();
    let shot = |file: &Path, png: &Path| {
        let o = headless(browser, file, &["--window-size=960,600", &format!("--screenshot={}", png.display())]);
        assert!(png.exists(), "{}: no screenshot: {}", file.display(), stderr(&o));
        std::fs::metadata(png).unwrap().len()
    };
    let blank_size = shot(&blank, &dir.path().join("blank.png"));
    for (file, _) in charts {
        let path = dir.path().join(file);
        // The browser reads the file as an SVG document: no parse error, and the drawing is there.
        let dom = stdout(&headless(browser, &path, &["--dump-dom"]));
        assert!(dom.contains("<svg") && !dom.contains("parsererror"), "{file}: {dom}");
        let size = shot(&path, &dir.path().join(format!("{file}.png")));
        assert!(
            size > 3 * blank_size,
            "{file}: the screenshot ({size} bytes) is close to a blank page's ({blank_size})"
        );
    }
}

#[test]
fn tables_are_built_on_first_use_and_new_problems_are_told() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("unmatched.csv");
    std::fs::write(
        &csv,
        "rank,type,timestamp,source,destination,size\n0,send,100,0,1,8\n0,send,200,0,1,8\n1,recv,300,0,1,8\n",
    )
    .unwrap();
    let o = run(&[csv.to_str().unwrap(), "-c", "SELECT count(*) FROM ranks"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 ranks (events and messages are built when a query first uses them)"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("deriving"), "counting ranks derives nothing: {}", stderr(&o));
    let o = run(&[csv.to_str().unwrap(), "-c", "SELECT count(*) FROM messages"]);
    assert!(
        stderr(&o).contains("building the events and deriving calls, messages and collectives of unmatched took")
            && stderr(&o).contains("1 problem(s) found, see unmatched.warnings"),
        "{}",
        stderr(&o)
    );
    let o = run(&["-q", csv.to_str().unwrap(), "-c", "SELECT count(*) FROM messages"]);
    assert!(stderr(&o).is_empty(), "-q says nothing: {}", stderr(&o));
}

/// A check run inside the browser on a copy of a report: every figure has a drawing of some
/// size with shapes in it. Its result is written on the body, which `--dump-dom` shows.
const FIGURE_CHECK: &str = "<script>(function(){var f=document.querySelectorAll('figure'),empty=[];\
for(var i=0;i<f.length;i++){var s=f[i].querySelector('svg'),b=s&&s.getBoundingClientRect();\
var shapes=s?s.querySelectorAll('path,rect,circle').length:0;\
if(!s||b.width<200||b.height<80||shapes<4){empty.push(f[i].querySelector('figcaption').textContent);}}\
document.body.setAttribute('data-figures',String(f.length));document.body.setAttribute('data-empty',empty.join('|'));})();</script>";

#[test]
fn the_report_names_the_injected_problem_and_renders_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("clean", "generate:ranks=64,ranks-per-node=16,iterations=60", "communication looks healthy"),
        (
            "mapping",
            "generate:ranks=64,ranks-per-node=16,iterations=60,bad-mapping",
            "caused by bad mapping of ranks to nodes.",
        ),
        (
            "background",
            "generate:ranks=64,ranks-per-node=16,iterations=120,background-traffic=4ms:8ms:5",
            "caused by background traffic on the network.",
        ),
        (
            "imbalance",
            "generate:ranks=64,ranks-per-node=16,iterations=60,imbalance=0-3:3",
            "caused by an unbalanced communication pattern.",
        ),
    ];
    for (name, trace, diagnosis) in cases {
        let path = dir.path().join(format!("{name}.html"));
        let o = run(&["report", trace, "-o", path.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("wrote a report of 10 figures"), "{name}: {}", stderr(&o));
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.contains(diagnosis), "{name}: the report does not say '{diagnosis}'");
        for other in ["bad mapping of ranks", "background traffic on the network.", "unbalanced communication pattern."]
        {
            if !diagnosis.contains(other) {
                assert!(!page.contains(&format!("caused by {other}")), "{name}: the report also blames {other}");
            }
        }
        // Self-contained: nothing is fetched, no script runs.
        assert!(
            !page.contains("src=") && !page.contains("href=\"http") && !page.contains("url("),
            "{name}: refers to another file"
        );
        assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("<img"), "{name}");
        assert_eq!(page.matches("<section").count(), 8, "{name}: eight sections");
        assert!(!page.contains("class=\"missing\""), "{name}: a section could not be made");
    }
    // In the shell, for the open trace; and what it refuses.
    let path = dir.path().join("shell.html");
    let o = run(&[SMALL, "-c", &format!("\\report {}", path.display())]);
    assert!(o.status.success() && path.exists(), "{}", stderr(&o));
    let o = run(&[SMALL, "-c", "\\report out.pdf"]);
    assert!(stderr(&o).contains("usage: \\report FILE.html"), "{}", stderr(&o));
    let o = run(&["-c", &format!("\\report {}", dir.path().join("none.html").display())]);
    assert!(stderr(&o).contains("no trace is open"), "{}", stderr(&o));

    let Some(browser) = chromium() else { return };
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let shot = |file: &Path, png: &Path| {
        let o = headless(browser, file, &["--window-size=1100,2400", &format!("--screenshot={}", png.display())]);
        assert!(png.exists(), "{}: no screenshot: {}", file.display(), stderr(&o));
        std::fs::metadata(png).unwrap().len()
    };
    let blank_size = shot(&blank, &dir.path().join("blank.png"));
    for (name, _, _) in cases {
        let page = std::fs::read_to_string(dir.path().join(format!("{name}.html"))).unwrap();
        let checked = dir.path().join(format!("{name}.checked.html"));
        std::fs::write(&checked, page.replace("</body>", &format!("{FIGURE_CHECK}</body>"))).unwrap();
        let o = headless(browser, &checked, &["--dump-dom", "--enable-logging=stderr", "--v=0"]);
        let dom = stdout(&o);
        assert!(dom.contains("data-figures=\"10\""), "{name}: the browser did not see 10 figures");
        assert!(
            dom.contains("data-empty=\"\""),
            "{name}: figures without a drawing: {}",
            dom.split("data-empty=").nth(1).unwrap_or("").chars().take(200).collect::<String>()
        );
        let log = stderr(&o);
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
        assert!(console.is_empty(), "{name}: the browser's console: {console:?}");
        let size = shot(&dir.path().join(format!("{name}.html")), &dir.path().join(format!("{name}.png")));
        assert!(
            size > 3 * blank_size,
            "{name}: the screenshot ({size} bytes) is close to a blank page's ({blank_size})"
        );
    }
}

#[test]
fn df_lists_functions_and_shows_one_functions_declaration() {
    let o = run(&["-q", "--format", "csv", "-c", "\\df lod_"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for f in ["lod_calls", "lod_messages", "lod_collectives", "lod_resolution"] {
        assert!(out.contains(&format!("\n{f},")), "{out}");
    }
    let o = run(&["-q", "--format", "csv", "-c", "\\df comm_matrix"]);
    let out = stdout(&o);
    assert!(out.starts_with("part,name,type,default,meaning\n"), "{out}");
    assert!(out.contains("parameter,by,'rank' | 'node','rank',"), "{out}");
    assert!(out.contains("column,share,Float64,,value over the total of all pairs"), "{out}");
    let o = run(&["-q", "--format", "csv", "-c", "\\df abs"]);
    assert!(stdout(&o).contains(",datafusion"), "{}", stdout(&o));
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

/// One "did you mean" everywhere a name can be misspelt: tables in \d, functions in \df, named
/// arguments, table functions.
#[test]
fn misspelt_names_get_the_closest_known_one_everywhere() {
    for (command, expected) in [
        ("\\d mesages", "no table or view named 'mesages' (\\d lists them); did you mean 'messages'?"),
        ("\\df atribution", "no function matches 'atribution' (\\df lists them); did you mean 'attribution'?"),
        ("SELECT * FROM message_latency(rell => 'messages')", "unknown argument 'rell' (expected rel,"),
        ("SELECT * FROM message_latency(rell => 'messages')", "did you mean 'rel'?"),
        ("SELECT * FROM mesage_latency()", "did you mean 'message_latency'?"),
    ] {
        let o = run(&[SMALL, "-q", "-c", command]);
        assert!(!o.status.success(), "{command}");
        assert!(stderr(&o).contains(expected), "{command}: {}", stderr(&o));
    }
    // A pattern that matches nothing and is close to nothing says only that.
    let o = run(&[SMALL, "-q", "-c", "\\df zzzzz"]);
    assert!(
        stderr(&o).contains("no function matches 'zzzzz' (\\df lists them)") && !stderr(&o).contains("did you mean")
    );
}
