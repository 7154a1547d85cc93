//! The scheduler's rule that a node of one task reads each input it reads in any order
//! through one shuffle read, not a coalescing of many.
//!
//! A node that runs in one task and reads every partition of its input
//! ([`commdb_analysis::plan::Placement::Whole`]) asks DataFusion for that input as one
//! partition, and DataFusion puts a coalescing of partitions under it. Ballista ends a stage
//! below a coalescing and leaves the coalescing in the reading stage over a shuffle read per
//! partition: each of those reads fetches its partition from another executor whole before it
//! passes a batch on, and the coalescing runs them all at once, so the task holds the whole
//! input (at 1 B events the critical path's walk went from 1.0 to 2.8 GB while it read 64 parts
//! of exits). Under a node whose answer does not depend on the order an input's rows come in
//! ([`AnalysisExec::reads_in_any_order`]: the critical path's walk, the delay costs'
//! hand-on, which puts its input in order itself, and the delay costs' intervals, whose two
//! inputs are folded as they come), such a coalescing becomes an exchange by
//! hash into one partition: Ballista ends the stage below it as well, and the task reads that
//! one partition through one shuffle read, which fetches the files one after another within its
//! budget of bytes in flight (`ballista.shuffle.reader.max_bytes_in_flight`). Nodes that read
//! their input whole in the order of the partitions keep the coalescing: that order is part of
//! their answer (a sample's rows, the order of a report's ties). DataFusion's own rules take
//! out such an exchange, as a needless one, wherever they meet it, so this rule runs after
//! them, on the scheduler only: in one process a coalescing reads its partitions as they come.

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
            let mut children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
            let mut changed = false;
            for (i, child) in children.iter_mut().enumerate() {
                if !analysis.reads_in_any_order(i) {
                    break;
                }
                if let Some(exchange) = one_exchange(child)? {
                    *child = exchange;
                    changed = true;
                }
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

    /// Which of a node's inputs it reads in any order.
    #[derive(Clone, Copy)]
    enum AnyOrder {
        None,
        First,
        Every,
    }

    fn node(inputs: Vec<Arc<dyn ExecutionPlan>>, placement: Placement, any_order: AnyOrder) -> Arc<dyn ExecutionPlan> {
        let schema = inputs[0].schema();
        let work = commdb_analysis::plan::Work::Whole(Arc::new(|inputs: &[Vec<RecordBatch>]| Ok(inputs[0].clone())));
        let node = AnalysisExec::placed("test", inputs, work, schema, None, placement).unwrap();
        Arc::new(match any_order {
            AnyOrder::None => node,
            AnyOrder::First => node.reading_in_any_order(),
            AnyOrder::Every => node.reading_every_input_in_any_order(),
        })
    }

    fn coalesced(n: usize) -> Arc<dyn ExecutionPlan> {
        Arc::new(CoalescePartitionsExec::new(parts(n)))
    }

    fn child(plan: &Arc<dyn ExecutionPlan>, i: usize) -> Arc<dyn ExecutionPlan> {
        Arc::clone(plan.children()[i])
    }

    #[test]
    fn a_task_that_reads_an_input_in_any_order_reads_it_through_one_exchange() {
        let config = datafusion::config::ConfigOptions::default();
        let rule = OneReaderForOneTask;
        // Several partitions coalesced under a node of one task that reads them in any order:
        // an exchange into one, for its first input only.
        // A node made anew over its children (as the planner's rules do) still reads so.
        let made = node(vec![coalesced(3), coalesced(3)], Placement::Whole, AnyOrder::First);
        let children = vec![coalesced(3), coalesced(3)];
        let made = datafusion::physical_plan::execution_plan::replace_children_if_necessary(made, children).unwrap();
        let plan = rule.optimize(made, &config).unwrap();
        let below = child(&plan, 0);
        let exchange = below.downcast_ref::<RepartitionExec>().expect("an exchange under the node");
        match exchange.partitioning() {
            Partitioning::Hash(by, 1) => assert_eq!(by.len(), 1),
            other => panic!("{other:?}"),
        }
        assert!(child(&plan, 1).downcast_ref::<CoalescePartitionsExec>().is_some(), "the second input");
        assert_eq!(plan.output_partitioning().partition_count(), 1);
        // A node that reads every input in any order: an exchange for each that is coalesced.
        let every = node(vec![coalesced(3), coalesced(1), coalesced(4)], Placement::Whole, AnyOrder::Every);
        let plan = rule.optimize(every, &config).unwrap();
        for (i, exchanged) in [(0, true), (1, false), (2, true)] {
            let below = child(&plan, i);
            assert_eq!(below.downcast_ref::<RepartitionExec>().is_some(), exchanged, "input {i}");
            assert_eq!(below.downcast_ref::<CoalescePartitionsExec>().is_some(), !exchanged, "input {i}");
        }
        // Left alone: a node whose answer follows the partitions' order, a coalescing with a
        // fetch (a step's own stage), of one partition, or under a node of the embedded engine.
        let fetched = Arc::new(CoalescePartitionsExec::new(parts(3)).with_fetch(Some(10)));
        for (plan, what) in [
            (node(vec![coalesced(3)], Placement::Whole, AnyOrder::None), "in the partitions' order"),
            (node(vec![fetched], Placement::Whole, AnyOrder::First), "a fetch"),
            (node(vec![coalesced(1)], Placement::Whole, AnyOrder::Every), "one partition"),
            (node(vec![coalesced(3)], Placement::Local, AnyOrder::Every), "the embedded engine"),
        ] {
            let out = rule.optimize(Arc::clone(&plan), &config).unwrap();
            assert!(child(&out, 0).downcast_ref::<CoalescePartitionsExec>().is_some(), "{what}");
        }
    }
}
