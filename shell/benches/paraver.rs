//! Paraver load benchmark: reads a Paraver trace with commdb's reader (records parsed and
//! assembled into raw tables), then again with all derived tables (calls, messages,
//! collectives), and prints records/s and peak memory (VmHWM), ROUNDS times (default 1). When
//! DIR/trace.prv does not exist yet it is generated first (a 1024-rank stencil, 32 ranks per
//! node, ITERATIONS iterations) and written with commdb's Paraver writer.
//! `cargo bench -p commdb-shell --bench paraver -- DIR [ITERATIONS] [ROUNDS]`; with
//! `MIMALLOC_PURGE_DELAY=-1` the rounds after the first run on pages the allocator kept.

mod common;
use common::{cpu_seconds, peak_rss_mib};

use std::path::Path;
use std::time::Instant;

use commdb_catalog::generate::{GeneratorConfig, generate};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: paraver DIR [ITERATIONS] [ROUNDS]");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let prv = dir.join("trace.prv");
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    println!("commdb Paraver load benchmark, {} threads, {rounds} rounds", rayon::current_num_threads());
    println!("{}", common::allocator_mode());
    if !prv.exists() {
        let iterations = args.get(1).and_then(|i| i.parse().ok()).unwrap_or(1800);
        let cfg = GeneratorConfig { ranks: 1024, ranks_per_node: 32, iterations, ..GeneratorConfig::default() };
        let t = Instant::now();
        let trace = generate(&cfg).expect("generate").trace.build().expect("build");
        println!("generate and build          {:>8.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        commdb_catalog::export::paraver::write(&trace, dir, "trace").expect("write");
        println!("write Paraver               {:>8.3} s", t.elapsed().as_secs_f64());
    }
    let bytes = std::fs::metadata(&prv).expect("trace.prv").len();
    let records = count_records(&prv);
    println!("{}: {records} records, {:.0} MiB", prv.display(), bytes as f64 / (1 << 20) as f64);
    let mut best = (f64::MAX, f64::MAX);
    for round in 1..=rounds {
        let (t, cpu) = (Instant::now(), cpu_seconds());
        let raw = commdb_catalog::reading::paraver::read(&prv).expect("read");
        let read_s = t.elapsed().as_secs_f64();
        let events = raw.events.len();
        let t2 = Instant::now();
        let trace = raw.build().expect("build");
        trace.build_all().expect("every table");
        let build_s = t2.elapsed().as_secs_f64();
        let total = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        println!(
            "round {round}: read {read_s:>7.3} s {:>6.1} M records/s ({events} events) | with derived tables {total:>7.3} s {:>6.1} M records/s (build {build_s:.3} s, {} messages) | cpu {cpu:.2} s | peak {:>6.0} MiB",
            records as f64 / read_s / 1e6,
            records as f64 / total / 1e6,
            trace.row_count("messages").expect("built"),
            peak_rss_mib()
        );
        best = (best.0.min(read_s), best.1.min(total));
    }
    println!(
        "best: read {:.3} s = {:.1} M records/s; with derived tables {:.3} s = {:.1} M records/s",
        best.0,
        records as f64 / best.0 / 1e6,
        best.1,
        records as f64 / best.1 / 1e6
    );
}

/// Record lines of a .prv: every line but the header, communicator and comment lines.
fn count_records(prv: &Path) -> u64 {
    use std::io::BufRead;
    let file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(prv).expect("open"));
    let mut n = 0;
    for line in file.split(b'\n') {
        let line = line.expect("read");
        if line.first().is_some_and(u8::is_ascii_digit) {
            n += 1;
        }
    }
    n
}
