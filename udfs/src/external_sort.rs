//! Records put in order beyond memory. An analysis that must reorder tens of millions of small
//! records (the wait candidates by the rank that waited, the participations in collectives by
//! instance, the waits by rank) pushes them here: they are held until a run of `RUN_BYTES`,
//! sorted, and written to an anonymous scratch file as a sorted run; once all are pushed they
//! come back as one sorted stream that merges the runs, each read through a small buffer (the
//! external merge sort of the database textbooks; DataFusion's own sorts spill the same way).
//! Fewer records than a run never touch the disk, and what is held is a run and a buffer per
//! run, whatever the count. The file goes when the stream ends, however it ends.
//! On disk a record is its bytes before its eight-byte values (`Record::HEAD`: flags), then
//! each eight-byte word as its difference from the same word of the record before it in the
//! run (`crate::varint`): records in key order differ little from one to the next, so a
//! wait candidate of 57 bytes takes about a third of them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use datafusion::error::{DataFusionError, Result};
use rayon::slice::ParallelSliceMut;

/// Bytes of records held before they are sorted and written as a run, at most.
pub(crate) const RUN_BYTES: usize = 64 << 20;

/// Bytes of a run at least, however small the budget.
const MIN_RUN_BYTES: usize = 256 << 10;

/// The bytes of a run under the session's memory budget: a sixteenth of it (an analysis may
/// gather two sorts at once beside what else it holds), between 256 KiB and `RUN_BYTES`.
pub(crate) fn run_bytes(session: &dyn datafusion::catalog::Session) -> usize {
    run_bytes_under(session.runtime_env().memory_pool.as_ref())
}

/// The bytes of a run under the memory pool `pool` (see `run_bytes`).
pub(crate) fn run_bytes_under(pool: &dyn datafusion::execution::memory_pool::MemoryPool) -> usize {
    use datafusion::execution::memory_pool::MemoryLimit;
    match pool.memory_limit() {
        MemoryLimit::Finite(limit) => (limit / 16).clamp(MIN_RUN_BYTES, RUN_BYTES),
        _ => RUN_BYTES,
    }
}

/// Bytes read from a run at a time while the runs are merged, at most (and at most an eighth
/// of a run, so that the buffers of many runs stay within a few runs' size).
const READ_BYTES: usize = 256 << 10;

/// A record of fixed size, and the key that orders it.
pub(crate) trait Record: Copy + Send + 'static {
    /// Bytes of a record as `encode` writes it.
    const BYTES: usize;
    /// Bytes at its start before its eight-byte values (flags), kept as they are on disk.
    const HEAD: usize = 0;
    type Key: Ord + Copy + Send;
    fn key(&self) -> Self::Key;
    /// Writes the record into `out` (`BYTES` long); an error when it cannot be told on disk.
    fn encode(&self, out: &mut [u8]) -> Result<()>;
    fn decode(bytes: &[u8]) -> Self;
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} its scratch file of sorted runs failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// Eight-byte words of a record after its head, the last padded with zeros.
const fn words<T: Record>() -> usize {
    (T::BYTES - T::HEAD).div_ceil(8)
}

/// The most words a record has.
const MAX_WORDS: usize = 16;

/// The most bytes a record takes on disk.
const fn most_bytes<T: Record>() -> usize {
    T::HEAD + words::<T>() * crate::varint::MAX_BYTES
}

/// Append the record whose bytes are `raw` to `out`: its head, then each word as its
/// difference from `previous`'s, which it then replaces.
fn put_record<T: Record>(raw: &[u8], previous: &mut [u64; MAX_WORDS], out: &mut Vec<u8>) {
    out.extend_from_slice(&raw[..T::HEAD]);
    for (k, p) in previous.iter_mut().enumerate().take(words::<T>()) {
        let from = T::HEAD + 8 * k;
        let to = (from + 8).min(T::BYTES);
        let mut w = [0u8; 8];
        w[..to - from].copy_from_slice(&raw[from..to]);
        let v = u64::from_le_bytes(w);
        crate::varint::put_signed(out, v.wrapping_sub(*p) as i64);
        *p = v;
    }
}

