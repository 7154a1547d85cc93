//! Writing OTF2 archives (format 3.0) that the reference reader accepts: used by
//! `commdb generate --format otf2` to produce test archives of any size. Layout as read by
//! this crate's reader: an anchor, global definitions (clock properties, strings, system tree
//! with one node per host, one location group per rank, its locations, regions, the MPI
//! location and communicator groups, communicators), per location an event file (a timestamp
//! record whenever the time changes, one record per event) and a local definition file with
//! the clock offsets (each sync session condensed to one point by the clock model's rule).
//! Buffers are cut into fixed-size chunks; a chunk that is not the last is padded to its full
//! size.
//!
//! Times are written as ticks of 1 ns; the global offset is chosen so that every tick count
//! is positive (skewed local clocks can run below zero), and reading the archive back gives
//! the same nanosecond times.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::clock::model::condense;
use crate::error::{Error, Result};
use crate::events::{EventKind, NONE_I32, NONE_I64, PartStream, RawEvents};
use crate::reading::otf2::defs;
use crate::trace::{ClockSample, RawTrace, Warnings};

/// The OTF2 version an archive is written as: (major, minor). Before 1.1 a region has a type
/// instead of a role and paradigm; before 1.2 a group's type alone says it is MPI's, the anchor
/// has no properties, and OpenMP is recorded by the OpenMP records the thread records replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u8, pub u8);

impl Version {
    /// What `write` writes.
    pub const CURRENT: Version = Version(2, 3);

    /// The versions the writer knows: OTF2 1.0 to 1.5, 2.0 to 2.3 and 3.0.
    pub fn parse(text: &str) -> Option<Version> {
        let (major, minor) = text.split_once('.')?;
        let v = Version(major.parse().ok()?, minor.parse().ok()?);
        matches!(v, Version(1, 0..=5) | Version(2, 0..=3) | Version(3, 0)).then_some(v)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

const EVENT_CHUNK: usize = 1 << 20;
/// The smallest event chunk: archives of many locations use smaller chunks than EVENT_CHUNK.
const SMALLEST_EVENT_CHUNK: usize = 64 << 10;
/// What the locations' chunks being filled may hold together.
const EVENT_CHUNKS_HELD: usize = 256 << 20;

/// The event chunk size of an archive of `locations` locations: 1 MiB (as Score-P's default)
/// up to 256 locations, then smaller, a power of two down to 64 KiB, so that the chunks held
/// while writing (one per location, written when full) stay within 256 MiB up to 4,096
/// locations (a location's events are held until a chunk of them is full).
fn event_chunk(locations: usize) -> usize {
    let fit = (EVENT_CHUNKS_HELD / locations.max(1)).clamp(SMALLEST_EVENT_CHUNK, EVENT_CHUNK);
    1 << (usize::BITS - 1 - fit.leading_zeros())
}
const DEF_CHUNK: usize = 4 << 20;
const UNDEFINED: u64 = u64::MAX;
/// OTF2's paradigms of MPI and OpenMP.
const MPI: u8 = 4;
const OPENMP: u8 = 3;

/// A chunked little-endian OTF2 buffer being written.
struct Buffer {
    out: Vec<u8>,
    chunk_size: usize,
    chunk_start: usize,
    first_event: u64,
    events: u64,
    record: Vec<u8>,
}

fn compressed(v: u64, out: &mut Vec<u8>) {
    if v == UNDEFINED {
        out.push(0xFF);
        return;
    }
    let n = (8 - (v.leading_zeros() / 8) as usize).min(8);
    out.push(n as u8);
    out.extend_from_slice(&v.to_le_bytes()[..n]);
}

fn u32c(v: u32, out: &mut Vec<u8>) {
    compressed(if v == u32::MAX { UNDEFINED } else { u64::from(v) }, out);
}

impl Buffer {
    fn new(chunk_size: usize) -> Self {
        let mut b =
            Buffer { out: Vec::new(), chunk_size, chunk_start: 0, first_event: 1, events: 0, record: Vec::new() };
        b.header();
        b
    }

    fn header(&mut self) {
        self.chunk_start = self.out.len();
        self.out.extend_from_slice(&[0x03, 0x42]);
        self.out.extend_from_slice(&[0; 16]);
    }

    fn patch_header(&mut self) {
        let first = self.first_event.to_le_bytes();
        let last = (self.first_event + self.events).saturating_sub(1).to_le_bytes();
        self.out[self.chunk_start + 2..self.chunk_start + 10].copy_from_slice(&first);
        self.out[self.chunk_start + 10..self.chunk_start + 18].copy_from_slice(&last);
    }

    /// Make room for `n` bytes (+ the end-of-chunk byte); true when a new chunk was started.
    fn reserve(&mut self, n: usize) -> bool {
        if self.out.len() + n < self.chunk_start + self.chunk_size {
            return false;
        }
        self.patch_header();
        self.out.push(0x00);
        self.out.resize(self.chunk_start + self.chunk_size, 0);
        self.first_event += self.events;
        self.events = 0;
        self.header();
        true
    }

    /// Append a record with a length (the fields are in `self.record`).
    fn with_length(&mut self, t: u8, counts_as_event: bool) {
        let len = self.record.len();
        let size = 2 + len + if len >= 255 { 8 } else { 0 };
        self.reserve(size);
        self.out.push(t);
        if len >= 255 {
            self.out.push(0xFF);
            self.out.extend_from_slice(&(len as u64).to_le_bytes());
        } else {
            self.out.push(len as u8);
        }
        self.out.extend_from_slice(&self.record);
        self.record.clear();
        if counts_as_event {
            self.events += 1;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.patch_header();
        self.out.push(0x02);
        self.out
    }
}

struct Strings {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.ids.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }
}

/// OTF2's code of a paradigm as the reader names it ([`crate::reading::otf2::paradigm_name`]);
/// 0 (unknown) for a name it does not give.
fn paradigm_code(name: &str) -> u8 {
    (0..=u8::MAX).find(|&p| crate::reading::otf2::paradigm_name(p) == name).unwrap_or(0)
}

/// OTF2's code of a region role as the reader names it ([`crate::reading::otf2::role_name`]); 0
/// (unknown) for none or a name it does not give.
fn role_code(name: Option<&str>) -> u8 {
    name.and_then(|n| (0..=u8::MAX).find(|&r| crate::reading::otf2::role_name(r) == Some(n))).unwrap_or(0)
}

fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(data).map_err(|e| Error::io(path, e))
}

/// Write `trace` as an OTF2 archive `dir/traces.otf2` (+ `traces.def`, `traces/`).
pub fn write(trace: &RawTrace, dir: &Path) -> Result<()> {
    write_as(trace, dir, Version::CURRENT)
}

/// Write `trace` as an archive of OTF2 `version`, in the forms that version has.
pub fn write_as(trace: &RawTrace, dir: &Path, version: Version) -> Result<()> {
    let mut files = EventFiles::create(trace, dir, trace.events.time_span().0)?;
    files.version = version;
    files.append(&trace.events.parts)?;
    files.finish(trace)
}

/// Generate the trace `cfg` describes as an OTF2 archive of `version` at `dir` without holding
/// its events: they are written to the location files every `flush_events` events. Returns the
/// ground truth.
pub fn write_generated(
    cfg: &crate::generate::GeneratorConfig,
    dir: &Path,
    flush_events: usize,
    version: Version,
) -> Result<crate::generate::GroundTruth> {
    let (skeleton, earliest) = crate::generate::skeleton(cfg)?;
    let mut files = EventFiles::create(&skeleton, dir, earliest)?;
    files.version = version;
    let generated = crate::generate::generate_streamed(cfg, flush_events, &mut |bufs| files.append(bufs))?;
    files.finish(&generated.trace)?;
    Ok(generated.truth)
}

/// The event file of one location being written: the chunk being filled is kept, the chunks
/// before it are in the file.
struct Encoder {
    b: Buffer,
    last_time: Option<u64>,
    written: u64,
    path: PathBuf,
    /// Whether the file was created.
    created: bool,
}

impl Encoder {
    /// Append the full chunks to the file.
    fn drain(&mut self) -> Result<()> {
        let done = self.b.chunk_start;
        if done > 0 {
            self.write(done)?;
            self.b.out.drain(..done);
            self.b.chunk_start = 0;
        }
        Ok(())
    }

