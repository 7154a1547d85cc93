//! A pure-Rust OTF2 reader (format versions 1.x to 3.x, both byte orders). The anchor names
//! the chunk sizes; the global definitions give strings, the system tree (the node of each
//! rank is the "node" ancestor of its location group), location groups (ranks: their order in
//! MPI's COMM_LOCATIONS group is their MPI_COMM_WORLD rank), locations (threads, in id order
//! within their rank), regions, groups and communicators (whose members become world ranks)
//! and metrics. Each location's local definitions (mapping tables, clock offsets) and events
//! are then decoded in parallel with rayon, straight into the `events` columns; opening a
//! trace reads the definitions only and leaves this to the first query that needs the events
//! (`read_definitions`).
//!
//! The on-disk layout was read off archives written by Score-P and by the reference library
//! and checked against `otf2-print`; see `buffer`, `defs` and `events` for the record layouts.

pub mod anchor;
pub mod buffer;
pub mod defs;
pub mod events;
pub mod group_types;
pub mod older;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::deriving::event_columns::{ColumnParts, DecodedColumns};
use crate::deriving::steps::{Beside, ClockPlan, DecodedEvents, DeferredEvents, EventSource};
use crate::error::{Error, Result};
use crate::events::{ColumnSet, EventParts, NONE_I32};
use crate::trace::{
    ClockSample, CommInfo, LocationInfo, RankInfo, RawMetrics, RawTrace, RegionInfo, TraceMeta, Warnings,
};
use defs::{GROUP_COMM_GROUP, GROUP_COMM_LOCATIONS, GROUP_COMM_SELF, GlobalDefs};

const PARADIGM_MPI: u8 = 4;

/// The anchor file of an archive given as the anchor itself or a directory holding one.
pub fn find_anchor(path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    let is_anchor = |p: &Path| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("otf2"));
    crate::reading::paths::only_file_in(path, is_anchor, ("OTF2 anchor file (*.otf2)", "OTF2 anchors"))
}

pub(crate) fn paradigm_name(p: u8) -> &'static str {
    const NAMES: [&str; 25] = [
        "unknown",
        "user",
        "compiler",
        "openmp",
        "mpi",
        "cuda",
        "measurement_system",
        "pthread",
        "hmpp",
        "ompss",
        "hardware",
        "gaspi",
        "upc",
        "shmem",
        "winthread",
        "qtthread",
        "acethread",
        "tbbthread",
        "openacc",
        "opencl",
        "mtapi",
        "sampling",
        "none",
        "hip",
        "kokkos",
    ];
    NAMES.get(usize::from(p)).copied().unwrap_or("unknown")
}

pub(crate) fn role_name(r: u8) -> Option<&'static str> {
    const NAMES: [&str; 39] = [
        "unknown",
        "function",
        "wrapper",
        "loop",
        "code",
        "parallel",
        "sections",
        "section",
        "workshare",
        "single",
        "single_sblock",
        "master",
        "critical",
        "critical_sblock",
        "atomic",
        "barrier",
        "implicit_barrier",
        "flush",
        "ordered",
        "ordered_sblock",
        "task",
        "task_create",
        "task_wait",
        "coll_one2all",
        "coll_all2one",
        "coll_all2all",
        "coll_other",
        "file_io",
        "point2point",
        "rma",
        "data_transfer",
        "artificial",
        "thread_create",
        "thread_wait",
        "task_untied",
        "allocate",
        "deallocate",
        "reallocate",
        "file_io_metadata",
    ];
    NAMES.get(usize::from(r)).copied()
}

fn location_kind(k: u8) -> &'static str {
    match k {
        1 => "cpu",
        2 => "gpu",
        3 => "metric",
        _ => "unknown",
    }
}

/// World rank of every location group, and (rank, thread) of every location.
struct Placement {
    rank_of_group: HashMap<u32, i32>,
    location: HashMap<u64, (i32, i32)>,
}

fn placement(d: &GlobalDefs) -> Placement {
    let group_of: HashMap<u64, u32> = d.locations.iter().map(|l| (l.id, l.group)).collect();
    let world = d
        .groups
        .iter()
        .filter(|(_, g)| g.kind == GROUP_COMM_LOCATIONS)
        .min_by_key(|(id, g)| (g.paradigm != PARADIGM_MPI, **id))
        .map(|(_, g)| g);
    let mut rank_of_group: HashMap<u32, i32> = HashMap::new();
    if let Some(w) = world {
        for (r, loc) in w.members.iter().enumerate() {
            if let Some(&g) = group_of.get(loc) {
                rank_of_group.entry(g).or_insert(r as i32);
            }
        }
    }
    let mut rest: Vec<u32> = d.location_groups.keys().copied().filter(|g| !rank_of_group.contains_key(g)).collect();
    rest.sort_unstable();
    let mut next = rank_of_group.values().copied().max().map_or(0, |m| m + 1);
    for g in rest {
        rank_of_group.insert(g, next);
        next += 1;
    }
    let mut by_group: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for l in &d.locations {
        by_group.entry(l.group).or_default().push(l.id);
    }
    let mut location = HashMap::new();
    for (g, mut locs) in by_group {
        locs.sort_unstable();
        let rank = rank_of_group.get(&g).copied().unwrap_or_else(|| {
            let r = next;
            next += 1;
            r
        });
        for (t, l) in locs.into_iter().enumerate() {
            location.insert(l, (rank, t as i32));
        }
    }
    Placement { rank_of_group, location }
}

/// The members of every communicator as world ranks, in communicator rank order, resolved as
/// the reference reader resolves them: a COMM_GROUP lists ranks of its paradigm's
/// COMM_LOCATIONS group (all of them when flagged GLOBAL_MEMBERS), a COMM_LOCATIONS or
/// LOCATIONS group lists locations, a COMM_SELF group lists nobody because its one member is
/// whichever rank calls (those communicators are returned apart), and a group of unknown type
/// lists world ranks. A communicator over a group of regions or metrics has no members: its
/// peers stay NULL, and a warning says so. Members that resolve to no rank are NONE_I32,
/// which the tables show as NULL.
struct Communicators {
    members: HashMap<u32, Vec<i32>>,
    per_rank: Vec<u32>,
}

fn comm_members(d: &GlobalDefs, p: &Placement, warnings: &mut Warnings) -> Communicators {
    let rank_of_location = |loc: u64| p.location.get(&loc).map_or(NONE_I32, |x| x.0);
    let as_rank = |m: u64| i32::try_from(m).unwrap_or(NONE_I32);
    let mut out = Communicators { members: HashMap::new(), per_rank: Vec::new() };
    for (id, comm) in &d.comms {
        let Some(g) = d.groups.get(&comm.group) else {
            warnings.add("otf2_comm_without_group", || {
                format!("communicator {id} refers to group {} which is not defined; its peers are NULL", comm.group)
            });
            out.members.insert(*id, Vec::new());
            continue;
        };
        let members: Vec<i32> = match g.kind {
            GROUP_COMM_GROUP | GROUP_COMM_LOCATIONS | defs::GROUP_LOCATIONS => match member_locations(d, g) {
                Some(locations) => locations.into_iter().map(|l| l.map_or(NONE_I32, rank_of_location)).collect(),
                None => g.members.iter().map(|&m| as_rank(m)).collect(),
            },
            GROUP_COMM_SELF => {
                out.per_rank.push(*id);
                Vec::new()
            }
            defs::GROUP_REGIONS | defs::GROUP_METRIC => {
                warnings.add("otf2_comm_group_type", || {
                    format!(
                        "communicator {id} ('{}') is defined over a group of {}, not of ranks; its peers are NULL",
                        d.string(comm.name).unwrap_or(""),
                        if g.kind == defs::GROUP_REGIONS { "regions" } else { "metrics" }
                    )
                });
                Vec::new()
            }
            _ => g.members.iter().map(|&m| as_rank(m)).collect(),
        };
        out.members.insert(*id, members);
    }
    out
}

