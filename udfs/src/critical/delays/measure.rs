//! The intervals of a batch of waits measured location by location. What a wait finds in its
//! interval (each side's time per call path and its waiting there) does not depend on the
//! other waits' costs, so a batch of waits is measured before its costs are handed on. Taken
//! in the order the costs are handed on, consecutive waits are of different locations, and
//! each of the two walks of a wait (the waiter's time to its wait, the delayer's to its
//! arrival) began with misses of the processor's cache: the location's stretches, waits and
//! the guesses of where the last look-up ended were cold, a thousand locations' worth of them
//! being touched between two visits of one. Here the walks of a batch are put in order of
//! location and start and shared among the threads a run of whole locations each, so a
//! location's walks follow one another through stretches still in the cache, each search
//! starting where the last one ended; the answer is the same to the last digit, as each walk's
//! result depends only on its location and interval.

use std::ops::Range;

use datafusion::error::Result;
use rayon::prelude::*;

use super::rank_waits::RankWaits;
use super::{Excess, Scratch, SyncPoints, W, excess_of, time_in};
use crate::critical::stretch_store::{StretchReader, StretchStore, rank_thread};
use commdb_catalog::fast_hash::FastMap;

/// Waits measured at a time: enough for tens of walks per location at thousands of locations,
/// so that each location's are close together in its time.
pub(super) const MEASURE_BATCH: usize = 1 << 16;

/// One side of a wait's interval: `loc`'s time in `[a, b)`; `slot` is twice the wait's place
/// in its batch, plus one for the delayer's side.
#[derive(Debug, Clone, Copy)]
struct Walk {
    loc: i64,
    a: i64,
    b: i64,
    slot: u32,
}

/// What a thread's walks found, in lists shared by its walks (a list each would be an
/// allocation a walk): per walk its slot, where its call paths' times lie in `paths`, its
/// waiting, and on the delayer's side where its waits to hand on to lie in `theirs`.
#[derive(Debug, Default)]
struct Found {
    walks: Vec<Walked>,
    paths: Vec<(u32, i64)>,
    theirs: Vec<(usize, f64)>,
}

/// One walk's place in its thread's `Found`.
#[derive(Debug)]
struct Walked {
    slot: u32,
    paths: Range<usize>,
    waiting: i64,
    theirs: Range<usize>,
}

/// One side of a wait as its walk found it: time per call path, waiting, and (the delayer's)
/// waits to hand on to.
struct Side<'a> {
    paths: &'a [(u32, i64)],
    waiting: i64,
    theirs: &'a [(usize, f64)],
}

/// What measures a batch: the store, each location's waits, the synchronisation points.
pub(super) struct Measure<'a> {
    pub store: &'a StretchStore,
    pub by_location: &'a FastMap<i64, RankWaits>,
    pub sync: &'a SyncPoints,
}

