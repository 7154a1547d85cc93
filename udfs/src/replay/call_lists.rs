//! What each MPI call waits for and what it posts, kept out of memory for the replay. The
//! message sides and collective members are placed in their calls in the order the messages
//! come, not call by call, so each (call, item) is first written to a scratch file in buckets of
//! consecutive call numbers (a bucket's records gathered in a small buffer, then appended as a
//! chunk); once all are written, each bucket is read back alone, put in call order by a
//! counting sort over its calls, each call's items sorted without repeats, and appended to a
//! second file in call order (the distribution sort of the database textbooks: two passes over
//! the records, memory for one bucket). Since a rank's calls are numbered one after another,
//! each rank's items then lie together in that file in the order the replay visits its calls,
//! and each rank reads them through a small buffer of its own. In memory stay the buffers and
//! where each rank's items begin, whatever the number of calls.

use std::fs::File;
use std::os::unix::fs::FileExt;

use datafusion::error::{DataFusionError, Result};

/// An item of a call: a call or collective instance it waits for (`super::simulate`'s `Dep`),
/// or a collective instance it posts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    Waits(u32),
    Posts(u32),
}

/// A record: the call in the high 31 bits, then a bit for posts, then the item's value, so that
/// records in order are in call order, a call's waits before its posts.
fn pack(call: u32, item: Item) -> u64 {
    let (tag, value) = match item {
        Item::Waits(v) => (0, v),
        Item::Posts(v) => (1, v),
    };
    (u64::from(call) << 33) | (tag << 32) | u64::from(value)
}

fn call_of(record: u64) -> u32 {
    (record >> 33) as u32
}

fn item_of(record: u64) -> Item {
    let value = record as u32;
    if record & (1 << 32) == 0 { Item::Waits(value) } else { Item::Posts(value) }
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of what its MPI calls wait for failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// Records a bucket gathers before they are appended to the file as a chunk, at most and at
/// least.
const CHUNK: usize = 8192;
const MIN_CHUNK: usize = 512;

/// Bytes a bucket read back holds per record and per call (`ListsWriter::finish`).
const BUCKET_RECORD_BYTES: usize = 24;
const BUCKET_CALL_BYTES: usize = 8;

/// Records a rank reads from the file at a time.
const READ: usize = 512;

fn write_records(file: &File, at: u64, records: &[u64], what: &str) -> Result<()> {
    let bytes: Vec<u8> = records.iter().flat_map(|r| r.to_le_bytes()).collect();
    file.write_all_at(&bytes, at).map_err(|e| io_error(what, "writing", e))
}

/// Append the `n` records at record `at` of `file` to `out`.
fn read_records(file: &File, at: u64, n: usize, out: &mut Vec<u64>, what: &str) -> Result<()> {
    let mut bytes = vec![0u8; n * 8];
    file.read_exact_at(&mut bytes, at).map_err(|e| io_error(what, "reading", e))?;
    out.extend(bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))));
    Ok(())
}

/// One bucket of consecutive calls: the records gathered, and where its chunks lie.
#[derive(Debug, Default)]
struct Bucket {
    gathered: Vec<u64>,
    chunks: Vec<(u64, u32)>,
    records: u64,
}

/// Gathers the items of the calls, in any order (see the module's notes).
#[derive(Debug)]
pub(super) struct ListsWriter {
    what: &'static str,
    file: File,
    bytes: u64,
    calls: u32,
    /// Calls per bucket.
    width: u32,
    /// Records a bucket gathers before appending them.
    chunk: usize,
    buckets: Vec<Bucket>,
}

impl ListsWriter {
    /// For `calls` calls and at most `records` items, read back a bucket of at most
    /// `bucket_bytes` at a time.
    pub fn new(what: &'static str, calls: usize, records: usize, bucket_bytes: usize) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        // A bucket holds its records three times (as read, in call order, without repeats) and
        // two counts per call.
        let need = (records as u64 * BUCKET_RECORD_BYTES as u64).max(calls as u64 * BUCKET_CALL_BYTES as u64);
        let count = need.div_ceil(bucket_bytes.max(1) as u64).clamp(1, 1 << 14);
        let width = (calls as u64).div_ceil(count).max(1) as u32;
        let buckets: Vec<Bucket> =
            (0..(calls as u64).div_ceil(u64::from(width)).max(1)).map(|_| Bucket::default()).collect();
        // The buckets' buffers together within a bucket's bytes, as far as chunks of a few KB allow.
        let chunk = (bucket_bytes / 8 / buckets.len()).clamp(MIN_CHUNK, CHUNK);
        Ok(ListsWriter { what, file, bytes: 0, calls: calls as u32, width, chunk, buckets })
    }

    /// Bytes it holds at most: every bucket's buffer full (and where its chunks lie, 16
    /// bytes a chunk).
    pub fn most_bytes(&self) -> usize {
        self.buckets.len() * (self.chunk * 8 + 64)
    }

