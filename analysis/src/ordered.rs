//! Analyses written as views (`rank_diagnosis`) give their rows in the order of their natural
//! key, whatever the query around them does not say. DataFusion inlines a view into the query
//! and drops an ORDER BY that nothing above requires, so `SELECT rank, cause FROM
//! rank_diagnosis()` came back in any order. `OrderedView` is the view with `Ordered` on top, a
//! node of the logical plan that passes its input through and requires it sorted by the key (one
//! column or several, as the view's ORDER BY lists them); its physical node `InOrder` makes the
//! planner keep (or add) the sort. A query that orders the rows itself still decides. The view
//! is inlined into the query like any other (so it is optimised with it, and a cluster carries
//! it as an ordinary plan); scanned on its own, it is planned on its own, with `InOrder` on top.

use std::fmt;
use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::catalog::view::ViewTable;
use datafusion::common::DFSchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, Extension, LogicalPlan, UserDefinedLogicalNodeCore};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    Distribution, EquivalenceProperties, LexOrdering, LexRequirement, OrderingRequirements, PhysicalExpr,
    PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

/// A view whose rows come in order of its columns `keys` (the first, then the next, ...).
#[derive(Debug)]
pub struct OrderedView {
    view: ViewTable,
    keys: Vec<String>,
    /// The view's columns, every one nullable: planned on its own, the view's physical plan
    /// may find a column nullable that its logical plan proved not to be (a coalesce over an
    /// aggregate), and the two must agree.
    schema: SchemaRef,
}

impl OrderedView {
    pub fn new(view: ViewTable, keys: &[&str]) -> Self {
        let fields: Vec<arrow::datatypes::Field> =
            view.schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
        let schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, view.schema().metadata().clone()));
        OrderedView { view, keys: keys.iter().map(|k| k.to_string()).collect(), schema }
    }

    /// The view it orders.
    pub fn view(&self) -> &ViewTable {
        &self.view
    }

    /// The columns its rows come in order of.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
}

#[async_trait]
impl TableProvider for OrderedView {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn get_logical_plan(&'_ self) -> Option<std::borrow::Cow<'_, LogicalPlan>> {
        Ordered::plan(self.view.logical_plan().clone(), self.keys.clone()).ok().map(std::borrow::Cow::Owned)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The keys are read even where the projection leaves them out, sorted by, then dropped:
        // rows in order of a key's later columns alone are not in the view's order.
        let keys_at: Vec<usize> = self.keys.iter().filter_map(|k| self.schema.index_of(k).ok()).collect();
        let widened: Option<Vec<usize>> = projection.map(|p| {
            let mut w = p.clone();
            w.extend(keys_at.iter().filter(|k| !p.contains(k)));
            w
        });
        let plan = self.view.scan(state, widened.as_ref(), filters, limit).await?;
        let schema = plan.schema();
        let keys: Vec<usize> = self.keys.iter().filter_map(|k| schema.index_of(k).ok()).collect();
        if keys.is_empty() {
            return Ok(plan);
        }
        let ordered: Arc<dyn ExecutionPlan> = Arc::new(InOrder::new(plan, keys));
        match projection {
            Some(p) if widened.as_ref().is_some_and(|w| w.len() > p.len()) => {
                let columns = (0..p.len()).map(|i| {
                    let name = schema.field(i).name().clone();
                    (Arc::new(Column::new(&name, i)) as Arc<dyn PhysicalExpr>, name)
                });
                Ok(Arc::new(ProjectionExec::try_new(columns, ordered)?))
            }
            _ => Ok(ordered),
        }
    }
}

/// Passes its input through, required in order of columns `keys`, in one partition.
#[derive(Debug)]
pub struct InOrder {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    properties: Arc<PlanProperties>,
}

impl InOrder {
    /// `input` passed through, required in order of its columns `keys` (indices, not empty).
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<usize>) -> Self {
        let schema = input.schema();
        let ordering = LexOrdering::new(keys.iter().map(|k| sort_by(&schema, *k)));
        let equivalence = EquivalenceProperties::new_with_orderings(schema, ordering);
        let properties = PlanProperties::new(
            equivalence,
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        InOrder { input, keys, properties: Arc::new(properties) }
    }

    /// The columns (indices) its rows are in order of.
    pub fn keys(&self) -> &[usize] {
        &self.keys
    }
}

/// Column `key` of `schema`, ascending, nulls first.
fn sort_by(schema: &SchemaRef, key: usize) -> PhysicalSortExpr {
    PhysicalSortExpr::new(Arc::new(Column::new(schema.field(key).name(), key)), SortOptions::default())
}

impl DisplayAs for InOrder {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let schema = self.input.schema();
        let names: Vec<&str> = self.keys.iter().map(|k| schema.field(*k).name().as_str()).collect();
        write!(f, "InOrder: {}", names.join(", "))
    }
}

