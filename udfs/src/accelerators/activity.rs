//! A rank's offload activity, as the offload analyses read it: the tasks its accelerator
//! streams ran (kernels, and transfers between host and device) and the calls its host threads
//! made to the accelerator's API, each host call classified by what it does to the device
//! (`HostCall::class`). The classes and their names follow CASITA's function table
//! (rdietric/casita, `FunctionTable.hpp`): a context-wide synchronisation (cuCtxSynchronize),
//! an allocation or blocking memset (cuMemAlloc, cuMemsetD8: CASITA counts them as
//! context-wide synchronisations), a blocking copy
//! (cuMemcpyHtoD and its kin without Async), a stream synchronisation (cuStreamSynchronize), an
//! event synchronisation (cuEventSynchronize) and the event record it waits for
//! (cuEventRecord), a kernel launch; the runtime API's and HIP's names of the same calls are
//! classified alike. The stream and event a call names come from the enter or the leave
//! (Score-P attaches them to either), as the reader keeps them in `peer`/`tag` and `request`.
//! A kernel is tied to its launch as `gpu_kernels` ties them: the k-th launch naming a stream
//! queued the k-th kernel on it.

use std::collections::BTreeMap;

use arrow::array::{Array, RecordBatch};
use datafusion::error::Result;

use commdb_analysis::args::Args;
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::relation::Relation;

/// What a host call of the accelerator's API does to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Waits until every stream of the context is done (cuCtxSynchronize,
    /// cudaDeviceSynchronize).
    Device,
    /// An allocation or a blocking memset, which CASITA counts as a context-wide
    /// synchronisation; it does not open the offload interval (CASITA's interval begins at the
    /// first copy, launch or synchronisation).
    Allocate,
    /// A blocking copy: waits for the device's streams, then copies.
    Copy,
    /// Waits until the stream it names is done.
    Stream,
    /// Waits until the event it names has been reached on the stream it was recorded on.
    Event,
    /// Records an event on the stream it names.
    Record,
    /// Queues a kernel on the stream it names.
    Launch,
    /// Asks whether a stream or an event is done (cuStreamQuery, cuEventQuery), or makes a
    /// stream wait for an event (cuStreamWaitEvent): it acts on the device without waiting.
    Query,
    /// Any other call of the API (it counts for the offload interval only).
    Other,
}

impl Class {
    /// The synchronisations, by the name `offload_waits` gives what they wait for.
    pub fn waits_for(self) -> Option<&'static str> {
        match self {
            Class::Device | Class::Allocate => Some("device"),
            Class::Copy => Some("copy"),
            Class::Stream => Some("stream"),
            Class::Event => Some("event"),
            _ => None,
        }
    }
}

/// CASITA's names of the context-wide synchronisations, with the runtime API's and HIP's names
/// of the same calls, lower case.
const DEVICE_SYNCS: &[&str] = &[
    "cuctxsynchronize",
    "cudasynchronize",
    "cudadevicesynchronize",
    "cudathreadsynchronize",
    "hipdevicesynchronize",
    "hipctxsynchronize",
];

/// Allocations and blocking memsets, which CASITA counts as context-wide synchronisations.
const ALLOCATIONS: &[&str] = &[
    "cumemalloc",
    "cumemalloc_v2",
    "cumemallochost",
    "cumemallochost_v2",
    "cumemallocpitch",
    "cumemallocpitch_v2",
    "cumemhostalloc",
    "cumemsetd8",
    "cumemsetd8_v2",
    "cumemsetd16",
    "cumemsetd16_v2",
    "cumemsetd32",
    "cumemsetd32_v2",
    "cumemsetd2d8",
    "cumemsetd2d8_v2",
    "cumemsetd2d16",
    "cumemsetd2d16_v2",
    "cumemsetd2d32",
    "cumemsetd2d32_v2",
    "cudamalloc",
    "cudamallochost",
    "cudamallocpitch",
    "cudamemset",
    "cudamemset2d",
    "cudamemset3d",
    "hipmalloc",
    "hipmemset",
];