    pub fn push(&mut self, call: u32, item: Item) -> Result<()> {
        if call >= self.calls {
            return Err(DataFusionError::Internal(format!("{}: an item of call {call}, beyond its calls", self.what)));
        }
        let what = self.what;
        let chunk = self.chunk;
        let b = &mut self.buckets[(call / self.width) as usize];
        if b.gathered.capacity() == 0 {
            b.gathered.reserve_exact(chunk);
        }
        b.gathered.push(pack(call, item));
        b.records += 1;
        if b.gathered.len() == chunk {
            write_records(&self.file, self.bytes, &b.gathered, what)?;
            b.chunks.push((self.bytes, chunk as u32));
            self.bytes += chunk as u64 * 8;
            b.gathered.clear();
        }
        Ok(())
    }

    /// Every item is written: the lists in call order, each rank's read from `firsts[r]` (the
    /// number of its first call; ranks in the order of their numbers). `hold` is told the bytes
    /// of the buckets' buffers before they are taken, and 0 when they are given back.
    pub fn finish(self, firsts: &[u32], hold: &mut dyn FnMut(usize) -> Result<()>) -> Result<CallLists> {
        let ListsWriter { what, file: gathered_file, calls, width, buckets, .. } = self;
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        let mut written = 0u64;
        // Where each rank's records begin, set as its first call is reached.
        let mut begins = vec![0u64; firsts.len()];
        let mut next_rank = 0;
        let mut held = 0usize;
        let (mut records, mut ordered, mut out, mut counts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, mut b) in buckets.into_iter().enumerate() {
            let lo = i as u32 * width;
            let hi = lo.saturating_add(width).min(calls);
            // The buffers are kept from bucket to bucket: what is held is the largest so far.
            held = held.max(b.records as usize * BUCKET_RECORD_BYTES + (hi - lo) as usize * BUCKET_CALL_BYTES);
            hold(held)?;
            records.clear();
            for &(at, n) in &b.chunks {
                read_records(&gathered_file, at, n as usize, &mut records, what)?;
            }
            records.append(&mut b.gathered);
            // Counting sort by call: counts[c - lo + 1] calls' records, then where each begins.
            counts.clear();
            counts.resize((hi - lo) as usize + 1, 0u32);
            for &r in &records {
                counts[(call_of(r) - lo) as usize + 1] += 1;
            }
            for k in 1..counts.len() {
                counts[k] += counts[k - 1];
            }
            ordered.clear();
            ordered.resize(records.len(), 0u64);
            let mut next = counts.clone();
            for &r in &records {
                let k = (call_of(r) - lo) as usize;
                ordered[next[k] as usize] = r;
                next[k] += 1;
            }
            out.clear();
            for c in lo..hi {
                while next_rank < firsts.len() && firsts[next_rank] <= c {
                    begins[next_rank] = written + out.len() as u64;
                    next_rank += 1;
                }
                let k = (c - lo) as usize;
                let list = &mut ordered[counts[k] as usize..counts[k + 1] as usize];
                list.sort_unstable();
                // A dependency listed twice is one; a post is each a member of its instance.
                let mut last = None;
                for &r in list.iter() {
                    if last != Some(r) || matches!(item_of(r), Item::Posts(_)) {
                        out.push(r);
                        last = Some(r);
                    }
                }
            }
            write_records(&file, written * 8, &out, what)?;
            written += out.len() as u64;
        }
        drop((records, ordered, out, counts));
        hold(0)?;
        for b in &mut begins[next_rank..] {
            *b = written;
        }
        let ranks = begins
            .iter()
            .enumerate()
            .map(|(r, &at)| Cursor {
                next: at,
                end: begins.get(r + 1).copied().unwrap_or(written),
                buffer: Vec::new(),
                at: 0,
                call: None,
                waits: Vec::new(),
                posts: Vec::new(),
            })
            .collect();
        Ok(CallLists { what, file, ranks })
    }
}

/// A rank's place in the lists: the records still to read, a buffer of them, and the lists of
/// the call it is at.
#[derive(Debug)]
struct Cursor {
    next: u64,
    end: u64,
    buffer: Vec<u64>,
    at: usize,
    call: Option<u32>,
    waits: Vec<u32>,
    posts: Vec<u32>,
}

/// What each call waits for and posts, read rank by rank in call order.
#[derive(Debug)]
pub(super) struct CallLists {
    what: &'static str,
    file: File,
    ranks: Vec<Cursor>,
}

/// What a call waits for (sorted, without repeats) and the collective instances it posts to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lists<'a> {
    pub waits: &'a [u32],
    pub posts: &'a [u32],
}

impl CallLists {
    /// Bytes held at most: a rank's buffer and lists each.
    pub fn most_bytes(ranks: usize) -> usize {
        ranks * (READ * 8 + 128)
    }

