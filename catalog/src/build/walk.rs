//! One walk over each (rank, thread) stream's events feeds all three derivations: enter and
//! leave drive the call stack (`calls`), sends, receives and their requests fill message
//! halves (`messages::halves`), collective begin and end make collective parts
//! (`collectives`); the earliest and latest event time of the trace come along. A counting
//! pass over the event kinds sizes every output first, so the walks, run in parallel over
//! streams, write into memory allocated once. O(events).

use rayon::prelude::*;

use crate::build::calls::{CallParts, CallStack};
use crate::build::collectives::{Part, PartCollector};
use crate::build::messages::halves::{HalfCollector, Halves};
use crate::events::{EventKind, EventParts, PartStream, RawEvents};
use crate::trace::Warnings;

/// What the walks found, in stream order.
#[derive(Debug, Default)]
pub struct Walked {
    pub calls: CallParts,
    pub halves: Halves,
    pub collective_parts: Vec<Vec<Part>>,
    /// Earliest and latest event time, (0, 0) without events.
    pub span: (i64, i64),
}

/// What the walk of one stream found.
struct Found {
    calls: crate::build::calls::Calls,
    collective_parts: Vec<Part>,
    /// Earliest and latest event time of the stream, (i64::MAX, i64::MIN) when it is empty.
    span: (i64, i64),
    warnings: Warnings,
}

/// Per stream: enters, sends, receives, collective ends.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    enters: usize,
    sends: usize,
    recvs: usize,
    collective_ends: usize,
}

fn count(kinds: &[u8]) -> Counts {
    let mut by_kind = [0usize; 256];
    for &k in kinds {
        by_kind[usize::from(k)] += 1;
    }
    let n = |k: EventKind| by_kind[k as usize];
    Counts {
        enters: n(EventKind::Enter),
        sends: n(EventKind::Send) + n(EventKind::Isend),
        recvs: n(EventKind::Recv) + n(EventKind::Irecv),
        collective_ends: n(EventKind::CollEnd),
    }
}

/// Walk every stream (`streams` is `events.streams()`).
pub fn walk(events: &EventParts, streams: &[PartStream], warnings: &mut Warnings) -> Walked {
    let counts: Vec<Counts> =
        streams.par_iter().map(|ps| count(&events.parts[ps.part].kind[ps.stream.start..ps.stream.end])).collect();
    let mut halves = Halves::sized(counts.iter().map(|c| (c.sends, c.recvs)).collect());
    let mut calls_before = 0;
    let first_call: Vec<i64> = counts
        .iter()
        .map(|c| {
            calls_before += c.enters;
            (calls_before - c.enters) as i64
        })
        .collect();
    let found: Vec<Found> = streams
        .par_iter()
        .zip(&counts)
        .zip(first_call)
        .zip(halves.split_mut())
        .map(|(((ps, c), first_call), (sends, recvs))| {
            let halves = HalfCollector::new(sends, recvs, ps.stream.rank, ps.offset);
            walk_stream(&events.parts[ps.part], ps, c, first_call, halves)
        })
        .collect();
    let mut calls = CallParts { parts: Vec::with_capacity(found.len()) };
    let mut collective_parts = Vec::with_capacity(found.len());
    let mut span = (i64::MAX, i64::MIN);
    for f in found {
        calls.parts.push(f.calls);
        collective_parts.push(f.collective_parts);
        span = (span.0.min(f.span.0), span.1.max(f.span.1));
        warnings.merge(f.warnings);
    }
    let span = if span.0 > span.1 { (0, 0) } else { span };
    Walked { calls, halves, collective_parts, span }
}

fn walk_stream(
    events: &RawEvents,
    ps: &PartStream,
    counts: &Counts,
    first_call: i64,
    mut halves: HalfCollector<'_>,
) -> Found {
    let s = &ps.stream;
    let mut w = Warnings::default();
    let mut calls = CallStack::new(s.rank, s.thread, counts.enters, first_call);
    let mut collectives = PartCollector::new(s.rank, s.thread, counts.collective_ends);
    let mut span = (i64::MAX, i64::MIN);
    for i in s.start..s.end {
        let ts = events.ts[i];
        span = (span.0.min(ts), span.1.max(ts));
        match events.kind(i) {
            EventKind::Enter => calls.enter(ts, events.region[i]),
            EventKind::Leave => calls.leave(ts, events.region[i], &mut w),
            EventKind::Send | EventKind::Isend => halves.send(events, i, calls.innermost(), &mut w),
            EventKind::Recv | EventKind::Irecv => halves.recv(events, i, calls.innermost(), &mut w),
            EventKind::IsendComplete => halves.isend_complete(events, i, &mut w),
            EventKind::IrecvRequest => halves.irecv_request(events, i, &mut w),
            EventKind::RequestCancelled => halves.cancelled(events, i, &mut w),
            EventKind::CollBegin => collectives.begin(ts, &mut w),
            EventKind::CollEnd => collectives.end(events, i, &mut w),
            _ => {}
        }
    }
    let last = if s.end > s.start { events.ts[s.end - 1] } else { 0 };
    let calls = calls.finish(last, &mut w);
    halves.finish(&calls.end, &mut w);
    Found { calls, collective_parts: collectives.finish(&mut w), span, warnings: w }
}
