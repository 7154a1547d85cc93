//! Accelerators as tables: the kernels a GPU stream ran and the transfers between host and
//! device, from the records Score-P writes for CUDA, HIP, OpenCL and OpenACC into OTF2. A
//! stream is a location of kind `gpu` under its rank (Score-P names it `CUDA[device:stream]`);
//! each kernel is a call on it. A transfer is a one-sided operation on the stream's location: an
//! RmaGet when the device reads from the host (host to device), an RmaPut when it writes to it
//! (device to host), with the remote end another stream for a copy between devices; it starts
//! at the put or get and ends at the completion record with the same matching id that follows it
//! on the stream (the k-th completion of an id ends the k-th operation of that id, as Score-P
//! writes them in order; Score-P 1.x gives every CUDA operation the matching id 42). This is the
//! model CASITA reads ("Scalable critical-path analysis and optimization guidance for hybrid
//! MPI-CUDA applications"). The functions are views, queries over a trace's calls or events
//! and its locations.
//!
//! The offload analyses read a rank's kernels, transfers and calls to the device's API together
//! (`activity`): `offload_waits` (where the host waits for the device and the device for the
//! host, `waits`), `offload_blame` (the kernels those waits were for), the critical path's
//! hand-overs between host threads and streams (`handovers`) and `device_idle` and `gpu_utilisation` (`idle`).

mod activity;
mod handovers;
mod idle;
mod waits;

pub(crate) use handovers::Handovers;

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text, text_view};
use commdb_analysis::derived::{Compute, Derived};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::{Relation, trace_schema, trace_table};

pub const GPU_KERNELS: Function = Function {
    name: "gpu_kernels",
    params: &[param(
        "rel",
        Type::Relation,
        ParamDefault::Text("calls"),
        "the calls to read (a trace's, or a view of them)",
    )],
    output: Output::Columns(&[
        col("rank", int64, "the rank whose device ran it"),
        col("thread", int64, "the stream's location under the rank (its `thread` in `locations`)"),
        col("device", int64, "the device, from the stream's name (`CUDA[device:stream]`; NULL: the name does not say)"),
        col("stream", int64, "the stream's number on the device, from its name"),
        col("stream_name", text, "the stream's location name"),
        col("kernel", text_view, "the kernel (its region)"),
        col("start_ts", int64, "when it began on the device"),
        col("end_ts", int64, "when it ended"),
        col("duration_ns", int64, "end_ts - start_ts"),
        col(
            "launch_thread",
            int64,
            "the host thread whose launch call queued it (NULL: the trace ties no launch to it)",
        ),
        col("launch_region", text_view, "the launch call (cuLaunchKernel, ...)"),
        col("launch_ts", int64, "when the launch call was entered"),
        col("queued_ns", int64, "start_ts - launch_ts: from its launch to its start on the device"),
    ]),
    description: "one row per kernel run on an accelerator stream (calls on locations of kind gpu): rank, stream, device, kernel, start, end and duration, and the host call that launched it",
    make: Make::Table(gpu_kernels),
};

pub const GPU_TRANSFERS: Function = Function {
    name: "gpu_transfers",
    params: &[param(
        "rel",
        Type::Relation,
        ParamDefault::Text("events"),
        "the events to read (a trace's, or a view of them)",
    )],
    output: Output::Columns(&[
        col("rank", int64, "the rank whose device made it"),
        col("thread", int64, "the stream's location under the rank"),
        col("device", int64, "the device, from the stream's name (NULL: the name does not say)"),
        col("stream", int64, "the stream's number on the device"),
        col(
            "direction",
            text,
            "host_to_device (an RMA get from a CPU location), device_to_host (a put to one), device_to_device (the remote end is a stream), or get or put when the remote end is unknown",
        ),
        col("bytes", int64, "bytes moved"),
        col("start_ts", int64, "the put or get on the stream"),
        col("end_ts", int64, "its completion on the stream (NULL: none was recorded)"),
        col("duration_ns", int64, "end_ts - start_ts"),
        col("remote_rank", int64, "the rank of the other end (the host thread, or the other stream)"),
        col("remote_thread", int64, "the location of the other end under its rank"),
        col("matching_id", int64, "the operation's matching id, which its completion repeats"),
    ]),
    description: "one row per transfer between host and device (or between devices) on an accelerator stream, from Score-P's RMA records: rank, stream, direction, bytes, start, end and the other end",
    make: Make::Table(gpu_transfers),
};

