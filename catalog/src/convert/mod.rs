//! Converting a trace into a store in bounded memory, whatever its size.
//!
//! An OTF2 archive is read a group of whole ranks at a time (`reading::otf2::Pieces`): each
//! group's events are decoded and clock-corrected as for the whole trace, walked once
//! (`deriving::walk`), and written at once to the store's parts (`events`, `calls`, `metrics`),
//! while the group's message halves go to bucket files (`deriving::messages::spilled`), to be
//! matched exactly when every group is read: a rank numbers its own channels, so the key of
//! every half names its partner in whatever group that is. The collective parts (one per rank
//! and operation) go to run files sorted by (communicator, instance, rank), merged at the end
//! (`deriving::collectives::spilled`). Memory is bounded by a group (`Limits::group_events`)
//! and a bucket of halves, not by the trace.
//!
//! A Paraver trace interleaves all threads in one time-ordered file: one pass splits it by
//! runs of whole tasks into scratch files (`reading::paraver::pieces`), which are then read a
//! group at a time the same way. A CSV trace's rows may come in any order: one pass parses
//! them into a scratch file of events and a second distributes those by ranks once the ranks
//! are known (`reading::csv::pieces`). All three are read through `reading::InGroups`.
//!
//! The store has the tables, rows and row order of one written from the trace in memory
//! (`store::write`); only the way the rows are cut into batches and parts differs. The
//! controlled logical clock moves times by the matching of the whole trace, so a conversion
//! with it reads the trace in memory.

pub mod cache;

use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;

use crate::clock::Correction;
use crate::deriving::collectives::spilled::SpilledParts;
use crate::deriving::messages::spilled::SpilledHalves;
use crate::deriving::steps::ClockPlan;
use crate::deriving::{assemble, walk};
use crate::error::{Error, Result};
use crate::events::PartStream;
use crate::progress::LoadProgress;
use crate::reading::{self, InGroups, OpenOptions, otf2, paraver};
use crate::store::{self, PartWriter, StoreWriter};
use crate::trace::{NodeMap, RawTrace, TraceMeta, Warnings};

/// How much a conversion holds at a time.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Events of a group of ranks read, derived and written together (a rank with more is a
    /// group of its own).
    pub group_events: u64,
    /// Rows of a part of a table in the store.
    pub part_rows: usize,
    /// Events of the trace per bucket of message halves; a bucket is matched a quarter as
    /// many halves at a time at most (split again when it holds more: in a trace made of
    /// messages, such as a PCLVis CSV, every event is a half).
    pub bucket_events: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { group_events: 1 << 22, part_rows: store::PART_ROWS, bucket_events: 1 << 25 }
    }
}

/// What a conversion read and wrote.
#[derive(Debug, Default)]
pub struct Converted {
    pub events: u64,
    pub messages: u64,
    /// Groups of ranks the trace was read in.
    pub groups: usize,
    pub warnings: Warnings,
}

/// Convert the OTF2 archive at `path` into a store at `dir`, a group of ranks at a time.
pub fn otf2(path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
    otf2_as(path, dir, options, limits, |_| {})
}

/// `otf2`, going on from the archive's anchor and global definitions read already (to count
/// its events, `formats::Grouping::measure`).
pub fn otf2_from(
    path: &Path,
    global: otf2::Global,
    dir: &Path,
    options: &OpenOptions,
    limits: &Limits,
) -> Result<Converted> {
    otf2_with(path, Some(global), dir, options, limits, |_| {})
}

/// The controlled logical clock moves times by the matching of the whole trace.
fn refuse_clc(options: &OpenOptions) -> Result<()> {
    if options.clock_correction == Correction::Clc {
        return Err(Error::argument(
            "the controlled logical clock moves times by the matching of the whole trace: convert with it through the trace in memory",
        ));
    }
    Ok(())
}

/// The name of the clock correction applied, as `trace_info` says it.
fn correction_name(correction: Correction, no_models: bool) -> String {
    match correction {
        Correction::Off => "off",
        Correction::Model if no_models => "none",
        other => other.name(),
    }
    .to_string()
}

