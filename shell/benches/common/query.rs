//! Timing one SQL query in a benchmark: wall time, rows and peak memory on one line.

use std::time::Instant;

use arrow::array::RecordBatch;
use commdb_catalog::Session;

use super::peak_rss_mib;

/// Run `sql` to completion and print `label`, the wall time, the rows and peak memory.
pub async fn time(session: &mut Session, label: &str, sql: &str) {
    let t = Instant::now();
    let batches = session.collect(sql).await.expect(sql);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    println!("{label:<48} {:>8.3} s  {rows:>9} rows  peak {:>7.0} MiB", t.elapsed().as_secs_f64(), peak_rss_mib());
}
