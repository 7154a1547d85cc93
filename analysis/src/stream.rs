//! An analysis that streams its main input (`plan::Work::Streamed`, run by `AnalysisExec`):
//! what it learns from its other inputs (held, and answering to the memory budget as a whole
//! analysis does) is prepared first, then every batch of the main input is mapped as it comes
//! and passed on. `message_latency` works this way: the criteria come from the messages' five
//! columns, then each message gets its latency, so a trace's messages of any number flow
//! through in batches. A mapper may also fold the batches and answer at the end:
//! `lod_messages` sums each (src, dst, slot, slot) group as the messages come, holding only
//! the groups. What a fold holds is reserved from the memory budget as it grows
//! (`Mapper::held_bytes`). The main input is read by a task of its own, a chunk ahead of the
//! mapping (`read_ahead`).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use commdb_catalog::session::plan_node::off_the_workers;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};

/// Maps the main input's batches, once prepared; a mapper that folds them (`lod_messages`)
/// maps each to no rows and gives its answer when the input ends.
pub trait Mapper: Send {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch>;

    /// Map several batches as one (a chunk of whole ranks, [`crate::by_rank`]); a mapper that reads
    /// its columns across batches takes them as they are, without a concatenated copy.
    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        match batches {
            [one] => self.map(one),
            _ => {
                let schema = batches.first().map(RecordBatch::schema);
                let schema = schema.ok_or_else(|| DataFusionError::Internal("map_many: no batch".to_string()))?;
                self.map(&arrow::compute::concat_batches(&schema, batches)?)
            }
        }
    }

    /// The main input has ended: the batches still to pass on.
    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        Ok(Vec::new())
    }

    /// After `finish`, the next of the batches still to pass on, one at a time, so that a
    /// large answer is not held whole (None: no more).
    fn more(&mut self) -> Result<Option<RecordBatch>> {
        Ok(None)
    }

    /// The columns of its output that are read (`projection`, indices into its schema): a
    /// mapper that can leave the others out says true and gives its batches with only those
    /// columns, in that order; the others are projected after mapping.
    fn projected(&mut self, _projection: &[usize]) -> bool {
        false
    }

    /// The main input comes with only its columns `input` (indices into the whole input, in
    /// the order they come): a mapper of an analysis that passes its input through
    /// (`Derived::passing_through`) reads its columns there and gives those columns, then its
    /// own. Others read their input whole.
    fn narrowed(&mut self, _input: &[usize]) -> Result<()> {
        Err(DataFusionError::Internal("this analysis reads its input whole".to_string()))
    }

    /// Bytes of what the mapper has folded so far (groups, samples), reserved from the memory
    /// budget after each batch: a fold that grows with its input answers to the budget as a
    /// held input does.
    fn held_bytes(&self) -> usize {
        0
    }

    /// Bytes of working data the mapper builds per byte of a chunk of whole ranks it sweeps
    /// ([`crate::by_rank`]: its chunks are cut that many times smaller and reserved that many times
    /// over); 1 for a sweep whose working data is about its input.
    fn working_ratio(&self) -> usize {
        1
    }

    /// Bytes `finish` will build beyond what is held (a trend's bins over the run), reserved
    /// from the memory budget before it is called: past the budget the analysis stops saying
    /// so, rather than `finish` growing unchecked.
    fn finish_bytes(&self) -> usize {
        0
    }
}

/// Passes every batch on as it is (the merge of parts whose rows are the answer).
#[derive(Debug)]
pub struct AsTheyCome;

impl Mapper for AsTheyCome {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        Ok(batch.clone())
    }
}

/// A mapper given only some of its main input's columns (`Derived::passing_through`): the
/// inner mapper reads them and gives them, then its own columns; this gives the output
/// columns the query reads (`projection`, indices into the whole output) from those.
pub struct Narrowed {
    inner: Box<dyn Mapper>,
    /// The query's columns among the inner mapper's.
    projection: Vec<usize>,
    /// Whether the inner mapper gives only those itself.
    inner_projects: bool,
}

impl std::fmt::Debug for Narrowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Narrowed").field("projection", &self.projection).finish_non_exhaustive()
    }
}

