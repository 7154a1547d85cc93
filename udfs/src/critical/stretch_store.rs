//! Every rank's stretches ([`crate::sweeps::stretches`]), kept out of memory: the analyses that
//! walk a run backwards across ranks (`critical_path`, `critical_path_profile`) sweep the calls
//! a chunk of whole ranks at a time (commdb_analysis::by_rank) and write each rank's stretches to a
//! scratch file as they come, keeping in memory only an index: per rank where its stretches
//! lie, and the end, first byte and length of every block of stretches (a rank's stretches may
//! come in runs, as the critical path's walk on a distributed engine reads them, and the runs
//! lie apart in the file). The walk then reads back
//! the block that holds an instant, and keeps the blocks it used last (at most
//! `CACHED_STRETCHES`). On disk a stretch is a head byte and differences (`encode_block`): a
//! stretch starts where the previous ended; its length, and its MPI call's start from the
//! call start before it (the calls of a run follow each other), as `varint`s; its region and
//! call path, most often those of a stretch a few before (a rank's iterations repeat the same
//! calls), named by how far back. Fields of 32 bytes take 3 to 5: `critical_path` over 200 M
//! events writes 55 M stretches in 226 MB, about 472 MB when each held its region, path and
//! call start whole, and `delay_costs` over 1 B wrote 12.5 GB with stretches of 32 bytes. A
//! run of 100 M stretches holds about 12 MB of index and at most 75 MB of blocks per
//! reader, where the stretches themselves would take 5 GB.
//! This is how DataFusion's own sorts and joins spill what does not fit the memory budget; the
//! file is anonymous and goes when the analysis ends, however it ends. Once written, several
//! threads can read the stretches at once (`delay_costs`), each through a `StretchReader` with
//! a cache of its own, which also remembers where each rank's last walk began and searches the
//! next one outwards from there.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use commdb_catalog::fast_hash::FastMap;

use arrow::array::RecordBatch;
use datafusion::common::exec_err;
use datafusion::error::{DataFusionError, Result};

use crate::critical::near::partition_point_near;
use crate::critical::omp_handovers::{OmpWait, mark_handovers};
use crate::sweeps::call_paths::Paths;
use crate::sweeps::call_sweep::{Call, Names, streams_named};
use crate::sweeps::stretches::{NO_PATH, Stretch, UNCOVERED};
use crate::waits::openmp::{ThreadCalls, ThreadRecords, rank_instances, rank_threads};

/// Stretches per block as written (about 1 KiB on disk); a block read back is a run of them, from
/// `BLOCK` to `MAX_BLOCK` stretches, as many as lets the cache hold two blocks of every location
/// (`finish_writing`): the analyses that trace every wait back read a block or two of each of
/// thousands of locations at once, and where there are few, larger blocks are read less often.
pub(crate) const BLOCK: usize = 128;

/// The most stretches a block read back holds.
const MAX_BLOCK: usize = 1024;

/// Stretches kept in memory at most while walking, per reader (75 MB).
pub(crate) const CACHED_STRETCHES: usize = 12_288 * BLOCK;

/// Where a rank's stretches lie in the file.
#[derive(Debug, Default)]
struct RankIndex {
    count: usize,
    /// The start of the rank's first stretch and the end of its last.
    from: i64,
    to: i64,
    /// The end (`to`) of each block's last stretch (per block read back, once sealed).
    block_ends: Vec<i64>,
    /// The first byte in the file of each block as written, and its length: a key's stretches
    /// added in several runs (`append`) lie in several places.
    block_at: Vec<u64>,
    block_len: Vec<u32>,
    /// Whether the time before its first stretch is padded (a rank's, or its master thread's).
    padded: bool,
}

/// The stretches of every rank swept so far (see the module's notes).
pub(crate) struct StretchStore {
    what: &'static str,
    file: Option<BufWriter<File>>,
    reader: Option<File>,
    /// Stretches and bytes written.
    written: u64,
    bytes_written: u64,
    ranks: BTreeMap<i64, RankIndex>,
    /// Time no region covers before a rank's first stretch, from this instant (the run's
    /// first): a stretch of its own, of `region` (the rank's own work, as time between calls is).
    padding: Option<(i64, u32)>,
    cache: BlockCache,
    /// Stretches per block read back (a multiple of `BLOCK`).
    unit: usize,
}

/// The blocks read back lately, with when each was last used; past `CACHED_STRETCHES`, the
/// quarter used least lately goes.
#[derive(Default)]
struct BlockCache {
    blocks: FastMap<(i64, usize), (u64, Vec<Stretch>)>,
    uses: u64,
}