/// The record at `bytes[*at..]` into `raw`, moving `at` past it and `previous` on to it (None:
/// the bytes end inside it; then neither moves).
fn get_record<T: Record>(bytes: &[u8], at: &mut usize, previous: &mut [u64; MAX_WORDS], raw: &mut [u8]) -> Option<()> {
    let mut k = *at;
    raw[..T::HEAD].copy_from_slice(bytes.get(k..k + T::HEAD)?);
    k += T::HEAD;
    let mut next = *previous;
    for (w, p) in next.iter_mut().zip(previous.iter()).take(words::<T>()) {
        *w = p.wrapping_add(crate::varint::get_signed(bytes, &mut k)? as u64);
    }
    for (i, w) in next.iter().enumerate().take(words::<T>()) {
        let from = T::HEAD + 8 * i;
        let to = (from + 8).min(T::BYTES);
        raw[from..to].copy_from_slice(&w.to_le_bytes()[..to - from]);
    }
    (*at, *previous) = (k, next);
    Some(())
}

/// A run written: its first byte in the file, the byte after it, and its records.
#[derive(Debug, Clone, Copy)]
struct Run {
    at: u64,
    end: u64,
    records: u64,
}

/// Records pushed so far: the last run's in memory, the others in the scratch file.
pub(crate) struct ExternalSort<T: Record> {
    what: &'static str,
    held: Vec<T>,
    run_len: usize,
    file: Option<BufWriter<File>>,
    runs: Vec<Run>,
    written: u64,
    /// Bytes written to the file.
    at: u64,
    bytes: Vec<u8>,
}

impl<T: Record> std::fmt::Debug for ExternalSort<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalSort").field("held", &self.held.len()).field("runs", &self.runs.len()).finish()
    }
}

impl<T: Record> ExternalSort<T> {
    /// Runs of `run_bytes` (`run_bytes`, `RUN_BYTES`).
    pub fn new(what: &'static str, run_bytes: usize) -> Self {
        Self::with_run(what, (run_bytes / std::mem::size_of::<T>().max(1)).max(1))
    }

    /// Runs of `run_len` records.
    pub fn with_run(what: &'static str, run_len: usize) -> Self {
        const { assert!(T::BYTES <= 8 * MAX_WORDS && T::HEAD <= T::BYTES, "a record fits the decoder's words") };
        ExternalSort {
            what,
            held: Vec::new(),
            run_len,
            file: None,
            runs: Vec::new(),
            written: 0,
            at: 0,
            bytes: Vec::new(),
        }
    }

    pub fn push(&mut self, record: T) -> Result<()> {
        if self.held.len() == self.run_len {
            self.spill()?;
        }
        self.held.push(record);
        Ok(())
    }

    /// Records pushed.
    pub fn len(&self) -> u64 {
        self.written + self.held.len() as u64
    }

    /// Bytes held in memory (the run being gathered).
    pub fn held_bytes(&self) -> usize {
        self.held.capacity() * std::mem::size_of::<T>() + self.bytes.capacity()
    }

    /// Sorts the records held and writes them as a run.
    fn spill(&mut self) -> Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        // On every core: a run is millions of records, sorted while the fold that gathers them
        // waits.
        self.held.par_sort_unstable_by_key(T::key);
        let what = self.what;
        if self.file.is_none() {
            let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
            self.file = Some(BufWriter::with_capacity(1 << 20, file));
        }
        let file = self.file.as_mut().expect("made above");
        let mut raw = [0u8; 8 * (MAX_WORDS + 1)];
        let raw = &mut raw[..T::BYTES];
        let mut previous = [0u64; MAX_WORDS];
        let start = self.at;
        self.bytes.clear();
        for r in &self.held {
            r.encode(raw)?;
            put_record::<T>(raw, &mut previous, &mut self.bytes);
            if self.bytes.len() >= 1 << 20 {
                file.write_all(&self.bytes).map_err(|e| io_error(what, "writing", e))?;
                self.at += self.bytes.len() as u64;
                self.bytes.clear();
            }
        }
        file.write_all(&self.bytes).map_err(|e| io_error(what, "writing", e))?;
        self.at += self.bytes.len() as u64;
        self.bytes.clear();
        let records = self.held.len() as u64;
        self.runs.push(Run { at: start, end: self.at, records });
        self.written += records;
        self.held.clear();
        Ok(())
    }

    /// Every record has been pushed: the stream of them in key order.
    pub fn sorted(mut self) -> Result<Sorted<T>> {
        if self.file.is_none() {
            self.held.par_sort_unstable_by_key(T::key);
            return Ok(Sorted::of_sorted(self.held));
        }
        self.spill()?;
        let what = self.what;
        let file = self.file.take().expect("a run was written");
        let file = file.into_inner().map_err(|e| io_error(what, "writing", e.into_error()))?;
        let read = READ_BYTES.min(self.run_len * std::mem::size_of::<T>() / 8).max(most_bytes::<T>()) as u64;
        let mut merge: Merge<T> = Merge { what, file, read, runs: Vec::new(), heap: BinaryHeap::new() };
        for (i, run) in self.runs.iter().enumerate() {
            merge.runs.push(RunReader {
                at: run.at,
                end: run.end,
                left: run.records,
                bytes: Vec::new(),
                next: 0,
                previous: [0; MAX_WORDS],
            });
            if let Some(r) = merge.read(i)? {
                merge.heap.push(Reverse((r.key(), i, Held(r))));
            }
        }
        Ok(Sorted { source: Source::Merge(Box::new(merge)), peeked: None })
    }
}

