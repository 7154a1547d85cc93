//! The replay's answer: per rank, its compute/MPI pairs on observed and ideal clocks
//! (equations 2 and 3 of the transfer-efficiency monitors) and its transfer efficiency, read
//! from the call store and the ideal starts the replay found.

use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MpiCall};
use super::simulate::Simulated;

/// One output row of ideal_replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub rank: i64,
    pub pair: i64,
    /// The MPI call's region; None for the compute after a rank's last MPI call.
    pub region: Option<u32>,
    pub compute: i64,
    pub observed: i64,
    pub ideal: i64,
    pub observed_end: i64,
    pub ideal_end: i64,
    pub trf_local: f64,
    pub trf_cumulative: f64,
}

/// One output row of transfer_efficiency: the rank (None: all), observed and ideal runtime,
/// and the message sides left out.
pub(super) type Efficiency = (Option<i64>, i64, i64, i64);

fn ratio(a: i64, b: i64) -> f64 {
    if b > 0 { a as f64 / b as f64 } else { 1.0 }
}

/// The replayed run: the calls in their store, their ideal starts, and what could not be placed.
pub(super) struct Replayed {
    pub store: CallStore,
    pub simulated: Simulated,
    pub unplaced: Vec<i64>,
}

impl Replayed {
    /// Compute after rank `ri`'s last MPI call, up to its last event; the observed end of that
    /// call (its origin without one) and its ideal end.
    fn tail(&mut self, ri: usize) -> Result<(i64, i64, i64)> {
        let (first, count, origin, end) = {
            let r = &self.store.ranks[ri];
            (r.first, r.count, r.origin, r.end)
        };
        if count == 0 {
            return Ok((end - origin, origin, origin));
        }
        let last = self.store.call(ri, first + count - 1)?;
        Ok(((end - last.end).max(0), last.end, self.simulated.last_ideal_end[ri]))
    }

    /// Equations 2 and 3 of the transfer-efficiency monitors for rank `ri`, pair by pair: a
    /// pair's simulated time is its compute plus the ideal MPI call's duration, its observed
    /// time its compute plus the observed call's. Nothing is clamped: an ideal call may last
    /// longer than the observed one (its partner's post moved less than its own), and
    /// trf_local is then above 1. A rank's compute after its last MPI call is a last pair
    /// without a call, so the pairs add up to the rank's whole run and the last
    /// trf_cumulative is its efficiency.
    pub fn pairs(&mut self, ri: usize, out: &mut Vec<Pair>) -> Result<()> {
        let (rank, first, count) = {
            let r = &self.store.ranks[ri];
            (r.rank, r.first, r.count)
        };
        // Simulated and observed time over the pairs so far.
        let mut sums = (0i64, 0i64);
        let mut pair = |i: u32, c: MpiCall, ideal_start: i64, ideal_end: i64| {
            let (observed, ideal) = (c.end - c.start, ideal_end - ideal_start);
            sums = (sums.0 + c.compute + ideal, sums.1 + c.compute + observed);
            out.push(Pair {
                rank,
                pair: i64::from(i),
                region: Some(c.region),
                compute: c.compute,
                observed,
                ideal,
                observed_end: c.end,
                ideal_end,
                trf_local: ratio(c.compute + ideal, c.compute + observed),
                trf_cumulative: ratio(sums.0, sums.1),
            });
        };
        // The calls and their ideal starts read in order a block at a time; a call's ideal end
        // is the next one's ideal start less its compute (the last's, the rank's last ideal end).
        let (mut calls, mut starts) = (Vec::new(), Vec::new());
        let (mut ci, mut si) = (0usize, 0usize);
        let mut before: Option<(MpiCall, i64)> = None;
        for i in 0..count {
            let number = first + i;
            if ci == calls.len() {
                calls.clear();
                calls.extend_from_slice(self.store.calls_from(ri, number)?);
                ci = 0;
            }
            if si == starts.len() {
                starts.clear();
                starts.extend_from_slice(self.simulated.starts.starts_from(ri, number)?);
                si = 0;
            }
            let (Some(&c), Some(&s)) = (calls.get(ci), starts.get(si)) else {
                return Err(DataFusionError::Internal(format!("replay: call {number} has no ideal start")));
            };
            (ci, si) = (ci + 1, si + 1);
            if let Some((b, bs)) = before {
                pair(i - 1, b, bs, s - c.compute);
            }
            before = Some((c, s));
        }
        if let Some((b, bs)) = before {
            pair(count - 1, b, bs, self.simulated.last_ideal_end[ri]);
        }
        let (mut sim, mut obs) = sums;
        let (compute, end, ideal_end) = self.tail(ri)?;
        if compute > 0 {
            sim += compute;
            obs += compute;
            out.push(Pair {
                rank,
                pair: i64::from(count),
                region: None,
                compute,
                observed: 0,
                ideal: 0,
                observed_end: end + compute,
                ideal_end: ideal_end + compute,
                trf_local: 1.0,
                trf_cumulative: ratio(sim, obs),
            });
        }
        Ok(())
    }

    /// Per rank (and overall, rank None): observed and ideal runtime from the origin to the
    /// rank's last event (overall: from the earliest origin to the latest end), and the
    /// message sides left out.
    pub fn efficiency(&mut self) -> Result<Vec<Efficiency>> {
        let mut out = Vec::new();
        let (mut obs_all, mut ideal_all, mut unplaced_all) = (0i64, 0i64, 0i64);
        let first = self.store.ranks.iter().map(|r| r.origin).min().unwrap_or(0);
        for ri in self.order() {
            let (rank, origin, end) = {
                let r = &self.store.ranks[ri];
                (r.rank, r.origin, r.end)
            };
            let (compute, _, ideal_end) = self.tail(ri)?;
            let (obs, ideal) = (end - origin, ideal_end + compute - origin);
            out.push((Some(rank), obs, ideal, self.unplaced[ri]));
            obs_all = obs_all.max(end - first);
            ideal_all = ideal_all.max(ideal_end + compute - first);
            unplaced_all += self.unplaced[ri];
        }
        out.push((None, obs_all, ideal_all, unplaced_all));
        Ok(out)
    }

    /// The ranks in rank order (indices into the store's ranks, which come as the calls did).
    pub fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.store.ranks.len()).collect();
        order.sort_unstable_by_key(|&ri| self.store.ranks[ri].rank);
        order
    }
}
