//! Rows sent to the task that holds their rank's calls ([`crate::plan::Placement::Routed`]).
//! A sweep by rank runs a task per part of whole ranks of its first input (a store's calls);
//! what it folds beside them (the waits found where the messages lie) is keyed by rank, and
//! each task needs only its own ranks' rows. A distributed engine exchanges rows by a hash of
//! their key, not by ranges: each part is a route, and its rows are exchanged by a key that the
//! engine's own hash partitioner sends to the partition of the part's number, where the task of
//! that part reads them. The parts' ranges of rank come from the store's manifest; a first
//! input without them (a view, a trace in memory) is swept in one task.

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::expressions::{BinaryExpr, CaseExpr, Column, Literal};
use datafusion::physical_plan::metrics::Time;
use datafusion::physical_plan::repartition::BatchPartitioner;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

/// The first rank of each partition of a sweep's first input, ascending, and the key each
/// partition's rows are exchanged by: a rank's route is the last partition whose first rank is
/// at most it (the first for ranks below them all), and its key one that the exchange's hash
/// partitioner sends to the partition of the same number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    first_ranks: Vec<i64>,
    keys: Vec<i64>,
}

impl Routes {
    /// The routes of partitions beginning at `first_ranks`, exchanged into `partitions`
    /// partitions (at least as many); None when there are more routes than that.
    pub fn keyed(first_ranks: Vec<i64>, partitions: usize) -> Result<Option<Routes>> {
        if first_ranks.len() > partitions || partitions == 0 {
            return Ok(None);
        }
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "key",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("key", 0));
        let mut partitioner = BatchPartitioner::new_hash_partitioner(vec![key], partitions, Time::default())?;
        let mut keys: Vec<Option<i64>> = vec![None; first_ranks.len()];
        let mut next = 0i64;
        while keys.iter().any(Option::is_none) {
            // A hash sends about one value in `partitions` to each; 64 rounds of them miss one
            // partition with a chance of e^-64.
            if next > 64 * partitions as i64 * 64 {
                return datafusion::common::internal_err!("no key reaches every partition of {partitions}");
            }
            let values = Int64Array::from_iter_values(next..next + 64 * partitions as i64);
            next += 64 * partitions as i64;
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])?;
            partitioner.partition(batch, |partition, rows| {
                if let (Some(slot @ None), Some(values)) =
                    (keys.get_mut(partition), rows.column(0).as_any().downcast_ref::<Int64Array>())
                    && !values.is_empty()
                {
                    *slot = Some(values.value(0));
                }
                Ok(())
            })?;
        }
        Ok(Some(Routes { first_ranks, keys: keys.into_iter().flatten().collect() }))
    }

    /// Routes as they were keyed where the plan was made (a node planned again).
    pub fn new(first_ranks: Vec<i64>, keys: Vec<i64>) -> Result<Routes> {
        if first_ranks.len() != keys.len() || first_ranks.is_empty() {
            return datafusion::common::plan_err!(
                "a routed node's routes are damaged: {} first ranks, {} keys",
                first_ranks.len(),
                keys.len()
            );
        }
        Ok(Routes { first_ranks, keys })
    }

    /// The first rank of each partition of `plan` when it is a scan of files whose ranges of
    /// rank `ranges` gives (a store's parts, by the manifest: each file and its least and
    /// greatest rank, [`commdb_catalog::session::trace_table::StoreScan`] or the scan it checks),
    /// and the partitions' files' ranges follow one another.
    pub fn of_files(plan: &Arc<dyn ExecutionPlan>, ranges: &[(std::path::PathBuf, i64, i64)]) -> Option<Vec<i64>> {
        use datafusion::datasource::physical_plan::FileScanConfig;
        use datafusion::datasource::source::DataSourceExec;
        // A scan of a store's parts checks them as it opens them, over DataFusion's own scan.
        let plan = match plan.downcast_ref::<commdb_catalog::session::trace_table::StoreScan>() {
            Some(checked) => checked.children()[0],
            None => plan,
        };
        let scan = plan.downcast_ref::<DataSourceExec>()?.data_source().downcast_ref::<FileScanConfig>()?;
        let range_of = |location: &str| {
            ranges
                .iter()
                .find(|(path, ..)| path.to_string_lossy().trim_start_matches('/') == location)
                .map(|r| (r.1, r.2))
        };
        let mut first_ranks = Vec::with_capacity(scan.file_groups.len());
        let mut last: Option<i64> = None;
        for group in &scan.file_groups {
            let mut first = None;
            for file in group.files() {
                let (least, greatest) = range_of(file.object_meta.location.as_ref())?;
                if last.is_some_and(|l| least <= l) {
                    return None;
                }
                first.get_or_insert(least);
                last = Some(greatest);
            }
            first_ranks.push(first?);
        }
        (!first_ranks.is_empty()).then_some(first_ranks)
    }

    /// The first rank of each partition.
    pub fn first_ranks(&self) -> &[i64] {
        &self.first_ranks
    }

    /// The key each partition's rows are exchanged by.
    pub fn keys(&self) -> &[i64] {
        &self.keys
    }

    /// The route of `rank`.
    pub fn route(&self, rank: i64) -> usize {
        self.first_ranks.partition_point(|&first| first <= rank).saturating_sub(1)
    }

    /// The key of column `rank` of `schema` as an expression (what a distributed engine
    /// exchanges rows by): CASEs that halve the routes by the first rank of the middle one,
    /// `CASE WHEN rank >= f(m) THEN <the routes from m> ELSE <those before m> END`, so that a row
    /// is compared about log2(routes) times, not once per route (hundreds of parts on a large
    /// cluster).
    /// A rank of another integer type (a store's collectives keep it in 32 bits) is compared as
    /// a 64-bit one.
    pub fn expr(&self, schema: &SchemaRef, rank: usize) -> Result<Arc<dyn PhysicalExpr>> {
        let mut column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(schema.field(rank).name(), rank));
        if schema.field(rank).data_type() != &arrow::datatypes::DataType::Int64 {
            column = datafusion::physical_expr::expressions::cast(
                column,
                schema.as_ref(),
                arrow::datatypes::DataType::Int64,
            )?;
        }
        self.key_of(&column, 0, self.first_ranks.len())
    }

    /// `plan`'s rows exchanged by the key of their column `rank` into `partitions` partitions,
    /// those the keys were found for.
    /// Rows of one partition (a step of one task) are exchanged too, so that each routed task
    /// reads its route's rows only: a distributed engine hands a task each partition it reads
    /// from another process whole, and every task reading one partition of all the routes' rows
    /// would hold them all. The engine's optimizer takes out an exchange of one partition by any
    /// key, so they are padded ([`Padded`]) as the first of `partitions` partitions; a step
    /// ending a stage of its own ([`crate::once::run_once`]) is padded as it is, its task now
    /// writing the exchange. Exchanged into one partition, they end a stage of their own, and
    /// each task reads them and keeps its route's ([`Slice::filtered`]).
    pub fn exchanged(&self, plan: Arc<dyn ExecutionPlan>, partitions: usize) -> Result<Arc<dyn ExecutionPlan>> {
        let mut plan = plan;
        if plan.properties().output_partitioning().partition_count() == 1 {
            if partitions <= 1 {
                return Ok(crate::once::run_once(plan));
            }
            if crate::once::runs_once(&plan) {
                plan = plan.children()[0].clone();
            }
            plan = Arc::new(Padded::new(plan, partitions));
        }
        let schema = plan.schema();
        let rank = schema.index_of("rank")?;
        let hash = Partitioning::Hash(vec![self.expr(&schema, rank)?], partitions);
        Ok(Arc::new(datafusion::physical_plan::repartition::RepartitionExec::try_new(plan, hash)?))
    }

    /// The key of routes `from..to` (at least one) of `column`'s rank.
    fn key_of(&self, column: &Arc<dyn PhysicalExpr>, from: usize, to: usize) -> Result<Arc<dyn PhysicalExpr>> {
        let value = |v: i64| -> Arc<dyn PhysicalExpr> { Arc::new(Literal::new(ScalarValue::Int64(Some(v)))) };
        if to - from == 1 {
            return Ok(value(self.keys[from]));
        }
        let middle = from + (to - from) / 2;
        let at_least: Arc<dyn PhysicalExpr> =
            Arc::new(BinaryExpr::new(column.clone(), Operator::GtEq, value(self.first_ranks[middle])));
        let (upper, lower) = (self.key_of(column, middle, to)?, self.key_of(column, from, middle)?);
        Ok(Arc::new(CaseExpr::try_new(None, vec![(at_least, upper)], Some(lower))?))
    }
}

