//! The wait states of threads within a rank, after the OpenMP patterns of Scalasca's analyzer
//! (its `OMP.pattern` and `Thread.pattern`, as scout.hyb computes them), found from each
//! thread's calls (the regions' OpenMP roles) and the thread records of the events:
//!
//! - `omp_fork`: a member of a team (the master included) enters the parallel region after
//!   the fork: it waits from the fork until its enter (Scalasca's OMP_FORK; with `omp_join`,
//!   its OMP_MANAGEMENT).
//! - `omp_join`: a member leaves the parallel region before the join that ends it: it waits
//!   from its leave until the join (Scalasca's join part of OMP_MANAGEMENT).
//! - `wait_at_omp_barrier` and `wait_at_omp_implicit_barrier`: within one instance of a
//!   parallel region, the k-th barrier of each member is one barrier; a member waits from its
//!   enter until the last member's enter, less the time it ran tasks inside the barrier
//!   (Scalasca's OMP_EBARRIER_WAIT and OMP_IBARRIER_WAIT; barriers outside a parallel region
//!   are not counted, as Scalasca skips them). partner_thread = the last to enter.
//! - `omp_critical_contention` and `omp_lock_contention`: an acquisition of a lock waits from
//!   the enter of the call it is made in until the previous acquisition of the same lock (its
//!   acquisition order less one) was released (Scalasca's OMP_LOCK_CONTENTION_CRITICAL for a
//!   critical section, OMP_LOCK_CONTENTION_API for the lock API). A lock taken in a Pthreads
//!   region is `pthread_lock_contention` (Scalasca's PTHREAD_CONTENTION_MUTEX_LOCK), one in a
//!   region of neither model `lock_contention` (commdb's rule: Scalasca counts none).
//!   partner_thread = the thread that held the lock.
//! - `omp_idle_threads`: while the master runs serially (outside every instance's fork..join,
//!   from its first call's start to its last call's end), every other thread of the rank that
//!   is ever a member of a team idles (Scalasca's OMP_IDLE_THREADS, which its Cube remapper
//!   computes from the profile; commdb gives a row per serial stretch and idle thread, with the
//!   master's call path at the stretch's start).
//! - `omp_limited_parallelism`: a thread of the rank that is not a member of an instance's team
//!   idles from its fork until its join (Scalasca's OMP_LIMITED_PARALLELISM, also a remapper
//!   metric).
//!
//! An instance is a fork and the join after it; a parallel region call belongs to the latest
//! fork at or before its start. Waits of 0 or less are not listed. The call paths of a worker
//! thread continue the master's at the fork, as Scalasca and Score-P's profiles give them
//! (`main/!$omp parallel @solver.c:10/!$omp implicit barrier @solver.c:20`).

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, RecordBatch};
use datafusion::error::Result;

use crate::sweeps::call_paths::Up;
use crate::sweeps::call_sweep::{Call, Names};
use crate::sweeps::stretches::{NO_PATH, Stretch, thread_stretches_under};
use commdb_analysis::columns::{int64_column, text_column};

/// The kinds of events `wait_states` reads for the threads' waits.
pub(crate) const THREAD_KINDS: [&str; 4] = ["thread_fork", "thread_join", "thread_acquire_lock", "thread_release_lock"];

/// The paradigms whose regions the threads' waits read.
pub(crate) const THREAD_PARADIGMS: [&str; 2] = ["openmp", "pthread"];

/// What a region is to the threads' waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Construct {
    Parallel,
    Barrier,
    ImplicitBarrier,
    Critical,
    Task,
    /// Any other OpenMP region (the lock API among them).
    OpenMp,
    Pthread,
}

fn construct(paradigm: &str, role: Option<&str>) -> Option<Construct> {
    Some(match (paradigm, role) {
        ("openmp", Some("parallel")) => Construct::Parallel,
        ("openmp", Some("barrier")) => Construct::Barrier,
        ("openmp", Some("implicit_barrier")) => Construct::ImplicitBarrier,
        ("openmp", Some("critical" | "critical_sblock")) => Construct::Critical,
        ("openmp", Some("task" | "task_untied")) => Construct::Task,
        ("openmp", _) => Construct::OpenMp,
        ("pthread", _) => Construct::Pthread,
        _ => return None,
    })
}