/// The events an offload analysis reads.
const EVENTS: commdb_analysis::params::Param =
    param("rel", Type::Relation, ParamDefault::Text("events"), "the events to read (a trace's, or a view of them)");

pub const OFFLOAD_WAITS: Function = Function {
    name: "offload_waits",
    params: &[EVENTS],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("thread", int64, "the host thread that synchronised, or the stream that idled (late_launch)"),
        col(
            "pattern",
            text,
            "early_sync (it began before work it waits for had ended: the host waited for the device), late_sync (nothing it waits for was still running), late_launch (a stream idled until a kernel launched after the stream fell idle: the device waited for the host), unknown (the trace does not say which stream or event it waits for)",
        ),
        col("region", text, "the synchronisation call (late_launch: the kernel the stream waited for)"),
        col("start_ts", int64, "when the wait began (late_launch: the end of the stream's previous task)"),
        col("end_ts", int64, "when it ended (late_launch: the kernel's start)"),
        col(
            "wait_ns",
            int64,
            "end_ts - start_ts: the call's whole time, as CASITA counts it (late_launch: the stream's idle time)",
        ),
        col(
            "waits_for",
            text,
            "device (a context-wide synchronisation), copy (a blocking copy), stream, event, or host (late_launch)",
        ),
        col(
            "stream",
            int64,
            "the stream (its location's thread) it waits for, or that idled (NULL: all the rank's streams)",
        ),
        col("kernels", int64, "kernels that ran while it waited, which it waited for"),
        col(
            "on_kernel_ns",
            int64,
            "the part of the wait during which any of those kernels ran (at most wait_ns; offload_blame gives each kernel's part)",
        ),
        col("kernel", text, "the last kernel it waited for (late_launch: the kernel)"),
        col("kernel_end_ts", int64, "when that kernel ended"),
        col("launch_thread", int64, "late_launch: the host thread that launched the kernel"),
        col("launch_ts", int64, "late_launch: when the launch was entered"),
        col("host_late_ns", int64, "late_launch: the part of the idle time before the launch"),
    ]),
    description: "where the host waits for an accelerator and the accelerator for the host, by CASITA's offload rules: each synchronisation (context, stream, event, blocking copy) as early_sync (it waited for kernels still running, with their overlap) or late_sync (it waited for nothing), and each stream's idle time before a kernel launched late",
    make: Make::Table(offload_waits),
};

pub const OFFLOAD_BLAME: Function = Function {
    name: "offload_blame",
    params: &[EVENTS],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("stream", int64, "the stream (its location's thread) the kernel ran on"),
        col("kernel", text, "the kernel"),
        col("kernel_start_ts", int64, "when it began"),
        col("kernel_end_ts", int64, "when it ended"),
        col("thread", int64, "the host thread that waited for it"),
        col("region", text, "the synchronisation it waited in"),
        col("start_ts", int64, "when the synchronisation began"),
        col("end_ts", int64, "when it ended"),
        col("blame_ns", int64, "the part of the wait while the kernel ran: the host's waiting the kernel caused"),
    ]),
    description: "one row per kernel an early synchronisation of the host waited for (offload_waits' early_sync), with the part of the wait while the kernel ran: CASITA's blame of reason host wait, per kernel run (kernels of several streams running at once are each blamed for the same time); summed per kernel it says which kernels hold the host back",
    make: Make::Table(offload_blame),
};

