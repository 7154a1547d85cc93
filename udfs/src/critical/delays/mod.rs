//! Root causes of waiting: `delay_costs([rel => 'calls'], messages => 'messages',
//! collectives => 'collectives')`, after Scalasca's delay analysis (Böhme, Geimer, Wolf, Arnold,
//! "Identifying the root causes of wait states in large-scale parallel applications", ICPP
//! 2010).
//!
//! A wait state (one row of `wait_states`) of rank w on rank d has a synchronisation interval:
//! from the previous time the two synchronised to the wait, on w until the wait began and on d
//! until it arrived (the wait's end). As in Scalasca, whose synchronisation points are its wait
//! states, two ranks synchronise where one waited for the other: at a late sender when the send
//! call is left, at a late receiver when the wait ends (the same instant on both sides; the
//! receive's time beyond the send is its completion and counts), and at a collective instance
//! in which some member waited, when each member leaves it. A message or collective that made
//! no one wait synchronises nothing: an eager message's receiver may be far ahead of its
//! sender. The delay is what d did more than w in that interval: per call path, its exclusive
//! time beyond w's, and its own waiting beyond w's.
//!
//! As in Scalasca's rule (its Delay.MPI pattern), with excess E = the sum of d's regions'
//! excess time plus its excess waiting: the wait's own time `rwait` goes to d's regions as
//! excess x min(rwait / E, 1), the direct (short-term) cost, so a region is never charged more
//! than the time it took beyond the waiter's; what the excess does not explain (E < rwait: d did
//! no more than w since they synchronised, as when no earlier synchronisation is known and the
//! interval starts at each rank's first call) is `unexplained`. What the wait received from the waits it caused (`rcost`) goes
//! to d's regions as excess x rcost / E, the propagated (long-term) cost. The share of d's
//! excess waiting of both is handed on to d's own waits in the interval, in proportion to
//! their time there, and from them to their causes in turn.
//!
//! commdb departs from Scalasca in one point (docs/departures.md has the worked example): d's
//! waiting counts beyond w's own waiting in the interval, as its regions' time does, where
//! Scalasca counts all of d's waiting. When both waited for a third rank, only the difference
//! delayed w; the counterfactual run without those waits gives commdb's split.
//!
//! Waits are taken in decreasing order of their end, so a wait has received everything handed
//! to it before it hands on; of waits that end at the same instant (a chain of late senders
//! whose messages leave at once), one that hands on to another comes first. The costs of all
//! regions, and of `unexplained` waiting (rank and region NULL), add up to the total waiting.
//!
//! What a wait finds in its interval does not depend on the other waits' costs, so the
//! intervals of a batch of waits are measured by all threads at once, location by location
//! (`measure`: each thread reads the stretches through its own reader,
//! [`crate::critical::stretch_store`]), and the costs are then handed on wait by wait in the
//! order above, which keeps the answer to the last digit. The waits
//! themselves stay out of memory, put in that order in scratch files and read back a batch at a
//! time (`order`); what is held per wait is its place in its locations' lists (`rank_waits`)
//! and what it has received.
//!
//! On a distributed engine the analysis runs as steps of its own (`steps`): each wait's
//! interval found once, each side of each wait measured by the task that holds its rank's
//! calls (`sides`), and the costs handed on in one task over the sides (`handing`), by the
//! same rule in the same order.
//!
//! Regions are the innermost regions of each thread (as in `critical_path`), told apart by
//! their call path as Scalasca's are ([`crate::sweeps::call_paths`]): d's time in a call path is compared
//! with w's in the same call path; time spent waiting inside an MPI call counts as waiting, not
//! as the call's region. An MPI wait is the waiting thread's whose MPI call it is in, and waits
//! for the thread of the other rank whose MPI call was under way when the wait ended.
//!
//! The threads of a rank wait for each other too, as Scalasca's hybrid delay analysis
//! (Delay.OMP.pattern) has them (`crate::critical::omp_handovers`): at an OpenMP barrier a member waits for
//! the last to enter, in the interval since their previous barrier in the parallel region (or
//! the fork), so the last thread's extra work there is the cause (Scalasca's OpenMP barrier
//! delay costs); while the master runs serially each other team thread idles, and the master's
//! work in that serial run is the cause (its idleness delay costs, the master's time there
//! counted once per idle thread), its waiting there handed on to the MPI waits it holds.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::critical::PATH_PARAMS;
use crate::critical::stretch_store::{StretchReader, StretchStore};
use crate::critical::stretch_store::{Swept, location, rank_thread};
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::args::Args;
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::plan::Main;
use commdb_analysis::stream::{Mapper, StartFold};
use commdb_catalog::fast_hash::{FastMap, FastSet};