/// `otf2`, the trace's name, path and format then set by `describe` (`commdb generate` names
/// the archive it writes on the way after the store).
pub fn otf2_as(
    path: &Path,
    dir: &Path,
    options: &OpenOptions,
    limits: &Limits,
    describe: impl FnOnce(&mut TraceMeta),
) -> Result<Converted> {
    otf2_with(path, None, dir, options, limits, describe)
}

/// `otf2_as`, going on from the global definitions when they were read already.
fn otf2_with(
    path: &Path,
    global: Option<otf2::Global>,
    dir: &Path,
    options: &OpenOptions,
    limits: &Limits,
    describe: impl FnOnce(&mut TraceMeta),
) -> Result<Converted> {
    let shown = path.display().to_string();
    reading::refuse_time_unit(&shown, "an OTF2 archive", options)?;
    refuse_clc(options)?;
    let (mut raw, mut pieces) = match global {
        Some(global) => otf2::read_in_pieces_from(path, global)?,
        None => otf2::read_in_pieces(path)?,
    };
    raw.meta.name = reading::default_name(&reading::paths::otf2_name_source(path));
    raw.meta.path = shown;
    describe(&mut raw.meta);
    let store = StoreWriter::create(dir)?;
    prepare_and_write(path, raw, &mut pieces, store, 0, options, limits)
}

/// Convert the Paraver trace at `path` into a store at `dir`: one pass splits its records by
/// ranks into scratch files beside the store (`reading::paraver::pieces`), then they are read
/// a group of ranks at a time.
pub fn paraver(path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
    let shown = path.display().to_string();
    reading::refuse_time_unit(&shown, "a Paraver trace", options)?;
    refuse_clc(options)?;
    let store = StoreWriter::create(dir)?;
    let progress = options.progress.as_deref();
    if let Some(p) = progress {
        p.set_stages(2);
    }
    let shard_events = (limits.group_events / 4).max(1);
    let (mut raw, mut pieces) =
        paraver::pieces::read_in_pieces(path, &store.scratch("paraver"), shard_events, progress)?;
    raw.meta.path = shown;
    prepare_and_write(path, raw, &mut pieces, store, 1, options, limits)
}

/// Convert the CSV trace at `path` into a store at `dir`: one pass parses its rows into a
/// scratch file beside the store and a second distributes them by ranks
/// (`reading::csv::pieces`), then they are read a group of ranks at a time.
pub fn csv(path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
    refuse_clc(options)?;
    let shape = reading::csv::Shape::of(path)?;
    let store = StoreWriter::create(dir)?;
    // The nodes file is applied with the other formats' (`prepare_and_write`).
    let csv_options =
        reading::csv::CsvOptions { time_unit: options.time_unit, nodes: None, progress: options.progress.clone() };
    if let Some(p) = &options.progress {
        p.set_stages(2);
    }
    let shard_events = (limits.group_events / 4).max(1);
    let scratch = store.scratch("csv");
    let (mut raw, mut pieces) =
        reading::csv::pieces::read_in_pieces(path, shape, &csv_options, &scratch, shard_events)?;
    raw.meta.name = reading::default_name(path.to_string_lossy().as_ref());
    raw.meta.path = path.display().to_string();
    prepare_and_write(path, raw, &mut pieces, store, 1, options, limits)
}

