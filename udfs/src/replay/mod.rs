//! Ideal-network replay and transfer efficiency, after the transfer-efficiency monitors: each
//! rank's run is replayed on ideal clocks over a network with zero latency and infinite
//! bandwidth, and the simulated time is set against the observed time pair by pair, a pair
//! being a compute stretch (time outside MPI) and the MPI call that follows it.
//!
//! Per rank, the outermost calls whose region starts with `MPI_` (on any thread, in start
//! order; calls nested in another MPI call are part of it) are the MPI calls; the rest is
//! compute. On ideal clocks:
//!
//! - a compute stretch keeps its observed duration; the ideal clock starts at the rank's first
//!   call (its origin);
//! - an MPI call starts when the previous one ended plus the compute stretch; an operation is
//!   posted at the ideal start of the call that posted it (the call containing the recorded
//!   post time: send_call_start, recv_post_ts, a collective's begin);
//! - a receive completes at max(its own post, the matching send's post);
//! - a send completes at its post when eager (bytes <= eager_limit), otherwise at max(its post,
//!   the matching receive's post) (rendezvous);
//! - non-blocking operations complete in the call where their completion was recorded
//!   (send_complete_ts, recv_call_start: the Wait or Test), by the same rules;
//! - a collective completes for every participant at the latest participant's post;
//! - an MPI call ends at the latest completion it holds, and at its start when it holds none of
//!   them (an MPI call that completes nothing — MPI_Init, MPI_Comm_rank, a failed Test — keeps
//!   its observed duration, as local work).
//!
//! The replay visits calls in dependency order (a call ends only after the calls that post what
//! it waits for have started); times that contradict the messages leave no such order and are
//! an error. Message sides whose times fall outside every MPI call of their rank cannot be
//! placed and are counted (`unplaced` in transfer_efficiency). Reported per pair (equations 2
//! and 3 of the source, as written): compute_ns, mpi_observed_ns, mpi_ideal_ns = the ideal
//! call's duration, transfer_ns = observed - ideal, trf_local = (compute + ideal) / (compute +
//! observed), trf_cumulative = the same sums over the rank's pairs so far. Nothing is clamped:
//! a call can last longer on ideal clocks than observed (the rank itself arrives earlier while
//! its partner's post moves less), so transfer_ns can be negative and trf_local above 1. The
//! compute after a rank's last MPI call, up to its last event, is a last pair without a call
//! (region NULL), so a rank's pairs add up to its whole run and its last trf_cumulative equals
//! its `transfer_efficiency`. Causality holds on the ideal clocks, and no ideal end is later
//! than the observed one (by induction: every post is no later than observed).
//!
//! It runs within the memory budget at any size (`sweep`): the messages and collectives go to
//! scratch files as they stream (`spill`), the calls a chunk of whole ranks at a time
//! (`mpi_calls`) into a scratch store of the ranks' MPI calls (`call_store`); then every side is
//! placed in its call, what each call waits for goes to a scratch file in call order
//! (`call_lists`), the calls are visited (`simulate`) and their ideal starts written to another
//! (`ideal_starts`), and the rows are read back rank by rank, several ranks side by side
//! (`answer`).
//!
//! On a distributed engine the same replay is planned as steps (`steps`): the sides and
//! collective members are placed in their calls where their ranks' calls lie (`placing`), each
//! rank's MPI calls sent on as a row (`rank_calls`), and the replay itself runs in one task
//! over those, by the same lists and the same visit.

mod answer;
mod call_lists;
mod call_store;
mod ideal_starts;
mod mpi_calls;
mod placing;
mod rank_calls;
mod simulate;
mod steps;
mod sweep;

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use datafusion::execution::memory_pool::MemoryPool;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::Projected;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::StartFold;
use sweep::Answer;

pub(crate) use mpi_calls::MpiCalls;

pub const EAGER_LIMIT: i64 = 65_536;

const REPLAY_PARAMS: &[Param] = &[
    param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to replay"),
    param(
        "eager_limit",
        Type::Integer { min: 0 },
        ParamDefault::Integer(EAGER_LIMIT),
        "a send of at most this many bytes completes at its post (eager); larger ones wait for the receive (rendezvous)",
    ),
    param("messages", Type::Relation, ParamDefault::Text("messages"), "the matched messages between the calls"),
    param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations of the calls"),
];

pub const IDEAL_REPLAY: Function = Function {
    name: "ideal_replay",
    params: REPLAY_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, "").never_null(),
        col("pair", int64, "the pair's number on the rank, from 0").never_null(),
        col("region", text, "the MPI call of the pair (NULL: the compute after the last call)"),
        col("compute_ns", int64, "time outside MPI before the call").never_null(),
        col("mpi_observed_ns", int64, "the call's observed duration").never_null(),
        col("mpi_ideal_ns", int64, "its duration on the ideal network").never_null(),
        col("transfer_ns", int64, "observed - ideal (can be negative)").never_null(),
        col("observed_end", int64, "end of the call as recorded").never_null(),
        col("ideal_end", int64, "end of the call on ideal clocks").never_null(),
        col("trf_local", float64, "(compute + ideal) / (compute + observed) (equation 2)").never_null(),
        col("trf_cumulative", float64, "the same over the rank's pairs so far (equation 3)").never_null(),
    ]),
    description: "the run replayed on an ideal network (zero latency, infinite bandwidth): per rank and compute/MPI pair (region NULL for the compute after the last call), observed and simulated MPI time and the transfer efficiency (equations 2-3)",
    make: Make::Table(ideal_replay),
};

