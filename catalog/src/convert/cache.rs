//! Opening a trace too big for memory (an OTF2 archive, a Paraver or a CSV trace) through a cache
//! store: the first opening converts it a group of ranks at a time ([`crate::convert`]) into a
//! store in the user's cache directory (`$COMMDB_CACHE_DIR`, else `$XDG_CACHE_HOME/commdb`,
//! else `~/.cache/commdb`), whose tables queries then scan in their files; later openings
//! reuse that store as long as the trace's files (their sizes and modification times) and the
//! options that shape the tables (clock correction, nodes file, clock sync file, a CSV trace's
//! time unit) are the same.
//! A changed trace is converted again.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::Building;
use crate::reading::OpenOptions;
use crate::store;
use crate::trace::Trace;

/// What identifies a trace for the cache (its format says: [`crate::formats::Grouping`]): the file
/// that stands for it, the files beside it whose sizes and modification times tell whether it
/// changed, and the name its cache store starts with.
#[derive(Debug, Clone)]
pub struct Identity {
    pub anchor: PathBuf,
    pub companions: Vec<PathBuf>,
    pub name: String,
}

/// The file beside a cache store saying what it was converted from.
const SOURCE: &str = "source.json";

/// What a cache store was converted from: enough to tell when the archive or the options
/// changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Source {
    commdb: String,
    anchor: String,
    /// (file, bytes, modified in ns since the epoch) of the anchor, the global definitions and
    /// every file of the archive's directory of locations, in name order.
    files: Vec<(String, u64, u128)>,
    clock_correction: String,
    nodes: Option<(String, u64, u128)>,
    clock_sync: Option<(String, u64, u128)>,
    /// The unit of a CSV trace's times.
    time_unit: Option<String>,
}

/// Where cache stores are kept.
pub fn cache_root() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("COMMDB_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("commdb")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("commdb")))
}

fn stamp(path: &Path) -> Result<(String, u64, u128)> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let modified =
        m.modified().ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Ok((path.display().to_string(), m.len(), modified))
}

impl Source {
    fn of(identity: &Identity, options: &OpenOptions) -> Result<Self> {
        let anchor = identity.anchor.as_path();
        let mut files = vec![stamp(anchor)?];
        for companion in &identity.companions {
            files.push(stamp(companion)?);
        }
        Ok(Source {
            commdb: env!("CARGO_PKG_VERSION").to_string(),
            anchor: anchor.display().to_string(),
            files,
            clock_correction: options.clock_correction.name().to_string(),
            nodes: options.nodes.as_deref().map(stamp).transpose()?,
            clock_sync: options.clock_sync.as_deref().map(stamp).transpose()?,
            time_unit: options.time_unit.map(|u| u.name().to_string()),
        })
    }
}

/// The cache directory of the trace whose anchor (or .prv) is `anchor`: named after the trace,
/// with a checksum of its full path.
fn cache_dir(root: &Path, identity: &Identity) -> PathBuf {
    let (anchor, name) = (&identity.anchor, &identity.name);
    let key = crc32fast::hash(anchor.display().to_string().as_bytes());
    root.join("stores").join(format!("{name}-{key:08x}"))
}

