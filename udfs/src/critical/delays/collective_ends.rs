//! One rank's ends of the collective instances in which someone waited, the synchronisation
//! points that `delay_costs` traces a wait's interval back to ([`super::SyncPoints`]), kept in
//! about 5 bytes an end where three lists took 16.
//!
//! Every member's leaving of every such instance is a point: at 1,024 ranks and 25,000
//! iterations that is 25.6 M ends, which one task folds on a distributed engine (the step of
//! the waits' intervals). While they are folded the ends go to the rank's list as differences
//! from the end before (LEB128, `crate::varint`: an instance's id and its end, each a few
//! bytes). Sealed, the list is put in order of the end and cut into blocks of [`BLOCK`] ends,
//! each block's first end and id kept whole beside it and the others as differences, so that
//! the search for a time halves the blocks' first ends and reads one block, and the walk back
//! from there reads a block at a time. A rank's end of an instance is found by its id: when
//! the ids come in order with the ends (one communicator, or several whose collectives do not
//! overlap) by halving the blocks' first ids; otherwise through a list of (id, place) in order
//! of id, 8 bytes an end more. `SyncPoints::seal` numbers the instances in order of (comm,
//! instance), whatever the order they came in, so that a rank's ids rise with its ends.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use datafusion::common::internal_err;
use datafusion::error::Result;

use crate::critical::near::partition_point_near;
use crate::varint;

/// Ends a block holds.
pub(super) const BLOCK: usize = 16;

/// A rank's ends as they are folded, in the order they come.
#[derive(Debug, Default)]
pub(super) struct EndsBuilder {
    bytes: Vec<u8>,
    last_end: i64,
    last_id: u32,
    len: usize,
}

impl EndsBuilder {
    /// The rank left instance `id` at `end`.
    pub(super) fn push(&mut self, id: u32, end: i64) {
        if self.bytes.capacity() - self.bytes.len() < 2 * varint::MAX_BYTES {
            // By half again, not twice: the lists of every rank are what the fold holds.
            self.bytes.reserve_exact((self.bytes.capacity() / 2).max(256));
        }
        varint::put_signed(&mut self.bytes, i64::from(id).wrapping_sub(i64::from(self.last_id)));
        varint::put_signed(&mut self.bytes, end.wrapping_sub(self.last_end));
        (self.last_id, self.last_end) = (id, end);
        self.len += 1;
    }

    pub(super) fn held_bytes(&self) -> usize {
        self.bytes.capacity() + std::mem::size_of::<Self>()
    }

    /// The ends in order of (end, id), each id given anew as `renumber(id)`: ends alike in the
    /// order of their new ids, which the search back meets first.
    pub(super) fn seal(self, renumber: impl Fn(u32) -> u32) -> Result<RankEnds> {
        let mut ends: Vec<(i64, u32)> = Vec::with_capacity(self.len);
        let (mut at, mut id, mut end) = (0usize, 0i64, 0i64);
        while ends.len() < self.len {
            let (Some(di), Some(de)) =
                (varint::get_signed(&self.bytes, &mut at), varint::get_signed(&self.bytes, &mut at))
            else {
                return internal_err!(
                    "delay_costs: a rank's collective ends end after {} of {} in their list",
                    ends.len(),
                    self.len
                );
            };
            (id, end) = (id.wrapping_add(di), end.wrapping_add(de));
            ends.push((end, renumber(id as u32)));
        }
        drop(self.bytes);
        ends.sort_unstable();
        RankEnds::of_sorted(&ends)
    }
}

/// The first end of a block, its id and where the rest of it begins in `RankEnds::bytes`.
#[derive(Debug, Clone, Copy)]
struct Head {
    end: i64,
    id: u32,
    at: u32,
}

/// A rank's ends, sealed: in order of the end, by blocks (see the module).
#[derive(Debug)]
pub(super) struct RankEnds {
    heads: Vec<Head>,
    /// Each block's ends after its first: the end's step (never negative) and the id's.
    bytes: Vec<u8>,
    len: usize,
    /// (id, place) in order of id, when the ids are not in order with the ends.
    by_instance: Option<Vec<(u32, u32)>>,
    /// Where the last search of a time ended, in blocks (a guess: the waits of a rank are
    /// traced back at nearby times one after another).
    near: AtomicUsize,
    /// Where the last search of an id ended, in blocks or in `by_instance`.
    near_instance: AtomicUsize,
}

