//! Any opened trace (an OTF2 archive, a Paraver or CSV trace, an Nsight Systems export, a
//! store, a generated run) written as an OTF2 archive: its tables read back into the terms of
//! the archive writer ([`super::otf2`]'s `EventFiles`): ranks, locations, regions,
//! communicators and clock samples as definitions, the events a batch at a time, each batch
//! appended as it is read, so an export of a store bigger than memory holds a batch and the
//! locations' chunks, not the trace.
//!
//! The archive holds what was recorded: the events at their local times (`events.ts_local`)
//! with the clock samples, so that a reader corrects them again. OTF2 keeps a sync session as
//! one offset point in whole ticks: an archive read with OTF2 offsets gives back the same times,
//! one whose samples were finer (a generated run's ping-pongs) times within a nanosecond. What OTF2 has no record for here is counted by kind and said, never dropped
//! unsaid: metric samples and state intervals (the writer writes no metric or state records),
//! events of kind `other`. A communicator's members are not a table of commdb's (only their
//! number is): they are written as the ranks its events name, in rank order (every rank for
//! one as large as the run), and members that no event names are counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int32Type, Int64Type};

use super::otf2::EventFiles;
use crate::error::{Error, Result};
use crate::events::{Event, EventKind, EventParts, NONE_I32, NONE_I64, RawEvents, collective_op_code};
use crate::trace::{
    ClockSample, CommInfo, LocationInfo, RankInfo, RawMetrics, RawStates, RawTrace, RegionInfo, Trace, Warnings,
};

/// What the trace holds that the archive has no record for, by kind.
pub type NotWritten = BTreeMap<String, u64>;

/// The names of an archive's parts in its directory.
const PARTS: [&str; 3] = ["traces.otf2", "traces.def", "traces"];

/// Write `trace` as the OTF2 archive `dir/traces.otf2` (with `traces.def` and `traces/`). The
/// archive is written beside them first and put in their place at the end: an export that
/// fails leaves no half-written archive (and an archive there before stays whole).
pub fn write(trace: &Trace, dir: &Path) -> Result<NotWritten> {
    let targets = PARTS.map(|p| dir.join(p));
    crate::writing::refuse_trace_files(trace, &targets)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let beside = dir.join(format!(".traces.commdb-{}", std::process::id()));
    let written = write_archive(trace, &beside);
    let placed = written.and_then(|n| {
        for part in PARTS {
            let target = dir.join(part);
            let old = if target.is_dir() { std::fs::remove_dir_all(&target) } else { std::fs::remove_file(&target) };
            if let Err(e) = old
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(Error::io(&target, e));
            }
            std::fs::rename(beside.join(part), &target).map_err(|e| Error::io(&target, e))?;
        }
        Ok(n)
    });
    let _ = std::fs::remove_dir_all(&beside);
    placed
}

