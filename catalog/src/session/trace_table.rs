//! A table of an open trace as a SQL table. Once built it is scanned like any table in memory
//! (DataFusion's `MemTable`, whose exact statistics answer `count(*)` at once). Until then a
//! scan plans a `BuildOnFirstScan` node, which builds the table when the query runs (the steps
//! of [`crate::deriving::steps`], on a blocking thread since a step can take seconds) and then
//! streams it, so that `EXPLAIN` and planning cost nothing and a query pays only for the tables
//! it reads; of an OTF2 archive's `events`, only for the columns it projects
//! ([`crate::deriving::event_columns`]). A commdb store's large tables are scanned in their Parquet files (each file
//! checked against the manifest once, when the scan opens it: `file_checks`), never read whole
//! into memory by a query.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session as PlanningSession, TableProvider};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::column_sums::Piece;
use crate::model::rank_ordered;
use crate::session::file_checks::{Check, Checked, ChecksByFile, check_on_open};
use crate::session::plan_node::{batches_once, off_the_workers, projection_text};
use crate::trace::{StoredFile, Trace};

/// The order of a rank-ordered table, as a logical sort.
fn rank_first() -> datafusion::logical_expr::SortExpr {
    datafusion::logical_expr::col("rank").sort(true, true)
}

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

    /// The table's name in the model (`events`, `trace_info`, ...).
    pub fn table(&self) -> &'static str {
        self.name
    }

    /// The trace it belongs to.
    pub fn trace(&self) -> &Arc<Trace> {
        &self.trace
    }

    /// Whether each file of its scan holds whole ranks: a rank-ordered table of a store kept in
    /// one file, or in parts each of whose first rank is past the last rank of the part before
    /// (a store written since its parts end at rank boundaries, [`crate::store`]). A scan that
    /// does not split its files (`repartition_file_scans` off) then gives every rank to one
    /// partition, so that a sweep by rank can run a task per partition.
    /// The range of ranks each part of this table holds, by its file (the manifest's), for a
    /// table stored in parts ordered by rank; empty otherwise.
    pub fn rank_ranges(&self) -> Vec<(std::path::PathBuf, i64, i64)> {
        let Some(file) = self.trace.stored_file(self.name) else { return Vec::new() };
        if !rank_ordered(self.name) {
            return Vec::new();
        }
        file.files
            .iter()
            .filter_map(|(path, _, b)| {
                b.key.as_ref().filter(|r| r.column == "rank").map(|r| (path.clone(), r.min, r.max))
            })
            .collect()
    }

    pub fn parts_hold_whole_ranks(&self) -> bool {
        if !rank_ordered(self.name) {
            return false;
        }
        let Some(file) = self.trace.stored_file(self.name) else { return false };
        let ranges: Option<Vec<(i64, i64)>> = file
            .files
            .iter()
            .map(|(_, _, b)| b.key.as_ref().filter(|r| r.column == "rank").map(|r| (r.min, r.max)))
            .collect();
        match ranges {
            _ if file.files.len() == 1 => true,
            Some(ranges) => ranges.windows(2).all(|w| w[0].1 < w[1].0),
            None => false,
        }
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

    /// A table scanned in its file takes the query's filters, so that Parquet row groups
    /// whose statistics rule them out are skipped (tables in memory are filtered above).
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        let how = match self.trace.stored_file(self.name) {
            Some(_) => TableProviderFilterPushDown::Inexact,
            None => TableProviderFilterPushDown::Unsupported,
        };
        Ok(vec![how; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn PlanningSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(file) = self.trace.stored_file(self.name) {
            return self.scan_in_place(state, file, projection, filters, limit).await;
        }
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

impl TraceTable {
    /// Scan a table in its store's Parquet file (DataFusion's listing table: only the columns
    /// asked for are read, row groups stream), after checking the file against the manifest's
    /// checksum once, when the first query runs.
    async fn scan_in_place(
        &self,
        state: &dyn PlanningSession,
        file: StoredFile,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // A store converted again since it was opened is not read with the old manifest.
        if let Some(stamp) = &file.stamp {
            stamp.check().map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
        // Parts that the filters rule out by their range, or by the kinds they list, are
        // neither checked nor read (one at least stays, for the plan to have a file).
        let mut kept: Vec<_> = file
            .files
            .iter()
            .filter(|(_, _, bounds)| crate::session::parts::may_match(bounds, filters))
            .cloned()
            .collect();
        if kept.is_empty() {
            kept = file.files.iter().take(1).cloned().collect();
        }
        let file = StoredFile { files: kept, ..file };
        // What the scan reads of each file: the columns it projects and those its filters
        // name, each checked by its own checksum where the manifest has them, the whole file
        // where it has only the file's.
        let mut read: Vec<String> = match projection {
            Some(p) => p.iter().map(|&i| self.schema.field(i).name().clone()).collect(),
            None => self.schema.fields().iter().map(|f| f.name().clone()).collect(),
        };
        for f in filters {
            read.extend(f.column_refs().into_iter().map(|c| c.name.clone()));
        }
        read.sort_unstable();
        read.dedup();
        let urls = file
            .files
            .iter()
            .map(|(p, _, _)| ListingTableUrl::parse(p.to_string_lossy()))
            .collect::<Result<Vec<_>>>()?;
        let mut options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        if rank_ordered(self.name) {
            // The parts hold consecutive rows: the scan keeps them in order within each of its
            // partitions (DataFusion checks the parts' ranges of rank against each other).
            options = options.with_file_sort_order(vec![vec![rank_first()]]);
        }
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .with_schema(self.schema.clone());
        let scan = ListingTable::try_new(config)?.scan(state, projection, filters, limit).await;
        let inner = scan.map_err(|e| {
            // Reading the parts' footers failed: the store was replaced under the query, or
            // a part is damaged (found by its checksum, naming it).
            let damaged = || file.files.iter().find_map(|(p, sums, _)| crate::store::check_file(p, sums.file).err());
            match (&file.stamp, damaged()) {
                (Some(stamp), _) if !stamp.holds() => DataFusionError::External(Box::new(stamp.replaced())),
                (_, Some(damage)) => DataFusionError::External(Box::new(damage)),
                _ => e,
            }
        })?;
        let store = state.runtime_env().object_store(ObjectStoreUrl::local_filesystem())?;
        Ok(Arc::new(StoreScan::over(self.trace.clone(), self.name, file, read, inner, store)?))
    }
}

/// Each file of `file` with the checks of what a scan reads of it: its tail and the columns
/// `read`, each by its own checksum where the manifest has them, the whole file where it has
/// only the file's; keyed by the location DataFusion's listing gives the file, each check's
/// outcome shared through `checked`.
fn checks_of(checked: &Checked, file: &StoredFile, read: &[String]) -> Result<ChecksByFile> {
    let mut checks = ChecksByFile::new();
    let mut checked = checked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (path, sums, _) in &file.files {
        let pieces: Vec<Option<Piece>> = match &sums.columns {
            Some(_) => std::iter::once(Piece::Tail).chain(read.iter().cloned().map(Piece::Column)).map(Some).collect(),
            None => vec![None],
        };
        let of_file: Vec<Check> = pieces
            .into_iter()
            .map(|piece| {
                let once = checked.entry((path.clone(), piece.clone())).or_default().clone();
                Check { path: path.clone(), sums: sums.clone(), piece, once }
            })
            .collect();
        let location = ListingTableUrl::parse(path.to_string_lossy())?.prefix().clone();
        checks.insert(location, of_file.into());
    }
    Ok(checks)
}

/// A scan of a store's files (their checks run as each file is opened, [`crate::session::file_checks`]):
/// a store replaced while the query reads it gives an error, never rows of both.
/// On a cluster it crosses to the executors as its store, table and the columns it checks, and
/// each executor checks what its tasks read (once per piece and process, as one process does).
#[derive(Debug)]
pub struct StoreScan {
    trace: Arc<Trace>,
    table: &'static str,
    /// The files it may read (the parts its filters left).
    file: StoredFile,
    /// The columns whose checksums it checks (those it projects or filters on).
    read: Vec<String>,
    inner: Arc<dyn ExecutionPlan>,
}

impl StoreScan {
    /// `inner`, a scan of `file` (files of `table` of the store `trace` was read from), each
    /// file's tail and columns `read` checked against the manifest as the scan opens the file,
    /// each check once for the trace ([`Trace::checked`]).
    pub fn over(
        trace: Arc<Trace>,
        table: &'static str,
        file: StoredFile,
        read: Vec<String>,
        inner: Arc<dyn ExecutionPlan>,
        store: Arc<dyn datafusion::object_store::ObjectStore>,
    ) -> Result<StoreScan> {
        let checks = checks_of(&trace.checked(), &file, &read)?;
        let inner = check_on_open(inner, store, checks)?;
        Ok(StoreScan { trace, table, file, read, inner })
    }

    /// The trace whose store it reads.
    pub fn trace(&self) -> &Arc<Trace> {
        &self.trace
    }

    /// The table it reads.
    pub fn table(&self) -> &'static str {
        self.table
    }

    /// The columns whose checksums it checks.
    pub fn read(&self) -> &[String] {
        &self.read
    }
}

impl DisplayAs for StoreScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "StoreScan: file={}", self.file.path.display())
    }
}

