//! Wait states, after Scalasca's patterns, from the call times the messages and collectives
//! tables carry:
//!
//! - Late Sender: the call that completes a receive (MPI_Recv, or the Wait of an MPI_Irecv)
//!   starts before the matching send's call: the receiver waits from its call's start until
//!   the send's call starts (at most until its own call ends). Rank = receiver, partner = sender.
//!   A call that completes several receives (MPI_Waitall, MPI_Waitsome) waits once, until the
//!   latest of their sends began: partner = that sender, msg_id = that message. The messages
//!   table records the completing call's times, not its name, so a receive completed by an
//!   MPI_Test* call counts as well (Scalasca leaves Test calls out); such a wait lasts at most
//!   the Test call, which returns at once.
//! - Late Receiver: the call that completes a send (a blocking send itself; the MPI_Wait,
//!   Waitall or Test of an MPI_Isend: `send_complete_call_start` to `send_complete_ts`) starts
//!   before the receive is posted and completes the send after the post (a synchronous or
//!   rendezvous transfer that had to wait): the sender waits from that call's start until the
//!   post. Rank = sender, partner = receiver. Eager sends complete before the post and show no
//!   wait; an MPI_Isend followed by a long MPI_Wait shows one in the Wait. A call that
//!   completes several sends waits once, until the latest of their posts (partner and msg_id
//!   that receive's), as a late sender's completion call does.
//!
//! Collective operations follow Scalasca's per-operation patterns (its performance-properties
//! reference, "Wait at Barrier", "Wait at N x N", "Late Broadcast", "Early Reduce", "Early
//! Scan"), by the `op` of each instance:
//!
//! - `wait_at_barrier` (barrier) and `wait_at_nxn` (allgather(v), alltoall(v/w), allreduce,
//!   reduce_scatter(_block)): no one finishes before the last one has begun, so every
//!   participant waits from its own begin until the last begin; partner = that last rank.
//! - Neighbourhood collectives (neighbor_allgather, neighbor_alltoall, ...): a rank waits at
//!   most for its neighbours in the communicator's topology, which traces do not record;
//!   Scalasca does not analyse them either. They are left unclassified, and `wait_states` says
//!   how many in a warning.
//! - `late_broadcast` (bcast, scatter(v), 1-to-n): a destination that begins before the root
//!   waits until the root begins; partner = the root.
//! - `early_reduce` (reduce, gather(v), n-to-1): a root that begins before the senders waits
//!   from its begin until the last sender begins (Scalasca's Early Reduce); partner = that
//!   sender. Senders do not wait.
//! - `early_scan` (scan, exscan): a rank waits until the last of the ranks below it has begun
//!   (their data flows up); partner = that rank. Ranks are ordered by their rank in the trace,
//!   which is the communicator's order for MPI_COMM_WORLD and for communicators that keep it.
//! - `wait_at_collective`: commdb's rule for operations Scalasca has no pattern for (handle and
//!   window management, unknown operations) and for rooted operations whose root is not
//!   recorded: the N x N rule.
//!
//! A rank's begin is when it entered the MPI call of the operation (`collectives.call_start`,
//! Scalasca's "enter" of the collective), or, when some member's is not recorded, the
//! collective's begin record (`begin_ts`). Every collective wait ends at the latest when the
//! waiter's own call ends, as a late sender's does. Only waits longer than 0 are listed. Cost: O(messages + participations).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::Result;

use crate::common::{Args, ComputeMany, Derived, int64_column, text_column};
use crate::declare::{Function, Make, Output, ParamDefault, Type, col, int64, param, text};
use crate::latency::MESSAGES;

