//! Every message's two halves (its send on the sender, its receive on the receiver), kept out
//! of memory for the DAG functions. As the messages stream, each half goes to a bucket of a
//! range of ranks (at most `BUCKETS` buckets; a range is a power of two of ranks, doubled and
//! the buckets emptied to disk when more ranges are seen), encoded against the half before it
//! in the bucket (`crate::varint`: the rank within the range, the row's step, the time's step,
//! the bytes, the message id less the row; about 10 bytes where the fixed layout took 32); a
//! bucket that fills is appended to one anonymous scratch file as a chunk, whose place and
//! range stay in memory, and each rank's count is kept. When they end, the ranks are cut into
//! runs of whole ranges (about `GROUP_HALVES` halves each, at most `MAX_GROUPS`), and each run
//! is read back from its chunks, put by rank (a counting sort) and each rank in time order
//! (time, then msg_id, a send before the receive of the same message: an insertion pass where
//! the halves came nearly in order, else a stable sort, which takes the rank's sends and its
//! receives from each partner as runs already in order).
//! This is the shuffle by rank that a distributed engine would do, on one machine, with the
//! halves written once and read once.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

use super::Kind;
use crate::varint;

/// Halves a run of whole ranks holds at least before the next rank starts a new run.
pub(crate) const GROUP_HALVES: u64 = 1 << 22;

/// Runs at most.
const MAX_GROUPS: u64 = 256;

/// Buckets filled at a time.
const BUCKETS: usize = 512;

/// Bytes a bucket gathers before it goes to disk as a chunk.
const CHUNK_BYTES: usize = 32 << 10;

/// Message rows a scratch file of halves holds at most.
pub(crate) const MAX_ROWS: u32 = 1 << 31;

/// A message half: its rank, time, message (its msg_id, or its position where it has none;
/// and its row in the order the halves' messages came), whether it is the send, and the
/// message's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Half {
    pub rank: i64,
    pub ts: i64,
    pub id: i64,
    pub row: u32,
    pub kind: Kind,
    pub bytes: i64,
}

impl Half {
    /// Its place in its rank's time order: time, then message, a send before a receive.
    pub fn order(&self) -> (i64, i64, i64, Kind) {
        (self.rank, self.ts, self.id, self.kind)
    }
}

/// A rank (checked to fit 32 bits) as a place in the ranks' order from 0 (the order of the
/// ranks, the negative first).
fn place(rank: i64) -> u32 {
    (rank as i32 as u32) ^ (1 << 31)
}

