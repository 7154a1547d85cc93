//! Extrae's OpenMP records in a Paraver trace, read into the thread records and OpenMP regions
//! that Score-P's OTF2 gives (the thread kinds of `crate::events::EventKind`, regions of
//! paradigm `openmp` with their roles), so that `parallel_regions`, `lock_acquisitions`,
//! `call_tree` and the OpenMP patterns of `wait_states` read an Extrae run as they read a
//! Score-P one. Extrae's tracer writes each record on the thread that runs it:
//!
//! - type 60000001 (Parallel): a non-zero value (1 parallel do, 2 parallel sections, 3 parallel
//!   region) when a thread opens a parallel construct, 0 when it is back from its join: a
//!   ThreadFork and a ThreadJoin on that thread.
//! - 60000018 (executed OpenMP parallel function; the value names the outlined function): each
//!   member's share of the construct, the master's included: a ThreadTeamBegin of the rank's
//!   team and a call of a `parallel` region; value 0 ends both.
//! - 60000005 (OpenMP barrier, 1 begin, 0 end): an explicit barrier (role `barrier`);
//!   60000016 (worksharing join: 1 with wait, 2 without, 0 end): the end of a worksharing
//!   construct, 1 being its implicit barrier (`implicit_barrier`); 60000002 (worksharing: 4 do,
//!   5 sections, 6 single, 7 master; 0 end): the construct (`loop`, `sections`, `single`,
//!   `master`); 60000023 (executed task function): a `task`; 60000022 (task wait): `task_wait`.
//! - 60000006 and 60000007 (named and unnamed lock), whose values are states: 3 in the
//!   acquiring call, 6 holding the lock, 5 in the releasing call, 0 released. They become a
//!   `critical` call from 3 to 0 holding a ThreadAcquireLock at 6, a `critical_sblock` call from
//!   6 to 5 and a ThreadReleaseLock at 5, as Score-P records a critical section. A named lock's
//!   address follows its 6 as type 60000032; its release is of the lock the thread took last.
//!   Locks are numbered 0 (the unnamed critical sections, one lock as OpenMP has it) and 1, 2,
//!   ... (the named locks in the order of their addresses); the acquisition order of a lock is
//!   the order of its acquisitions within the rank by time (`number_acquisitions`).
//!
//! Facts from Extrae's `src/common/events.h`, its OpenMP probes (`omp-probe.c`) and wrappers
//! (`gnu-libgomp.c`, `omp-common_c.c`) and its merger's labels (`omp_prv_events.c`). Where this
//! departs from what Score-P would record (no implicit barrier at the end of a parallel region:
//! Extrae writes none; named critical sections and the lock API share one type) is said in
//! docs/departures.md.

use crate::events::{Event, EventKind, NONE_I32, NONE_I64, RawEvents};
use crate::fast_hash::FastMap;

/// Opening (non-zero) and closing (0) a parallel construct: fork and join.
pub(crate) const PARALLEL: i64 = 60_000_001;
const WORKSHARING: i64 = 60_000_002;
pub(crate) const BARRIER: i64 = 60_000_005;
pub(crate) const NAMED_LOCK: i64 = 60_000_006;
pub(super) const UNNAMED_LOCK: i64 = 60_000_007;
pub(crate) const JOIN: i64 = 60_000_016;
pub(crate) const FUNCTION: i64 = 60_000_018;
const TASKWAIT: i64 = 60_000_022;
pub(super) const TASK_FUNCTION: i64 = 60_000_023;
/// The address of the named lock taken (value 6) just before, at the same time.
pub(crate) const LOCK_ADDRESS: i64 = 60_000_032;

/// The lock states of types 60000006 and 60000007.
pub(crate) const IN_ACQUIRE: i64 = 3;
pub(crate) const IN_RELEASE: i64 = 5;
pub(crate) const HELD: i64 = 6;
pub(crate) const RELEASED: i64 = 0;

/// The worksharing join's value of a join that waits (its implicit barrier).
pub(crate) const JOIN_WAIT: i64 = 1;

/// The lock id of the unnamed critical sections.
pub(super) const UNNAMED: i64 = 0;

/// What an Extrae OpenMP event type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Omp {
    /// Fork (non-zero) and join (0).
    ForkJoin,
    /// A construct entered (non-zero value) and left (0); the outlined parallel function.
    Function,
    /// Any other construct entered and left.
    Construct,
    /// A lock's states; named or not.
    Lock { named: bool },
    /// A named lock's address.
    LockAddress,
}

