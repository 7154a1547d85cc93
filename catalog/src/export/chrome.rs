//! A trace as Chrome trace-event JSON, the format Perfetto's UI (ui.perfetto.dev) and
//! chrome://tracing open: a process per rank and a thread per (rank, thread), named from the
//! `ranks` and `locations` tables; one complete event (`ph: X`) per call, named after its
//! region; one flow (`ph: s` at the send, `ph: f` at the receive, bound to the enclosing
//! slices) per matched message; an instant event (`ph: i`) per rank's part in a collective, at
//! the time the rank left it; a counter (`ph: C`) per metric sample. The format counts time in
//! microseconds: times are written as microseconds with three decimals, which keeps every
//! nanosecond, and the exact nanoseconds are in each event's args as well. The layout follows
//! the Trace Event Format document (Google, "Trace Event Format", the JSON object form with
//! `traceEvents`).
//!
//! Messages carry no thread: their flows are drawn on thread 0 of the sending and receiving
//! ranks, where the MPI calls of most programs run. Unmatched halves have no flow.
//!
//! Accelerator streams are threads of their rank, their kernels among the calls; their
//! transfers are complete events too (`cat: transfer`, named by direction), and a flow
//! (`cat: launch`) runs from each launch to the kernel it queued ([`crate::export::streams`]).

use std::io::Write;
use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type};

use crate::error::{Error, Result};
use crate::trace::Trace;

/// What an export wrote, by kind of event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub calls: usize,
    pub flows: usize,
    /// Transfers between host and device on accelerator streams, and flows from a launch to
    /// its kernel.
    pub transfers: usize,
    pub launches: usize,
    pub collectives: usize,
    pub counters: usize,
}

/// Write `trace` to `out` (by [`crate::writing`]'s rules: a file is replaced whole only when the
/// export is complete; a device or pipe is written in place). The trace's own files are refused.
pub fn write(trace: &Trace, out: &Path) -> Result<Written> {
    crate::writing::refuse_trace_files(trace, &[out.to_path_buf()])?;
    let mut w = crate::writing::Output::create(out)?;
    let written = write_to(trace, &mut w).map_err(|e| match e {
        Failure::Io(e) => Error::io(out, e),
        Failure::Trace(e) => e,
    })?;
    w.commit()?;
    Ok(written)
}

/// Hand every batch of table `name` to `f`: a store's table a file and a batch at a time
/// ([`crate::store::each_batch`]), so an export of a trace bigger than memory holds a batch, not
/// the table. A write error ends the walk and is returned as such.
fn each(trace: &Trace, name: &str, f: &mut dyn FnMut(&RecordBatch) -> Result<(), Failure>) -> Result<(), Failure> {
    let mut failed: Option<Failure> = None;
    let walked = crate::store::each_batch(trace, name, &mut |b| match f(&b) {
        Ok(()) => Ok(()),
        Err(e) => {
            failed = Some(e);
            Err(Error::Engine(format!("chrome export of {name} stopped")))
        }
    });
    match failed {
        Some(e) => Err(e),
        None => walked.map_err(Failure::Trace),
    }
}

enum Failure {
    Io(std::io::Error),
    Trace(Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Trace(e)
    }
}

impl From<arrow::error::ArrowError> for Failure {
    fn from(e: arrow::error::ArrowError) -> Self {
        Failure::Trace(e.into())
    }
}

/// Nanoseconds as microseconds with three decimals, exactly.
/// The first id of the launch flows, past any message's.
const LAUNCH_IDS: i64 = 1 << 50;

fn micros(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

/// A JSON string literal.
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// A column of a batch by name, as text (dictionaries decoded).
fn text(batch: &RecordBatch, name: &str) -> Result<ArrayRef> {
    Ok(arrow::compute::cast(column(batch, name)?, &DataType::Utf8)?)
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| Error::Engine(format!("chrome export: no column {name}")))
}

