//! The critical path and its profile on a distributed engine, planned as steps
//! ([`commdb_analysis::steps`]) so that no task reads the calls, the messages or every
//! location's stretches whole (docs/scale.md, "The critical path"):
//!
//! 1. **The waits** where the messages and collectives lie (`crate::waits::spread::wait_steps`).
//! 2. **Each location's exits**, a task per part of the calls with the waits of its ranks:
//!    each rank's stretches are swept as in one process, and only what the walk can leave a
//!    location at is kept ([`crate::critical::exits`]): the stretches of an MPI call in
//!    which a wait ends, OpenMP hand-overs, MPI_Finalize, synchronisations with an accelerator,
//!    a stream's kernels, and the waits that end in them. The stretches between are merged into
//!    one, through which the walk only passes. With the profile, each location's time per call
//!    path less its waiting.
//! 3. **The walk**, in one task, over the exits of every location as the parts give them (not
//!    merged: a merge of the parts would hold a batch of each at once, and a distributed engine
//!    fetches each part's share whole before merging it): the same walk as in one process (`crate::critical::walk`), so it takes the same hops, and it
//!    gives each piece of time it covers. The walk is one chain of hops between ranks; each
//!    depends on the one before, so it is not split among tasks: it reads the exits, a few
//!    stretches and a wait per wait state, where the calls give a stretch each.
//! 4. **The pieces named**, a task per part of the calls, each reading the walk's pieces of its
//!    ranks (a few per segment of the path; the walk's task writes them exchanged by route,
//!    [`commdb_analysis::routes::Routes::exchanged`]) and naming them: each piece cut at its
//!    stretches, with their regions and call paths ([`crate::critical::named`]).
//! 5. **The path** (or its profile) in one task, from its pieces, merged into segments as in one
//!    process: a piece of the path per stretch on it, a small part of the run.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use commdb_analysis::plan::{Main, Work};
use commdb_analysis::steps::{From, Reads, Step};

use super::Answer;

/// The steps of `answer` over its inputs: calls, messages, collectives, events, regions and,
/// with `offload`, the accelerators' hand-overs.
pub(super) fn steps(answer: Answer, schema: SchemaRef, offload: bool, run_bytes: usize) -> Vec<Step> {
    let mut steps = crate::waits::spread::wait_steps(false, run_bytes);
    let records: Vec<From> = (3..if offload { 6 } else { 5 }).map(From::Input).collect();
    // 3
    let mut inputs = vec![From::Input(0), From::Step(1), From::Step(2)];
    inputs.extend(records.iter().cloned());
    steps.push(Step {
        label: "each location's exits: the stretches and waits the walk can leave it at",
        schema: super::exits::index_schema(),
        work: Work::Folded(super::exits::exits_start(answer, run_bytes), Main::ByRank(0)),
        inputs,
        reads: Reads::Routed(vec![1, 2]),
    });
    // 4
    let mut inputs = vec![From::Step(3)];
    if offload {
        inputs.push(From::Input(5));
    }
    steps.push(Step {
        label: "the walk over every location's exits",
        schema: super::exits::pieces_schema(),
        work: Work::Streamed(super::exits::walk_prepare(answer, offload)),
        inputs,
        reads: Reads::OnceAnyOrder,
    });
    // 5
    let mut inputs = vec![From::Input(0), From::Step(4)];
    inputs.extend(records);
    steps.push(Step {
        label: "the path's pieces named where their calls lie",
        schema: super::named::named_schema(),
        work: Work::Folded(super::named::named_start(), Main::ByRank(0)),
        inputs,
        // The pieces to the task of their rank (the profile's means under the first rank).
        reads: Reads::Routed(vec![1]),
    });
    // 6
    let label = match answer {
        Answer::Path => "the path's segments, numbered",
        Answer::Profile => "the profile of the path",
    };
    steps.push(Step {
        label,
        schema: schema.clone(),
        work: Work::Whole(Arc::new(move |inputs| super::named::answer_of(answer, &inputs[0], &schema))),
        inputs: vec![From::Step(5)],
        reads: Reads::Once,
    });
    steps
}
