//! Shared machinery of commdb's table functions. An analysis function takes the name of a
//! relation (table or view) as its first argument, resolves it while the query is planned (so
//! the output schema is known), and computes its result when the query executes: `Derived`
//! plans the scan of the relation (or several) with the session's own planner and returns an
//! `AnalysisExec` (crate::plan) that reads them and runs the function's computation. Arguments
//! are literals; NULL (or an omitted named argument) means "the default".

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::{cast, concat};
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{ScalarValue, TableReference, internal_err, plan_err};
use datafusion::datasource::provider_as_source;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, TableType};
use datafusion::physical_plan::ExecutionPlan;

use crate::declare::{Function, Param, ParamDefault, Type};
use crate::plan::{AnalysisExec, Placement, Stage, Work};

/// The computation of a derived table: input batches (the projected input columns) in,
/// result batches out.
pub type Compute = Arc<dyn Fn(&[RecordBatch]) -> Result<Vec<RecordBatch>> + Send + Sync>;

pub use crate::plan::ComputeMany;

/// A relation and the columns of it to read (None: all).
pub type Projected = (Relation, Option<Vec<usize>>);

/// One relation a derived table reads, with the columns it needs.
#[derive(Clone)]
struct Input {
    provider: Arc<dyn TableProvider>,
    reference: TableReference,
    projection: Option<Vec<usize>>,
}

/// A table computed from other relations when the query runs; its plan node is named after
/// the function (`named`).
#[derive(Clone)]
pub struct Derived {
    name: &'static str,
    schema: SchemaRef,
    inputs: Vec<Input>,
    work: Work,
    /// Inputs read only when the query reads a column of the output: (input, output column);
    /// otherwise the computation gets no rows of them.
    only_for: Vec<(usize, usize)>,
    /// The call that planned it, for another process to plan it again (crate::recipe).
    call: Option<crate::recipe::Call>,
    /// Whether it is planned for a distributed engine (planned again there, crate::recipe).
    distributed: bool,
    /// How it spreads over a distributed engine's tasks (None: one task).
    spread: Option<Spread>,
}

impl fmt::Debug for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spread::Rows => f.write_str("Rows"),
            Spread::Merged { work, .. } => write!(f, "Merged({work:?})"),
            Spread::SortedMerge { work, sorted_on, .. } => write!(f, "SortedMerge({work:?}, {sorted_on})"),
        }
    }
}

/// How an analysis spreads over a distributed engine's tasks, a task per partition of its first
/// input (docs/scale.md); one that declares none runs in one task there, reading its inputs
/// whole. Its other inputs are read whole by every task.
#[derive(Clone)]
pub enum Spread {
    /// The rows of the parts together are the answer. A sweep by rank spreads only over parts
    /// of whole ranks: a store's calls or events, whose parts end where a rank ends.
    Rows,
    /// Each part gives partial rows (`schema`, made by `work` as the answer's work would make
    /// the answer), and one task merges them into the answer (`merge`).
    Merged { schema: SchemaRef, work: Work, merge: Compute },
    /// Each part gives partial rows (`schema`, by `work`) sorted on their first `sorted_on`
    /// columns; they are merged in that order into one stream, which the mapper `merge` makes
    /// maps into the answer as it comes, holding only what it keeps of them. With the answer's
    /// own work and `crate::stream::AsTheyCome`, the parts' rows in the order one sweep over
    /// the whole gives them, for a consumer whose answer depends on it (`delta_histogram`).
    SortedMerge { schema: SchemaRef, work: Work, sorted_on: usize, merge: crate::stream::Prepare },
}