/// A lock's acquisition or release (24 bytes: a large run holds millions).
#[derive(Debug, Clone, Copy)]
struct LockRecord {
    ts: i64,
    lock: u32,
    order: u32,
    thread: u32,
    release: bool,
}

/// One rank's thread records.
#[derive(Debug, Default)]
struct RankRecords {
    /// Forks (time, forking thread) in time order, whatever order the events came in.
    forks: Vec<(i64, i64)>,
    /// Joins in time order.
    joins: Vec<i64>,
    /// Acquisitions and releases, in the order they came (sorted by lock and order when used),
    /// in blocks of LOCK_BLOCK: a run's millions are held without a vector's doubling.
    locks: Vec<Vec<LockRecord>>,
}

/// Lock records per block.
const LOCK_BLOCK: usize = 4096;

/// The thread records (forks, joins, lock acquisitions and releases) and the OpenMP and
/// Pthreads regions, folded before the calls come.
#[derive(Debug, Default)]
pub(crate) struct ThreadRecords {
    constructs: HashMap<String, Construct>,
    ranks: BTreeMap<i64, RankRecords>,
    bytes: usize,
    /// The offload activity of a trace with accelerator streams ([`crate::accelerators`]), for the
    /// critical path's hand-overs between host threads and streams.
    offload: Vec<RecordBatch>,
}

/// One wait of a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadWait {
    pub rank: i64,
    pub thread: i64,
    pub pattern: &'static str,
    pub wait_ns: i64,
    pub ts: i64,
    /// The instance of the parallel region (0-based in fork order within the rank).
    pub instance: Option<i64>,
    pub partner_thread: Option<i64>,
    /// The call path (an id of the chunk's paths; NO_PATH: none).
    pub path: u32,
}

impl ThreadRecords {
    /// Fold a batch of thread events: rank, thread, ts, kind, tag (acquisition order), request
    /// (lock id).
    pub fn fold_events(&mut self, batch: &RecordBatch) -> Result<()> {
        let b = std::slice::from_ref(batch);
        let (rank, thread, ts) = (int64_column(b, 0)?, int64_column(b, 1)?, int64_column(b, 2)?);
        let (kind, tag, request) = (text_column(b, 3)?, int64_column(b, 4)?, int64_column(b, 5)?);
        // The ranks a fork or join came out of time order to (the events' partitions need not
        // come in time order): sorted again once the batch is folded.
        let mut unordered: Vec<i64> = Vec::new();
        for i in 0..batch.num_rows() {
            if rank.is_null(i) || ts.is_null(i) || kind.is_null(i) {
                continue;
            }
            let r = self.ranks.entry(rank.value(i)).or_default();
            let (t, at) = (if thread.is_valid(i) { thread.value(i) } else { 0 }, ts.value(i));
            // OTF2 records a lock's id and acquisition order as 32-bit numbers.
            let as_u32 = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
            let lock =
                (as_u32(request.is_valid(i).then(|| request.value(i))), as_u32(tag.is_valid(i).then(|| tag.value(i))));
            let thread = u32::try_from(t).unwrap_or(u32::MAX);
            let late = match (kind.value(i), lock) {
                ("thread_fork", _) => {
                    r.forks.push((at, t));
                    r.forks.len() > 1 && r.forks[r.forks.len() - 2] > (at, t)
                }
                ("thread_join", _) => {
                    r.joins.push(at);
                    r.joins.len() > 1 && r.joins[r.joins.len() - 2] > at
                }
                (k @ ("thread_acquire_lock" | "thread_release_lock"), (Some(lock), Some(order))) => {
                    let release = k == "thread_release_lock";
                    if r.locks.last().is_none_or(|b| b.len() == LOCK_BLOCK) {
                        r.locks.push(Vec::with_capacity(LOCK_BLOCK));
                        self.bytes += LOCK_BLOCK * std::mem::size_of::<LockRecord>();
                    }
                    if let Some(block) = r.locks.last_mut() {
                        block.push(LockRecord { ts: at, lock, order, thread, release });
                    }
                    continue;
                }
                _ => continue,
            };
            if late && unordered.last() != Some(&rank.value(i)) {
                unordered.push(rank.value(i));
            }
            self.bytes += 24;
        }
        unordered.sort_unstable();
        unordered.dedup();
        for rank in unordered {
            if let Some(r) = self.ranks.get_mut(&rank) {
                // Runs already in order merge in linear time.
                r.forks.sort();
                r.joins.sort();
            }
        }
        Ok(())
    }