    /// The lists of call `call` of the rank at `ri`, whose calls are asked for in increasing
    /// order (the same call again gives the same lists).
    pub fn of(&mut self, ri: usize, call: u32) -> Result<Lists<'_>> {
        let what = self.what;
        let cursor = &mut self.ranks[ri];
        if cursor.call != Some(call) {
            if cursor.call.is_some_and(|c| c > call) {
                return Err(DataFusionError::Internal(format!(
                    "{what}: the lists of call {call} asked for after a later one"
                )));
            }
            cursor.call = Some(call);
            cursor.waits.clear();
            cursor.posts.clear();
            loop {
                if cursor.at == cursor.buffer.len() {
                    if cursor.next == cursor.end {
                        break;
                    }
                    let n = (cursor.end - cursor.next).min(READ as u64) as usize;
                    if cursor.buffer.capacity() == 0 {
                        cursor.buffer.reserve_exact(READ);
                    }
                    cursor.buffer.clear();
                    read_records(&self.file, cursor.next * 8, n, &mut cursor.buffer, what)?;
                    cursor.next += n as u64;
                    cursor.at = 0;
                }
                let r = cursor.buffer[cursor.at];
                match call_of(r).cmp(&call) {
                    std::cmp::Ordering::Less => cursor.at += 1,
                    std::cmp::Ordering::Equal => {
                        match item_of(r) {
                            Item::Waits(v) => cursor.waits.push(v),
                            Item::Posts(v) => cursor.posts.push(v),
                        }
                        cursor.at += 1;
                    }
                    std::cmp::Ordering::Greater => break,
                }
            }
        }
        Ok(Lists { waits: &cursor.waits, posts: &cursor.posts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists gathered in any order, read back in call order, with small buckets.
    #[test]
    fn items_come_back_call_by_call_sorted_without_repeats() {
        // 3 ranks: calls 0..4, 4..4 (none), 4..10.
        let firsts = [0u32, 4, 4];
        let items = [
            (7, Item::Waits(2)),
            (0, Item::Waits(9)),
            (7, Item::Posts(1)),
            (7, Item::Waits(2)),
            (3, Item::Waits(8)),
            (0, Item::Waits(5)),
            (9, Item::Waits(1)),
            (7, Item::Waits(0)),
        ];
        for bucket_bytes in [1, 40, 1 << 20] {
            let mut w = ListsWriter::new("test", 10, items.len(), bucket_bytes).unwrap();
            for _ in 0..3 {
                for &(c, item) in &items {
                    w.push(c, item).unwrap();
                }
            }
            let mut most = 0usize;
            let mut lists = w
                .finish(&firsts, &mut |b| {
                    most = most.max(b);
                    Ok(())
                })
                .unwrap();
            let of = |lists: &mut CallLists, ri, c| {
                let l = lists.of(ri, c).unwrap();
                (l.waits.to_vec(), l.posts.to_vec())
            };
            assert_eq!(of(&mut lists, 0, 0), (vec![5, 9], vec![]));
            assert_eq!(of(&mut lists, 0, 0), (vec![5, 9], vec![]), "the same call again");
            assert_eq!(of(&mut lists, 0, 2), (vec![], vec![]));
            assert_eq!(of(&mut lists, 0, 3), (vec![8], vec![]));
            assert_eq!(of(&mut lists, 1, 4), (vec![], vec![]), "a rank without calls reads nothing");
            assert_eq!(of(&mut lists, 2, 7), (vec![0, 2], vec![1, 1, 1]));
            assert_eq!(of(&mut lists, 2, 9), (vec![1], vec![]));
            assert!(lists.of(2, 8).is_err(), "an earlier call after a later one");
            // Repeated dependencies dropped, each post kept.
            let mut again = ListsWriter::new("test", 10, items.len(), bucket_bytes).unwrap();
            for _ in 0..3 {
                for &(c, item) in &items {
                    again.push(c, item).unwrap();
                }
            }
            let mut lists = again.finish(&firsts, &mut |_| Ok(())).unwrap();
            let all: usize = (0..10u32)
                .map(|c| {
                    let l = lists.of(if c < 4 { 0 } else { 2 }, c).unwrap();
                    l.waits.len() + l.posts.len()
                })
                .sum();
            assert_eq!(all, 6 + 3);
            assert!(most > 0);
        }
        let mut w = ListsWriter::new("test", 2, 1, 1 << 20).unwrap();
        assert!(w.push(2, Item::Waits(0)).is_err(), "a call beyond the calls");
    }

    #[test]
    fn many_items_pass_through_chunks_on_disk() {
        let calls = 3 * CHUNK as u32;
        let mut w = ListsWriter::new("test", calls as usize, 2 * calls as usize, 64 << 10).unwrap();
        assert!(w.buckets.len() > 1 && w.chunk < calls as usize);
        for c in (0..calls).rev() {
            w.push(c, Item::Waits(calls - c)).unwrap();
            w.push(c, Item::Posts(c % 7)).unwrap();
        }
        let mut lists = w.finish(&[0, calls / 2], &mut |_| Ok(())).unwrap();
        for c in 0..calls {
            let ri = usize::from(c >= calls / 2);
            let l = lists.of(ri, c).unwrap();
            assert_eq!((l.waits, l.posts), (&[calls - c][..], &[c % 7][..]), "call {c}");
        }
    }
}