impl Narrowed {
    /// `inner` over the main input's columns `input` of the `passed` the whole output begins
    /// with, giving the output columns `projection`.
    pub fn new(mut inner: Box<dyn Mapper>, input: &[usize], passed: usize, projection: &[usize]) -> Result<Self> {
        inner.narrowed(input)?;
        let projection = projection
            .iter()
            .map(|&c| match c.checked_sub(passed) {
                Some(own) => Ok(input.len() + own),
                None => input
                    .iter()
                    .position(|&i| i == c)
                    .ok_or_else(|| DataFusionError::Internal(format!("input column {c} is read but was not given"))),
            })
            .collect::<Result<Vec<_>>>()?;
        let inner_projects = inner.projected(&projection);
        Ok(Narrowed { inner, projection, inner_projects })
    }

    fn project(&self, out: RecordBatch) -> Result<RecordBatch> {
        if self.inner_projects { Ok(out) } else { Ok(out.project(&self.projection)?) }
    }
}

impl Mapper for Narrowed {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let out = self.inner.map(batch)?;
        self.project(out)
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let out = self.inner.map_many(batches)?;
        self.project(out)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.inner.finish()?.into_iter().map(|out| self.project(out)).collect()
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        self.inner.more()?.map(|out| self.project(out)).transpose()
    }

    /// It gives the query's columns itself.
    fn projected(&mut self, _projection: &[usize]) -> bool {
        true
    }

    fn held_bytes(&self) -> usize {
        self.inner.held_bytes()
    }

    fn working_ratio(&self) -> usize {
        self.inner.working_ratio()
    }

    fn finish_bytes(&self) -> usize {
        self.inner.finish_bytes()
    }
}

/// Prepares the mapper from the held inputs' batches.
pub type Prepare = Arc<dyn Fn(&[Vec<RecordBatch>]) -> Result<Box<dyn Mapper>> + Send + Sync>;

/// Learns what an analysis needs from its other inputs batch by batch, holding only what it
/// keeps of them (the waits of the messages, not the messages), then makes the mapper of the
/// main input (`plan::Work::Folded`).
pub trait Folder: Send {
    /// Fold a batch of other input `input` (1 for the first after the main one); the inputs
    /// come one after another, each whole, in order.
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()>;

    /// Bytes of what has been kept so far, reserved from the memory budget after each batch.
    fn held_bytes(&self) -> usize;

    /// Every other input has been folded: the mapper of the main input.
    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>>;

    /// Whether its mapper's `held_bytes` counts all it keeps of what was folded, so that the
    /// fold's reservation goes once the mapper is made (a fold that its mapper keeps in another
    /// form would otherwise be counted twice); by default the fold stays reserved.
    fn mapper_counts_the_fold(&self) -> bool {
        false
    }
}

/// Starts the folder of one execution.
pub type StartFold = Arc<dyn Fn() -> Box<dyn Folder> + Send + Sync>;

/// Wraps the mapper an analysis makes ([`crate::by_rank`] cuts its input into chunks of ranks).
pub type Wrap = Arc<dyn Fn(Box<dyn Mapper>) -> Box<dyn Mapper> + Send + Sync>;

/// How the other inputs of a streamed analysis are read.
#[derive(Clone)]
pub enum Side {
    /// Held whole, then the mapper is prepared from them.
    Held(Prepare),
    /// Folded batch by batch; the mapper made is wrapped if a wrap is given.
    Folded(StartFold, Option<Wrap>),
}

impl std::fmt::Debug for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Held(_) => "Held",
            Side::Folded(..) => "Folded",
        })
    }
}

/// The streamed execution of an analysis (`plan::Work::Streamed`).
pub struct Streamed {
    pub name: String,
    pub side: Side,
    pub projection: Option<Vec<usize>>,
    /// The one partition of the main input to map (a task per part, `plan::Placement::ByPart`);
    /// None: all of them.
    pub part: Option<usize>,
    /// The order each partition of the main input is sorted in, to merge them in (the parts'
    /// partials of [`crate::derived::Spread::SortedMerge`]); None: as they come.
    pub merged_on: Option<datafusion::physical_expr::LexOrdering>,
    /// Read the partitions of the main input one after another, in their order, rather than
    /// at once (`AnalysisExec::reading_parts_in_turn`).
    pub in_turn: bool,
}

/// The partitions of `main` one after another, in their order (a coalescing of partitions above
/// them is looked through): a store's messages part after part, so in send-time order.
fn in_turn(main: Arc<dyn ExecutionPlan>, context: &Arc<TaskContext>) -> SendableRecordBatchStream {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    let parts = match main.downcast_ref::<CoalescePartitionsExec>() {
        Some(coalesce) => coalesce.input().clone(),
        None => main,
    };
    let schema = parts.schema();
    let count = parts.properties().output_partitioning().partition_count();
    let context = context.clone();
    let batches = futures::stream::iter(0..count).map(move |p| parts.execute(p, context.clone())).try_flatten();
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}