impl fmt::Debug for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inputs: Vec<&TableReference> = self.inputs.iter().map(|i| &i.reference).collect();
        f.debug_struct("Derived")
            .field("name", &self.name)
            .field("inputs", &inputs)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Derived {
    pub fn new(schema: SchemaRef, input: Relation, projection: Option<Vec<usize>>, compute: Compute) -> Self {
        let many: ComputeMany = Arc::new(move |inputs| compute(&inputs[0]));
        Derived::from_many(schema, vec![(input, projection)], many)
    }

    /// A table computed from several relations, each read with its projection.
    pub fn from_many(schema: SchemaRef, inputs: Vec<Projected>, compute: ComputeMany) -> Self {
        let inputs = inputs
            .into_iter()
            .map(|(r, projection)| Input { provider: r.provider, reference: r.reference, projection })
            .collect();
        Derived {
            name: "analysis",
            schema: with_call_id(&schema),
            inputs,
            work: Work::Whole(compute),
            only_for: Vec::new(),
            call: None,
            distributed: false,
            spread: None,
        }
    }

    /// The same table, spreading over a distributed engine's tasks as `spread` says.
    pub fn spreading(self, spread: Spread) -> Derived {
        Derived { spread: Some(spread), ..self }
    }

    /// A table made by streaming the first of `inputs` through the mapper that `prepare` makes
    /// from the others.
    pub fn streamed(schema: SchemaRef, inputs: Vec<Projected>, prepare: crate::stream::Prepare) -> Self {
        let unused: ComputeMany = Arc::new(|_| internal_err!("a streamed analysis has no whole computation"));
        Derived { work: Work::Streamed(prepare), ..Derived::from_many(schema, inputs, unused) }
    }

    /// A table made by sweeping the first of `inputs` a chunk of whole ranks at a time (its
    /// column `rank`, an index into its projection) through the mapper `prepare` makes from the
    /// others; a first input not in rank order is read whole and ordered (crate::by_rank).
    pub fn by_rank(schema: SchemaRef, inputs: Vec<Projected>, rank: usize, prepare: crate::stream::Prepare) -> Self {
        let unused: ComputeMany = Arc::new(|_| internal_err!("an analysis streamed by rank has no whole computation"));
        Derived { work: Work::ByRank(prepare, rank), ..Derived::from_many(schema, inputs, unused) }
    }

    /// A table made by folding the other `inputs` batch by batch into what `start`'s folder
    /// keeps, then mapping the first as `main` says; a first input to be read by rank that is
    /// not in rank order is read whole, as one chunk (crate::by_rank).
    pub fn folded(
        schema: SchemaRef,
        inputs: Vec<Projected>,
        main: crate::plan::Main,
        start: crate::stream::StartFold,
    ) -> Self {
        let unused: ComputeMany = Arc::new(|_| internal_err!("a folded analysis has no whole computation"));
        Derived { work: Work::Folded(start, main), ..Derived::from_many(schema, inputs, unused) }
    }

    /// The same table, reading input `input` only when the query reads output column `column`
    /// (a column that costs a relation of its own, as `wait_states`' call paths).
    pub fn reading_only_for(mut self, input: usize, column: &str) -> Result<Derived> {
        let column = self.schema.index_of(column)?;
        self.only_for.push((input, column));
        Ok(self)
    }

    /// The same table, its plan node named after the function `name`.
    pub fn named(&self, name: &'static str) -> Derived {
        Derived { name, ..self.clone() }
    }

    /// The same table, knowing the call that planned it; the analyses it made as its inputs
    /// know it too, with their place among its inputs.
    pub fn with_call(self, call: crate::recipe::Call) -> Derived {
        let inputs = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, input)| match input.provider.downcast_ref::<Derived>() {
                Some(inner) if inner.call.is_none() => {
                    Input { provider: Arc::new(inner.clone().with_call(call.nested(i))), ..input.clone() }
                }
                _ => input.clone(),
            })
            .collect();
        Derived { call: Some(call), inputs, ..self }
    }

    /// The same table for a distributed engine: its node asks for each input as one partition,
    /// and so do the analyses it made as its inputs.
    pub fn distributed(self) -> Derived {
        let inputs = self
            .inputs
            .iter()
            .map(|input| match input.provider.downcast_ref::<Derived>() {
                Some(inner) => Input { provider: Arc::new(inner.clone().distributed()), ..input.clone() },
                None => input.clone(),
            })
            .collect();
        Derived { distributed: true, inputs, ..self }
    }

    /// Input `input`, when it is an analysis.
    pub fn input_analysis(&self, input: usize) -> Option<&Derived> {
        self.inputs.get(input)?.provider.downcast_ref::<Derived>()
    }

    /// The call that planned this table, when it was planned through a registered function.
    pub fn call(&self) -> Option<&crate::recipe::Call> {
        self.call.as_ref()
    }

    /// The identity of this call (`CALL_ID` in its schema's metadata).
    pub fn call_id(&self) -> Option<&str> {
        self.schema.metadata().get(CALL_ID).map(String::as_str)
    }

    /// The same table under the call identity `id` (the one it had where it was first planned).
    pub fn with_call_id(self, id: &str) -> Derived {
        let mut metadata = self.schema.metadata().clone();
        metadata.insert(CALL_ID.to_string(), id.to_string());
        let schema = Arc::new(self.schema.as_ref().clone().with_metadata(metadata));
        Derived { schema, ..self }
    }

    /// The analysis node over `inputs` (the plans of this table's inputs, in order), giving the
    /// output columns `projection`: in one process, or for a distributed engine in one task.
    pub fn analysis(
        &self,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
    ) -> Result<AnalysisExec> {
        let placement = if self.distributed { Placement::Whole } else { Placement::Local };
        self.node(Stage::Answer, placement, inputs, projection)
    }

    /// Node `stage` of this analysis over `inputs` (for the merge, the partials' node), reading
    /// them as `placement` says, giving the output columns `projection`.
    pub fn node(
        &self,
        stage: Stage,
        placement: Placement,
        mut inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
    ) -> Result<AnalysisExec> {
        let (work, schema, projection) = match (stage, &self.spread) {
            (Stage::Answer, _) => (self.work.clone(), self.schema.clone(), projection),
            (Stage::Partial, Some(Spread::Merged { schema, work, .. } | Spread::SortedMerge { schema, work, .. })) => {
                (work.clone(), schema.clone(), None)
            }
            (Stage::Merge, Some(Spread::Merged { merge, .. })) => {
                let merge = merge.clone();
                let work = Work::Whole(Arc::new(move |inputs: &[Vec<RecordBatch>]| merge(&inputs[0])));
                let node =
                    AnalysisExec::placed(self.name, inputs, work, self.schema.clone(), projection.cloned(), placement)?;
                return Ok(node.with_call(self.call.clone()).with_stage(stage));
            }
            (Stage::Merge, Some(Spread::SortedMerge { merge, sorted_on, .. })) => {
                let work = Work::Streamed(merge.clone());
                let node =
                    AnalysisExec::placed(self.name, inputs, work, self.schema.clone(), projection.cloned(), placement)?;
                let node = node.with_call(self.call.clone()).with_stage(stage);
                return Ok(node.with_input_order((0..*sorted_on).collect()));
            }
            (stage, _) => return internal_err!("{}: has no {stage:?} stage", self.name),
        };
        if inputs.len() != self.inputs.len() {
            return internal_err!("{}: expects {} inputs, got {}", self.name, self.inputs.len(), inputs.len());
        }
        for &(input, column) in &self.only_for {
            if projection.is_some_and(|p| !p.contains(&column)) {
                let schema = inputs[input].schema();
                inputs[input] = Arc::new(datafusion::physical_plan::empty::EmptyExec::new(schema));
            }
        }
        let work = match work {
            Work::ByRank(prepare, rank) if !crate::by_rank::is_in_rank_order(&inputs[0], rank)? => {
                Work::Whole(Arc::new(move |inputs| crate::by_rank::whole(&prepare, inputs)))
            }
            Work::Folded(start, crate::plan::Main::ByRank(rank))
                if !crate::by_rank::is_in_rank_order(&inputs[0], rank)? =>
            {
                Work::Folded(start, crate::plan::Main::Whole)
            }
            work => work,
        };
        let node = AnalysisExec::placed(self.name, inputs, work, schema, projection.cloned(), placement)?;
        let node = node.with_call(self.call.clone()).with_stage(stage);
        Ok(match (&self.spread, placement, stage) {
            (Some(Spread::SortedMerge { sorted_on, .. }), Placement::ByPart, Stage::Partial) => {
                node.with_output_order((0..*sorted_on).collect())
            }
            _ => node,
        })
    }

    /// How this analysis, planned for a distributed engine over `inputs`, reads them: a task
    /// per part of its first input when it declares a spread and the parts allow it (a sweep by
    /// rank needs parts of whole ranks, in rank order, that the scan neither splits nor lets its
    /// partitions take from each other), else one task.
    fn placement_over(&self, session: &dyn Session, inputs: &[Arc<dyn ExecutionPlan>]) -> Result<Placement> {
        use datafusion::physical_plan::ExecutionPlanProperties;
        let Some(first) = inputs.first() else { return Ok(Placement::Whole) };
        if self.spread.is_none() || first.output_partitioning().partition_count() < 2 {
            return Ok(Placement::Whole);
        }
        let by_rank = match &self.work {
            Work::ByRank(_, rank) | Work::Folded(_, crate::plan::Main::ByRank(rank)) => Some(*rank),
            Work::Streamed(_) | Work::Folded(..) => None,
            Work::Whole(_) => return Ok(Placement::Whole),
        };
        if let Some(rank) = by_rank {
            let whole_ranks = self.inputs[0]
                .provider
                .downcast_ref::<commdb_catalog::session::trace_table::TraceTable>()
                .is_some_and(|t| t.parts_hold_whole_ranks());
            let options = session.config_options();
            let unsplit =
                !options.optimizer.repartition_file_scans && !options.execution.enable_file_stream_work_stealing;
            if !(whole_ranks && unsplit && crate::by_rank::is_in_rank_order(first, rank)?) {
                return Ok(Placement::Whole);
            }
        }
        Ok(Placement::ByPart)
    }
}