/// The route one task of a routed node serves, as the first of its inputs' rows says; each
/// input's rows are checked against it, so that a row exchanged to the wrong task (an engine
/// that changed the exchange's partitions) fails the query rather than losing its call path.
#[derive(Clone, Debug, Default)]
pub struct Served(Arc<std::sync::Mutex<Option<usize>>>);

impl Served {
    fn check(&self, route: usize) -> Result<()> {
        let mut served = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match *served {
            None => {
                *served = Some(route);
                Ok(())
            }
            Some(r) if r == route => Ok(()),
            Some(r) => exec_err!(
                "a routed task serving the ranks of part {r} received a row of part {route}: the exchange's partitions are not those the plan was made for"
            ),
        }
    }
}

/// What a slice does with the rows of its partitions.
#[derive(Clone, Debug)]
enum Rows {
    /// Gives them as they are.
    All,
    /// Checks that each row's route (of its column `rank`) is the one the task serves.
    Checked(Routes, usize, Served),
    /// Keeps the rows of one route (of its column `rank`).
    Of(Routes, usize, usize),
}

/// Some partitions of a plan, read one after another as one partition; a routed task's
/// input has each row's route (its column `rank`) checked against the route the task serves,
/// or, read whole, the rows of that route kept.
pub struct Slice {
    input: Arc<dyn ExecutionPlan>,
    partitions: Vec<usize>,
    rows: Rows,
    properties: Arc<PlanProperties>,
}

