//! Replay and delta benchmark: ideal_replay, transfer_efficiency, critical_path and delay_costs
//! over a generated 256-rank stencil trace of about 10 M events (calls, messages and collectives
//! derived from it), compute_deltas over its calls, and delta_histogram over a table of 100 M synthetic delta
//! times (two modes, ranks attached). Prints the wall time of each SQL query and peak memory
//! (VmHWM).
//!
//! `cargo bench -p commdb-shell --bench replay -- [EVENTS] [VALUES]` (defaults 10,000,000 and
//! 100,000,000).

mod common;
#[path = "common/query.rs"]
mod query;
use common::peak_rss_mib;
use query::time;

use std::time::Instant;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use commdb_catalog::Session;
use commdb_catalog::generate::rng::uniform;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};
use datafusion::datasource::MemTable;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let numbers: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.replace('_', "").parse().ok()).collect();
    let target = numbers.first().copied().unwrap_or(10_000_000);
    let values = numbers.get(1).copied().unwrap_or(100_000_000);
    let iterations = (target / (256 * 33)).max(1) as u32;
    let cfg = GeneratorConfig { ranks: 256, pattern: Pattern::Stencil2d, iterations, ..GeneratorConfig::default() };
    let t = Instant::now();
    let trace = generate(&cfg).expect("generate").trace.build().expect("build");
    trace.build_all().expect("every table");
    let events = trace.row_count("events").expect("built");
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
    time(&mut session, "critical_path()", "SELECT count(*), sum(duration) FROM critical_path()").await;
    time(&mut session, "delay_costs()", "SELECT count(*), sum(cost_ns) FROM delay_costs()").await;
    time(
        &mut session,
        "compute_deltas() + delta_histogram per (region, path)",
        "SELECT region, path, delta_histogram(compute_delta_ns, 5, rank) FROM compute_deltas() GROUP BY region, path",
    )
    .await;
    session.detach("t").expect("detach");

    let t = Instant::now();
    let table = MemTable::try_new(delta_schema(), vec![deltas(values)]).expect("table");
    session.context().register_table("d", Arc::new(table)).expect("register");
    println!(
        "{:<48} {:>8.3} s  {values:>9} rows  peak {:>7.0} MiB",
        "synthetic delta times",
        t.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    time(&mut session, "delta_histogram over 100 M values", "SELECT delta_histogram(v, 5, r)['count'] FROM d").await;
    time(&mut session, "delta_histogram over 100 M values, again", "SELECT delta_histogram(v, 5, r)['count'] FROM d")
        .await;
}

fn delta_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false), Field::new("r", DataType::Int64, false)]))
}

/// `n` delta times from 1,024 ranks: ~100 us, every eighth rank ~1 ms, in 64 Ki-row batches.
fn deltas(n: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let len = (n - start).min(1 << 16);
        let rank: Vec<i64> = (start..start + len).map(|i| (i % 1024) as i64).collect();
        let v: Vec<i64> = (start..start + len)
            .map(|i| {
                let base = if i % 8 == 7 { 1_000_000.0 } else { 100_000.0 };
                (base * (0.9 + 0.2 * uniform(11, i as u64, 0, 0))) as i64
            })
            .collect();
        let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(v)), Arc::new(Int64Array::from(rank))];
        out.push(RecordBatch::try_new(delta_schema(), columns).expect("batch"));
        start += len;
    }
    out
}
