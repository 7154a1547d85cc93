//! The steps that make a trace's tables, each run when a query first uses a table it makes,
//! once per trace, so that a query pays only for the tables it touches:
//!
//! 1. definitions, when the trace is opened: `ranks`, `regions`, `communicators`,
//!    `metric_definitions`;
//! 2. events: decoding the events when the reader left them for later (an OTF2 archive's
//!    location files are read here, each corrected as it is decoded), clock correction
//!    ([`crate::clock`]) of what the reader did not correct, then `events`, `locations`,
//!    `clock_sync`, `metrics` and `states`;
//! 3. derivation: `calls`, `messages` and `collectives`, read from the `events` table's own
//!    columns ([`crate::events::EventColumns`], no copy; its `seq` column is dropped meanwhile and
//!    made again after), then `trace_info` (its duration and clock violations come from them)
//!    and `warnings`, complete only now.
//!
//! Before step 2 has run, a query that scans only some columns of `events` has them built
//! alone when the reader can decode its events again ([`DeferredEvents::decode_columns`], an
//! OTF2 archive's): [`crate::deriving::event_columns`]. Step 2 then builds the whole table when
//! a query first needs it.
//!
//! A query that needs a derived table first runs steps 2 and 3 as one: the derivation reads
//! the events' own buffers before they become the `events` table, so that the table does not
//! sit beside the derivation's working memory. When the reader can decode some columns again
//! ([`DeferredEvents::decodes_columns`]), the decoded events are then dropped rather than made
//! into the `events` table: scans of `events` build the columns they read as before step 2,
//! and the whole table is decoded again only for a query that needs it (`SELECT *`, a
//! conversion). With the controlled logical clock event times
//! depend on the matching, so step 2 always derives. A step that fails leaves its tables
//! unbuilt and fails again, with the same message, for every later query that needs them.
//!
//! A commdb store has every table already: its small ones are read at open, the large ones
//! stay in their files (`StoredTable`), which queries scan in place ([`crate::session::trace_table`])
//! and which are read into memory only when asked for as batches.

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::array::RecordBatch;

use crate::clock::model::RankModel;
use crate::clock::{self, Correction};
use crate::deriving::event_columns::{ColumnParts, DecodedColumns};
use crate::deriving::{self, assemble};
use crate::error::{Error, Result};
use crate::events::{ColumnSet, EventParts, PartStream, part_streams, without_seq};
use crate::model;
use crate::phases::LoadPhases;
use crate::progress::{Building, LoadProgress};
use crate::trace::{
    ClockSample, CommInfo, NodeMap, RankInfo, RawMetrics, RawTrace, StoredFile, TableState, Trace, TraceMeta, Warnings,
};

/// A trace's events left in their files by its reader, decoded when a query first needs them.
pub trait DeferredEvents: Send {
    /// Decode every event, reporting how far it is, correcting clocks as the plan says when it
    /// can do so as it goes.
    fn decode(&self, progress: Option<&LoadProgress>, clock: &ClockPlan<'_>) -> Result<DecodedEvents>;

    /// Decode every event again, keeping only the `wanted` columns of the `events` table (as
    /// `decode` and step 2 would make them, in the same parts); None when the reader cannot
    /// (then the whole table is built).
    fn decode_columns(
        &self,
        _progress: Option<&LoadProgress>,
        _clock: &ClockPlan<'_>,
        _wanted: ColumnSet,
        _region_names: &[String],
    ) -> Result<Option<DecodedColumns>> {
        Ok(None)
    }

    /// Decode every event again for what is recorded beside them, keeping no event: the
    /// events of each (rank, thread) stream counted, the clock sync samples and the metric
    /// samples, for `locations`, `clock_sync` and `metrics` without the `events` table. None
    /// (before decoding anything) when `decodes_columns` is false.
    fn decode_beside(&self, _progress: Option<&LoadProgress>, _clock: &ClockPlan<'_>) -> Result<Option<Beside>> {
        Ok(None)
    }

    /// Whether `decode_columns` answers (its None is known before decoding): then a
    /// derivation need not keep the whole `events` table, which queries build again from the
    /// source, column by column, as they read it.
    fn decodes_columns(&self) -> bool {
        false
    }
}

/// The events a reader left for later.
pub type EventSource = Box<dyn DeferredEvents>;

/// How to correct the clocks of events being decoded: the correction asked for, the ranks
/// (their nodes place ranks without samples) and the samples given beside the trace, which
/// replace its own.
#[derive(Debug, Clone, Copy)]
pub struct ClockPlan<'a> {
    pub correction: Correction,
    pub ranks: &'a [RankInfo],
    pub samples: Option<&'a [ClockSample]>,
}