impl RankEnds {
    fn of_sorted(ends: &[(i64, u32)]) -> Result<RankEnds> {
        if u32::try_from(ends.len()).is_err() {
            return internal_err!("delay_costs: a rank left {} collective instances, more than 2^32", ends.len());
        }
        let mut heads = Vec::with_capacity(ends.len().div_ceil(BLOCK));
        let mut bytes = Vec::new();
        for block in ends.chunks(BLOCK) {
            let (end, id) = block[0];
            let Ok(at) = u32::try_from(bytes.len()) else {
                return internal_err!("delay_costs: a rank's collective ends take more than 4 GiB");
            };
            heads.push(Head { end, id, at });
            let mut last = block[0];
            for &(end, id) in &block[1..] {
                varint::put(&mut bytes, end.wrapping_sub(last.0) as u64);
                varint::put_signed(&mut bytes, i64::from(id) - i64::from(last.1));
                last = (end, id);
            }
        }
        bytes.shrink_to_fit();
        let in_order = ends.windows(2).all(|w| w[0].1 <= w[1].1);
        let by_instance = (!in_order).then(|| {
            let mut by: Vec<(u32, u32)> = ends.iter().enumerate().map(|(i, e)| (e.1, i as u32)).collect();
            by.sort_unstable();
            by
        });
        Ok(RankEnds {
            heads,
            bytes,
            len: ends.len(),
            by_instance,
            near: AtomicUsize::new(0),
            near_instance: AtomicUsize::new(0),
        })
    }

    pub(super) fn held_bytes(&self) -> usize {
        16 * self.heads.capacity()
            + self.bytes.capacity()
            + self.by_instance.as_ref().map_or(0, |b| 8 * b.capacity())
            + std::mem::size_of::<Self>()
    }

    /// Block `b`'s ends and ids, read as they are asked for.
    fn entries(&self, b: usize) -> Entries<'_> {
        let head = self.heads[b];
        let left = (self.len - b * BLOCK).min(BLOCK);
        Entries { bytes: &self.bytes, at: head.at as usize, last: None, head: (head.end, head.id), left }
    }

    /// The ends at or before `t`, latest first, with their ids.
    pub(super) fn back_until(&self, t: i64) -> BackFrom<'_> {
        let b = partition_point_near(&self.heads, self.near.load(Relaxed), |h| h.end <= t);
        self.near.store(b, Relaxed);
        let mut back = BackFrom { ends: self, next: 0, buf: [(0, 0); BLOCK], block: usize::MAX };
        if b > 0 {
            let n = fill(&mut back.buf, self.entries(b - 1).take_while(|e| e.0 <= t));
            (back.next, back.block) = ((b - 1) * BLOCK + n, b - 1);
        }
        back
    }

    /// The rank's end of instance `id`, if it took part (the first such, in order of end).
    pub(super) fn end_of(&self, id: u32) -> Option<i64> {
        if let Some(by) = &self.by_instance {
            let at = partition_point_near(by, self.near_instance.load(Relaxed), |e| e.0 < id);
            self.near_instance.store(at, Relaxed);
            let &(found, place) = by.get(at)?;
            if found != id {
                return None;
            }
            let place = place as usize;
            return self.entries(place / BLOCK).nth(place % BLOCK).map(|e| e.0);
        }
        // The ids in order: the first end of `id` is in the last block whose first id is
        // below it, or begins the next.
        let b = partition_point_near(&self.heads, self.near_instance.load(Relaxed), |h| h.id < id);
        self.near_instance.store(b, Relaxed);
        if b > 0
            && let Some(e) = self.entries(b - 1).take_while(|e| e.1 <= id).find(|e| e.1 == id)
        {
            return Some(e.0);
        }
        self.heads.get(b).filter(|h| h.id == id).map(|h| h.end)
    }
}

/// A block's ends and ids in order, decoded one at a time.
struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The entry given last (None: none yet, the next is the head).
    last: Option<(i64, u32)>,
    head: (i64, u32),
    left: usize,
}

impl Iterator for Entries<'_> {
    type Item = (i64, u32);

    fn next(&mut self) -> Option<(i64, u32)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let e = match self.last {
            None => self.head,
            Some((end, id)) => {
                let de = varint::get(self.bytes, &mut self.at)?;
                let di = varint::get_signed(self.bytes, &mut self.at)?;
                (end.wrapping_add(de as i64), (i64::from(id) + di) as u32)
            }
        };
        self.last = Some(e);
        Some(e)
    }
}

