//! Message matching for a trace derived a group of ranks at a time ([`crate::convert`]), in memory
//! bounded by a bucket rather than by the trace.
//!
//! The matching rule is the one of `matching` (MPI's non-overtaking rule: per channel
//! (src, dst, comm, tag), the k-th send posted matches the k-th receive posted), and it splits
//! exactly along ranks: a rank numbers the halves of its own channels (`channels::number`,
//! sends by send event, receives by post time), and a rank is always whole in one group. So
//! every half leaves its group with a key, (src, dst, comm, tag, k), that names its partner
//! wherever that one is, earlier or later in the trace. Halves are written to bucket files by
//! a hash of their channel; each bucket is then matched on its own by that key and its
//! messages sorted into msg_id order (send time, then global event index; a receive without a
//! send by its completion) as a run file; the runs are merged into the `messages` table. No
//! half is approximated or dropped: halves without a partner are rows with NULL partner
//! columns, counted as warnings, exactly as in `messages::derive`.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use rayon::prelude::*;

use super::halves::{Half, Halves};
use super::matching::{Pair, number_channels, rank_ranges};
use super::{CHUNK_ROWS, MessageChunk, Unmatched, report_size_mismatch};
use crate::deriving::time_order;
use crate::error::{Error, Result};
use crate::events::{NONE_I64, PartStream};
use crate::fast_hash::FastMap;
use crate::trace::{NodeMap, Warnings};

/// Bytes of a half in a file: src, dst, comm, tag, bytes, ts, call start and end, aux_ts,
/// complete_call_start, place (event and thread).
const HALF_BYTES: usize = 4 * 4 + 6 * 8 + 8;

/// A half's key: its channel and its position among the channel's halves of its side.
type Key = (i32, i32, i32, i32, u32);

fn put_half(h: &Half, out: &mut Vec<u8>) {
    for v in [h.src, h.dst, h.comm, h.tag] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [h.bytes, h.ts, h.call_start, h.call_end, h.aux_ts, h.complete_call_start] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&h.place.to_le_bytes());
}

fn get_half(b: &[u8]) -> Half {
    let i32_at = |k: usize| i32::from_le_bytes(b[4 * k..4 * k + 4].try_into().expect("4 bytes"));
    let i64_at = |k: usize| i64::from_le_bytes(b[16 + 8 * k..24 + 8 * k].try_into().expect("8 bytes"));
    Half {
        src: i32_at(0),
        dst: i32_at(1),
        comm: i32_at(2),
        tag: i32_at(3),
        bytes: i64_at(0),
        ts: i64_at(1),
        call_start: i64_at(2),
        call_end: i64_at(3),
        aux_ts: i64_at(4),
        complete_call_start: i64_at(5),
        place: i64_at(6) as u64,
    }
}

/// The bucket of a channel: a mix of its four fields (and of `salt`, 0 for the first split,
/// another for splitting a bucket again).
fn bucket_of(h: &Half, buckets: usize, salt: u64) -> usize {
    let mut x = (h.src as u32 as u64) << 32 | h.dst as u32 as u64;
    x ^= ((h.comm as u32 as u64) << 32 | h.tag as u32 as u64).rotate_left(17);
    x ^= salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    ((x ^ (x >> 33)) % buckets as u64) as usize
}

/// One side's bucket files.
struct Side {
    files: Vec<BufWriter<File>>,
    paths: Vec<PathBuf>,
    /// Halves in each bucket.
    counts: Vec<u64>,
    halves: u64,
}

impl Side {
    fn create(dir: &Path, name: &str, buckets: usize) -> Result<Self> {
        let mut side = Side { files: Vec::new(), paths: Vec::new(), counts: vec![0; buckets], halves: 0 };
        for b in 0..buckets {
            let path = dir.join(format!("{name}-{b:04}.bin"));
            let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
            side.files.push(BufWriter::with_capacity(1 << 16, file));
            side.paths.push(path);
        }
        Ok(side)
    }