impl Slice {
    /// Partitions `partitions` of `input`, as they are.
    pub fn whole(input: Arc<dyn ExecutionPlan>, partitions: Vec<usize>) -> Self {
        Slice::new(input, partitions, Rows::All)
    }

    /// The rows of `input` (one partition) whose rank (column `rank`) routes to `route`.
    pub fn filtered(input: Arc<dyn ExecutionPlan>, route: usize, routes: &Routes, rank: usize) -> Self {
        Slice::new(input, vec![0], Rows::Of(routes.clone(), rank, route))
    }

    /// Partition `partition` of `input`, each row's rank (column `rank`) routed by `routes` to
    /// the route `served` says.
    pub fn checked(
        input: Arc<dyn ExecutionPlan>,
        partition: usize,
        routes: &Routes,
        rank: usize,
        served: &Served,
    ) -> Self {
        Slice::new(input, vec![partition], Rows::Checked(routes.clone(), rank, served.clone()))
    }

    fn new(input: Arc<dyn ExecutionPlan>, partitions: Vec<usize>, rows: Rows) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Slice { input, partitions, rows, properties: Arc::new(properties) }
    }
}

impl fmt::Debug for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slice").field("partitions", &self.partitions).finish_non_exhaustive()
    }
}

impl DisplayAs for Slice {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Slice: partitions {:?}", self.partitions)
    }
}

impl ExecutionPlan for Slice {
    fn name(&self) -> &str {
        "Slice"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> Result<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match children.as_slice() {
            [input] => Ok(Arc::new(Slice::new(input.clone(), self.partitions.clone(), self.rows.clone()))),
            _ => datafusion::common::internal_err!("Slice has one input, got {}", children.len()),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return exec_err!("Slice has one partition, asked for {partition}");
        }
        let streams =
            self.partitions.iter().map(|&p| self.input.execute(p, context.clone())).collect::<Result<Vec<_>>>()?;
        let kept = self.rows.clone();
        let rows = futures::stream::iter(streams).flatten().and_then(move |batch| {
            let result = match &kept {
                Rows::All => Ok(batch),
                Rows::Checked(routes, rank, served) => check_rows(&batch, routes, *rank, served).map(|()| batch),
                Rows::Of(routes, rank, route) => rows_of(&batch, routes, *rank, *route),
            };
            futures::future::ready(result)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), rows)))
    }
}

