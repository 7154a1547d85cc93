//! A synthetic messages table for the analysis benchmarks: random sender/receiver pairs, sizes
//! from 8 B to 1 MiB, one send every 100 ns, transmission time latency + bytes / bandwidth
//! with noise, so every receive follows its send.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use commdb_catalog::generate::rng::uniform;

pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("msg_id", DataType::Int64, false),
        Field::new("src", DataType::Int32, false),
        Field::new("dst", DataType::Int32, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("send_ts", DataType::Int64, true),
        Field::new("duration", DataType::Int64, true),
        Field::new("intra_node", DataType::Boolean, true),
        Field::new("recv_ts", DataType::Int64, true),
    ]))
}

/// `n` messages between random pairs of `ranks` ranks (16 per node), sizes from 8 B to 1 MiB, durations
/// latency + bytes / bandwidth with noise, in batches of 64 Ki rows.
pub fn messages(n: usize, ranks: i32) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let len = (n - start).min(1 << 16);
        let rows = start..start + len;
        let u = |i: usize, k: u64| uniform(7, k, i as u64, 0);
        let src: Vec<i32> = rows.clone().map(|i| (u(i, 1) * f64::from(ranks)) as i32).collect();
        let dst: Vec<i32> = rows.clone().map(|i| (u(i, 2) * f64::from(ranks)) as i32).collect();
        let bytes: Vec<i64> = rows.clone().map(|i| 8 << (u(i, 3) * 17.0) as i64).collect();
        let intra: Vec<bool> = src.iter().zip(&dst).map(|(s, d)| s / 16 == d / 16).collect();
        let duration: Vec<i64> = (0..len)
            .map(|k| {
                let (lat, bw) = if intra[k] { (500.0, 10.0) } else { (2000.0, 2.0) };
                ((lat + bytes[k] as f64 / bw) * (0.9 + 0.2 * u(start + k, 4))) as i64
            })
            .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.clone().map(|i| i as i64))),
            Arc::new(Int32Array::from(src)),
            Arc::new(Int32Array::from(dst)),
            Arc::new(Int64Array::from(bytes)),
            Arc::new(Int64Array::from_iter_values(rows.clone().map(|i| i as i64 * 100))),
            Arc::new(Int64Array::from(duration.clone())),
            Arc::new(BooleanArray::from(intra)),
            Arc::new(Int64Array::from_iter_values(rows.zip(&duration).map(|(i, d)| i as i64 * 100 + d))),
        ];
        out.push(RecordBatch::try_new(schema(), columns).expect("batch"));
        start += len;
    }
    out
}