    /// Write `halves` with their positions, each to the bucket of its channel.
    fn add(&mut self, halves: &[Half], seqs: impl Iterator<Item = u32>) -> Result<()> {
        let buckets = self.files.len();
        let mut record = Vec::with_capacity(HALF_BYTES + 4);
        for (h, seq) in halves.iter().zip(seqs) {
            record.clear();
            put_half(h, &mut record);
            record.extend_from_slice(&seq.to_le_bytes());
            let b = bucket_of(h, buckets, 0);
            self.files[b].write_all(&record).map_err(|e| Error::io(&self.paths[b], e))?;
            self.counts[b] += 1;
        }
        self.halves += halves.len() as u64;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        for (f, p) in self.files.iter_mut().zip(&self.paths) {
            f.flush().map_err(|e| Error::io(p, e))?;
        }
        self.files.clear();
        Ok(())
    }
}

/// Bytes of a half with its position in a bucket file.
const RECORD_BYTES: usize = HALF_BYTES + 4;

/// Split the bucket file at `path` into `parts` files `path.0`, `path.1`, ... by another mix
/// of the channel (`salt`), reading it a chunk at a time; the file is removed.
fn split_bucket(path: &Path, parts: usize, salt: u64) -> Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = (0..parts).map(|k| path.with_extension(format!("{k}.bin"))).collect();
    let mut files: Vec<BufWriter<File>> = paths
        .iter()
        .map(|p| File::create(p).map(|f| BufWriter::with_capacity(1 << 16, f)).map_err(|e| Error::io(p, e)))
        .collect::<Result<_>>()?;
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| Error::io(path, e))?);
    let mut chunk = vec![0u8; RECORD_BYTES * 4096];
    loop {
        let mut filled = 0;
        while filled < chunk.len() {
            let n = reader.read(&mut chunk[filled..]).map_err(|e| Error::io(path, e))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled % RECORD_BYTES != 0 {
            return Err(Error::in_file(path, format!("does not end on a whole {RECORD_BYTES}-byte half")));
        }
        for record in chunk[..filled].chunks_exact(RECORD_BYTES) {
            let k = bucket_of(&get_half(&record[..HALF_BYTES]), parts, salt);
            files[k].write_all(record).map_err(|e| Error::io(&paths[k], e))?;
        }
        if filled < chunk.len() {
            break;
        }
    }
    for (f, p) in files.iter_mut().zip(&paths) {
        f.flush().map_err(|e| Error::io(p, e))?;
    }
    let _ = std::fs::remove_file(path);
    Ok(paths)
}

/// Read one bucket's halves with their positions.
fn read_bucket(path: &Path) -> Result<Vec<(Half, u32)>> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let size = RECORD_BYTES;
    if data.len() % size != 0 {
        return Err(Error::in_file(path, format!("{} bytes is not a whole number of {size}-byte halves", data.len())));
    }
    let out = data
        .par_chunks(size)
        .map(|r| (get_half(&r[..HALF_BYTES]), u32::from_le_bytes(r[HALF_BYTES..].try_into().expect("4 bytes"))))
        .collect();
    let _ = std::fs::remove_file(path);
    Ok(out)
}

/// The halves of a trace being derived a group of ranks at a time, spilled to bucket files in
/// a scratch directory (removed when done).
pub struct SpilledHalves {
    dir: PathBuf,
    sends: Side,
    recvs: Side,
    /// Sends and receives of a bucket matched at once; a bucket with more is split again
    /// first (a trace's share of message halves among its events is not known beforehand).
    bucket_halves: u64,
}

/// What the matching of spilled halves found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Matched {
    pub messages: u64,
    /// Matched messages received before they are sent.
    pub violations: i64,
}

impl SpilledHalves {
    /// Bucket files for `buckets` buckets in `dir` (created, and removed when done), each
    /// matched `bucket_halves` halves (sends and receives) at most at a time, save a single
    /// channel with more.
    pub fn create(dir: &Path, buckets: usize, bucket_halves: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let buckets = buckets.max(1);
        Ok(SpilledHalves {
            dir: dir.to_path_buf(),
            sends: Side::create(dir, "sends", buckets)?,
            recvs: Side::create(dir, "recvs", buckets)?,
            bucket_halves: bucket_halves.max(1),
        })
    }

