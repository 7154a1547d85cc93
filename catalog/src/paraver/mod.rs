//! Paraver traces (`NAME.prv` with `NAME.pcf` and `NAME.row`, as BSC's Extrae writes them and
//! Paraver and Dimemas read them), read into the same tables as every other format. The header
//! gives the applications, tasks (ranks), threads and their nodes; state records become the
//! `states` table; event records become calls where the .pcf says a type marks entering (value
//! != 0) and leaving (value 0) a code region — Extrae's MPI call types 50000001-50000099 and
//! user-function types — with names from the .pcf VALUES, collectives where the MPI call is
//! one (sizes, root and communicator from Extrae's MPI global-operation types 50100001-
//! 50100004), and metrics for every other (type, value) pair (hardware counters above all);
//! communication records become a send on the sender at the physical send time and a receive
//! posted at the logical receive time and completed at the physical receive time, matched by
//! MPI's rules into `messages`. Layouts: BSC's Paraver trace format, summarised in
//! PARAVER-NOTES.md.

pub mod header;
pub mod pcf;
pub mod records;
pub mod row;
pub mod writer;

use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::events::{COLLECTIVE_OPS, Event, EventKind, EventParts, NONE_I32, NONE_I64, RawEvents, collective_op_code};
use crate::fast_hash::FastMap;
use crate::trace::{
    CommInfo, LocationInfo, RankInfo, RawMetrics, RawStates, RawTrace, RegionInfo, TraceMeta, Warnings,
};
use records::{CommRec, EventRec, NO_STREAM};

/// Extrae's MPI call event types (point-to-point, collective, other, and the one-sided and
/// I/O types some versions add).
const MPI_TYPES: std::ops::RangeInclusive<i64> = 50_000_001..=50_000_099;
/// Extrae's MPI global-operation types: bytes sent, bytes received, root, communicator.
const COLLECTIVE_INFO: [i64; 4] = [50_100_001, 50_100_002, 50_100_003, 50_100_004];