fn rank_at(place: u32) -> i64 {
    i64::from((place ^ (1 << 31)) as i32)
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its message halves failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// Halves of one range of ranks gathered in memory, each encoded against the one before.
struct Bucket {
    /// The range's first place.
    lo: u32,
    bytes: Vec<u8>,
    count: u32,
    row: u32,
    ts: i64,
}

impl Bucket {
    fn new(lo: u32) -> Bucket {
        Bucket { lo, bytes: Vec::new(), count: 0, row: 0, ts: 0 }
    }

    fn push(&mut self, h: &Half) {
        let recv = u64::from(h.kind == Kind::Recv);
        varint::put(&mut self.bytes, u64::from(place(h.rank) - self.lo));
        let step = i64::from(h.row) - i64::from(self.row);
        varint::put(&mut self.bytes, (((step << 1) ^ (step >> 63)) as u64) << 1 | recv);
        varint::put_signed(&mut self.bytes, h.ts.wrapping_sub(self.ts));
        varint::put_signed(&mut self.bytes, h.bytes);
        varint::put_signed(&mut self.bytes, h.id.wrapping_sub(i64::from(h.row)));
        (self.row, self.ts) = (h.row, h.ts);
        self.count += 1;
    }
}

/// `count` halves of a chunk whose range starts at place `lo` (None: the bytes do not hold
/// them).
fn decode(bytes: &[u8], count: u32, lo: u32, out: &mut impl FnMut(Half)) -> Option<()> {
    let (mut at, mut row, mut ts) = (0usize, 0i64, 0i64);
    for _ in 0..count {
        let offset = u32::try_from(varint::get(bytes, &mut at)?).ok()?;
        let word = varint::get(bytes, &mut at)?;
        let z = word >> 1;
        row += (z >> 1) as i64 ^ -((z & 1) as i64);
        ts = ts.wrapping_add(varint::get_signed(bytes, &mut at)?);
        let b = varint::get_signed(bytes, &mut at)?;
        let id = varint::get_signed(bytes, &mut at)?.wrapping_add(row);
        let kind = if word & 1 == 1 { Kind::Recv } else { Kind::Send };
        let row = u32::try_from(row).ok()?;
        out(Half { rank: rank_at(lo.checked_add(offset)?), ts, id, row, kind, bytes: b });
    }
    (at == bytes.len()).then_some(())
}

/// The halves of one rank as bytes, each against the one before as a bucket writes them (a
/// row per rank of the exchange of halves on a distributed engine, `crate::causality::dag_steps`).
pub(super) fn encode_rank(halves: &[Half]) -> Vec<u8> {
    let mut bucket = Bucket::new(halves.first().map_or(0, |h| place(h.rank)));
    for h in halves {
        bucket.push(h);
    }
    bucket.bytes
}

/// The `count` halves of `rank` that [`encode_rank`] wrote into `bytes`, given to `out` (None:
/// the bytes do not hold them, or hold another rank's).
pub(super) fn decode_rank(bytes: &[u8], count: u32, rank: i64, out: &mut impl FnMut(Half)) -> Option<()> {
    let mut other = false;
    decode(bytes, count, place(i32::try_from(rank).ok()?.into()), &mut |h| {
        other |= h.rank != rank;
        out(h)
    })?;
    (!other).then_some(())
}

/// A bucket on disk: the range of places it covers, where it lies, and its halves.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    lo: u32,
    at: u64,
    len: u32,
    count: u32,
}

/// The halves written so far, and each rank's count.
pub(crate) struct Halves {
    what: &'static str,
    file: File,
    at: u64,
    /// A range covers 1 << shift places.
    shift: u32,
    buckets: Vec<Bucket>,
    /// Each range's bucket, by its first place >> shift.
    bucket_of: FastMap<u32, usize>,
    chunks: Vec<Chunk>,
    /// Halves per rank: each rank's messages sent plus received (PCLVis's mc).
    counts: FastMap<i64, i64>,
    written: u64,
    most_buckets: usize,
    chunk_bytes: usize,
}

impl std::fmt::Debug for Halves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Halves").field("ranks", &self.counts.len()).field("halves", &self.written).finish()
    }
}

impl Halves {
    pub fn new(what: &'static str) -> Result<Halves> {
        Halves::sized(what, BUCKETS, CHUNK_BYTES)
    }