pub const DEVICE_IDLE: Function = Function {
    name: "device_idle",
    params: &[
        EVENTS,
        param(
            "busy",
            Type::Choice(&["any", "kernels"]),
            ParamDefault::Text("any"),
            "what keeps a device busy: any task (a kernel or a transfer; CASITA's idle device), or kernels only (its compute idle device)",
        ),
    ],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("device", int64, "the device (NULL: its streams' names do not say)"),
        col("start_ts", int64, "when the device fell idle (or the offload interval began)"),
        col("end_ts", int64, "when a task began again (or the offload interval ended)"),
        col("idle_ns", int64, "end_ts - start_ts"),
        col(
            "ended_by",
            text,
            "the task that ended it: a kernel, or a transfer's direction (NULL: the offload interval ended)",
        ),
        col("stream", int64, "that task's stream"),
        col("launch_thread", int64, "the host thread whose launch queued that kernel"),
        col("launch_ts", int64, "when that launch was entered"),
        col("host_late_ns", int64, "the part of the idle time before the launch: the device waited for the host"),
    ]),
    description: "the stretches in which a rank's accelerator ran nothing, within the offload interval (from its first call that acts on the device's streams to its last), after CASITA's idle device: the task that ended each and the launch that queued it",
    make: Make::Table(device_idle),
};

pub const GPU_UTILISATION: Function = Function {
    name: "gpu_utilisation",
    params: &[
        EVENTS,
        param("slots", Type::Integer { min: 1 }, ParamDefault::Integer(100), "equal slots the run is cut into"),
    ],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("thread", int64, "the stream's location under the rank"),
        col("device", int64, "the device"),
        col("slot", int64, "0-based slot"),
        col("slot_start_ts", int64, "its start"),
        col("slot_end_ts", int64, "its end"),
        col("kernel_ns", int64, "time the stream ran kernels in the slot"),
        col("transfer_ns", int64, "time it transferred in the slot"),
        col("busy_fraction", float64, "(kernel_ns + transfer_ns) / the slot's length, at most 1"),
    ]),
    description: "each accelerator stream's kernel and transfer time in equal slots of the run (from the first host call that acts on a device's streams to the last), and the busy fraction, for a chart of utilisation over time",
    make: Make::Table(gpu_utilisation),
};

arguments! {
    struct AcceleratorArgs(GPU_KERNELS, GPU_TRANSFERS, OFFLOAD_WAITS, OFFLOAD_BLAME) {
        rel: Relation,
    }
}

arguments! {
    struct IdleArgs(DEVICE_IDLE) {
        rel: Relation,
        busy: String,
    }
}

arguments! {
    struct UtilisationArgs(GPU_UTILISATION) {
        rel: Relation,
        slots: usize,
    }
}

/// The offload activity of the events `rel` ([`crate::accelerators::activity`]), read whole.
fn activity_of(a: &Args, rel: Relation) -> Result<Relation> {
    rel.columns(a.function, &["rank", "thread", "seq", "ts", "kind", "region", "peer", "tag", "bytes", "request"])?;
    let Some(schema) = trace_schema(a.session, &rel) else {
        return plan_err!(
            "{}: '{}' is not read from one trace, so which of its locations are accelerator streams is unknown; give a trace's events or a view of them",
            a.function,
            rel.reference
        );
    };
    let locations = trace_table(a.session, a.function, &schema, "locations")?;
    let regions = trace_table(a.session, a.function, &schema, "regions")?;
    activity::view(a, &rel, &locations.reference.to_quoted_string(), &regions.reference.to_quoted_string())
}

/// The offload activity of `events` for the critical path's walk through streams, when their
/// trace has accelerator streams (None otherwise: a trace without streams reads nothing more).
pub(crate) fn offload_input(a: &Args, events: &Relation) -> Result<Option<commdb_analysis::relation::Projected>> {
    let Some(schema) = trace_schema(a.session, events) else { return Ok(None) };
    let locations = trace_table(a.session, a.function, &schema, "locations")?;
    if !has_streams(&locations)? || events.columns(a.function, &["peer", "tag", "request", "bytes"]).is_err() {
        return Ok(None);
    }
    let regions = trace_table(a.session, a.function, &schema, "regions")?;
    let input =
        activity::view(a, events, &locations.reference.to_quoted_string(), &regions.reference.to_quoted_string())?;
    let idx = input.columns(a.function, &activity::COLUMNS)?;
    Ok(Some((input, Some(idx))))
}