/// What decoding the events gives: the events, the clock sync samples recorded beside them and
/// the metric samples (their names and definitions stay those of the definitions).
#[derive(Debug, Default)]
pub struct DecodedEvents {
    pub events: EventParts,
    pub clock_sync: Vec<ClockSample>,
    pub metrics: RawMetrics,
    pub warnings: Warnings,
    /// The models the events and metrics were corrected with as they were decoded; None when
    /// the source left correction to the step.
    pub models: Option<Vec<RankModel>>,
}

/// What is recorded beside the events (`DeferredEvents::decode_beside`).
#[derive(Debug, Default)]
pub struct Beside {
    /// Events of each (rank, thread) stream.
    pub counts: BTreeMap<(i32, i32), i64>,
    pub clock_sync: Vec<ClockSample>,
    /// Corrected as the events would be.
    pub metrics: RawMetrics,
    pub warnings: Warnings,
}

/// The tables of step 2 other than `events`: made from what is recorded beside the events
/// when the reader can decode them so (`Built::beside`).
const BESIDE: [&str; 4] = ["locations", "clock_sync", "metrics", "states"];

/// The step that makes a table of the model.
fn step_of(table: &str) -> u8 {
    match table {
        "ranks" | "regions" | "communicators" | "metric_definitions" => 1,
        "events" | "locations" | "clock_sync" | "metrics" | "states" => 2,
        _ => 3,
    }
}

/// Reads a table kept in a file (a commdb store's) into memory.
pub type TableLoader = Box<dyn Fn() -> Result<Vec<RecordBatch>> + Send>;

/// A table kept in a Parquet file of a commdb store: scanned there by queries, read whole into
/// memory (`load`) only when the trace's tables are asked for as batches.
pub struct StoredTable {
    pub file: StoredFile,
    pub load: TableLoader,
}

impl std::fmt::Debug for StoredTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTable").field("file", &self.file).finish_non_exhaustive()
    }
}

/// The tables built so far, the problems found, and the step to run next.
pub struct Built {
    pub tables: BTreeMap<&'static str, Vec<RecordBatch>>,
    pub warnings: Warnings,
    pub phases: LoadPhases,
    /// The facts `trace_info` is made of.
    info: TraceMeta,
    next: Option<Step>,
    failed: Option<String>,
    /// Tables read from their file when first used, each on its own.
    stored: BTreeMap<&'static str, StoredTable>,
    /// The columns of `events` built for queries that read only them, until step 2 builds the
    /// whole table.
    event_columns: Option<ColumnParts>,
    /// Whether the problems decoding the events finds are recorded (a decoding of some
    /// columns finds those of a whole one: they are recorded once).
    decoding_reported: bool,
    /// The reader's events after a derivation that did not keep the `events` table: decoded
    /// again for the columns queries read, and for the whole table when one needs it.
    events_again: Option<EventsAgain>,
}

/// What decodes the events again after the derivation: the reader's source and what
/// correcting their clocks as step 2 did needs.
struct EventsAgain {
    source: EventSource,
    correction: Correction,
    ranks: Vec<RankInfo>,
    samples: Option<Vec<ClockSample>>,
    region_names: Vec<String>,
}

