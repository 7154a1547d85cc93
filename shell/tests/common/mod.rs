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