impl BlockCache {
    /// Block `b` of `rank` (whose index is `r`), read from `file` if not cached.
    fn block(
        &mut self,
        what: &str,
        file: &File,
        rank: i64,
        r: &RankIndex,
        b: usize,
        unit: usize,
    ) -> Result<&[Stretch]> {
        self.uses += 1;
        let uses = self.uses;
        if !self.blocks.contains_key(&(rank, b)) {
            let n = (r.count - b * unit).min(unit);
            let written = unit / BLOCK;
            let first = b * written;
            let last = (first + written).min(r.block_at.len());
            let len: u64 = r.block_len[first..last].iter().map(|&l| u64::from(l)).sum();
            let mut bytes = vec![0u8; len as usize];
            // The blocks as written, each run of them that lies together read at once.
            let (mut i, mut filled) = (first, 0usize);
            while i < last {
                let at = r.block_at[i];
                let mut end = at + u64::from(r.block_len[i]);
                i += 1;
                while i < last && r.block_at[i] == end {
                    end += u64::from(r.block_len[i]);
                    i += 1;
                }
                let size = (end - at) as usize;
                file.read_exact_at(&mut bytes[filled..filled + size], at).map_err(|e| io_error(what, "reading", e))?;
                filled += size;
            }
            let at = r.block_at[first];
            let list = decode_blocks(&bytes, n).ok_or_else(|| {
                DataFusionError::Execution(format!(
                    "{what}: the scratch file of its stretches holds no {n} stretches at byte {at} (it was changed while the analysis ran)"
                ))
            })?;
            if self.blocks.len() >= CACHED_STRETCHES / unit {
                // The quarter used least lately goes at once, which keeps the search for them
                // from being made at every block read.
                let mut used: Vec<u64> = self.blocks.values().map(|(u, _)| *u).collect();
                let k = used.len() / 4;
                let (_, limit, _) = used.select_nth_unstable(k);
                let limit = *limit;
                self.blocks.retain(|_, (u, _)| *u > limit);
            }
            self.blocks.insert((rank, b), (uses, list));
        }
        let entry = self.blocks.get_mut(&(rank, b)).expect("the block was just cached");
        entry.0 = uses;
        Ok(&entry.1)
    }

    fn held_bytes(&self) -> usize {
        self.blocks.values().map(|(_, b)| b.capacity() * std::mem::size_of::<Stretch>() + 64).sum()
    }
}

/// The store's file, once every rank's stretches are written.
fn sealed<'f>(file: &'f Option<File>, what: &str) -> Result<&'f File> {
    file.as_ref()
        .ok_or_else(|| DataFusionError::Internal(format!("{what}: stretches read before they were all written")))
}

/// A reader of a store whose stretches have all been written, with a block cache of its own:
/// several threads read one store at once, each through its reader.
pub(crate) struct StretchReader<'a> {
    store: &'a StretchStore,
    file: &'a File,
    cache: BlockCache,
    /// Per rank, where its last walk began (block, index): walks of a rank go back and forth
    /// a little at a time, so the next one is searched from there, through stretches still in
    /// the processor's cache, rather than by halving the whole block.
    last: FastMap<i64, (usize, usize)>,
}

/// The first of `block`'s stretches that ends after `t`, searched outwards from `near`.
fn first_ending_after(block: &[Stretch], t: i64, near: usize) -> usize {
    partition_point_near(block, near, |s| s.to <= t)
}

impl std::fmt::Debug for StretchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StretchStore").field("ranks", &self.ranks.len()).field("stretches", &self.written).finish()
    }
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its stretches failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// The most stretches back within a block that a stretch's region and call path are taken from
/// (`encode_block`): a rank's iterations repeat the same few calls in turn.
const SHAPE_BACK: usize = 31;

/// Append a block of stretches to `out`, each as a head byte and then differences, the first
/// from 0. The head's two low bits say what follows the length: nothing; the MPI call's start,
/// as its difference from the call start of the stretch before when that one has one (0 where
/// MPI calls follow each other in one run), else from the stretch's own start; the hand-over's
/// thread; or nothing for an MPI call that starts with the stretch. Its third bit says that the
/// stretch does not start where the one before ended (the difference follows first); its top
/// five bits, when not zero, that the region and call path are those of the stretch that many
/// before in the block, and when zero they follow, plus one so that `UNCOVERED` and `NO_PATH`
/// (u32::MAX) take a byte. The stretch's length always follows its start.
fn encode_block(block: &[Stretch], out: &mut Vec<u8>) {
    use crate::varint::{put, put_signed};
    let mut before = 0i64;
    let mut call_before: Option<i64> = None;
    for (i, s) in block.iter().enumerate() {
        let kind: u8 = match (s.call_start, s.hand) {
            (Some(start), _) if start == s.from => 3,
            (Some(_), _) => 1,
            (None, Some(_)) => 2,
            (None, None) => 0,
        };
        let gap = s.from != before;
        let back = (1..=SHAPE_BACK.min(i))
            .find(|&k| block[i - k].region == s.region && block[i - k].path == s.path)
            .unwrap_or(0);
        out.push(kind | u8::from(gap) << 2 | (back as u8) << 3);
        if gap {
            put_signed(out, s.from.wrapping_sub(before));
        }
        put_signed(out, s.to.wrapping_sub(s.from));
        match (kind, s.call_start, s.hand) {
            (1, Some(start), _) => put_signed(out, call_before.unwrap_or(s.from).wrapping_sub(start)),
            (2, _, Some(thread)) => put(out, u64::from(thread)),
            _ => {}
        }
        if back == 0 {
            put(out, u64::from(s.region.wrapping_add(1)));
            put(out, u64::from(s.path.wrapping_add(1)));
        }
        before = s.to;
        call_before = s.call_start;
    }
}

