//! One rank's calls cut into iterations: each call of the marker region ends one (see
//! `marker`), the next begins where it ended, and the first begins with the longest tail of
//! its calls whose regions all recur in the next (the setup before them, MPI_Init and a
//! barrier, is left out); a call that
//! encloses several marker calls (`main`) belongs to none. Each iteration's time is divided
//! into time in MPI calls spent waiting (the rank's Scalasca wait states that fall in it), the
//! rest of its MPI time, and everything else (computation, instrumented or not).

use crate::sweeps::call_sweep::Call;

use super::marker::period;

/// The kinds of waiting an iteration sums.
pub const LATE_SENDER: usize = 0;
pub const LATE_RECEIVER: usize = 1;
pub const COLLECTIVE: usize = 2;

/// One wait of a rank: when it began, how long, of which kind.
#[derive(Debug, Clone, Copy)]
pub struct Waited {
    pub ts: i64,
    pub wait_ns: i64,
    pub kind: usize,
}

/// One iteration of a rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iteration {
    pub start: i64,
    pub end: i64,
    /// Time in MPI calls, waiting included.
    pub mpi: i64,
    /// Waiting by kind.
    pub waiting: [i64; 3],
}

impl Iteration {
    pub fn waiting_ns(&self) -> i64 {
        self.waiting.iter().sum()
    }

    /// MPI time not spent waiting.
    pub fn mpi_ns(&self) -> i64 {
        (self.mpi - self.waiting_ns()).max(0)
    }

    pub fn compute_ns(&self) -> i64 {
        (self.end - self.start - self.mpi.max(self.waiting_ns())).max(0)
    }
}

/// The iterations of one rank's `calls` (sorted by start, enclosing calls first), ended by the
/// calls of region `marker` (None: one iteration covers the calls); `mpi(region)` says whether
/// a region is an MPI call; `inserted(region)` whether a region comes every k steps and is
/// left out of the steps' signatures (a collective called less often than the marker);
/// `waits` sorted by ts.
pub(crate) fn iterations(
    calls: &[Call],
    marker: Option<u32>,
    mpi: impl Fn(u32) -> bool,
    inserted: &impl Fn(u32) -> bool,
    waits: &[Waited],
) -> Vec<Iteration> {
    let Some(first) = calls.first() else { return Vec::new() };
    let bounds = match marker {
        Some(m) => marked(calls, m, inserted),
        None => vec![(first.start, calls.iter().map(|c| c.end).max().unwrap_or(first.end))],
    };
    let mut out: Vec<Iteration> =
        bounds.iter().map(|&(start, end)| Iteration { start, end, mpi: 0, waiting: [0; 3] }).collect();
    add_mpi_time(calls, &mpi, &mut out);
    add_waiting(waits, &mut out);
    out
}

/// The calls of `marker` (outermost) as (start, end), the calls that do not enclose two of
/// them or more, and the stretches of those: the calls that begin before each marker call
/// ends, after the one before.
struct Stretches<'a> {
    ends: Vec<(i64, i64)>,
    /// The calls that do not enclose two marker calls or more, in order.
    steps: Vec<&'a Call>,
    /// Each stretch as the range of `steps` it holds.
    stretches: Vec<std::ops::Range<usize>>,
}

impl<'a> Stretches<'a> {
    /// `calls` sorted by start.
    fn of(calls: &'a [Call], marker: u32) -> Self {
        // The marker's calls, outermost only (a marker region calling itself ends one iteration).
        let mut ends: Vec<(i64, i64)> = Vec::new();
        for c in calls.iter().filter(|c| c.region == marker) {
            if ends.last().is_none_or(|last| c.start >= last.1) {
                ends.push((c.start, c.end));
            }
        }
        // Calls that enclose two marker calls or more hold the whole run, not an iteration: a
        // call encloses the marker calls that start from its start (the first of them at
        // `from`, which only moves on as the calls' starts do) to before its end.
        let mut from = 0;
        let steps: Vec<&Call> = calls
            .iter()
            .filter(|c| {
                while from < ends.len() && ends[from].0 < c.start {
                    from += 1;
                }
                c.region == marker || ends.get(from + 1).is_none_or(|second| second.0 >= c.end)
            })
            .collect();
        let mut stretches = Vec::with_capacity(ends.len());
        let mut at = 0;
        for &(_, end) in &ends {
            let from = at;
            while at < steps.len() && steps[at].start < end {
                at += 1;
            }
            stretches.push(from..at);
        }
        Stretches { ends, steps, stretches }
    }

    /// The calls of stretches `range`, in order (None: fewer stretches).
    fn calls(&self, range: std::ops::Range<usize>) -> Option<&[&'a Call]> {
        let stretches = self.stretches.get(range)?;
        match (stretches.first(), stretches.last()) {
            (Some(first), Some(last)) => Some(&self.steps[first.start..last.end]),
            _ => Some(&[]),
        }
    }

