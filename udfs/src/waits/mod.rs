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
//!   that receive's), as a late sender's completion call does. A call that also completed a
//!   receive whose sender was late (an MPI_Waitall over receives and sends) counts no late
//!   receiver: Scalasca's MPI_LATERECEIVER (its `MPI.pattern`) leaves out a multiple-completion
//!   call in which a late-sender candidate was found, and the two waits would overlap.
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

pub(crate) mod openmp;
pub(crate) mod spread;
pub(crate) mod stream;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use crate::external_sort::{ExternalSort, Sorted};
use crate::latency::MESSAGES;
use crate::waits::openmp::{
    THREAD_KINDS, THREAD_PARADIGMS, ThreadCalls, ThreadRecords, rank_threads, rank_waits, stretch_at,
};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Folder, Mapper, StartFold};

pub const WAIT_STATES: Function = Function {
    name: "wait_states",
    params: &[
        MESSAGES,
        param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations to check"),
        param(
            "calls",
            Type::Relation,
            ParamDefault::Text("calls"),
            "the calls the waits are in, for their call paths and threads, and the threads' OpenMP calls (by default the calls beside rel)",
        ),
        param(
            "events",
            Type::Relation,
            ParamDefault::Text("events"),
            "the events whose thread forks, joins and locks the threads' waits read (by default the events beside rel)",
        ),
        param(
            "regions",
            Type::Relation,
            ParamDefault::Text("regions"),
            "the regions whose OpenMP roles (parallel, barrier, critical, ...) the threads' waits read (by default the regions beside rel)",
        ),
    ],
    output: Output::Columns(&[
        col("rank", int64, "the rank that waited").never_null(),
        col(
            "thread",
            int64,
            "the thread that waited: for an MPI wait the thread whose MPI call it is in (NULL without calls)",
        ),
        col(
            "pattern",
            text,
            "late_sender, late_receiver, wait_at_barrier, wait_at_nxn, late_broadcast, early_reduce, early_scan or wait_at_collective (MPI); omp_fork, omp_join, wait_at_omp_barrier, wait_at_omp_implicit_barrier, omp_critical_contention, omp_lock_contention, pthread_lock_contention, lock_contention, omp_idle_threads or omp_limited_parallelism (threads)",
        ).never_null(),
        col("wait_ns", int64, "how long it waited").never_null(),
        col("ts", int64, "when the wait began").never_null(),
        col("msg_id", int64, "the message waited for (NULL for a collective)"),
        col("comm", int64, "the collective's communicator (NULL for a message)"),
        col(
            "instance",
            int64,
            "the collective's instance, or the parallel region's (its fork's 0-based number in the rank, as parallel_regions gives it)",
        ),
        col("partner", int64, "the rank waited for (the late one), when one is"),
        col(
            "partner_thread",
            int64,
            "the thread of the rank waited for: the last at an OpenMP barrier, the lock's holder, the master for idle threads",
        ),
        col(
            "path",
            text,
            "the call path of the call the rank waited in, as call_tree gives it ('main/MPI_Waitall'; NULL without calls)",
        ),
    ]),
    description: "Scalasca wait states, one row per wait: late_sender, late_receiver, and per collective operation wait_at_barrier, wait_at_nxn, late_broadcast, early_reduce, early_scan (wait_at_collective for operations without a pattern); the threads' OpenMP waits: fork and join, barriers, lock contention, idle threads",
    make: Make::Table(wait_states),
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
pub(crate) fn collective_columns(
    collectives: &commdb_analysis::relation::Relation,
    function: &str,
) -> Result<Vec<usize>> {
    let mut idx = collectives.columns(function, &COLLECTIVE_COLUMNS[..7])?;
    if let Ok(i) = collectives.schema().index_of("call_start") {
        idx.push(i);
    }
    Ok(idx)
}

/// The patterns of the MPI waits, as a wait names them (a row from another task, a wait kept
/// on disk by its index here).
pub(crate) const MPI_PATTERNS: [&str; 8] = [
    "late_sender",
    "late_receiver",
    "wait_at_barrier",
    "wait_at_nxn",
    "late_broadcast",
    "early_reduce",
    "early_scan",
    "wait_at_collective",
];

/// One wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl Wait {
    /// The order the waits are given in: rank, start, pattern, message, instance.
    pub fn order(&self) -> (i64, i64, &'static str, Option<i64>, Option<i64>) {
        (self.rank, self.ts, self.pattern, self.msg_id, self.instance)
    }
}