    fn sized(what: &'static str, most_buckets: usize, chunk_bytes: usize) -> Result<Halves> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(Halves {
            what,
            file,
            at: 0,
            shift: 0,
            buckets: Vec::new(),
            bucket_of: FastMap::default(),
            chunks: Vec::new(),
            counts: FastMap::default(),
            written: 0,
            most_buckets,
            chunk_bytes,
        })
    }

    pub fn push(&mut self, h: Half) -> Result<()> {
        if i32::try_from(h.rank).is_err() || h.row >= MAX_ROWS {
            return Err(DataFusionError::Execution(format!(
                "{}: rank {} or message row {} is beyond what its scratch file of halves holds (ranks of 32 bits, {MAX_ROWS} messages); narrow the relation",
                self.what, h.rank, h.row
            )));
        }
        let p = place(h.rank);
        let b = match self.bucket_of.get(&(p >> self.shift)) {
            Some(&b) => b,
            None => {
                if self.buckets.len() == self.most_buckets {
                    // More ranges than buckets: every bucket to disk, and ranges twice as wide.
                    for b in 0..self.buckets.len() {
                        self.flush(b)?;
                    }
                    self.buckets.clear();
                    self.bucket_of.clear();
                    self.shift += 1;
                }
                let key = p >> self.shift;
                self.buckets.push(Bucket::new(key << self.shift));
                self.bucket_of.insert(key, self.buckets.len() - 1);
                self.buckets.len() - 1
            }
        };
        self.buckets[b].push(&h);
        if self.buckets[b].bytes.len() >= self.chunk_bytes {
            self.flush(b)?;
        }
        *self.counts.entry(h.rank).or_default() += 1;
        self.written += 1;
        Ok(())
    }

    /// Bucket `b` to disk as a chunk (nothing when it is empty).
    fn flush(&mut self, b: usize) -> Result<()> {
        let bucket = &mut self.buckets[b];
        if bucket.count == 0 {
            return Ok(());
        }
        self.file.write_all(&bucket.bytes).map_err(|e| io_error(self.what, "writing", e))?;
        let len = bucket.bytes.len() as u32;
        self.chunks.push(Chunk { lo: bucket.lo, at: self.at, len, count: bucket.count });
        self.at += u64::from(len);
        bucket.bytes.clear();
        (bucket.count, bucket.row, bucket.ts) = (0, 0, 0);
        Ok(())
    }

    /// Halves per rank: each rank's messages sent plus received (PCLVis's mc), in rank order.
    pub fn counts(&self) -> BTreeMap<i64, i64> {
        self.counts.iter().map(|(&r, &n)| (r, n)).collect()
    }

    /// Bytes held in memory: the counts, the buckets and where the chunks lie.
    pub fn held_bytes(&self) -> usize {
        self.counts.len() * 32
            + self.buckets.iter().map(|b| b.bytes.capacity() + 48).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Chunk>()
    }

    /// Every half has been written: cut the ranks into runs, read back in rank order by
    /// `Groups::next_group`.
    pub fn into_groups(self) -> Result<Groups> {
        self.into_groups_of(GROUP_HALVES)
    }

    /// `into_groups`, with runs of at least `min_halves` halves.
    fn into_groups_of(mut self, min_halves: u64) -> Result<Groups> {
        for b in 0..self.buckets.len() {
            self.flush(b)?;
        }
        let per_group = min_halves.max(self.written.div_ceil(MAX_GROUPS)).max(1);
        // A run starts at a range's first place; every chunk, of this width or a narrower
        // one written before, lies in one range, so in one run.
        let counts = self.counts();
        let mut groups: Vec<Group> = Vec::new();
        let (mut filled, mut range) = (u64::MAX, None);
        for (&rank, &n) in &counts {
            let r = place(rank) >> self.shift;
            if filled >= per_group && range != Some(r) {
                groups.push(Group { lo: r << self.shift, ranks: Vec::new(), chunks: Vec::new() });
                filled = 0;
            }
            range = Some(r);
            filled += n as u64;
            groups.last_mut().expect("pushed at the first rank").ranks.push((rank, n as usize));
        }
        for c in &self.chunks {
            let g = groups.partition_point(|g| g.lo <= c.lo).saturating_sub(1);
            groups[g].chunks.push(*c);
        }
        Ok(Groups { what: self.what, file: self.file, groups: groups.into_iter() })
    }
}

/// A run of whole ranks: its first place, its ranks with their halves, its chunks in file
/// order.
struct Group {
    lo: u32,
    ranks: Vec<(i64, usize)>,
    chunks: Vec<Chunk>,
}

/// Runs of whole ranks of halves, in rank order.
pub(crate) struct Groups {
    what: &'static str,
    file: File,
    groups: std::vec::IntoIter<Group>,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").field("left", &self.groups.len()).finish()
    }
}

