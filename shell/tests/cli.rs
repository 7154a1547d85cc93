//! The `commdb` binary end to end: scripts and their exit codes, output formats, subcommands,
//! errors for bad input, and every saved query in queries/ on a generated trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn commdb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_commdb"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn data(name: &str) -> String {
    root().join("tests").join("data").join(name).display().to_string()
}

fn run(args: &[&str]) -> Output {
    commdb().args(args).stdin(Stdio::null()).output().expect("run commdb")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

const SMALL: &str = "generate:ranks=4,ranks-per-node=2,iterations=3";

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
    assert!(err.contains("report.sql:4:") && err.contains("nonsense"), "{err}");
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
    assert!(stderr(&o).contains("-c:1:"), "{}", stderr(&o));

    let o = run(&["generate", "/tmp/never", "--pattern", "hexagon"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("pattern must be stencil2d, ring, alltoall or master-worker"), "{}", stderr(&o));
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
}

#[test]
fn script_from_stdin_and_backslash_commands() {
    use std::io::Write;
    let mut child = commdb().args([SMALL, "-q"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"\\format csv\nSELECT count(*) AS n\n  FROM ranks;\n\\d ranks\n\\q\nSELECT 'not reached';\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert!(out.starts_with("n\n4\n"), "{out}");
    assert!(out.contains("node,Utf8,yes,host name of the node the rank ran on"), "{out}");
    assert!(!out.contains("not reached"));
}

#[test]
fn saved_queries_run_on_a_generated_trace() {
    let dir = root().join("queries");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sql") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("-- "), "{} needs a header comment", path.display());
            let o = run(&[
                "generate:ranks=16,iterations=10,background-traffic=1ms:1.5ms:4,sync-sessions=1",
                "-q",
                "-f",
                path.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
            assert!(stdout(&o).lines().count() > 2, "{} printed no rows", path.display());
            n += 1;
        }
    }
    assert!(n > 0);
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
        let (locality, send_ts, latency): (&str, i64, f64) = (f[3], f[5].parse().unwrap(), f[8].parse().unwrap());
        assert_eq!(locality, "inter", "{row}");
        assert!((2_000_000..3_000_000).contains(&send_ts), "{row}");
        assert!((3.0..=5.5).contains(&latency), "latency {latency} does not show the factor 4: {row}");
    }
}