    /// Fold a batch of regions: name, paradigm, role.
    pub fn fold_regions(&mut self, batch: &RecordBatch) -> Result<()> {
        let b = std::slice::from_ref(batch);
        let (name, paradigm, role) = (text_column(b, 0)?, text_column(b, 1)?, text_column(b, 2)?);
        for i in 0..batch.num_rows() {
            if name.is_null(i) || paradigm.is_null(i) {
                continue;
            }
            let role = role.is_valid(i).then(|| role.value(i));
            if let Some(c) = construct(paradigm.value(i), role) {
                self.bytes += name.value(i).len() + 16;
                self.constructs.entry(name.value(i).to_string()).or_insert(c);
            }
        }
        Ok(())
    }

    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// Keep a batch of offload activity ([`crate::accelerators::offload_input`]).
    /// Fold a batch of input `input` of an analysis that reads the threads' records after its
    /// calls, messages and collectives: 3 the events, 4 the regions, further ones an
    /// accelerator's hand-overs.
    pub fn fold_input(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            3 => self.fold_events(batch),
            4 => self.fold_regions(batch),
            _ => {
                self.fold_offload(batch);
                Ok(())
            }
        }
    }

    pub fn fold_offload(&mut self, batch: &RecordBatch) {
        self.bytes += batch.get_array_memory_size();
        self.offload.push(batch.clone());
    }

    /// The offload activity kept (empty for a trace without accelerator streams).
    pub fn offload(&self) -> &[RecordBatch] {
        &self.offload
    }

    /// `rank`'s forks (time, forking thread) in time order.
    pub fn forks(&self, rank: i64) -> &[(i64, i64)] {
        self.ranks.get(&rank).map_or(&[], |r| r.forks.as_slice())
    }

    /// `rank`'s master thread: the thread of its first fork, else thread 0.
    pub fn master(&self, rank: i64) -> i64 {
        self.forks(rank).first().map_or(0, |f| f.1)
    }

    /// Whether any rank recorded a fork or a lock: without them no thread waits.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
}

/// One thread's calls with their stretches and each call's path.
pub(crate) struct ThreadCalls {
    pub thread: i64,
    pub calls: Vec<Call>,
    pub stretches: Vec<Stretch>,
    pub call_paths: Vec<u32>,
}

/// The stretch of `list` at `t` (from <= t < to).
pub(crate) fn stretch_at(list: &[Stretch], t: i64) -> Option<&Stretch> {
    list.get(list.partition_point(|s| s.to <= t)).filter(|s| s.from <= t)
}