    fn write(&mut self, n: usize) -> Result<()> {
        let path = &self.path;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.created)
            .truncate(!self.created)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        f.write_all(&self.b.out[..n]).map_err(|e| Error::io(path, e))?;
        self.created = true;
        Ok(())
    }

    /// Close the last chunk and write it.
    fn finish(&mut self) -> Result<()> {
        let chunk = self.b.chunk_size;
        let b = std::mem::replace(&mut self.b, Buffer::new(chunk));
        self.b.out = b.finish();
        self.b.chunk_start = 0;
        self.write(self.b.out.len())
    }
}

/// An archive's event files written a batch of events at a time (`append`), each location's
/// full chunks going to its file as soon as they are full, then its definitions (`finish`):
/// `commdb generate` writes archives of any size this way without holding their events. The
/// earliest event time must be known at the start, as it sets the global offset.
pub struct EventFiles {
    dir: PathBuf,
    min_ts: i64,
    max_ts: Option<i64>,
    /// Location id of each (rank, thread) stream.
    location_of: BTreeMap<(i32, i32), u64>,
    /// World rank -> comm rank of every communicator.
    comm_rank: HashMap<i32, HashMap<i32, u32>>,
    /// One per entry of `location_of`, in its order.
    encoders: Vec<Encoder>,
    version: Version,
    /// The members of every OpenMP thread team, from the team begins appended: its
    /// communicator is written over OpenMP's locations, as Score-P writes a team.
    teams: BTreeMap<i32, std::collections::BTreeSet<(i32, i32)>>,
    /// The communicators MPI records name: never written as a team.
    mpi_comms: std::collections::BTreeSet<i32>,
    /// The RMA windows of the RMA records appended.
    windows: Windows,
    /// Whether an enter or leave names an accelerator stream or device event: the archive then
    /// defines the attributes Score-P writes them as (`STREAM_REF`, `EVENT_REF`).
    references: bool,
}

/// The attributes an enter or leave's stream and device event are written as, by id, with
/// OTF2's type of their values (LOCATION, UINT64), as Score-P writes them for CUDA.
const STREAM_REF: (u32, &str, u8) = (0, "CUDA_STREAM_REF", 13);
const EVENT_REF: (u32, &str, u8) = (1, "CUDA_EVENT_REF", 4);

/// The RMA windows of the records written: one per communicator the records name (an
/// accelerator's transfers name the group of its host thread and streams), numbered as they
/// first appear, each with its members as (rank, thread) in the order they first appear (a
/// put or get's remote end, then the record's own location); a record's remote end is written
/// as its index there. The windows' groups are written over one group of all their locations.
#[derive(Debug, Default)]
struct Windows {
    by_comm: BTreeMap<i32, Window>,
}