/// The partitions of `main`, each sorted on `order`, merged in that order into one stream (a
/// coalescing of partitions above them is looked through: the distributed engine puts one
/// there, where its stage ends).
fn merged(
    name: &str,
    main: Arc<dyn ExecutionPlan>,
    order: &datafusion::physical_expr::LexOrdering,
    context: &Arc<TaskContext>,
) -> Result<SendableRecordBatchStream> {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::sorts::streaming_merge::StreamingMergeBuilder;
    let parts = match main.downcast_ref::<CoalescePartitionsExec>() {
        Some(coalesce) => coalesce.input().clone(),
        None => main,
    };
    let count = parts.properties().output_partitioning().partition_count();
    let mut streams = (0..count).map(|p| parts.execute(p, context.clone())).collect::<Result<Vec<_>>>()?;
    if streams.len() == 1 {
        return Ok(streams.remove(0));
    }
    let metrics = datafusion::physical_plan::metrics::ExecutionPlanMetricsSet::new();
    StreamingMergeBuilder::new()
        .with_streams(streams)
        .with_schema(parts.schema())
        .with_expressions(order)
        .with_metrics(BaselineMetrics::new(&metrics, 0))
        .with_batch_size(context.session_config().batch_size())
        .with_reservation(MemoryConsumer::new(format!("{name} merge")).register(context.memory_pool()))
        .build()
}

/// Hands the main input to the mapper as one chunk when it ends: a sweep by rank over a
/// relation not known to be in rank order reads it whole (what it holds counts as folded).
pub struct WholeInput {
    inner: Box<dyn Mapper>,
    /// The analysis' output.
    output: SchemaRef,
    rows: Vec<RecordBatch>,
    bytes: usize,
}

impl std::fmt::Debug for WholeInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeInput").field("rows", &self.rows.len()).field("bytes", &self.bytes).finish_non_exhaustive()
    }
}

impl WholeInput {
    pub fn new(inner: Box<dyn Mapper>, output: SchemaRef) -> Self {
        WholeInput { inner, output, rows: Vec::new(), bytes: 0 }
    }
}