    /// The (sends, receives) files to match: each bucket, or the parts of one with more than
    /// `bucket_halves` halves split again by another mix of the channel.
    fn to_match(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        let mut out = Vec::new();
        for b in 0..self.sends.paths.len() {
            let (s, r) = (&self.sends.paths[b], &self.recvs.paths[b]);
            let halves = self.sends.counts[b] + self.recvs.counts[b];
            if halves <= self.bucket_halves {
                out.push((s.clone(), r.clone()));
                continue;
            }
            let parts = halves.div_ceil(self.bucket_halves) as usize;
            let (sends, recvs) = rayon::join(|| split_bucket(s, parts, 1), || split_bucket(r, parts, 1));
            out.extend(sends?.into_iter().zip(recvs?));
        }
        Ok(out)
    }

    /// Sends and receives spilled so far.
    pub fn halves(&self) -> (u64, u64) {
        (self.sends.halves, self.recvs.halves)
    }

    /// Add the halves of a group of whole ranks (as the walk of its streams found them): each
    /// rank numbers its channels' halves, and each half goes to its channel's bucket.
    pub fn add(&mut self, halves: &Halves, streams: &[PartStream]) -> Result<()> {
        let ranks = rank_ranges(streams, &halves.per_stream);
        let (send_places, recv_places, _) = number_channels(&halves.sends, &halves.recvs, &ranks);
        self.sends.add(&halves.sends, send_places.iter().map(|p| p.seq))?;
        self.recvs.add(&halves.recvs, recv_places.iter().map(|p| p.seq))
    }

    /// Match every bucket, then merge the buckets' messages in msg_id order into record batches
    /// of the `messages` table, handed to `sink` in order. Problems are counted in `warnings`
    /// as `messages::derive` counts them.
    pub fn finish(
        mut self,
        nodes: &NodeMap,
        warnings: &mut Warnings,
        mut sink: impl FnMut(RecordBatch) -> Result<()> + Send,
    ) -> Result<Matched> {
        self.sends.close()?;
        self.recvs.close()?;
        // Buckets are matched in parallel, as many at a time as there are threads.
        let runs: Vec<PathBuf> = self
            .to_match()?
            .par_iter()
            .enumerate()
            .map(|(b, (s, r))| {
                let run = self.dir.join(format!("run-{b:04}.bin"));
                match_bucket(s, r, &run)?;
                Ok(run)
            })
            .collect::<Result<_>>()?;
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(nodes.names.iter()));
        let mut merged = Merge::open(&runs)?;
        let mut unmatched = Unmatched::default();
        let (mut size_mismatch, mut matched) = (0i64, Matched::default());
        // The batches are written on another thread while the next ones are merged.
        std::thread::scope(|scope| -> Result<()> {
            let (send, receive) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
            let writer = scope.spawn(move || -> Result<()> {
                for batch in receive {
                    sink(batch)?;
                }
                Ok(())
            });
            let merging = (|| -> Result<()> {
                loop {
                    let (sends, recvs, pairs) = merged.next_chunk(CHUNK_ROWS, &mut unmatched)?;
                    // A chunk not full is the last; no message at all still makes one (empty)
                    // batch, as in memory.
                    let last = pairs.len() < CHUNK_ROWS;
                    if pairs.is_empty() && matched.messages > 0 {
                        return Ok(());
                    }
                    let mut chunk = MessageChunk::with_capacity(matched.messages as i64, pairs.len());
                    size_mismatch += chunk.extend(&pairs, &sends, &recvs, nodes);
                    matched.violations += chunk
                        .send_ts
                        .iter()
                        .zip(&chunk.recv_ts)
                        .filter(|&(&s, &r)| s != NONE_I64 && r != NONE_I64 && r < s)
                        .count() as i64;
                    matched.messages += pairs.len() as u64;
                    // A writer that stopped has its error waiting at its end.
                    if send.send(chunk.into_batch(&names)?).is_err() || last {
                        return Ok(());
                    }
                }
            })();
            drop(send);
            let written = writer
                .join()
                .unwrap_or_else(|_| Err(Error::Engine("the writer of messages stopped unexpectedly".into())));
            merging.and(written)
        })?;
        unmatched.report(warnings);
        report_size_mismatch(size_mismatch, warnings);
        drop(merged);
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(matched)
    }
}