/// Stream synchronisations (OpenCL's clFinish waits for its queue).
const STREAM_SYNCS: &[&str] = &["custreamsynchronize", "cudastreamsynchronize", "hipstreamsynchronize", "clfinish"];

const EVENT_SYNCS: &[&str] = &["cueventsynchronize", "cudaeventsynchronize", "hipeventsynchronize"];

const QUERIES: &[&str] = &[
    "custreamquery",
    "cueventquery",
    "custreamwaitevent",
    "cudastreamquery",
    "cudaeventquery",
    "cudastreamwaitevent",
    "hipstreamquery",
    "hipeventquery",
    "hipstreamwaitevent",
];

const EVENT_RECORDS: &[&str] =
    &["cueventrecord", "cueventrecordwithflags", "cudaeventrecord", "cudaeventrecordwithflags", "hipeventrecord"];

/// The class of a host call named `region` that names a stream or not.
pub fn classify(region: &str, names_stream: bool) -> Class {
    let name = region.to_ascii_lowercase();
    let is = |list: &[&str]| list.contains(&name.as_str());
    if is(DEVICE_SYNCS) {
        Class::Device
    } else if is(ALLOCATIONS) {
        Class::Allocate
    } else if is(STREAM_SYNCS) {
        Class::Stream
    } else if is(EVENT_SYNCS) {
        Class::Event
    } else if is(EVENT_RECORDS) {
        Class::Record
    } else if is(QUERIES) {
        Class::Query
    } else if is_blocking_copy(&name) {
        Class::Copy
    } else if names_stream && name.contains("launch") {
        Class::Launch
    } else {
        Class::Other
    }
}

/// cuMemcpy*, cudaMemcpy*, hipMemcpy* without Async (lower case).
fn is_blocking_copy(name: &str) -> bool {
    ["cumemcpy", "cudamemcpy", "hipmemcpy"].iter().any(|p| name.starts_with(p)) && !name.contains("async")
}

/// The names the view selects host calls by besides their paradigm, quoted for SQL.
fn named_calls() -> String {
    DEVICE_SYNCS
        .iter()
        .chain(ALLOCATIONS)
        .chain(STREAM_SYNCS)
        .chain(EVENT_SYNCS)
        .chain(EVENT_RECORDS)
        .chain(QUERIES)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A task of a stream: a kernel, or a transfer.
#[derive(Debug, Clone)]
pub struct Task {
    pub stream: i64,
    pub device: Option<i64>,
    pub name: String,
    pub start: i64,
    pub end: i64,
    pub transfer: bool,
    /// The launch that queued a kernel (None: the trace ties none to it).
    pub launch: Option<Launch>,
}

/// The host call that queued a kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub thread: i64,
    pub region: String,
    pub start: i64,
    pub end: i64,
}

/// A call of a host thread to the accelerator's API.
#[derive(Debug, Clone)]
pub struct HostCall {
    pub thread: i64,
    pub region: String,
    pub start: i64,
    pub end: i64,
    pub class: Class,
    /// The stream it names (a location of its rank), and the device event.
    pub stream: Option<i64>,
    pub event: Option<i64>,
}

/// One rank's offload activity.
#[derive(Debug, Default)]
pub struct Rank {
    /// Kernels and transfers of every stream, by stream, each stream's by start.
    pub streams: BTreeMap<i64, Vec<Task>>,
    /// Host calls by their start.
    pub calls: Vec<HostCall>,
}

impl Rank {
    /// The kernels of a stream, by start.
    pub fn kernels(&self, stream: i64) -> impl Iterator<Item = &Task> {
        self.streams.get(&stream).into_iter().flatten().filter(|t| !t.transfer)
    }