/// `write`, into the directory `dir`.
fn write_archive(trace: &Trace, dir: &Path) -> Result<NotWritten> {
    let mut not_written = NotWritten::new();
    let regions = regions(trace)?;
    let region_index: HashMap<String, i32> =
        regions.iter().enumerate().rev().map(|(i, r)| (r.name.clone(), i as i32)).collect();
    let ranks = ranks(trace)?;
    // A first pass: the earliest local time (the archive's offset is set before its first
    // event is written) and the ranks each communicator's events name.
    let mut earliest = i64::MAX;
    let mut named = Named::default();
    crate::store::each_batch(trace, "events", &mut |b| {
        let e = Columns::of(&b)?;
        for i in 0..b.num_rows() {
            earliest = earliest.min(e.ts_local.value(i));
            let Some(kind) = EventKind::from_name(e.kind.value(i)) else { continue };
            if !e.comm.is_valid(i) || matches!(kind, EventKind::Enter | EventKind::Leave) {
                continue;
            }
            let comm = e.comm.value(i);
            if (kind as u8) < EventKind::ThreadFork as u8 {
                let ranks = named.mpi.entry(comm).or_default();
                ranks.insert(e.rank.value(i));
                if e.peer.is_valid(i) {
                    ranks.insert(e.peer.value(i));
                }
            } else {
                named.threads.entry(comm).or_default().insert(e.rank.value(i));
            }
        }
        Ok(())
    })?;
    let communicators = communicators(trace, &ranks, &named, &mut not_written)?;
    let skeleton = RawTrace {
        meta: trace.meta.clone(),
        ranks,
        locations: locations(trace)?,
        regions,
        events: EventParts::new(Vec::new()),
        communicators,
        clock_sync: clock_sync(trace)?,
        metrics: RawMetrics::default(),
        states: RawStates::default(),
        warnings: Warnings::default(),
    };
    let mut files = EventFiles::create(&skeleton, dir, if earliest == i64::MAX { 0 } else { earliest })?;
    crate::store::each_batch(trace, "events", &mut |b| {
        let part = events(&b, &region_index, &mut not_written)?;
        files.append(&[part])
    })?;
    files.finish(&skeleton)?;
    for (table, what) in [("metrics", "metric samples"), ("states", "state intervals")] {
        let mut rows = 0u64;
        crate::store::each_batch(trace, table, &mut |b| {
            rows += b.num_rows() as u64;
            Ok(())
        })?;
        if rows > 0 {
            not_written.insert(what.to_string(), rows);
        }
    }
    Ok(not_written)
}

/// The columns of a batch of `events` the archive is written from.
struct Columns {
    rank: arrow::array::Int32Array,
    thread: arrow::array::Int32Array,
    ts_local: arrow::array::Int64Array,
    kind: arrow::array::StringArray,
    region: arrow::array::StringArray,
    peer: arrow::array::Int32Array,
    comm: arrow::array::Int32Array,
    tag: arrow::array::Int32Array,
    bytes: arrow::array::Int64Array,
    request: arrow::array::Int64Array,
    op: arrow::array::StringArray,
    bytes_recv: arrow::array::Int64Array,
}