impl std::fmt::Debug for SpilledHalves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpilledHalves").field("dir", &self.dir).field("halves", &self.halves()).finish()
    }
}

impl Drop for SpilledHalves {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Bytes of a message in a run file: which halves it has, the send, the receive.
const RUN_BYTES: usize = 1 + 2 * HALF_BYTES;
const HAS_SEND: u8 = 1;
const HAS_RECV: u8 = 2;

/// Match one bucket's halves by key and write its messages, in msg_id order, to `run`.
fn match_bucket(send_path: &Path, recv_path: &Path, run: &Path) -> Result<()> {
    let sends = read_bucket(send_path)?;
    let recvs = read_bucket(recv_path)?;
    if sends.len().max(recvs.len()) >= Pair::NONE as usize {
        return Err(Error::Engine(format!(
            "{} sends and {} receives in one bucket of message matching: more than it handles ({})",
            sends.len(),
            recvs.len(),
            Pair::NONE
        )));
    }
    let key = |h: &Half, seq: u32| -> Key { (h.src, h.dst, h.comm, h.tag, seq) };
    let mut by_key: FastMap<Key, u32> = FastMap::default();
    by_key.reserve(recvs.len());
    for (j, (h, seq)) in recvs.iter().enumerate() {
        by_key.insert(key(h, *seq), j as u32);
    }
    let mut taken = vec![false; recvs.len()];
    let mut pairs: Vec<Pair> = Vec::with_capacity(sends.len().max(recvs.len()));
    for (i, (h, seq)) in sends.iter().enumerate() {
        let recv = by_key.remove(&key(h, *seq)).unwrap_or(Pair::NONE);
        if recv != Pair::NONE {
            taken[recv as usize] = true;
        }
        pairs.push(Pair { ts: h.ts, event: h.event(), send: i as u32, recv });
    }
    drop(by_key);
    for (j, (h, _)) in recvs.iter().enumerate().filter(|(j, _)| !taken[*j]) {
        pairs.push(Pair { ts: h.ts, event: h.event(), send: Pair::NONE, recv: j as u32 });
    }
    time_order::sort_by_time(&mut pairs, |p| p.ts, |p| p.event);
    let file = File::create(run).map_err(|e| Error::io(run, e))?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let mut record = Vec::with_capacity(RUN_BYTES);
    for p in &pairs {
        record.clear();
        let send = Pair::half_keyed(&sends, p.send);
        let recv = Pair::half_keyed(&recvs, p.recv);
        record.push((u8::from(send.is_some()) * HAS_SEND) | (u8::from(recv.is_some()) * HAS_RECV));
        put_half(send.unwrap_or(&Half::UNSET), &mut record);
        put_half(recv.unwrap_or(&Half::UNSET), &mut record);
        out.write_all(&record).map_err(|e| Error::io(run, e))?;
    }
    out.flush().map_err(|e| Error::io(run, e))
}

impl Pair {
    fn half_keyed(halves: &[(Half, u32)], k: u32) -> Option<&Half> {
        (k != Pair::NONE).then(|| &halves[k as usize].0)
    }
}

/// A message read back from a run: its halves, and its msg_id order.
struct RunMessage {
    send: Option<Half>,
    recv: Option<Half>,
}

impl RunMessage {
    fn order(&self) -> (i64, usize) {
        let h = self.send.as_ref().or(self.recv.as_ref()).expect("a message has a half");
        (h.ts, h.event())
    }
}

/// The runs merged in msg_id order.
struct Merge {
    readers: Vec<(BufReader<File>, PathBuf)>,
    heads: Vec<Option<RunMessage>>,
    /// (msg_id order, run) of every run's head, the smallest on top.
    heap: BinaryHeap<std::cmp::Reverse<((i64, usize), usize)>>,
}

impl Merge {
    fn open(runs: &[PathBuf]) -> Result<Self> {
        let mut m = Merge { readers: Vec::new(), heads: Vec::new(), heap: BinaryHeap::new() };
        for path in runs {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            m.readers.push((BufReader::with_capacity(1 << 16, file), path.clone()));
            m.heads.push(None);
            m.advance(m.readers.len() - 1)?;
        }
        Ok(m)
    }

