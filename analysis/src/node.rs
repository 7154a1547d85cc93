//! A call of an analysis as a node of the logical plan (`AnalysisCall`): the analysis
//! ([`crate::derived::Derived`], what the function planned from its arguments), the output
//! columns the query reads, and the relations it reads as its child plans, which DataFusion
//! optimises, and a cluster distributes, like any other plans. This is DataFusion's extension
//! node (`UserDefinedLogicalNodeCore`), with its two hooks:
//! - `ReadColumns`, an optimizer rule, narrows a call to the columns the plan above it reads
//!   (DataFusion's own projection pushdown stops at an extension node and puts a projection
//!   on top of it);
//! - `AnalysisPlanner`, an extension planner (in `Planner`, the session's query planner), makes
//!   the call's physical node ([`crate::plan::AnalysisExec`]) over its children's plans (and
//!   `InOrder` of an ordered view's node, [`crate::ordered`]).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, DFSchemaRef, TableReference, internal_err};
use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, Projection, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};

use crate::derived::Derived;

/// A call of an analysis in a logical plan.
#[derive(Clone)]
pub struct AnalysisCall {
    /// The analysis (always a `Derived`), shared with every copy of the plan that holds it.
    table: Arc<dyn TableProvider>,
    /// The output columns read (None: all).
    projection: Option<Vec<usize>>,
    /// The plans of the relations it may read ([`Derived::reads`]): a table's scan, a view's
    /// query, another analysis's own call.
    inputs: Vec<LogicalPlan>,
    schema: DFSchemaRef,
}

impl AnalysisCall {
    /// The node of `table` (an analysis) reading its output columns `projection`, its children
    /// planned from what it reads.
    pub fn plan(table: Arc<dyn TableProvider>, projection: Option<Vec<usize>>) -> Result<LogicalPlan> {
        let Some(derived) = table.downcast_ref::<Derived>() else {
            return internal_err!("an analysis call over a table that is not an analysis");
        };
        let mut inputs = Vec::new();
        for (read, reference, columns) in derived.reads() {
            inputs.push(if read.downcast_ref::<Derived>().is_some() {
                AnalysisCall::plan(read, columns)?
            } else {
                let source = datafusion::datasource::provider_as_source(read);
                datafusion::logical_expr::LogicalPlanBuilder::scan(reference, source, columns)?.build()?
            });
        }
        Self::with_inputs(table, projection, inputs)
    }

    /// The node of `table` reading its output columns `projection` over the plans `inputs` (as
    /// a cluster's scheduler receives them).
    pub fn with_inputs(
        table: Arc<dyn TableProvider>,
        projection: Option<Vec<usize>>,
        inputs: Vec<LogicalPlan>,
    ) -> Result<LogicalPlan> {
        let Some(derived) = table.downcast_ref::<Derived>() else {
            return internal_err!("an analysis call over a table that is not an analysis");
        };
        let full = derived.schema();
        let arrow = match &projection {
            Some(p) => Arc::new(full.project(p)?),
            None => full,
        };
        let schema = Arc::new(DFSchema::try_from_qualified_schema(qualifier(derived), &arrow)?);
        let node = AnalysisCall { table, projection, inputs, schema };
        Ok(LogicalPlan::Extension(Extension { node: Arc::new(node) }))
    }

    /// The call in `plan`, when it is one.
    pub fn of(plan: &LogicalPlan) -> Option<&AnalysisCall> {
        match plan {
            LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<AnalysisCall>(),
            _ => None,
        }
    }

    /// The analysis.
    pub fn derived(&self) -> &Derived {
        self.table.downcast_ref::<Derived>().expect("an analysis call holds an analysis")
    }

    /// The analysis as the table it is (one pointer for every copy of the plan).
    pub fn table(&self) -> &Arc<dyn TableProvider> {
        &self.table
    }

    /// The output columns read (None: all).
    pub fn projection(&self) -> Option<&Vec<usize>> {
        self.projection.as_ref()
    }

    /// The name its output columns are qualified by when the call has no alias (`f()`, as
    /// DataFusion names a table function's scan).
    pub fn qualifier(&self) -> TableReference {
        qualifier(self.derived())
    }

    /// The same call over the same inputs reading only its output columns `read` (indices into
    /// its full output).
    fn reading(&self, read: Vec<usize>) -> Result<LogicalPlan> {
        AnalysisCall::with_inputs(self.table.clone(), Some(read), self.inputs.clone())
    }
}

fn qualifier(derived: &Derived) -> TableReference {
    TableReference::bare(format!("{}()", derived.name()))
}

impl fmt::Debug for AnalysisCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnalysisCall")
            .field("function", &self.derived().name())
            .field("call", &self.derived().call_id())
            .field("projection", &self.projection)
            .finish_non_exhaustive()
    }
}

/// Two nodes are one call when they are copies of one planning (the call identity in the
/// schema) reading the same columns of the same inputs.
impl PartialEq for AnalysisCall {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.inputs == other.inputs
    }
}

impl Eq for AnalysisCall {}

impl Hash for AnalysisCall {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
        self.inputs.hash(state);
    }
}

