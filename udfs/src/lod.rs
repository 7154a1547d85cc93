//! Level of detail for timelines, after the Intel Trace Analyzer's scheme: the interval
//! [t0, t1) is cut into slots of `resolution_ns` and each slot gets deterministic
//! representatives instead of samples.
//! - `lod_calls`: per slot and (rank, thread), the region where the thread spent most of its
//!   exclusive time (a nested call's time belongs to the nested region; ties go to the region
//!   name that sorts first). A call segment that covers two or more whole slots becomes one
//!   merged row spanning them.
//! - `lod_messages`: one row per (src, dst, send slot, receive slot) with averages; the
//!   message counts add up exactly to the number of messages sent in [t0, t1).
//! - `lod_collectives`: one row per (communicator, slot of the operation's first begin), with
//!   the common operation or 'mixed'.
//! - `lod_resolution(t0, t1, pixels)`: the smallest 1-2-5 step (1, 2, 5, 10, 20, ... ns) at or
//!   above (t1 - t0) / pixels, so a drawing never gets more slots than pixels and zooms reuse
//!   slot grids.
//!
//! Every function can take `pixels => N` instead of a resolution (then derived from [t0, t1)
//! by the lod_resolution rule). When t0 or t1 is not given, it is the span of the trace the
//! relation comes from (first and last event of its `events`), the same for the three
//! functions and for any view of the trace's tables, so their slot boundaries coincide and a
//! timeline drawn from them lines up; a relation that comes from no trace uses its own span.
//! A trace's span is read once per open trace and remembered (its tables never change).
//! `lod_calls(..., per => 'rank')` gives ITA's per-process representative: per slot, the
//! region where all threads of the rank together spent the most exclusive time (thread NULL,
//! share = that time over the slot width times the rank's threads). Costs: O(n log n) in the input rows; the output is bounded by
//! slots x threads (calls) or by the input (messages, collectives). `lod_messages` sums its
//! groups as the messages come (crate::stream) whenever the slot grid is known before they
//! are read (t0 and t1 given, or the trace's span, aggregated from its events), so it holds
//! only its groups, never the messages; a relation of no trace cut on its own span is read
//! whole first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};

use arrow::array::{Array, ArrayRef, Float64Array, Float64Builder, Int64Array, Int64Builder, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use rayon::prelude::*;

use crate::common::{Args, ComputeMany, Derived, Relation, column, int64_column, text_column};
use crate::declare::{Function, Make, Output, Param, ParamDefault, Type, col, float64, int64, param, text};
use crate::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;

/// The smallest 1-2-5 step at or above (t1 - t0) / pixels (at least 1 ns).
pub fn resolution(t0: i64, t1: i64, pixels: i64) -> Option<i64> {
    if pixels <= 0 || t1 <= t0 {
        return None;
    }
    let raw = ((t1 as i128 - t0 as i128) as f64 / pixels as f64).max(1.0);
    let mut scale: i64 = 1;
    loop {
        for m in [1, 2, 5] {
            let v = m * scale;
            if v as f64 >= raw {
                return Some(v);
            }
        }
        scale = scale.checked_mul(10)?;
    }
}

/// `lod_resolution(t0, t1, pixels)` scalar function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LodResolution {
    signature: Signature,
}

