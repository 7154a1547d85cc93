//! The scheduler's rule that a node of one task reads a multi-partition input through one
//! shuffle read, not a coalescing of many.
//!
//! A node that runs in one task and reads every partition of its input (an analysis's step of
//! one task, [`commdb_analysis::plan::Placement::Whole`]: the critical path's walk, the delay
//! costs' hand-on, the replay's visit) asks DataFusion for its input as one partition, and
//! DataFusion puts a coalescing of partitions under it. Ballista ends a stage below a
//! coalescing and leaves the coalescing in the reading stage over a shuffle read per
//! partition: each of those reads fetches its partition from another executor whole before
//! it passes a batch on, and the coalescing runs them all at once, so the task held the whole
//! input (at 1 B events the walk's executor went from 1.0 to 2.8 GB while it read 64 parts of
//! exits). Here such a coalescing becomes an exchange by hash into one partition: Ballista ends
//! the stage below it as well, and the task reads that one partition through one shuffle
//! read, which fetches the files one after another within its budget of bytes in flight
//! (`ballista.shuffle.reader.max_bytes_in_flight`). DataFusion's own rules take out such an
//! exchange, as a needless one, wherever they meet it, so this rule runs after them, on the
//! scheduler only: in one process a coalescing reads its partitions as they come.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

use commdb_analysis::plan::{AnalysisExec, Placement};

#[derive(Debug)]
pub struct OneReaderForOneTask;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for OneReaderForOneTask {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(analysis) = node.downcast_ref::<AnalysisExec>() else { return Ok(Transformed::no(node)) };
            if analysis.placement() != Placement::Whole {
                return Ok(Transformed::no(node));
            }
            let mut changed = false;
            let mut children = Vec::with_capacity(node.children().len());
            for child in node.children() {
                children.push(match one_exchange(child)? {
                    Some(exchange) => {
                        changed = true;
                        exchange
                    }
                    None => Arc::clone(child),
                });
            }
            if !changed {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(datafusion::physical_plan::execution_plan::replace_children_if_necessary(
                node, children,
            )?))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "one_reader_for_one_task"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The exchange into one partition that takes the place of `child`, a coalescing (without a
/// fetch: one with a fetch ends a step of one task's own stage, `commdb_analysis::once`) of
/// several partitions into one; None when it is not one.
fn one_exchange(child: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(coalesce) = child.downcast_ref::<CoalescePartitionsExec>() else { return Ok(None) };
    let input = coalesce.input();
    if coalesce.fetch().is_some() || input.output_partitioning().partition_count() < 2 {
        return Ok(None);
    }
    let Some(first) = input.schema().fields().first().cloned() else { return Ok(None) };
    let by = Arc::new(Column::new(first.name(), 0));
    let exchange = RepartitionExec::try_new(Arc::clone(input), Partitioning::Hash(vec![by], 1))?;
    Ok(Some(Arc::new(exchange)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_optimizer::PhysicalOptimizerRule;

    fn parts(n: usize) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("rank", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
        let partitions: Vec<Vec<RecordBatch>> = (0..n).map(|_| vec![batch.clone()]).collect();
        MemorySourceConfig::try_new_exec(&partitions, schema, None).unwrap()
    }

    fn node(input: Arc<dyn ExecutionPlan>, placement: Placement) -> Arc<dyn ExecutionPlan> {
        let schema = input.schema();
        let work = commdb_analysis::plan::Work::Whole(Arc::new(|inputs: &[Vec<RecordBatch>]| Ok(inputs[0].clone())));
        Arc::new(AnalysisExec::placed("test", vec![input], work, schema, None, placement).unwrap())
    }

    fn child(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        Arc::clone(plan.children()[0])
    }

    #[test]
    fn a_task_that_reads_every_partition_reads_one_exchange() {
        let config = datafusion::config::ConfigOptions::default();
        let rule = OneReaderForOneTask;
        // Several partitions coalesced under a node of one task: an exchange into one.
        let plan =
            rule.optimize(node(Arc::new(CoalescePartitionsExec::new(parts(3))), Placement::Whole), &config).unwrap();
        let below = child(&plan);
        let exchange = below.downcast_ref::<RepartitionExec>().expect("an exchange under the node");
        match exchange.partitioning() {
            Partitioning::Hash(by, 1) => assert_eq!(by.len(), 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(plan.output_partitioning().partition_count(), 1);
        // Left alone: a coalescing with a fetch (a step's own stage), of one partition, or
        // under a node of the embedded engine.
        for (plan, what) in [
            (node(Arc::new(CoalescePartitionsExec::new(parts(3)).with_fetch(Some(10))), Placement::Whole), "a fetch"),
            (node(Arc::new(CoalescePartitionsExec::new(parts(1))), Placement::Whole), "one partition"),
            (node(Arc::new(CoalescePartitionsExec::new(parts(3))), Placement::Local), "the embedded engine"),
        ] {
            let out = rule.optimize(Arc::clone(&plan), &config).unwrap();
            assert!(child(&out).downcast_ref::<CoalescePartitionsExec>().is_some(), "{what}");
        }
    }
}
