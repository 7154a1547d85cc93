//! Every rank's MPI calls kept out of memory for the replay: as the calls are swept a chunk of
//! whole ranks at a time, each rank's outermost MPI calls are appended to an anonymous scratch
//! file in blocks of `BLOCK` of its own, a call as its compute (its start less the previous
//! call's end), its duration and its region, each in as few bytes as it needs (`varint`:
//! about 4.3 bytes a call on a generated stencil), and numbered on from the ranks before, so a call is known everywhere
//! by its number. In memory stay, per rank, where its blocks lie and each block's first start;
//! a lookup (which call of a rank holds an instant) or a read of a call by its number fetches
//! the block it lies in, and each rank keeps the last `WAYS` blocks it used, since the
//! messages and the replay visit a rank's calls nearly in time order. A lookup also remembers
//! the run of calls from the one it found (`RUN`, the last `WINDOWS` runs per rank): a rank's
//! sends of one step, its receives, the wait that completes them are found there without a
//! search. A run of 50 M MPI calls takes 0.21 GB of file and about 10 MB of index.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

use crate::varint;

/// The most calls the store numbers (a number above them tags a collective instance in the
/// replay's lists).
pub(super) const MAX_CALLS: u32 = 1 << 31;

/// Calls per block, the unit read back.
const BLOCK: u32 = 128;

/// Bytes of a block as encoded, at most: three varints a call (`encode`).
pub(super) const MOST_BLOCK_BYTES: usize = BLOCK as usize * (10 + 10 + 5);

/// Blocks each rank keeps.
const WAYS: usize = 8;

/// An outermost MPI call as the replay needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct MpiCall {
    pub start: i64,
    pub end: i64,
    /// Time outside MPI before it, since the rank's previous MPI call (or its origin).
    pub compute: i64,
    /// Index into the store's region names.
    pub region: u32,
}

/// Append `c` to a block: its compute, its duration and its region, each in as few bytes as it
/// needs (the start is the end before it plus the compute).
fn encode(c: &MpiCall, out: &mut Vec<u8>) {
    varint::put_signed(out, c.compute);
    varint::put_signed(out, c.end - c.start);
    varint::put(out, u64::from(c.region));
}

/// A block's calls in place of `calls`' own, the end of the call before its first (the rank's
/// origin for its first block) giving the first's start (None: the bytes do not hold `n` calls).
fn decode(bytes: &[u8], n: usize, mut previous_end: i64, calls: &mut Vec<MpiCall>) -> Option<()> {
    let mut at = 0;
    calls.clear();
    calls.reserve_exact(n);
    for _ in 0..n {
        let (compute, duration, region) = next_encoded(bytes, &mut at)?;
        let start = previous_end + compute;
        let end = start + duration;
        calls.push(MpiCall { start, end, compute, region });
        previous_end = end;
    }
    (at == bytes.len()).then_some(())
}