/// Every RMA window's communicator and its members as (rank, thread) of their locations, in
/// communicator rank order: an RMA record names its remote end by that rank. Score-P's
/// accelerator windows are over a group of locations (the host thread and its streams), so
/// the member is a location, not only a rank. A member that resolves to no location is
/// (NONE_I32, NONE_I32).
fn windows(d: &GlobalDefs, p: &Placement) -> HashMap<u32, events::Window> {
    let none = (NONE_I32, NONE_I32);
    let comms: HashMap<u32, &defs::Comm> = d.comms.iter().map(|(id, c)| (*id, c)).collect();
    d.rma_wins
        .iter()
        .map(|(&win, &comm)| {
            let locations = comms.get(&comm).and_then(|c| d.groups.get(&c.group)).and_then(|g| member_locations(d, g));
            let members: Vec<(i32, i32)> = locations
                .unwrap_or_default()
                .into_iter()
                .map(|l| l.and_then(|l| p.location.get(&l).copied()).unwrap_or(none))
                .collect();
            (win, events::Window { comm: i32::try_from(comm).unwrap_or(NONE_I32), members })
        })
        .collect()
}

/// The locations of a communicator group's members, in communicator rank order, as the
/// reference reader resolves them: a COMM_GROUP lists ranks of its paradigm's COMM_LOCATIONS
/// group (all of them when flagged GLOBAL_MEMBERS; a rank beyond it is None), a COMM_LOCATIONS
/// or LOCATIONS group lists locations. None for a group that lists no locations (a COMM_GROUP
/// of a paradigm without COMM_LOCATIONS, or a group of another type).
fn member_locations(d: &GlobalDefs, g: &defs::Group) -> Option<Vec<Option<u64>>> {
    match g.kind {
        GROUP_COMM_GROUP => {
            let b = d.groups.values().find(|b| b.kind == GROUP_COMM_LOCATIONS && b.paradigm == g.paradigm)?;
            Some(if g.flags & defs::GROUP_FLAG_GLOBAL_MEMBERS != 0 && g.members.is_empty() {
                b.members.iter().map(|&l| Some(l)).collect()
            } else {
                g.members.iter().map(|&m| b.members.get(m as usize).copied()).collect()
            })
        }
        GROUP_COMM_LOCATIONS | defs::GROUP_LOCATIONS => Some(g.members.iter().map(|&l| Some(l)).collect()),
        _ => None,
    }
}

/// The attributes whose values an enter or leave keeps (`events::Reference`): by name, a
/// location attribute ending in `_STREAM_REF` (Score-P's `CUDA_STREAM_REF`, and its kin for
/// other accelerator models) and a number ending in `_EVENT_REF`.
fn references(d: &GlobalDefs) -> HashMap<u32, events::Reference> {
    const LOCATION: u8 = 13;
    d.attributes
        .iter()
        .filter_map(|(&id, &(name, ty))| {
            let name = d.string(name)?;
            if name.ends_with("_STREAM_REF") && ty == LOCATION {
                Some((id, events::Reference::Stream))
            } else if name.ends_with("_EVENT_REF") && matches!(ty, 3 | 4) {
                Some((id, events::Reference::Event))
            } else {
                None
            }
        })
        .collect()
}

/// Event files whose location the global definitions do not define. Beside the event files
/// of every defined location they are locations the measurement opened and left out of the
/// definitions (Score-P 1.x wrote such files for CUDA streams it never used): the reference
/// reader reads the defined locations only, and so does commdb, naming the others in a warning
/// (`otf2_undefined_event_file`). Where a defined location has no event file as well, or none
/// is defined, the definitions do not belong to these event files (a replaced or damaged
/// traces.def): an error, never a trace that leaves them out.
fn check_event_files(base: &Path, d: &defs::GlobalDefs, warnings: &mut Warnings) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(base) else { return Ok(()) };
    let defined: std::collections::HashSet<u64> = d.locations.iter().map(|l| l.id).collect();
    let mut strangers: Vec<String> = Vec::new();
    let mut found: std::collections::HashSet<u64> = std::collections::HashSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_suffix(".evt").and_then(|stem| stem.parse::<u64>().ok()) {
            if defined.contains(&id) {
                found.insert(id);
            } else {
                strangers.push(name);
            }
        }
    }
    if strangers.is_empty() {
        return Ok(());
    }
    strangers.sort();
    let listed = || {
        format!(
            "{}{}",
            strangers.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            if strangers.len() > 5 { ", ..." } else { "" }
        )
    };
    if !defined.is_empty() && found.len() == defined.len() {
        warnings.add_many("otf2_undefined_event_file", strangers.len() as i64, || {
            format!(
                "{} event files in {} belong to no location the definitions define ({}); as the reference reader does, their events are not read",
                strangers.len(),
                base.display(),
                listed()
            )
        });
        return Ok(());
    }
    let global = base.with_extension("def");
    Err(Error::in_file(
        &global,
        format!(
            "the global definitions define {} locations but {} event files in {} belong to none of them ({}): the definitions do not match the event files",
            d.locations.len(),
            strangers.len(),
            base.display(),
            listed()
        ),
    ))
}

/// Warnings for locations read without their data: an empty event file where the definitions
/// give events, a missing local definitions file where others have one (its clock offsets and
/// id mappings are lost).
fn report_missing_parts<'a>(
    parts: impl Iterator<Item = (&'a Option<(std::path::PathBuf, u64)>, &'a Option<std::path::PathBuf>)> + Clone,
    warnings: &mut Warnings,
) {
    let empty: Vec<&(std::path::PathBuf, u64)> = parts.clone().filter_map(|p| p.0.as_ref()).collect();
    if let Some((file, events)) = empty.first() {
        let n = empty.len();
        warnings.add_many("otf2_empty_event_file", n as i64, || {
            format!(
                "{}: the event file is empty but the definitions give its location {events} events; {n} location(s) like it were read without events",
                file.display()
            )
        });
    }
    let total = parts.clone().count();
    let missing: Vec<&std::path::PathBuf> = parts.filter_map(|p| p.1.as_ref()).collect();
    if let Some(file) = missing.first()
        && missing.len() < total
    {
        let n = missing.len();
        warnings.add_many("otf2_missing_local_definitions", n as i64, || {
            format!(
                "{}: the local definitions are missing while other locations have theirs; its clock offsets and id mappings are lost ({n} location(s))",
                file.display()
            )
        });
    }
}

pub fn read(path: &Path) -> Result<RawTrace> {
    read_with_progress(path, None)
}

/// Read an OTF2 archive, counting decoded locations in `progress`.
pub fn read_with_progress(path: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<RawTrace> {
    let (mut raw, source) = read_definitions(path)?;
    let keep = ClockPlan { correction: crate::clock::Correction::Off, ranks: &[], samples: None };
    let decoded = source.decode(progress, &keep)?;
    raw.events = decoded.events;
    raw.clock_sync = decoded.clock_sync;
    let m = decoded.metrics;
    raw.metrics = RawMetrics {
        names: std::mem::take(&mut raw.metrics.names),
        definitions: std::mem::take(&mut raw.metrics.definitions),
        ..m
    };
    raw.warnings.merge(decoded.warnings);
    Ok(raw)
}

/// An archive whose anchor and global definitions are read: what decoding its locations needs.
struct Archive {
    anchor: anchor::Anchor,
    base: PathBuf,
    d: GlobalDefs,
    place: Placement,
    comms: Communicators,
    metrics: MetricDefs,
}

impl Archive {
    fn located(&self) -> Located<'_> {
        Located {
            anchor: &self.anchor,
            base: &self.base,
            d: &self.d,
            place: &self.place,
            comms: &self.comms,
            metrics: &self.metrics,
        }
    }
}

