//! One Nsight Systems SQLite export read into what commdb makes of it: per host thread the
//! intervals it spent in calls (CUDA runtime and driver API calls, NVTX ranges, MPI calls with
//! their peers, tags, sizes and requests), per accelerator stream the tasks it ran (kernels,
//! memory copies, memsets), and per process the facts that say which rank it is. The tables and
//! columns are those `nsys export --type sqlite` writes (schema 2.x and 3.x): CUPTI_ACTIVITY_KIND_
//! RUNTIME, _KERNEL, _MEMCPY, _MEMSET, _SYNCHRONIZATION and _CUDA_EVENT tied to the host call by
//! their correlationId; NVTX_EVENTS (ranges are its push/pop and start/end rows, the MPI domain's
//! are MPI calls); MPI_P2P_EVENTS, MPI_COLLECTIVES_EVENTS, MPI_START_WAIT_EVENTS, MPI_OTHER_EVENTS
//! and MPI_RANKS where nsys traced MPI itself; StringIds for every name; ThreadNames,
//! TARGET_INFO_SESSION_START_TIME, TARGET_INFO_SYSTEM_ENV and EXPORT_META_DATA for names, the
//! start of the capture, the host and the writer. A global thread id holds the process id in
//! bits 24-47 and the thread id in bits 0-23, as nsys's documentation gives them. Every other
//! table that holds rows, and every column of a read table that is not known, is counted
//! (`Export::unread`), never an error.

use std::collections::BTreeMap;

use crate::fast_hash::FastMap;
use std::path::Path;

use std::sync::Arc;

use super::sqlite::{self, Database, Table, Value};
use crate::error::{Error, Result};

/// What an interval of a host thread is.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A call of the CUDA runtime or driver API, with the correlation id that ties it to the
    /// device's work.
    Api { correlation: i64 },
    /// An NVTX range (not of the MPI domain).
    Range,
    /// An MPI call, with what nsys recorded of it (boxed: most intervals are not MPI calls).
    Mpi(Box<Mpi>),
}

/// What nsys recorded of an MPI call besides its name and time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mpi {
    pub comm: Option<i64>,
    pub tag: Option<i64>,
    /// The other rank (point to point) or the root (collectives), in the communicator.
    pub peer: Option<i64>,
    pub bytes: Option<i64>,
    pub bytes_recv: Option<i64>,
    pub request: Option<i64>,
    /// Which table it came from: p2p, collective, wait, other, or nvtx (a range of the MPI
    /// domain, which says nothing but the name).
    pub table: &'static str,
}

/// An interval of a host thread.
#[derive(Debug, Clone)]
pub struct Span {
    pub start: i64,
    pub end: i64,
    /// The name, shared by every interval of it.
    pub name: Arc<str>,
    pub what: What,
}

/// What a task of a stream is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TaskKind {
    Kernel,
    /// A memory copy: its CUPTI copy kind and bytes.
    Copy {
        kind: i64,
        bytes: i64,
    },
    Memset,
}

/// A task an accelerator stream ran.
#[derive(Debug, Clone)]
pub struct Task {
    pub start: i64,
    pub end: i64,
    pub name: Arc<str>,
    pub kind: TaskKind,
    pub correlation: Option<i64>,
}

/// What ties a host API call to a stream: the stream (device, stream) and the device event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tie {
    pub process: i64,
    pub device: i64,
    pub stream: i64,
    pub event: Option<i64>,
}

/// A stream: its process, device and stream number.
pub type StreamKey = (i64, i64, i64);

