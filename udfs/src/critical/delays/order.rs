//! The waits in the order their costs are handed on, kept out of memory. At thousands of ranks
//! a run has tens of millions of waits (a wait in every collective of every rank); held as one
//! list while the costs are handed on they took more than the rest of the analysis. They are
//! written to scratch files as they come (the waits between ranks while the messages and
//! collectives are folded, the threads' waits while the calls are swept), put in order by an
//! external merge sort ([`crate::external_sort`]) on `W::handing_order`, their ties reordered
//! (`super::handing_order_within_ties`, a tie at a time), numbered, placed in each location's
//! lists ([`super::rank_waits`]) and written once more in that order, to be read back a batch
//! at a time as their costs are handed on.

use datafusion::common::exec_err;
use datafusion::error::Result;

use super::rank_waits::RankWaits;
use super::{HandingOrder, W, handing_order_within_ties};
use std::sync::mpsc::SyncSender;

use crate::external_sort::{ExternalSort, Record, Sorted};
use crate::spill::{Rows, Spill};
use commdb_catalog::fast_hash::FastMap;

/// Values of a wait in a row of a scratch file (`crate::spill`): waiter, delayer, start, end,
/// since (two), waiters.
pub(super) const ROW: usize = 7;

impl W {
    pub(super) fn row(&self) -> [i64; ROW] {
        let w = self;
        [w.waiter, w.delayer, w.start, w.end, w.since[0], w.since[1], i64::from(w.waiters)]
    }

    /// The wait of a row written by `row`; an error for a row that no wait writes.
    pub(super) fn of_row(r: [i64; ROW]) -> Result<W> {
        let Ok(waiters) = u32::try_from(r[6]) else {
            return exec_err!("delay_costs: its scratch file of waits holds a wait for {} threads", r[6]);
        };
        Ok(W { waiter: r[0], delayer: r[1], start: r[2], end: r[3], since: [r[4], r[5]], waiters })
    }
}

impl Record for W {
    const BYTES: usize = 52;
    type Key = HandingOrder;

    fn key(&self) -> HandingOrder {
        self.handing_order()
    }

