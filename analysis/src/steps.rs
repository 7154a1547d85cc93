//! An analysis planned as steps of its own on a distributed engine ([`crate::derived::Spread::Steps`]):
//! each step is a node over some of the analysis's inputs and earlier steps, read a task per
//! part of its first input, a task per partition of an exchange by key, or in one task; the
//! last step gives the answer. The DAG of the messages is planned so (`dag_nodes`,
//! `dag_edges`): each message's halves per part of the messages, exchanged by rank for PCLVis's
//! Algorithm 2, each rank's count of nodes read by every task for the ids, the halves' nodes
//! exchanged by message to make the edges (docs/scale.md). A step's node is known on another
//! process by its number (`Stage::Step`), so that process plans the call again and takes the
//! step from it, as it does for the prefolds.

use std::fmt;

use arrow::datatypes::SchemaRef;

use crate::plan::{Placement, Work};

/// Where a step's input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum From {
    /// The analysis's input of that number (a relation it reads).
    Input(usize),
    /// The output of an earlier step.
    Step(usize),
    /// The outputs of earlier steps, of one schema, one after another.
    Union(Vec<usize>),
}

/// How a step's tasks read its first input; its other inputs are read whole by every task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reads {
    /// A task per partition of the first input.
    ByPart,
    /// A task per partition of an exchange of the first input by a hash of these columns, so
    /// that the rows of one key meet in one task.
    Exchanged(Vec<usize>),
    /// One task, reading every input whole; it runs once, and the steps that read it whole
    /// read its rows from the engine's exchange.
    Once,
    /// One task, as `Once`, whose answer does not depend on the order its first input's rows
    /// come in: it streams them as they come, whatever the order of the partitions and of their
    /// batches (each batch's rows in their partition's order). On a distributed engine it reads
    /// that input through one exchange, not a shuffle read per partition held whole.
    OnceAnyOrder,
    /// One task, as `OnceAnyOrder`, whose answer depends on the order of none of its inputs'
    /// rows: on a distributed engine it reads each input through one exchange.
    OnceAllAnyOrder,
    /// One task, as `Once`, reading its first input in the order of these columns: the
    /// partitions come one after another as the engine hands them over, and the task puts them
    /// in order beyond memory ([`crate::merged`]; each partition is best sorted so, which makes
    /// it one sorted run).
    OnceInOrder(Vec<usize>),
    /// A task per part of its first input (an input of the analysis that a store holds in parts
    /// of whole ranks, swept by rank), each with the rows of the inputs listed here whose column
    /// `rank` lies in its part ([`crate::routes`]); one task reading its inputs whole when the
    /// first input is not in such parts (a view, a trace in memory).
    Routed(Vec<usize>),
}

/// A step of an analysis planned as steps.
#[derive(Clone)]
pub struct Step {
    /// What EXPLAIN says it computes.
    pub label: &'static str,
    /// The rows it gives (the last step's are the analysis's own).
    pub schema: SchemaRef,
    pub work: Work,
    pub inputs: Vec<From>,
    pub reads: Reads,
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("label", &self.label)
            .field("inputs", &self.inputs)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl Step {
    /// How its node reads its inputs' partitions.
    pub fn placement(&self) -> Placement {
        match self.reads {
            Reads::ByPart | Reads::Exchanged(_) => Placement::ByPart,
            Reads::Once | Reads::OnceAnyOrder | Reads::OnceAllAnyOrder | Reads::OnceInOrder(_) => Placement::Whole,
            Reads::Routed(_) => Placement::Routed,
        }
    }

    /// An error unless `steps` is a plan: each step reads inputs that exist and earlier steps
    /// only, and there is a last step (the answer).
    pub fn check_plan(name: &str, steps: &[Step], inputs: usize) -> datafusion::error::Result<()> {
        if steps.is_empty() {
            return datafusion::common::internal_err!("{name}: a plan of steps needs one step at least");
        }
        for (k, step) in steps.iter().enumerate() {
            if step.inputs.is_empty() {
                return datafusion::common::internal_err!("{name}: step {k} ({}) reads nothing", step.label);
            }
            for from in &step.inputs {
                let known = match from {
                    From::Input(i) => *i < inputs,
                    From::Step(s) => *s < k,
                    From::Union(steps) => !steps.is_empty() && steps.iter().all(|s| *s < k),
                };
                if !known {
                    return datafusion::common::internal_err!(
                        "{name}: step {k} ({}) reads {from:?}, which is not before it",
                        step.label
                    );
                }
            }
            if step.reads == Reads::ByPart && matches!(step.work, Work::Whole(_)) {
                return datafusion::common::internal_err!(
                    "{name}: step {k} ({}) reads by part but holds its input whole",
                    step.label
                );
            }
            if let Reads::OnceInOrder(_) = step.reads
                && !matches!(step.work, Work::Streamed(_))
            {
                return datafusion::common::internal_err!(
                    "{name}: step {k} ({}) merges its input in order but does not stream it",
                    step.label
                );
            }
            if let Reads::Routed(exchanged) = &step.reads {
                let by_rank = matches!(step.work, Work::ByRank(..) | Work::Folded(_, crate::plan::Main::ByRank(_)));
                let first = matches!(step.inputs[0], From::Input(_));
                if !by_rank || !first || exchanged.iter().any(|&i| i == 0 || i >= step.inputs.len()) {
                    return datafusion::common::internal_err!(
                        "{name}: step {k} ({}) is routed: it sweeps an input of the analysis by rank, with rows of its other inputs",
                        step.label
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::Schema;

    use super::*;

    fn step(inputs: Vec<From>, reads: Reads) -> Step {
        let work = Work::Whole(Arc::new(|_| Ok(Vec::new())));
        Step { label: "test", schema: Arc::new(Schema::empty()), work, inputs, reads }
    }

    #[test]
    fn a_plan_reads_only_what_is_before_each_step() {
        let good = [step(vec![From::Input(0)], Reads::Once), step(vec![From::Step(0), From::Input(1)], Reads::Once)];
        Step::check_plan("f", &good, 2).unwrap();
        let e = Step::check_plan("f", &good, 1).unwrap_err().to_string();
        assert!(e.contains("Input(1)"), "{e}");
        let ahead = [step(vec![From::Step(0)], Reads::Once)];
        assert!(Step::check_plan("f", &ahead, 1).unwrap_err().to_string().contains("not before it"));
        let union = [
            step(vec![From::Input(0)], Reads::Once),
            step(vec![From::Input(0)], Reads::Once),
            step(vec![From::Union(vec![0, 1])], Reads::Once),
        ];
        Step::check_plan("f", &union, 1).unwrap();
        let empty = [step(vec![From::Input(0)], Reads::Once), step(vec![From::Union(vec![])], Reads::Once)];
        assert!(Step::check_plan("f", &empty, 1).is_err());
        assert!(Step::check_plan("f", &[], 1).is_err());
        let by_part = [step(vec![From::Input(0)], Reads::ByPart)];
        assert!(Step::check_plan("f", &by_part, 1).unwrap_err().to_string().contains("whole"));
        let unordered = [step(vec![From::Input(0)], Reads::OnceInOrder(vec![0]))];
        assert!(Step::check_plan("f", &unordered, 1).unwrap_err().to_string().contains("in order"));
        let routed = [step(vec![From::Input(0), From::Input(1)], Reads::Routed(vec![1]))];
        assert!(Step::check_plan("f", &routed, 2).unwrap_err().to_string().contains("routed"));
    }
}
