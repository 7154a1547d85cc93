//! The scheduler's rule that an exchange which keeps its input's order is an exchange and a
//! sort of each of its partitions.
//!
//! DataFusion keeps the order of a table that is sorted (a store's rank-ordered tables, each
//! part sorted by rank) through an exchange by hash with an order-preserving exchange, which
//! merges the sorted streams of its input partitions into each of its outputs; the nodes above
//! rely on that order (an aggregation by rank that streams, an `ORDER BY rank` whose sort it
//! takes out). Ballista runs such an exchange as a shuffle, whose readers read the files of the
//! input partitions one after another: the order was lost and `GROUP BY rank ORDER BY rank`
//! gave its rows out of order. Here such an exchange becomes a plain one with a sort of each
//! output partition by the input's order above it, so that every order the plan relies on
//! holds. The rule runs after DataFusion's own rules, on the scheduler only: in one process
//! the order-preserving exchange keeps the order itself.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

#[derive(Debug)]
pub struct OrderKeptAcrossExchanges;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for OrderKeptAcrossExchanges {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(exchange) = node.downcast_ref::<RepartitionExec>() else { return Ok(Transformed::no(node)) };
            if !exchange.preserve_order() {
                return Ok(Transformed::no(node));
            }
            let Some(order) = exchange.input().output_ordering().cloned() else { return Ok(Transformed::no(node)) };
            let plain = RepartitionExec::try_new(Arc::clone(exchange.input()), exchange.partitioning().clone())?;
            let sorted = SortExec::new(order, Arc::new(plain)).with_preserve_partitioning(true);
            Ok(Transformed::yes(Arc::new(sorted) as Arc<dyn ExecutionPlan>))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "order_kept_across_exchanges"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    use datafusion::physical_plan::Partitioning;

    /// Three partitions, each sorted by rank.
    fn sorted_parts() -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("rank", DataType::Int64, false)]));
        let part = |ranks: Vec<i64>| {
            vec![RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ranks))]).unwrap()]
        };
        let order = LexOrdering::new(vec![PhysicalSortExpr::new_default(col("rank", &schema).unwrap())]).unwrap();
        let source = MemorySourceConfig::try_new(&[part(vec![0, 3]), part(vec![1, 4]), part(vec![2, 5])], schema, None)
            .unwrap()
            .try_with_sort_information(vec![order])
            .unwrap();
        datafusion::datasource::source::DataSourceExec::from_data_source(source)
    }

    #[test]
    fn an_exchange_that_keeps_order_becomes_an_exchange_and_a_sort() {
        let config = datafusion::config::ConfigOptions::default();
        let input = sorted_parts();
        let by = vec![col("rank", &input.schema()).unwrap()];
        let keeping = RepartitionExec::try_new(Arc::clone(&input), Partitioning::Hash(by.clone(), 2))
            .unwrap()
            .with_preserve_order();
        assert!(keeping.preserve_order());
        let plan = OrderKeptAcrossExchanges.optimize(Arc::new(keeping), &config).unwrap();
        let sort = plan.downcast_ref::<SortExec>().expect("a sort above the exchange");
        assert!(sort.preserve_partitioning());
        assert_eq!(plan.output_partitioning().partition_count(), 2);
        assert_eq!(plan.output_ordering(), input.output_ordering());
        let below = plan.children()[0].downcast_ref::<RepartitionExec>().expect("the exchange").clone();
        assert!(!below.preserve_order());
        // A plain exchange is left as it is.
        let plain: Arc<dyn ExecutionPlan> =
            Arc::new(RepartitionExec::try_new(input, Partitioning::Hash(by, 2)).unwrap());
        let out = OrderKeptAcrossExchanges.optimize(Arc::clone(&plain), &config).unwrap();
        assert!(out.downcast_ref::<RepartitionExec>().is_some());
    }
}
