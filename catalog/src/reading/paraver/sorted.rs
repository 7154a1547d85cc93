//! The records of a Paraver trace being written, put in the file's order in bounded memory (an
//! external merge sort): records gather in memory; a full chunk is sorted and written to a run
//! file in a scratch directory; at the end the runs are merged. A trace whose records fit one
//! chunk is sorted in memory and never touches the disk. The run files' layout is private to
//! this module: little-endian fields, a kind byte choosing which follow.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::reading::shards::Fields;

/// A record of the .prv other than a state: its time, its place among records of equal time
/// and kind (the order the writer made it in), and what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rec {
    pub ts: i64,
    pub order: u64,
    pub kind: RecKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RecKind {
    Event { stream: u32, ty: i64, value: i64 },
    Collective { stream: u32, sent: i64, received: i64, root: i64, comm: i64 },
    Comm { send: u32, recv: u32, physical_send: i64, logical_recv: i64, physical_recv: i64, size: i64, tag: i64 },
}

impl Rec {
    /// The file's order: by time, events before communications, then as made.
    fn key(&self) -> (i64, u8, u64) {
        let kind = match self.kind {
            RecKind::Event { .. } | RecKind::Collective { .. } => 1,
            RecKind::Comm { .. } => 2,
        };
        (self.ts, kind, self.order)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.order.to_le_bytes());
        let ints: &[i64] = match self.kind {
            RecKind::Event { stream, ty, value } => {
                out.push(0);
                out.extend_from_slice(&stream.to_le_bytes());
                &[ty, value]
            }
            RecKind::Collective { stream, sent, received, root, comm } => {
                out.push(1);
                out.extend_from_slice(&stream.to_le_bytes());
                &[sent, received, root, comm]
            }
            RecKind::Comm { send, recv, physical_send, logical_recv, physical_recv, size, tag } => {
                out.push(2);
                out.extend_from_slice(&send.to_le_bytes());
                out.extend_from_slice(&recv.to_le_bytes());
                &[physical_send, logical_recv, physical_recv, size, tag]
            }
        };
        for v in ints {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// The next record of a run, None at its end.
    fn decode(input: &mut impl Read, path: &Path) -> Result<Option<Rec>> {
        let mut head = [0u8; 17];
        match input.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        }
        let mut h = Fields(&head);
        let (ts, order) = (h.i64(), h.u64());
        // The fields after the kind: stream(s), then its numbers.
        let size = match head[16] {
            0 => 4 + 2 * 8,
            1 => 4 + 4 * 8,
            2 => 2 * 4 + 5 * 8,
            other => {
                return Err(Error::in_file(path, format!("a scratch file of the writer is damaged (kind {other})")));
            }
        };
        let mut body = [0u8; 48];
        input.read_exact(&mut body[..size]).map_err(|e| Error::io(path, e))?;
        let mut f = Fields(&body[..size]);
        let kind = match head[16] {
            0 => RecKind::Event { stream: f.u32(), ty: f.i64(), value: f.i64() },
            1 => {
                RecKind::Collective { stream: f.u32(), sent: f.i64(), received: f.i64(), root: f.i64(), comm: f.i64() }
            }
            _ => RecKind::Comm {
                send: f.u32(),
                recv: f.u32(),
                physical_send: f.i64(),
                logical_recv: f.i64(),
                physical_recv: f.i64(),
                size: f.i64(),
                tag: f.i64(),
            },
        };
        Ok(Some(Rec { ts, order, kind }))
    }
}

/// Runs merged at once: each is an open file, and a process may hold about a thousand.
const MAX_FAN_IN: usize = 256;

/// Records gathered and sorted, `limit` at a time in memory.
pub(crate) struct Sorter {
    chunk: Vec<Rec>,
    limit: usize,
    /// Runs merged at once (`MAX_FAN_IN`).
    fan_in: usize,
    /// The scratch directory for runs (made with the first run, removed with the sorter).
    dir: PathBuf,
    runs: Vec<PathBuf>,
}

