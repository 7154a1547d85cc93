//! One step's computation of a rank as an OpenMP program runs it (`generate --threads N`):
//! a serial part on the master thread (a tenth of the step's work), then a parallel region of
//! N threads as Score-P records it: the master's ThreadFork; on each thread its
//! ThreadTeamBegin and the parallel region, its share of the work (each thread's share varies
//! by up to 20% from step to step: thread imbalance), a critical section (its region, the
//! lock's ThreadAcquireLock, the structured block, ThreadReleaseLock; the threads take the
//! lock in the order they reach it, each waiting for the one before), the implicit barrier at
//! the region's end, the region's leave and ThreadTeamEnd; then the master's ThreadJoin. The
//! waits this plants are known from the times: every thread starts later than the fork by its
//! number (omp_fork), waits at the barrier for the slowest thread (wait_at_omp_implicit_barrier),
//! and waits for the lock while another holds it (omp_critical_contention).

use crate::events::{Event, EventKind};
use crate::generate::rng::{streams, symmetric};

/// The OpenMP regions a threaded trace adds to the generator's: (name, paradigm, role).
pub(super) const REGIONS: [(&str, &str, &str); 4] = [
    ("!$omp parallel @generated.c:10", "openmp", "parallel"),
    ("!$omp implicit barrier @generated.c:10", "openmp", "implicit_barrier"),
    ("!$omp critical @generated.c:20", "openmp", "critical"),
    ("!$omp critical sblock @generated.c:20", "openmp", "critical_sblock"),
];

/// Region ids of the OpenMP regions, after the generator's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Regions {
    pub parallel: i32,
    pub barrier: i32,
    pub critical: i32,
    pub block: i32,
    pub compute: i32,
}

/// The id of the lock of every rank's critical section.
const LOCK: i64 = 1;
/// From the fork to the master's team begin, and between one thread's begin and the next's.
const START_NS: i64 = 150;
/// From the last thread's arrival at the barrier to everyone leaving it.
const BARRIER_NS: i64 = 300;
/// Entering or leaving a construct.
const STEP_NS: i64 = 50;

/// Where a step's events go: (thread, ts, kind, what fills the event's other fields).
pub(super) type Push<'a> = dyn FnMut(u32, i64, EventKind, &dyn Fn(&mut Event)) + 'a;

/// One step of rank `rank` (its thread team `team`), starting at `start` with `work` ns of
/// computation per thread: its events go to `push(thread, ts, kind, fill)`, in time order per
/// thread. `order` is the rank's count of lock acquisitions so far; returns when the master
/// has joined the team.
#[allow(clippy::too_many_arguments)]
pub(super) fn step(
    rank: usize,
    threads: u32,
    team: i32,
    start: i64,
    work: i64,
    compute: bool,
    r: Regions,
    (seed, iteration): (u64, u64),
    order: &mut i64,
    push: &mut Push<'_>,
) -> i64 {
    let t = threads as usize;
    let serial = work / 10;
    if compute && serial > 0 {
        push(0, start, EventKind::Enter, &|e| e.region = r.compute);
        push(0, start + serial, EventKind::Leave, &|e| e.region = r.compute);
    }
    let fork = start + serial + STEP_NS;
    let share = work - serial;
    let begin: Vec<i64> = (0..t).map(|k| fork + START_NS * (k as i64 + 1)).collect();
    let done: Vec<i64> = (0..t)
        .map(|k| {
            let noise = symmetric(seed, streams::THREADS, iteration, (rank * t + k) as u64);
            begin[k] + STEP_NS + (share as f64 * (1.0 + 0.2 * noise)).round() as i64
        })
        .collect();
    // The lock, in the order the threads reach it.
    let hold = (share / 20).max(1);
    let mut by_arrival: Vec<usize> = (0..t).collect();
    by_arrival.sort_by_key(|&k| (done[k], k));
    let mut acquired = vec![(0i64, 0i64); t];
    let mut free = i64::MIN;
    for &k in &by_arrival {
        *order += 1;
        let at = (done[k] + STEP_NS).max(free);
        acquired[k] = (at, *order);
        free = at + hold;
    }
    let arrive: Vec<i64> = (0..t).map(|k| acquired[k].0 + hold + STEP_NS).collect();
    let exit = arrive.iter().copied().max().unwrap_or(fork) + BARRIER_NS;
    let leave: Vec<i64> = (0..t).map(|k| exit + STEP_NS * (t - k) as i64).collect();
    let join = leave.iter().copied().max().unwrap_or(exit) + 2 * STEP_NS;
    push(0, fork, EventKind::ThreadFork, &|e| e.tag = threads as i32);
    for k in 0..t {
        let th = k as u32;
        let (at, ord) = acquired[k];
        push(th, begin[k], EventKind::ThreadTeamBegin, &|e| e.comm = team);
        push(th, begin[k], EventKind::Enter, &|e| e.region = r.parallel);
        if compute {
            push(th, begin[k] + STEP_NS, EventKind::Enter, &|e| e.region = r.compute);
            push(th, done[k], EventKind::Leave, &|e| e.region = r.compute);
        }
        push(th, done[k], EventKind::Enter, &|e| e.region = r.critical);
        push(th, at, EventKind::ThreadAcquireLock, &|e| (e.request, e.tag) = (LOCK, ord as i32));
        push(th, at, EventKind::Enter, &|e| e.region = r.block);
        push(th, at + hold, EventKind::Leave, &|e| e.region = r.block);
        push(th, at + hold, EventKind::ThreadReleaseLock, &|e| (e.request, e.tag) = (LOCK, ord as i32));
        push(th, arrive[k], EventKind::Leave, &|e| e.region = r.critical);
        push(th, arrive[k], EventKind::Enter, &|e| e.region = r.barrier);
        push(th, exit, EventKind::Leave, &|e| e.region = r.barrier);
        push(th, leave[k], EventKind::Leave, &|e| e.region = r.parallel);
        push(th, leave[k], EventKind::ThreadTeamEnd, &|e| e.comm = team);
    }
    push(0, join, EventKind::ThreadJoin, &|_| {});
    join
}
