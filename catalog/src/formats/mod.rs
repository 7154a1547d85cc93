//! The trace formats commdb reads, in one list (`FORMATS`). Each format says its names (as
//! `--format` takes them), which paths are its traces, how to read a trace whole, and, for a
//! format read a group of whole ranks at a time (`Grouping`), how many events a trace holds
//! before it is read, how to convert it into a store in bounded memory, and which files
//! identify it for the cache ([`crate::convert::cache`]). Opening (`open`, through the cache when a
//! trace would not fit the memory budget; `read`, whole), converting (`convert`), the cache and
//! the command line's help all read this list, the way Perfetto's trace processor keeps
//! one list of importers: a new reader is its folder under `reading/`, its entry here, and
//! one line in `FORMATS`.

mod csv;
mod nsys;
mod otf2;
mod paraver;
mod store;

use std::path::{Path, PathBuf};

use crate::clock::Correction;
use crate::convert::{Converted, Limits, cache};
use crate::error::{Error, Result};
use crate::memory::BYTES_PER_EVENT;
pub(crate) use crate::reading::refuse_time_unit;
use crate::reading::{self, GENERATE_PREFIX, OpenOptions};
use crate::trace::Trace;

/// A trace format.
pub trait Format: Sync {
    /// The name `--format` takes, then its aliases.
    fn names(&self) -> &'static [&'static str];
    /// What a trace of it is, with the paths that are one: `an OTF2 archive (*.otf2 or its
    /// directory)`.
    fn described(&self) -> &'static str;
    /// What a trace of it is, briefly, for messages: `an OTF2 archive`.
    fn what(&self) -> &'static str;
    /// Whether `path` is a trace of this format (by its name, or a directory by what it holds).
    fn recognises(&self, path: &Path) -> bool;
    /// Read the trace at `path` whole (its tables are built when first used).
    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Trace>;
    /// How it is read a group of whole ranks at a time, when it can be.
    fn grouping(&self) -> Option<&dyn Grouping> {
        None
    }
}

/// The events of a trace counted or estimated before they are read, with what the format read
/// to count them, which opening the trace goes on from rather than read it again (an OTF2
/// archive's global definitions).
#[derive(Debug)]
pub struct Measured {
    pub events: u64,
    pub read: Option<Box<dyn std::any::Any + Send>>,
}

/// What a format read a group of whole ranks at a time does besides reading.
pub trait Grouping: Sync {
    /// Events of the trace at `path`, counted or estimated before its events are read.
    fn measure(&self, path: &Path) -> Result<Measured>;
    /// Read the trace at `path` whole, going on from what `measure` read.
    fn open_measured(
        &self,
        format: &dyn Format,
        path: &Path,
        options: &OpenOptions,
        read: Box<dyn std::any::Any + Send>,
    ) -> Result<Trace> {
        let _already_read = read;
        format.open(path, options)
    }
    /// Convert the trace at `path` into a store at `dir`, a group of ranks at a time.
    fn convert(&self, path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted>;
    /// `convert`, going on from what `measure` read.
    fn convert_measured(
        &self,
        path: &Path,
        dir: &Path,
        options: &OpenOptions,
        limits: &Limits,
        read: Box<dyn std::any::Any + Send>,
    ) -> Result<Converted> {
        let _already_read = read;
        self.convert(path, dir, options, limits)
    }
    /// The file that stands for the trace at `path` (a directory's anchor or .prv).
    fn anchor(&self, path: &Path) -> Result<PathBuf> {
        Ok(path.to_path_buf())
    }
    /// The files besides the anchor whose sizes and modification times tell the cache whether
    /// the trace changed.
    fn companions(&self, _anchor: &Path) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The name a cache store of the trace whose anchor is `anchor` starts with.
    fn cache_name(&self, anchor: &Path) -> String {
        crate::reading::default_name(&anchor.display().to_string())
    }
    /// Whether it records its own time unit (so `--time-unit` does not apply to it).
    fn has_time_unit(&self) -> bool {
        true
    }
}

/// Every format, in the order a path is tried against them.
pub static FORMATS: &[&dyn Format] = &[&store::Store, &csv::Csv, &otf2::Otf2, &paraver::Paraver, &nsys::Nsys];

/// The format `--format` names.
pub fn named(name: &str) -> Result<&'static dyn Format> {
    FORMATS.iter().copied().find(|f| f.names().iter().any(|n| n.eq_ignore_ascii_case(name))).ok_or_else(|| {
        let names: Vec<&str> = FORMATS.iter().map(|f| f.names()[0]).collect();
        Error::argument(format!("unknown trace type '{name}': expected {}", one_of(&names)))
    })
}

