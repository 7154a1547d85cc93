//! Each location's waits, found by the time they overlap: a wait's interval takes out of each
//! side's time the waiting there, and hands the delayer's share of waiting on to the delayer's
//! waits in it. A location keeps its waits' numbers (their place in the order the costs are
//! handed on, 4 bytes each: a hybrid run has tens of millions) with their starts and ends beside
//! them, by start, so that a look-up reads only the location's own lists (reading each wait from
//! the list of all of them took a miss of the cache per step: a sixth of `delay_costs`' time),
//! and the list of all waits need not be held while the costs are handed on.
//!
//! The lists are made with the room they need: the waits are counted per location first
//! (`count`), then placed (`place`) in any order, then put in order of start (`seal`).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use commdb_catalog::fast_hash::FastMap;

use super::W;
use crate::critical::near::partition_point_near;

/// One location's waits, by start.
#[derive(Debug, Default)]
pub(in crate::critical) struct RankWaits {
    list: Vec<u32>,
    starts: Vec<i64>,
    ends: Vec<i64>,
    longest: i64,
    /// Where the last look-up ended, which the next starts from (threads may race on it: it
    /// is only a guess).
    near: AtomicUsize,
}

/// A wait of a location as a look-up finds it: its number, start and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::critical) struct Held {
    pub(in crate::critical) index: usize,
    pub(in crate::critical) start: i64,
    pub(in crate::critical) end: i64,
}

/// The locations wait `w` stands for: its waiter and the `waiters` - 1 threads after it.
fn locations(w: &W) -> impl Iterator<Item = i64> + '_ {
    (0..i64::from(w.waiters)).map(move |k| w.waiter + k)
}

impl RankWaits {
    /// Count wait `w` under each location it stands for.
    pub(in crate::critical) fn count(counts: &mut FastMap<i64, usize>, w: &W) {
        for loc in locations(w) {
            *counts.entry(loc).or_default() += 1;
        }
    }

    /// Every location's lists, with room for the waits `counts` found.
    pub(in crate::critical) fn with_counts(counts: &FastMap<i64, usize>) -> FastMap<i64, RankWaits> {
        counts
            .iter()
            .map(|(&loc, &n)| {
                let r = RankWaits {
                    list: Vec::with_capacity(n),
                    starts: Vec::with_capacity(n),
                    ends: Vec::with_capacity(n),
                    ..RankWaits::default()
                };
                (loc, r)
            })
            .collect()
    }

    /// Place wait `w`, number `index` (below 2^32), under each location it stands for.
    pub(in crate::critical) fn place(by_loc: &mut FastMap<i64, RankWaits>, index: usize, w: &W) {
        for loc in locations(w) {
            let r = by_loc.entry(loc).or_default();
            r.list.push(index as u32);
            r.starts.push(w.start);
            r.ends.push(w.end);
            r.longest = r.longest.max(w.end - w.start);
        }
    }

    /// Every wait is placed: each location's in order of start.
    pub(in crate::critical) fn seal(by_loc: &mut FastMap<i64, RankWaits>) {
        for r in by_loc.values_mut() {
            if r.starts.is_sorted() {
                continue;
            }
            let mut order: Vec<u32> = (0..r.list.len() as u32).collect();
            order.sort_by_key(|&k| r.starts[k as usize]);
            r.list = order.iter().map(|&k| r.list[k as usize]).collect();
            r.starts = order.iter().map(|&k| r.starts[k as usize]).collect();
            r.ends = order.iter().map(|&k| r.ends[k as usize]).collect();
        }
    }

    /// Each location's waits of `all` (fewer than 2^32), numbered by their place there.
    pub(in crate::critical) fn of(all: &[W]) -> FastMap<i64, RankWaits> {
        let mut counts = FastMap::default();
        for w in all {
            Self::count(&mut counts, w);
        }
        let mut by_loc = Self::with_counts(&counts);
        for (i, w) in all.iter().enumerate() {
            Self::place(&mut by_loc, i, w);
        }
        Self::seal(&mut by_loc);
        by_loc
    }

    /// Bytes held.
    pub(in crate::critical) fn held_bytes(&self) -> usize {
        4 * self.list.capacity() + 8 * (self.starts.capacity() + self.ends.capacity()) + 64
    }

    /// The waits that overlap `[a, b)`, found by their start: one that starts more than the
    /// longest wait before `a` has ended by then.
    pub(in crate::critical) fn overlapping(&self, a: i64, b: i64) -> impl Iterator<Item = Held> + '_ {
        let to = partition_point_near(&self.starts, self.near.load(Relaxed), |&s| s < b);
        self.near.store(to, Relaxed);
        let from = partition_point_near(&self.starts[..to], to, |&s| s < a.saturating_sub(self.longest));
        (from..to.max(from))
            .map(move |k| Held { index: self.list[k] as usize, start: self.starts[k], end: self.ends[k] })
            .filter(move |h| h.end > a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(waiter: i64, start: i64, end: i64, waiters: u32) -> W {
        W { waiter, delayer: 99, start, end, since: super::super::NO_SYNC, waiters }
    }

    #[test]
    fn a_location_s_waits_are_found_by_overlap_whatever_order_they_are_placed_in() {
        // Placed latest first, as the costs are handed on; one wait stands for locations 1 and 2.
        let all = [wait(1, 50, 60, 1), wait(1, 30, 45, 2), wait(1, 10, 20, 1), wait(2, 0, 5, 1)];
        let by_loc = RankWaits::of(&all);
        let found = |loc: i64, a: i64, b: i64| -> Vec<usize> {
            by_loc.get(&loc).map(|r| r.overlapping(a, b).map(|h| h.index).collect()).unwrap_or_default()
        };
        assert_eq!(found(1, 0, 100), vec![2, 1, 0]);
        assert_eq!(found(1, 19, 31), vec![2, 1]);
        assert_eq!(found(1, 20, 30), Vec::<usize>::new());
        assert_eq!(found(1, 44, 51), vec![1, 0]);
        assert_eq!(found(2, 0, 40), vec![3, 1]);
        assert_eq!(found(3, 0, 100), Vec::<usize>::new());
        let h = by_loc[&2].overlapping(40, 41).next();
        assert_eq!(h, Some(Held { index: 1, start: 30, end: 45 }));
    }

    #[test]
    fn the_lists_are_made_with_the_room_the_counts_ask() {
        let all: Vec<W> = (0..1000).map(|k| wait(k % 3, 10 * k, 10 * k + 5, 1)).collect();
        let by_loc = RankWaits::of(&all);
        for r in by_loc.values() {
            assert_eq!(r.list.capacity(), r.list.len());
            assert_eq!(r.starts.capacity(), r.list.len());
        }
        assert_eq!(by_loc.values().map(|r| r.list.len()).sum::<usize>(), 1000);
    }
}
