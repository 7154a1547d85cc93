//! Clock correction benchmark: what correcting every timestamp adds to the load of an OTF2
//! archive. The archive (a 1024-rank stencil, 32 ranks per node, skewed and drifting clocks with
//! sync sessions at start, end and three times in between, so every rank gets the spline model)
//! is generated with commdb's writer when it does not exist. Each round loads it (read + build)
//! with the correction off, with the model, and with the model and the controlled logical clock,
//! in an order that rotates from round to round; the best round of each is compared. Prints times, events/s and peak memory (VmHWM).
//! `cargo bench -p commdb-shell --bench clock -- ARCHIVE_DIR [ITERATIONS] [ROUNDS]`
//! (`COMMDB_BENCH_ONLY=off|model|clc` runs a single load in that mode, for profiling;
//! `MIMALLOC_PURGE_DELAY=-1` keeps freed pages so that rounds after the first run on warm memory.)

mod common;
use common::peak_rss_mib;

use std::path::Path;
use std::time::Instant;

use commdb_catalog::clock::{self, Correction};
use commdb_catalog::generate::{GeneratorConfig, generate};

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn load(anchor: &Path, correction: Correction) -> (f64, usize, i64) {
    let t = Instant::now();
    let raw = commdb_catalog::reading::otf2::read(anchor).expect("read");
    let n = raw.events.len();
    let trace = raw.build_with(correction).expect("build");
    let s = t.elapsed().as_secs_f64();
    let violations = trace.meta.clock_violations;
    drop(trace);
    (s, n, violations)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: clock ARCHIVE_DIR [ITERATIONS] [ROUNDS]");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let anchor = dir.join("traces.otf2");
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(3);
    println!("commdb clock correction benchmark, {} threads", rayon::current_num_threads());
    println!("{}", common::allocator_mode());
    if !anchor.exists() {
        let iterations = args.get(1).and_then(|i| i.parse().ok()).unwrap_or(250);
        let cfg = GeneratorConfig {
            ranks: 1024,
            ranks_per_node: 32,
            iterations,
            clock_skew: true,
            sync_sessions: 3,
            ..GeneratorConfig::default()
        };
        let g = generate(&cfg).expect("generate");
        commdb_catalog::export::otf2::write(&g.trace, dir).expect("write");
        println!("wrote {} events to {}", g.truth.events, anchor.display());
    }

    // COMMDB_BENCH_ONLY=off|model|clc: one load in that mode, for profiling.
    if let Some(mode) = std::env::var("COMMDB_BENCH_ONLY").ok().and_then(|m| m.parse::<Correction>().ok()) {
        let (s, n, _) = load(&anchor, mode);
        println!("load, correction {:<5} {n:>12} events {s:>8.3} s  peak {:>7.0} MiB", mode.name(), peak_rss_mib());
        return;
    }

    // The correction step alone, on the decoded events.
    let mut raw = commdb_catalog::reading::otf2::read(&anchor).expect("read");
    let n = raw.events.len();
    let t = Instant::now();
    let mut w = commdb_catalog::trace::Warnings::default();
    let models =
        clock::correct(&mut raw.events, &mut raw.metrics, &raw.clock_sync, &raw.ranks, Correction::Model, &mut w);
    let s = t.elapsed().as_secs_f64();
    println!(
        "correct timestamps only  {n:>12} events {s:>8.3} s {:>8.1} M events/s  ({} rank models: {})",
        n as f64 / s / 1e6,
        models.len(),
        models.last().map_or("none", |m| m.fit.method())
    );
    drop(raw);

    let modes = [Correction::Off, Correction::Model, Correction::Clc];
    let mut best = [f64::INFINITY; 3];
    for round in 0..rounds {
        // Rotate the order so that no mode always runs on memory its predecessor just freed.
        for k in (0..3).map(|i| (i + round) % 3) {
            let mode = &modes[k];
            let (s, n, violations) = load(&anchor, *mode);
            best[k] = best[k].min(s);
            println!(
                "round {round} load, correction {:<5} {n:>12} events {s:>8.3} s {:>8.2} M events/s  violations {violations:>8}  peak {:>7.0} MiB",
                mode.name(),
                n as f64 / s / 1e6,
                peak_rss_mib()
            );
        }
    }
    println!(
        "best: off {:.3} s, model {:.3} s (+{:.1}%), clc {:.3} s (+{:.1}%)",
        best[0],
        best[1],
        (best[1] / best[0] - 1.0) * 100.0,
        best[2],
        (best[2] / best[0] - 1.0) * 100.0
    );
}