/// The key of the schema metadata that tells two calls of a table function apart.
pub const CALL_ID: &str = "commdb.call";

/// `schema` with a metadata entry of its own (`CALL_ID`). DataFusion 55 names the scan of
/// every table function call `f()` whatever its arguments and compares scans by name and
/// schema, not by what they read: two uncorrelated subqueries such as `(SELECT sum(bytes) FROM
/// comm_matrix('a.messages'))` and the same over 'b.messages' were planned as one, and the
/// first's answer given for both. A schema of its own per call keeps them apart.
fn with_call_id(schema: &SchemaRef) -> SchemaRef {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut metadata = schema.metadata().clone();
    metadata.insert(CALL_ID.to_string(), id.to_string());
    Arc::new(schema.as_ref().clone().with_metadata(metadata))
}

#[async_trait]
impl TableProvider for Derived {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            let source = provider_as_source(input.provider.clone());
            let plan = LogicalPlanBuilder::scan(input.reference.clone(), source, input.projection.clone())?.build()?;
            inputs.push(state.create_physical_plan(&plan).await?);
        }
        if !self.distributed {
            return Ok(Arc::new(self.analysis(inputs, projection)?));
        }
        let placement = self.placement_over(state, &inputs)?;
        if let (Placement::ByPart, Some(Spread::Merged { .. } | Spread::SortedMerge { .. })) = (placement, &self.spread)
        {
            let partials = Arc::new(self.node(Stage::Partial, Placement::ByPart, inputs, None)?);
            return Ok(Arc::new(self.node(Stage::Merge, Placement::Whole, vec![partials], projection)?));
        }
        Ok(Arc::new(self.node(Stage::Answer, placement, inputs, projection)?))
    }
}