mod collective_ends;
mod handing;
mod interval_rows;
mod measure;
mod order;
mod rank_waits;
mod side_rows;
mod sides;
mod steps;

use collective_ends::{EndsBuilder, RankEnds};
use rank_waits::RankWaits;

pub const DELAY_COSTS: Function = Function {
    name: "delay_costs",
    params: PATH_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, "the rank whose extra work caused waiting (NULL: waiting nothing explains)"),
        col("thread", int64, "the thread of that rank (NULL with rank)"),
        col(
            "region",
            text,
            "the region of that work (NULL: time no region covers, or, with rank NULL, the unexplained rest)",
        ),
        col("path", text, "the call path to that region, as call_tree gives it (NULL as region)"),
        col("cost_ns", float64, "waiting it caused: direct_ns + propagated_ns").never_null(),
        col("direct_ns", float64, "waits it caused directly").never_null(),
        col("propagated_ns", float64, "waits it caused through chains of waits").never_null(),
    ]),
    description: "the root causes of waiting (Scalasca's delay costs): every wait's time given to the regions where the rank waited for did more than the waiter since they last synchronised (direct), and through chains of waits to their causes (propagated); rank and region NULL for waiting nothing explains; the costs add up to all waiting",
    make: Make::Table(plan_delay_costs),
};
use crate::spill::{BUFFER as SPILL_BUFFER, Spill};
use crate::waits::{CollectiveWaits, FoldWaits, MessageWaits, Wait};

/// How far back among a pair's messages, or a rank's collectives, the previous common one is
/// looked for.
const COLLECTIVE_LOOKBACK: usize = 256;

/// One wait as the analysis reads it: the waiting and the waited-for location
/// ([`crate::critical::stretch_store::location`]), the waiting, and when the two last synchronised if known
/// without a search (the threads' waits for each other).
#[derive(Debug, Clone, Copy)]
pub(super) struct W {
    pub(super) waiter: i64,
    pub(super) delayer: i64,
    pub(super) start: i64,
    pub(super) end: i64,
    /// [waiter's, delayer's], or NO_SYNC.
    pub(super) since: [i64; 2],
    /// The waiter and the `waiters` - 1 threads after it wait alike (the idle threads of a
    /// serial run, `crate::critical::omp_handovers`): one wait stands for them all.
    pub(super) waiters: u32,
}

impl W {
    /// The order the costs are handed on in: the latest end first (a wait hands on only to
    /// waits that end no later), then by every field, so that it is the same in every task;
    /// ties of end are then put in `handing_order_within_ties`.
    pub(super) fn handing_order(&self) -> HandingOrder {
        let w = self;
        (std::cmp::Reverse(w.end), std::cmp::Reverse(w.start), w.waiter, w.delayer, w.since, w.waiters)
    }

    /// A wait of `rank`'s threads for each other, between its locations.
    pub(super) fn of_threads(rank: i64, w: &crate::critical::omp_handovers::OmpWait) -> W {
        W {
            waiter: location(rank, w.thread),
            delayer: location(rank, w.delayer),
            start: w.start,
            end: w.end,
            since: [w.since.0, w.since.1],
            waiters: w.threads,
        }
    }
}

/// `W::handing_order`'s key.
pub(super) type HandingOrder = (std::cmp::Reverse<i64>, std::cmp::Reverse<i64>, i64, i64, [i64; 2], u32);

/// Items kept in blocks of a fixed size: growing never copies what is held, nor holds room for
/// twice as many (the waits of a part, tens of millions at thousands of ranks).
#[derive(Debug)]
pub(super) struct Blocks<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Self {
        Blocks { blocks: Vec::new(), len: 0 }
    }
}

impl<T> Blocks<T> {
    /// Items a block holds.
    pub(super) const SIZE: usize = 1 << 16;

    pub(super) fn push(&mut self, item: T) {
        if self.blocks.last().is_none_or(|b| b.len() == Self::SIZE) {
            self.blocks.push(Vec::with_capacity(Self::SIZE));
        }
        if let Some(block) = self.blocks.last_mut() {
            block.push(item);
            self.len += 1;
        }
    }

    pub(super) fn held_bytes(&self) -> usize {
        self.blocks.len() * Self::SIZE * std::mem::size_of::<T>()
    }

    /// Every item in one list with room for `more`, each block let go once copied.
    pub(super) fn into_vec(self, more: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len + more);
        for block in self.blocks {
            out.extend(block);
        }
        out
    }
}

/// The `since` of a wait whose synchronisation is searched ([`crate::critical::delays::SyncPoints`]).
pub(super) const NO_SYNC: [i64; 2] = [i64::MIN; 2];

