//! OTF2 load benchmark: reads an archive with commdb's reader into the `events` table, then
//! again with all derived tables (calls, messages, collectives), and prints events/s and peak
//! memory (VmHWM), ROUNDS times (default 1), and the best round of each. When the archive does not exist yet it is generated first (a 1024-rank
//! stencil, 32 ranks per node, ITERATIONS iterations) with commdb's OTF2 writer.
//! `tests/otf2/bench.sh` runs it next to the reference library's reader.
//! `cargo bench -p commdb-shell --bench otf2 -- ARCHIVE_DIR [ITERATIONS] [ROUNDS]`

mod common;
use common::peak_rss_mib;

use std::path::Path;
use std::time::Instant;

use commdb_catalog::generate::{GeneratorConfig, generate};

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: otf2 ARCHIVE_DIR [ITERATIONS] [ROUNDS]");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let anchor = dir.join("traces.otf2");
    let path = anchor.as_path();
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    println!("commdb OTF2 load benchmark, {} threads, {rounds} rounds", rayon::current_num_threads());
    println!("{}", common::allocator_mode());
    if !anchor.exists() {
        let iterations = args.get(1).and_then(|i| i.parse().ok()).unwrap_or(1250);
        let cfg = GeneratorConfig { ranks: 1024, ranks_per_node: 32, iterations, ..GeneratorConfig::default() };
        let t = Instant::now();
        let g = generate(&cfg).expect("generate");
        let gen_s = t.elapsed().as_secs_f64();
        let n = g.truth.events;
        println!(
            "generate                  {n:>12} events {gen_s:>8.3} s {:>8.2} M events/s  peak {:>7.0} MiB",
            n as f64 / gen_s / 1e6,
            peak_rss_mib()
        );
        let t = Instant::now();
        commdb_catalog::otf2::writer::write(&g.trace, dir).expect("write");
        let w = t.elapsed().as_secs_f64();
        println!("write OTF2                {n:>12} events {w:>8.3} s {:>8.2} M events/s", n as f64 / w / 1e6);
    }

    // Each round loads the `events` table alone, then every table; the best round of each is
    // compared. Only rounds after the first reuse pages (see `allocator_mode`).
    let (mut best_events, mut best_all) = (f64::INFINITY, f64::INFINITY);
    for round in 0..rounds {
        let t = Instant::now();
        let raw = commdb_catalog::otf2::read(path).expect("read");
        let n = raw.events.len();
        let names: Vec<String> = raw.regions.iter().map(|r| r.name.clone()).collect();
        let events = raw.events.into_batches(&names).expect("events table");
        let table_bytes: usize = events.iter().map(|b| b.get_array_memory_size()).sum();
        let load = t.elapsed().as_secs_f64();
        best_events = best_events.min(load);
        println!(
            "round {round} load to events table      {n:>12} events {load:>8.3} s {:>8.2} M events/s   table {:>6.0} MiB  peak {:>7.0} MiB",
            n as f64 / load / 1e6,
            table_bytes as f64 / 1048576.0,
            peak_rss_mib()
        );
        drop(events);

        let t = Instant::now();
        let trace = commdb_catalog::otf2::read(path).expect("read").build().expect("build");
        let all = t.elapsed().as_secs_f64();
        best_all = best_all.min(all);
        println!(
            "round {round} load with derived tables  {n:>12} events {all:>8.3} s {:>8.2} M events/s   {} calls, {} messages, {} collective parts  peak {:>7.0} MiB",
            n as f64 / all / 1e6,
            trace.row_count("calls"),
            trace.row_count("messages"),
            trace.row_count("collectives"),
            peak_rss_mib()
        );
        if round + 1 == rounds {
            println!(
                "best: events table {best_events:.3} s ({:.2} M events/s), with derived tables {best_all:.3} s (+{:.0}%)",
                n as f64 / best_events / 1e6,
                (best_all / best_events - 1.0) * 100.0
            );
        }
    }
}
