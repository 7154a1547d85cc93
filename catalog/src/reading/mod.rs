//! The readers of trace formats, one folder each (otf2/, paraver/, csv/, nsys/), with what they share:
//! the options of reading a trace (`OpenOptions`), the reading a group of whole ranks at a time
//! that a conversion in bounded memory uses (`InGroups`), and generated traces. Which reader
//! reads a path is decided by [`crate::formats`].

pub mod csv;
pub mod nsys;
pub mod otf2;
pub mod paraver;
pub mod paths;
pub mod shards;

pub use paths::{GENERATE_PREFIX, default_name};

use std::path::PathBuf;

use std::sync::Arc;

use crate::clock::Correction;
use crate::deriving::steps::ClockPlan;
use crate::error::{Error, Result};
use crate::events::EventParts;
use crate::generate::{GeneratorConfig, generate};
use crate::progress::LoadProgress;
use crate::reading::csv::TimeUnit;
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
    /// opened instead (`crate::formats::open`; `formats::read` always reads into memory). None:
    /// always in memory.
    pub memory_budget: Option<u64>,
}

/// A trace read a group of whole ranks at a time, for a conversion in bounded memory
/// ([`crate::convert`]): an OTF2 archive (`otf2::Pieces`), a Paraver trace (`paraver::pieces`) or
/// a CSV trace (`csv::pieces`).
pub trait InGroups: Send {
    /// The shards of a reader that splits the trace into scratch files of whole ranks first
    /// (Paraver, CSV), whose sizes give `events` and `groups` and whose models `prepare` fits;
    /// None for a reader that reads its ranks where they are (OTF2).
    fn shards(&self) -> Option<&shards::Shards> {
        None
    }
    /// `shards`, to fit their models.
    fn shards_mut(&mut self) -> Option<&mut shards::Shards> {
        None
    }
    /// Read what decoding needs besides the events (an OTF2 archive's local definitions) and
    /// fit the clock models as `clock` says (by default, into the shards' models, from the
    /// sync samples given beside the trace: the split formats have none of their own).
    fn prepare(&mut self, clock: &ClockPlan<'_>, warnings: &mut Warnings) -> Result<()> {
        if let Some(shards) = self.shards_mut() {
            shards.models = crate::clock::fit(clock.samples.unwrap_or(&[]), clock.ranks, clock.correction, warnings);
        }
        Ok(())
    }
    /// The trace's own clock sync samples (none for a format without them).
    fn clock_sync(&self) -> Vec<crate::trace::ClockSample> {
        Vec::new()
    }
    /// Whether `prepare` fitted clock models that the events are corrected with.
    fn corrects(&self) -> bool {
        self.shards().is_some_and(|s| !s.models.is_empty())
    }
    /// Events of the trace, as counted or estimated before decoding.
    fn events(&self) -> u64 {
        self.shards().map_or(0, |s| s.sizes.iter().sum())
    }
    /// The trace cut into groups of whole ranks, in rank order, each of about `events` events.
    fn groups(&self, events: u64) -> Vec<Vec<usize>> {
        self.shards().map_or_else(Vec::new, |s| shards::groups(&s.sizes, events))
    }
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

/// The sync samples of the file given beside the trace, if any.
pub(crate) fn clock_sync(options: &OpenOptions) -> Result<Option<Vec<crate::trace::ClockSample>>> {
    options
        .clock_sync
        .as_ref()
        .map(|sync| crate::reading::csv::sync::read(sync, options.time_unit.unwrap_or_default()))
        .transpose()
}

/// Correct and derive (when first needed), with the sync samples of the file given beside the
/// trace instead of its own, and `source` the events still to read (an OTF2 archive's).
pub(crate) fn build_later(
    raw: RawTrace,
    source: Option<crate::deriving::steps::EventSource>,
    options: &OpenOptions,
) -> Result<Trace> {
    raw.build_later(source, clock_sync(options)?, options.clock_correction)
}

/// A generated trace (`generate:KEY=VALUE,...`), in memory.
pub(crate) fn open_generated(spec: &str, path: &str, options: &OpenOptions) -> Result<Trace> {
    refuse_time_unit(path, "a generated trace", options)?;
    let cfg = GeneratorConfig::parse_spec(spec)?;
    refuse_beyond_budget(path, &cfg, options)?;
    let mut raw = generate(&cfg)?.trace;
    raw.meta.path = path.to_string();
    if let Some(nodes_file) = &options.nodes {
        crate::reading::csv::nodes::apply(nodes_file, &mut raw.ranks)?;
    }
    build_later(raw, None, options)
}

/// A `generate:` spec is generated in memory: refuse one whose estimated size is beyond the
/// memory budget (or, without a budget, the machine's memory) before anything is allocated.
fn refuse_beyond_budget(path: &str, cfg: &GeneratorConfig, options: &OpenOptions) -> Result<()> {
    let events = crate::generate::estimated_events(cfg);
    let bytes = events.saturating_mul(crate::memory::BYTES_PER_EVENT);
    let budget = options.memory_budget.unwrap_or_else(|| crate::memory::default_memory_limit() as u64 / 3 * 4);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_paths() {
        assert_eq!(default_name("../data/ping-pong.csv"), "ping_pong");
        assert_eq!(default_name("/x/2024 run/"), "t_2024_run");
        assert_eq!(default_name("generate:ranks=4"), "generated");
    }
}