pub const TRANSFER_EFFICIENCY: Function = Function {
    name: "transfer_efficiency",
    params: REPLAY_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, "the rank (NULL: all ranks, the run)"),
        col("observed_ns", int64, "its observed runtime").never_null(),
        col("ideal_ns", int64, "its runtime on the ideal network").never_null(),
        col("efficiency", float64, "ideal / observed").never_null(),
        col("unplaced", int64, "message sides outside every MPI call of the rank, left out").never_null(),
    ]),
    description: "per rank and overall (rank NULL): observed and ideal-network runtime and their ratio",
    make: Make::Table(transfer_efficiency),
};
const CALL_COLUMNS: [&str; 4] = ["rank", "region", "start_ts", "end_ts"];
const MESSAGE_COLUMNS: [&str; 7] =
    ["src", "dst", "bytes", "send_call_start", "send_complete_ts", "recv_post_ts", "recv_call_start"];
const COLLECTIVE_COLUMNS: [&str; 5] = ["comm", "instance", "rank", "begin_ts", "end_ts"];

struct Inputs {
    eager_limit: i64,
    pool: Arc<dyn MemoryPool>,
}

arguments! {
    /// The arguments of both replays (REPLAY_PARAMS).
    struct ReplayArgs(IDEAL_REPLAY, TRANSFER_EFFICIENCY) {
        rel: Relation,
        eager_limit: i64,
        messages: Relation,
        collectives: Relation,
    }
}

fn inputs(a: &Args) -> Result<(Inputs, Vec<Projected>)> {
    let function = a.function;
    let ReplayArgs { rel: calls, eager_limit, messages, collectives: colls } = ReplayArgs::read(a)?;
    let ci = calls.columns(function, &CALL_COLUMNS)?;
    let mi = messages.columns(function, &MESSAGE_COLUMNS)?;
    let ki = colls.columns(function, &COLLECTIVE_COLUMNS)?;
    let pool = a.session.runtime_env().memory_pool.clone();
    Ok((Inputs { eager_limit, pool }, vec![(calls, Some(ci)), (messages, Some(mi)), (colls, Some(ki))]))
}

/// The replay as a folded analysis: the messages and collectives spilled as they stream, the
/// calls swept a chunk of whole ranks at a time (commdb_analysis::by_rank), the answer made at the end.
fn replay_analysis(a: &Args, answer: Answer) -> Result<Arc<dyn TableProvider>> {
    let (inp, rels) = inputs(a)?;
    let what = a.function;
    let out = a.schema();
    let schema = out.clone();
    let Inputs { eager_limit, pool } = inp;
    let (o, p) = (out.clone(), pool.clone());
    let start: StartFold = Arc::new(move || sweep::start(what, answer, eager_limit, o.clone(), p.clone(), false));
    // On a distributed engine, planned as steps so that no task reads the calls or messages whole.
    let placed: StartFold = Arc::new(move || sweep::start(what, answer, eager_limit, out.clone(), pool.clone(), true));
    let steps = steps::steps(what, placed, schema.clone());
    Ok(Arc::new(Derived::folded(schema, rels, Main::ByRank(0), start).in_steps(steps)?))
}

fn ideal_replay(a: &Args) -> Result<Arc<dyn TableProvider>> {
    replay_analysis(a, Answer::Pairs)
}

fn transfer_efficiency(a: &Args) -> Result<Arc<dyn TableProvider>> {
    replay_analysis(a, Answer::Efficiency)
}

/// The items at `picks` (distinct indices into `items`) as mutable references, in the picks'
/// order, for threads that each work on items of their own (None: an index repeats or lies out
/// of range).
fn disjoint_mut<'a, T>(items: &'a mut [T], picks: &[usize]) -> Option<Vec<&'a mut T>> {
    let mut by_index: Vec<(usize, usize)> = picks.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    by_index.sort_unstable();
    let mut out: Vec<Option<&'a mut T>> = picks.iter().map(|_| None).collect();
    let (mut rest, mut base) = (items, 0usize);
    for (i, k) in by_index {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut_checked(i.checked_sub(base)?)?;
        let (item, tail) = tail.split_first_mut()?;
        out[k] = Some(item);
        (rest, base) = (tail, i + 1);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::disjoint_mut;

    #[test]
    fn distinct_picks_come_in_their_order_and_repeats_are_refused() {
        let mut items = [10, 11, 12, 13, 14];
        let picked = disjoint_mut(&mut items, &[3, 0, 4]).expect("distinct");
        assert_eq!(picked.iter().map(|x| **x).collect::<Vec<_>>(), [13, 10, 14]);
        for x in picked {
            *x += 100;
        }
        assert_eq!(items, [110, 11, 12, 113, 114]);
        assert!(disjoint_mut(&mut items, &[1, 1]).is_none(), "a repeat");
        assert!(disjoint_mut(&mut items, &[2, 5]).is_none(), "out of range");
        assert_eq!(disjoint_mut(&mut items, &[]).map(|v| v.len()), Some(0));
    }
}
