//! Latency criteria and message latency, after PCLVis section 4.1: the "normal" transmission
//! time of a message is learnt from the trace itself, as the median transmission time of the
//! messages of the same size bucket and the same locality (within a node or between nodes).
//! A message's latency is L = duration / criterion; L > 1 marks it delayed.
//!
//! Sampling: at most `max_samples` messages per (locality, bucket) enter the median: those
//! with the smallest key, a hash of the message's send time and duration, so the sample is a
//! pseudo-random one fixed by the messages themselves, spread over the run as the messages
//! are, and independent of the order they are read in. As the messages stream, each group
//! holds at most twice `max_samples` of them (`CriteriaFold`: memory bounded by the groups,
//! not the messages); on a cluster each part sends its groups' counts and samples, merged in
//! key order (`CriteriaPartials`, `CriteriaMerge`). Buckets with fewer than `min_messages`
//! messages get no criterion (status 'too_few_messages'); messages whose nodes are unknown
//! form their own group (locality NULL, status 'unknown_locality'). Cost: O(n) (a hash and a
//! comparison a message, a selection when a group's held messages double), then a sort of
//! each sample.

pub mod regions;
pub mod trend;

mod baseline;
mod criteria;
pub mod params;

pub use baseline::*;
pub use criteria::*;

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, Float64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::relation::{Projected, Relation};
use commdb_analysis::stream::{Mapper, Prepare};

/// L = duration / criterion, None where the criterion is missing or 0 or the duration NULL.
#[inline]
pub(crate) fn latency_of(m: &MessageColumns, row: usize, criterion: Option<f64>) -> Option<f64> {
    match criterion {
        Some(c) if c > 0.0 && !m.duration.is_null(row) => Some(m.duration.value(row) as f64 / c),
        _ => None,
    }
}

/// Criterion and latency L of every row of `m`, against criteria learnt from `m` itself.
pub fn latencies(m: &MessageColumns, p: &Params) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    CriteriaTable::new(&criteria(m, p), p.bucket_bytes).latencies(m)
}

/// The relation of messages an analysis of latency reads.
pub const MESSAGES: Param =
    param("rel", Type::Relation, ParamDefault::Text("messages"), "the matched messages to analyse");

pub const LATENCY_CRITERIA: Function = Function {
    name: "latency_criteria",
    params: &[MESSAGES, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES],
    output: Output::Columns(&[
        col("locality", text, "intra (both ranks on one node), inter, or NULL when a node is unknown"),
        col("size_bucket", int64, "message size bucket: bytes / bucket_bytes").never_null(),
        col("criterion_ns", float64, "median transmission time of the sampled messages (NULL: too few)"),
        col("samples", int64, "messages that entered the median").never_null(),
        col("messages", int64, "messages of the locality and bucket").never_null(),
        col("status", text, "ok, too_few_messages or unknown_locality").never_null(),
    ]),
    description: "median transmission time per locality (intra/inter node) and message-size bucket (PCLVis 4.1)",
    make: Make::Table(latency_criteria),
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
    make: Make::Table(message_latency),
};

/// The inputs of a derived table that reads `relation` (with `projection`) and the baseline's
/// extra input, if any.
pub fn with_baseline(relation: Relation, projection: Option<Vec<usize>>, extra: Option<Projected>) -> Vec<Projected> {
    let mut inputs = vec![(relation, projection)];
    inputs.extend(extra);
    inputs
}

arguments! {
    struct CriteriaArgs(LATENCY_CRITERIA) {
        rel: Relation,
        ..params: Params,
    }
}

arguments! {
    struct LatencyArgs(MESSAGE_LATENCY) {
        rel: Relation,
        ..baseline: BaselineArgs,
    }
}

fn latency_criteria(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let CriteriaArgs { rel: relation, params } = CriteriaArgs::read(a)?;
    // Only the columns the criteria need are read.
    let (projection, indices) = MessageIndices::find("latency_criteria", &relation)?.projected();
    Ok(criteria_of(relation, projection, indices, params).0.provider)
}

fn message_latency(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let LatencyArgs { rel: relation, baseline } = LatencyArgs::read(a)?;
    let (baseline, extra) = Baseline::plan(a.function, &baseline, a.session, &relation)?;
    let indices = MessageIndices::find("message_latency", &relation)?;
    let input = relation.schema();
    for name in ["criterion_ns", "latency", "delayed"] {
        if input.index_of(name).is_ok() {
            return datafusion::common::plan_err!(
                "message_latency: {} already has a column '{name}'",
                relation.described()
            );
        }
    }
    let schema = MESSAGE_LATENCY.schema_after(&input);
    let out_schema = schema.clone();
    // The messages stream through; the criteria come first from a second input: the five
    // columns they need, of the relation itself or of its trace's messages.
    let extra = baseline.streamed_input(&relation, &indices, extra);
    // A query that reads few of its columns reads only those of the messages and the ones the
    // latencies need.
    let reads = indices.columns();
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
    // Each message's latency needs only the criteria, which every task reads whole: on a
    // distributed engine a task per part of the messages.
    let derived = Derived::streamed(schema, with_baseline(relation, None, extra), prepare);
    Ok(Arc::new(derived.spreading(commdb_analysis::derived::Spread::Rows).passing_through(reads)?))
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

    /// The messages come with only their columns `input`: the latencies read theirs there, and
    /// the output is those columns, then the three of its own.
    fn narrowed(&mut self, input: &[usize]) -> Result<()> {
        let at = |c: usize| input.iter().position(|&i| i == c);
        if let Some(missing) = self.indices.columns().into_iter().find(|&c| at(c).is_none()) {
            return datafusion::common::internal_err!("message_latency: not given the messages' column {missing}");
        }
        self.indices = self.indices.moved(|c| at(c).unwrap_or_default());
        let passed = self.schema.fields().len() - 3;
        let columns: Vec<usize> = input.iter().copied().chain(passed..passed + 3).collect();
        self.schema = Arc::new(self.schema.project(&columns)?);
        Ok(())
    }
}
