//! `lod_collectives`: one row per (communicator, slot of the operation's first begin), with
//! the common operation or 'mixed' (Intel Trace Analyzer's level of detail for collectives). The
//! participations stream: each instance keeps its begin, end, operations and ranks, and the
//! instances go to their slots when the span is known.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;

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
    let own = matches!(span, Span::Own);
    let prepare: Prepare = Arc::new(move |held| {
        // The trace's span, when it is the one cut; else the instances' own, once they are read.
        let span = if own { None } else { Some(chosen_span(&span, held.first(), (None, None))?) };
        Ok(Box::new(CollectiveFold {
            params: p,
            span,
            ops: Vec::new(),
            op_index: FastMap::default(),
            instances: FastMap::default(),
            members: 0,
            schema: s.clone(),
        }) as Box<dyn Mapper>)
    });
    let mut inputs = vec![(relation, Some(idx))];
    inputs.extend(span_read);
    Ok(Arc::new(Derived::streamed(out, inputs, prepare)))
}

/// A collective instance as its participations stream by: its first begin, last end, its
/// operations (indices of their names) and the ranks taking part.
#[derive(Debug)]
struct Instance {
    begin: i64,
    end: i64,
    ops: Vec<u32>,
    ranks: Vec<i64>,
}

/// The operations of (comm, first slot): their names' indices, instances, summed duration and
/// ranks (duplicates removed as they grow).
#[derive(Debug, Default)]
struct Group {
    ops: Vec<u32>,
    instances: i64,
    duration: i128,
    ranks: Vec<i64>,
    /// The ranks' length when their duplicates were last removed.
    unique: usize,
}

/// `lod_collectives` as the collectives stream: each instance's begin, end, operations and
/// ranks (8 bytes a participation); the instances are put in their slots at the end, when the
/// span is known.
struct CollectiveFold {
    params: LodParams,
    /// The span to cut, when it is not the instances' own.
    span: Option<(Option<i64>, Option<i64>)>,
    ops: Vec<String>,
    op_index: FastMap<String, u32>,
    instances: FastMap<(i64, i64), Instance>,
    members: usize,
    schema: SchemaRef,
}

impl CollectiveFold {
    fn op(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.op_index.get(name) {
            return i;
        }
        let i = self.ops.len() as u32;
        self.ops.push(name.to_string());
        self.op_index.insert(name.to_string(), i);
        i
    }
}

/// `ranks` without duplicates.
fn unique(ranks: &mut Vec<i64>) {
    ranks.sort_unstable();
    ranks.dedup();
}

impl Mapper for CollectiveFold {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let (comm, instance) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        let op = text_column(batches, 2)?;
        let (rank, begin, end) = (int64_column(batches, 3)?, int64_column(batches, 4)?, int64_column(batches, 5)?);
        for i in 0..comm.len() {
            if comm.is_null(i) || instance.is_null(i) || end.is_null(i) {
                continue;
            }
            let e = end.value(i);
            let b = if begin.is_null(i) { e } else { begin.value(i) };
            let o = self.op(if op.is_null(i) { "unknown" } else { op.value(i) });
            let x = self.instances.entry((comm.value(i), instance.value(i))).or_insert(Instance {
                begin: b,
                end: e,
                ops: Vec::new(),
                ranks: Vec::new(),
            });
            x.begin = x.begin.min(b);
            x.end = x.end.max(e);
            if !x.ops.contains(&o) {
                x.ops.push(o);
            }
            if rank.is_valid(i) {
                x.ranks.push(rank.value(i));
                self.members += 1;
            }
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.members * 8 + self.instances.capacity() * (std::mem::size_of::<((i64, i64), Instance)>() + 8)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let own = (self.instances.values().map(|x| x.begin).min(), self.instances.values().map(|x| x.begin).max());
        let (lo, hi) = self.span.unwrap_or(own);
        let Some(g) = self.params.grid("lod_collectives", lo, hi)? else {
            return Ok(vec![RecordBatch::new_empty(self.schema.clone())]);
        };
        let mut groups: BTreeMap<(i64, i64), Group> = BTreeMap::new();
        for ((c, _), x) in std::mem::take(&mut self.instances) {
            if x.begin < g.t0 || x.begin >= g.t1 {
                continue;
            }
            let group = groups.entry((c, g.start(g.slot(x.begin)))).or_default();
            for o in x.ops {
                if !group.ops.contains(&o) {
                    group.ops.push(o);
                }
            }
            group.instances += 1;
            group.duration += i128::from(x.end - x.begin);
            group.ranks.extend(x.ranks);
            if group.ranks.len() > 2 * group.unique + 4096 {
                unique(&mut group.ranks);
                group.unique = group.ranks.len();
            }
        }
        let rows: Vec<_> = groups
            .into_iter()
            .map(|(key, mut group)| {
                unique(&mut group.ranks);
                (key, group)
            })
            .collect();
        let op_name = |ops: &[u32]| if ops.len() == 1 { self.ops[ops[0] as usize].as_str() } else { "mixed" };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| op_name(&r.1.ops)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.instances))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.1.duration as f64 / r.1.instances as f64))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.ranks.len() as i64))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}