/// The `n` stretches that `encode_block` wrote into `bytes`, one block after another (None:
/// the bytes do not hold them).
fn decode_blocks(bytes: &[u8], n: usize) -> Option<Vec<Stretch>> {
    use crate::varint::{get, get_signed};
    let mut out: Vec<Stretch> = Vec::with_capacity(n);
    let mut at = 0;
    let mut before = 0i64;
    let mut call_before: Option<i64> = None;
    for k in 0..n {
        let in_block = k % BLOCK;
        if in_block == 0 {
            before = 0;
            call_before = None;
        }
        let head = *bytes.get(at)?;
        at += 1;
        let from = if head & 4 != 0 { before.wrapping_add(get_signed(bytes, &mut at)?) } else { before };
        let to = from.wrapping_add(get_signed(bytes, &mut at)?);
        let (call_start, hand) = match head & 3 {
            0 => (None, None),
            1 => (Some(call_before.unwrap_or(from).wrapping_sub(get_signed(bytes, &mut at)?)), None),
            2 => (None, Some(u32::try_from(get(bytes, &mut at)?).ok()?)),
            _ => (Some(from), None),
        };
        let back = usize::from(head >> 3);
        let (region, path) = if back == 0 {
            let region = u32::try_from(get(bytes, &mut at)?).ok()?.wrapping_sub(1);
            let path = u32::try_from(get(bytes, &mut at)?).ok()?.wrapping_sub(1);
            (region, path)
        } else if back <= in_block {
            let like = &out[k - back];
            (like.region, like.path)
        } else {
            return None;
        };
        out.push(Stretch { from, to, region, path, call_start, hand });
        before = to;
        call_before = call_start;
    }
    (at == bytes.len()).then_some(out)
}