/// The source that decodes some columns of `events` while the whole table is not built, the
/// plan correcting their clocks and the regions' names: that of step 2 before it runs, or the
/// one a derivation left; None when the whole table is built for a scan (the controlled
/// logical clock moves times by the messages matched: only the whole table has them).
fn column_source<'a>(
    next: &'a Option<Step>,
    again: &'a Option<EventsAgain>,
) -> Option<(&'a EventSource, ClockPlan<'a>, Vec<String>)> {
    match (next, again) {
        (Some(Step::Events(step)), _) if step.correction != Correction::Clc => {
            let source = step.source.as_ref()?;
            let plan =
                ClockPlan { correction: step.correction, ranks: &step.raw.ranks, samples: step.clock_sync.as_deref() };
            Some((source, plan, step.raw.regions.iter().map(|r| r.name.clone()).collect()))
        }
        (_, Some(a)) => {
            let plan = ClockPlan { correction: a.correction, ranks: &a.ranks, samples: a.samples.as_deref() };
            Some((&a.source, plan, a.region_names.clone()))
        }
        _ => None,
    }
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tables: Vec<&str> = self.tables.keys().copied().collect();
        f.debug_struct("Built")
            .field("tables", &tables)
            .field("next", &self.next.as_ref().map(|s| s.name(false)))
            .field("failed", &self.failed)
            .field("stored", &self.stored.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

enum Step {
    Events(Box<EventsStep>),
    Derivation(Box<DerivationStep>),
}

impl Step {
    fn name(&self, derive_too: bool) -> &'static str {
        match self {
            // Resumed after an interrupt, with the events decoded.
            Step::Events(s) if s.reached != Reached::Start && derive_too => "deriving calls, messages and collectives",
            Step::Events(s) if s.reached != Reached::Start => "building the events",
            Step::Events(s) if s.source.is_some() && derive_too => {
                "reading the events and deriving calls, messages and collectives"
            }
            Step::Events(s) if s.source.is_some() => "reading the events",
            Step::Events(_) if derive_too => "building the events and deriving calls, messages and collectives",
            Step::Events(_) => "building the events",
            Step::Derivation(_) => "deriving calls, messages and collectives",
        }
    }

    fn number(&self) -> u8 {
        match self {
            Step::Events(_) => 2,
            Step::Derivation(_) => 3,
        }
    }
}

impl Built {
    /// Every table given, or left in its file in `stored`.
    pub fn complete(
        tables: BTreeMap<&'static str, Vec<RecordBatch>>,
        warnings: Warnings,
        stored: BTreeMap<&'static str, StoredTable>,
    ) -> Self {
        Built {
            tables,
            warnings,
            phases: LoadPhases::default(),
            info: TraceMeta::default(),
            next: None,
            failed: None,
            stored,
            event_columns: None,
            decoding_reported: false,
            events_again: None,
        }
    }

    /// Whether `table` is built (a complete trace's missing table is built and empty).
    pub fn is_built(&self, table: &str) -> bool {
        if table == "events" && self.events_again.is_some() {
            return self.tables.contains_key(table);
        }
        let before_next = self.next.as_ref().is_none_or(|s| step_of(table) < s.number());
        self.tables.contains_key(table) || (!self.stored.contains_key(table) && self.failed.is_none() && before_next)
    }

    /// Run the steps up to the one that makes `table`.
    pub fn ensure(&mut self, table: &str) -> Result<()> {
        if let Some((&name, _)) = self.stored.get_key_value(table) {
            return self.load(name);
        }
        if BESIDE.contains(&table) && !self.is_built(table) && self.beside()? {
            return Ok(());
        }
        while !self.is_built(table) {
            if self.next.is_none() && table == "events" {
                return self.events_whole();
            }
            self.run_next(step_of(table))?;
        }
        Ok(())
    }

    /// `locations`, `clock_sync`, `metrics` and `states` made without the `events` table, from
    /// a decoding that keeps none of the events (`DeferredEvents::decode_beside`), while step 2
    /// has not run and its reader can: false (nothing done) otherwise. Step 2 makes the same
    /// tables again when it runs.
    fn beside(&mut self) -> Result<bool> {
        if let Some(message) = &self.failed {
            return Err(Error::Engine(message.clone()));
        }
        let Some(Step::Events(step)) = &self.next else { return Ok(false) };
        let Some(source) = step.source.as_ref() else { return Ok(false) };
        if step.reached != Reached::Start || step.correction == Correction::Clc || !source.decodes_columns() {
            return Ok(false);
        }
        let what = format!("reading the locations, clock sync and metric samples of {}", self.info.name);
        crate::interrupt::check(&what)?;
        let started = Instant::now();
        let shown = Building::start(&what);
        let plan =
            ClockPlan { correction: step.correction, ranks: &step.raw.ranks, samples: step.clock_sync.as_deref() };
        let result = self
            .phases
            .time("decoding events for the tables beside them", || source.decode_beside(Some(shown.progress()), &plan));
        let beside = match result {
            Ok(Some(beside)) => beside,
            Ok(None) => {
                shown.finish(started.elapsed(), true, None);
                return Ok(false);
            }
            Err(e) => {
                shown.finish(started.elapsed(), false, None);
                return Err(self.decoding_failed(e));
            }
        };
        let Beside { counts, clock_sync, metrics, warnings } = beside;
        let raw = &step.raw;
        let clock_sync = step.clock_sync.as_deref().unwrap_or(&clock_sync);
        let tables = [
            raw.locations_batch_counted(&counts),
            assemble::clock_sync_batch(clock_sync),
            assemble::metrics_batch(&metrics, &raw.metrics.names),
            raw.states_batch(),
        ];
        let new = self.report_decoding(warnings);
        let found = (new > 0).then(|| format!("{new} problem(s) found, see {}.warnings", self.info.name));
        shown.finish(started.elapsed(), true, found);
        for (name, batch) in BESIDE.into_iter().zip(tables) {
            self.tables.insert(name, vec![batch?]);
        }
        Ok(true)
    }

    /// Record the problems a decoding found, the first time one completes (a decoding of some
    /// columns, or of what is beside the events, finds those of a whole one): how many are new.
    fn report_decoding(&mut self, warnings: Warnings) -> i64 {
        if self.decoding_reported {
            return 0;
        }
        self.decoding_reported = true;
        let new = warnings.total();
        self.warnings.merge(warnings);
        new
    }

    /// The error of a decoding that was not the events step's: an interruption as it is; any
    /// other fails the events for every later query that needs them, with this message
    /// (decoding fails the same way whatever it keeps: the events step would too).
    fn decoding_failed(&mut self, e: Error) -> Error {
        if interrupted() {
            return e;
        }
        let e = failed_reading(&self.info.name, "reading the events", e);
        self.failed = Some(e.to_string());
        e
    }

    /// The whole `events` table decoded again after a derivation that did not keep it (from
    /// the columns queries built meanwhile, and the rest).
    fn events_whole(&mut self) -> Result<()> {
        let all: Vec<usize> = (0..model::EVENTS.schema().fields().len()).collect();
        let Some(batches) = self.event_columns(&all)? else {
            return Err(Error::Engine(format!(
                "reading trace {} failed (reading the events): its reader could not decode them again",
                self.info.name
            )));
        };
        self.tables.insert("events", batches);
        self.event_columns = None;
        self.events_again = None;
        Ok(())
    }

    pub fn ensure_all(&mut self) -> Result<()> {
        let stored: Vec<&'static str> = self.stored.keys().copied().collect();
        for name in stored {
            self.load(name)?;
        }
        while self.next.is_some() {
            self.run_next(3)?;
        }
        self.ensure("events")
    }

    /// Read a stored table from its file (again on the next use when that fails).
    fn load(&mut self, name: &'static str) -> Result<()> {
        let what = format!("reading table {name} of {}", self.info.name);
        crate::interrupt::check(&what)?;
        let Some(stored) = self.stored.get(name) else { return Ok(()) };
        let started = Instant::now();
        let shown = Building::start(&what);
        let result = (stored.load)();
        shown.finish(started.elapsed(), result.is_ok(), None);
        let result = result.map_err(|e| failed_reading(&self.info.name, &format!("reading its table {name}"), e));
        self.tables.insert(name, result?);
        self.stored.remove(name);
        Ok(())
    }

    /// The `events` table projected on `projection` (indices into its schema), building only
    /// the columns no query built before, while the whole table is not built and its reader
    /// can decode its events again; None otherwise (the whole table is built for the query).
    pub fn event_columns(&mut self, projection: &[usize]) -> Result<Option<Vec<RecordBatch>>> {
        if let Some(message) = &self.failed {
            return Err(Error::Engine(message.clone()));
        }
        let Some((source, plan, names)) = column_source(&self.next, &self.events_again) else { return Ok(None) };
        let wanted = ColumnSet::of(projection)?;
        let missing = match &self.event_columns {
            Some(built) => wanted.without(built.built()),
            None => wanted,
        };
        if self.event_columns.is_none() || !missing.is_empty() {
            let what = format!("reading the events ({}) of {}", column_names(missing), self.info.name);
            crate::interrupt::check(&what)?;
            let started = Instant::now();
            let shown = Building::start(&what);
            let result = self.phases.time("decoding events for their columns", || {
                source.decode_columns(Some(shown.progress()), &plan, missing, &names)
            });
            let decoded = match result {
                Ok(Some(decoded)) => decoded,
                Ok(None) => {
                    shown.finish(started.elapsed(), true, None);
                    return Ok(None);
                }
                Err(e) => {
                    shown.finish(started.elapsed(), false, None);
                    return Err(self.decoding_failed(e));
                }
            };
            let DecodedColumns { parts, warnings } = decoded;
            let new = self.report_decoding(warnings);
            let merged = match self.event_columns.as_mut() {
                Some(built) => built.merge(parts),
                None => {
                    self.event_columns = Some(parts);
                    Ok(())
                }
            };
            let found = (new > 0).then(|| format!("{new} problem(s) found, see {}.warnings", self.info.name));
            shown.finish(started.elapsed(), merged.is_ok(), found);
            merged.map_err(|e| failed_reading(&self.info.name, "reading the events", e))?;
        }
        match &self.event_columns {
            Some(built) => built.batches(projection).map(Some),
            None => Ok(None),
        }
    }

    pub fn rename(&mut self, name: &str) {
        self.info.name = name.to_string();
    }

    /// Run the next step, on the way to step `target`.
    ///
    /// A step runs when a query first uses its tables, so its error comes out of a query: it
    /// says that reading the trace failed, and in which file (`failed_reading`).
    fn run_next(&mut self, target: u8) -> Result<()> {
        if let Some(message) = &self.failed {
            return Err(Error::Engine(message.clone()));
        }
        // On the way to the derived tables, the events step derives too (from the events'
        // own buffers, before they become Arrow): the same work as the two steps with less
        // memory at its peak, since the events table does not wait beside the derivation.
        let derive_too = target >= 3;
        let Some(name) = self.next.as_ref().map(|s| s.name(derive_too)) else { return Ok(()) };
        let what = format!("{name} of {}", self.info.name);
        // Checked before the step starts. Interrupted while it runs, the step stops within
        // its decoding or its derivation and is left to the next query with what it has
        // done (`EventsStep::run`, `DerivationStep::run`).
        crate::interrupt::check(&what)?;
        let Some(step) = self.next.take() else { return Ok(()) };
        let started = Instant::now();
        let shown = Building::start(&what);
        let before = self.warnings.total();
        let result = match step {
            Step::Events(s) => s.run(self, shown.progress(), derive_too),
            Step::Derivation(s) => {
                let result = s.run(self);
                if result.is_err() && crate::interrupt::check(&what).is_err() {
                    self.next = Some(Step::Derivation(s));
                }
                result
            }
        };
        let result = match result {
            Err(e) if crate::interrupt::check(&what).is_ok() => Err(failed_reading(&self.info.name, name, e)),
            other => other,
        };
        let new = self.warnings.total() - before;
        let found = (new > 0).then(|| format!("{new} problem(s) found, see {}.warnings", self.info.name));
        shown.finish(started.elapsed(), result.is_ok(), found);
        if let Err(e) = &result
            && self.next.is_none()
        {
            self.failed = Some(e.to_string());
        }
        result
    }
}

/// A trace whose tables are in `tables` or, read from their file when first used, in `stored`
/// (a commdb store's).
pub fn stored_trace(
    meta: TraceMeta,
    tables: BTreeMap<&'static str, Vec<RecordBatch>>,
    warnings: Warnings,
    stored: BTreeMap<&'static str, StoredTable>,
) -> Trace {
    Trace::new(meta, Box::new(Built::complete(tables, warnings, stored)))
}

impl TableState for Built {
    fn ensure(&mut self, table: &str) -> Result<()> {
        Built::ensure(self, table)
    }

    fn event_columns(&mut self, projection: &[usize]) -> Result<Option<Vec<RecordBatch>>> {
        Built::event_columns(self, projection)
    }

    fn ensure_all(&mut self) -> Result<()> {
        Built::ensure_all(self)
    }

    fn is_built(&self, table: &str) -> bool {
        Built::is_built(self, table)
    }

    fn tables(&self) -> &BTreeMap<&'static str, Vec<RecordBatch>> {
        &self.tables
    }

    fn tables_mut(&mut self) -> &mut BTreeMap<&'static str, Vec<RecordBatch>> {
        &mut self.tables
    }

    fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    fn phases(&self) -> &LoadPhases {
        &self.phases
    }

    fn rename(&mut self, name: &str) {
        Built::rename(self, name);
    }

    fn stored_file(&self, table: &str) -> Option<StoredFile> {
        self.stored.get(table).map(|s| s.file.clone())
    }
}

