//! Latency criteria and message latency, after PCLVis section 4.1: the "normal" transmission
//! time of a message is learnt from the trace itself, as the median transmission time of the
//! messages of the same size bucket and the same locality (within a node or between nodes).
//! A message's latency is L = duration / criterion; L > 1 marks it delayed.
//!
//! Sampling: at most `max_samples` messages per (locality, bucket) enter the median, chosen by
//! stratified sampling over the bucket's messages in send-time order (the middle message of
//! each of `max_samples` equal strata; messages sent at the same time in order of duration),
//! so the sample is deterministic, spread over the whole run and independent of the order the
//! messages are read in. On a cluster each part's groups are sorted so and merged in that
//! order (`CriteriaPartials`, `CriteriaMerge`), the merge keeping only the sample. Buckets with fewer than `min_messages` messages get no criterion (status
//! 'too_few_messages'); messages whose nodes are unknown form their own group (locality NULL,
//! status 'unknown_locality'). Cost: O(n) grouping plus O(n log n) sorting within buckets, in
//! parallel over buckets. The groups are gathered as the messages stream (`CriteriaFold`, 16
//! bytes a message), and the analyses that measure latency against criteria read them as the
//! rows of a streamed `latency_criteria` before their own messages stream.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::Result;
use rayon::prelude::*;

use arrow::array::AsArray;
use commdb_catalog::wallclock::Notices;
use datafusion::catalog::Session;
use datafusion::common::exec_err;

use crate::common::{
    Args, Derived, FastMap, Projected, Relation, bool_column, int64_column, text_column, trace_schema, trace_table,
};
use crate::declare::{
    BUCKET_BYTES, CRITERIA, Function, MAX_SAMPLES, MIN_MESSAGES, Make, Output, Param, ParamDefault, Type, boolean, col,
    float64, int64, param, text,
};
use crate::stream::{Mapper, Prepare};

pub const INTRA: u8 = 0;
pub const INTER: u8 = 1;
pub const UNKNOWN: u8 = 2;

/// Parameters shared by the latency functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub bucket_bytes: i64,
    pub max_samples: usize,
    pub min_messages: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            bucket_bytes: BUCKET_BYTES.default.integer(),
            max_samples: MAX_SAMPLES.default.integer() as usize,
            min_messages: MIN_MESSAGES.default.integer() as usize,
        }
    }
}

impl Params {
    /// Read bucket_bytes, max_samples, min_messages from argument positions `first..`.
    pub fn from_args(args: &Args<'_>) -> Result<Self> {
        Ok(Params {
            bucket_bytes: args.int(BUCKET_BYTES.name)?,
            max_samples: args.int(MAX_SAMPLES.name)? as usize,
            min_messages: args.int(MIN_MESSAGES.name)? as usize,
        })
    }
}

/// One (locality, bucket) and its criterion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criterion {
    pub locality: u8,
    pub bucket: i64,
    pub criterion_ns: Option<f64>,
    pub samples: i64,
    pub messages: i64,
}

impl Criterion {
    pub fn status(&self) -> &'static str {
        if self.criterion_ns.is_none() {
            "too_few_messages"
        } else if self.locality == UNKNOWN {
            "unknown_locality"
        } else {
            "ok"
        }
    }
}

/// The message columns the latency functions read.
#[derive(Debug)]
pub struct MessageColumns {
    pub locality: Vec<u8>,
    pub bytes: Int64Array,
    pub duration: Int64Array,
    pub send_ts: Option<Int64Array>,
}

/// Column names a messages-like relation must have; `intra_node` or both node columns.
const NEEDED: [&str; 2] = ["bytes", "duration"];

/// Indices (in `relation`) of bytes, duration, send_ts (optional) and the locality columns.
#[derive(Debug, Clone)]
pub struct MessageIndices {
    bytes: usize,
    duration: usize,
    send_ts: Option<usize>,
    intra: Option<usize>,
    nodes: Option<(usize, usize)>,
}

impl MessageIndices {
    pub fn find(function: &str, relation: &Relation) -> Result<Self> {
        let idx = relation.columns(function, &NEEDED)?;
        let schema = relation.schema();
        let intra = schema.index_of("intra_node").ok();
        let nodes = match (schema.index_of("src_node"), schema.index_of("dst_node")) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => None,
        };
        if intra.is_none() && nodes.is_none() {
            return datafusion::common::plan_err!(
                "{function}: relation '{}' needs an intra_node column or src_node and dst_node columns",
                relation.reference
            );
        }
        Ok(MessageIndices { bytes: idx[0], duration: idx[1], send_ts: schema.index_of("send_ts").ok(), intra, nodes })
    }

    /// The relation columns these indices read.
    pub fn columns(&self) -> Vec<usize> {
        let mut cols = vec![self.bytes, self.duration];
        cols.extend(self.send_ts);
        cols.extend(self.intra);
        if let Some((a, b)) = self.nodes {
            cols.extend([a, b]);
        }
        cols
    }

    /// The same columns at the positions `at` gives them (in a scan of some columns).
    pub fn moved(&self, at: impl Fn(usize) -> usize) -> MessageIndices {
        MessageIndices {
            bytes: at(self.bytes),
            duration: at(self.duration),
            send_ts: self.send_ts.map(&at),
            intra: self.intra.map(&at),
            nodes: self.nodes.map(|(a, b)| (at(a), at(b))),
        }
    }

    /// The relation columns these indices read, and the indices into a scan of only those
    /// columns (in that order), so a function that needs nothing else reads less.
    pub fn projected(&self) -> (Vec<usize>, MessageIndices) {
        let mut cols = self.columns();
        cols.sort_unstable();
        cols.dedup();
        let at = |c: usize| cols.iter().position(|x| *x == c).expect("listed above");
        let inner = self.moved(at);
        (cols, inner)
    }

    /// Whether the relation has a send_ts column.
    pub fn has_send_ts(&self) -> bool {
        self.send_ts.is_some()
    }

    /// Read the columns from batches of the full relation.
    pub fn read(&self, batches: &[RecordBatch]) -> Result<MessageColumns> {
        let locality = match (self.intra, self.nodes) {
            (Some(i), _) => bool_column(batches, i)?
                .iter()
                .map(|v| v.map_or(UNKNOWN, |intra| if intra { INTRA } else { INTER }))
                .collect(),
            (None, Some((a, b))) => {
                let (src, dst) = (text_column(batches, a)?, text_column(batches, b)?);
                (0..src.len())
                    .map(|r| {
                        if src.is_null(r) || dst.is_null(r) {
                            UNKNOWN
                        } else if src.value(r) == dst.value(r) {
                            INTRA
                        } else {
                            INTER
                        }
                    })
                    .collect()
            }
            (None, None) => Vec::new(),
        };
        Ok(MessageColumns {
            locality,
            bytes: int64_column(batches, self.bytes)?,
            duration: int64_column(batches, self.duration)?,
            send_ts: self.send_ts.map(|i| int64_column(batches, i)).transpose()?,
        })
    }
}