/// A relation named in a function call, resolved in the session's catalogs.
#[derive(Debug, Clone)]
pub struct Relation {
    pub reference: TableReference,
    pub provider: Arc<dyn TableProvider>,
}

impl Relation {
    pub fn schema(&self) -> SchemaRef {
        self.provider.schema()
    }

    /// Indices of `columns` in the relation, or a planning error naming the missing one.
    pub fn columns(&self, function: &str, columns: &[&str]) -> Result<Vec<usize>> {
        let schema = self.schema();
        columns
            .iter()
            .map(|c| match schema.index_of(c) {
                Ok(i) => Ok(i),
                Err(_) => plan_err!(
                    "{function}: relation '{}' has no column '{c}' (it needs {})",
                    self.reference,
                    columns.join(", ")
                ),
            })
            .collect()
    }
}

/// The output of a future that planning needs at once (a table looked up in a schema, a
/// query planned for a view): it is polled once, which is all in-memory catalogs need, and
/// only when it is not ready is it waited for, on this thread. Waiting inside another wait
/// (a function planned while another's query is planned) is an error, not a panic.
pub fn wait_for<F: std::future::Future>(future: F) -> Result<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
        return Ok(out);
    }
    match futures::executor::enter() {
        Ok(guard) => {
            drop(guard);
            Ok(futures::executor::block_on(future))
        }
        Err(_) => plan_err!(
            "a table this query reads is not ready while another function's query is planned; query it on its own first"
        ),
    }
}

/// Resolve a relation name (`messages`, `run2.messages`, a view) in the session.
pub fn resolve(session: &dyn Session, function: &str, name: &str) -> Result<Relation> {
    let reference = TableReference::from(name);
    let options = &session.config().options().catalog;
    let resolved = reference.clone().resolve(&options.default_catalog, &options.default_schema);
    let provider = session
        .catalog_list()
        .catalog(&resolved.catalog)
        .and_then(|c| c.schema(&resolved.schema))
        .map(|schema| wait_for(schema.table(&resolved.table)))
        .transpose()?
        .transpose()?
        .flatten();
    match provider {
        Some(provider) => {
            let relation = Relation { reference, provider };
            crate::recipe::note(crate::recipe::Lookup::Relation(relation.clone()));
            Ok(relation)
        }
        None => plan_err!("{function}: no table or view named '{name}'"),
    }
}