impl Default for LodResolution {
    fn default() -> Self {
        LodResolution { signature: Signature::uniform(3, vec![DataType::Int64], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for LodResolution {
    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        crate::documentation(&LOD_RESOLUTION)
    }

    fn name(&self) -> &str {
        "lod_resolution"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let cols: Vec<Int64Array> = arrays
            .iter()
            .map(|a| {
                arrow::compute::cast(a, &DataType::Int64).map(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            })
            .collect::<std::result::Result<Option<Vec<_>>, _>>()?
            .unwrap_or_default();
        if cols.len() != 3 {
            return exec_err!("lod_resolution: expects (t0, t1, pixels) as integers");
        }
        let mut out = Vec::with_capacity(args.number_rows);
        for i in 0..args.number_rows {
            if cols.iter().any(|c| c.is_null(i)) {
                out.push(None);
                continue;
            }
            let (t0, t1, px) = (cols[0].value(i), cols[1].value(i), cols[2].value(i));
            if px <= 0 {
                return exec_err!("lod_resolution: pixels must be positive, got {px}");
            }
            if t1 <= t0 {
                return exec_err!("lod_resolution: t1 must be after t0, got t0 = {t0}, t1 = {t1}");
            }
            out.push(resolution(t0, t1, px));
        }
        Ok(ColumnarValue::Array(Arc::new(Int64Array::from(out))))
    }
}

const RESOLUTION: Param = param(
    "resolution_ns",
    Type::Duration { min: 1 },
    ParamDefault::Chosen("from pixels"),
    "width of a slot (give it or pixels)",
);
const T0: Param = param(
    "t0",
    Type::Duration { min: i64::MIN },
    ParamDefault::Chosen("the trace's first event"),
    "start of the interval",
);
const T1: Param = param(
    "t1",
    Type::Duration { min: i64::MIN },
    ParamDefault::Chosen("the trace's last event"),
    "end of the interval",
);
const PIXELS: Param = param(
    "pixels",
    Type::Integer { min: 1 },
    ParamDefault::Chosen("none"),
    "derive resolution_ns from [t0, t1) by lod_resolution's rule for a drawing this wide",
);

pub const LOD_CALLS: Function = Function {
    name: "lod_calls",
    params: &[
        RESOLUTION,
        T0,
        T1,
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to slot"),
        PIXELS,
        param(
            "per",
            Type::Choice(&["thread", "rank"]),
            ParamDefault::Text("thread"),
            "one representative per thread, or per rank (all its threads)",
        ),
    ],
    output: Output::Columns(&[
        col("slot_start", int64, "start of the slot (of the first slot, for a merged row)"),
        col("slot_end", int64, "end of the slot (of the last slot, for a merged row)"),
        col("rank", int64, ""),
        col("thread", int64, "the thread (NULL with per => 'rank')"),
        col("region", text, "the region with the most exclusive time in the slot"),
        col("time_in_slot_ns", int64, "its exclusive time in the slot"),
        col("share", float64, "that time over the slot's width (times the rank's threads with per => 'rank')"),
    ]),
    description: "per time slot and thread (or per rank, per => 'rank'), the region with the most exclusive time, on the trace's slot grid (Intel Trace Analyzer level of detail)",
    make: Make::Table(|| Arc::new(LodCalls)),
};

pub const LOD_MESSAGES: Function = Function {
    name: "lod_messages",
    params: &[
        RESOLUTION,
        T0,
        T1,
        param("rel", Type::Relation, ParamDefault::Text("messages"), "the messages to slot"),
        PIXELS,
    ],
    output: Output::Columns(&[
        col("src", int64, ""),
        col("dst", int64, ""),
        col("send_slot", int64, "start of the slot of the sends"),
        col("recv_slot", int64, "start of the slot of the receives"),
        col("messages", int64, "messages merged in the row"),
        col("bytes_avg", float64, "their mean size"),
        col("duration_avg", float64, "their mean transmission time"),
        col("latency_avg", float64, "their mean latency L, when the relation has a latency column"),
        col("first_send_ts", int64, "the earliest send"),
        col("last_recv_ts", int64, "the latest receive"),
    ]),
    description: "messages merged per (src, dst, send slot, receive slot), counts exact",
    make: Make::Table(|| Arc::new(LodMessages)),
};

pub const LOD_COLLECTIVES: Function = Function {
    name: "lod_collectives",
    params: &[
        RESOLUTION,
        T0,
        T1,
        param("rel", Type::Relation, ParamDefault::Text("collectives"), "the collective operations to slot"),
        PIXELS,
    ],
    output: Output::Columns(&[
        col("comm", int64, ""),
        col("first_slot", int64, "start of the slot of the operations' first begin"),
        col("op", text, "the operation, or 'mixed' when they differ"),
        col("instances", int64, "operations merged in the row"),
        col("duration_avg", float64, "their mean duration"),
        col("participants", int64, "ranks taking part"),
    ]),
    description: "collective operations merged per (communicator, slot of first begin); op 'mixed' when they differ",
    make: Make::Table(|| Arc::new(LodCollectives)),
};

pub const LOD_RESOLUTION: Function = Function {
    name: "lod_resolution",
    params: &[
        param("t0", Type::Value("Int64"), ParamDefault::Required, "start of the interval (ns)"),
        param("t1", Type::Value("Int64"), ParamDefault::Required, "end of the interval (ns)"),
        param("pixels", Type::Value("Int64"), ParamDefault::Required, "width of the drawing"),
    ],
    output: Output::Value("resolution_ns"),
    description: "the smallest 1-2-5 step (ns) at or above (t1 - t0) / pixels, for a timeline of that many pixels",
    make: Make::Scalar(|_| datafusion::logical_expr::ScalarUDF::from(LodResolution::default())),
};

/// Where a lod function's default span comes from.
#[derive(Debug, Clone)]
enum Span {
    /// The relation's own rows (t0 and t1 given, or a relation from no trace).
    Own,
    /// The trace's span, known from an earlier call.
    Known(Option<i64>, Option<i64>),
    /// The trace's span, to read from its events (the extra input) and remember.
    Scan(Weak<dyn TableProvider>),
}

/// Spans of the traces read so far, by their events table: a trace's tables never change, so
/// its events are scanned for their first and last time once, not by every lod call.
static TRACE_SPANS: Mutex<Vec<(Weak<dyn TableProvider>, TimeSpan)>> = Mutex::new(Vec::new());

/// First and last time, when there are any.
type TimeSpan = (Option<i64>, Option<i64>);

/// The span of the trace `relation` comes from (first and last event), when t0 or t1 is not
/// given, so the three lod functions share one slot grid. A relation that comes from no single
/// trace uses its own rows' span. Returns the span and the extra input to read, if any.
fn span_input(
    session: &dyn datafusion::catalog::Session,
    function: &str,
    relation: &Relation,
    p: &LodParams,
) -> Result<(Span, Option<crate::common::Projected>)> {
    if p.t0.is_some() && p.t1.is_some() {
        return Ok((Span::Own, None));
    }
    let Some(schema) = crate::common::trace_schema(session, relation) else { return Ok((Span::Own, None)) };
    let events = crate::common::trace_table(session, function, &schema, "events")?;
    let key = Arc::downgrade(&events.provider);
    let mut known = TRACE_SPANS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    known.retain(|(k, _)| k.strong_count() > 0);
    if let Some((_, (lo, hi))) = known.iter().find(|(k, _)| Weak::ptr_eq(k, &key)) {
        return Ok((Span::Known(*lo, *hi), None));
    }
    events.columns(function, &["ts"])?;
    // The first and last event time, aggregated as the events stream by: one row is read.
    let bounds =
        crate::common::bounds_of(&events, datafusion::logical_expr::col("ts"), datafusion::logical_expr::col("ts"))?;
    Ok((Span::Scan(key), Some(bounds)))
}

/// The span to cut: the trace's (known, or read now and remembered) or else the data's own.
fn chosen_span(
    span: &Span,
    span_read: Option<&Vec<RecordBatch>>,
    own: (Option<i64>, Option<i64>),
) -> Result<(Option<i64>, Option<i64>)> {
    match (span, span_read) {
        (Span::Known(lo, hi), _) => Ok((*lo, *hi)),
        (Span::Scan(key), Some(batches)) => {
            let found = crate::common::bounds_read(batches)?;
            TRACE_SPANS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((key.clone(), found));
            Ok(found)
        }
        _ => Ok(own),
    }
}

/// The slot grid of a call: [t0, t1) in slots of `res`.
#[derive(Debug, Clone, Copy)]
struct Grid {
    t0: i64,
    t1: i64,
    res: i64,
}

impl Grid {
    fn slot(&self, t: i64) -> i64 {
        (t - self.t0).div_euclid(self.res)
    }
    fn start(&self, k: i64) -> i64 {
        self.t0 + k * self.res
    }
}

/// The largest time or resolution (ns, about 73 years) the slot grid accepts.
const MAX_TIME: i64 = 1 << 61;

/// Arguments shared by the lod table functions.
#[derive(Debug, Clone, Copy)]
struct LodParams {
    res: Option<i64>,
    t0: Option<i64>,
    t1: Option<i64>,
    pixels: Option<i64>,
    /// lod_calls: one representative per rank (all its threads) instead of per thread.
    per_rank: bool,
}

impl LodParams {
    fn parse(a: &Args<'_>) -> Result<Self> {
        let per_rank = a.declares("per") && a.text("per")? == "rank";
        let p = LodParams {
            res: a.opt_ns("resolution_ns")?,
            t0: a.opt_ns("t0")?,
            t1: a.opt_ns("t1")?,
            pixels: a.opt_int("pixels")?,
            per_rank,
        };
        // Slot arithmetic (t - t0, t + resolution) stays within 64 bits.
        for (name, v) in [("resolution_ns", p.res), ("t0", p.t0), ("t1", p.t1)] {
            if let Some(v) = v
                && !(-MAX_TIME..=MAX_TIME).contains(&v)
            {
                return plan_err!("{}: {name} must be within ±{MAX_TIME} ns (73 years), got {v}", a.function);
            }
        }
        if p.res.is_none() && p.pixels.is_none() {
            return plan_err!("{}: give resolution_ns, or pixels => N to derive it from the time range", a.function);
        }
        if let (Some(t0), Some(t1)) = (p.t0, p.t1)
            && t1 <= t0
        {
            return plan_err!("{}: t1 must be after t0, got t0 = {t0}, t1 = {t1}", a.function);
        }
        Ok(p)
    }

    /// The grid, filling t0/t1 from the data's span [lo, hi].
    fn grid(&self, function: &str, lo: Option<i64>, hi: Option<i64>) -> Result<Option<Grid>> {
        let t0 = self.t0.or(lo);
        let t1 = self.t1.or(hi.map(|h| h.saturating_add(1)));
        let (Some(t0), Some(t1)) = (t0, t1) else { return Ok(None) };
        if t1 <= t0 {
            return Ok(None);
        }
        let res = match (self.res, self.pixels) {
            (Some(r), _) => r,
            (None, Some(px)) => resolution(t0, t1, px).unwrap_or(1),
            (None, None) => return exec_err!("{function}: no resolution"),
        };
        Ok(Some(Grid { t0, t1, res }))
    }
}

fn schema(fields: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(fields))
}

// ---------------------------------------------------------------------------------------------
// lod_calls

/// Exclusive-time segments (start, end, region id) of one thread's calls: the innermost open
/// call owns the time.
fn segments(calls: &mut [(i64, i64, u32)]) -> Vec<(i64, i64, u32)> {
    calls.sort_unstable_by_key(|c| (c.0, std::cmp::Reverse(c.1), c.2));
    let mut out = Vec::with_capacity(calls.len() * 2);
    let mut stack: Vec<(i64, u32)> = Vec::new();
    let mut t = i64::MIN;
    let flush_until = |limit: i64, stack: &mut Vec<(i64, u32)>, t: &mut i64, out: &mut Vec<(i64, i64, u32)>| {
        while let Some(&(end, region)) = stack.last() {
            if end > limit {
                break;
            }
            if end > *t {
                out.push((*t, end, region));
                *t = end;
            }
            stack.pop();
        }
    };
    for &(start, end, region) in calls.iter() {
        flush_until(start, &mut stack, &mut t, &mut out);
        if let Some(&(_, top)) = stack.last()
            && start > t
        {
            out.push((t, start, top));
        }
        t = t.max(start);
        let end = stack.last().map_or(end, |&(parent_end, _)| end.min(parent_end));
        stack.push((end, region));
    }
    flush_until(i64::MAX, &mut stack, &mut t, &mut out);
    out.retain(|s| s.1 > s.0);
    out
}

/// One output row of lod_calls.
type CallRow = (i64, i64, i64, i64, u32, i64);
/// Exclusive-time segments (start, end, region id) of one thread.
type Segments = Vec<(i64, i64, u32)>;

/// Exclusive time per slot and region.
type SlotTimes = BTreeMap<i64, Vec<(u32, i64)>>;

/// Add the time of [a, b) in `region` to the slots it covers.
fn add_to_slots(acc: &mut SlotTimes, a: i64, b: i64, region: u32, g: Grid) {
    let mut x = a.max(g.t0);
    let b = b.min(g.t1);
    while x < b {
        let k = g.slot(x);
        let end = g.start(k + 1).min(b);
        let v = acc.entry(k).or_default();
        match v.iter_mut().find(|e| e.0 == region) {
            Some(e) => e.1 += end - x,
            None => v.push((region, end - x)),
        }
        x = end;
    }
}

/// One row per slot of `acc`: its representative region and that region's time.
fn representatives(acc: SlotTimes, rank: i64, thread: i64, g: Grid, names: &[String]) -> impl Iterator<Item = CallRow> {
    acc.into_iter().filter_map(move |(k, v)| {
        let (region, t) = representative(&v, names)?;
        Some((g.start(k), g.start(k + 1).min(g.t1), rank, thread, region, t))
    })
}

/// The region with the most time in a slot; ties go to the name that sorts first.
fn representative(v: &[(u32, i64)], names: &[String]) -> Option<(u32, i64)> {
    v.iter().max_by(|p, q| p.1.cmp(&q.1).then_with(|| names[q.0 as usize].cmp(&names[p.0 as usize]))).copied()
}

/// ITA's per-process representative: per slot, the region where the rank's threads together
/// spent the most exclusive time (thread reported as 0 and shown as NULL).
fn rank_rows(rank: i64, threads: &[Segments], g: Grid, names: &[String]) -> Vec<CallRow> {
    let mut acc: SlotTimes = BTreeMap::new();
    for segs in threads {
        for &(a, b, region) in segs {
            add_to_slots(&mut acc, a, b, region, g);
        }
    }
    representatives(acc, rank, 0, g, names).collect()
}

/// The representative rows of one thread.
fn call_rows(rank: i64, thread: i64, segs: &[(i64, i64, u32)], g: Grid, names: &[String]) -> Vec<CallRow> {
    let mut out = Vec::new();
    let mut acc: SlotTimes = BTreeMap::new();
    for &(a, b, region) in segs {
        let (a, b) = (a.max(g.t0), b.min(g.t1));
        if a >= b {
            continue;
        }
        let first_full = g.slot(a + g.res - 1);
        let last_full = g.slot(b) - 1;
        if last_full > first_full {
            // Covers two or more whole slots: one merged row, partial slots on both sides.
            let (s, e) = (g.start(first_full), g.start(last_full + 1).min(g.t1));
            out.push((s, e, rank, thread, region, e - s));
            add_to_slots(&mut acc, a, s, region, g);
            add_to_slots(&mut acc, e, b, region, g);
        } else {
            add_to_slots(&mut acc, a, b, region, g);
        }
    }
    out.extend(representatives(acc, rank, thread, g, names));
    out.sort_unstable_by_key(|r| r.0);
    out
}

/// `lod_calls(resolution_ns [, t0, t1] [, rel], pixels)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LodCalls;

impl TableFunctionImpl for LodCalls {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&LOD_CALLS, args.exprs())?;
        let p = LodParams::parse(&a)?;
        let relation: Relation = a.relation(args.session(), "rel")?;
        let idx = relation.columns("lod_calls", &["rank", "thread", "region", "start_ts", "end_ts"])?;
        let (span, span_read) = span_input(args.session(), "lod_calls", &relation, &p)?;
        let out = schema(vec![
            Field::new("slot_start", DataType::Int64, false),
            Field::new("slot_end", DataType::Int64, false),
            Field::new("rank", DataType::Int64, false),
            Field::new("thread", DataType::Int64, true),
            Field::new("region", DataType::Utf8, false),
            Field::new("time_in_slot_ns", DataType::Int64, false),
            Field::new("share", DataType::Float64, false),
        ]);
        let make = CallSlots::maker(p, out.clone());
        let mut inputs = vec![(relation, Some(idx))];
        inputs.extend(span_read);
        // With the span known before the calls are read (given, or the trace's), they stream a
        // chunk of whole ranks at a time; a relation cut on its own span is read whole first.
        if matches!(span, Span::Own) && (p.t0.is_none() || p.t1.is_none()) {
            let compute: ComputeMany = Arc::new(move |inputs| {
                let (lo, hi) = own_call_span(&inputs[0])?;
                let make = make.clone();
                let prepare: Prepare = Arc::new(move |_| make(lo, hi));
                crate::by_rank::whole(&prepare, &inputs[..1])
            });
            return Ok(Arc::new(Derived::from_many(out, inputs, compute)));
        }
        let prepare: Prepare = Arc::new(move |held| {
            let (lo, hi) = chosen_span(&span, held.first(), (None, None))?;
            make(lo, hi)
        });
        // Each rank's slots are its own: over a cluster's parts of whole ranks, the parts' rows
        // together are the answer.
        Ok(Arc::new(Derived::by_rank(out, inputs, 0, prepare).spreading(crate::common::Spread::Rows)))
    }
}

/// Whether a call row (rank, thread, region, start_ts, end_ts) counts: none of them NULL.
fn call_counts(batch: &RecordBatch, i: usize) -> bool {
    (0..5).all(|c| batch.column(c).is_valid(i))
}

/// The first start and last end of the calls that count (a call ending before it starts
/// ends at its start).
fn own_call_span(batches: &[RecordBatch]) -> Result<TimeSpan> {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for b in batches {
        let one = std::slice::from_ref(b);
        let (start, end) = (int64_column(one, 3)?, int64_column(one, 4)?);
        for i in (0..b.num_rows()).filter(|&i| call_counts(b, i)) {
            let (a, e) = (start.value(i), end.value(i).max(start.value(i)));
            lo = Some(lo.map_or(a, |l| l.min(a)));
            hi = Some(hi.map_or(e, |h| h.max(e)));
        }
    }
    Ok((lo, hi))
}

/// lod_calls' representatives, a chunk of whole ranks at a time (crate::by_rank): each
/// thread's (or rank's) calls are all in the chunk.
struct CallSlots {
    /// None: the span is empty, and so is the answer.
    grid: Option<Grid>,
    per_rank: bool,
    /// Region names, interned over the chunks.
    names: crate::profile::Names,
    schema: SchemaRef,
}

/// Makes lod_calls' mapper for the span (lo, hi).
type MakeCallSlots = Arc<dyn Fn(Option<i64>, Option<i64>) -> Result<Box<dyn Mapper>> + Send + Sync>;

impl CallSlots {
    fn maker(p: LodParams, schema: SchemaRef) -> MakeCallSlots {
        Arc::new(move |lo, hi| {
            let grid = p.grid("lod_calls", lo, hi)?;
            let slots = CallSlots {
                grid,
                per_rank: p.per_rank,
                names: crate::profile::Names::default(),
                schema: schema.clone(),
            };
            Ok(Box::new(slots) as Box<dyn Mapper>)
        })
    }
}

impl Mapper for CallSlots {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let Some(g) = self.grid else { return Ok(RecordBatch::new_empty(self.schema.clone())) };
        let (rank, thread) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        let region = text_column(batches, 2)?;
        let (start, end) = (int64_column(batches, 3)?, int64_column(batches, 4)?);
        let mut by_thread: CallsByThread = BTreeMap::new();
        let counts = |i: usize| {
            rank.is_valid(i) && thread.is_valid(i) && region.is_valid(i) && start.is_valid(i) && end.is_valid(i)
        };
        for i in (0..rank.len()).filter(|&i| counts(i)) {
            let id = self.names.id(region.value(i));
            let (a, b) = (start.value(i), end.value(i).max(start.value(i)));
            by_thread.entry((rank.value(i), thread.value(i))).or_default().push((a, b, id));
        }
        let names = &self.names.names;
        // (row, threads sharing it: 1 per thread, the rank's thread count per rank)
        let rows: Vec<(CallRow, i64)> = if self.per_rank {
            let mut by_rank: BTreeMap<i64, Vec<Segments>> = BTreeMap::new();
            for ((r, _), mut calls) in by_thread {
                by_rank.entry(r).or_default().push(segments(&mut calls));
            }
            by_rank
                .into_par_iter()
                .flat_map_iter(|(r, threads)| {
                    let n = threads.len() as i64;
                    rank_rows(r, &threads, g, names).into_iter().map(move |row| (row, n))
                })
                .collect()
        } else {
            by_thread
                .into_par_iter()
                .flat_map_iter(|((r, t), mut calls)| {
                    call_rows(r, t, &segments(&mut calls), g, names).into_iter().map(|row| (row, 1))
                })
                .collect()
        };
        let per_rank = self.per_rank;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.2))),
            Arc::new(Int64Array::from(rows.iter().map(|r| (!per_rank).then_some(r.0.3)).collect::<Vec<_>>())),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| names[r.0.4 as usize].as_str()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.5))),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|(r, n)| r.5 as f64 / ((r.1 - r.0).max(1) * n) as f64),
            )),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