/// Key of a message's group, or None when it has no duration or size.
#[inline]
fn key(m: &MessageColumns, row: usize, bucket_bytes: i64) -> Option<(u8, i64)> {
    if m.duration.is_null(row) || m.bytes.is_null(row) {
        return None;
    }
    let bytes = m.bytes.value(row).max(0);
    Some((m.locality[row], bytes / bucket_bytes * bucket_bytes))
}

fn median(values: &mut [i64]) -> f64 {
    let n = values.len();
    let mid = n / 2;
    let (lower, upper, _) = values.select_nth_unstable(mid);
    let upper = *upper as f64;
    if n % 2 == 1 { upper } else { (lower.iter().copied().max().unwrap_or(0) as f64 + upper) / 2.0 }
}

/// Criteria of every (locality, bucket), ordered by locality then bucket.
pub fn criteria(m: &MessageColumns, p: &Params) -> Vec<Criterion> {
    let mut fold = CriteriaFold::default();
    fold.add(m, p.bucket_bytes);
    fold.finish(p)
}

/// A message in its group: (its place in send-time order, duration). The place is its send_ts
/// (NULL last) when the relation has one, else its row in the input.
type Placed = (i64, i64);

/// The criteria's groups gathered batch by batch: per (locality, bucket), every message's
/// place in send-time order and duration, 16 bytes a message, from which the sample is drawn
/// at the end.
#[derive(Debug, Default)]
pub struct CriteriaFold {
    groups: FastMap<(u8, i64), Vec<Placed>>,
    /// Rows added so far.
    rows: u64,
    /// Messages kept in the groups (held_bytes is asked after every batch).
    kept: usize,
}

/// The place among `n` messages in send-time order of the `k`-th of `m` sampled: the middle
/// one of the k-th of m equal strata.
fn sample_place(k: usize, n: usize, m: usize) -> usize {
    (2 * k + 1) * n / (2 * m)
}

/// The criterion of a group of `n` messages from its sample of `m_used` durations.
fn criterion_of(key: (u8, i64), n: usize, m_used: usize, mut sample: Vec<i64>, p: &Params) -> Criterion {
    let criterion_ns = (n >= p.min_messages && !sample.is_empty()).then(|| median(&mut sample));
    Criterion {
        locality: key.0,
        bucket: key.1,
        criterion_ns,
        samples: if criterion_ns.is_some() { m_used as i64 } else { 0 },
        messages: n as i64,
    }
}

impl CriteriaFold {
    pub fn add(&mut self, m: &MessageColumns, bucket_bytes: i64) {
        for row in 0..m.duration.len() {
            let at = self.rows + row as u64;
            if let Some(k) = key(m, row, bucket_bytes) {
                let order =
                    m.send_ts.as_ref().map_or(at as i64, |s| if s.is_null(row) { i64::MAX } else { s.value(row) });
                self.groups.entry(k).or_default().push((order, m.duration.value(row)));
                self.kept += 1;
            }
        }
        self.rows += m.duration.len() as u64;
    }

    /// Bytes the groups hold (their entries; the vectors' room to grow is not counted).
    pub fn held_bytes(&self) -> usize {
        self.kept * std::mem::size_of::<Placed>() + 64 * self.groups.len()
    }

    /// The criteria: per group, the median of at most `max_samples` durations spread evenly
    /// over the group's messages in send-time order (messages sent at the same time in order of
    /// duration, so that the sample does not depend on the order the messages came in).
    pub fn finish(self, p: &Params) -> Vec<Criterion> {
        let mut out: Vec<Criterion> = self
            .groups
            .into_par_iter()
            .map(|(key, mut rows)| {
                let n = rows.len();
                let m_used = n.min(p.max_samples);
                let sample: Vec<i64> = if n < p.min_messages {
                    Vec::new()
                } else if m_used == n {
                    rows.iter().map(|r| r.1).collect()
                } else {
                    rows.sort_unstable();
                    (0..m_used).map(|k| rows[sample_place(k, n, m_used)].1).collect()
                };
                criterion_of(key, n, m_used, sample, p)
            })
            .collect();
        out.sort_unstable_by_key(|c| (c.locality, c.bucket));
        out
    }

    /// The groups in (locality, bucket) order, each group's messages in send-time order: a
    /// part's partials (`CriteriaPartials`).
    fn sorted(self) -> Vec<((u8, i64), Vec<Placed>)> {
        let mut groups: Vec<((u8, i64), Vec<Placed>)> = self.groups.into_iter().collect();
        groups.par_iter_mut().for_each(|(_, rows)| rows.sort_unstable());
        groups.sort_unstable_by_key(|g| g.0);
        groups
    }
}

