//! Analyses written as views (`rank_diagnosis`) give their rows in the order of their natural
//! key, whatever the query around them does not say. DataFusion inlines a view into the query
//! and drops an ORDER BY that nothing above requires, so `SELECT rank, cause FROM
//! rank_diagnosis()` came back in any order. `OrderedView` keeps the view whole (it is planned
//! on its own, not inlined) and puts `InOrder` on top: a node that passes its input through and
//! requires it sorted by the key (one column or several, as the view's ORDER BY lists them), so
//! the planner keeps (or adds) the sort. A query that orders the rows itself still decides.

use std::fmt;
use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::catalog::view::ViewTable;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
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