/// The format of the trace at `path`: the one `options.format` forces, else the first that
/// recognises it; None when none does.
pub fn of(path: &Path, options: &OpenOptions) -> Result<Option<&'static dyn Format>> {
    match options.format.as_deref() {
        Some(name) => named(name).map(Some),
        None => Ok(FORMATS.iter().copied().find(|f| f.recognises(path))),
    }
}

/// The formats in words, for the help and for a path no format recognises.
pub fn described() -> String {
    let all: Vec<&str> = FORMATS.iter().map(|f| f.described()).collect();
    format!("{}, or generate:KEY=VALUE,... for a generated trace", all.join(", "))
}

/// `a, b or c`.
fn one_of(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words.concat(),
    }
}

/// Read the trace at `path` (a path of one of `FORMATS`, or a `generate:` spec) whole.
pub fn read(path: &str, options: &OpenOptions) -> Result<Trace> {
    if let Some(spec) = path.strip_prefix(GENERATE_PREFIX) {
        return crate::reading::open_generated(spec, path, options);
    }
    let p = Path::new(path);
    if !p.exists() {
        return Err(Error::io(p, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory")));
    }
    let Some(format) = of(p, options)? else {
        let what = if p.is_dir() { "directory holds no trace" } else { "unknown trace format" };
        return Err(Error::in_file(p, format!("{what}: expected {}", described())));
    };
    read_as(format, path, options)
}

/// Read the trace at `path`, of `format`, whole.
fn read_as(format: &dyn Format, path: &str, options: &OpenOptions) -> Result<Trace> {
    let mut trace = format.open(Path::new(path), options)?;
    trace.meta.path = path.to_string();
    Ok(trace)
}

/// Open the trace at `path` as `read` does, except a trace read a group of ranks at a time
/// whose tables would pass `options.memory_budget`: that one is opened through its cache store
/// ([`crate::convert::cache`]), converted first when there is none or the trace changed.
pub fn open(path: &str, options: &OpenOptions) -> Result<Trace> {
    let p = Path::new(path);
    if let Some(budget) = options.memory_budget
        && let Some((format, grouping)) = grouped(path, options)?
        && p.exists()
    {
        if grouping.has_time_unit() {
            refuse_time_unit(path, format.what(), options)?;
        }
        let Measured { events, read } = grouping.measure(p)?;
        if events.saturating_mul(BYTES_PER_EVENT) > budget {
            let anchor = grouping.anchor(p)?;
            let anchor = std::fs::canonicalize(&anchor).map_err(|e| Error::io(&anchor, e))?;
            let identity = cache::Identity {
                companions: grouping.companions(&anchor),
                name: grouping.cache_name(&anchor),
                anchor,
            };
            // A conversion goes on from what counting the events read, as opening does.
            let convert = |dir: &Path, options: &OpenOptions, limits: &Limits| match read {
                Some(read) => grouping.convert_measured(p, dir, options, limits, read),
                None => grouping.convert(p, dir, options, limits),
            };
            let mut trace = cache::open(p, &identity, convert, options, events, budget)?;
            trace.meta.path = path.to_string();
            return Ok(trace);
        }
        // Its format is known and what counting its events read is taken on: neither is
        // done again.
        let mut trace = match read {
            Some(read) => grouping.open_measured(format, p, options, read)?,
            None => format.open(p, options)?,
        };
        trace.meta.path = path.to_string();
        return Ok(trace);
    }
    read(path, options)
}

/// The format of the trace at `path` and how it is read a group of ranks at a time; None for a
/// store, a generated trace, a format that is not read so, and with the controlled logical
/// clock, which needs the trace in memory.
pub fn grouped(path: &str, options: &OpenOptions) -> Result<Option<(&'static dyn Format, &'static dyn Grouping)>> {
    if options.clock_correction == Correction::Clc || path.starts_with(reading::GENERATE_PREFIX) {
        return Ok(None);
    }
    Ok(of(Path::new(path), options)?.and_then(|f| f.grouping().map(|g| (f, g))))
}

/// Whether `convert` reads the trace at `path` a group of ranks at a time (`grouped`).
pub fn in_groups(path: &str, options: &OpenOptions) -> bool {
    matches!(grouped(path, options), Ok(Some(_)))
}

/// Convert the trace at `path` (of a format read a group of ranks at a time, by `grouped`) into
/// a store at `dir`, a group of ranks at a time.
pub fn convert(path: &Path, dir: &Path, options: &OpenOptions, limits: &Limits) -> Result<Converted> {
    match grouped(&path.to_string_lossy(), options)? {
        Some((_, grouping)) => grouping.convert(path, dir, options, limits),
        None => Err(Error::argument(format!(
            "{}: only OTF2 archives, Paraver and CSV traces are converted a group of ranks at a time, and not with the controlled logical clock",
            path.display()
        ))),
    }
}

/// Whether `p`'s extension is `ext`.
fn has_extension(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_named_and_a_wrong_name_lists_them() {
        for f in FORMATS {
            for name in f.names() {
                assert_eq!(named(name).unwrap().names()[0], f.names()[0]);
            }
        }
        let e = named("xml").err().unwrap().to_string();
        assert!(e.contains("expected parquet, csv, otf2, paraver or nsys"), "{e}");
    }

    #[test]
    fn an_otf2_archive_opened_under_a_budget_goes_on_from_the_definitions_its_count_read() {
        use crate::generate::{GeneratorConfig, generate};
        let cfg = GeneratorConfig { ranks: 6, iterations: 2, ..GeneratorConfig::default() };
        let raw = generate(&cfg).unwrap().trace;
        let dir = tempfile::tempdir().unwrap();
        crate::export::otf2::write(&raw, dir.path()).unwrap();
        let anchor = dir.path().join("traces.otf2");
        // Counting the events reads the global definitions, and keeps them for opening.
        let grouping = otf2::Otf2.grouping().unwrap();
        let measured = grouping.measure(&anchor).unwrap();
        let kept = measured.read.expect("the definitions the count read");
        assert!(kept.downcast_ref::<crate::reading::otf2::Global>().is_some());
        let events = raw.events.len() as u64;
        assert_eq!(measured.events, events);
        // Opened from them, or through `open` under a budget the trace fits, the trace is the
        // one opened from the path alone.
        let from_count = grouping.open_measured(&otf2::Otf2, &anchor, &OpenOptions::default(), kept).unwrap();
        let options = OpenOptions { memory_budget: Some(1 << 30), ..OpenOptions::default() };
        let budgeted = open(&anchor.display().to_string(), &options).unwrap();
        let alone = read(&anchor.display().to_string(), &OpenOptions::default()).unwrap();
        for t in [&from_count, &budgeted] {
            for table in ["ranks", "locations", "regions", "events", "messages"] {
                let rows = |t: &Trace| t.table(table).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
                assert_eq!(rows(t), rows(&alone), "{table}");
            }
        }
        assert_eq!(budgeted.meta.path, anchor.display().to_string());
        // Converted from them, a group of ranks at a time, the store holds the same tables.
        let kept = grouping.measure(&anchor).unwrap().read.expect("the definitions the count read");
        let store = tempfile::tempdir().unwrap();
        let limits = crate::convert::Limits { group_events: events / 3 + 1, ..Default::default() };
        grouping.convert_measured(&anchor, &store.path().join("s"), &OpenOptions::default(), &limits, kept).unwrap();
        let converted = read(&store.path().join("s").display().to_string(), &OpenOptions::default()).unwrap();
        for table in ["ranks", "locations", "regions", "events", "messages"] {
            let rows = |t: &Trace| t.table(table).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
            assert_eq!(rows(&converted), rows(&alone), "{table} converted");
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = read("/no/such/trace.csv", &OpenOptions::default()).unwrap_err().to_string();
        assert!(e.contains("/no/such/trace.csv") && e.contains("no such file"), "{e}");
    }
}