impl Measure<'_> {
    /// The interval of each wait of `batch` (the first numbered `from` in the order) and what
    /// it finds there, None where nothing can explain it (a side without stretches); one reader
    /// a thread.
    pub(super) fn batch(&self, readers: &mut [StretchReader], from: usize, batch: &[W]) -> Result<Vec<Option<Excess>>> {
        let (store, sync) = (self.store, self.sync);
        let origin = |r: i64| store.origin(r).unwrap_or(0);
        // Each wait's interval: from when the two last synchronised (known, or searched), else
        // from each location's first stretch.
        let since: Vec<Option<(i64, i64)>> = batch
            .par_iter()
            .with_min_len(1024)
            .map(|w| {
                if !store.contains(w.waiter) || !store.contains(w.delayer) {
                    return None;
                }
                Some(
                    Some((w.since[0], w.since[1]))
                        .filter(|_| w.since != super::NO_SYNC)
                        .or_else(|| sync.previous(rank_thread(w.waiter).0, w.start, rank_thread(w.delayer).0, w.end))
                        .unwrap_or((origin(w.waiter), origin(w.delayer))),
                )
            })
            .collect();
        let mut walks: Vec<Walk> = Vec::with_capacity(2 * batch.len());
        for (k, (w, s)) in batch.iter().zip(&since).enumerate() {
            if let Some((w_from, d_from)) = *s {
                let slot = 2 * k as u32;
                walks.push(Walk { loc: w.waiter, a: w_from, b: w.start, slot });
                walks.push(Walk { loc: w.delayer, a: d_from, b: w.end, slot: slot + 1 });
            }
        }
        walks.par_sort_unstable_by_key(|w| (w.loc, w.a, w.b));
        // Runs of whole locations, about as many walks each, a thread each.
        let parts = runs_of_locations(&walks, readers.len());
        let found: Vec<Result<Found>> = readers
            .par_iter_mut()
            .zip(parts.par_iter())
            .map(|(reader, &(lo, hi))| {
                let mut found = Found::default();
                let mut scratch = Scratch::default();
                for walk in &walks[lo..hi] {
                    self.walk(reader, walk, from, &mut scratch, &mut found)?;
                }
                Ok(found)
            })
            .collect();
        let found: Vec<Found> = found.into_iter().collect::<Result<_>>()?;
        // Where each slot's walk lies: (part, walk), or none.
        let mut at = vec![(u32::MAX, 0u32); 2 * batch.len()];
        for (p, f) in found.iter().enumerate() {
            for (k, walked) in f.walks.iter().enumerate() {
                at[walked.slot as usize] = (p as u32, k as u32);
            }
        }
        let side = |slot: usize| -> Side {
            match at[slot] {
                (u32::MAX, _) => Side { paths: &[], waiting: 0, theirs: &[] },
                (p, k) => {
                    let f = &found[p as usize];
                    let walked = &f.walks[k as usize];
                    Side {
                        paths: &f.paths[walked.paths.clone()],
                        waiting: walked.waiting,
                        theirs: &f.theirs[walked.theirs.clone()],
                    }
                }
            }
        };
        Ok(since
            .par_iter()
            .enumerate()
            .with_min_len(1024)
            .map(|(k, s)| {
                s.map(|_| {
                    let (w, d) = (side(2 * k), side(2 * k + 1));
                    let (paths, waiting) = excess_of(d.paths, w.paths, d.waiting, w.waiting);
                    let paths: Vec<(u32, f64)> = paths.into_iter().map(|(p, e)| (p, e as f64)).collect();
                    let theirs = if waiting > 0 { d.theirs.to_vec() } else { Vec::new() };
                    Excess { paths, waiting: waiting as f64, theirs }
                })
            })
            .collect())
    }

    /// One walk: its location's time in the interval; on the delayer's side (wait number
    /// `from` + slot / 2), where it waited there, its waits there that come later in the order.
    fn walk(
        &self,
        reader: &mut StretchReader,
        walk: &Walk,
        from: usize,
        scratch: &mut Scratch,
        found: &mut Found,
    ) -> Result<()> {
        let none = RankWaits::default();
        let waits = self.by_location.get(&walk.loc).unwrap_or(&none);
        let waiting = time_in(reader, walk.loc, waits, walk.a, walk.b, scratch)?;
        let paths_from = found.paths.len();
        found.paths.extend_from_slice(&scratch.paths.0);
        let theirs_from = found.theirs.len();
        if walk.slot % 2 == 1 && waiting > 0 {
            let i = from + walk.slot as usize / 2;
            found.theirs.extend(
                waits
                    .overlapping(walk.a, walk.b)
                    .filter(|v| v.index > i)
                    .map(|v| (v.index, (v.end.min(walk.b) - v.start.max(walk.a)) as f64)),
            );
        }
        let (paths_to, theirs_to) = (found.paths.len(), found.theirs.len());
        found.walks.push(Walked {
            slot: walk.slot,
            paths: paths_from..paths_to,
            waiting,
            theirs: theirs_from..theirs_to,
        });
        Ok(())
    }
}

/// `parts` ranges of `walks` (in order of location) of about as many walks each, none cutting a
/// location's walks.
fn runs_of_locations(walks: &[Walk], parts: usize) -> Vec<(usize, usize)> {
    let parts = parts.max(1);
    let per = walks.len().div_ceil(parts).max(1);
    let mut out = Vec::with_capacity(parts);
    let mut lo = 0;
    for _ in 0..parts {
        let mut hi = (lo + per).min(walks.len());
        while hi < walks.len() && hi > 0 && walks[hi].loc == walks[hi - 1].loc {
            hi += 1;
        }
        out.push((lo, hi));
        lo = hi;
    }
    if let Some(last) = out.last_mut() {
        last.1 = walks.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_locations_cover_every_walk_and_never_cut_a_location() {
        let walk = |loc: i64| Walk { loc, a: 0, b: 1, slot: 0 };
        for locs in [vec![], vec![3], vec![1, 1, 1, 1, 1], vec![0, 0, 1, 2, 2, 2, 2, 3, 4, 4]] {
            let walks: Vec<Walk> = locs.iter().map(|&l| walk(l)).collect();
            for parts in 1..5 {
                let runs = runs_of_locations(&walks, parts);
                assert_eq!(runs.len(), parts);
                assert_eq!(runs.first().map(|r| r.0), Some(0));
                assert_eq!(runs.last().map(|r| r.1), Some(walks.len()));
                for pair in runs.windows(2) {
                    assert_eq!(pair[0].1, pair[1].0);
                    let cut = pair[0].1;
                    assert!(cut == 0 || cut == walks.len() || walks[cut].loc != walks[cut - 1].loc, "{locs:?} {parts}");
                }
            }
        }
    }
}