impl Groups {
    /// The next run's halves in their ranks' time order (None: no more).
    pub fn next_group(&mut self) -> Result<Option<Vec<Half>>> {
        let Some(group) = self.groups.next() else { return Ok(None) };
        let what = self.what;
        // Where each rank's halves begin, in rank order.
        let mut next: FastMap<i64, (usize, usize)> = FastMap::default();
        let mut total = 0;
        for &(rank, n) in &group.ranks {
            next.insert(rank, (total, total + n));
            total += n;
        }
        let blank = Half { rank: 0, ts: 0, id: 0, row: 0, kind: Kind::Send, bytes: 0 };
        let mut halves = vec![blank; total];
        let mut bytes = Vec::new();
        let mut misplaced = None;
        for c in &group.chunks {
            commdb_catalog::interrupt::check(what)?;
            bytes.resize(c.len as usize, 0);
            self.file.read_exact_at(&mut bytes, c.at).map_err(|e| io_error(what, "reading", e))?;
            let mut put = |h: Half| match next.get_mut(&h.rank) {
                Some((at, end)) if *at < *end => {
                    halves[*at] = h;
                    *at += 1;
                }
                _ => misplaced = Some(h.rank),
            };
            decode(&bytes, c.count, c.lo, &mut put).ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "{what}: a chunk of the scratch file of halves at {} does not decode",
                    c.at
                ))
            })?;
            if let Some(rank) = misplaced {
                return Err(DataFusionError::Internal(format!(
                    "{what}: the scratch file of halves holds a half of rank {rank} that its counts do not"
                )));
            }
        }
        if let Some((rank, _)) = next.iter().find(|(_, (at, end))| at != end) {
            return Err(DataFusionError::Internal(format!(
                "{what}: the scratch file of halves holds fewer halves of rank {rank} than its counts"
            )));
        }
        let mut from = 0;
        for &(_, n) in &group.ranks {
            in_time_order(&mut halves[from..from + n]);
            from += n;
        }
        Ok(Some(halves))
    }
}

/// Places a half moves back at most in [`in_time_order`]'s insertion pass.
const MOST_MOVES: usize = 16;

