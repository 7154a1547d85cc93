//! Communication load balance, PCLVis equations 9 and 10: mc_p is the number of messages rank p
//! sent plus received in the relation (the sides that were recorded: an unmatched message
//! counts for its sender or its receiver only), AD the mean absolute deviation of mc over the ranks, and
//! LB_p = |mc_p - mean(mc)| / AD (0 when AD = 0: every rank equally loaded). LB around 1 is
//! ordinary spread; a rank far above it communicates much more (or less) than the others.
//! The messages stream through; only a count per rank is held.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use super::Messages;
use crate::latency::MESSAGES;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64};
use commdb_analysis::derived::Derived;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

pub const LOAD_BALANCE: Function = Function {
    name: "load_balance",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("rank", int64, "").never_null(),
        col("messages", int64, "mc: messages the rank sent plus received").never_null(),
        col("lb", float64, "LB = |mc - mean(mc)| / mean absolute deviation (0 when every rank has the same mc)")
            .never_null(),
    ]),
    description: "messages sent plus received per rank and LB = |mc - mean| / mean absolute deviation (PCLVis equations 9-10)",
    make: Make::Table(plan_load_balance),
};

/// LB of every load in `mc` (equations 9 and 10); all 0 when the loads are equal.
pub fn lb(mc: &[i64]) -> Vec<f64> {
    let n = mc.len().max(1) as f64;
    let mean = mc.iter().sum::<i64>() as f64 / n;
    let ad = mc.iter().map(|v| (*v as f64 - mean).abs()).sum::<f64>() / n;
    mc.iter().map(|v| if ad > 0.0 { (*v as f64 - mean).abs() / ad } else { 0.0 }).collect()
}

/// Count the sides of `m` in `mc` (messages sent plus received per rank).
fn count_sides(mc: &mut BTreeMap<i64, i64>, m: &Messages) {
    for row in 0..m.len() {
        let sent = m.send_ts[row].and(m.src[row]);
        let received = m.recv_ts[row].and(m.dst[row]);
        for r in [sent, received].into_iter().flatten() {
            *mc.entry(r).or_default() += 1;
        }
    }
}

/// (rank, mc, LB) for every rank counted, ranks ascending.
fn balance(mc: BTreeMap<i64, i64>) -> Vec<(i64, i64, f64)> {
    let loads: Vec<i64> = mc.values().copied().collect();
    mc.into_iter().zip(lb(&loads)).map(|((r, c), l)| (r, c, l)).collect()
}

/// (rank, mc, LB) for every rank of the relation, ranks ascending.
pub fn load_balance(m: &Messages) -> Vec<(i64, i64, f64)> {
    let mut mc = BTreeMap::new();
    count_sides(&mut mc, m);
    balance(mc)
}

/// Counts the sides per rank as the messages stream, and answers when they end: only a count
/// per rank is held.
struct Loads {
    schema: SchemaRef,
    mc: BTreeMap<i64, i64>,
}

impl Mapper for Loads {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        count_sides(&mut self.mc, &Messages::read(std::slice::from_ref(batch), &[0, 1, 2, 3, 4])?);
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let rows = balance(std::mem::take(&mut self.mc));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }

    fn held_bytes(&self) -> usize {
        self.mc.len() * 48
    }
}

arguments! {
    struct BalanceArgs(LOAD_BALANCE) {
        rel: Relation,
    }
}

fn plan_load_balance(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let BalanceArgs { rel } = BalanceArgs::read(a)?;
    let idx = rel.columns("load_balance", &super::vector_clock::MESSAGE_COLUMNS)?;
    let out = a.schema();
    let s: SchemaRef = out.clone();
    let prepare: Prepare =
        Arc::new(move |_| Ok(Box::new(Loads { schema: s.clone(), mc: BTreeMap::new() }) as Box<dyn Mapper>));
    Ok(Arc::new(Derived::streamed(out, vec![(rel, Some(idx))], prepare)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::*;

    #[test]
    fn equations_9_and_10() {
        // mc = [3, 1, 1, 1]: mean 1.5, AD = (1.5 + 0.5 * 3) / 4 = 0.75.
        let m = messages(&[(0, 1, Some(1), Some(2)), (0, 2, Some(1), Some(2)), (0, 3, Some(1), Some(2))]);
        let lb = load_balance(&m);
        assert_eq!(lb.iter().map(|r| r.1).collect::<Vec<_>>(), [3, 1, 1, 1]);
        assert!((lb[0].2 - 2.0).abs() < 1e-12 && (lb[1].2 - 2.0 / 3.0).abs() < 1e-12);
        let even = load_balance(&messages(&[(0, 1, Some(1), Some(2)), (1, 0, Some(3), Some(4))]));
        assert!(even.iter().all(|r| r.2 == 0.0));
    }
}