/// A message's wait, kept until the waits of its completing call are reduced to one: whether
/// it is a late sender's (else a late receiver's), the waiting rank, the call's start (the
/// wait's start), a key that tells calls apart further (a late sender's call end), the wait,
/// the message and the partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub late: bool,
    pub rank: i64,
    pub ts: i64,
    pub call: i64,
    pub wait_ns: i64,
    pub msg_id: Option<i64>,
    pub partner: Option<i64>,
    /// When the send call was left (i64::MIN: not recorded).
    pub left: i64,
}

/// The Late Sender and Late Receiver candidates of the messages of `batch` (the columns of
/// MESSAGE_COLUMNS): only the messages that made a rank wait give one.
pub(crate) fn candidates_of(batch: &RecordBatch, mut each: impl FnMut(Candidate) -> Result<()>) -> Result<()> {
    let batches = std::slice::from_ref(batch);
    let cols: Vec<Int64Array> = (0..MESSAGE_COLUMNS.len()).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
    let get = |c: usize, r: usize| cols[c].is_valid(r).then(|| cols[c].value(r));
    for r in 0..batch.num_rows() {
        let (id, src, dst) = (get(0, r), get(1, r), get(2, r));
        let (send_start, send_end, recv_start, recv_end, post) =
            (get(3, r), get(4, r), get(5, r), get(6, r), get(7, r));
        let (complete_start, complete) = (get(8, r), get(9, r));
        if let (Some(dst), Some(rs), Some(ss)) = (dst, recv_start, send_start) {
            let until = recv_end.map_or(ss, |e| ss.min(e));
            if until > rs {
                each(Candidate {
                    late: true,
                    rank: dst,
                    ts: rs,
                    call: recv_end.unwrap_or(i64::MIN),
                    wait_ns: until - rs,
                    msg_id: id,
                    partner: src,
                    left: send_end.unwrap_or(i64::MIN),
                })?;
            }
        }
        // The call that completed the send; when the messages do not say (a store written
        // before they did), the send's own call if it completed there.
        let completed_in = complete_start.or(send_start.filter(|_| complete.is_some() && complete == send_end));
        if let (Some(src), Some(cs), Some(done), Some(p)) = (src, completed_in, complete, post)
            && p > cs
            && done > p
        {
            each(Candidate {
                late: false,
                rank: src,
                ts: cs,
                call: 0,
                wait_ns: p - cs,
                msg_id: id,
                partner: dst,
                left: send_end.unwrap_or(i64::MIN),
            })?;
        }
    }
    Ok(())
}

/// Late Sender and Late Receiver waits folded from messages (the columns of
/// MESSAGE_COLUMNS) batch by batch: only the messages that made a rank wait are kept, put in
/// the order of the calls that waited beyond memory (`crate::external_sort`), and a call that
/// completes several of them (MPI_Waitall, MPI_Waitsome) waits once, for the latest
/// (Scalasca's Late Sender in a completion call), as the waits are read (`stream`).
#[derive(Debug)]
pub struct MessageWaits {
    candidates: ExternalSort<Candidate>,
}

impl Default for MessageWaits {
    fn default() -> Self {
        Self::new(crate::external_sort::RUN_BYTES)
    }
}

impl MessageWaits {
    /// Candidates sorted in runs of `run_bytes` (`crate::external_sort::run_bytes`).
    pub(crate) fn new(run_bytes: usize) -> Self {
        MessageWaits { candidates: ExternalSort::new("the messages' waits", run_bytes) }
    }

    /// Candidates sorted in runs of `run` (tests spill with small runs).
    #[cfg(test)]
    pub(crate) fn with_run(run: usize) -> Self {
        MessageWaits { candidates: ExternalSort::with_run("the messages' waits", run) }
    }