/// The schema of a part's partial criteria (a cluster's task's, crate::common::Spread): per
/// group in (locality, bucket) order, a row of kind 0 whose duration is the part's count of
/// the group's messages, then a row of kind 1 per message, in send-time order.
fn criteria_partials() -> SchemaRef {
    let fields = ["locality", "bucket", "kind", "place", "duration"].map(|n| Field::new(n, DataType::Int64, false));
    Arc::new(Schema::new(fields.to_vec()))
}

/// Rows of partials per batch (DataFusion's batch size: the merge in order holds a batch of
/// every part at a time).
const PARTIAL_ROWS: usize = 8192;

/// A part's messages gathered into their groups (`CriteriaFold`), then given as partials
/// (`criteria_partials`), a batch at a time.
struct CriteriaPartials {
    indices: MessageIndices,
    bucket_bytes: i64,
    fold: CriteriaFold,
    /// After the part has ended: the groups, the next group and the next of its rows (0: its
    /// count).
    sorted: Vec<((u8, i64), Vec<Placed>)>,
    at: (usize, usize),
}

impl Mapper for CriteriaPartials {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.fold.add(&self.indices.read(std::slice::from_ref(batch))?, self.bucket_bytes);
        Ok(RecordBatch::new_empty(criteria_partials()))
    }

    fn held_bytes(&self) -> usize {
        self.fold.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.sorted = std::mem::take(&mut self.fold).sorted();
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let mut columns: [Vec<i64>; 5] = Default::default();
        while columns[0].len() < PARTIAL_ROWS {
            let Some((key, rows)) = self.sorted.get(self.at.0) else { break };
            let mut row = |kind: i64, place: i64, duration: i64| {
                for (c, v) in columns.iter_mut().zip([i64::from(key.0), key.1, kind, place, duration]) {
                    c.push(v);
                }
            };
            if self.at.1 == 0 {
                row(0, 0, rows.len() as i64);
            }
            let to = rows.len().min(self.at.1 + PARTIAL_ROWS);
            for &(place, duration) in &rows[self.at.1..to] {
                row(1, place, duration);
            }
            self.at = if to == rows.len() { (self.at.0 + 1, 0) } else { (self.at.0, to.max(1)) };
        }
        if columns[0].is_empty() {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = columns.into_iter().map(|c| Arc::new(Int64Array::from(c)) as ArrayRef).collect();
        Ok(Some(RecordBatch::try_new(criteria_partials(), columns)?))
    }
}

/// The criteria from every part's partials merged in (locality, bucket, kind, place,
/// duration) order: a group's counts come first, then its messages in send-time order, of
/// which it keeps only the sample.
struct CriteriaMerge {
    params: Params,
    /// The group being read, its messages, those read so far, the sample's size and the
    /// sample.
    group: Option<(u8, i64)>,
    n: usize,
    read: usize,
    m_used: usize,
    sample: Vec<i64>,
    done: Vec<Criterion>,
}

impl CriteriaMerge {
    fn close(&mut self) {
        if let Some(key) = self.group.take() {
            let sample = std::mem::take(&mut self.sample);
            self.done.push(criterion_of(key, self.n, self.m_used, sample, &self.params));
        }
    }
}

impl Mapper for CriteriaMerge {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let [locality, bucket, kind, _, duration] = [0, 1, 2, 3, 4].map(|c| int64_column(one, c));
        let (locality, bucket, kind, duration) = (locality?, bucket?, kind?, duration?);
        for i in 0..batch.num_rows() {
            let key = (locality.value(i) as u8, bucket.value(i));
            if self.group != Some(key) {
                self.close();
                self.group = Some(key);
                (self.n, self.read, self.m_used) = (0, 0, 0);
            }
            if kind.value(i) == 0 {
                self.n += duration.value(i) as usize;
                self.m_used = self.n.min(self.params.max_samples);
                continue;
            }
            let keep = self.n >= self.params.min_messages
                && (self.m_used == self.n
                    || sample_place(self.sample.len(), self.n, self.m_used) == self.read
                        && self.sample.len() < self.m_used);
            if keep {
                self.sample.push(duration.value(i));
            }
            self.read += 1;
        }
        Ok(RecordBatch::new_empty(criteria_schema()))
    }

    fn held_bytes(&self) -> usize {
        8 * self.sample.len() + 48 * self.done.len()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.close();
        Ok(vec![criteria_batch(&self.done)?])
    }
}

/// `latency_criteria` as the messages stream: their groups gathered, the criteria at the end.
struct CriteriaMapper {
    indices: MessageIndices,
    params: Params,
    fold: CriteriaFold,
}

