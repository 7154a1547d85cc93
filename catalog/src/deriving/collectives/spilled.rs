//! The `collectives` table of a trace derived a group of ranks at a time ([`crate::convert`]), in
//! memory bounded by a batch rather than by the trace.
//!
//! `assemble` puts the parts in (communicator, instance, stream) order, an instance's parts
//! together; on a per-rank communicator (MPI_COMM_SELF) each part is an operation of its own,
//! numbered across the streams in stream order. Each group of ranks writes its parts sorted by
//! that key to a run file; the runs are merged, and every instance's parts, arriving together,
//! are checked against the communicator as `assemble` checks them. The rows and warnings are
//! those of `assemble`.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;

use super::{Collectives, Part, check_group};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::trace::{CommInfo, Warnings};

/// Bytes of a part in a run: its sort key (comm, a, b), then its fields.
const RECORD_BYTES: usize = 4 + 8 + 8 + (8 + 4 + 1 + 4 + 4 + 4 + 8 + 8 + 8 + 8 + 8);

/// Parts per batch of the table.
const BATCH_PARTS: usize = 1 << 16;

/// Sort key of a part: (comm, instance, stream), or (comm, stream, position) on a per-rank
/// communicator.
type Key = (i32, i64, i64);

fn put(key: Key, p: &Part, out: &mut Vec<u8>) {
    out.extend_from_slice(&key.0.to_le_bytes());
    out.extend_from_slice(&key.1.to_le_bytes());
    out.extend_from_slice(&key.2.to_le_bytes());
    out.extend_from_slice(&p.instance.to_le_bytes());
    out.extend_from_slice(&p.comm.to_le_bytes());
    out.push(p.op);
    for v in [p.root, p.rank, p.thread] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [p.begin, p.end, p.bytes_sent, p.bytes_recv, p.call_start] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn get(b: &[u8]) -> (Key, Part) {
    let i32_at = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let i64_at = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let key = (i32_at(0), i64_at(4), i64_at(12));
    let part = Part {
        instance: i64_at(20),
        comm: i32_at(28),
        op: b[32],
        root: i32_at(33),
        rank: i32_at(37),
        thread: i32_at(41),
        begin: i64_at(45),
        end: i64_at(53),
        bytes_sent: i64_at(61),
        bytes_recv: i64_at(69),
        call_start: i64_at(77),
    };
    (key, part)
}

/// Runs merged at once: each is an open file, and a process may hold about a thousand (a run
/// is a group of ranks: 203 groups at 1 B events).
const MAX_FAN_IN: usize = 256;

/// The collective parts of the groups read so far, in run files of a scratch directory.
#[derive(Debug)]
pub struct SpilledParts {
    dir: PathBuf,
    runs: Vec<PathBuf>,
    /// Runs merged at once (`MAX_FAN_IN`).
    fan_in: usize,
    /// Streams so far: the global index of the next group's first stream.
    streams: i64,
    /// The per-rank communicators.
    per_rank: Vec<i32>,
}

impl SpilledParts {
    pub fn create(dir: &Path, comms: &[CommInfo]) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let per_rank = comms.iter().filter(|c| c.per_rank).map(|c| c.comm).collect();
        Ok(SpilledParts { dir: dir.to_path_buf(), runs: Vec::new(), fan_in: MAX_FAN_IN, streams: 0, per_rank })
    }

    /// Add the parts of a group's streams (in stream order, empty streams included).
    pub fn add(&mut self, per_stream: Vec<Vec<Part>>) -> Result<()> {
        let first = self.streams;
        self.streams += per_stream.len() as i64;
        let mut keyed: Vec<(Key, Part)> = Vec::with_capacity(per_stream.iter().map(Vec::len).sum());
        for (s, parts) in per_stream.into_iter().enumerate() {
            let stream = first + s as i64;
            let mut position: FastMap<i32, i64> = FastMap::default();
            for p in parts {
                let key = if self.per_rank.contains(&p.comm) {
                    let k = position.entry(p.comm).or_insert(0);
                    *k += 1;
                    (p.comm, stream, *k)
                } else {
                    (p.comm, p.instance, stream)
                };
                keyed.push((key, p));
            }
        }
        if keyed.is_empty() {
            return Ok(());
        }
        keyed.sort_unstable_by_key(|(key, _)| *key);
        let path = self.dir.join(format!("collectives-{:05}.bin", self.runs.len()));
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let mut record = Vec::with_capacity(RECORD_BYTES);
        for (key, p) in &keyed {
            record.clear();
            put(*key, p, &mut record);
            out.write_all(&record).map_err(|e| Error::io(&path, e))?;
        }
        out.flush().map_err(|e| Error::io(&path, e))?;
        self.runs.push(path);
        Ok(())
    }

    /// Merge the runs into record batches of the `collectives` table, handed to `sink` in
    /// order (one empty batch when there are no parts), with `assemble`'s checks.
    pub fn finish(
        mut self,
        comms: &[CommInfo],
        warnings: &mut Warnings,
        mut sink: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<u64> {
        self.merge_down()?;
        let sizes: FastMap<i32, usize> = comms.iter().map(|c| (c.comm, c.members.len())).collect();
        let mut readers = Vec::with_capacity(self.runs.len());
        let mut heap: BinaryHeap<std::cmp::Reverse<(Key, usize)>> = BinaryHeap::new();
        let mut heads: Vec<Option<Part>> = Vec::with_capacity(self.runs.len());
        for (r, path) in self.runs.iter().enumerate() {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            readers.push(BufReader::with_capacity(1 << 16, file));
            heads.push(None);
            advance(&mut readers[r], path, r, &mut heap, &mut heads)?;
        }
        let (mut batch, mut group): (Vec<Part>, Vec<Part>) = (Vec::new(), Vec::new());
        let mut group_key: Option<(i32, i64)> = None;
        let mut self_instance: Option<(i32, i64)> = None;
        let mut total = 0u64;
        let flush_group = |group: &mut Vec<Part>, batch: &mut Vec<Part>, warnings: &mut Warnings| {
            if let Some(first) = group.first() {
                let size = sizes.get(&first.comm).copied();
                check_group(group, size, warnings);
            }
            batch.append(group);
        };
        while let Some(std::cmp::Reverse((key, r))) = heap.pop() {
            let mut part = heads[r].take().expect("the run of a heap entry has a head");
            advance(&mut readers[r], &self.runs[r], r, &mut heap, &mut heads)?;
            if self.per_rank.contains(&part.comm) {
                flush_group(&mut group, &mut batch, warnings);
                group_key = None;
                let next = match self_instance {
                    Some((comm, k)) if comm == part.comm => k + 1,
                    _ => 0,
                };
                self_instance = Some((part.comm, next));
                part.instance = next;
                batch.push(part);
            } else {
                if group_key != Some((key.0, key.1)) {
                    flush_group(&mut group, &mut batch, warnings);
                    group_key = Some((key.0, key.1));
                }
                group.push(part);
            }
            if batch.len() >= BATCH_PARTS {
                total += batch.len() as u64;
                sink(Collectives { parts: std::mem::take(&mut batch) }.to_batch()?)?;
            }
        }
        flush_group(&mut group, &mut batch, warnings);
        if !batch.is_empty() || total == 0 {
            total += batch.len() as u64;
            sink(Collectives { parts: batch }.to_batch()?)?;
        }
        drop(readers);
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(total)
    }
}

impl SpilledParts {
    /// Merge the runs, `fan_in` at a time, into longer ones until at most `fan_in` are left;
    /// equal keys keep the order of their runs.
    fn merge_down(&mut self) -> Result<()> {
        let mut next = self.runs.len();
        while self.runs.len() > self.fan_in {
            let mut longer = Vec::new();
            for group in self.runs.chunks(self.fan_in) {
                let path = self.dir.join(format!("collectives-{next:05}.bin"));
                next += 1;
                let mut out = BufWriter::with_capacity(1 << 16, File::create(&path).map_err(|e| Error::io(&path, e))?);
                let mut readers = Vec::with_capacity(group.len());
                let mut heap: BinaryHeap<std::cmp::Reverse<(Key, usize)>> = BinaryHeap::new();
                let mut heads: Vec<Option<Part>> = vec![None; group.len()];
                for (r, run) in group.iter().enumerate() {
                    readers.push(BufReader::with_capacity(1 << 16, File::open(run).map_err(|e| Error::io(run, e))?));
                    advance(&mut readers[r], run, r, &mut heap, &mut heads)?;
                }
                let mut record = Vec::with_capacity(RECORD_BYTES);
                while let Some(std::cmp::Reverse((key, r))) = heap.pop() {
                    let part = heads[r].take().expect("the run of a heap entry has a head");
                    advance(&mut readers[r], &group[r], r, &mut heap, &mut heads)?;
                    record.clear();
                    put(key, &part, &mut record);
                    out.write_all(&record).map_err(|e| Error::io(&path, e))?;
                }
                out.flush().map_err(|e| Error::io(&path, e))?;
                drop(readers);
                group.iter().for_each(|run| drop(std::fs::remove_file(run)));
                longer.push(path);
            }
            self.runs = longer;
        }
        Ok(())
    }
}

/// Read the next part of run `r` into its head and the heap.
fn advance(
    reader: &mut BufReader<File>,
    path: &Path,
    r: usize,
    heap: &mut BinaryHeap<std::cmp::Reverse<(Key, usize)>>,
    heads: &mut [Option<Part>],
) -> Result<()> {
    let mut record = [0u8; RECORD_BYTES];
    match reader.read_exact(&mut record) {
        Ok(()) => {
            let (key, part) = get(&record);
            heap.push(std::cmp::Reverse((key, r)));
            heads[r] = Some(part);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

impl Drop for SpilledParts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(fan_in: usize) -> (Vec<String>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let comms = [CommInfo { comm: 0, name: "MPI_COMM_WORLD".into(), members: (0..6).collect(), per_rank: false }];
        let mut spilled = SpilledParts::create(&dir.path().join("c"), &comms).unwrap();
        spilled.fan_in = fan_in;
        // Six groups of one rank each, three instances of the world's collective.
        for rank in 0..6 {
            let part = |instance: i64| Part {
                instance,
                comm: 0,
                op: 1,
                root: 0,
                rank,
                thread: 0,
                begin: 10 * instance + i64::from(rank),
                end: 10 * instance + 9,
                bytes_sent: 8,
                bytes_recv: 8,
                call_start: 10 * instance,
            };
            spilled.add(vec![(0..3).map(part).collect()]).unwrap();
        }
        let mut out = Vec::new();
        let mut warnings = Warnings::default();
        let total = spilled
            .finish(&comms, &mut warnings, |b| {
                out.push(arrow::util::pretty::pretty_format_batches(&[b]).unwrap().to_string());
                Ok(())
            })
            .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        (out, total)
    }

    #[test]
    fn runs_merged_a_few_at_a_time_give_the_one_merge() {
        let (all, n) = parts(MAX_FAN_IN);
        assert_eq!(n, 18);
        assert_eq!(parts(2), (all.clone(), n));
        assert_eq!(parts(4), (all, n));
    }
}