/// An archive's anchor and global definitions, read once: what counting its events needs, and
/// what opening it goes on from (`Global::read`, `read_definitions_from`).
#[derive(Debug)]
pub struct Global {
    anchor: anchor::Anchor,
    base: PathBuf,
    d: GlobalDefs,
    warnings: Warnings,
}

impl Global {
    /// Read the anchor and global definitions of the archive at `path` (its anchor or directory).
    pub fn read(path: &Path) -> Result<Global> {
        let anchor_path = find_anchor(path)?;
        let anchor = anchor::read(&anchor_path)?;
        let base = anchor_path.with_extension("");
        let mut warnings = Warnings::default();
        let d = defs::read_global(&base.with_extension("def"), anchor.chunk_size_definitions, &mut warnings)?;
        Ok(Global { anchor, base, d, warnings })
    }

    /// The events its locations define (estimated from an event file's size where the count is
    /// 0), before any is read.
    pub fn events(&self) -> u64 {
        self.d.locations.iter().map(|l| location_events(&self.base, l)).sum()
    }
}

/// The trace and archive of `path` from its anchor and global definitions, read already.
fn archive_of(path: &Path, global: Global) -> Result<(RawTrace, Archive)> {
    let Global { anchor, base, d, mut warnings } = global;
    let place = placement(&d);
    let comms = comm_members(&d, &place, &mut warnings);
    let metric_defs = MetricDefs::of(&d);
    check_event_files(&base, &d, &mut warnings)?;
    let (ranks, locations) = ranks_and_locations(&d, &place, &mut warnings);
    let metrics = RawMetrics {
        names: metric_defs.names.clone(),
        definitions: metric_defs.definitions.clone(),
        ..RawMetrics::default()
    };
    let raw = RawTrace {
        meta: meta(path, anchor.clone(), &d),
        ranks,
        locations,
        regions: regions(&d),
        events: EventParts::default(),
        communicators: communicators(&d, &comms),
        clock_sync: Vec::new(),
        metrics,
        states: Default::default(),
        warnings,
    };
    Ok((raw, Archive { anchor, base, d, place, comms, metrics: metric_defs }))
}

/// Read an OTF2 archive's anchor and global definitions, and check that its event files are
/// there; decoding the locations' local definitions and events is left to the returned
/// source, run when the events are first needed.
pub fn read_definitions(path: &Path) -> Result<(RawTrace, EventSource)> {
    read_definitions_from(path, Global::read(path)?)
}

/// `read_definitions` of the archive at `path`, whose anchor and global definitions were read
/// already (to count its events).
pub fn read_definitions_from(path: &Path, global: Global) -> Result<(RawTrace, EventSource)> {
    let (raw, archive) = archive_of(path, global)?;
    Ok((raw, Box::new(archive)))
}

impl DeferredEvents for Archive {
    /// Every location's local definitions, then the clock models their offsets (or the samples
    /// given beside the trace) give, then every location's events, each corrected as soon as it
    /// is decoded; all put together.
    fn decode(&self, progress: Option<&crate::progress::LoadProgress>, clock: &ClockPlan<'_>) -> Result<DecodedEvents> {
        let (parts, decoding) = decode_all(&self.located(), progress, clock, Ok)?;
        let Decoding { clock_sync, models, mut warnings } = decoding;
        let (events, mut metrics) = gather(parts, RawMetrics::default(), &mut warnings);
        crate::clock::correct_metrics(&mut metrics, &crate::clock::Fits::of(&models));
        Ok(DecodedEvents { events, clock_sync, metrics, warnings, models: Some(models) })
    }

    /// The same decoding, each location's events reduced to the `wanted` columns as soon as
    /// they are decoded and corrected (the rest of its buffers go back to the allocator for the
    /// next location). None, before decoding anything, when two locations share a (rank,
    /// thread) stream (`decodes_columns`): the whole table regroups their events, which a part
    /// at a time cannot.
    fn decode_columns(
        &self,
        progress: Option<&crate::progress::LoadProgress>,
        clock: &ClockPlan<'_>,
        wanted: ColumnSet,
        region_names: &[String],
    ) -> Result<Option<DecodedColumns>> {
        // Known from the definitions: nothing is decoded for a None.
        if !self.decodes_columns() {
            return Ok(None);
        }
        let keep = |d: events::Decoded| {
            let rows = d.events.len();
            let columns = d.events.into_columns(wanted, region_names)?;
            Ok((rows, columns, d.warnings))
        };
        let (parts, decoding) = decode_all(&self.located(), progress, clock, keep)?;
        let mut warnings = decoding.warnings;
        // As the whole table's parts: the empty ones left out, their problems not.
        let mut kept = Vec::with_capacity(parts.len());
        for p in parts {
            let (n, columns, found) = p.decoded;
            warnings.merge(found);
            if n > 0 {
                kept.push((n, columns));
            }
        }
        let mut by_column: Vec<Vec<arrow::array::ArrayRef>> = vec![Vec::with_capacity(kept.len()); wanted.len()];
        let mut rows = Vec::with_capacity(kept.len());
        for (n, columns) in kept {
            rows.push(n);
            for (arrays, (_, column)) in by_column.iter_mut().zip(columns) {
                arrays.push(column);
            }
        }
        let mut table = ColumnParts::new(rows);
        for (index, arrays) in wanted.indices().zip(by_column) {
            table.insert(index, arrays)?;
        }
        Ok(Some(DecodedColumns { parts: table, warnings }))
    }

    /// The same decoding, each location's events counted and dropped as soon as they are
    /// decoded, its metric samples kept. None, before decoding anything, as `decode_columns`.
    fn decode_beside(
        &self,
        progress: Option<&crate::progress::LoadProgress>,
        clock: &ClockPlan<'_>,
    ) -> Result<Option<Beside>> {
        if !self.decodes_columns() {
            return Ok(None);
        }
        let keep = |d: events::Decoded| Ok((d.events.len(), d.metrics, d.warnings));
        let (parts, decoding) = decode_all(&self.located(), progress, clock, keep)?;
        let Decoding { clock_sync, models, mut warnings } = decoding;
        let mut counts = std::collections::BTreeMap::new();
        let mut metrics = RawMetrics::default();
        for p in parts {
            let (n, samples, found) = p.decoded;
            warnings.merge(found);
            if n > 0 {
                counts.insert((p.rank, p.thread), n as i64);
            }
            add_samples(&mut metrics, p.rank, p.thread, samples);
        }
        crate::clock::correct_metrics(&mut metrics, &crate::clock::Fits::of(&models));
        Ok(Some(Beside { counts, clock_sync, metrics, warnings }))
    }

    /// Whether no two locations share a (rank, thread) stream (`decode_columns` answers then).
    fn decodes_columns(&self) -> bool {
        let mut streams = std::collections::HashSet::with_capacity(self.d.locations.len());
        self.d.locations.iter().all(|l| streams.insert(self.place.location.get(&l.id).copied()))
    }
}

