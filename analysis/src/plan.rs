//! The physical plan node of an analysis. A table function plans its inputs (the relations it
//! reads, as ordinary scans or view queries) and returns an `AnalysisExec` named after the
//! function with those plans as its children. Nothing is read or computed while the query is
//! planned: `EXPLAIN` costs nothing and shows the function's node, and `EXPLAIN ANALYZE` shows
//! its rows and compute time. When the query runs, `execute` pulls every input, hands the batches
//! to the computation on a blocking thread (away from the async workers that drive other
//! operators) and streams the result; Ctrl-C (`commdb_catalog::interrupt`) stops it between
//! steps. This is the shape DataFusion's own operators have (`ExecutionPlan`), applied to
//! commdb's whole-relation analyses.
//!
//! An analysis holds its whole input while it computes, so it answers to the session's memory
//! budget as DataFusion's sorts and joins do ([`crate::budget`]). A streamed analysis
//! (`Work::Streamed`, [`crate::stream`]) holds only its other inputs and maps the first as it comes;
//! one streamed by rank (`Work::ByRank`, [`crate::by_rank`]) asks for its first input in rank order.
//!
//! On a distributed engine (Ballista, whose tasks each run some partitions of a stage) a node
//! is placed (`Placement`): one task asking for each input whole, or a task per partition of
//! its first input, each reading its other inputs whole; an analysis spread as partials and
//! their merge is two nodes of one call (`Stage`), [`crate::derived::Spread`].

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use commdb_catalog::session::plan_node::{batches_once, off_the_workers, projection_text};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{
    Distribution, EquivalenceProperties, LexRequirement, OrderingRequirements, PhysicalExpr,
};
use datafusion::physical_plan::InputDistributionRequirements;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

use datafusion::logical_expr::Expr;

use crate::declare::Function;
use crate::relation::Lookup;

/// The key of the schema metadata that tells two calls of a table function apart.
pub const CALL_ID: &str = "commdb.call";

/// A call of a table function: its declaration, its arguments (literals, in their declared places)
/// and what it looked up; for an analysis that another one made as its input (the criteria
/// `message_latency` reads), the path of input numbers from the call down to it.
#[derive(Clone, Debug)]
pub struct Call {
    pub function: &'static Function,
    pub args: Vec<Expr>,
    pub lookups: Vec<Lookup>,
    pub path: Vec<usize>,
}

impl Call {
    /// The call of this one's input `input`.
    pub fn nested(&self, input: usize) -> Call {
        let mut path = self.path.clone();
        path.push(input);
        Call { path, ..self.clone() }
    }
}

/// The computation of an analysis: each input's batches in order in, result batches out.
pub type ComputeMany = Arc<dyn Fn(&[Vec<RecordBatch>]) -> Result<Vec<RecordBatch>> + Send + Sync>;

/// What an analysis does with its inputs: compute over all of them held, or stream the first
/// through a mapper prepared from the others ([`crate::stream`]), or stream it so a chunk of whole
/// ranks at a time (its column `rank`, a column index) in rank order ([`crate::by_rank`]).
#[derive(Clone)]
pub enum Work {
    Whole(ComputeMany),
    Streamed(crate::stream::Prepare),
    ByRank(crate::stream::Prepare, usize),
    /// The other inputs folded batch by batch ([`crate::stream::Folder`]), then the first read as
    /// `Main` says.
    Folded(crate::stream::StartFold, Main),
}

/// How an analysis whose other inputs are folded reads its first input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Main {
    /// Batch by batch, as it comes.
    Batches,
    /// A chunk of whole ranks at a time (its column `rank`, an index), in rank order.
    ByRank(usize),
    /// Whole, as one chunk: a sweep by rank over a relation not known to be in rank order.
    Whole,
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Work::Whole(_) => "Whole",
            Work::Streamed(_) => "Streamed",
            Work::ByRank(..) => "ByRank",
            Work::Folded(..) => "Folded",
        })
    }
}

