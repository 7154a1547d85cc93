//! OTF2 definitions. Global definitions (`traces.def`): clock properties, strings, the system
//! tree, location groups (ranks), locations, regions, groups, communicators and metrics; every
//! record carries its length, so records this reader does not use are skipped, and fields
//! that newer versions append are read only when present. Local definitions
//! (`traces/<location>.def`): mapping tables from local to global ids, and clock offsets.
//! On disk a record stores its fields in the order they were added to the format, which is
//! not always the order of the reference library's callbacks (Region and Group keep
//! deprecated fields first).

use std::collections::HashMap;
use std::path::Path;

use crate::error::Result;
use crate::reading::otf2::buffer::{Cursor, UNDEFINED_U32};
use crate::reading::otf2::older;
use crate::trace::Warnings;

const CLOCK_PROPERTIES: u8 = 5;
const STRING: u8 = 10;
const ATTRIBUTE: u8 = 11;
const SYSTEM_TREE_NODE: u8 = 12;
const LOCATION_GROUP: u8 = 13;
const LOCATION: u8 = 14;
const REGION: u8 = 15;
const GROUP: u8 = 18;
const METRIC_MEMBER: u8 = 19;
const METRIC_CLASS: u8 = 20;
const METRIC_INSTANCE: u8 = 21;
const COMM: u8 = 22;
const RMA_WIN: u8 = 24;

const MAPPING_TABLE: u8 = 5;
const CLOCK_OFFSET: u8 = 6;

pub use super::group_types::*;
pub const MAPPING_ATTRIBUTE: u8 = 1;
pub const MAPPING_LOCATION: u8 = 2;
pub const MAPPING_REGION: u8 = 3;
pub const MAPPING_GROUP: u8 = 4;
pub const MAPPING_METRIC: u8 = 5;
pub const MAPPING_COMM: u8 = 6;
pub const MAPPING_RMA_WIN: u8 = 8;

#[derive(Debug, Clone, Default)]
pub struct SystemTreeNode {
    pub name: u32,
    pub class: u32,
    pub parent: u32,
}

#[derive(Debug, Clone, Default)]
pub struct LocationGroup {
    pub name: u32,
    pub kind: u8,
    pub parent: u32,
}

#[derive(Debug, Clone, Default)]
pub struct Location {
    pub id: u64,
    pub name: u32,
    pub kind: u8,
    pub events: u64,
    pub group: u32,
}

#[derive(Debug, Clone, Default)]
pub struct Region {
    pub name: u32,
    pub source_file: u32,
    pub begin_line: u32,
    pub role: u8,
    pub paradigm: u8,
}