/// What decoding every location gives beside its events: the clock sync samples, the models
/// the events were corrected with, and the problems found before the locations' own.
struct Decoding {
    clock_sync: Vec<ClockSample>,
    models: Vec<crate::clock::model::RankModel>,
    warnings: Warnings,
}

/// Every location's local definitions, the clock models, then every location decoded,
/// corrected and handed to `keep`; the parts in (rank, thread) order.
fn decode_all<T: Send>(
    a: &Located<'_>,
    progress: Option<&crate::progress::LoadProgress>,
    clock: &ClockPlan<'_>,
    keep: impl Fn(events::Decoded) -> Result<T> + Sync,
) -> Result<(Vec<Part<T>>, Decoding)> {
    let mut warnings = Warnings::default();
    let locals = read_locals(a)?;
    let clock_sync = clock_samples(a.d, &locals);
    let samples = clock.samples.unwrap_or(&clock_sync);
    let models = crate::clock::fit(samples, clock.ranks, clock.correction, &mut warnings);
    let fits = crate::clock::Fits::of(&models);
    if let Some(p) = progress {
        p.set_total(a.d.locations.len() as u64);
    }
    let mut parts = decode_locations(a, a.d.locations.iter().zip(locals).collect(), &fits, progress, keep)?;
    parts.sort_by_key(|p| (p.rank, p.thread));
    report_missing_parts(parts.iter().map(|p| (&p.empty_events, &p.missing_defs)), &mut warnings);
    Ok((parts, Decoding { clock_sync, models, warnings }))
}

/// What a location was read without: an empty event file where the definitions give events
/// (the file, the events), a missing local definitions file.
type MissingParts = (Option<(PathBuf, u64)>, Option<PathBuf>);

/// An OTF2 archive decoded a group of whole ranks at a time, for a conversion in bounded memory
/// ([`crate::convert`]): the local definitions (small) and the clock models are read once for all
/// locations, then each group's event files are decoded and corrected as for the whole trace.
pub struct Pieces {
    archive: Archive,
    /// Each location's local definitions until its group is decoded, in location order.
    locals: Vec<Option<Local>>,
    /// Location indices in (rank, thread) order.
    order: Vec<usize>,
    /// The samples of the archive's clock offsets.
    clock_sync: Vec<ClockSample>,
    /// The models the events are corrected with.
    models: Vec<crate::clock::model::RankModel>,
    /// (empty event file, missing local definitions) of every location decoded so far.
    missing: Vec<MissingParts>,
}

/// Bytes of an event file per event assumed for locations whose definition does not count
/// their events (the count is optional in OTF2: some writers leave it 0). Events take 2 to 20
/// bytes, most about 10: 4 errs towards more events, smaller groups and the cache store.
const MIN_EVENT_BYTES: u64 = 4;

/// The events of a location: the definitions' count, or when that is 0 an estimate from the
/// size of its event file.
fn location_events(base: &Path, l: &defs::Location) -> u64 {
    if l.events > 0 {
        return l.events;
    }
    std::fs::metadata(base.join(format!("{}.evt", l.id))).map_or(0, |m| m.len() / MIN_EVENT_BYTES)
}

/// Read an OTF2 archive's definitions, to decode its events a group of ranks at a time.
pub fn read_in_pieces(path: &Path) -> Result<(RawTrace, Pieces)> {
    read_in_pieces_from(path, Global::read(path)?)
}

/// `read_in_pieces` of the archive at `path`, whose anchor and global definitions were read
/// already (to count its events).
pub fn read_in_pieces_from(path: &Path, global: Global) -> Result<(RawTrace, Pieces)> {
    let (raw, archive) = archive_of(path, global)?;
    let d = &archive.d;
    let mut order: Vec<usize> = (0..d.locations.len()).collect();
    let key = |i: &usize| archive.place.location.get(&d.locations[*i].id).copied().unwrap_or((NONE_I32, 0));
    order.sort_by_key(key);
    let pieces =
        Pieces { archive, locals: Vec::new(), order, clock_sync: Vec::new(), models: Vec::new(), missing: Vec::new() };
    Ok((raw, pieces))
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").field("base", &self.archive.base).field("locations", &self.order.len()).finish()
    }
}

impl crate::reading::InGroups for Pieces {
    /// Read every location's local definitions and fit the clock models as `clock` says.
    fn prepare(&mut self, clock: &ClockPlan<'_>, warnings: &mut Warnings) -> Result<()> {
        let locals = read_locals(&self.archive.located())?;
        self.clock_sync = clock_samples(&self.archive.d, &locals);
        let samples = clock.samples.unwrap_or(&self.clock_sync);
        self.models = crate::clock::fit(samples, clock.ranks, clock.correction, warnings);
        self.locals = locals.into_iter().map(Some).collect();
        Ok(())
    }

    fn clock_sync(&self) -> Vec<ClockSample> {
        self.clock_sync.clone()
    }

    fn corrects(&self) -> bool {
        !self.models.is_empty()
    }

    /// Events of all locations, by the definitions' counts (or their files' sizes where the
    /// definitions do not count them).
    fn events(&self) -> u64 {
        self.archive.d.locations.iter().map(|l| location_events(&self.archive.base, l)).sum()
    }

    /// The locations cut into groups of whole ranks, in (rank, thread) order, each of about
    /// `events` events by the definitions' counts or the files' sizes (a rank with more is a
    /// group of its own).
    fn groups(&self, events: u64) -> Vec<Vec<usize>> {
        let d = &self.archive.d;
        let rank = |i: usize| self.archive.place.location.get(&d.locations[i].id).map_or(NONE_I32, |l| l.0);
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut filled = 0u64;
        let mut last_rank = None;
        for &i in &self.order {
            let r = rank(i);
            let new_rank = last_rank != Some(r);
            if groups.is_empty() || (new_rank && filled >= events) {
                groups.push(Vec::new());
                filled = 0;
            }
            groups.last_mut().expect("a group").push(i);
            filled += location_events(&self.archive.base, &d.locations[i]);
            last_rank = Some(r);
        }
        groups
    }

    /// Decode and correct the locations of one group (from `groups`): their events in
    /// (rank, thread) order and their metric samples.
    fn decode(&mut self, group: &[usize], warnings: &mut Warnings) -> Result<(EventParts, RawMetrics)> {
        let fits = crate::clock::Fits::of(&self.models);
        let d = &self.archive.d;
        let mut locations = Vec::with_capacity(group.len());
        for &i in group {
            let local = self.locals.get_mut(i).and_then(Option::take).ok_or_else(|| {
                Error::Engine(format!("OTF2 location {} decoded twice or before its definitions", d.locations[i].id))
            })?;
            locations.push((&d.locations[i], local));
        }
        let mut parts = decode_locations(&self.archive.located(), locations, &fits, None, Ok)?;
        parts.sort_by_key(|p| (p.rank, p.thread));
        self.missing.extend(parts.iter().map(|p| (p.empty_events.clone(), p.missing_defs.clone())));
        let (events, mut metrics) = gather(parts, RawMetrics::default(), warnings);
        crate::clock::correct_metrics(&mut metrics, &fits);
        Ok((events, metrics))
    }

    /// After the last group: report the locations read without their data.
    fn finish(&mut self, warnings: &mut Warnings) {
        report_missing_parts(self.missing.iter().map(|(e, m)| (e, m)), warnings);
    }
}

