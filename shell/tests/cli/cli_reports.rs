//! The saved reports of queries/ on generated traces: each finds what was injected, reads whole
//! in a terminal of 80 columns and matches its golden file; the README tour on the demo.

use std::path::{Path, PathBuf};

use crate::common::*;

/// A generated trace written with its scheduler log (sacct.txt) and switch map (switches.csv).
fn generated_run(dir: &Path, ranks: &str) -> commdb_catalog::generate::GroundTruth {
    let out = dir.to_str().unwrap();
    let o =
        run(&["generate", out, "--ranks", ranks, "--iterations", "10", "--compute", "300ms", "--sync-sessions", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("ground_truth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Whether a saved report compares the default trace with a second run attached as `b`.
fn compares_two_runs(text: &str) -> bool {
    text.lines().take_while(|l| l.starts_with("--")).any(|l| l.contains("AS b\""))
}

/// The second run of the reports that compare two: the same run as the one they are given, in
/// which rank 3 computes three times as long from iteration 5 on.
const SECOND_RUN: [&str; 2] = [
    "-c",
    "ATTACH 'generate:ranks=16,iterations=10,background-traffic=1ms:1.5ms:4,sync-sessions=1,slow-rank=3:3:5' AS b",
];

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
            } else if compares_two_runs(&text) {
                let spec = "generate:ranks=16,iterations=10,background-traffic=1ms:1.5ms:4,sync-sessions=1";
                run(&[spec, SECOND_RUN[0], SECOND_RUN[1], "-q", "-f", path.to_str().unwrap()])
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
            let mut case: Vec<String> = Vec::new();
            if compares_two_runs(&text) {
                case.extend(SECOND_RUN.iter().map(|a| a.to_string()));
            }
            case.extend(["-f".into(), path.display().to_string()]);
            cases.push(case);
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
        let mut args = vec![spec, "--max-rows", "25", "-c", "\\timing off"];
        if compares_two_runs(&text) {
            args.extend(SECOND_RUN);
        }
        args.extend(["-f", path.to_str().unwrap()]);
        let o = run(&args);
        assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
        check_golden(&path, &stdout(&o));
        checked += 1;
    }
    assert!(checked >= 10, "{checked} reports checked");
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
        "SELECT count(*) AS windows FROM attribution(window_ns => '1ms') WHERE cause LIKE '%background_traffic%' AND window_start >= 8000000 AND window_end <= 14000000",
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
