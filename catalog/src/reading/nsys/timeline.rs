//! An export's intervals and tasks as commdb's events, location by location. A host thread's
//! intervals (MPI calls, NVTX ranges, CUDA API calls) become enter and leave events nested by
//! time (an interval inside another is its callee; at equal bounds an MPI call encloses an NVTX
//! range, which encloses an API call); an interval that crosses another's end (NVTX start/end
//! ranges may) cannot nest and is counted, not kept. An MPI call carries the events Score-P's
//! MPI adapter writes inside the call, so that messages and collectives derive as from OTF2:
//! a send at its start, a receive at its end, a non-blocking operation's request at its start
//! and its completion at the end of the wait that names the request, a collective's begin and
//! end. An API call that the device's records tie to a stream names it (peer the rank, tag
//! the stream's thread, request the device event), as Score-P's CUDA_STREAM_REF and
//! CUDA_EVENT_REF attributes do. A stream's kernels and memsets are calls on its location; a copy
//! is an RMA get (host to device) or put (device to host, or between devices with the stream
//! itself as the other end) at its start, completed at its end under the copy's correlation id
//! (crate's accelerator model, udfs' `gpu_transfers`).

use crate::fast_hash::FastMap;

use super::export::{Mpi, Span, Task, TaskKind, What};
use crate::events::{EventKind, NONE_I32, NONE_I64, RawEvents, collective_op_code};
use crate::trace::Warnings;

/// The location an API call's stream and a copy's host end resolve to: (rank, thread).
pub type Place = (i32, i32);

/// What the timeline of a rank needs from the rest of the trace.
pub struct Context<'a> {
    pub rank: i32,
    /// Region index by (name, paradigm), added to as names are met.
    pub regions: &'a mut super::Regions,
    /// The stream (and device event) each correlation id's host call names.
    pub ties: &'a FastMap<i64, (Place, Option<i64>)>,
    /// The host thread of each correlation id's API call.
    pub callers: &'a FastMap<i64, Place>,
    /// The communicator id of an MPI comm handle on this rank, and its members (world ranks).
    pub comms: &'a dyn Fn(Option<i64>) -> (i32, Option<&'a [i32]>),
    /// Outstanding non-blocking operations by request handle.
    pub pending: FastMap<i64, Pending>,
    pub warnings: &'a mut Warnings,
    pub file: &'a str,
}

/// A non-blocking operation waiting for its completion.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    recv: bool,
    peer: i32,
    comm: i32,
    tag: i32,
    bytes: i64,
}

/// Which point-to-point operation an MPI call's name says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum P2p {
    Send,
    Isend,
    Recv,
    Irecv,
    Other,
}

fn p2p(name: &str) -> P2p {
    let lower = name.to_ascii_lowercase();
    match lower.strip_prefix("mpi_").unwrap_or(&lower) {
        "send" | "ssend" | "bsend" | "rsend" => P2p::Send,
        "isend" | "issend" | "ibsend" | "irsend" => P2p::Isend,
        "recv" => P2p::Recv,
        "irecv" => P2p::Irecv,
        _ => P2p::Other,
    }
}

/// The role of an MPI region by its name and table, as OTF2 names roles.
pub fn mpi_role(name: &str, table: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    let op = lower.strip_prefix("mpi_").unwrap_or(&lower);
    let op = op.strip_prefix('i').filter(|_| table == "collective").unwrap_or(op);
    match op {
        "barrier" => "barrier",
        "bcast" | "scatter" | "scatterv" => "coll_one2all",
        "reduce" | "gather" | "gatherv" => "coll_all2one",
        "allreduce"
        | "allgather"
        | "allgatherv"
        | "alltoall"
        | "alltoallv"
        | "alltoallw"
        | "reduce_scatter"
        | "reduce_scatter_block" => "coll_all2all",
        _ if table == "collective" => "coll_other",
        _ if table == "p2p" || table == "wait" || p2p(name) != P2p::Other => "point2point",
        _ => "function",
    }
}

/// Append the events of a host thread's intervals to `out`.
pub fn host(out: &mut RawEvents, thread: i32, mut spans: Vec<Span>, cx: &mut Context<'_>) {
    let order = |w: &What| match w {
        What::Mpi(_) => 0,
        What::Range => 1,
        What::Api { .. } => 2,
    };
    spans.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(order(&a.what).cmp(&order(&b.what))));
    let mut open: Vec<(Span, i32)> = Vec::new();
    let mut crossing = 0i64;
    for span in spans {
        if span.end < span.start {
            crossing += 1;
            continue;
        }
        while open.last().is_some_and(|(top, _)| top.end <= span.start && top.end < span.end) {
            let (top, region) = open.pop().expect("checked");
            leave(out, thread, &top, region, cx);
        }
        if open.last().is_some_and(|(top, _)| span.end > top.end) {
            crossing += 1;
            continue;
        }
        let region = enter(out, thread, &span, cx);
        open.push((span, region));
    }
    while let Some((top, region)) = open.pop() {
        leave(out, thread, &top, region, cx);
    }
    let (file, rank) = (cx.file, cx.rank);
    cx.warnings.add_many("nsys_crossing_range", crossing, || {
        format!("{file}: an interval of rank {rank} thread {thread} (an NVTX start/end range, or a call) crosses the end of the one it began in; it cannot nest and is left out")
    });
}

