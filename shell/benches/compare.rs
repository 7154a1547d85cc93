//! Comparing two runs, whole process: `commdb A -c "ATTACH 'B' AS b" -c "SELECT ... FROM
//! compare_runs(b => 'b', by => ...)"` on two generated stores of about 20 M events each (a
//! 256-rank stencil; B has rank 5 computing twice as long from the middle iteration on), by
//! region and by iteration, and iterations() alone. Prints each run's wall time and peak
//! memory as /usr/bin/time reports them (the median of 3), and whether the planted rank is
//! the first difference.
//!
//! `cargo bench -p commdb-shell --bench compare -- [DIR] [EVENTS]`
//! (defaults: a directory under the system's temporary one, kept between runs; 20,000,000
//! events per run). Build the release binary first (`cargo build --release -p commdb-shell`):
//! the benchmark runs the `commdb` built with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn commdb() -> &'static str {
    env!("CARGO_BIN_EXE_commdb")
}

/// Generate the two runs in `dir` unless they are there.
fn runs(dir: &Path, events: u64) -> (PathBuf, PathBuf) {
    let ranks = 256u64;
    // A rank of the 256-rank stencil logs about 38 events an iteration.
    let iterations = (events / (ranks * 38)).max(10);
    let middle = iterations / 2;
    let a = dir.join(format!("a-{events}"));
    let b = dir.join(format!("b-{events}"));
    for (path, extra) in [(&a, None), (&b, Some(format!("5:2:{middle}")))] {
        if path.join("trace_info.parquet").exists() || path.join("ground_truth.json").exists() {
            continue;
        }
        let started = Instant::now();
        let mut cmd = Command::new(commdb());
        cmd.arg("generate").arg(path).args(["--ranks", &ranks.to_string(), "--ranks-per-node", "16"]);
        cmd.args(["--iterations", &iterations.to_string()]);
        if let Some(slow) = &extra {
            cmd.args(["--slow-rank", slow]);
        }
        let o = cmd.output().expect("run commdb generate");
        assert!(o.status.success(), "generate: {}", String::from_utf8_lossy(&o.stderr));
        eprintln!("generated {} in {:.1} s", path.display(), started.elapsed().as_secs_f64());
    }
    (a, b)
}

/// One whole process under /usr/bin/time: (wall s, peak MiB, stdout).
fn timed(args: &[&str]) -> (f64, f64, String) {
    let o = Command::new("/usr/bin/time").arg("-v").arg(commdb()).args(args).output().expect("run /usr/bin/time");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {err}");
    let field = |name: &str| -> Option<String> {
        err.lines().find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss):")
        .map_or(f64::NAN, |t| t.split(':').fold(0.0, |acc, part| acc * 60.0 + part.parse::<f64>().unwrap_or(f64::NAN)));
    let peak = field("Maximum resident set size (kbytes):")
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(f64::NAN, |k| k / 1024.0);
    (wall, peak, String::from_utf8_lossy(&o.stdout).to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let dir = args.first().map_or_else(|| std::env::temp_dir().join("commdb-bench-compare"), PathBuf::from);
    let events: u64 = args.get(1).and_then(|e| e.parse().ok()).unwrap_or(20_000_000);
    std::fs::create_dir_all(&dir).expect("create the benchmark's directory");
    let (a, b) = runs(&dir, events);
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let attach = format!("ATTACH '{b}' AS b");
    println!("compare_runs of two generated runs of about {events} events each, whole process (median of 3)");
    println!("| query | wall | peak memory | first row |");
    println!("|---|---|---|---|");
    for (what, sql) in [
        ("iterations() of one run", "SELECT count(*), sum(waiting_ns) FROM iterations()".to_string()),
        ("compare_runs by region", "SELECT key, metric FROM compare_runs(b => 'b', by => 'region') LIMIT 1".to_string()),
        ("compare_runs by iteration", "SELECT min(CAST(key AS BIGINT)), count(*) FROM compare_runs(b => 'b', by => 'iteration') WHERE significant AND metric = 'duration_ns'".to_string()),
        ("compare_runs by rank", "SELECT key, metric FROM compare_runs(b => 'b', by => 'rank') LIMIT 1".to_string()),
    ] {
        let mut samples: Vec<(f64, f64, String)> =
            (0..3).map(|_| timed(&[&a, "-q", "--format", "csv", "-c", &attach, "-c", &sql])).collect();
        samples.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (wall, peak, out) = &samples[1];
        let first = out.lines().nth(1).unwrap_or("").to_string();
        println!("| {what} | {wall:.2} s | {peak:.0} MiB | {first} |");
    }
}
