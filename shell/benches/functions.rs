//! Every table function over one store or two, whole processes: for each function that the
//! trace alone can answer (every parameter has a default; the level of detail is given a width
//! of 1,920 pixels), `SELECT count(*) FROM f()` in a
//! `commdb` process of its own, its wall time and peak resident memory (`/usr/bin/time`). With
//! two stores of one shape at two sizes it prints each function's time ratio beside the ratio
//! of their events, so that a cost growing faster than the events shows. Marked: above 2 GiB
//! (`memory`), above 15 s on the first store (`time`), a time ratio above 1.1 times the events'
//! (`grows faster`).
//!
//! Before a store's runs of a query every file of both stores is dropped from the page cache
//! (`posix_fadvise(DONTNEED)`); the query then runs twice and the second run is timed, so that
//! each size is measured with the files the query reads in memory, and a store larger than the
//! cache shares it with nothing but that query's files (1 B events are 21 GB: read in turn
//! with the other store's and the previous queries' files, runs read part of their store from
//! the disk, which gave `parallel_regions` a ratio of 8.8 for 5 times the events, against 4.4
//! so). `--cold` times the first run instead: the files read from the disk.
//!
//! `cargo bench -p commdb-shell --bench functions -- [--cold] STORE [STORE2] [FUNCTION...]`,
//! with `COMMDB_BIN=PATH` to run another build (a release one: the bench only starts processes).

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use commdb_analysis::params::ParamDefault;
use commdb_udfs::{Kind, functions};

/// Arguments a function needs beyond its defaults: the level of detail needs the view's width
/// (or a resolution).
const ARGUMENTS: [(&str, &str); 3] =
    [("lod_calls", "pixels => 1920"), ("lod_messages", "pixels => 1920"), ("lod_collectives", "pixels => 1920")];

/// Above these a function is marked (the goals at 200 M events on a 2-core machine: the time
/// on the first store, the memory on both).
const TIME_GOAL_S: f64 = 15.0;
const MEMORY_GOAL_MIB: f64 = 2048.0;

/// A run taking longer is stopped and reported (`timeout`).
const GIVE_UP_S: u32 = 900;

fn binary() -> PathBuf {
    std::env::var_os("COMMDB_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_commdb")), PathBuf::from)
}

/// What one run of a query gave: (wall seconds, peak MiB), or the error it printed.
fn run(store: &str, sql: &str) -> Result<(f64, f64, String), String> {
    let bin = binary().display().to_string();
    let started = Instant::now();
    let give_up = GIVE_UP_S.to_string();
    let o = Command::new("timeout")
        .args([&give_up, "/usr/bin/time", "-f", "%M", "--", &bin, store, "-q", "--format", "csv", "-c", sql])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("timeout, /usr/bin/time: {e}"))?;
    let wall = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(124) {
        return Err(format!("stopped after {GIVE_UP_S} s"));
    }
    if !o.status.success() {
        let line = err.lines().find(|l| l.contains("rror")).unwrap_or(err.trim());
        return Err(line.chars().take(160).collect());
    }
    let peak_kb: f64 = err.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(0.0);
    let out = String::from_utf8_lossy(&o.stdout);
    Ok((wall, peak_kb / 1024.0, out.lines().last().unwrap_or("").to_string()))
}

/// Drops every file under the stores from the page cache (the pages not written back stay).
fn forget(stores: &[&String]) {
    fn walk(dir: &Path) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                return eprintln!("{}: could not list it to drop its files from the page cache: {e}", dir.display());
            }
        };
        for entry in entries {
            let path = match entry {
                Ok(entry) => entry.path(),
                Err(e) => {
                    eprintln!("{}: could not read an entry to drop it from the page cache: {e}", dir.display());
                    continue;
                }
            };
            if path.is_dir() {
                walk(&path);
            } else {
                let dropped = std::fs::File::open(&path).and_then(|file| {
                    Ok(rustix::fs::fadvise(&file, 0, None::<NonZeroU64>, rustix::fs::Advice::DontNeed)?)
                });
                if let Err(e) = dropped {
                    eprintln!("{}: could not drop it from the page cache: {e}", path.display());
                }
            }
        }
    }
    for store in stores {
        walk(Path::new(store.as_str()));
    }
}

/// The events of a store (read from its Parquet files' footers).
fn events(store: &str) -> f64 {
    match run(store, "SELECT count(*) FROM events") {
        Ok((_, _, n)) => n.trim().parse().unwrap_or(f64::NAN),
        Err(e) => panic!("{store}: {e}"),
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let usage = |why: &str| -> ! {
        eprintln!(
            "{why}\nusage: cargo bench -p commdb-shell --bench functions -- [--cold] STORE [STORE2] [FUNCTION...]"
        );
        std::process::exit(2)
    };
    let cold = args.iter().any(|a| a == "--cold");
    args.retain(|a| a != "--cold");
    if let Some(option) = args.iter().find(|a| a.starts_with("--")) {
        usage(&format!("{option}: unknown option (the one option is --cold)"));
    }
    let stores: Vec<&String> = args.iter().filter(|a| std::path::Path::new(a).is_dir()).collect();
    let only: Vec<&String> = args.iter().filter(|a| !std::path::Path::new(a).is_dir()).collect();
    if stores.is_empty() || stores.len() > 2 {
        usage(&format!("one or two stores (directories) expected, {} given", stores.len()));
    }
    if let Some(unknown) = only.iter().find(|o| !functions().iter().any(|f| f.name == o.as_str())) {
        usage(&format!("{unknown}: neither a store's directory nor one of commdb's functions"));
    }
    let sizes: Vec<f64> = stores.iter().map(|s| events(s)).collect();
    println!("commdb {}", binary().display());
    println!(
        "{}",
        if cold {
            "timed: the first run of each query, the stores' files dropped from the page cache"
        } else {
            "timed: the second of two runs of each query, the stores' files dropped from the page cache before the first"
        }
    );
    for (s, n) in stores.iter().zip(&sizes) {
        println!("store {s}: {n:.0} events");
    }
    let answerable = functions().iter().filter(|f| {
        f.kind() == Kind::Table
            && f.params.iter().all(|p| !matches!(p.default, ParamDefault::Required))
            && (only.is_empty() || only.iter().any(|o| o.as_str() == f.name))
    });
    for f in answerable {
        let arguments = ARGUMENTS.iter().find(|(name, _)| *name == f.name).map_or("", |a| a.1);
        let sql = format!("SELECT count(*) FROM {}({arguments})", f.name);
        let mut line = format!("{:24}", f.name);
        let mut times = Vec::new();
        for (k, store) in stores.iter().enumerate() {
            forget(&stores);
            let warmed = if cold { Ok(Default::default()) } else { run(store, &sql) };
            match warmed.and_then(|_| run(store, &sql)) {
                Ok((wall, peak, _)) => {
                    let time = if k == 0 && wall > TIME_GOAL_S { " time" } else { "" };
                    let memory = if peak > MEMORY_GOAL_MIB { " memory" } else { "" };
                    line += &format!("  {wall:7.2} s {peak:6.0} MiB{:12}", format!("{time}{memory}"));
                    times.push(wall);
                }
                Err(e) => {
                    line += &format!("  fails: {e}");
                    break;
                }
            }
        }
        if let [a, b] = times[..] {
            let (ratio, events) = (b / a, sizes[1] / sizes[0]);
            let faster = if ratio > 1.1 * events { "  grows faster" } else { "" };
            line += &format!("  time x{ratio:.2} for events x{events:.2}{faster}");
        }
        println!("{line}");
    }
}