/// The schema of the one trace whose tables a relation reads, looking through views (and
/// their subqueries): `Some("public")` for `messages` or a view over it, `Some("run2")` for
/// `run2.messages` or a view over that. None when the rows come from no trace (a table made
/// with CREATE TABLE AS, a CSV file) or from several. Analyses use it to measure a narrowed
/// relation against the whole trace it was cut from.
pub fn trace_schema(session: &dyn Session, relation: &Relation) -> Option<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    base_tables(session, &relation.reference, &relation.provider, &mut found, 0);
    found.sort();
    found.dedup();
    match found.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Views nest at most this deep before lineage gives up.
const MAX_VIEW_DEPTH: usize = 32;

/// The (catalog, schema) of every trace table `provider` reads, recursing into views.
fn base_tables(
    session: &dyn Session,
    reference: &TableReference,
    provider: &Arc<dyn TableProvider>,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::logical_expr::LogicalPlan;
    if depth > MAX_VIEW_DEPTH {
        return;
    }
    if let Some(view) = provider.downcast_ref::<datafusion::datasource::ViewTable>() {
        let _ = view.logical_plan().apply_with_subqueries(|plan| {
            if let LogicalPlan::TableScan(scan) = plan
                && let Ok(inner) = datafusion::datasource::source_as_provider(&scan.source)
            {
                base_tables(session, &scan.table_name, &inner, out, depth + 1);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        return;
    }
    let options = &session.config().options().catalog;
    let resolved = reference.clone().resolve(&options.default_catalog, &options.default_schema);
    let is_trace_table = commdb_catalog::model::TABLES.iter().any(|t| t.name == &*resolved.table);
    let schema = session.catalog_list().catalog(&resolved.catalog).and_then(|c| c.schema(&resolved.schema));
    if is_trace_table && schema.is_some_and(|s| s.table_exist("trace_info")) {
        crate::recipe::note(crate::recipe::Lookup::TraceSchema(
            resolved.catalog.to_string(),
            resolved.schema.to_string(),
        ));
        out.push((resolved.catalog.to_string(), resolved.schema.to_string()));
    }
}

/// The least of `lo` and the greatest of `hi` (expressions over the relation's columns, e.g.
/// `col("ts")`) over a relation, as an input of one row (lo, hi) aggregated as the relation
/// streams by: what an analysis must know before it reads the relation's rows (the span its
/// bins or slots cut).
pub fn bounds_of(relation: &Relation, lo: Expr, hi: Expr) -> Result<Projected> {
    use datafusion::functions_aggregate::expr_fn::{max, min};
    let plan =
        LogicalPlanBuilder::scan(relation.reference.clone(), provider_as_source(relation.provider.clone()), None)?
            .aggregate(Vec::<Expr>::new(), vec![min(lo).alias("lo"), max(hi).alias("hi")])?
            .build()?;
    let bounds = Relation {
        reference: TableReference::bare(format!("span of {}", relation.reference)),
        provider: Arc::new(datafusion::datasource::ViewTable::new(plan, None)),
    };
    Ok((bounds, None))
}

/// (lo, hi) as `bounds_of`'s input read them (None where the relation has no values).
pub fn bounds_read(batches: &[RecordBatch]) -> Result<(Option<i64>, Option<i64>)> {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for b in batches {
        let first = cast(b.column(0), &DataType::Int64)?;
        let last = cast(b.column(1), &DataType::Int64)?;
        if let Some(m) = arrow::compute::min(first.as_primitive::<Int64Type>()) {
            lo = Some(lo.map_or(m, |l| l.min(m)));
        }
        if let Some(m) = arrow::compute::max(last.as_primitive::<Int64Type>()) {
            hi = Some(hi.map_or(m, |h| h.max(m)));
        }
    }
    Ok((lo, hi))
}

/// A table of the trace in `schema` (as `trace_schema` returns it), resolved.
pub fn trace_table(session: &dyn Session, function: &str, schema: &(String, String), table: &str) -> Result<Relation> {
    resolve(session, function, &format!("{}.{}.{table}", quote(&schema.0), quote(&schema.1)))
}

/// An identifier quoted for a table reference.
fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// A duration literal in nanoseconds (`'2ms'`, `'1.5 s'`); None when the text is not one.
pub use commdb_catalog::session::durations::duration_ns;

/// The arguments of a call, read by their declared names: each given literal has been
/// checked against its parameter's declared type when the call was planned, and an omitted
/// (or NULL) one is its declared default.
#[derive(Debug)]
pub struct Args<'a> {
    pub function: &'static str,
    declaration: &'static Function,
    exprs: &'a [Expr],
}

impl<'a> Args<'a> {
    /// The arguments of `declaration` in `exprs` (named ones already in their places),
    /// each checked against its declared type.
    pub fn new(declaration: &'static Function, exprs: &'a [Expr]) -> Result<Self> {
        let function = declaration.name;
        let params = declaration.params;
        if exprs.len() > params.len() {
            let names: Vec<&str> = params.iter().map(|p| p.name).collect();
            return plan_err!(
                "{function}: takes at most {} arguments ({}), got {}",
                params.len(),
                names.join(", "),
                exprs.len()
            );
        }
        let args = Args { function, declaration, exprs };
        for (i, p) in params.iter().enumerate() {
            match args.literal_at(i)? {
                Some(v) => check(function, p, &v).map_err(|e| with_hint(e, declaration, p, &v))?,
                None if p.default == ParamDefault::Required => {
                    return plan_err!("{function}: argument {} is required ({})", p.name, p.meaning);
                }
                None => {}
            }
        }
        Ok(args)
    }

    fn literal_at(&self, i: usize) -> Result<Option<ScalarValue>> {
        match self.exprs.get(i) {
            None => Ok(None),
            Some(Expr::Literal(v, _)) if v.is_null() => Ok(None),
            Some(Expr::Literal(v, _)) => Ok(Some(v.clone())),
            Some(other) => {
                plan_err!(
                    "{}: argument {} must be a literal, got {other}",
                    self.function,
                    self.declaration.params[i].name
                )
            }
        }
    }

    /// The declared parameter `name` and the literal given for it (None: omitted or NULL).
    fn get(&self, name: &str) -> Result<(&'static Param, Option<ScalarValue>)> {
        match self.declaration.param(name) {
            Some((i, p)) => Ok((p, self.literal_at(i)?)),
            None => internal_err!("{}: no parameter named {name} is declared", self.function),
        }
    }

    /// Whether the function declares a parameter `name`.
    pub fn declares(&self, name: &str) -> bool {
        self.declaration.param(name).is_some()
    }

    /// Whether argument `name` was given (and is not NULL).
    pub fn given(&self, name: &str) -> bool {
        matches!(self.get(name), Ok((_, Some(_))))
    }

    /// The relation named by argument `name`, or its declared default.
    pub fn relation(&self, session: &dyn Session, name: &str) -> Result<Relation> {
        match self.opt_relation(session, name)? {
            Some(r) => Ok(r),
            None => match self.get(name)?.0.default {
                ParamDefault::Text(table) => resolve(session, self.function, table),
                _ => internal_err!("{}: {name} has no default relation", self.function),
            },
        }
    }

    /// The relation named by argument `name`: None when omitted or NULL.
    pub fn opt_relation(&self, session: &dyn Session, name: &str) -> Result<Option<Relation>> {
        match self.get(name)?.1 {
            None => Ok(None),
            Some(v) => resolve(session, self.function, &text_of(&v).unwrap_or_default()).map(Some),
        }
    }

    /// Text argument `name` (a choice comes back as the declared word), or its default.
    pub fn text(&self, name: &str) -> Result<String> {
        match (self.opt_text(name)?, self.get(name)?.0.default) {
            (Some(t), _) => Ok(t),
            (None, ParamDefault::Text(t)) => Ok(t.to_string()),
            _ => internal_err!("{}: {name} has no default text", self.function),
        }
    }

    /// Text argument `name`: None when omitted or NULL.
    pub fn opt_text(&self, name: &str) -> Result<Option<String>> {
        let (p, v) = self.get(name)?;
        let Some(t) = v.as_ref().and_then(text_of) else { return Ok(None) };
        Ok(Some(match p.ty {
            Type::Choice(words) => words.iter().find(|w| w.eq_ignore_ascii_case(&t)).map_or(t, |w| w.to_string()),
            _ => t,
        }))
    }

    /// Time argument `name` in nanoseconds (an integer or a duration such as '2ms'): None
    /// when omitted or NULL.
    pub fn opt_ns(&self, name: &str) -> Result<Option<i64>> {
        let (_, v) = self.get(name)?;
        Ok(v.map(|v| match text_of(&v) {
            Some(t) => duration_ns(&t).unwrap_or_default(),
            None => whole(&v).unwrap_or_default(),
        }))
    }

    /// Integer argument `name`, or its declared default.
    pub fn int(&self, name: &str) -> Result<i64> {
        match (self.opt_int(name)?, self.get(name)?.0.default) {
            (Some(v), _) => Ok(v),
            (None, ParamDefault::Integer(d)) => Ok(d),
            _ => internal_err!("{}: {name} has no default integer", self.function),
        }
    }

    /// Integer argument `name`: None when omitted or NULL.
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.get(name)?.1.as_ref().and_then(whole))
    }

    /// Number argument `name`, or its declared default.
    pub fn float(&self, name: &str) -> Result<f64> {
        let (p, v) = self.get(name)?;
        match (v.as_ref().and_then(number), p.default) {
            (Some(x), _) => Ok(x),
            (None, ParamDefault::Number(d)) => Ok(d),
            _ => internal_err!("{}: {name} has no default number", self.function),
        }
    }
}

