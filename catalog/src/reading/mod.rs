//! Opening a trace by path: the format is chosen from what the path is (a commdb store
//! directory, a CSV file, an OTF2 anchor, a `generate:` spec) or forced by `OpenOptions`.

pub mod csv;
pub mod otf2;
pub mod paraver;
pub mod paths;
pub mod shards;

use paths::otf2_name_source;
pub use paths::{GENERATE_PREFIX, default_name};

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::clock::Correction;
use crate::deriving::steps::ClockPlan;
use crate::error::{Error, Result};
use crate::events::EventParts;
use crate::generate::{GeneratorConfig, generate};
use crate::progress::LoadProgress;
use crate::reading::csv::TimeUnit;
use crate::store;
use crate::trace::{RawMetrics, RawTrace, Trace, Warnings};
use arrow::array::RecordBatch;

/// Options for reading a trace.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// A rank,node CSV giving the placement of ranks.
    pub nodes: Option<PathBuf>,
    /// Unit of CSV timestamps whose header does not say it (ns when not given).
    pub time_unit: Option<TimeUnit>,
    /// Force a format: otf2, csv or parquet (a commdb store).
    pub format: Option<String>,
    /// Where readers report how far they are.
    pub progress: Option<Arc<LoadProgress>>,
    /// Clock correction applied when the trace is built (a commdb store keeps the one it was
    /// converted with).
    pub clock_correction: Correction,
    /// A CSV of clock sync samples replacing the trace's own (see `csv::sync`).
    pub clock_sync: Option<PathBuf>,
    /// Tables of more bytes than this are not held in memory: an OTF2 archive, a Paraver or a
    /// CSV trace whose events would make more is converted once into a cache store, which is
    /// opened instead (`crate::convert::open`; `open` here always reads into memory). None:
    /// always in memory.
    pub memory_budget: Option<u64>,
}