/// A block's entries into `buf`; how many.
fn fill(buf: &mut [(i64, u32); BLOCK], entries: impl Iterator<Item = (i64, u32)>) -> usize {
    let mut n = 0;
    for (slot, e) in buf.iter_mut().zip(entries) {
        *slot = e;
        n += 1;
    }
    n
}

/// `RankEnds::back_until`'s walk: (end, id), latest first.
pub(super) struct BackFrom<'a> {
    ends: &'a RankEnds,
    /// The place after the next one given.
    next: usize,
    buf: [(i64, u32); BLOCK],
    /// The block in `buf` (usize::MAX: none yet).
    block: usize,
}

impl Iterator for BackFrom<'_> {
    type Item = (i64, u32);

    fn next(&mut self) -> Option<(i64, u32)> {
        if self.next == 0 {
            return None;
        }
        self.next -= 1;
        let b = self.next / BLOCK;
        if b != self.block {
            // A whole block before the one walked: every end of it.
            let n = fill(&mut self.buf, self.ends.entries(b));
            if self.next % BLOCK >= n {
                return None;
            }
            self.block = b;
        }
        Some(self.buf[self.next % BLOCK])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of reading the sealed ends against the plain sorted list.
    fn check(pushed: &[(u32, i64)], renumber: impl Fn(u32) -> u32 + Copy) {
        let mut builder = EndsBuilder::default();
        for &(id, end) in pushed {
            builder.push(id, end);
        }
        let sealed = builder.seal(renumber).unwrap();
        let mut plain: Vec<(i64, u32)> = pushed.iter().map(|&(id, end)| (end, renumber(id))).collect();
        plain.sort_unstable();
        let times: Vec<i64> = pushed
            .iter()
            .flat_map(|&(_, e)| [e.saturating_sub(1), e, e.saturating_add(1)])
            .chain([i64::MIN, i64::MAX])
            .collect();
        for &t in &times {
            let k = plain.partition_point(|e| e.0 <= t);
            let back: Vec<(i64, u32)> = sealed.back_until(t).collect();
            let expected: Vec<(i64, u32)> = plain[..k].iter().rev().copied().collect();
            assert_eq!(back, expected, "back until {t}");
        }
        let most = pushed.iter().map(|p| p.0).max().unwrap_or(0);
        for id in 0..=most + 1 {
            let expected = plain.iter().find(|e| e.1 == id).map(|e| e.0);
            assert_eq!(sealed.end_of(id), expected, "end of {id}");
        }
    }

    #[test]
    fn ends_in_order_with_their_ids_come_back_by_time_and_by_id() {
        // 100 instances, a block boundary every 16: ends rising, some alike, one id twice.
        let mut pushed: Vec<(u32, i64)> = (0..100u32).map(|i| (i, 1_000 + 37 * i64::from(i / 2))).collect();
        pushed.push((32, 1_000 + 37 * 16));
        check(&pushed, |id| id);
        // Came in any order.
        pushed.reverse();
        pushed.swap(3, 70);
        check(&pushed, |id| id);
    }

    #[test]
    fn ids_out_of_order_with_the_ends_are_found_through_their_own_list() {
        // Two communicators whose instances interleave in time: ids 0..50 and 50..100.
        let pushed: Vec<(u32, i64)> =
            (0..100u32).map(|i| (i, if i < 50 { 10 * i64::from(i) } else { 10 * i64::from(i - 50) + 5 })).collect();
        check(&pushed, |id| id);
        // Renumbered: ends alike in order of the new ids.
        let alike: Vec<(u32, i64)> = (0..70u32).map(|i| (i, i64::from(i / 7))).collect();
        check(&alike, |id| 1_000 - id);
    }

    #[test]
    fn extreme_times_and_an_empty_rank() {
        check(&[(0, i64::MIN), (1, -5), (2, 0), (3, i64::MAX)], |id| id);
        check(&[], |id| id);
    }

    #[test]
    fn an_end_takes_a_few_bytes() {
        // 1,000 instances a millisecond apart, in nanoseconds.
        let mut builder = EndsBuilder::default();
        for i in 0..1_000u32 {
            builder.push(i, 5_000_000_000 + 1_000_000 * i64::from(i) + i64::from(i % 7));
        }
        assert!(builder.held_bytes() < 8 * 1_000, "{}", builder.held_bytes());
        let sealed = builder.seal(|id| id).unwrap();
        assert!(sealed.held_bytes() < 6 * 1_000, "{}", sealed.held_bytes());
    }
}