    pub fn fold(&mut self, batch: &RecordBatch) -> Result<()> {
        candidates_of(batch, |c| self.candidates.push(c))
    }

    /// A candidate found elsewhere (a cluster's task that read the messages).
    pub(crate) fn push(&mut self, c: Candidate) -> Result<()> {
        self.candidates.push(c)
    }

    pub fn held_bytes(&self) -> usize {
        self.candidates.held_bytes()
    }

    /// The waits, one per completing call (the longest; of equal ones, the first message's),
    /// in the order of `Wait::order`, each late sender's with when its send call was left.
    pub(crate) fn stream(self) -> Result<stream::MessageWaitStream> {
        Ok(stream::MessageWaitStream::new(self.candidates.sorted()?))
    }

    /// The waits of `stream`, all at once.
    #[cfg(test)]
    pub(crate) fn finish(self) -> Result<Vec<Wait>> {
        let mut stream = self.stream()?;
        let mut out = Vec::new();
        while let Some((w, _)) = stream.next()? {
            out.push(w);
        }
        Ok(out)
    }
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
    /// The end of each member's part that has one, as (rank, end), in input order.
    ends: Vec<(i64, i64)>,
}

/// Whether `op` is a neighbourhood collective (MPI-3), whose waits depend on the
/// communicator's topology.
pub(crate) fn is_neighbourhood(op: &str) -> bool {
    op.starts_with("neighbor_") || op.starts_with("ineighbor_")
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

/// One participation in a collective instance as `CollectiveWaits` keeps it until the
/// instance is whole: its instance, its place in the input (so that an instance's parts come
/// back in the order they came), the rank, its begin (None: a part without one, which waits
/// for nothing but leaves the instance), its end, its call's start, the root and the
/// operation (an index into `CollectiveWaits::ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    pub comm: i64,
    pub instance: i64,
    pub seq: u64,
    pub rank: i64,
    pub begin: Option<i64>,
    pub end: Option<i64>,
    pub call_start: Option<i64>,
    pub root: Option<i64>,
    pub op: u32,
}

/// Collective waits folded from participations given as comm, instance, rank, begin_ts, op,
/// root, end_ts and optionally call_start (`COLLECTIVE_COLUMNS`) batch by batch: every
/// participation is kept, put in the order of its instance beyond memory
/// (`crate::external_sort`), and each instance's waits are computed when the participations
/// end, an instance at a time. Neighbourhood collectives are left out and counted.
#[derive(Debug)]
pub struct CollectiveWaits {
    parts: ExternalSort<Part>,
    /// The bytes of a run of the participations and of the waits.
    run_bytes: usize,
    /// The operations' names, and the index of each.
    ops: Vec<String>,
    op_index: HashMap<String, u32>,
    /// Instances of neighbourhood collectives: their waits depend on the communicator's
    /// topology, which traces do not record, so they are not classified.
    unclassified: std::collections::HashSet<(i64, i64)>,
}

impl Default for CollectiveWaits {
    fn default() -> Self {
        Self::new(crate::external_sort::RUN_BYTES)
    }
}

impl CollectiveWaits {
    /// Participations and waits sorted in runs of `run_bytes` (`crate::external_sort::run_bytes`).
    pub(crate) fn new(run_bytes: usize) -> Self {
        CollectiveWaits {
            parts: ExternalSort::new("the collectives' waits", run_bytes),
            run_bytes,
            ops: Vec::new(),
            op_index: HashMap::new(),
            unclassified: Default::default(),
        }
    }

    /// Participations sorted in runs of `run` (tests spill with small runs).
    #[cfg(test)]
    pub(crate) fn with_run(run: usize) -> Self {
        CollectiveWaits {
            parts: ExternalSort::with_run("the collectives' waits", run),
            run_bytes: 64 * run,
            ..Self::default()
        }
    }

