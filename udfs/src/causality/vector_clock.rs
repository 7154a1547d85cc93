//! Vector clocks (Mattern, Fidge) over a messages relation, as PCLVis section 5 uses them to
//! order events across ranks. Entry i of a clock counts the events of the i-th rank of the
//! relation (ranks ascending) that precede or are the event. In logical order: a send ticks
//! its rank's own entry and carries the clock; a receive ticks its own entry, then takes the
//! element-wise maximum with the clock its send carried. A collective (when a collectives
//! relation is given) ticks every participant's own entry once, then every participant leaves
//! with the element-wise maximum of all participants' clocks: nothing a participant did before
//! it is concurrent with what any participant does after it.
//!
//! `happens_before(a, b)`: a <= b element-wise and a != b; `concurrent(a, b)`: neither happened
//! before the other and a != b. The result holds events x ranks integers, so the function
//! refuses, before computing, when that is above `max_cells` (default 2^28: 1 GiB of Int32).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, Int64Type, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::{Kind, Messages, Participations, Timeline};
use crate::latency::MESSAGES;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Folder, Mapper, StartFold};
use commdb_catalog::fast_hash::FastSet;
use datafusion::logical_expr::ScalarUDF;

pub const VECTOR_CLOCKS: Function = Function {
    name: "vector_clocks",
    params: &[
        MESSAGES,
        param(
            "collectives",
            Type::Relation,
            ParamDefault::Chosen("none"),
            "a collectives relation whose operations join their participants' clocks (collectives are left out when not given)",
        ),
        param(
            "max_cells",
            Type::Integer { min: 1 },
            ParamDefault::Integer(MAX_CELLS),
            "refuse, before computing, when events x ranks is above this (2^28 cells: 1 GiB)",
        ),
    ],
    output: Output::Columns(&[
        col("rank", int64, "the rank of the event").never_null(),
        col("seq", int64, "position of the event in the logical order").never_null(),
        col("ts", int64, "time of the event").never_null(),
        col("kind", text, "send, recv or collective").never_null(),
        col("msg_id", int64, "the message sent or received (NULL for a collective)"),
        col("comm", int64, "the collective's communicator (NULL for a message)"),
        col("instance", int64, "the collective's instance on its communicator (NULL for a message)"),
        col(
            "vc",
            list_int32,
            "the vector clock: entry i counts the events of the i-th rank (ascending) up to this one",
        )
        .never_null(),
    ]),
    description: "the vector clock of every send, receive (and collective, given a collectives relation) in logical order; vc[i] counts events of the i-th rank",
    make: Make::Table(plan_vector_clocks),
};

pub const HAPPENS_BEFORE: Function = Function {
    name: "happens_before",
    params: &[
        param("a", Type::Value("List(Int32)"), ParamDefault::Required, "a vector clock (vector_clocks().vc)"),
        param("b", Type::Value("List(Int32)"), ParamDefault::Required, "another vector clock of the same relation"),
    ],
    output: Output::Value("boolean"),
    description: "vector clock a happened before b: a <= b element-wise and a != b",
    make: Make::Scalar(|f, _| ScalarUDF::from(ClockOrder::new(f))),
};

pub const CONCURRENT: Function = Function {
    name: "concurrent",
    params: HAPPENS_BEFORE.params,
    output: Output::Value("boolean"),
    description: "neither vector clock happened before the other (and they differ)",
    make: Make::Scalar(|f, _| ScalarUDF::from(ClockOrder::new(f))),
};

/// A list of Int32 without NULL entries, as `vc` is.
fn list_int32() -> DataType {
    list_type()
}
/// Default limit of events x ranks.
pub const MAX_CELLS: i64 = 1 << 28;
pub const MESSAGE_COLUMNS: [&str; 5] = ["msg_id", "src", "dst", "send_ts", "recv_ts"];
pub const COLLECTIVE_COLUMNS: [&str; 4] = ["comm", "instance", "rank", "begin_ts"];