/// The call encoded at `at` in a block's bytes, `at` moved past it: its compute, its duration
/// and its region (None: the bytes end before it or it is malformed).
pub(super) fn next_encoded(bytes: &[u8], at: &mut usize) -> Option<(i64, i64, u32)> {
    let compute = varint::get_signed(bytes, at)?;
    let duration = varint::get_signed(bytes, at)?;
    let region = u32::try_from(varint::get(bytes, at)?).ok()?;
    Some((compute, duration, region))
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its MPI calls failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// One rank: its run and where its calls lie.
#[derive(Debug)]
pub(super) struct RankCalls {
    pub rank: i64,
    /// Start of its first call of any region, and end of its last.
    pub origin: i64,
    pub end: i64,
    /// Number of its first MPI call, and how many it made.
    pub first: u32,
    pub count: u32,
    /// Per block of its calls: the first call's start, the end of the call before it, and
    /// where the block begins in the file; then where its last block ends.
    marks: Vec<Mark>,
    end_at: u64,
    /// The blocks it used last, the most recent first.
    cached: Vec<(u32, Box<[MpiCall]>)>,
    /// Runs of consecutive calls that lookups found lately: a rank's message sides fall in a
    /// few calls at a time (its sends, its receives, the wait that completes them), so most
    /// lookups end in one of these, without reading a block.
    windows: Vec<Window>,
    /// Indices into `windows`, the most recently used first (the runs themselves stay put).
    recent: [u8; WINDOWS],
}

/// Where a block of a rank's calls begins: in time and in the file.
#[derive(Debug, Clone, Copy)]
struct Mark {
    start: i64,
    previous_end: i64,
    at: u64,
}

/// Runs each rank remembers.
const WINDOWS: usize = 4;

/// Calls in a run.
const RUN: usize = 32;

/// A run of consecutive calls of a rank: numbers first.., their starts and ends.
#[derive(Debug, Clone, Copy)]
struct Window {
    first: u32,
    len: usize,
    starts: [i64; RUN],
    ends: [i64; RUN],
}

impl Window {
    /// The call holding `t`, if the run can tell: t lies from its first start to before its
    /// last end (at the last end, the next call, outside the run, may start and hold it).
    fn find(&self, t: i64) -> Option<Option<u32>> {
        if self.len == 0 || t < self.starts[0] || t >= self.ends[self.len - 1] {
            return None;
        }
        let i = self.starts[..self.len].partition_point(|s| *s <= t) - 1;
        Some((t <= self.ends[i]).then_some(self.first + i as u32))
    }
}

/// Where ranks lie among a store's.
#[derive(Debug, Clone, Default)]
pub(super) struct RankLookup {
    index: FastMap<i64, usize>,
    /// Where ranks 0.. lie (NOWHERE: not there), once every rank is written, when the ranks are
    /// numbered densely enough; others are looked up in `index`.
    dense: Vec<u32>,
}

impl RankLookup {
    /// Where `rank` lies among the store's ranks.
    pub fn index(&self, rank: i64) -> Option<usize> {
        match usize::try_from(rank).ok().and_then(|r| self.dense.get(r)) {
            Some(&i) => (i != NOWHERE).then_some(i as usize),
            None => self.index.get(&rank).copied(),
        }
    }
}

/// The MPI calls of every rank swept so far (see the module's notes).
pub(super) struct CallStore {
    what: &'static str,
    writer: Option<BufWriter<File>>,
    file: Option<File>,
    written: u32,
    /// Bytes written.
    bytes: u64,
    pub ranks: Vec<RankCalls>,
    /// Each rank's number of its first call, beside `ranks`: the replay finds the rank of a
    /// call it waits for in these 4 bytes a rank rather than in the ranks' records, a cache
    /// line or more each.
    firsts: Vec<u32>,
    /// Per stretch of `1 << stretch_bits` call numbers, the rank of its first call, once every
    /// rank is written: a call's rank lies between its stretch's and the next stretch's, so it
    /// is searched among a few ranks' firsts rather than all of them.
    stretches: Vec<u32>,
    stretch_bits: u32,
    /// Where each rank lies among `ranks`.
    lookup: RankLookup,
    pub regions: Vec<String>,
    region_ids: FastMap<String, u32>,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for CallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallStore").field("ranks", &self.ranks.len()).field("calls", &self.written).finish()
    }
}

