//! The shell run from the command line: scripts and their exit codes, output formats and files,
//! backslash commands, long and wide results, and the errors bad input gets.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::common::*;

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
    // Keys typed before the new prompt reads them could go to the line being dropped.
    let prompts = screen.matches("commdb>").count();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pane.wait_for("commdb>", 1).matches("commdb>").count() <= prompts && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
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
    // In the logical plan the call is a node of its own, reading only the column asked for,
    // with the relations it reads as its children.
    assert!(out.contains("Analysis: transfer_efficiency(), projection=[rank]\n    TableScan: calls"), "{out}");
    assert!(!out.contains("metrics=["), "{out}");
    let o = run(&[SMALL, "-q", "--format", "csv", "-c", "EXPLAIN ANALYZE SELECT count(*) FROM ideal_replay()"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = out.lines().find(|l| l.contains("ideal_replay: analysis")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("output_rows=") && line.contains("elapsed_compute="), "{line}");
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