/// The regions of the global definitions.
fn regions(d: &GlobalDefs) -> Vec<RegionInfo> {
    d.regions
        .iter()
        .map(|(id, r)| RegionInfo {
            region_id: i64::from(*id),
            name: d.string(r.name).unwrap_or("").to_string(),
            paradigm: paradigm_name(r.paradigm).to_string(),
            role: role_name(r.role).map(str::to_string),
            // Score-P names "MPI" as the source file of MPI's regions: a marker, not a file.
            file: d
                .string(r.source_file)
                .filter(|s| !(s.is_empty() || *s == "MPI" && paradigm_name(r.paradigm) == "mpi"))
                .map(str::to_string),
            line: (r.begin_line != 0 && r.begin_line != u32::MAX).then_some(i64::from(r.begin_line)),
        })
        .collect()
}

/// The metrics the definitions declare: each member's name and definition, in member order,
/// and per metric class its members as (name index, value type), as the decoder reads them.
struct MetricDefs {
    names: Vec<String>,
    definitions: Vec<crate::trace::MetricDefinition>,
    classes: HashMap<u32, Vec<(i32, u8)>>,
}

impl MetricDefs {
    fn of(d: &GlobalDefs) -> MetricDefs {
        let text = |id: Option<u32>| id.and_then(|i| d.string(i)).filter(|s| !s.is_empty()).map(str::to_string);
        let mut out = MetricDefs { names: Vec::new(), definitions: Vec::new(), classes: HashMap::new() };
        let mut index: HashMap<u32, i32> = HashMap::new();
        let mut member_ids: Vec<&u32> = d.metric_members.keys().collect();
        member_ids.sort_unstable();
        for id in member_ids {
            let member = &d.metric_members[id];
            index.insert(*id, out.names.len() as i32);
            out.names.push(d.string(member.name).unwrap_or("").to_string());
            out.definitions.push(crate::trace::MetricDefinition {
                mode: metric_mode_name(member.mode),
                unit: text(member.unit),
                description: text(Some(member.description)),
            });
        }
        for (id, members) in &d.metrics {
            let v = members
                .iter()
                .map(|m| {
                    let name = index.get(m).copied().unwrap_or(crate::events::NONE_I32);
                    (name, d.metric_members.get(m).map_or(0, |x| x.value_type))
                })
                .collect();
            out.classes.insert(*id, v);
        }
        out
    }
}

/// What decoding a location needs of the archive.
struct Located<'a> {
    anchor: &'a anchor::Anchor,
    base: &'a Path,
    d: &'a GlobalDefs,
    place: &'a Placement,
    comms: &'a Communicators,
    metrics: &'a MetricDefs,
}

/// One location decoded (what is kept of it: `T`).
struct Part<T> {
    rank: i32,
    thread: i32,
    decoded: T,
    /// The .evt file is empty although the definitions give the location events.
    empty_events: Option<(std::path::PathBuf, u64)>,
    /// The location's local definitions file is missing.
    missing_defs: Option<std::path::PathBuf>,
}

/// A location's local definitions, and the path of its file when that is missing.
struct Local {
    rank: i32,
    thread: i32,
    defs: defs::LocalDefs,
    missing: Option<PathBuf>,
}

/// Every location's local definitions (small files), read in parallel, in location order.
fn read_locals(a: &Located<'_>) -> Result<Vec<Local>> {
    a.d.locations
        .par_iter()
        .map(|l| {
            let (rank, thread) = a.place.location.get(&l.id).copied().unwrap_or((crate::events::NONE_I32, 0));
            let path = a.base.join(format!("{}.def", l.id));
            let missing = (!path.exists()).then(|| path.clone());
            Ok(Local { rank, thread, defs: defs::read_local(&path, a.anchor.chunk_size_definitions)?, missing })
        })
        .collect()
}

/// The clock sync samples of the locations' ClockOffset records, in ns (exact values kept for
/// the fit), in (rank, thread) order.
fn clock_samples(d: &GlobalDefs, locals: &[Local]) -> Vec<ClockSample> {
    let ns = |ticks: i128| (ticks * 1_000_000_000 / i128::from(d.timer_resolution)) as i64;
    let exact_ns = |ticks: i128| ticks as f64 * 1e9 / d.timer_resolution as f64;
    let mut order: Vec<&Local> = locals.iter().collect();
    order.sort_by_key(|l| (l.rank, l.thread));
    let mut out = Vec::new();
    for l in order {
        for (session, (time, offset, std_dev)) in l.defs.clock_offsets.iter().enumerate() {
            let local_ticks = i128::from(*time) - i128::from(d.global_offset);
            let local = exact_ns(local_ticks);
            let master = local + exact_ns(i128::from(*offset));
            out.push(ClockSample {
                rank: l.rank,
                session: session as i32,
                local_ts: ns(local_ticks),
                master_ts: master.round() as i64,
                round_trip: None,
                std_dev_ns: Some((*std_dev * 1e9 / d.timer_resolution as f64).round() as i64),
                exact: Some((local, master)),
            });
        }
    }
    out
}

/// Every location's events, decoded in parallel, each corrected by `models` as soon as it is
/// decoded: its times are then in cache, and the memory its file took holds the corrected ones.
fn decode_locations<T: Send>(
    a: &Located<'_>,
    locations: Vec<(&defs::Location, Local)>,
    fits: &crate::clock::Fits<'_>,
    progress: Option<&crate::progress::LoadProgress>,
    keep: impl Fn(events::Decoded) -> Result<T> + Sync,
) -> Result<Vec<Part<T>>> {
    let d = a.d;
    let region_ids: Vec<u32> = d.regions.iter().map(|(id, _)| *id).collect();
    let region_index = events::RegionIndex::new(&region_ids);
    let comm_index = events::CommMembers::new(&a.comms.members);
    let windows = windows(d, a.place);
    let attributes = references(d);
    // Interrupted, no further location is decoded (on rayon's threads, as work of this statement).
    let statement = crate::interrupt::current();
    let what = format!("reading the events of {}", a.base.with_extension("otf2").display());
    locations
        .into_par_iter()
        .map(|(l, local)| {
            crate::interrupt::check_for(statement, &what)?;
            let Local { rank, thread, defs: local, missing: missing_defs } = local;
            let evt = a.base.join(format!("{}.evt", l.id));
            let data = match std::fs::read(&evt) {
                Ok(data) => data,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && l.events == 0 => Vec::new(),
                Err(e) => return Err(Error::io(&evt, e)),
            };
            let ctx = events::Context {
                rank,
                thread,
                global_offset: d.global_offset,
                timer_resolution: d.timer_resolution,
                announced: (d.trace_length > 0)
                    .then(|| (d.global_offset, d.global_offset.saturating_add(d.trace_length))),
                local: &local,
                region_index: &region_index,
                comm_members: &comm_index,
                self_comms: &a.comms.per_rank,
                windows: &windows,
                attributes: &attributes,
                location_of: &a.place.location,
                metric_members: &a.metrics.classes,
                expected_events: l.events,
            };
            let empty_events = (data.is_empty() && l.events > 0).then(|| (evt.clone(), l.events));
            let mut decoded = if data.is_empty() {
                events::Decoded::default()
            } else {
                events::decode(&evt, &data, a.anchor.chunk_size_events, &ctx)?
            };
            drop(data);
            crate::clock::correct_events(&mut decoded.events, fits);
            let decoded = keep(decoded)?;
            if let Some(p) = progress {
                p.add(1);
            }
            Ok(Part { rank, thread, decoded, empty_events, missing_defs })
        })
        .collect()
}

/// The decoded locations (in rank, thread order) put together: events and metric samples.
fn gather(
    parts: Vec<Part<events::Decoded>>,
    mut metrics: RawMetrics,
    warnings: &mut Warnings,
) -> (EventParts, RawMetrics) {
    let mut all = Vec::with_capacity(parts.len());
    for p in parts {
        warnings.merge(p.decoded.warnings);
        add_samples(&mut metrics, p.rank, p.thread, p.decoded.metrics);
        all.push(p.decoded.events);
    }
    (EventParts::new(all), metrics)
}