/// A rank's threads (`streams`, in thread order) with their stretches and call paths: the
/// master's from the root, each other thread's outermost calls continuing the master's path at
/// the fork before them.
pub(crate) fn rank_threads(
    rank: i64,
    streams: Vec<(i64, Vec<Call>)>,
    records: &ThreadRecords,
    names: &Names,
    paths: &mut crate::sweeps::call_paths::Paths,
) -> Vec<ThreadCalls> {
    let forks = records.forks(rank);
    let master = records.master(rank);
    let mut out: Vec<ThreadCalls> = Vec::with_capacity(streams.len());
    let mut order: Vec<(i64, Vec<Call>)> = streams;
    // The master first: the others' paths continue its.
    order.sort_by_key(|(t, _)| (*t != master, *t));
    for (thread, calls) in order {
        let mut call_paths = Vec::with_capacity(calls.len());
        let stretches = {
            let master_list = out.first().filter(|m| m.thread == master && thread != master).map(|m| &m.stretches);
            let root = |c: &Call| {
                let Some(list) = master_list else { return Up::Root };
                let k = forks.partition_point(|f| f.0 <= c.start);
                let Some(&(fork, _)) = k.checked_sub(1).and_then(|k| forks.get(k)) else { return Up::Root };
                // The master's call open just before the fork (a call entered at the fork's
                // instant, the parallel region itself, comes after it), as call_tree takes it.
                match stretch_at(list, fork - 1) {
                    Some(s) if s.path != NO_PATH => Up::Path(s.path),
                    _ => Up::Root,
                }
            };
            thread_stretches_under(&calls, names, paths, root, |p| call_paths.push(p))
        };
        out.push(ThreadCalls { thread, calls, stretches, call_paths });
    }
    out.sort_by_key(|t| t.thread);
    out
}

/// What each region of a chunk's names is to the threads' waits, by name id.
pub(crate) struct Constructs(Vec<Option<Construct>>);

impl ThreadRecords {
    /// The constructs of `names`' regions, looked up once per chunk of calls.
    pub fn constructs(&self, names: &Names) -> Constructs {
        Constructs(names.names.iter().map(|n| self.constructs.get(n).copied()).collect())
    }
}

impl Constructs {
    /// What `call`'s region is.
    pub fn of(&self, call: &Call) -> Option<Construct> {
        self.0.get(call.region as usize).copied().flatten()
    }
}

/// A rank's instances of parallel regions: its forks and joins in time order, and each
/// instance's members (a thread's index in the rank's threads, the index of its parallel region
/// call); an instance is a fork and the join after it.
pub(crate) struct Instances {
    pub forks: Vec<(i64, i64)>,
    pub joins: Vec<i64>,
    pub members: BTreeMap<usize, Vec<(usize, usize)>>,
}

impl Instances {
    /// The join that ends a parallel region call left at `end`, if after it.
    pub fn join_after(&self, end: i64) -> Option<i64> {
        self.joins.get(self.joins.partition_point(|&j| j < end)).copied().filter(|&j| j > end)
    }
}

/// The instances of `rank`'s parallel regions; None when it recorded no thread records.
pub(crate) fn rank_instances(
    rank: i64,
    threads: &[ThreadCalls],
    records: &ThreadRecords,
    constructs: &Constructs,
) -> Option<Instances> {
    let r = records.ranks.get(&rank)?;
    let (forks, joins) = (r.forks.clone(), r.joins.clone());
    let mut members: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for (ti, th) in threads.iter().enumerate() {
        for (ci, c) in th.calls.iter().enumerate() {
            if constructs.of(c) != Some(Construct::Parallel) {
                continue;
            }
            if let Some(k) = forks.partition_point(|f| f.0 <= c.start).checked_sub(1) {
                members.entry(k).or_default().push((ti, ci));
            }
        }
    }
    Some(Instances { forks, joins, members })
}

/// The waits of one rank's threads.
pub(crate) fn rank_waits(
    rank: i64,
    threads: &[ThreadCalls],
    records: &ThreadRecords,
    constructs: &Constructs,
) -> Vec<ThreadWait> {
    let Some(r) = records.ranks.get(&rank) else { return Vec::new() };
    let Some(team) = rank_instances(rank, threads, records, constructs) else { return Vec::new() };
    let what = |c: &Call| constructs.of(c);
    let mut out = Vec::new();
    let wait = |thread, pattern, ts, wait_ns, instance, partner_thread, path| ThreadWait {
        rank,
        thread,
        pattern,
        wait_ns,
        ts,
        instance,
        partner_thread,
        path,
    };
    for (&k, list) in &team.members {
        for &(ti, ci) in list {
            let (th, c) = (&threads[ti], threads[ti].calls[ci]);
            let path = th.call_paths[ci];
            let fork = team.forks[k].0;
            if c.start > fork {
                out.push(wait(th.thread, "omp_fork", fork, c.start - fork, Some(k as i64), None, path));
            }
            if let Some(join) = team.join_after(c.end) {
                out.push(wait(th.thread, "omp_join", c.end, join - c.end, Some(k as i64), None, path));
            }
        }
    }
    barrier_waits(threads, &team.members, &what, &mut |w: ThreadWait| out.push(ThreadWait { rank, ..w }));
    lock_waits(threads, r, &what, &mut |w: ThreadWait| out.push(ThreadWait { rank, ..w }));
    idle_waits(rank, threads, &team, &mut out);
    out
}

