//! The replay's answer: per rank, its compute/MPI pairs on observed and ideal clocks
//! (equations 2 and 3 of the transfer-efficiency monitors) and its transfer efficiency, read
//! from the call store and the ideal starts the replay found. A rank's pairs are made from
//! where its answer stands (`RankAnswer`), so that a rank can be answered in pieces, and
//! several ranks side by side, a thread each, each reading its own rank's blocks.

use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MpiCall, RankCallsReader};
use super::ideal_starts::RankStartsReader;
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

/// Where the answer for one rank stands: its pairs are made a call at a time, one behind (a
/// call's ideal end is the next one's ideal start less its compute), so that a rank can be
/// answered in pieces and ranks side by side.
#[derive(Debug)]
pub(super) struct RankAnswer {
    /// The rank's index in the store, and its number.
    pub ri: usize,
    rank: i64,
    /// Its first call's number and how many it made; its origin and last event.
    first: u32,
    count: u32,
    origin: i64,
    end: i64,
    /// The next call to read (0 for the rank's first), and the one read before it with its
    /// ideal start.
    next: u32,
    before: Option<(MpiCall, i64)>,
    /// Simulated and observed time over the pairs so far.
    sums: (i64, i64),
    done: bool,
}

impl RankAnswer {
    /// The rows it makes at most: a pair per call and the compute after the last.
    pub fn rows(&self) -> usize {
        self.count as usize + 1
    }

    pub fn done(&self) -> bool {
        self.done
    }

    /// A pair of the rank: call `i` (its `pair` number) from its ideal start to its ideal end.
    fn pair(&mut self, out: &mut Vec<Pair>, i: u32, c: MpiCall, ideal_start: i64, ideal_end: i64) {
        let (observed, ideal) = (c.end - c.start, ideal_end - ideal_start);
        self.sums = (self.sums.0 + c.compute + ideal, self.sums.1 + c.compute + observed);
        out.push(Pair {
            rank: self.rank,
            pair: i64::from(i),
            region: Some(c.region),
            compute: c.compute,
            observed,
            ideal,
            observed_end: c.end,
            ideal_end,
            trf_local: ratio(c.compute + ideal, c.compute + observed),
            trf_cumulative: ratio(self.sums.0, self.sums.1),
        });
    }

    /// Equations 2 and 3 of the transfer-efficiency monitors for the rank, pair by pair, from
    /// where it stands: about `most` more pairs appended to `out` (one more at its end). A
    /// pair's simulated time is its compute plus the ideal MPI call's duration, its observed
    /// time its compute plus the observed call's. Nothing is clamped: an ideal call may last
    /// longer than the observed one (its partner's post moved less than its own), and trf_local
    /// is then above 1. The rank's compute after its last MPI call is a last pair without a
    /// call, so the pairs add up to the rank's whole run and the last trf_cumulative is its
    /// efficiency.
    pub fn step(
        &mut self,
        calls: &mut RankCallsReader<'_>,
        starts: &mut RankStartsReader<'_>,
        last_ideal_end: i64,
        out: &mut Vec<Pair>,
        most: usize,
    ) -> Result<()> {
        let limit = out.len() + most.max(1);
        // The calls and their ideal starts read in order a block at a time.
        while self.next < self.count && out.len() < limit {
            let number = self.first + self.next;
            let (calls, starts) = (calls.calls_from(number)?, starts.starts_from(number)?);
            let n = calls.len().min(starts.len()).min(limit - out.len());
            if n == 0 {
                return Err(DataFusionError::Internal(format!("replay: call {number} has no ideal start")));
            }
            for (&c, &s) in calls[..n].iter().zip(&starts[..n]) {
                if let Some((b, bs)) = self.before {
                    self.pair(out, self.next - 1, b, bs, s - c.compute);
                }
                self.before = Some((c, s));
                self.next += 1;
            }
        }
        if self.next < self.count {
            return Ok(());
        }
        let last_end = self.before.take().map(|(b, bs)| {
            self.pair(out, self.count - 1, b, bs, last_ideal_end);
            b.end
        });
        let (compute, end, ideal_end) = after_last(self.origin, self.end, last_end, last_ideal_end);
        if compute > 0 {
            let (simulated, observed) = (self.sums.0 + compute, self.sums.1 + compute);
            out.push(Pair {
                rank: self.rank,
                pair: i64::from(self.count),
                region: None,
                compute,
                observed: 0,
                ideal: 0,
                observed_end: end + compute,
                ideal_end: ideal_end + compute,
                trf_local: 1.0,
                trf_cumulative: ratio(simulated, observed),
            });
        }
        self.done = true;
        Ok(())
    }
}

