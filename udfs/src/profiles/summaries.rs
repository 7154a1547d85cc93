//! The summaries every trace tool starts with, in one call: who talks to whom
//! (`comm_matrix`, the communication matrix of Vampir's and Intel Trace Analyzer's message
//! statistics, per rank or per node pair), how big the messages are (`message_histogram`:
//! power-of-two size classes as MPI profilers such as mpiP and IPM report them, or equal-width
//! bins), and how evenly each region's time is spread over the ranks (`load_imbalance`, with
//! the imbalance measures of the POP methodology: load balance = mean / max, and Scalasca's
//! percent imbalance, (max - mean) / max; region NULL is the time of the run's span that no
//! call covers on each rank, its own work, as in `time_profile`). `comm_matrix`, `load_imbalance` and
//! `message_histogram` in size classes tally their input as it streams by (commdb_analysis::stream) and
//! hold only their pairs, regions and ranks, or classes; equal-width bins read the sizes whole
//! first, for their range.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::error::Result;

use crate::latency::MESSAGES;
use crate::profiles::CALLS;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::{Compute, Derived, Spread};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Work;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

pub const COMM_MATRIX: Function = Function {
    name: "comm_matrix",
    params: &[
        MESSAGES,
        param("by", Type::Choice(&["rank", "node"]), ParamDefault::Text("rank"), "the ends of a cell: ranks or nodes"),
        param(
            "value",
            Type::Choice(&["messages", "bytes", "duration"]),
            ParamDefault::Text("messages"),
            "the quantity of the value column: messages, bytes or total transmission ns",
        ),
    ],
    output: Output::Columns(&[
        col("src", int64, "sending rank (by => 'node': its node, as text)"),
        col("dst", int64, "receiving rank (by => 'node': its node, as text)"),
        col("messages", int64, "messages from src to dst").never_null(),
        col("bytes", int64, "their bytes").never_null(),
        col("mean_duration_ns", float64, "their mean transmission time"),
        col("value", float64, "the quantity chosen by value"),
        col("share", float64, "value over the total of all pairs"),
    ]),
    description: "the communication matrix: per sender and receiver (by 'rank' or 'node'), messages, bytes and mean transmission time; value is the quantity chosen ('messages', 'bytes' or 'duration': the total transmission ns) and share its part of the total over all pairs",
    make: Make::Table(comm_matrix),
};

pub const MESSAGE_HISTOGRAM: Function = Function {
    name: "message_histogram",
    params: &[
        MESSAGES,
        param(
            "bins",
            Type::Integer { min: 1 },
            ParamDefault::Chosen("power-of-two classes"),
            "this many equal-width bins from the smallest to the largest message",
        ),
    ],
    output: Output::Columns(&[
        col("bin", int64, "bin number, from 0").never_null(),
        col("bytes_from", int64, "smallest size of the bin").never_null(),
        col("bytes_to", int64, "end of the bin (exclusive)").never_null(),
        col("messages", int64, "messages in the bin").never_null(),
        col("bytes", int64, "their bytes").never_null(),
        col("mean_duration_ns", float64, "their mean transmission time"),
        col("share", float64, "their share of the messages"),
    ]),
    description: "messages by size: power-of-two classes [bytes_from, bytes_to) (0 bytes, 1, 2-3, 4-7, ...) as MPI profilers report them, or `bins` equal-width bins from the smallest to the largest message; share of the messages",
    make: Make::Table(message_histogram),
};