impl StretchStore {
    /// An empty store for the analysis `what` (named in its errors).
    pub(crate) fn new(what: &'static str) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(StretchStore {
            what,
            file: Some(BufWriter::with_capacity(1 << 20, file)),
            reader: None,
            written: 0,
            bytes_written: 0,
            ranks: BTreeMap::new(),
            padding: None,
            cache: BlockCache::default(),
            unit: BLOCK,
        })
    }

    /// Add the stretches of `key` (in time order; a key comes once); with `padded`, the time
    /// before its first stretch is padded as a rank's is (not so a worker thread's: it idles).
    pub(crate) fn push(&mut self, key: i64, list: &[Stretch], padded: bool) -> Result<()> {
        if self.ranks.contains_key(&key) {
            return Err(DataFusionError::Internal(format!("{}: the stretches of {key} added twice", self.what)));
        }
        self.append(key, list, padded)
    }

    /// Add stretches of `key` after those it has (in time order): every run but a key's last
    /// holds a whole number of blocks (`BLOCK`), so that a key's blocks are full but its last.
    /// `padded` is taken from the first run.
    pub(crate) fn append(&mut self, key: i64, list: &[Stretch], padded: bool) -> Result<()> {
        let what = self.what;
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| DataFusionError::Internal(format!("{what}: stretches added after the walk began")))?;
        let index = self.ranks.entry(key).or_insert_with(|| RankIndex {
            from: list.first().map_or(0, |s| s.from),
            padded,
            ..RankIndex::default()
        });
        if !index.count.is_multiple_of(BLOCK) {
            return Err(DataFusionError::Internal(format!(
                "{what}: stretches of {key} added after a run that ended within a block"
            )));
        }
        if index.count == 0 {
            index.from = list.first().map_or(0, |s| s.from);
        }
        let mut bytes = Vec::with_capacity(BLOCK * 16);
        for block in list.chunks(BLOCK) {
            bytes.clear();
            encode_block(block, &mut bytes);
            index.block_ends.push(block[block.len() - 1].to);
            index.block_at.push(self.bytes_written);
            index.block_len.push(bytes.len() as u32);
            file.write_all(&bytes).map_err(|e| io_error(what, "writing", e))?;
            self.bytes_written += bytes.len() as u64;
        }
        if let Some(last) = list.last() {
            index.to = last.to;
        }
        index.count += list.len();
        self.written += list.len() as u64;
        Ok(())
    }

    /// Every rank's stretches have been added: from now on they are read. Time no region
    /// covers before a rank's first stretch, from the earliest first stretch, is a stretch of
    /// region `uncovered` (path `NO_PATH`).
    pub(crate) fn finish_writing(&mut self, uncovered: u32) -> Result<()> {
        self.finish_writing_from(uncovered, None)
    }

    /// `finish_writing`, the run beginning at `start` when given (the earliest first stretch
    /// over ranks that other stores hold, as on a distributed engine), or earlier if a rank
    /// here begins before it.
    pub(crate) fn finish_writing_from(&mut self, uncovered: u32, run_start: Option<i64>) -> Result<()> {
        let what = self.what;
        if let Some(file) = self.file.take() {
            let file = file.into_inner().map_err(|e| io_error(what, "writing", e.into_error()))?;
            self.reader = Some(file);
        }
        let here = self.ranks.values().filter(|r| r.count > 0 && r.padded).map(|r| r.from).min();
        let start = match (here, run_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Blocks read back of as many written blocks as let the cache hold two of every location.
        let locations = self.ranks.values().filter(|r| r.count > 0).count().max(1);
        let k = (CACHED_STRETCHES / (2 * locations)).clamp(BLOCK, MAX_BLOCK) / BLOCK;
        self.unit = k * BLOCK;
        if k > 1 {
            for r in self.ranks.values_mut() {
                r.block_ends = r.block_ends.chunks(k).map(|c| c[c.len() - 1]).collect();
            }
        }
        self.padding = start.map(|s| (s, uncovered));
        Ok(())
    }

    pub(crate) fn contains(&self, rank: i64) -> bool {
        self.ranks.contains_key(&rank)
    }

    /// Number of stretches, the padding before each rank's first included.
    pub(crate) fn len(&self) -> usize {
        let padded = self.ranks.values().filter(|r| self.padded(r).is_some()).count();
        self.written as usize + padded
    }

    /// The end of the last stretch of every rank that has one.
    pub(crate) fn ends(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ranks.iter().filter(|(_, r)| r.count > 0).map(|(rank, r)| (*rank, r.to))
    }

    /// The padding stretch before the rank's first, if it has one.
    fn padded(&self, r: &RankIndex) -> Option<Stretch> {
        let (start, region) = self.padding?;
        (r.padded && r.count > 0 && r.from > start).then_some(Stretch {
            from: start,
            to: r.from,
            region,
            path: NO_PATH,
            call_start: None,
            hand: None,
        })
    }

    /// The padding stretch before `rank`'s first stretch (time before its first call from
    /// the run's first), if it has one.
    pub(crate) fn padding_of(&self, rank: i64) -> Option<Stretch> {
        self.ranks.get(&rank).and_then(|r| self.padded(r))
    }

    /// The stretch of `rank` holding the instant just before `t`: the first whose end is at
    /// or after `t`, if it starts before `t`.
    pub(crate) fn holding(&mut self, rank: i64, t: i64) -> Result<Option<Stretch>> {
        let Some(r) = self.ranks.get(&rank) else { return Ok(None) };
        if r.count == 0 {
            return Ok(None);
        }
        if t <= r.from {
            return Ok(self.padded(r).filter(|s| s.from < t));
        }
        let b = r.block_ends.partition_point(|&e| e < t);
        if b == r.block_ends.len() {
            return Ok(None);
        }
        let block = self.block(rank, b)?;
        let s = block[block.partition_point(|s| s.to < t)];
        Ok((s.from < t).then_some(s))
    }

    /// The latest stretch of `key` that ends at or before `t` and after `after`, of those `take`
    /// takes, searched backward from `t`.
    pub(crate) fn latest_by(
        &mut self,
        key: i64,
        t: i64,
        after: i64,
        take: &mut dyn FnMut(&Stretch) -> bool,
    ) -> Result<Option<Stretch>> {
        let Some(r) = self.ranks.get(&key) else { return Ok(None) };
        if r.count == 0 {
            return Ok(None);
        }
        // The first block whose last stretch ends after t holds the last that ends by t, or
        // the block before it does.
        let mut b = r.block_ends.partition_point(|&e| e <= t).min(r.block_ends.len() - 1);
        loop {
            let block = self.block(key, b)?;
            let k = block.partition_point(|s| s.to <= t);
            for s in block[..k].iter().rev() {
                if s.to <= after {
                    return Ok(None);
                }
                if take(s) {
                    return Ok(Some(*s));
                }
            }
            if b == 0 {
                return Ok(None);
            }
            b -= 1;
        }
    }

    /// The thread of `rank` (of `threads`, in order, the master first; keys by `location`)
    /// whose MPI call was under way at `t`: the master's if it was in one or none was.
    pub(crate) fn mpi_thread(&mut self, threads: &[i64], rank: i64, t: i64) -> Result<i64> {
        if let [only] = threads {
            return Ok(*only);
        }
        for &thread in threads {
            if self.holding(location(rank, thread), t.saturating_add(1))?.is_some_and(|s| s.call_start.is_some()) {
                return Ok(thread);
            }
        }
        Ok(threads.first().copied().unwrap_or(0))
    }

    /// Let go of the blocks read back so far (the readers that follow have caches of their own).
    pub(crate) fn forget_blocks(&mut self) {
        self.cache = BlockCache::default();
    }

    /// The start of `rank`'s first stretch, the padding included (None: no stretches).
    pub(crate) fn origin(&self, rank: i64) -> Option<i64> {
        let r = self.ranks.get(&rank).filter(|r| r.count > 0)?;
        Some(self.padded(r).map_or(r.from, |p| p.from))
    }

    /// Hand `f` the stretches of `rank` from the first that ends after `t` on, in order, the
    /// padding included, until it returns false.
    /// A reader of the stretches with a cache of its own (after `finish_writing`).
    pub(crate) fn reader(&self) -> Result<StretchReader<'_>> {
        Ok(StretchReader {
            store: self,
            file: sealed(&self.reader, self.what)?,
            cache: BlockCache::default(),
            last: FastMap::default(),
        })
    }

    fn block(&mut self, rank: i64, b: usize) -> Result<&[Stretch]> {
        let file = sealed(&self.reader, self.what)?;
        self.cache.block(self.what, file, rank, &self.ranks[&rank], b, self.unit)
    }

    pub(crate) fn held_bytes(&self) -> usize {
        let index: usize =
            self.ranks.values().map(|r| 80 + 8 * r.block_ends.capacity() + 12 * r.block_at.capacity()).sum();
        index + self.cache.held_bytes()
    }
}