/// A text given where a number is declared, in a function that reads a relation, is most
/// likely the relation written first: say how to name it.
fn with_hint(e: DataFusionError, declaration: &Function, p: &Param, v: &ScalarValue) -> DataFusionError {
    let number = matches!(p.ty, Type::Integer { .. } | Type::Number { .. } | Type::Duration { .. });
    match (number, text_of(v), declaration.param("rel")) {
        (true, Some(t), Some((_, rel))) if rel.name != p.name && duration_ns(&t).is_none() => {
            DataFusionError::Plan(format!("{}; to name the relation, write rel => '{t}'", own_message(&e)))
        }
        _ => e,
    }
}

/// The message of a planning error without DataFusion's prefix.
fn own_message(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Plan(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Check a literal against its parameter's declared type, with an error naming the function,
/// the parameter and what it takes.
fn check(function: &str, p: &Param, v: &ScalarValue) -> Result<()> {
    let name = p.name;
    match p.ty {
        Type::Relation => {
            if text_of(v).is_none() {
                return plan_err!(
                    "{function}: {name} must be the name of a table or view as a string, e.g. '{}', got {v}",
                    match p.default {
                        ParamDefault::Text(t) => t,
                        _ => "messages",
                    }
                );
            }
        }
        Type::Text => {
            if text_of(v).is_none() {
                return plan_err!("{function}: {name} must be text, got {v}");
            }
        }
        Type::Choice(words) => {
            let ok = text_of(v).is_some_and(|t| words.iter().any(|w| w.eq_ignore_ascii_case(&t)));
            if !ok {
                let shown = match text_of(v) {
                    Some(t) => format!("'{t}'"),
                    None => v.to_string(),
                };
                return plan_err!("{function}: {name} must be {}, got {shown}", one_of(words));
            }
        }
        Type::Integer { min } => {
            // Only whole numbers: 1.5 is not silently 1, true is not 1, '7' is not 7.
            let Some(x) = whole(v) else {
                return plan_err!("{function}: {name} must be an integer, got {v} ({})", v.data_type());
            };
            if x < min {
                return plan_err!("{function}: {name} must be at least {min}, got {x}");
            }
        }
        Type::Number { min } => {
            let Some(x) = number(v) else {
                return plan_err!("{function}: {name} must be a number, got {v} ({})", v.data_type());
            };
            if !x.is_finite() || x < min {
                return plan_err!("{function}: {name} must be a number of at least {min}, got {x}");
            }
        }
        Type::Duration { min } => {
            let x = match text_of(v) {
                Some(t) => match duration_ns(&t) {
                    Some(x) => x,
                    None => {
                        return plan_err!(
                            "{function}: {name} must be nanoseconds or a duration such as '2ms' (units ns, us, ms, s, min), got '{t}'"
                        );
                    }
                },
                None => match whole(v) {
                    Some(x) => x,
                    None => return plan_err!("{function}: {name} must be an integer, got {v} ({})", v.data_type()),
                },
            };
            if x < min {
                return plan_err!("{function}: {name} must be at least {min}, got {x}");
            }
        }
        Type::Value(_) => {}
    }
    Ok(())
}

/// Words as a choice reads: `'a' or 'b'`, `'a', 'b' or 'c'`.
pub fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// The text of a string literal.
fn text_of(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
            Some(s.clone())
        }
        _ => None,
    }
}