/// An analysis as a plan node: its inputs' plans as children, its computation run when the
/// query executes.
pub struct AnalysisExec {
    name: String,
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    work: Work,
    /// The computation's whole output and the columns of it the query reads.
    full_schema: SchemaRef,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    /// The call that planned it, for another process to plan it again ([`crate::recipe`]).
    call: Option<crate::plan::Call>,
    /// How its inputs' partitions are read (in one process, or by a distributed engine's tasks).
    placement: Placement,
    /// Which node of its call it is: the answer, or the partials and their merge.
    stage: Stage,
    /// The output columns each partition of its output is sorted on, ascending (a task per
    /// part whose rows are merged in that order after, [`crate::derived::Spread`]).
    output_order: Option<Vec<usize>>,
    /// The columns each partition of its first input is sorted on (the parts' partials, crate::
    /// common::Spread::SortedMerge), which it merges in that order itself: a distributed engine
    /// ends a stage below it and does not keep the partitions' order across the stages.
    input_order: Option<Vec<usize>>,
    /// The columns of its first input whose hash decides which of its tasks reads a row (a
    /// reduction of what one key needs, [`crate::derived::Prefold`]): the engine exchanges the
    /// input's rows so before them.
    exchange: Option<Vec<usize>>,
    /// What the node computes, said by EXPLAIN (a step of a spread analysis).
    label: Option<&'static str>,
    /// Routed ([`Placement::Routed`]): the routes of its first input's partitions, and which
    /// of its other inputs are exchanged by the key of their rank's route.
    routes: Option<Routed>,
    /// How many of its inputs, from the first, it reads in any order: its answer does not
    /// depend on the order their rows come in (a step that streams them as they come, or puts
    /// them in order itself), so a distributed engine may hand them over in any order.
    any_order: usize,
    /// Whether it reads its first input's partitions one after another, in their order, rather
    /// than at once (a streamed analysis in one process).
    in_turn: bool,
}

/// A routed node's routes, and each input exchanged by them with the expression of its rows'
/// key (made once, when the node is).
#[derive(Clone)]
struct Routed {
    routes: crate::routes::Routes,
    exchanged: Vec<(usize, Arc<dyn PhysicalExpr>)>,
    /// The route each of its partitions serves, where the partition's number does not say it
    /// (a distributed engine's task, whose plan is restricted to its own partitions, numbered
    /// from 0).
    route: Option<Vec<usize>>,
}

/// The ordering ascending on `columns` of `schema`.
fn ascending(schema: &SchemaRef, columns: &[usize]) -> Vec<datafusion::physical_expr::PhysicalSortExpr> {
    columns.iter().map(|&c| crate::by_rank::rank_order(schema, c)).collect()
}

/// How an analysis node reads the partitions of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In one process: it reads every partition of every input itself (the embedded engine).
    Local,
    /// One task asking for each input as one partition: on a distributed engine, whose tasks
    /// give a node only the partitions of its own slice unless it asks for them all.
    Whole,
    /// A task per partition of its first input, each reading that partition and the other
    /// inputs whole (docs/scale.md): a sweep by rank over parts of whole ranks, or a fold of
    /// the messages' partials.
    ByPart,
    /// A task per partition of its first input (parts of whole ranks), each reading that
    /// partition, the partition of the same number of some other inputs exchanged by their
    /// rank's part ([`crate::routes`]), and the rest whole.
    Routed,
}

/// Which node of an analysis' call a node is: the answer itself, or (spread as partials and
/// their merge, [`crate::derived::Spread`]) the partials of each part or their merge, or (an
/// input reduced before the answer reads it, [`crate::derived::Prefold`]) the partials or the
/// reduction of prefold `index`, or (planned as steps, [`crate::steps`]) step `index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Answer,
    Partial,
    Merge,
    Prefold { index: u8, reduce: bool },
    Step(u8),
}

/// The code of step 0 ([`Stage::code`]), above every prefold's.
const STEP_CODES: u32 = 1024;

impl Placement {
    pub fn code(self) -> u32 {
        match self {
            Placement::Local => 0,
            Placement::Whole => 1,
            Placement::ByPart => 2,
            Placement::Routed => 3,
        }
    }

    pub fn from_code(code: u32) -> Option<Placement> {
        [Placement::Local, Placement::Whole, Placement::ByPart, Placement::Routed]
            .into_iter()
            .find(|p| p.code() == code)
    }
}

impl Stage {
    pub fn code(self) -> u32 {
        match self {
            Stage::Answer => 0,
            Stage::Partial => 1,
            Stage::Merge => 2,
            Stage::Prefold { index, reduce } => 16 + 2 * u32::from(index) + u32::from(reduce),
            Stage::Step(index) => STEP_CODES + u32::from(index),
        }
    }

    pub fn from_code(code: u32) -> Option<Stage> {
        match code {
            0 => Some(Stage::Answer),
            1 => Some(Stage::Partial),
            2 => Some(Stage::Merge),
            STEP_CODES.. => Some(Stage::Step(u8::try_from(code - STEP_CODES).ok()?)),
            16.. => Some(Stage::Prefold { index: u8::try_from((code - 16) / 2).ok()?, reduce: code % 2 == 1 }),
            _ => None,
        }
    }
}