impl PartialOrd for AnalysisCall {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let order = self.key().cmp(&other.key());
        (order != Ordering::Equal || self == other).then_some(order)
    }
}

impl AnalysisCall {
    fn key(&self) -> (&str, Option<&str>, Option<&Vec<usize>>) {
        let derived = self.derived();
        (derived.name(), derived.call_id(), self.projection.as_ref())
    }
}

impl UserDefinedLogicalNodeCore for AnalysisCall {
    fn name(&self) -> &str {
        "Analysis"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        self.inputs.iter().collect()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let derived = self.derived();
        let full = derived.schema();
        let shown = commdb_catalog::session::plan_node::projection_text(&full, self.projection.as_deref());
        write!(f, "Analysis: {}(){shown}", derived.name())
    }

    /// What each child must give for this node's output columns (its projection, which
    /// `ReadColumns` narrows to what the plan above reads): an analysis that passes its first
    /// input through needs of it only the columns passed on that it gives and those its work
    /// reads ([`Derived::passing_through`]), found by name in the child as it is now (an
    /// earlier pass may have narrowed it); every other child, all it gives. DataFusion's
    /// projection pushdown narrows the children so. What the parent needs (`_output`) is not
    /// used: the node's schema stays its projection's, so a child narrowed below it would
    /// leave columns of that schema without their input (a union or filter above the call,
    /// which `ReadColumns` does not look through).
    fn necessary_children_exprs(&self, _output: &[usize]) -> Option<Vec<Vec<usize>>> {
        // A call that gives all its columns needs all of its children.
        let names = self.derived().input_columns_for(self.projection.as_ref()?)?;
        let first = self.inputs.first()?.schema();
        let mut needed = Vec::with_capacity(names.len());
        for name in &names {
            needed.push(first.fields().iter().position(|f| f.name() == name)?);
        }
        needed.sort_unstable();
        let mut children = vec![needed];
        children.extend(self.inputs[1..].iter().map(|input| (0..input.schema().fields().len()).collect()));
        Some(children)
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> Result<Self> {
        if !exprs.is_empty() || inputs.len() != self.inputs.len() {
            return internal_err!(
                "{}: an analysis call has no expressions and {} inputs, given {} and {}",
                self.derived().name(),
                self.inputs.len(),
                exprs.len(),
                inputs.len()
            );
        }
        Ok(AnalysisCall { inputs, ..self.clone() })
    }
}

/// The optimizer rule that narrows each analysis call to the output columns the projection
/// above it reads (DataFusion's pushdown puts a projection on top of an extension node it
/// cannot see into): the call then computes less where it can (a column that costs an input
/// of its own) and its node gives only those columns.
#[derive(Debug, Default)]
pub struct ReadColumns;

impl OptimizerRule for ReadColumns {
    fn name(&self) -> &str {
        "commdb_analysis_columns"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Projection(projection) = &plan else { return Ok(Transformed::no(plan)) };
        let Some(call) = AnalysisCall::of(&projection.input) else { return Ok(Transformed::no(plan)) };
        let mut read = BTreeSet::new();
        for expr in &projection.expr {
            for column in expr.column_refs() {
                read.insert(call.schema.index_of_column(column)?);
            }
        }
        if read.len() == call.schema.fields().len() {
            return Ok(Transformed::no(plan));
        }
        // The call's own columns read, as indices into its full output.
        let read: Vec<usize> = match &call.projection {
            Some(p) => read.into_iter().map(|i| p[i]).collect(),
            None => read.into_iter().collect(),
        };
        let narrowed = call.reading(read)?;
        let projection = Projection::try_new(projection.expr.clone(), Arc::new(narrowed))?;
        Ok(Transformed::yes(LogicalPlan::Projection(projection)))
    }
}

/// Makes an analysis call's physical node over its children's plans, and an ordered view's
/// (`crate::ordered::Ordered`).
#[derive(Debug, Default)]
pub struct AnalysisPlanner;

#[async_trait]
impl ExtensionPlanner for AnalysisPlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if let Some(ordered) = node.as_any().downcast_ref::<crate::ordered::Ordered>()
            && let [input] = physical_inputs
        {
            return Ok(Some(ordered.exec(input.clone())));
        }
        let Some(call) = node.as_any().downcast_ref::<AnalysisCall>() else { return Ok(None) };
        Ok(Some(call.derived().exec(session, physical_inputs.to_vec(), call.projection.as_ref())?))
    }
}

/// The session's query planner: DataFusion's, with analysis calls planned by
/// `AnalysisPlanner`.
#[derive(Debug, Default)]
pub struct Planner;

#[async_trait]
impl datafusion::execution::context::QueryPlanner for Planner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let planner = DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(AnalysisPlanner)]);
        planner.create_physical_plan(logical_plan, session).await
    }
}

/// `state` planning analysis calls: its query planner `Planner`, and the rule `ReadColumns`.
pub fn planning_analyses(state: SessionState) -> SessionState {
    datafusion::execution::SessionStateBuilder::new_from_existing(state)
        .with_query_planner(Arc::new(Planner))
        .with_optimizer_rule(Arc::new(ReadColumns))
        .build()
}