    pub fn fold(&mut self, batch: &RecordBatch) -> Result<()> {
        let batches = std::slice::from_ref(batch);
        let cols: Vec<Int64Array> = (0..4).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
        let op = text_column(batches, 4)?;
        let root = int64_column(batches, 5)?;
        let end = int64_column(batches, 6)?;
        let call_start = if batch.num_columns() > 7 { Some(int64_column(batches, 7)?) } else { None };
        let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
        for r in 0..batch.num_rows() {
            if op.is_valid(r) && is_neighbourhood(op.value(r)) && cols[0].is_valid(r) && cols[1].is_valid(r) {
                self.unclassified.insert((cols[0].value(r), cols[1].value(r)));
            }
            // A part needs its instance and rank; one without a begin only leaves the
            // instance (when it has an end).
            if cols[..3].iter().any(|c| c.is_null(r)) || (cols[3].is_null(r) && end.is_null(r)) {
                continue;
            }
            let name = if op.is_valid(r) { op.value(r) } else { "" };
            let op = match self.op_index.get(name) {
                Some(&i) => i,
                None => {
                    let i = self.ops.len() as u32;
                    self.ops.push(name.to_string());
                    self.op_index.insert(name.to_string(), i);
                    i
                }
            };
            let seq = self.parts.len();
            self.parts.push(Part {
                comm: cols[0].value(r),
                instance: cols[1].value(r),
                seq,
                rank: cols[2].value(r),
                begin: opt(&cols[3], r),
                end: opt(&end, r),
                call_start: call_start.as_ref().and_then(|c| opt(c, r)),
                root: opt(&root, r),
                op,
            })?;
        }
        Ok(())
    }

    pub fn held_bytes(&self) -> usize {
        self.parts.held_bytes() + self.unclassified.len() * 32 + self.ops.iter().map(|o| o.len() + 64).sum::<usize>()
    }

    /// The waits in the order of `Wait::order` (put in order beyond memory), and the number of
    /// neighbourhood collective instances left out.
    pub(crate) fn sorted(self) -> Result<(Sorted<Wait>, usize)> {
        let mut waits = ExternalSort::new("the collectives' waits", self.run_bytes);
        let unclassified = self.finish_each(|w| waits.push(w))?;
        Ok((waits.sorted()?, unclassified))
    }

    /// Hand every wait to `each`, instance by instance, and give the number of neighbourhood
    /// collective instances left out; the first error `each` gives ends it.
    pub fn finish_each(self, each: impl FnMut(Wait) -> Result<()>) -> Result<usize> {
        self.finish_each_with(each, |_, _, _| Ok(()))
    }

    /// As `finish_each`, and after each instance in which someone waited, hands `waited` its
    /// comm, instance and the end of every part of it, as (rank, end).
    pub fn finish_each_with(
        self,
        mut each: impl FnMut(Wait) -> Result<()>,
        mut waited: impl FnMut(i64, i64, &[(i64, i64)]) -> Result<()>,
    ) -> Result<usize> {
        let CollectiveWaits { parts, ops, unclassified, .. } = self;
        let mut parts = parts.sorted()?;
        // The instance being read: its key, its members and the ends of its parts without a
        // begin.
        let mut key: Option<(i64, i64)> = None;
        let mut group: Option<Instance> = None;
        let mut loose: Vec<(i64, i64)> = Vec::new();
        loop {
            let part = parts.next()?;
            if let Some((comm, instance)) = key
                && part.map(|p| (p.comm, p.instance)) != key
            {
                if let Some(g) = group.take() {
                    instance_waits(comm, instance, g, &mut loose, &mut each, &mut waited)?;
                }
                loose.clear();
            }
            let Some(p) = part else { break };
            key = Some((p.comm, p.instance));
            let Some(begin) = p.begin else {
                loose.extend(p.end.map(|e| (p.rank, e)));
                continue;
            };
            let g = group.get_or_insert_with(|| Instance {
                op: ops[p.op as usize].clone(),
                root: p.root,
                ..Instance::default()
            });
            g.members.push((p.rank, begin));
            g.call_starts.push(p.call_start);
            if let Some(e) = p.end {
                g.ends.push((p.rank, e));
            }
        }
        Ok(unclassified.len())
    }
}