    /// Each stretch summed up as its regions in order, those `inserted` left out.
    fn signatures(&self, inserted: &impl Fn(u32) -> bool) -> Vec<u64> {
        let signature = |s: &[&Call]| {
            s.iter()
                .filter(|c| !inserted(c.region))
                .fold(0xcbf2_9ce4_8422_2325u64, |h, c| (h ^ u64::from(c.region)).wrapping_mul(0x0100_0000_01b3))
        };
        self.stretches.iter().map(|r| signature(&self.steps[r.clone()])).collect()
    }
}

/// Whether every call of `region` on this rank closes a step by itself: the stretches between
/// its calls, with the regions `inserted` left out, equal the next one (at least 99 % of them
/// past the first, which holds the setup; three at least).
pub(crate) fn closes_every_step(calls: &[Call], region: u32, inserted: &impl Fn(u32) -> bool) -> bool {
    let signatures = Stretches::of(calls, region).signatures(inserted);
    let n = signatures.len();
    if n < 4 {
        return false;
    }
    let equal = (1..n - 1).filter(|&i| signatures[i] == signatures[i + 1]).count();
    equal * 100 >= (n - 2) * 99
}

/// The (start, end) of each iteration ended by the calls of `marker`.
fn marked(calls: &[Call], marker: u32, inserted: &impl Fn(u32) -> bool) -> Vec<(i64, i64)> {
    let found = Stretches::of(calls, marker);
    if found.ends.is_empty() {
        return Vec::new();
    }
    let signatures = found.signatures(inserted);
    let q = period(&signatures);
    // The first iteration begins where the calls that repeat begin: the stretch after it ends
    // with the calls the first does, and the setup before them is left out.
    let first = found.calls(0..q).unwrap_or_else(|| found.calls(0..found.stretches.len()).unwrap_or_default());
    // The first iteration begins with the longest tail of its calls whose regions all recur in
    // the iteration after it: the setup before (MPI_Init, a barrier) is left out, whatever
    // order the step's own calls come in on this rank.
    let steady: Vec<u32> = found.calls(q..2 * q).unwrap_or_default().iter().map(|c| c.region).collect();
    let tail = first.iter().rev().take_while(|c| steady.contains(&c.region)).count();
    let first_start = match first.len().checked_sub(tail) {
        Some(at) if tail > 0 => first[at].start,
        _ => first.first().map_or(found.ends[0].0, |c| c.start),
    };
    let ends = &found.ends;
    let mut out = Vec::with_capacity(ends.len() / q + 1);
    let mut start = first_start;
    for group in ends.chunks(q) {
        let end = group[group.len() - 1].1;
        out.push((start, end));
        start = end;
    }
    out
}

/// Add to each iteration the time of the MPI calls in it (outermost MPI calls, clipped to it).
fn add_mpi_time(calls: &[Call], mpi: &impl Fn(u32) -> bool, out: &mut [Iteration]) {
    let mut reach = i64::MIN;
    let mut k = 0;
    for c in calls.iter().filter(|c| mpi(c.region)) {
        let (from, to) = (c.start.max(reach), c.end);
        if to <= from {
            continue;
        }
        reach = to;
        while k < out.len() && out[k].end <= from {
            k += 1;
        }
        let mut j = k;
        while j < out.len() && out[j].start < to {
            out[j].mpi += (to.min(out[j].end) - from.max(out[j].start)).max(0);
            j += 1;
        }
    }
}

