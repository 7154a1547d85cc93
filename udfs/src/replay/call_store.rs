//! Every rank's MPI calls kept out of memory for the replay: as the calls are swept a chunk of
//! whole ranks at a time, each rank's outermost MPI calls are appended to an anonymous scratch
//! file in blocks of `BLOCK` of its own (start, then duration and region in one word: 16 bytes;
//! the compute before a call is its start less the previous call's end, kept per block for the
//! first) and numbered on from the ranks before, so a call is known everywhere by its number.
//! In memory stay, per rank, where its blocks lie and each block's first start; a lookup (which
//! call of a rank holds an instant) or a read of a call by its number fetches the block it lies
//! in, and each rank keeps the last `WAYS` blocks it used, since the messages and the replay
//! visit a rank's calls nearly in time order. A lookup also remembers the run of calls from the one it found (`RUN`, the last
//! `WINDOWS` runs per rank): a rank's sends of one step, its receives, the wait that completes
//! them are found there without a search. A run of 50 M MPI calls takes 0.8 GB of file and
//! about 6 MB of index.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

/// The most calls the store numbers (a number above them tags a collective instance in the
/// replay's lists).
pub(super) const MAX_CALLS: u32 = 1 << 31;

/// Calls per block, the unit read back.
const BLOCK: u32 = 128;

/// Blocks each rank keeps.
const WAYS: usize = 8;

/// Bytes of a call on disk.
const CALL_BYTES: usize = 16;

/// Bits of a call's duration on disk (78 hours); the region takes the rest of its word.
const DURATION_BITS: u32 = 48;

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

fn encode(c: &MpiCall, out: &mut [u8]) {
    out[0..8].copy_from_slice(&c.start.to_le_bytes());
    let word = ((c.end - c.start) as u64) | (u64::from(c.region) << DURATION_BITS);
    out[8..16].copy_from_slice(&word.to_le_bytes());
}

