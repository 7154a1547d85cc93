//! A rank's own iterations when no region is called alike by every rank (two coupled
//! applications with their own time steps, a master and workers, ranks of one code that call
//! different collectives): the repeating signature of the rank's calls. Its leaf calls (those
//! that enclose no other call) are read as a sequence of regions, and its period is the
//! smallest number of calls p after which the sequence repeats: over the stretch where every
//! call of a whole period equals the call p later (from the first such period to the last),
//! at least 99 % of the calls do, else at least 90 % (a call now and then that breaks the
//! pattern, a checkpoint, an extra reduction); the stretch must hold three periods and half
//! the calls, so a setup of repeated broadcasts is no period of the run. The periods tried are, for each
//! region, the distance between its calls that occurs most often (a region called once a step
//! is that far apart from its next call). The call that closes each period is then the
//! marker of the rank's iterations (`split` cuts them as for a marker every rank calls), read
//! in the last period that equals the next (the steady state, past any setup): a
//! collective if the period holds one, else an MPI call that waits (MPI_Wait*, MPI_Recv,
//! MPI_Sendrecv, MPI_Probe), else another MPI call, else any; the one called fewest times a
//! period, the latest in the period at equal counts. This is commdb's own rule; Pipit's
//! `detect_pattern` looks for the motif of a time series (docs/guide.md compares them).

use commdb_catalog::fast_hash::FastMap;

use crate::sweeps::call_sweep::Call;

use super::marker::Closing;

/// The repeating signature of one rank's calls: its period in leaf calls, and the region whose
/// calls close the periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub period: usize,
    pub closing: u32,
}

/// The repeating signature of `calls` (one rank's, sorted by start, enclosing calls first), with
/// `class(region)` the strength of each region as a step's end; None when the calls repeat
/// with no period.
pub(crate) fn signature(calls: &[Call], class: impl Fn(u32) -> Closing) -> Option<Signature> {
    let leaves = leaves(calls);
    let n = leaves.len();
    let mut candidates = candidates(&leaves);
    candidates.retain(|&p| p >= 1 && 3 * p <= n);
    candidates.sort_unstable();
    candidates.dedup();
    let tried: Vec<(usize, Stretch)> = candidates.iter().filter_map(|&p| Some((p, stretch(&leaves, p)?))).collect();
    let found = [0.99, 0.9]
        .iter()
        .find_map(|&share| tried.iter().find(|(_, s)| s.matched as f64 >= share * s.compared as f64))?;
    let (p, s) = (found.0, found.1);
    // The last period that equals the next is the steady state, past any setup that repeats.
    Some(Signature { period: p, closing: closing(&leaves[s.last + 1 - p..=s.last], class) })
}

/// The regions of the calls that enclose no other call, in order.
fn leaves(calls: &[Call]) -> Vec<u32> {
    let mut out = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        if calls.get(i + 1).is_none_or(|next| next.start >= c.end) {
            out.push(c.region);
        }
    }
    out
}

/// The periods worth trying: per region, the distance between its successive calls that
/// occurs most often.
fn candidates(leaves: &[u32]) -> Vec<usize> {
    let mut last: FastMap<u32, usize> = FastMap::default();
    let mut distances: FastMap<(u32, usize), u32> = FastMap::default();
    for (i, &r) in leaves.iter().enumerate() {
        if let Some(before) = last.insert(r, i) {
            *distances.entry((r, i - before)).or_default() += 1;
        }
    }
    let mut best: FastMap<u32, (u32, usize)> = FastMap::default();
    for (&(r, d), &count) in &distances {
        let b = best.entry(r).or_insert((0, 0));
        // Most often, then the shorter distance.
        if count > b.0 || (count == b.0 && d < b.1) {
            *b = (count, d);
        }
    }
    best.values().map(|&(_, d)| d).collect()
}

/// The stretch over which the leaves repeat with period p: from the first call whose whole
/// period equals the next to the last such period (`last` its last call), with the calls
/// compared and matched there.
#[derive(Debug, Clone, Copy)]
struct Stretch {
    last: usize,
    compared: usize,
    matched: usize,
}