pub const LOAD_IMBALANCE: Function = Function {
    name: "load_imbalance",
    params: &[
        CALLS,
        param(
            "metric",
            Type::Choice(&["duration", "exclusive"]),
            ParamDefault::Text("duration"),
            "the time of a call: inclusive (duration) or exclusive",
        ),
    ],
    output: Output::Columns(&[
        col("region", text, "NULL: the time of the run's span no call covers on the rank's streams, its own work"),
        col("ranks", int64, "ranks that enter the region").never_null(),
        col("total_ns", int64, "time in the region over those ranks").never_null(),
        col("mean_ns", float64, "mean time per rank"),
        col("min_ns", int64, "least time of a rank").never_null(),
        col("min_rank", int64, "the rank with the least time (lowest on ties)").never_null(),
        col("max_ns", int64, "most time of a rank").never_null(),
        col("max_rank", int64, "the rank with the most time (lowest on ties)").never_null(),
        col("load_balance", float64, "mean / max (POP)"),
        col("imbalance_pct", float64, "(max - mean) / max x 100 (Scalasca)"),
    ]),
    description: "per region, its time ('duration': inclusive, or 'exclusive') summed per rank and compared across the ranks that enter it: load_balance = mean / max (POP), imbalance_pct = (max - mean) / max x 100 (Scalasca); region NULL is the time no call covers (uninstrumented work)",
    make: Make::Table(load_imbalance),
};

/// Messages, bytes and transmission times of a group of messages.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    messages: i64,
    bytes: i64,
    timed: i64,
    duration: i64,
}

impl Tally {
    fn add(&mut self, bytes: Option<i64>, duration: Option<i64>) {
        self.messages += 1;
        self.bytes += bytes.unwrap_or(0);
        if let Some(d) = duration {
            self.timed += 1;
            self.duration += d;
        }
    }

    /// Add another tally (a batch's, or a part's).
    fn absorb(&mut self, t: &Tally) {
        self.messages += t.messages;
        self.bytes += t.bytes;
        self.timed += t.timed;
        self.duration += t.duration;
    }

    fn mean_duration(&self) -> Option<f64> {
        (self.timed > 0).then(|| self.duration as f64 / self.timed as f64)
    }
}

/// One end of a communication: a rank or a node (borrowed from the column, so that grouping
/// millions of messages allocates nothing per message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum End<'a> {
    Rank(i64),
    Node(&'a str),
}

/// The end in row `i` of a rank or node column (None when NULL).
fn end(column: &ArrayRef, i: usize) -> Option<End<'_>> {
    if column.is_null(i) {
        return None;
    }
    match (column.as_any().downcast_ref::<Int64Array>(), column.as_any().downcast_ref::<StringArray>()) {
        (Some(a), _) => Some(End::Rank(a.value(i))),
        (None, Some(s)) => Some(End::Node(s.value(i))),
        (None, None) => None,
    }
}

fn int(name: &str) -> Field {
    Field::new(name, DataType::Int64, false)
}

arguments! {
    struct CommMatrixArgs(COMM_MATRIX) {
        rel: Relation,
        by: String,
        value: String,
    }
}

fn comm_matrix(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let CommMatrixArgs { rel, by, value } = CommMatrixArgs::read(a)?;
    let ends = if by == "rank" { ["src", "dst"] } else { ["src_node", "dst_node"] };
    let idx = rel.columns(a.function, &[ends[0], ends[1], "bytes", "duration"])?;
    let end_type = if by == "rank" { DataType::Int64 } else { DataType::Utf8 };
    let out = COMM_MATRIX.schema_with(&[("src", end_type.clone()), ("dst", end_type)]);
    let by_rank = by == "rank";
    let fold = MatrixFold { by_rank, value, pairs: BTreeMap::new(), schema: out.clone(), partial: false };
    // The messages stream through the pairs' tallies; only the pairs are held. Spread over
    // a cluster's tasks, each part's tallies are added up in one task.
    let whole = fold.clone();
    let prepare: Prepare = Arc::new(move |_| Ok(Box::new(whole.clone()) as Box<dyn Mapper>));
    let partial_schema = tally_schema(&[("src", out.field(0).data_type()), ("dst", out.field(1).data_type())]);
    let partial = MatrixFold { partial: true, ..fold.clone() };
    let partial: Prepare = Arc::new(move |_| Ok(Box::new(partial.clone()) as Box<dyn Mapper>));
    let merge: Compute = Arc::new(move |partials| {
        let mut merged = fold.clone();
        for batch in partials {
            let tallies = tallies_of(batch, 2)?;
            for (i, t) in tallies.into_iter().enumerate() {
                let key = (end(batch.column(0), i).map(OwnedEnd::from), end(batch.column(1), i).map(OwnedEnd::from));
                merged.pairs.entry(key).or_default().absorb(&t);
            }
        }
        merged.finish()
    });
    let spread = Spread::Merged { schema: partial_schema, work: Work::Streamed(partial), merge };
    Ok(Arc::new(Derived::streamed(out, vec![(rel, Some(idx))], prepare).spreading(spread)))
}