/// The OpenMP meaning of event type `ty`, if it is one of Extrae's OpenMP types that carry
/// one.
pub(super) fn class_of(ty: i64) -> Option<Omp> {
    Some(match ty {
        PARALLEL => Omp::ForkJoin,
        FUNCTION => Omp::Function,
        WORKSHARING | BARRIER | JOIN | TASKWAIT | TASK_FUNCTION => Omp::Construct,
        NAMED_LOCK => Omp::Lock { named: true },
        UNNAMED_LOCK => Omp::Lock { named: false },
        LOCK_ADDRESS => Omp::LockAddress,
        _ => return None,
    })
}

/// The region that (type, value) enters, if any: a construct's non-zero value, a lock's
/// acquiring call (the critical section) and its held state (the structured block).
pub(super) fn enters(omp: Omp, value: i64) -> bool {
    match omp {
        Omp::Function | Omp::Construct => value != 0,
        Omp::Lock { .. } => value == IN_ACQUIRE || value == HELD,
        Omp::ForkJoin | Omp::LockAddress => false,
    }
}

/// Whether the record closes something (a half at its time goes before it).
pub(super) fn leaves(omp: Omp, value: i64) -> bool {
    match omp {
        Omp::Lock { .. } => value == IN_RELEASE || value == RELEASED,
        _ => value == 0,
    }
}

/// The name and role of the region of (type `ty`, value) entered: the outlined and task
/// functions by their .pcf names (`value_name`, else the type and number), the other
/// constructs by their type's description with the value's name where it says more than
/// "Begin", the locks by their type's description.
pub(super) fn region(
    ty: i64,
    value: i64,
    description: &str,
    value_name: Option<&str>,
) -> (String, Option<&'static str>) {
    let role = match (ty, value) {
        (FUNCTION, _) => Some("parallel"),
        (TASK_FUNCTION, _) => Some("task"),
        (TASKWAIT, _) => Some("task_wait"),
        (BARRIER, _) => Some("barrier"),
        (JOIN, JOIN_WAIT) => Some("implicit_barrier"),
        (WORKSHARING, 4) => Some("loop"),
        (WORKSHARING, 5) => Some("sections"),
        (WORKSHARING, 6) => Some("single"),
        (WORKSHARING, 7) => Some("master"),
        (NAMED_LOCK | UNNAMED_LOCK, IN_ACQUIRE) => Some("critical"),
        (NAMED_LOCK | UNNAMED_LOCK, _) => Some("critical_sblock"),
        _ => None,
    };
    let name = match ty {
        FUNCTION | TASK_FUNCTION => value_name.map_or_else(|| format!("{description} {value}"), str::to_string),
        NAMED_LOCK | UNNAMED_LOCK if value == HELD => format!("{description} sblock"),
        NAMED_LOCK | UNNAMED_LOCK => description.to_string(),
        _ => match value_name.map(str::trim) {
            Some(v) if !v.is_empty() && !v.eq_ignore_ascii_case("begin") => format!("{description}: {v}"),
            _ => description.to_string(),
        },
    };
    (name, role)
}

/// One lock being taken or held on a thread: its critical section's region (when entered by
/// the acquiring call's state), the structured block's when open, and the lock (NONE_I64
/// until known).
#[derive(Debug, Clone, Copy)]
struct Taking {
    critical: i32,
    block: i32,
    lock: i64,
    acquired: bool,
    released: bool,
}

impl Taking {
    /// A lock being taken, in the critical section `critical` (NONE_I32: none).
    fn new(critical: i32) -> Self {
        Taking { critical, block: NONE_I32, lock: NONE_I64, acquired: false, released: false }
    }
}

/// A stream's OpenMP state while it is walked.
#[derive(Debug, Default)]
pub(super) struct Threads {
    /// Per lock type (0 named, 1 unnamed), the locks being taken, held or released, innermost
    /// last.
    taking: [Vec<Taking>; 2],
    /// The named acquisition whose address is still to come: its event index.
    pending: Option<usize>,
    /// Named acquisitions whose address never came.
    pub no_address: i64,
    /// Lock records of a value that is none of the four states.
    pub unknown_lock_states: i64,
}

/// What walking a stream needs of the trace: the regions of (type, value), the named locks'
/// numbers by address, the rank's team.
pub(super) struct Context<'a> {
    pub region_of: &'a FastMap<(i64, i64), i32>,
    pub locks: &'a FastMap<i64, i64>,
    pub team: i32,
}

