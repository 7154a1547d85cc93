//! The ideal start of every MPI call, kept out of memory for the replay. A rank's calls get
//! their ideal starts in order (the replay takes each rank as far as it can go), so each rank
//! gathers them in a block of its own and appends the block, full, to an anonymous scratch file,
//! each start as its difference from the one before in as few bytes as it needs (`varint`: an
//! ideal start follows the last by a call and a compute stretch, a few bytes); in memory stay
//! where each block lies, the block being filled, and the last `WAYS` blocks each rank read.
//! The replay reads another rank's ideal start when a call waits for it, near the times the
//! reading rank is at, and the answer reads them rank by rank (each rank through a reader of its
//! own, `RankStartsReader`, so that threads read ranks side by side), so a few blocks per rank serve
//! nearly every read.

use std::fs::File;
use std::os::unix::fs::FileExt;

use datafusion::error::{DataFusionError, Result};

use crate::varint;

/// Ideal starts per block: 2 to this power (a call's block and place in it are a shift and a
/// mask, which the replay computes for every call and every call it waits for).
const BLOCK_BITS: u32 = 8;

/// Blocks each rank keeps after reading them.
const WAYS: usize = 4;

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its ideal starts failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// One rank's ideal starts.
#[derive(Debug)]
struct RankStarts {
    /// Number of its first call.
    first: u32,
    /// Where each full block lies in the file, and its bytes.
    blocks: Vec<(u64, u32)>,
    /// The block being filled (its calls blocks.len() * block..).
    filling: Vec<i64>,
    /// The blocks it read last, the most recent first.
    cached: Vec<(u32, Box<[i64]>)>,
}

/// The ideal starts found so far (see the module's notes).
#[derive(Debug)]
pub(super) struct IdealStarts {
    what: &'static str,
    file: File,
    bytes: u64,
    ranks: Vec<RankStarts>,
    /// Ideal starts per block: 2 to this power.
    block_bits: u32,
    buffer: Vec<u8>,
}

impl IdealStarts {
    /// For ranks whose calls are numbered from `firsts` on.
    pub fn new(what: &'static str, firsts: impl IntoIterator<Item = u32>) -> Result<Self> {
        Self::with_block(what, firsts, BLOCK_BITS)
    }

    fn with_block(what: &'static str, firsts: impl IntoIterator<Item = u32>, block_bits: u32) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        let ranks = firsts
            .into_iter()
            .map(|first| RankStarts { first, blocks: Vec::new(), filling: Vec::new(), cached: Vec::new() })
            .collect();
        Ok(IdealStarts { what, file, bytes: 0, ranks, block_bits, buffer: Vec::new() })
    }

    /// Bytes held at most for `ranks` ranks besides where the blocks lie: each rank's block
    /// being filled and those it keeps.
    pub fn most_bytes(ranks: usize) -> usize {
        ranks * ((WAYS + 1) * ((8 << BLOCK_BITS) + 32) + 64)
    }

    /// Bytes held for where the blocks lie, for `calls` calls.
    pub fn index_bytes(calls: usize) -> usize {
        calls.div_ceil(1 << BLOCK_BITS) * 16
    }

    /// Ideal starts per block.
    fn block(&self) -> usize {
        1 << self.block_bits
    }

    /// Ideal starts the rank at `ri` has.
    fn set_count(&self, ri: usize) -> u32 {
        let r = &self.ranks[ri];
        (r.blocks.len() * self.block() + r.filling.len()) as u32
    }

    /// Call `number` of the rank at `ri` gets ideal start `start`: the rank's next call.
    pub fn set(&mut self, ri: usize, number: u32, start: i64) -> Result<()> {
        let what = self.what;
        if number.wrapping_sub(self.ranks[ri].first) != self.set_count(ri) {
            return Err(DataFusionError::Internal(format!("{what}: an ideal start given out of order")));
        }
        let block = self.block();
        let r = &mut self.ranks[ri];
        if r.filling.capacity() == 0 {
            r.filling.reserve_exact(block);
        }
        r.filling.push(start);
        if r.filling.len() == block {
            self.buffer.clear();
            let mut last = 0i64;
            for &s in &r.filling {
                varint::put_signed(&mut self.buffer, s.wrapping_sub(last));
                last = s;
            }
            self.file.write_all_at(&self.buffer, self.bytes).map_err(|e| io_error(what, "writing", e))?;
            r.blocks.push((self.bytes, self.buffer.len() as u32));
            self.bytes += self.buffer.len() as u64;
            r.filling.clear();
        }
        Ok(())
    }

