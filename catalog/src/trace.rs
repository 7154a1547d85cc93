//! A trace in memory. `RawTrace` is what a reader or the generator produces (definitions and
//! raw events); `Trace` holds the Arrow tables of the model, ready to be registered as a SQL
//! schema. Turning one into the other (clock correction, derivation, conversion) is
//! `RawTrace::build`, whose steps run as tables are first used ([`crate::deriving::steps`],
//! behind the `TableState` a `Trace` holds).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arrow::array::{RecordBatch, StringArray};

use crate::error::Result;
use crate::events::{EventParts, NONE_I32};
use crate::model;
use crate::phases::LoadPhases;

/// A rank and where it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankInfo {
    pub rank: i32,
    pub node: Option<String>,
    pub name: String,
    /// The application (1-based, in the trace's order) of a format that has several (Paraver).
    pub application: Option<i32>,
}

/// A location (thread, GPU stream, metric location) of a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationInfo {
    pub location_id: i64,
    pub rank: i32,
    pub thread: i32,
    pub kind: String,
    pub name: String,
    /// The node it ran on, when not its rank's (another application's sampler of node
    /// counters, numbered after the ranks); None: its rank's node.
    pub node: Option<String>,
}

/// A code region. Its index in `RawTrace::regions` is what the events' region column refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInfo {
    pub region_id: i64,
    pub name: String,
    pub paradigm: String,
    pub role: Option<String>,
    pub file: Option<String>,
    pub line: Option<i64>,
}

/// A communicator and its members (world ranks, in communicator rank order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommInfo {
    pub comm: i32,
    pub name: String,
    pub members: Vec<i32>,
    /// A communicator whose only member is whichever rank calls (MPI_COMM_SELF, an OTF2
    /// group of type COMM_SELF): `members` is empty, its rank 0 is the caller, and each rank's
    /// collectives on it are operations of their own.
    pub per_rank: bool,
}

/// A clock synchronisation sample or offset point (see the `clock_sync` table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    pub rank: i32,
    pub session: i32,
    pub local_ts: i64,
    pub master_ts: i64,
    pub round_trip: Option<i64>,
    pub std_dev_ns: Option<i64>,
    /// (local, master) in fractional ns when the source is finer than whole ns (OTF2 ticks):
    /// the fit uses these, so rounding happens once, when event times are mapped.
    pub exact: Option<(f64, f64)>,
}

impl ClockSample {
    /// (local, master) as the fit reads them: exact when known, else the table's ns.
    pub fn point(&self) -> (f64, f64) {
        self.exact.unwrap_or((self.local_ts as f64, self.master_ts as f64))
    }
}

/// Metric samples as columns.
#[derive(Debug, Clone, Default)]
pub struct RawMetrics {
    pub rank: Vec<i32>,
    pub thread: Vec<i32>,
    pub ts: Vec<i64>,
    /// Index into `names`.
    pub metric: Vec<i32>,
    pub value: Vec<f64>,
    pub names: Vec<String>,
    /// What the writer says of each name (same index; absent when it says nothing).
    pub definitions: Vec<MetricDefinition>,
}

/// What a trace's writer says of a metric: how its values relate to time (OTF2's metric mode,
/// lower case: `accumulated_start`, `relative_last`, `absolute_point`, ...), its unit and what
/// it counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricDefinition {
    pub mode: Option<String>,
    pub unit: Option<String>,
    pub description: Option<String>,
}

/// Intervals a thread spent in a state (Paraver state records), before conversion to Arrow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawStates {
    pub rank: Vec<i32>,
    pub thread: Vec<i32>,
    pub begin: Vec<i64>,
    pub end: Vec<i64>,
    pub state: Vec<i32>,
    /// Index into `names`, or NONE_I32 when the state is not named.
    pub name: Vec<i32>,
    pub names: Vec<String>,
}

/// Problems found while loading, counted by kind; the first occurrence is kept as an example.
#[derive(Debug, Clone, Default)]
pub struct Warnings {
    entries: BTreeMap<String, (i64, String)>,
}

impl Warnings {
    /// Count one occurrence of `code`; `example` describes it (kept for the first only).
    pub fn add(&mut self, code: &str, example: impl FnOnce() -> String) {
        self.add_many(code, 1, example);
    }

    /// Count `n` occurrences of `code`.
    pub fn add_many(&mut self, code: &str, n: i64, example: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        match self.entries.get_mut(code) {
            Some(e) => e.0 += n,
            None => {
                self.entries.insert(code.to_string(), (n, example()));
            }
        }
    }

    pub fn merge(&mut self, other: Warnings) {
        for (code, (n, msg)) in other.entries {
            self.add_many(&code, n, || msg);
        }
    }

    pub fn count(&self, code: &str) -> i64 {
        self.entries.get(code).map_or(0, |e| e.0)
    }

    pub fn total(&self) -> i64 {
        self.entries.values().map(|e| e.0).sum()
    }

