//! `lod_messages`: one row per (src, dst, send slot, receive slot) with averages, summed as
//! the messages stream by whenever the slot grid is known first; the counts add up exactly to
//! the messages sent in [t0, t1). The groups are kept in a map per (src, dst) pair, each grown
//! on its own and let go once its rows are made, so a group costs its slots and sums (80
//! bytes) and no map of every group is ever copied as it grows.

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

/// A (src, dst) pair of lod_messages.
type Pair = (i64, i64);

/// A group's (send slot start, receive slot start) within its pair, `NO_VALUE` for a side
/// without its time.
type Slots = (i64, i64);

/// What lod_messages sums over the messages of a group. Every message of a group has a send
/// time or none has (the send slot is part of the group's key), and the same for the receive,
/// so `first_send` and `last_recv` hold a time exactly when the key's slot does.
#[derive(Debug, Clone, Copy)]
struct MessageSums {
    messages: i64,
    bytes: f64,
    duration: f64,
    durations: i64,
    latency: f64,
    latencies: i64,
    first_send: i64,
    last_recv: i64,
}

impl Default for MessageSums {
    fn default() -> Self {
        MessageSums {
            messages: 0,
            bytes: 0.0,
            duration: 0.0,
            durations: 0,
            latency: 0.0,
            latencies: 0,
            first_send: i64::MAX,
            last_recv: i64::MIN,
        }
    }
}

/// Bytes a map holds per group of its capacity: the group, its control byte, and the eighth of
/// the table a map keeps free.
const GROUP_BYTES: usize = (std::mem::size_of::<(Slots, MessageSums)>() + 1) * 8 / 7;

/// Bytes the map of pairs holds per pair of its capacity, the pair's (empty) groups included.
const PAIR_BYTES: usize = (std::mem::size_of::<(Pair, PairGroups)>() + 1) * 8 / 7;

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
    fn fold(&self, g: Grid, groups: &mut Groups) {
        for i in 0..self.src.len() {
            let (Some(a), Some(sr), Some(ds)) = (self.anchor(i), Self::get(&self.src, i), Self::get(&self.dst, i))
            else {
                continue;
            };
            if a < g.t0 || a >= g.t1 {
                continue;
            }
            let (st, rt) = (Self::get(&self.send, i), Self::get(&self.recv, i));
            let slots = (st.map_or(NO_VALUE, |t| g.start(g.slot(t))), rt.map_or(NO_VALUE, |t| g.start(g.slot(t))));
            let sums = groups.sums((sr, ds), slots);
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
                sums.first_send = sums.first_send.min(t);
            }
            if let Some(t) = rt {
                sums.last_recv = sums.last_recv.max(t);
            }
        }
    }
}

/// lod_messages' groups, kept per (src, dst) pair, each pair's on its own: one map of every
/// group held each group with its pair's key and, while it grew, its old table beside the new
/// one (1.8 GB at 5 M groups, the 200 M-event store at 1,920 pixels).
#[derive(Default)]
struct Groups {
    pairs: FastMap<Pair, PairGroups>,
    /// Bytes of the pairs' groups as allocated (their capacities).
    group_bytes: usize,
}

impl Groups {
    /// The sums of the group (`pair`, `slots`), a new one if there was none.
    fn sums(&mut self, pair: Pair, slots: Slots) -> &mut MessageSums {
        self.pairs.entry(pair).or_default().sums(slots, &mut self.group_bytes)
    }

    fn held_bytes(&self) -> usize {
        self.group_bytes + self.pairs.capacity() * PAIR_BYTES
    }
}

/// A pair's groups: in a list while they are few (a pair that sent a message or two: an
/// all-to-all's pairs take no map each), in a map past `FEW`.
enum PairGroups {
    Few(Vec<(Slots, MessageSums)>),
    Many(FastMap<Slots, MessageSums>),
}

/// Groups a pair keeps in a list, searched one by one.
const FEW: usize = 8;

impl Default for PairGroups {
    fn default() -> Self {
        PairGroups::Few(Vec::new())
    }
}

