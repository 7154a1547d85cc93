//! A Paraver trace read a group of ranks at a time, for a conversion in bounded memory
//! ([`crate::convert`]). A .prv interleaves all threads in one time-ordered file, so a first pass
//! reads it once, piece by piece as `read` does, and splits each piece's event records and
//! message halves by shard (a run of whole tasks' streams) into scratch files, and its states
//! into one more. That pass keeps only what the whole file must tell before any stream is
//! walked (`Summary`: what each event type means, which applications call MPI, the regions
//! entered, overtaking messages). Groups of shards are then read back and their streams walked
//! as `read` walks them, so the tables are those of the trace read in memory. The file format
//! of the scratch files is private to this module: little-endian fields, written and read here.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use rayon::prelude::*;

use super::records::{self, EventRec, Half, HalfKind};
use super::{Meaning, MessageEvent, Opened, StateNames, Summary, message_event, region_keys};
use crate::error::{Error, Result};
use crate::events::{EventParts, RawEvents};
use crate::progress::LoadProgress;
use crate::reading::shards::{Fields, Scratch, Shards};
use crate::trace::{RawMetrics, RawStates, RawTrace, Warnings};

/// At most this many shards (files open at once while splitting).
const MAX_SHARDS: usize = 256;
/// States read back per batch of the `states` table.
const STATES_PER_BATCH: usize = 1 << 20;
/// Bytes of an event record and of a half in a shard file.
const EVENT_BYTES: usize = 20;
const HALF_BYTES: usize = 33;
/// Bytes of a state in the states file.
const STATE_BYTES: usize = 24;

/// A Paraver trace split by shards of streams, to be decoded a group of shards at a time.
pub struct Pieces {
    prv: PathBuf,
    scratch: Scratch,
    pcf: super::pcf::Pcf,
    meaning: Meaning,
    /// The first stream of each shard, then the number of streams.
    bounds: Vec<usize>,
    /// Event records and message halves in each shard.
    /// The shards' events (records and message halves) and the clock models they are
    /// corrected with.
    shards: Shards,
    /// States in the states file.
    states: u64,
    /// What the walks did not keep as events, so far.
    unkept: super::Unkept,
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").field("prv", &self.prv).field("shards", &self.shards.sizes.len()).finish()
    }
}

/// Events a Paraver trace's tables would hold, estimated from its file's size: a record line
/// takes 25 to 60 bytes and gives one to three events; 24 bytes an event errs towards more
/// events (and the cache store). A compressed file is counted at six times its size.
pub fn events_estimated(path: &Path) -> Result<u64> {
    let prv = super::find_prv(path)?;
    let bytes = std::fs::metadata(&prv).map_err(|e| Error::io(&prv, e))?.len();
    let gz = prv.to_string_lossy().to_ascii_lowercase().ends_with(".gz");
    Ok(if gz { bytes.saturating_mul(6) } else { bytes } / 24)
}

/// The first stream of each of `shards` runs of whole tasks, then the number of streams.
fn shard_bounds(header: &super::header::Header, shards: usize) -> Vec<usize> {
    let mut task_first = Vec::new();
    let mut next = 0usize;
    for task in header.apps.iter().flatten() {
        task_first.push(next);
        next += task.threads as usize;
    }
    let tasks = task_first.len();
    let shards = shards.clamp(1, tasks.max(1));
    let mut bounds: Vec<usize> =
        (0..shards).map(|k| task_first.get(k * tasks / shards).copied().unwrap_or(0)).collect();
    bounds.dedup();
    bounds.push(next);
    bounds
}