    /// (code, count, message) in code order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64, &str)> {
        self.entries.iter().map(|(c, (n, m))| (c.as_str(), *n, m.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Trace-level facts that become the `trace_info` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceMeta {
    pub name: String,
    pub path: String,
    pub format: String,
    pub format_version: Option<String>,
    pub creator: Option<String>,
    pub timer_resolution_hz: Option<i64>,
    /// Absolute time of ts = 0, in ns since the Unix epoch.
    pub start_wallclock_ns: Option<i64>,
    /// How times were corrected (see `trace_info.clock_correction`); set by `build`.
    pub clock_correction: String,
    /// Messages received before they were sent, after correction; set by `build`.
    pub clock_violations: i64,
}

/// What a reader produces: definitions and raw events, before derivation.
#[derive(Debug, Clone, Default)]
pub struct RawTrace {
    pub meta: TraceMeta,
    pub ranks: Vec<RankInfo>,
    pub locations: Vec<LocationInfo>,
    pub regions: Vec<RegionInfo>,
    pub events: EventParts,
    pub communicators: Vec<CommInfo>,
    pub clock_sync: Vec<ClockSample>,
    pub metrics: RawMetrics,
    pub states: RawStates,
    pub warnings: Warnings,
}

/// The tables of a trace as they are built: those built so far, the problems found and where
/// the time went, and how to build the rest when a table is first used ([`crate::deriving::steps`]
/// builds them from a reader's `RawTrace`, or reads them from a store).
pub trait TableState: Send + std::fmt::Debug {
    /// Build `table` (and what it needs) unless it is built.
    fn ensure(&mut self, table: &str) -> Result<()>;
    /// Build every table.
    fn ensure_all(&mut self) -> Result<()>;
    fn is_built(&self, table: &str) -> bool;
    fn tables(&self) -> &BTreeMap<&'static str, Vec<RecordBatch>>;
    fn tables_mut(&mut self) -> &mut BTreeMap<&'static str, Vec<RecordBatch>>;
    fn warnings(&self) -> &Warnings;
    fn phases(&self) -> &LoadPhases;
    /// The trace is now called `name` (for tables built later).
    fn rename(&mut self, name: &str);
    /// The `events` table projected on `projection`, building only those columns while the
    /// whole table is not built (None when it cannot: the whole table is then built).
    fn event_columns(&mut self, _projection: &[usize]) -> Result<Option<Vec<RecordBatch>>> {
        Ok(None)
    }
    /// The file a table not read into memory is kept in, for queries to scan it there.
    fn stored_file(&self, _table: &str) -> Option<StoredFile> {
        None
    }
}

/// The smallest and largest value (NULLs left out) of the column a stored table is ordered by
/// (`rank`, or `send_ts` for messages), in one of its parts: a scan skips the parts its filters
/// rule out before reading or checking them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyRange {
    pub column: String,
    pub min: i64,
    pub max: i64,
}

/// What the manifest says a part of a stored table holds, for a scan to skip the parts its
/// filters rule out ([`crate::session::parts`]): the range of the table's order column, and the
/// values of its kind column when they are few ([`crate::part_values`]). A table kept in one
/// file, or a store written before, has neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartBounds {
    pub key: Option<KeyRange>,
    pub values: Option<crate::part_values::PartValues>,
}

/// A table kept in a commdb store: one Parquet file, or a directory of parts (a large table cut
/// into pieces of consecutive rows), each with the checksum the store's manifest gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// The table's file, or its directory of parts.
    pub path: std::path::PathBuf,
    /// The files to read, in row order, with their checksums and, for parts, what they hold.
    pub files: Vec<(std::path::PathBuf, crate::column_sums::FileSums, PartBounds)>,
    pub rows: usize,
    /// Which writing of the store the trace was opened from ([`crate::stamp::Stamp`]): a store
    /// converted again at the same path since is refused, never read mixed with the old one.
    pub stamp: Option<crate::stamp::Stamp>,
}

/// A trace as Arrow tables, one entry per table of the model. A trace opened from a source
/// holds its definitions at first; the other tables are built when a query first uses one,
/// once, and shared by every later query and every clone of the `Trace`.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Facts known at open. `clock_correction` and `clock_violations` are filled for a trace
    /// read from a store; for others they are in `trace_info`.
    pub meta: TraceMeta,
    built: Arc<Mutex<Box<dyn TableState>>>,
    /// Which pieces of its store's files were checked against the manifest's checksums, and
    /// the outcome: shared by every scan of its tables, so that a piece is checked once in a
    /// process whatever the number of sessions, queries and tasks that read it.
    checked: crate::session::file_checks::Checked,
}

impl Trace {
    /// A trace whose tables `state` holds or builds.
    pub fn new(meta: TraceMeta, state: Box<dyn TableState>) -> Self {
        Trace { meta, built: Arc::new(Mutex::new(state)), checked: Arc::default() }
    }

    /// Which pieces of its store's files were checked, shared by every scan of its tables.
    pub fn checked(&self) -> crate::session::file_checks::Checked {
        self.checked.clone()
    }