impl PairGroups {
    /// The sums of the group at `slots`, a new one if there was none; `bytes` follows what
    /// the pair's groups take as allocated.
    fn sums(&mut self, slots: Slots, bytes: &mut usize) -> &mut MessageSums {
        if let PairGroups::Few(list) = self
            && list.len() >= FEW
            && !list.iter().any(|g| g.0 == slots)
        {
            let list = std::mem::take(list);
            let mut map = FastMap::with_capacity_and_hasher(2 * FEW, Default::default());
            *bytes -= list.capacity() * std::mem::size_of::<(Slots, MessageSums)>();
            *bytes += map.capacity() * GROUP_BYTES;
            map.extend(list);
            *self = PairGroups::Many(map);
        }
        match self {
            PairGroups::Few(list) => {
                let at = match list.iter().position(|g| g.0 == slots) {
                    Some(at) => at,
                    None => {
                        if list.len() == list.capacity() {
                            let before = list.capacity();
                            list.reserve_exact(before.max(1));
                            *bytes += (list.capacity() - before) * std::mem::size_of::<(Slots, MessageSums)>();
                        }
                        list.push((slots, MessageSums::default()));
                        list.len() - 1
                    }
                };
                &mut list[at].1
            }
            PairGroups::Many(map) => {
                let before = map.capacity();
                if map.len() == before {
                    // Grown here rather than by the insert, so that its bytes are counted.
                    map.reserve(1);
                    *bytes += (map.capacity() - before) * GROUP_BYTES;
                }
                map.entry(slots).or_default()
            }
        }
    }

    /// The groups in order of their slots.
    fn into_sorted(self) -> Vec<(Slots, MessageSums)> {
        let mut groups = match self {
            PairGroups::Few(list) => list,
            PairGroups::Many(map) => map.into_iter().collect(),
        };
        groups.sort_unstable_by_key(|g| g.0);
        groups
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

    fn push(&mut self, pair: Pair, slots: Slots, g: &MessageSums) {
        let n = g.messages;
        let slot = |v: i64| (v != NO_VALUE).then_some(v);
        self.src.append_value(pair.0);
        self.dst.append_value(pair.1);
        self.send_slot.append_option(slot(slots.0));
        self.recv_slot.append_option(slot(slots.1));
        self.messages.append_value(n);
        self.bytes_avg.append_value(g.bytes / n as f64);
        self.duration_avg.append_option((g.durations > 0).then(|| g.duration / g.durations as f64));
        self.latency_avg.append_option((g.latencies > 0).then(|| g.latency / g.latencies as f64));
        self.first_send.append_option(slot(slots.0).map(|_| g.first_send));
        self.last_recv.append_option(slot(slots.1).map(|_| g.last_recv));
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
            let mut fold = MessageFold::new(p.grid("lod_messages", own.0, own.1)?, has_latency, s.clone());
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
        Ok(Box::new(MessageFold::new(p.grid("lod_messages", lo, hi)?, has_latency, s.clone())) as Box<dyn Mapper>)
    });
    Ok(Arc::new(Derived::streamed(out, inputs, prepare)))
}

/// lod_messages' sums, message batch by message batch; the groups, in key order, at the end.
struct MessageFold {
    /// None: the span is empty, and so is the answer.
    grid: Option<Grid>,
    has_latency: bool,
    groups: Groups,
    schema: SchemaRef,
    /// After `finish`: the pairs still to answer, in order.
    pairs: std::vec::IntoIter<Pair>,
    /// The pair being answered and its groups still to answer, in order.
    pair: Option<(Pair, std::vec::IntoIter<(Slots, MessageSums)>)>,
    /// Rows per batch of the answer.
    answer_rows: usize,
}

impl MessageFold {
    fn new(grid: Option<Grid>, has_latency: bool, schema: SchemaRef) -> Self {
        MessageFold {
            grid,
            has_latency,
            groups: Groups::default(),
            schema,
            pairs: Vec::new().into_iter(),
            pair: None,
            answer_rows: ANSWER_ROWS,
        }
    }

    /// The next pair's groups in order, its map let go.
    fn next_pair(&mut self) -> Option<(Pair, std::vec::IntoIter<(Slots, MessageSums)>)> {
        let pair = self.pairs.next()?;
        let groups = self.groups.pairs.remove(&pair).unwrap_or_default();
        Some((pair, groups.into_sorted().into_iter()))
    }
}