// ---------------------------------------------------------------------------------------------
// lod_messages

/// Calls of each (rank, thread): (start, end, region id).
type CallsByThread = BTreeMap<(i64, i64), Vec<(i64, i64, u32)>>;
/// Per (comm, instance): first begin, last end, operations, ranks.
type Instances = BTreeMap<(i64, i64), (i64, i64, BTreeSet<String>, BTreeSet<i64>)>;
/// Per (comm, first slot): operations, instances, summed duration, ranks.
type CollectiveGroups = BTreeMap<(i64, i64), (BTreeSet<String>, i64, f64, BTreeSet<i64>)>;

/// A (src, dst, send slot start, receive slot start) group of lod_messages.
type MessageKey = (i64, i64, i64, i64);

/// What lod_messages sums over the messages of a group.
#[derive(Debug, Clone, Copy, Default)]
struct MessageSums {
    messages: i64,
    bytes: f64,
    duration: f64,
    durations: i64,
    latency: f64,
    latencies: i64,
    first_send: Option<i64>,
    last_recv: Option<i64>,
}

const NO_VALUE: i64 = i64::MIN;

/// The columns of one input batch that lod_messages reads.
struct MessageColumns {
    src: Int64Array,
    dst: Int64Array,
    bytes: Int64Array,
    send: Int64Array,
    recv: Int64Array,
    duration: Int64Array,
    latency: Option<Float64Array>,
}