/// One partition's rows as the first of some partitions, the others empty: what an exchange
/// reads where it must not be taken out for having one partition ([`Routes::exchanged`]).
/// Only the first partition runs the plan below, and it runs once: Ballista runs a stage in one
/// task, every partition of it, when the chain of nodes below its writer reaches a node of one
/// partition before a shuffle read (its rule for a stage that collapses its input), and the
/// plan below a `Padded` is of one partition. Split among tasks, each would run the first
/// partition, as every task runs each partition a node it does not restrict declares.
pub struct Padded {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl Padded {
    /// `input`'s one partition as the first of `partitions`.
    pub fn new(input: Arc<dyn ExecutionPlan>, partitions: usize) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(partitions.max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Padded { input, properties: Arc::new(properties) }
    }

    /// How many partitions it gives.
    pub fn partitions(&self) -> usize {
        self.properties.output_partitioning().partition_count()
    }
}

impl fmt::Debug for Padded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Padded").field("partitions", &self.partitions()).finish_non_exhaustive()
    }
}

impl DisplayAs for Padded {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Padded: one partition as the first of {}", self.partitions())
    }
}

impl ExecutionPlan for Padded {
    fn name(&self) -> &str {
        "Padded"
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

    fn required_input_distribution(&self) -> Vec<datafusion::physical_expr::Distribution> {
        vec![datafusion::physical_expr::Distribution::SinglePartition]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> Result<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match children.as_slice() {
            [input] => Ok(Arc::new(Padded::new(input.clone(), self.partitions()))),
            _ => datafusion::common::internal_err!("Padded has one input, got {}", children.len()),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        match partition {
            0 => self.input.execute(0, context),
            p if p < self.partitions() => {
                Ok(Box::pin(datafusion::physical_plan::EmptyRecordBatchStream::new(self.schema())))
            }
            p => exec_err!("Padded has {} partitions, asked for {p}", self.partitions()),
        }
    }
}

/// The rows of `batch` whose rank (its column `rank`) routes to `route`.
fn rows_of(batch: &RecordBatch, routes: &Routes, rank: usize, route: usize) -> Result<RecordBatch> {
    let ranks = arrow::compute::cast(batch.column(rank), &arrow::datatypes::DataType::Int64)?;
    let Some(ranks) = ranks.as_any().downcast_ref::<Int64Array>() else {
        return exec_err!("a routed input's column {rank} is not a rank (an integer)");
    };
    let keep: arrow::array::BooleanArray =
        ranks.iter().map(|r| Some(r.is_some_and(|r| routes.route(r) == route))).collect();
    Ok(arrow::compute::filter_record_batch(batch, &keep)?)
}

/// Checks that every rank of `batch` (its column `rank`) routes to the route `served` says.
fn check_rows(batch: &RecordBatch, routes: &Routes, rank: usize, served: &Served) -> Result<()> {
    let ranks = arrow::compute::cast(batch.column(rank), &arrow::datatypes::DataType::Int64)?;
    let Some(ranks) = ranks.as_any().downcast_ref::<Int64Array>() else {
        return exec_err!("a routed input's column {rank} is not a rank (an integer)");
    };
    // A route is a range of ranks: when the least and the greatest rank of the batch route
    // alike, every rank between does (a part's batch, its ranks in order, is checked so).
    let (Some(least), Some(greatest)) = (arrow::compute::min(ranks), arrow::compute::max(ranks)) else {
        return Ok(());
    };
    if routes.route(least) == routes.route(greatest) {
        return served.check(routes.route(least));
    }
    let (mut last_rank, mut last) = (None, None);
    for i in (0..ranks.len()).filter(|&i| ranks.is_valid(i)) {
        if last_rank == Some(ranks.value(i)) {
            continue;
        }
        last_rank = Some(ranks.value(i));
        let route = routes.route(ranks.value(i));
        if last != Some(route) {
            served.check(route)?;
            last = Some(route);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition_of(partitions: usize, key: i64) -> usize {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "key",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![key]))]).unwrap();
        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new("key", 0));
        let mut partitioner =
            BatchPartitioner::new_hash_partitioner(vec![column], partitions, Time::default()).unwrap();
        let mut found = None;
        partitioner
            .partition(batch, |p, _| {
                found = Some(p);
                Ok(())
            })
            .unwrap();
        found.unwrap()
    }

    #[test]
    fn a_rank_routes_to_the_part_it_falls_in() {
        let routes = Routes::keyed(vec![0, 10, 25], 4).unwrap().unwrap();
        assert_eq!([-3, 0, 9, 10, 24, 25, 1000].map(|r| routes.route(r)), [0, 0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn each_routes_key_reaches_the_partition_of_its_number() {
        for (parts, partitions) in [(2, 2), (3, 8), (16, 16), (37, 40)] {
            let routes = Routes::keyed((0..parts).map(|k| k * 4).collect(), partitions).unwrap().unwrap();
            for (k, &key) in routes.keys().iter().enumerate() {
                assert_eq!(partition_of(partitions, key), k, "{parts} parts into {partitions}");
            }
        }
        assert_eq!(Routes::keyed(vec![0, 4, 8], 2).unwrap(), None, "more parts than partitions");
    }

    #[test]
    fn the_key_expression_gives_each_ranks_key() {
        let routes = Routes::keyed(vec![0, 10, 25, 31, 40, 52, 60], 8).unwrap().unwrap();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "rank",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let ranks = Int64Array::from((-3..70).collect::<Vec<i64>>());
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ranks.clone())]).unwrap();
        let value = routes.expr(&schema, 0).unwrap().evaluate(&batch).unwrap().into_array(ranks.len()).unwrap();
        let value = value.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..ranks.len() {
            assert_eq!(value.value(i), routes.keys()[routes.route(ranks.value(i))]);
        }
        // A rank in 32 bits (a store's collectives) gives the same keys.
        let narrow = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "rank",
            arrow::datatypes::DataType::Int32,
            false,
        )]));
        let ranks32 = arrow::array::Int32Array::from((-3..70).collect::<Vec<i32>>());
        let batch = RecordBatch::try_new(narrow.clone(), vec![Arc::new(ranks32)]).unwrap();
        let value32 = routes.expr(&narrow, 0).unwrap().evaluate(&batch).unwrap().into_array(ranks.len()).unwrap();
        assert_eq!(value32.as_any().downcast_ref::<Int64Array>().unwrap(), value);
    }

    #[test]
    fn a_task_given_rows_of_two_routes_fails() {
        let routes = Routes::keyed(vec![0, 10], 2).unwrap().unwrap();
        let served = Served::default();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "rank",
            arrow::datatypes::DataType::Int64,
            true,
        )]));
        let batch =
            |ranks: Vec<i64>| RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ranks))]).unwrap();
        check_rows(&batch(vec![1, 2, 9]), &routes, 0, &served).unwrap();
        check_rows(&batch(vec![]), &routes, 0, &served).unwrap();
        let error = check_rows(&batch(vec![3, 12]), &routes, 0, &served).unwrap_err().to_string();
        assert!(error.contains("serving the ranks of part 0 received a row of part 1"), "{error}");
        // The rows of another part found in the middle of a batch, and a batch of another
        // part's rows alone.
        for ranks in [vec![9, 12, 3], vec![15, 12]] {
            let error = check_rows(&batch(ranks), &routes, 0, &served).unwrap_err().to_string();
            assert!(error.contains("serving the ranks of part 0 received a row of part 1"), "{error}");
        }
    }

    #[tokio::test]
    async fn one_partition_exchanged_gives_each_route_its_rows_only() {
        use datafusion::datasource::memory::MemorySourceConfig;
        let routes = Routes::keyed(vec![0, 10, 20], 4).unwrap().unwrap();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "rank",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let ranks: Vec<i64> = (0..30).rev().collect();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ranks))]).unwrap();
        let one = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None).unwrap();
        let exchanged = routes.exchanged(one, 4).unwrap();
        assert_eq!(exchanged.properties().output_partitioning().partition_count(), 4);
        let context = Arc::new(TaskContext::default());
        let mut seen = 0;
        for partition in 0..4 {
            let batches: Vec<RecordBatch> =
                exchanged.execute(partition, context.clone()).unwrap().try_collect().await.unwrap();
            for b in &batches {
                let ranks = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                assert!(ranks.iter().flatten().all(|r| routes.route(r) == partition), "partition {partition}");
                seen += ranks.len();
            }
        }
        assert_eq!(seen, 30, "every row once");
        // A padding's partitions past its count are an error, not empty.
        let padded = Padded::new(exchanged.children()[0].children()[0].clone(), 4);
        assert!(padded.execute(4, context).is_err());
    }
}