fn stretch(leaves: &[u32], p: usize) -> Option<Stretch> {
    let same: Vec<bool> = (0..leaves.len() - p).map(|i| leaves[i] == leaves[i + p]).collect();
    // The first i with same[i..i + p] all true, and the last i with same[i + 1 - p..=i].
    let mut run = 0;
    let (mut first, mut last) = (None, None);
    for (i, &s) in same.iter().enumerate() {
        run = if s { run + 1 } else { 0 };
        if run >= p {
            first.get_or_insert(i + 1 - p);
            last = Some(i);
        }
    }
    let (from, to) = (first?, last?);
    let compared = to + 1 - from;
    let matched = same[from..=to].iter().filter(|&&s| s).count();
    // Three periods, and half the calls.
    (compared + p >= 3 * p && 2 * (compared + p) >= leaves.len()).then_some(Stretch { last: to, compared, matched })
}

/// The region that closes `period` (its leaves in order).
fn closing(period: &[u32], class: impl Fn(u32) -> Closing) -> u32 {
    let mut seen: FastMap<u32, (usize, usize)> = FastMap::default();
    for (i, &r) in period.iter().enumerate() {
        let e = seen.entry(r).or_insert((0, i));
        e.0 += 1;
        e.1 = i;
    }
    let mut regions: Vec<(u32, usize, usize)> = seen.into_iter().map(|(r, (n, at))| (r, n, at)).collect();
    regions.sort_unstable_by_key(|&(r, n, at)| (class(r), n, std::cmp::Reverse(at)));
    regions[0].0
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT: u32 = 0;
    const BARRIER: u32 = 1;
    const IRECV: u32 = 2;
    const ISEND: u32 = 3;
    const WAITALL: u32 = 4;
    const ALLREDUCE: u32 = 5;
    const SOLVE: u32 = 6;
    const FINALIZE: u32 = 7;
    const BCAST: u32 = 8;

    fn class(r: u32) -> Closing {
        match r {
            BARRIER | ALLREDUCE | BCAST => Closing::Collective,
            WAITALL => Closing::Waiting,
            SOLVE => Closing::Other,
            _ => Closing::Mpi,
        }
    }

    /// Leaf calls of `regions`, 10 ns each, back to back.
    fn calls(regions: &[u32]) -> Vec<Call> {
        regions
            .iter()
            .enumerate()
            .map(|(i, &r)| Call { start: 10 * i as i64, end: 10 * i as i64 + 10, region: r })
            .collect()
    }

    fn run(setup: &[u32], step: &[u32], steps: usize) -> Vec<u32> {
        let mut out = setup.to_vec();
        for _ in 0..steps {
            out.extend_from_slice(step);
        }
        out.push(FINALIZE);
        out
    }

    #[test]
    fn the_step_collective_closes_the_period() {
        let step = [IRECV, IRECV, ISEND, ISEND, WAITALL, ALLREDUCE];
        let got = signature(&calls(&run(&[INIT, BARRIER], &step, 40)), class);
        assert_eq!(got, Some(Signature { period: 6, closing: ALLREDUCE }));
        // Without a collective, the call that waits; an enclosing call changes nothing.
        let mut nested = vec![Call { start: -1, end: 100_000, region: SOLVE }];
        nested.extend(calls(&run(&[INIT], &[IRECV, ISEND, WAITALL, ISEND], 8)));
        assert_eq!(signature(&nested, class), Some(Signature { period: 4, closing: WAITALL }));
    }

    #[test]
    fn a_short_run_still_repeats() {
        // 4 steps of a ping-pong between an Init and a Finalize.
        let got = signature(&calls(&run(&[INIT], &[SOLVE, IRECV, WAITALL], 4)), class);
        assert_eq!(got, Some(Signature { period: 3, closing: WAITALL }));
    }

    #[test]
    fn a_call_that_breaks_the_pattern_now_and_then_is_tolerated() {
        let step = [SOLVE, IRECV, ISEND, WAITALL, ALLREDUCE, ALLREDUCE];
        let mut seq = vec![INIT];
        for k in 0..60 {
            seq.extend_from_slice(&step);
            if k == 30 {
                seq.push(BCAST);
            }
        }
        let got = signature(&calls(&seq), class);
        assert_eq!(got, Some(Signature { period: 6, closing: ALLREDUCE }));
    }

    #[test]
    fn a_setup_of_repeated_calls_is_no_period() {
        let mut seq = vec![INIT];
        seq.extend(std::iter::repeat_n(BCAST, 20));
        seq.extend(run(&[], &[SOLVE, BCAST, BCAST, BCAST, BCAST, WAITALL], 20));
        assert_eq!(signature(&calls(&seq), class), Some(Signature { period: 6, closing: BCAST }));
        // Calls that never repeat have no signature.
        assert_eq!(signature(&calls(&[INIT, SOLVE, IRECV, FINALIZE]), class), None);
        assert_eq!(signature(&[], class), None);
    }
}