fn region_of(span: &Span, cx: &mut Context<'_>) -> i32 {
    match &span.what {
        What::Mpi(m) => cx.regions.index(&span.name, "mpi", mpi_role(&span.name, m.table)),
        What::Range => cx.regions.index(&span.name, "user", "function"),
        What::Api { .. } => cx.regions.index(&span.name, "cuda", "wrapper"),
    }
}

fn event(rank: i32, thread: i32, ts: i64, kind: EventKind) -> crate::events::Event {
    crate::events::Event::new(rank, thread, ts, kind)
}

fn enter(out: &mut RawEvents, thread: i32, span: &Span, cx: &mut Context<'_>) -> i32 {
    let region = region_of(span, cx);
    let mut e = event(cx.rank, thread, span.start, EventKind::Enter);
    e.region = region;
    if let What::Api { correlation } = span.what
        && let Some(&((rank, stream), device_event)) = cx.ties.get(&correlation)
    {
        (e.peer, e.tag, e.request) = (rank, stream, device_event.unwrap_or(NONE_I64));
    }
    out.push(e);
    if let What::Mpi(m) = &span.what {
        mpi_begin(out, thread, span, m, cx);
    }
    region
}

fn leave(out: &mut RawEvents, thread: i32, span: &Span, region: i32, cx: &mut Context<'_>) {
    if let What::Mpi(m) = &span.what {
        mpi_end(out, thread, span, m, cx);
    }
    let mut e = event(cx.rank, thread, span.end, EventKind::Leave);
    e.region = region;
    out.push(e);
}

/// A communicator-relative rank as a world rank (the members of the communicator, in order).
fn world(rank: Option<i64>, members: Option<&[i32]>) -> i32 {
    match (rank, members) {
        (Some(r), Some(m)) => usize::try_from(r).ok().and_then(|r| m.get(r).copied()).unwrap_or(NONE_I32),
        (Some(r), None) => i32::try_from(r).unwrap_or(NONE_I32),
        (None, _) => NONE_I32,
    }
}

fn mpi_begin(out: &mut RawEvents, thread: i32, span: &Span, m: &Mpi, cx: &mut Context<'_>) {
    let (comm, members) = (cx.comms)(m.comm);
    let mut e = event(cx.rank, thread, span.start, EventKind::Other);
    match m.table {
        "p2p" => {
            let kind = p2p(&span.name);
            let (peer, tag, bytes) =
                (world(m.peer, members), m.tag.map_or(NONE_I32, |t| t as i32), m.bytes.unwrap_or(NONE_I64));
            match kind {
                P2p::Send | P2p::Isend => {
                    e.kind = if kind == P2p::Send { EventKind::Send } else { EventKind::Isend };
                    (e.peer, e.comm, e.tag, e.bytes) = (peer, comm, tag, bytes);
                    if kind == P2p::Isend {
                        e.request = m.request.unwrap_or(NONE_I64);
                    }
                    out.push(e);
                }
                P2p::Irecv => {
                    e.kind = EventKind::IrecvRequest;
                    e.request = m.request.unwrap_or(NONE_I64);
                    out.push(e);
                }
                P2p::Recv | P2p::Other => {}
            }
            if matches!(kind, P2p::Isend | P2p::Irecv)
                && let Some(request) = m.request
            {
                cx.pending.insert(request, Pending { recv: kind == P2p::Irecv, peer, comm, tag, bytes });
            }
            if kind == P2p::Other && span.name.to_ascii_lowercase().contains("sendrecv") {
                let (file, rank) = (cx.file, cx.rank);
                cx.warnings.add("nsys_sendrecv_without_peers", || {
                    format!("{file}: rank {rank}'s {} at {} ns: nsys records one remote rank for its send and its receive, so it is kept as a call without messages", span.name, span.start)
                });
            }
        }
        "collective" => {
            e.kind = EventKind::CollBegin;
            out.push(e);
        }
        _ => {}
    }
}

