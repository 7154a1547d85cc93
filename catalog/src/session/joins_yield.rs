//! Joins that give up the thread between batches, so that a cancelled query stops. A join makes
//! many batches out of each batch it reads (a cross join of two 44,800-row tables, a
//! nested-loop join on a range) without waiting on anything, and the aggregation above it takes
//! them as fast as they come: the task never returns to the runtime, and neither Ctrl-C's abort
//! nor the shutdown of the query runtime reaches it (a thread stayed busy for minutes after the
//! query was cancelled). This physical optimizer rule puts DataFusion's `CooperativeExec` above
//! every join (as DataFusion's own `EnsureCooperative` does above sources that make their
//! batches without waiting): each batch spends a unit of the task's budget, and an exhausted
//! budget yields, where a cancelled task ends.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;

/// The joins of DataFusion 55, by their plan names.
const JOINS: &[&str] = &[
    "CrossJoinExec",
    "NestedLoopJoinExec",
    "HashJoinExec",
    "SortMergeJoinExec",
    "SymmetricHashJoinExec",
    "PiecewiseMergeJoinExec",
];

#[derive(Debug, Default)]
pub struct JoinsYield;

impl PhysicalOptimizerRule for JoinsYield {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if JOINS.contains(&node.name()) {
                Ok(Transformed::yes(Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>))
            } else {
                Ok(Transformed::no(node))
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "commdb_joins_yield"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