impl Threads {
    /// Append the events of an OpenMP record (type `ty`, meaning `omp`) at `ts` of `rank`'s
    /// `thread`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        ev: &mut RawEvents,
        cx: &Context<'_>,
        omp: Omp,
        ty: i64,
        value: i64,
        ts: i64,
        (rank, thread): (i32, i32),
        open: &mut Vec<(i64, i64, i32)>,
    ) {
        let region = |v: i64| cx.region_of.get(&(ty, v)).copied().unwrap_or(NONE_I32);
        let event = |kind: EventKind| Event::new(rank, thread, ts, kind);
        match omp {
            Omp::ForkJoin => {
                ev.push_detailed(&event(if value != 0 { EventKind::ThreadFork } else { EventKind::ThreadJoin }));
            }
            Omp::Function | Omp::Construct if value != 0 => {
                if omp == Omp::Function {
                    let mut e = event(EventKind::ThreadTeamBegin);
                    e.comm = cx.team;
                    ev.push_detailed(&e);
                }
                let r = region(value);
                ev.push_plain(ts, EventKind::Enter, r);
                open.push((ty, value, r));
            }
            Omp::Function | Omp::Construct => {
                if let Some(p) = open.iter().rposition(|o| o.0 == ty) {
                    ev.push_plain(ts, EventKind::Leave, open.remove(p).2);
                    if omp == Omp::Function {
                        let mut e = event(EventKind::ThreadTeamEnd);
                        e.comm = cx.team;
                        ev.push_detailed(&e);
                    }
                } else {
                    ev.push_plain(ts, EventKind::Leave, NONE_I32);
                }
            }
            Omp::Lock { named } => {
                let stack = &mut self.taking[usize::from(!named)];
                match value {
                    IN_ACQUIRE => {
                        let critical = region(IN_ACQUIRE);
                        ev.push_plain(ts, EventKind::Enter, critical);
                        stack.push(Taking::new(critical));
                    }
                    HELD => {
                        if stack.last().is_none_or(|t| t.acquired) {
                            stack.push(Taking::new(NONE_I32));
                        }
                        let Some(t) = stack.last_mut() else { return };
                        t.acquired = true;
                        t.lock = if named { NONE_I64 } else { UNNAMED };
                        let mut e = event(EventKind::ThreadAcquireLock);
                        e.request = t.lock;
                        if named {
                            self.pending = Some(ev.len());
                        }
                        ev.push_detailed(&e);
                        if t.critical != NONE_I32 {
                            t.block = region(HELD);
                            ev.push_plain(ts, EventKind::Enter, t.block);
                        }
                    }
                    IN_RELEASE => {
                        let Some(k) = stack.iter().rposition(|t| t.acquired && !t.released) else {
                            // A release of a lock this thread was not seen taking (a trace cut
                            // after the acquisition): a release of an unknown lock.
                            let mut e = event(EventKind::ThreadReleaseLock);
                            e.request = if named { NONE_I64 } else { UNNAMED };
                            ev.push_detailed(&e);
                            return;
                        };
                        let t = &mut stack[k];
                        if t.block != NONE_I32 {
                            ev.push_plain(ts, EventKind::Leave, t.block);
                            t.block = NONE_I32;
                        }
                        t.released = true;
                        let mut e = event(EventKind::ThreadReleaseLock);
                        e.request = t.lock;
                        ev.push_detailed(&e);
                        if t.critical == NONE_I32 {
                            stack.remove(k);
                        }
                    }
                    RELEASED => {
                        // The acquiring call's critical section ends.
                        if let Some(k) = stack.iter().rposition(|t| t.critical != NONE_I32) {
                            let t = stack.remove(k);
                            if t.block != NONE_I32 {
                                ev.push_plain(ts, EventKind::Leave, t.block);
                            }
                            ev.push_plain(ts, EventKind::Leave, t.critical);
                        }
                    }
                    _ => self.unknown_lock_states += 1,
                }
            }
            Omp::LockAddress => {
                if let Some(at) = self.pending.take() {
                    let lock = cx.locks.get(&value).copied().unwrap_or(NONE_I64);
                    ev.request[at] = lock;
                    if let Some(t) = self.taking[0].iter_mut().rev().find(|t| t.acquired && t.lock == NONE_I64) {
                        t.lock = lock;
                    }
                }
            }
        }
    }

    /// A record that is not the address of the named lock just taken: an acquisition still
    /// waiting for its address has none.
    pub(super) fn no_more_address(&mut self) {
        if self.pending.take().is_some() {
            self.no_address += 1;
        }
    }
}

/// The numbers of the named locks: 1, 2, ... in the order of their addresses.
pub(super) fn number_locks(addresses: impl IntoIterator<Item = i64>) -> FastMap<i64, i64> {
    let mut a: Vec<i64> = addresses.into_iter().collect();
    a.sort_unstable();
    a.dedup();
    a.into_iter().enumerate().map(|(k, address)| (address, k as i64 + 1)).collect()
}