/// When two ranks last synchronised: per pair, the instants their message waits brought them
/// together; per rank, its ends of the collectives in which someone waited.
#[derive(Debug, Default)]
pub(super) struct SyncPoints {
    /// Per pair of ranks (the lower first): the instants their messages synchronised them,
    /// the same on both sides, in order.
    messages: FastMap<(i64, i64), Vec<i64>>,
    /// Per rank: its ends of the collectives in which someone waited, as they are added, a
    /// few bytes an end ([`collective_ends`]) ...
    folding: FastMap<i64, EndsBuilder>,
    /// ... and once sealed, in order of their end, searched by time and by instance.
    collectives: FastMap<i64, RankEnds>,
    /// The instances (comm, instance) in which someone waited, by id (an index, fewer than
    /// 2^32: `waited_in` refuses more), and the id of each.
    instances: Vec<(i64, i64)>,
    instance_ids: FastMap<(i64, i64), u32>,
}

impl SyncPoints {
    /// The synchronisation points of the messages, after Scalasca's: its wait states. A wait brings two ranks'
    /// times together: a late sender at one instant, the same on both sides, when the send call
    /// is left (the receive's time beyond it is its completion, which counts); a late receiver
    /// when the wait ends; a collective instance in which some member waited, each member when
    /// it leaves the call. A message or collective that made no one wait synchronises nothing:
    /// the receiver of an eager message that arrived long before may be far ahead of its sender.
    ///
    /// `message_wait_left` is handed each message wait with when the send call of a late
    /// sender's message was left; the collectives in which someone waited are added with
    /// `waited_in`. This puts each pair's points in order once every message wait is handed.
    pub(super) fn sort_messages(&mut self) {
        for list in self.messages.values_mut() {
            list.sort_unstable();
        }
    }

    /// The synchronisation point of message wait `w` (see `sort_messages`; a collective's wait
    /// makes none here), its messages' list left unsorted; `left` gives when the send call of
    /// each late sender's message was left.
    pub(super) fn message_wait(&mut self, w: &Wait, left: &HashMap<i64, i64>) {
        self.message_wait_left(w, w.msg_id.and_then(|m| left.get(&m).copied()));
    }

    /// As `message_wait`, `left` when the send call of a late sender's message was left.
    pub(super) fn message_wait_left(&mut self, w: &Wait, left: Option<i64>) {
        let end = w.ts + w.wait_ns;
        match (w.comm, w.instance, w.partner) {
            (Some(_), Some(_), _) => {}
            (_, _, Some(p)) if p != w.rank => {
                let t = match (w.pattern, left) {
                    ("late_sender", Some(t)) => t.max(end),
                    _ => end,
                };
                self.messages.entry((w.rank.min(p), w.rank.max(p))).or_default().push(t);
            }
            _ => {}
        }
    }

    /// Bytes held: 8 a synchronisation of two ranks' messages, a few a collective's end on a
    /// rank, 40 an instance, and a list per pair or rank.
    pub(super) fn held_bytes(&self) -> usize {
        let messages: usize = self.messages.values().map(|l| 8 * l.capacity() + 64).sum();
        let folding: usize = self.folding.values().map(|l| l.held_bytes() + 16).sum();
        let collectives: usize = self.collectives.values().map(|l| l.held_bytes() + 16).sum();
        messages + folding + collectives + 40 * self.instances.capacity()
    }

    /// Collective `(c, k)`, in which someone waited, synchronises its members when each leaves
    /// it (`ends`: rank, end).
    pub(super) fn waited_in(&mut self, c: i64, k: i64, ends: &[(i64, i64)]) -> Result<()> {
        let id = match self.instance_ids.get(&(c, k)) {
            Some(&id) => id,
            None => {
                let Ok(id) = u32::try_from(self.instances.len()) else {
                    return exec_err!(
                        "delay_costs: more than {} collective instances in which someone waited; at most that many are traced back at once",
                        u32::MAX
                    );
                };
                self.instances.push((c, k));
                self.instance_ids.insert((c, k), id);
                id
            }
        };
        for &(r, t) in ends {
            self.folding.entry(r).or_default().push(id, t);
        }
        Ok(())
    }