impl Columns {
    fn of(b: &RecordBatch) -> Result<Columns> {
        let column = |name: &str| {
            b.column_by_name(name).ok_or_else(|| Error::Engine(format!("the events table has no column '{name}'")))
        };
        let text = |name: &str| -> Result<arrow::array::StringArray> {
            Ok(arrow::compute::cast(column(name)?, &DataType::Utf8)?.as_string::<i32>().clone())
        };
        let int32 = |name: &str| -> Result<arrow::array::Int32Array> {
            Ok(arrow::compute::cast(column(name)?, &DataType::Int32)?.as_primitive::<Int32Type>().clone())
        };
        let int64 = |name: &str| -> Result<arrow::array::Int64Array> {
            Ok(arrow::compute::cast(column(name)?, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
        };
        Ok(Columns {
            rank: int32("rank")?,
            thread: int32("thread")?,
            ts_local: int64("ts_local")?,
            kind: text("kind")?,
            region: text("region")?,
            peer: int32("peer")?,
            comm: int32("comm")?,
            tag: int32("tag")?,
            bytes: int64("bytes")?,
            request: int64("request")?,
            op: text("op")?,
            bytes_recv: int64("bytes_recv")?,
        })
    }
}

/// A batch of `events` as the writer's events, at their local times; an event of kind `other`
/// (no OTF2 record) is counted.
fn events(b: &RecordBatch, region_index: &HashMap<String, i32>, not_written: &mut NotWritten) -> Result<RawEvents> {
    let e = Columns::of(b)?;
    let mut out = RawEvents::default();
    let i32_or = |a: &arrow::array::Int32Array, i: usize| if a.is_valid(i) { a.value(i) } else { NONE_I32 };
    let i64_or = |a: &arrow::array::Int64Array, i: usize| if a.is_valid(i) { a.value(i) } else { NONE_I64 };
    for i in 0..b.num_rows() {
        let name = e.kind.value(i);
        let kind = EventKind::from_name(name)
            .ok_or_else(|| Error::Engine(format!("event {i} of a batch of the events table: unknown kind '{name}'")))?;
        if kind == EventKind::Other {
            *not_written.entry("events of kind other".to_string()).or_default() += 1;
        }
        let region = if e.region.is_valid(i) {
            region_index.get(e.region.value(i)).copied().ok_or_else(|| {
                Error::Engine(format!("an event names region '{}', which the regions table has not", e.region.value(i)))
            })?
        } else {
            NONE_I32
        };
        let mut event = Event::new(e.rank.value(i), e.thread.value(i), e.ts_local.value(i), kind);
        event.region = region;
        event.peer = i32_or(&e.peer, i);
        event.comm = i32_or(&e.comm, i);
        event.tag = i32_or(&e.tag, i);
        event.bytes = i64_or(&e.bytes, i);
        event.request = i64_or(&e.request, i);
        event.bytes_recv = i64_or(&e.bytes_recv, i);
        event.op = if e.op.is_valid(i) && !e.op.value(i).is_empty() { collective_op_code(e.op.value(i)) } else { 0 };
        out.push(event);
    }
    Ok(out)
}

/// The batches of a definition table.
fn table(trace: &Trace, name: &str) -> Result<Vec<RecordBatch>> {
    let mut batches = Vec::new();
    crate::store::each_batch(trace, name, &mut |b| {
        batches.push(b);
        Ok(())
    })?;
    Ok(batches)
}

fn text_at(b: &RecordBatch, name: &str) -> Result<arrow::array::StringArray> {
    let column = b.column_by_name(name).ok_or_else(|| Error::Engine(format!("no column '{name}'")))?;
    Ok(arrow::compute::cast(column, &DataType::Utf8)?.as_string::<i32>().clone())
}

fn int_at(b: &RecordBatch, name: &str) -> Result<arrow::array::Int64Array> {
    let column = b.column_by_name(name).ok_or_else(|| Error::Engine(format!("no column '{name}'")))?;
    Ok(arrow::compute::cast(column, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

fn some_text(a: &arrow::array::StringArray, i: usize) -> Option<String> {
    a.is_valid(i).then(|| a.value(i).to_string())
}

fn some_int(a: &arrow::array::Int64Array, i: usize) -> Option<i64> {
    a.is_valid(i).then(|| a.value(i))
}

fn ranks(trace: &Trace) -> Result<Vec<RankInfo>> {
    let mut out = Vec::new();
    for b in table(trace, "ranks")? {
        let (rank, node, name, app) =
            (int_at(&b, "rank")?, text_at(&b, "node")?, text_at(&b, "name")?, int_at(&b, "application")?);
        for i in 0..b.num_rows() {
            out.push(RankInfo {
                rank: rank.value(i) as i32,
                node: some_text(&node, i),
                name: name.value(i).to_string(),
                application: some_int(&app, i).map(|a| a as i32),
            });
        }
    }
    Ok(out)
}

fn locations(trace: &Trace) -> Result<Vec<LocationInfo>> {
    let mut out = Vec::new();
    for b in table(trace, "locations")? {
        let (id, rank, thread) = (int_at(&b, "location_id")?, int_at(&b, "rank")?, int_at(&b, "thread")?);
        let (kind, name, node) = (text_at(&b, "kind")?, text_at(&b, "name")?, text_at(&b, "node")?);
        for i in 0..b.num_rows() {
            out.push(LocationInfo {
                location_id: id.value(i),
                rank: rank.value(i) as i32,
                thread: thread.value(i) as i32,
                kind: kind.value(i).to_string(),
                name: name.value(i).to_string(),
                node: some_text(&node, i),
            });
        }
    }
    Ok(out)
}

fn regions(trace: &Trace) -> Result<Vec<RegionInfo>> {
    let mut out = Vec::new();
    for b in table(trace, "regions")? {
        let (id, name, paradigm) = (int_at(&b, "region_id")?, text_at(&b, "name")?, text_at(&b, "paradigm")?);
        let (role, file, line) = (text_at(&b, "role")?, text_at(&b, "file")?, int_at(&b, "line")?);
        for i in 0..b.num_rows() {
            out.push(RegionInfo {
                region_id: id.value(i),
                name: name.value(i).to_string(),
                paradigm: paradigm.value(i).to_string(),
                role: some_text(&role, i),
                file: some_text(&file, i),
                line: some_int(&line, i),
            });
        }
    }
    Ok(out)
}

fn clock_sync(trace: &Trace) -> Result<Vec<ClockSample>> {
    let mut out = Vec::new();
    for b in table(trace, "clock_sync")? {
        let (rank, session, local, master) =
            (int_at(&b, "rank")?, int_at(&b, "session")?, int_at(&b, "local_ts")?, int_at(&b, "master_ts")?);
        let (round_trip, std_dev) = (int_at(&b, "round_trip")?, int_at(&b, "std_dev_ns")?);
        for i in 0..b.num_rows() {
            out.push(ClockSample {
                rank: rank.value(i) as i32,
                session: session.value(i) as i32,
                local_ts: local.value(i),
                master_ts: master.value(i),
                round_trip: some_int(&round_trip, i),
                std_dev_ns: some_int(&std_dev, i),
                exact: None,
            });
        }
    }
    Ok(out)
}

/// The ranks the events name on each communicator: MPI's records (their ranks and peers), and
/// the thread and RMA records (a thread team's, an accelerator's window, whose members are
/// locations of one rank).
#[derive(Debug, Default)]
struct Named {
    mpi: BTreeMap<i32, BTreeSet<i32>>,
    threads: BTreeMap<i32, BTreeSet<i32>>,
}

/// The communicators with their members: every rank for an MPI communicator as large as the
/// run, each rank alone for one of size 1 that several ranks' events name (MPI_COMM_SELF), the
/// rank once per member for a team or window of one rank's locations, else the ranks its
/// events name, in rank order; members no event names are counted.
fn communicators(
    trace: &Trace,
    ranks: &[RankInfo],
    named: &Named,
    not_written: &mut NotWritten,
) -> Result<Vec<CommInfo>> {
    let all: Vec<i32> = ranks.iter().map(|r| r.rank).collect();
    let mut out = Vec::new();
    let mut unnamed = 0u64;
    for b in table(trace, "communicators")? {
        let (comm, name, size) = (int_at(&b, "comm")?, text_at(&b, "name")?, int_at(&b, "size")?);
        for i in 0..b.num_rows() {
            let (comm, size) = (comm.value(i) as i32, size.value(i).max(0) as usize);
            let mpi: Vec<i32> = named.mpi.get(&comm).map(|s| s.iter().copied().collect()).unwrap_or_default();
            let threads: Vec<i32> = named.threads.get(&comm).map(|s| s.iter().copied().collect()).unwrap_or_default();
            let (members, per_rank) = match (mpi.as_slice(), threads.as_slice()) {
                (m, []) if size == all.len() && m.iter().all(|r| all.contains(r)) => (all.clone(), false),
                (m, []) if size == 1 && m.len() > 1 => (Vec::new(), true),
                ([], [rank]) => (vec![*rank; size.max(1)], false),
                (m, t) => {
                    let seen: BTreeSet<i32> = m.iter().chain(t).copied().collect();
                    unnamed += size.saturating_sub(seen.len()) as u64;
                    (seen.into_iter().collect(), false)
                }
            };
            out.push(CommInfo { comm, name: name.value(i).to_string(), members, per_rank });
        }
    }
    if unnamed > 0 {
        not_written.insert("communicator members no event names".to_string(), unnamed);
    }
    Ok(out)
}