/// Open the trace at `path` (of `events` events by an OTF2 archive's definitions or a Paraver
/// file's size, more than `budget` bytes of tables) through its cache store, converting it
/// first when there is none or the trace changed.
pub fn open(
    path: &Path,
    identity: &Identity,
    convert: impl FnOnce(&Path, &OpenOptions, &super::Limits) -> Result<super::Converted>,
    options: &OpenOptions,
    events: u64,
    budget: u64,
) -> Result<Trace> {
    let root = cache_root().ok_or_else(|| {
        Error::argument(format!(
            "{}: its tables would not fit the memory budget and no cache directory is known to convert it into; set COMMDB_CACHE_DIR (or convert it with commdb convert and open the store)",
            path.display()
        ))
    })?;
    let dir = cache_dir(&root, identity);
    let store_dir = dir.join("store");
    let source = Source::of(identity, options)?;
    let recorded: Option<Source> =
        std::fs::read_to_string(dir.join(SOURCE)).ok().and_then(|text| serde_json::from_str(&text).ok());
    if recorded.as_ref() == Some(&source) && store::is_store(&store_dir) {
        mark_used(&dir);
        return store::read_with_progress(&store_dir, options.progress.as_deref());
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    // The old record goes first: a conversion that stops half-way leaves no record to trust.
    let _ = std::fs::remove_file(dir.join(SOURCE));
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let what = format!(
        "converting {} ({:.0} M events, about {:.1} GiB of tables, more than the {:.1} GiB memory budget) into the cache store {}",
        path.display(),
        events as f64 / 1e6,
        gib(events.saturating_mul(crate::memory::BYTES_PER_EVENT)),
        gib(budget),
        store_dir.display()
    );
    let started = Instant::now();
    let building = Building::start(&what);
    let convert_options = OpenOptions { progress: Some(building.share()), memory_budget: None, ..options.clone() };
    let limits = super::Limits::default();
    let converted = convert(&store_dir, &convert_options, &limits);
    building.finish_told(
        started.elapsed(),
        converted.is_ok(),
        "once: later openings reuse it while the archive is unchanged",
    );
    converted?;
    let text = serde_json::to_string_pretty(&source).map_err(|e| Error::Engine(e.to_string()))?;
    let record = dir.join(SOURCE);
    std::fs::write(&record, text).map_err(|e| Error::io(&record, e))?;
    mark_used(&dir);
    store::read_with_progress(&store_dir, options.progress.as_deref())
}

/// The file of a cache store's directory whose modification time is its last opening.
const USED: &str = "last_opened";

/// Record that the cache store in `dir` is being opened (for `entries`; a failure to record
/// it only leaves the time older).
fn mark_used(dir: &Path) {
    let _ = std::fs::write(dir.join(USED), b"");
}

/// A cache store, as `commdb cache` lists it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its directory (the store is `store` inside).
    pub dir: PathBuf,
    /// The trace it was converted from (None when its record is missing: a conversion that
    /// stopped half-way, which the next opening redoes).
    pub source: Option<String>,
    /// Bytes on disk.
    pub bytes: u64,
    /// When it was last opened (or converted).
    pub last_opened: Option<SystemTime>,
}

fn bytes_under(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            std::fs::read_dir(path).map_or(0, |entries| entries.flatten().map(|e| bytes_under(&e.path())).sum())
        }
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// The cache stores under `root` (`cache_root()` by default), most recently opened first.
pub fn entries(root: &Path) -> Result<Vec<Entry>> {
    let stores = root.join("stores");
    let Ok(listing) = std::fs::read_dir(&stores) else { return Ok(Vec::new()) };
    let mut out: Vec<Entry> = listing
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| {
            let dir = e.path();
            let source = std::fs::read_to_string(dir.join(SOURCE))
                .ok()
                .and_then(|text| serde_json::from_str::<Source>(&text).ok())
                .map(|s| s.anchor);
            let last_opened = std::fs::metadata(dir.join(USED)).and_then(|m| m.modified()).ok();
            Entry { bytes: bytes_under(&dir), dir, source, last_opened }
        })
        .collect();
    out.sort_by(|a, b| b.last_opened.cmp(&a.last_opened).then_with(|| a.dir.cmp(&b.dir)));
    Ok(out)
}

/// Remove a cache store: its record first, so that a removal cut short leaves a directory the
/// next opening converts again rather than trusts.
pub fn remove(entry: &Entry) -> Result<()> {
    let _ = std::fs::remove_file(entry.dir.join(SOURCE));
    std::fs::remove_dir_all(&entry.dir).map_err(|e| Error::io(&entry.dir, e))
}