impl Mapper for MessageFold {
    fn held_bytes(&self) -> usize {
        self.groups.held_bytes()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if let Some(g) = self.grid {
            MessageColumns::new(batch, self.has_latency)?.fold(g, &mut self.groups);
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    /// The pairs in order; the rows follow batch by batch (`more`), a pair's groups put in
    /// order when its rows are made and its map let go then.
    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut pairs: Vec<Pair> = self.groups.pairs.keys().copied().collect();
        pairs.sort_unstable();
        self.pairs = pairs.into_iter();
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let mut o = MessageOut::with_capacity(self.answer_rows);
        let mut rows = 0;
        while rows < self.answer_rows {
            if self.pair.is_none() {
                self.pair = self.next_pair();
            }
            let Some((pair, groups)) = self.pair.as_mut() else { break };
            let pair = *pair;
            for (slots, sums) in groups.by_ref().take(self.answer_rows - rows) {
                o.push(pair, slots, &sums);
                rows += 1;
            }
            if groups.len() == 0 {
                self.pair = None;
            }
        }
        if rows == 0 {
            self.groups = Groups::default();
            return Ok(None);
        }
        Ok(Some(o.into_batch(self.schema.clone())?))
    }
}

/// Rows of lod_messages' answer per batch.
const ANSWER_ROWS: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use arrow::array::{AsArray, Float64Array};
    use arrow::datatypes::{Field, Float64Type, Int64Type, Schema};

    use super::*;

    fn out_schema() -> SchemaRef {
        let cols = [
            ("src", DataType::Int64),
            ("dst", DataType::Int64),
            ("send_slot", DataType::Int64),
            ("recv_slot", DataType::Int64),
            ("messages", DataType::Int64),
            ("bytes_avg", DataType::Float64),
            ("duration_avg", DataType::Float64),
            ("latency_avg", DataType::Float64),
            ("first_send_ts", DataType::Int64),
            ("last_recv_ts", DataType::Int64),
        ];
        Arc::new(Schema::new(cols.into_iter().map(|(n, t)| Field::new(n, t, true)).collect::<Vec<_>>()))
    }

