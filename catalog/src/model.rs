//! The trace model: the Arrow schema of every table commdb exposes, defined here and nowhere
//! else, with a one-line meaning per column (shown by the shell's `\d NAME` and in docs/reference.md).
//!
//! Times are Int64 nanoseconds since the trace's own zero; durations are Int64 nanoseconds;
//! byte counts are Int64. Low-cardinality text (event kinds, region names, collective
//! operations, metric names) is dictionary-encoded, which keeps a 100 M-event table small.

use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The catalog all schemas live in.
pub const CATALOG: &str = "datafusion";
/// The default schema: tables of the first trace, and the user's views.
pub const DEFAULT_SCHEMA: &str = "public";

/// Whether a trace table's rows are in rank order, in memory and in a store: the events and
/// the calls are kept stream by stream in (rank, thread) order ([`crate::events`]), and a store
/// writes them, and a conversion in groups their groups, in that order. A store's scans
/// declare it (its parts hold consecutive rows), so DataFusion merges their partitions in rank
/// order instead of sorting, and the analyses that sweep rank by rank read a store's calls as
/// they stream. Tables in memory are read whole by those analyses: they are held already, and
/// merging them would only copy them.
pub fn rank_ordered(table: &str) -> bool {
    matches!(table, "events" | "calls")
}

/// One column of a table: name, type, nullability and what it means.
#[derive(Debug, Clone, Copy)]
pub struct ColumnDoc {
    pub name: &'static str,
    pub data_type: fn() -> DataType,
    pub nullable: bool,
    pub meaning: &'static str,
}

impl ColumnDoc {
    /// The same column, declared never to hold NULL.
    pub const fn never_null(self) -> ColumnDoc {
        ColumnDoc { nullable: false, ..self }
    }

    /// The column as an Arrow field.
    pub fn field(&self) -> Field {
        Field::new(self.name, (self.data_type)(), self.nullable)
    }
}

/// One table of a trace.
#[derive(Debug, Clone, Copy)]
pub struct TableDoc {
    pub name: &'static str,
    pub one_row_per: &'static str,
    /// Where the rows come from, when more needs saying than the columns' meanings.
    pub about: &'static str,
    pub columns: &'static [ColumnDoc],
}

impl TableDoc {
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.columns.iter().map(ColumnDoc::field).collect::<Vec<_>>()))
    }
}

fn int32() -> DataType {
    DataType::Int32
}
fn int64() -> DataType {
    DataType::Int64
}
fn float64() -> DataType {
    DataType::Float64
}
fn utf8() -> DataType {
    DataType::Utf8
}
fn boolean() -> DataType {
    DataType::Boolean
}
fn timestamp_utc() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}
/// Dictionary of a few names (event kinds, collective operations).
pub fn small_dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
}
/// Dictionary of many names (regions, metrics).
pub fn dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}
fn int32_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int32, true)))
}

const fn col(name: &'static str, data_type: fn() -> DataType, nullable: bool, meaning: &'static str) -> ColumnDoc {
    ColumnDoc { name, data_type, nullable, meaning }
}

pub const TRACE_INFO: TableDoc = TableDoc {
    name: "trace_info",
    one_row_per: "trace",
    about: "",
    columns: &[
        col("name", utf8, false, "schema name of the trace"),
        col("path", utf8, false, "file or directory it was read from"),
        col(
            "format",
            utf8,
            false,
            "format of the source: otf2, csv-pclvis, csv-events or generated (a commdb store keeps its source's)",
        ),
        col("format_version", utf8, true, "version of the file format, when it has one"),
        col("creator", utf8, true, "program that wrote the trace"),
        col("ranks", int64, false, "number of MPI ranks"),
        col("locations", int64, false, "number of locations (threads, streams)"),
        col("timer_resolution_hz", int64, true, "ticks per second of the recording clock"),
        col("start_wallclock", timestamp_utc, true, "absolute UTC time of ts = 0, when known"),
        col("duration_ns", int64, false, "last event time minus first event time"),
        col("events", int64, false, "number of raw events"),
        col("warnings", int64, false, "number of problems found while loading (see the warnings table)"),
        col(
            "clock_correction",
            utf8,
            false,
            "how times were corrected: none (no sync data), off, model (clock_model()) or clc (model, then controlled logical clock)",
        ),
        col("clock_violations", int64, false, "matched messages received before they were sent, after correction"),
    ],
};

/// Whether a column of this name holds nanoseconds, in the model's tables and the analyses'
/// outputs: `ts`, `duration`, `exclusive`, `round_trip` and every `*_ts`, `*_ns`, `*_start`
/// and `*_end` (send_call_start, bin_end, window_start, ...). SQL reads a duration literal
/// next to one in nanoseconds (`WHERE send_ts > '8ms'`, [`crate::session::durations`]).
pub fn is_time_column(name: &str) -> bool {
    matches!(name, "ts" | "ts_local" | "duration" | "exclusive" | "round_trip")
        || ["_ts", "_ns", "_start", "_end"].iter().any(|s| name.ends_with(s))
}