    fn built(&self) -> MutexGuard<'_, Box<dyn TableState>> {
        self.built.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The batches of a table of the model (empty when the trace has no such rows), built
    /// first if no query has used it yet.
    pub fn table(&self, name: &str) -> Result<Vec<RecordBatch>> {
        let mut built = self.built();
        built.ensure(name)?;
        Ok(built.tables().get(name).cloned().unwrap_or_default())
    }

    /// The batches of a table projected on `projection` (all columns when None), built first
    /// if no query has used it yet: of `events`, only the columns asked for while no query has
    /// needed the whole table ([`crate::deriving::event_columns`]).
    pub fn projected(&self, name: &str, projection: Option<&[usize]>) -> Result<Vec<RecordBatch>> {
        let mut built = self.built();
        if let (Some(p), "events") = (projection, name)
            && let Some(batches) = built.event_columns(p)?
        {
            return Ok(batches);
        }
        built.ensure(name)?;
        let batches = built.tables().get(name).cloned().unwrap_or_default();
        match projection {
            Some(p) => Ok(batches.iter().map(|b| b.project(p)).collect::<std::result::Result<_, _>>()?),
            None => Ok(batches),
        }
    }

    /// Rows of a table, built first if needed (a table kept in a store's file is counted by
    /// its manifest, not read).
    pub fn row_count(&self, name: &str) -> Result<usize> {
        if let Some(file) = self.stored_file(name) {
            return Ok(file.rows);
        }
        Ok(self.table(name)?.iter().map(RecordBatch::num_rows).sum())
    }

    /// Rows of a table if it is built (None while a query has yet to use it).
    pub fn built_rows(&self, name: &str) -> Option<usize> {
        let built = self.built();
        built.is_built(name).then(|| built.tables().get(name).map_or(0, |b| b.iter().map(RecordBatch::num_rows).sum()))
    }

    /// The file a table is kept in while it is not read into memory (a commdb store's large
    /// tables): queries scan it there.
    pub fn stored_file(&self, name: &str) -> Option<StoredFile> {
        self.built().stored_file(name)
    }

    /// The directory of the commdb store this trace is read from (None for a trace read from
    /// another format into memory).
    pub fn store_dir(&self) -> Option<std::path::PathBuf> {
        let file = self.stored_file("events")?;
        file.path.parent().map(std::path::Path::to_path_buf)
    }

    /// Build every table now.
    pub fn build_all(&self) -> Result<()> {
        self.built().ensure_all()
    }

    /// (table name, batches) in model order, every table built.
    pub fn tables(&self) -> Result<Vec<(&'static str, Vec<RecordBatch>)>> {
        let mut built = self.built();
        built.ensure_all()?;
        Ok(model::TABLES.iter().map(|t| (t.name, built.tables().get(t.name).cloned().unwrap_or_default())).collect())
    }

    /// Every problem found: the steps that build the `warnings` table run first.
    pub fn warnings(&self) -> Result<Warnings> {
        let mut built = self.built();
        built.ensure("warnings")?;
        Ok(built.warnings().clone())
    }

    /// The problems found by the steps run so far.
    pub fn warnings_so_far(&self) -> Warnings {
        self.built().warnings().clone()
    }

    /// Where the time of the steps run so far went.
    pub fn phases(&self) -> LoadPhases {
        self.built().phases().clone()
    }

    /// Give the trace another schema name.
    pub fn rename(&mut self, name: &str) -> Result<()> {
        self.meta.name = name.to_string();
        let mut built = self.built();
        built.rename(name);
        let info = built.tables_mut().get_mut("trace_info").and_then(|b| b.first_mut());
        if let Some(batch) = info {
            let mut columns = batch.columns().to_vec();
            columns[0] = Arc::new(StringArray::from(vec![name.to_string(); batch.num_rows()]));
            *batch = RecordBatch::try_new(batch.schema(), columns)?;
        }
        Ok(())
    }
}

/// Where each rank ran: node names in order of first appearance, and per rank the index of
/// its node (NONE_I32 where unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeMap {
    pub names: Vec<String>,
    pub of_rank: Vec<i32>,
}

impl NodeMap {
    pub fn new(ranks: &[RankInfo]) -> Self {
        let n = ranks.iter().map(|r| r.rank.max(-1) + 1).max().unwrap_or(0) as usize;
        let mut map = NodeMap { names: Vec::new(), of_rank: vec![NONE_I32; n] };
        for r in ranks {
            if let (Ok(i), Some(node)) = (usize::try_from(r.rank), r.node.as_deref()) {
                let key = match map.names.iter().position(|s| s == node) {
                    Some(k) => k,
                    None => {
                        map.names.push(node.to_string());
                        map.names.len() - 1
                    }
                };
                map.of_rank[i] = key as i32;
            }
        }
        map
    }

    /// Node index of a rank, NONE_I32 when unknown.
    #[inline]
    pub fn node(&self, rank: i32) -> i32 {
        usize::try_from(rank).ok().and_then(|r| self.of_rank.get(r).copied()).unwrap_or(NONE_I32)
    }
}