pub const WAIT_STATES: Function = Function {
    name: "wait_states",
    params: &[
        MESSAGES,
        param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations to check"),
        param(
            "calls",
            Type::Relation,
            ParamDefault::Text("calls"),
            "the calls the waits are in, for their call paths (by default the calls beside rel; read only when the query reads path)",
        ),
    ],
    output: Output::Columns(&[
        col("rank", int64, "the rank that waited"),
        col(
            "pattern",
            text,
            "late_sender, late_receiver, wait_at_barrier, wait_at_nxn, late_broadcast, early_reduce, early_scan or wait_at_collective",
        ),
        col("wait_ns", int64, "how long it waited"),
        col("ts", int64, "when the wait began"),
        col("msg_id", int64, "the message waited for (NULL for a collective)"),
        col("comm", int64, "the collective's communicator (NULL for a message)"),
        col("instance", int64, "the collective's instance (NULL for a message)"),
        col("partner", int64, "the rank waited for (the late one), when one is"),
        col(
            "path",
            text,
            "the call path of the call the rank waited in, as call_tree gives it ('main/MPI_Waitall'; NULL without calls)",
        ),
    ]),
    description: "Scalasca wait states, one row per wait: late_sender, late_receiver, and per collective operation wait_at_barrier, wait_at_nxn, late_broadcast, early_reduce, early_scan (wait_at_collective for operations without a pattern)",
    make: Make::Table(|| Arc::new(WaitStates)),
};
pub(crate) const MESSAGE_COLUMNS: [&str; 10] = [
    "msg_id",
    "src",
    "dst",
    "send_call_start",
    "send_call_end",
    "recv_call_start",
    "recv_call_end",
    "recv_post_ts",
    "send_complete_call_start",
    "send_complete_ts",
];
pub(crate) const COLLECTIVE_COLUMNS: [&str; 8] =
    ["comm", "instance", "rank", "begin_ts", "op", "root", "end_ts", "call_start"];

/// The indices of `COLLECTIVE_COLUMNS` in `collectives`. `call_start` is optional: a relation
/// without it (a view made before it existed, or by hand) is read without it, and waits start
/// at begin_ts.
pub(crate) fn collective_columns(collectives: &crate::common::Relation, function: &str) -> Result<Vec<usize>> {
    let mut idx = collectives.columns(function, &COLLECTIVE_COLUMNS[..7])?;
    if let Ok(i) = collectives.schema().index_of("call_start") {
        idx.push(i);
    }
    Ok(idx)
}

/// One wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub rank: i64,
    pub pattern: &'static str,
    pub wait_ns: i64,
    pub ts: i64,
    pub msg_id: Option<i64>,
    pub comm: Option<i64>,
    pub instance: Option<i64>,
    pub partner: Option<i64>,
}

/// Late Sender and Late Receiver waits of messages given as the columns of MESSAGE_COLUMNS.
pub fn message_waits(batches: &[RecordBatch]) -> Result<Vec<Wait>> {
    let cols: Vec<Int64Array> = (0..MESSAGE_COLUMNS.len()).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
    let get = |c: usize, r: usize| cols[c].is_valid(r).then(|| cols[c].value(r));
    let mut out = Vec::new();
    // Late senders by the call that completes their receive (rank, call start, call end): a
    // call that completes several receives (MPI_Waitall, MPI_Waitsome) waits once, for the
    // latest of their senders (Scalasca's Late Sender in a completion call).
    let mut late: HashMap<(i64, i64, i64), Wait> = HashMap::new();
    // Late receivers by the call that completes their send (rank, call start, completion).
    let mut receivers: HashMap<(i64, i64), Wait> = HashMap::new();
    // The longest wait of a call; of equal ones, the first message's.
    let longer = |wait: &Wait, kept: &Wait| {
        (wait.wait_ns, std::cmp::Reverse(wait.msg_id)) > (kept.wait_ns, std::cmp::Reverse(kept.msg_id))
    };
    for r in 0..cols[0].len() {
        commdb_catalog::interrupt::check_every(r, "wait_states")?;
        let (id, src, dst) = (get(0, r), get(1, r), get(2, r));
        let (send_start, send_end, recv_start, recv_end, post) =
            (get(3, r), get(4, r), get(5, r), get(6, r), get(7, r));
        let (complete_start, complete) = (get(8, r), get(9, r));
        if let (Some(dst), Some(rs), Some(ss)) = (dst, recv_start, send_start) {
            let until = recv_end.map_or(ss, |e| ss.min(e));
            let wait = Wait {
                rank: dst,
                pattern: "late_sender",
                wait_ns: until - rs,
                ts: rs,
                msg_id: id,
                comm: None,
                instance: None,
                partner: src,
            };
            let call = (dst, rs, recv_end.unwrap_or(i64::MIN));
            if until > rs && late.get(&call).is_none_or(|kept| longer(&wait, kept)) {
                late.insert(call, wait);
            }
        }
        // The call that completed the send; when the messages do not say (a store written
        // before they did), the send's own call if it completed there.
        let completed_in = complete_start.or(send_start.filter(|_| complete.is_some() && complete == send_end));
        if let (Some(src), Some(cs), Some(done), Some(p)) = (src, completed_in, complete, post)
            && p > cs
            && done > p
        {
            let wait = Wait {
                rank: src,
                pattern: "late_receiver",
                wait_ns: p - cs,
                ts: cs,
                msg_id: id,
                comm: None,
                instance: None,
                partner: dst,
            };
            if receivers.get(&(src, cs)).is_none_or(|kept| longer(&wait, kept)) {
                receivers.insert((src, cs), wait);
            }
        }
    }
    let mut late: Vec<Wait> = late.into_values().chain(receivers.into_values()).collect();
    late.sort_by_key(|w| (w.rank, w.ts, w.pattern, w.msg_id));
    out.extend(late);
    Ok(out)
}

