//! Latency criteria and message latency, after PCLVis section 4.1: the "normal" transmission
//! time of a message is learnt from the trace itself, as the median transmission time of the
//! messages of the same size bucket and the same locality (within a node or between nodes).
//! A message's latency is L = duration / criterion; L > 1 marks it delayed.
//!
//! Sampling: at most `max_samples` messages per (locality, bucket) enter the median, chosen by
//! stratified sampling over the bucket's messages in send-time order (the middle message of
//! each of `max_samples` equal strata), so the sample is deterministic and spread over the
//! whole run. Buckets with fewer than `min_messages` messages get no criterion (status
//! 'too_few_messages'); messages whose nodes are unknown form their own group (locality NULL,
//! status 'unknown_locality'). Cost: O(n) grouping plus O(n log n) sorting within buckets, in
//! parallel over buckets.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::Result;
use rayon::prelude::*;

use crate::common::{Args, Compute, Derived, FastMap, Relation, bool_column, int64_column, text_column};

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
        Params { bucket_bytes: 50, max_samples: 10_000, min_messages: 5 }
    }
}

impl Params {
    /// Read bucket_bytes, max_samples, min_messages from argument positions `first..`.
    pub fn from_args(args: &Args<'_>, first: usize) -> Result<Self> {
        let d = Params::default();
        Ok(Params {
            bucket_bytes: args.int(first, d.bucket_bytes, 1)?,
            max_samples: args.int(first + 1, d.max_samples as i64, 1)? as usize,
            min_messages: args.int(first + 2, d.min_messages as i64, 1)? as usize,
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

    /// The relation columns these indices read, and the indices into a scan of only those
    /// columns (in that order), so a function that needs nothing else reads less.
    pub fn projected(&self) -> (Vec<usize>, MessageIndices) {
        let mut cols = vec![self.bytes, self.duration];
        cols.extend(self.send_ts);
        cols.extend(self.intra);
        if let Some((a, b)) = self.nodes {
            cols.extend([a, b]);
        }
        cols.sort_unstable();
        cols.dedup();
        let at = |c: usize| cols.iter().position(|x| *x == c).expect("listed above");
        let inner = MessageIndices {
            bytes: at(self.bytes),
            duration: at(self.duration),
            send_ts: self.send_ts.map(at),
            intra: self.intra.map(at),
            nodes: self.nodes.map(|(a, b)| (at(a), at(b))),
        };
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

fn median(values: &mut [i64]) -> f64 {
    let n = values.len();
    let mid = n / 2;
    let (lower, upper, _) = values.select_nth_unstable(mid);
    let upper = *upper as f64;
    if n % 2 == 1 { upper } else { (lower.iter().copied().max().unwrap_or(0) as f64 + upper) / 2.0 }
}

/// Criteria of every (locality, bucket), ordered by locality then bucket.
pub fn criteria(m: &MessageColumns, p: &Params) -> Vec<Criterion> {
    let mut groups: FastMap<(u8, i64), Vec<(i64, u32)>> = FastMap::default();
    for row in 0..m.duration.len() {
        if let Some(k) = key(m, row, p.bucket_bytes) {
            let order = m.send_ts.as_ref().map_or(row as i64, |s| if s.is_null(row) { i64::MAX } else { s.value(row) });
            groups.entry(k).or_default().push((order, row as u32));
        }
    }
    let mut out: Vec<Criterion> = groups
        .into_par_iter()
        .map(|((locality, bucket), mut rows)| {
            let n = rows.len();
            let m_used = n.min(p.max_samples);
            let criterion_ns = (n >= p.min_messages).then(|| {
                let mut sample: Vec<i64> = if m_used == n {
                    rows.iter().map(|&(_, r)| m.duration.value(r as usize)).collect()
                } else {
                    rows.sort_unstable();
                    (0..m_used)
                        .map(|k| rows[(2 * k + 1) * n / (2 * m_used)])
                        .map(|(_, r)| m.duration.value(r as usize))
                        .collect()
                };
                median(&mut sample)
            });
            Criterion {
                locality,
                bucket,
                criterion_ns,
                samples: if criterion_ns.is_some() { m_used as i64 } else { 0 },
                messages: n as i64,
            }
        })
        .collect();
    out.sort_unstable_by_key(|c| (c.locality, c.bucket));
    out
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

/// The criterion of a row's group, for rows looked up one by one.
fn row_criteria<'a>(m: &'a MessageColumns, p: &'a Params) -> impl Fn(usize) -> Option<f64> + 'a {
    let table: FastMap<(u8, i64), Option<f64>> =
        criteria(m, p).into_iter().map(|c| ((c.locality, c.bucket), c.criterion_ns)).collect();
    move |row| match key(m, row, p.bucket_bytes) {
        Some(k) => table.get(&k).copied().flatten(),
        None => {
            let bytes = if m.bytes.is_null(row) { None } else { Some(m.bytes.value(row).max(0)) };
            bytes.and_then(|b| table.get(&(m.locality[row], b / p.bucket_bytes * p.bucket_bytes)).copied().flatten())
        }
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

/// Criterion and latency L of every row of `m` (None where the criterion is missing or 0).
pub fn latencies(m: &MessageColumns, p: &Params) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let lookup = row_criteria(m, p);
    let n = m.duration.len();
    let mut criterion = Vec::with_capacity(n);
    let mut latency = Vec::with_capacity(n);
    for row in 0..n {
        let c = lookup(row);
        criterion.push(c);
        latency.push(latency_of(m, row, c));
    }
    (criterion, latency)
}

/// Latency L of every row, NaN where it has none: half the memory of `latencies`, for
/// functions that need only L.
pub fn latency_values(m: &MessageColumns, p: &Params) -> Vec<f64> {
    let lookup = row_criteria(m, p);
    (0..m.duration.len()).map(|row| latency_of(m, row, lookup(row)).unwrap_or(f64::NAN)).collect()
}

pub const CRITERIA_ARGS: &[&str] = &["rel", "bucket_bytes", "max_samples", "min_messages"];

/// `latency_criteria([rel], bucket_bytes => 50, max_samples => 10000, min_messages => 5)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LatencyCriteria;

impl TableFunctionImpl for LatencyCriteria {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new("latency_criteria", CRITERIA_ARGS, args.exprs())?;
        let relation = a.relation(args.session(), 0, "messages")?;
        let params = Params::from_args(&a, 1)?;
        let indices = MessageIndices::find("latency_criteria", &relation)?;
        let compute: Compute = Arc::new(move |batches| {
            let m = indices.read(batches)?;
            Ok(vec![criteria_batch(&criteria(&m, &params))?])
        });
        Ok(Arc::new(Derived::new(criteria_schema(), relation, None, compute)))
    }
}

/// `message_latency([rel], bucket_bytes, max_samples, min_messages)`: the relation's rows with
/// criterion_ns, latency and delayed.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct MessageLatency;

impl TableFunctionImpl for MessageLatency {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new("message_latency", CRITERIA_ARGS, args.exprs())?;
        let relation = a.relation(args.session(), 0, "messages")?;
        let params = Params::from_args(&a, 1)?;
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
        let compute: Compute = Arc::new(move |batches| {
            let m = indices.read(batches)?;
            let (criterion, latency) = latencies(&m, &params);
            let mut out = Vec::with_capacity(batches.len());
            let mut offset = 0;
            for b in batches {
                let n = b.num_rows();
                let c = &criterion[offset..offset + n];
                let l = &latency[offset..offset + n];
                let mut columns = b.columns().to_vec();
                columns.push(Arc::new(Float64Array::from(c.to_vec())));
                columns.push(Arc::new(Float64Array::from(l.to_vec())));
                columns.push(Arc::new(l.iter().map(|v| v.map(|x| x > 1.0)).collect::<BooleanArray>()));
                out.push(RecordBatch::try_new(out_schema.clone(), columns)?);
                offset += n;
            }
            Ok(out)
        });
        Ok(Arc::new(Derived::new(schema, relation, None, compute)))
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

    #[test]
    fn stratified_sample_is_spread_over_time() {
        // 10 messages in send order with durations 0..9; 2 samples take the middle of each half.
        let m = cols(vec![INTRA; 10], vec![8; 10], (0..10).map(Some).collect());
        let c = criteria(&m, &Params { bucket_bytes: 50, max_samples: 2, min_messages: 1 });
        assert_eq!(c[0].samples, 2);
        assert_eq!(c[0].criterion_ns, Some((2.0 + 7.0) / 2.0));
    }
}