impl CallStore {
    pub fn new(what: &'static str) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(CallStore {
            what,
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            file: None,
            written: 0,
            bytes: 0,
            ranks: Vec::new(),
            firsts: Vec::new(),
            stretches: Vec::new(),
            stretch_bits: 0,
            lookup: RankLookup::default(),
            regions: Vec::new(),
            region_ids: FastMap::default(),
            buffer: Vec::new(),
        })
    }

    /// The store's number of region `name`.
    pub fn region(&mut self, name: &str) -> u32 {
        if let Some(id) = self.region_ids.get(name) {
            return *id;
        }
        let id = self.regions.len() as u32;
        self.regions.push(name.to_string());
        self.region_ids.insert(name.to_string(), id);
        id
    }

    /// Add `rank`'s run and its MPI calls, in time order (a rank comes once).
    pub fn push(&mut self, rank: i64, origin: i64, end: i64, calls: &[MpiCall]) -> Result<()> {
        let what = self.what;
        if self.lookup.index.contains_key(&rank) {
            return Err(DataFusionError::Internal(format!("{what}: rank {rank} came twice")));
        }
        if u64::from(self.written) + calls.len() as u64 >= u64::from(MAX_CALLS) {
            return Err(DataFusionError::Execution(format!(
                "{what}: more than {} MPI calls are more than it handles; narrow the relation it reads (a view over a time window or some ranks, e.g. rel => 'v')",
                MAX_CALLS
            )));
        }
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| DataFusionError::Internal(format!("{what}: calls added after the replay began")))?;
        let first = self.written;
        let mut marks = Vec::with_capacity(calls.len().div_ceil(BLOCK as usize));
        // Checked whole before any is written, so a refused rank leaves the file as it was.
        let mut previous_end = origin;
        for c in calls {
            if c.compute != c.start - previous_end {
                return Err(DataFusionError::Execution(format!(
                    "{what}: rank {rank}'s MPI call at {}..{} overlaps the one before",
                    c.start, c.end
                )));
            }
            previous_end = c.end;
        }
        let mut previous_end = origin;
        for block in calls.chunks(BLOCK as usize) {
            marks.push(Mark { start: block[0].start, previous_end, at: self.bytes });
            self.buffer.clear();
            for c in block {
                encode(c, &mut self.buffer);
            }
            writer.write_all(&self.buffer).map_err(|e| io_error(what, "writing", e))?;
            self.bytes += self.buffer.len() as u64;
            previous_end = block[block.len() - 1].end;
        }
        self.written += calls.len() as u32;
        self.lookup.index.insert(rank, self.ranks.len());
        self.firsts.push(first);
        self.ranks.push(RankCalls {
            rank,
            origin,
            end,
            first,
            count: calls.len() as u32,
            marks,
            end_at: self.bytes,
            cached: Vec::new(),
            windows: Vec::new(),
            recent: std::array::from_fn(|i| i as u8),
        });
        Ok(())
    }

    /// Every rank has been added: calls are read back from now on.
    pub fn finish_writing(&mut self) -> Result<()> {
        let top = self.ranks.iter().map(|r| r.rank).max().unwrap_or(-1);
        if top >= 0 && (top as u64) < 4 * self.ranks.len() as u64 + 1024 {
            self.lookup.dense = vec![NOWHERE; top as usize + 1];
            for (i, r) in self.ranks.iter().enumerate().filter(|(_, r)| r.rank >= 0) {
                self.lookup.dense[r.rank as usize] = i as u32;
            }
        }
        // About four stretches a rank, so a stretch spans few ranks' calls.
        let per_stretch = (self.written as usize).div_ceil(4 * self.ranks.len().max(1)).max(1);
        self.stretch_bits = per_stretch.next_power_of_two().trailing_zeros();
        self.stretches = (0..=self.written >> self.stretch_bits)
            .map(|s| self.firsts.partition_point(|&first| first <= s << self.stretch_bits).saturating_sub(1) as u32)
            .collect();
        if let Some(w) = self.writer.take() {
            let file = w.into_inner().map_err(|e| io_error(self.what, "writing", e.into_error()))?;
            self.file = Some(file);
        }
        Ok(())
    }

    /// MPI calls in all.
    pub fn len(&self) -> usize {
        self.written as usize
    }

    /// Where the rank whose call `number` is lies among the store's ranks (its calls are
    /// numbered on from the ranks before it).
    pub fn rank_of_call(&self, number: u32) -> usize {
        let s = (number >> self.stretch_bits) as usize;
        match (self.stretches.get(s), self.stretches.get(s + 1)) {
            // The rank lies from the stretch's (whose first call is at or before `number`) to
            // the next stretch's.
            (Some(&lo), Some(&hi)) => {
                let (lo, hi) = (lo as usize, hi as usize);
                lo + self.firsts[lo..=hi].partition_point(|&first| first <= number).saturating_sub(1)
            }
            _ => self.firsts.partition_point(|&first| first <= number).saturating_sub(1),
        }
    }

    /// Where `rank` lies among the store's ranks.
    #[cfg(test)]
    pub fn rank_index(&self, rank: i64) -> Option<usize> {
        self.lookup.index(rank)
    }

    /// Where the ranks lie among the store's, to look up apart from it.
    pub fn rank_lookup(&self) -> RankLookup {
        self.lookup.clone()
    }

    /// Bytes held in memory: the index and the cached blocks.
    pub fn held_bytes(&self) -> usize {
        let per_rank = std::mem::size_of::<RankCalls>() + 32;
        let window = std::mem::size_of::<Window>();
        self.ranks
            .iter()
            .map(|r| {
                per_rank
                    + r.marks.len() * std::mem::size_of::<Mark>()
                    + r.cached.len() * BLOCK as usize * std::mem::size_of::<MpiCall>()
                    + r.windows.len() * window
            })
            .sum::<usize>()
            + self.regions.iter().map(|r| r.len() * 2 + 48).sum::<usize>()
            + self.lookup.dense.len() * 4
    }

    /// Call number `number`, one of rank `ri`'s.
    pub fn call(&mut self, ri: usize, number: u32) -> Result<MpiCall> {
        let what = self.what;
        let file = sealed(&self.file, what)?;
        self.ranks[ri].call(file, what, number)
    }

    /// The block of rank `ri`'s calls that holds its call `number`, its bytes as encoded read
    /// into `bytes` apart from the store's cache (a call at a time: [`next_encoded`]), for a
    /// reader that goes through a rank's calls once in order: the number of the call past the
    /// block's last.
    pub fn read_encoded(&self, ri: usize, number: u32, bytes: &mut Vec<u8>) -> Result<u32> {
        let what = self.what;
        let file = sealed(&self.file, what)?;
        let rank = &self.ranks[ri];
        let Some(i) = number.checked_sub(rank.first).filter(|&i| i < rank.count) else {
            return Err(DataFusionError::Internal(format!(
                "{what}: call {number} read from a rank that has not made it"
            )));
        };
        let b = i / BLOCK;
        rank.read(file, what, b, bytes)?;
        Ok(rank.first + b * BLOCK + (rank.count - b * BLOCK).min(BLOCK))
    }

    /// Readers of the ranks at `ris` (distinct indices), each holding only its own rank's
    /// blocks, so that threads read ranks side by side (None: an index repeats or is out of
    /// range).
    pub fn rank_readers(&mut self, ris: &[usize]) -> Result<Option<Vec<RankCallsReader<'_>>>> {
        let what = self.what;
        let file = sealed(&self.file, what)?;
        let Some(ranks) = super::disjoint_mut(&mut self.ranks, ris) else { return Ok(None) };
        Ok(Some(ranks.into_iter().map(|rank| RankCallsReader { what, file, rank }).collect()))
    }

    /// The number of rank `ri`'s call that holds instant `t` (start <= t <= end), if any.
    #[cfg(test)]
    pub fn locate(&mut self, ri: usize, t: i64) -> Result<Option<u32>> {
        let what = self.what;
        let file = sealed(&self.file, what)?;
        self.ranks[ri].locate(file, what, t)
    }

    /// Locate many instants at once: `found[i]` becomes the number of the call of rank
    /// `sides[i].0` (an index among the store's ranks; `NOWHERE` for none) that holds instant
    /// `sides[i].1`, or `NOWHERE`; an instant of a known rank that no call holds is counted in
    /// `unplaced`. The sides are grouped by rank (a counting sort that keeps each rank's in
    /// their order), so a rank's lookups come one after another while its blocks and runs are
    /// at hand, and every rank sees them in the same order as one by one: the answers are the
    /// same. The ranks are shared out among the threads in runs of about equal numbers of sides.
    pub fn locate_all(&mut self, sides: &[(u32, i64)], found: &mut Vec<u32>, unplaced: &mut [i64]) -> Result<()> {
        use rayon::prelude::*;
        let CallStore { what, file, ranks, .. } = self;
        let what = *what;
        let file = sealed(file, what)?;
        // first[r]..first[r + 1]: where rank r's sides lie in `order`.
        let mut first = vec![0usize; ranks.len() + 1];
        for s in sides.iter().filter(|s| s.0 != NOWHERE) {
            first[s.0 as usize + 1] += 1;
        }
        for r in 0..ranks.len() {
            first[r + 1] += first[r];
        }
        // Where each side came from, and its instant, grouped by rank.
        let mut next = first.clone();
        let mut order = vec![0u32; first[ranks.len()]];
        let mut times = vec![0i64; first[ranks.len()]];
        for (i, s) in sides.iter().enumerate().filter(|(_, s)| s.0 != NOWHERE) {
            let k = next[s.0 as usize];
            (order[k], times[k]) = (i as u32, s.1);
            next[s.0 as usize] += 1;
        }
        // Runs of ranks, a few per thread, cut where their sides reach an equal share.
        let runs = rayon::current_num_threads().max(1) * 4;
        let share = order.len().div_ceil(runs).max(1);
        let mut cuts = vec![0usize];
        for (r, at) in first.iter().enumerate().take(ranks.len()).skip(1) {
            if *at >= share * cuts.len() {
                cuts.push(r);
            }
        }
        cuts.push(ranks.len());
        // Each run's ranks, their counts of unplaced sides and their answers, apart.
        let mut placed = vec![NOWHERE; order.len()];
        let mut work = Vec::with_capacity(cuts.len());
        let (mut rest_ranks, mut rest_unplaced, mut rest_placed) = (&mut ranks[..], &mut unplaced[..], &mut placed[..]);
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let (r, rr) = rest_ranks.split_at_mut(hi - lo);
            let (u, ru) = rest_unplaced.split_at_mut(hi - lo);
            let (p, rp) = rest_placed.split_at_mut(first[hi] - first[lo]);
            (rest_ranks, rest_unplaced, rest_placed) = (rr, ru, rp);
            work.push((lo, r, u, p));
        }
        work.into_par_iter().try_for_each(|(lo, ranks, unplaced, placed)| -> Result<()> {
            let base = first[lo];
            for (k, (rank, missed)) in ranks.iter_mut().zip(unplaced.iter_mut()).enumerate() {
                for j in first[lo + k]..first[lo + k + 1] {
                    match rank.locate(file, what, times[j])? {
                        Some(number) => placed[j - base] = number,
                        None => *missed += 1,
                    }
                }
            }
            Ok(())
        })?;
        found.clear();
        found.resize(sides.len(), NOWHERE);
        for (i, p) in order.iter().zip(&placed) {
            found[*i as usize] = *p;
        }
        Ok(())
    }
}