/// A member's barrier: its enter and leave, thread, the time it ran tasks in it, whether
/// explicit, and its call path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemberBarrier {
    /// The member's index in the rank's threads.
    pub at: usize,
    pub region: u32,
    pub enter: i64,
    pub leave: i64,
    pub thread: i64,
    pub tasks: i64,
    pub explicit: bool,
    pub path: u32,
}

impl MemberBarrier {
    /// The member that entered `barrier` (the members' k-th barrier) last; of several at once,
    /// the highest thread.
    pub fn last(barrier: &[MemberBarrier]) -> Option<&MemberBarrier> {
        barrier.iter().max_by_key(|m| (m.enter, m.thread))
    }
}

/// Each instance's barriers: the k-th barrier of each member within its parallel region call is
/// one barrier; `each(instance, members' barriers)`.
pub(crate) fn team_barriers(
    threads: &[ThreadCalls],
    members: &BTreeMap<usize, Vec<(usize, usize)>>,
    what: &impl Fn(&Call) -> Option<Construct>,
    mut each: impl FnMut(usize, &[MemberBarrier]),
) {
    for (&k, list) in members {
        // Each member's barriers, in order.
        let mut per: Vec<Vec<MemberBarrier>> = Vec::with_capacity(list.len());
        for &(ti, ci) in list {
            let th = &threads[ti];
            let region = th.calls[ci];
            let mut barriers = Vec::new();
            let mut i = ci + 1;
            while i < th.calls.len() && th.calls[i].start < region.end {
                let c = th.calls[i];
                let explicit = match what(&c) {
                    Some(Construct::Barrier) => true,
                    Some(Construct::ImplicitBarrier) => false,
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                // Tasks run inside the barrier (outermost ones) are not waiting.
                let (mut tasks, mut reach) = (0, i64::MIN);
                let mut j = i + 1;
                while j < th.calls.len() && th.calls[j].start < c.end {
                    let t = th.calls[j];
                    if what(&t) == Some(Construct::Task) && t.start >= reach {
                        tasks += t.end.min(c.end) - t.start;
                        reach = t.end;
                    }
                    j += 1;
                }
                let path = th.call_paths[i];
                barriers.push(MemberBarrier {
                    at: ti,
                    region: c.region,
                    enter: c.start,
                    leave: c.end,
                    thread: th.thread,
                    tasks,
                    explicit,
                    path,
                });
                i += 1;
            }
            per.push(barriers);
        }
        let most = per.iter().map(Vec::len).max().unwrap_or(0);
        let mut barrier = Vec::with_capacity(per.len());
        for b in 0..most {
            barrier.clear();
            barrier.extend(per.iter().filter_map(|p| p.get(b)).copied());
            each(k, &barrier);
        }
    }
}

/// The barrier waits of every instance: a member waits from its enter until the last member's,
/// less the tasks it ran meanwhile.
fn barrier_waits(
    threads: &[ThreadCalls],
    members: &BTreeMap<usize, Vec<(usize, usize)>>,
    what: &impl Fn(&Call) -> Option<Construct>,
    out: &mut impl FnMut(ThreadWait),
) {
    team_barriers(threads, members, what, |k, barrier| {
        let Some(&MemberBarrier { enter: latest, thread: last, .. }) = MemberBarrier::last(barrier) else { return };
        for m in barrier {
            let ns = latest - m.enter - m.tasks;
            if ns > 0 {
                let pattern = if m.explicit { "wait_at_omp_barrier" } else { "wait_at_omp_implicit_barrier" };
                out(ThreadWait {
                    rank: 0,
                    thread: m.thread,
                    pattern,
                    wait_ns: ns,
                    ts: m.enter,
                    instance: Some(k as i64),
                    partner_thread: Some(last),
                    path: m.path,
                });
            }
        }
    });
}

/// Lock contention: each acquisition waits from the enter of the call it is made in until the
/// previous acquisition of its lock was released.
fn lock_waits(
    threads: &[ThreadCalls],
    r: &RankRecords,
    what: &impl Fn(&Call) -> Option<Construct>,
    out: &mut impl FnMut(ThreadWait),
) {
    let mut locks: Vec<LockRecord> = r.locks.iter().flatten().copied().collect();
    locks.sort_unstable_by_key(|l| (l.lock, l.order, l.release));
    let released = |lock: u32, order: u32| {
        let k = locks.partition_point(|l| (l.lock, l.order, l.release) < (lock, order, true));
        locks.get(k).filter(|l| l.lock == lock && l.order == order && l.release).map(|l| (l.ts, i64::from(l.thread)))
    };
    for a in locks.iter().filter(|l| !l.release && l.order > 0) {
        let Some((released, holder)) = released(a.lock, a.order - 1) else { continue };
        let Some(th) = threads.iter().find(|t| t.thread == i64::from(a.thread)) else { continue };
        // The innermost call open at the acquisition; when it starts with the acquisition and
        // a critical section encloses it, the section (its structured block begins at once).
        let before = th.calls.partition_point(|c| c.start <= a.ts);
        let open = |i: &usize| th.calls[*i].end > a.ts;
        let mut found = (0..before).rev().find(open);
        if let Some(i) = found.filter(|&i| th.calls[i].start == a.ts) {
            let outer = (0..i).rev().find(open);
            if outer.is_some_and(|o| what(&th.calls[o]) == Some(Construct::Critical)) {
                found = outer;
            }
        }
        let Some(ci) = found else { continue };
        let c = th.calls[ci];
        let ns = released - c.start;
        if ns <= 0 {
            continue;
        }
        let pattern = match what(&c) {
            Some(Construct::Critical) => "omp_critical_contention",
            Some(Construct::Pthread) => "pthread_lock_contention",
            Some(_) => "omp_lock_contention",
            None => "lock_contention",
        };
        out(ThreadWait {
            rank: 0,
            thread: i64::from(a.thread),
            pattern,
            wait_ns: ns,
            ts: c.start,
            instance: None,
            partner_thread: Some(holder),
            path: th.call_paths[ci],
        });
    }
}

/// Where a rank's team threads idle while the master runs serially: the master, the threads
/// ever a member of a team besides it, each instance's span (its fork to the first join after
/// it), and the master's serial spans (outside every span, from its first call's start to its
/// last call's end) with its call path at each one's start.
pub(crate) struct Idleness {
    pub master: i64,
    pub team: Vec<i64>,
    pub spans: Vec<(i64, i64)>,
    pub serial: Vec<(i64, i64, u32)>,
}

impl Idleness {
    /// None when the rank forked no team of more than its master.
    pub fn of(threads: &[ThreadCalls], team: &Instances) -> Option<Idleness> {
        let (forks, joins, members) = (&team.forks, &team.joins, &team.members);
        let &(_, master) = forks.first()?;
        let m = threads.iter().find(|t| t.thread == master)?;
        let (first, last) = (m.stretches.first()?, m.stretches.last()?);
        let mut others: Vec<i64> =
            members.values().flatten().map(|&(ti, _)| threads[ti].thread).filter(|&t| t != master).collect();
        others.sort_unstable();
        others.dedup();
        if others.is_empty() {
            return None;
        }
        let spans: Vec<(i64, i64)> = forks
            .iter()
            .map(|&(fork, _)| (fork, joins.get(joins.partition_point(|&j| j < fork)).copied().unwrap_or(fork)))
            .collect();
        let mut serial = Vec::new();
        let mut from = first.from;
        for &(fork, join) in &spans {
            if fork > from {
                serial.push((from, fork.min(last.to)));
            }
            from = from.max(join);
        }
        if last.to > from {
            serial.push((from, last.to));
        }
        let serial = serial
            .into_iter()
            .filter(|(a, b)| b > a)
            .map(|(a, b)| (a, b, stretch_at(&m.stretches, a).map_or(NO_PATH, |s| s.path)))
            .collect();
        Some(Idleness { master, team: others, spans, serial })
    }
}

/// Idle threads while the master runs serially, and threads left out of an instance's team.
fn idle_waits(rank: i64, threads: &[ThreadCalls], team: &Instances, out: &mut Vec<ThreadWait>) {
    let Some(Idleness { master, team: others, spans, serial }) = Idleness::of(threads, team) else { return };
    for (a, b, path) in serial {
        for &t in &others {
            out.push(ThreadWait {
                rank,
                thread: t,
                pattern: "omp_idle_threads",
                wait_ns: b - a,
                ts: a,
                instance: None,
                partner_thread: Some(master),
                path,
            });
        }
    }
    for (&k, list) in &team.members {
        let (fork, join) = spans[k];
        if join <= fork {
            continue;
        }
        let path = list
            .iter()
            .find(|&&(ti, _)| threads[ti].thread == master)
            .map_or(NO_PATH, |&(ti, ci)| threads[ti].call_paths[ci]);
        for &t in &others {
            if !list.iter().any(|&(ti, _)| threads[ti].thread == t) {
                out.push(ThreadWait {
                    rank,
                    thread: t,
                    pattern: "omp_limited_parallelism",
                    wait_ns: join - fork,
                    ts: fork,
                    instance: Some(k as i64),
                    partner_thread: Some(master),
                    path,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::sweeps::call_paths::Paths;

    /// A batch of thread events of rank 0: (thread, ts, kind).
    fn events(rows: &[(i64, i64, &str)]) -> RecordBatch {
        let int = |name| Field::new(name, DataType::Int64, true);
        let schema = Schema::new(vec![
            int("rank"),
            int("thread"),
            int("ts"),
            Field::new("kind", DataType::Utf8, true),
            int("tag"),
            int("request"),
        ]);
        let n = rows.len();
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![0; n])),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(vec![None::<i64>; n])),
                Arc::new(Int64Array::from(vec![None::<i64>; n])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn forks_that_come_out_of_time_order_are_kept_in_time_order() {
        // The events of a rank can come in several batches in any order (one per partition).
        let mut records = ThreadRecords::default();
        records.fold_events(&events(&[(0, 60, "thread_fork"), (0, 90, "thread_join")])).unwrap();
        records.fold_events(&events(&[(1, 12, "thread_fork"), (1, 14, "thread_join")])).unwrap();
        records.fold_events(&events(&[(0, 10, "thread_fork"), (0, 50, "thread_join")])).unwrap();
        assert_eq!(records.forks(0), [(10, 0), (12, 1), (60, 0)]);
        assert_eq!(records.ranks[&0].joins, [14, 50, 90]);
        assert_eq!(records.master(0), 0, "the master is the thread of the first fork in time");

        // A worker's outermost calls continue the master's path at the fork before them.
        let mut names = Names::default();
        let (main, solve, par) = (names.id("main"), names.id("solve"), names.id("!$omp parallel"));
        let call = |start, end, region| Call { start, end, region };
        let master = vec![call(0, 100, main), call(5, 55, solve), call(10, 50, par), call(60, 90, par)];
        let worker = vec![call(11, 49, par), call(61, 89, par)];
        let mut paths = Paths::default();
        let threads = rank_threads(0, vec![(1, worker), (0, master)], &records, &names, &mut paths);
        let text = |t: &ThreadCalls| t.call_paths.iter().map(|&p| paths.text[p as usize].clone()).collect::<Vec<_>>();
        assert_eq!(text(&threads[1]), ["main/solve/!$omp parallel", "main/!$omp parallel"]);
    }
}
