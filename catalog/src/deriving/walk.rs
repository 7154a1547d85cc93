//! One walk over each (rank, thread) stream's events feeds all three derivations: enter and
//! leave drive the call stack (`calls`), sends, receives and their requests fill message
//! halves (`messages::halves`), collective begin and end make collective parts
//! (`collectives`); the earliest and latest event time of the trace come along. A counting
//! pass over the event kinds sizes every output first, so the walks, run in parallel over
//! streams, write into memory allocated once. O(events).

use rayon::prelude::*;

use crate::deriving::calls::{CallParts, CallStack};
use crate::deriving::collectives::{Part, PartCollector};
use crate::deriving::messages::halves::{HalfCollector, Halves};
use crate::error::Result;
use crate::events::{EventColumns, EventKind, PartStream};
use crate::interrupt::Interrupted;
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
    calls: crate::deriving::calls::Calls,
    collective_parts: Vec<Part>,
    /// Earliest and latest event time of the stream, (i64::MAX, i64::MIN) when it is empty.
    span: (i64, i64),
    warnings: Warnings,
}

// Event kinds as stored in `RawEvents::kind`, for matching on the raw codes.
const ENTER: u8 = EventKind::Enter as u8;
const LEAVE: u8 = EventKind::Leave as u8;
const SEND: u8 = EventKind::Send as u8;
const ISEND: u8 = EventKind::Isend as u8;
const RECV: u8 = EventKind::Recv as u8;
const IRECV: u8 = EventKind::Irecv as u8;
const ISEND_COMPLETE: u8 = EventKind::IsendComplete as u8;
const IRECV_REQUEST: u8 = EventKind::IrecvRequest as u8;
const REQUEST_CANCELLED: u8 = EventKind::RequestCancelled as u8;
const COLL_BEGIN: u8 = EventKind::CollBegin as u8;
const COLL_END: u8 = EventKind::CollEnd as u8;

/// Per stream: enters, sends, receives, collective ends.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    enters: usize,
    sends: usize,
    recvs: usize,
    collective_ends: usize,
}

fn count(kinds: &[u8]) -> Counts {
    let mut c = Counts::default();
    // Byte-wide counters that cannot overflow within 255 events: the compiler compares and
    // counts a vector register of kinds at a time.
    for chunk in kinds.chunks(255) {
        let (mut enters, mut sends, mut recvs, mut ends) = (0u8, 0u8, 0u8, 0u8);
        for &k in chunk {
            enters += u8::from(k == ENTER);
            sends += u8::from(k == SEND || k == ISEND);
            recvs += u8::from(k == RECV || k == IRECV);
            ends += u8::from(k == COLL_END);
        }
        c.enters += usize::from(enters);
        c.sends += usize::from(sends);
        c.recvs += usize::from(recvs);
        c.collective_ends += usize::from(ends);
    }
    c
}

/// What an interrupted walk says stopped.
const WHAT: &str = "deriving calls, messages and collectives";