#[derive(Debug, Default)]
struct Window {
    id: u32,
    members: Vec<(i32, i32)>,
    index: HashMap<(i32, i32), u32>,
}

impl Window {
    fn add(&mut self, member: (i32, i32)) {
        if !self.index.contains_key(&member) {
            self.index.insert(member, self.members.len() as u32);
            self.members.push(member);
        }
    }
}

impl Windows {
    /// Take in RMA record `i` of `part` (its communicator known).
    fn see(&mut self, part: &RawEvents, i: usize) {
        let kind = part.kind[i];
        let next = self.by_comm.len() as u32;
        let w = self.by_comm.entry(part.comm[i]).or_insert_with(|| Window { id: next, ..Window::default() });
        if (kind == EventKind::RmaPut as u8 || kind == EventKind::RmaGet as u8) && part.peer[i] != NONE_I32 {
            w.add((part.peer[i], part.tag[i]));
        }
        w.add((part.rank[i], part.thread[i]));
    }

    /// The window of communicator `comm` and the index of `member` in it.
    fn at(&self, comm: i32, member: (i32, i32)) -> (u32, u32) {
        match self.by_comm.get(&comm) {
            Some(w) => (w.id, w.index.get(&member).copied().unwrap_or(u32::MAX)),
            None => (u32::MAX, u32::MAX),
        }
    }
}

impl std::fmt::Debug for EventFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFiles").field("dir", &self.dir).field("locations", &self.encoders.len()).finish()
    }
}

impl EventFiles {
    /// Start the archive at `dir` for the locations of `trace` and the streams of its events;
    /// no event is earlier than `min_ts` (ns).
    pub fn create(trace: &RawTrace, dir: &Path, min_ts: i64) -> Result<Self> {
        let traces = dir.join("traces");
        std::fs::create_dir_all(&traces).map_err(|e| Error::io(&traces, e))?;
        // Locations: one per (rank, thread) stream, ids in stream order.
        let streams: Vec<PartStream> = trace.events.streams();
        let mut location_of: BTreeMap<(i32, i32), u64> = BTreeMap::new();
        for l in &trace.locations {
            location_of.insert((l.rank, l.thread), l.location_id.max(0) as u64);
        }
        for ps in &streams {
            let next = location_of.values().max().map_or(0, |m| m + 1);
            location_of.entry((ps.stream.rank, ps.stream.thread)).or_insert(next);
        }
        // World rank -> comm rank of every communicator; on a per-rank communicator (COMM_SELF)
        // the rank itself is rank 0.
        let comm_rank: HashMap<i32, HashMap<i32, u32>> = trace
            .communicators
            .iter()
            .map(|c| {
                let ranks: HashMap<i32, u32> = if c.per_rank {
                    trace.ranks.iter().map(|r| (r.rank, 0)).collect()
                } else {
                    c.members.iter().enumerate().map(|(i, w)| (*w, i as u32)).collect()
                };
                (c.comm, ranks)
            })
            .collect();
        let chunk = event_chunk(location_of.len());
        let encoders = location_of
            .values()
            .map(|loc| Encoder {
                b: Buffer::new(chunk),
                last_time: None,
                written: 0,
                path: traces.join(format!("{loc}.evt")),
                created: false,
            })
            .collect();
        Ok(EventFiles {
            dir: dir.to_path_buf(),
            min_ts: min_ts.min(0),
            max_ts: None,
            location_of,
            comm_rank,
            encoders,
            version: Version::CURRENT,
            teams: BTreeMap::new(),
            mpi_comms: std::collections::BTreeSet::new(),
            windows: Windows::default(),
            references: false,
        })
    }

    /// Ticks of a time: the global offset makes every tick count positive.
    fn offset(&self) -> u64 {
        self.min_ts.unsigned_abs()
    }

    /// Append events (whole streams per part, each stream's events in time order after those
    /// appended before for it).
    pub fn append(&mut self, parts: &[RawEvents]) -> Result<()> {
        let position: HashMap<(i32, i32), usize> = self.location_of.keys().enumerate().map(|(i, k)| (*k, i)).collect();
        let (enter, leave) = (EventKind::Enter as u8, EventKind::Leave as u8);
        for part in parts {
            for (i, &kind) in part.kind.iter().enumerate() {
                if kind == enter || kind == leave {
                    self.references |= part.peer[i] != NONE_I32 || part.request[i] != NONE_I64;
                    continue;
                }
                if part.comm[i] == NONE_I32 {
                    continue;
                }
                if kind == EventKind::ThreadTeamBegin as u8 {
                    self.teams.entry(part.comm[i]).or_default().insert((part.rank[i], part.thread[i]));
                } else if kind < EventKind::ThreadFork as u8 {
                    self.mpi_comms.insert(part.comm[i]);
                } else if kind >= EventKind::RmaWinCreate as u8 {
                    self.windows.see(part, i);
                }
            }
        }
        let mut work: Vec<Vec<(usize, crate::events::Stream)>> = vec![Vec::new(); self.encoders.len()];
        let mut earliest = i64::MAX;
        for (p, part) in parts.iter().enumerate() {
            for s in part.streams() {
                let Some(&k) = position.get(&(s.rank, s.thread)) else {
                    return Err(Error::Engine(format!(
                        "events of rank {} thread {} but no location for them in the archive being written",
                        s.rank, s.thread
                    )));
                };
                work[k].push((p, s));
            }
            let span = part.ts.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
            earliest = earliest.min(span.0);
            if !part.is_empty() {
                self.max_ts = Some(self.max_ts.map_or(span.1, |m| m.max(span.1)));
            }
        }
        if earliest < self.min_ts {
            return Err(Error::Engine(format!(
                "an event at {earliest} ns is earlier than the archive's start ({} ns)",
                self.min_ts
            )));
        }
        let offset = self.offset();
        let ticks = |ns: i64| (ns as i128 + i128::from(offset)) as u64;
        let (comm_rank, version, windows) = (&self.comm_rank, self.version, &self.windows);
        let location_of = &self.location_of;
        self.encoders.par_iter_mut().zip(work).try_for_each(|(enc, jobs)| {
            for (p, s) in jobs {
                encode_events(enc, &parts[p], &s, &Ids { comm_rank, windows, location_of }, &ticks, version)?;
            }
            enc.drain()
        })
    }