impl fmt::Debug for AnalysisExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnalysisExec").field("name", &self.name).field("inputs", &self.inputs.len()).finish()
    }
}

impl AnalysisExec {
    pub fn new(
        name: &str,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        work: Work,
        full_schema: SchemaRef,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        AnalysisExec::placed(name, inputs, work, full_schema, projection, Placement::Local)
    }

    /// An analysis node whose inputs' partitions are read as `placement` says.
    pub fn placed(
        name: &str,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        work: Work,
        full_schema: SchemaRef,
        projection: Option<Vec<usize>>,
        placement: Placement,
    ) -> Result<Self> {
        if matches!(work, Work::Streamed(_) | Work::ByRank(..) | Work::Folded(..)) && inputs.is_empty() {
            return datafusion::common::internal_err!("{name}: a streamed analysis needs an input");
        }
        if placement == Placement::ByPart && (inputs.is_empty() || matches!(work, Work::Whole(_))) {
            return datafusion::common::internal_err!("{name}: only a streamed analysis reads its input by part");
        }
        let partitions = match placement {
            Placement::ByPart | Placement::Routed => inputs[0].properties().output_partitioning().partition_count(),
            Placement::Local | Placement::Whole => 1,
        };
        let schema = match &projection {
            Some(p) => Arc::new(full_schema.project(p)?),
            None => full_schema.clone(),
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            match work {
                Work::Whole(_) => EmissionType::Final,
                Work::Streamed(_) | Work::ByRank(..) | Work::Folded(..) => EmissionType::Incremental,
            },
            Boundedness::Bounded,
        );
        Ok(AnalysisExec {
            name: name.to_string(),
            inputs,
            work,
            full_schema,
            projection,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            call: None,
            placement,
            stage: Stage::Answer,
            output_order: None,
            input_order: None,
            exchange: None,
            label: None,
            routes: None,
            any_order: 0,
            in_turn: false,
        })
    }

    /// The same node, whose answer does not depend on the order its first input's rows come in.
    pub fn reading_in_any_order(self) -> Self {
        AnalysisExec { any_order: 1, ..self }
    }

    /// The same node, reading its first input's partitions one after another, in their order:
    /// the store's messages come in send-time order (part after part) rather than as stretches
    /// of time interleaved, which a step that puts each rank's rows in time order takes nearly
    /// sorted. In one process; a task per part reads its own part as it does today.
    pub fn reading_parts_in_turn(self) -> Self {
        AnalysisExec { in_turn: true, ..self }
    }

    /// Whether it reads its first input's partitions in turn: asked to, and in one process.
    fn reads_parts_in_turn(&self) -> bool {
        self.in_turn && self.placement == Placement::Local
    }

    /// The same node, whose answer depends on the order of none of its inputs' rows.
    pub fn reading_every_input_in_any_order(self) -> Self {
        AnalysisExec { any_order: usize::MAX, ..self }
    }

    /// Whether its answer does not depend on the order its input `i`'s rows come in.
    pub fn reads_in_any_order(&self, i: usize) -> bool {
        i < self.any_order
    }