/// One rank's calls, read in order by a thread of its own.
#[derive(Debug)]
pub(super) struct RankCallsReader<'a> {
    what: &'static str,
    file: &'a File,
    rank: &'a mut RankCalls,
}

impl RankCallsReader<'_> {
    /// The rank's calls from number `number` to the end of the block it lies in (none past
    /// its last call): a rank's calls read in order, a block at a time.
    pub fn calls_from(&mut self, number: u32) -> Result<&[MpiCall]> {
        let rank = &mut *self.rank;
        let Some(i) = number.checked_sub(rank.first).filter(|&i| i < rank.count) else { return Ok(&[]) };
        let block = rank.block(self.file, self.what, i / BLOCK)?;
        Ok(&block[(i % BLOCK) as usize..])
    }
}

/// The store's file, once every rank's calls are written.
fn sealed<'f>(file: &'f Option<File>, what: &str) -> Result<&'f File> {
    file.as_ref().ok_or_else(|| DataFusionError::Internal(format!("{what}: calls read before they were all written")))
}

/// No rank, or no call.
pub(super) const NOWHERE: u32 = u32::MAX;

impl RankCalls {
    /// Its block `b` (its calls b * BLOCK..), through its cache.
    fn block(&mut self, file: &File, what: &str, b: u32) -> Result<&[MpiCall]> {
        if let Some(k) = self.cached.iter().position(|(c, _)| *c == b) {
            if k > 0 {
                let hit = self.cached.remove(k);
                self.cached.insert(0, hit);
            }
            return Ok(&self.cached[0].1);
        }
        let (mut bytes, mut calls) = (Vec::new(), Vec::new());
        self.read(file, what, b, &mut bytes)?;
        let n = (self.count - b * BLOCK).min(BLOCK) as usize;
        decode(&bytes, n, self.marks[b as usize].previous_end, &mut calls).ok_or_else(|| {
            DataFusionError::Internal(format!("{what}: a block of rank {}'s MPI calls did not read back", self.rank))
        })?;
        self.cached.insert(0, (b, calls.into_boxed_slice()));
        self.cached.truncate(WAYS);
        Ok(&self.cached[0].1)
    }

