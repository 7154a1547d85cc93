//! Analyses that sweep each rank's calls on their own (`lod_calls`, `time_profile`,
//! `call_tree`, `compute_deltas`: a stack of open calls per thread) read their input a chunk of
//! whole ranks at a time, when it arrives in rank order: a store's `calls` and `events` do
//! (their scans declare it, `model::rank_ordered`), and so does a view that only filters
//! or projects them. The analysis node then requires its input in
//! rank order in one stream (`plan::Work::ByRank`), which DataFusion gives by merging the
//! scan's partitions as they stream (a sort-preserving merge, no sort), and `InRankOrder`
//! cuts the stream after a rank's last row. It holds a chunk of whole ranks of about a
//! sixteenth of the memory budget (at most `CHUNK_BYTES`; more when one rank alone has more),
//! whatever the size of the trace, and reserves it, twice over for the sweep's working data,
//! from the budget: a rank too big for the budget is an error that says so. A sweep whose
//! working data is many times its input (`Mapper::working_ratio`: `wait_states` over threads
//! builds every thread's stretches and waits) gets chunks that many times smaller, reserved that
//! many times over.
//!
//! A relation not known to be in rank order (a trace's tables in memory, a join, an aggregate,
//! a table made with CREATE TABLE AS) is read whole, as before, and swept as one chunk
//! (`whole`), so both paths run the same code.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{exec_err, internal_err};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use crate::budget::held_bytes;
use crate::stream::{Mapper, Prepare};

/// Bytes of input a chunk of whole ranks holds at most before it is handed over (a rank is
/// never cut): about a million calls.
pub const CHUNK_BYTES: usize = 64 << 20;

/// The bytes of a chunk under a memory budget of `budget` bytes (None: unlimited).
pub fn chunk_bytes(budget: Option<usize>) -> usize {
    budget.map_or(CHUNK_BYTES, |b| (b / 16).clamp(64 << 10, CHUNK_BYTES))
}

/// What the chunks held answer to: the session's memory pool.
#[derive(Debug)]
pub struct ChunkBudget {
    pub reservation: datafusion::execution::memory_pool::MemoryReservation,
    pub pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool>,
}

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
    /// Rows of ranks already ended (a later rank has come), and their bytes.
    done: Vec<RecordBatch>,
    done_bytes: usize,
    /// Rows of the last rank seen, which may go on, and their bytes.
    open: Vec<RecordBatch>,
    open_bytes: usize,
    last: Option<i64>,
    chunk_bytes: usize,
    /// Bytes of working data of the inner sweep per byte of its chunk.
    ratio: usize,
    budget: Option<ChunkBudget>,
}

impl std::fmt::Debug for InRankOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InRankOrder").field("name", &self.name).field("rank", &self.rank).finish_non_exhaustive()
    }
}

impl InRankOrder {
    /// Hands `inner` chunks of about `chunk_bytes` (divided by its working ratio), reserving
    /// them from `budget` if given.
    pub fn new(
        name: &str,
        inner: Box<dyn Mapper>,
        rank: usize,
        output: SchemaRef,
        chunk_bytes: usize,
        budget: Option<ChunkBudget>,
    ) -> Self {
        let ratio = inner.working_ratio().max(1);
        InRankOrder {
            inner,
            name: name.to_string(),
            rank,
            output,
            done: Vec::new(),
            done_bytes: 0,
            open: Vec::new(),
            open_bytes: 0,
            last: None,
            chunk_bytes: (chunk_bytes / ratio).max(1),
            ratio,
            budget,
        }
    }

    /// Reserve what is held, over again for the sweep's working data.
    fn reserve(&mut self) -> Result<()> {
        let held = (1 + self.ratio) * (self.done_bytes + self.open_bytes);
        let Some(b) = &mut self.budget else { return Ok(()) };
        if b.reservation.try_resize(held).is_err() {
            let rows = self.done.iter().chain(&self.open).map(RecordBatch::num_rows).sum();
            return Err(crate::budget::over_budget(
                &self.name,
                &b.pool,
                held,
                rows,
                "sweeping a chunk of whole ranks of",
            ));
        }
        Ok(())
    }