impl MessageColumns {
    fn new(b: &RecordBatch, has_latency: bool) -> Result<Self> {
        let one = |i: usize| int64_column(std::slice::from_ref(b), i);
        let latency = if has_latency {
            column(std::slice::from_ref(b), 6, &DataType::Float64)?.as_any().downcast_ref::<Float64Array>().cloned()
        } else {
            None
        };
        Ok(MessageColumns {
            src: one(0)?,
            dst: one(1)?,
            bytes: one(2)?,
            send: one(3)?,
            recv: one(4)?,
            duration: one(5)?,
            latency,
        })
    }

    #[inline]
    fn get(a: &Int64Array, i: usize) -> Option<i64> {
        (!a.is_null(i)).then(|| a.value(i))
    }

    /// The time a message counts at: its send, or its receive when the send is missing.
    #[inline]
    fn anchor(&self, i: usize) -> Option<i64> {
        Self::get(&self.send, i).or_else(|| Self::get(&self.recv, i))
    }

    fn span(&self) -> Option<(i64, i64)> {
        let mut it = (0..self.src.len()).filter_map(|i| self.anchor(i));
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t))))
    }

    /// Add the batch's messages anchored in [t0, t1) to their groups' sums, in row order.
    fn fold(&self, g: Grid, groups: &mut FastMap<MessageKey, MessageSums>) {
        for i in 0..self.src.len() {
            let (Some(a), Some(sr), Some(ds)) = (self.anchor(i), Self::get(&self.src, i), Self::get(&self.dst, i))
            else {
                continue;
            };
            if a < g.t0 || a >= g.t1 {
                continue;
            }
            let (st, rt) = (Self::get(&self.send, i), Self::get(&self.recv, i));
            let key =
                (sr, ds, st.map_or(NO_VALUE, |t| g.start(g.slot(t))), rt.map_or(NO_VALUE, |t| g.start(g.slot(t))));
            let sums = groups.entry(key).or_default();
            sums.messages += 1;
            sums.bytes += Self::get(&self.bytes, i).unwrap_or(0) as f64;
            if let Some(d) = Self::get(&self.duration, i) {
                sums.duration += d as f64;
                sums.durations += 1;
            }
            if let Some(l) = self.latency.as_ref().filter(|l| l.is_valid(i)).map(|l| l.value(i))
                && !l.is_nan()
            {
                sums.latency += l;
                sums.latencies += 1;
            }
            if let Some(t) = st {
                sums.first_send = Some(sums.first_send.map_or(t, |f| f.min(t)));
            }
            if let Some(t) = rt {
                sums.last_recv = Some(sums.last_recv.map_or(t, |l| l.max(t)));
            }
        }
    }
}