/// The .prv file of `path`: the file itself (`.prv` or `.prv.gz`) or the one in a directory.
pub fn find_prv(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut found: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file() && is_prv(p)).collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::in_file(path, "no Paraver trace (*.prv) in this directory")),
        _ => Err(Error::in_file(
            path,
            format!(
                "several Paraver traces in this directory ({}); name one",
                found.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// A path named like a Paraver trace: `*.prv` or `*.prv.gz`.
pub fn is_prv(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    name.ends_with(".prv") || name.ends_with(".prv.gz")
}

/// `NAME.pcf` or `NAME.row` beside `NAME.prv[.gz]`.
fn companion(prv: &Path, ext: &str) -> PathBuf {
    let name = prv.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let stem_len = if lower.ends_with(".prv.gz") { name.len() - 7 } else { name.len().saturating_sub(4) };
    prv.with_file_name(format!("{}.{ext}", &name[..stem_len]))
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    Error::regular_file(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut data = Vec::new();
    if path.to_string_lossy().to_ascii_lowercase().ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(file)
            .read_to_end(&mut data)
            .map_err(|e| Error::in_file(path, format!("cannot decompress: {e}")))?;
    } else {
        std::io::BufReader::new(file).read_to_end(&mut data).map_err(|e| Error::io(path, e))?;
    }
    Ok(data)
}

pub fn read(path: &Path) -> Result<RawTrace> {
    read_with_progress(path, None)
}

/// What a (type, value) pair of an event record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Entering (value != 0) or leaving (0) an MPI call.
    Mpi,
    /// Entering or leaving a user function.
    Function,
    /// One of the MPI global-operation details (index into COLLECTIVE_INFO).
    CollectiveInfo(usize),
    /// A sampled value, as metric `names[i]`.
    Metric(i32),
}

/// Read a Paraver trace, reporting the bytes read in `progress`.
pub fn read_with_progress(path: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<RawTrace> {
    let prv = find_prv(path)?;
    let mut warnings = Warnings::default();
    let pcf_path = companion(&prv, "pcf");
    if !pcf_path.exists() {
        return Err(Error::in_file(
            &prv,
            format!("{} is missing: a Paraver trace needs its .pcf to name its events and states", pcf_path.display()),
        ));
    }
    let pcf = pcf::parse(&pcf_path, &String::from_utf8_lossy(&read_bytes(&pcf_path)?))?;
    let row_path = companion(&prv, "row");
    let row = if row_path.exists() {
        row::parse(&row_path, &String::from_utf8_lossy(&read_bytes(&row_path)?))?
    } else {
        warnings.add("paraver_missing_row", || {
            format!("{} is missing: nodes and threads are named by number", row_path.display())
        });
        row::Row::default()
    };
    let data = read_bytes(&prv)?;
    let bytes = data.len() as u64;
    if let Some(p) = progress {
        p.set_total(bytes);
    }
    let header = header::parse(&prv, data.split(|&b| b == b'\n').map(|l| std::str::from_utf8(l).unwrap_or("")))?;
    let body_start = line_offset(&data, header.first_record_line);
    let layout = records::Layout::new(&header.apps);
    let scale = if header.nanoseconds { 1 } else { 1000 };
    let recs = records::parse(&prv, &data[body_start..], header.first_record_line, &layout, scale)?;
    drop(data);
    if recs.other_types.0 > 0 {
        let (n, line) = recs.other_types;
        warnings.add_many("paraver_record_type", n as i64, || {
            format!(
                "{}:{line}: records of types other than 1 (state), 2 (event) and 3 (communication) are skipped",
                prv.display()
            )
        });
    }
    let trace = assemble(&prv, header, &pcf, &row, recs, layout, warnings)?;
    if let Some(p) = progress {
        p.add(bytes);
    }
    Ok(trace)
}

/// Byte offset of the 1-based line `line`.
fn line_offset(data: &[u8], line: u64) -> usize {
    let mut at = 0;
    for _ in 1..line {
        match data[at..].iter().position(|&b| b == b'\n') {
            Some(p) => at += p + 1,
            None => return data.len(),
        }
    }
    at
}

/// Where each stream of the layout goes: application, rank and thread.
struct Streams {
    app: Vec<u32>,
    rank: Vec<i32>,
    thread: Vec<i32>,
    /// (application, task, thread), 1-based, for names.
    ids: Vec<(u32, u32, u32)>,
}

fn streams(header: &header::Header, mpi_app: usize) -> Streams {
    let mut s = Streams { app: Vec::new(), rank: Vec::new(), thread: Vec::new(), ids: Vec::new() };
    let mpi_tasks = header.apps[mpi_app].len() as i32;
    let mut next_other = mpi_tasks;
    for (a, tasks) in header.apps.iter().enumerate() {
        for (t, task) in tasks.iter().enumerate() {
            let rank = if a == mpi_app {
                t as i32
            } else {
                next_other += 1;
                next_other - 1
            };
            for th in 0..task.threads {
                s.app.push(a as u32);
                s.rank.push(rank);
                s.thread.push(th as i32);
                s.ids.push((a as u32 + 1, t as u32 + 1, th + 1));
            }
        }
    }
    s
}

fn classify(ty: i64, pcf: &pcf::Pcf, metric_names: &mut Vec<String>) -> Class {
    if let Some(k) = COLLECTIVE_INFO.iter().position(|t| *t == ty) {
        return Class::CollectiveInfo(k);
    }
    let described = pcf.types.get(&ty);
    if MPI_TYPES.contains(&ty) && described.is_none_or(|d| d.values.is_some()) {
        return Class::Mpi;
    }
    if let Some(d) = described {
        let lower = d.description.to_ascii_lowercase();
        if d.values.is_some() && lower.contains("function") && !lower.contains("caller") && !lower.contains("line") {
            return Class::Function;
        }
    }
    let name = match described {
        Some(d) => d.description.split(" [").next().unwrap_or(&d.description).trim().to_string(),
        None => format!("type {ty}"),
    };
    let name = if name.is_empty() { format!("type {ty}") } else { name };
    let index = metric_names.iter().position(|n| *n == name).unwrap_or_else(|| {
        metric_names.push(name);
        metric_names.len() - 1
    });
    Class::Metric(index as i32)
}

/// A message half placed on a stream: a send, or a receive's post and completion.
#[derive(Debug, Clone, Copy)]
struct MessageEvent {
    ts: i64,
    kind: EventKind,
    peer: i32,
    tag: i32,
    bytes: i64,
    request: i64,
}

fn assemble(
    prv: &Path,
    header: header::Header,
    pcf: &pcf::Pcf,
    row: &row::Row,
    recs: records::Records,
    layout: records::Layout,
    mut warnings: Warnings,
) -> Result<RawTrace> {
    // What every event type means.
    let mut metric_names: Vec<String> = Vec::new();
    let mut classes: FastMap<i64, Class> = FastMap::default();
    let mut not_in_pcf: Vec<i64> = Vec::new();
    let mut last: Option<(i64, Class)> = None;
    for e in &recs.events {
        if last.is_some_and(|l| l.0 == e.ty) {
            continue;
        }
        let class = *classes.entry(e.ty).or_insert_with(|| {
            if !pcf.types.contains_key(&e.ty) && !COLLECTIVE_INFO.contains(&e.ty) {
                not_in_pcf.push(e.ty);
            }
            classify(e.ty, pcf, &mut metric_names)
        });
        last = Some((e.ty, class));
    }
    if !not_in_pcf.is_empty() {
        not_in_pcf.sort_unstable();
        let n = not_in_pcf.len();
        warnings.add_many("paraver_type_not_in_pcf", n as i64, || {
            format!(
                "{}: event type(s) {} are not in the .pcf; their values are kept as metrics named 'type N'",
                prv.display(),
                not_in_pcf.iter().take(5).map(i64::to_string).collect::<Vec<_>>().join(", ")
            )
        });
    }
    // The application whose tasks are the ranks: the one with MPI calls (else the first).
    let mut app_of_stream = Vec::with_capacity(layout.streams);
    for (a, tasks) in header.apps.iter().enumerate() {
        for t in tasks {
            app_of_stream.extend(std::iter::repeat_n(a, t.threads as usize));
        }
    }
    let mpi_app = recs
        .events
        .iter()
        .find(|e| classes.get(&e.ty) == Some(&Class::Mpi))
        .map_or(0, |e| app_of_stream[e.stream as usize]);
    let st = streams(&header, mpi_app);

    // Regions: every (type, value) entered on the ranks' streams.
    let mut region_keys: Vec<(i64, i64)> = recs
        .events
        .par_iter()
        .filter(|e| e.value != 0 && matches!(classes.get(&e.ty), Some(Class::Mpi | Class::Function)))
        .map(|e| (e.ty, e.value))
        .collect::<std::collections::HashSet<_>>()
        .into_iter()
        .collect();
    region_keys.sort_unstable();
    let mut regions: Vec<RegionInfo> = Vec::with_capacity(region_keys.len());
    let mut region_of: FastMap<(i64, i64), i32> = FastMap::default();
    let mut unnamed: Vec<(i64, i64)> = Vec::new();
    for (ty, value) in &region_keys {
        let class = classes[ty];
        let name = pcf.types.get(ty).and_then(|t| t.values.as_ref()).and_then(|v| v.get(value)).cloned();
        let name = name.unwrap_or_else(|| {
            unnamed.push((*ty, *value));
            let what = pcf.types.get(ty).map_or_else(|| format!("type {ty}"), |t| t.description.clone());
            format!("{what} {value}")
        });
        region_of.insert((*ty, *value), regions.len() as i32);
        regions.push(RegionInfo {
            region_id: *value,
            name,
            paradigm: if class == Class::Mpi { "mpi" } else { "user" }.into(),
            role: None,
            file: None,
            line: None,
        });
    }
    if let Some((ty, value)) = unnamed.first() {
        let n = unnamed.len();
        warnings.add_many("paraver_unnamed_value", n as i64, || {
            format!("{}: value {value} of type {ty} (and {} more) has no name in the .pcf VALUES; the region is named by number", prv.display(), n - 1)
        });
    }

    // Events and message halves per stream.
    let n_streams = layout.streams;
    let by_stream = bucket(&recs.events, n_streams, |e| e.stream as usize);
    let rank_of = |s: u32| if s == NO_STREAM { NONE_I32 } else { st.rank[s as usize] };
    let mut halves: Vec<Vec<MessageEvent>> = vec![Vec::new(); n_streams];
    let mut outside = (0i64, 0u64);
    for (k, c) in recs.comms.iter().enumerate() {
        let tag = i32::try_from(c.tag).unwrap_or(NONE_I32);
        if c.send == NO_STREAM || c.recv == NO_STREAM {
            if outside.0 == 0 {
                outside.1 = c.line;
            }
            outside.0 += 1;
        }
        if c.send != NO_STREAM {
            halves[c.send as usize].push(MessageEvent {
                ts: c.physical_send,
                kind: EventKind::Send,
                peer: rank_of(c.recv),
                tag,
                bytes: c.size,
                request: NONE_I64,
            });
        }
        if c.recv != NO_STREAM {
            let h = &mut halves[c.recv as usize];
            let request = k as i64;
            h.push(MessageEvent {
                ts: c.logical_recv,
                kind: EventKind::IrecvRequest,
                peer: NONE_I32,
                tag: NONE_I32,
                bytes: NONE_I64,
                request,
            });
            h.push(MessageEvent {
                ts: c.physical_recv,
                kind: EventKind::Irecv,
                peer: rank_of(c.send),
                tag,
                bytes: c.size,
                request,
            });
        }
    }
    if outside.0 > 0 {
        let (n, line) = outside;
        warnings.add_many("paraver_partner_outside", n, || {
            format!("{}:{line}: communications whose partner lies outside the trace (cut away) are kept as unmatched halves", prv.display())
        });
    }
    report_overtaking(prv, &recs.comms, &mut warnings);
    halves.par_iter_mut().for_each(|h| h.sort_by_key(|m| m.ts));

    let comms = communicators(&header, mpi_app);
    let world = comms.iter().find(|c| c.name == "MPI_COMM_WORLD").map_or(0, |c| c.comm);
    let ctx = StreamContext { classes: &classes, region_of: &region_of, regions: &regions, world };
    let walked: Vec<StreamOut> = (0..n_streams)
        .into_par_iter()
        .map(|s| {
            let events = &by_stream.items[by_stream.starts[s]..by_stream.starts[s + 1]];
            walk_stream(&ctx, events, &halves[s], st.rank[s], st.thread[s], st.app[s] as usize == mpi_app)
        })
        .collect();
    drop(halves);

    let mut parts = Vec::new();
    let mut metrics = RawMetrics { names: metric_names, ..RawMetrics::default() };
    let mut other_app_events = 0i64;
    for (s, out) in walked.into_iter().enumerate() {
        if !out.events.is_empty() {
            parts.push(out.events);
        }
        other_app_events += out.dropped;
        let n = out.metric_ts.len();
        metrics.rank.extend(std::iter::repeat_n(st.rank[s], n));
        metrics.thread.extend(std::iter::repeat_n(st.thread[s], n));
        metrics.ts.extend(out.metric_ts);
        metrics.metric.extend(out.metric);
        metrics.value.extend(out.metric_value);
    }
    if other_app_events > 0 {
        warnings.add_many("paraver_other_application_events", other_app_events, || {
            format!(
                "{}: calls and communications of applications other than the MPI one ({}) are not kept; their counters are in metrics",
                prv.display(),
                mpi_app + 1
            )
        });
    }
    let mut states = RawStates::default();
    let mut state_names: FastMap<i32, i32> = FastMap::default();
    for r in &recs.states {
        states.rank.push(st.rank[r.stream as usize]);
        states.thread.push(st.thread[r.stream as usize]);
        states.begin.push(r.begin);
        states.end.push(r.end);
        states.state.push(r.state);
        let name = *state_names.entry(r.state).or_insert_with(|| match pcf.states.get(&r.state) {
            Some(n) => {
                states.names.push(n.clone());
                states.names.len() as i32 - 1
            }
            None => NONE_I32,
        });
        states.name.push(name);
    }
    if header.cut {
        warnings.add("paraver_cut", || {
            format!("{}: the trace was cut from a longer one; calls begun before the cut and messages whose partner was cut away are reported separately", prv.display())
        });
    }

    // Ranks, locations, nodes.
    let node_names = row.names("NODE");
    let node_name = |n: u32| -> Option<String> {
        (n > 0).then(|| node_names.get(n as usize - 1).cloned().unwrap_or_else(|| format!("node{n}")))
    };
    let ranks: Vec<RankInfo> = header.apps[mpi_app]
        .iter()
        .enumerate()
        .map(|(t, task)| RankInfo { rank: t as i32, node: node_name(task.node), name: format!("task {}", t + 1) })
        .collect();
    let thread_names = row.names("THREAD");
    let locations: Vec<LocationInfo> = (0..n_streams)
        .map(|s| {
            let (a, t, th) = st.ids[s];
            LocationInfo {
                location_id: s as i64,
                rank: st.rank[s],
                thread: st.thread[s],
                kind: if st.app[s] as usize == mpi_app { "cpu" } else { "metric" }.into(),
                name: thread_names.get(s).cloned().unwrap_or_else(|| format!("THREAD {a}.{t}.{th}")),
            }
        })
        .collect();
    let meta = TraceMeta {
        name: crate::open::default_name(&prv.display().to_string()),
        path: prv.display().to_string(),
        format: "paraver".into(),
        timer_resolution_hz: Some(if header.nanoseconds { 1_000_000_000 } else { 1_000_000 }),
        start_wallclock_ns: header.date.as_deref().and_then(date_ns),
        ..TraceMeta::default()
    };
    Ok(RawTrace {
        meta,
        ranks,
        locations,
        regions,
        events: EventParts::new(parts),
        communicators: comms,
        metrics,
        states,
        warnings,
        ..RawTrace::default()
    })
}

/// Items grouped by a key in 0..n, keeping their order within a group (a counting sort).
struct Buckets<T> {
    items: Vec<T>,
    starts: Vec<usize>,
}

fn bucket<T: Copy>(items: &[T], n: usize, key: impl Fn(&T) -> usize) -> Buckets<T> {
    let mut starts = vec![0usize; n + 1];
    for it in items {
        starts[key(it) + 1] += 1;
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    let mut next = starts.clone();
    let mut out: Vec<T> = items.to_vec();
    for it in items {
        let k = key(it);
        out[next[k]] = *it;
        next[k] += 1;
    }
    Buckets { items: out, starts }
}

/// Messages of one channel (sender, receiver, tag) whose receives were posted in another order
/// than the sends: MPI's matching rule, by which commdb pairs halves, may pair them otherwise
/// than the records do. Counted, never silent.
fn report_overtaking(prv: &Path, comms: &[CommRec], warnings: &mut Warnings) {
    let mut last: FastMap<(u32, u32, i64), (i64, i64)> = FastMap::default();
    let mut n = 0i64;
    let mut first = 0u64;
    for c in comms.iter().filter(|c| c.send != NO_STREAM && c.recv != NO_STREAM) {
        let prev = last.insert((c.send, c.recv, c.tag), (c.physical_send, c.logical_recv));
        if let Some((ps, lr)) = prev
            && (c.physical_send < ps || c.logical_recv < lr)
        {
            if n == 0 {
                first = c.line;
            }
            n += 1;
        }
    }
    if n > 0 {
        warnings.add_many("paraver_overtaking", n, || {
            format!("{}:{first}: a message overtakes an earlier one of the same sender, receiver and tag; messages are paired by MPI's order, which may differ from the records", prv.display())
        });
    }
}

fn communicators(header: &header::Header, mpi_app: usize) -> Vec<CommInfo> {
    let ntasks = header.apps[mpi_app].len();
    let all: Vec<i32> = (0..ntasks as i32).collect();
    let mut out: Vec<CommInfo> = Vec::new();
    let mut world_named = false;
    for c in header.comms.iter().filter(|c| c.app as usize == mpi_app + 1) {
        let members: Vec<i32> = c.tasks.iter().map(|t| *t as i32 - 1).collect();
        let is_world = !world_named && members == all;
        world_named |= is_world;
        out.push(CommInfo {
            comm: i32::try_from(c.id).unwrap_or(NONE_I32),
            name: if is_world { "MPI_COMM_WORLD".into() } else { format!("comm {}", c.id) },
            members,
            per_rank: false,
        });
    }
    if !world_named {
        let id = (0..).find(|id| out.iter().all(|c| c.comm != *id)).unwrap_or(0);
        out.insert(0, CommInfo { comm: id, name: "MPI_COMM_WORLD".into(), members: all, per_rank: false });
    }
    out
}

struct StreamContext<'a> {
    classes: &'a FastMap<i64, Class>,
    region_of: &'a FastMap<(i64, i64), i32>,
    regions: &'a [RegionInfo],
    world: i32,
}

#[derive(Default)]
struct StreamOut {
    events: RawEvents,
    metric_ts: Vec<i64>,
    metric: Vec<i32>,
    metric_value: Vec<f64>,
    /// Calls and communications of a stream outside the MPI application.
    dropped: i64,
}

/// A collective being called: its operation and the details gathered for it.
struct OpenCollective {
    region: i32,
    op: u8,
    info: [i64; 4],
}

/// The events of one stream, in order: its event records (file order) with its message halves
/// (by time) placed among them: after the enters and before the leaves of the same time, as a
/// communication happens inside the MPI call that makes it.
fn walk_stream(
    ctx: &StreamContext,
    records: &[EventRec],
    halves: &[MessageEvent],
    rank: i32,
    thread: i32,
    is_rank: bool,
) -> StreamOut {
    let mut out = StreamOut::default();
    if !is_rank {
        for r in records {
            match ctx.classes[&r.ty] {
                Class::Metric(m) => {
                    out.metric_ts.push(r.ts);
                    out.metric.push(m);
                    out.metric_value.push(r.value as f64);
                }
                _ => out.dropped += 1,
            }
        }
        out.dropped += halves.len() as i64;
        return out;
    }
    let ev = &mut out.events;
    *ev = RawEvents::with_capacity(records.len() + halves.len());
    let mut next_half = 0;
    let mut open: Vec<(i64, i32)> = Vec::new();
    let mut collective: Option<OpenCollective> = None;
    let mut info = [NONE_I64; 4];
    let flush = |ev: &mut RawEvents, next_half: &mut usize, until: &dyn Fn(i64) -> bool| {
        while let Some(h) = halves.get(*next_half).filter(|h| until(h.ts)) {
            let mut e = Event::new(rank, thread, h.ts, h.kind);
            e.peer = h.peer;
            e.tag = h.tag;
            e.bytes = h.bytes;
            e.request = h.request;
            if h.kind != EventKind::IrecvRequest {
                e.comm = NONE_I32;
            }
            ev.push_detailed(&e);
            *next_half += 1;
        }
    };
    for r in records {
        let class = ctx.classes[&r.ty];
        let leaving = r.value == 0 && matches!(class, Class::Mpi | Class::Function);
        flush(ev, &mut next_half, &|t| t < r.ts || (t == r.ts && leaving));
        match class {
            Class::Mpi | Class::Function if r.value != 0 => {
                let region = ctx.region_of[&(r.ty, r.value)];
                ev.push_plain(r.ts, EventKind::Enter, region);
                open.push((r.ty, region));
                if class == Class::Mpi {
                    let op = collective_op_code(&ctx.regions[region as usize].name);
                    if r.ty == 50_000_002 || usize::from(op) < COLLECTIVE_OPS.len() {
                        ev.push_plain(r.ts, EventKind::CollBegin, NONE_I32);
                        collective = Some(OpenCollective { region, op, info: [NONE_I64; 4] });
                        info = [NONE_I64; 4];
                    }
                }
            }
            Class::Mpi | Class::Function => {
                let region = match open.iter().rposition(|(t, _)| *t == r.ty) {
                    Some(p) => open.remove(p).1,
                    None => NONE_I32,
                };
                if let Some(c) = collective.take_if(|c| c.region == region) {
                    let merged: Vec<i64> =
                        c.info.iter().zip(&info).map(|(a, b)| if *b != NONE_I64 { *b } else { *a }).collect();
                    let mut e = Event::new(rank, thread, r.ts, EventKind::CollEnd);
                    e.op = c.op;
                    e.bytes = merged[0];
                    e.bytes_recv = merged[1];
                    e.peer = i32::try_from(merged[2]).unwrap_or(NONE_I32);
                    e.comm =
                        if merged[3] == NONE_I64 { ctx.world } else { i32::try_from(merged[3]).unwrap_or(NONE_I32) };
                    ev.push_detailed(&e);
                    info = [NONE_I64; 4];
                }
                ev.push_plain(r.ts, EventKind::Leave, region);
            }
            Class::CollectiveInfo(k) => {
                info[k] = r.value;
                if let Some(c) = collective.as_mut() {
                    c.info[k] = r.value;
                }
            }
            Class::Metric(m) => {
                out.metric_ts.push(r.ts);
                out.metric.push(m);
                out.metric_value.push(r.value as f64);
            }
        }
    }
    flush(ev, &mut next_half, &|_| true);
    ev.finish_stream(rank, thread);
    out
}

/// `DD/MM/YYYY at HH:MM` as ns since the Unix epoch (the header gives no time zone: UTC).
fn date_ns(text: &str) -> Option<i64> {
    let (day, time) = text.split_once(" at ")?;
    let mut d = day.trim().split('/').map(|p| p.parse::<i64>().ok());
    let (dd, mm, yy) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.trim().split(':').map(|p| p.parse::<i64>().ok());
    let (h, m) = (t.next()??, t.next()??);
    let year = if yy < 100 { 2000 + yy } else { yy };
    if !(1..=12).contains(&mm) || !(1..=31).contains(&dd) || h > 23 || m > 59 {
        return None;
    }
    // Days from civil date (proleptic Gregorian).
    let (y, mo) = if mm <= 2 { (year - 1, mm + 9) } else { (year, mm - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + m) * 60 * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{GeneratorConfig, Pattern, generate};
    use arrow::array::RecordBatch;

    /// Columns of a table as text, dictionaries decoded, for comparing traces.
    fn columns(t: &crate::Trace, table: &str, names: &[&str]) -> Vec<Vec<String>> {
        let schema = crate::model::schema(table).unwrap();
        let all = arrow::compute::concat_batches(&schema, t.table(table)).unwrap();
        names
            .iter()
            .map(|n| {
                let c = all.column(schema.index_of(n).unwrap());
                let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap();
                let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
                c.iter().map(|v| v.unwrap_or("NULL").to_string()).collect()
            })
            .collect()
    }

    #[test]
    fn generated_traces_read_back_to_the_generators_tables() {
        for pattern in [Pattern::Stencil2d, Pattern::MasterWorker, Pattern::Alltoall, Pattern::Ring] {
            let cfg = GeneratorConfig {
                ranks: 12,
                ranks_per_node: 4,
                pattern,
                iterations: 3,
                imbalance: Some(crate::generate::Imbalance { ranks: vec![1], factor: 2.0 }),
                ..GeneratorConfig::default()
            };
            let a = generate(&cfg).unwrap().trace.build().unwrap();
            let dir = tempfile::tempdir().unwrap();
            writer::write(&a, dir.path(), "run").unwrap();
            let raw = read(&dir.path().join("run.prv")).unwrap();
            assert!(raw.warnings.is_empty(), "{pattern:?}: {:?}", raw.warnings);
            let b = raw.build().unwrap();
            let same = |table: &str, cols: &[&str]| {
                assert_eq!(columns(&a, table, cols), columns(&b, table, cols), "{pattern:?}: {table} differs");
            };
            same("ranks", &["rank", "node"]);
            same(
                "calls",
                &["rank", "thread", "region", "start_ts", "end_ts", "duration", "exclusive", "depth", "parent_id"],
            );
            same(
                "messages",
                &[
                    "msg_id",
                    "src",
                    "dst",
                    "tag",
                    "bytes",
                    "send_ts",
                    "recv_ts",
                    "send_call_start",
                    "send_call_end",
                    "recv_call_start",
                    "recv_call_end",
                    "recv_post_ts",
                    "src_node",
                    "dst_node",
                    "intra_node",
                    "duration",
                ],
            );
            // Paraver records the collective's call, not a begin and end inside it: begin_ts and
            // end_ts are the call's start and end.
            same("collectives", &["instance", "comm", "op", "root", "rank", "thread", "bytes_sent", "bytes_recv"]);
            let coll = columns(&b, "collectives", &["rank", "begin_ts", "end_ts"]);
            let calls = columns(&b, "calls", &["rank", "region", "start_ts", "end_ts"]);
            let spans: std::collections::HashSet<(&String, &String, &String)> = (0..calls[0].len())
                .filter(|&j| calls[1][j].starts_with("MPI_"))
                .map(|j| (&calls[0][j], &calls[2][j], &calls[3][j]))
                .collect();
            for (i, ((rank, begin), end)) in coll[0].iter().zip(&coll[1]).zip(&coll[2]).enumerate() {
                assert!(
                    spans.contains(&(rank, begin, end)),
                    "{pattern:?}: collective part {i} is not an MPI call's span"
                );
            }
            assert_eq!(b.meta.start_wallclock_ns, a.meta.start_wallclock_ns);
            let states: usize = b.table("states").iter().map(RecordBatch::num_rows).sum();
            assert_eq!(states, 12, "one Running state per thread");
        }
    }

    #[test]
    fn dates_and_companions() {
        assert_eq!(date_ns("01/01/1970 at 00:01"), Some(60_000_000_000));
        assert_eq!(date_ns("02/03/2026 at 08:00"), Some(1_772_438_400_000_000_000));
        assert_eq!(date_ns("31/13/2026 at 08:00"), None);
        assert_eq!(companion(Path::new("/a/run.prv.gz"), "pcf"), Path::new("/a/run.pcf"));
        assert_eq!(companion(Path::new("/a/run.prv"), "row"), Path::new("/a/run.row"));
    }
}