/// The waits of collective instance (`comm`, `instance`), each handed to `each`; when someone
/// waited, `waited` is handed the end of every part (its members' and `loose`'s). The first
/// error either gives is the answer.
fn instance_waits(
    comm: i64,
    instance: i64,
    mut g: Instance,
    loose: &mut Vec<(i64, i64)>,
    each: &mut impl FnMut(Wait) -> Result<()>,
    waited: &mut impl FnMut(i64, i64, &[(i64, i64)]) -> Result<()>,
) -> Result<()> {
    if is_neighbourhood(&g.op) {
        return Ok(());
    }
    let mut any = false;
    let ends: HashMap<i64, i64> = g.ends.iter().copied().collect();
    // Every member's wait starts when it entered the call, when all of them say.
    if g.call_starts.iter().all(Option::is_some) {
        for (m, c) in g.members.iter_mut().zip(&g.call_starts) {
            m.1 = c.expect("every member has a call start");
        }
    }
    let pattern = pattern_of(&g.op, g.root.is_some());
    // Until `until`, and at most until the waiter's own call ends.
    let mut failed = Ok(());
    let mut wait = |rank: i64, begin: i64, until: i64, partner: i64| {
        let until = ends.get(&rank).map_or(until, |&e| until.min(e));
        if until > begin && failed.is_ok() {
            any = true;
            failed = each(Wait {
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
    waits_of_instance(&g, pattern, &mut wait);
    failed?;
    if any {
        g.ends.append(loose);
        waited(comm, instance, &g.ends)?;
    }
    Ok(())
}

/// The waits of one instance by its pattern, each handed to `wait` as (rank, begin, until,
/// partner).
fn waits_of_instance(g: &Instance, pattern: &str, wait: &mut impl FnMut(i64, i64, i64, i64)) {
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

fn output_schema() -> SchemaRef {
    WAIT_STATES.schema()
}

/// One row of `wait_states`: a wait, the thread it is in and its call path.
struct Row<'a> {
    wait: Wait,
    thread: Option<i64>,
    partner_thread: Option<i64>,
    path: Option<&'a str>,
}

/// The rows `rows`.
fn batch_of(rows: &[Row], schema: &SchemaRef) -> Result<RecordBatch> {
    let int =
        |f: fn(&Wait) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| f(&r.wait)))) };
    let opt = |f: fn(&Wait) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(rows.iter().map(|r| f(&r.wait)).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        int(|w| w.rank),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.thread).collect::<Vec<_>>())),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.wait.pattern))),
        int(|w| w.wait_ns),
        int(|w| w.ts),
        opt(|w| w.msg_id),
        opt(|w| w.comm),
        opt(|w| w.instance),
        opt(|w| w.partner),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.partner_thread).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.path).collect::<Vec<_>>())),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Working data per byte of a chunk of calls when the threads' waits are swept with them
/// (`WaitPaths::working_ratio`).
const THREADS_WORKING_RATIO: usize = 16;

/// Rows per batch of the waits given without call paths.
const BATCH_ROWS: usize = 1 << 16;

/// Folds the messages (input 1), the collectives (input 2) and, for `wait_states`, the thread
/// records (input 3, events) and regions (input 4) into their waits, then makes the mapper of
/// the calls with `then`: the first step of `wait_states`, `critical_path`,
/// `critical_path_profile` and `delay_costs`.
pub(crate) struct FoldWaits<F> {
    messages: MessageWaits,
    collectives: CollectiveWaits,
    threads: ThreadRecords,
    then: F,
}

impl<F> FoldWaits<F>
where
    F: FnOnce(MessageWaits, CollectiveWaits, ThreadRecords) -> Result<Box<dyn Mapper>> + Send + 'static,
{
    /// The folder of the waits, sorting in runs of `run_bytes` (`crate::external_sort::run_bytes`).
    pub(crate) fn boxed(run_bytes: usize, then: F) -> Box<dyn Folder> {
        Box::new(FoldWaits {
            messages: MessageWaits::new(run_bytes),
            collectives: CollectiveWaits::new(run_bytes),
            threads: ThreadRecords::default(),
            then,
        })
    }
}

impl<F> Folder for FoldWaits<F>
where
    F: FnOnce(MessageWaits, CollectiveWaits, ThreadRecords) -> Result<Box<dyn Mapper>> + Send,
{
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 => self.messages.fold(batch),
            2 => self.collectives.fold(batch),
            _ => self.threads.fold_input(input, batch),
        }
    }

    fn held_bytes(&self) -> usize {
        self.messages.held_bytes() + self.collectives.held_bytes() + self.threads.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldWaits { messages, collectives, threads, then } = *self;
        then(messages, collectives, threads)
    }
}