impl Mapper for CriteriaMapper {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.fold.add(&self.indices.read(std::slice::from_ref(batch))?, self.params.bucket_bytes);
        Ok(RecordBatch::new_empty(criteria_schema()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        Ok(vec![criteria_batch(&std::mem::take(&mut self.fold).finish(&self.params))?])
    }

    fn held_bytes(&self) -> usize {
        self.fold.held_bytes()
    }
}

/// `latency_criteria` of `relation` read with `projection` (whose columns `indices` reads), as
/// a streamed analysis: the input of another analysis that needs the criteria before its
/// messages stream.
fn criteria_of(relation: Relation, projection: Vec<usize>, indices: MessageIndices, params: Params) -> Projected {
    let reference = datafusion::common::TableReference::bare(format!("criteria of {}", relation.reference));
    let spread = indices.has_send_ts().then(|| {
        // Over a cluster's parts: each part's groups in send-time order, merged in that order
        // into the samples (the place of a message in its group is its send_ts, which every part
        // knows; without send_ts it is its row, known only to one task reading them all).
        let (indices, bucket_bytes) = (indices.clone(), params.bucket_bytes);
        let partials: Prepare = Arc::new(move |_| {
            let (sorted, at, fold) = (Vec::new(), (0, 0), CriteriaFold::default());
            Ok(Box::new(CriteriaPartials { indices: indices.clone(), bucket_bytes, fold, sorted, at })
                as Box<dyn Mapper>)
        });
        let merge: Prepare = Arc::new(move |_| {
            let (group, n, read, m_used, sample, done) = (None, 0, 0, 0, Vec::new(), Vec::new());
            Ok(Box::new(CriteriaMerge { params, group, n, read, m_used, sample, done }) as Box<dyn Mapper>)
        });
        let work = crate::plan::Work::Streamed(partials);
        crate::common::Spread::SortedMerge { schema: criteria_partials(), work, sorted_on: 5, merge }
    });
    let prepare: Prepare = Arc::new(move |_| {
        let fold = CriteriaMapper { indices: indices.clone(), params, fold: CriteriaFold::default() };
        Ok(Box::new(fold) as Box<dyn Mapper>)
    });
    let mut derived = Derived::streamed(criteria_schema(), vec![(relation, Some(projection))], prepare);
    if let Some(spread) = spread {
        derived = derived.spreading(spread);
    }
    (Relation { reference, provider: Arc::new(derived.named("latency_criteria")) }, None)
}

fn locality_name(code: u8) -> Option<&'static str> {
    match code {
        INTRA => Some("intra"),
        INTER => Some("inter"),
        _ => None,
    }
}

fn criteria_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("locality", DataType::Utf8, true),
        Field::new("size_bucket", DataType::Int64, false),
        Field::new("criterion_ns", DataType::Float64, true),
        Field::new("samples", DataType::Int64, false),
        Field::new("messages", DataType::Int64, false),
        Field::new("status", DataType::Utf8, false),
    ]))
}

fn criteria_batch(rows: &[Criterion]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(rows.iter().map(|c| locality_name(c.locality)).collect::<Vec<_>>())),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|c| c.bucket))),
        Arc::new(Float64Array::from(rows.iter().map(|c| c.criterion_ns).collect::<Vec<_>>())),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|c| c.samples))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|c| c.messages))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(Criterion::status))),
    ];
    Ok(RecordBatch::try_new(criteria_schema(), columns)?)
}

/// Criteria looked up by (locality, size bucket): what a message's latency is measured against.
#[derive(Debug, Clone, Default)]
pub struct CriteriaTable {
    bucket_bytes: i64,
    map: FastMap<(u8, i64), Option<f64>>,
}

impl CriteriaTable {
    pub fn new(criteria: &[Criterion], bucket_bytes: i64) -> Self {
        CriteriaTable { bucket_bytes, map: criteria.iter().map(|c| ((c.locality, c.bucket), c.criterion_ns)).collect() }
    }

    /// The criterion of a row's group (None when its group has none or its size is NULL).
    #[inline]
    pub fn criterion(&self, m: &MessageColumns, row: usize) -> Option<f64> {
        self.criterion_at(m, row, m.locality[row])
    }

    /// The criterion of a row's size bucket at another locality (what the message would
    /// normally take within a node, say).
    pub fn criterion_at(&self, m: &MessageColumns, row: usize, locality: u8) -> Option<f64> {
        if m.bytes.is_null(row) {
            return None;
        }
        let b = m.bytes.value(row).max(0);
        self.map.get(&(locality, b / self.bucket_bytes * self.bucket_bytes)).copied().flatten()
    }

    /// Criterion and latency L of every row of `m` (None where the criterion is missing or 0).
    pub fn latencies(&self, m: &MessageColumns) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        let n = m.duration.len();
        let mut criterion = Vec::with_capacity(n);
        let mut latency = Vec::with_capacity(n);
        for row in 0..n {
            let c = self.criterion(m, row);
            criterion.push(c);
            latency.push(latency_of(m, row, c));
        }
        (criterion, latency)
    }

    /// Latency L of every row, NaN where it has none: half the memory of `latencies`, for
    /// functions that need only L.
    pub fn latency_values(&self, m: &MessageColumns) -> Vec<f64> {
        (0..m.duration.len()).map(|row| latency_of(m, row, self.criterion(m, row)).unwrap_or(f64::NAN)).collect()
    }

    /// `latency_values`, counting into `counted` the messages with a duration and those of
    /// them without a criterion (what `Baseline::notice_uncovered` reports).
    pub fn latency_values_counted(&self, m: &MessageColumns, counted: &mut (usize, usize)) -> Vec<f64> {
        (0..m.duration.len())
            .map(|row| {
                let c = self.criterion(m, row);
                if m.duration.is_valid(row) {
                    counted.0 += 1;
                    counted.1 += usize::from(c.is_none());
                }
                latency_of(m, row, c).unwrap_or(f64::NAN)
            })
            .collect()
    }
}

/// L = duration / criterion, None where the criterion is missing or 0 or the duration NULL.
#[inline]
fn latency_of(m: &MessageColumns, row: usize, criterion: Option<f64>) -> Option<f64> {
    match criterion {
        Some(c) if c > 0.0 && !m.duration.is_null(row) => Some(m.duration.value(row) as f64 / c),
        _ => None,
    }
}

/// Criterion and latency L of every row of `m`, against criteria learnt from `m` itself.
pub fn latencies(m: &MessageColumns, p: &Params) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    CriteriaTable::new(&criteria(m, p), p.bucket_bytes).latencies(m)
}

/// Where an analysis takes its latency criteria from.
#[derive(Debug, Clone)]
enum Source {
    /// Learnt from the analysis's own input rows (a relation that comes from no trace).
    Own,
    /// Learnt from the whole `messages` table of the trace the rows come from (an extra input),
    /// then remembered for that table and these parameters.
    Trace(MessageIndices, Weak<dyn TableProvider>),
    /// The whole trace's, learnt by an earlier call.
    Known(Arc<CriteriaTable>),
    /// Given as a relation shaped like `latency_criteria`'s output (an extra input):
    /// locality, size_bucket and criterion_ns columns.
    Given { locality: usize, size_bucket: usize, criterion_ns: usize },
}