/// Read the Paraver trace at `path` once, splitting its records into shards of about
/// `shard_events` events in the directory `scratch` (made here, removed when the pieces are
/// dropped); `progress` is told the bytes read.
pub fn read_in_pieces(
    path: &Path,
    scratch: &Path,
    shard_events: u64,
    progress: Option<&LoadProgress>,
) -> Result<(RawTrace, Pieces)> {
    let estimated = events_estimated(path)?;
    let mut o: Opened = super::open(path, progress)?;
    let want = estimated.div_ceil(shard_events.max(1)) as usize;
    let bounds = shard_bounds(&o.header, want.min(MAX_SHARDS));
    let shards = bounds.len() - 1;
    let guard = Scratch::create(scratch)?;
    let mut sizes = vec![0u64; shards];
    let mut states = 0u64;
    let create = |p: PathBuf| -> Result<BufWriter<std::fs::File>> {
        Ok(BufWriter::with_capacity(1 << 16, std::fs::File::create(&p).map_err(|e| Error::io(&p, e))?))
    };
    let mut files: Vec<BufWriter<std::fs::File>> =
        (0..shards).map(|k| create(guard.shard(k))).collect::<Result<_>>()?;
    let states_path = scratch.join("states");
    let mut states_file = create(states_path.clone())?;
    let mut summary = Summary::default();
    let mut overtaking = super::Overtaking::default();
    let mut first_comm = 0i64;
    let mut other_types = (0u64, 0u64);
    let mut buffer = Vec::new();
    let report = |n: u64| {
        if let Some(p) = progress {
            p.add(n);
        }
    };
    let start = std::mem::take(&mut o.first_record);
    records::parse_each(
        &o.prv,
        &mut o.reader,
        start,
        o.first_line,
        &o.layout,
        o.scale,
        &report,
        records::PIECE_BYTES,
        &mut |r: records::Records| {
            crate::interrupt::check(&format!("splitting {}", o.prv.display()))?;
            records::add_other_types(&mut other_types, r.other_types);
            for piece in &r.pieces {
                summary.see(piece, &o.pcf);
                summary.region_keys.extend(region_keys(piece, &summary.classes));
                piece.comms.iter().for_each(|c| overtaking.add(c));
                for (k, file) in files.iter_mut().enumerate() {
                    buffer.clear();
                    for s in bounds[k]..bounds[k + 1] {
                        let (events, halves) = (piece.of_stream(s), piece.halves_of_stream(s));
                        if !events.is_empty() || !halves.is_empty() {
                            encode_stream(&mut buffer, s, events, halves, first_comm);
                            sizes[k] += (events.len() + halves.len()) as u64;
                        }
                    }
                    file.write_all(&buffer).map_err(|e| Error::io(&guard.shard(k), e))?;
                }
                first_comm += piece.comms.len() as i64;
            }
            buffer.clear();
            for st in &r.states {
                buffer.extend_from_slice(&st.stream.to_le_bytes());
                buffer.extend_from_slice(&st.begin.to_le_bytes());
                buffer.extend_from_slice(&st.end.to_le_bytes());
                buffer.extend_from_slice(&st.state.to_le_bytes());
            }
            states += r.states.len() as u64;
            states_file.write_all(&buffer).map_err(|e| Error::io(&states_path, e))
        },
    )?;
    for (k, file) in files.into_iter().enumerate() {
        file.into_inner().map_err(|e| Error::io(&guard.shard(k), e.into_error()))?;
    }
    states_file.into_inner().map_err(|e| Error::io(&states_path, e.into_error()))?;
    let mut warnings = o.warnings;
    super::report_other_types(&o.prv, other_types, &mut warnings);
    let meaning = Meaning::of(&o.prv, &o.header, &o.pcf, &o.row, summary, &mut warnings);
    super::report_overtaking(&o.prv, overtaking.found(), &mut warnings);
    let raw = super::trace(&o.prv, &o.header, &o.row, &meaning, warnings);
    let pieces = Pieces {
        prv: o.prv,
        scratch: guard,
        pcf: o.pcf,
        meaning,
        bounds,
        shards: Shards { sizes, models: Vec::new() },
        states,
        unkept: super::Unkept::default(),
    };
    Ok((raw, pieces))
}