impl ExecutionPlan for StoreScan {
    fn name(&self) -> &str {
        "StoreScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.inner]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    /// Filters pass through to the scan below (Parquet row groups are pruned by them).
    fn gather_filters_for_pushdown(
        &self,
        _phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        FilterDescription::from_children(parent_filters, &self.children())
    }

    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        Ok(FilterPushdownPropagation::if_all(child_pushdown_result))
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([inner]) => Ok(Arc::new(StoreScan {
                trace: self.trace.clone(),
                table: self.table,
                file: self.file.clone(),
                read: self.read.clone(),
                inner,
            })),
            Err(_) => datafusion::common::internal_err!("StoreScan has one input"),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let batches = self.inner.execute(partition, context)?;
        let schema = batches.schema();
        let batches = batches.map_err(crate::session::file_checks::as_found);
        let Some(stamp) = self.file.stamp.clone() else {
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)));
        };
        // A store replaced while the query read it gives an error, never rows of both: every
        // error is checked against the stamp, and so is the end of the stream.
        let replaced = move |stamp: &crate::stamp::Stamp| DataFusionError::External(Box::new(stamp.replaced()));
        let at_end = stamp.clone();
        let batches = batches
            .map_ok(Some)
            .map_err(move |e| if stamp.holds() { e } else { replaced(&stamp) })
            .chain(futures::stream::once(async move { if at_end.holds() { Ok(None) } else { Err(replaced(&at_end)) } }))
            .try_filter_map(|b| async move { Ok(b) });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
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
        let properties = Arc::new(properties);
        Ok(BuildOnFirstScan { trace, table, full_schema, projection, partitions, properties })
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
                f.write_str(&projection_text(&self.full_schema, self.projection.as_deref()))
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
            let built = off_the_workers(&format!("building table {table}"), move || {
                trace.projected(table, projection.as_deref())
            })
            .await?;
            let batches = built.map_err(|e| DataFusionError::External(Box::new(e)))?;
            Ok(partition(&batches, partitions).into_iter().nth(partition_index).unwrap_or_default())
        };
        Ok(batches_once(self.schema(), run))
    }
}