    /// The ideal start of call `number` of the rank at `ri`, if it has one.
    pub fn get(&mut self, ri: usize, number: u32) -> Result<Option<i64>> {
        self.ranks[ri].get(&self.file, self.what, self.block_bits, number)
    }

    /// Readers of the ranks at `ris` (distinct indices), each holding only its own rank's
    /// blocks, so that threads read ranks side by side (None: an index repeats or is out of range).
    pub fn rank_readers(&mut self, ris: &[usize]) -> Option<Vec<RankStartsReader<'_>>> {
        let (what, file, block_bits) = (self.what, &self.file, self.block_bits);
        let ranks = super::disjoint_mut(&mut self.ranks, ris)?;
        Some(ranks.into_iter().map(|rank| RankStartsReader { what, file, block_bits, rank }).collect())
    }
}

/// One rank's ideal starts, read in order by a thread of its own.
#[derive(Debug)]
pub(super) struct RankStartsReader<'a> {
    what: &'static str,
    file: &'a File,
    block_bits: u32,
    rank: &'a mut RankStarts,
}

impl RankStartsReader<'_> {
    /// The rank's ideal starts from call `number` to the end of the block it lies in (none past
    /// those it has): a rank's starts read in order, a block at a time.
    pub fn starts_from(&mut self, number: u32) -> Result<&[i64]> {
        let (what, bits) = (self.what, self.block_bits);
        let r = &mut *self.rank;
        if r.get(self.file, what, bits, number)?.is_none() {
            return Ok(&[]);
        }
        let i = (number - r.first) as usize;
        let (b, place) = (i >> bits, i & ((1 << bits) - 1));
        // The block was just read: it is the one being filled or the first of those kept.
        Ok(if b == r.blocks.len() { &r.filling[place..] } else { &r.cached[0].1[place..] })
    }
}

impl RankStarts {
    /// The ideal start of its call `number`, if it has one, its blocks `2^block_bits` starts
    /// long and read from `file`.
    fn get(&mut self, file: &File, what: &str, block_bits: u32, number: u32) -> Result<Option<i64>> {
        let block = 1usize << block_bits;
        let r = self;
        let i = number.checked_sub(r.first).ok_or_else(|| {
            DataFusionError::Internal(format!("{what}: call {number} read from a rank whose calls begin after it"))
        })? as usize;
        let (b, place) = (i >> block_bits, i & (block - 1));
        if b == r.blocks.len() {
            return Ok(r.filling.get(place).copied());
        }
        if b > r.blocks.len() {
            return Ok(None);
        }
        if let Some(k) = r.cached.iter().position(|(c, _)| *c as usize == b) {
            if k > 0 {
                let hit = r.cached.remove(k);
                r.cached.insert(0, hit);
            }
            return Ok(Some(r.cached[0].1[place]));
        }
        let (at, len) = r.blocks[b];
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, at).map_err(|e| io_error(what, "reading", e))?;
        let (mut values, mut pos, mut last) = (Vec::with_capacity(block), 0usize, 0i64);
        for _ in 0..block {
            let d = varint::get_signed(&bytes, &mut pos).ok_or_else(|| {
                DataFusionError::Internal(format!("{what}: a block of ideal starts did not read back"))
            })?;
            last = last.wrapping_add(d);
            values.push(last);
        }
        let v = values[place];
        r.cached.insert(0, (b as u32, values.into_boxed_slice()));
        r.cached.truncate(WAYS);
        Ok(Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ideal_starts_read_back_from_any_rank_in_any_order() {
        // Rank 0: calls 0..50, rank 1: 50..50 (none), rank 2: 50..113; blocks of 4.
        let mut s = IdealStarts::with_block("test", [0, 50, 50], 2).unwrap();
        let value = |n: u32| i64::from(n) * 1_000 - 7 * i64::from(n % 3) - 40_000;
        for n in 0..113u32 {
            let ri = if n < 50 { 0 } else { 2 };
            assert_eq!(s.get(ri, n).unwrap(), None);
            s.set(ri, n, value(n)).unwrap();
            assert_eq!(s.get(ri, n).unwrap(), Some(value(n)));
        }
        assert!(s.set(0, 10, 0).is_err(), "a start given twice");
        assert!(s.set(2, 120, 0).is_err(), "a start skipping calls");
        for n in (0..113u32).rev().chain([3, 90, 4, 91, 5, 0]) {
            let ri = if n < 50 { 0 } else { 2 };
            assert_eq!(s.get(ri, n).unwrap(), Some(value(n)), "call {n}");
        }
        assert!(s.ranks.iter().all(|r| r.cached.len() <= WAYS));
        assert_eq!(s.set_count(1), 0);
    }
}