/// Place the ranks by `options.nodes`, fit the clock models (on `options.clock_sync`'s
/// samples, else the trace's own), then write the store (`write`).
fn prepare_and_write(
    path: &Path,
    mut raw: RawTrace,
    pieces: &mut dyn InGroups,
    store: StoreWriter,
    passes: u64,
    options: &OpenOptions,
    limits: &Limits,
) -> Result<Converted> {
    if let Some(nodes_file) = &options.nodes {
        reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    let mut warnings = std::mem::take(&mut raw.warnings);
    assemble::report_unplaced(&raw.ranks, &mut warnings);
    let samples = reading::clock_sync(options)?;
    let correction = options.clock_correction;
    let plan = ClockPlan { correction, ranks: &raw.ranks, samples: samples.as_deref() };
    pieces.prepare(&plan, &mut warnings)?;
    raw.clock_sync = samples.unwrap_or_else(|| pieces.clock_sync());
    raw.meta.clock_correction = correction_name(correction, !pieces.corrects());
    write(path, raw, pieces, store, warnings, passes, options, limits)
}

/// Write the store of the trace at `path`, whose definitions are `raw`, its events read a
/// group of ranks at a time from `pieces` (after `passes` whole passes over the trace: the
/// groups are then the progress's next stage).
#[allow(clippy::too_many_arguments)]
fn write(
    path: &Path,
    mut raw: RawTrace,
    pieces: &mut dyn InGroups,
    mut store: StoreWriter,
    mut warnings: Warnings,
    passes: u64,
    options: &OpenOptions,
    limits: &Limits,
) -> Result<Converted> {
    let groups = pieces.groups(limits.group_events);
    let progress: Option<&Arc<LoadProgress>> = options.progress.as_ref();
    if let Some(p) = progress {
        if passes > 0 {
            p.next_stage();
        } else {
            p.set_stages(1);
        }
        p.set_total(groups.len() as u64);
    }
    let buckets = pieces.events().div_ceil(limits.bucket_events.max(1)).max(1) as usize;
    let mut spilled = SpilledHalves::create(&store.scratch("messages"), buckets, limits.bucket_events / 4)?;
    let mut spilled_parts = SpilledParts::create(&store.scratch("collectives"), &raw.communicators)?;
    let region_names: Vec<String> = raw.regions.iter().map(|r| r.name.clone()).collect();
    let mut so_far = SoFar::default();
    let events = store.parts("events", limits.part_rows)?;
    let calls = store.parts("calls", limits.part_rows)?;
    let metrics = store.parts("metrics", limits.part_rows)?;
    // The events of a group are written on one thread and its calls and metrics on another
    // while the next group is decoded and walked.
    let written = std::thread::scope(|scope| -> Result<[PartWriter; 3]> {
        let (events_out, events_done) = writer(scope, vec![events]);
        let (calls_out, calls_done) = writer(scope, vec![calls, metrics]);
        let read = (|| -> Result<()> {
            for group in &groups {
                crate::interrupt::check(&format!("converting {}", raw.meta.path))?;
                let (events, metrics) = pieces.decode(group, &mut warnings)?;
                let columns = events.columns();
                let mut streams = events.streams();
                for s in &mut streams {
                    s.offset += so_far.events;
                }
                let walk::Walked { calls, halves, collective_parts, span } =
                    walk::walk_from(&columns, &streams, so_far.calls, &mut warnings)?;
                drop(columns);
                so_far.add(span, calls.len(), &streams, events.len());
                spilled_parts.add(collective_parts)?;
                let calls = calls.into_batches(&region_names)?;
                let events = events.into_batches(&region_names)?;
                let metrics = assemble::metrics_batch(&metrics, &raw.metrics.names)?;
                // A writer that stopped has its error waiting at its end.
                if events_out.send(vec![events]).is_err() || calls_out.send(vec![calls, vec![metrics]]).is_err() {
                    break;
                }
                spilled.add(&halves, &streams)?;
                if let Some(p) = progress {
                    p.add(1);
                }
            }
            Ok(())
        })();
        drop((events_out, calls_out));
        let joined = |done: std::thread::ScopedJoinHandle<'_, Result<Vec<PartWriter>>>| {
            done.join().unwrap_or_else(|_| Err(Error::Engine("a writer of the store stopped unexpectedly".into())))
        };
        let (events, calls) = (joined(events_done), joined(calls_done));
        read?;
        let [events] = <[PartWriter; 1]>::try_from(events?).expect("one table");
        let [calls, metrics] = <[PartWriter; 2]>::try_from(calls?).expect("two tables");
        Ok([events, calls, metrics])
    })?;
    pieces.finish(&mut warnings);
    for parts in written {
        store.add_parts(parts)?;
    }

    let nodes = NodeMap::new(&raw.ranks);
    let mut messages = store.parts("messages", store::part_rows_of("messages", limits.part_rows))?;
    let matched = spilled.finish(&nodes, &mut warnings, |batch| messages.write(&batch))?;
    store.add_parts(messages)?;
    let mut collectives = store.parts("collectives", limits.part_rows)?;
    spilled_parts.finish(&raw.communicators, &mut warnings, |batch| collectives.write(&batch))?;
    store.add_parts(collectives)?;

    let violations = matched.violations;
    raw.meta.clock_violations = violations;
    if violations > 0 {
        warnings.add_many("clock_violation", violations, || {
            format!("{violations} matched messages are received before they are sent (see clock_violations())")
        });
    }
    let (first, last) = so_far.span();
    let span = last.checked_sub(first).ok_or_else(|| {
        Error::in_file(
            path,
            format!("event times from {first} to {last} ns span more than 292 years: a timestamp is damaged"),
        )
    })?;
    let events = so_far.events;
    let info = assemble::info_batch(&raw.meta, raw.ranks.len(), raw.locations.len(), events, span, &warnings)?;
    let mut states = store.parts("states", limits.part_rows)?;
    pieces.states(&raw, &mut |batch| states.write(&batch))?;
    store.add_parts(states)?;
    let small: [(&'static str, RecordBatch); 8] = [
        ("trace_info", info),
        ("ranks", raw.ranks_batch()?),
        ("locations", raw.locations_batch(&so_far.streams)?),
        ("regions", raw.regions_batch()?),
        ("communicators", raw.communicators_batch()?),
        ("clock_sync", raw.clock_sync_batch()?),
        ("metric_definitions", raw.metric_definitions_batch()?),
        ("warnings", assemble::warnings_batch(&warnings)?),
    ];
    for (name, batch) in small {
        store.table(name, &[batch])?;
    }
    store.finish(&raw.meta)?;
    Ok(Converted { events: events as u64, messages: matched.messages, groups: groups.len(), warnings })
}

/// Batches for each of some tables, in the order of the tables.
type Batches = Vec<Vec<RecordBatch>>;

/// A thread writing the batches sent to it into `tables` (one list per table), returning them
/// when the sender is dropped, or at its first error.
#[allow(clippy::type_complexity)]
fn writer<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    mut tables: Vec<PartWriter>,
) -> (std::sync::mpsc::SyncSender<Batches>, std::thread::ScopedJoinHandle<'scope, Result<Vec<PartWriter>>>) {
    let (send, receive) = std::sync::mpsc::sync_channel::<Batches>(1);
    let done = scope.spawn(move || {
        for batches in receive {
            for (table, batches) in tables.iter_mut().zip(&batches) {
                batches.iter().try_for_each(|b| table.write(b))?;
            }
        }
        Ok(tables)
    });
    (send, done)
}

/// What the walks of the groups so far found that the end of the conversion needs.
#[derive(Debug, Default)]
struct SoFar {
    /// Events so far: the global index of the next group's first event.
    events: usize,
    /// Calls so far: the call_id of the next group's first call.
    calls: i64,
    /// Earliest and latest event time so far.
    first: i64,
    last: i64,
    streams: Vec<PartStream>,
}

impl SoFar {
    fn add(&mut self, span: (i64, i64), calls: usize, streams: &[PartStream], events: usize) {
        if events > 0 {
            let (first, last) = span;
            (self.first, self.last) =
                if self.events == 0 { (first, last) } else { (self.first.min(first), self.last.max(last)) };
        }
        self.events += events;
        self.calls += calls as i64;
        self.streams.extend_from_slice(streams);
    }

    /// Earliest and latest event time, (0, 0) without events.
    fn span(&self) -> (i64, i64) {
        if self.events == 0 { (0, 0) } else { (self.first, self.last) }
    }
}