/// One export.
#[derive(Debug, Default)]
pub struct Export {
    /// Intervals by global thread id.
    pub threads: BTreeMap<i64, Vec<Span>>,
    /// Tasks by (process, device, stream).
    pub streams: BTreeMap<StreamKey, Vec<Task>>,
    /// What each correlation id ties its host call to.
    pub ties: FastMap<i64, Tie>,
    /// Thread names by global thread id.
    pub thread_names: FastMap<i64, String>,
    /// MPI ranks by process, where the export says them (MPI_RANKS, or an NVTX thread name
    /// `MPI Rank N`).
    pub ranks: BTreeMap<i64, i32>,
    pub host: Option<String>,
    /// The capture's start, ns since the Unix epoch.
    pub utc_start_ns: Option<i64>,
    pub product: Option<String>,
    pub schema_version: Option<String>,
    /// Rows of tables not read, and columns not known, by name.
    pub unread: BTreeMap<String, u64>,
    /// Runtime rows folded into the call of the same correlation id that encloses them (nsys
    /// writes a versioned entry, cudaMalloc_v3020, inside cudaMalloc).
    pub folded: u64,
    /// NVTX ranges of the MPI domain not used because MPI tables were read.
    pub superseded: u64,
}

/// The process of a global thread or process id.
pub fn process_of(global: i64) -> i64 {
    global >> 24
}

/// The thread id of a global thread id.
pub fn tid_of(global: i64) -> i64 {
    global & 0xff_ffff
}

/// Tables read, with the columns known of each (read or deliberately left).
const KNOWN: &[(&str, &[&str])] = &[
    ("StringIds", &["id", "value"]),
    ("ThreadNames", &["nameId", "priority", "globalTid"]),
    ("EXPORT_META_DATA", &["name", "value"]),
    ("TARGET_INFO_SESSION_START_TIME", &["utcEpochNs", "utcTime", "localTime"]),
    ("TARGET_INFO_SYSTEM_ENV", &["globalVid", "devStateName", "name", "nameEnum", "value"]),
    (
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        &["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId", "name"],
    ),
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "demangledName",
            "shortName",
            "mangledName",
            "launchType",
            "cacheConfig",
            "registersPerThread",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "localMemoryPerThread",
            "localMemoryTotal",
            "gridId",
            "sharedMemoryExecuted",
            "graphNodeId",
            "sharedMemoryLimitConfig",
            "greenContextId",
            "isSharedMemoryCarveoutRequested",
            "sharedMemoryCarveoutRequested",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "bytes",
            "copyKind",
            "deprecatedSrcId",
            "srcKind",
            "dstKind",
            "srcDeviceId",
            "srcContextId",
            "dstDeviceId",
            "dstContextId",
            "migrationCause",
            "graphNodeId",
            "virtualAddress",
            "name",
            "copyCount",
            "greenContextId",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMSET",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "value",
            "bytes",
            "graphNodeId",
            "memKind",
            "greenContextId",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        &[
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "syncType",
            "eventId",
            "eventSyncId",
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
        &["deviceId", "contextId", "streamId", "correlationId", "globalPid", "eventId", "eventSyncId"],
    ),
    (
        "NVTX_EVENTS",
        &[
            "start",
            "end",
            "eventType",
            "rangeId",
            "category",
            "color",
            "text",
            "globalTid",
            "endGlobalTid",
            "textId",
            "domainId",
            "uint64Value",
            "int64Value",
            "doubleValue",
            "uint32Value",
            "int32Value",
            "floatValue",
            "jsonTextId",
            "jsonText",
            "binaryData",
        ],
    ),
    (
        "MPI_P2P_EVENTS",
        &["start", "end", "globalTid", "textId", "commHandle", "tag", "remoteRank", "size", "requestHandle"],
    ),
    (
        "MPI_COLLECTIVES_EVENTS",
        &[
            "start",
            "end",
            "globalTid",
            "textId",
            "commHandle",
            "rootRank",
            "size",
            "recvSize",
            "collSendSize",
            "collRecvSize",
        ],
    ),
    ("MPI_START_WAIT_EVENTS", &["start", "end", "globalTid", "textId", "requestHandle"]),
    ("MPI_OTHER_EVENTS", &["start", "end", "globalTid", "textId"]),
    ("MPI_RANKS", &["rank", "globalTid"]),
];

