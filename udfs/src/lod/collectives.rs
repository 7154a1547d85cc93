//! `lod_collectives`: one row per (communicator, slot of the operation's first begin), with
//! the common operation or 'mixed'.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::ComputeMany;
use commdb_analysis::relation::Relation;

use super::grid::*;
use super::{PIXELS, RESOLUTION, T0, T1};

pub const LOD_COLLECTIVES: Function = Function {
    name: "lod_collectives",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("collectives"), "the collective operations to slot"),
        RESOLUTION,
        T0,
        T1,
        PIXELS,
    ],
    output: Output::Columns(&[
        col("comm", int64, "").never_null(),
        col("first_slot", int64, "start of the slot of the operations' first begin").never_null(),
        col("op", text, "the operation, or 'mixed' when they differ").never_null(),
        col("instances", int64, "operations merged in the row").never_null(),
        col("duration_avg", float64, "their mean duration").never_null(),
        col("participants", int64, "ranks taking part").never_null(),
    ]),
    description: "collective operations merged per (communicator, slot of first begin); op 'mixed' when they differ",
    make: Make::Table(lod_collectives),
};

/// Per (comm, instance): first begin, last end, operations, ranks.
type Instances = BTreeMap<(i64, i64), (i64, i64, BTreeSet<String>, BTreeSet<i64>)>;
/// Per (comm, first slot): operations, instances, summed duration, ranks.
type CollectiveGroups = BTreeMap<(i64, i64), (BTreeSet<String>, i64, f64, BTreeSet<i64>)>;

arguments! {
    struct LodCollectivesArgs(LOD_COLLECTIVES) {
        rel: Relation,
        ..grid: LodParams,
    }
}

fn lod_collectives(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let LodCollectivesArgs { rel: relation, grid: p } = LodCollectivesArgs::read(a)?;
    let idx = relation.columns("lod_collectives", &["comm", "instance", "op", "rank", "begin_ts", "end_ts"])?;
    let out = a.schema();
    let s = out.clone();
    let (span, span_read) = span_input(a.session, "lod_collectives", &relation, &p)?;
    let compute: ComputeMany = Arc::new(move |inputs| {
        let batches = &inputs[0];
        let (comm, instance) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        let op = text_column(batches, 2)?;
        let (rank, begin, end) = (int64_column(batches, 3)?, int64_column(batches, 4)?, int64_column(batches, 5)?);
        // (comm, instance) -> (first begin, last end, operations, ranks)
        let mut inst: Instances = BTreeMap::new();
        for i in 0..comm.len() {
            if comm.is_null(i) || instance.is_null(i) || end.is_null(i) {
                continue;
            }
            let e = end.value(i);
            let b = if begin.is_null(i) { e } else { begin.value(i) };
            let x = inst.entry((comm.value(i), instance.value(i))).or_insert((b, e, BTreeSet::new(), BTreeSet::new()));
            x.0 = x.0.min(b);
            x.1 = x.1.max(e);
            x.2.insert(if op.is_null(i) { "unknown".to_string() } else { op.value(i).to_string() });
            if rank.is_valid(i) {
                x.3.insert(rank.value(i));
            }
        }
        let own = (inst.values().map(|x| x.0).min(), inst.values().map(|x| x.0).max());
        let (lo, hi) = chosen_span(&span, inputs.get(1), own)?;
        let Some(g) = p.grid("lod_collectives", lo, hi)? else {
            return Ok(vec![RecordBatch::new_empty(s.clone())]);
        };
        let mut groups: CollectiveGroups = BTreeMap::new();
        for ((c, _), (b, e, ops, ranks)) in inst {
            if b < g.t0 || b >= g.t1 {
                continue;
            }
            let x = groups.entry((c, g.start(g.slot(b)))).or_default();
            x.0.extend(ops);
            x.1 += 1;
            x.2 += (e - b) as f64;
            x.3.extend(ranks);
        }
        let rows: Vec<_> = groups.into_iter().collect();
        let op_name = |ops: &BTreeSet<String>| {
            if ops.len() == 1 { ops.iter().next().cloned().unwrap_or_default() } else { "mixed".into() }
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| op_name(&r.1.0)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.1.2 / r.1.1 as f64))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.3.len() as i64))),
        ];
        Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
    });
    let mut inputs = vec![(relation, Some(idx))];
    inputs.extend(span_read);
    Ok(Arc::new(Derived::from_many(out, inputs, compute)))
}