/// Clocks of every event of a timeline, events x ranks, row-major in event order.
pub fn vector_clocks(t: &Timeline, m: &Messages, max_cells: i64) -> Result<Vec<i32>> {
    let n = t.ranks.len();
    let cells = t.len() as u128 * n as u128;
    if cells > max_cells as u128 {
        return exec_err!(
            "vector_clocks: the result would hold {} events x {} ranks = {} clock entries ({:.1} GB), above max_cells = {}; narrow the relation (a view of messages in a time window or between some ranks) or raise max_cells",
            t.len(),
            n,
            cells,
            cells as f64 * 4.0 / 1e9,
            max_cells
        );
    }
    let mut out = vec![0i32; t.len() * n];
    let mut last: Vec<u32> = vec![u32::MAX; n];
    let mut merged = vec![0i32; n];
    t.visit_in_logical_order(m, |group| {
        if let [i] = group {
            let (i, r) = (*i as usize, t.rank_of[*i as usize] as usize);
            start_from_previous(&mut out, n, last[r], i);
            out[i * n + r] += 1;
            let e = t.events[i];
            if e.kind == Kind::Recv {
                let s = t.send_event[e.item as usize];
                if s != u32::MAX {
                    merge_into(&mut out, n, s as usize, i);
                }
            }
            last[r] = i as u32;
            return;
        }
        merged.fill(0);
        for &i in group {
            let (i, r) = (i as usize, t.rank_of[i as usize] as usize);
            start_from_previous(&mut out, n, last[r], i);
            out[i * n + r] += 1;
            for (m, v) in merged.iter_mut().zip(&out[i * n..i * n + n]) {
                *m = (*m).max(*v);
            }
        }
        for &i in group {
            let (i, r) = (i as usize, t.rank_of[i as usize] as usize);
            out[i * n..i * n + n].copy_from_slice(&merged);
            last[r] = i as u32;
        }
    })?;
    Ok(out)
}

/// Row `i` starts as a copy of the rank's previous clock (row `prev`), or zeros.
fn start_from_previous(out: &mut [i32], n: usize, prev: u32, i: usize) {
    if prev != u32::MAX {
        let p = prev as usize;
        out.copy_within(p * n..p * n + n, i * n);
    }
}

/// Row `i` = max(row `i`, row `s`) element-wise.
fn merge_into(out: &mut [i32], n: usize, s: usize, i: usize) {
    let (a, b) = if s < i {
        let (lo, hi) = out.split_at_mut(i * n);
        (&lo[s * n..s * n + n], &mut hi[..n])
    } else {
        let (lo, hi) = out.split_at_mut(s * n);
        (&hi[..n] as &[i32], &mut lo[i * n..i * n + n])
    };
    for (x, y) in b.iter_mut().zip(a) {
        *x = (*x).max(*y);
    }
}

fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int32, false)))
}

fn output_schema() -> SchemaRef {
    VECTOR_CLOCKS.schema()
}

arguments! {
    struct ClockArgs(VECTOR_CLOCKS) {
        rel: Relation,
        collectives: Option<Relation>,
        max_cells: i64,
    }
}

fn plan_vector_clocks(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let ClockArgs { rel, collectives: colls, max_cells } = ClockArgs::read(a)?;
    let max_cells = max_cells.min(i64::from(i32::MAX));
    let idx = rel.columns("vector_clocks", &MESSAGE_COLUMNS)?;
    let mut inputs = vec![(rel, Some(idx))];
    if let Some(c) = colls {
        let mut ci = c.columns("vector_clocks", &COLLECTIVE_COLUMNS)?;
        ci.extend(c.schema().index_of("end_ts").ok());
        inputs.push((c, Some(ci)));
    }
    let out = output_schema();
    let s = out.clone();
    let with_collectives = inputs.len() > 1;
    let start: StartFold = Arc::new(move || {
        Box::new(Clocks {
            schema: s.clone(),
            max_cells,
            with_collectives,
            messages: Messages::default(),
            collectives: Participations::default(),
            ranks: FastSet::default(),
            events: 0,
        }) as Box<dyn Folder>
    });
    Ok(Arc::new(Derived::folded(out, inputs, Main::Batches, start)))
}

