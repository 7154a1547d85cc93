//! Nothing the user has is lost, and Ctrl-C always stops: where results are written (devices,
//! links, the trace's own files, leftovers of killed runs), interrupted writes and reads, the
//! work a cancelled query leaves behind, and the limits a shell command or a tight address
//! space puts on the process.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn results_go_into_devices_and_through_links_and_never_over_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    // A character device stays a device.
    let o = run(&[SMALL, "-q", "-o", "/dev/null", "-c", "SELECT * FROM messages"]);
    assert!(o.status.success(), "{}", stderr(&o));
    {
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    }
    // A link is followed: its target is replaced, the link stays.
    let real = dir.path().join("real.csv");
    std::fs::write(&real, "old\n").unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = run(&[SMALL, "-q", "--format", "csv", "-o", link.to_str().unwrap(), "-c", "SELECT 7 AS n"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "n\n7\n");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    // A store's files are refused to -o, report -o, export -o and COPY; the store still opens.
    let store = dir.path().join("store");
    let o = run(&["convert", SMALL, store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let events = store.join("events.parquet").display().to_string();
    let manifest = store.join("manifest.json").display().to_string();
    let s = store.to_str().unwrap();
    for args in [
        vec![s, "-q", "-o", manifest.as_str(), "-c", "SELECT 1"],
        vec![s, "-q", "-c", &format!("COPY (SELECT 1 AS a) TO '{events}'")],
        vec![s, "-q", "-c", &format!("COPY (SELECT 1 AS a) TO '{manifest}'")],
        vec!["report", s, "-o", manifest.as_str()],
        vec!["export", s, "--format", "chrome", "-o", events.as_str()],
    ] {
        let o = run(&args);
        assert!(!o.status.success(), "{args:?} was written");
        assert!(stderr(&o).contains("read from"), "{args:?}: {}", stderr(&o));
    }
    let o = run(&[s, "-q", "--format", "csv", "-c", "SELECT count(*) AS n FROM ranks"]);
    assert!(o.status.success() && stdout(&o).ends_with("4\n"), "{}", stderr(&o));
}

#[test]
fn leftovers_of_killed_runs_are_removed_by_the_next_write_there() {
    let dir = tempfile::tempdir().unwrap();
    // Names of leftovers of a process that is not running (above the kernel's largest id).
    let dead = 4_194_304 + 11;
    let temp = dir.path().join(format!(".out.csv.commdb-{dead}.tmp"));
    let partial = dir.path().join(format!(".store.commdb-partial-{dead}"));
    let scratch = dir.path().join(format!(".store.commdb-partial-{dead}.scratch-events"));
    std::fs::write(&temp, vec![0u8; 1 << 16]).unwrap();
    std::fs::create_dir_all(partial.join("events")).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    let out = dir.path().join("out.csv");
    let o = run(&[SMALL, "-q", "--format", "csv", "-o", out.to_str().unwrap(), "-c", "SELECT 1 AS a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!temp.exists(), "the dead run's temporary file is left");
    let store = dir.path().join("store");
    let o = run(&["convert", SMALL, store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["out.csv", "store"]);
}

#[test]
fn leftovers_of_a_killed_run_not_yet_reaped_are_removed() {
    // A process that ended but whose parent has not collected it (a zombie: a convert killed
    // by `timeout -s KILL` until the shell reaps it) has ended: its leftovers go.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let waited = Instant::now();
    while !std::fs::read_to_string(&stat)
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
    {
        assert!(waited.elapsed() < Duration::from_secs(10), "the child did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let dir = tempfile::tempdir().unwrap();
    let partial = dir.path().join(format!(".store.commdb-partial-{pid}"));
    std::fs::create_dir_all(partial.join("events")).unwrap();
    let store = dir.path().join("store");
    let o = run(&["convert", SMALL, store.to_str().unwrap()]);
    child.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!partial.exists(), "the zombie's partial store is left");
}

/// Run commdb with `args`, send it SIGINT after `after`, and wait for it to end (at most
/// `limit`): its output and how long it took to stop.
fn interrupt(args: &[&str], after: Duration, limit: Duration) -> (std::process::Output, Duration) {
    let mut child =
        commdb().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(after);
    let pid = child.id().to_string();
    let sent = Instant::now();
    std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(sent.elapsed() < limit, "still running {limit:?} after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = sent.elapsed();
    (child.wait_with_output().unwrap(), took)
}

#[test]
fn an_interrupted_write_keeps_the_old_file_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    std::fs::write(&out, "kept\n").unwrap();
    // Rows without end (a cross join) are being written when Ctrl-C comes.
    let args = ["generate:ranks=16,iterations=40", "-q", "--format", "csv", "-o", out.to_str().unwrap()];
    let args = [&args[..], &["-c", "SELECT a.ts, b.ts FROM events a, events b"]].concat();
    let (o, took) = interrupt(&args, Duration::from_millis(2500), Duration::from_secs(10));
    assert!(!o.status.success(), "exit {:?}", o.status);
    assert!(stderr(&o).contains("cancelled"), "{}", stderr(&o));
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file is left");
}

#[test]
fn ctrl_c_stops_a_large_scheduler_log_being_attached() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sacct.txt");
    let mut text = String::from("JobID|JobName|State|Start|End|NodeList\n");
    // A million jobs of one node each (the host lists stay under the reader's limit of 2^20
    // names): seconds of reading in a debug build, interrupted after 0.7 s.
    for j in 0..1_000_000 {
        text.push_str(&format!("{j}|solver|COMPLETED|2024-03-01T10:00:00|2024-03-01T11:00:00|node{:04}\n", j % 900));
    }
    std::fs::write(&log, text).unwrap();
    let args = [SMALL, "-q", "--jobs", log.to_str().unwrap(), "-c", "SELECT count(*) FROM jobs"];
    let (o, took) = interrupt(&args, Duration::from_millis(700), Duration::from_secs(10));
    assert!(!o.status.success(), "exit {:?}: {}", o.status, stdout(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
}

/// Run `sql` in the pane, press Ctrl-C after `after_ms`, wait for the cancel to be told, give
/// the process a second, and count its clock ticks (hundredths of a second of CPU) over the
/// next three seconds: under 30 is less than a tenth of a core.
fn ticks_after_cancel(pane: &Pane, pid: u32, sql: &str, after_ms: u64) -> u64 {
    pane.keys(&[&format!("{sql}\\;"), "Enter"]);
    std::thread::sleep(Duration::from_millis(after_ms));
    pane.keys(&["C-c"]);
    let screen = pane.wait_for("query cancelled", 10);
    assert!(screen.contains("query cancelled"), "{screen}");
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(pid).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    cpu_ticks(pid).unwrap() - before
}

#[test]
fn a_cancelled_query_leaves_no_work_running() {
    // An analysis computing on the query's blocking threads (the ideal-network replay of
    // 1,024 ranks), cancelled: within a second the process is idle again.
    let Some(pane) = Pane::start("idle", "generate:ranks=1024,iterations=200", 120) else { return };
    let pid = pane.pid().expect("the pane's process");
    pane.keys(&["SELECT count(*) FROM calls\\;", "Enter"]);
    pane.wait_for("1 row", 120);
    let used = ticks_after_cancel(&pane, pid, "SELECT count(*) FROM transfer_efficiency()", 1500);
    assert!(used < 30, "{used} ticks of CPU in the 3 s after the cancel");
    pane.keys(&["SELECT 41 + 1 AS answer\\;", "Enter"]);
    assert!(pane.wait_for(" 42", 10).contains(" 42"));
}

#[test]
fn a_cancelled_join_leaves_no_work_running() {
    // A cross join of the messages with themselves (a batch per message of one side, made
    // without waiting on anything), cancelled: the join yields between batches, so within a
    // second the process is idle again (it kept a core busy for minutes).
    let Some(pane) = Pane::start("join", "generate:ranks=64,ranks-per-node=16,iterations=200", 120) else { return };
    let pid = pane.pid().expect("the pane's process");
    pane.keys(&["SELECT count(*) FROM messages\\;", "Enter"]);
    pane.wait_for("1 row", 120);
    let used = ticks_after_cancel(&pane, pid, "SELECT sum(a.bytes + b.bytes) FROM messages a, messages b", 3000);
    assert!(used < 30, "{used} ticks of CPU in the 3 s after the cancel");
}

#[test]
fn shell_commands_stay_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    // \i reads only files, and a script that includes itself is refused.
    let o = run(&[SMALL, "-q", "-c", "\\i /dev/zero"]);
    assert!(!o.status.success() && stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    let a = dir.path().join("a.sql");
    let b = dir.path().join("b.sql");
    std::fs::write(&a, format!("SELECT 1;\n\\i {}\n", b.display())).unwrap();
    std::fs::write(&b, format!("\\i {}\n", a.display())).unwrap();
    let o = run(&[SMALL, "-q", "-f", a.to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("the script includes itself"), "{}", stderr(&o));
    assert!(stderr(&o).contains("a.sql -> ") && stderr(&o).contains("b.sql -> "), "{}", stderr(&o));
    // A chart of more rows than it can show draws an even sample, and says so.
    let svg = dir.path().join("many.svg");
    let sql = "SELECT ts, rank FROM events";
    let o = run(&["generate:ranks=64,iterations=60", "--chart", svg.to_str().unwrap(), "-c", sql]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("notice: \\chart drew ") && stderr(&o).contains("of the query's"), "{}", stderr(&o));
    let size = std::fs::metadata(&svg).unwrap().len();
    assert!(size < 4 << 20, "{size} bytes of SVG");
}

#[test]
fn a_tight_address_space_and_an_engine_fault_end_in_clear_errors() {
    // Under `ulimit -v` (2.5 GB) the shell starts, with stacks sized to the limit.
    let bin = env!("CARGO_BIN_EXE_commdb");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v 2500000 && '{bin}' '{SMALL}' -q --format csv -c 'SELECT count(*) AS n FROM messages'"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // A string that doubles until it overflows what Arrow can hold: one line of error.
    let sql = "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s||s FROM r) SELECT max(length(s)) FROM r";
    let o = run(&["-q", "-c", sql]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(!e.contains("panicked") && !e.contains("stack backtrace") && !e.contains("Join Error"), "{e}");
    assert!(e.starts_with("error: ") && e.lines().count() <= 3, "{e}");
}