/// Walk every stream (`streams` is `events.streams()`). Interrupted (`crate::interrupt`), the
/// walks stop within 65,536 events of each stream and nothing is kept.
pub fn walk(events: &[EventColumns<'_>], streams: &[PartStream], warnings: &mut Warnings) -> Result<Walked> {
    walk_from(events, streams, 0, warnings)
}

/// `walk` for a group of ranks of a larger trace ([`crate::convert`]): the group's first call gets
/// call_id `first_call`, and the streams' offsets place their events in the whole trace.
pub fn walk_from(
    events: &[EventColumns<'_>],
    streams: &[PartStream],
    first_call: i64,
    warnings: &mut Warnings,
) -> Result<Walked> {
    let statement = crate::interrupt::current();
    let counts: Vec<Counts> =
        streams.par_iter().map(|ps| count(&events[ps.part].kind[ps.stream.start..ps.stream.end])).collect();
    let mut halves = Halves::sized(counts.iter().map(|c| (c.sends, c.recvs)).collect());
    let mut calls_before = first_call;
    let first_call: Vec<i64> = counts
        .iter()
        .map(|c| {
            calls_before += c.enters as i64;
            calls_before - c.enters as i64
        })
        .collect();
    let found: Vec<Found> = streams
        .par_iter()
        .zip(&counts)
        .zip(first_call)
        .zip(halves.split_mut())
        .map(|(((ps, c), first_call), (sends, recvs))| {
            let halves = HalfCollector::new(sends, recvs, ps.stream.rank, ps.offset);
            walk_stream(&events[ps.part], ps, c, first_call, halves, statement)
        })
        .collect::<std::result::Result<_, Interrupted>>()?;
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
    Ok(Walked { calls, halves, collective_parts, span })
}

fn walk_stream(
    events: &EventColumns<'_>,
    ps: &PartStream,
    counts: &Counts,
    first_call: i64,
    mut halves: HalfCollector<'_>,
    statement: u64,
) -> std::result::Result<Found, Interrupted> {
    let s = &ps.stream;
    let mut w = Warnings::default();
    let mut calls = CallStack::new(s.rank, s.thread, counts.enters, first_call);
    let mut collectives = PartCollector::new(s.rank, s.thread, counts.collective_ends);
    let mut span = (i64::MAX, i64::MIN);
    // The columns every event needs, cut to the stream once: no bounds check per event.
    let range = s.start..s.end;
    let (times, kinds, regions) = (&events.ts[range.clone()], &events.kind[range.clone()], &events.region[range]);
    for (j, ((&ts, &kind), &region)) in times.iter().zip(kinds).zip(regions).enumerate() {
        if j & 0xFFFF == 0 {
            crate::interrupt::check_for(statement, WHAT)?;
        }
        let i = s.start + j;
        span = (span.0.min(ts), span.1.max(ts));
        match kind {
            ENTER => calls.enter(ts, region),
            LEAVE => calls.leave(ts, region, &mut w),
            SEND | ISEND => halves.send(events, i, calls.innermost(), &mut w),
            RECV | IRECV => halves.recv(events, i, calls.innermost(), &mut w),
            ISEND_COMPLETE => halves.isend_complete(events, i, calls.innermost(), &mut w),
            IRECV_REQUEST => halves.irecv_request(events, i, calls.innermost(), &mut w),
            REQUEST_CANCELLED => halves.cancelled(events, i, &mut w),
            COLL_BEGIN => collectives.begin(ts, calls.innermost().map(|c| c.1), &mut w),
            COLL_END => collectives.end(events, i, &mut w),
            _ => {}
        }
    }
    let last = if s.end > s.start { events.ts[s.end - 1] } else { 0 };
    let calls = calls.finish(last, &mut w);
    halves.finish(&calls.end, &mut w);
    Ok(Found { calls, collective_parts: collectives.finish(&mut w), span, warnings: w })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_counting_each_kind_across_chunk_boundaries() {
        // Every kind and an unknown code, in runs that cross the 255-event chunks.
        let mut x = 12345u64;
        let kinds: Vec<u8> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(50) { 200 } else { (x % EventKind::ALL.len() as u64) as u8 }
            })
            .chain(std::iter::repeat_n(ENTER, 600))
            .collect();
        let n = |ks: &[EventKind]| kinds.iter().filter(|&&k| ks.iter().any(|&want| k == want as u8)).count();
        let c = count(&kinds);
        assert_eq!(c.enters, n(&[EventKind::Enter]));
        assert!(c.enters > 600);
        assert_eq!(c.sends, n(&[EventKind::Send, EventKind::Isend]));
        assert_eq!(c.recvs, n(&[EventKind::Recv, EventKind::Irecv]));
        assert_eq!(c.collective_ends, n(&[EventKind::CollEnd]));
        assert_eq!(count(&[]).enters, 0);
    }
}