/// What vector_clocks reads, held as it streams: the collectives' participations are folded
/// first, then the messages. The events and the ranks are counted on the way, and the function
/// refuses as soon as their product passes `max_cells` (both only grow), before holding the
/// rest of a relation far too large.
struct Clocks {
    schema: SchemaRef,
    max_cells: i64,
    with_collectives: bool,
    messages: Messages,
    collectives: Participations,
    ranks: FastSet<i64>,
    events: u64,
}

impl Clocks {
    fn check(&self) -> Result<()> {
        let cells = u128::from(self.events) * self.ranks.len() as u128;
        if cells > self.max_cells as u128 {
            return exec_err!(
                "vector_clocks: the result would hold at least {} events x {} ranks = {} clock entries ({:.1} GB), above max_cells = {}; narrow the relation (a view of messages in a time window or between some ranks) or raise max_cells",
                self.events,
                self.ranks.len(),
                cells,
                cells as f64 * 4.0 / 1e9,
                self.max_cells
            );
        }
        Ok(())
    }
}

impl Folder for Clocks {
    fn fold(&mut self, _input: usize, batch: &RecordBatch) -> Result<()> {
        let from = self.collectives.rank.len();
        self.collectives.extend(std::slice::from_ref(batch), &(0..batch.num_columns()).collect::<Vec<_>>())?;
        self.ranks.extend(&self.collectives.rank[from..]);
        self.events += (self.collectives.rank.len() - from) as u64;
        self.check()
    }

    fn held_bytes(&self) -> usize {
        self.collectives.rank.len() * 40 + self.ranks.len() * 16
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        Ok(self)
    }
}

impl Mapper for Clocks {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let from = self.messages.len();
        self.messages.extend(std::slice::from_ref(batch), &[0, 1, 2, 3, 4])?;
        let m = &self.messages;
        for row in from..m.len() {
            for (rank, ts) in [(m.src[row], m.send_ts[row]), (m.dst[row], m.recv_ts[row])] {
                if let Some(r) = rank {
                    self.ranks.insert(r);
                    self.events += u64::from(ts.is_some());
                }
            }
        }
        self.check()?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let parts = self.with_collectives.then_some(&self.collectives);
        let t = Timeline::new(&self.messages, parts)?;
        let clocks = vector_clocks(&t, &self.messages, self.max_cells)?;
        Ok(vec![batch(&self.schema, &t, &self.messages, clocks)?])
    }

    fn held_bytes(&self) -> usize {
        self.messages.len() * 72 + Folder::held_bytes(self)
    }
}