/// Add to each iteration the waits that fall in it (clipped to it). Time two waits share
/// (waits on two threads, or kinds that overlap in one call) counts once, for the wait that
/// began first, so an iteration never waits longer than it lasts.
fn add_waiting(waits: &[Waited], out: &mut [Iteration]) {
    let mut k = 0;
    let mut reach = i64::MIN;
    for w in waits {
        let (from, to) = (w.ts.max(reach), w.ts.saturating_add(w.wait_ns));
        if to <= from {
            continue;
        }
        reach = to;
        while k < out.len() && out[k].end <= from {
            k += 1;
        }
        let mut j = k;
        while j < out.len() && out[j].start < to {
            out[j].waiting[w.kind] += (to.min(out[j].end) - from.max(out[j].start)).max(0);
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: u32 = 0;
    const INIT: u32 = 1;
    const WORK: u32 = 2;
    const SEND: u32 = 3;
    const ALLREDUCE: u32 = 4;
    const WAIT: u32 = 5;

    fn call(region: u32, start: i64, end: i64) -> Call {
        Call { start, end, region }
    }

    /// main [0, 1000): init [0, 10), then 3 steps of 100 ns from 10: work 50, send 10, gap
    /// 10, allreduce 30.
    fn run() -> Vec<Call> {
        let mut calls = vec![call(MAIN, 0, 1000), call(INIT, 0, 10)];
        for k in 0..3 {
            let t = 10 + 100 * k;
            calls.extend([call(WORK, t, t + 50), call(SEND, t + 50, t + 60), call(ALLREDUCE, t + 70, t + 100)]);
        }
        calls
    }

    #[test]
    fn the_marker_ends_each_iteration_and_the_setup_is_left_out() {
        let mpi = |r: u32| r == SEND || r == ALLREDUCE || r == INIT;
        let waits = [Waited { ts: 170, wait_ns: 20, kind: COLLECTIVE }];
        let got = iterations(&run(), Some(ALLREDUCE), mpi, &|_| false, &waits);
        assert_eq!(got.iter().map(|i| (i.start, i.end)).collect::<Vec<_>>(), [(10, 110), (110, 210), (210, 310)]);
        assert_eq!(got[1].mpi, 40);
        assert_eq!((got[1].waiting_ns(), got[1].mpi_ns(), got[1].compute_ns()), (20, 20, 60));
        assert_eq!(got[0].waiting_ns(), 0);
    }

    #[test]
    fn waits_that_overlap_count_once() {
        let mpi = |r: u32| r == SEND || r == ALLREDUCE || r == INIT;
        // Two waits in the second step's allreduce (170-200) that share 170-180, and one
        // inside another: 30 ns of waiting, not 45.
        let waits = [
            Waited { ts: 170, wait_ns: 10, kind: LATE_SENDER },
            Waited { ts: 170, wait_ns: 20, kind: COLLECTIVE },
            Waited { ts: 175, wait_ns: 5, kind: LATE_RECEIVER },
            Waited { ts: 185, wait_ns: 15, kind: LATE_RECEIVER },
        ];
        let got = iterations(&run(), Some(ALLREDUCE), mpi, &|_| false, &waits);
        assert_eq!(got[1].waiting, [10, 10, 10]);
        assert!(got[1].waiting_ns() <= got[1].mpi);
        let it = got[1];
        assert_eq!(it.compute_ns() + it.mpi_ns() + it.waiting_ns(), it.end - it.start);
    }

    #[test]
    fn the_setup_is_left_out_whatever_order_the_step_begins_in() {
        // A ping-pong's receiving side: init, then receive-send steps whose stretches between
        // two receives are send, receive; the first stretch is init, receive.
        let calls =
            vec![call(INIT, 0, 100), call(ALLREDUCE, 100, 110), call(SEND, 110, 115), call(ALLREDUCE, 115, 130)];
        let got = iterations(&calls, Some(ALLREDUCE), |_| true, &|_| false, &[]);
        assert_eq!(got.iter().map(|i| (i.start, i.end)).collect::<Vec<_>>(), [(100, 110), (110, 130)]);
    }

    /// 30 steps of 100 ns from 10 (work 50, send 10, wait 20) with an allreduce after every
    /// `k`-th step's wait (20 ns more).
    fn every_k(k: i64) -> Vec<Call> {
        let mut calls = vec![call(INIT, 0, 10)];
        let mut t = 10;
        for step in 1..=30 {
            calls.extend([call(WORK, t, t + 50), call(SEND, t + 50, t + 60), call(WAIT, t + 70, t + 90)]);
            t += 100;
            if step % k == 0 {
                calls.push(call(ALLREDUCE, t - 10, t + 10));
                t += 20;
            }
        }
        calls
    }

    #[test]
    fn a_collective_every_k_steps_is_part_of_every_kth_step() {
        let inserted = |r: u32| r == ALLREDUCE;
        for k in [1, 2, 3, 10, 20] {
            let calls = every_k(k);
            assert!(closes_every_step(&calls, WAIT, &inserted), "k = {k}");
            let got = iterations(&calls, Some(WAIT), |_| false, &inserted, &[]);
            assert_eq!(got.len(), 30, "k = {k}");
            // Left in the signatures, the allreduce folds k steps into one (k up to 16).
            if k <= 10 {
                assert_eq!(
                    iterations(&calls, Some(WAIT), |_| false, &|_| false, &[]).len(),
                    30 / k as usize,
                    "k = {k}"
                );
            }
        }
        // A region called twice a step closes no step by itself.
        assert!(!closes_every_step(&run_twice(), SEND, &|_| false));
    }

    /// 20 steps, each with two sends of different kinds of work between.
    fn run_twice() -> Vec<Call> {
        let mut calls = Vec::new();
        for k in 0..20 {
            let t = 100 * k;
            calls.extend([call(WORK, t, t + 40), call(SEND, t + 40, t + 50), call(SEND, t + 60, t + 70)]);
        }
        calls
    }

    #[test]
    fn without_an_enclosing_region_or_a_marker() {
        let calls: Vec<Call> = run().into_iter().filter(|c| c.region != MAIN).collect();
        let got = iterations(&calls, Some(ALLREDUCE), |_| false, &|_| false, &[]);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].start, 10);
        let whole = iterations(&calls, None, |_| false, &|_| false, &[]);
        assert_eq!(whole.iter().map(|i| (i.start, i.end)).collect::<Vec<_>>(), [(0, 310)]);
    }
}
