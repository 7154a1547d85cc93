//! Load benchmark: generator speed, derivation of calls/messages/collectives (matching), the
//! Parquet store's write and read, and a PCLVis-shaped CSV of the same messages read and
//! matched. Prints events/s and peak memory (VmHWM) after each step.
//!
//! `cargo bench -p commdb-shell --bench load -- [EVENTS]` (default 10,000,000 events).

mod common;
use common::peak_rss_mib;

use std::io::Write;
use std::time::Instant;

use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};
use commdb_catalog::{OpenOptions, open, store};

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn report(step: &str, items: usize, what: &str, started: Instant) {
    let s = started.elapsed().as_secs_f64();
    println!(
        "{step:<28} {items:>12} {what:<9} {s:>8.3} s {:>10.2} M {what}/s   peak {:>8.0} MiB",
        items as f64 / s / 1e6,
        peak_rss_mib()
    );
}

fn main() {
    let target: usize = std::env::args().skip(1).find_map(|a| a.replace('_', "").parse().ok()).unwrap_or(10_000_000);
    // A 256-rank stencil produces about 40 events per rank and iteration.
    let iterations = (target / (256 * 40)).max(1) as u32;
    let cfg = GeneratorConfig {
        ranks: 256,
        ranks_per_node: 16,
        pattern: Pattern::Stencil2d,
        iterations,
        ..GeneratorConfig::default()
    };
    println!(
        "commdb load benchmark: 256-rank stencil, {iterations} iterations, {} threads",
        rayon::current_num_threads()
    );

    let t = Instant::now();
    let generated = generate(&cfg).expect("generate");
    let events = generated.truth.events as usize;
    report("generate", events, "events", t);

    let t = Instant::now();
    let trace = generated.trace.build().expect("build");
    trace.build_all().expect("every table");
    report("derive calls/msgs/colls", events, "events", t);
    println!(
        "  {} calls, {} messages, {} collective parts",
        trace.row_count("calls").expect("built"),
        trace.row_count("messages").expect("built"),
        trace.row_count("collectives").expect("built")
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let t = Instant::now();
    store::write(&trace, &store_dir).expect("write store");
    report("store write (parquet)", events, "events", t);

    let t = Instant::now();
    let back = store::read(&store_dir).expect("read store");
    report("store read (parquet)", events, "events", t);
    assert_eq!(back.row_count("messages").expect("read"), trace.row_count("messages").expect("built"));
    drop(back);

    // The messages as a PCLVis CSV: one send row and one receive row each.
    let csv_path = dir.path().join("messages.csv");
    {
        use arrow::array::AsArray;
        use arrow::datatypes::{Int32Type, Int64Type};
        let mut w = std::io::BufWriter::new(std::fs::File::create(&csv_path).expect("csv"));
        writeln!(w, "rank,type,timestamp,source,destination,size").unwrap();
        for b in &trace.table("messages").expect("built") {
            let src = b.column(1).as_primitive::<Int32Type>();
            let dst = b.column(2).as_primitive::<Int32Type>();
            let bytes = b.column(5).as_primitive::<Int64Type>();
            let send = b.column(6).as_primitive::<Int64Type>();
            let recv = b.column(7).as_primitive::<Int64Type>();
            for i in 0..b.num_rows() {
                let (s, d, n) = (src.value(i), dst.value(i), bytes.value(i));
                writeln!(w, "{s},send,{},{s},{d},{n}", send.value(i)).unwrap();
                writeln!(w, "{d},recv,{},{s},{d},{n}", recv.value(i)).unwrap();
            }
        }
    }
    let rows = trace.row_count("messages").expect("built") * 2;
    drop(trace);
    let t = Instant::now();
    let csv = open(&csv_path.display().to_string(), &OpenOptions::default()).expect("csv");
    csv.build_all().expect("every table");
    report("csv read + match", rows, "events", t);
    assert_eq!(csv.row_count("messages").expect("built") * 2, rows);
}
