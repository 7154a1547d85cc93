//! What commdb's own plan nodes share (a trace's table built on first scan, a store file
//! checked before it is scanned, an analysis in crate commdb-udfs): long work moved off the
//! async workers that drive the other operators, a result computed once streamed as batches,
//! and the projection shown in `EXPLAIN`.

use std::future::Future;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{StreamExt, TryStreamExt};

/// Run `work` (named `what` in an error) on a blocking thread when there is a tokio runtime,
/// inline otherwise.
pub async fn off_the_workers<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            // The work stops when its statement is interrupted, even after the next has begun.
            let statement = crate::interrupt::current();
            handle
                .spawn_blocking(move || crate::interrupt::within(statement, work))
                .await
                .map_err(|e| DataFusionError::Execution(format!("{what}: the work stopped: {e}")))
        }
        Err(_) => Ok(work()),
    }
}

/// The batches `run` gives, as a stream of `schema`.
pub fn batches_once(
    schema: SchemaRef,
    run: impl Future<Output = Result<Vec<RecordBatch>>> + Send + 'static,
) -> SendableRecordBatchStream {
    let batches = futures::stream::once(run).map_ok(|out| futures::stream::iter(out.into_iter().map(Ok))).try_flatten();
    Box::pin(RecordBatchStreamAdapter::new(schema, batches.boxed()))
}

/// `, projection=[a, b]` for the columns of `schema` a node reads, or nothing when it reads
/// them all.
pub fn projection_text(schema: &Schema, projection: Option<&[usize]>) -> String {
    match projection {
        Some(p) => {
            let names: Vec<&str> = p.iter().map(|&i| schema.field(i).name().as_str()).collect();
            format!(", projection=[{}]", names.join(", "))
        }
        None => String::new(),
    }
}