/// Tables whose rows say nothing commdb's tables hold (the capture's settings, the machine, the
/// enumerations of codes): known, and not counted as unread.
const DESCRIPTIVE: &[&str] = &[
    "ANALYSIS_DETAILS",
    "ProcessStreams",
    "PROCESSES",
    "UnwindMethodType",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
    "sqlite_sequence",
];

/// NVTX event types that are ranges: push/pop and start/end.
const NVTX_RANGES: [i64; 2] = [59, 60];
/// The NVTX event type of a domain's creation (its text is the domain's name).
const NVTX_DOMAIN_CREATE: i64 = 75;
/// The NVTX event type of a thread's name.
const NVTX_THREAD_NAME: i64 = 39;

/// Whether the database at hand is an nsys export: it has the tables nsys always writes.
pub fn is_export(db: &Database) -> bool {
    db.table("StringIds").is_some()
        && (db.table("EXPORT_META_DATA").is_some() || db.table("TARGET_INFO_SESSION_START_TIME").is_some())
}

/// A table's rows through the columns named, each a value or NULL where the table lacks it.
struct Columns<'d> {
    db: &'d Database,
    table: &'d Table,
    index: Vec<Option<usize>>,
}

impl<'d> Columns<'d> {
    fn of(db: &'d Database, name: &str, columns: &[&str]) -> Option<Columns<'d>> {
        let table = db.table(name)?;
        Some(Columns { db, table, index: columns.iter().map(|c| table.column(c)).collect() })
    }

    fn each(&self, mut f: impl FnMut(&Row<'_>) -> Result<()>) -> Result<()> {
        self.db.scan(self.table, |row| f(&Row { row, index: &self.index }))
    }
}

/// A row, its values by the position of the column in the list a `Columns` was made with.
struct Row<'r> {
    row: &'r sqlite::Row<'r>,
    index: &'r [Option<usize>],
}

impl<'r> Row<'r> {
    fn get(&self, i: usize) -> Value<'r> {
        self.index[i].map_or(Value::Null, |c| self.row.get(c))
    }
}

/// Read the export at `path`.
pub fn read(path: &Path, db: &Database) -> Result<Export> {
    if !is_export(db) {
        return Err(Error::in_file(
            path,
            "an SQLite database but not an Nsight Systems export (no StringIds with EXPORT_META_DATA or TARGET_INFO_SESSION_START_TIME): expected the file `nsys export --type sqlite` writes",
        ));
    }
    let mut x = Export::default();
    let strings = strings(db)?;
    let name = |id: Option<i64>| id.and_then(|i| strings.get(&i).cloned());
    describe(db, &mut x)?;
    count_unread(db, &mut x)?;

    if let Some(t) = Columns::of(db, "ThreadNames", &["nameId", "globalTid"]) {
        t.each(|r| {
            if let (Some(n), Some(g)) = (name(r.get(0).int()), r.get(1).int()) {
                x.thread_names.insert(g, n.to_string());
            }
            Ok(())
        })?;
    }
    if let Some(t) = Columns::of(db, "MPI_RANKS", &["rank", "globalTid"]) {
        t.each(|r| {
            if let (Some(rank), Some(g)) = (r.get(0).int(), r.get(1).int()) {
                x.ranks.insert(process_of(g), rank as i32);
            }
            Ok(())
        })?;
    }
    runtime(db, &mut x, &strings)?;
    device(db, &mut x, &strings)?;
    let mpi_tables = mpi(db, &mut x, &strings)?;
    nvtx(db, &mut x, &strings, mpi_tables)?;
    for (&g, n) in &x.thread_names {
        if let Some(rank) = mpi_rank_name(n) {
            x.ranks.entry(process_of(g)).or_insert(rank);
        }
    }
    Ok(x)
}

/// `MPI Rank N` (as nsys names a rank's thread) to N.
fn mpi_rank_name(name: &str) -> Option<i32> {
    name.strip_prefix("MPI Rank ")?.trim().parse().ok()
}

