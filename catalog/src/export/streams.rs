//! What a Chrome export adds for accelerator streams (locations of kind gpu, which the export
//! shows as threads of their rank, kernels among their calls): each transfer between host and
//! device as a complete event on its stream, from the put or get to the completion with the
//! same matching id (the k-th completion of an id ends the k-th operation of it on the stream,
//! as Score-P writes them), named by its direction; and a flow from each launch to the kernel it
//! queued, the k-th launch naming a stream (its enter's `peer` and `tag`) to the k-th kernel on
//! it, as `gpu_kernels` pairs them (after CASITA). One pass over the events gives them all.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};

use crate::error::{Error, Result};
use crate::trace::Trace;

/// A transfer on a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub rank: i64,
    pub stream: i64,
    pub direction: &'static str,
    pub bytes: Option<i64>,
    pub start: i64,
    pub end: i64,
}

/// A launch and the kernel it queued: (rank, host thread, launch enter), (stream, kernel start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    pub rank: i64,
    pub thread: i64,
    pub at: i64,
    pub stream: i64,
    pub kernel_start: i64,
}

/// The transfers and launches of a trace's streams (none without streams: the events are then
/// not read).
#[derive(Debug, Default)]
pub struct Streams {
    pub transfers: Vec<Transfer>,
    pub launches: Vec<Launch>,
}

/// A put or get (`starts`), or a completion, on a stream, with its matching id.
struct Op {
    seq: i64,
    starts: bool,
    request: Option<i64>,
    transfer: Transfer,
}

fn int64(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let c = b.column_by_name(name).ok_or_else(|| Error::Engine(format!("chrome export: no column '{name}'")))?;
    Ok(cast(c, &DataType::Int64)?)
}

fn text(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let c = b.column_by_name(name).ok_or_else(|| Error::Engine(format!("chrome export: no column '{name}'")))?;
    Ok(cast(c, &DataType::Utf8)?)
}