/// The criteria an analysis measures latency against. By default the whole trace's: a view or
/// filter of a trace's messages is measured against the trace it was cut from, so narrowing
/// to a slow period does not relearn that period as normal. `criteria => 'rel'` gives them
/// explicitly; a relation that comes from no trace learns them from itself.
#[derive(Debug, Clone)]
pub struct Baseline {
    source: Source,
    pub params: Params,
    /// What the criteria were taken from, for messages to the user.
    pub described: String,
    /// The analysis, and where it tells the user about messages left without a criterion.
    function: &'static str,
    notices: Option<Notices>,
}

/// Criteria of the traces' messages tables learnt so far, by table and parameters: a trace's
/// tables never change, so narrowed analyses of one trace learn its criteria once.
type Remembered = (Weak<dyn TableProvider>, Params, Arc<CriteriaTable>);
static TRACE_CRITERIA: Mutex<Vec<Remembered>> = Mutex::new(Vec::new());

/// The criteria remembered for `table` with `params`, dropping those of closed traces.
fn remembered(table: &Weak<dyn TableProvider>, params: &Params) -> Option<Arc<CriteriaTable>> {
    let mut known = TRACE_CRITERIA.lock().unwrap_or_else(PoisonError::into_inner);
    known.retain(|(k, _, _)| k.strong_count() > 0);
    known.iter().find(|(k, p, _)| Weak::ptr_eq(k, table) && p == params).map(|(_, _, t)| t.clone())
}

impl Baseline {
    /// Decide the baseline of `function` reading `relation`, from its arguments
    /// bucket_bytes, max_samples, min_messages and criteria. Returns it with the extra input
    /// its computation reads, if any.
    pub fn plan(args: &Args<'_>, session: &dyn Session, relation: &Relation) -> Result<(Baseline, Option<Projected>)> {
        let params = Params::from_args(args)?;
        let function = args.function;
        let notices = session.config().get_extension::<Notices>().map(|n| (*n).clone());
        let baseline = |source: Source, params: Params, described: String| Baseline {
            source,
            params,
            described,
            function,
            notices: notices.clone(),
        };
        if let Some(given) = args.opt_relation(session, CRITERIA.name)? {
            let idx = given.columns(function, &["locality", "size_bucket", "criterion_ns"])?;
            let source = Source::Given { locality: 0, size_bucket: 1, criterion_ns: 2 };
            let described = format!("criteria from '{}'", given.reference);
            return Ok((baseline(source, params, described), Some((given, Some(idx)))));
        }
        let Some(schema) = trace_schema(session, relation) else {
            let described =
                format!("criteria learnt from '{}' itself (it comes from no single trace)", relation.reference);
            return Ok((baseline(Source::Own, params, described), None));
        };
        let whole = trace_table(session, function, &schema, "messages")?;
        let described = format!("criteria of the whole trace ({}.messages)", schema.1);
        if Arc::ptr_eq(&whole.provider, &relation.provider) {
            return Ok((baseline(Source::Own, params, described), None));
        }
        let key = Arc::downgrade(&whole.provider);
        if let Some(table) = remembered(&key, &params) {
            return Ok((baseline(Source::Known(table), params, described), None));
        }
        let (projection, indices) = MessageIndices::find(function, &whole)?.projected();
        Ok((baseline(Source::Trace(indices, key), params, described), Some((whole, Some(projection)))))
    }

    /// For an analysis that streams its messages (`relation`, whose message columns `indices`
    /// finds): the input its criteria are read from before the messages stream, as
    /// `latency_criteria` rows (computed as the relation's or the trace's messages stream by,
    /// holding 16 bytes a message) or the criteria given; none when they are known.
    pub fn streamed_input(
        &self,
        relation: &Relation,
        indices: &MessageIndices,
        extra: Option<Projected>,
    ) -> Option<Projected> {
        match (&self.source, extra) {
            (Source::Own, _) => {
                let (projection, own) = indices.projected();
                Some(criteria_of(relation.clone(), projection, own, self.params))
            }
            (Source::Trace(projected, _), Some((whole, Some(projection)))) => {
                Some(criteria_of(whole, projection, projected.clone(), self.params))
            }
            (_, extra) => extra,
        }
    }

    /// The criteria table of a streamed analysis, from its criteria input as `streamed_input`
    /// planned it (remembered for the trace when they are the trace's).
    pub fn held_table(&self, held: Option<&[RecordBatch]>) -> Result<Arc<CriteriaTable>> {
        let rows = |held: Option<&[RecordBatch]>, columns: (usize, usize, usize)| match held {
            Some(batches) => self.table_of_rows(batches, columns),
            None => exec_err!("{}: the criteria input was not read", self.described),
        };
        match &self.source {
            Source::Own => rows(held, (0, 1, 2)),
            Source::Trace(_, key) => {
                let table = rows(held, (0, 1, 2))?;
                let p = self.params;
                TRACE_CRITERIA.lock().unwrap_or_else(PoisonError::into_inner).push((key.clone(), p, table.clone()));
                Ok(table)
            }
            Source::Known(table) => Ok(table.clone()),
            Source::Given { locality, size_bucket, criterion_ns } => {
                rows(held, (*locality, *size_bucket, *criterion_ns))
            }
        }
    }

    /// The criteria table: from `own` (the analysis's input read as message columns) or from
    /// the extra input's batches.
    pub fn table(&self, own: &MessageColumns, extra: Option<&[RecordBatch]>) -> Result<Arc<CriteriaTable>> {
        let table = self.criteria_table(Some(own), extra)?;
        self.report_uncovered(&table, own);
        Ok(table)
    }