/// The schema of partial tallies (a cluster's part's, commdb_analysis::derived::Spread): the key columns,
/// then messages, bytes, timed and duration.
fn tally_schema(keys: &[(&str, &DataType)]) -> SchemaRef {
    let mut fields: Vec<Field> = keys.iter().map(|(n, t)| Field::new(*n, (*t).clone(), true)).collect();
    fields.extend(["messages", "bytes", "timed", "duration"].map(int));
    Arc::new(Schema::new(fields))
}

/// The tally columns of partial tallies, from column `first` on.
fn tally_columns<'a>(tallies: impl Iterator<Item = &'a Tally> + Clone) -> Vec<ArrayRef> {
    let column = |f: fn(&Tally) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(tallies.clone().map(f))) };
    vec![column(|t| t.messages), column(|t| t.bytes), column(|t| t.timed), column(|t| t.duration)]
}

/// The tallies of a batch of partial tallies whose tally columns start at `first`.
fn tallies_of(batch: &RecordBatch, first: usize) -> Result<Vec<Tally>> {
    let one = std::slice::from_ref(batch);
    let columns = (first..first + 4).map(|c| int64_column(one, c)).collect::<Result<Vec<_>>>()?;
    Ok((0..batch.num_rows())
        .map(|i| Tally {
            messages: columns[0].value(i),
            bytes: columns[1].value(i),
            timed: columns[2].value(i),
            duration: columns[3].value(i),
        })
        .collect())
}

/// One end of a communication, owned: a rank or a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum OwnedEnd {
    Rank(i64),
    Node(String),
}

impl From<End<'_>> for OwnedEnd {
    fn from(e: End<'_>) -> Self {
        match e {
            End::Rank(r) => OwnedEnd::Rank(r),
            End::Node(n) => OwnedEnd::Node(n.to_string()),
        }
    }
}

/// A cell of the matrix: its (src, dst) ends.
type Pair = (Option<OwnedEnd>, Option<OwnedEnd>);

/// comm_matrix's tallies, message batch by message batch; the pairs, in matrix order (NULL
/// ends, peers that resolve to no rank, first), at the end.
#[derive(Clone)]
struct MatrixFold {
    by_rank: bool,
    value: String,
    pairs: BTreeMap<Pair, Tally>,
    schema: SchemaRef,
    /// Whether it gives its tallies as they are, for a merge (tally_schema).
    partial: bool,
}

impl MatrixFold {
    /// The schema of what it gives: the answer's, or its partial tallies'.
    fn output(&self) -> SchemaRef {
        match self.partial {
            false => self.schema.clone(),
            true => {
                tally_schema(&[("src", self.schema.field(0).data_type()), ("dst", self.schema.field(1).data_type())])
            }
        }
    }
}