    /// Every collective has been added: each rank's in order of their end.
    pub(super) fn seal(&mut self) -> Result<()> {
        // Only the ids are looked up from now on.
        self.instance_ids = FastMap::default();
        // The instances numbered anew in order of (comm, instance), whatever the order they came
        // in: ends alike then go in that order, which the search back meets first, and a rank's
        // ids rise with its ends as its collectives of one communicator follow one another.
        let mut order: Vec<u32> = (0..self.instances.len() as u32).collect();
        order.sort_unstable_by_key(|&i| self.instances[i as usize]);
        let mut renumbered = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            renumbered[old as usize] = new as u32;
        }
        self.instances = order.iter().map(|&i| self.instances[i as usize]).collect();
        let folding: Vec<(i64, EndsBuilder)> = std::mem::take(&mut self.folding).into_iter().collect();
        let sealed: Vec<(i64, RankEnds)> = {
            use rayon::prelude::*;
            let renumbered = &renumbered;
            folding
                .into_par_iter()
                .map(|(r, list)| Ok((r, list.seal(|id| renumbered[id as usize])?)))
                .collect::<Result<_>>()?
        };
        self.collectives.extend(sealed);
        for list in self.messages.values_mut() {
            list.shrink_to_fit();
        }
        Ok(())
    }

    /// The start of the synchronisation interval of `w` waiting from `w_until` on `d` arriving
    /// at `d_until`: on each side the time of their latest earlier synchronisation, if any.
    pub(super) fn previous(&self, w: i64, w_until: i64, d: i64, d_until: i64) -> Option<(i64, i64)> {
        let mut best: Option<(i64, i64)> = None;
        let mut consider = |tw: i64, td: i64| {
            if tw <= w_until && td <= d_until && best.is_none_or(|(bw, _)| tw > bw) {
                best = Some((tw, td));
            }
        };
        if let Some(list) = self.messages.get(&(w.min(d), w.max(d))) {
            // Latest first on w's side; the first that is also before d's arrival is it.
            let k = list.partition_point(|&t| t <= w_until);
            if let Some(&t) = list[..k].iter().rev().take(COLLECTIVE_LOOKBACK).find(|&&t| t <= d_until) {
                consider(t, t);
            }
        }
        if let Some(list) = self.collectives.get(&w) {
            let theirs = self.collectives.get(&d);
            for (tw, id) in list.back_until(w_until).take(COLLECTIVE_LOOKBACK) {
                if let Some(td) = theirs.and_then(|l| l.end_of(id))
                    && td <= d_until
                {
                    consider(tw, td);
                    break;
                }
            }
        }
        best
    }
}

/// A rank's time in `[a, b)`: exclusive time per call path (left in `scratch.paths`), with the
/// time it spent waiting (its waits overlapping the interval, returned) taken out of the call
/// path it waited in and counted apart.
pub(super) fn time_in(
    store: &mut StretchReader,
    rank: i64,
    waits: &RankWaits,
    a: i64,
    b: i64,
    scratch: &mut Scratch,
) -> Result<i64> {
    let Scratch { paths, walked } = scratch;
    paths.0.clear();
    // The stretches walked (their end and call path), which also tell the call path of every
    // wait that starts in the interval.
    walked.clear();
    store.each_after(rank, a, |s| {
        walked.push((s.to, s.path));
        if s.from >= b {
            return false;
        }
        paths.add(s.path, s.to.min(b) - s.from.max(a));
        true
    })?;
    let mut waiting = 0;
    for w in waits.overlapping(a, b) {
        let overlap = w.end.min(b) - w.start.max(a);
        if overlap <= 0 {
            continue;
        }
        waiting += overlap;
        // The call path of the first stretch that ends after the wait's start.
        let mut path = None;
        if w.start >= a {
            path = walked.get(walked.partition_point(|s| s.0 <= w.start)).map(|s| s.1);
        } else {
            store.each_after(rank, w.start, |s| {
                path = Some(s.path);
                false
            })?;
        }
        if let Some(t) = path.and_then(|p| paths.get_mut(p)) {
            *t -= overlap.min(*t);
        }
    }
    Ok(waiting)
}

/// The buffers that `time_in` fills, kept from one interval to the next.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The time per call path of the last interval.
    pub(super) paths: PathTimes,
    walked: Vec<(i64, u32)>,
}

/// Time per call path in an interval: the few paths of an interval searched in a list, which
/// is faster than hashing them (a wait's interval holds an iteration or so of a rank's calls).
#[derive(Debug, Default)]
pub(super) struct PathTimes(pub(super) Vec<(u32, i64)>);

impl PathTimes {
    fn add(&mut self, path: u32, t: i64) {
        match self.get_mut(path) {
            Some(v) => *v += t,
            None => self.0.push((path, t)),
        }
    }

    fn get_mut(&mut self, path: u32) -> Option<&mut i64> {
        self.0.iter_mut().find(|(p, _)| *p == path).map(|(_, t)| t)
    }
}

/// The delayer's excess over the waiter in a wait's interval: its time per call path (`K`)
/// beyond the waiter's in the same call path, in the delayer's order and only where it is
/// more, and its waiting beyond the waiter's.
pub(super) fn excess_of<K: Copy + PartialEq>(
    delayer: &[(K, i64)],
    waiter: &[(K, i64)],
    delayer_waiting: i64,
    waiter_waiting: i64,
) -> (Vec<(K, i64)>, i64) {
    let paths = delayer
        .iter()
        .map(|&(key, t)| (key, (t - waiter.iter().find(|p| p.0 == key).map_or(0, |p| p.1)).max(0)))
        .filter(|p| p.1 > 0)
        .collect();
    (paths, (delayer_waiting - waiter_waiting).max(0))
}