/// One collective instance: its operation, root and every (rank, begin), and the end of each
/// member's call (a wait never lasts beyond the waiter's own call).
#[derive(Debug, Default)]
struct Instance {
    op: String,
    root: Option<i64>,
    members: Vec<(i64, i64)>,
    /// Each member's start of the call it began the operation in, aligned with `members`.
    call_starts: Vec<Option<i64>>,
    ends: HashMap<i64, i64>,
}

/// Whether `op` is a neighbourhood collective (MPI-3), whose waits depend on the
/// communicator's topology.
pub(crate) fn is_neighbourhood(op: &str) -> bool {
    op.starts_with("neighbor_") || op.starts_with("ineighbor_")
}

/// Instances of neighbourhood collectives among participations (`COLLECTIVE_COLUMNS`): their
/// waits depend on the communicator's topology, which traces do not record, so they are not
/// classified.
pub fn unclassified_instances(batches: &[RecordBatch]) -> Result<usize> {
    let cols: Vec<Int64Array> = (0..2).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
    let op = text_column(batches, 4)?;
    let mut seen = std::collections::HashSet::new();
    for r in 0..cols[0].len() {
        if op.is_valid(r) && is_neighbourhood(op.value(r)) && cols[0].is_valid(r) && cols[1].is_valid(r) {
            seen.insert((cols[0].value(r), cols[1].value(r)));
        }
    }
    Ok(seen.len())
}

/// The Scalasca pattern of a collective operation (see the module's notes).
fn pattern_of(op: &str, has_root: bool) -> &'static str {
    match op {
        "barrier" => "wait_at_barrier",
        "allgather"
        | "allgatherv"
        | "alltoall"
        | "alltoallv"
        | "alltoallw"
        | "allreduce"
        | "reduce_scatter"
        | "reduce_scatter_block" => "wait_at_nxn",
        "bcast" | "scatter" | "scatterv" if has_root => "late_broadcast",
        "reduce" | "gather" | "gatherv" if has_root => "early_reduce",
        "scan" | "exscan" => "early_scan",
        _ => "wait_at_collective",
    }
}