/// Step 2: decode (when deferred), correct clocks, make the event tables.
struct EventsStep {
    raw: RawTrace,
    source: Option<EventSource>,
    /// Sync samples given beside the trace, replacing its own.
    clock_sync: Option<Vec<ClockSample>>,
    correction: Correction,
    /// What a run that was interrupted left done: the next run goes on from there.
    reached: Reached,
}

/// How far an interrupted run of the events step got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// Nothing: the events are to be decoded (when deferred) and their clocks corrected.
    Start,
    /// The events decoded and corrected in `raw` (their problems reported): the derivation is
    /// left.
    Corrected,
    /// With the controlled logical clock, the receives moved after their sends too (the first
    /// derivation's problems reported): the derivation of the moved events is left.
    Moved,
}

/// Whether the work of the statement running here was interrupted (an error it gave is then
/// the interruption, not a fault of the trace's).
fn interrupted() -> bool {
    crate::interrupt::check("").is_err()
}

impl EventsStep {
    /// Interrupted, it stops within its decoding, between the locations, or within its
    /// derivation, and leaves itself to the next query with what it has done (never the
    /// work of making the events into Arrow for a derivation that may not come).
    fn run(self: Box<Self>, built: &mut Built, progress: &LoadProgress, derive_too: bool) -> Result<()> {
        let EventsStep { mut raw, source, clock_sync, correction, mut reached } = *self;
        if reached == Reached::Start {
            let mut corrected = None;
            let decoding = source.as_ref().map(|source| {
                let plan = ClockPlan { correction, ranks: &raw.ranks, samples: clock_sync.as_deref() };
                built.phases.time("decoding events", || source.decode(Some(progress), &plan))
            });
            if let Some(decoding) = decoding {
                let decoded = match decoding {
                    Ok(decoded) => decoded,
                    Err(e) => {
                        if interrupted() {
                            built.next = Some(Step::Events(Box::new(EventsStep {
                                raw,
                                source,
                                clock_sync,
                                correction,
                                reached,
                            })));
                        }
                        return Err(e);
                    }
                };
                raw.events = decoded.events;
                raw.clock_sync = decoded.clock_sync;
                let names = std::mem::take(&mut raw.metrics.names);
                let definitions = std::mem::take(&mut raw.metrics.definitions);
                raw.metrics = RawMetrics { names, definitions, ..decoded.metrics };
                built.report_decoding(decoded.warnings);
                corrected = decoded.models;
            }
            if let Some(samples) = &clock_sync {
                raw.clock_sync = samples.clone();
            }
            let warnings = &mut built.warnings;
            let models = match corrected {
                Some(models) => models,
                None => built.phases.time("clock correction", || {
                    clock::correct(&mut raw.events, &mut raw.metrics, &raw.clock_sync, &raw.ranks, correction, warnings)
                }),
            };
            built.info.clock_correction = match correction {
                Correction::Off => "off",
                Correction::Model if models.is_empty() => "none",
                other => other.name(),
            }
            .to_string();
            reached = Reached::Corrected;
        }
        let nodes = NodeMap::new(&raw.ranks);
        let region_names: Vec<String> = raw.regions.iter().map(|r| r.name.clone()).collect();
        let streams = raw.events.streams();
        let start = Instant::now();
        built.tables.insert("locations", vec![raw.locations_batch(&streams)?]);
        built.tables.insert("clock_sync", vec![raw.clock_sync_batch()?]);
        built.tables.insert("metrics", vec![raw.metrics_batch()?]);
        built.tables.insert("states", vec![raw.states_batch()?]);
        built.phases.since("event tables to Arrow", start);
        let facts = Facts { ranks: raw.ranks.len(), locations: raw.locations.len(), events: raw.events.len() };
        if correction == Correction::Clc || derive_too {
            let derived = if correction == Correction::Clc {
                clc(&mut raw.events, &streams, &nodes, &raw.communicators, &mut reached, built)
            } else {
                deriving::derive(
                    &raw.events.columns(),
                    &streams,
                    &nodes,
                    &raw.communicators,
                    false,
                    &mut built.warnings,
                )
            };
            let derived = match derived {
                Ok(derived) => derived,
                Err(e) => {
                    if interrupted() {
                        built.next =
                            Some(Step::Events(Box::new(EventsStep { raw, source, clock_sync, correction, reached })));
                    }
                    return Err(e);
                }
            };
            // After a derivation the events are decoded again, a column at a time, for the
            // queries that read them, when the reader can: the whole table is not kept for them.
            match source {
                Some(source) if derive_too && correction != Correction::Clc && source.decodes_columns() => {
                    built.events_again = Some(EventsAgain {
                        source,
                        correction,
                        ranks: raw.ranks.clone(),
                        samples: clock_sync,
                        region_names: region_names.clone(),
                    });
                    drop(raw.events);
                }
                _ => {
                    // The columns built for queries that read only them give way to the whole table.
                    built.event_columns = None;
                    let events = built.phases.time("events to Arrow", || raw.events.into_batches(&region_names))?;
                    built.tables.insert("events", events);
                }
            }
            return finish(derived, &region_names, facts, built);
        }
        built.event_columns = None;
        let comms = std::mem::take(&mut raw.communicators);
        let events = built.phases.time("events to Arrow", || raw.events.into_batches(&region_names))?;
        built.tables.insert("events", events);
        built.next = Some(Step::Derivation(Box::new(DerivationStep { nodes, comms, region_names, facts })));
        Ok(())
    }
}