pub const RANKS: TableDoc = TableDoc {
    name: "ranks",
    one_row_per: "MPI rank",
    about: "",
    columns: &[
        col("rank", int32, false, "rank in MPI_COMM_WORLD"),
        col("node", utf8, true, "host name of the node the rank ran on"),
        col("node_index", int32, true, "0-based index of the node, in order of first appearance"),
        col("name", utf8, false, "display name of the rank"),
        col(
            "application",
            int32,
            true,
            "the application the rank belongs to (Paraver: 1-based, in header order; ranks are numbered across the applications that communicate); NULL where the format has none",
        ),
    ],
};

pub const LOCATIONS: TableDoc = TableDoc {
    name: "locations",
    one_row_per: "location (OTF2 location, Paraver thread)",
    about: "",
    columns: &[
        col("location_id", int64, false, "location identifier in the source trace"),
        col("rank", int32, false, "rank the location belongs to"),
        col("thread", int32, false, "0-based thread index within the rank"),
        col("kind", utf8, false, "cpu, gpu or metric"),
        col("name", utf8, false, "display name"),
        col("events", int64, false, "number of raw events recorded on it"),
        col(
            "node",
            utf8,
            true,
            "the node it ran on: its rank's, or for another application's location (a Paraver sampler of node counters) the node the trace places it on",
        ),
    ],
};

pub const REGIONS: TableDoc = TableDoc {
    name: "regions",
    one_row_per: "code region",
    about: "",
    columns: &[
        col("region_id", int64, false, "region identifier"),
        col("name", utf8, false, "region name, e.g. MPI_Send or a function"),
        col("paradigm", utf8, false, "mpi, user, compiler, ..."),
        col("role", utf8, true, "function, point_to_point, collective, ..."),
        col("file", utf8, true, "source file"),
        col("line", int64, true, "first line in the source file"),
    ],
};

pub const EVENTS: TableDoc = TableDoc {
    name: "events",
    one_row_per: "raw event",
    about: "",
    columns: &[
        col("rank", int32, false, "rank that recorded the event"),
        col("thread", int32, false, "thread within the rank"),
        col("seq", int64, false, "0-based position in the (rank, thread) event stream"),
        col("ts", int64, false, "time in ns since the trace's zero, on the master clock after clock correction"),
        col(
            "kind",
            small_dict,
            false,
            "enter, leave, send, isend, isend_complete, irecv_request, recv, irecv, coll_begin, coll_end, ...; thread_fork, thread_join, thread_team_begin, thread_team_end, thread_acquire_lock, thread_release_lock, thread_task_create, thread_task_switch, thread_task_complete, thread_create, thread_begin, thread_wait, thread_end (OpenMP and Pthreads); rma_win_create, rma_win_destroy, rma_put, rma_get, rma_op_complete_blocking, rma_op_complete_non_blocking, rma_op_test, rma_op_complete_remote (one-sided operations, an accelerator's transfers among them)",
        ),
        col("region", dict, true, "region entered or left (enter, leave)"),
        col(
            "peer",
            int32,
            true,
            "partner rank: receiver of a send, sender of a receive, root of a collective; the thread that created a task, by its number in the team (thread_task_*); the rank of a put or get's remote end (rma_put, rma_get); the rank of the accelerator stream an API call names (enter, leave: Score-P's CUDA_STREAM_REF)",
        ),
        col(
            "comm",
            int32,
            true,
            "communicator id; the thread team (thread_team_*, thread_task_*) or thread contingent (thread_create, thread_begin, thread_wait, thread_end); the communicator of the RMA window (rma_*)",
        ),
        col(
            "tag",
            int32,
            true,
            "message tag; threads requested (thread_fork), acquisition order (thread_*_lock), generation number of a task in its team (thread_task_*); the thread of a put or get's remote end under its rank (rma_put, rma_get), and of the stream an accelerator API call names (enter, leave)",
        ),
        col("bytes", int64, true, "message size, or bytes sent by this rank in a collective"),
        col(
            "request",
            int64,
            true,
            "request id of a non-blocking operation; lock id (thread_*_lock), task id (thread_task_* of OTF2 1.x), sequence count (thread_create, thread_begin, thread_wait, thread_end), matching id (rma_put, rma_get and the completions that repeat it), the device event an accelerator API call names (enter, leave: CUDA_EVENT_REF)",
        ),
        col("op", small_dict, true, "collective operation (coll_end)"),
        col("bytes_recv", int64, true, "bytes received by this rank in a collective (coll_end)"),
        col(
            "ts_local",
            int64,
            false,
            "time on the rank's own clock before clock correction (ns); equals ts when nothing was corrected",
        ),
    ],
};