impl Mapper for MatrixFold {
    fn held_bytes(&self) -> usize {
        96 * self.pairs.len()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let (bytes, duration) = (int64_column(batches, 2)?, int64_column(batches, 3)?);
        let opt = |a: &Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
        let ends: Vec<ArrayRef> = if self.by_rank {
            vec![Arc::new(int64_column(batches, 0)?), Arc::new(int64_column(batches, 1)?)]
        } else {
            vec![Arc::new(text_column(batches, 0)?), Arc::new(text_column(batches, 1)?)]
        };
        // The batch's pairs with borrowed ends (nothing allocated per message), then added to
        // the whole's.
        let mut here: BTreeMap<(Option<End>, Option<End>), Tally> = BTreeMap::new();
        for i in 0..bytes.len() {
            here.entry((end(&ends[0], i), end(&ends[1], i))).or_default().add(opt(&bytes, i), opt(&duration, i));
        }
        for ((a, b), t) in here {
            self.pairs.entry((a.map(OwnedEnd::from), b.map(OwnedEnd::from))).or_default().absorb(&t);
        }
        Ok(RecordBatch::new_empty(self.output()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let quantity = |t: &Tally| match self.value.as_str() {
            "messages" => Some(t.messages as f64),
            "bytes" => Some(t.bytes as f64),
            _ => (t.timed > 0).then_some(t.duration as f64),
        };
        let total: f64 = self.pairs.values().filter_map(quantity).sum();
        let side = |pick: fn(&Pair) -> &Option<OwnedEnd>| -> ArrayRef {
            let ends = self.pairs.keys().map(pick);
            if self.by_rank {
                Arc::new(Int64Array::from_iter(ends.map(|e| match e {
                    Some(OwnedEnd::Rank(r)) => Some(*r),
                    _ => None,
                })))
            } else {
                Arc::new(StringArray::from_iter(ends.map(|e| match e {
                    Some(OwnedEnd::Node(n)) => Some(n.as_str()),
                    _ => None,
                })))
            }
        };
        if self.partial {
            let mut columns = vec![side(|k| &k.0), side(|k| &k.1)];
            columns.extend(tally_columns(self.pairs.values()));
            return Ok(vec![RecordBatch::try_new(self.output(), columns)?]);
        }
        let tallies: Vec<&Tally> = self.pairs.values().collect();
        let values: Vec<Option<f64>> = tallies.iter().map(|t| quantity(t)).collect();
        let columns: Vec<ArrayRef> = vec![
            side(|k| &k.0),
            side(|k| &k.1),
            Arc::new(Int64Array::from_iter_values(tallies.iter().map(|t| t.messages))),
            Arc::new(Int64Array::from_iter_values(tallies.iter().map(|t| t.bytes))),
            Arc::new(Float64Array::from_iter(tallies.iter().map(|t| t.mean_duration()))),
            Arc::new(Float64Array::from(values.clone())),
            Arc::new(Float64Array::from_iter(values.iter().map(|v| v.filter(|_| total > 0.0).map(|v| v / total)))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

/// The bin of a message of `bytes` and the bytes the bin covers, [from, to).
fn size_class(bytes: i64, equal: Option<(i64, i64)>) -> (i64, i64, i64) {
    match equal {
        Some((min, width)) => {
            let bin = (bytes - min) / width;
            (bin, min + bin * width, min + (bin + 1) * width)
        }
        // 0 bytes; then [1, 2), [2, 4), [4, 8), ...
        None if bytes <= 0 => (0, 0, 1),
        None => {
            let bit = 63 - bytes.leading_zeros() as i64;
            let to = if bit >= 62 { i64::MAX } else { 1i64 << (bit + 1) };
            (bit + 1, 1i64 << bit, to)
        }
    }
}

arguments! {
    struct HistogramArgs(MESSAGE_HISTOGRAM) {
        rel: Relation,
        bins: Option<i64>,
    }
}

fn message_histogram(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let HistogramArgs { rel, bins } = HistogramArgs::read(a)?;
    if bins.is_some_and(|b| b > 100_000) {
        return plan_err!("message_histogram: bins must be at most 100000, got {}", bins.unwrap_or(0));
    }
    let idx = rel.columns(a.function, &["bytes", "duration"])?;
    let out = a.schema();
    let schema = out.clone();
    if bins.is_none() {
        // Power-of-two classes need no range first: the messages stream through them.
        // Spread over a cluster's tasks, each part's classes are added up in one task.
        let fold = HistogramFold { equal: None, classes: BTreeMap::new(), sizeless: 0, schema, partial: false };
        let whole = fold.clone();
        let prepare: Prepare = Arc::new(move |_| Ok(Box::new(whole.clone()) as Box<dyn Mapper>));
        let partial = HistogramFold { partial: true, ..fold.clone() };
        let partial: Prepare = Arc::new(move |_| Ok(Box::new(partial.clone()) as Box<dyn Mapper>));
        let merge: Compute = Arc::new(move |partials| {
            let mut merged = fold.clone();
            for batch in partials {
                let one = std::slice::from_ref(batch);
                let (bin, from, to) = (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
                for (i, t) in tallies_of(batch, 3)?.into_iter().enumerate() {
                    if bin.is_null(i) {
                        merged.sizeless += t.messages as usize;
                        continue;
                    }
                    let class =
                        merged.classes.entry(bin.value(i)).or_insert((from.value(i), to.value(i), Tally::default()));
                    class.2.absorb(&t);
                }
            }
            merged.finish()
        });
        let spread = Spread::Merged { schema: histogram_partials(), work: Work::Streamed(partial), merge };
        return Ok(Arc::new(Derived::streamed(out, vec![(rel, Some(idx))], prepare).spreading(spread)));
    }
    // Equal-width bins span the sizes' range: read whole first.
    let compute: Compute = Arc::new(move |batches| {
        let bytes = int64_column(batches, 0)?;
        let (lo, hi) = (arrow::compute::min(&bytes), arrow::compute::max(&bytes));
        let equal = match (bins, lo.as_ref(), hi.as_ref()) {
            (Some(n), Some(&lo), Some(&hi)) => {
                Some((lo, ((hi as i128 - lo as i128 + 1) as f64 / n as f64).ceil().max(1.0) as i64))
            }
            _ => None,
        };
        let mut fold =
            HistogramFold { equal, classes: BTreeMap::new(), sizeless: 0, schema: schema.clone(), partial: false };
        for b in batches {
            fold.map(b)?;
        }
        fold.finish()
    });
    Ok(Arc::new(Derived::new(out, rel, Some(idx), compute)))
}

/// message_histogram's classes (bin -> its sizes and tally), batch by batch.
#[derive(Clone)]
struct HistogramFold {
    /// Equal-width bins (first size, width); None: power-of-two classes.
    equal: Option<(i64, i64)>,
    classes: BTreeMap<i64, (i64, i64, Tally)>,
    /// Messages without a size, an error at the end.
    sizeless: usize,
    schema: SchemaRef,
    /// Whether it gives its classes as they are, for a merge (histogram_partials).
    partial: bool,
}

/// The schema of a part's classes: bin, bytes_from, bytes_to and the tally; the messages
/// without a size are a row of bin NULL.
fn histogram_partials() -> SchemaRef {
    let keys = [("bin", &DataType::Int64), ("bytes_from", &DataType::Int64), ("bytes_to", &DataType::Int64)];
    tally_schema(&keys)
}

impl Mapper for HistogramFold {
    fn held_bytes(&self) -> usize {
        64 * self.classes.len()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let (bytes, duration) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        self.sizeless += bytes.null_count();
        for i in (0..bytes.len()).filter(|&i| bytes.is_valid(i)) {
            let (bin, from, to) = size_class(bytes.value(i), self.equal);
            let d = duration.is_valid(i).then(|| duration.value(i));
            self.classes.entry(bin).or_insert((from, to, Tally::default())).2.add(Some(bytes.value(i)), d);
        }
        Ok(RecordBatch::new_empty(if self.partial { histogram_partials() } else { self.schema.clone() }))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if self.partial {
            let sizeless = Tally { messages: self.sizeless as i64, ..Tally::default() };
            let rows: Vec<(Option<i64>, i64, i64, &Tally)> = self
                .classes
                .iter()
                .map(|(bin, (from, to, t))| (Some(*bin), *from, *to, t))
                .chain((self.sizeless > 0).then_some((None, 0, 0, &sizeless)))
                .collect();
            let mut columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ];
            columns.extend(tally_columns(rows.iter().map(|r| r.3)));
            return Ok(vec![RecordBatch::try_new(histogram_partials(), columns)?]);
        }
        if self.sizeless > 0 {
            return datafusion::common::exec_err!(
                "message_histogram: {} messages have no size (bytes is NULL); filter them out first",
                self.sizeless
            );
        }
        let classes = &self.classes;
        let total = classes.values().map(|c| c.2.messages).sum::<i64>().max(1) as f64;
        let rows: Vec<(&i64, &(i64, i64, Tally))> = classes.iter().collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| *r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.2.messages))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.2.bytes))),
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.1.2.mean_duration()))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.1.2.messages as f64 / total))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