/// `wait_states`' mapper of the calls, once the waits are folded.
fn wait_paths(
    messages: MessageWaits,
    collectives: CollectiveWaits,
    threads: ThreadRecords,
    notices: Option<commdb_catalog::wallclock::Notices>,
    schema: SchemaRef,
) -> Result<Box<dyn Mapper>> {
    let (collective, unclassified) = collectives.sorted()?;
    notice_unclassified(notices.as_ref(), unclassified);
    let waits = stream::WaitStream::new(messages.stream()?, collective)?;
    Ok(Box::new(WaitPaths { waits, threads, schema }))
}

/// Says how many neighbourhood collective instances were left out, when any were.
fn notice_unclassified(notices: Option<&commdb_catalog::wallclock::Notices>, unclassified: usize) {
    if let (Some(n), true) = (notices, unclassified > 0) {
        n.push(format!(
            "wait_states: {unclassified} neighbourhood collective instance(s) are not classified: their waits depend on the communicator's topology, which the trace does not record"
        ));
    }
}

/// The mapper of the calls that gives `waits` their threads and call paths, and the threads'
/// own waits.
fn paths_of(waits: stream::WaitStream, threads: ThreadRecords, schema: SchemaRef) -> Result<Box<dyn Mapper>> {
    Ok(Box::new(WaitPaths { waits, threads, schema }))
}

/// Gives the waits in rank order, each with the thread and call path of the call it began in,
/// and the threads' waits of each rank: the calls come a chunk of whole ranks at a time
/// (commdb_analysis::by_rank), and the waits of the ranks up to the chunk's last go out with it,
/// read from the stream of waits as they are needed.
struct WaitPaths {
    waits: stream::WaitStream,
    threads: ThreadRecords,
    schema: SchemaRef,
}

impl Mapper for WaitPaths {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let mut names = crate::sweeps::call_sweep::Names::default();
        let streams = crate::sweeps::call_sweep::streams_named(batches, "wait_states", &mut names)?;
        let Some(last) = streams.iter().map(|((rank, _), _)| *rank).max() else {
            return Ok(RecordBatch::new_empty(self.schema.clone()));
        };
        let mut paths = crate::sweeps::call_paths::Paths::default();
        let mut ranks: BTreeMap<i64, Vec<(i64, Vec<crate::sweeps::call_sweep::Call>)>> = BTreeMap::new();
        for ((rank, thread), calls) in streams {
            ranks.entry(rank).or_default().push((thread, calls));
        }
        let ranks: BTreeMap<i64, Vec<ThreadCalls>> = ranks
            .into_iter()
            .map(|(rank, streams)| (rank, rank_threads(rank, streams, &self.threads, &names, &mut paths)))
            .collect();
        let mut these = Vec::new();
        self.waits.through(last, &mut these)?;
        let mut thread_waits = Vec::new();
        if !self.threads.is_empty() {
            let constructs = self.threads.constructs(&names);
            for (&rank, threads) in &ranks {
                thread_waits.extend(rank_waits(rank, threads, &self.threads, &constructs));
            }
        }
        let name = |p: u32| crate::sweeps::stretches::path_name(&paths, p);
        let mut rows: Vec<Row> = Vec::with_capacity(these.len() + thread_waits.len());
        for w in these {
            let threads = ranks.get(&w.rank).map(Vec::as_slice).unwrap_or(&[]);
            // The thread whose MPI call the wait is in; else the first with a call then.
            let at = |t: &ThreadCalls| stretch_at(&t.stretches, w.ts).map(|s| (t.thread, s.path));
            let mpi = threads.iter().find(|t| stretch_at(&t.stretches, w.ts).is_some_and(|s| s.call_start.is_some()));
            let (thread, path) = match mpi.and_then(at).or_else(|| threads.iter().find_map(at)) {
                Some((thread, path)) => (Some(thread), name(path)),
                None => (threads.first().map(|t| t.thread), None),
            };
            rows.push(Row { wait: w, thread, partner_thread: None, path });
        }
        for t in thread_waits {
            let wait = Wait {
                rank: t.rank,
                pattern: t.pattern,
                wait_ns: t.wait_ns,
                ts: t.ts,
                msg_id: None,
                comm: None,
                instance: t.instance,
                partner: None,
            };
            rows.push(Row { wait, thread: Some(t.thread), partner_thread: t.partner_thread, path: name(t.path) });
        }
        rows.sort_by_key(|r| (r.wait.rank, r.wait.ts, r.thread, r.wait.pattern, r.wait.msg_id, r.wait.instance));
        batch_of(&rows, &self.schema)
    }

    /// The stream's buffers (the threads' records stay counted by the fold's reservation).
    fn held_bytes(&self) -> usize {
        self.waits.held_bytes()
    }

    /// With thread records, a chunk's every thread is swept with its stretches, its waits and
    /// the rows of both: at 1,024 ranks x 8 threads they came to about 16 times the chunk's
    /// calls (1.2 GB for a 64 MB chunk, measured with heaptrack).
    fn working_ratio(&self) -> usize {
        if self.threads.is_empty() { 1 } else { THREADS_WORKING_RATIO }
    }

    /// The waits of the ranks no chunk of calls reached, a batch at a time.
    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let mut rows = Vec::new();
        while rows.len() < BATCH_ROWS {
            let Some(wait) = self.waits.next()? else { break };
            rows.push(Row { wait, thread: None, partner_thread: None, path: None });
        }
        if rows.is_empty() { Ok(None) } else { batch_of(&rows, &self.schema).map(Some) }
    }
}