    /// Hand `rows` over as one chunk (mapped output, possibly none).
    fn hand_over(&mut self, rows: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
        let rows: Vec<RecordBatch> = rows.into_iter().filter(|b| b.num_rows() > 0).collect();
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.inner.map_many(&rows)?;
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
            self.done.append(&mut self.open);
            self.done_bytes += std::mem::take(&mut self.open_bytes);
            if cut > 0 {
                let before = batch.slice(0, cut);
                self.done_bytes += held_bytes(&before);
                self.done.push(before);
            }
            let rest = batch.slice(cut, batch.num_rows() - cut);
            self.open_bytes = held_bytes(&rest);
            self.open.push(rest);
        } else {
            self.open_bytes += held_bytes(batch);
            self.open.push(batch.clone());
        }
        self.last = Some(last);
        self.reserve()?;
        if self.done_bytes < self.chunk_bytes {
            return Ok(Vec::new());
        }
        self.done_bytes = 0;
        let rows = std::mem::take(&mut self.done);
        let out = self.hand_over(rows)?;
        self.reserve()?;
        Ok(out)
    }
}

impl Mapper for InRankOrder {
    /// What the analysis folds (the chunk held is reserved on its own).
    fn held_bytes(&self) -> usize {
        self.inner.held_bytes()
    }

    fn finish_bytes(&self) -> usize {
        self.inner.finish_bytes()
    }

    fn working_ratio(&self) -> usize {
        self.ratio
    }

    fn projected(&mut self, projection: &[usize]) -> bool {
        self.inner.projected(projection)
    }

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
        (self.done_bytes, self.open_bytes) = (0, 0);
        let mut out = self.hand_over(rows)?;
        self.reserve()?;
        out.extend(self.inner.finish()?);
        Ok(out)
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        self.inner.more()
    }
}

/// The mapper of an analysis streamed by rank: `prepare`'s, handed chunks of whole ranks
/// whose size follows the budget of `pool` and which it reserves.
pub fn in_order(
    name: &str,
    prepare: Prepare,
    rank: usize,
    output: SchemaRef,
    pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool>,
) -> Prepare {
    let wrap = wrapper(name, rank, output, pool);
    Arc::new(move |held| Ok(wrap(prepare(held)?)))
}

/// Wraps a mapper so that it is handed chunks of whole ranks whose size follows the budget of
/// `pool` and which it reserves.
pub fn wrapper(
    name: &str,
    rank: usize,
    output: SchemaRef,
    pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool>,
) -> crate::stream::Wrap {
    use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit};
    let chunk = chunk_bytes(match pool.memory_limit() {
        MemoryLimit::Finite(b) => Some(b),
        _ => None,
    });
    let name = name.to_string();
    Arc::new(move |inner| {
        let reservation = MemoryConsumer::new(format!("{name} chunk of ranks")).register(&pool);
        let budget = ChunkBudget { reservation, pool: pool.clone() };
        Box::new(InRankOrder::new(&name, inner, rank, output.clone(), chunk, Some(budget))) as Box<dyn Mapper>
    })
}