fn mpi_end(out: &mut RawEvents, thread: i32, span: &Span, m: &Mpi, cx: &mut Context<'_>) {
    let (comm, members) = (cx.comms)(m.comm);
    let mut e = event(cx.rank, thread, span.end, EventKind::Other);
    match m.table {
        "p2p" if p2p(&span.name) == P2p::Recv => {
            e.kind = EventKind::Recv;
            (e.peer, e.comm, e.tag, e.bytes) =
                (world(m.peer, members), comm, m.tag.map_or(NONE_I32, |t| t as i32), m.bytes.unwrap_or(NONE_I64));
            out.push(e);
        }
        "wait" => match m.request.and_then(|r| cx.pending.remove(&r).map(|p| (r, p))) {
            Some((request, p)) => {
                e.request = request;
                if p.recv {
                    e.kind = EventKind::Irecv;
                    (e.peer, e.comm, e.tag, e.bytes) = (p.peer, p.comm, p.tag, p.bytes);
                } else {
                    e.kind = EventKind::IsendComplete;
                }
                out.push(e);
            }
            None => {
                let (file, rank) = (cx.file, cx.rank);
                cx.warnings.add("nsys_request_unknown", || {
                    format!("{file}: rank {rank}'s {} at {} ns names request {:?}, which no outstanding MPI_Isend or MPI_Irecv of the rank holds; it completes nothing", span.name, span.end, m.request)
                });
            }
        },
        "collective" => {
            e.kind = EventKind::CollEnd;
            e.op = op_code(&span.name);
            (e.comm, e.peer) = (comm, world(m.peer, members));
            (e.bytes, e.bytes_recv) = (m.bytes.unwrap_or(0), m.bytes_recv.unwrap_or(0));
            out.push(e);
        }
        _ => {}
    }
}

/// The collective operation of an MPI call's name, a non-blocking one (MPI_Iallreduce) as its
/// blocking kin.
fn op_code(name: &str) -> u8 {
    let unknown = crate::events::COLLECTIVE_OPS.len() as u8;
    let code = collective_op_code(name);
    let lower = name.to_ascii_lowercase();
    match lower.strip_prefix("mpi_i") {
        Some(blocking) if code == unknown => collective_op_code(blocking),
        _ => code,
    }
}

/// Append the events of a stream's tasks to `out`; kernels or memsets that overlap the one
/// before them on the stream are counted and left out.
pub fn stream(out: &mut RawEvents, thread: i32, mut tasks: Vec<Task>, cx: &mut Context<'_>) {
    tasks.sort_by_key(|t| (t.start, t.end));
    let mut events: Vec<(i64, u8, crate::events::Event)> = Vec::with_capacity(2 * tasks.len());
    let mut busy_until = i64::MIN;
    let mut overlapping = 0i64;
    let here = (cx.rank, thread);
    for t in tasks {
        match t.kind {
            TaskKind::Kernel | TaskKind::Memset => {
                if t.start < busy_until || t.end < t.start {
                    overlapping += 1;
                    continue;
                }
                busy_until = t.end;
                let region = cx.regions.index(&t.name, "cuda", "function");
                let mut b = event(cx.rank, thread, t.start, EventKind::Enter);
                b.region = region;
                let mut x = event(cx.rank, thread, t.end, EventKind::Leave);
                x.region = region;
                events.push((t.start, 1, b));
                events.push((t.end, 0, x));
            }
            TaskKind::Copy { kind, bytes } => {
                let caller = t.correlation.and_then(|c| cx.callers.get(&c)).copied();
                // CUPTI's copy kinds: 1 host to device, 3 host to array; 2 device to host, 4
                // array to host; 5-8 and 10 within or between devices.
                let (get, remote) = match kind {
                    1 | 3 => (true, caller),
                    2 | 4 => (false, caller),
                    5..=8 | 10 => (false, Some(here)),
                    _ => (false, None),
                };
                let mut b = event(cx.rank, thread, t.start, if get { EventKind::RmaGet } else { EventKind::RmaPut });
                (b.peer, b.tag) = remote.unwrap_or((NONE_I32, NONE_I32));
                b.bytes = bytes;
                b.request = t.correlation.unwrap_or(NONE_I64);
                let mut x = event(cx.rank, thread, t.end.max(t.start), EventKind::RmaOpCompleteBlocking);
                x.request = b.request;
                events.push((t.start, 1, b));
                events.push((t.end.max(t.start), 0, x));
            }
        }
    }
    events.sort_by_key(|(ts, order, _)| (*ts, *order));
    for (_, _, e) in events {
        out.push(e);
    }
    let (file, rank) = (cx.file, cx.rank);
    cx.warnings.add_many("nsys_overlapping_tasks", overlapping, || {
        format!("{file}: a kernel or memset of rank {rank}'s stream (thread {thread}) begins before the one before it on the stream ended; it is left out")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_names_give_operations_and_roles() {
        assert_eq!(p2p("MPI_Issend"), P2p::Isend);
        assert_eq!(p2p("MPI_Recv"), P2p::Recv);
        assert_eq!(mpi_role("MPI_Allreduce", "collective"), "coll_all2all");
        assert_eq!(mpi_role("MPI_Ibcast", "collective"), "coll_one2all");
        assert_eq!(mpi_role("MPI_Waitall", "wait"), "point2point");
        assert_eq!(mpi_role("MPI_Comm_rank", "other"), "function");
        assert_eq!(mpi_role("MPI_Send", "nvtx"), "point2point");
    }
}