/// The costs given so far: per (delayer's location, call path `K`) direct and propagated,
/// and the waiting nothing explains.
pub(super) struct Ledger<K> {
    pub(super) costs: FastMap<(i64, K), (f64, f64)>,
    pub(super) unexplained: f64,
}

impl<K> Default for Ledger<K> {
    fn default() -> Self {
        Ledger { costs: FastMap::default(), unexplained: 0.0 }
    }
}

impl<K: Copy + Eq + std::hash::Hash> Ledger<K> {
    /// Give wait `w`, which received `incoming` from the waits it caused, to the delayer's
    /// excess (`excess`: per call path, and its waiting; None: nothing explains the wait); the
    /// share of the delayer's waiting goes to its waits `theirs()` (each with its time in the
    /// interval) through `hand`.
    pub(super) fn give<J>(
        &mut self,
        w: &W,
        incoming: f64,
        excess: Option<(&[(K, f64)], f64)>,
        theirs: impl FnOnce() -> Vec<(J, f64)>,
        mut hand: impl FnMut(J, f64),
    ) {
        // A wait standing for n alike: its own time counts n times; what it received, once.
        let (own, n) = ((w.end - w.start) as f64, f64::from(w.waiters));
        let total = n * own + incoming;
        let Some((paths, waiting)) = excess else {
            self.unexplained += total;
            return;
        };
        let sum: f64 = paths.iter().map(|e| e.1).sum::<f64>() + waiting;
        if sum <= 0.0 {
            self.unexplained += total;
            return;
        }
        // Short-term: each unit of excess explains at most one unit of the wait.
        let short = (own / sum).min(1.0);
        self.unexplained += n * (own - short * sum);
        for &(path, e) in paths {
            let c = self.costs.entry((w.delayer, path)).or_default();
            c.0 += n * e * short;
            c.1 += incoming * e / sum;
        }
        if waiting > 0.0 {
            // Hand on to the delayer's waits in its interval, by their time there.
            let handed = n * waiting * short + incoming * waiting / sum;
            let theirs = theirs();
            let weight: f64 = theirs.iter().map(|t| t.1).sum();
            if weight > 0.0 {
                for (j, o) in theirs {
                    hand(j, handed * o / weight);
                }
            } else {
                self.unexplained += handed;
            }
        }
    }
}

/// What a wait's interval says, before what it received from other waits is known: the
/// excess of the delayer per call path, its excess waiting, and the delayer's waits it would
/// hand on to (index, overlap). None: nothing explains the wait.
struct Excess {
    paths: Vec<(u32, f64)>,
    waiting: f64,
    theirs: Vec<(usize, f64)>,
}

/// Waits read from a scratch file at a time, and measured at a time on a distributed engine
/// (`sides`).
pub(super) const WAIT_BATCH: usize = 1 << 13;

fn delay_costs(store: &StretchStore, waits: order::InOrder, sync: &SyncPoints) -> Result<Ledger<u32>> {
    let order::InOrder { mut waits, len, by_location } = waits;
    let measure = measure::Measure { store, by_location: &by_location, sync };
    let threads = rayon::current_num_threads().max(1);
    let mut readers: Vec<StretchReader> = (0..threads).map(|_| store.reader()).collect::<Result<_>>()?;
    let mut incoming = vec![0.0f64; len];
    let mut ledger: Ledger<u32> = Ledger::default();
    let mut batch: Vec<W> = Vec::with_capacity(measure::MEASURE_BATCH);
    let mut from = 0;
    while from < len {
        commdb_catalog::interrupt::check("delay_costs")?;
        waits.next(&mut batch, measure::MEASURE_BATCH)?;
        if batch.is_empty() {
            return exec_err!("delay_costs: its scratch file of waits ended after {from} of {len}");
        }
        let to = from + batch.len();
        let measured = measure.batch(&mut readers, from, &batch)?;
        for ((i, w), excess) in (from..to).zip(&batch).zip(measured) {
            let received = incoming[i];
            let (excess, theirs) = match excess {
                Some(Excess { paths, waiting, theirs }) => (Some((paths, waiting)), theirs),
                None => (None, Vec::new()),
            };
            let excess = excess.as_ref().map(|(p, w)| (p.as_slice(), *w));
            ledger.give(w, received, excess, || theirs, |j, x| incoming[j] += x);
        }
        from = to;
    }
    Ok(ledger)
}