impl ExecutionPlan for InOrder {
    fn name(&self) -> &str {
        "InOrder"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        InputDistributionRequirements::new(vec![Distribution::SinglePartition])
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        let schema = self.input.schema();
        let order = self.keys.iter().map(|k| sort_by(&schema, *k).into());
        vec![LexRequirement::new(order).map(OrderingRequirements::new)]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(InOrder::new(input, self.keys.clone()))),
            Err(_) => datafusion::common::internal_err!("InOrder has one input"),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }
}

/// A view's plan whose rows come in order of its columns `keys` (the logical form of
/// `InOrder`, which `crate::node::AnalysisPlanner` makes of it). Its columns are the view's,
/// every one nullable, as `OrderedView` declares them.
#[derive(Debug, Clone)]
pub struct Ordered {
    input: LogicalPlan,
    keys: Vec<String>,
    schema: DFSchemaRef,
}

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys && self.input == other.input
    }
}

impl Eq for Ordered {}

impl std::hash::Hash for Ordered {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.keys.hash(state);
        self.input.hash(state);
    }
}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        match self.keys.partial_cmp(&other.keys)? {
            std::cmp::Ordering::Equal => self.input.partial_cmp(&other.input),
            order => Some(order),
        }
    }
}

impl Ordered {
    /// `input` in order of its columns `keys`.
    pub fn plan(input: LogicalPlan, keys: Vec<String>) -> Result<LogicalPlan> {
        Ok(LogicalPlan::Extension(Extension { node: Arc::new(Ordered::new(input, keys)?) }))
    }

    fn new(input: LogicalPlan, keys: Vec<String>) -> Result<Ordered> {
        for key in &keys {
            if input.schema().index_of_column_by_name(None, key).is_none() {
                return datafusion::common::plan_err!("an ordered view has no key column '{key}'");
            }
        }
        let given = input.schema();
        let fields = given.iter().map(|(q, f)| (q.cloned(), Arc::new(f.as_ref().clone().with_nullable(true))));
        let schema = datafusion::common::DFSchema::new_with_metadata(fields.collect(), given.metadata().clone())?;
        let schema = Arc::new(schema.with_functional_dependencies(given.functional_dependencies().clone())?);
        Ok(Ordered { input, keys, schema })
    }

    /// The node in `plan`, when it is one.
    pub fn of(plan: &LogicalPlan) -> Option<&Ordered> {
        match plan {
            LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<Ordered>(),
            _ => None,
        }
    }

    /// The columns its rows come in order of.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// `InOrder` over `input` (the physical plan of this node's input).
    pub fn exec(&self, input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let schema = input.schema();
        let keys: Vec<usize> = self.keys.iter().filter_map(|k| schema.index_of(k).ok()).collect();
        if keys.is_empty() { input } else { Arc::new(InOrder::new(input, keys)) }
    }
}

impl UserDefinedLogicalNodeCore for Ordered {
    fn name(&self) -> &str {
        "Ordered"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    /// Filters pass through: the rows that remain are in the same order.
    fn prevent_predicate_push_down_columns(&self) -> std::collections::HashSet<String> {
        std::collections::HashSet::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Ordered: {}", self.keys.join(", "))
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> Result<Self> {
        match <[_; 1]>::try_from(inputs) {
            Ok([input]) if exprs.is_empty() => Ordered::new(input, self.keys.clone()),
            _ => datafusion::common::internal_err!("Ordered has one input and no expressions"),
        }
    }

    /// The columns read above, and the keys (rows in order of a key's later columns alone are
    /// not in the view's order).
    fn necessary_children_exprs(&self, output_columns: &[usize]) -> Option<Vec<Vec<usize>>> {
        let schema = self.input.schema();
        let mut read: Vec<usize> = output_columns.to_vec();
        for key in &self.keys {
            let at = schema.index_of_column_by_name(None, key)?;
            if !read.contains(&at) {
                read.push(at);
            }
        }
        read.sort_unstable();
        Some(vec![read])
    }
}