/// The metric samples `m` of a location of (`rank`, `thread`) added to `metrics`.
fn add_samples(metrics: &mut RawMetrics, rank: i32, thread: i32, m: events::MetricSamples) {
    metrics.rank.extend(std::iter::repeat_n(rank, m.ts.len()));
    metrics.thread.extend(std::iter::repeat_n(thread, m.ts.len()));
    metrics.ts.extend(m.ts);
    metrics.metric.extend(m.metric);
    metrics.value.extend(m.value);
}

/// Ranks (their node from the system tree) and locations, in rank order.
fn ranks_and_locations(
    d: &GlobalDefs,
    place: &Placement,
    warnings: &mut Warnings,
) -> (Vec<RankInfo>, Vec<LocationInfo>) {
    let string = |id: u32| d.string(id).unwrap_or("").to_string();
    let mut ranks: Vec<RankInfo> = Vec::new();
    let mut groups: Vec<(&u32, &defs::LocationGroup)> = d.location_groups.iter().collect();
    groups.sort_by_key(|(id, _)| place.rank_of_group.get(id).copied().unwrap_or(i32::MAX));
    let mut rules = NodeRules::default();
    for (id, g) in groups {
        let Some(&rank) = place.rank_of_group.get(id) else { continue };
        ranks.push(RankInfo {
            rank,
            node: node_name(d, g.parent, &mut rules),
            name: string(g.name),
            application: None,
        });
    }
    rules.report(warnings);
    let mut locations: Vec<LocationInfo> = d
        .locations
        .iter()
        .filter_map(|l| {
            let (rank, thread) = place.location.get(&l.id).copied()?;
            Some(LocationInfo {
                location_id: l.id.min(i64::MAX as u64) as i64,
                rank,
                thread,
                kind: location_kind(l.kind).to_string(),
                name: string(l.name),
                node: None,
            })
        })
        .collect();
    locations.sort_by_key(|l| (l.rank, l.thread));
    (ranks, locations)
}

/// The communicators with their members as ranks.
fn communicators(d: &GlobalDefs, comms: &Communicators) -> Vec<CommInfo> {
    d.comms
        .iter()
        .map(|(id, c)| CommInfo {
            comm: *id as i32,
            name: d.string(c.name).unwrap_or("").to_string(),
            members: comms.members.get(id).cloned().unwrap_or_default(),
            per_rank: comms.per_rank.contains(id),
        })
        .collect()
}

/// The trace's facts from the anchor and the global definitions.
fn meta(path: &Path, anchor: anchor::Anchor, d: &GlobalDefs) -> TraceMeta {
    TraceMeta {
        name: crate::reading::paths::default_name(&path.display().to_string()),
        path: path.display().to_string(),
        format: "otf2".into(),
        format_version: Some(anchor.version),
        creator: Some(anchor.creator).filter(|c| !c.is_empty()),
        timer_resolution_hz: i64::try_from(d.timer_resolution).ok(),
        start_wallclock_ns: d.realtime_ns.and_then(|r| i64::try_from(r).ok()),
        ..TraceMeta::default()
    }
}

/// The node of a location group: its system-tree ancestor of class "node", as Score-P names
/// it, else (writers that leave the class empty or use their own words) the location group's
/// parent system-tree node. Which rule placed the ranks is said in `warnings`.
fn node_name(d: &GlobalDefs, parent: u32, rules: &mut NodeRules) -> Option<String> {
    let mut id = parent;
    for _ in 0..64 {
        let Some(node) = d.system_tree.get(&id) else { break };
        if d.string(node.class) == Some("node") {
            rules.by_class += 1;
            return Some(d.string(node.name).unwrap_or("").to_string());
        }
        id = node.parent;
    }
    let node = d.system_tree.get(&parent)?;
    rules.by_parent += 1;
    let class = d.string(node.class).unwrap_or("");
    if !rules.parent_classes.iter().any(|c| c == class) {
        rules.parent_classes.push(class.to_string());
    }
    Some(d.string(node.name).unwrap_or("").to_string())
}

/// How many ranks each rule of `node_name` placed.
#[derive(Debug, Default)]
struct NodeRules {
    by_class: usize,
    by_parent: usize,
    parent_classes: Vec<String>,
}

impl NodeRules {
    fn report(&self, warnings: &mut Warnings) {
        if self.by_parent == 0 {
            return;
        }
        let classes =
            self.parent_classes.iter().map(|c| if c.is_empty() { "(empty)".to_string() } else { format!("'{c}'") });
        let classes = classes.collect::<Vec<_>>().join(", ");
        let (n, of) = (self.by_parent, self.by_parent + self.by_class);
        warnings.add_many("otf2_node_from_parent", n as i64, || {
            format!(
                "{n} of {of} ranks have no system-tree ancestor of class 'node'; they are placed on their location group's parent system-tree node (class {classes}); give --nodes FILE to place them otherwise"
            )
        });
    }
}