/// Reorder waits that end at the same instant (`list` sorted by end, latest first; `w` reads
/// an item's wait) so that a wait comes before the waits of its delayer among them, to which it
/// may hand on; waits in a cycle of such ties keep their order.
pub(super) fn handing_order_within_ties<T: Copy>(list: &mut [T], w: impl Fn(&T) -> &W) {
    let mut from = 0;
    while from < list.len() {
        let end = w(&list[from]).end;
        let to = from + list[from..].iter().take_while(|x| w(x).end == end).count();
        // Most ties hand nothing on among themselves (the members of an OpenMP barrier or of a
        // collective all wait for its last): a few are checked pair by pair, many against the
        // set of their waiters; those are left in their order, as Kahn's order would leave them.
        let hands_on = |group: &[T]| {
            if group.len() <= 32 {
                return group.iter().any(|a| group.iter().any(|b| w(a).delayer == w(b).waiter));
            }
            let waiters: FastSet<i64> = group.iter().map(|x| w(x).waiter).collect();
            group.iter().any(|x| waiters.contains(&w(x).delayer))
        };
        if to - from > 1 && hands_on(&list[from..to]) {
            let group = &mut list[from..to];
            // Kahn's order over edges a -> b when a's delayer is b's waiter.
            let mut of_waiter: FastMap<i64, Vec<usize>> = FastMap::default();
            for (k, x) in group.iter().enumerate() {
                of_waiter.entry(w(x).waiter).or_default().push(k);
            }
            let mut indegree = vec![0usize; group.len()];
            for x in group.iter() {
                for &k in of_waiter.get(&w(x).delayer).map_or(&[][..], Vec::as_slice) {
                    indegree[k] += 1;
                }
            }
            let mut ready: std::collections::BTreeSet<usize> = (0..group.len()).filter(|&k| indegree[k] == 0).collect();
            let mut order: Vec<usize> = Vec::with_capacity(group.len());
            while let Some(k) = ready.pop_first() {
                order.push(k);
                for &b in of_waiter.get(&w(&group[k]).delayer).map_or(&[][..], Vec::as_slice) {
                    indegree[b] -= 1;
                    if indegree[b] == 0 {
                        ready.insert(b);
                    }
                }
            }
            // Waits in a cycle: after the others, in their order.
            let placed: FastSet<usize> = order.iter().copied().collect();
            order.extend((0..group.len()).filter(|k| !placed.contains(k)));
            let reordered: Vec<T> = order.iter().map(|&k| group[k]).collect();
            group.copy_from_slice(&reordered);
        }
        from = to;
    }
}

/// One output row: (rank, thread), region, call path, cost, direct, propagated; unexplained
/// waiting has no rank, region or path.
pub(super) type Row<'a> = (Option<(i64, i64)>, Option<&'a str>, Option<&'a str>, f64, f64, f64);

fn plan_delay_costs(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let inputs = crate::critical::path_inputs(a)?;
    let out = a.schema();
    let schema = out.clone();
    let run_bytes = crate::external_sort::run_bytes(a.session);
    let start: StartFold = Arc::new(move || {
        let schema = schema.clone();
        FoldWaits::boxed(run_bytes, move |messages, collectives, records| {
            delay_sweep(messages, collectives, records, schema, run_bytes)
        })
    });
    // On a distributed engine, planned as steps so that no task reads the calls whole.
    let offload = inputs.len() > 5;
    let steps = steps::steps(out.clone(), offload, run_bytes);
    Ok(Arc::new(Derived::folded(out, inputs, Main::ByRank(0), start).in_steps(steps)?))
}

/// A wait between ranks as the costs read it (its threads found once the calls are swept).
pub(super) fn as_wait(w: &Wait) -> Option<W> {
    w.partner.map(|delayer| W {
        waiter: w.rank,
        delayer,
        start: w.ts,
        end: w.ts + w.wait_ns,
        since: NO_SYNC,
        waiters: 1,
    })
}

/// The sweep of the calls, once the messages and collectives are folded into their waits and
/// the thread records read: the waits (written to a scratch file) and the synchronisation
/// points they make.
fn delay_sweep(
    messages: MessageWaits,
    collectives: CollectiveWaits,
    records: ThreadRecords,
    schema: SchemaRef,
    run_bytes: usize,
) -> Result<Box<dyn Mapper>> {
    let mut sync = SyncPoints::default();
    // Between ranks: their threads are found once the calls are swept.
    let mut waits = Spill::<{ order::ROW }>::new("delay_costs")?;
    let mut message_waits = messages.stream()?;
    while let Some((w, left)) = message_waits.next()? {
        sync.message_wait_left(&w, left);
        if let Some(w) = as_wait(&w) {
            waits.push(w.row())?;
        }
    }
    drop(message_waits);
    sync.sort_messages();
    collectives.finish_each_with(
        |w| match as_wait(&w) {
            Some(w) => waits.push(w.row()),
            None => Ok(()),
        },
        |c, k, ends| sync.waited_in(c, k, ends),
    )?;
    sync.seal()?;
    Ok(Box::new(DelaySweep {
        between_ranks: waits.rows(),
        waits: Some(waits),
        threads: BTreeMap::new(),
        records,
        sync,
        swept: Swept::new("delay_costs")?,
        schema,
        run_bytes,
    }))
}

