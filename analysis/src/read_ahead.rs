//! The main input of a streamed analysis read ahead by a task of its own. The store's parts
//! are merged in rank order, so their rows are decoded by one task at a time; read in turn
//! with the mapping, the decoding waited while a chunk of ranks was swept and the sweep waited
//! while the next chunk was decoded, each on one of the two cores. A task of its own now reads
//! the input up to a chunk's bytes ahead (`by_rank::CHUNK_BYTES`, reserved from the budget), so
//! the next chunk is decoded while this one is swept. Under a budget that makes the chunks
//! smaller than that, or has no room left for one more, the input is read in turn, as before:
//! the budget is then what limits, and the merge of the parts needs what is left of it. A shallower buffer (16 or 64 batches, a tenth to a
//! third of a chunk) was measured before and gained nothing: the sweep still waited for most
//! of each chunk (docs/performance.md).

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryPool};
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::budget::held_bytes;
use crate::by_rank::{CHUNK_BYTES, chunk_bytes};

/// `input` read by a task of its own up to a chunk of bytes ahead of its reader, the bytes
/// reserved from `pool` as analysis `name`'s; `input` itself where the budget shrinks the
/// chunks or has no room for one more.
pub fn read_ahead(
    name: &str,
    input: SendableRecordBatchStream,
    pool: &Arc<dyn MemoryPool>,
) -> SendableRecordBatchStream {
    let bytes = chunk_bytes(match pool.memory_limit() {
        MemoryLimit::Finite(b) => Some(b),
        _ => None,
    });
    // A budget that makes the chunks smaller than their most has no room for one more.
    if bytes < CHUNK_BYTES {
        return input;
    }
    let reservation = MemoryConsumer::new(format!("{name} read ahead")).register(pool);
    if reservation.try_grow(bytes).is_err() {
        return input;
    }
    // The bytes in flight, counted in KiB.
    let permits = u32::try_from(bytes >> 10).unwrap_or(u32::MAX).clamp(1, Semaphore::MAX_PERMITS as u32);
    let room = Arc::new(Semaphore::new(permits as usize));
    let (send, receive) = mpsc::unbounded_channel::<(Result<RecordBatch>, OwnedSemaphorePermit)>();
    let schema = input.schema();
    let reader = SpawnedTask::spawn(async move {
        let mut input = input;
        while let Some(item) = input.next().await {
            let kib = match &item {
                Ok(batch) => u32::try_from(held_bytes(batch) >> 10).unwrap_or(u32::MAX).clamp(1, permits),
                Err(_) => 1,
            };
            let Ok(permit) = room.clone().acquire_many_owned(kib).await else { break };
            let failed = item.is_err();
            if send.send((item, permit)).is_err() || failed {
                break;
            }
        }
    });
    // The task is stopped, and the bytes given back, when the stream is dropped.
    let batches =
        futures::stream::unfold((receive, reader, reservation), |(mut receive, reader, reservation)| async move {
            let (item, permit) = receive.recv().await?;
            drop(permit);
            Some((item, (receive, reader, reservation)))
        });
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::error::DataFusionError;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    fn batch(schema: &Arc<Schema>, from: i64, rows: i64) -> RecordBatch {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(from..from + rows))]).unwrap()
    }

    fn stream_of(schema: &Arc<Schema>, items: Vec<Result<RecordBatch>>) -> SendableRecordBatchStream {
        Box::pin(RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(items)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_batch_comes_in_order_and_an_error_ends_the_stream() {
        let schema = Arc::new(Schema::new(vec![Field::new("rank", DataType::Int64, false)]));
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(16 * CHUNK_BYTES));
        // Batches larger than the bytes read ahead (a chunk) come too.
        let items: Vec<Result<RecordBatch>> =
            (0..40).map(|k| Ok(batch(&schema, 1000 * k, if k == 5 { 9_000_000 } else { 1 + 997 * k }))).collect();
        let expected: Vec<i64> = items
            .iter()
            .flat_map(|b| {
                b.as_ref().unwrap().column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
            })
            .collect();
        // While it is read, a chunk is reserved; once it ends, nothing.
        let mut ahead = read_ahead("test", stream_of(&schema, items), &pool);
        let mut got = vec![ahead.next().await.unwrap().unwrap()];
        assert_eq!(pool.reserved(), CHUNK_BYTES);
        while let Some(b) = ahead.next().await {
            got.push(b.unwrap());
        }
        let got: Vec<i64> = got
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(got, expected);
        assert_eq!(pool.reserved(), 0, "the bytes read ahead are given back");
        let failing = vec![
            Ok(batch(&schema, 0, 3)),
            Err(DataFusionError::Execution("part 2 is damaged".into())),
            Ok(batch(&schema, 3, 3)),
        ];
        let items: Vec<Result<RecordBatch>> = read_ahead("test", stream_of(&schema, failing), &pool).collect().await;
        assert_eq!(items.len(), 2);
        assert!(items[1].as_ref().unwrap_err().to_string().contains("part 2 is damaged"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budget_without_room_reads_in_turn() {
        let schema = Arc::new(Schema::new(vec![Field::new("rank", DataType::Int64, false)]));
        let one = || stream_of(&schema, vec![Ok(batch(&schema, 0, 5)), Ok(batch(&schema, 5, 5))]);
        // A budget that shrinks the chunks (to 32 MiB), though it has room for a full one:
        // nothing reserved while it is read.
        let small: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(8 * CHUNK_BYTES));
        let mut ahead = read_ahead("test", one(), &small);
        assert_eq!(ahead.next().await.unwrap().unwrap().num_rows(), 5);
        assert_eq!(small.reserved(), 0);
        assert_eq!(ahead.next().await.unwrap().unwrap().num_rows(), 5);
        assert!(ahead.next().await.is_none());
        // A large budget already taken: nothing more reserved, the rows as they are.
        let taken: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(16 * CHUNK_BYTES));
        let hold = MemoryConsumer::new("other").register(&taken);
        hold.try_grow(16 * CHUNK_BYTES - 1).unwrap();
        let mut ahead = read_ahead("test", one(), &taken);
        assert_eq!(ahead.next().await.unwrap().unwrap().num_rows(), 5);
        assert_eq!(taken.reserved(), 16 * CHUNK_BYTES - 1);
        assert_eq!(ahead.next().await.unwrap().unwrap().num_rows(), 5);
        assert!(ahead.next().await.is_none());
        assert_eq!(taken.reserved(), 16 * CHUNK_BYTES - 1);
    }
}