/// OTF2's metric mode in words: its value property (low four bits: accumulated, absolute,
/// relative) and timing (high four bits: start, point, last, next), as OTF2 names them.
fn metric_mode_name(mode: u8) -> Option<String> {
    let value = match mode & 0x0F {
        0 => "accumulated",
        1 => "absolute",
        2 => "relative",
        _ => return None,
    };
    let timing = match mode >> 4 {
        0 => "start",
        1 => "point",
        2 => "last",
        3 => "next",
        _ => return None,
    };
    Some(format!("{value}_{timing}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{GeneratorConfig, Pattern, generate};
    use crate::model;

    fn generated(pattern: Pattern) -> RawTrace {
        let cfg = GeneratorConfig {
            ranks: 6,
            ranks_per_node: 2,
            pattern,
            iterations: 3,
            clock_skew: true,
            imbalance: Some(crate::generate::Imbalance { ranks: vec![1], factor: 2.0 }),
            ..GeneratorConfig::default()
        };
        generate(&cfg).unwrap().trace
    }

    #[test]
    fn written_archives_read_back_to_the_same_tables() {
        for pattern in [Pattern::Stencil2d, Pattern::MasterWorker] {
            let raw = generated(pattern);
            let dir = tempfile::tempdir().unwrap();
            crate::export::otf2::write(&raw, dir.path()).unwrap();
            let back = read(&dir.path().join("traces.otf2")).unwrap();
            assert_eq!(back.clock_sync.len(), 5 * 2, "one offset point per rank and session");
            assert_eq!(back.meta.start_wallclock_ns, Some(crate::generate::DEFAULT_START_NS), "the run's date");
            let off = crate::clock::Correction::Off;
            let (a, b) = (raw.clone().build_with(off).unwrap(), back.clone().build_with(off).unwrap());
            for t in ["ranks", "regions", "events", "calls", "messages", "collectives", "communicators"] {
                let schema = model::schema(t).unwrap();
                let x = arrow::compute::concat_batches(&schema, &a.table(t).unwrap()).unwrap();
                let y = arrow::compute::concat_batches(&schema, &b.table(t).unwrap()).unwrap();
                assert_eq!(x, y, "{pattern:?}: table {t} differs after an OTF2 round trip");
            }
            assert_eq!(
                b.warnings().unwrap().iter().collect::<Vec<_>>(),
                a.warnings().unwrap().iter().collect::<Vec<_>>()
            );
            // Corrected with the model: condensed offset points give (nearly) the line the
            // raw samples give.
            let (a, b) = (raw.build().unwrap(), back.build().unwrap());
            use arrow::array::AsArray;
            let ts = |t: &crate::trace::Trace| -> Vec<i64> {
                t.table("events")
                    .unwrap()
                    .iter()
                    .flat_map(|b| b.column(3).as_primitive::<arrow::datatypes::Int64Type>().values().to_vec())
                    .collect()
            };
            let worst = ts(&a).iter().zip(ts(&b)).map(|(x, y)| (x - y).abs()).max().unwrap();
            assert!(worst <= 5, "{pattern:?}: corrected times differ by {worst} ns");
            assert!(b.warnings().unwrap().is_empty(), "{:?}", b.warnings());
        }
    }

    /// `raw` with OpenMP events on rank 0 after its first event: a fork of 4 threads, a lock
    /// taken and given back, a task created, switched to and completed, a join; with
    /// `teams`, a team's begin and end and a task of a team.
    fn with_thread_events(mut raw: RawTrace, teams: bool) -> RawTrace {
        use crate::events::{Event, EventKind, RawEvents};
        let all = RawEvents::concat(std::mem::take(&mut raw.events.parts));
        let mut out = RawEvents::with_capacity(all.len() + 16);
        for s in all.streams() {
            for i in s.start..s.end {
                out.push_detailed(&all.event(i));
                if s.rank == 0 && i == s.start {
                    let at = |kind, f: &dyn Fn(&mut Event)| {
                        let mut e = Event::new(0, s.thread, all.ts[i], kind);
                        f(&mut e);
                        e
                    };
                    let mut extra = vec![
                        at(EventKind::ThreadFork, &|e| e.tag = 4),
                        at(EventKind::ThreadAcquireLock, &|e| (e.request, e.tag) = (7, 1)),
                        at(EventKind::ThreadReleaseLock, &|e| (e.request, e.tag) = (7, 1)),
                        at(EventKind::ThreadTaskCreate, &|e| e.request = 99),
                        at(EventKind::ThreadTaskSwitch, &|e| e.request = 99),
                        at(EventKind::ThreadTaskComplete, &|e| e.request = 99),
                        at(EventKind::ThreadJoin, &|_| {}),
                    ];
                    if teams {
                        extra.extend([
                            at(EventKind::ThreadTeamBegin, &|e| e.comm = 0),
                            at(EventKind::ThreadTaskCreate, &|e| (e.comm, e.peer, e.tag) = (0, 1, 3)),
                            at(EventKind::ThreadTeamEnd, &|e| e.comm = 0),
                            at(EventKind::ThreadCreate, &|e| (e.comm, e.request) = (0, 12)),
                        ]);
                    }
                    for e in &extra {
                        out.push_detailed(e);
                    }
                }
            }
            out.finish_stream(s.rank, s.thread);
        }
        raw.events = crate::events::EventParts::single(out);
        raw
    }

    #[test]
    fn archives_of_every_version_read_back_to_the_same_tables() {
        use crate::export::otf2::Version;
        for version in ["1.0", "1.1", "1.2", "1.4", "2.0", "3.0"] {
            let version = Version::parse(version).unwrap();
            let old = version < Version(1, 2);
            let raw = with_thread_events(generated(Pattern::Stencil2d), !old);
            let dir = tempfile::tempdir().unwrap();
            crate::export::otf2::write_as(&raw, dir.path(), version).unwrap();
            let anchor = std::fs::read(dir.path().join("traces.otf2")).unwrap();
            assert_eq!(anchor[9..11], [version.0, version.1]);
            let back = read(&dir.path().join("traces.otf2")).unwrap();
            assert_eq!(back.meta.format_version.as_deref(), Some(format!("{version}.0").as_str()));
            let off = crate::clock::Correction::Off;
            let (a, b) = (raw.clone().build_with(off).unwrap(), back.build_with(off).unwrap());
            let regions = if version < Version(1, 1) { None } else { Some("regions") };
            for t in ["ranks", "events", "calls", "messages", "collectives", "communicators"].into_iter().chain(regions)
            {
                let schema = model::schema(t).unwrap();
                let x = arrow::compute::concat_batches(&schema, &a.table(t).unwrap()).unwrap();
                let y = arrow::compute::concat_batches(&schema, &b.table(t).unwrap()).unwrap();
                assert_eq!(x, y, "OTF2 {version}: table {t} differs after a round trip");
            }
            // OTF2 1.0 knows a region's type only: MPI functions read back as functions.
            let names = |t: &crate::trace::Trace| -> Vec<String> {
                use arrow::array::AsArray;
                t.table("regions")
                    .unwrap()
                    .iter()
                    .flat_map(|b| {
                        let c = arrow::compute::cast(b.column(1), &arrow::datatypes::DataType::Utf8).unwrap();
                        c.as_string::<i32>().iter().map(|v| v.unwrap_or_default().to_string()).collect::<Vec<_>>()
                    })
                    .collect()
            };
            assert_eq!(names(&a), names(&b), "OTF2 {version}: region names");
        }
        // Thread records did not exist before OTF2 1.2: writing them as 1.1 is refused.
        let raw = with_thread_events(generated(Pattern::Ring), true);
        let dir = tempfile::tempdir().unwrap();
        let e = crate::export::otf2::write_as(&raw, dir.path(), Version(1, 1)).unwrap_err().to_string();
        assert!(e.contains("OTF2 1.1 has no record for thread_team_begin"), "{e}");
        assert_eq!(Version::parse("1.6"), None);
        assert_eq!(Version::parse("4.0"), None);
    }

    #[test]
    fn truncated_or_flipped_archives_give_errors_not_panics() {
        let raw = generated(Pattern::Ring);
        let dir = tempfile::tempdir().unwrap();
        crate::export::otf2::write(&raw, dir.path()).unwrap();
        let anchor = dir.path().join("traces.otf2");
        let files = [
            dir.path().join("traces.def"),
            dir.path().join("traces/1.evt"),
            dir.path().join("traces/2.def"),
            anchor.clone(),
        ];
        let mut errors = 0;
        for file in &files {
            let original = std::fs::read(file).unwrap();
            let step = (original.len() / 60).max(1);
            for at in (0..original.len()).step_by(step) {
                for damage in 0..3 {
                    let mut bytes = original.clone();
                    match damage {
                        0 => bytes.truncate(at),
                        1 => bytes[at] ^= 0xFF,
                        _ => bytes[at] = 0x09,
                    }
                    std::fs::write(file, &bytes).unwrap();
                    match read(&anchor).and_then(RawTrace::build) {
                        Ok(_) => {}
                        Err(e) => {
                            errors += 1;
                            let text = e.to_string();
                            assert!(
                                text.contains(dir.path().to_str().unwrap()),
                                "error does not name the file: {text}"
                            );
                        }
                    }
                }
            }
            std::fs::write(file, &original).unwrap();
        }
        assert!(errors > 50, "only {errors} damaged archives were rejected");
        // An empty event file and a missing local definitions file are named in warnings.
        let evt = dir.path().join("traces/3.evt");
        let saved = std::fs::read(&evt).unwrap();
        std::fs::write(&evt, b"").unwrap();
        std::fs::remove_file(dir.path().join("traces/2.def")).unwrap();
        let t = read(&anchor).unwrap();
        assert_eq!(t.warnings.count("otf2_empty_event_file"), 1, "{:?}", t.warnings);
        assert_eq!(t.warnings.count("otf2_missing_local_definitions"), 1, "{:?}", t.warnings);
        let text = format!("{:?}", t.warnings);
        assert!(text.contains("3.evt") && text.contains("2.def"), "{text}");
        std::fs::write(&evt, saved).unwrap();
        // Global definitions that do not define the locations of the event files: an error.
        let global = dir.path().join("traces.def");
        let original = std::fs::read(&global).unwrap();
        std::fs::write(&global, &original[..19.min(original.len())]).unwrap();
        let e = read(&anchor).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("traces.def"), "{e}");
        std::fs::write(&global, &original).unwrap();
        std::fs::remove_file(dir.path().join("traces/3.evt")).unwrap();
        let e = read(&anchor).unwrap_err().to_string();
        assert!(e.contains("3.evt"), "{e}");
    }

    #[test]
    fn event_files_of_undefined_locations_beside_every_defined_one_are_named_and_left_out() {
        let raw = generated(Pattern::Ring);
        let dir = tempfile::tempdir().unwrap();
        crate::export::otf2::write(&raw, dir.path()).unwrap();
        let anchor = dir.path().join("traces.otf2");
        let events = |t: &RawTrace| t.events.len();
        let whole = events(&read(&anchor).unwrap());
        std::fs::copy(dir.path().join("traces/1.evt"), dir.path().join("traces/12884901888.evt")).unwrap();
        let t = read(&anchor).unwrap();
        assert_eq!(events(&t), whole, "the undefined location's events are not read");
        assert_eq!(t.warnings.count("otf2_undefined_event_file"), 1, "{:?}", t.warnings);
        assert!(format!("{:?}", t.warnings).contains("12884901888.evt"));
        // Without the event file of a defined location, the definitions are not these files'.
        std::fs::rename(dir.path().join("traces/2.evt"), dir.path().join("traces/2.moved")).unwrap();
        let e = read(&anchor).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("belong to none of them (12884901888.evt)"), "{e}");
    }

    /// A scan of some columns of `events` decodes the archive for them alone, keeps what it
    /// built, adds only what a later scan reads besides, and gives the whole table's values;
    /// the problems decoding finds are recorded once however often it decodes.
    #[test]
    fn scans_of_some_event_columns_build_only_them_with_the_whole_tables_values() {
        let raw = generated(Pattern::Stencil2d);
        let dir = tempfile::tempdir().unwrap();
        crate::export::otf2::write(&raw, dir.path()).unwrap();
        std::fs::write(dir.path().join("traces/3.evt"), b"").unwrap();
        let anchor = dir.path().join("traces.otf2").display().to_string();
        let open = || crate::formats::read(&anchor, &crate::reading::OpenOptions::default()).unwrap();
        let (partial, whole) = (open(), open());
        let rows = whole.row_count("events").unwrap();
        let decodings = |t: &crate::trace::Trace| {
            t.phases().iter().filter(|p| p.name == "decoding events for their columns").count()
        };

        let counted = partial.projected("events", Some(&[])).unwrap();
        assert_eq!(counted.iter().map(arrow::array::RecordBatch::num_rows).sum::<usize>(), rows);
        assert!(counted.iter().all(|b| b.num_columns() == 0));
        assert_eq!(partial.built_rows("events"), None, "the whole table is not built");
        assert_eq!(decodings(&partial), 1);
        assert_eq!(partial.warnings_so_far().count("otf2_empty_event_file"), 1);

        let same = |projection: &[usize]| {
            let a = partial.projected("events", Some(projection)).unwrap();
            let b = whole.projected("events", Some(projection)).unwrap();
            assert_eq!(a, b, "columns {projection:?}");
        };
        same(&[13, 3, 6]);
        assert_eq!(decodings(&partial), 2);
        same(&[3, 13]);
        assert_eq!(decodings(&partial), 2, "columns built before are kept");
        same(&(0..14).collect::<Vec<_>>());
        assert_eq!(decodings(&partial), 3);
        assert_eq!(partial.warnings_so_far().count("otf2_empty_event_file"), 1, "recorded once");

        // A derived table does not keep the whole `events` table: the columns built before
        // stay, and make it when a query needs it; the problems stay recorded once.
        assert_eq!(partial.row_count("calls").unwrap(), whole.row_count("calls").unwrap());
        assert_eq!(partial.built_rows("events"), None);
        assert_eq!(
            partial.warnings().unwrap().iter().collect::<Vec<_>>(),
            whole.warnings().unwrap().iter().collect::<Vec<_>>()
        );
        same(&[4, 5, 11]);
        assert_eq!(partial.table("events").unwrap(), whole.table("events").unwrap());
        assert_eq!((decodings(&partial), partial.built_rows("events")), (3, Some(rows)));
        same(&[2, 7]);
        assert_eq!(decodings(&partial), 3, "the whole table answers from now on");

        // Messages first: derived from one decoding, the events decoded again only for the
        // columns scans read, then for the whole table.
        let derived = open();
        assert_eq!(derived.row_count("messages").unwrap(), whole.row_count("messages").unwrap());
        let phases = |t: &crate::trace::Trace| t.phases().iter().map(|p| p.name).collect::<Vec<_>>();
        assert!(!phases(&derived).contains(&"events to Arrow"), "{:?}", phases(&derived));
        assert_eq!((derived.built_rows("events"), decodings(&derived)), (None, 0));
        let a = derived.projected("events", Some(&[3, 13])).unwrap();
        assert_eq!(a, whole.projected("events", Some(&[3, 13])).unwrap());
        assert_eq!(decodings(&derived), 1);
        assert_eq!(derived.table("events").unwrap(), whole.table("events").unwrap());
        assert_eq!((decodings(&derived), derived.built_rows("events")), (2, Some(rows)));
        assert_eq!(derived.warnings().unwrap().count("otf2_empty_event_file"), 1);
        assert_eq!(
            derived.tables().unwrap().iter().map(|(n, b)| (*n, b.len())).collect::<Vec<_>>(),
            whole.tables().unwrap().iter().map(|(n, b)| (*n, b.len())).collect::<Vec<_>>()
        );

        // With the controlled logical clock the times come from the matching: the whole
        // table is built for any scan.
        let options = crate::reading::OpenOptions {
            clock_correction: crate::clock::Correction::Clc,
            ..crate::reading::OpenOptions::default()
        };
        let clc = crate::formats::read(&anchor, &options).unwrap();
        clc.projected("events", Some(&[3])).unwrap();
        assert_eq!((decodings(&clc), clc.built_rows("events")), (0, Some(rows)));
    }

    #[test]
    fn anchors_are_found_in_directories() {
        let dir = tempfile::tempdir().unwrap();
        assert!(find_anchor(dir.path()).unwrap_err().to_string().contains("no OTF2 anchor"));
        crate::export::otf2::write(&generated(Pattern::Ring), dir.path()).unwrap();
        assert_eq!(find_anchor(dir.path()).unwrap(), dir.path().join("traces.otf2"));
        std::fs::copy(dir.path().join("traces.otf2"), dir.path().join("other.otf2")).unwrap();
        assert!(find_anchor(dir.path()).unwrap_err().to_string().contains("several OTF2 anchors"));
    }

    #[test]
    fn a_location_without_an_event_count_is_sized_by_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("7.evt"), vec![0u8; 4000]).unwrap();
        let counted = defs::Location { id: 7, events: 12, ..defs::Location::default() };
        assert_eq!(location_events(dir.path(), &counted), 12);
        let uncounted = defs::Location { events: 0, ..counted.clone() };
        assert_eq!(location_events(dir.path(), &uncounted), 1000);
        let missing = defs::Location { id: 8, events: 0, ..defs::Location::default() };
        assert_eq!(location_events(dir.path(), &missing), 0);
    }
}
