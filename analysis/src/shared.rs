//! An analysis a query reads several times, computed once for the query. DataFusion 55 inlines
//! a common table expression wherever it is used rather than computing it once, so a view whose
//! SQL reads one analysis through several CTEs runs it as many times (iteration_profile read
//! `iterations` eleven times). `share_analyses` gives every scan of one analysis in a view the
//! same `Shared` table; its scans' nodes keep each partition's batches the first of them
//! computes, reserved from the session's memory pool, for the others to read while the query's
//! plan lives (the nodes hold the batches; the table only finds them while a plan does).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::derived::Derived;

/// `view` with the analyses its plan scans more than once shared among their scans.
pub fn share_analyses(view: &ViewTable) -> Result<ViewTable> {
    let mut seen: HashMap<*const (), (usize, Arc<dyn TableProvider>)> = HashMap::new();
    crate::plans::for_each_scan(view.logical_plan(), |_, provider| {
        if provider.downcast_ref::<Derived>().is_some() {
            seen.entry(Arc::as_ptr(provider) as *const ()).or_insert((0, provider.clone())).0 += 1;
        }
    });
    let shared: HashMap<*const (), Arc<dyn TableProvider>> = seen
        .into_iter()
        .filter(|(_, (uses, _))| *uses > 1)
        .map(|(key, (_, provider))| (key, Arc::new(Shared::new(provider)) as Arc<dyn TableProvider>))
        .collect();
    let plan = crate::plans::replace_scans(view.logical_plan(), |provider| {
        shared.get(&(Arc::as_ptr(provider) as *const ())).cloned()
    })?;
    Ok(ViewTable::new(plan.unwrap_or_else(|| view.logical_plan().clone()), view.definition().cloned()))
}

/// The batches of the analysis, every partition's, computed once, with what they hold
/// reserved.
type Parts = tokio::sync::OnceCell<Arc<(Vec<RecordBatch>, MemoryReservation)>>;

/// An analysis whose scans share its batches (`share_analyses`).
pub struct Shared {
    inner: Arc<dyn TableProvider>,
    /// The batches of the plan being run, while one is.
    parts: Mutex<Weak<Parts>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    fn new(inner: Arc<dyn TableProvider>) -> Shared {
        Shared { inner, parts: Mutex::new(Weak::new()) }
    }

    /// The analysis shared (what crosses to a cluster, which plans it again).
    pub fn inner(&self) -> &Arc<dyn TableProvider> {
        &self.inner
    }
}

#[async_trait]
impl TableProvider for Shared {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
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
        let full = self.inner.scan(state, None, &[], None).await?;
        let parts = {
            let mut held = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
            match held.upgrade() {
                Some(parts) => parts,
                None => {
                    let parts = Arc::new(Parts::default());
                    *held = Arc::downgrade(&parts);
                    parts
                }
            }
        };
        Ok(Arc::new(SharedExec::new(full, projection.cloned(), parts)?))
    }
}

/// A scan of a shared analysis: its input is the analysis's plan, run by the first of the scans
/// that asks for a partition; the others read the batches it kept.
struct SharedExec {
    input: Arc<dyn ExecutionPlan>,
    projection: Option<Vec<usize>>,
    parts: Arc<Parts>,
    properties: Arc<PlanProperties>,
}

impl SharedExec {
    fn new(input: Arc<dyn ExecutionPlan>, projection: Option<Vec<usize>>, parts: Arc<Parts>) -> Result<SharedExec> {
        let schema = match &projection {
            Some(p) => Arc::new(input.schema().project(p)?),
            None => input.schema(),
        };
        // One partition: the scans of one analysis may be planned with their inputs cut in
        // different numbers of partitions, and share the whole.
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(SharedExec { input, projection, parts, properties })
    }
}

impl fmt::Debug for SharedExec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("SharedExec").finish_non_exhaustive()
    }
}

impl DisplayAs for SharedExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SharedExec: computed once for every scan of it, projection={:?}", self.projection)
    }
}

impl ExecutionPlan for SharedExec {
    fn name(&self) -> &str {
        "SharedExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.into_iter().next() else {
            return datafusion::common::internal_err!("SharedExec: expects one input");
        };
        Ok(Arc::new(SharedExec::new(input, self.projection.clone(), self.parts.clone())?))
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition > 0 {
            return datafusion::common::internal_err!("SharedExec: has one partition, asked for {partition}");
        }
        let cell = self.parts.clone();
        let (input, projection, schema) = (self.input.clone(), self.projection.clone(), self.schema());
        let batches = futures::stream::once(async move {
            let held = cell
                .get_or_try_init(|| async {
                    let reservation = MemoryConsumer::new("shared analysis").register(context.memory_pool());
                    let mut stream = datafusion::physical_plan::execute_stream(input, context)?;
                    let mut batches = Vec::new();
                    while let Some(batch) = stream.next().await {
                        let batch = batch?;
                        reservation.try_grow(crate::budget::held_bytes(&batch))?;
                        batches.push(batch);
                    }
                    Ok::<_, datafusion::error::DataFusionError>(Arc::new((batches, reservation)))
                })
                .await?
                .clone();
            let projected: Vec<Result<RecordBatch>> = held
                .0
                .iter()
                .map(|b| match &projection {
                    Some(p) => Ok(b.project(p)?),
                    None => Ok(b.clone()),
                })
                .collect();
            Ok::<_, datafusion::error::DataFusionError>(futures::stream::iter(projected))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}