fn write_to(trace: &Trace, w: &mut impl Write) -> Result<Written, Failure> {
    let mut n = Written::default();
    let mut first = true;
    let mut event = |w: &mut dyn Write, json: std::fmt::Arguments<'_>| -> std::io::Result<()> {
        if !std::mem::take(&mut first) {
            w.write_all(b",\n")?;
        }
        w.write_fmt(json)
    };
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for b in &trace.table("ranks")? {
        let (rank, node, name) = (b.column(0).as_primitive::<Int32Type>(), text(b, "node")?, text(b, "name")?);
        let (node, name) = (node.as_string::<i32>(), name.as_string::<i32>());
        for i in 0..b.num_rows() {
            let r = rank.value(i);
            // The rank, its own name when it says more than that, and its node.
            let mut said = vec![format!("rank {r}")];
            if !name.is_null(i) && !name.value(i).is_empty() && name.value(i) != said[0] {
                said.push(name.value(i).to_string());
            }
            if !node.is_null(i) {
                said.push(node.value(i).to_string());
            }
            let label = match said.len() {
                1 => said.remove(0),
                _ => format!("{} ({})", said[0], said[1..].join(", ")),
            };
            event(
                w,
                format_args!(
                    "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{r},\"args\":{{\"name\":{}}}}}",
                    quoted(&label)
                ),
            )?;
            event(
                w,
                format_args!(
                    "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{r},\"args\":{{\"sort_index\":{r}}}}}"
                ),
            )?;
        }
    }
    for b in &trace.table("locations")? {
        let (rank, thread, name) = (column(b, "rank")?, column(b, "thread")?, text(b, "name")?);
        let (rank, thread, name) =
            (rank.as_primitive::<Int32Type>(), thread.as_primitive::<Int32Type>(), name.as_string::<i32>());
        for i in 0..b.num_rows() {
            let label = match name.value(i) {
                "" => format!("thread {}", thread.value(i)),
                named => format!("thread {}: {named}", thread.value(i)),
            };
            event(
                w,
                format_args!(
                    "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
                    rank.value(i),
                    thread.value(i),
                    quoted(&label)
                ),
            )?;
        }
    }
    each(trace, "calls", &mut |b| {
        let region = text(b, "region")?;
        let region = region.as_string::<i32>();
        let id = column(b, "call_id")?.as_primitive::<Int64Type>();
        let rank = column(b, "rank")?.as_primitive::<Int32Type>();
        let thread = column(b, "thread")?.as_primitive::<Int32Type>();
        let start = column(b, "start_ts")?.as_primitive::<Int64Type>();
        let end = column(b, "end_ts")?.as_primitive::<Int64Type>();
        let depth = column(b, "depth")?.as_primitive::<Int32Type>();
        for i in 0..b.num_rows() {
            let (s, e) = (start.value(i), end.value(i));
            event(
                w,
                format_args!(
                    "{{\"ph\":\"X\",\"cat\":\"call\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"call_id\":{},\"start_ns\":{s},\"duration_ns\":{},\"depth\":{}}}}}",
                    quoted(region.value(i)),
                    rank.value(i),
                    thread.value(i),
                    micros(s),
                    micros(e.saturating_sub(s)),
                    id.value(i),
                    e.saturating_sub(s),
                    depth.value(i)
                ),
            )?;
            n.calls += 1;
        }
        crate::interrupt::check("chrome export").map_err(Error::from)?;
        Ok(())
    })?;
    let streams = super::streams::read(trace)?;
    for t in &streams.transfers {
        let bytes = t.bytes.map_or("null".to_string(), |b| b.to_string());
        event(
            w,
            format_args!(
                "{{\"ph\":\"X\",\"cat\":\"transfer\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"bytes\":{bytes},\"start_ns\":{},\"duration_ns\":{}}}}}",
                t.direction,
                t.rank,
                t.stream,
                micros(t.start),
                micros(t.end.saturating_sub(t.start)),
                t.start,
                t.end.saturating_sub(t.start)
            ),
        )?;
        n.transfers += 1;
    }
    for (k, l) in streams.launches.iter().enumerate() {
        // Ids apart from the messages' (a message's id is its msg_id).
        let id = LAUNCH_IDS + k as i64;
        let args = format!("{{\"launch_ns\":{},\"kernel_start_ns\":{}}}", l.at, l.kernel_start);
        event(
            w,
            format_args!(
                "{{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{id},\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{args}}}",
                l.rank,
                l.thread,
                micros(l.at)
            ),
        )?;
        event(
            w,
            format_args!(
                "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{id},\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{args}}}",
                l.rank,
                l.stream,
                micros(l.kernel_start)
            ),
        )?;
        n.launches += 1;
    }
    each(trace, "messages", &mut |b| {
        let id = column(b, "msg_id")?.as_primitive::<Int64Type>();
        let (src, dst) = (column(b, "src")?.as_primitive::<Int32Type>(), column(b, "dst")?.as_primitive::<Int32Type>());
        let send = column(b, "send_ts")?.as_primitive::<Int64Type>();
        let recv = column(b, "recv_ts")?.as_primitive::<Int64Type>();
        let bytes = column(b, "bytes")?.as_primitive::<Int64Type>();
        let tag = column(b, "tag")?.as_primitive::<Int32Type>();
        for i in 0..b.num_rows() {
            if src.is_null(i) || dst.is_null(i) || send.is_null(i) || recv.is_null(i) {
                continue;
            }
            let (m, s, r) = (id.value(i), send.value(i), recv.value(i));
            let tag = if tag.is_null(i) { "null".to_string() } else { tag.value(i).to_string() };
            let args = format!(
                "{{\"msg_id\":{m},\"bytes\":{},\"tag\":{tag},\"send_ns\":{s},\"recv_ns\":{r},\"duration_ns\":{}}}",
                bytes.value(i),
                r.saturating_sub(s)
            );
            event(
                w,
                format_args!(
                    "{{\"ph\":\"s\",\"cat\":\"message\",\"name\":\"message\",\"id\":{m},\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{args}}}",
                    src.value(i),
                    micros(s)
                ),
            )?;
            event(
                w,
                format_args!(
                    "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"message\",\"name\":\"message\",\"id\":{m},\"pid\":{},\"tid\":0,\"ts\":{},\"args\":{args}}}",
                    dst.value(i),
                    micros(r)
                ),
            )?;
            n.flows += 1;
        }
        Ok(())
    })?;
    each(trace, "collectives", &mut |b| {
        let op = text(b, "op")?;
        let op = op.as_string::<i32>();
        let (comm, instance) =
            (column(b, "comm")?.as_primitive::<Int32Type>(), column(b, "instance")?.as_primitive::<Int64Type>());
        let (rank, thread) =
            (column(b, "rank")?.as_primitive::<Int32Type>(), column(b, "thread")?.as_primitive::<Int32Type>());
        let (begin, end) =
            (column(b, "begin_ts")?.as_primitive::<Int64Type>(), column(b, "end_ts")?.as_primitive::<Int64Type>());
        for i in 0..b.num_rows() {
            let e = end.value(i);
            let begin = if begin.is_null(i) { "null".to_string() } else { begin.value(i).to_string() };
            event(
                w,
                format_args!(
                    "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"collective\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{{\"comm\":{},\"instance\":{},\"begin_ns\":{begin},\"end_ns\":{e}}}}}",
                    quoted(op.value(i)),
                    rank.value(i),
                    thread.value(i),
                    micros(e),
                    comm.value(i),
                    instance.value(i)
                ),
            )?;
            n.collectives += 1;
        }
        Ok(())
    })?;
    each(trace, "metrics", &mut |b| {
        let metric = text(b, "metric")?;
        let metric = metric.as_string::<i32>();
        let rank = column(b, "rank")?.as_primitive::<Int32Type>();
        let ts = column(b, "ts")?.as_primitive::<Int64Type>();
        let value = column(b, "value")?.as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            let v = value.value(i);
            // JSON has no NaN or infinity.
            let v = if v.is_finite() { v.to_string() } else { "null".to_string() };
            let name = quoted(metric.value(i));
            event(
                w,
                format_args!(
                    "{{\"ph\":\"C\",\"cat\":\"metric\",\"name\":{name},\"pid\":{},\"ts\":{},\"args\":{{{name}:{v},\"ts_ns\":{}}}}}",
                    rank.value(i),
                    micros(ts.value(i)),
                    ts.value(i)
                ),
            )?;
            n.counters += 1;
        }
        Ok(())
    })?;
    let info = quoted(&trace.meta.name);
    let source = quoted(&trace.meta.path);
    write!(w, "\n],\"otherData\":{{\"trace\":{info},\"source\":{source},\"exported_by\":\"commdb\"}}}}\n")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::micros;

    #[test]
    fn microseconds_keep_every_nanosecond() {
        assert_eq!(micros(0), "0.000");
        assert_eq!(micros(1), "0.001");
        assert_eq!(micros(1_234_567), "1234.567");
        assert_eq!(micros(-1_500), "-1.500");
        assert_eq!(micros(i64::MIN), "-9223372036854775.808");
    }
}