/// Give every acquisition and release of a lock its acquisition order: within a rank, the
/// acquisitions of each lock numbered 1, 2, ... by time (ties by thread), and each release the
/// number of the acquisition it ends (the thread's last unreleased one of that lock).
/// `streams` are the walked streams of whole ranks, a rank's consecutive.
pub(super) fn number_acquisitions(streams: &mut [&mut RawEvents]) {
    let acquire = EventKind::ThreadAcquireLock as u8;
    let release = EventKind::ThreadReleaseLock as u8;
    let mut start = 0;
    while start < streams.len() {
        let rank = streams[start].rank.first().copied();
        let mut end = start + 1;
        while end < streams.len() && (streams[end].is_empty() || streams[end].rank.first().copied() == rank) {
            end += 1;
        }
        let of_rank = &mut streams[start..end];
        // (lock, ts, thread, stream, event) of every acquisition with a known lock.
        let mut taken: Vec<(i64, i64, i32, usize, usize)> = Vec::new();
        for (s, ev) in of_rank.iter().enumerate() {
            for i in (0..ev.len()).filter(|&i| ev.kind[i] == acquire && ev.request[i] != NONE_I64) {
                taken.push((ev.request[i], ev.ts[i], ev.thread[i], s, i));
            }
        }
        if !taken.is_empty() {
            taken.sort_unstable();
            let mut order = 0i32;
            for k in 0..taken.len() {
                order = if k > 0 && taken[k - 1].0 == taken[k].0 { order + 1 } else { 1 };
                let (_, _, _, s, i) = taken[k];
                of_rank[s].tag[i] = order;
            }
            for ev in of_rank.iter_mut() {
                let mut held: Vec<(i64, i32)> = Vec::new();
                for i in 0..ev.len() {
                    if ev.request[i] == NONE_I64 {
                        continue;
                    }
                    if ev.kind[i] == acquire {
                        held.push((ev.request[i], ev.tag[i]));
                    } else if ev.kind[i] == release
                        && let Some(k) = held.iter().rposition(|h| h.0 == ev.request[i])
                    {
                        ev.tag[i] = held.remove(k).1;
                    }
                }
            }
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructs_are_named_by_their_type_and_value_and_given_their_role() {
        assert_eq!(
            region(FUNCTION, 7, "Executed OpenMP parallel function", Some("main._omp_fn.0")).0,
            "main._omp_fn.0"
        );
        assert_eq!(region(FUNCTION, 7, "Executed OpenMP parallel function", None).1, Some("parallel"));
        assert_eq!(region(BARRIER, 1, "OpenMP barrier", Some("Begin")), ("OpenMP barrier".into(), Some("barrier")));
        assert_eq!(
            region(JOIN, 1, "OpenMP Worksharing join", Some("Join (w wait)")),
            ("OpenMP Worksharing join: Join (w wait)".into(), Some("implicit_barrier"))
        );
        assert_eq!(region(JOIN, 2, "OpenMP Worksharing join", Some("Join (w/o wait)")).1, None);
        assert_eq!(region(UNNAMED_LOCK, HELD, "OpenMP unnamed-Lock", None).0, "OpenMP unnamed-Lock sblock");
        let locks = number_locks([0x601040, 0x7f00, 0x601040]);
        assert_eq!((locks.len(), locks.get(&0x7f00), locks.get(&0x601040)), (2, Some(&1), Some(&2)));
    }

    #[test]
    fn acquisitions_are_numbered_per_lock_by_time_across_threads_and_releases_take_their_numbers() {
        let mut a = RawEvents::default();
        let mut b = RawEvents::default();
        let push = |ev: &mut RawEvents, thread: i32, ts: i64, kind: EventKind, lock: i64| {
            let mut e = Event::new(0, thread, ts, kind);
            e.request = lock;
            ev.push(e);
        };
        // Thread 0 takes lock 0 at 10 and 30, thread 1 at 20; lock 1 once on thread 1.
        push(&mut a, 0, 10, EventKind::ThreadAcquireLock, 0);
        push(&mut a, 0, 15, EventKind::ThreadReleaseLock, 0);
        push(&mut a, 0, 30, EventKind::ThreadAcquireLock, 0);
        push(&mut a, 0, 35, EventKind::ThreadReleaseLock, 0);
        push(&mut b, 1, 20, EventKind::ThreadAcquireLock, 0);
        push(&mut b, 1, 21, EventKind::ThreadAcquireLock, 1);
        push(&mut b, 1, 22, EventKind::ThreadReleaseLock, 1);
        push(&mut b, 1, 25, EventKind::ThreadReleaseLock, 0);
        number_acquisitions(&mut [&mut a, &mut b]);
        assert_eq!(a.tag, vec![1, 1, 3, 3]);
        assert_eq!(b.tag, vec![2, 1, 1, 2]);
    }
}
