//! `commdb serve` as a person uses it, measured in the browser: a `commdb serve STORE` process
//! and headless Chromium driven through the DevTools protocol open the page as soon as the
//! server prints its URL; the bench notes when the first view is drawn, then makes a scripted
//! session of 100 moves (zooming in and out with the wheel about the middle, dragging to pan
//! both ways), each waited for, and prints the time from each request to its drawing as the
//! page measured it (median, 95th percentile, largest), the server's peak resident memory and
//! the page's JavaScript heap.
//!
//! `cargo bench -p commdb-shell --bench serve -- STORE [--wait-warm]`, with `COMMDB_BIN=PATH`
//! for another build (a release one: the bench only starts processes). `--wait-warm` waits
//! for the server's whole-run views before opening the page.

#[path = "../tests/cli/browser.rs"]
#[allow(dead_code)]
mod browser;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn binary() -> PathBuf {
    std::env::var_os("COMMDB_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_commdb")), PathBuf::from)
}

fn peak_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Some(store) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: cargo bench -p commdb-shell --bench serve -- STORE [--wait-warm]");
        return;
    };
    if !browser::installed() {
        return;
    }
    let wait_warm = args.iter().any(|a| a == "--wait-warm");
    let started = Instant::now();
    let mut server = Command::new(binary())
        .args(["serve", store, "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start commdb serve");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("a URL").to_string();
    let serving = started.elapsed().as_secs_f64();
    println!("{store}: serving after {serving:.1} s at {url}");
    if wait_warm {
        let port = url.trim_end_matches('/').rsplit(':').next().unwrap().to_string();
        let warm = Instant::now();
        let probe = format!("http://127.0.0.1:{port}/api/view?width=1600");
        let _ = Command::new("curl").args(["-s", "-o", "/dev/null", &probe]).status();
        println!("whole-run views ready {:.1} s later", warm.elapsed().as_secs_f64());
    }
    let mut b = browser::Browser::open(&url, 1600, 1000);
    let opened = Instant::now();
    b.wait_for("window.commdbTimeline && commdbTimeline.state().drawn >= 1", 600);
    let first = opened.elapsed().as_secs_f64();
    println!("first view drawn {first:.2} s after the page was opened");
    let top = b.eval("document.getElementById('timeline').getBoundingClientRect().top").as_f64().unwrap();
    let (x, y) = (900.0, top + 60.0);
    let mut moves: Vec<(f64, f64)> = Vec::new(); // (ms, window width in ms) of each move
    for i in 0..100 {
        let drawn = b.eval("commdbTimeline.state().drawn").as_u64().unwrap();
        match i % 10 {
            0..=3 => b.mouse("mouseWheel", x, y, json!({ "deltaX": 0, "deltaY": -100 })),
            4..=7 => {
                let dx = if i % 10 == 7 { 200.0 } else { -300.0 };
                b.mouse("mousePressed", x, y, json!({ "button": "left", "clickCount": 1 }));
                b.mouse("mouseMoved", x + dx / 2.0, y, json!({ "button": "left", "buttons": 1 }));
                b.mouse("mouseMoved", x + dx, y, json!({ "button": "left", "buttons": 1 }));
                b.mouse("mouseReleased", x + dx, y, json!({ "button": "left", "clickCount": 1 }));
            }
            _ => b.mouse("mouseWheel", x, y, json!({ "deltaX": 0, "deltaY": 100 })),
        }
        let state = b.eval("commdbTimeline.state()");
        if state["t0"] == b.eval("commdbTimeline.state().viewT0") && state["requested"].as_u64() == Some(drawn) {
            continue; // a move at the edge of the run asks for nothing new
        }
        b.wait_for(&format!("commdbTimeline.state().drawn > {drawn} && !commdbTimeline.state().loading"), 600);
        let state = b.eval("commdbTimeline.state()");
        let ms = state["timings"].as_array().and_then(|t| t.last()).and_then(serde_json::Value::as_f64);
        let wide = (state["t1"].as_f64().unwrap_or(0.0) - state["t0"].as_f64().unwrap_or(0.0)) / 1e6;
        moves.extend(ms.map(|ms| (ms, wide)));
        std::thread::sleep(Duration::from_millis(20));
    }
    let state = b.eval("commdbTimeline.state()");
    let mut timings: Vec<f64> =
        state["timings"].as_array().unwrap().iter().skip(1).filter_map(serde_json::Value::as_f64).collect();
    timings.sort_by(f64::total_cmp);
    moves.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest: Vec<String> =
        moves.iter().take(6).map(|(ms, wide)| format!("{ms:.0} ms ({wide:.3} ms wide)")).collect();
    println!("slowest moves: {}", slowest.join(", "));
    let heap = b.call("Runtime.getHeapUsage", json!({}));
    println!(
        "{} moves drawn: median {:.0} ms, 95th percentile {:.0} ms, largest {:.0} ms; last window {:.3} ms wide",
        timings.len(),
        percentile(&timings, 0.5),
        percentile(&timings, 0.95),
        timings.last().copied().unwrap_or(f64::NAN),
        (state["t1"].as_f64().unwrap() - state["t0"].as_f64().unwrap()) / 1e6
    );
    println!(
        "server peak {:.0} MiB; page JavaScript heap {:.1} MiB used of {:.1} MiB",
        peak_mib(server.id()),
        heap["usedSize"].as_f64().unwrap_or(0.0) / 1048576.0,
        heap["totalSize"].as_f64().unwrap_or(0.0) / 1048576.0
    );
    let errors = b.eval("commdbTimeline.state().errors");
    if errors != json!([]) || !b.errors.is_empty() {
        println!("page errors: {errors} {:?}", b.errors);
    }
    let _ = server.kill();
    let _ = server.wait();
}