/// Whether a trace's `locations` table holds a location of kind gpu (read from the trace's
/// definitions, which are in memory from the start).
fn has_streams(locations: &Relation) -> Result<bool> {
    let Some(table) = locations.provider.downcast_ref::<commdb_catalog::session::trace_table::TraceTable>() else {
        return Ok(false);
    };
    let batches =
        table.trace().table("locations").map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let Some(kind) = batches.first().and_then(|b| b.schema().index_of("kind").ok()) else { return Ok(false) };
    let kinds = commdb_analysis::columns::text_column(&batches, kind)?;
    Ok(kinds.iter().any(|k| k == Some("gpu")))
}

/// A table computed from the offload activity of every rank.
fn over_activity(
    a: &Args,
    rel: Relation,
    f: impl Fn(&std::collections::BTreeMap<i64, activity::Rank>) -> Result<arrow::array::RecordBatch>
    + Send
    + Sync
    + 'static,
) -> Result<Arc<dyn TableProvider>> {
    let input = activity_of(a, rel)?;
    let idx = input.columns(a.function, &activity::COLUMNS)?;
    let compute: Compute = Arc::new(move |batches| Ok(vec![f(&activity::read(batches)?)?]));
    Ok(Arc::new(Derived::new(a.schema(), input, Some(idx), compute)))
}

fn offload_waits(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let AcceleratorArgs { rel } = AcceleratorArgs::read(a)?;
    let schema = a.schema();
    over_activity(a, rel, move |ranks| {
        let rows: Vec<waits::Wait> = ranks.iter().flat_map(|(&rank, r)| waits::waits(rank, r)).collect();
        waits::batch(&schema, &rows)
    })
}

fn offload_blame(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let AcceleratorArgs { rel } = AcceleratorArgs::read(a)?;
    let schema = a.schema();
    over_activity(a, rel, move |ranks| {
        let rows: Vec<waits::Wait> = ranks.iter().flat_map(|(&rank, r)| waits::waits(rank, r)).collect();
        waits::blame_batch(&schema, &rows)
    })
}

fn device_idle(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let IdleArgs { rel, busy } = IdleArgs::read(a)?;
    let (schema, kernels_only) = (a.schema(), busy == "kernels");
    over_activity(a, rel, move |ranks| {
        let rows: Vec<idle::Idle> = ranks.iter().flat_map(|(&rank, r)| idle::idle(rank, r, kernels_only)).collect();
        idle::idle_batch(&schema, &rows)
    })
}

fn gpu_utilisation(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let UtilisationArgs { rel, slots } = UtilisationArgs::read(a)?;
    let schema = a.schema();
    over_activity(a, rel, move |ranks| idle::utilisation(&schema, ranks, slots))
}

/// The relation of the call and its trace's `locations` and `events`, quoted for SQL.
fn inputs(a: &Args, columns: &[&str]) -> Result<(String, String, String)> {
    let AcceleratorArgs { rel } = AcceleratorArgs::read(a)?;
    rel.columns(a.function, columns)?;
    let Some(schema) = trace_schema(a.session, &rel) else {
        return plan_err!(
            "{}: '{}' is not read from one trace, so which of its locations are accelerator streams is unknown; give a trace's table or a view of one",
            a.function,
            rel.reference
        );
    };
    let locations = trace_table(a.session, a.function, &schema, "locations")?;
    let events = trace_table(a.session, a.function, &schema, "events")?;
    Ok((rel.reference.to_quoted_string(), locations.reference.to_quoted_string(), events.reference.to_quoted_string()))
}

/// The streams of `locations`: rank, thread, device and stream number from the name, name.
fn streams(locations: &str) -> String {
    format!(
        "SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread,
         CAST(regexp_match(name, '\\[([0-9]+):([0-9]+)\\]')[1] AS BIGINT) AS device,
         CAST(regexp_match(name, '\\[([0-9]+):([0-9]+)\\]')[2] AS BIGINT) AS stream, name
  FROM {locations} WHERE kind = 'gpu'"
    )
}

/// The view of `sql`, its rows in order of rank, stream and start, as its ORDER BY says.
fn view(a: &Args, sql: String) -> Result<Arc<dyn TableProvider>> {
    let view = commdb_analysis::views::sql_view(a.session, a.function, sql)?;
    Ok(Arc::new(commdb_analysis::ordered::OrderedView::new(view, &["rank", "thread", "start_ts"])))
}