pub const CALLS: TableDoc = TableDoc {
    name: "calls",
    one_row_per: "enter/leave pair",
    about: "",
    columns: &[
        col("call_id", int64, false, "call identifier, in order of rank, thread and start"),
        col("rank", int32, false, "rank"),
        col("thread", int32, false, "thread within the rank"),
        col("region", dict, false, "region called"),
        col("start_ts", int64, false, "enter time (ns)"),
        col("end_ts", int64, false, "leave time (ns)"),
        col("duration", int64, false, "end_ts - start_ts (ns)"),
        col("exclusive", int64, false, "duration minus the duration of directly nested calls (ns)"),
        col("depth", int32, false, "nesting depth, 0 for outermost calls"),
        col("parent_id", int64, true, "call_id of the enclosing call"),
    ],
};

pub const MESSAGES: TableDoc = TableDoc {
    name: "messages",
    one_row_per: "point-to-point message (matched, or an unmatched half with NULL partner columns)",
    about: "",
    columns: &[
        col("msg_id", int64, false, "message identifier, in order of send time"),
        col("src", int32, true, "sending rank; NULL when the receive names a peer that resolves to no rank"),
        col("dst", int32, true, "receiving rank; NULL when the send names a peer that resolves to no rank"),
        col("comm", int32, true, "communicator id"),
        col("tag", int32, true, "message tag"),
        col("bytes", int64, false, "message size in bytes"),
        col("send_ts", int64, true, "time of the send event (ns); NULL when the send is missing"),
        col("recv_ts", int64, true, "time the receive completed (ns); NULL when the receive is missing"),
        col("send_call_start", int64, true, "start of the MPI call that sent it"),
        col("send_call_end", int64, true, "end of the MPI call that sent it"),
        col("recv_call_start", int64, true, "start of the MPI call that completed the receive"),
        col("recv_call_end", int64, true, "end of the MPI call that completed the receive"),
        col(
            "recv_post_ts",
            int64,
            true,
            "time the receive was posted: the start of the MPI_Irecv call that posted it (its request's time outside any call), or of a blocking receive",
        ),
        col(
            "send_complete_ts",
            int64,
            true,
            "time a non-blocking send was completed (Wait/Test), or the end of a blocking send",
        ),
        col("src_node", dict, true, "node of the sender"),
        col("dst_node", dict, true, "node of the receiver"),
        col("intra_node", boolean, true, "sender and receiver on the same node"),
        col("duration", int64, true, "transmission time recv_ts - send_ts (ns)"),
        col(
            "send_complete_call_start",
            int64,
            true,
            "start of the MPI call that completed the send (the Wait or Test of a non-blocking send; the send's own call for a blocking one)",
        ),
        col("src_thread", int32, true, "thread of the sending rank that sent it (NULL when the send is missing)"),
        col(
            "dst_thread",
            int32,
            true,
            "thread of the receiving rank that completed the receive (NULL when the receive is missing)",
        ),
    ],
};

pub const COLLECTIVES: TableDoc = TableDoc {
    name: "collectives",
    one_row_per: "rank's part in one collective operation",
    about: "",
    columns: &[
        col(
            "instance",
            int64,
            false,
            "0-based sequence number of the operation on its communicator; on MPI_COMM_SELF, where every rank's operations are its own, numbered across ranks so that (comm, instance) names one operation",
        ),
        col("comm", int32, false, "communicator id"),
        col("op", small_dict, false, "collective operation: barrier, bcast, allreduce, ..."),
        col("root", int32, true, "root rank, for rooted operations"),
        col("rank", int32, false, "participating rank"),
        col("thread", int32, false, "thread within the rank"),
        col("begin_ts", int64, true, "time the rank began the operation (ns)"),
        col("end_ts", int64, false, "time the rank ended the operation (ns)"),
        col("duration", int64, true, "end_ts - begin_ts (ns)"),
        col("bytes_sent", int64, false, "bytes sent by this rank"),
        col("bytes_recv", int64, false, "bytes received by this rank"),
        col(
            "call_start",
            int64,
            true,
            "start of the MPI call the rank began the operation in (its collective waits start there, as Scalasca's do)",
        ),
    ],
};

pub const COMMUNICATORS: TableDoc = TableDoc {
    name: "communicators",
    one_row_per: "communicator",
    about: "",
    columns: &[
        col("comm", int32, false, "communicator id"),
        col("name", utf8, false, "name, e.g. MPI_COMM_WORLD"),
        col("size", int32, false, "number of member ranks (1 for MPI_COMM_SELF: each rank alone)"),
        col(
            "members",
            int32_list,
            true,
            "world ranks of the members, in communicator rank order (NULL where the writer's definition names no rank); NULL for MPI_COMM_SELF, whose one member is whichever rank calls",
        ),
    ],
};

