//! The plan node of an analysis that streams its main input: what it learns from its other
//! inputs (held, as an `AnalysisExec` holds its inputs, and answering to the memory budget the
//! same way) is prepared first, then every batch of the main input is mapped as it comes and
//! passed on. `message_latency` works this way: the criteria come from the messages' five
//! columns, then each message gets its latency, so a trace's messages of any number flow
//! through in batches.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use commdb_catalog::session::plan_node::{off_the_workers, projection_text};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

/// Maps the main input's batches, once prepared.
pub trait Mapper: Send {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch>;

    /// The main input has ended.
    fn finish(&mut self) {}
}

/// Prepares the mapper from the held inputs' batches.
pub type Prepare = Arc<dyn Fn(&[Vec<RecordBatch>]) -> Result<Box<dyn Mapper>> + Send + Sync>;

/// An analysis streaming its first input through a mapper prepared from the others.
pub struct StreamExec {
    name: String,
    /// The streamed input, then the held ones.
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    prepare: Prepare,
    full_schema: SchemaRef,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for StreamExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamExec").field("name", &self.name).field("inputs", &self.inputs.len()).finish()
    }
}

impl StreamExec {
    pub fn new(
        name: &str,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        prepare: Prepare,
        full_schema: SchemaRef,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        if inputs.is_empty() {
            return datafusion::common::internal_err!("{name}: a streamed analysis needs an input");
        }
        let schema = match &projection {
            Some(p) => Arc::new(full_schema.project(p)?),
            None => full_schema.clone(),
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(StreamExec {
            name: name.to_string(),
            inputs,
            prepare,
            full_schema,
            projection,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for StreamExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "{}: analysis, streamed", self.name)?;
                f.write_str(&projection_text(&self.full_schema, self.projection.as_deref()))
            }
            DisplayFormatType::TreeRender => write!(f, "function={}", self.name),
        }
    }
}

impl ExecutionPlan for StreamExec {
    fn name(&self) -> &str {
        &self.name
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inputs.iter().collect()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false; self.inputs.len()]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != self.inputs.len() {
            return datafusion::common::internal_err!(
                "{}: expects {} inputs, got {}",
                self.name,
                self.inputs.len(),
                children.len()
            );
        }
        let mut node = StreamExec::new(
            &self.name,
            children,
            self.prepare.clone(),
            self.full_schema.clone(),
            self.projection.clone(),
        )?;
        node.metrics = self.metrics.clone();
        Ok(Arc::new(node))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let (main, held) = (self.inputs[0].clone(), self.inputs[1..].to_vec());
        let (prepare, projection, name) = (self.prepare.clone(), self.projection.clone(), self.name.clone());
        let schema = self.schema();
        let run = async move {
            let reading = crate::plan::read_held(&name, held, &context).await?;
            let (read, reservation) = reading;
            let timer = baseline.elapsed_compute().clone();
            let work = move || {
                let _running = timer.timer();
                prepare(&read)
            };
            let mut mapper = off_the_workers(&name, work).await??;
            let mut batches = datafusion::physical_plan::execute_stream(main, context.clone())?;
            let mapped = async_stream_of(move |sink| async move {
                while let Some(batch) = batches.next().await {
                    commdb_catalog::interrupt::check(&name)?;
                    let timer = baseline.elapsed_compute().timer();
                    let out = mapper.map(&batch?)?;
                    let out = match &projection {
                        Some(p) => out.project(p)?,
                        None => out,
                    };
                    timer.done();
                    baseline.record_output(out.num_rows());
                    if sink.send(out).await.is_err() {
                        return Ok(());
                    }
                }
                mapper.finish();
                baseline.done();
                drop(reservation);
                Ok(())
            });
            Ok::<_, DataFusionError>(mapped)
        };
        let stream = futures::stream::once(run).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// The batches a producer sends, as a stream: the producer runs as a task of its own and its
/// error, if any, ends the stream.
fn async_stream_of<F, Fut>(producer: F) -> impl futures::Stream<Item = Result<RecordBatch>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<RecordBatch>) -> Fut,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let (send, receive) = tokio::sync::mpsc::channel::<RecordBatch>(2);
    let task = tokio::spawn(producer(send));
    let batches = futures::stream::unfold(receive, |mut r| async move { r.recv().await.map(|b| (Ok(b), r)) });
    let end = futures::stream::once(async move {
        match task.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(Err(e)),
            Err(e) => Some(Err(DataFusionError::External(Box::new(e)))),
        }
    })
    .filter_map(|x| async move { x });
    batches.chain(end)
}
