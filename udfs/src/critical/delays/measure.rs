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
//! result depends only on its location and interval. For the same reason a walk of the same
//! location and interval as the one before is not walked again: the members of a collective
//! that all waited for its last to enter share the delayer's side (the last one's time since
//! the collective before, where they all synchronised), a thousand walks of one interval at a
//! thousand ranks, of which one is walked.

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

impl Walk {
    /// Its location and interval: the walks' order, in which walks alike lie side by side.
    fn interval(&self) -> (i64, i64, i64) {
        (self.loc, self.a, self.b)
    }
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

/// One walk's place in its thread's `Found` (walks of one location and interval share their
/// call paths' times there).
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
        walks.par_sort_unstable_by_key(Walk::interval);
        let found = self.walk_all(readers, &walks, from)?;
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

    /// Every walk of `walks` (in order of location and interval), in runs of whole locations of
    /// about as many walks each, a thread (and reader) each.
    fn walk_all(&self, readers: &mut [StretchReader], walks: &[Walk], from: usize) -> Result<Vec<Found>> {
        let parts = runs_of_locations(walks, readers.len(), |w| w.loc);
        let found: Vec<Result<Found>> = readers
            .par_iter_mut()
            .zip(parts.par_iter())
            .map(|(reader, &(lo, hi))| {
                let mut found = Found::default();
                let mut scratch = Scratch::default();
                for (k, walk) in walks[lo..hi].iter().enumerate() {
                    let again = k > 0 && walks[lo + k - 1].interval() == walk.interval();
                    self.walk(reader, walk, from, again, &mut scratch, &mut found)?;
                }
                Ok(found)
            })
            .collect();
        found.into_iter().collect()
    }

    /// One walk: its location's time in the interval (`again`: the same as the walk before
    /// it, whose times it shares); on the delayer's side (wait number `from` + slot / 2), where
    /// it waited there, its waits there that come later in the order.
    fn walk(
        &self,
        reader: &mut StretchReader,
        walk: &Walk,
        from: usize,
        again: bool,
        scratch: &mut Scratch,
        found: &mut Found,
    ) -> Result<()> {
        let none = RankWaits::default();
        let waits = self.by_location.get(&walk.loc).unwrap_or(&none);
        let before = found.walks.last().filter(|_| again).map(|w| (w.paths.clone(), w.waiting));
        let (paths, waiting) = match before {
            Some(before) => before,
            None => {
                let waiting = time_in(reader, walk.loc, waits, walk.a, walk.b, scratch)?;
                let paths_from = found.paths.len();
                found.paths.extend_from_slice(&scratch.paths.0);
                (paths_from..found.paths.len(), waiting)
            }
        };
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
        let theirs_to = found.theirs.len();
        found.walks.push(Walked { slot: walk.slot, paths, waiting, theirs: theirs_from..theirs_to });
        Ok(())
    }
}