impl StretchReader<'_> {
    /// Call `f` on each of `rank`'s stretches that ends after `t`, in order (the padding first
    /// when it does), until it returns false.
    pub(crate) fn each_after(&mut self, rank: i64, t: i64, mut f: impl FnMut(&Stretch) -> bool) -> Result<()> {
        let store = self.store;
        let Some(r) = store.ranks.get(&rank) else { return Ok(()) };
        if r.count == 0 {
            return Ok(());
        }
        if let Some(pad) = store.padded(r)
            && pad.to > t
            && !f(&pad)
        {
            return Ok(());
        }
        let blocks = r.block_ends.len();
        let mut b = r.block_ends.partition_point(|&e| e <= t);
        let mut first = true;
        while b < blocks {
            let block = self.cache.block(store.what, self.file, rank, r, b, store.unit)?;
            let from = if first {
                let near = match self.last.get(&rank) {
                    Some(&(lb, li)) if lb == b => li,
                    _ => block.len() / 2,
                };
                let from = first_ending_after(block, t, near);
                self.last.insert(rank, (b, from));
                from
            } else {
                0
            };
            first = false;
            for s in &block[from..] {
                if !f(s) {
                    return Ok(());
                }
            }
            b += 1;
        }
        Ok(())
    }
}

/// Threads a rank may have in a store of every thread's stretches (`sweep_threads`).
pub(crate) const THREADS_PER_RANK: i64 = 1 << 20;

/// The key of a rank's thread in a store of every thread's stretches.
pub(crate) fn location(rank: i64, thread: i64) -> i64 {
    rank * THREADS_PER_RANK + thread
}

/// The rank and thread of a key made by `location`.
pub(crate) fn rank_thread(key: i64) -> (i64, i64) {
    (key.div_euclid(THREADS_PER_RANK), key.rem_euclid(THREADS_PER_RANK))
}

/// Sweep a chunk of whole ranks' calls (rank, thread, region, start_ts, end_ts) into the
/// stretches of every thread, rank by rank in order, the region names and call paths kept in
/// `names` and `paths`: the other threads' call paths continue the master's at the fork before
/// them, and where `records` holds the rank's thread records, the OpenMP hand-overs of the
/// critical path are marked ([`crate::critical::omp_handovers`]). `each(rank, threads, waits,
/// names, paths)` is given each rank's threads in order (the master first) with their waits for
/// each other.
pub(crate) fn sweep_ranks(
    name: &str,
    batches: &[RecordBatch],
    records: &ThreadRecords,
    names: &mut Names,
    paths: &mut Paths,
    mut each: impl FnMut(i64, &[ThreadCalls], &[OmpWait], &Names, &Paths) -> Result<()>,
) -> Result<()> {
    let mut ranks: BTreeMap<i64, Vec<(i64, Vec<Call>)>> = BTreeMap::new();
    for ((rank, thread), calls) in streams_named(batches, name, names)? {
        if !(0..THREADS_PER_RANK).contains(&thread) {
            return exec_err!(
                "{name}: rank {rank} has a thread numbered {thread}; threads are numbered from 0 to {} within a rank",
                THREADS_PER_RANK - 1
            );
        }
        ranks.entry(rank).or_default().push((thread, calls));
    }
    let constructs = records.constructs(names);
    for (rank, streams) in ranks {
        let mut threads = rank_threads(rank, streams, records, names, paths);
        let mut waited = Vec::new();
        if let Some(team) = rank_instances(rank, &threads, records, &constructs) {
            waited = mark_handovers(&mut threads, &team, &constructs);
        }
        each(rank, &threads, &waited, names, paths)?;
    }
    Ok(())
}