    /// Its block `b`'s bytes as encoded, read from the file into `bytes`, apart from its cache.
    fn read(&self, file: &File, what: &str, b: u32, bytes: &mut Vec<u8>) -> Result<()> {
        let at = self.marks[b as usize].at;
        let to = self.marks.get(b as usize + 1).map_or(self.end_at, |m| m.at);
        bytes.clear();
        bytes.resize((to - at) as usize, 0);
        file.read_exact_at(bytes, at).map_err(|e| io_error(what, "reading", e))
    }

    /// Its call number `number`.
    fn call(&mut self, file: &File, what: &str, number: u32) -> Result<MpiCall> {
        let i = number - self.first;
        let block = self.block(file, what, i / BLOCK)?;
        Ok(block[(i % BLOCK) as usize])
    }

    /// The number of its call that holds instant `t` (start <= t <= end), if any.
    fn locate(&mut self, file: &File, what: &str, t: i64) -> Result<Option<u32>> {
        for k in 0..self.windows.len() {
            if let Some(found) = self.windows[self.recent[k] as usize].find(t) {
                self.recent[..=k].rotate_right(1);
                return Ok(found);
            }
        }
        let j = self.marks.partition_point(|m| m.start <= t);
        if j == 0 {
            return Ok(None);
        }
        let (b, first) = (j as u32 - 1, self.first);
        let block = self.block(file, what, b)?;
        let i = block.partition_point(|c| c.start <= t) - 1;
        let call = block[i];
        let number = first + b * BLOCK + i as u32;
        // Remember the run from this call to the end of its block (RUN calls at most; a block
        // holds only the rank's calls), in place of the run used least lately.
        let run = &block[i..(i + RUN).min(block.len())];
        let mut w = Window { first: number, len: 0, starts: [0; RUN], ends: [0; RUN] };
        for c in run {
            w.starts[w.len] = c.start;
            w.ends[w.len] = c.end;
            w.len += 1;
        }
        let slot = if self.windows.len() < WINDOWS {
            self.windows.push(w);
            self.windows.len() - 1
        } else {
            let slot = self.recent[WINDOWS - 1] as usize;
            self.windows[slot] = w;
            slot
        };
        let k = self.recent.iter().position(|&r| r as usize == slot).unwrap_or(WINDOWS - 1);
        self.recent[..=k].rotate_right(1);
        self.recent[0] = slot as u8;
        Ok((t <= call.end).then_some(number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_found_by_the_instant_they_hold_and_by_number() {
        let mut store = CallStore::new("test").unwrap();
        let mut all = Vec::new();
        for rank in [3i64, 1, 7] {
            let n = 1000 + rank as usize * 37;
            let calls: Vec<MpiCall> = (0..n as i64)
                .map(|i| MpiCall {
                    start: i * 10,
                    end: i * 10 + 4,
                    compute: if i == 0 { 0 } else { 6 },
                    region: store.region(&format!("MPI_{}", i % 3)),
                })
                .collect();
            store.push(rank, 0, n as i64 * 10, &calls).unwrap();
            all.push((rank, calls));
        }
        // A call that overlaps the one before cannot be stored (compute is start less its end).
        let overlapping = [
            MpiCall { start: 0, end: 10, compute: 0, region: 0 },
            MpiCall { start: 5, end: 20, compute: 0, region: 0 },
        ];
        assert!(store.push(9, 0, 20, &overlapping).unwrap_err().to_string().contains("overlaps the one before"));
        store.finish_writing().unwrap();
        assert_eq!(store.regions.len(), 3);
        for (rank, calls) in &all {
            let ri = store.rank_index(*rank).unwrap();
            let first = store.ranks[ri].first;
            for (i, c) in calls.iter().enumerate().step_by(7) {
                let number = first + i as u32;
                assert_eq!(store.call(ri, number).unwrap(), *c);
                assert_eq!(store.locate(ri, c.start).unwrap(), Some(number));
                assert_eq!(store.locate(ri, c.end).unwrap(), Some(number));
                assert_eq!(store.locate(ri, c.end + 1).unwrap(), None, "between calls");
                assert_eq!(store.locate(ri, c.start + 1).unwrap(), Some(number), "remembered");
                assert_eq!(
                    store.locate(ri, c.start + 11).unwrap(),
                    Some(number + 1).filter(|_| i + 1 < calls.len()),
                    "the next in the run"
                );
            }
            assert_eq!(store.locate(ri, -1).unwrap(), None, "before the first");
        }
        // Calls that touch: the instant they share belongs to the later one, remembered or not.
        let mut touching = CallStore::new("test").unwrap();
        let calls: Vec<MpiCall> =
            (0..300i64).map(|i| MpiCall { start: i * 10, end: i * 10 + 10, compute: 0, region: 0 }).collect();
        touching.push(0, 0, 3000, &calls).unwrap();
        touching.finish_writing().unwrap();
        for i in 0..299u32 {
            assert_eq!(touching.locate(0, i64::from(i) * 10 + 5).unwrap(), Some(i));
            assert_eq!(touching.locate(0, i64::from(i) * 10 + 10).unwrap(), Some(i + 1));
        }
        for (rank, _) in &all {
            let ri = store.rank_index(*rank).unwrap();
            assert_eq!(store.locate(ri, i64::MAX).unwrap(), None, "after the last");
        }
    }

    #[test]
    fn many_instants_at_once_are_placed_as_one_by_one() {
        let calls_of = |rank: i64| -> Vec<MpiCall> {
            (0..700 + rank * 50)
                .map(|i| MpiCall { start: i * 10 + rank, end: i * 10 + rank + 4, compute: 6, region: 0 })
                .collect()
        };
        let ranks = [0i64, 1, 2, 5, 9];
        let fresh = || {
            let mut store = CallStore::new("test").unwrap();
            for rank in ranks {
                let mut calls = calls_of(rank);
                calls[0].compute = calls[0].start;
                store.push(rank, 0, 10_000, &calls).unwrap();
            }
            store.finish_writing().unwrap();
            store
        };
        // Instants in no order: inside calls, between them, before and after a rank's calls,
        // and sides of no rank.
        let mut sides = Vec::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ri = ((x >> 33) % 6) as u32;
            let t = ((x >> 7) % 10_500) as i64 - 100;
            sides.push((if ri == 5 { NOWHERE } else { ri }, t));
        }
        let mut one_by_one = fresh();
        let mut expected = Vec::new();
        let mut expected_unplaced = vec![0i64; ranks.len()];
        for &(ri, t) in &sides {
            let found = if ri == NOWHERE { None } else { one_by_one.locate(ri as usize, t).unwrap() };
            if ri != NOWHERE && found.is_none() {
                expected_unplaced[ri as usize] += 1;
            }
            expected.push(found.unwrap_or(NOWHERE));
        }
        let mut at_once = fresh();
        let (mut found, mut unplaced) = (Vec::new(), vec![0i64; ranks.len()]);
        for part in sides.chunks(4096) {
            let mut part_found = Vec::new();
            at_once.locate_all(part, &mut part_found, &mut unplaced).unwrap();
            found.extend(part_found);
        }
        assert_eq!(found, expected);
        assert_eq!(unplaced, expected_unplaced);
        assert!(expected.iter().filter(|f| **f != NOWHERE).count() > 5_000, "many placed");
        assert!(expected_unplaced.iter().all(|u| *u > 100), "and many between calls");
    }

    #[test]
    fn ranks_are_found_densely_numbered_or_not() {
        for ids in [vec![0i64, 1, 2, 3], vec![3, 1_000_000_000, -4]] {
            let mut store = CallStore::new("test").unwrap();
            for &rank in &ids {
                store.push(rank, 0, 10, &[MpiCall { start: 0, end: 5, compute: 0, region: 0 }]).unwrap();
            }
            store.finish_writing().unwrap();
            for (i, &rank) in ids.iter().enumerate() {
                assert_eq!(store.rank_index(rank), Some(i));
            }
            for absent in [4i64, 7, -1, 999_999_999] {
                assert_eq!(store.rank_index(absent), None);
            }
        }
    }

    #[test]
    fn a_call_is_found_on_its_rank_past_ranks_without_calls() {
        let mut store = CallStore::new("test").unwrap();
        let call = |i: i64| MpiCall { start: i * 10, end: i * 10 + 5, compute: if i == 0 { 0 } else { 5 }, region: 0 };
        // Calls 0..3 on the first rank, none on the second and third, 3..5 on the fourth.
        for (rank, n) in [(0i64, 3), (1, 0), (2, 0), (3, 2)] {
            let calls: Vec<MpiCall> = (0..n).map(call).collect();
            store.push(rank, 0, 100, &calls).unwrap();
        }
        store.finish_writing().unwrap();
        let ranks: Vec<usize> = (0..5).map(|n| store.rank_of_call(n)).collect();
        assert_eq!(ranks, [0, 0, 0, 3, 3]);
        for n in 0..5u32 {
            let r = store.rank_of_call(n);
            assert!(store.ranks[r].first <= n && n < store.ranks[r].first + store.ranks[r].count);
        }
    }

    #[test]
    fn a_call_is_found_on_its_rank_among_many_of_any_size() {
        let mut x = 99u64;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for ranks in [1u64, 2, 7, 300] {
            let mut store = CallStore::new("test").unwrap();
            for rank in 0..ranks {
                // Ranks without calls, with one, with a few and with many.
                let n = [0, 1, next(5), next(2_000)][next(4) as usize];
                let calls: Vec<MpiCall> = (0..n as i64)
                    .map(|i| MpiCall { start: i * 10, end: i * 10 + 5, compute: 5.min(i * 10), region: 0 })
                    .collect();
                store.push(rank as i64, 0, 1 << 40, &calls).unwrap();
            }
            store.finish_writing().unwrap();
            for n in 0..store.len() as u32 {
                let r = store.rank_of_call(n);
                let (first, count) = (store.ranks[r].first, store.ranks[r].count);
                assert!(first <= n && n < first + count, "call {n} of {ranks} ranks on rank {r} ({first}, {count})");
            }
        }
    }
}