/// Collective waits of participations given as comm, instance, rank, begin_ts, op, root,
/// end_ts (`COLLECTIVE_COLUMNS`). Neighbourhood collectives are left out (see
/// `unclassified_instances`).
pub fn collective_waits(batches: &[RecordBatch]) -> Result<Vec<Wait>> {
    let cols: Vec<Int64Array> = (0..4).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
    let op = text_column(batches, 4)?;
    let root = int64_column(batches, 5)?;
    let end = int64_column(batches, 6)?;
    let call_start = match batches.first() {
        Some(b) if b.num_columns() > 7 => Some(int64_column(batches, 7)?),
        _ => None,
    };
    let mut groups: BTreeMap<(i64, i64), Instance> = BTreeMap::new();
    for r in 0..cols[0].len() {
        commdb_catalog::interrupt::check_every(r, "wait_states")?;
        if cols.iter().any(|c| c.is_null(r)) {
            continue;
        }
        let (comm, inst, rank, begin) = (cols[0].value(r), cols[1].value(r), cols[2].value(r), cols[3].value(r));
        let g = groups.entry((comm, inst)).or_insert_with(|| Instance {
            op: if op.is_valid(r) { op.value(r).to_string() } else { String::new() },
            root: root.is_valid(r).then(|| root.value(r)),
            ..Instance::default()
        });
        g.members.push((rank, begin));
        g.call_starts.push(call_start.as_ref().and_then(|c| c.is_valid(r).then(|| c.value(r))));
        if end.is_valid(r) {
            g.ends.insert(rank, end.value(r));
        }
    }
    let mut out = Vec::new();
    for ((comm, instance), mut g) in groups {
        if is_neighbourhood(&g.op) {
            continue;
        }
        // Every member's wait starts when it entered the call, when all of them say.
        if g.call_starts.iter().all(Option::is_some) {
            for (m, c) in g.members.iter_mut().zip(&g.call_starts) {
                m.1 = c.expect("every member has a call start");
            }
        }
        let pattern = pattern_of(&g.op, g.root.is_some());
        // Until `until`, and at most until the waiter's own call ends.
        let mut wait = |rank: i64, begin: i64, until: i64, partner: i64| {
            let until = g.ends.get(&rank).map_or(until, |&e| until.min(e));
            if until > begin {
                out.push(Wait {
                    rank,
                    pattern,
                    wait_ns: until - begin,
                    ts: begin,
                    msg_id: None,
                    comm: Some(comm),
                    instance: Some(instance),
                    partner: Some(partner),
                });
            }
        };
        match pattern {
            "late_broadcast" => {
                let root = g.root.expect("a rooted pattern has its root");
                if let Some(&(_, root_begin)) = g.members.iter().find(|m| m.0 == root) {
                    for &(rank, begin) in g.members.iter().filter(|m| m.0 != root && m.1 < root_begin) {
                        wait(rank, begin, root_begin, root);
                    }
                }
            }
            "early_reduce" => {
                // The root waits until the last sender has begun (Scalasca's Early Reduce); the
                // lowest rank among equal begins.
                let root = g.root.expect("a rooted pattern has its root");
                let last = g.members.iter().filter(|m| m.0 != root).max_by_key(|&&(rank, begin)| (begin, -rank));
                if let (Some(&(_, root_begin)), Some(&(sender, last_begin))) =
                    (g.members.iter().find(|m| m.0 == root), last)
                    && last_begin > root_begin
                {
                    wait(root, root_begin, last_begin, sender);
                }
            }
            "early_scan" => {
                let mut members = g.members.clone();
                members.sort_unstable();
                let mut below: Option<(i64, i64)> = None;
                for (rank, begin) in members {
                    if let Some((last, partner)) = below
                        && last > begin
                    {
                        wait(rank, begin, last, partner);
                    }
                    if below.is_none_or(|(b, _)| begin > b) {
                        below = Some((begin, rank));
                    }
                }
            }
            _ => {
                // The latest begin and its rank (the lowest rank among equal begins).
                if let Some(&(last_rank, last)) = g.members.iter().max_by_key(|&&(rank, begin)| (begin, -rank)) {
                    for &(rank, begin) in g.members.iter().filter(|m| m.1 < last) {
                        wait(rank, begin, last, last_rank);
                    }
                }
            }
        }
    }
    Ok(out)
}

fn output_schema() -> SchemaRef {
    let i = |n: &str, null: bool| Field::new(n, DataType::Int64, null);
    Arc::new(Schema::new(vec![
        i("rank", false),
        Field::new("pattern", DataType::Utf8, false),
        i("wait_ns", false),
        i("ts", false),
        i("msg_id", true),
        i("comm", true),
        i("instance", true),
        i("partner", true),
        Field::new("path", DataType::Utf8, true),
    ]))
}

