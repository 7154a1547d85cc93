//! A CSV trace read a group of ranks at a time, for a conversion in bounded memory
//! ([`crate::convert`]). Rows may come in any order and name their ranks only as they go, so a
//! first pass parses every row as `read` does, keeping the definitions (ranks, nodes,
//! communicators, regions) and writing each event, decoded, to a scratch file with a count per
//! rank; a second pass, once the ranks are known, distributes the events into shards of whole
//! ranks of about the same size. Groups of shards are then put in the trace's order as `read`
//! puts the whole trace (`Shape::order`: by rank and thread, stable), so the tables are those
//! of the trace read in memory. The scratch files' layout is private to this module: one
//! fixed-size little-endian record per event.

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::{CsvOptions, Shape};
use crate::error::{Error, Result};
use crate::events::{Event, EventKind, EventParts, RawEvents};
use crate::reading::shards::{Fields, Scratch, Shards};
use crate::trace::{RawMetrics, RawTrace, Warnings};

/// At most this many shards (files open at once while distributing).
const MAX_SHARDS: usize = 256;
/// Bytes of an event in a scratch file.
const EVENT_BYTES: usize = 58;
/// Events read back at a time while distributing.
const CHUNK_EVENTS: usize = 1 << 16;

/// Events a CSV trace's tables would hold, estimated from its file's size: a row takes 20
/// bytes or more (a PCLVis row about 25, an export row 60 to 120) and gives one event.
pub fn events_estimated(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len() / 20)
}

/// A CSV trace split into shards of whole ranks, to be decoded a group of shards at a time.
pub struct Pieces {
    shape: Shape,
    scratch: Scratch,
    /// The events of each shard.
    /// The shards' events and the clock models they are corrected with.
    shards: Shards,
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").field("shape", &self.shape).field("shards", &self.shards.sizes.len()).finish()
    }
}

fn encode(out: &mut Vec<u8>, e: &Event) {
    out.extend_from_slice(&e.rank.to_le_bytes());
    out.extend_from_slice(&e.thread.to_le_bytes());
    out.extend_from_slice(&e.ts.to_le_bytes());
    out.push(e.kind as u8);
    out.extend_from_slice(&e.region.to_le_bytes());
    out.extend_from_slice(&e.peer.to_le_bytes());
    out.extend_from_slice(&e.comm.to_le_bytes());
    out.extend_from_slice(&e.tag.to_le_bytes());
    out.extend_from_slice(&e.bytes.to_le_bytes());
    out.extend_from_slice(&e.request.to_le_bytes());
    out.push(e.op);
    out.extend_from_slice(&e.bytes_recv.to_le_bytes());
}

fn decode(b: &[u8]) -> Event {
    let mut f = Fields(b);
    Event {
        rank: f.i32(),
        thread: f.i32(),
        ts: f.i64(),
        kind: EventKind::from_u8(f.take::<1>()[0]),
        region: f.i32(),
        peer: f.i32(),
        comm: f.i32(),
        tag: f.i32(),
        bytes: f.i64(),
        request: f.i64(),
        op: f.take::<1>()[0],
        bytes_recv: f.i64(),
    }
}

fn writer(path: &Path) -> Result<BufWriter<std::fs::File>> {
    Ok(BufWriter::with_capacity(1 << 16, std::fs::File::create(path).map_err(|e| Error::io(path, e))?))
}

fn close(file: BufWriter<std::fs::File>, path: &Path) -> Result<()> {
    file.into_inner().map_err(|e| Error::io(path, e.into_error())).map(drop)
}

/// The first rank of each of the shards of about `shard_events` events that `counts` (events
/// by rank) cut into, at most `MAX_SHARDS`.
fn shard_starts(counts: &BTreeMap<i32, u64>, shard_events: u64) -> Vec<i32> {
    let total: u64 = counts.values().sum();
    let per = shard_events.max(total.div_ceil(MAX_SHARDS as u64)).max(1);
    let mut starts = Vec::new();
    let mut filled = per;
    for (&rank, &n) in counts {
        if filled >= per {
            starts.push(rank);
            filled = 0;
        }
        filled += n;
    }
    starts
}