arguments! {
    struct ImbalanceArgs(LOAD_IMBALANCE) {
        rel: Relation,
        metric: String,
    }
}

fn load_imbalance(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let ImbalanceArgs { rel, metric } = ImbalanceArgs::read(a)?;
    let idx = rel.columns(a.function, &["rank", "region", metric.as_str(), "thread", "start_ts", "end_ts"])?;
    let out = a.schema();
    let bounds = commdb_analysis::relation::bounds_of(
        &rel,
        datafusion::logical_expr::col("start_ts"),
        datafusion::logical_expr::col("end_ts"),
    )?;
    // The calls come a chunk of whole ranks at a time (for the time no call covers on each
    // stream) through the (region, rank) sums; only the sums are held. Over a cluster's
    // parts of whole ranks, each part's sums are gathered in one task.
    let answer = out.clone();
    let fold = move |partial: bool| -> Prepare {
        let schema = answer.clone();
        Arc::new(move |held| {
            let span = match commdb_analysis::relation::bounds_read(&held[0])? {
                (Some(t0), Some(t1)) => Some((t0, t1)),
                _ => None,
            };
            let schema = schema.clone();
            Ok(Box::new(ImbalanceFold { per: BTreeMap::new(), span, schema, partial }) as Box<dyn Mapper>)
        })
    };
    let answer = out.clone();
    let merge: Compute = Arc::new(move |partials| {
        let schema = answer.clone();
        let mut merged = ImbalanceFold { per: BTreeMap::new(), span: None, schema, partial: false };
        for batch in partials {
            let one = std::slice::from_ref(batch);
            let (region, rank, time) = (text_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
            for i in 0..batch.num_rows() {
                let r = region.is_valid(i).then(|| region.value(i).to_string());
                *merged.per.entry(r).or_default().entry(rank.value(i)).or_default() += time.value(i);
            }
        }
        merged.finish()
    });
    let spread = Spread::Merged { schema: imbalance_partials(), work: Work::ByRank(fold(true), 0), merge };
    let derived = Derived::by_rank(out.clone(), vec![(rel, Some(idx)), bounds], 0, fold(false));
    Ok(Arc::new(derived.spreading(spread)))
}

/// load_imbalance's time per region and rank, batch by batch (ranks in order, so ties go to
/// the lowest rank); the regions' measures at the end.
struct ImbalanceFold {
    per: BTreeMap<Option<String>, BTreeMap<i64, i64>>,
    /// The run's span (first start, last end of rel); None when rel has no calls.
    span: Option<(i64, i64)>,
    schema: SchemaRef,
    /// Whether it gives its sums as they are, for a merge (`imbalance_partials`).
    partial: bool,
}

/// The schema of a part's sums: region, rank and its time in the region.
fn imbalance_partials() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("region", DataType::Utf8, true), int("rank"), int("time_ns")]))
}