    /// The offload interval: from the first host call that acts on the device's streams (a
    /// launch, a copy, a synchronisation, an event record or query; not an allocation) to the
    /// last, as CASITA bounds it; the tasks' own span when the trace records no such call.
    pub fn interval(&self) -> Option<(i64, i64)> {
        let acts = |c: &&HostCall| !matches!(c.class, Class::Other | Class::Allocate);
        let from_calls = self.calls.iter().filter(acts).map(|c| (c.start, c.end));
        let from_tasks = || self.streams.values().flatten().map(|t| (t.start, t.end));
        let span = |it: &mut dyn Iterator<Item = (i64, i64)>| {
            it.fold(None, |acc: Option<(i64, i64)>, (s, e)| Some(acc.map_or((s, e), |(a, b)| (a.min(s), b.max(e)))))
        };
        span(&mut from_calls.into_iter()).or_else(|| span(&mut from_tasks()))
    }
}

/// Columns of the activity view, in order.
pub const COLUMNS: [&str; 10] =
    ["rank", "thread", "on_device", "device", "what", "region", "start_ts", "end_ts", "stream", "event"];

/// The view of a trace's offload activity over `events` (the call's relation), its `locations`
/// and `regions` (quoted): one row per kernel, transfer and host API call.
pub fn view(a: &Args, rel: &Relation, locations: &str, regions: &str) -> Result<Relation> {
    let events = rel.reference.to_quoted_string();
    let transfers = super::transfers_sql(&events, locations);
    let sql = format!(
        "WITH loc AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, kind = 'gpu' AS on_device,
         CAST(regexp_match(name, '\\[([0-9]+):([0-9]+)\\]')[1] AS BIGINT) AS device
  FROM {locations}),
api AS (SELECT DISTINCT CAST(name AS VARCHAR) AS name FROM {regions} WHERE paradigm IN ('cuda', 'hip', 'opencl')),
e AS (
  SELECT CAST(e.rank AS BIGINT) AS rank, CAST(e.thread AS BIGINT) AS thread, e.seq, e.ts,
         CAST(e.kind AS VARCHAR) AS kind, CAST(e.region AS VARCHAR) AS region,
         CAST(e.peer AS BIGINT) AS peer, CAST(e.tag AS BIGINT) AS tag, CAST(e.request AS BIGINT) AS request,
         l.on_device, l.device
  FROM {events} e JOIN loc l ON l.rank = CAST(e.rank AS BIGINT) AND l.thread = CAST(e.thread AS BIGINT)
  WHERE e.kind IN ('enter', 'leave')
    AND (l.on_device OR lower(CAST(e.region AS VARCHAR)) IN ({named}) OR e.peer IS NOT NULL
         OR CAST(e.region AS VARCHAR) IN (SELECT name FROM api))),
n AS (SELECT *, row_number() OVER (PARTITION BY rank, thread, region, kind ORDER BY seq) AS k FROM e),
calls AS (
  SELECT b.rank, b.thread, b.on_device, b.device, 'call' AS what, b.region, b.ts AS start_ts, x.ts AS end_ts,
         CASE WHEN coalesce(b.peer, x.peer) = b.rank THEN coalesce(b.tag, x.tag) END AS stream,
         coalesce(b.request, x.request) AS event
  FROM n b JOIN n x ON x.rank = b.rank AND x.thread = b.thread AND x.region = b.region AND x.k = b.k
  WHERE b.kind = 'enter' AND x.kind = 'leave'),
t AS ({transfers})
SELECT rank, thread, on_device, device, what, region, start_ts, end_ts, stream, event FROM calls
UNION ALL
SELECT rank, thread, true, device, 'transfer', direction, start_ts, end_ts, thread AS stream, CAST(NULL AS BIGINT) FROM t WHERE end_ts IS NOT NULL",
        named = named_calls()
    );
    let view = commdb_analysis::views::sql_view(a.session, a.function, sql)?;
    Ok(Relation {
        reference: datafusion::common::TableReference::bare(format!("offload activity of {events}")),
        provider: std::sync::Arc::new(view),
    })
}