    fn encode(&self, out: &mut [u8]) -> Result<()> {
        let r = self.row();
        for (k, v) in r[..6].iter().enumerate() {
            out[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        out[48..52].copy_from_slice(&self.waiters.to_le_bytes());
        Ok(())
    }

    fn decode(b: &[u8]) -> W {
        let at = |k: usize| i64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let waiters = u32::from_le_bytes(b[48..52].try_into().expect("4 bytes"));
        W { waiter: at(0), delayer: at(1), start: at(2), end: at(3), since: [at(4), at(5)], waiters }
    }
}

/// The waits gathered for the order, and each location's count of them.
pub(super) struct Gathered {
    sort: ExternalSort<W>,
    counts: FastMap<i64, usize>,
}

impl Gathered {
    pub(super) fn new(run_bytes: usize) -> Gathered {
        Gathered { sort: ExternalSort::new("delay_costs", run_bytes), counts: FastMap::default() }
    }

    #[cfg(test)]
    fn with_run(run_len: usize) -> Gathered {
        Gathered { sort: ExternalSort::with_run("delay_costs", run_len), counts: FastMap::default() }
    }

    pub(super) fn push(&mut self, w: W) -> Result<()> {
        RankWaits::count(&mut self.counts, &w);
        self.sort.push(w)
    }

    /// Every wait is gathered: them in the order their costs are handed on.
    pub(super) fn in_order(self) -> Result<InOrder> {
        let Gathered { sort, counts } = self;
        let len = sort.len();
        if u32::try_from(len).is_err() {
            return exec_err!("delay_costs: {len} waits; at most {} are traced back at once", u32::MAX);
        }
        let sorted = sort.sorted()?;
        let mut by_location = RankWaits::with_counts(&counts);
        drop(counts);
        let mut rows = Spill::<ROW>::new("delay_costs")?;
        // Two steps at once, each on a core of its own: the runs merged and the ties put in
        // order, a batch of waits at a time, and the waits numbered, placed in their
        // locations' lists and written.
        let (send, receive) = std::sync::mpsc::sync_channel::<Vec<W>>(IN_FLIGHT);
        let mut next = 0usize;
        let merged = std::thread::scope(|scope| -> Result<()> {
            let merging = scope.spawn(move || merge_ties(sorted, &send));
            for batch in receive {
                for w in batch {
                    RankWaits::place(&mut by_location, next, &w);
                    rows.push(w.row())?;
                    next += 1;
                }
            }
            match merging.join() {
                Ok(merged) => merged,
                Err(_) => exec_err!("delay_costs: the merge of its sorted waits stopped"),
            }
        });
        merged?;
        if next as u64 != len {
            return exec_err!("delay_costs: its sorted waits ended after {next} of {len}");
        }
        RankWaits::seal(&mut by_location);
        Ok(InOrder { waits: Waits { rows: rows.into_rows()?, read: Vec::new() }, len: len as usize, by_location })
    }
}

/// Waits handed from the merge to their placing at a time, and such batches under way at once.
const HANDED: usize = 1 << 13;
const IN_FLIGHT: usize = 4;

/// The sorted waits, each tie of end put in the order its costs are handed on
/// (`handing_order_within_ties`), sent on in batches of whole ties until the waits end or the
/// other side stops listening.
fn merge_ties(mut sorted: Sorted<W>, send: &SyncSender<Vec<W>>) -> Result<()> {
    let mut batch: Vec<W> = Vec::with_capacity(HANDED);
    let mut tie: Vec<W> = Vec::new();
    loop {
        let w = sorted.next()?;
        if tie.last().is_some_and(|t| w.is_none_or(|w| t.end != w.end)) {
            handing_order_within_ties(&mut tie, |w| w);
            batch.append(&mut tie);
            if (batch.len() >= HANDED || w.is_none())
                && send.send(std::mem::replace(&mut batch, Vec::with_capacity(HANDED))).is_err()
            {
                return Ok(());
            }
        }
        match w {
            Some(w) => tie.push(w),
            None => return Ok(()),
        }
    }
}

/// The waits in the order their costs are handed on, read a batch at a time, and each
/// location's waits by their number in it.
pub(super) struct InOrder {
    pub(super) waits: Waits,
    pub(super) len: usize,
    pub(super) by_location: FastMap<i64, RankWaits>,
}

/// The waits in order, read back from their scratch file.
pub(super) struct Waits {
    rows: Rows<ROW>,
    /// The rows of the last batch read.
    read: Vec<[i64; ROW]>,
}

impl Waits {
    /// The next waits, at most `max`, in place of `out`'s (none: no more).
    pub(super) fn next(&mut self, out: &mut Vec<W>, max: usize) -> Result<()> {
        self.rows.next_rows(&mut self.read, max)?;
        out.clear();
        for &r in &self.read {
            out.push(W::of_row(r)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::NO_SYNC;
    use super::*;

    #[test]
    fn the_order_out_of_memory_is_the_order_in_memory() {
        // Waits with many ties of end, chains among the ties, threads' waits with a known
        // synchronisation, sorted in runs of 7; fewer than a batch handed from the merge to
        // the placing, and several batches' worth.
        for n in [500, 3 * HANDED as i64 + 17] {
            let mut all: Vec<W> = Vec::new();
            for k in 0..n {
                let (waiter, delayer) = (k % 5, (k * 3 + 1) % 5);
                let end = 100_000 - (k / 4) * 3;
                let since = if k % 11 == 0 { [end - 50, end - 40] } else { NO_SYNC };
                all.push(W { waiter, delayer, start: end - 1 - k % 7, end, since, waiters: 1 + (k % 13 == 0) as u32 });
            }
            let mut gathered = Gathered::with_run(7);
            for w in &all {
                gathered.push(*w).unwrap();
            }
            let mut in_order = gathered.in_order().unwrap();
            let mut expected = all.clone();
            expected.sort_unstable_by_key(W::handing_order);
            handing_order_within_ties(&mut expected, |w| w);
            let (mut got, mut batch) = (Vec::new(), Vec::new());
            loop {
                in_order.waits.next(&mut batch, 64).unwrap();
                if batch.is_empty() {
                    break;
                }
                got.extend(batch.iter().copied());
            }
            assert_eq!(in_order.len, all.len());
            assert_eq!(got.iter().map(W::row).collect::<Vec<_>>(), expected.iter().map(W::row).collect::<Vec<_>>());
            let by_loc = RankWaits::of(&expected);
            for (loc, r) in &by_loc {
                let a: Vec<_> = r.overlapping(i64::MIN / 2, i64::MAX).collect();
                let b: Vec<_> = in_order.by_location[loc].overlapping(i64::MIN / 2, i64::MAX).collect();
                assert_eq!(a, b, "location {loc} of {n} waits");
            }
        }
    }
}