/// Derive with the controlled logical clock: derive, move the receives that precede their
/// send, derive again (quietly: the first derivation's warnings stand). `reached` says whether
/// an interrupted run moved them already, and is Moved once this run has.
fn clc(
    events: &mut EventParts,
    streams: &[PartStream],
    nodes: &NodeMap,
    comms: &[CommInfo],
    reached: &mut Reached,
    built: &mut Built,
) -> Result<deriving::Derived> {
    if *reached != Reached::Moved {
        let mut derived = deriving::derive(&events.columns(), streams, nodes, comms, true, &mut built.warnings)?;
        if derived.messages.violations() == 0 {
            return Ok(derived);
        }
        built.phases.extend(std::mem::take(&mut derived.phases));
        let warnings = &mut built.warnings;
        built.phases.time("controlled logical clock", || {
            for p in events.parts.iter_mut().filter(|p| p.ts_local.is_none()) {
                p.ts_local = Some(p.ts.clone());
            }
            clock::clc::apply(events, streams, &derived.messages.matched_events, warnings);
        });
        *reached = Reached::Moved;
    }
    // Times moved, the matching (per-stream order) did not.
    deriving::derive(&events.columns(), streams, nodes, comms, false, &mut Warnings::default())
}

/// Counts `trace_info` gives.
#[derive(Debug, Clone, Copy)]
struct Facts {
    ranks: usize,
    locations: usize,
    events: usize,
}