/// The activity of every rank in `batches` (the view's columns, in order).
pub fn read(batches: &[RecordBatch]) -> Result<BTreeMap<i64, Rank>> {
    let int = |i| int64_column(batches, i);
    let (rank, thread, device, start, end, stream, event) =
        (int(0)?, int(1)?, int(3)?, int(6)?, int(7)?, int(8)?, int(9)?);
    let on_device = commdb_analysis::columns::bool_column(batches, 2)?;
    let (what, region) = (text_column(batches, 4)?, text_column(batches, 5)?);
    let opt = |a: &arrow::array::Int64Array, i: usize| (!a.is_null(i)).then(|| a.value(i));
    let mut ranks: BTreeMap<i64, Rank> = BTreeMap::new();
    for i in 0..rank.len() {
        if rank.is_null(i) || start.is_null(i) || end.is_null(i) {
            continue;
        }
        let r = ranks.entry(rank.value(i)).or_default();
        let name = if region.is_null(i) { String::new() } else { region.value(i).to_string() };
        if on_device.value(i) {
            r.streams.entry(thread.value(i)).or_default().push(Task {
                stream: thread.value(i),
                device: opt(&device, i),
                name,
                start: start.value(i),
                end: end.value(i),
                transfer: what.value(i) == "transfer",
                launch: None,
            });
        } else {
            let stream = opt(&stream, i);
            r.calls.push(HostCall {
                thread: thread.value(i),
                class: classify(&name, stream.is_some()),
                region: name,
                start: start.value(i),
                end: end.value(i),
                stream,
                event: opt(&event, i),
            });
        }
    }
    for r in ranks.values_mut() {
        r.calls.sort_by_key(|c| (c.start, c.end, c.thread));
        for tasks in r.streams.values_mut() {
            tasks.sort_by_key(|t| (t.start, t.end));
        }
        link_launches(r);
    }
    Ok(ranks)
}

/// The k-th launch naming a stream queued the k-th kernel on it.
fn link_launches(r: &mut Rank) {
    let mut launches: BTreeMap<i64, Vec<&HostCall>> = BTreeMap::new();
    for c in r.calls.iter().filter(|c| c.class == Class::Launch) {
        launches.entry(c.stream.unwrap_or(-1)).or_default().push(c);
    }
    for (stream, tasks) in r.streams.iter_mut() {
        let Some(queued) = launches.get(stream) else { continue };
        for (task, launch) in tasks.iter_mut().filter(|t| !t.transfer).zip(queued) {
            task.launch = Some(Launch {
                thread: launch.thread,
                region: launch.region.clone(),
                start: launch.start,
                end: launch.end,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_classified_by_casitas_names() {
        assert_eq!(classify("cuCtxSynchronize", false), Class::Device);
        assert_eq!(classify("cudaDeviceSynchronize", false), Class::Device);
        assert_eq!(classify("cuMemAlloc_v2", false), Class::Allocate);
        assert_eq!(classify("cuMemcpyDtoH_v2", false), Class::Copy);
        assert_eq!(classify("cudaMemcpy", false), Class::Copy);
        assert_eq!(classify("cuMemcpyHtoDAsync_v2", false), Class::Other);
        assert_eq!(classify("cuStreamSynchronize", true), Class::Stream);
        assert_eq!(classify("cuEventSynchronize", false), Class::Event);
        assert_eq!(classify("cuEventRecord", true), Class::Record);
        assert_eq!(classify("cuLaunchKernel", true), Class::Launch);
        assert_eq!(classify("cuLaunchKernel", false), Class::Other);
        assert_eq!(classify("cuDeviceGetAttribute", false), Class::Other);
        assert_eq!(classify("cuStreamWaitEvent", true), Class::Query);
    }
}