/// Puts a rank's halves in time order (time, then message, a send first; stable). Read in the
/// messages' order one part after another (`Derived::reading_parts_in_turn`), a rank's halves
/// come nearly so: its sends in order, each receive at its message's send time, a few places
/// early. An insertion pass puts them in place, each moving back at most `MOST_MOVES` places;
/// a half that would move further (the halves came in another order) leaves the rest to the
/// stable sort, which takes the part already in order as a run.
fn in_time_order(halves: &mut [Half]) {
    let key = |h: &Half| (h.ts, h.id, h.kind);
    for i in 1..halves.len() {
        let k = key(&halves[i]);
        if key(&halves[i - 1]) <= k {
            continue;
        }
        let mut at = i - 1;
        while at > 0 && i - at < MOST_MOVES && key(&halves[at - 1]) > k {
            at -= 1;
        }
        if at > 0 && key(&halves[at - 1]) > k {
            halves.sort_by_key(key);
            return;
        }
        halves[at..=i].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Halves of many ranks in a scrambled order, each message id beside its row or far from
    /// it, times going back and forth.
    fn scrambled(n: u32, ranks: &[i64]) -> Vec<Half> {
        (0..n)
            .map(|k| Half {
                rank: ranks[((k as usize) * 7919) % ranks.len()],
                ts: i64::from((k * 31) % 101) - 50 + if k % 5 == 0 { i64::MAX / 2 } else { 0 },
                id: if k % 3 == 0 { i64::from(k / 2) } else { i64::from(k) * 1_000_003 - (1 << 40) },
                row: k / 2,
                kind: if k % 2 == 0 { Kind::Send } else { Kind::Recv },
                bytes: i64::from(k % 17) * if k % 4 == 0 { -1 } else { 1 << 33 },
            })
            .collect()
    }

    fn back_in_order(halves: Halves, min_halves: u64) -> (Vec<Half>, usize) {
        let mut groups = halves.into_groups_of(min_halves).unwrap();
        let mut back: Vec<Half> = Vec::new();
        let mut runs = 0;
        while let Some(g) = groups.next_group().unwrap() {
            assert!(back.last().is_none_or(|l| l.rank < g[0].rank), "a rank cut between runs");
            back.extend(g);
            runs += 1;
        }
        (back, runs)
    }

    #[test]
    fn halves_come_back_by_rank_in_time_order_whatever_order_they_went_in() {
        let mut halves = Halves::new("test").unwrap();
        let ranks: Vec<i64> = (-3..34).collect();
        let all = scrambled(5000, &ranks);
        for h in &all {
            halves.push(*h).unwrap();
        }
        assert_eq!(halves.counts().values().sum::<i64>(), 5000);
        assert_eq!(halves.counts().len(), 37);
        // A rank of more than 32 bits is refused, naming it.
        let far = Half { rank: 1 << 40, ts: 0, id: 0, row: 0, kind: Kind::Send, bytes: 0 };
        let e = halves.push(far).unwrap_err().to_string();
        assert!(e.contains("rank 1099511627776"), "{e}");
        // Runs of at least 600 halves: 135 a rank, so several ranks a run, never cut.
        let (back, runs) = back_in_order(halves, 600);
        assert!(runs > 4, "{runs} runs");
        let mut sorted = all.clone();
        sorted.sort_by_key(Half::order);
        assert_eq!(back, sorted, "every field comes back, in order");
    }

    #[test]
    fn more_ranges_than_buckets_widen_the_ranges_and_lose_nothing() {
        // Ranks spread over the whole 32 bits, a few buckets of small chunks: the ranges
        // double many times, and chunks of every width end in the runs that hold them.
        let mut halves = Halves::sized("test", 4, 64).unwrap();
        let ranks: Vec<i64> = (0..300i64).map(|k| (k * 14_316_557) % (1 << 32) - (1 << 31)).collect();
        let all = scrambled(20_000, &ranks);
        for h in &all {
            halves.push(*h).unwrap();
        }
        assert!(halves.shift > 20, "shift {}", halves.shift);
        assert!(halves.chunks.len() > 100, "{} chunks", halves.chunks.len());
        let (back, runs) = back_in_order(halves, 1000);
        assert!(runs > 2, "{runs} runs");
        let mut sorted = all.clone();
        sorted.sort_by_key(Half::order);
        assert_eq!(back, sorted);
    }

    #[test]
    fn a_rank_keeps_the_order_its_ties_came_in() {
        // Two halves of one rank with equal time, message and kind come back as they went in.
        let mut halves = Halves::new("test").unwrap();
        let a = Half { rank: 5, ts: 10, id: 1, row: 0, kind: Kind::Send, bytes: 1 };
        let b = Half { bytes: 2, row: 1, ..a };
        halves.push(a).unwrap();
        halves.push(b).unwrap();
        assert_eq!(back_in_order(halves, 1).0, [a, b]);
    }

    #[test]
    fn halves_nearly_in_order_and_far_from_it_both_come_in_time_order_ties_kept() {
        let half = |ts: i64, id: i64, row: u32| Half {
            rank: 0,
            ts,
            id,
            row,
            kind: if row.is_multiple_of(2) { Kind::Send } else { Kind::Recv },
            bytes: i64::from(row),
        };
        // Sends in order, receives a few places early (the moves the pass makes itself), and a
        // tie of time, message and kind whose order must stay.
        let mut near: Vec<Half> = (0..400u32).map(|r| half(i64::from(r / 2) * 10, i64::from(r / 2), r)).collect();
        for r in (1..400).step_by(2) {
            near[r].ts += 10 * (r % 7) as i64;
        }
        near.push(Half { bytes: -1, ..near[398] });
        let mut sorted = near.clone();
        sorted.sort_by_key(|h| (h.ts, h.id, h.kind));
        let mut got = near.clone();
        in_time_order(&mut got);
        assert_eq!(got, sorted);
        // A half far from its place: late at the start (each after it moves back by one), early
        // in the middle and at the end (further back than the pass moves: the sort takes over).
        for far in [0usize, 200, 400] {
            let mut scrambled = near.clone();
            scrambled[far].ts = if far == 0 { i64::MAX } else { -1 };
            let mut sorted = scrambled.clone();
            sorted.sort_by_key(|h| (h.ts, h.id, h.kind));
            in_time_order(&mut scrambled);
            assert_eq!(scrambled, sorted, "a half at {far} far from its place");
        }
    }
}
