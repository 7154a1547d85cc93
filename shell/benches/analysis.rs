//! Analysis benchmark: latency_criteria, message_latency and lod_messages over a synthetic
//! messages table, lod_calls over a synthetic calls table, and process regions (distances + average-linkage clustering) of 2-D stencil communication
//! graphs. Prints the wall time of each SQL query and peak memory (VmHWM).
//!
//! `cargo bench -p commdb-shell --bench analysis -- [MESSAGES] [RANKS...]`
//! (defaults: 10,000,000 messages; 1024 and 16384 ranks).

mod common;
#[path = "common/messages.rs"]
mod messages;
#[path = "common/query.rs"]
mod query;
use common::peak_rss_mib;
use messages::{messages, schema};
use query::time;

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use commdb_catalog::Session;
use commdb_catalog::generate::rng::uniform;
use commdb_catalog::generate::topology::{Pattern, Topology};
use datafusion::datasource::MemTable;

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn calls_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("rank", DataType::Int32, false),
        Field::new("thread", DataType::Int32, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("start_ts", DataType::Int64, false),
        Field::new("end_ts", DataType::Int64, false),
    ]))
}

/// `n` calls on 1024 ranks: per rank a sequence of compute (~60 us) and MPI calls (~20 us),
/// every fourth MPI call nested in the compute call before it.
fn calls(n: usize) -> Vec<RecordBatch> {
    const REGIONS: [&str; 4] = ["compute", "MPI_Send", "MPI_Recv", "MPI_Allreduce"];
    let per_rank = n.div_ceil(1024);
    let mut out = Vec::new();
    for rank in 0..1024i32 {
        let mut t = 0i64;
        let (mut starts, mut ends, mut regions) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..per_rank {
            let u = uniform(9, rank as u64, i as u64, 0);
            let len = if i % 2 == 0 { 50_000 + (20_000.0 * u) as i64 } else { 10_000 + (20_000.0 * u) as i64 };
            if i % 8 == 3 {
                // nested in the previous (compute) call
                let parent_end = ends[i - 1];
                starts.push(parent_end - 5_000);
                ends.push(parent_end - 1_000);
            } else {
                starts.push(t);
                ends.push(t + len);
                t += len;
            }
            regions.push(REGIONS[if i % 2 == 0 { 0 } else { 1 + i % 3 }]);
        }
        let n = starts.len();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![rank; n])),
            Arc::new(Int32Array::from(vec![0; n])),
            Arc::new(arrow::array::StringArray::from(regions)),
            Arc::new(Int64Array::from(starts)),
            Arc::new(Int64Array::from(ends)),
        ];
        out.push(RecordBatch::try_new(calls_schema(), columns).expect("calls batch"));
    }
    out
}

/// The messages of one 2-D stencil halo exchange over `ranks` ranks.
fn stencil(ranks: i32) -> Vec<RecordBatch> {
    let t = Topology::new(Pattern::Stencil2d, ranks);
    let n = t.edges.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..n as i64)),
        Arc::new(Int32Array::from_iter_values(t.edges.iter().map(|e| e.src))),
        Arc::new(Int32Array::from_iter_values(t.edges.iter().map(|e| e.dst))),
        Arc::new(Int64Array::from_iter_values(t.edges.iter().map(|e| 4096 * e.size_factor))),
        Arc::new(Int64Array::from_iter_values(0..n as i64)),
        Arc::new(Int64Array::from_iter_values((0..n).map(|_| 1000))),
        Arc::new(BooleanArray::from(vec![true; n])),
        Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i + 1000))),
    ];
    vec![RecordBatch::try_new(schema(), columns).expect("batch")]
}

#[tokio::main]
async fn main() {
    let numbers: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.replace('_', "").parse().ok()).collect();
    let n = numbers.first().copied().unwrap_or(10_000_000);
    let rank_counts: Vec<i32> =
        if numbers.len() > 1 { numbers[1..].iter().map(|r| *r as i32).collect() } else { vec![1024, 16384] };
    let mut session = Session::new();
    commdb_udfs::register_all(&mut session);
    println!("commdb analysis benchmark, {} threads", rayon::current_num_threads());

    let t = Instant::now();
    let table = MemTable::try_new(schema(), vec![messages(n, 1024)]).expect("table");
    session.context().register_table("m", Arc::new(table)).expect("register");
    println!(
        "{:<44} {:>8.3} s  {n:>9} rows  peak {:>7.0} MiB",
        "synthetic messages",
        t.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    time(&mut session, "latency_criteria('m')", "SELECT * FROM latency_criteria('m')").await;
    time(
        &mut session,
        "message_latency('m'), count delayed",
        "SELECT count(*) FROM message_latency('m') WHERE delayed",
    )
    .await;
    time(
        &mut session,
        "lod_messages('m'), 1 us slots",
        "SELECT count(*) FROM lod_messages('m', resolution_ns => 1000)",
    )
    .await;
    time(
        &mut session,
        "lod_messages('m'), 1920 pixels",
        "SELECT count(*) FROM lod_messages(pixels => 1920, rel => 'm')",
    )
    .await;
    time(
        &mut session,
        "lod_messages('m'), 1 us slots, again",
        "SELECT count(*) FROM lod_messages('m', resolution_ns => 1000)",
    )
    .await;
    session.context().deregister_table("m").expect("deregister");

    let t = Instant::now();
    let table = MemTable::try_new(calls_schema(), vec![calls(n)]).expect("calls");
    session.context().register_table("c", Arc::new(table)).expect("register");
    println!(
        "{:<44} {:>8.3} s  {n:>9} rows  peak {:>7.0} MiB",
        "synthetic calls",
        t.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
    time(&mut session, "lod_calls('c'), 1920 pixels", "SELECT count(*) FROM lod_calls(pixels => 1920, rel => 'c')")
        .await;
    time(&mut session, "lod_calls('c'), 100 us slots", "SELECT count(*) FROM lod_calls('c', resolution_ns => 100000)")
        .await;
    session.context().deregister_table("c").expect("deregister");

    for ranks in rank_counts {
        let name = format!("s{ranks}");
        let table = MemTable::try_new(schema(), vec![stencil(ranks)]).expect("table");
        session.context().register_table(name.as_str(), Arc::new(table)).expect("register");
        let label = format!("process_regions, {ranks}-rank stencil");
        time(&mut session, &label, &format!("SELECT count(DISTINCT region) FROM process_regions('{name}')")).await;
    }
}