    /// Say how many of the analysis's messages have no criterion, and what would give them
    /// one: on a small trace every bucket may have fewer than `min_messages` messages, and
    /// the analysis would otherwise show NULLs and zero shares without a word.
    fn report_uncovered(&self, table: &CriteriaTable, own: &MessageColumns) {
        if self.notices.is_none() {
            return;
        }
        // One lookup per message, on every core: the analysis itself looks them up again.
        let (total, uncovered) = (0..own.bytes.len())
            .into_par_iter()
            .filter(|&row| own.duration.is_valid(row))
            .map(|row| (1usize, usize::from(table.criterion(own, row).is_none())))
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        self.notice_uncovered(total, uncovered);
    }

    /// Tell that `uncovered` of `total` messages with a duration have no criterion.
    pub(crate) fn notice_uncovered(&self, total: usize, uncovered: usize) {
        let Some(notices) = &self.notices else { return };
        if uncovered == 0 {
            return;
        }
        let p = &self.params;
        let why = match self.source {
            Source::Given { .. } => "the criteria given have none for their locality and size bucket".to_string(),
            _ => format!(
                "their locality is unknown or their size bucket has fewer than min_messages = {} messages",
                p.min_messages
            ),
        };
        notices.push(format!(
            "{}: {uncovered} of {total} messages have no latency criterion ({why}); their latency is NULL and they \
             count as not delayed. Lower min_messages (e.g. min_messages => 2) or widen bucket_bytes (now {}) to give \
             them one",
            self.function, p.bucket_bytes
        ));
    }

    /// The criteria table of `latency_criteria`-shaped rows: the columns (locality,
    /// size_bucket, criterion_ns) of `batches`.
    fn table_of_rows(&self, batches: &[RecordBatch], columns: (usize, usize, usize)) -> Result<Arc<CriteriaTable>> {
        let (locality, size_bucket, criterion_ns) = columns;
        let p = &self.params;
        let loc = text_column(batches, locality)?;
        let bucket = int64_column(batches, size_bucket)?;
        let crit = float64_column(batches, criterion_ns)?;
        let mut map = FastMap::default();
        for row in 0..loc.len() {
            if bucket.is_null(row) {
                continue;
            }
            let b = bucket.value(row);
            if b.rem_euclid(p.bucket_bytes) != 0 {
                return exec_err!(
                    "{}: size_bucket {b} is not a multiple of bucket_bytes = {}; pass the bucket_bytes the criteria were computed with",
                    self.described,
                    p.bucket_bytes
                );
            }
            let locality = match loc.is_valid(row).then(|| loc.value(row)) {
                Some("intra") => INTRA,
                Some("inter") => INTER,
                None => UNKNOWN,
                Some(other) => {
                    return exec_err!("{}: locality must be 'intra', 'inter' or NULL, got '{other}'", self.described);
                }
            };
            map.insert((locality, b), crit.is_valid(row).then(|| crit.value(row)));
        }
        Ok(Arc::new(CriteriaTable { bucket_bytes: p.bucket_bytes, map }))
    }

    fn criteria_table(
        &self,
        own: Option<&MessageColumns>,
        extra: Option<&[RecordBatch]>,
    ) -> Result<Arc<CriteriaTable>> {
        let p = &self.params;
        match (&self.source, extra) {
            (Source::Own, _) => match own {
                Some(own) => Ok(Arc::new(CriteriaTable::new(&criteria(own, p), p.bucket_bytes))),
                None => exec_err!("{}: the messages to learn the criteria from were not read", self.described),
            },
            (Source::Known(table), _) => Ok(table.clone()),
            (Source::Trace(indices, key), Some(batches)) => {
                let table = Arc::new(CriteriaTable::new(&criteria(&indices.read(batches)?, p), p.bucket_bytes));
                TRACE_CRITERIA.lock().unwrap_or_else(PoisonError::into_inner).push((key.clone(), *p, table.clone()));
                Ok(table)
            }
            (Source::Given { locality, size_bucket, criterion_ns }, Some(batches)) => {
                self.table_of_rows(batches, (*locality, *size_bucket, *criterion_ns))
            }
            _ => exec_err!("{}: the criteria input was not read", self.described),
        }
    }
}

/// A Float64 column of all batches.
fn float64_column(batches: &[RecordBatch], index: usize) -> Result<Float64Array> {
    Ok(crate::common::column(batches, index, &DataType::Float64)?
        .as_primitive::<arrow::datatypes::Float64Type>()
        .clone())
}

/// The relation of messages an analysis of latency reads.
pub const MESSAGES: Param =
    param("rel", Type::Relation, ParamDefault::Text("messages"), "the matched messages to analyse");

pub const LATENCY_CRITERIA: Function = Function {
    name: "latency_criteria",
    params: &[MESSAGES, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES],
    output: Output::Columns(&[
        col("locality", text, "intra (both ranks on one node), inter, or NULL when a node is unknown"),
        col("size_bucket", int64, "message size bucket: bytes / bucket_bytes"),
        col("criterion_ns", float64, "median transmission time of the sampled messages (NULL: too few)"),
        col("samples", int64, "messages that entered the median"),
        col("messages", int64, "messages of the locality and bucket"),
        col("status", text, "ok, too_few_messages or unknown_locality"),
    ]),
    description: "median transmission time per locality (intra/inter node) and message-size bucket (PCLVis 4.1)",
    make: Make::Table(|| Arc::new(LatencyCriteria)),
};

pub const MESSAGE_LATENCY: Function = Function {
    name: "message_latency",
    params: &[MESSAGES, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES, CRITERIA],
    output: Output::InputThen(&[
        col("criterion_ns", float64, "the criterion of the message's locality and size bucket"),
        col("latency", float64, "L = duration / criterion_ns"),
        col("delayed", boolean, "L > 1"),
    ]),
    description: "every message with its criterion (the whole trace's, or criteria => a latency_criteria-shaped relation), latency L = duration / criterion and delayed = L > 1 (PCLVis 4.1)",
    make: Make::Table(|| Arc::new(MessageLatency)),
};