    /// Close every event file, then write the local and global definitions of `trace` (whose
    /// events, if any, were appended) and the anchor.
    pub fn finish(mut self, trace: &RawTrace) -> Result<()> {
        self.encoders.par_iter_mut().try_for_each(Encoder::finish)?;
        let counts: HashMap<u64, u64> =
            self.location_of.values().zip(&self.encoders).map(|(loc, e)| (*loc, e.written)).collect();
        let (min_ts, max_ts) = (self.min_ts, self.max_ts.unwrap_or(0));
        let offset = self.offset();
        let ticks = |ns: i64| (ns as i128 + i128::from(offset)) as u64;
        let location_of = self.location_of;
        let dir = self.dir.as_path();
        let traces = dir.join("traces");

        // Local definitions: clock offsets per rank (first location of the rank), each sync
        // session condensed by the clock model's rule (longest tenth of round trips dropped).
        let mut sessions: BTreeMap<(i32, i32), Vec<ClockSample>> = BTreeMap::new();
        for s in &trace.clock_sync {
            sessions.entry((s.rank, s.session)).or_default().push(*s);
        }
        let mut invalid = Warnings::default();
        for (&(rank, thread), &loc) in &location_of {
            let mut b = Buffer::new(DEF_CHUNK);
            if thread == 0 {
                for ((_, session), samples) in sessions.range((rank, i32::MIN)..=(rank, i32::MAX)) {
                    let Some(kept) = condense(*session, samples, &mut invalid) else { continue };
                    let (local, master) = kept.point();
                    b.record.extend_from_slice(&ticks(local.round() as i64).to_le_bytes());
                    compressed((master - local).round() as i64 as u64, &mut b.record);
                    b.record.extend_from_slice(&kept.offset_std_dev().to_le_bytes());
                    b.with_length(6, false);
                }
            }
            if let Some((_, _, example)) = invalid.iter().next() {
                return Err(Error::argument(format!("cannot write the clock offsets: {example}")));
            }
            write_file(&traces.join(format!("{loc}.def")), &b.finish())?;
        }

        // Global definitions.
        let mut strings = Strings { ids: HashMap::new(), list: Vec::new() };
        strings.id("");
        let mut g = Buffer::new(DEF_CHUNK);
        let mut defs_written = 0u64;
        let mut emit = |g: &mut Buffer, t: u8| {
            g.with_length(t, false);
            defs_written += 1;
        };
        compressed(1_000_000_000, &mut g.record);
        compressed(offset, &mut g.record);
        compressed((max_ts - min_ts).max(0) as u64, &mut g.record);
        // The realtime timestamp is the wall-clock time of the global offset, i.e. of ts = 0.
        compressed(
            trace.meta.start_wallclock_ns.and_then(|w| u64::try_from(w).ok()).unwrap_or(UNDEFINED),
            &mut g.record,
        );
        emit(&mut g, 5);
        // Collect string ids first, then write strings before the records that use them.
        let root_name = strings.id("cluster");
        let machine = strings.id("machine");
        let node_class = strings.id("node");
        let mut nodes: Vec<String> = Vec::new();
        for r in &trace.ranks {
            let n = r.node.clone().unwrap_or_else(|| "unknown".into());
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        let node_ids: Vec<u32> = nodes.iter().map(|n| strings.id(n)).collect();
        let rank_names: Vec<u32> = trace.ranks.iter().map(|r| strings.id(&r.name)).collect();
        let loc_names: Vec<u32> = trace.locations.iter().map(|l| strings.id(&l.name)).collect();
        let region_names: Vec<(u32, u32)> = trace
            .regions
            .iter()
            .map(|r| {
                // Score-P names "MPI" as the source file of MPI's regions, and tools such as
                // Scalasca know an MPI call by it (without it MPI_Init is no synchronisation point
                // and no receive a late sender's).
                let file = r.file.as_deref().or((r.paradigm == "mpi").then_some("MPI"));
                (strings.id(&r.name), file.map_or(u32::MAX, |f| strings.id(f)))
            })
            .collect();
        let comm_names: Vec<u32> = trace.communicators.iter().map(|c| strings.id(&c.name)).collect();
        let locations_group_name = strings.id("MPI_COMM_WORLD locations");
        let openmp_group_name = strings.id("OpenMP locations");
        let windows = std::mem::take(&mut self.windows);
        let references: Vec<(u32, u32, u8, u32)> = if self.references {
            [(STREAM_REF, "Referenced CUDA stream"), (EVENT_REF, "ID (address) of referenced CUDA event")]
                .iter()
                .map(|((id, name, ty), description)| (*id, strings.id(name), *ty, strings.id(description)))
                .collect()
        } else {
            Vec::new()
        };
        let accelerator_group_name = strings.id("accelerator locations");
        let window_names: Vec<u32> =
            windows.by_comm.values().map(|w| strings.id(&format!("RMA window {}", w.id))).collect();
        for (i, s) in strings.list.iter().enumerate() {
            u32c(i as u32, &mut g.record);
            g.record.extend_from_slice(s.as_bytes());
            g.record.push(0);
            emit(&mut g, 10);
        }
        // System tree: root, then one node per host.
        for (id, name, class, parent) in std::iter::once((0u32, root_name, machine, u32::MAX))
            .chain(node_ids.iter().enumerate().map(|(i, n)| (i as u32 + 1, *n, node_class, 0)))
        {
            u32c(id, &mut g.record);
            u32c(name, &mut g.record);
            u32c(class, &mut g.record);
            u32c(parent, &mut g.record);
            emit(&mut g, 12);
        }
        let group_of_rank: HashMap<i32, u32> =
            trace.ranks.iter().enumerate().map(|(i, r)| (r.rank, i as u32)).collect();
        for (i, r) in trace.ranks.iter().enumerate() {
            let node = r.node.clone().unwrap_or_else(|| "unknown".into());
            let parent = nodes.iter().position(|n| *n == node).map_or(0, |p| p as u32 + 1);
            u32c(i as u32, &mut g.record);
            u32c(rank_names[i], &mut g.record);
            g.record.push(1);
            u32c(parent, &mut g.record);
            u32c(u32::MAX, &mut g.record);
            emit(&mut g, 13);
        }
        for (i, l) in trace.locations.iter().enumerate() {
            let id = location_of[&(l.rank, l.thread)];
            compressed(id, &mut g.record);
            u32c(loc_names[i], &mut g.record);
            g.record.push(match l.kind.as_str() {
                "gpu" => 2,
                "metric" => 3,
                _ => 1,
            });
            compressed(counts.get(&id).copied().unwrap_or(0), &mut g.record);
            u32c(group_of_rank.get(&l.rank).copied().unwrap_or(u32::MAX), &mut g.record);
            emit(&mut g, 14);
        }
        for (i, r) in trace.regions.iter().enumerate() {
            let (name, file) = region_names[i];
            let (role, paradigm) = (role_code(r.role.as_deref()), paradigm_code(&r.paradigm));
            let before_1_1 = self.version < Version(1, 1);
            u32c(i as u32, &mut g.record);
            u32c(name, &mut g.record);
            u32c(0, &mut g.record);
            g.record.push(if before_1_1 { crate::reading::otf2::older::region_type_of(role, paradigm) } else { 0 });
            u32c(file, &mut g.record);
            u32c(r.line.map_or(0, |l| l as u32), &mut g.record);
            u32c(0, &mut g.record);
            if !before_1_1 {
                u32c(name, &mut g.record);
                g.record.push(role);
                g.record.push(paradigm);
                u32c(0, &mut g.record);
            }
            emit(&mut g, 15);
        }
        // Group 0: the MPI locations (thread 0 of every rank) in rank order; then one
        // communicator group per communicator, whose members index group 0.
        let mut ranks_sorted: Vec<i32> = trace.ranks.iter().map(|r| r.rank).collect();
        ranks_sorted.sort_unstable();
        let world_locations: Vec<u64> =
            ranks_sorted.iter().filter_map(|r| location_of.get(&(*r, 0)).copied()).collect();
        let index_of_rank: HashMap<i32, u64> = ranks_sorted.iter().enumerate().map(|(i, r)| (*r, i as u64)).collect();
        let before_1_2 = self.version < Version(1, 2);
        let mut write_group = |g: &mut Buffer, id: u32, name: u32, kind: u8, paradigm: u8, members: &[u64]| {
            u32c(id, &mut g.record);
            u32c(name, &mut g.record);
            g.record.push(if before_1_2 { crate::reading::otf2::older::group_type_of_mpi(kind) } else { 0 });
            u32c(members.len() as u32, &mut g.record);
            for &m in members {
                compressed(m, &mut g.record);
            }
            if !before_1_2 {
                g.record.push(kind);
                g.record.push(paradigm);
                u32c(0, &mut g.record);
            }
            emit(g, 18);
        };
        write_group(&mut g, 0, locations_group_name, defs::GROUP_COMM_LOCATIONS, MPI, &world_locations);
        // OpenMP's locations (every member of a team), and each team over them (OTF2 1.2 on;
        // before, thread records name no team).
        let mpi_comms = self.mpi_comms;
        let mut teams = if before_1_2 { BTreeMap::new() } else { self.teams };
        teams.retain(|comm, _| !mpi_comms.contains(comm));
        let openmp: Vec<(i32, i32)> =
            teams.values().flatten().copied().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        // Group ids: 0 the MPI locations, 1 OpenMP's when there are teams, then the RMA
        // windows' locations when there are windows, then one per communicator (a team's
        // group refers to OpenMP's, a window's to the windows' locations, which must come
        // before it).
        let mut first = 1;
        if !openmp.is_empty() {
            let locations: Vec<u64> = openmp.iter().filter_map(|k| location_of.get(k).copied()).collect();
            write_group(&mut g, first, openmp_group_name, defs::GROUP_COMM_LOCATIONS, OPENMP, &locations);
            first += 1;
        }
        let accelerated: Vec<(i32, i32)> = windows
            .by_comm
            .values()
            .flat_map(|w| w.members.iter().copied())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let cuda = paradigm_code("cuda");
        if !accelerated.is_empty() {
            let locations: Vec<u64> = accelerated.iter().filter_map(|k| location_of.get(k).copied()).collect();
            write_group(&mut g, first, accelerator_group_name, defs::GROUP_COMM_LOCATIONS, cuda, &locations);
            first += 1;
        }
        for (i, c) in trace.communicators.iter().enumerate() {
            if let Some(w) = windows.by_comm.get(&c.comm) {
                let members: Vec<u64> =
                    w.members.iter().filter_map(|k| accelerated.binary_search(k).ok().map(|x| x as u64)).collect();
                write_group(&mut g, i as u32 + first, comm_names[i], defs::GROUP_COMM_GROUP, cuda, &members);
                continue;
            }
            if let Some(team) = teams.get(&c.comm) {
                let members: Vec<u64> =
                    team.iter().filter_map(|k| openmp.binary_search(k).ok().map(|x| x as u64)).collect();
                write_group(&mut g, i as u32 + first, comm_names[i], defs::GROUP_COMM_GROUP, OPENMP, &members);
                continue;
            }
            let members: Vec<u64> = c.members.iter().filter_map(|r| index_of_rank.get(r).copied()).collect();
            let kind = if c.per_rank { defs::GROUP_COMM_SELF } else { defs::GROUP_COMM_GROUP };
            write_group(&mut g, i as u32 + first, comm_names[i], kind, MPI, &members);
        }
        for (i, c) in trace.communicators.iter().enumerate() {
            u32c(c.comm.max(0) as u32, &mut g.record);
            u32c(comm_names[i], &mut g.record);
            u32c(i as u32 + first, &mut g.record);
            u32c(u32::MAX, &mut g.record);
            u32c(0, &mut g.record);
            emit(&mut g, 22);
        }
        for &(id, name, ty, description) in &references {
            u32c(id, &mut g.record);
            u32c(name, &mut g.record);
            g.record.push(ty);
            // The description came with OTF2 1.4.
            if self.version >= Version(1, 4) {
                u32c(description, &mut g.record);
            }
            emit(&mut g, 11);
        }
        for (w, name) in windows.by_comm.iter().zip(window_names) {
            u32c(w.1.id, &mut g.record);
            u32c(name, &mut g.record);
            u32c((*w.0).max(0) as u32, &mut g.record);
            emit(&mut g, 24);
        }
        write_file(&dir.join("traces.def"), &g.finish())?;
        let anchor = dir.join("traces.otf2");
        let chunk = event_chunk(location_of.len());
        let anchor_of = Anchor { locations: location_of.len() as u64, definitions: defs_written, chunk };
        write_anchor(&anchor, &anchor_of, trace.meta.creator.as_deref(), self.version)
    }
}

/// What the anchor file says of the archive.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    locations: u64,
    definitions: u64,
    /// The event chunk size.
    chunk: usize,
}