/// The call path of each wait: of the innermost call of its rank's thread 0 open when the
/// wait began (None when `calls` has none there, or no calls are read).
fn paths_of(waits: &[Wait], calls: &[RecordBatch]) -> Result<Vec<Option<String>>> {
    if calls.iter().all(|b| b.num_rows() == 0) {
        return Ok(vec![None; waits.len()]);
    }
    let run = crate::critical::stretches(calls, "wait_states")?;
    Ok(waits
        .iter()
        .map(|w| {
            let list = run.ranks.get(&w.rank)?;
            let s = list.get(list.partition_point(|s| s.to <= w.ts)).filter(|s| s.from <= w.ts)?;
            crate::critical::path_name(&run.paths, s.path).map(str::to_string)
        })
        .collect())
}

/// The calls beside `rel` for the call paths: `calls` when given; else the `calls` of the
/// trace `rel` reads, or the default `calls`; None when there is none (path is then NULL,
/// and a notice says so).
fn calls_for(
    a: &Args,
    session: &dyn datafusion::catalog::Session,
    rel: &crate::common::Relation,
) -> Result<Option<crate::common::Relation>> {
    if a.given("calls") {
        return a.relation(session, "calls").map(Some);
    }
    if let Some(schema) = crate::common::trace_schema(session, rel)
        && let Ok(calls) = crate::common::trace_table(session, "wait_states", &schema, "calls")
    {
        return Ok(Some(calls));
    }
    Ok(a.relation(session, "calls").ok())
}

/// `wait_states([rel => 'messages'], collectives => 'collectives', calls => 'calls')`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct WaitStates;

impl TableFunctionImpl for WaitStates {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&WAIT_STATES, args.exprs())?;
        let rel = a.relation(args.session(), "rel")?;
        let colls = a.relation(args.session(), "collectives")?;
        let mi = rel.columns("wait_states", &MESSAGE_COLUMNS)?;
        let ci = collective_columns(&colls, "wait_states")?;
        let calls = calls_for(&a, args.session(), &rel)?;
        let out = output_schema();
        let s = out.clone();
        let notices =
            args.session().config().get_extension::<commdb_catalog::wallclock::Notices>().map(|n| (*n).clone());
        let told = notices.clone();
        let compute: ComputeMany = Arc::new(move |inputs| {
            let mut waits = message_waits(&inputs[0])?;
            waits.extend(collective_waits(&inputs[1])?);
            let unclassified = unclassified_instances(&inputs[1])?;
            if let (Some(n), true) = (&notices, unclassified > 0) {
                n.push(format!(
                    "wait_states: {unclassified} neighbourhood collective instance(s) are not classified: their waits depend on the communicator's topology, which the trace does not record"
                ));
            }
            waits.sort_by_key(|w| (w.rank, w.ts, w.pattern, w.msg_id, w.instance));
            let paths = paths_of(&waits, inputs.get(2).map_or(&[][..], Vec::as_slice))?;
            let int = |f: fn(&Wait) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(waits.iter().map(f))) };
            let opt = |f: fn(&Wait) -> Option<i64>| -> ArrayRef {
                Arc::new(Int64Array::from(waits.iter().map(f).collect::<Vec<_>>()))
            };
            let columns: Vec<ArrayRef> = vec![
                int(|w| w.rank),
                Arc::new(StringArray::from_iter_values(waits.iter().map(|w| w.pattern))),
                int(|w| w.wait_ns),
                int(|w| w.ts),
                opt(|w| w.msg_id),
                opt(|w| w.comm),
                opt(|w| w.instance),
                opt(|w| w.partner),
                Arc::new(StringArray::from(paths)),
            ];
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        let mut inputs = vec![(rel, Some(mi)), (colls, Some(ci))];
        match calls {
            Some(calls) => {
                let ki = calls.columns("wait_states", &["rank", "thread", "region", "start_ts", "end_ts"])?;
                inputs.push((calls, Some(ki)));
            }
            None => {
                if let Some(n) = &told {
                    n.push("wait_states: no calls beside rel, so path is NULL; give calls => '...'".to_string());
                }
            }
        }
        let derived = Derived::from_many(out, inputs.clone(), compute);
        Ok(Arc::new(if inputs.len() > 2 { derived.reading_only_for(2, "path")? } else { derived }))
    }
}