fn batch(schema: &SchemaRef, t: &Timeline, m: &Messages, clocks: Vec<i32>) -> Result<RecordBatch> {
    let n = t.ranks.len();
    let len = t.len();
    let mut seq = Vec::with_capacity(len);
    for r in 0..n {
        seq.extend(0..(t.rank_start[r + 1] - t.rank_start[r]) as i64);
    }
    let msg = |e: &super::Event| (e.kind != Kind::Collective).then(|| m.msg_id[e.item as usize]);
    let coll = |e: &super::Event| (e.kind == Kind::Collective).then(|| &t.collectives[e.item as usize]);
    let offsets = OffsetBuffer::new(ScalarBuffer::from_iter((0..=len).map(|i| (i * n) as i32)));
    let values = Int32Array::new(ScalarBuffer::from(clocks), None);
    let vc = ListArray::try_new(Arc::new(Field::new("item", DataType::Int32, false)), offsets, Arc::new(values), None)?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(t.rank_of.iter().map(|r| t.ranks[*r as usize]))),
        Arc::new(Int64Array::from(seq)),
        Arc::new(Int64Array::from_iter_values(t.events.iter().map(|e| e.ts))),
        Arc::new(StringArray::from_iter_values(t.events.iter().map(|e| e.kind.name()))),
        Arc::new(Int64Array::from(t.events.iter().map(msg).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(t.events.iter().map(|e| coll(e).map(|c| c.comm)).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(t.events.iter().map(|e| coll(e).map(|c| c.instance)).collect::<Vec<_>>())),
        Arc::new(vc),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The two scalar functions over two vector clocks (declared in HAPPENS_BEFORE and CONCURRENT).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ClockOrder {
    declaration: &'static Function,
    signature: Signature,
}

impl ClockOrder {
    /// The function `declaration` names: happens_before or concurrent.
    pub fn new(declaration: &'static Function) -> Self {
        ClockOrder { declaration, signature: Signature::any(2, Volatility::Immutable) }
    }
}

/// (a <= b everywhere, b <= a everywhere).
fn compare(a: &[i64], b: &[i64]) -> (bool, bool) {
    let (mut le, mut ge) = (true, true);
    for (x, y) in a.iter().zip(b) {
        le &= x <= y;
        ge &= x >= y;
    }
    (le, ge)
}

impl ScalarUDFImpl for ClockOrder {
    commdb_analysis::declare::declared_function!();

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        for t in args {
            if !matches!(t, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) | DataType::Null)
            {
                return plan_err!("{}: expects two vector clocks (lists of integers), got {t}", self.declaration.name);
            }
        }
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<_>>()?;
        let as_list = |a: &ArrayRef| -> Result<ListArray> {
            let t = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
            Ok(arrow::compute::cast(a, &t)?.as_list::<i32>().clone())
        };
        let (a, b) = (as_list(&arrays[0])?, as_list(&arrays[1])?);
        let mut out = BooleanBuilder::with_capacity(rows);
        for i in 0..rows {
            if a.is_null(i) || b.is_null(i) {
                out.append_null();
                continue;
            }
            let (x, y) = (a.value(i), b.value(i));
            let (x, y) = (x.as_primitive::<Int64Type>(), y.as_primitive::<Int64Type>());
            if x.len() != y.len() {
                return exec_err!(
                    "{}: row {}: vector clocks of different lengths ({} and {}); compare clocks of the same vector_clocks result",
                    self.declaration.name,
                    i + 1,
                    x.len(),
                    y.len()
                );
            }
            let (le, ge) = compare(x.values(), y.values());
            let before = le && !ge;
            out.append_value(match self.declaration.name {
                "happens_before" => before,
                _ => !le && !ge,
            });
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::*;

    fn clocks(t: &Timeline, c: &[i32], rank: usize) -> Vec<Vec<i32>> {
        let n = t.ranks.len();
        (t.rank_start[rank]..t.rank_start[rank + 1]).map(|i| c[i * n..i * n + n].to_vec()).collect()
    }

    #[test]
    fn three_ranks_by_hand() {
        // r0 sends a to r1, r1 sends b to r2, r2 sends c to r0; r0 also sends d to r2 early.
        let m = messages(&[
            (0, 2, Some(1), Some(9)),
            (0, 1, Some(2), Some(3)),
            (1, 2, Some(4), Some(5)),
            (2, 0, Some(10), Some(11)),
        ]);
        let t = Timeline::new(&m, None).unwrap();
        let c = vector_clocks(&t, &m, MAX_CELLS).unwrap();
        assert_eq!(clocks(&t, &c, 0), [vec![1, 0, 0], vec![2, 0, 0], vec![3, 2, 3]]);
        assert_eq!(clocks(&t, &c, 1), [vec![2, 1, 0], vec![2, 2, 0]]);
        assert_eq!(clocks(&t, &c, 2), [vec![2, 2, 1], vec![2, 2, 2], vec![2, 2, 3]]);
        assert!(vector_clocks(&t, &m, 20).unwrap_err().to_string().contains("8 events x 3 ranks = 24"));
    }

    #[test]
    fn collectives_join_every_participant() {
        let m = messages(&[(0, 1, Some(1), Some(2))]);
        let p =
            Participations { comm: vec![0; 3], instance: vec![0; 3], rank: vec![0, 1, 2], begin_ts: vec![Some(5); 3] };
        let t = Timeline::new(&m, Some(&p)).unwrap();
        let c = vector_clocks(&t, &m, MAX_CELLS).unwrap();
        assert_eq!(clocks(&t, &c, 2), [vec![2, 2, 1]]);
        assert_eq!(clocks(&t, &c, 0).last().unwrap(), &vec![2, 2, 1]);
    }
}