/// Sweeps the calls into every thread's stretches, then gives each wait's cost to its causes.
struct DelaySweep {
    /// The waits: first those between ranks (their waiter and delayer are ranks until the
    /// calls are swept), then the waits of threads for others of their rank, as they come.
    waits: Option<Spill<{ order::ROW }>>,
    /// How many of the waits are between ranks.
    between_ranks: u64,
    /// Each rank's threads, in order (the master first).
    threads: BTreeMap<i64, Vec<i64>>,
    records: ThreadRecords,
    sync: SyncPoints,
    swept: Swept,
    schema: SchemaRef,
    /// Bytes of a sorted run of the waits' order.
    run_bytes: usize,
}

impl Mapper for DelaySweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let (threads, threads_waits) = (&mut self.threads, &mut self.waits);
        let mut written = Ok(());
        self.swept.sweep_threads("delay_costs", batches, &self.records, |rank, list, omp, _| {
            threads.insert(rank, list.iter().map(|t| t.thread).collect());
            for w in omp {
                if written.is_ok()
                    && let Some(spill) = threads_waits.as_mut()
                {
                    written = spill.push(W::of_threads(rank, w).row());
                }
            }
        })?;
        written?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.swept.held_bytes() + SPILL_BUFFER + self.records.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.swept.finish()?;
        let Swept { store, names, paths } = &mut self.swept;
        // The waits are put in the order their costs are handed on, out of memory (tens of
        // millions at thousands of ranks): not a location's wait for itself, nor a wait for a
        // location without stretches.
        let mut gathered = order::Gathered::new(self.run_bytes);
        let mut rows = Vec::new();
        // Each wait between ranks is the thread's whose MPI call it is in, for the thread of the
        // other rank whose MPI call was under way when it ended.
        let none = Vec::new();
        if let Some(spill) = self.waits.take() {
            let mut read = spill.into_rows()?;
            let mut between_ranks = self.between_ranks;
            while read.next_rows(&mut rows, WAIT_BATCH)? > 0 {
                for &r in &rows {
                    let mut w = W::of_row(r)?;
                    if between_ranks > 0 {
                        between_ranks -= 1;
                        let a = self.threads.get(&w.waiter).unwrap_or(&none);
                        let b = self.threads.get(&w.delayer).unwrap_or(&none);
                        let waiter = location(w.waiter, store.mpi_thread(a, w.waiter, w.start)?);
                        let delayer = location(w.delayer, store.mpi_thread(b, w.delayer, w.end)?);
                        (w.waiter, w.delayer) = (waiter, delayer);
                    }
                    if w.delayer != w.waiter && store.contains(w.delayer) {
                        gathered.push(w)?;
                    }
                }
            }
        }
        drop(rows);
        store.forget_blocks();
        let Ledger { costs, unexplained } = delay_costs(store, gathered.in_order()?, &self.sync)?;
        let region = |path: u32| {
            let leaf = paths.leaf.get(path as usize).copied().unwrap_or(u32::MAX);
            crate::sweeps::stretches::region_name(&names.names, leaf)
        };
        let rows: Vec<Row> = costs
            .iter()
            .map(|(&(at, path), &(direct, propagated))| {
                let text = crate::sweeps::stretches::path_name(paths, path);
                (Some(rank_thread(at)), region(path), text, direct + propagated, direct, propagated)
            })
            .chain((unexplained > 0.0).then_some((None, None, None, unexplained, 0.0, 0.0)))
            .collect();
        Ok(vec![rows_batch(rows, &self.schema)?])
    }
}