fn gpu_kernels(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let (calls, locations, events) = inputs(a, &["rank", "thread", "region", "start_ts", "end_ts", "depth"])?;
    view(
        a,
        format!(
            "WITH s AS ({streams}),
k AS (
  SELECT s.rank, s.thread, s.device, s.stream, s.name AS stream_name, CAST(c.region AS VARCHAR) AS kernel,
         c.start_ts, c.end_ts, c.end_ts - c.start_ts AS duration_ns,
         row_number() OVER (PARTITION BY s.rank, s.thread ORDER BY c.start_ts, c.end_ts) AS n
  FROM {calls} c JOIN s ON CAST(c.rank AS BIGINT) = s.rank AND CAST(c.thread AS BIGINT) = s.thread
  WHERE c.depth = 0),
l AS (
  SELECT CAST(peer AS BIGINT) AS rank, CAST(tag AS BIGINT) AS stream_thread, CAST(thread AS BIGINT) AS thread,
         CAST(region AS VARCHAR) AS region, ts,
         row_number() OVER (PARTITION BY peer, tag ORDER BY ts, thread, seq) AS n
  FROM {events}
  WHERE kind = 'enter' AND peer IS NOT NULL AND tag IS NOT NULL AND lower(CAST(region AS VARCHAR)) LIKE '%launch%')
SELECT k.rank, k.thread, k.device, k.stream, k.stream_name, k.kernel, k.start_ts, k.end_ts, k.duration_ns,
       l.thread AS launch_thread, l.region AS launch_region, l.ts AS launch_ts, k.start_ts - l.ts AS queued_ns
FROM k LEFT JOIN l ON l.rank = k.rank AND l.stream_thread = k.thread AND l.n = k.n
ORDER BY k.rank, k.thread, k.start_ts",
            streams = streams(&locations)
        ),
    )
}

fn gpu_transfers(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let (events, locations, _) =
        inputs(a, &["rank", "thread", "seq", "ts", "kind", "peer", "tag", "bytes", "request"])?;
    view(a, format!("{} ORDER BY rank, thread, start_ts", transfers_sql(&events, &locations)))
}

/// The transfers of `events` (quoted) on the streams of `locations`: gpu_transfers' rows.
pub(crate) fn transfers_sql(events: &str, locations: &str) -> String {
    format!(
        "WITH s AS ({streams}),
ops AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, seq, ts, CAST(kind AS VARCHAR) AS kind,
         CAST(peer AS BIGINT) AS remote_rank, CAST(tag AS BIGINT) AS remote_thread, bytes, request
  FROM {events}
  WHERE kind IN ('rma_put', 'rma_get', 'rma_op_complete_blocking', 'rma_op_complete_non_blocking')),
starts AS (
  SELECT *, row_number() OVER (PARTITION BY rank, thread, request ORDER BY seq) AS k
  FROM ops WHERE kind IN ('rma_put', 'rma_get')),
ends AS (
  SELECT rank, thread, request, ts, row_number() OVER (PARTITION BY rank, thread, request ORDER BY seq) AS k
  FROM ops WHERE kind IN ('rma_op_complete_blocking', 'rma_op_complete_non_blocking')),
remote AS (SELECT CAST(rank AS BIGINT) AS rank, CAST(thread AS BIGINT) AS thread, kind FROM {locations})
SELECT t.rank, t.thread, s.device, s.stream,
       CASE WHEN r.kind = 'gpu' THEN 'device_to_device'
            WHEN r.kind = 'cpu' AND t.kind = 'rma_get' THEN 'host_to_device'
            WHEN r.kind = 'cpu' THEN 'device_to_host'
            WHEN t.kind = 'rma_get' THEN 'get' ELSE 'put' END AS direction,
       t.bytes, t.ts AS start_ts, x.ts AS end_ts, x.ts - t.ts AS duration_ns,
       t.remote_rank, t.remote_thread, t.request AS matching_id
FROM starts t
JOIN s ON s.rank = t.rank AND s.thread = t.thread
LEFT JOIN ends x ON x.rank = t.rank AND x.thread = t.thread AND (x.request IS NOT DISTINCT FROM t.request) AND x.k = t.k
LEFT JOIN remote r ON r.rank = t.remote_rank AND r.thread = t.remote_thread",
        streams = streams(locations)
    )
}