/// The relation `table` beside `rel`: `given` when given; else the `table` of the trace `rel`
/// reads, or the default `table`; None when there is none.
pub(crate) fn beside(
    given: Option<Relation>,
    session: &dyn datafusion::catalog::Session,
    rel: &Relation,
    table: &str,
) -> Result<Option<Relation>> {
    if given.is_some() {
        return Ok(given);
    }
    if let Some(schema) = commdb_analysis::relation::trace_schema(session, rel)
        && let Ok(found) = commdb_analysis::relation::trace_table(session, "wait_states", &schema, table)
    {
        return Ok(Some(found));
    }
    Ok(commdb_analysis::relation::resolve(session, "wait_states", table).ok())
}

arguments! {
    struct WaitArgs(WAIT_STATES) {
        rel: Relation,
        collectives: Relation,
        calls: Option<Relation>,
        events: Option<Relation>,
        regions: Option<Relation>,
    }
}

/// A view of `sql` for `function`, its rows in rank order when `ordered`, as a relation named
/// `name`.
fn view(a: &Args, function: &str, name: &str, sql: String, ordered: bool) -> Result<Relation> {
    let view = commdb_analysis::views::sql_view(a.session, function, sql)?;
    let provider: Arc<dyn TableProvider> =
        if ordered { Arc::new(commdb_analysis::ordered::OrderedView::new(view, &["rank"])) } else { Arc::new(view) };
    Ok(Relation { reference: name.into(), provider })
}

/// `'a', 'b'` of `list`, for an IN list.
fn quoted(list: &[&str]) -> String {
    list.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", ")
}

