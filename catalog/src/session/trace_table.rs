//! A table of an open trace as a SQL table. Once built it is scanned like any table in memory
//! (DataFusion's `MemTable`, whose exact statistics answer `count(*)` at once). Until then a
//! scan plans a `BuildOnFirstScan` node, which builds the table when the query runs (the steps
//! of crate::deriving::steps, on a blocking thread since a step can take seconds) and then
//! streams it, so that `EXPLAIN` and planning cost nothing and a query pays only for the tables
//! it reads.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session as PlanningSession, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::trace::Trace;

/// Rows per slice handed to a partition: big enough to amortise per-batch overhead, small
/// enough for the partitions to share the work.
pub const SLICE_ROWS: usize = 1 << 16;

/// Table `name` of `trace`.
#[derive(Debug)]
pub struct TraceTable {
    trace: Arc<Trace>,
    name: &'static str,
    schema: SchemaRef,
    partitions: usize,
}

impl TraceTable {
    pub fn new(trace: Arc<Trace>, name: &'static str, schema: SchemaRef, partitions: usize) -> Self {
        TraceTable { trace, name, schema, partitions: partitions.max(1) }
    }
}

/// `batches` cut into slices of at most SLICE_ROWS rows, dealt into at most `partitions`
/// consecutive runs (at least one, perhaps empty).
pub fn partition(batches: &[RecordBatch], partitions: usize) -> Vec<Vec<RecordBatch>> {
    let mut slices = Vec::new();
    for b in batches {
        let mut offset = 0;
        while offset < b.num_rows() {
            let len = SLICE_ROWS.min(b.num_rows() - offset);
            slices.push(b.slice(offset, len));
            offset += len;
        }
    }
    let per_partition = slices.len().div_ceil(partitions.max(1)).max(1);
    let mut parts: Vec<Vec<RecordBatch>> = slices.chunks(per_partition).map(<[RecordBatch]>::to_vec).collect();
    if parts.is_empty() {
        parts.push(Vec::new());
    }
    parts
}

#[async_trait]
impl TableProvider for TraceTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn PlanningSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.trace.built_rows(self.name).is_some() {
            let batches = self.trace.table(self.name).map_err(|e| DataFusionError::External(Box::new(e)))?;
            let table = MemTable::try_new(self.schema.clone(), partition(&batches, self.partitions))?;
            return table.scan(state, projection, filters, limit).await;
        }
        let node = BuildOnFirstScan::new(
            self.trace.clone(),
            self.name,
            self.schema.clone(),
            projection.cloned(),
            self.partitions,
        )?;
        Ok(Arc::new(node))
    }
}

/// Builds a trace's table when the query runs, then streams it in `partitions` parts.
pub struct BuildOnFirstScan {
    trace: Arc<Trace>,
    table: &'static str,
    full_schema: SchemaRef,
    projection: Option<Vec<usize>>,
    partitions: usize,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for BuildOnFirstScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildOnFirstScan").field("table", &self.table).finish_non_exhaustive()
    }
}

impl BuildOnFirstScan {
    fn new(
        trace: Arc<Trace>,
        table: &'static str,
        full_schema: SchemaRef,
        projection: Option<Vec<usize>>,
        partitions: usize,
    ) -> Result<Self> {
        let schema = match &projection {
            Some(p) => Arc::new(full_schema.project(p)?),
            None => full_schema.clone(),
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(BuildOnFirstScan { trace, table, full_schema, projection, partitions, properties: Arc::new(properties) })
    }
}

impl DisplayAs for BuildOnFirstScan {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "BuildOnFirstScan: table={}.{}, partitions={}",
                    self.trace.meta.name, self.table, self.partitions
                )?;
                if let Some(p) = &self.projection {
                    let names: Vec<&str> = p.iter().map(|&i| self.full_schema.field(i).name().as_str()).collect();
                    write!(f, ", projection=[{}]", names.join(", "))?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => write!(f, "table={}", self.table),
        }
    }
}

impl ExecutionPlan for BuildOnFirstScan {
    fn name(&self) -> &str {
        "BuildOnFirstScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() { Ok(self) } else { datafusion::common::internal_err!("BuildOnFirstScan has no inputs") }
    }

    fn execute(&self, partition_index: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let (trace, table, partitions) = (self.trace.clone(), self.table, self.partitions);
        let projection = self.projection.clone();
        let run = async move {
            let build = move || trace.table(table);
            // Off the async workers when there are any; inline otherwise.
            let batches = match tokio::runtime::Handle::try_current() {
                Ok(handle) => handle.spawn_blocking(build).await.map_err(|e| {
                    DataFusionError::Execution(format!("building table {table}: the work stopped: {e}"))
                })?,
                Err(_) => build(),
            }
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
            let mine = partition(&batches, partitions).into_iter().nth(partition_index).unwrap_or_default();
            let out: Vec<RecordBatch> = match &projection {
                Some(p) => mine.iter().map(|b| b.project(p)).collect::<std::result::Result<_, _>>()?,
                None => mine,
            };
            Ok::<_, DataFusionError>(out)
        };
        let batches =
            futures::stream::once(run).map_ok(|out| futures::stream::iter(out.into_iter().map(Ok))).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), batches.boxed())))
    }
}