fn write_anchor(path: &Path, archive: &Anchor, creator: Option<&str>, version: Version) -> Result<()> {
    let Anchor { locations, definitions, chunk } = *archive;
    let mut a = vec![0x03, 0x42];
    a.extend_from_slice(b"OTF2\0");
    // Anchor format 1 has no properties and no trace id.
    let anchor_format = if version < Version(1, 2) { 1 } else { 3 };
    a.extend_from_slice(&[anchor_format, 2, version.0, version.1, 0]);
    a.extend_from_slice(&(chunk as u64).to_le_bytes());
    a.extend_from_slice(&(DEF_CHUNK as u64).to_le_bytes());
    a.extend_from_slice(&[1, 1]);
    a.extend_from_slice(&locations.to_le_bytes());
    a.extend_from_slice(&definitions.to_le_bytes());
    a.push(0);
    a.extend_from_slice(creator.unwrap_or("commdb").as_bytes());
    a.push(0);
    a.push(0);
    if anchor_format > 1 {
        a.extend_from_slice(&0u32.to_le_bytes());
        a.extend_from_slice(&0x636f_6d6d_6462_0001u64.to_le_bytes());
        a.extend_from_slice(&0u32.to_le_bytes());
        a.extend_from_slice(&0u32.to_le_bytes());
        a.extend_from_slice(&[0x02, 0x01, 0x00]);
    }
    write_file(path, &a)
}