/// Append stream `s`'s records and halves of a piece (whose first communication record is the
/// file's `first_comm`th) to `out`.
fn encode_stream(out: &mut Vec<u8>, s: usize, events: &[EventRec], halves: &[Half], first_comm: i64) {
    out.extend_from_slice(&(s as u32).to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    out.extend_from_slice(&(halves.len() as u32).to_le_bytes());
    for e in events {
        out.extend_from_slice(&e.ts.to_le_bytes());
        out.extend_from_slice(&e.ty.to_le_bytes());
        out.extend_from_slice(&e.value.to_le_bytes());
    }
    for h in halves {
        out.extend_from_slice(&h.ts.to_le_bytes());
        out.extend_from_slice(&h.bytes.to_le_bytes());
        out.extend_from_slice(&h.peer.to_le_bytes());
        out.extend_from_slice(&h.tag.to_le_bytes());
        out.extend_from_slice(&(first_comm + i64::from(h.record)).to_le_bytes());
        out.push(match h.kind {
            HalfKind::Send => 0,
            HalfKind::Post => 1,
            HalfKind::Receive => 2,
        });
    }
}

/// Each stream's records and (half, record index) of a group's shard files, in file order.
type Shard = (Vec<Vec<EventRec>>, Vec<Vec<(Half, i64)>>);

/// Read back the records of shard files covering streams `first..first + n`.
fn decode_shards(paths: &[PathBuf], first: usize, n: usize) -> Result<Shard> {
    let mut events: Vec<Vec<EventRec>> = vec![Vec::new(); n];
    let mut halves: Vec<Vec<(Half, i64)>> = vec![Vec::new(); n];
    for path in paths {
        let mut data = Vec::new();
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut data)).map_err(|e| Error::io(path, e))?;
        let damaged = || Error::in_file(path, "a scratch file of the conversion is damaged");
        let mut f = Fields(&data);
        while !f.0.is_empty() {
            if f.0.len() < 12 {
                return Err(damaged());
            }
            let s = f.u32() as usize;
            let (ne, nh) = (f.u32() as usize, f.u32() as usize);
            if s < first || s >= first + n || f.0.len() < ne * EVENT_BYTES + nh * HALF_BYTES {
                return Err(damaged());
            }
            let stream = s as u32;
            let out = &mut events[s - first];
            out.reserve(ne);
            for _ in 0..ne {
                let (ts, ty, value) = (f.i64(), f.u32(), f.i64());
                out.push(EventRec { stream, ty, ts, value });
            }
            let out = &mut halves[s - first];
            out.reserve(nh);
            for _ in 0..nh {
                let (ts, bytes, peer, tag, record) = (f.i64(), f.i64(), f.u32(), f.i32(), f.i64());
                let kind = match f.take::<1>()[0] {
                    0 => HalfKind::Send,
                    1 => HalfKind::Post,
                    2 => HalfKind::Receive,
                    _ => return Err(damaged()),
                };
                out.push((Half { ts, bytes, peer, tag, record: 0, kind }, record));
            }
        }
    }
    Ok((events, halves))
}

impl crate::reading::InGroups for Pieces {
    fn shards(&self) -> Option<&Shards> {
        Some(&self.shards)
    }

    fn shards_mut(&mut self) -> Option<&mut Shards> {
        Some(&mut self.shards)
    }

    fn decode(&mut self, group: &[usize], _warnings: &mut Warnings) -> Result<(EventParts, RawMetrics)> {
        let (Some(&a), Some(&b)) = (group.first(), group.last()) else {
            return Ok((EventParts::new(Vec::new()), RawMetrics::default()));
        };
        let (first, end) = (self.bounds[a], self.bounds[b + 1]);
        let paths: Vec<PathBuf> = group.iter().map(|&k| self.scratch.shard(k)).collect();
        let (events, halves) = decode_shards(&paths, first, end - first)?;
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
        let m = &self.meaning;
        let rank = &m.streams.rank;
        let mut walked: Vec<super::StreamOut> = events
            .into_par_iter()
            .zip(halves)
            .enumerate()
            .map(|(i, (events, halves))| {
                let mut halves: Vec<MessageEvent> = halves.iter().map(|(h, r)| message_event(h, *r, rank)).collect();
                halves.sort_by_key(|h| h.ts);
                m.walk(first + i, std::iter::once(&events[..]), &halves)
            })
            .collect();
        super::number_acquisitions(m, &mut walked);
        let mut parts: Vec<RawEvents> = Vec::new();
        let mut metrics = RawMetrics::default();
        for (i, out) in walked.into_iter().enumerate() {
            self.unkept += m.gather(first + i, out, &mut parts, &mut metrics);
        }
        let fits = crate::clock::Fits::of(&self.shards.models);
        parts.par_iter_mut().for_each(|p| crate::clock::correct_events(p, &fits));
        crate::clock::correct_metrics(&mut metrics, &fits);
        Ok((EventParts::new(parts), metrics))
    }

    fn finish(&mut self, warnings: &mut Warnings) {
        self.meaning.report_unkept(&self.prv, self.unkept, warnings);
    }

    /// The states, in file order, from their scratch file.
    fn states(&mut self, _raw: &RawTrace, out: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let path = self.scratch.path().join("states");
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut names = StateNames::default();
        let mut all_names: Vec<String> = Vec::new();
        let mut left = self.states;
        let mut data = Vec::new();
        while left > 0 {
            let n = left.min(STATES_PER_BATCH as u64) as usize;
            data.resize(n * STATE_BYTES, 0);
            reader.read_exact(&mut data).map_err(|e| Error::io(&path, e))?;
            let mut f = Fields(&data);
            let recs: Vec<records::StateRec> = (0..n)
                .map(|_| records::StateRec { stream: f.u32(), begin: f.i64(), end: f.i64(), state: f.i32() })
                .collect();
            let mut states = RawStates { names: std::mem::take(&mut all_names), ..RawStates::default() };
            names.append(&recs, &self.meaning.streams, &self.pcf, &mut states);
            out(crate::deriving::assemble::states_batch(&states)?)?;
            all_names = states.names;
            left -= n as u64;
        }
        Ok(())
    }
}