/// The output columns of lod_messages, filled group by group straight into Arrow builders.
struct MessageOut {
    src: Int64Builder,
    dst: Int64Builder,
    send_slot: Int64Builder,
    recv_slot: Int64Builder,
    messages: Int64Builder,
    bytes_avg: Float64Builder,
    duration_avg: Float64Builder,
    latency_avg: Float64Builder,
    first_send: Int64Builder,
    last_recv: Int64Builder,
}

impl MessageOut {
    fn with_capacity(n: usize) -> Self {
        MessageOut {
            src: Int64Builder::with_capacity(n),
            dst: Int64Builder::with_capacity(n),
            send_slot: Int64Builder::with_capacity(n),
            recv_slot: Int64Builder::with_capacity(n),
            messages: Int64Builder::with_capacity(n),
            bytes_avg: Float64Builder::with_capacity(n),
            duration_avg: Float64Builder::with_capacity(n),
            latency_avg: Float64Builder::with_capacity(n),
            first_send: Int64Builder::with_capacity(n),
            last_recv: Int64Builder::with_capacity(n),
        }
    }

    fn push(&mut self, k: &MessageKey, g: &MessageSums) {
        let n = g.messages;
        let slot = |v: i64| (v != NO_VALUE).then_some(v);
        self.src.append_value(k.0);
        self.dst.append_value(k.1);
        self.send_slot.append_option(slot(k.2));
        self.recv_slot.append_option(slot(k.3));
        self.messages.append_value(n);
        self.bytes_avg.append_value(g.bytes / n as f64);
        self.duration_avg.append_option((g.durations > 0).then(|| g.duration / g.durations as f64));
        self.latency_avg.append_option((g.latencies > 0).then(|| g.latency / g.latencies as f64));
        self.first_send.append_option(g.first_send);
        self.last_recv.append_option(g.last_recv);
    }

