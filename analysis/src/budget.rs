//! What an analysis holds answers to the session's memory budget, as DataFusion's sorts and
//! joins do: what it reads is reserved from the memory pool batch by batch, and before
//! computing it reserves as much again for its working data (the indices, sorted copies and
//! results the analyses build are of the order of their input). When the budget would be
//! passed it stops with an error that says how much it needs and what to narrow, instead of
//! growing until the operating system kills the process.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;

/// Read every batch of `inputs`, all inputs at once (each in a task of its own, so that two
/// analyses an analysis reads run side by side), reserving what they hold from the session's
/// memory pool as they come, then as much again for the computation over them; past the budget, the error
/// says what to narrow. The reservation is returned with the batches, to be dropped when done.
pub async fn read_held(
    name: &str,
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    context: &Arc<TaskContext>,
) -> Result<(Vec<Vec<RecordBatch>>, datafusion::execution::memory_pool::MemoryReservation)> {
    use datafusion::common::runtime::SpawnedTask;
    use datafusion::execution::memory_pool::MemoryConsumer;
    use futures::StreamExt;
    let pool = context.memory_pool().clone();
    let reservation = MemoryConsumer::new(format!("{name} analysis")).register(&pool);
    // The inputs are read at once, each in a task of its own (two runs' samples, the calls and
    // the messages), each against a share of the reservation.
    let tasks: Vec<SpawnedTask<Result<InputRead>>> = inputs
        .into_iter()
        .map(|input| {
            let (context, pool, name) = (context.clone(), pool.clone(), name.to_string());
            let share = reservation.new_empty();
            SpawnedTask::spawn(async move {
                let mut stream = datafusion::physical_plan::execute_stream(input, context)?;
                let (mut batches, mut rows) = (Vec::new(), 0usize);
                while let Some(batch) = stream.next().await {
                    let batch = batch?;
                    rows += batch.num_rows();
                    let bytes = held_bytes(&batch);
                    share
                        .try_grow(bytes)
                        .map_err(|_| over_budget(&name, &pool, pool.reserved() + bytes, rows, "reading"))?;
                    batches.push(batch);
                }
                Ok((batches, rows, share.free()))
            })
        })
        .collect();
    let mut read = Vec::with_capacity(tasks.len());
    let mut rows = 0usize;
    for task in tasks {
        let (batches, n, bytes) = task.join_unwind().await.map_err(|e| DataFusionError::External(Box::new(e)))??;
        rows += n;
        reservation.grow(bytes);
        read.push(batches);
    }
    commdb_catalog::interrupt::check(name)?;
    let input_bytes = reservation.size();
    reservation.try_grow(input_bytes).map_err(|_| over_budget(name, &pool, 2 * input_bytes, rows, "computing over"))?;
    Ok((read, reservation))
}

/// One input as read: its batches, rows and the bytes reserved for them.
type InputRead = (Vec<RecordBatch>, usize, usize);

/// The bytes of a batch's rows: a slice of a larger table (an in-memory trace table is cut
/// into slices of shared arrays) counts its own rows, not the whole arrays it points into.
pub fn held_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or_else(|_| c.get_array_memory_size()))
        .sum()
}

/// The error of an analysis that would pass the memory budget: how much it needs, for how many
/// rows, and what to do.
pub fn over_budget(
    name: &str,
    pool: &Arc<dyn datafusion::execution::memory_pool::MemoryPool>,
    needed: usize,
    rows: usize,
    doing: &str,
) -> DataFusionError {
    use datafusion::execution::memory_pool::MemoryLimit;
    let size = |b: usize| crate::shown::bytes(b as f64);
    let budget = match pool.memory_limit() {
        MemoryLimit::Finite(b) => size(b),
        _ => "unlimited".to_string(),
    };
    let message = format!(
        "{name}: {doing} its input ({rows} rows so far) needs about {}, more than the memory budget for queries ({budget}, {} of it in use); \
         narrow the relation it reads (a view over a time window or some ranks, e.g. rel => 'v') or raise --memory-limit",
        size(needed),
        size(pool.reserved())
    );
    DataFusionError::External(Box::new(commdb_catalog::Error::OutOfMemory { message, advised: true }))
}