/// Step 3: derive from the `events` table.
struct DerivationStep {
    nodes: NodeMap,
    comms: Vec<CommInfo>,
    region_names: Vec<String>,
    facts: Facts,
}

impl DerivationStep {
    /// Derive; interrupted between its phases, it leaves the events table as it was, and its
    /// warnings unreported (they are found again when it runs again).
    fn run(&self, built: &mut Built) -> Result<()> {
        let events = built.tables.remove("events").unwrap_or_default();
        let (events, derived) = without_seq(events, |columns| {
            let streams = part_streams(columns);
            deriving::derive(columns, &streams, &self.nodes, &self.comms, false, &mut built.warnings)
        })?;
        built.tables.insert("events", events);
        let derived = derived?;
        finish(derived, &self.region_names, self.facts, built)
    }
}

/// The derived tables, then `trace_info` and `warnings`.
fn finish(derived: deriving::Derived, region_names: &[String], facts: Facts, built: &mut Built) -> Result<()> {
    let deriving::Derived { calls, messages, collectives, span: (first, last), phases } = derived;
    built.phases.extend(phases);
    let start = Instant::now();
    let violations = messages.violations();
    built.info.clock_violations = violations;
    if violations > 0 {
        built.warnings.add_many("clock_violation", violations, || {
            format!("{violations} matched messages are received before they are sent (see clock_violations())")
        });
    }
    built.tables.insert("calls", calls.into_batches(region_names)?);
    built.tables.insert("messages", messages.into_batches()?);
    built.tables.insert("collectives", vec![collectives]);
    // Times so far apart that their difference overflows come from a damaged timestamp.
    let span = last.checked_sub(first).ok_or_else(|| {
        Error::in_file(
            std::path::Path::new(&built.info.path),
            format!("event times from {first} to {last} ns span more than 292 years: a timestamp is damaged"),
        )
    })?;
    let info = assemble::info_batch(&built.info, facts.ranks, facts.locations, facts.events, span, &built.warnings)?;
    built.tables.insert("trace_info", vec![info]);
    built.tables.insert("warnings", vec![assemble::warnings_batch(&built.warnings)?]);
    built.phases.since("other tables to Arrow", start);
    debug_assert!(
        model::TABLES
            .iter()
            .all(|t| built.tables.contains_key(t.name) || (t.name == "events" && built.events_again.is_some()))
    );
    Ok(())
}

