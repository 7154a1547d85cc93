//! Analyses that sweep each rank's calls on their own (`lod_calls`, `time_profile`,
//! `call_tree`, `compute_deltas`: a stack of open calls per thread) read their input a chunk of
//! whole ranks at a time, when it arrives in rank order: a trace's `calls` and `events` do,
//! in memory and in a store (their scans declare it, `trace_table::rank_ordered`), and so does
//! a view that only filters or projects them. The analysis node then requires its input in
//! rank order in one stream (`plan::Work::ByRank`), which DataFusion gives by merging the
//! scan's partitions as they stream (a sort-preserving merge, no sort), and `InRankOrder`
//! cuts the stream after a rank's last row. It holds a chunk of about `CHUNK_ROWS` rows (more
//! when one rank has more), whatever the size of the trace.
//!
//! A relation not known to be in rank order (a join, an aggregate, a table made with CREATE
//! TABLE AS) is read whole, as before, put in rank order and handed over in chunks the same
//! way (`whole`), so both paths run the same code.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute::{SortOptions, concat_batches, take};
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{exec_err, internal_err};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use crate::plan::ComputeMany;
use crate::stream::{Mapper, Prepare};

/// Rows a chunk of whole ranks holds before it is handed over (a rank is never cut).
pub const CHUNK_ROWS: usize = 1 << 20;

/// The ordering `rank` ascending of column `rank` of a plan's output.
pub fn rank_order(schema: &SchemaRef, rank: usize) -> PhysicalSortExpr {
    PhysicalSortExpr::new(Arc::new(Column::new(schema.field(rank).name(), rank)), SortOptions::default())
}

/// Whether `plan`'s every partition is in rank order (column `rank` of its output).
pub fn is_in_rank_order(plan: &Arc<dyn ExecutionPlan>, rank: usize) -> Result<bool> {
    plan.equivalence_properties().ordering_satisfy([rank_order(&plan.schema(), rank)])
}

/// The rank of every row of column `rank` (a null rank sorts first, as NULLS FIRST puts it).
fn ranks(batch: &RecordBatch, rank: usize) -> Result<Vec<i64>> {
    let column = batch.column(rank);
    let column = match column.data_type() {
        DataType::Int64 => column.clone(),
        _ => arrow::compute::cast(column, &DataType::Int64)?,
    };
    let values = column.as_primitive::<Int64Type>();
    Ok((0..values.len()).map(|i| if values.is_valid(i) { values.value(i) } else { i64::MIN }).collect())
}

/// Hands `inner` the main input in chunks of whole ranks, checking that the ranks never go
/// down (the order the plan asked for; a violation is an error, never a wrong answer).
pub struct InRankOrder {
    inner: Box<dyn Mapper>,
    name: String,
    rank: usize,
    /// The analysis' output.
    output: SchemaRef,
    /// Rows of ranks already ended (a later rank has come).
    done: Vec<RecordBatch>,
    done_rows: usize,
    /// Rows of the last rank seen, which may go on.
    open: Vec<RecordBatch>,
    last: Option<i64>,
    chunk_rows: usize,
}

impl std::fmt::Debug for InRankOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InRankOrder").field("name", &self.name).field("rank", &self.rank).finish_non_exhaustive()
    }
}

impl InRankOrder {
    pub fn new(name: &str, inner: Box<dyn Mapper>, rank: usize, output: SchemaRef) -> Self {
        InRankOrder::with_chunk(name, inner, rank, output, CHUNK_ROWS)
    }

    pub fn with_chunk(name: &str, inner: Box<dyn Mapper>, rank: usize, output: SchemaRef, chunk_rows: usize) -> Self {
        InRankOrder {
            inner,
            name: name.to_string(),
            rank,
            output,
            done: Vec::new(),
            done_rows: 0,
            open: Vec::new(),
            last: None,
            chunk_rows: chunk_rows.max(1),
        }
    }

    /// Hand `rows` over as one chunk (mapped output, possibly none).
    fn hand_over(&mut self, rows: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
        let Some(schema) = rows.first().map(RecordBatch::schema) else { return Ok(Vec::new()) };
        let chunk = concat_batches(&schema, &rows)?;
        drop(rows);
        if chunk.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let out = self.inner.map(&chunk)?;
        Ok(if out.num_rows() > 0 { vec![out] } else { Vec::new() })
    }

    /// The outputs of the chunk this batch completes, if it completes one.
    fn push(&mut self, batch: &RecordBatch) -> Result<Vec<RecordBatch>> {
        let r = ranks(batch, self.rank)?;
        let Some(&last) = r.last() else { return Ok(Vec::new()) };
        let mut previous = self.last.unwrap_or(i64::MIN);
        for &x in &r {
            if x < previous {
                return exec_err!(
                    "{}: its input was to come in rank order and rank {x} came after rank {previous}; \
                     read the relation into a table first (CREATE TABLE t AS SELECT ...) and pass rel => 't'",
                    self.name
                );
            }
            previous = x;
        }
        if self.last.is_some_and(|l| l < last) || self.last.is_none() {
            // The ranks before `last` have ended: the open rank and the batch's rows before it.
            let cut = r.partition_point(|&x| x < last);
            for b in std::mem::take(&mut self.open).into_iter().chain((cut > 0).then(|| batch.slice(0, cut))) {
                self.done_rows += b.num_rows();
                self.done.push(b);
            }
            self.open.push(batch.slice(cut, batch.num_rows() - cut));
        } else {
            self.open.push(batch.clone());
        }
        self.last = Some(last);
        if self.done_rows < self.chunk_rows {
            return Ok(Vec::new());
        }
        self.done_rows = 0;
        let rows = std::mem::take(&mut self.done);
        self.hand_over(rows)
    }
}

impl Mapper for InRankOrder {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let out = self.push(batch)?;
        match out.len() {
            0 => Ok(RecordBatch::new_empty(self.output.clone())),
            1 => Ok(out.into_iter().next().expect("one batch")),
            _ => internal_err!("{}: a batch made more than one chunk", self.name),
        }
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut rows = std::mem::take(&mut self.done);
        rows.append(&mut self.open);
        self.done_rows = 0;
        let mut out = self.hand_over(rows)?;
        out.extend(self.inner.finish()?);
        Ok(out)
    }
}

/// The analysis over a relation read whole: its main input put in rank order (stably, rows of
/// a rank keep their order), then handed over in chunks of whole ranks as a stream would be.
pub fn whole(name: String, prepare: Prepare, rank: usize, output: SchemaRef) -> ComputeMany {
    Arc::new(move |inputs| {
        let mut mapper = InRankOrder::new(&name, prepare(&inputs[1..])?, rank, output.clone());
        let Some(first) = inputs[0].first() else {
            return mapper.finish();
        };
        let all = concat_batches(&first.schema(), &inputs[0])?;
        let r = ranks(&all, rank)?;
        let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
        order.sort_by_key(|&i| r[i as usize]);
        let order = UInt32Array::from(order);
        let columns: Vec<ArrayRef> = all.columns().iter().map(|c| take(c, &order, None)).collect::<Result<_, _>>()?;
        let sorted = RecordBatch::try_new(all.schema(), columns)?;
        drop(all);
        let mut out = Vec::new();
        let mut at = 0;
        while at < sorted.num_rows() {
            let n = (1 << 16).min(sorted.num_rows() - at);
            let mapped = mapper.map(&sorted.slice(at, n))?;
            if mapped.num_rows() > 0 {
                out.push(mapped);
            }
            at += n;
        }
        out.extend(mapper.finish()?);
        Ok(out)
    })
}
