//! `lod_messages`: one row per (src, dst, send slot, receive slot) with averages, summed as
//! the messages stream by whenever the slot grid is known first; the counts add up exactly to
//! the messages sent in [t0, t1).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Float64Builder, Int64Array, Int64Builder, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use commdb_catalog::fast_hash::FastMap;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use rayon::prelude::*;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{column, int64_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::ComputeMany;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

use super::grid::*;
use super::{PIXELS, RESOLUTION, T0, T1};

pub const LOD_MESSAGES: Function = Function {
    name: "lod_messages",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("messages"), "the messages to slot"),
        RESOLUTION,
        T0,
        T1,
        PIXELS,
    ],
    output: Output::Columns(&[
        col("src", int64, "").never_null(),
        col("dst", int64, "").never_null(),
        col("send_slot", int64, "start of the slot of the sends"),
        col("recv_slot", int64, "start of the slot of the receives"),
        col("messages", int64, "messages merged in the row").never_null(),
        col("bytes_avg", float64, "their mean size").never_null(),
        col("duration_avg", float64, "their mean transmission time"),
        col("latency_avg", float64, "their mean latency L, when the relation has a latency column"),
        col("first_send_ts", int64, "the earliest send"),
        col("last_recv_ts", int64, "the latest receive"),
    ]),
    description: "messages merged per (src, dst, send slot, receive slot), counts exact",
    make: Make::Table(lod_messages),
};

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

arguments! {
    struct LodMessagesArgs(LOD_MESSAGES) {
        rel: Relation,
        ..grid: LodParams,
    }
}

fn lod_messages(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let LodMessagesArgs { rel: relation, grid: p } = LodMessagesArgs::read(a)?;
    let mut idx = relation.columns("lod_messages", &["src", "dst", "bytes", "send_ts", "recv_ts", "duration"])?;
    let latency = relation.schema().index_of("latency").ok();
    if let Some(l) = latency {
        idx.push(l);
    }
    let out = a.schema();
    let has_latency = latency.is_some();
    let (span, span_read) = span_input(a.session, "lod_messages", &relation, &p)?;
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