    fn into_batch(mut self, schema: SchemaRef) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.src.finish()),
            Arc::new(self.dst.finish()),
            Arc::new(self.send_slot.finish()),
            Arc::new(self.recv_slot.finish()),
            Arc::new(self.messages.finish()),
            Arc::new(self.bytes_avg.finish()),
            Arc::new(self.duration_avg.finish()),
            Arc::new(self.latency_avg.finish()),
            Arc::new(self.first_send.finish()),
            Arc::new(self.last_recv.finish()),
        ];
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

/// `lod_messages(resolution_ns [, t0, t1] [, rel], pixels)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LodMessages;

impl TableFunctionImpl for LodMessages {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&LOD_MESSAGES, args.exprs())?;
        let p = LodParams::parse(&a)?;
        let relation = a.relation(args.session(), "rel")?;
        let mut idx = relation.columns("lod_messages", &["src", "dst", "bytes", "send_ts", "recv_ts", "duration"])?;
        let latency = relation.schema().index_of("latency").ok();
        if let Some(l) = latency {
            idx.push(l);
        }
        let out = schema(vec![
            Field::new("src", DataType::Int64, false),
            Field::new("dst", DataType::Int64, false),
            Field::new("send_slot", DataType::Int64, true),
            Field::new("recv_slot", DataType::Int64, true),
            Field::new("messages", DataType::Int64, false),
            Field::new("bytes_avg", DataType::Float64, false),
            Field::new("duration_avg", DataType::Float64, true),
            Field::new("latency_avg", DataType::Float64, true),
            Field::new("first_send_ts", DataType::Int64, true),
            Field::new("last_recv_ts", DataType::Int64, true),
        ]);
        let has_latency = latency.is_some();
        let (span, span_read) = span_input(args.session(), "lod_messages", &relation, &p)?;
        let mut inputs = vec![(relation, Some(idx))];
        inputs.extend(span_read);
        // With the span known before the messages are read (given, or the trace's), they
        // stream through the sums; a relation cut on its own span is read whole first.
        if matches!(span, Span::Own) && (p.t0.is_none() || p.t1.is_none()) {
            let s = out.clone();
            let compute: ComputeMany = Arc::new(move |inputs| {
                let batches = &inputs[0];
                // Each batch is read on its own (no concatenated copies of the input).
                let cols: Vec<MessageColumns> =
                    batches.iter().map(|b| MessageColumns::new(b, has_latency)).collect::<Result<_>>()?;
                let spans: Vec<(i64, i64)> = cols.par_iter().filter_map(MessageColumns::span).collect();
                let own = (spans.iter().map(|s| s.0).min(), spans.iter().map(|s| s.1).max());
                let mut fold = MessageFold {
                    grid: p.grid("lod_messages", own.0, own.1)?,
                    has_latency,
                    groups: FastMap::default(),
                    schema: s.clone(),
                    keys: Vec::new().into_iter(),
                };
                for b in batches {
                    fold.map(b)?;
                }
                let mut out = fold.finish()?;
                while let Some(b) = fold.more()? {
                    out.push(b);
                }
                Ok(out)
            });
            return Ok(Arc::new(Derived::from_many(out, inputs, compute)));
        }
        let s = out.clone();
        let prepare: Prepare = Arc::new(move |held| {
            let (lo, hi) = chosen_span(&span, held.first(), (None, None))?;
            Ok(Box::new(MessageFold {
                grid: p.grid("lod_messages", lo, hi)?,
                has_latency,
                groups: FastMap::default(),
                schema: s.clone(),
                keys: Vec::new().into_iter(),
            }) as Box<dyn Mapper>)
        });
        Ok(Arc::new(Derived::streamed(out, inputs, prepare)))
    }
}