/// Calls swept a chunk of whole ranks at a time into every thread's stretches that are not
/// kept (`sweep_ranks`), with the threads' records and the region names and call paths met so
/// far: the sweeps of the critical path's steps on a distributed engine.
pub(crate) struct Sweeper {
    records: ThreadRecords,
    names: Names,
    paths: Paths,
}

impl Sweeper {
    pub fn new(records: ThreadRecords) -> Sweeper {
        Sweeper { records, names: Names::default(), paths: Paths::default() }
    }

    /// Sweep a chunk of whole ranks' calls (`sweep_ranks`), `each` given each rank's threads.
    pub fn sweep(
        &mut self,
        name: &str,
        batches: &[RecordBatch],
        each: impl FnMut(i64, &[ThreadCalls], &[OmpWait], &Names, &Paths) -> Result<()>,
    ) -> Result<()> {
        sweep_ranks(name, batches, &self.records, &mut self.names, &mut self.paths, each)
    }

    pub fn held_bytes(&self) -> usize {
        self.records.held_bytes() + self.paths.held_bytes()
    }
}

/// Calls swept into every thread's stretches a chunk of whole ranks at a time, kept in a store
/// of stretches ([`crate::critical::stretch_store`]), with the region names and call paths.
pub(crate) struct Swept {
    pub store: StretchStore,
    pub names: Names,
    pub paths: Paths,
}

impl Swept {
    pub fn new(name: &'static str) -> Result<Swept> {
        Ok(Swept { store: StretchStore::new(name)?, names: Names::default(), paths: Paths::default() })
    }

    /// Sweep a chunk of whole ranks' calls (rank, thread, region, start_ts, end_ts) into the
    /// stretches of every thread, stored under `location(rank, thread)`: the other threads'
    /// call paths continue the master's at the fork before them, and where `records` holds the
    /// rank's thread records, the OpenMP hand-overs of the critical path are marked
    /// ([`crate::critical::omp_handovers`]). `each(rank, threads, waits, names)` sees each rank's threads
    /// before their stretches are stored, with the threads' waits for each other.
    pub fn sweep_threads(
        &mut self,
        name: &str,
        batches: &[RecordBatch],
        records: &ThreadRecords,
        mut each: impl FnMut(i64, &[ThreadCalls], &[OmpWait], &Names),
    ) -> Result<()> {
        let Swept { store, names, paths } = self;
        sweep_ranks(name, batches, records, names, paths, |rank, threads, waited, names, _| {
            each(rank, threads, waited, names);
            // The master is the first thread (rank_threads gives them in order, and the fork's
            // thread is the lowest in every trace seen).
            let master = threads.first().map(|t| t.thread);
            for th in threads {
                store.push(location(rank, th.thread), &th.stretches, Some(th.thread) == master)?;
            }
            Ok(())
        })
    }

    /// Every chunk has been swept: the stretches are read from now on.
    pub fn finish(&mut self) -> Result<()> {
        self.store.finish_writing(UNCOVERED)
    }

    /// `finish`, the run beginning at `run_start` (over the ranks that other tasks sweep).
    pub fn finish_from(&mut self, run_start: Option<i64>) -> Result<()> {
        self.store.finish_writing_from(UNCOVERED, run_start)
    }