    /// Messages of the pairs among ranks `first` to `first + 5`, some without a send or a
    /// receive time, a duration or a latency.
    fn messages(n: usize, seed: u64, first: i64) -> RecordBatch {
        let mut x = seed;
        let mut next = move |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let (mut src, mut dst, mut bytes, mut send, mut recv, mut dur, mut lat) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            let s = next(5) as i64;
            src.push(Some(first + s));
            dst.push(Some(first + (s + 1 + next(3) as i64) % 6));
            bytes.push((next(10) > 0).then(|| next(5000) as i64));
            let t = next(1000) as i64;
            let no_send = next(10) == 0;
            send.push((!no_send).then_some(t));
            recv.push((no_send || next(10) > 0).then(|| t + next(60) as i64));
            dur.push((next(4) > 0).then(|| next(50) as i64));
            lat.push((next(4) > 0).then(|| next(70) as f64 / 3.0));
        }
        let schema = Schema::new(
            ["src", "dst", "bytes", "send_ts", "recv_ts", "duration"]
                .iter()
                .map(|n| Field::new(*n, DataType::Int64, true))
                .chain([Field::new("latency", DataType::Float64, true)])
                .collect::<Vec<_>>(),
        );
        let int = |v: Vec<Option<i64>>| Arc::new(Int64Array::from(v)) as ArrayRef;
        RecordBatch::try_new(
            Arc::new(schema),
            vec![int(src), int(dst), int(bytes), int(send), int(recv), int(dur), Arc::new(Float64Array::from(lat))],
        )
        .unwrap()
    }

    type Row = (i64, i64, Option<i64>, Option<i64>, i64, f64, Option<f64>, Option<f64>, Option<i64>, Option<i64>);

    /// A group's full key: src, dst, send slot, receive slot.
    type Key = (i64, i64, Option<i64>, Option<i64>);

    /// The groups summed one message at a time in a sorted map of every group's full key.
    fn by_hand(batches: &[RecordBatch], g: Grid) -> Vec<Row> {
        let mut groups: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
        let mut rows = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            let c = MessageColumns::new(batch, true).unwrap();
            for i in 0..batch.num_rows() {
                let a = c.anchor(i).unwrap();
                if a < g.t0 || a >= g.t1 {
                    continue;
                }
                let (st, rt) = (MessageColumns::get(&c.send, i), MessageColumns::get(&c.recv, i));
                let key =
                    (c.src.value(i), c.dst.value(i), st.map(|t| g.start(g.slot(t))), rt.map(|t| g.start(g.slot(t))));
                groups.entry(key).or_default().push(rows.len());
                rows.push((b, i));
            }
        }
        let mut out = Vec::new();
        for (k, members) in groups {
            let at = |m: &usize| {
                let (b, i) = rows[*m];
                (MessageColumns::new(&batches[b], true).unwrap(), i)
            };
            let n = members.len() as i64;
            let (mut bytes, mut dur, mut durs, mut lat, mut lats) = (0.0, 0.0, 0, 0.0, 0);
            let (mut first, mut last) = (None::<i64>, None::<i64>);
            for m in &members {
                let (c, i) = at(m);
                bytes += MessageColumns::get(&c.bytes, i).unwrap_or(0) as f64;
                if let Some(d) = MessageColumns::get(&c.duration, i) {
                    dur += d as f64;
                    durs += 1;
                }
                let l = c.latency.as_ref().unwrap();
                if l.is_valid(i) {
                    lat += l.value(i);
                    lats += 1;
                }
                if let Some(t) = MessageColumns::get(&c.send, i) {
                    first = Some(first.map_or(t, |f| f.min(t)));
                }
                if let Some(t) = MessageColumns::get(&c.recv, i) {
                    last = Some(last.map_or(t, |l| l.max(t)));
                }
            }
            out.push((
                k.0,
                k.1,
                k.2,
                k.3,
                n,
                bytes / n as f64,
                (durs > 0).then(|| dur / durs as f64),
                (lats > 0).then(|| lat / lats as f64),
                first,
                last,
            ));
        }
        out
    }

    fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
        let mut rows = Vec::new();
        for b in batches {
            let i64s = |c: usize| b.column(c).as_primitive::<Int64Type>().clone();
            let f64s = |c: usize| b.column(c).as_primitive::<Float64Type>().clone();
            let opt_i = |a: &Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
            let opt_f = |a: &Float64Array, i: usize| a.is_valid(i).then(|| a.value(i));
            let (src, dst, ss, rs, n, by, du, la, fs, lr) =
                (i64s(0), i64s(1), i64s(2), i64s(3), i64s(4), f64s(5), f64s(6), f64s(7), i64s(8), i64s(9));
            for i in 0..b.num_rows() {
                rows.push((
                    src.value(i),
                    dst.value(i),
                    opt_i(&ss, i),
                    opt_i(&rs, i),
                    n.value(i),
                    by.value(i),
                    opt_f(&du, i),
                    opt_f(&la, i),
                    opt_i(&fs, i),
                    opt_i(&lr, i),
                ));
            }
        }
        rows
    }

    #[test]
    fn groups_per_pair_give_every_group_in_key_order() {
        // Pairs of many groups, and (from rank 100 on) pairs of a few, kept in lists.
        let batches = [messages(3000, 1, 0), messages(2500, 2, 0), messages(10, 3, 0), messages(12, 4, 100)];
        let grid = Grid { t0: 40, t1: 900, res: 25 };
        for answer_rows in [1, 7, 64, ANSWER_ROWS] {
            let mut fold = MessageFold::new(Some(grid), true, out_schema());
            fold.answer_rows = answer_rows;
            for b in &batches {
                fold.map(b).unwrap();
            }
            let groups: usize = fold
                .groups
                .pairs
                .values()
                .map(|g| match g {
                    PairGroups::Few(list) => list.len(),
                    PairGroups::Many(map) => map.len(),
                })
                .sum();
            let (mut few, mut many, mut allocated) = (0, 0, 0);
            for g in fold.groups.pairs.values() {
                match g {
                    PairGroups::Few(list) => {
                        few += 1;
                        allocated += list.capacity() * std::mem::size_of::<(Slots, MessageSums)>();
                    }
                    PairGroups::Many(map) => {
                        many += 1;
                        allocated += map.capacity() * GROUP_BYTES;
                    }
                }
            }
            assert!(few > 3 && many > 3, "{few} pairs in lists, {many} in maps");
            assert_eq!(fold.groups.group_bytes, allocated);
            assert!(fold.held_bytes() > allocated);
            assert!(fold.finish().unwrap().is_empty());
            let mut out = Vec::new();
            while let Some(b) = fold.more().unwrap() {
                assert!(b.num_rows() <= answer_rows && b.num_rows() > 0);
                out.push(b);
            }
            let (got, want) = (rows_of(&out), by_hand(&batches, grid));
            assert_eq!(got.len(), groups);
            assert!(got.len() > 100 && got.iter().any(|r| r.2.is_none()) && got.iter().any(|r| r.3.is_none()));
            assert_eq!(got, want, "answer_rows {answer_rows}");
            assert_eq!(fold.held_bytes(), 0);
        }
    }

    #[test]
    fn an_empty_span_answers_nothing() {
        let mut fold = MessageFold::new(None, false, out_schema());
        fold.map(&messages(50, 4, 0)).unwrap();
        assert!(fold.finish().unwrap().is_empty());
        assert!(fold.more().unwrap().is_none());
    }
}