    /// The same node, routed ([`Placement::Routed`]): its inputs `exchanged` are exchanged by
    /// the key `routes` gives their column `rank`, into partitions numbered as its first input's.
    pub fn with_routes(self, routes: crate::routes::Routes, exchanged: &[usize]) -> Result<Self> {
        let keys = exchanged
            .iter()
            .map(|&i| {
                let schema = self.inputs[i].schema();
                let rank = schema.index_of("rank").map_err(|_| {
                    DataFusionError::Internal(format!("{}: routed input {i} has no column rank", self.name))
                })?;
                Ok((i, routes.expr(&schema, rank)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AnalysisExec { routes: Some(Routed { routes, exchanged: keys, route: None }), ..self })
    }

    /// The same routed node, its partitions serving routes `route` (the parts of its first
    /// input that a distributed engine's task was given).
    pub fn serving(mut self, route: Option<Vec<usize>>) -> Self {
        if let Some(routed) = &mut self.routes {
            routed.route = route;
        }
        self
    }

    /// The routes of its first input's partitions, when it is routed.
    pub fn routes(&self) -> Option<&crate::routes::Routes> {
        self.routes.as_ref().map(|r| &r.routes)
    }

    /// The same node, declaring each partition of its output sorted on its output `columns`,
    /// ascending.
    pub fn with_output_order(mut self, columns: Vec<usize>) -> Self {
        let schema = self.schema();
        let properties = PlanProperties::new(
            EquivalenceProperties::new_with_orderings(schema.clone(), [ascending(&schema, &columns)]),
            self.properties.output_partitioning().clone(),
            self.properties.emission_type,
            self.properties.boundedness,
        );
        self.properties = Arc::new(properties);
        self.output_order = Some(columns);
        self
    }

    /// The same node, merging the partitions of its first input, each sorted on its `columns`
    /// ascending, in that order.
    pub fn with_input_order(self, columns: Vec<usize>) -> Self {
        AnalysisExec { input_order: Some(columns), ..self }
    }

    /// The same node, its tasks each reading the rows of its first input whose columns
    /// `columns` hash to it (the engine exchanges them so). It has as many partitions as its
    /// input: a distributed engine gives each task a plan restricted to its own partition of
    /// the input, and a partition more, always empty, would be written to the same shuffle
    /// file as that task's rows. (A node that needs another's rows in partitions of its own
    /// numbering exchanges them itself, as the routed answer does.)
    pub fn with_exchange(self, columns: Vec<usize>) -> Self {
        AnalysisExec { exchange: Some(columns), ..self }
    }

    /// The same node, EXPLAIN saying that it computes `label`.
    pub fn with_label(self, label: &'static str) -> Self {
        AnalysisExec { label: Some(label), ..self }
    }

    /// The same node, as stage `stage` of its call. A merge, or a step of one task, has one
    /// partition: a distributed engine runs every partition a node declares in each task it
    /// gives the node's stage (restricting only the scans and shuffle reads below it), so a
    /// second, empty partition made a stage of two tasks, each with the whole answer, when the
    /// stage was split between two executors. A node that reads its answer whole in each of its
    /// tasks runs it again in each (it is small: the partials merged, the check of the DAG).
    pub fn with_stage(self, stage: Stage) -> Self {
        AnalysisExec { stage, ..self }
    }

    /// How it reads its inputs' partitions.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Which node of its call it is.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The same node, knowing the call that planned it.
    pub fn with_call(self, call: Option<crate::plan::Call>) -> Self {
        AnalysisExec { call, ..self }
    }

    /// The call that planned this node (None for a node made without a registered function).
    pub fn call(&self) -> Option<&crate::plan::Call> {
        self.call.as_ref()
    }

    /// The output columns the query reads (None: all).
    pub fn projection(&self) -> Option<&Vec<usize>> {
        self.projection.as_ref()
    }

    /// The identity of its call ([`crate::plan::CALL_ID`] in its schema's metadata).
    pub fn call_id(&self) -> Option<&str> {
        self.full_schema.metadata().get(crate::plan::CALL_ID).map(String::as_str)
    }
}

impl DisplayAs for AnalysisExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "{}: analysis", self.name)?;
                match self.work {
                    Work::Streamed(_) => f.write_str(", streamed")?,
                    Work::ByRank(_, column) | Work::Folded(_, Main::ByRank(column)) => {
                        match self.inputs[0].schema().field(column).name().as_str() {
                            "rank" => f.write_str(", streamed by rank")?,
                            other => write!(f, ", streamed in order of {other}")?,
                        }
                    }
                    Work::Folded(..) => f.write_str(", streamed")?,
                    Work::Whole(_) => {}
                }
                if self.reads_parts_in_turn() {
                    f.write_str(", its input's partitions in turn")?;
                }
                match self.stage {
                    Stage::Answer => {}
                    Stage::Partial => f.write_str(", partials")?,
                    Stage::Merge => f.write_str(", merge of the partials")?,
                    Stage::Prefold { .. } | Stage::Step(_) => {}
                }
                if let Some(label) = self.label {
                    write!(f, ", {label}")?;
                }
                if let Some(columns) = &self.exchange {
                    let schema = self.inputs[0].schema();
                    let names: Vec<&str> = columns.iter().map(|&c| schema.field(c).name().as_str()).collect();
                    write!(f, ", its rows exchanged by {}", names.join(", "))?;
                }
                match self.placement {
                    Placement::Local => {}
                    Placement::Whole => f.write_str(", one task reading its inputs whole")?,
                    Placement::ByPart if self.exchange.is_some() => {
                        f.write_str(", a task per partition of the exchange")?
                    }
                    Placement::ByPart => f.write_str(", a task per part of its first input")?,
                    Placement::Routed => {
                        f.write_str(", a task per part of its first input, with the rows of its ranks' part")?
                    }
                }
                f.write_str(&projection_text(&self.full_schema, self.projection.as_deref()))
            }
            DisplayFormatType::TreeRender => write!(f, "function={}", self.name),
        }
    }
}