impl Mapper for ImbalanceFold {
    fn held_bytes(&self) -> usize {
        self.per.values().map(|ranks| 48 * ranks.len() + 64).sum()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let (rank, region, time) = (int64_column(batches, 0)?, text_column(batches, 1)?, int64_column(batches, 2)?);
        // The batch's sums keyed by borrowed names, then added to the whole's.
        let mut here: BTreeMap<Option<&str>, BTreeMap<i64, i64>> = BTreeMap::new();
        for i in 0..rank.len() {
            if rank.is_null(i) || time.is_null(i) {
                continue;
            }
            let r = region.is_valid(i).then(|| region.value(i));
            *here.entry(r).or_default().entry(rank.value(i)).or_default() += time.value(i);
        }
        for (r, ranks) in here {
            let whole = self.per.entry(r.map(str::to_string)).or_default();
            for (k, v) in ranks {
                *whole.entry(k).or_default() += v;
            }
        }
        if let Some((t0, t1)) = self.span {
            let (thread, start, end) =
                (int64_column(batches, 3)?, int64_column(batches, 4)?, int64_column(batches, 5)?);
            let mut by_stream: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
            for i in 0..rank.len() {
                if rank.is_valid(i) && start.is_valid(i) && end.is_valid(i) {
                    let t = if thread.is_valid(i) { thread.value(i) } else { 0 };
                    by_stream.entry((rank.value(i), t)).or_default().push((start.value(i), end.value(i)));
                }
            }
            for ((r, _), mut calls) in by_stream {
                let bare = crate::sweeps::call_sweep::uncovered(&mut calls, t0, t1);
                if bare > 0 {
                    *self.per.entry(None).or_default().entry(r).or_default() += bare;
                }
            }
        }
        Ok(RecordBatch::new_empty(if self.partial { imbalance_partials() } else { self.schema.clone() }))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let per = &self.per;
        if self.partial {
            let rows: Vec<(&Option<String>, i64, i64)> =
                per.iter().flat_map(|(r, ranks)| ranks.iter().map(move |(k, v)| (r, *k, *v))).collect();
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.0.as_deref()))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ];
            return Ok(vec![RecordBatch::try_new(imbalance_partials(), columns)?]);
        }
        let mut cols: (Vec<Option<String>>, Vec<i64>, Vec<i64>, Vec<f64>) = Default::default();
        let mut extremes: Vec<[i64; 4]> = Vec::new();
        let mut ratios: Vec<(Option<f64>, Option<f64>)> = Vec::new();
        for (r, ranks) in per {
            let total: i64 = ranks.values().sum();
            let mean = total as f64 / ranks.len() as f64;
            let min = ranks.iter().fold((i64::MAX, 0), |m, (k, v)| if *v < m.0 { (*v, *k) } else { m });
            let max = ranks.iter().fold((i64::MIN, 0), |m, (k, v)| if *v > m.0 { (*v, *k) } else { m });
            cols.0.push(r.clone());
            cols.1.push(ranks.len() as i64);
            cols.2.push(total);
            cols.3.push(mean);
            extremes.push([min.0, min.1, max.0, max.1]);
            let positive = max.0 > 0;
            ratios.push((
                positive.then(|| mean / max.0 as f64),
                positive.then(|| 100.0 * (max.0 as f64 - mean) / max.0 as f64),
            ));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(cols.0)),
            Arc::new(Int64Array::from(cols.1)),
            Arc::new(Int64Array::from(cols.2)),
            Arc::new(Float64Array::from(cols.3)),
            Arc::new(Int64Array::from_iter_values(extremes.iter().map(|e| e[0]))),
            Arc::new(Int64Array::from_iter_values(extremes.iter().map(|e| e[1]))),
            Arc::new(Int64Array::from_iter_values(extremes.iter().map(|e| e[2]))),
            Arc::new(Int64Array::from_iter_values(extremes.iter().map(|e| e[3]))),
            Arc::new(Float64Array::from_iter(ratios.iter().map(|r| r.0))),
            Arc::new(Float64Array::from_iter(ratios.iter().map(|r| r.1))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_classes_and_equal_bins() {
        assert_eq!(size_class(0, None), (0, 0, 1));
        assert_eq!(size_class(1, None), (1, 1, 2));
        assert_eq!(size_class(4096, None), (13, 4096, 8192));
        assert_eq!(size_class(8191, None), (13, 4096, 8192));
        assert_eq!(size_class(i64::MAX, None).2, i64::MAX);
        assert_eq!(size_class(250, Some((100, 50))), (3, 250, 300));
    }
}