/// A trace read a group of whole ranks at a time, for a conversion in bounded memory
/// (crate::convert): an OTF2 archive (`otf2::Pieces`), a Paraver trace (`paraver::pieces`) or
/// a CSV trace (`csv::pieces`).
pub trait InGroups: Send {
    /// Read what decoding needs besides the events (an OTF2 archive's local definitions) and
    /// fit the clock models as `clock` says.
    fn prepare(&mut self, clock: &ClockPlan<'_>, warnings: &mut Warnings) -> Result<()>;
    /// The trace's own clock sync samples (none for a format without them).
    fn clock_sync(&self) -> Vec<crate::trace::ClockSample> {
        Vec::new()
    }
    /// Whether `prepare` fitted clock models that the events are corrected with.
    fn corrects(&self) -> bool;
    /// Events of the trace, as counted or estimated before decoding.
    fn events(&self) -> u64;
    /// The trace cut into groups of whole ranks, in rank order, each of about `events` events.
    fn groups(&self, events: u64) -> Vec<Vec<usize>>;
    /// Decode and clock-correct one group (from `groups`): its events in (rank, thread) order,
    /// its metric samples.
    fn decode(&mut self, group: &[usize], warnings: &mut Warnings) -> Result<(EventParts, RawMetrics)>;
    /// After the last group: report what the groups found that is reported once.
    fn finish(&mut self, warnings: &mut Warnings);
    /// The `states` table, a batch at a time (`raw` holds the states read with the
    /// definitions).
    fn states(&mut self, raw: &RawTrace, out: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        out(raw.states_batch()?)
    }
}

/// Read the trace at `path`.
pub fn open(path: &str, options: &OpenOptions) -> Result<Trace> {
    let format = options.format.as_deref().map(str::to_ascii_lowercase);
    if let Some(spec) = path.strip_prefix(GENERATE_PREFIX) {
        return open_generated(spec, path, options);
    }
    let p = Path::new(path);
    if !p.exists() {
        return Err(Error::io(p, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory")));
    }
    let is_store = matches!(format.as_deref(), Some("parquet" | "store")) || (p.is_dir() && store::is_store(p));
    if is_store && options.clock_sync.is_some() {
        return Err(Error::argument(format!(
            "{path} is a commdb store, whose times were corrected when it was converted; give the clock sync file when converting the source trace"
        )));
    }
    if is_store {
        refuse_time_unit(path, "a commdb store", options)?;
    }
    if is_store && options.nodes.is_some() {
        return Err(Error::argument(format!(
            "{path} is a commdb store, whose messages were placed on nodes when it was converted; give the nodes file when converting the source trace"
        )));
    }
    let mut trace = match format.as_deref() {
        Some("csv") => csv_trace(p, options)?,
        Some("parquet" | "store") => store::read_with_progress(p, options.progress.as_deref())?,
        Some("otf2") => otf2_trace(p, options)?,
        Some("paraver" | "prv") => paraver_trace(p, options)?,
        Some(other) => {
            return Err(Error::argument(format!(
                "unknown trace type '{other}': expected otf2, paraver, csv or parquet"
            )));
        }
        None if p.is_dir() && store::is_store(p) => store::read_with_progress(p, options.progress.as_deref())?,
        None if is_csv(p) => csv_trace(p, options)?,
        None if is_otf2(p) => otf2_trace(p, options)?,
        None if is_paraver(p) => paraver_trace(p, options)?,
        None if p.is_dir() => {
            return Err(Error::in_file(
                p,
                "directory holds no commdb store (manifest.json), no OTF2 anchor (*.otf2) and no Paraver trace (*.prv)",
            ));
        }
        None => {
            return Err(Error::in_file(
                p,
                "unknown trace format: expected an OTF2 archive (*.otf2), a Paraver trace (*.prv, *.prv.gz), a .csv file, a commdb store directory or a generate: spec",
            ));
        }
    };
    if is_store && options.clock_correction != Correction::Model {
        let asked = options.clock_correction.name();
        let has = trace.meta.clock_correction.as_str();
        let same = has == asked || (asked == "off" && has == "none");
        if !same {
            return Err(Error::argument(format!(
                "{path} is a commdb store whose times were corrected with '{has}' when it was converted; clock correction '{asked}' cannot be applied to it: convert the source trace with --clock-correction {asked}"
            )));
        }
    }
    trace.meta.path = path.to_string();
    Ok(trace)
}

fn csv_trace(p: &Path, options: &OpenOptions) -> Result<Trace> {
    let csv = csv::CsvOptions {
        time_unit: options.time_unit,
        nodes: options.nodes.clone(),
        progress: options.progress.clone(),
    };
    let mut raw = csv::read(p, &csv)?;
    raw.meta.name = default_name(p.to_string_lossy().as_ref());
    raw.meta.path = p.display().to_string();
    build(raw, options)
}

/// `--time-unit` says the unit of CSV times: for a format that records its own unit it is
/// an error unless a clock sync CSV comes with it.
pub(crate) fn refuse_time_unit(path: &str, format: &str, options: &OpenOptions) -> Result<()> {
    match options.time_unit {
        Some(unit) if options.clock_sync.is_none() => Err(Error::argument(format!(
            "--time-unit {} applies to CSV traces and clock sync files; {path} is {format}, which records its own time unit",
            unit.name()
        ))),
        _ => Ok(()),
    }
}

fn paraver_trace(p: &Path, options: &OpenOptions) -> Result<Trace> {
    refuse_time_unit(&p.display().to_string(), "a Paraver trace", options)?;
    let mut raw = crate::reading::paraver::read_with_progress(p, options.progress.as_deref())?;
    if let Some(nodes_file) = &options.nodes {
        crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    build(raw, options)
}

fn otf2_trace(p: &Path, options: &OpenOptions) -> Result<Trace> {
    refuse_time_unit(&p.display().to_string(), "an OTF2 archive", options)?;
    let (mut raw, source) = crate::reading::otf2::read_definitions(p)?;
    if let Some(nodes_file) = &options.nodes {
        crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    raw.meta.name = default_name(&otf2_name_source(p));
    raw.build_later(Some(source), clock_sync(options)?, options.clock_correction)
}

/// The sync samples of the file given beside the trace, if any.
pub(crate) fn clock_sync(options: &OpenOptions) -> Result<Option<Vec<crate::trace::ClockSample>>> {
    options
        .clock_sync
        .as_ref()
        .map(|sync| crate::reading::csv::sync::read(sync, options.time_unit.unwrap_or_default()))
        .transpose()
}

/// Correct and derive (when first needed), with the sync samples of the file given beside the
/// trace instead of its own.
fn build(raw: RawTrace, options: &OpenOptions) -> Result<Trace> {
    raw.build_later(None, clock_sync(options)?, options.clock_correction)
}

fn open_generated(spec: &str, path: &str, options: &OpenOptions) -> Result<Trace> {
    refuse_time_unit(path, "a generated trace", options)?;
    let cfg = GeneratorConfig::parse_spec(spec)?;
    refuse_beyond_budget(path, &cfg, options)?;
    let mut raw = generate(&cfg)?.trace;
    raw.meta.path = path.to_string();
    if let Some(nodes_file) = &options.nodes {
        crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    build(raw, options)
}

/// A `generate:` spec is generated in memory: refuse one whose estimated size is beyond the
/// memory budget (or, without a budget, the machine's memory) before anything is allocated.
fn refuse_beyond_budget(path: &str, cfg: &GeneratorConfig, options: &OpenOptions) -> Result<()> {
    let events = crate::generate::estimated_events(cfg);
    let bytes = events.saturating_mul(crate::convert::BYTES_PER_EVENT);
    let budget = options.memory_budget.unwrap_or_else(|| crate::session::default_memory_limit() as u64 / 3 * 4);
    if bytes <= budget {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    Err(Error::argument(format!(
        "{path}: the generated trace would hold about {events} events, about {:.1} GiB in memory, more than the memory budget ({:.2} GiB): write it to disk with `commdb generate DIR ... --format otf2` and open DIR/traces.otf2 (read in bounded memory), use fewer ranks or iterations, or raise --memory-limit",
        gib(bytes),
        gib(budget)
    )))
}

/// Whether `p` is a CSV file.
pub(crate) fn is_csv(p: &Path) -> bool {
    p.is_file() && has_extension(p, "csv")
}

/// Whether `p` is a Paraver trace or a directory holding one.
pub(crate) fn is_paraver(p: &Path) -> bool {
    crate::reading::paraver::is_prv(p) || (p.is_dir() && contains_prv(p))
}

/// Whether `p` is an OTF2 anchor or a directory holding one.
pub(crate) fn is_otf2(p: &Path) -> bool {
    has_extension(p, "otf2") || (p.is_dir() && contains_extension(p, "otf2"))
}

fn has_extension(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

fn contains_prv(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().any(|e| crate::reading::paraver::is_prv(&e.path())))
        .unwrap_or(false)
}

fn contains_extension(dir: &Path, ext: &str) -> bool {
    std::fs::read_dir(dir).map(|entries| entries.flatten().any(|e| has_extension(&e.path(), ext))).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_paths() {
        assert_eq!(default_name("../data/ping-pong.csv"), "ping_pong");
        assert_eq!(default_name("/x/2024 run/"), "t_2024_run");
        assert_eq!(default_name("generate:ranks=4"), "generated");
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = open("/no/such/trace.csv", &OpenOptions::default()).unwrap_err().to_string();
        assert!(e.contains("/no/such/trace.csv") && e.contains("no such file"), "{e}");
    }
}