impl ExecutionPlan for AnalysisExec {
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

    /// Streamed by rank: the main input in one stream, in rank order (the scans of the
    /// rank-ordered tables are, partition by partition, and DataFusion merges them).
    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        let mut each = vec![Distribution::UnspecifiedDistribution; self.inputs.len()];
        if self.placement != Placement::Local {
            each = vec![Distribution::SinglePartition; self.inputs.len()];
        }
        if matches!(self.work, Work::ByRank(..) | Work::Folded(_, Main::ByRank(_))) {
            each[0] = Distribution::SinglePartition;
        }
        if self.placement == Placement::ByPart {
            // Each part on its own (in rank order within it, for a sweep by rank), or the rows
            // of a key together.
            each[0] = match &self.exchange {
                Some(columns) => Distribution::KeyPartitioned(key_columns(&self.inputs[0].schema(), columns)),
                None => Distribution::UnspecifiedDistribution,
            };
        }
        if let Some(routed) = &self.routes {
            each[0] = Distribution::UnspecifiedDistribution;
            for (i, key) in &routed.exchanged {
                each[*i] = Distribution::KeyPartitioned(vec![key.clone()]);
            }
        }
        InputDistributionRequirements::new(each)
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        let mut each = vec![None; self.inputs.len()];
        if let Work::ByRank(_, rank) | Work::Folded(_, Main::ByRank(rank)) = self.work {
            let order = crate::by_rank::rank_order(&self.inputs[0].schema(), rank);
            each[0] = LexRequirement::new([order.into()]).map(OrderingRequirements::new);
        }
        each
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
        let mut node = AnalysisExec::placed(
            &self.name,
            children,
            self.work.clone(),
            self.full_schema.clone(),
            self.projection.clone(),
            self.placement,
        )?;
        node.metrics = self.metrics.clone();
        node.call = self.call.clone();
        node = node.with_stage(self.stage);
        if let Some(columns) = self.output_order.clone() {
            node = node.with_output_order(columns);
        }
        node.input_order = self.input_order.clone();
        if let Some(columns) = self.exchange.clone() {
            node = node.with_exchange(columns);
        }
        node.label = self.label;
        node.any_order = self.any_order;
        node.in_turn = self.in_turn;
        if let Some(routed) = &self.routes {
            let exchanged: Vec<usize> = routed.exchanged.iter().map(|(i, _)| *i).collect();
            node = node.with_routes(routed.routes.clone(), &exchanged)?.serving(routed.route.clone());
        }
        Ok(Arc::new(node))
    }

    /// The analysis's batches, under the node's schema (which carries the call's metadata,
    /// [`crate::plan::CALL_ID`], that the batches the work builds do not).
    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let schema = self.schema();
        let batches = self.execute_work(partition, context)?;
        let under = schema.clone();
        // A step of one task passes on at most `RUN_ONCE_ROWS` rows (crate::once::run_once).
        let once = matches!(self.stage, Stage::Step(_)) && self.placement == Placement::Whole;
        let (name, mut rows) = (self.name.clone(), 0usize);
        let batches = batches.map(move |b| {
            let b = b?;
            rows += b.num_rows();
            if once && rows >= crate::once::RUN_ONCE_ROWS {
                return datafusion::common::exec_err!(
                    "{name}: a step of one task gives {rows} rows or more, past the {} a step of one task passes on",
                    crate::once::RUN_ONCE_ROWS - 1
                );
            }
            Ok(b.with_schema(under.clone())?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl AnalysisExec {
    fn execute_work(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let mut part = (self.placement == Placement::ByPart).then_some(partition);
        let mut inputs = self.inputs.clone();
        if let Some(routed) = &self.routes {
            inputs = routed_inputs(inputs, routed, partition)?;
            // The first input is now that partition alone.
            part = Some(0);
        }
        if part.is_some() {
            // Every part's execution reads the other inputs whole, each with a plan of its own:
            // a scan's partitions share their files among the executions of one plan.
            for input in inputs.iter_mut().skip(1) {
                *input = datafusion::physical_plan::execution_plan::reset_plan_states(input.clone())?;
            }
        }
        let compute = match &self.work {
            Work::Whole(compute) => compute.clone(),
            Work::ByRank(prepare, rank) => {
                let pool = context.memory_pool().clone();
                let in_order =
                    crate::by_rank::in_order(&self.name, prepare.clone(), *rank, self.full_schema.clone(), pool);
                let projection = self.projection.clone();
                let side = crate::stream::Side::Held(in_order);
                let streamed = crate::stream::Streamed::new(&self.name, side, projection, part);
                return Ok(streamed.execute(self.schema(), inputs, baseline, context));
            }
            Work::Streamed(prepare) => {
                let projection = self.projection.clone();
                let side = crate::stream::Side::Held(prepare.clone());
                let merged_on = match &self.input_order {
                    Some(columns) => {
                        datafusion::physical_expr::LexOrdering::new(ascending(&self.inputs[0].schema(), columns))
                    }
                    None => None,
                };
                let in_turn = self.reads_parts_in_turn();
                let streamed = crate::stream::Streamed {
                    merged_on,
                    in_turn,
                    ..crate::stream::Streamed::new(&self.name, side, projection, part)
                };
                return Ok(streamed.execute(self.schema(), inputs, baseline, context));
            }
            Work::Folded(start, main) => {
                let output = self.full_schema.clone();
                let wrap: Option<crate::stream::Wrap> = match *main {
                    Main::Batches => None,
                    Main::ByRank(rank) => {
                        Some(crate::by_rank::wrapper(&self.name, rank, output, context.memory_pool().clone()))
                    }
                    Main::Whole => Some(Arc::new(move |inner| {
                        Box::new(crate::stream::WholeInput::new(inner, output.clone()))
                            as Box<dyn crate::stream::Mapper>
                    })),
                };
                let side = crate::stream::Side::Folded(start.clone(), wrap);
                let projection = self.projection.clone();
                let streamed = crate::stream::Streamed::new(&self.name, side, projection, part);
                return Ok(streamed.execute(self.schema(), inputs, baseline, context));
            }
        };
        let projection = self.projection.clone();
        let name = self.name.clone();
        let run = async move {
            let (read, reservation) = crate::budget::read_held(&name, inputs, &context).await?;
            let timer = baseline.elapsed_compute().clone();
            let work = move || {
                let _running = timer.timer();
                compute(&read)
            };
            let out = off_the_workers(&name, work).await??;
            let out: Vec<RecordBatch> = match &projection {
                Some(p) => out.iter().map(|b| b.project(p)).collect::<std::result::Result<_, _>>()?,
                None => out,
            };
            baseline.record_output(out.iter().map(RecordBatch::num_rows).sum());
            baseline.done();
            drop(reservation);
            Ok::<_, DataFusionError>(out)
        };
        Ok(batches_once(self.schema(), run))
    }
}

/// The columns `columns` of `schema`, as expressions of a key.
fn key_columns(schema: &SchemaRef, columns: &[usize]) -> Vec<Arc<dyn PhysicalExpr>> {
    columns
        .iter()
        .map(|&c| {
            Arc::new(datafusion::physical_expr::expressions::Column::new(schema.field(c).name(), c))
                as Arc<dyn PhysicalExpr>
        })
        .collect()
}

/// The inputs task `task` of a routed node reads ([`Placement::Routed`]): partition `task` of
/// the first and of the `exchanged` inputs, each row checked against the route the task
/// serves, and the other inputs whole.
fn routed_inputs(
    mut inputs: Vec<Arc<dyn ExecutionPlan>>,
    routed: &Routed,
    task: usize,
) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
    use crate::routes::{Served, Slice};
    let served = Served::default();
    for (i, input) in inputs.iter_mut().enumerate() {
        let exchanged = routed.exchanged.iter().any(|(e, _)| *e == i);
        if exchanged && crate::once::runs_once(input) {
            // Rows of one partition exchanged into one ([`crate::routes::Routes::exchanged`]).
            let rank = input.schema().index_of("rank")?;
            let route = routed.route.as_ref().and_then(|r| r.get(task).copied()).unwrap_or(task);
            *input = Arc::new(Slice::filtered(input.clone(), route, &routed.routes, rank));
        } else if i == 0 || exchanged {
            let rank = input.schema().index_of("rank")?;
            *input = Arc::new(Slice::checked(input.clone(), task, &routed.routes, rank, &served));
        } else {
            *input = datafusion::physical_plan::execution_plan::reset_plan_states(input.clone())?;
        }
    }
    Ok(inputs)
}