/// The answer's rows, the greatest cost first.
pub(super) fn rows_batch(mut rows: Vec<Row>, schema: &SchemaRef) -> Result<RecordBatch> {
    rows.sort_by(|a, b| b.3.total_cmp(&a.3).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
    let float = |f: fn(&Row) -> f64| -> ArrayRef { Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.iter().map(|r| r.0.map(|l| l.0)).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.0.map(|l| l.1)).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
        float(|r| r.3),
        float(|r| r.4),
        float(|r| r.5),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_every_item_in_order_across_blocks() {
        let mut b: Blocks<u32> = Blocks::default();
        let n = 2 * Blocks::<u32>::SIZE + 3;
        for i in 0..n as u32 {
            b.push(i);
        }
        assert_eq!(b.held_bytes(), 3 * Blocks::<u32>::SIZE * 4);
        let all = b.into_vec(5);
        assert_eq!(all.len(), n);
        assert!(all.capacity() >= n + 5);
        assert!(all.iter().enumerate().all(|(i, v)| *v as usize == i));
    }

    #[test]
    fn the_latest_collective_both_left_is_found_by_its_instance() {
        let mut sync = SyncPoints::default();
        // Rank 1 leaves two instances at 50: (0, 5) with rank 2, (1, 1) with rank 3.
        sync.waited_in(0, 5, &[(1, 50), (2, 48)]).unwrap();
        sync.waited_in(0, 6, &[(1, 70), (2, 75), (3, 71)]).unwrap();
        sync.waited_in(1, 1, &[(1, 50), (3, 49)]).unwrap();
        sync.seal().unwrap();
        assert_eq!(sync.previous(1, 100, 2, 100), Some((70, 75)));
        assert_eq!(sync.previous(1, 100, 2, 74), Some((50, 48)));
        assert_eq!(sync.previous(1, 60, 3, 60), Some((50, 49)));
        assert_eq!(sync.previous(3, 100, 2, 100), Some((71, 75)));
        assert_eq!(sync.previous(2, 47, 1, 100), None);
    }

    #[test]
    fn collectives_in_any_order_give_the_same_points_in_a_few_bytes_each() {
        // 4 ranks, 2,000 instances of one communicator a millisecond apart (in ns), each rank
        // leaving a little after the one before; every 7th instance skips rank 3. Added in
        // order and in a shuffled order (as the parts of an exchange come).
        let ends = |k: i64| -> Vec<(i64, i64)> {
            (0..4).filter(|&r| r != 3 || k % 7 != 0).map(|r| (r, 1_000_000 * k + 10 * r + k % 5)).collect()
        };
        let mut in_order = SyncPoints::default();
        let mut shuffled = SyncPoints::default();
        for k in 0..2_000 {
            in_order.waited_in(0, k, &ends(k)).unwrap();
        }
        for k in (0..2_000).map(|k| (k * 769) % 2_000) {
            shuffled.waited_in(0, k, &ends(k)).unwrap();
        }
        in_order.seal().unwrap();
        shuffled.seal().unwrap();
        for (w, d) in [(0, 1), (1, 3), (3, 2), (2, 0)] {
            for t in (0..2_001_000_000).step_by(333_333) {
                let (w_until, d_until) = (t, t - 500_000);
                let expected = in_order.previous(w, w_until, d, d_until);
                assert_eq!(shuffled.previous(w, w_until, d, d_until), expected, "{w} {d} {t}");
                // By hand: the latest instance both left before their times (none later than
                // the one under way at `t`).
                let by_hand = (0..=(t / 1_000_000 + 1).min(1_999)).rev().find_map(|k| {
                    let e = ends(k);
                    let (tw, td) = (e.iter().find(|x| x.0 == w)?.1, e.iter().find(|x| x.0 == d)?.1);
                    (tw <= w_until && td <= d_until).then_some((tw, td))
                });
                assert_eq!(expected, by_hand, "{w} {d} {t}");
            }
        }
        let points = 4 * 2_000 - 2_000 / 7 - 1;
        assert!(shuffled.held_bytes() < 40 * 2_000 + 6 * points, "{} bytes", shuffled.held_bytes());
    }

    #[test]
    fn a_pair_s_latest_synchronisation_before_both_ends_is_found() {
        let wait = |rank: i64, partner: i64, ts: i64| Wait {
            rank,
            pattern: "late_receiver",
            wait_ns: 1,
            ts,
            msg_id: None,
            comm: None,
            instance: None,
            partner: Some(partner),
        };
        let left = HashMap::new();
        // Ranks 3 and 7 synchronised at 11, 21 and 31 (either waiting for the other).
        let mut sync = SyncPoints::default();
        for w in [wait(3, 7, 10), wait(7, 3, 20), wait(3, 7, 30)] {
            sync.message_wait(&w, &left);
        }
        sync.sort_messages();
        sync.seal().unwrap();
        assert_eq!(sync.previous(3, 40, 7, 40), Some((31, 31)));
        assert_eq!(sync.previous(7, 40, 3, 25), Some((21, 21)));
        assert_eq!(sync.previous(3, 15, 7, 40), Some((11, 11)));
        assert_eq!(sync.previous(3, 10, 7, 40), None);
        assert_eq!(sync.previous(3, 40, 5, 40), None);
    }
}