/// A record in the merge's heap, ordered by the key beside it only.
#[derive(Clone, Copy)]
struct Held<T>(T);

impl<T> PartialEq for Held<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// A run being read: where its unread bytes begin and end, its records left, the bytes read
/// ahead (from `next` on), and the last record's words.
struct RunReader {
    at: u64,
    end: u64,
    left: u64,
    bytes: Vec<u8>,
    next: usize,
    previous: [u64; MAX_WORDS],
}

/// A run's next record in the merge: its key, its run and the record.
type Head<T> = Reverse<(<T as Record>::Key, usize, Held<T>)>;

struct Merge<T: Record> {
    what: &'static str,
    file: File,
    /// Bytes read from a run at a time.
    read: u64,
    runs: Vec<RunReader>,
    /// Each run's next record, by key (then run, so that equal keys come in run order).
    heap: BinaryHeap<Head<T>>,
}

impl<T: Record> Merge<T> {
    /// Run `i`'s next record.
    fn read(&mut self, i: usize) -> Result<Option<T>> {
        let run = &mut self.runs[i];
        if run.left == 0 {
            run.bytes = Vec::new();
            return Ok(None);
        }
        let mut raw = [0u8; 8 * (MAX_WORDS + 1)];
        let raw = &mut raw[..T::BYTES];
        loop {
            if get_record::<T>(&run.bytes, &mut run.next, &mut run.previous, raw).is_some() {
                run.left -= 1;
                return Ok(Some(T::decode(raw)));
            }
            // The record runs past the bytes read: the rest of them first, then the next read.
            if run.at == run.end {
                return Err(DataFusionError::Execution(format!(
                    "{}: its scratch file of sorted runs ends inside a record, {} records before its run's end (it was changed while the analysis ran)",
                    self.what, run.left
                )));
            }
            run.bytes.drain(..run.next);
            run.next = 0;
            let n = self.read.min(run.end - run.at) as usize;
            let old = run.bytes.len();
            run.bytes.resize(old + n, 0);
            self.file.read_exact_at(&mut run.bytes[old..], run.at).map_err(|e| io_error(self.what, "reading", e))?;
            run.at += n as u64;
        }
    }

    fn next(&mut self) -> Result<Option<T>> {
        let Some(Reverse((_, i, Held(r)))) = self.heap.pop() else { return Ok(None) };
        if let Some(n) = self.read(i)? {
            self.heap.push(Reverse((n.key(), i, Held(n))));
        }
        Ok(Some(r))
    }
}

enum Source<T: Record> {
    Memory(std::vec::IntoIter<T>),
    Merge(Box<Merge<T>>),
}

/// Records in key order, from memory or merged from the runs on disk.
pub(crate) struct Sorted<T: Record> {
    source: Source<T>,
    peeked: Option<T>,
}

impl<T: Record> Sorted<T> {
    /// The records of `list`, already in key order.
    pub fn of_sorted(list: Vec<T>) -> Self {
        Sorted { source: Source::Memory(list.into_iter()), peeked: None }
    }

    pub fn next(&mut self) -> Result<Option<T>> {
        if let Some(r) = self.peeked.take() {
            return Ok(Some(r));
        }
        match &mut self.source {
            Source::Memory(list) => Ok(list.next()),
            Source::Merge(merge) => merge.next(),
        }
    }

    /// The next record, left to come next.
    pub fn peek(&mut self) -> Result<Option<&T>> {
        if self.peeked.is_none() {
            self.peeked = self.next()?;
        }
        Ok(self.peeked.as_ref())
    }

