//! A node of one task ending a stage of its own on a distributed engine: Ballista runs every
//! partition a node declares in each task of its stage, so a node of one task declares one
//! partition, and where nodes of many tasks read it, a coalescing with a fetch above it ends its
//! stage (the engine ends a stage at a coalescing of partitions, and DataFusion's optimizer
//! keeps one with a fetch where it takes a needless one out): it runs once, and its readers read
//! its rows from the shuffle files. The steps of one task of an analysis
//! ([`crate::steps::Reads::Once`]) and a routed input of one partition are read so.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;

/// `plan` (of one partition) ending a stage of its own on a distributed engine, so that it runs
/// in one task and the tasks that read it read its rows from the shuffle files: one partition
/// read by a node of many would otherwise run in each of that node's tasks. The engine ends a
/// stage at a coalescing of partitions; one with a fetch is kept by the optimizer where a
/// needless one would be taken out. The fetch, `RUN_ONCE_ROWS`, is the most a plan's fetch
/// carries to another process (32 bits), more rows than a step of one task gives.
pub fn run_once(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    Arc::new(CoalescePartitionsExec::new(plan).with_fetch(Some(RUN_ONCE_ROWS)))
}

/// The fetch of a coalescing `run_once` made: a step of one task that would give this many
/// rows fails saying so (`crate::plan::AnalysisExec`) rather than be cut.
pub const RUN_ONCE_ROWS: usize = u32::MAX as usize;

/// Whether `plan` is one `run_once` made.
pub fn runs_once(plan: &Arc<dyn ExecutionPlan>) -> bool {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    plan.downcast_ref::<CoalescePartitionsExec>().is_some_and(|c| c.fetch() == Some(RUN_ONCE_ROWS))
}