/// A block's calls, the end of the call before its first (the rank's origin for its first
/// block) giving the first's compute.
fn decode(bytes: &[u8], mut previous_end: i64) -> Box<[MpiCall]> {
    bytes
        .chunks_exact(CALL_BYTES)
        .map(|b| {
            let start = i64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
            let word = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
            let end = start + (word & ((1 << DURATION_BITS) - 1)) as i64;
            let call = MpiCall { start, end, compute: start - previous_end, region: (word >> DURATION_BITS) as u32 };
            previous_end = end;
            call
        })
        .collect()
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
    /// Where its first block lies in the file (in blocks).
    block0: u32,
    /// Per block of its calls: the first call's start, and the end of the call before it.
    marks: Vec<(i64, i64)>,
    /// The blocks it used last, the most recent first.
    cached: Vec<(u32, Box<[MpiCall]>)>,
    /// Runs of consecutive calls that lookups found lately: a rank's message sides fall in a
    /// few calls at a time (its sends, its receives, the wait that completes them), so most
    /// lookups end in one of these, without reading a block.
    windows: Vec<Window>,
    /// Indices into `windows`, the most recently used first (the runs themselves stay put).
    recent: [u8; WINDOWS],
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

/// The MPI calls of every rank swept so far (see the module's notes).
pub(super) struct CallStore {
    what: &'static str,
    writer: Option<BufWriter<File>>,
    file: Option<File>,
    written: u32,
    /// Blocks written (each rank's calls start a block).
    blocks: u32,
    pub ranks: Vec<RankCalls>,
    index: FastMap<i64, usize>,
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
            blocks: 0,
            ranks: Vec::new(),
            index: FastMap::default(),
            regions: Vec::new(),
            region_ids: FastMap::default(),
            buffer: vec![0; CALL_BYTES],
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
        if self.index.contains_key(&rank) {
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
        if self.regions.len() > 1 << (64 - DURATION_BITS) {
            return Err(DataFusionError::Execution(format!(
                "{what}: more than {} MPI regions are more than it handles",
                1 << (64 - DURATION_BITS)
            )));
        }
        let first = self.written;
        let block0 = self.blocks;
        let mut marks = Vec::with_capacity(calls.len().div_ceil(BLOCK as usize));
        // Checked whole before any is written, so a refused rank leaves the file as it was.
        let mut previous_end = origin;
        for c in calls {
            if c.compute != c.start - previous_end || c.end - c.start >= 1 << DURATION_BITS {
                return Err(DataFusionError::Execution(format!(
                    "{what}: rank {rank}'s MPI call at {}..{} overlaps the one before or lasts longer than {} hours",
                    c.start,
                    c.end,
                    (1i64 << DURATION_BITS) / 3_600_000_000_000
                )));
            }
            previous_end = c.end;
        }
        let mut previous_end = origin;
        for (i, c) in calls.iter().enumerate() {
            if (i as u32).is_multiple_of(BLOCK) {
                marks.push((c.start, previous_end));
            }
            encode(c, &mut self.buffer);
            writer.write_all(&self.buffer).map_err(|e| io_error(what, "writing", e))?;
            previous_end = c.end;
        }
        // The rank's last block filled, so that its blocks lie at whole blocks of the file.
        let padding = (calls.len() as u32).next_multiple_of(BLOCK) - calls.len() as u32;
        for _ in 0..padding {
            writer.write_all(&[0u8; CALL_BYTES]).map_err(|e| io_error(what, "writing", e))?;
        }
        self.blocks += marks.len() as u32;
        self.written += calls.len() as u32;
        self.index.insert(rank, self.ranks.len());
        self.ranks.push(RankCalls {
            rank,
            origin,
            end,
            first,
            count: calls.len() as u32,
            block0,
            marks,
            cached: Vec::new(),
            windows: Vec::new(),
            recent: std::array::from_fn(|i| i as u8),
        });
        Ok(())
    }

    /// Every rank has been added: calls are read back from now on.
    pub fn finish_writing(&mut self) -> Result<()> {
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

    /// Where `rank` lies among the store's ranks.
    pub fn rank_index(&self, rank: i64) -> Option<usize> {
        self.index.get(&rank).copied()
    }

    /// Bytes held in memory: the index and the cached blocks.
    pub fn held_bytes(&self) -> usize {
        let per_rank = std::mem::size_of::<RankCalls>() + 32;
        let window = std::mem::size_of::<Window>();
        self.ranks
            .iter()
            .map(|r| {
                per_rank
                    + r.marks.len() * 16
                    + r.cached.len() * BLOCK as usize * std::mem::size_of::<MpiCall>()
                    + r.windows.len() * window
            })
            .sum::<usize>()
            + self.regions.iter().map(|r| r.len() * 2 + 48).sum::<usize>()
    }

    /// Call number `number`, one of rank `ri`'s.
    pub fn call(&mut self, ri: usize, number: u32) -> Result<MpiCall> {
        let what = self.what;
        let file = sealed(&self.file, what)?;
        self.ranks[ri].call(file, what, number)
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
    /// `unplaced`. The ranks are shared out among the threads in runs, each thread taking the
    /// sides of its own ranks in their order, so every rank sees its lookups in the same order
    /// as one by one, and the answers are the same.
    pub fn locate_all(&mut self, sides: &[(u32, i64)], found: &mut Vec<u32>, unplaced: &mut [i64]) -> Result<()> {
        use rayon::prelude::*;
        use std::sync::atomic::{AtomicU32, Ordering};
        let CallStore { what, file, ranks, .. } = self;
        let what = *what;
        let file = sealed(file, what)?;
        let threads = rayon::current_num_threads().clamp(1, ranks.len().max(1));
        let per = ranks.len().div_ceil(threads).max(1);
        let answers: Vec<AtomicU32> = (0..sides.len()).map(|_| AtomicU32::new(NOWHERE)).collect();
        let counts: Vec<Result<(usize, Vec<i64>)>> = ranks
            .par_chunks_mut(per)
            .enumerate()
            .map(|(g, ranks)| {
                let lo = g * per;
                let mut missed = vec![0i64; ranks.len()];
                for (side, answer) in sides.iter().zip(&answers) {
                    let ri = side.0 as usize;
                    if side.0 == NOWHERE || ri < lo || ri >= lo + ranks.len() {
                        continue;
                    }
                    match ranks[ri - lo].locate(file, what, side.1)? {
                        Some(number) => answer.store(number, Ordering::Relaxed),
                        None => missed[ri - lo] += 1,
                    }
                }
                Ok((lo, missed))
            })
            .collect();
        for c in counts {
            let (lo, missed) = c?;
            for (u, m) in unplaced[lo..].iter_mut().zip(missed) {
                *u += m;
            }
        }
        found.clear();
        found.extend(answers.into_iter().map(AtomicU32::into_inner));
        Ok(())
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
        let n = (self.count - b * BLOCK).min(BLOCK) as usize;
        let mut bytes = vec![0u8; n * CALL_BYTES];
        let at = u64::from(self.block0 + b) * u64::from(BLOCK) * CALL_BYTES as u64;
        file.read_exact_at(&mut bytes, at).map_err(|e| io_error(what, "reading", e))?;
        let calls = decode(&bytes, self.marks[b as usize].1);
        self.cached.insert(0, (b, calls));
        self.cached.truncate(WAYS);
        Ok(&self.cached[0].1)
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
        let j = self.marks.partition_point(|m| m.0 <= t);
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
}