impl Drop for Sorter {
    fn drop(&mut self) {
        if !self.runs.is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Sorter {
    pub fn new(dir: PathBuf, limit: usize) -> Self {
        Sorter { chunk: Vec::new(), limit: limit.max(1), fan_in: MAX_FAN_IN, dir, runs: Vec::new() }
    }

    pub fn push(&mut self, r: Rec) -> Result<()> {
        self.chunk.push(r);
        if self.chunk.len() >= self.limit { self.spill() } else { Ok(()) }
    }

    /// Sort the chunk and write it as a run.
    fn spill(&mut self) -> Result<()> {
        if self.runs.is_empty() {
            std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        self.chunk.sort_unstable_by_key(Rec::key);
        let path = self.dir.join(format!("run-{:05}.bin", self.runs.len()));
        self.runs.push(path.clone());
        let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut bytes = Vec::with_capacity(64);
        for r in &self.chunk {
            bytes.clear();
            r.encode(&mut bytes);
            out.write_all(&bytes).map_err(|e| Error::io(&path, e))?;
        }
        out.flush().map_err(|e| Error::io(&path, e))?;
        self.chunk.clear();
        Ok(())
    }

    /// Every record, in the file's order.
    pub fn finish(mut self, f: &mut dyn FnMut(&Rec) -> Result<()>) -> Result<()> {
        if self.runs.is_empty() {
            self.chunk.sort_unstable_by_key(Rec::key);
            return self.chunk.iter().try_for_each(f);
        }
        if !self.chunk.is_empty() {
            self.spill()?;
        }
        // Runs are merged at most `fan_in` at a time (each is an open file): more are first
        // merged into longer runs, as many passes as it takes.
        let mut runs = std::mem::take(&mut self.runs);
        let mut next = runs.len();
        while runs.len() > self.fan_in {
            let mut longer = Vec::new();
            for group in runs.chunks(self.fan_in) {
                let path = self.dir.join(format!("run-{next:05}.bin"));
                next += 1;
                let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
                let mut out = BufWriter::with_capacity(1 << 20, file);
                let mut bytes = Vec::with_capacity(64);
                merge(group, &mut |r| {
                    bytes.clear();
                    r.encode(&mut bytes);
                    out.write_all(&bytes).map_err(|e| Error::io(&path, e))
                })?;
                out.flush().map_err(|e| Error::io(&path, e))?;
                group.iter().for_each(|p| drop(std::fs::remove_file(p)));
                longer.push(path);
            }
            runs = longer;
        }
        self.runs = runs;
        merge(&self.runs, f)
    }
}

/// The records of sorted `runs`, merged in the file's order.
fn merge(runs: &[PathBuf], f: &mut dyn FnMut(&Rec) -> Result<()>) -> Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    for p in runs {
        let file = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
        readers.push(BufReader::with_capacity(1 << 16, file));
    }
    let mut heads: Vec<Option<Rec>> = Vec::with_capacity(readers.len());
    let mut heap = BinaryHeap::new();
    for (k, r) in readers.iter_mut().enumerate() {
        let head = Rec::decode(r, &runs[k])?;
        if let Some(h) = &head {
            heap.push(Reverse((h.key(), k)));
        }
        heads.push(head);
    }
    while let Some(Reverse((_, k))) = heap.pop() {
        let r = heads[k].take().expect("a run's head");
        f(&r)?;
        heads[k] = Rec::decode(&mut readers[k], &runs[k])?;
        if let Some(h) = &heads[k] {
            heap.push(Reverse((h.key(), k)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_into_the_order_one_sort_gives() {
        let recs: Vec<Rec> = (0..1000u64)
            .map(|i| {
                let ts = ((i * 7919) % 97) as i64;
                let kind = match i % 3 {
                    0 => RecKind::Event { stream: i as u32, ty: 50_000_001, value: -(i as i64) },
                    1 => RecKind::Collective { stream: 3, sent: 1, received: 2, root: -1, comm: i as i64 },
                    _ => RecKind::Comm {
                        send: 1,
                        recv: 2,
                        physical_send: ts,
                        logical_recv: ts + 1,
                        physical_recv: ts + 2,
                        size: 8,
                        tag: i as i64,
                    },
                };
                Rec { ts, order: i, kind }
            })
            .collect();
        let sorted_in = |limit: usize, fan_in: usize| {
            let dir = tempfile::tempdir().unwrap();
            let scratch = dir.path().join("sort");
            let mut s = Sorter::new(scratch.clone(), limit);
            s.fan_in = fan_in;
            recs.iter().for_each(|r| s.push(*r).unwrap());
            let mut out = Vec::new();
            s.finish(&mut |r| {
                out.push(*r);
                Ok(())
            })
            .unwrap();
            assert!(!scratch.exists(), "runs removed");
            out
        };
        let sorted = |limit: usize| sorted_in(limit, MAX_FAN_IN);
        let in_memory = sorted(1 << 20);
        assert!(in_memory.windows(2).all(|w| w[0].key() < w[1].key()));
        assert_eq!(sorted(64), in_memory);
        assert_eq!(sorted(1), in_memory);
        // 1,000 runs merged 3 at a time: seven passes of longer runs first.
        assert_eq!(sorted_in(1, 3), in_memory);
        assert_eq!(sorted_in(10, 4), in_memory);
    }
}