/// lod_messages' sums, message batch by message batch; the groups, in key order, at the end.
struct MessageFold {
    /// None: the span is empty, and so is the answer.
    grid: Option<Grid>,
    has_latency: bool,
    groups: FastMap<MessageKey, MessageSums>,
    schema: SchemaRef,
    /// After `finish`: the keys of the groups still to answer, in order.
    keys: std::vec::IntoIter<MessageKey>,
}

impl Mapper for MessageFold {
    fn held_bytes(&self) -> usize {
        self.groups.capacity() * (std::mem::size_of::<MessageKey>() + std::mem::size_of::<MessageSums>() + 8)
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if let Some(g) = self.grid {
            MessageColumns::new(batch, self.has_latency)?.fold(g, &mut self.groups);
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    /// The groups' keys in order; the rows follow batch by batch (`more`), each group looked
    /// up as its row is made, so that no sorted copy of the groups is held beside them.
    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut keys: Vec<MessageKey> = self.groups.keys().copied().collect();
        keys.par_sort_unstable();
        self.keys = keys.into_iter();
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let n = self.keys.len().min(ANSWER_ROWS);
        if n == 0 {
            self.groups = FastMap::default();
            return Ok(None);
        }
        let mut o = MessageOut::with_capacity(n);
        for k in self.keys.by_ref().take(n) {
            o.push(&k, &self.groups[&k]);
        }
        Ok(Some(o.into_batch(self.schema.clone())?))
    }
}

/// Rows of lod_messages' answer per batch.
const ANSWER_ROWS: usize = 1 << 16;

// ---------------------------------------------------------------------------------------------
// lod_collectives

/// `lod_collectives(resolution_ns [, t0, t1] [, rel], pixels)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LodCollectives;

impl TableFunctionImpl for LodCollectives {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&LOD_COLLECTIVES, args.exprs())?;
        let p = LodParams::parse(&a)?;
        let relation = a.relation(args.session(), "rel")?;
        let idx = relation.columns("lod_collectives", &["comm", "instance", "op", "rank", "begin_ts", "end_ts"])?;
        let out = schema(vec![
            Field::new("comm", DataType::Int64, false),
            Field::new("first_slot", DataType::Int64, false),
            Field::new("op", DataType::Utf8, false),
            Field::new("instances", DataType::Int64, false),
            Field::new("duration_avg", DataType::Float64, false),
            Field::new("participants", DataType::Int64, false),
        ]);
        let s = out.clone();
        let (span, span_read) = span_input(args.session(), "lod_collectives", &relation, &p)?;
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
                let x =
                    inst.entry((comm.value(i), instance.value(i))).or_insert((b, e, BTreeSet::new(), BTreeSet::new()));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_are_1_2_5_steps() {
        assert_eq!(resolution(0, 1_000_000, 1920), Some(1000));
        assert_eq!(resolution(0, 1_000, 1000), Some(1));
        assert_eq!(resolution(0, 3_000, 1000), Some(5));
        assert_eq!(resolution(0, 1_500_000_000, 1920), Some(1_000_000));
        assert_eq!(resolution(5, 5, 10), None);
        assert_eq!(resolution(0, 10, 0), None);
    }

    #[test]
    fn nested_calls_give_exclusive_segments() {
        // main [0,100) with f [10,40) and g [50,60) nested; f has h [20,30).
        let mut calls = vec![(0, 100, 0), (10, 40, 1), (20, 30, 2), (50, 60, 3)];
        let segs = segments(&mut calls);
        assert_eq!(
            segs,
            vec![(0, 10, 0), (10, 20, 1), (20, 30, 2), (30, 40, 1), (40, 50, 0), (50, 60, 3), (60, 100, 0)]
        );
    }

    #[test]
    fn long_calls_merge_slots_and_ties_are_deterministic() {
        let names: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let g = Grid { t0: 0, t1: 100, res: 10 };
        // a covers [0, 35): slots 0..2 whole (merged), 3 partly; b covers [35, 40), tie in slot 3.
        let rows = call_rows(0, 0, &[(0, 35, 0), (35, 40, 1)], g, &names);
        assert_eq!(rows, vec![(0, 30, 0, 0, 0, 30), (30, 40, 0, 0, 0, 5)]);
        let rows = call_rows(0, 0, &[(30, 35, 1), (35, 40, 0)], g, &names);
        assert_eq!(rows, vec![(30, 40, 0, 0, 0, 5)]);
    }
}