impl RawTrace {
    /// Correct clocks with the default (`Correction::Model`), derive, convert to Arrow.
    pub fn build(self) -> Result<Trace> {
        self.build_with(Correction::default())
    }

    /// The trace with its definition tables built; correcting clocks as asked, converting the
    /// events and deriving calls, messages and collectives wait for the first query that needs
    /// them ([`crate::deriving::steps`]).
    pub fn build_with(self, correction: Correction) -> Result<Trace> {
        self.build_later(None, None, correction)
    }

    /// `build_with` for a reader that left the events to `source` (decoded when first needed);
    /// `clock_sync` replaces the trace's own samples.
    pub fn build_later(
        mut self,
        source: Option<EventSource>,
        clock_sync: Option<Vec<ClockSample>>,
        correction: Correction,
    ) -> Result<Trace> {
        let mut warnings = std::mem::take(&mut self.warnings);
        assemble::report_unplaced(&self.ranks, &mut warnings);
        let mut tables: BTreeMap<&'static str, Vec<RecordBatch>> = BTreeMap::new();
        tables.insert("ranks", vec![self.ranks_batch()?]);
        tables.insert("regions", vec![self.regions_batch()?]);
        tables.insert("communicators", vec![self.communicators_batch()?]);
        tables.insert("metric_definitions", vec![self.metric_definitions_batch()?]);
        let meta = self.meta.clone();
        let built = staged(self, source, clock_sync, correction, tables, warnings);
        Ok(Trace::new(meta, Box::new(built)))
    }
}