pub const CLOCK_SYNC: TableDoc = TableDoc {
    name: "clock_sync",
    one_row_per: "clock synchronisation sample or offset point",
    about: "",
    columns: &[
        col("rank", int32, false, "rank whose clock was measured"),
        col("session", int32, false, "0-based sync session (samples taken together)"),
        col(
            "local_ts",
            int64,
            false,
            "local time of the sample (midpoint of the ping-pong) or of the offset point (ns)",
        ),
        col("master_ts", int64, false, "master clock time at local_ts (ns)"),
        col("round_trip", int64, true, "round-trip time of a ping-pong sample (ns); NULL for offset points"),
        col("std_dev_ns", int64, true, "standard deviation of an offset point (ns); NULL for samples"),
    ],
};

pub const STATES: TableDoc = TableDoc {
    name: "states",
    one_row_per: "interval a thread spent in one state (Paraver state records; empty for other formats)",
    about: "",
    columns: &[
        col("rank", int32, false, "rank"),
        col("thread", int32, false, "thread within the rank"),
        col("begin_ts", int64, false, "start of the interval (ns)"),
        col("end_ts", int64, false, "end of the interval (ns)"),
        col("state", int32, false, "state number as recorded"),
        col("name", dict, true, "state name from the .pcf (Running, Waiting a message, ...)"),
    ],
};
pub const METRICS: TableDoc = TableDoc {
    name: "metrics",
    one_row_per: "metric sample",
    about: "",
    columns: &[
        col("rank", int32, false, "rank"),
        col("thread", int32, false, "thread within the rank"),
        col("ts", int64, false, "time (ns)"),
        col("metric", dict, false, "metric name, e.g. PAPI_TOT_CYC"),
        col("value", float64, false, "sampled value"),
    ],
};

pub const METRIC_DEFINITIONS: TableDoc = TableDoc {
    name: "metric_definitions",
    one_row_per: "metric",
    about: "What the trace's writer says of each metric: OTF2's MetricMember (mode, unit, description), Paraver's .pcf (Extrae's hardware-counter types 42000000-42999999 count since the thread's previous reading, relative_last; other types have no mode). Empty for CSV and generated traces, and for stores written before it existed.",
    columns: &[
        col("metric", utf8, false, "metric name, as in metrics.metric"),
        col(
            "mode",
            utf8,
            true,
            "how values relate to time (OTF2's metric mode): accumulated_start (a counter since a fixed point), relative_last (counted since the previous sample; Paraver's hardware counters), absolute_point (a reading), ...; NULL when the trace does not say",
        ),
        col("unit", utf8, true, "unit the writer gives, e.g. # for counts"),
        col("description", utf8, true, "what the metric counts, as the writer describes it"),
    ],
};

pub const WARNINGS: TableDoc = TableDoc {
    name: "warnings",
    one_row_per: "kind of problem found while loading",
    about: "",
    columns: &[
        col("code", utf8, false, "short name of the problem, e.g. unmatched_send"),
        col("count", int64, false, "how many times it occurred"),
        col("message", utf8, false, "what it means, with the first occurrence"),
    ],
};

/// Every table of a trace, in the order they are listed to users.
pub const TABLES: &[TableDoc] = &[
    TRACE_INFO,
    RANKS,
    LOCATIONS,
    REGIONS,
    EVENTS,
    CALLS,
    MESSAGES,
    COLLECTIVES,
    COMMUNICATORS,
    CLOCK_SYNC,
    METRICS,
    METRIC_DEFINITIONS,
    STATES,
    WARNINGS,
];

/// The documentation of a table by name.
pub fn table_doc(name: &str) -> Option<&'static TableDoc> {
    TABLES.iter().find(|t| t.name.eq_ignore_ascii_case(name))
}

static SCHEMAS: LazyLock<Vec<SchemaRef>> = LazyLock::new(|| TABLES.iter().map(TableDoc::schema).collect());

/// The schema of a table by name.
pub fn schema(name: &str) -> Option<SchemaRef> {
    TABLES.iter().position(|t| t.name == name).map(|i| SCHEMAS[i].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_unique_columns_and_a_meaning() {
        for t in TABLES {
            let mut names: Vec<_> = t.columns.iter().map(|c| c.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), t.columns.len(), "duplicate column in {}", t.name);
            assert!(t.columns.iter().all(|c| !c.meaning.is_empty()));
            assert_eq!(schema(t.name).unwrap().fields().len(), t.columns.len());
        }
    }
}