#[derive(Debug, Clone, Default)]
pub struct Group {
    pub name: u32,
    pub kind: u8,
    pub paradigm: u8,
    pub flags: u32,
    pub members: Vec<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Comm {
    pub name: u32,
    pub group: u32,
    pub parent: u32,
}

#[derive(Debug, Clone, Default)]
pub struct MetricMember {
    pub name: u32,
    pub description: u32,
    pub mode: u8,
    pub value_type: u8,
    pub unit: Option<u32>,
}

/// All global definitions commdb uses.
#[derive(Debug, Clone, Default)]
pub struct GlobalDefs {
    pub timer_resolution: u64,
    pub global_offset: u64,
    pub trace_length: u64,
    pub realtime_ns: Option<u64>,
    pub strings: HashMap<u32, String>,
    pub system_tree: HashMap<u32, SystemTreeNode>,
    pub location_groups: HashMap<u32, LocationGroup>,
    pub locations: Vec<Location>,
    /// Regions in definition order (id, definition).
    pub regions: Vec<(u32, Region)>,
    pub groups: HashMap<u32, Group>,
    pub comms: Vec<(u32, Comm)>,
    pub metric_members: HashMap<u32, MetricMember>,
    /// Metric class or instance id -> member ids.
    pub metrics: HashMap<u32, Vec<u32>>,
    /// RMA window id -> its communicator.
    pub rma_wins: HashMap<u32, u32>,
    /// Attribute id -> (name, OTF2 type of its values).
    pub attributes: HashMap<u32, (u32, u8)>,
}

impl GlobalDefs {
    pub fn string(&self, id: u32) -> Option<&str> {
        self.strings.get(&id).map(String::as_str)
    }
}

/// Read `traces.def`.
pub fn read_global(path: &Path, chunk_size: u64, warnings: &mut Warnings) -> Result<GlobalDefs> {
    let data = std::fs::read(path).map_err(|e| crate::error::Error::io(path, e))?;
    let mut c = Cursor::new(&data, chunk_size, path)?;
    let mut d = GlobalDefs { timer_resolution: 1, ..GlobalDefs::default() };
    let mut metric_instances: Vec<(u32, u32)> = Vec::new();
    while let Some(t) = c.next_record()? {
        match t {
            CLOCK_PROPERTIES => {
                c.record = "ClockProperties";
                let end = c.record_end()?;
                d.timer_resolution = c.u64c()?;
                d.global_offset = c.u64c()?;
                d.trace_length = c.u64c()?;
                if c.more(end) {
                    d.realtime_ns = Some(c.u64c()?).filter(|v| *v != u64::MAX);
                }
                if d.timer_resolution == 0 || d.timer_resolution == u64::MAX {
                    return Err(c.error("timer resolution must be a positive number of ticks per second"));
                }
                c.finish(end)?;
            }
            STRING => {
                c.record = "String";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let s = c.string()?;
                c.finish(end)?;
                d.strings.insert(id, s);
            }
            SYSTEM_TREE_NODE => {
                c.record = "SystemTreeNode";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let node = SystemTreeNode { name: c.u32c()?, class: c.u32c()?, parent: c.u32c()? };
                c.finish(end)?;
                d.system_tree.insert(id, node);
            }
            LOCATION_GROUP => {
                c.record = "LocationGroup";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let g = LocationGroup { name: c.u32c()?, kind: c.u8()?, parent: c.u32c()? };
                c.finish(end)?;
                d.location_groups.insert(id, g);
            }
            LOCATION => {
                c.record = "Location";
                let end = c.record_end()?;
                let l = Location { id: c.u64c()?, name: c.u32c()?, kind: c.u8()?, events: c.u64c()?, group: c.u32c()? };
                c.finish(end)?;
                d.locations.push(l);
            }
            REGION => {
                c.record = "Region";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let name = c.u32c()?;
                let _description = c.u32c()?;
                let region_type = c.u8()?;
                let source_file = c.u32c()?;
                let begin_line = c.u32c()?;
                let _end_line = c.u32c()?;
                // OTF2 1.0 has only the region type; 1.1 added the role and paradigm.
                let (role, paradigm) = older::region_role_and_paradigm(region_type);
                let mut r = Region { name, source_file, begin_line, role, paradigm };
                if c.more(end) {
                    let _canonical = c.u32c()?;
                    r.role = c.u8()?;
                    r.paradigm = c.u8()?;
                }
                c.finish(end)?;
                d.regions.push((id, r));
            }
            GROUP => {
                c.record = "Group";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let name = c.u32c()?;
                let old_kind = c.u8()?;
                let n = c.u32c()?;
                if n as usize > end.saturating_sub(c.pos) {
                    return Err(c.error(format!("{n} members cannot fit in the record")));
                }
                let members = (0..n).map(|_| c.u64c()).collect::<Result<Vec<_>>>()?;
                // Before OTF2 1.2 the type alone said what the group is (and whether MPI's).
                let (kind, paradigm) = older::group_type_before_1_2(old_kind);
                let mut g = Group { name, kind, paradigm, flags: 0, members };
                if c.more(end) {
                    g.kind = c.u8()?;
                    g.paradigm = c.u8()?;
                    g.flags = c.u32c()?;
                }
                c.finish(end)?;
                d.groups.insert(id, g);
            }
            METRIC_MEMBER => {
                c.record = "MetricMember";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let name = c.u32c()?;
                let description = c.u32c()?;
                let _metric_type = c.u8()?;
                let mode = c.u8()?;
                let value_type = c.u8()?;
                // Base, exponent and unit follow in archives that record them.
                let mut unit = None;
                if c.more(end) {
                    let _base = c.u8()?;
                    let _exponent = c.i64c()?;
                    unit = Some(c.u32c()?);
                }
                c.finish(end)?;
                d.metric_members.insert(id, MetricMember { name, description, mode, value_type, unit });
            }
            METRIC_CLASS => {
                c.record = "MetricClass";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let n = c.u8()?;
                let members = (0..n).map(|_| c.u32c()).collect::<Result<Vec<_>>>()?;
                c.finish(end)?;
                d.metrics.insert(id, members);
            }
            METRIC_INSTANCE => {
                c.record = "MetricInstance";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let class = c.u32c()?;
                c.finish(end)?;
                metric_instances.push((id, class));
            }
            COMM => {
                c.record = "Comm";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let comm = Comm { name: c.u32c()?, group: c.u32c()?, parent: c.u32c()? };
                c.finish(end)?;
                d.comms.push((id, comm));
            }
            ATTRIBUTE => {
                c.record = "Attribute";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let name = c.u32c()?;
                let ty = c.u8()?;
                c.finish(end)?;
                d.attributes.insert(id, (name, ty));
            }
            RMA_WIN => {
                c.record = "RmaWin";
                let end = c.record_end()?;
                let id = c.u32c()?;
                let _name = c.u32c()?;
                let comm = c.u32c()?;
                // OTF2 2.3 added the window's flags after its communicator.
                c.finish(end)?;
                d.rma_wins.insert(id, comm);
            }
            other => {
                c.record = "definition";
                if other < 5 {
                    return Err(c.error(format!("unexpected internal record type {other} among the definitions")));
                }
                c.skip_record()?;
                if !KNOWN_GLOBAL.contains(&other) {
                    warnings.add("otf2_unknown_definition", || {
                        format!("{}: definition records of unknown type {other} were skipped", path.display())
                    });
                }
            }
        }
    }
    for (id, class) in metric_instances {
        let members = d.metrics.get(&class).cloned().unwrap_or_default();
        d.metrics.insert(id, members);
    }
    Ok(d)
}

/// Global definition types of OTF2 3.0 that commdb reads past on purpose.
const KNOWN_GLOBAL: [u8; 36] = [
    6, 7, 8, 9, 11, 16, 17, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45,
    46, 47, 48, 49, 50, 51,
];

/// A local-to-global id map.
#[derive(Debug, Clone)]
pub enum IdMap {
    Dense(Vec<u64>),
    Sparse(HashMap<u64, u64>),
}

impl IdMap {
    pub fn map(&self, local: u32) -> u32 {
        if local == UNDEFINED_U32 {
            return local;
        }
        let g = match self {
            IdMap::Dense(v) => v.get(local as usize).copied(),
            IdMap::Sparse(m) => m.get(&u64::from(local)).copied(),
        };
        g.map_or(local, |g| g as u32)
    }

