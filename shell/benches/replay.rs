//! Replay and delta benchmark: ideal_replay and transfer_efficiency over a generated 256-rank
//! stencil trace of about 10 M events (calls, messages and collectives derived from it).
//! Prints the wall time of each SQL query and peak memory (VmHWM).
//!
//! `cargo bench -p commdb-shell --bench replay -- [EVENTS]` (default 10,000,000).

mod common;
use common::peak_rss_mib;

use std::time::Instant;

use arrow::array::RecordBatch;
use commdb_catalog::Session;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn time(session: &mut Session, label: &str, sql: &str) {
    let t = Instant::now();
    let batches = session.collect(sql).await.expect(sql);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    println!("{label:<48} {:>8.3} s  {rows:>9} rows  peak {:>7.0} MiB", t.elapsed().as_secs_f64(), peak_rss_mib());
}

#[tokio::main]
async fn main() {
    let target: usize = std::env::args().skip(1).find_map(|a| a.replace('_', "").parse().ok()).unwrap_or(10_000_000);
    let iterations = (target / (256 * 33)).max(1) as u32;
    let cfg = GeneratorConfig { ranks: 256, pattern: Pattern::Stencil2d, iterations, ..GeneratorConfig::default() };
    let t = Instant::now();
    let trace = generate(&cfg).expect("generate").trace.build().expect("build");
    let events = trace.row_count("events");
    println!(
        "{:<48} {:>8.3} s  {events:>9} events  peak {:>7.0} MiB",
        format!("256-rank stencil, {iterations} iterations"),
        t.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    let mut session = Session::new();
    commdb_udfs::register_all(&mut session);
    session.attach(trace, Some("t")).expect("attach");
    println!("commdb replay benchmark, {} threads", rayon::current_num_threads());
    time(&mut session, "ideal_replay()", "SELECT count(*), min(trf_cumulative) FROM ideal_replay()").await;
    time(&mut session, "ideal_replay(), again", "SELECT count(*), min(trf_cumulative) FROM ideal_replay()").await;
    time(&mut session, "transfer_efficiency()", "SELECT * FROM transfer_efficiency() WHERE rank IS NULL").await;
}
