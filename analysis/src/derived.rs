//! An analysis as a table (`Derived`): what a table function returns. It says which relations
//! the function reads ([`crate::relation`]) and with which columns (`reads`: the children of its
//! call in the logical plan, [`crate::node`]), and makes the `AnalysisExec`
//! ([`crate::plan`]) that reads them and runs the function's work when the query executes
//! (`exec`); on a cluster it says how the work spreads over the tasks (`Spread`). Scanned as a
//! table (a view that shares it among its uses, [`crate::shared`]), it plans its inputs itself.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{TableReference, internal_err};
use datafusion::datasource::provider_as_source;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, TableType};
use datafusion::physical_plan::ExecutionPlan;

use crate::plan::{AnalysisExec, CALL_ID, ComputeMany, Placement, Stage, Work};
use crate::relation::{Projected, Relation};

/// The computation of a derived table: input batches (the projected input columns) in,
/// result batches out.
pub type Compute = Arc<dyn Fn(&[RecordBatch]) -> Result<Vec<RecordBatch>> + Send + Sync>;

/// A relation an analysis reads: its table, the name it is known by, the columns read (None:
/// all).
pub type Read = (Arc<dyn TableProvider>, TableReference, Option<Vec<usize>>);

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
    /// An analysis whose output begins with its first input's columns, as they are, and whose
    /// work reads only these of them (indices into the first input): a query that reads few of
    /// the output's columns reads only those and these of the input ([`Derived::passing_through`]).
    passes_through: Option<Vec<usize>>,
    /// The call that planned it, for another process to plan it again ([`crate::recipe`]).
    call: Option<crate::plan::Call>,
    /// Whether it is planned for a distributed engine (planned again there, [`crate::recipe`]).
    distributed: bool,
    /// How it spreads over a distributed engine's tasks (None: one task).
    spread: Option<Spread>,
    /// Whether, in one process, it reads its first input's partitions one after another
    /// ([`Derived::reading_parts_in_turn`]).
    in_turn: bool,
}

impl fmt::Debug for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spread::Rows => f.write_str("Rows"),
            Spread::Merged { work, .. } => write!(f, "Merged({work:?})"),
            Spread::SortedMerge { work, sorted_on, .. } => write!(f, "SortedMerge({work:?}, {sorted_on})"),
            Spread::Prefolded { prefolds, work, .. } => write!(f, "Prefolded({} inputs, {work:?})", prefolds.len()),
            Spread::Steps(steps) => write!(f, "Steps({steps:?})"),
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
    /// Some of the inputs an analysis folds are reduced first, spread over their own
    /// partitions and exchanged by key (`prefolds`: the wait states of the messages by the
    /// rank that waited, those of the collectives by instance); the answer, in one task, folds
    /// their rows in the inputs' places by `work` and reads its first input as its own work
    /// does (`label` says so in EXPLAIN); when `routed`, a task per part of whole ranks of its
    /// first input, each with the prefolded rows of its ranks ([`crate::routes`]).
    Prefolded { prefolds: Vec<Prefold>, work: Work, label: &'static str, routed: bool },
    /// Steps of its own ([`crate::steps`]), the last giving the answer: an analysis whose work
    /// the shapes above do not fit (the DAG: halves exchanged by rank, then by message).
    Steps(Vec<crate::steps::Step>),
}

