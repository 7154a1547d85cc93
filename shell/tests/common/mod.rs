//! What the `commdb` binary's tests share: running it, reading its output, and driving the
//! interactive shell through tmux.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn commdb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_commdb"))
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn data(name: &str) -> String {
    root().join("tests").join("data").join(name).display().to_string()
}

pub fn run(args: &[&str]) -> Output {
    commdb().args(args).stdin(Stdio::null()).output().expect("run commdb")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

pub const SMALL: &str = "generate:ranks=4,ranks-per-node=2,iterations=3";

/// Drive the interactive shell through tmux; None (after saying why) when tmux is missing.
pub fn tmux(args: &[&str]) -> Option<String> {
    let o = Command::new("tmux").arg("-L").arg("commdb-tests").args(args).output().ok()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// An interactive shell on `trace` in a tmux pane of `columns` x 30, started and waiting at
/// its prompt; None (after saying why) when tmux is missing.
pub struct Pane {
    pub session: String,
}

impl Pane {
    pub fn start(name: &str, trace: &str, columns: u32) -> Option<Pane> {
        if tmux(&["-V"]).is_none() {
            eprintln!("skipped: tmux is not installed (apt-get install tmux)");
            return None;
        }
        let bin = env!("CARGO_BIN_EXE_commdb");
        let session = format!("{name}{}", std::process::id());
        let shell = format!("{bin} '{trace}'");
        tmux(&["new-session", "-d", "-s", &session, "-x", &columns.to_string(), "-y", "30", &shell]);
        let pane = Pane { session };
        pane.wait_for("commdb>", 30);
        Some(pane)
    }

    /// The screen, wrapped lines joined, once it shows `text` (or after `seconds`).
    pub fn wait_for(&self, text: &str, seconds: u64) -> String {
        let screen = || tmux(&["capture-pane", "-J", "-t", &self.session, "-p"]).unwrap_or_default();
        for _ in 0..seconds * 10 {
            let s = screen();
            if s.contains(text) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        screen()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend(keys);
        tmux(&args);
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", &self.session]);
    }
}

impl Pane {
    /// The process id of the shell running in the pane.
    pub fn pid(&self) -> Option<u32> {
        tmux(&["display", "-p", "-t", &self.session, "#{pane_pid}"])?.trim().parse().ok()
    }
}

/// CPU time (user and system) a process has used so far, in clock ticks (/proc/PID/stat).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// What `commdb ARGS` prints to a terminal of `columns` x 50 (a tmux pane, so it fits its
/// tables to the terminal as a user sees them), lines a terminal wrapped joined again; None
/// (after saying why) when tmux is missing.
pub fn in_terminal(name: &str, args: &[&str], columns: u32) -> Option<String> {
    if tmux(&["-V"]).is_none() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return None;
    }
    let quote = |a: &str| format!("'{}'", a.replace('\'', "'\\''"));
    let command: Vec<String> =
        std::iter::once(env!("CARGO_BIN_EXE_commdb")).chain(args.iter().copied()).map(quote).collect();
    let done = "commdb-finished";
    let shell = format!("{}; echo {done}; sleep 600", command.join(" "));
    let session = format!("{name}{}", std::process::id());
    tmux(&["new-session", "-d", "-s", &session, "-x", &columns.to_string(), "-y", "50", &shell]);
    let pane = Pane { session };
    let everything = || tmux(&["capture-pane", "-J", "-t", &pane.session, "-p", "-S", "-"]).unwrap_or_default();
    for _ in 0..1200 {
        let text = everything();
        if text.lines().any(|l| l == done) {
            let end = text.lines().position(|l| l == done).unwrap_or(0);
            return Some(text.lines().take(end).map(|l| format!("{}\n", l.trim_end())).collect());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("commdb {args:?} did not finish within 2 minutes in the terminal:\n{}", everything());
}

/// A table as the table format prints it: its header and rows, each cell's wrapped lines
/// put back together (with a space between them, so compare without spaces).
#[derive(Debug)]
pub struct Shown {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The tables in `text`: each is found by its rule (`---+---`), whose `+`s mark the columns;
/// the lines with `|` above it are its header, those below it up to the first line without
/// `|` its rows, a new row starting where the first column is not empty.
pub fn tables_in(text: &str) -> Vec<Shown> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, rule) in lines.iter().enumerate() {
        if !rule.contains('+') || !rule.chars().all(|c| c == '-' || c == '+') {
            continue;
        }
        let mut bounds = vec![0];
        bounds.extend(rule.char_indices().filter(|(_, c)| *c == '+').map(|(j, _)| j));
        bounds.push(usize::MAX);
        let cells = |line: &str| -> Vec<String> {
            let chars: Vec<char> = line.chars().collect();
            bounds
                .windows(2)
                .map(|w| {
                    let (a, b) = (if w[0] == 0 { 0 } else { w[0] + 1 }, w[1].min(chars.len()));
                    chars.get(a..b.max(a)).map_or(String::new(), |c| c.iter().collect::<String>().trim().to_string())
                })
                .collect()
        };
        let join = |into: &mut Vec<String>, more: Vec<String>| {
            for (cell, part) in into.iter_mut().zip(more) {
                if !part.is_empty() {
                    if !cell.is_empty() {
                        cell.push(' ');
                    }
                    cell.push_str(&part);
                }
            }
        };
        let top = lines[..i].iter().rposition(|l| !l.contains('|')).map_or(0, |p| p + 1);
        let mut header = vec![String::new(); bounds.len() - 1];
        for line in &lines[top..i] {
            join(&mut header, cells(line));
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        for line in lines[i + 1..].iter().take_while(|l| l.contains('|')) {
            let parts = cells(line);
            match rows.last_mut() {
                Some(row) if parts[0].is_empty() => join(row, parts),
                _ => rows.push(parts),
            }
        }
        out.push(Shown { header, rows });
    }
    out
}