/// The streams' transfers and launches of `trace`.
pub fn read(trace: &Trace) -> Result<Streams> {
    // Every location's kind: the streams, and a transfer's remote end.
    let mut kinds: HashMap<(i64, i64), bool> = HashMap::new();
    for b in &trace.table("locations")? {
        let (rank, thread, kind) = (int64(b, "rank")?, int64(b, "thread")?, text(b, "kind")?);
        let (rank, thread, kind) =
            (rank.as_primitive::<Int64Type>(), thread.as_primitive::<Int64Type>(), kind.as_string::<i32>());
        for i in 0..b.num_rows() {
            kinds.insert((rank.value(i), thread.value(i)), kind.value(i) == "gpu");
        }
    }
    let streams: HashSet<(i64, i64)> = kinds.iter().filter(|(_, gpu)| **gpu).map(|(k, _)| *k).collect();
    let mut out = Streams::default();
    if streams.is_empty() {
        return Ok(out);
    }
    let mut ops: Vec<Op> = Vec::new();
    // The enters and leaves on the streams: ((rank, stream), seq, ts, enter).
    let mut marks: Vec<((i64, i64), i64, i64, bool)> = Vec::new();
    // (rank, stream) -> the launches naming it: (enter, host thread).
    let mut launches: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
    crate::store::each_batch(trace, "events", &mut |b| {
        let (rank, thread, seq, ts) = (int64(&b, "rank")?, int64(&b, "thread")?, int64(&b, "seq")?, int64(&b, "ts")?);
        let (peer, tag, bytes, request) =
            (int64(&b, "peer")?, int64(&b, "tag")?, int64(&b, "bytes")?, int64(&b, "request")?);
        let (kind, region) = (text(&b, "kind")?, text(&b, "region")?);
        let (rank, thread, seq, ts) = (
            rank.as_primitive::<Int64Type>(),
            thread.as_primitive::<Int64Type>(),
            seq.as_primitive::<Int64Type>(),
            ts.as_primitive::<Int64Type>(),
        );
        let (peer, tag, bytes, request) = (
            peer.as_primitive::<Int64Type>(),
            tag.as_primitive::<Int64Type>(),
            bytes.as_primitive::<Int64Type>(),
            request.as_primitive::<Int64Type>(),
        );
        let (kind, region) = (kind.as_string::<i32>(), region.as_string::<i32>());
        let opt = |a: &arrow::array::Int64Array, i: usize| (!a.is_null(i)).then(|| a.value(i));
        for i in 0..b.num_rows() {
            let at = (rank.value(i), thread.value(i));
            let k = kind.value(i);
            if streams.contains(&at) && (k == "enter" || k == "leave") {
                marks.push((at, seq.value(i), ts.value(i), k == "enter"));
            } else if streams.contains(&at) && (k == "rma_put" || k == "rma_get") {
                let remote = opt(peer, i).zip(opt(tag, i)).and_then(|r| kinds.get(&r));
                let direction = match (remote, k) {
                    (Some(true), _) => "device_to_device",
                    (Some(false), "rma_get") => "host_to_device",
                    (Some(false), _) => "device_to_host",
                    (None, "rma_get") => "get",
                    (None, _) => "put",
                };
                let t = Transfer {
                    rank: at.0,
                    stream: at.1,
                    direction,
                    bytes: opt(bytes, i),
                    start: ts.value(i),
                    end: ts.value(i),
                };
                ops.push(Op { seq: seq.value(i), starts: true, request: opt(request, i), transfer: t });
            } else if streams.contains(&at) && (k == "rma_op_complete_blocking" || k == "rma_op_complete_non_blocking")
            {
                let done =
                    Transfer { rank: at.0, stream: at.1, direction: "", bytes: None, start: 0, end: ts.value(i) };
                ops.push(Op { seq: seq.value(i), starts: false, request: opt(request, i), transfer: done });
            } else if k == "enter"
                && !streams.contains(&at)
                && !region.is_null(i)
                && region.value(i).to_ascii_lowercase().contains("launch")
                && let (Some(p), Some(t)) = (opt(peer, i), opt(tag, i))
            {
                launches.entry((p, t)).or_default().push((ts.value(i), at.1));
            }
        }
        crate::interrupt::check("chrome export")?;
        Ok(())
    })?;
    // Each completion ends the earliest open operation of its id on its stream.
    ops.sort_by_key(|o| (o.transfer.rank, o.transfer.stream, o.seq));
    let mut open: HashMap<(i64, i64, Option<i64>), VecDeque<Transfer>> = HashMap::new();
    for op in ops {
        let key = (op.transfer.rank, op.transfer.stream, op.request);
        if op.starts {
            open.entry(key).or_default().push_back(op.transfer);
        } else if let Some(mut t) = open.get_mut(&key).and_then(VecDeque::pop_front) {
            t.end = op.transfer.end;
            out.transfers.push(t);
        }
    }
    out.transfers.sort_by_key(|t| (t.rank, t.stream, t.start));
    // The kernels: the outermost regions on the streams (an enter at depth 0), by start.
    marks.sort_unstable_by_key(|m| (m.0, m.1));
    let mut kernels: BTreeMap<(i64, i64), Vec<i64>> = BTreeMap::new();
    let mut depth: HashMap<(i64, i64), i64> = HashMap::new();
    for (at, _, ts, enter) in marks {
        let d = depth.entry(at).or_default();
        if enter {
            if *d == 0 {
                kernels.entry(at).or_default().push(ts);
            }
            *d += 1;
        } else {
            *d = (*d - 1).max(0);
        }
    }
    for ((rank, stream), mut starts) in kernels {
        starts.sort_unstable();
        let Some(mut queued) = launches.remove(&(rank, stream)) else { continue };
        queued.sort_unstable();
        for (kernel_start, (at, thread)) in starts.into_iter().zip(queued) {
            out.launches.push(Launch { rank, thread, at, stream, kernel_start });
        }
    }
    Ok(out)
}