    /// Bytes held in memory: the records not given yet when they were never written, else a
    /// buffer per run.
    pub fn held_bytes(&self) -> usize {
        match &self.source {
            Source::Memory(list) => list.len() * std::mem::size_of::<T>(),
            Source::Merge(merge) => {
                merge.runs.iter().map(|r| r.bytes.capacity()).sum::<usize>()
                    + merge.heap.len() * std::mem::size_of::<(T::Key, usize, T)>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Pair(i64, u32);

    impl Record for Pair {
        const BYTES: usize = 12;
        type Key = i64;
        fn key(&self) -> i64 {
            self.0
        }
        fn encode(&self, out: &mut [u8]) -> Result<()> {
            out[..8].copy_from_slice(&self.0.to_le_bytes());
            out[8..12].copy_from_slice(&self.1.to_le_bytes());
            Ok(())
        }
        fn decode(b: &[u8]) -> Self {
            Pair(i64::from_le_bytes(b[..8].try_into().unwrap()), u32::from_le_bytes(b[8..12].try_into().unwrap()))
        }
    }

    fn all(mut s: Sorted<Pair>) -> Vec<Pair> {
        let mut out = Vec::new();
        while let Some(p) = s.next().unwrap() {
            out.push(p);
        }
        out
    }

    fn scrambled(n: u32) -> Vec<Pair> {
        (0..n).map(|i| Pair(i64::from(i.wrapping_mul(2_654_435_761) % 1000) - 500, i)).collect()
    }

    /// A record with a head of flags and values of every size, the last word short.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Flagged(u8, i64, i64, u16);

    impl Record for Flagged {
        const BYTES: usize = 1 + 16 + 2;
        const HEAD: usize = 1;
        type Key = (i64, u16);
        fn key(&self) -> (i64, u16) {
            (self.1, self.3)
        }
        fn encode(&self, out: &mut [u8]) -> Result<()> {
            out[0] = self.0;
            out[1..9].copy_from_slice(&self.1.to_le_bytes());
            out[9..17].copy_from_slice(&self.2.to_le_bytes());
            out[17..19].copy_from_slice(&self.3.to_le_bytes());
            Ok(())
        }
        fn decode(b: &[u8]) -> Self {
            let i = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            Flagged(b[0], i(1), i(9), u16::from_le_bytes(b[17..19].try_into().unwrap()))
        }
    }

    #[test]
    fn records_far_apart_and_near_come_back_whole_through_any_buffer() {
        // Keys near each other and values at both ends of i64, in runs of every length, read
        // back through buffers that cut records anywhere.
        let records: Vec<Flagged> = (0..3000u32)
            .map(|k| {
                let far = if k % 3 == 0 { i64::MIN + i64::from(k) } else { i64::MAX - i64::from(k) };
                Flagged((k % 251) as u8, i64::from(k % 97) - 40, far, (k * 7) as u16)
            })
            .collect();
        for run in [1, 2, 5, 64, 2999, 5000] {
            let mut s = ExternalSort::with_run("test", run);
            for r in &records {
                s.push(*r).unwrap();
            }
            let mut sorted = s.sorted().unwrap();
            let mut got = Vec::new();
            while let Some(r) = sorted.next().unwrap() {
                got.push(r);
            }
            let mut want = records.clone();
            want.sort_by_key(Flagged::key);
            assert_eq!(got, want, "runs of {run}");
        }
    }

    #[test]
    fn records_of_many_runs_come_back_merged_in_key_order() {
        for run in [1, 7, 1000, 5000] {
            let mut s = ExternalSort::with_run("test", run);
            for p in scrambled(4321) {
                s.push(p).unwrap();
            }
            assert_eq!(s.len(), 4321);
            let got = all(s.sorted().unwrap());
            let mut want = scrambled(4321);
            want.sort_by_key(|p| p.0);
            assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), want.iter().map(|p| p.0).collect::<Vec<_>>());
            let mut ids: Vec<u32> = got.iter().map(|p| p.1).collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..4321).collect::<Vec<_>>(), "every record once, with its payload");
        }
    }

    #[test]
    fn peek_leaves_the_record_to_come_and_nothing_gives_none() {
        let mut s = ExternalSort::with_run("test", 2);
        for p in [Pair(3, 0), Pair(1, 1), Pair(2, 2)] {
            s.push(p).unwrap();
        }
        let mut sorted = s.sorted().unwrap();
        assert_eq!(sorted.peek().unwrap(), Some(&Pair(1, 1)));
        assert_eq!(sorted.next().unwrap(), Some(Pair(1, 1)));
        assert_eq!(all(sorted), vec![Pair(2, 2), Pair(3, 0)]);
        assert!(all(ExternalSort::<Pair>::new("test", RUN_BYTES).sorted().unwrap()).is_empty());
    }
}