/// Read the CSV trace at `path` (of `shape`) once, writing its events into shards of whole
/// ranks of about `shard_events` events in the directory `scratch` (made here, removed when
/// the pieces are dropped).
pub fn read_in_pieces(
    path: &Path,
    shape: Shape,
    options: &CsvOptions,
    scratch: &Path,
    shard_events: u64,
) -> Result<(RawTrace, Pieces)> {
    let guard = Scratch::create(scratch)?;
    let all_path = scratch.join("events");
    let mut all = writer(&all_path)?;
    let mut counts: BTreeMap<i32, u64> = BTreeMap::new();
    let mut buffer = Vec::with_capacity(EVENT_BYTES);
    let what = format!("splitting {}", path.display());
    let mut rows = 0u64;
    let raw = shape.read_rows(path, options, &mut |e| {
        rows += 1;
        if rows.is_multiple_of(1 << 16) {
            crate::interrupt::check(&what)?;
        }
        buffer.clear();
        encode(&mut buffer, &e);
        *counts.entry(e.rank).or_default() += 1;
        all.write_all(&buffer).map_err(|err| Error::io(&all_path, err))
    })?;
    close(all, &all_path)?;

    // The events distributed to shards of whole ranks.
    let starts = shard_starts(&counts, shard_events);
    let shard_of = |rank: i32| starts.partition_point(|&s| s <= rank).saturating_sub(1);
    let mut files: Vec<BufWriter<std::fs::File>> =
        (0..starts.len()).map(|k| writer(&guard.shard(k))).collect::<Result<_>>()?;
    let mut sizes = vec![0u64; starts.len()];
    let mut reader =
        BufReader::with_capacity(1 << 20, std::fs::File::open(&all_path).map_err(|e| Error::io(&all_path, e))?);
    let mut left: u64 = counts.values().sum();
    let mut chunk = Vec::new();
    while left > 0 {
        let n = left.min(CHUNK_EVENTS as u64) as usize;
        chunk.resize(n * EVENT_BYTES, 0);
        reader.read_exact(&mut chunk).map_err(|e| Error::io(&all_path, e))?;
        for record in chunk.chunks_exact(EVENT_BYTES) {
            let rank = i32::from_le_bytes(record[..4].try_into().expect("4 bytes"));
            let k = shard_of(rank);
            sizes[k] += 1;
            files[k].write_all(record).map_err(|e| Error::io(&guard.shard(k), e))?;
        }
        left -= n as u64;
    }
    drop(reader);
    let _ = std::fs::remove_file(&all_path);
    for (k, file) in files.into_iter().enumerate() {
        close(file, &guard.shard(k))?;
    }
    Ok((raw, Pieces { shape, scratch: guard, shards: Shards { sizes, models: Vec::new() } }))
}

impl crate::reading::InGroups for Pieces {
    fn shards(&self) -> Option<&Shards> {
        Some(&self.shards)
    }

    fn shards_mut(&mut self) -> Option<&mut Shards> {
        Some(&mut self.shards)
    }

    fn decode(&mut self, group: &[usize], _warnings: &mut Warnings) -> Result<(EventParts, RawMetrics)> {
        let mut events = RawEvents::default();
        for &k in group {
            let path = self.scratch.shard(k);
            let mut data = Vec::new();
            std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut data)).map_err(|e| Error::io(&path, e))?;
            if data.len() % EVENT_BYTES != 0 {
                return Err(Error::in_file(&path, "a scratch file of the conversion is damaged"));
            }
            data.chunks_exact(EVENT_BYTES).for_each(|b| events.push(decode(b)));
            let _ = std::fs::remove_file(&path);
        }
        let mut parts = self.shape.order(events);
        let fits = crate::clock::Fits::of(&self.shards.models);
        parts.parts.iter_mut().for_each(|p| crate::clock::correct_events(p, &fits));
        Ok((parts, RawMetrics::default()))
    }

    fn finish(&mut self, _warnings: &mut Warnings) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_back_as_written_and_shards_hold_whole_ranks() {
        let mut e = Event::new(7, 2, -5, EventKind::CollEnd);
        (e.region, e.peer, e.comm, e.tag, e.bytes, e.request, e.op, e.bytes_recv) = (3, 4, 5, 6, 1 << 40, -9, 11, 12);
        let mut b = Vec::new();
        encode(&mut b, &e);
        assert_eq!(b.len(), EVENT_BYTES);
        let back = decode(&b);
        assert_eq!(
            (back.rank, back.thread, back.ts, back.kind, back.region, back.peer, back.comm, back.tag),
            (7, 2, -5, EventKind::CollEnd, 3, 4, 5, 6)
        );
        assert_eq!((back.bytes, back.request, back.op, back.bytes_recv), (1 << 40, -9, 11, 12));
        let counts: BTreeMap<i32, u64> = [(0, 5), (1, 5), (4, 1), (9, 20), (10, 1)].into_iter().collect();
        assert_eq!(shard_starts(&counts, 6), vec![0, 4, 10]);
        assert_eq!(shard_starts(&counts, 1), vec![0, 1, 4, 9, 10]);
        assert_eq!(shard_starts(&BTreeMap::new(), 6), Vec::<i32>::new());
    }
}