impl Mapper for WholeInput {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if batch.num_rows() > 0 {
            self.bytes += crate::budget::held_bytes(batch);
            self.rows.push(batch.clone());
        }
        Ok(RecordBatch::new_empty(self.output.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let rows = std::mem::take(&mut self.rows);
        self.bytes = 0;
        let mut out = Vec::new();
        if !rows.is_empty() {
            let mapped = self.inner.map_many(&rows)?;
            if mapped.num_rows() > 0 {
                out.push(mapped);
            }
        }
        out.extend(self.inner.finish()?);
        Ok(out)
    }

    fn held_bytes(&self) -> usize {
        self.bytes + self.inner.held_bytes()
    }

    fn working_ratio(&self) -> usize {
        self.inner.working_ratio()
    }

    fn finish_bytes(&self) -> usize {
        self.inner.finish_bytes()
    }

    fn projected(&mut self, projection: &[usize]) -> bool {
        self.inner.projected(projection)
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        self.inner.more()
    }
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Streamed {
    /// Analysis `name` mapping its main input (partition `part` of it, or all of them at once)
    /// through the mapper `side` makes, giving its output columns `projection`.
    pub fn new(name: &str, side: Side, projection: Option<Vec<usize>>, part: Option<usize>) -> Self {
        Streamed { name: name.to_string(), side, projection, part, merged_on: None, in_turn: false }
    }

    /// Read the held inputs (`inputs[1..]`), prepare the mapper on a blocking thread, then map
    /// the batches of `inputs[0]` as they come.
    pub fn execute(
        self,
        schema: SchemaRef,
        mut inputs: Vec<Arc<dyn ExecutionPlan>>,
        baseline: BaselineMetrics,
        context: Arc<TaskContext>,
    ) -> SendableRecordBatchStream {
        let Streamed { name, side, projection, part, merged_on, in_turn: one_after_another } = self;
        let held = inputs.split_off(1);
        let main = inputs.remove(0);
        let run = async move {
            let timer = baseline.elapsed_compute().clone();
            let (mut mapper, reservation) = match side {
                Side::Held(prepare) => {
                    let (read, reservation) = crate::budget::read_held(&name, held, &context).await?;
                    let work = move || {
                        let _running = timer.timer();
                        prepare(&read)
                    };
                    (off_the_workers(&name, work).await??, reservation)
                }
                Side::Folded(start, wrap) => {
                    let (folder, reservation) = fold(&name, start(), held, &context, &baseline).await?;
                    if folder.mapper_counts_the_fold() {
                        reservation.free();
                    }
                    let work = move || {
                        let _running = timer.timer();
                        folder.into_mapper()
                    };
                    let mapper = off_the_workers(&name, work).await??;
                    let mapper = match wrap {
                        Some(w) => w(mapper),
                        None => mapper,
                    };
                    (mapper, reservation)
                }
            };
            let projection = projection.filter(|p| !mapper.projected(p));
            let pool = context.memory_pool().clone();
            let folded = MemoryConsumer::new(format!("{name} fold")).register(&pool);
            let batches = match (part, &merged_on) {
                (Some(p), _) => main.execute(p, context.clone())?,
                (None, Some(order)) => merged(&name, main, order, &context)?,
                (None, None) if one_after_another => in_turn(main, &context),
                (None, None) => datafusion::physical_plan::execute_stream(main, context.clone())?,
            };
            let mut batches = crate::read_ahead::read_ahead(&name, batches, &pool);
            let mapped = async_stream_of(move |sink| async move {
                let project = |out: RecordBatch| match &projection {
                    Some(p) => out.project(p),
                    None => Ok(out),
                };
                let mut rows = 0;
                while let Some(batch) = batches.next().await {
                    commdb_catalog::interrupt::check(&name)?;
                    let timer = baseline.elapsed_compute().timer();
                    let batch = batch?;
                    rows += batch.num_rows();
                    let out = project(mapper.map(&batch)?)?;
                    let held = mapper.held_bytes();
                    if folded.try_resize(held).is_err() {
                        return Err(crate::budget::over_budget(&name, &pool, held, rows, "folding"));
                    }
                    timer.done();
                    baseline.record_output(out.num_rows());
                    if out.num_rows() > 0 && sink.send(out).await.is_err() {
                        return Ok(());
                    }
                }
                let needed = mapper.held_bytes() + mapper.finish_bytes();
                if folded.try_resize(needed).is_err() {
                    return Err(crate::budget::over_budget(&name, &pool, needed, rows, "summing up"));
                }
                let timer = baseline.elapsed_compute().timer();
                let last = mapper.finish()?.into_iter().map(project).collect::<std::result::Result<Vec<_>, _>>()?;
                timer.done();
                for out in last {
                    baseline.record_output(out.num_rows());
                    if sink.send(out).await.is_err() {
                        return Ok(());
                    }
                }
                loop {
                    commdb_catalog::interrupt::check(&name)?;
                    let timer = baseline.elapsed_compute().timer();
                    let Some(out) = mapper.more()? else { break };
                    let out = project(out)?;
                    timer.done();
                    baseline.record_output(out.num_rows());
                    if sink.send(out).await.is_err() {
                        return Ok(());
                    }
                }
                baseline.done();
                drop(reservation);
                drop(folded);
                Ok(())
            });
            Ok::<_, DataFusionError>(mapped)
        };
        let stream = futures::stream::once(run).try_flatten();
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }
}

/// Fold every batch of `inputs` into `folder`, in order, reserving what it keeps from the
/// session's memory pool as it grows; past the budget, the error says what to narrow.
async fn fold(
    name: &str,
    mut folder: Box<dyn Folder>,
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Box<dyn Folder>, datafusion::execution::memory_pool::MemoryReservation)> {
    let pool = context.memory_pool().clone();
    let reservation = MemoryConsumer::new(format!("{name} analysis")).register(&pool);
    let mut rows = 0usize;
    for (k, input) in inputs.into_iter().enumerate() {
        let mut stream = datafusion::physical_plan::execute_stream(input, context.clone())?;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            commdb_catalog::interrupt::check(name)?;
            let timer = baseline.elapsed_compute().timer();
            rows += batch.num_rows();
            folder.fold(k + 1, &batch)?;
            timer.done();
            let held = folder.held_bytes();
            if reservation.try_resize(held).is_err() {
                return Err(crate::budget::over_budget(name, &pool, held, rows, "folding"));
            }
        }
    }
    Ok((folder, reservation))
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