/// An input of an analysis reduced before the answer reads it, on a distributed engine
/// ([`Spread::Prefolded`]): each partition of the input gives `partial` rows (or its rows as
/// they are), which the engine exchanges by a hash of their columns `by`, so that the rows of
/// one key meet in one task; there `reduce` makes the rows the answer folds in the input's
/// place. Each step is a node of its own ([`crate::plan::Stage::Prefold`]).
#[derive(Clone)]
pub struct Prefold {
    /// The input reduced (an index into the analysis's inputs).
    pub input: usize,
    /// The rows each partition of the input gives (their schema and work, and what EXPLAIN
    /// calls them); None: the input's own rows.
    pub partial: Option<(SchemaRef, Work, &'static str)>,
    /// The columns of the partials (or of the input) whose hash sends a row to its task.
    pub by: Vec<usize>,
    /// The rows each task of the exchange gives (their schema and work, and what EXPLAIN calls
    /// them).
    pub reduce: (SchemaRef, Work, &'static str),
}

impl fmt::Debug for Prefold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prefold").field("input", &self.input).field("by", &self.by).finish_non_exhaustive()
    }
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
            passes_through: None,
            call: None,
            distributed: false,
            spread: None,
            in_turn: false,
        }
    }

    /// The same table, spreading over a distributed engine's tasks as `spread` says.
    pub fn spreading(self, spread: Spread) -> Derived {
        Derived { spread: Some(spread), ..self }
    }

    /// The same table, reading its first input's partitions one after another, in their order,
    /// in one process ([`AnalysisExec::reading_parts_in_turn`]): the DAG's halves come nearly
    /// in each rank's time order from the messages part after part.
    pub fn reading_parts_in_turn(self) -> Derived {
        Derived { in_turn: true, ..self }
    }

    /// The same table, planned as `steps` on a distributed engine ([`Spread::Steps`]); an error
    /// unless they are a plan over its inputs.
    pub fn in_steps(self, steps: Vec<crate::steps::Step>) -> Result<Derived> {
        crate::steps::Step::check_plan(self.name, &steps, self.inputs.len())?;
        if u8::try_from(steps.len()).is_err() {
            return internal_err!("{}: too many steps", self.name);
        }
        Ok(self.spreading(Spread::Steps(steps)))
    }

    /// A table made by streaming the first of `inputs` through the mapper that `prepare` makes
    /// from the others.
    pub fn streamed(schema: SchemaRef, inputs: Vec<Projected>, prepare: crate::stream::Prepare) -> Self {
        let unused: ComputeMany = Arc::new(|_| internal_err!("a streamed analysis has no whole computation"));
        Derived { work: Work::Streamed(prepare), ..Derived::from_many(schema, inputs, unused) }
    }

    /// A table made by sweeping the first of `inputs` a chunk of whole ranks at a time (its
    /// column `rank`, an index into its projection) through the mapper `prepare` makes from the
    /// others; a first input not in rank order is read whole and ordered ([`crate::by_rank`]).
    pub fn by_rank(schema: SchemaRef, inputs: Vec<Projected>, rank: usize, prepare: crate::stream::Prepare) -> Self {
        let unused: ComputeMany = Arc::new(|_| internal_err!("an analysis streamed by rank has no whole computation"));
        Derived { work: Work::ByRank(prepare, rank), ..Derived::from_many(schema, inputs, unused) }
    }

    /// A table made by folding the other `inputs` batch by batch into what `start`'s folder
    /// keeps, then mapping the first as `main` says; a first input to be read by rank that is
    /// not in rank order is read whole, as one chunk ([`crate::by_rank`]).
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

    /// The same table, its output beginning with its first input's columns as they are, its
    /// streamed work reading only `reads` of them (indices into the first input, read whole):
    /// the query's plan then reads of the first input only the columns passed on that it
    /// reads and `reads` ([`crate::node`]'s `necessary_children_exprs`), and the mapper is
    /// told which (`Mapper::narrowed`). An error unless the work is streamed and the output
    /// begins with the input's columns.
    pub fn passing_through(self, reads: Vec<usize>) -> Result<Derived> {
        let Some(first) = self.inputs.first() else {
            return internal_err!("{}: passes through an input it does not have", self.name);
        };
        let input = first.provider.schema();
        let begins_with_input = first.projection.is_none()
            && input.fields().len() <= self.schema.fields().len()
            && input.fields().iter().zip(self.schema.fields()).all(|(a, b)| a.name() == b.name());
        if !matches!(self.work, Work::Streamed(_)) || !begins_with_input {
            return internal_err!("{}: only a streamed analysis of its whole first input passes it through", self.name);
        }
        if reads.iter().any(|&c| c >= input.fields().len()) {
            return internal_err!("{}: reads a column its first input does not have", self.name);
        }
        Ok(Derived { passes_through: Some(reads), ..self })
    }

    /// The names of the first input's columns needed to give the output columns `output`
    /// (indices into the full output), when the analysis passes its first input through and
    /// the input's column names are unique (else None: the input is read whole).
    pub fn input_columns_for(&self, output: &[usize]) -> Option<Vec<String>> {
        let reads = self.passes_through.as_ref()?;
        let input = self.inputs.first()?.provider.schema();
        let names: std::collections::HashSet<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
        if names.len() != input.fields().len() {
            return None;
        }
        let passed = input.fields().len();
        let mut needed: Vec<usize> =
            output.iter().copied().filter(|&c| c < passed).chain(reads.iter().copied()).collect();
        needed.sort_unstable();
        needed.dedup();
        Some(needed.into_iter().map(|c| input.field(c).name().clone()).collect())
    }

    /// The same table, its plan node named after the function `name`.
    pub fn named(&self, name: &'static str) -> Derived {
        Derived { name, ..self.clone() }
    }

    /// The same table, knowing the call that planned it; the analyses it made as its inputs
    /// know it too, with their place among its inputs.
    pub fn with_call(self, call: crate::plan::Call) -> Derived {
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

    /// The same table for a distributed engine (its node asks for each input as one partition),
    /// each table it reads as `tables` makes it for one ([`crate::recipe::distributed`]).
    pub fn for_distributed_engine(self, tables: impl Fn(&Arc<dyn TableProvider>) -> Arc<dyn TableProvider>) -> Derived {
        let inputs =
            self.inputs.iter().map(|input| Input { provider: tables(&input.provider), ..input.clone() }).collect();
        Derived { distributed: true, inputs, ..self }
    }

    /// Input `input`, when it is an analysis.
    pub fn input_analysis(&self, input: usize) -> Option<&Derived> {
        self.inputs.get(input)?.provider.downcast_ref::<Derived>()
    }

    /// The call that planned this table, when it was planned through a registered function.
    pub fn call(&self) -> Option<&crate::plan::Call> {
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

    /// The name of the function that planned it ("analysis" for one made as another's input).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The relations this table reads, each with the columns it reads; `exec` takes their
    /// physical plans in this order.
    pub fn reads(&self) -> Vec<Read> {
        self.inputs.iter().map(|i| (i.provider.clone(), i.reference.clone(), i.projection.clone())).collect()
    }

    /// The physical node of this analysis over `inputs` (the physical plans of what it
    /// `reads`), giving the output columns `projection`: in one process, or on a
    /// distributed engine placed as its spread allows (a task per part and, for partials, their
    /// merge; else one task).
    pub fn exec(
        &self,
        session: &dyn Session,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if inputs.len() != self.inputs.len() {
            return internal_err!("{}: expects {} input plans, got {}", self.name, self.inputs.len(), inputs.len());
        }
        if !self.distributed {
            return Ok(Arc::new(self.analysis(inputs, projection)?));
        }
        if let Some(Spread::Steps(steps)) = &self.spread {
            return self.steps_over(session, steps, inputs, projection);
        }
        if let Some(Spread::Prefolded { prefolds, .. }) = &self.spread {
            let mut inputs = inputs;
            for (index, prefold) in prefolds.iter().enumerate() {
                let index = u8::try_from(index).map_err(|_| {
                    datafusion::error::DataFusionError::Internal(format!("{}: too many prefolds", self.name))
                })?;
                let mut input = inputs[prefold.input].clone();
                if prefold.partial.is_some() {
                    let stage = Stage::Prefold { index, reduce: false };
                    input = Arc::new(self.node(stage, Placement::ByPart, vec![input], None)?);
                }
                let stage = Stage::Prefold { index, reduce: true };
                inputs[prefold.input] = Arc::new(self.node(stage, Placement::ByPart, vec![input], None)?);
            }
            return Ok(Arc::new(self.routed_answer(session, inputs, projection)?));
        }
        let placement = self.placement_over(session, &inputs)?;
        if let (Placement::ByPart, Some(Spread::Merged { .. } | Spread::SortedMerge { .. })) = (placement, &self.spread)
        {
            let partials = Arc::new(self.node(Stage::Partial, Placement::ByPart, inputs, None)?);
            return Ok(Arc::new(self.node(Stage::Merge, Placement::Whole, vec![partials], projection)?));
        }
        Ok(Arc::new(self.node(Stage::Answer, placement, inputs, projection)?))
    }

    /// The nodes of an analysis planned as `steps` over `inputs` (the plans of what it reads):
    /// each step over the plans of its inputs and earlier steps; the last step's node, giving
    /// the output columns `projection`, is the answer.
    fn steps_over(
        &self,
        session: &dyn Session,
        steps: &[crate::steps::Step],
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let last = steps
            .len()
            .checked_sub(1)
            .ok_or_else(|| datafusion::error::DataFusionError::Internal(format!("{}: no steps", self.name)))?;
        self.step_plan(session, steps, last, &inputs, projection)
    }

    /// The plan of step `k` of `steps` over `inputs`: made anew each time a step reads it, so
    /// that no node is the child of two (a distributed engine plans each use as stages of its
    /// own, and a node shared between them made it read one task's output twice).
    fn step_plan(
        &self,
        session: &dyn Session,
        steps: &[crate::steps::Step],
        k: usize,
        inputs: &[Arc<dyn ExecutionPlan>],
        projection: Option<&Vec<usize>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let step = &steps[k];
        let mut read: Vec<Arc<dyn ExecutionPlan>> = Vec::with_capacity(step.inputs.len());
        for from in &step.inputs {
            read.push(match from {
                crate::steps::From::Input(i) => {
                    datafusion::physical_plan::execution_plan::reset_plan_states(inputs[*i].clone())?
                }
                crate::steps::From::Step(s) => self.read_step(session, steps, *s, inputs)?,
                crate::steps::From::Union(each) => {
                    let plans =
                        each.iter().map(|s| self.read_step(session, steps, *s, inputs)).collect::<Result<_>>()?;
                    datafusion::physical_plan::union::UnionExec::try_new(plans)?
                }
            });
        }
        let index = u8::try_from(k)
            .map_err(|_| datafusion::error::DataFusionError::Internal(format!("{}: too many steps", self.name)))?;
        let stage = Stage::Step(index);
        let (crate::steps::Reads::Routed(exchanged), crate::steps::From::Input(first)) = (&step.reads, &step.inputs[0])
        else {
            return Ok(Arc::new(self.node(stage, step.placement(), read, projection)?));
        };
        // Routed when the analysis's input it sweeps is in parts of whole ranks, at most as many
        // as the exchange will have partitions; else one task.
        let exchange = session.config_options().execution.target_partitions;
        let first_ranks = match self.placement_of(session, &step.work, *first, &read[0])? {
            Placement::ByPart => {
                let stored =
                    self.inputs[*first].provider.downcast_ref::<commdb_catalog::session::trace_table::TraceTable>();
                stored.and_then(|t| crate::routes::Routes::of_files(&read[0], &t.rank_ranges()))
            }
            _ => None,
        };
        let routes = match first_ranks {
            Some(first_ranks) => crate::routes::Routes::keyed(first_ranks, exchange)?,
            None => None,
        };
        let Some(routes) = routes else {
            return Ok(Arc::new(self.node(stage, Placement::Whole, read, projection)?));
        };
        for &input in exchanged {
            read[input] = routes.exchanged(read[input].clone(), exchange)?;
        }
        Ok(Arc::new(self.node(stage, Placement::Routed, read, projection)?.with_routes(routes, exchanged)?))
    }

    /// The plan of step `k` of `steps` as another step reads it: a step of one task ends a stage
    /// of its own there ([`crate::once`]).
    fn read_step(
        &self,
        session: &dyn Session,
        steps: &[crate::steps::Step],
        k: usize,
        inputs: &[Arc<dyn ExecutionPlan>],
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self.step_plan(session, steps, k, inputs, None)?;
        Ok(match steps[k].reads {
            crate::steps::Reads::Once
            | crate::steps::Reads::OnceAnyOrder
            | crate::steps::Reads::OnceAllAnyOrder
            | crate::steps::Reads::OnceInOrder(_) => crate::once::run_once(plan),
            _ => plan,
        })
    }

    /// Node `stage` of this analysis over `inputs` routed by `routes` ([`Placement::Routed`]):
    /// the answer of a prefolded analysis, or a routed step.
    pub fn routed_node(
        &self,
        stage: Stage,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
        routes: crate::routes::Routes,
    ) -> Result<AnalysisExec> {
        // The parts of the first input this task was given: their first ranks' routes.
        let first = match (stage, &self.spread) {
            (Stage::Step(index), Some(Spread::Steps(steps))) => {
                match steps.get(usize::from(index)).map(|s| &s.inputs[0]) {
                    Some(crate::steps::From::Input(i)) => *i,
                    _ => return internal_err!("{}: step {index} is not routed", self.name),
                }
            }
            _ => 0,
        };
        let stored = self.inputs[first].provider.downcast_ref::<commdb_catalog::session::trace_table::TraceTable>();
        let part = inputs.first().and_then(|plan| crate::routes::Routes::of_files(plan, &stored?.rank_ranges()));
        let route = part.map(|ranks| ranks.iter().map(|&rank| routes.route(rank)).collect());
        let node = match (stage, &self.spread) {
            (Stage::Step(index), Some(Spread::Steps(steps))) => {
                let Some(crate::steps::Step { reads: crate::steps::Reads::Routed(exchanged), .. }) =
                    steps.get(usize::from(index))
                else {
                    return internal_err!("{}: step {index} is not routed", self.name);
                };
                self.node(stage, Placement::Routed, inputs, projection)?.with_routes(routes, exchanged)?
            }
            _ => self.answer_routed(inputs, projection, Some(routes))?,
        };
        Ok(node.serving(route))
    }

    /// The answer of an analysis whose inputs were prefolded ([`Spread::Prefolded`]): a task per
    /// part of the first input, with the prefolded rows of its ranks, when the first input is a
    /// store's parts of whole ranks whose ranges the manifest gives; else one task reading its
    /// inputs whole.
    fn routed_answer(
        &self,
        session: &dyn Session,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
    ) -> Result<AnalysisExec> {
        // Routed when the first input is in parts of whole ranks, at most as many as the
        // exchange will have partitions.
        let exchange = session.config_options().execution.target_partitions;
        let first_ranks = match &self.spread {
            Some(Spread::Prefolded { work: Work::Folded(_, crate::plan::Main::ByRank(_)), routed: true, .. })
                if self.placement_over(session, &inputs)? == Placement::ByPart =>
            {
                let stored = self.inputs[0].provider.downcast_ref::<commdb_catalog::session::trace_table::TraceTable>();
                stored.and_then(|t| crate::routes::Routes::of_files(&inputs[0], &t.rank_ranges()))
            }
            _ => None,
        };
        let routes = match first_ranks {
            Some(first_ranks) => crate::routes::Routes::keyed(first_ranks, exchange)?,
            None => None,
        };
        let mut inputs = inputs;
        if let (Some(routes), Some(Spread::Prefolded { prefolds, .. })) = (&routes, &self.spread) {
            // The prefolded rows exchanged by their route's key into the partitions the keys
            // were found for, whatever the partitions of the reduction they come from (one,
            // when the input it reduced had one).
            for input in prefolds.iter().map(|p| p.input) {
                inputs[input] = routes.exchanged(inputs[input].clone(), exchange)?;
            }
        }
        self.answer_routed(inputs, projection, routes)
    }

    /// The answer of an analysis whose inputs were prefolded, routed by `routes` (None: one
    /// task reading its inputs whole).
    pub fn answer_routed(
        &self,
        inputs: Vec<Arc<dyn ExecutionPlan>>,
        projection: Option<&Vec<usize>>,
        routes: Option<crate::routes::Routes>,
    ) -> Result<AnalysisExec> {
        let Some(Spread::Prefolded { prefolds, .. }) = &self.spread else {
            return internal_err!("{}: is not prefolded", self.name);
        };
        let exchanged: Vec<usize> = prefolds.iter().map(|p| p.input).collect();
        Ok(match routes {
            Some(routes) => {
                self.node(Stage::Answer, Placement::Routed, inputs, projection)?.with_routes(routes, &exchanged)?
            }
            None => self.node(Stage::Answer, Placement::Whole, inputs, projection)?,
        })
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
            (Stage::Answer, Some(Spread::Prefolded { work, .. })) if self.distributed => {
                (work.clone(), self.schema.clone(), projection)
            }
            (Stage::Answer, _) => (self.narrowed_work(&inputs, projection)?, self.schema.clone(), projection),
            (Stage::Prefold { index, reduce }, Some(Spread::Prefolded { prefolds, .. })) => {
                let Some(prefold) = prefolds.get(usize::from(index)) else {
                    return internal_err!("{}: has no prefold {index}", self.name);
                };
                let (schema, work, label) = match (reduce, &prefold.partial) {
                    (false, Some(partial)) => partial.clone(),
                    (false, None) => return internal_err!("{}: prefold {index} has no partials", self.name),
                    (true, _) => prefold.reduce.clone(),
                };
                let node = AnalysisExec::placed(self.name, inputs, work, schema, None, placement)?;
                let node = node.with_call(self.call.clone()).with_stage(stage).with_label(label);
                return Ok(if reduce { node.with_exchange(prefold.by.clone()) } else { node });
            }
            (Stage::Step(index), Some(Spread::Steps(steps))) => {
                let Some(step) = steps.get(usize::from(index)) else {
                    return internal_err!("{}: has no step {index}", self.name);
                };
                if inputs.len() != step.inputs.len() {
                    return internal_err!(
                        "{}: step {index} expects {} inputs, got {}",
                        self.name,
                        step.inputs.len(),
                        inputs.len()
                    );
                }
                let last = usize::from(index) + 1 == steps.len();
                let (schema, projection) =
                    if last { (self.schema.clone(), projection.cloned()) } else { (step.schema.clone(), None) };
                // A routed sweep by rank over a first input not in rank order (in one task: a
                // view) reads it whole; other steps' inputs are put in order by the engine.
                // A step reading its input in an order puts the partitions in order itself, as
                // they come ([`crate::merged`]): a merge in the plan would hold them all at once
                // on a distributed engine, which hands each partition over whole.
                let work = match (&step.reads, &step.work) {
                    (crate::steps::Reads::Routed(_), _) => in_order_or_whole(step.work.clone(), &inputs)?,
                    (crate::steps::Reads::OnceInOrder(columns), Work::Streamed(prepare)) => Work::Streamed(
                        crate::merged::in_order(self.name, prepare.clone(), columns.clone(), schema.clone()),
                    ),
                    (crate::steps::Reads::OnceInOrder(_), _) => {
                        return internal_err!(
                            "{}: step {index} reads its input in order but is not streamed",
                            self.name
                        );
                    }
                    _ => step.work.clone(),
                };
                let node = AnalysisExec::placed(self.name, inputs, work, schema, projection, placement)?;
                let node = node.with_call(self.call.clone()).with_stage(stage).with_label(step.label);
                return Ok(match &step.reads {
                    crate::steps::Reads::Exchanged(columns) => node.with_exchange(columns.clone()),
                    // A step that puts its input in order itself reads it in any order.
                    crate::steps::Reads::OnceAnyOrder | crate::steps::Reads::OnceInOrder(_) => {
                        node.reading_in_any_order()
                    }
                    crate::steps::Reads::OnceAllAnyOrder => node.reading_every_input_in_any_order(),
                    crate::steps::Reads::ByPart | crate::steps::Reads::Once | crate::steps::Reads::Routed(_) => node,
                });
            }
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
        let work = in_order_or_whole(work, &inputs)?;
        let node = AnalysisExec::placed(self.name, inputs, work, schema, projection.cloned(), placement)?;
        let mut node = node.with_call(self.call.clone()).with_stage(stage);
        if self.in_turn {
            node = node.reading_parts_in_turn();
        }
        if let (Some(Spread::Prefolded { label, .. }), Stage::Answer, true) = (&self.spread, stage, self.distributed) {
            node = node.with_label(label);
        }
        Ok(match (&self.spread, placement, stage) {
            (Some(Spread::SortedMerge { sorted_on, .. }), Placement::ByPart, Stage::Partial) => {
                node.with_output_order((0..*sorted_on).collect())
            }
            _ => node,
        })
    }

    /// The work of the answer over `inputs`: when the analysis passes its first input through
    /// and the plan gives fewer of the input's columns than it has (the query reads few of the
    /// output's), the mapper reads those, found by name, and gives the output columns
    /// `projection` from them ([`crate::stream::Narrowed`]).
    fn narrowed_work(&self, inputs: &[Arc<dyn ExecutionPlan>], projection: Option<&Vec<usize>>) -> Result<Work> {
        let (Some(_), Work::Streamed(prepare), Some(first)) = (&self.passes_through, &self.work, inputs.first()) else {
            return Ok(self.work.clone());
        };
        let input = self.inputs[0].provider.schema();
        let given = first.schema();
        if given.fields().len() >= input.fields().len() {
            return Ok(self.work.clone());
        }
        let Some(projection) = projection.cloned() else {
            return internal_err!("{}: given some of its input's columns for all of its own", self.name);
        };
        let keep = given
            .fields()
            .iter()
            .map(|f| {
                input.index_of(f.name()).map_err(|_| {
                    datafusion::error::DataFusionError::Internal(format!(
                        "{}: given a column '{}' its input does not have",
                        self.name,
                        f.name()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (prepare, passed) = (prepare.clone(), input.fields().len());
        let narrowed: crate::stream::Prepare = Arc::new(move |held| {
            let mapper = prepare(held)?;
            Ok(Box::new(crate::stream::Narrowed::new(mapper, &keep, passed, &projection)?)
                as Box<dyn crate::stream::Mapper>)
        });
        Ok(Work::Streamed(narrowed))
    }

    /// How this analysis, planned for a distributed engine over `inputs`, reads them: a task
    /// per part of its first input when it declares a spread and the parts allow it (a sweep by
    /// rank needs parts of whole ranks, in rank order, that the scan neither splits nor lets its
    /// partitions take from each other), else one task.
    fn placement_over(&self, session: &dyn Session, inputs: &[Arc<dyn ExecutionPlan>]) -> Result<Placement> {
        let Some(first) = inputs.first() else { return Ok(Placement::Whole) };
        if self.spread.is_none() {
            return Ok(Placement::Whole);
        }
        self.placement_of(session, &self.work, 0, first)
    }

    /// How `work` reads input `input` of this analysis (planned as `first`): a task per part
    /// when it has parts and, for a sweep by rank, they hold whole ranks in rank order and the
    /// scan neither splits them nor lets its partitions take from each other; else one task.
    fn placement_of(
        &self,
        session: &dyn Session,
        work: &Work,
        input: usize,
        first: &Arc<dyn ExecutionPlan>,
    ) -> Result<Placement> {
        use datafusion::physical_plan::ExecutionPlanProperties;
        if first.output_partitioning().partition_count() < 2 {
            return Ok(Placement::Whole);
        }
        let by_rank = match work {
            Work::ByRank(_, rank) | Work::Folded(_, crate::plan::Main::ByRank(rank)) => Some(*rank),
            Work::Streamed(_) | Work::Folded(..) => None,
            Work::Whole(_) => return Ok(Placement::Whole),
        };
        if let Some(rank) = by_rank {
            let whole_ranks = self.inputs[input]
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
        for (provider, reference, columns) in self.reads() {
            let plan = LogicalPlanBuilder::scan(reference, provider_as_source(provider), columns)?.build()?;
            inputs.push(state.create_physical_plan(&plan).await?);
        }
        self.exec(state, inputs, projection)
    }
}

/// `work` as it can read `inputs`: a sweep by rank whose first input is not in rank order reads
/// it whole ([`crate::by_rank`]).
fn in_order_or_whole(work: Work, inputs: &[Arc<dyn ExecutionPlan>]) -> Result<Work> {
    Ok(match work {
        Work::ByRank(prepare, rank) if !crate::by_rank::is_in_rank_order(&inputs[0], rank)? => {
            Work::Whole(Arc::new(move |inputs| crate::by_rank::whole(&prepare, inputs)))
        }
        Work::Folded(start, crate::plan::Main::ByRank(rank))
            if !crate::by_rank::is_in_rank_order(&inputs[0], rank)? =>
        {
            Work::Folded(start, crate::plan::Main::Whole)
        }
        work => work,
    })
}