/// The analysis over a relation read whole (not known to be in rank order): every rank's rows
/// are in it, so it is swept as one chunk, as it is (the sweeps group rows by rank and thread
/// themselves).
pub fn whole(prepare: &Prepare, inputs: &[Vec<RecordBatch>]) -> Result<Vec<RecordBatch>> {
    let mut mapper = prepare(&inputs[1..])?;
    let rows: Vec<RecordBatch> = inputs[0].iter().filter(|b| b.num_rows() > 0).cloned().collect();
    let mut out = Vec::new();
    if !rows.is_empty() {
        let mapped = mapper.map_many(&rows)?;
        if mapped.num_rows() > 0 {
            out.push(mapped);
        }
    }
    out.extend(mapper.finish()?);
    while let Some(more) = mapper.more()? {
        out.push(more);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{Field, Schema};
    use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryConsumer, MemoryPool};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, true),
            Field::new("row", DataType::Int64, false),
        ]))
    }

    fn batch(ranks: &[Option<i64>], first_row: i64) -> RecordBatch {
        let rows = (first_row..first_row + ranks.len() as i64).collect::<Vec<_>>();
        let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ranks.to_vec())), Arc::new(Int64Array::from(rows))];
        RecordBatch::try_new(schema(), columns).unwrap()
    }

    /// A chunk as (rank, row) pairs.
    type Chunk = Vec<(Option<i64>, i64)>;

    /// Records the chunks it is handed, and answers with nothing.
    struct Chunks(Arc<std::sync::Mutex<Vec<Chunk>>>);

    impl Mapper for Chunks {
        fn map(&mut self, b: &RecordBatch) -> Result<RecordBatch> {
            let (r, n) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
            self.0
                .lock()
                .unwrap()
                .push((0..b.num_rows()).map(|i| (r.is_valid(i).then(|| r.value(i)), n.value(i))).collect());
            Ok(RecordBatch::new_empty(schema()))
        }
    }

    fn chunks_of(batches: &[RecordBatch], chunk_bytes: usize) -> Result<Vec<Chunk>> {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut m = InRankOrder::new("test", Box::new(Chunks(seen.clone())), 0, schema(), chunk_bytes, None);
        for b in batches {
            m.map(b)?;
        }
        m.finish()?;
        let out = seen.lock().unwrap().clone();
        Ok(out)
    }

    #[test]
    fn chunks_hold_whole_ranks_in_order_and_every_row_once() {
        let batches = [
            batch(&[None, Some(0), Some(0), Some(1)], 0),
            batch(&[Some(1), Some(1)], 4),
            batch(&[Some(1), Some(2), Some(3), Some(3)], 6),
            batch(&[Some(3)], 10),
            batch(&[], 11),
            batch(&[Some(5), Some(7), Some(7)], 11),
        ];
        for chunk_bytes in [1, 40, 100, 1 << 20] {
            let chunks = chunks_of(&batches, chunk_bytes).unwrap();
            let rows: Vec<i64> = chunks.iter().flatten().map(|x| x.1).collect();
            assert_eq!(rows, (0..14).collect::<Vec<_>>(), "chunk of {chunk_bytes} bytes");
            let mut owner = std::collections::HashMap::new();
            for (k, c) in chunks.iter().enumerate() {
                for (r, _) in c {
                    assert_eq!(*owner.entry(*r).or_insert(k), k, "rank {r:?} cut, chunks of {chunk_bytes} bytes");
                }
            }
            if chunk_bytes == 1 {
                // A batch that ends ranks hands them over at once, as one chunk.
                assert_eq!(chunks.len(), 4, "{chunks:?}");
                assert_eq!(
                    chunks[1].iter().map(|x| x.0).collect::<Vec<_>>(),
                    [Some(1), Some(1), Some(1), Some(1), Some(2)]
                );
            }
            if chunk_bytes == 1 << 20 {
                assert_eq!(chunks.len(), 1);
            }
        }
    }

    #[test]
    fn ranks_out_of_order_are_an_error_that_says_what_to_do() {
        let batches = [batch(&[Some(0), Some(2)], 0), batch(&[Some(1)], 2)];
        let e = chunks_of(&batches, 1).unwrap_err().to_string();
        assert!(e.contains("test: its input was to come in rank order and rank 1 came after rank 2"), "{e}");
        assert!(e.contains("CREATE TABLE"), "{e}");
        let e = chunks_of(&[batch(&[Some(3), Some(2)], 0)], 1).unwrap_err().to_string();
        assert!(e.contains("rank 2 came after rank 3"), "{e}");
    }

    #[test]
    fn a_rank_bigger_than_the_budget_is_an_error_and_the_reservation_follows_the_chunks() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(4096));
        let budget = |pool: &Arc<dyn MemoryPool>| ChunkBudget {
            reservation: MemoryConsumer::new("test").register(pool),
            pool: pool.clone(),
        };
        // Rank 0 alone: 200 rows of two Int64 columns (3.2 kB, 6.4 kB with the sweep's share).
        let big = batch(&vec![Some(0); 200], 0);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut m = InRankOrder::new("test", Box::new(Chunks(seen.clone())), 0, schema(), 1024, Some(budget(&pool)));
        let e = m.map(&big).unwrap_err().to_string();
        assert!(e.contains("test: sweeping a chunk of whole ranks of its input (200 rows so far)"), "{e}");
        assert!(e.contains("memory budget"), "{e}");
        // Small ranks pass, a chunk at a time; nothing stays reserved at the end.
        let mut m = InRankOrder::new("test", Box::new(Chunks(seen.clone())), 0, schema(), 512, Some(budget(&pool)));
        for k in 0..20 {
            m.map(&batch(&vec![Some(k); 20], 20 * k)).unwrap();
            assert!(pool.reserved() <= 4096);
        }
        m.finish().unwrap();
        assert!(seen.lock().unwrap().len() > 2);
        drop(m);
        assert_eq!(pool.reserved(), 0);
    }

    /// `Chunks` with a working ratio.
    struct Heavy(Chunks, usize);

    impl Mapper for Heavy {
        fn map(&mut self, b: &RecordBatch) -> Result<RecordBatch> {
            self.0.map(b)
        }

        fn working_ratio(&self) -> usize {
            self.1
        }
    }

    #[test]
    fn a_sweep_with_a_working_ratio_gets_chunks_that_much_smaller_reserved_that_much_over() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        // 400 ranks of 20 rows: chunks of 16 kB hold many ranks, chunks a quarter of that a
        // quarter as many.
        let mut sizes = Vec::new();
        for ratio in [1, 4] {
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let heavy = Box::new(Heavy(Chunks(seen.clone()), ratio));
            let budget = ChunkBudget { reservation: MemoryConsumer::new("test").register(&pool), pool: pool.clone() };
            let mut m = InRankOrder::new("test", heavy, 0, schema(), 16 << 10, Some(budget));
            assert_eq!(m.working_ratio(), ratio);
            let mut most = 0;
            for k in 0..400 {
                m.map(&batch(&vec![Some(k); 20], 20 * k)).unwrap();
                most = most.max(pool.reserved());
            }
            m.finish().unwrap();
            let chunks = seen.lock().unwrap().clone();
            let rows: usize = chunks.iter().map(Vec::len).sum();
            assert_eq!(rows, 8000);
            let largest = chunks.iter().map(Vec::len).max().unwrap() * 16;
            assert!(most >= (1 + ratio) * largest, "reserved {most} for chunks of up to {largest} bytes");
            sizes.push(chunks.len());
        }
        assert!(sizes[1] >= 3 * sizes[0], "chunks: {sizes:?}");
    }

    #[test]
    fn a_relation_read_whole_is_one_chunk() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorder = seen.clone();
        let prepare: Prepare = Arc::new(move |_| Ok(Box::new(Chunks(recorder.clone())) as Box<dyn Mapper>));
        let input = vec![batch(&[Some(2), Some(0), Some(1)], 0), batch(&[], 3), batch(&[Some(0), Some(2)], 3)];
        whole(&prepare, &[input]).unwrap();
        let chunks = seen.lock().unwrap().clone();
        assert_eq!(chunks, [vec![(Some(2), 0), (Some(0), 1), (Some(1), 2), (Some(0), 3), (Some(2), 4)]]);
    }
}