/// The trace's state before its first query: step 1 done (the definition tables in `tables`).
fn staged(
    raw: RawTrace,
    source: Option<EventSource>,
    clock_sync: Option<Vec<ClockSample>>,
    correction: Correction,
    tables: BTreeMap<&'static str, Vec<RecordBatch>>,
    warnings: Warnings,
) -> Built {
    let info = raw.meta.clone();
    Built {
        tables,
        warnings,
        phases: LoadPhases::default(),
        info,
        next: Some(Step::Events(Box::new(EventsStep { raw, source, clock_sync, correction, reached: Reached::Start }))),
        failed: None,
        stored: BTreeMap::new(),
        event_columns: None,
        decoding_reported: false,
        events_again: None,
    }
}

/// The names of `columns` of the `events` table, for messages ("no column" when none).
fn column_names(columns: ColumnSet) -> String {
    let schema = model::EVENTS.schema();
    let names: Vec<&str> = columns.indices().map(|i| schema.field(i).name().as_str()).collect();
    if names.is_empty() { "no column".to_string() } else { names.join(", ") }
}

/// An error met while a trace's tables were built for a query, said as such: the statement is
/// not at fault, reading the trace `trace` (while doing `what`) is, and the error names the
/// file.
fn failed_reading(trace: &str, what: &str, e: Error) -> Error {
    Error::Engine(format!("reading trace {trace} failed ({what}): {e}"))
}

#[cfg(test)]
mod tests {
    use crate::generate::{GeneratorConfig, generate};
    use crate::trace::Trace;

    #[test]
    fn each_step_runs_when_a_table_it_makes_is_first_used_and_records_its_phases() {
        let cfg = GeneratorConfig { ranks: 8, ranks_per_node: 4, iterations: 4, ..GeneratorConfig::default() };
        let trace = generate(&cfg).unwrap().trace.build().unwrap();
        assert_eq!(trace.built_rows("ranks"), Some(8));
        assert_eq!(trace.built_rows("events"), None);
        assert_eq!(trace.built_rows("messages"), None);
        assert_eq!(trace.phases().iter().count(), 0, "opening builds the definitions only");

        let start = std::time::Instant::now();
        let events = trace.row_count("events").unwrap();
        assert!(events > 0 && trace.built_rows("events") == Some(events));
        assert_eq!(trace.built_rows("calls"), None, "the events do not derive calls");
        let names = |t: &Trace| t.phases().iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(&trace), ["clock correction", "event tables to Arrow", "events to Arrow"]);

        // A clone shares the built tables: the derivation runs once, for both.
        let clone = trace.clone();
        assert!(clone.row_count("messages").unwrap() > 0);
        let elapsed = start.elapsed().as_secs_f64();
        assert!(trace.built_rows("calls").is_some() && trace.built_rows("trace_info") == Some(1));
        assert_eq!(
            names(&trace),
            [
                "clock correction",
                "event tables to Arrow",
                "events to Arrow",
                "stream walk",
                "message matching",
                "msg_id order",
                "messages gather",
                "collectives",
                "other tables to Arrow",
            ]
        );
        let phases = trace.phases();
        let beside: Vec<&str> = phases.iter().filter(|p| p.beside).map(|p| p.name).collect();
        assert_eq!(beside, ["collectives"]);
        assert!(phases.iter().all(|p| p.seconds >= 0.0));
        assert!(phases.total() > 0.0 && phases.total() <= elapsed, "{phases}");
    }
}