    /// Read the next message of run `r` into its head.
    fn advance(&mut self, r: usize) -> Result<()> {
        let (reader, path) = &mut self.readers[r];
        let mut record = [0u8; RUN_BYTES];
        match reader.read_exact(&mut record) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.heads[r] = None;
                return Ok(());
            }
            Err(e) => return Err(Error::io(path, e)),
        }
        let flags = record[0];
        let message = RunMessage {
            send: (flags & HAS_SEND != 0).then(|| get_half(&record[1..1 + HALF_BYTES])),
            recv: (flags & HAS_RECV != 0).then(|| get_half(&record[1 + HALF_BYTES..])),
        };
        if message.send.is_none() && message.recv.is_none() {
            return Err(Error::in_file(path, "a message without halves in a run of message matching"));
        }
        self.heap.push(std::cmp::Reverse((message.order(), r)));
        self.heads[r] = Some(message);
        Ok(())
    }

    /// The next (at most) `rows` messages in msg_id order: their sends, receives and pairs of
    /// indices into them, as `MessageChunk::extend` takes them.
    fn next_chunk(&mut self, rows: usize, unmatched: &mut Unmatched) -> Result<(Vec<Half>, Vec<Half>, Vec<Pair>)> {
        let (mut sends, mut recvs, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
        while pairs.len() < rows {
            let Some(std::cmp::Reverse((order, r))) = self.heap.pop() else { break };
            let message = self.heads[r].take().expect("the run of a heap entry has a head");
            unmatched.count(message.send.as_ref(), message.recv.as_ref());
            let index = |h: Option<Half>, into: &mut Vec<Half>| match h {
                Some(h) => {
                    into.push(h);
                    (into.len() - 1) as u32
                }
                None => Pair::NONE,
            };
            let send = index(message.send, &mut sends);
            let recv = index(message.recv, &mut recvs);
            pairs.push(Pair { ts: order.0, event: order.1, send, recv });
            self.advance(r)?;
        }
        Ok((sends, recvs, pairs))
    }
}

impl Drop for Merge {
    fn drop(&mut self) {
        for (_, path) in &self.readers {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_split_again_keeps_every_half_and_each_channel_in_one_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sends-0000.bin");
        let mut data = Vec::new();
        let halves: Vec<(Half, u32)> = (0..10_000)
            .map(|i| {
                (
                    Half {
                        src: i % 37,
                        dst: i % 11,
                        tag: i % 3,
                        ts: i64::from(i),
                        place: Half::place(i as usize, 0),
                        ..Half::UNSET
                    },
                    i as u32 / 7,
                )
            })
            .collect();
        for (h, seq) in &halves {
            put_half(h, &mut data);
            data.extend_from_slice(&seq.to_le_bytes());
        }
        std::fs::write(&path, &data).unwrap();
        let parts = split_bucket(&path, 3, 1).unwrap();
        assert!(!path.exists());
        let mut back: Vec<(i64, u32)> = Vec::new();
        let mut part_of: FastMap<(i32, i32, i32, i32), usize> = FastMap::default();
        for (k, p) in parts.iter().enumerate() {
            let read = read_bucket(p).unwrap();
            assert!(read.len() > 2_000, "part {k} holds {} halves", read.len());
            for (h, seq) in read {
                assert_eq!(*part_of.entry((h.src, h.dst, h.comm, h.tag)).or_insert(k), k, "a channel in two parts");
                back.push((h.ts, seq));
            }
        }
        back.sort_unstable();
        assert_eq!(back, halves.iter().map(|(h, s)| (h.ts, *s)).collect::<Vec<_>>());
    }
}