/// The compute after a rank's last MPI call (ending at `last_end`) up to its last event
/// (`end`), the observed end of that call and its ideal end; a rank without calls computes from
/// its origin.
fn after_last(origin: i64, end: i64, last_end: Option<i64>, last_ideal_end: i64) -> (i64, i64, i64) {
    match last_end {
        Some(e) => ((end - e).max(0), e, last_ideal_end),
        None => (end - origin, origin, origin),
    }
}

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
        let last_end = match count {
            0 => None,
            _ => Some(self.store.call(ri, first + count - 1)?.end),
        };
        Ok(after_last(origin, end, last_end, self.simulated.last_ideal_end[ri]))
    }

    /// Where the answer for rank `ri` begins.
    pub fn answer_for(&self, ri: usize) -> RankAnswer {
        let r = &self.store.ranks[ri];
        RankAnswer {
            ri,
            rank: r.rank,
            first: r.first,
            count: r.count,
            origin: r.origin,
            end: r.end,
            next: 0,
            before: None,
            sums: (0, 0),
            done: false,
        }
    }

    /// The ranks of `answers` (distinct ones) answered side by side, one thread each: each
    /// goes on until it is done or has made `most` rows, handing its pairs to `make` a batch
    /// of `batch_rows` at a time; what `make` gave, per rank in the order of `answers`.
    pub fn answer<B: Send>(
        &mut self,
        answers: &mut [RankAnswer],
        most: usize,
        batch_rows: usize,
        make: &(dyn Fn(&[Pair]) -> Result<B> + Sync),
    ) -> Result<Vec<Vec<B>>> {
        use rayon::prelude::*;
        let ris: Vec<usize> = answers.iter().map(|a| a.ri).collect();
        let internal = || DataFusionError::Internal("replay: a rank answered twice at once".into());
        let Replayed { store, simulated, .. } = self;
        let calls = store.rank_readers(&ris)?.ok_or_else(internal)?;
        let starts = simulated.starts.rank_readers(&ris).ok_or_else(internal)?;
        let last_ideal_end = &simulated.last_ideal_end;
        answers
            .par_iter_mut()
            .zip(calls.into_par_iter().zip(starts.into_par_iter()))
            .map(|(a, (mut calls, mut starts))| {
                let (mut rows, mut made, mut batches) = (Vec::with_capacity(batch_rows), 0usize, Vec::new());
                while !a.done && made < most {
                    rows.clear();
                    a.step(&mut calls, &mut starts, last_ideal_end[a.ri], &mut rows, batch_rows.min(most - made))?;
                    made += rows.len();
                    if !rows.is_empty() {
                        batches.push(make(&rows)?);
                    }
                }
                Ok(batches)
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::ideal_starts::IdealStarts;

    /// Three ranks (one without calls) with made-up ideal starts: every call starts ideally
    /// `shift` earlier than observed, rank by rank.
    fn replayed() -> Replayed {
        let mut store = CallStore::new("test").unwrap();
        let mut runs = Vec::new();
        for (rank, n) in [(4i64, 700usize), (2, 0), (9, 300)] {
            let calls: Vec<MpiCall> = (0..n as i64)
                .map(|i| MpiCall {
                    start: 100 + i * 10,
                    end: 100 + i * 10 + 3 + i % 4,
                    compute: if i == 0 { 0 } else { 7 - (i - 1) % 4 },
                    region: store.region(&format!("MPI_{}", i % 5)),
                })
                .collect();
            store.push(rank, 100, 100 + n as i64 * 10 + 25, &calls).unwrap();
            runs.push((rank, calls));
        }
        store.finish_writing().unwrap();
        let mut starts = IdealStarts::new("test", store.ranks.iter().map(|r| r.first)).unwrap();
        let mut last_ideal_end = Vec::new();
        for (ri, (rank, calls)) in runs.iter().enumerate() {
            let shift = *rank;
            for (i, c) in calls.iter().enumerate() {
                starts.set(ri, store.ranks[ri].first + i as u32, c.start - shift * i as i64 / 50).unwrap();
            }
            last_ideal_end.push(calls.last().map_or(100, |c| c.end - shift));
        }
        let unplaced = vec![0; runs.len()];
        Replayed { store, simulated: Simulated { starts, last_ideal_end }, unplaced }
    }

    fn rows(made: Vec<Vec<Vec<Pair>>>) -> Vec<Pair> {
        made.into_iter().flatten().flatten().collect()
    }

    #[test]
    fn ranks_answered_in_pieces_and_side_by_side_give_the_rows_of_each_alone() {
        let mut r = replayed();
        let order = r.order();
        let make = |rows: &[Pair]| Ok(rows.to_vec());
        // Each rank alone and whole, in rank order.
        let mut alone = Vec::new();
        for &ri in &order {
            let mut a = [r.answer_for(ri)];
            alone.extend(rows(r.answer(&mut a, usize::MAX, 1 << 12, &make).unwrap()));
            assert!(a[0].done());
        }
        assert_eq!(alone.len(), 700 + 1 + 300 + 1 + 1, "a pair per call and the compute after the last");
        assert_eq!(alone.iter().filter(|p| p.region.is_none()).count(), 3);
        let last = alone.iter().rfind(|p| p.rank == 9).unwrap();
        assert_eq!((last.pair, last.compute), (300, 29), "from the last call's end to the rank's");
        // All at once, side by side, in batches of 64.
        let mut all: Vec<RankAnswer> = order.iter().map(|&ri| r.answer_for(ri)).collect();
        let side_by_side = rows(r.answer(&mut all, usize::MAX, 64, &make).unwrap());
        assert_eq!(side_by_side, alone);
        // Each rank a few rows at a time (fewer than a block of calls or starts, and more).
        for most in [1, 37, 300] {
            let mut pieces = Vec::new();
            for &ri in &order {
                let mut a = [r.answer_for(ri)];
                while !a[0].done() {
                    let made = r.answer(&mut a, most, 16, &make).unwrap();
                    assert!(
                        made[0].iter().map(Vec::len).sum::<usize>() <= most + 2,
                        "the last call's pair and the compute after it may end a piece"
                    );
                    pieces.extend(rows(made));
                }
            }
            assert_eq!(pieces, alone, "{most} rows at a time");
        }
        // A rank twice at once is refused.
        let mut twice = [r.answer_for(order[0]), r.answer_for(order[0])];
        assert!(r.answer(&mut twice, usize::MAX, 64, &make).is_err());
    }
}