fn strings(db: &Database) -> Result<FastMap<i64, Arc<str>>> {
    let mut out = FastMap::default();
    if let Some(t) = Columns::of(db, "StringIds", &["id", "value"]) {
        t.each(|r| {
            if let (Some(id), Some(v)) = (r.get(0).int(), r.get(1).text()) {
                out.insert(id, Arc::from(v));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// The writer, the capture's start and the host.
fn describe(db: &Database, x: &mut Export) -> Result<()> {
    if let Some(t) = Columns::of(db, "EXPORT_META_DATA", &["name", "value"]) {
        let (mut product, mut version) = (None, None);
        t.each(|r| {
            match r.get(0).text() {
                Some("EXPORT_PRODUCT_NAME") => product = r.get(1).text().map(str::to_string),
                Some("EXPORT_PRODUCT_VERSION") => version = r.get(1).text().map(str::to_string),
                Some("EXPORT_SCHEMA_VERSION") => x.schema_version = r.get(1).text().map(str::to_string),
                _ => {}
            }
            Ok(())
        })?;
        x.product = match (product, version) {
            (Some(p), Some(v)) => Some(format!("{p} {v}")),
            (p, v) => p.or(v),
        };
    }
    if let Some(t) = Columns::of(db, "TARGET_INFO_SESSION_START_TIME", &["utcEpochNs"]) {
        t.each(|r| {
            x.utc_start_ns = x.utc_start_ns.or(r.get(0).int());
            Ok(())
        })?;
    }
    if let Some(t) = Columns::of(db, "TARGET_INFO_SYSTEM_ENV", &["name", "value"]) {
        t.each(|r| {
            if r.get(0).text() == Some("Hostname") && x.host.is_none() {
                x.host = r.get(1).text().map(str::to_string);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Count the rows of tables that are not read, and the columns of read tables that are not
/// known.
fn count_unread(db: &Database, x: &mut Export) -> Result<()> {
    for t in &db.tables {
        let known = KNOWN.iter().find(|(n, _)| n.eq_ignore_ascii_case(&t.name));
        match known {
            Some((_, columns)) => {
                for c in &t.columns {
                    if !columns.iter().any(|k| k.eq_ignore_ascii_case(c)) {
                        *x.unread.entry(format!("{}.{c}", t.name)).or_default() += 1;
                    }
                }
            }
            None if t.name.starts_with("TARGET_INFO_") || t.name.starts_with("ENUM_") => {}
            None if DESCRIPTIVE.iter().any(|n| n.eq_ignore_ascii_case(&t.name)) => {}
            None => {
                let rows = db.count(t)?;
                if rows > 0 {
                    x.unread.insert(t.name.clone(), rows);
                }
            }
        }
    }
    Ok(())
}

/// The CUDA runtime and driver API calls, each correlation id's outermost row kept.
fn runtime(db: &Database, x: &mut Export, strings: &FastMap<i64, Arc<str>>) -> Result<()> {
    for table in ["CUPTI_ACTIVITY_KIND_RUNTIME"] {
        let Some(t) = Columns::of(db, table, &["start", "end", "globalTid", "correlationId", "nameId", "name"]) else {
            continue;
        };
        let mut by_call: FastMap<(i64, i64), Span> = FastMap::default();
        let mut threads: Vec<(i64, Span)> = Vec::new();
        t.each(|r| {
            let (Some(start), Some(end), Some(g)) = (r.get(0).int(), r.get(1).int(), r.get(2).int()) else {
                return Ok(());
            };
            let name = r.get(4).int().and_then(|i| strings.get(&i).cloned()).or_else(|| r.get(5).text().map(Arc::from));
            let name = name.unwrap_or_else(|| "unnamed CUDA call".into());
            let correlation = r.get(3).int();
            let span = Span { start, end, name, what: What::Api { correlation: correlation.unwrap_or(-1) } };
            match correlation {
                Some(c) if c > 0 => match by_call.get_mut(&(g, c)) {
                    Some(kept) => {
                        x.folded += 1;
                        if start < kept.start || (start == kept.start && end > kept.end) {
                            *kept = span;
                        }
                    }
                    None => {
                        by_call.insert((g, c), span);
                    }
                },
                _ => threads.push((g, span)),
            }
            Ok(())
        })?;
        for ((g, _), span) in by_call {
            x.threads.entry(g).or_default().push(span);
        }
        for (g, span) in threads {
            x.threads.entry(g).or_default().push(span);
        }
    }
    Ok(())
}

/// Kernels, copies and memsets on their streams, and what ties host calls to streams.
fn device(db: &Database, x: &mut Export, strings: &FastMap<i64, Arc<str>>) -> Result<()> {
    let base = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"];
    let task_of = |r: &Row<'_>| -> Option<(i64, i64, StreamKey, Option<i64>)> {
        let (start, end, device, stream, pid) =
            (r.get(0).int()?, r.get(1).int()?, r.get(2).int()?, r.get(3).int()?, r.get(5).int()?);
        Some((start, end, (process_of(pid), device, stream), r.get(4).int()))
    };
    let tie = |x: &mut Export, key: StreamKey, correlation: Option<i64>, event: Option<i64>| {
        if let Some(c) = correlation.filter(|&c| c > 0) {
            x.ties.insert(c, Tie { process: key.0, device: key.1, stream: key.2, event });
        }
    };
    let mut columns = base.to_vec();
    columns.extend(["demangledName", "shortName"]);
    if let Some(t) = Columns::of(db, "CUPTI_ACTIVITY_KIND_KERNEL", &columns) {
        t.each(|r| {
            if let Some((start, end, key, correlation)) = task_of(r) {
                let name = [6, 7].iter().find_map(|&i| r.get(i).int().and_then(|s| strings.get(&s).cloned()));
                let name = name.unwrap_or_else(|| Arc::from("unnamed kernel"));
                x.streams.entry(key).or_default().push(Task { start, end, name, kind: TaskKind::Kernel, correlation });
                tie(x, key, correlation, None);
            }
            Ok(())
        })?;
    }
    let (memcpy, memset): (Arc<str>, Arc<str>) = (Arc::from("memcpy"), Arc::from("[CUDA memset]"));
    let mut columns = base.to_vec();
    columns.extend(["copyKind", "bytes"]);
    if let Some(t) = Columns::of(db, "CUPTI_ACTIVITY_KIND_MEMCPY", &columns) {
        t.each(|r| {
            if let Some((start, end, key, correlation)) = task_of(r) {
                let kind = TaskKind::Copy { kind: r.get(6).int().unwrap_or(0), bytes: r.get(7).int().unwrap_or(0) };
                x.streams.entry(key).or_default().push(Task { start, end, name: memcpy.clone(), kind, correlation });
                tie(x, key, correlation, None);
            }
            Ok(())
        })?;
    }
    if let Some(t) = Columns::of(db, "CUPTI_ACTIVITY_KIND_MEMSET", &base) {
        t.each(|r| {
            if let Some((start, end, key, correlation)) = task_of(r) {
                let task = Task { start, end, name: memset.clone(), kind: TaskKind::Memset, correlation };
                x.streams.entry(key).or_default().push(task);
                tie(x, key, correlation, None);
            }
            Ok(())
        })?;
    }
    // A synchronisation on a stream or an event, and an event's record, name the stream; a
    // context-wide one (CUPTI's stream id of all ones) names none.
    for table in ["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT"] {
        let Some(t) = Columns::of(db, table, &["deviceId", "streamId", "correlationId", "globalPid", "eventId"]) else {
            continue;
        };
        t.each(|r| {
            if let (Some(device), Some(stream), Some(pid)) = (r.get(0).int(), r.get(1).int(), r.get(3).int())
                && (0..u32::MAX as i64).contains(&stream)
            {
                let event = r.get(4).int().filter(|&e| (0..u32::MAX as i64).contains(&e));
                tie(x, (process_of(pid), device, stream), r.get(2).int(), event);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// MPI calls from nsys's MPI tables; whether any was read.
fn mpi(db: &Database, x: &mut Export, strings: &FastMap<i64, Arc<str>>) -> Result<bool> {
    let tables: [(&str, &'static str, &[&str]); 4] = [
        ("MPI_P2P_EVENTS", "p2p", &["commHandle", "tag", "remoteRank", "size", "requestHandle"]),
        (
            "MPI_COLLECTIVES_EVENTS",
            "collective",
            &["commHandle", "rootRank", "size", "recvSize", "collSendSize", "collRecvSize"],
        ),
        ("MPI_START_WAIT_EVENTS", "wait", &["requestHandle"]),
        ("MPI_OTHER_EVENTS", "other", &[]),
    ];
    let mut any = false;
    for (table, kind, extra) in tables {
        let mut columns = vec!["start", "end", "globalTid", "textId"];
        columns.extend_from_slice(extra);
        let Some(t) = Columns::of(db, table, &columns) else { continue };
        t.each(|r| {
            let (Some(start), Some(end), Some(g)) = (r.get(0).int(), r.get(1).int(), r.get(2).int()) else {
                return Ok(());
            };
            any = true;
            let name = r.get(3).int().and_then(|i| strings.get(&i).cloned()).unwrap_or_else(|| Arc::from("MPI call"));
            let mut m = Mpi { table: kind, ..Mpi::default() };
            match kind {
                "p2p" => {
                    (m.comm, m.tag, m.peer, m.bytes, m.request) =
                        (r.get(4).int(), r.get(5).int(), r.get(6).int(), r.get(7).int(), r.get(8).int());
                }
                "collective" => {
                    m.comm = r.get(4).int();
                    m.peer = r.get(5).int().filter(|&root| root >= 0);
                    m.bytes = r.get(6).int().or(r.get(8).int());
                    m.bytes_recv = r.get(7).int().or(r.get(9).int());
                }
                "wait" => m.request = r.get(4).int(),
                _ => {}
            }
            x.threads.entry(g).or_default().push(Span { start, end, name, what: What::Mpi(Box::new(m)) });
            Ok(())
        })?;
    }
    Ok(any)
}

/// NVTX ranges (those of the MPI domain as MPI calls, unless nsys's MPI tables were read), and
/// the thread names NVTX gives.
fn nvtx(db: &Database, x: &mut Export, strings: &FastMap<i64, Arc<str>>, mpi_tables: bool) -> Result<()> {
    let Some(t) =
        Columns::of(db, "NVTX_EVENTS", &["start", "end", "eventType", "text", "textId", "globalTid", "domainId"])
    else {
        return Ok(());
    };
    let mut domains: FastMap<i64, String> = FastMap::default();
    let mut ranges = Vec::new();
    t.each(|r| {
        let text = r.get(3).text().map(Arc::from).or_else(|| r.get(4).int().and_then(|i| strings.get(&i).cloned()));
        let (kind, g, domain) = (r.get(2).int().unwrap_or(-1), r.get(5).int(), r.get(6).int().unwrap_or(0));
        match (kind, text) {
            (NVTX_DOMAIN_CREATE, Some(name)) => {
                domains.insert(domain, name.to_string());
            }
            (NVTX_THREAD_NAME, Some(name)) => {
                if let Some(g) = g {
                    x.thread_names.insert(g, name.to_string());
                }
            }
            (k, text) if NVTX_RANGES.contains(&k) => {
                if let (Some(start), Some(end), Some(g)) = (r.get(0).int(), r.get(1).int(), g) {
                    ranges.push((
                        g,
                        domain,
                        Span {
                            start,
                            end,
                            name: text.unwrap_or_else(|| Arc::from("unnamed range")),
                            what: What::Range,
                        },
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    for (g, domain, mut span) in ranges {
        if domains.get(&domain).is_some_and(|d| d == "MPI") {
            if mpi_tables {
                x.superseded += 1;
                continue;
            }
            span.what = What::Mpi(Box::new(Mpi { table: "nvtx", ..Mpi::default() }));
        }
        x.threads.entry(g).or_default().push(span);
    }
    Ok(())
}