/// An integer literal, or a floating-point one holding a whole number (`1e6`, `2.0`).
fn whole(v: &ScalarValue) -> Option<i64> {
    if !v.data_type().is_integer() && !is_whole_float(v) {
        return None;
    }
    match v.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(x))) => Some(x),
        _ => None,
    }
}

/// A numeric literal as f64.
fn number(v: &ScalarValue) -> Option<f64> {
    if !v.data_type().is_numeric() {
        return None;
    }
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(Some(x))) => Some(x),
        _ => None,
    }
}

/// A floating-point literal holding a whole number (`1e6`, `2.0`): accepted where an integer is
/// asked for.
fn is_whole_float(v: &ScalarValue) -> bool {
    match v {
        ScalarValue::Float64(Some(x)) => x.fract() == 0.0 && x.is_finite(),
        ScalarValue::Float32(Some(x)) => x.fract() == 0.0 && x.is_finite(),
        _ => false,
    }
}

/// One column of all batches as a single array cast to `to`.
pub fn column(batches: &[RecordBatch], index: usize, to: &DataType) -> Result<ArrayRef> {
    let parts: Vec<ArrayRef> = batches.iter().map(|b| cast(b.column(index), to)).collect::<Result<_, _>>()?;
    if parts.is_empty() {
        return Ok(arrow::array::new_empty_array(to));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(AsRef::as_ref).collect();
    Ok(concat(&refs)?)
}

/// An Int64 column of all batches.
pub fn int64_column(batches: &[RecordBatch], index: usize) -> Result<Int64Array> {
    Ok(column(batches, index, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

/// A text column of all batches.
pub fn text_column(batches: &[RecordBatch], index: usize) -> Result<StringArray> {
    Ok(column(batches, index, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// A Boolean column of all batches.
pub fn bool_column(batches: &[RecordBatch], index: usize) -> Result<BooleanArray> {
    Ok(column(batches, index, &DataType::Boolean)?.as_boolean().clone())
}

/// The region of every row of column `index` as an id into `names` (None for NULL and for
/// names `keep` rejects), reading dictionary-encoded regions once per dictionary entry.
pub fn region_ids(
    batches: &[RecordBatch],
    index: usize,
    keep: impl Fn(&str) -> bool,
    names: &mut Vec<String>,
) -> Result<Vec<Option<u32>>> {
    let mut ids = RegionIds::new(keep);
    let mut out = Vec::new();
    for b in batches {
        ids.append(b.column(index), names, &mut out)?;
    }
    Ok(out)
}

/// Region names as ids into a list of names, a column at a time (see `region_ids`).
pub struct RegionIds<K> {
    keep: K,
    ids: FastMap<String, u32>,
}

impl<K> fmt::Debug for RegionIds<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionIds").field("ids", &self.ids.len()).finish_non_exhaustive()
    }
}

impl<K: Fn(&str) -> bool> RegionIds<K> {
    pub fn new(keep: K) -> Self {
        RegionIds { keep, ids: FastMap::default() }
    }

    fn id_of(&mut self, name: &str, names: &mut Vec<String>) -> Option<u32> {
        if !(self.keep)(name) {
            return None;
        }
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        names.push(name.to_string());
        let id = names.len() as u32 - 1;
        self.ids.insert(name.to_string(), id);
        Some(id)
    }

    /// The id of every row of `col` appended to `out`.
    pub fn append(&mut self, col: &ArrayRef, names: &mut Vec<String>, out: &mut Vec<Option<u32>>) -> Result<()> {
        if let Some(dict) = col.as_any_dictionary_opt() {
            let values = cast(dict.values(), &DataType::Utf8)?;
            let values = values.as_string::<i32>();
            let per_value: Vec<Option<u32>> = (0..values.len())
                .map(|i| values.is_valid(i).then(|| self.id_of(values.value(i), names)).flatten())
                .collect();
            let keys = cast(dict.keys(), &DataType::Int64)?;
            let keys = keys.as_primitive::<Int64Type>();
            out.extend(
                (0..keys.len()).map(|i| if keys.is_valid(i) { per_value[keys.value(i) as usize] } else { None }),
            );
        } else {
            let text = cast(col, &DataType::Utf8)?;
            let text = text.as_string::<i32>();
            out.extend((0..text.len()).map(|i| text.is_valid(i).then(|| self.id_of(text.value(i), names)).flatten()));
        }
        Ok(())
    }
}

/// Turn an Arrow error into a DataFusion one.
pub fn arrow_err(e: arrow::error::ArrowError) -> DataFusionError {
    DataFusionError::ArrowError(Box::new(e), None)
}

pub use commdb_catalog::fast_hash::{FastHasher, FastMap};
