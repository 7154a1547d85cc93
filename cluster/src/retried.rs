//! A task's shuffle inputs read once per map task. When an executor is lost while a stage
//! reads from it, Ballista 55 can run a map task of the stage before again twice over (once
//! because the reader failed to fetch from the lost executor, once because the executor was
//! given up) and then keeps both outputs among the reader's input locations: the reader read
//! the map task's rows twice, and an aggregation over them counted every message of a rank
//! twice (`rank_diagnosis`' `sent` 240 against 120, shell/tests/cluster.rs
//! `a_lost_process_never_hangs_the_client`). A map task's outputs are the same rows wherever
//! it ran, so before an executor runs a task, each shuffle reader of its plan keeps one
//! location per (map stage, map task, output partition): the last one added, which is from the
//! latest run.

use std::collections::HashSet;
use std::sync::Arc;

use ballista_core::execution_plans::ShuffleReaderExec;
use ballista_core::serde::scheduler::PartitionLocation;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;

/// `plan` with every shuffle reader reading each map task's output once.
pub fn once_per_map_task(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(reader) = node.downcast_ref::<ShuffleReaderExec>() else { return Ok(Transformed::no(node)) };
        let key = |l: &PartitionLocation| (l.partition_id.stage_id, l.map_partition_id, l.partition_id.partition_id);
        let deduplicated: Vec<Vec<PartitionLocation>> =
            reader.partition.iter().map(|locations| last_of_each(locations, key)).collect();
        let same = deduplicated.iter().zip(&reader.partition).all(|(a, b)| a.len() == b.len());
        if same || reader.coalesce.is_some() {
            // Coalesced readers come of adaptive planning, which commdb turns off.
            return Ok(Transformed::no(node));
        }
        let schema = reader.schema();
        let replaced = if reader.broadcast {
            let all = deduplicated.into_iter().flatten().collect();
            ShuffleReaderExec::try_new_broadcast(reader.stage_id, all, schema, reader.upstream_partition_count)?
        } else {
            let partitioning = reader.properties().partitioning.clone();
            ShuffleReaderExec::try_new(reader.stage_id, deduplicated, schema, partitioning)?
        };
        Ok(Transformed::yes(Arc::new(replaced) as Arc<dyn ExecutionPlan>))
    })
    .map(|t| t.data)
}

/// `items` with, of those sharing a key, only the last kept, in their order.
fn last_of_each<T: Clone, K: std::hash::Hash + Eq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut seen = HashSet::new();
    let mut kept: Vec<T> = items.iter().rev().filter(|i| seen.insert(key(i))).cloned().collect();
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::last_of_each;

    #[test]
    fn a_map_task_run_again_is_read_once_from_its_latest_run() {
        // (stage, map task, output partition, run)
        let locations = [(9, 0, 0, "a"), (9, 1, 0, "b"), (9, 1, 0, "rerun"), (9, 0, 1, "c"), (8, 1, 0, "d")];
        let kept = last_of_each(&locations, |l| (l.0, l.1, l.2));
        assert_eq!(kept, vec![(9, 0, 0, "a"), (9, 1, 0, "rerun"), (9, 0, 1, "c"), (8, 1, 0, "d")]);
    }
}