/// The inputs of a derived table that reads `relation` (with `projection`) and the baseline's
/// extra input, if any.
pub fn with_baseline(relation: Relation, projection: Option<Vec<usize>>, extra: Option<Projected>) -> Vec<Projected> {
    let mut inputs = vec![(relation, projection)];
    inputs.extend(extra);
    inputs
}

/// `latency_criteria([rel], bucket_bytes => 50, max_samples => 10000, min_messages => 5)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LatencyCriteria;

impl TableFunctionImpl for LatencyCriteria {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&LATENCY_CRITERIA, args.exprs())?;
        let relation = a.relation(args.session(), "rel")?;
        let params = Params::from_args(&a)?;
        // Only the columns the criteria need are read.
        let (projection, indices) = MessageIndices::find("latency_criteria", &relation)?.projected();
        Ok(criteria_of(relation, projection, indices, params).0.provider)
    }
}

/// `message_latency([rel], bucket_bytes, max_samples, min_messages, criteria)`: the relation's
/// rows with criterion_ns, latency and delayed, measured against the baseline (the whole
/// trace's criteria by default).
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct MessageLatency;

impl TableFunctionImpl for MessageLatency {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&MESSAGE_LATENCY, args.exprs())?;
        let relation = a.relation(args.session(), "rel")?;
        let (baseline, extra) = Baseline::plan(&a, args.session(), &relation)?;
        let indices = MessageIndices::find("message_latency", &relation)?;
        let input = relation.schema();
        for name in ["criterion_ns", "latency", "delayed"] {
            if input.index_of(name).is_ok() {
                return datafusion::common::plan_err!(
                    "message_latency: relation '{}' already has a column '{name}'",
                    relation.reference
                );
            }
        }
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("criterion_ns", DataType::Float64, true));
        fields.push(Field::new("latency", DataType::Float64, true));
        fields.push(Field::new("delayed", DataType::Boolean, true));
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let out_schema = schema.clone();
        // The messages stream through; the criteria come first from a second input: the five
        // columns they need, of the relation itself or of its trace's messages.
        let extra = baseline.streamed_input(&relation, &indices, extra);
        let prepare: Prepare = Arc::new(move |held| {
            let table = baseline.held_table(held.first().map(Vec::as_slice))?;
            Ok(Box::new(LatencyMapper {
                table,
                indices: indices.clone(),
                schema: out_schema.clone(),
                baseline: baseline.clone(),
                counted: (0, 0),
            }) as Box<dyn Mapper>)
        });
        Ok(Arc::new(Derived::streamed(schema, with_baseline(relation, None, extra), prepare)))
    }
}

/// `message_latency`'s batches: each message with its criterion, latency and delayed.
struct LatencyMapper {
    table: Arc<CriteriaTable>,
    indices: MessageIndices,
    schema: SchemaRef,
    baseline: Baseline,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
}

impl Mapper for LatencyMapper {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let m = self.indices.read(std::slice::from_ref(batch))?;
        let (criterion, latency) = self.table.latencies(&m);
        for (row, c) in criterion.iter().enumerate() {
            if m.duration.is_valid(row) {
                self.counted.0 += 1;
                self.counted.1 += usize::from(c.is_none());
            }
        }
        let delayed: BooleanArray = latency.iter().map(|v| v.map(|x| x > 1.0)).collect();
        let mut columns = batch.columns().to_vec();
        columns.push(Arc::new(Float64Array::from(criterion)));
        columns.push(Arc::new(Float64Array::from(latency)));
        columns.push(Arc::new(delayed));
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.baseline.notice_uncovered(self.counted.0, self.counted.1);
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(loc: Vec<u8>, bytes: Vec<i64>, duration: Vec<Option<i64>>) -> MessageColumns {
        let n = loc.len() as i64;
        MessageColumns {
            locality: loc,
            bytes: Int64Array::from(bytes),
            duration: Int64Array::from(duration),
            send_ts: Some(Int64Array::from_iter_values(0..n)),
        }
    }