    pub fn held_bytes(&self) -> usize {
        self.store.held_bytes() + self.paths.held_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(from: i64, to: i64, path: u32) -> Stretch {
        let hand = (path.is_multiple_of(2) && path % 3 == 2).then_some(path);
        Stretch { from, to, region: path, path, call_start: (path % 2 == 1).then_some(from), hand }
    }

    #[test]
    fn blocks_written_as_differences_read_back_whole_and_short() {
        // Gaps, overlaps, the ends of i64, the ids' extremes, every kind of slot.
        let mut list = Vec::new();
        let mut t = i64::MIN + 10;
        for k in 0..(3 * BLOCK as i64 + 5) {
            let from = match k % 9 {
                0 => t + 1_000_000_007,
                4 => t - 3,
                _ => t,
            };
            let to = if k == 7 { i64::MAX - 1 } else { from + (k * 37) % 5000 };
            let (call_start, hand) = match k % 4 {
                0 => (Some(from - (k << 20)), None),
                1 => (Some(i64::MIN), None),
                2 => (None, Some(if k % 3 == 0 { u32::MAX } else { k as u32 })),
                _ => (None, None),
            };
            let id = if k % 5 == 0 { u32::MAX } else { (k * 7919) as u32 };
            list.push(Stretch { from, to, region: id, path: id.wrapping_mul(3), call_start, hand });
            t = if k == 7 { 0 } else { to };
        }
        let mut bytes = Vec::new();
        for block in list.chunks(BLOCK) {
            encode_block(block, &mut bytes);
        }
        let back = decode_blocks(&bytes, list.len()).unwrap();
        let key = |s: &Stretch| (s.from, s.to, s.region, s.path, s.call_start, s.hand);
        assert_eq!(back.iter().map(key).collect::<Vec<_>>(), list.iter().map(key).collect::<Vec<_>>());
        // Stretches of the usual shape take a fraction of their 32 bytes of fields.
        let usual: Vec<Stretch> =
            (0..1000).map(|k| s(1_000_000_000 + 2_500 * k, 1_000_002_500 + 2_500 * k, (k % 40) as u32)).collect();
        let mut small = Vec::new();
        encode_block(&usual[..BLOCK], &mut small);
        assert!(small.len() <= 8 * BLOCK, "{} bytes a block", small.len());
        // A rank's calls repeating a pattern: region and path are taken from the stretch that many
        // before when the pattern is at most `SHAPE_BACK` long, and written otherwise. Slot 0
        // begins a run of MPI calls, slot 1 goes on with it, slot 2 is the rank's own work; the
        // second block begins within a run for some periods.
        for period in [1, 2, 3, SHAPE_BACK, SHAPE_BACK + 1, 40] {
            let list: Vec<Stretch> = (0..(2 * BLOCK + 17) as i64)
                .map(|k| {
                    let slot = (k as usize % period) as u32;
                    let from = 5_000_000_000 + 3_000 * k;
                    let call_start = match slot % 3 {
                        0 => Some(from),
                        1 => Some(from - 3_000),
                        _ => None,
                    };
                    Stretch { from, to: from + 3_000, region: slot, path: 100 + slot, call_start, hand: None }
                })
                .collect();
            let mut bytes = Vec::new();
            for block in list.chunks(BLOCK) {
                encode_block(block, &mut bytes);
            }
            let back = decode_blocks(&bytes, list.len()).unwrap();
            assert_eq!(back.iter().map(key).collect::<Vec<_>>(), list.iter().map(key).collect::<Vec<_>>(), "{period}");
            let mut first = Vec::new();
            encode_block(&list[..BLOCK], &mut first);
            // A head and a length of two bytes each; the first stretch's start (five bytes); a
            // byte for each call going on with the run of the one before; the region and path with
            // the first of each slot, or with every stretch when the pattern is longer than
            // `SHAPE_BACK`.
            let varint = |v: u32| if v < 128 { 1 } else { 2 };
            let calls = list[..BLOCK].iter().filter(|s| s.call_start.is_some_and(|c| c != s.from)).count();
            let named: usize = list[..if period <= SHAPE_BACK { period } else { BLOCK }]
                .iter()
                .map(|s| varint(s.region + 1) + varint(s.path + 1))
                .sum();
            assert_eq!(first.len(), 3 * BLOCK + 5 + calls + named, "period {period}");
        }
        // A head that takes its region from before the block's first stretch is refused.
        let mut bytes = Vec::new();
        encode_block(&usual[..2], &mut bytes);
        bytes[0] |= 1 << 3;
        assert!(decode_blocks(&bytes, 2).is_none());
        // Bytes that do not hold the stretches asked for, or hold more, are refused.
        assert!(decode_blocks(&bytes[..bytes.len() - 1], list.len()).is_none());
        assert!(decode_blocks(&bytes, list.len() - 1).is_none());
        assert!(decode_blocks(&bytes, list.len() + 1).is_none());
    }

    #[test]
    fn the_search_from_a_hint_finds_what_halving_finds() {
        let block: Vec<Stretch> = (0..300).map(|k| s(10 * k, 10 * k + 10, 0)).collect();
        for t in -5..3020 {
            let expected = block.partition_point(|x| x.to <= t);
            for near in [0, 1, 2, 7, 150, 298, 299, 300, 5000] {
                assert_eq!(first_ending_after(&block, t, near), expected, "t {t} near {near}");
            }
        }
        assert_eq!(first_ending_after(&[], 5, 0), 0);
    }

    #[test]
    fn stretches_read_back_are_those_written_and_the_padding_is_the_run_s_first_instant() {
        let mut store = StretchStore::new("test").unwrap();
        // Rank 0: 3,000 stretches of 10 ns from 100 (24 blocks); rank 2 from 5,000; rank 1 none.
        let a: Vec<Stretch> = (0..3000).map(|k| s(100 + 10 * k, 110 + 10 * k, (k % 7) as u32)).collect();
        let b: Vec<Stretch> = (0..10).map(|k| s(5000 + 10 * k, 5010 + 10 * k, 7)).collect();
        store.push(0, &a, true).unwrap();
        store.push(1, &[], true).unwrap();
        store.push(2, &b, true).unwrap();
        store.finish_writing(99).unwrap();
        assert_eq!(store.len(), 3000 + 10 + 1);
        assert!(store.contains(1) && !store.contains(3));
        assert_eq!(store.ends().collect::<Vec<_>>(), [(0, 30_100), (2, 5100)]);
        for t in [101, 110, 111, 15_000, 15_001, 30_100] {
            let i = a.partition_point(|x| x.to < t);
            let got = store.holding(0, t).unwrap().unwrap();
            assert_eq!(
                (got.from, got.to, got.path, got.call_start, got.hand),
                (a[i].from, a[i].to, a[i].path, a[i].call_start, a[i].hand)
            );
        }
        assert!(store.holding(0, 30_101).unwrap().is_none());
        assert!(store.holding(0, 100).unwrap().is_none());
        assert!(store.holding(1, 500).unwrap().is_none());
        // Before rank 2's first stretch, from the run's first instant: time no region covers.
        let pad = store.holding(2, 4000).unwrap().unwrap();
        assert_eq!((pad.from, pad.to, pad.region, pad.path), (100, 5000, 99, NO_PATH));
        assert!(store.holding(2, 100).unwrap().is_none());
        assert_eq!(store.holding(2, 5001).unwrap().unwrap().from, 5000);
        assert_eq!((store.origin(0), store.origin(1), store.origin(2)), (Some(100), None, Some(100)));
        // From the first stretch that ends after t, across blocks, the padding first.
        let mut reader = store.reader().unwrap();
        for t in [0, 109, 110, 10_235, 10_240, 30_099, 30_100] {
            let mut seen = Vec::new();
            reader
                .each_after(0, t, |s| {
                    seen.push(s.from);
                    true
                })
                .unwrap();
            let expected: Vec<i64> = a.iter().filter(|s| s.to > t).map(|s| s.from).collect();
            assert_eq!(seen, expected, "after {t}");
        }
        let mut seen = Vec::new();
        reader
            .each_after(2, 4000, |s| {
                seen.push(s.from);
                seen.len() < 3
            })
            .unwrap();
        assert_eq!(seen, [100, 5000, 5010]);
    }

    #[test]
    fn stretches_appended_in_runs_among_other_keys_read_back_as_if_pushed_at_once() {
        // Two keys written a few blocks at a time, by turns: each key's blocks lie apart in the
        // file, and a block read back (of several written, with two keys) spans the gaps.
        let a: Vec<Stretch> =
            (0..5 * BLOCK as i64 + 17).map(|k| s(100 + 10 * k, 110 + 10 * k, (k % 5) as u32)).collect();
        let b: Vec<Stretch> = (0..3 * BLOCK as i64 + 2).map(|k| s(7 + 9 * k, 16 + 9 * k, (k % 3) as u32)).collect();
        let mut apart = StretchStore::new("test").unwrap();
        let mut together = StretchStore::new("test").unwrap();
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let n = (a.len() - i).min(if i == 0 { BLOCK } else { 2 * BLOCK });
            let n = if i + n < a.len() { n - n % BLOCK } else { n };
            apart.append(0, &a[i..i + n], true).unwrap();
            i += n;
            let m = (b.len() - j).min(BLOCK);
            let m = if j + m < b.len() { m - m % BLOCK } else { m };
            apart.append(1, &b[j..j + m], false).unwrap();
            j += m;
        }
        together.push(0, &a, true).unwrap();
        together.push(1, &b, false).unwrap();
        // A run that ends within a block takes no more; a key pushed twice is refused.
        assert!(apart.append(1, &b[..1], false).is_err());
        assert!(together.push(0, &a[..1], true).is_err());
        apart.finish_writing(99).unwrap();
        together.finish_writing(99).unwrap();
        assert!(apart.unit > BLOCK, "blocks read back span several written");
        assert_eq!(apart.len(), together.len());
        assert_eq!(apart.ends().collect::<Vec<_>>(), together.ends().collect::<Vec<_>>());
        let key = |s: Option<Stretch>| s.map(|s| (s.from, s.to, s.region, s.path, s.call_start, s.hand));
        for t in (0..a.len() as i64 * 10 + 200).step_by(7) {
            for k in [0, 1] {
                assert_eq!(key(apart.holding(k, t).unwrap()), key(together.holding(k, t).unwrap()), "key {k} at {t}");
            }
        }
    }
}