fn wait_states(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let WaitArgs { rel, collectives: colls, calls, events, regions } = WaitArgs::read(a)?;
    let mi = rel.columns("wait_states", &MESSAGE_COLUMNS)?;
    let ci = collective_columns(&colls, "wait_states")?;
    let calls = beside(calls, a.session, &rel, "calls")?;
    let events = beside(events, a.session, &rel, "events")?;
    let regions = beside(regions, a.session, &rel, "regions")?;
    let out = output_schema();
    let notices = a.session.config().get_extension::<commdb_catalog::wallclock::Notices>().map(|n| (*n).clone());
    let call_columns = [
        ("rank", DataType::Int64),
        ("thread", DataType::Int64),
        ("region", DataType::Utf8),
        ("start_ts", DataType::Int64),
        ("end_ts", DataType::Int64),
    ];
    // Every call is swept, whether the query reads path and thread or not: reading only the
    // threads' calls took a join of every call with the regions, which cost more than the
    // sweep (at 200 M events, 8.2 s and 2.4 GB against 7.2 s and 1.6 GB) and on a cluster
    // sorted every call by region.
    let calls = match calls {
        Some(calls) => calls,
        None => {
            if let Some(n) = &notices {
                n.push(
                    "wait_states: no calls beside rel, so path and thread are NULL; give calls => '...'".to_string(),
                );
            }
            empty(&call_columns)?
        }
    };
    let ki = calls.columns("wait_states", &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let (events, regions) = thread_inputs(a, "wait_states", events, regions, &THREAD_KINDS)?;
    let schema = out.clone();
    let paths = out.clone();
    let run_bytes = crate::external_sort::run_bytes(a.session);
    let spread = spread::spread(
        notices.clone(),
        true,
        false,
        run_bytes,
        Arc::new(move |waits, threads| paths_of(waits, threads, paths.clone())),
    );
    let start: StartFold = Arc::new(move || {
        let (notices, schema) = (notices.clone(), schema.clone());
        FoldWaits::boxed(run_bytes, move |messages, collectives, threads| {
            wait_paths(messages, collectives, threads, notices, schema)
        })
    });
    let inputs = vec![(calls, Some(ki)), (rel, Some(mi)), (colls, Some(ci)), (events, None), (regions, None)];
    Ok(Arc::new(Derived::folded(out, inputs, Main::ByRank(0), start).spreading(spread)))
}

/// The inputs of the threads' analyses: the thread records of `events` of `kinds` (forks,
/// joins, locks) and the OpenMP and Pthreads regions of `regions`, as the rows `ThreadRecords`
/// folds; empty relations for those not given.
pub(crate) fn thread_inputs(
    a: &Args,
    function: &str,
    events: Option<Relation>,
    regions: Option<Relation>,
    kinds: &[&str],
) -> Result<(Relation, Relation)> {
    let regions = match regions {
        Some(r) => {
            r.columns(function, &["name", "paradigm", "role"])?;
            let r = r.reference.to_quoted_string();
            let sql = format!("SELECT name, paradigm, role FROM {r} WHERE paradigm IN ({})", quoted(&THREAD_PARADIGMS));
            view(a, function, "thread_regions", sql, false)?
        }
        None => empty(&[("name", DataType::Utf8), ("paradigm", DataType::Utf8), ("role", DataType::Utf8)])?,
    };
    let events = match events {
        Some(e) => {
            // Only locks need their order (tag) and id (request): forks and joins leave both
            // columns unread.
            let locks = kinds.iter().any(|k| k.contains("lock"));
            let wanted: &[&str] = if locks {
                &["rank", "thread", "ts", "kind", "tag", "request"]
            } else {
                &["rank", "thread", "ts", "kind"]
            };
            e.columns(function, wanted)?;
            let e = e.reference.to_quoted_string();
            let lock_columns =
                if locks { "tag, request" } else { "CAST(NULL AS BIGINT) AS tag, CAST(NULL AS BIGINT) AS request" };
            let sql =
                format!("SELECT rank, thread, ts, kind, {lock_columns} FROM {e} WHERE kind IN ({})", quoted(kinds));
            view(a, function, "thread_events", sql, false)?
        }
        None => empty(&[
            ("rank", DataType::Int64),
            ("thread", DataType::Int64),
            ("ts", DataType::Int64),
            ("kind", DataType::Utf8),
            ("tag", DataType::Int64),
            ("request", DataType::Int64),
        ])?,
    };
    Ok((events, regions))
}

/// An empty relation with `columns`, for a relation `wait_states` has none of.
fn empty(columns: &[(&str, DataType)]) -> Result<commdb_analysis::relation::Relation> {
    let schema =
        Arc::new(Schema::new(columns.iter().map(|(n, t)| Field::new(*n, t.clone(), true)).collect::<Vec<_>>()));
    let table = datafusion::datasource::MemTable::try_new(schema, vec![vec![]])?;
    Ok(commdb_analysis::relation::Relation { reference: "no_rows".into(), provider: Arc::new(table) })
}