    #[test]
    fn medians_even_and_odd() {
        assert_eq!(median(&mut [5, 1, 3]), 3.0);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2.5);
    }

    #[test]
    fn criteria_per_locality_and_bucket() {
        let m = cols(
            vec![INTRA, INTRA, INTRA, INTER, INTER, INTER, UNKNOWN],
            vec![10, 20, 60, 10, 10, 10, 10],
            vec![Some(100), Some(300), Some(50), Some(1000), None, Some(2000), Some(7)],
        );
        let p = Params { bucket_bytes: 50, max_samples: 100, min_messages: 1 };
        let c = criteria(&m, &p);
        let got: Vec<_> = c.iter().map(|c| (c.locality, c.bucket, c.criterion_ns, c.messages)).collect();
        assert_eq!(
            got,
            vec![
                (INTRA, 0, Some(200.0), 2),
                (INTRA, 50, Some(50.0), 1),
                (INTER, 0, Some(1500.0), 2),
                (UNKNOWN, 0, Some(7.0), 1)
            ]
        );
        let (_, l) = latencies(&m, &p);
        assert_eq!(l[0], Some(0.5));
        assert_eq!(l[4], None);
        let strict = criteria(&m, &Params { min_messages: 2, ..p });
        assert_eq!(strict[1].status(), "too_few_messages");
    }

    /// `cols` of messages `a..b` of the columns given.
    fn slice(loc: &[u8], bytes: &[i64], duration: &[Option<i64>], send: &[i64], rows: &[usize]) -> MessageColumns {
        MessageColumns {
            locality: rows.iter().map(|&i| loc[i]).collect(),
            bytes: Int64Array::from(rows.iter().map(|&i| bytes[i]).collect::<Vec<_>>()),
            duration: Int64Array::from(rows.iter().map(|&i| duration[i]).collect::<Vec<_>>()),
            send_ts: Some(Int64Array::from(rows.iter().map(|&i| send[i]).collect::<Vec<_>>())),
        }
    }

    #[test]
    fn criteria_merged_from_parts_in_send_order_are_those_of_the_whole() {
        // 300 messages with many ties in send time, read in another order, cut into parts whose
        // partials are merged as a cluster merges them (sorted on their five columns).
        let n = 300;
        let loc: Vec<u8> = (0..n).map(|i| if i % 4 == 0 { INTER } else { INTRA }).collect();
        let bytes: Vec<i64> = (0..n).map(|i| (i as i64 * 31) % 120).collect();
        let duration: Vec<Option<i64>> = (0..n).map(|i| (i % 23 != 0).then_some((i as i64 * 7919) % 997)).collect();
        let send: Vec<i64> = (0..n).map(|i| (i as i64 * 7) % 20).collect();
        let all: Vec<usize> = (0..n).collect();
        for max_samples in [1, 4, 1000] {
            let p = Params { bucket_bytes: 40, max_samples, min_messages: 3 };
            let expected = criteria(&slice(&loc, &bytes, &duration, &send, &all), &p);
            // The same messages in reverse: the sample does not depend on the order read.
            let reversed: Vec<usize> = (0..n).rev().collect();
            let key = |c: &Criterion| (c.locality, c.bucket, c.criterion_ns, c.samples, c.messages);
            let again = criteria(&slice(&loc, &bytes, &duration, &send, &reversed), &p);
            assert_eq!(again.iter().map(key).collect::<Vec<_>>(), expected.iter().map(key).collect::<Vec<_>>());
            let mut rows: Vec<[i64; 5]> = Vec::new();
            for part in [&reversed[..90], &reversed[90..91], &reversed[91..]] {
                let fold = CriteriaFold::default();
                let indices = MessageIndices { bytes: 0, duration: 0, send_ts: Some(0), intra: None, nodes: None };
                let mut partials =
                    CriteriaPartials { indices, bucket_bytes: p.bucket_bytes, fold, sorted: Vec::new(), at: (0, 0) };
                partials.fold.add(&slice(&loc, &bytes, &duration, &send, part), p.bucket_bytes);
                assert!(partials.finish().unwrap().is_empty());
                while let Some(batch) = partials.more().unwrap() {
                    let one = std::slice::from_ref(&batch);
                    let c: Vec<Int64Array> = (0..5).map(|k| int64_column(one, k).unwrap()).collect();
                    rows.extend((0..batch.num_rows()).map(|i| [0, 1, 2, 3, 4].map(|k| c[k].value(i))));
                }
            }
            rows.sort_unstable();
            let columns: Vec<ArrayRef> =
                (0..5).map(|k| Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r[k]))) as ArrayRef).collect();
            let merged = RecordBatch::try_new(criteria_partials(), columns).unwrap();
            let mut merge = CriteriaMerge {
                params: p,
                group: None,
                n: 0,
                read: 0,
                m_used: 0,
                sample: Vec::new(),
                done: Vec::new(),
            };
            // In two batches, cut inside a group.
            merge.map(&merged.slice(0, 101)).unwrap();
            merge.map(&merged.slice(101, merged.num_rows() - 101)).unwrap();
            merge.finish().unwrap();
            assert_eq!(merge.done.iter().map(key).collect::<Vec<_>>(), expected.iter().map(key).collect::<Vec<_>>());
        }
    }

    #[test]
    fn criteria_folded_batch_by_batch_are_those_of_the_whole() {
        // 200 messages in two localities and three buckets, sent out of order with ties.
        let n = 200;
        let loc: Vec<u8> = (0..n).map(|i| if i % 3 == 0 { INTER } else { INTRA }).collect();
        let bytes: Vec<i64> = (0..n).map(|i| (i as i64 * 37) % 150).collect();
        let duration: Vec<Option<i64>> = (0..n).map(|i| (i % 17 != 0).then_some((i as i64 * 7919) % 1000)).collect();
        let send: Vec<i64> = (0..n).map(|i| (i as i64 * 13) % 50).collect();
        let whole = MessageColumns {
            send_ts: Some(Int64Array::from(send.clone())),
            ..cols(loc.clone(), bytes.clone(), duration.clone())
        };
        for max_samples in [3, 1000] {
            let p = Params { bucket_bytes: 50, max_samples, min_messages: 2 };
            let expected = criteria(&whole, &p);
            let mut fold = CriteriaFold::default();
            for (a, b) in [(0, 7), (7, 120), (120, 121), (121, 200)] {
                let part = MessageColumns {
                    locality: loc[a..b].to_vec(),
                    bytes: Int64Array::from(bytes[a..b].to_vec()),
                    duration: Int64Array::from(duration[a..b].to_vec()),
                    send_ts: Some(Int64Array::from(send[a..b].to_vec())),
                };
                fold.add(&part, p.bucket_bytes);
            }
            assert!(fold.held_bytes() >= 16 * 150);
            let got = fold.finish(&p);
            let key = |c: &Criterion| (c.locality, c.bucket, c.criterion_ns, c.samples, c.messages);
            assert_eq!(got.iter().map(key).collect::<Vec<_>>(), expected.iter().map(key).collect::<Vec<_>>());
            assert_eq!(expected.len(), 6);
        }
    }

    #[test]
    fn stratified_sample_is_spread_over_time() {
        // 10 messages in send order with durations 0..9; 2 samples take the middle of each half.
        let m = cols(vec![INTRA; 10], vec![8; 10], (0..10).map(Some).collect());
        let c = criteria(&m, &Params { bucket_bytes: 50, max_samples: 2, min_messages: 1 });
        assert_eq!(c[0].samples, 2);
        assert_eq!(c[0].criterion_ns, Some((2.0 + 7.0) / 2.0));
    }
}
