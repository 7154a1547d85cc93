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

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
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
        let kinds = looked_up(column(&b, "kind")?, EventKind::from_name)?;
        let (rank, peer, comm) = (int32(&b, "rank")?, int32(&b, "peer")?, int32(&b, "comm")?);
        if let Some(m) = arrow::compute::min(&int64(&b, "ts_local")?) {
            earliest = earliest.min(m);
        }
        for (i, kind) in kinds.into_iter().enumerate() {
            let Some(Some(kind)) = kind else { continue };
            if !comm.is_valid(i) || matches!(kind, EventKind::Enter | EventKind::Leave) {
                continue;
            }
            if (kind as u8) < EventKind::ThreadFork as u8 {
                let ranks = named.mpi.entry(comm.value(i)).or_default();
                ranks.insert(rank.value(i));
                if peer.is_valid(i) {
                    ranks.insert(peer.value(i));
                }
            } else {
                named.threads.entry(comm.value(i)).or_default().insert(rank.value(i));
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

fn column<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    b.column_by_name(name).ok_or_else(|| Error::Engine(format!("the events table has no column '{name}'")))
}

fn int32(b: &RecordBatch, name: &str) -> Result<arrow::array::Int32Array> {
    Ok(arrow::compute::cast(column(b, name)?, &DataType::Int32)?.as_primitive::<Int32Type>().clone())
}

fn int64(b: &RecordBatch, name: &str) -> Result<arrow::array::Int64Array> {
    Ok(arrow::compute::cast(column(b, name)?, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

/// `f` of each row's text in `column` (None where NULL): of each dictionary value once for a
/// dictionary column (the events' kinds, regions and operations are), else of each row's.
fn looked_up<T: Clone>(column: &ArrayRef, f: impl Fn(&str) -> T) -> Result<Vec<Option<T>>> {
    let text = |a: &ArrayRef| -> Result<arrow::array::StringArray> {
        Ok(arrow::compute::cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
    };
    let Some(dictionary) = column.as_any_dictionary_opt() else {
        let rows = text(column)?;
        return Ok(rows.iter().map(|v| v.map(&f)).collect());
    };
    let values = text(dictionary.values())?;
    let by_key: Vec<Option<T>> = values.iter().map(|v| v.map(&f)).collect();
    let keys = dictionary.normalized_keys();
    Ok(keys.iter().enumerate().map(|(i, &k)| if column.is_valid(i) { by_key[k].clone() } else { None }).collect())
}

/// A batch of `events` as the writer's events, at their local times; an event of kind `other`
/// (no OTF2 record) is counted.
fn events(b: &RecordBatch, region_index: &HashMap<String, i32>, not_written: &mut NotWritten) -> Result<RawEvents> {
    let (rank, thread, ts_local) = (int32(b, "rank")?, int32(b, "thread")?, int64(b, "ts_local")?);
    let (peer, comm, tag) = (int32(b, "peer")?, int32(b, "comm")?, int32(b, "tag")?);
    let (bytes, request, bytes_recv) = (int64(b, "bytes")?, int64(b, "request")?, int64(b, "bytes_recv")?);
    let kinds = looked_up(column(b, "kind")?, |name| EventKind::from_name(name).ok_or_else(|| name.to_string()))?;
    let regions =
        looked_up(column(b, "region")?, |name| region_index.get(name).copied().ok_or_else(|| name.to_string()))?;
    let ops = looked_up(column(b, "op")?, |name| if name.is_empty() { 0 } else { collective_op_code(name) })?;
    let i32_or = |a: &arrow::array::Int32Array, i: usize| if a.is_valid(i) { a.value(i) } else { NONE_I32 };
    let i64_or = |a: &arrow::array::Int64Array, i: usize| if a.is_valid(i) { a.value(i) } else { NONE_I64 };
    let mut out = RawEvents::default();
    for i in 0..b.num_rows() {
        let kind = match &kinds[i] {
            Some(Ok(kind)) => *kind,
            Some(Err(name)) => {
                return Err(Error::Engine(format!("event {i} of a batch of the events table: unknown kind '{name}'")));
            }
            None => return Err(Error::Engine(format!("event {i} of a batch of the events table has no kind"))),
        };
        if kind == EventKind::Other {
            *not_written.entry("events of kind other".to_string()).or_default() += 1;
        }
        let region = match &regions[i] {
            Some(Ok(region)) => *region,
            Some(Err(name)) => {
                return Err(Error::Engine(format!("an event names region '{name}', which the regions table has not")));
            }
            None => NONE_I32,
        };
        let mut event = Event::new(rank.value(i), thread.value(i), ts_local.value(i), kind);
        event.region = region;
        event.peer = i32_or(&peer, i);
        event.comm = i32_or(&comm, i);
        event.tag = i32_or(&tag, i);
        event.bytes = i64_or(&bytes, i);
        event.request = i64_or(&request, i);
        event.bytes_recv = i64_or(&bytes_recv, i);
        event.op = ops[i].unwrap_or(0);
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