/// `parts` ranges of `walks` (in order of location, `loc` each one's) of about as many walks
/// each, none cutting a location's walks.
pub(super) fn runs_of_locations<T>(walks: &[T], parts: usize, loc: impl Fn(&T) -> i64) -> Vec<(usize, usize)> {
    let parts = parts.max(1);
    let per = walks.len().div_ceil(parts).max(1);
    let mut out = Vec::with_capacity(parts);
    let mut lo = 0;
    for _ in 0..parts {
        let mut hi = (lo + per).min(walks.len());
        while hi < walks.len() && hi > 0 && loc(&walks[hi]) == loc(&walks[hi - 1]) {
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
    use crate::critical::stretch_store::location;
    use crate::sweeps::stretches::Stretch;

    /// Ranks 0-5, one thread each, a stretch every 10 ns on call paths 0-3 (rank 5 also on 4);
    /// 40 collectives a microsecond apart in which ranks 0-4 wait for rank 5 since the one
    /// before (their walks of rank 5 alike), and between them rank 5 waits for rank 4 once
    /// (so that it has waits to hand on to) and rank 1 for rank 2 since a time of its own.
    fn run() -> (StretchStore, Vec<W>) {
        let mut store = StretchStore::new("test").unwrap();
        for rank in 0..6 {
            let list: Vec<Stretch> = (0..4_000)
                .map(|k| {
                    let path = ((k + rank) % (4 + (rank == 5) as i64)) as u32;
                    Stretch { from: 10 * k, to: 10 * k + 10, region: path, path, call_start: None, hand: None }
                })
                .collect();
            store.push(location(rank, 0), &list, true).unwrap();
        }
        store.finish_writing(99).unwrap();
        let mut waits = Vec::new();
        for j in 1..40 {
            let (end, before) = (1_000 * j, 1_000 * (j - 1));
            for rank in 0..5 {
                let (waiter, delayer) = (location(rank, 0), location(5, 0));
                waits.push(W {
                    waiter,
                    delayer,
                    start: end - 30 * (rank + 1),
                    end,
                    since: [before, before],
                    waiters: 1,
                });
            }
            let (waiter, delayer) = (location(5, 0), location(4, 0));
            waits.push(W { waiter, delayer, start: end - 600, end: end - 400, since: [before, before], waiters: 1 });
            let (waiter, delayer) = (location(1, 0), location(2, 0));
            waits.push(W {
                waiter,
                delayer,
                start: end - 300,
                end: end - 250,
                since: [before + 7 * j, before],
                waiters: 1,
            });
        }
        waits.sort_by_key(W::handing_order);
        (store, waits)
    }

    #[test]
    fn walks_of_one_interval_are_walked_once_and_each_wait_finds_what_its_own_walks_find() {
        let (store, waits) = run();
        let by_location = RankWaits::of(&waits);
        let sync = SyncPoints::default();
        let measure = Measure { store: &store, by_location: &by_location, sync: &sync };
        // Each wait's two sides walked apart, by hand.
        let mut reader = store.reader().unwrap();
        let mut scratch = Scratch::default();
        let none = RankWaits::default();
        let mut side = |loc: i64, a: i64, b: i64| {
            let waits = by_location.get(&loc).unwrap_or(&none);
            let waiting = time_in(&mut reader, loc, waits, a, b, &mut scratch).unwrap();
            (scratch.paths.0.clone(), waiting)
        };
        for threads in 1..4 {
            let mut readers: Vec<StretchReader> = (0..threads).map(|_| store.reader().unwrap()).collect();
            let (from, batch) = (3, &waits[3..]);
            let measured = measure.batch(&mut readers, from, batch).unwrap();
            assert_eq!(measured.len(), batch.len());
            let mut handing_on = 0;
            for (k, (w, got)) in batch.iter().zip(&measured).enumerate() {
                let got = got.as_ref().unwrap();
                let (w_paths, w_waiting) = side(w.waiter, w.since[0], w.start);
                let (d_paths, d_waiting) = side(w.delayer, w.since[1], w.end);
                let (paths, waiting) = excess_of(&d_paths, &w_paths, d_waiting, w_waiting);
                let paths: Vec<(u32, f64)> = paths.into_iter().map(|(p, e)| (p, e as f64)).collect();
                assert_eq!((&got.paths, got.waiting), (&paths, waiting as f64), "wait {k} on {threads} threads");
                let theirs: Vec<(usize, f64)> = match waiting > 0 {
                    true => by_location[&w.delayer]
                        .overlapping(w.since[1], w.end)
                        .filter(|v| v.index > from + k)
                        .map(|v| (v.index, (v.end.min(w.end) - v.start.max(w.since[1])) as f64))
                        .collect(),
                    false => Vec::new(),
                };
                assert_eq!(got.theirs, theirs, "wait {k} on {threads} threads");
                handing_on += usize::from(!theirs.is_empty());
            }
            assert!(handing_on > 0, "some delayer's waiting is handed on");
        }
        // The walks of rank 5 in each collective's interval (five of them) read the stretches
        // once: their call paths' times are held once.
        let mut walks: Vec<Walk> = waits
            .iter()
            .enumerate()
            .flat_map(|(k, w)| {
                let slot = 2 * k as u32;
                [
                    Walk { loc: w.waiter, a: w.since[0], b: w.start, slot },
                    Walk { loc: w.delayer, a: w.since[1], b: w.end, slot: slot + 1 },
                ]
            })
            .collect();
        walks.sort_unstable_by_key(Walk::interval);
        let mut distinct = walks.clone();
        distinct.dedup_by_key(|w| w.interval());
        assert_eq!(distinct.len(), walks.len() - 4 * 39);
        let held: usize = distinct.iter().map(|w| side(w.loc, w.a, w.b).0.len()).sum();
        let mut readers: Vec<StretchReader> = (0..2).map(|_| store.reader().unwrap()).collect();
        let found = measure.walk_all(&mut readers, &walks, 0).unwrap();
        assert_eq!(found.iter().map(|f| f.walks.len()).sum::<usize>(), walks.len());
        assert_eq!(found.iter().map(|f| f.paths.len()).sum::<usize>(), held);
    }

    #[test]
    fn runs_of_locations_cover_every_walk_and_never_cut_a_location() {
        let walk = |loc: i64| Walk { loc, a: 0, b: 1, slot: 0 };
        for locs in [vec![], vec![3], vec![1, 1, 1, 1, 1], vec![0, 0, 1, 2, 2, 2, 2, 3, 4, 4]] {
            let walks: Vec<Walk> = locs.iter().map(|&l| walk(l)).collect();
            for parts in 1..5 {
                let runs = runs_of_locations(&walks, parts, |w| w.loc);
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