    /// The global id of a 64-bit local one (a location's).
    pub fn map64(&self, local: u64) -> u64 {
        let g = match self {
            IdMap::Dense(v) => usize::try_from(local).ok().and_then(|k| v.get(k)).copied(),
            IdMap::Sparse(m) => m.get(&local).copied(),
        };
        g.unwrap_or(local)
    }
}

/// Mapping tables and clock offsets of one location.
#[derive(Debug, Clone, Default)]
pub struct LocalDefs {
    /// Mapping table by mapping type (OTF2 has 15 types).
    pub maps: [Option<IdMap>; 16],
    /// (time in ticks, offset in ticks, standard deviation in ticks)
    pub clock_offsets: Vec<(u64, i64, f64)>,
}

impl LocalDefs {
    #[inline]
    pub fn map(&self, kind: u8, local: u32) -> u32 {
        match self.maps.get(usize::from(kind)) {
            Some(Some(m)) => m.map(local),
            _ => local,
        }
    }

    /// The global id of a location a record names by its local id.
    pub fn location(&self, local: u64) -> u64 {
        match self.maps.get(usize::from(MAPPING_LOCATION)) {
            Some(Some(m)) => m.map64(local),
            _ => local,
        }
    }
}

/// Read `traces/<location>.def`; a missing file means no local definitions.
pub fn read_local(path: &Path, chunk_size: u64) -> Result<LocalDefs> {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LocalDefs::default()),
        Err(e) => return Err(crate::error::Error::io(path, e)),
    };
    let mut c = Cursor::new(&data, chunk_size, path)?;
    let mut out = LocalDefs::default();
    while let Some(t) = c.next_record()? {
        match t {
            MAPPING_TABLE => {
                c.record = "MappingTable";
                let end = c.record_end()?;
                let kind = c.u8()?;
                let n = c.u64c()?;
                let mode = c.u8()?;
                let room = end.saturating_sub(c.pos) as u64;
                if n > room {
                    return Err(c.error(format!("{n} id pairs cannot fit in the record")));
                }
                let map = if mode == 0 {
                    IdMap::Dense((0..n).map(|_| c.u64c()).collect::<Result<_>>()?)
                } else {
                    let mut m = HashMap::new();
                    for _ in 0..n {
                        let local = c.u64c()?;
                        m.insert(local, c.u64c()?);
                    }
                    IdMap::Sparse(m)
                };
                c.finish(end)?;
                if let Some(slot) = out.maps.get_mut(usize::from(kind)) {
                    *slot = Some(map);
                }
            }
            CLOCK_OFFSET => {
                c.record = "ClockOffset";
                let end = c.record_end()?;
                let time = c.u64_full()?;
                let offset = c.i64c()?;
                let std_dev = c.f64_full()?;
                c.finish(end)?;
                out.clock_offsets.push((time, offset, std_dev));
            }
            other => {
                c.record = "local definition";
                if other < 5 {
                    return Err(c.error(format!("unexpected internal record type {other} among the definitions")));
                }
                c.skip_record()?;
            }
        }
    }
    Ok(out)
}
