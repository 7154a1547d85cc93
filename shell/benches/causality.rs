//! Causality and trend benchmark: vector_clocks over 1 M events (500,000 messages) between 64
//! ranks, dag_nodes and dag_edges over 1 M messages between 1,024 ranks, and latency_trend over
//! 10 M messages. Prints the wall time of each SQL query and peak memory (VmHWM).
//!
//! `cargo bench -p commdb-shell --bench causality -- [TREND_MESSAGES]` (default 10,000,000).

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

use commdb_catalog::Session;
use datafusion::datasource::MemTable;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn register(session: &Session, name: &str, n: usize, ranks: i32) {
    let t = Instant::now();
    let table = MemTable::try_new(schema(), vec![messages(n, ranks)]).expect("table");
    session.context().register_table(name, Arc::new(table)).expect("register");
    let label = format!("synthetic messages {name}: {ranks} ranks");
    println!("{label:<48} {:>8.3} s  {n:>9} rows  peak {:>7.0} MiB", t.elapsed().as_secs_f64(), peak_rss_mib());
}

#[tokio::main]
async fn main() {
    let trend_n: usize = std::env::args().skip(1).find_map(|a| a.replace('_', "").parse().ok()).unwrap_or(10_000_000);
    let mut session = Session::new();
    commdb_udfs::register_all(&mut session);
    println!("commdb causality benchmark, {} threads", rayon::current_num_threads());

    register(&session, "v", 500_000, 64);
    time(&mut session, "vector_clocks('v'): 1 M events x 64 ranks", "SELECT count(*) FROM vector_clocks('v')").await;
    time(&mut session, "vector_clocks('v'), sum of the last entry", "SELECT sum(vc[64]) FROM vector_clocks('v')").await;
    session.context().deregister_table("v").expect("deregister");

    register(&session, "d", 1_000_000, 1024);
    time(&mut session, "dag_nodes('d'): 1 M messages", "SELECT count(*) FROM dag_nodes('d')").await;
    time(&mut session, "dag_edges('d'): 1 M messages", "SELECT count(*), avg(latency) FROM dag_edges('d')").await;
    time(&mut session, "load_balance('d')", "SELECT max(lb) FROM load_balance('d')").await;
    session.context().deregister_table("d").expect("deregister");

    register(&session, "t", trend_n, 1024);
    time(&mut session, "latency_trend('t'), ~100 bins", "SELECT count(*) FROM latency_trend(rel => 't')").await;
    time(&mut session, "latency_trend('t'), ~100 bins, again", "SELECT count(*) FROM latency_trend(rel => 't')").await;
    time(&mut session, "latency_trend('t'), 1 us bins", "SELECT count(*) FROM latency_trend('t', bin_ns => 1000)")
        .await;
}
