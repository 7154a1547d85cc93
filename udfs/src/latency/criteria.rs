//! The latency criteria of PCLVis 4.1: messages grouped by locality and size bucket, the
//! median transmission time of a deterministic pseudo-random sample of each group (`CriteriaFold`),
//! a cluster part's groups sorted for a k-way merge (`CriteriaPartials`, `CriteriaMerge`), and
//! the criteria as a table to look a message's criterion up in (`CriteriaTable`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::Result;
use rayon::prelude::*;

use crate::latency::params::{BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES};
use commdb_analysis::args::{Args, FromArg, Group};
use commdb_analysis::columns::{bool_column, int64_column, text_column};
use commdb_analysis::derived::Derived;
use commdb_analysis::relation::{Projected, Relation};
use commdb_analysis::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;

use super::{LATENCY_CRITERIA, latency_of};

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

/// Read from the arguments bucket_bytes, max_samples and min_messages.
impl Group for Params {
    const NAMES: &'static [&'static str] = &[BUCKET_BYTES.name, MAX_SAMPLES.name, MIN_MESSAGES.name];

    fn read(a: &Args) -> Result<Self> {
        Ok(Params {
            bucket_bytes: i64::from_arg(a, BUCKET_BYTES.name)?,
            max_samples: usize::from_arg(a, MAX_SAMPLES.name)?,
            min_messages: usize::from_arg(a, MIN_MESSAGES.name)?,
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
pub(crate) const NEEDED: [&str; 2] = ["bytes", "duration"];

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
        // The nodes are read only where intra_node is not there to say the locality.
        let nodes = match (intra, schema.index_of("src_node"), schema.index_of("dst_node")) {
            (None, Ok(a), Ok(b)) => Some((a, b)),
            _ => None,
        };
        if intra.is_none() && nodes.is_none() {
            return datafusion::common::plan_err!(
                "{function}: {} needs an intra_node column or src_node and dst_node columns",
                relation.described()
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
pub(crate) fn key(m: &MessageColumns, row: usize, bucket_bytes: i64) -> Option<(u8, i64)> {
    if m.duration.is_null(row) || m.bytes.is_null(row) {
        return None;
    }
    let bytes = m.bytes.value(row).max(0);
    Some((m.locality[row], bytes / bucket_bytes * bucket_bytes))
}

pub(crate) fn median(values: &mut [i64]) -> f64 {
    let n = values.len();
    let mid = n / 2;
    let (lower, upper, _) = values.select_nth_unstable(mid);
    let upper = *upper as f64;
    if n % 2 == 1 { upper } else { (lower.iter().copied().max().unwrap_or(0) as f64 + upper) / 2.0 }
}

/// Criteria of every (locality, bucket), ordered by locality then bucket.
pub fn criteria(m: &MessageColumns, p: &Params) -> Vec<Criterion> {
    let mut fold = CriteriaFold::new(*p);
    fold.add(m);
    fold.finish()
}

/// A message in its group's sample order: (its sample key, duration).
pub(crate) type Keyed = (i64, i64);

/// The key that orders a group's messages for the sample: a mix (splitmix64's finaliser) of
/// the message's send time (or its row, without send_ts) and its duration, so that the
/// messages with the smallest keys are a pseudo-random sample fixed by the messages themselves,
/// whatever order they are read in. Messages with the same send time and duration have the
/// same key and the same duration, so whichever of them is taken, the sample is the same.
#[inline]
pub(crate) fn sample_key(place: i64, duration: i64) -> i64 {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    mix((place as u64).wrapping_add(0x9e37_79b9_7f4a_7c15) ^ mix(duration as u64).rotate_left(32)) as i64
}

/// The `m` messages of a group with the smallest (key, duration), gathered as they come: at
/// most 2m are held, and when 2m are, the m smallest are kept and anything not below the
/// largest of them is turned away after.
#[derive(Debug, Default, Clone)]
pub(crate) struct Smallest {
    /// Messages seen.
    n: usize,
    kept: Vec<Keyed>,
    /// The largest kept after the last shrink: a message not below it cannot enter.
    bound: Option<Keyed>,
}

impl Smallest {
    #[inline]
    fn push(&mut self, x: Keyed, m: usize) {
        self.n += 1;
        if self.bound.is_some_and(|b| x >= b) {
            return;
        }
        self.kept.push(x);
        if self.kept.len() >= 2 * m {
            self.shrink(m);
        }
    }

    fn shrink(&mut self, m: usize) {
        if self.kept.len() > m {
            self.kept.select_nth_unstable(m - 1);
            self.kept.truncate(m);
            self.kept.shrink_to(2 * m);
            // The selection put the largest of the m kept last.
            self.bound = Some(self.kept[m - 1]);
        }
    }

    /// The sample: the (at most) m smallest, in (key, duration) order.
    fn sample(mut self, m: usize) -> Vec<Keyed> {
        self.shrink(m);
        self.kept.sort_unstable();
        self.kept
    }
}

/// The criteria's groups gathered batch by batch: per (locality, bucket), the count of its
/// messages and its sample so far (`Smallest`), at most 2 x max_samples x 16 bytes a group
/// whatever the number of messages.
#[derive(Debug)]
pub struct CriteriaFold {
    params: Params,
    groups: FastMap<(u8, i64), Smallest>,
    /// Rows added so far.
    rows: u64,
    /// Messages the groups hold (held_bytes is asked after every batch).
    kept: usize,
}

impl CriteriaFold {
    pub fn new(params: Params) -> CriteriaFold {
        CriteriaFold { params, groups: FastMap::default(), rows: 0, kept: 0 }
    }

    pub fn add(&mut self, m: &MessageColumns) {
        let (bucket_bytes, samples) = (self.params.bucket_bytes, self.params.max_samples);
        for row in 0..m.duration.len() {
            let at = self.rows + row as u64;
            if let Some(k) = key(m, row, bucket_bytes) {
                let place =
                    m.send_ts.as_ref().map_or(at as i64, |s| if s.is_null(row) { i64::MAX } else { s.value(row) });
                let duration = m.duration.value(row);
                let group = self.groups.entry(k).or_default();
                let before = group.kept.len();
                group.push((sample_key(place, duration), duration), samples);
                self.kept = self.kept + group.kept.len() - before;
            }
        }
        self.rows += m.duration.len() as u64;
    }

    /// Bytes the groups hold (their entries; the vectors' room to grow is not counted).
    pub fn held_bytes(&self) -> usize {
        self.kept * std::mem::size_of::<Keyed>() + 64 * self.groups.len()
    }

    /// The criteria: per group, the median of the durations of its sample of at most
    /// `max_samples` messages, those with the smallest `sample_key`.
    pub fn finish(self) -> Vec<Criterion> {
        let p = self.params;
        let mut out: Vec<Criterion> = self
            .groups
            .into_par_iter()
            .map(|(key, group)| {
                let n = group.n;
                let m_used = n.min(p.max_samples);
                let sample: Vec<i64> = if n < p.min_messages {
                    Vec::new()
                } else {
                    group.sample(m_used).into_iter().map(|x| x.1).collect()
                };
                criterion_of(key, n, m_used, sample, &p)
            })
            .collect();
        out.sort_unstable_by_key(|c| (c.locality, c.bucket));
        out
    }

    /// The groups in (locality, bucket) order, each with its count and its sample in (key,
    /// duration) order: a part's partials (`CriteriaPartials`).
    fn sorted(self) -> Vec<((u8, i64), usize, Vec<Keyed>)> {
        let m = self.params.max_samples;
        let mut groups: Vec<((u8, i64), usize, Vec<Keyed>)> =
            self.groups.into_iter().map(|(key, g)| (key, g.n, g.sample(m))).collect();
        groups.sort_unstable_by_key(|g| g.0);
        groups
    }
}

/// The criterion of a group of `n` messages from its sample of `m_used` durations.
pub(crate) fn criterion_of(key: (u8, i64), n: usize, m_used: usize, mut sample: Vec<i64>, p: &Params) -> Criterion {
    let criterion_ns = (n >= p.min_messages && !sample.is_empty()).then(|| median(&mut sample));
    Criterion {
        locality: key.0,
        bucket: key.1,
        criterion_ns,
        samples: if criterion_ns.is_some() { m_used as i64 } else { 0 },
        messages: n as i64,
    }
}

/// The schema of a part's partial criteria (a cluster's task's, commdb_analysis::derived::Spread): per
/// group in (locality, bucket) order, a row of kind 0 whose duration is the part's count of
/// the group's messages, then a row of kind 1 per message of its sample, in (key, duration) order.
pub(crate) fn criteria_partials() -> SchemaRef {
    let fields = ["locality", "bucket", "kind", "place", "duration"].map(|n| Field::new(n, DataType::Int64, false));
    Arc::new(Schema::new(fields.to_vec()))
}

/// Rows of partials per batch (DataFusion's batch size: the merge in order holds a batch of
/// every part at a time).
pub(crate) const PARTIAL_ROWS: usize = 8192;

/// A part's messages gathered into their groups (`CriteriaFold`), then given as partials
/// (`criteria_partials`), a batch at a time.
pub(crate) struct CriteriaPartials {
    indices: MessageIndices,
    fold: CriteriaFold,
    /// After the part has ended: the groups, the next group and the next of its sample's rows
    /// (0: its count).
    sorted: Vec<((u8, i64), usize, Vec<Keyed>)>,
    at: (usize, usize),
}

impl Mapper for CriteriaPartials {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.fold.add(&self.indices.read(std::slice::from_ref(batch))?);
        Ok(RecordBatch::new_empty(criteria_partials()))
    }

    fn held_bytes(&self) -> usize {
        self.fold.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let empty = CriteriaFold::new(self.fold.params);
        self.sorted = std::mem::replace(&mut self.fold, empty).sorted();
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let mut columns: [Vec<i64>; 5] = Default::default();
        while columns[0].len() < PARTIAL_ROWS {
            let Some((key, n, rows)) = self.sorted.get(self.at.0) else { break };
            let mut row = |kind: i64, place: i64, duration: i64| {
                for (c, v) in columns.iter_mut().zip([i64::from(key.0), key.1, kind, place, duration]) {
                    c.push(v);
                }
            };
            if self.at.1 == 0 {
                row(0, 0, *n as i64);
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

/// The criteria from every part's partials merged in (locality, bucket, kind, key, duration)
/// order: a group's counts come first, then the parts' samples in (key, duration) order, of
/// which the first `max_samples` are the whole group's sample.
pub(crate) struct CriteriaMerge {
    params: Params,
    /// The group being read, its messages, the sample's size and the sample.
    group: Option<(u8, i64)>,
    n: usize,
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
                (self.n, self.m_used) = (0, 0);
            }
            if kind.value(i) == 0 {
                self.n += duration.value(i) as usize;
                self.m_used = self.n.min(self.params.max_samples);
                continue;
            }
            if self.n >= self.params.min_messages && self.sample.len() < self.m_used {
                self.sample.push(duration.value(i));
            }
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
pub(crate) struct CriteriaMapper {
    indices: MessageIndices,
    fold: CriteriaFold,
}

impl Mapper for CriteriaMapper {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.fold.add(&self.indices.read(std::slice::from_ref(batch))?);
        Ok(RecordBatch::new_empty(criteria_schema()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let empty = CriteriaFold::new(self.fold.params);
        Ok(vec![criteria_batch(&std::mem::replace(&mut self.fold, empty).finish())?])
    }

    fn held_bytes(&self) -> usize {
        self.fold.held_bytes()
    }
}

/// `latency_criteria` of `relation` read with `projection` (whose columns `indices` reads), as
/// a streamed analysis: the input of another analysis that needs the criteria before its
/// messages stream.
pub(crate) fn criteria_of(
    relation: Relation,
    projection: Vec<usize>,
    indices: MessageIndices,
    params: Params,
) -> Projected {
    let reference = datafusion::common::TableReference::bare(format!("criteria of {}", relation.reference));
    let spread = indices.has_send_ts().then(|| {
        // Over a cluster's parts: each part's groups' counts and samples, merged in (key,
        // duration) order into the whole groups' samples (a message's key comes from its
        // send_ts, which every part knows; without send_ts from its row, known only to one task
        // reading them all).
        let indices = indices.clone();
        let partials: Prepare = Arc::new(move |_| {
            let (sorted, at, fold) = (Vec::new(), (0, 0), CriteriaFold::new(params));
            Ok(Box::new(CriteriaPartials { indices: indices.clone(), fold, sorted, at }) as Box<dyn Mapper>)
        });
        let merge: Prepare = Arc::new(move |_| {
            let (group, n, m_used, sample, done) = (None, 0, 0, Vec::new(), Vec::new());
            Ok(Box::new(CriteriaMerge { params, group, n, m_used, sample, done }) as Box<dyn Mapper>)
        });
        let work = commdb_analysis::plan::Work::Streamed(partials);
        commdb_analysis::derived::Spread::SortedMerge { schema: criteria_partials(), work, sorted_on: 5, merge }
    });
    let prepare: Prepare = Arc::new(move |_| {
        let fold = CriteriaMapper { indices: indices.clone(), fold: CriteriaFold::new(params) };
        Ok(Box::new(fold) as Box<dyn Mapper>)
    });
    let mut derived = Derived::streamed(criteria_schema(), vec![(relation, Some(projection))], prepare);
    if let Some(spread) = spread {
        derived = derived.spreading(spread);
    }
    (Relation { reference, provider: Arc::new(derived.named("latency_criteria")) }, None)
}

pub(crate) fn locality_name(code: u8) -> Option<&'static str> {
    match code {
        INTRA => Some("intra"),
        INTER => Some("inter"),
        _ => None,
    }
}

pub(crate) fn criteria_schema() -> SchemaRef {
    LATENCY_CRITERIA.schema()
}

pub(crate) fn criteria_batch(rows: &[Criterion]) -> Result<RecordBatch> {
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
    pub(crate) bucket_bytes: i64,
    pub(crate) map: FastMap<(u8, i64), Option<f64>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::latencies;
    use arrow::array::{ArrayRef, Int64Array};
    use commdb_analysis::columns::int64_column;

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
                let fold = CriteriaFold::new(p);
                let indices = MessageIndices { bytes: 0, duration: 0, send_ts: Some(0), intra: None, nodes: None };
                let mut partials = CriteriaPartials { indices, fold, sorted: Vec::new(), at: (0, 0) };
                partials.fold.add(&slice(&loc, &bytes, &duration, &send, part));
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
            let mut merge =
                CriteriaMerge { params: p, group: None, n: 0, m_used: 0, sample: Vec::new(), done: Vec::new() };
            // In two batches, cut inside a group.
            let cut = merged.num_rows() / 2 + 1;
            merge.map(&merged.slice(0, cut)).unwrap();
            merge.map(&merged.slice(cut, merged.num_rows() - cut)).unwrap();
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
            let mut fold = CriteriaFold::new(p);
            for (a, b) in [(0, 7), (7, 120), (120, 121), (121, 200)] {
                let part = MessageColumns {
                    locality: loc[a..b].to_vec(),
                    bytes: Int64Array::from(bytes[a..b].to_vec()),
                    duration: Int64Array::from(duration[a..b].to_vec()),
                    send_ts: Some(Int64Array::from(send[a..b].to_vec())),
                };
                fold.add(&part);
            }
            // Every message is held while a group has fewer than twice max_samples, at most
            // twice max_samples of a group after.
            if max_samples == 1000 {
                assert!(fold.held_bytes() >= 16 * 150);
            } else {
                assert!(fold.held_bytes() <= 6 * (16 * 2 * max_samples + 64), "{}", fold.held_bytes());
            }
            let got = fold.finish();
            let key = |c: &Criterion| (c.locality, c.bucket, c.criterion_ns, c.samples, c.messages);
            assert_eq!(got.iter().map(key).collect::<Vec<_>>(), expected.iter().map(key).collect::<Vec<_>>());
            assert_eq!(expected.len(), 6);
        }
    }

    #[test]
    fn the_sample_is_the_smallest_keys_whatever_the_order() {
        for (n, m) in [(1usize, 1usize), (7, 3), (1000, 10), (1000, 999), (12_345, 100), (5000, 1)] {
            // Places with many ties, durations with repeats, in a scrambled order.
            let rows: Vec<(i64, i64)> =
                (0..n).map(|i| (((i * 7919) % 97) as i64, ((i * 104_729) % 1_000) as i64 - 500)).collect();
            let mut sorted: Vec<Keyed> = rows.iter().map(|&(p, d)| (sample_key(p, d), d)).collect();
            sorted.sort_unstable();
            sorted.truncate(m);
            for order in [rows.clone(), rows.iter().rev().copied().collect()] {
                let mut s = Smallest::default();
                for &(p, d) in &order {
                    s.push((sample_key(p, d), d), m);
                    assert!(s.kept.len() < 2 * m.max(1) + 1);
                }
                assert_eq!(s.n, n);
                assert_eq!(s.sample(m), sorted, "n {n}, m {m}");
            }
        }
    }

    #[test]
    fn the_sample_is_spread_over_the_run_and_its_median_near_the_whole_median() {
        // 200,000 messages of one group whose duration grows with send time (a run that
        // slows down), ten to a send time: the median of 10,000 of them is within 1% of the
        // median of all, and the sample takes about as many from each tenth of the run.
        let n = 200_000i64;
        let send: Vec<i64> = (0..n).map(|i| i / 10 * 1000).collect();
        let duration: Vec<Option<i64>> = (0..n).map(|i| Some(1000 + i / 20 + (i * 7919) % 300)).collect();
        let m = MessageColumns {
            locality: vec![INTER; n as usize],
            bytes: Int64Array::from(vec![8; n as usize]),
            duration: Int64Array::from(duration.clone()),
            send_ts: Some(Int64Array::from(send.clone())),
        };
        let p = Params { bucket_bytes: 50, max_samples: 10_000, min_messages: 5 };
        let c = criteria(&m, &p);
        let mut all: Vec<i64> = duration.iter().map(|d| d.unwrap()).collect();
        let whole = median(&mut all);
        let got = c[0].criterion_ns.unwrap();
        assert!((got - whole).abs() / whole < 0.01, "sample median {got}, whole {whole}");
        assert_eq!((c[0].samples, c[0].messages), (10_000, n));
        let mut s = Smallest::default();
        for i in 0..n as usize {
            s.push((sample_key(send[i], duration[i].unwrap()), i as i64), 10_000);
        }
        let mut tenths = [0usize; 10];
        for (_, i) in s.sample(10_000) {
            tenths[(i * 10 / n) as usize] += 1;
        }
        assert!(tenths.iter().all(|&t| (850..=1150).contains(&t)), "{tenths:?}");
    }
}