/// Encode the events of one stream into its location's file.
/// How the records of the events name what the definitions define: world rank -> comm rank of
/// every communicator, the RMA windows, the location id of every (rank, thread).
struct Ids<'a> {
    comm_rank: &'a HashMap<i32, HashMap<i32, u32>>,
    windows: &'a Windows,
    location_of: &'a BTreeMap<(i32, i32), u64>,
}

fn encode_events(
    enc: &mut Encoder,
    e: &RawEvents,
    s: &crate::events::Stream,
    ids: &Ids<'_>,
    ticks: &impl Fn(i64) -> u64,
    version: Version,
) -> Result<()> {
    // Before OTF2 1.2, OpenMP's own records: fork, join, locks, and tasks by id.
    let omp_records = version < Version(1, 2);
    let Encoder { b, last_time, written, .. } = enc;
    let Ids { comm_rank, windows, location_of } = *ids;
    let peer_rank = |comm: i32, peer: i32| -> u32 {
        if peer == NONE_I32 {
            return u32::MAX;
        }
        comm_rank.get(&comm).and_then(|m| m.get(&peer)).copied().unwrap_or(peer as u32)
    };
    let opt = |v: i64| if v == NONE_I64 { UNDEFINED } else { v as u64 };
    for i in s.start..s.end {
        let kind = e.kind(i);
        let (t, singleton) = match kind {
            EventKind::Enter => (12, true),
            EventKind::Leave => (13, true),
            EventKind::Send => (14, false),
            EventKind::Isend => (15, false),
            EventKind::IsendComplete => (16, true),
            EventKind::IrecvRequest => (17, true),
            EventKind::Recv => (18, false),
            EventKind::Irecv => (19, false),
            EventKind::RequestTest => (20, true),
            EventKind::RequestCancelled => (21, true),
            EventKind::CollBegin => (22, false),
            EventKind::CollEnd => (23, false),
            EventKind::MeasurementOn | EventKind::MeasurementOff => (11, false),
            EventKind::BufferFlush => (10, false),
            EventKind::ProgramBegin => (83, false),
            EventKind::ProgramEnd => (84, false),
            EventKind::ThreadFork if omp_records => (24, true),
            EventKind::ThreadJoin if omp_records => (25, false),
            EventKind::ThreadAcquireLock if omp_records => (26, false),
            EventKind::ThreadReleaseLock if omp_records => (27, false),
            EventKind::ThreadTaskCreate if omp_records => (28, true),
            EventKind::ThreadTaskSwitch if omp_records => (29, true),
            EventKind::ThreadTaskComplete if omp_records => (30, true),
            EventKind::ThreadTeamBegin
            | EventKind::ThreadTeamEnd
            | EventKind::ThreadCreate
            | EventKind::ThreadBegin
            | EventKind::ThreadWait
            | EventKind::ThreadEnd
                if omp_records =>
            {
                return Err(Error::Engine(format!(
                    "OTF2 {version} has no record for {} events (thread records came with OTF2 1.2)",
                    kind.name()
                )));
            }
            EventKind::ThreadFork => (53, false),
            EventKind::ThreadJoin => (54, false),
            EventKind::ThreadTeamBegin => (55, false),
            EventKind::ThreadTeamEnd => (56, false),
            EventKind::ThreadAcquireLock => (57, false),
            EventKind::ThreadReleaseLock => (58, false),
            // A task without a team is OTF2 1.x's: its OmpTask record names it by id.
            EventKind::ThreadTaskCreate if e.comm[i] == NONE_I32 => (28, true),
            EventKind::ThreadTaskSwitch if e.comm[i] == NONE_I32 => (29, true),
            EventKind::ThreadTaskComplete if e.comm[i] == NONE_I32 => (30, true),
            EventKind::ThreadTaskCreate => (59, false),
            EventKind::ThreadTaskSwitch => (60, false),
            EventKind::ThreadTaskComplete => (61, false),
            EventKind::ThreadCreate => (62, false),
            EventKind::ThreadBegin => (63, false),
            EventKind::ThreadWait => (64, false),
            EventKind::ThreadEnd => (65, false),
            EventKind::Other => continue,
            EventKind::RmaWinCreate
            | EventKind::RmaWinDestroy
            | EventKind::RmaPut
            | EventKind::RmaGet
            | EventKind::RmaOpCompleteBlocking
            | EventKind::RmaOpCompleteNonBlocking
            | EventKind::RmaOpTest
            | EventKind::RmaOpCompleteRemote
                if version < Version(1, 2) =>
            {
                return Err(Error::Engine(format!(
                    "OTF2 {version} has no record for {} events (RMA records came with OTF2 1.2)",
                    kind.name()
                )));
            }
            EventKind::RmaWinCreate => (35, false),
            EventKind::RmaWinDestroy => (36, false),
            EventKind::RmaPut => (46, false),
            EventKind::RmaGet => (47, false),
            EventKind::RmaOpCompleteBlocking => (49, false),
            EventKind::RmaOpCompleteNonBlocking => (50, false),
            EventKind::RmaOpTest => (51, false),
            EventKind::RmaOpCompleteRemote => (52, false),
        };
        let opt32 = |v: i32| if v == NONE_I32 { u32::MAX } else { v as u32 };
        let now = ticks(e.ts[i]);
        match kind {
            EventKind::Enter | EventKind::Leave => u32c(e.region[i].max(0) as u32, &mut b.record),
            EventKind::Send | EventKind::Isend | EventKind::Recv | EventKind::Irecv => {
                u32c(peer_rank(e.comm[i], e.peer[i]), &mut b.record);
                u32c(e.comm[i].max(0) as u32, &mut b.record);
                u32c(e.tag[i] as u32, &mut b.record);
                compressed(opt(e.bytes[i]), &mut b.record);
                if matches!(kind, EventKind::Isend | EventKind::Irecv) {
                    compressed(opt(e.request[i]), &mut b.record);
                }
            }
            EventKind::IsendComplete
            | EventKind::IrecvRequest
            | EventKind::RequestTest
            | EventKind::RequestCancelled => {
                compressed(opt(e.request[i]), &mut b.record);
            }
            EventKind::CollEnd => {
                b.record.push(e.op[i].saturating_sub(1));
                u32c(e.comm[i].max(0) as u32, &mut b.record);
                u32c(peer_rank(e.comm[i], e.peer[i]), &mut b.record);
                compressed(opt(e.bytes[i]), &mut b.record);
                compressed(opt(e.bytes_recv[i]), &mut b.record);
            }
            EventKind::MeasurementOn => b.record.push(1),
            EventKind::MeasurementOff => b.record.push(2),
            EventKind::BufferFlush => b.record.extend_from_slice(&now.to_le_bytes()),
            EventKind::ProgramBegin => {
                u32c(0, &mut b.record);
                u32c(0, &mut b.record);
            }
            EventKind::ProgramEnd => compressed(0, &mut b.record),
            // The paradigm of fork, join and locks is not kept: OpenMP's is written.
            EventKind::ThreadFork => {
                if !omp_records {
                    b.record.push(3);
                }
                u32c(opt32(e.tag[i]), &mut b.record);
            }
            EventKind::ThreadJoin if !omp_records => b.record.push(3),
            EventKind::ThreadTeamBegin | EventKind::ThreadTeamEnd => u32c(opt32(e.comm[i]), &mut b.record),
            EventKind::RmaWinCreate | EventKind::RmaWinDestroy => {
                u32c(windows.at(e.comm[i], (e.rank[i], e.thread[i])).0, &mut b.record);
            }
            EventKind::RmaPut | EventKind::RmaGet => {
                let (win, remote) = windows.at(e.comm[i], (e.peer[i], e.tag[i]));
                u32c(win, &mut b.record);
                u32c(if e.peer[i] == NONE_I32 { u32::MAX } else { remote }, &mut b.record);
                compressed(opt(e.bytes[i]), &mut b.record);
                compressed(opt(e.request[i]), &mut b.record);
            }
            EventKind::RmaOpCompleteBlocking
            | EventKind::RmaOpCompleteNonBlocking
            | EventKind::RmaOpTest
            | EventKind::RmaOpCompleteRemote => {
                u32c(windows.at(e.comm[i], (e.rank[i], e.thread[i])).0, &mut b.record);
                compressed(opt(e.request[i]), &mut b.record);
            }
            EventKind::ThreadAcquireLock | EventKind::ThreadReleaseLock => {
                if !omp_records {
                    b.record.push(3);
                }
                u32c(opt(e.request[i]) as u32, &mut b.record);
                u32c(opt32(e.tag[i]), &mut b.record);
            }
            EventKind::ThreadTaskCreate | EventKind::ThreadTaskSwitch | EventKind::ThreadTaskComplete => {
                if omp_records || e.comm[i] == NONE_I32 {
                    compressed(opt(e.request[i]), &mut b.record);
                } else {
                    u32c(opt32(e.comm[i]), &mut b.record);
                    u32c(opt32(e.peer[i]), &mut b.record);
                    u32c(opt32(e.tag[i]), &mut b.record);
                }
            }
            EventKind::ThreadCreate | EventKind::ThreadBegin | EventKind::ThreadWait | EventKind::ThreadEnd => {
                u32c(opt32(e.comm[i]), &mut b.record);
                compressed(opt(e.request[i]), &mut b.record);
            }
            _ => {}
        }
        // An enter or leave's accelerator stream and device event: an attribute list before it.
        let mut attributes: Vec<u8> = Vec::new();
        if matches!(kind, EventKind::Enter | EventKind::Leave) {
            let stream = (e.peer[i] != NONE_I32).then(|| location_of.get(&(e.peer[i], e.tag[i]))).flatten();
            let event = (e.request[i] != NONE_I64).then_some(e.request[i]);
            let n = u32::from(stream.is_some()) + u32::from(event.is_some());
            if n > 0 {
                u32c(n, &mut attributes);
                if let Some(&loc) = stream {
                    u32c(STREAM_REF.0, &mut attributes);
                    attributes.push(STREAM_REF.2);
                    compressed(loc, &mut attributes);
                }
                if let Some(ev) = event {
                    u32c(EVENT_REF.0, &mut attributes);
                    attributes.push(EVENT_REF.2);
                    compressed(ev as u64, &mut attributes);
                }
            }
        }
        // Timestamp + attributes + record must share a chunk; a new chunk restarts with a
        // timestamp.
        let need = 9 + 2 + b.record.len() + 9 + attributes.len() + 10;
        if b.reserve(need) || *last_time != Some(now) {
            b.out.push(0x05);
            b.out.extend_from_slice(&now.to_le_bytes());
            *last_time = Some(now);
        }
        if !attributes.is_empty() {
            let record = std::mem::replace(&mut b.record, attributes);
            b.with_length(6, false);
            b.record = record;
        }
        if singleton {
            b.out.push(t);
            b.out.extend_from_slice(&b.record);
            b.record.clear();
            b.events += 1;
        } else {
            b.with_length(t, true);
        }
        *written += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_of_many_locations_write_smaller_chunks() {
        assert_eq!(event_chunk(1), 1 << 20);
        assert_eq!(event_chunk(256), 1 << 20);
        assert_eq!(event_chunk(257), 512 << 10);
        assert_eq!(event_chunk(1024), 256 << 10);
        assert_eq!(event_chunk(3000), 64 << 10);
        assert_eq!(event_chunk(8192), 64 << 10);
        for n in [1, 100, 300, 1000, 5000, 1 << 20] {
            let c = event_chunk(n);
            assert!(c.is_power_of_two() && (SMALLEST_EVENT_CHUNK..=EVENT_CHUNK).contains(&c), "{n}: {c}");
        }
    }
}
