//! The send and receive halves of messages as one stream's events are walked (see
//! `deriving::walk`). A half carries everything its row of `messages` needs: peer, comm, tag,
//! size, event time, the times of its enclosing call, and for non-blocking operations the
//! completion of a send or the post time of a receive, tied by request id (an isend to its
//! isend_complete, an irecv_request to its irecv). Requests that never complete or are reused
//! while open are counted as warnings.

use rayon::prelude::*;

use crate::deriving::split_lengths;
use crate::events::{EventColumns, EventKind, NONE_I32, NONE_I64};
use crate::fast_hash::FastMap;
use crate::trace::Warnings;

/// One side of a message as found in the events.
#[derive(Debug, Clone, Copy)]
pub struct Half {
    pub src: i32,
    pub dst: i32,
    pub comm: i32,
    pub tag: i32,
    pub bytes: i64,
    /// Send: the send event. Receive: the completion event.
    pub ts: i64,
    pub call_start: i64,
    pub call_end: i64,
    /// Send: completion of a non-blocking send (the call end of a blocking one). Receive: the
    /// post time, which orders receives for matching.
    pub aux_ts: i64,
    /// Send: start of the call that completed it (the Wait or Test of a non-blocking send,
    /// the send's own call for a blocking one). Receive: unset.
    pub complete_call_start: i64,
    /// Global index of the send or completion event (`event`) and, in the top 16 bits, the
    /// thread of its stream (`thread`): packed, a half stays 72 bytes.
    pub place: u64,
}

/// Bits of `Half::place` that hold the event index (2.8e14 events).
const EVENT_BITS: u32 = 48;
/// The thread of a half not known: an unset half, or a thread number past 16 bits.
const NO_THREAD: u64 = 0xFFFF;

impl Half {
    pub const UNSET: Half = Half {
        src: NONE_I32,
        dst: NONE_I32,
        comm: NONE_I32,
        tag: NONE_I32,
        bytes: NONE_I64,
        ts: NONE_I64,
        call_start: NONE_I64,
        call_end: NONE_I64,
        aux_ts: NONE_I64,
        complete_call_start: NONE_I64,
        place: NO_THREAD << EVENT_BITS,
    };

    /// The place of event `event` on a stream of thread `thread` (NONE_I32 or past 16 bits:
    /// unknown, NULL in `messages`).
    pub fn place(event: usize, thread: i32) -> u64 {
        let thread = u64::try_from(thread).ok().filter(|&t| t < NO_THREAD).unwrap_or(NO_THREAD);
        debug_assert!((event as u64) < 1 << EVENT_BITS);
        (thread << EVENT_BITS) | event as u64
    }

    /// Global index of the send or completion event.
    pub fn event(&self) -> usize {
        (self.place & ((1 << EVENT_BITS) - 1)) as usize
    }

    /// The thread of the rank that sent or received it; NONE_I32 when unknown.
    pub fn thread(&self) -> i32 {
        match self.place >> EVENT_BITS {
            NO_THREAD => NONE_I32,
            t => t as i32,
        }
    }

    /// Matching order of a rank's sends: the send event.
    pub fn send_order(&self) -> (i64, usize) {
        (self.ts, self.event())
    }

    /// Matching order of a rank's receives: the post time.
    pub fn recv_order(&self) -> (i64, usize) {
        (self.aux_ts, self.event())
    }
}

/// The halves of all streams: each stream's sends and receives are consecutive, in stream order.
#[derive(Debug, Default)]
pub struct Halves {
    pub sends: Vec<Half>,
    pub recvs: Vec<Half>,
    /// (sends, receives) of each stream.
    pub per_stream: Vec<(usize, usize)>,
}

impl Halves {
    /// Room for every stream's halves, counted beforehand, and each stream's share of it. The
    /// hundreds of megabytes are filled in parallel.
    pub fn sized(per_stream: Vec<(usize, usize)>) -> Self {
        let unset = |n: usize| {
            let mut halves = Vec::with_capacity(n);
            halves.par_extend(rayon::iter::repeat_n(Half::UNSET, n));
            halves
        };
        let (sends, recvs) = (per_stream.iter().map(|c| c.0).sum(), per_stream.iter().map(|c| c.1).sum());
        let (sends, recvs) = rayon::join(|| unset(sends), || unset(recvs));
        Halves { sends, recvs, per_stream }
    }

    /// Each stream's (sends, receives) slices, in stream order.
    pub fn split_mut(&mut self) -> Vec<(&mut [Half], &mut [Half])> {
        let sends = split_lengths(&mut self.sends, self.per_stream.iter().map(|c| c.0));
        let recvs = split_lengths(&mut self.recvs, self.per_stream.iter().map(|c| c.1));
        sends.into_iter().zip(recvs).collect()
    }
}

/// Collects one stream's halves into its slices (sized by the counting pass).
#[derive(Debug)]
pub struct HalfCollector<'a> {
    sends: &'a mut [Half],
    recvs: &'a mut [Half],
    /// Index of the enclosing call of each half (u32::MAX: none), resolved to call times once
    /// the stream's calls are complete; for sends, whether the send is blocking.
    send_calls: Vec<(u32, bool)>,
    recv_calls: Vec<u32>,
    open_isends: OpenRequests<usize>,
    posted_irecvs: OpenRequests<i64>,
    rank: i32,
    /// Global index of the part's first event.
    offset: usize,
}

const NO_CALL: u32 = u32::MAX;

/// Requests kept in a list before a hash map takes over.
const FEW_REQUESTS: usize = 32;

/// The open requests of a stream, with a value each. A rank keeps few requests in flight at a
/// time, and a short list scanned linearly costs less than hashing; past `FEW_REQUESTS` open
/// requests a hash map holds them all.
#[derive(Debug)]
struct OpenRequests<V> {
    few: Vec<(i64, V)>,
    many: FastMap<i64, V>,
}

impl<V> Default for OpenRequests<V> {
    fn default() -> Self {
        OpenRequests { few: Vec::with_capacity(FEW_REQUESTS), many: FastMap::default() }
    }
}

impl<V: Copy> OpenRequests<V> {
    /// Open `request`; returns the value of the same request if it was already open (it is
    /// replaced).
    fn insert(&mut self, request: i64, value: V) -> Option<V> {
        if self.many.is_empty() {
            if let Some(slot) = self.few.iter_mut().find(|(r, _)| *r == request) {
                return Some(std::mem::replace(&mut slot.1, value));
            }
            if self.few.len() < FEW_REQUESTS {
                self.few.push((request, value));
                return None;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(request, value)
    }

    fn remove(&mut self, request: i64) -> Option<V> {
        if self.many.is_empty() {
            let k = self.few.iter().position(|(r, _)| *r == request)?;
            Some(self.few.swap_remove(k).1)
        } else {
            self.many.remove(&request)
        }
    }

    fn len(&self) -> usize {
        self.few.len() + self.many.len()
    }
}

impl<'a> HalfCollector<'a> {
    pub fn new(sends: &'a mut [Half], recvs: &'a mut [Half], rank: i32, offset: usize) -> Self {
        HalfCollector {
            send_calls: Vec::with_capacity(sends.len()),
            recv_calls: Vec::with_capacity(recvs.len()),
            sends,
            recvs,
            open_isends: OpenRequests::default(),
            posted_irecvs: OpenRequests::default(),
            rank,
            offset,
        }
    }

    /// A send or isend event `i`, inside call `call` (index, start) if any.
    pub fn send(&mut self, events: &EventColumns<'_>, i: usize, call: Option<(usize, i64)>, w: &mut Warnings) {
        let (ts, request) = (events.ts[i], events.request[i]);
        let k = self.send_calls.len();
        let blocking = events.kind(i) == EventKind::Send;
        // A non-blocking send without a request (a format that records no completion) is not
        // waited for.
        if !blocking && request != NONE_I64 && self.open_isends.insert(request, k).is_some() {
            let rank = self.rank;
            w.add("request_reused_while_open", || {
                format!("rank {rank}: request {request} reused before it completed (ts {ts})")
            });
        }
        self.send_calls.push((call.map_or(NO_CALL, |c| c.0 as u32), blocking));
        // A blocking send completes when its call ends: set by `finish`.
        self.sends[k] = self.half(events, i, (self.rank, events.peer[i]), call, NONE_I64);
        self.check_thread(&self.sends[k], events.thread[i], w);
    }

    /// A thread number that `Half::place` cannot hold is counted: its messages' thread is NULL.
    fn check_thread(&self, half: &Half, thread: i32, w: &mut Warnings) {
        if half.thread() != thread {
            let (rank, ts) = (self.rank, half.ts);
            w.add("message_thread_unknown", || {
                format!("rank {rank}: a message at ts {ts} is on thread {thread}, past the 65,534 threads a message's thread column holds (NULL)")
            });
        }
    }

    /// The completion of a non-blocking send, event `i`, inside call `call` (index, start) if
    /// any.
    pub fn isend_complete(
        &mut self,
        events: &EventColumns<'_>,
        i: usize,
        call: Option<(usize, i64)>,
        w: &mut Warnings,
    ) {
        let (ts, request) = (events.ts[i], events.request[i]);
        match self.open_isends.remove(request) {
            Some(k) => {
                self.sends[k].aux_ts = ts;
                self.sends[k].complete_call_start = call.map_or(NONE_I64, |c| c.1);
            }
            None => {
                let rank = self.rank;
                w.add("isend_complete_without_isend", || {
                    format!("rank {rank}: completion of request {request} at ts {ts} has no isend")
                })
            }
        }
    }

    /// The request of a non-blocking receive, event `i`, inside call `call` (index, start) if
    /// any: the receive is posted when that call (the MPI_Irecv) starts, as a blocking receive
    /// is when its call starts (Scalasca's rule too).
    pub fn irecv_request(&mut self, events: &EventColumns<'_>, i: usize, call: Option<(usize, i64)>, w: &mut Warnings) {
        let (ts, request) = (events.ts[i], events.request[i]);
        let posted = call.map_or(ts, |c| c.1);
        if self.posted_irecvs.insert(request, posted).is_some() {
            let rank = self.rank;
            w.add("request_reused_while_open", || {
                format!("rank {rank}: request {request} reused before it completed (ts {ts})")
            });
        }
    }

    /// A recv or irecv event `i`, inside call `call` (index, start) if any. A blocking receive
    /// is posted when its call starts, a non-blocking one by its irecv_request.
    pub fn recv(&mut self, events: &EventColumns<'_>, i: usize, call: Option<(usize, i64)>, w: &mut Warnings) {
        let (ts, request) = (events.ts[i], events.request[i]);
        let post = if events.kind(i) == EventKind::Recv {
            call.map_or(ts, |c| c.1)
        } else {
            match self.posted_irecvs.remove(request) {
                Some(p) => p,
                None => {
                    let rank = self.rank;
                    w.add("irecv_without_request", || {
                        format!(
                            "rank {rank}: irecv completion of request {request} at ts {ts} has no irecv_request; its completion time is used as post time"
                        )
                    });
                    ts
                }
            }
        };
        let k = self.recv_calls.len();
        self.recv_calls.push(call.map_or(NO_CALL, |c| c.0 as u32));
        self.recvs[k] = self.half(events, i, (events.peer[i], self.rank), call, post);
        self.check_thread(&self.recvs[k], events.thread[i], w);
    }

    /// The half of event `i` between `(src, dst)`; its call end is set by `finish`, once the
    /// stream's calls are complete.
    fn half(
        &self,
        events: &EventColumns<'_>,
        i: usize,
        (src, dst): (i32, i32),
        call: Option<(usize, i64)>,
        aux_ts: i64,
    ) -> Half {
        Half {
            src,
            dst,
            comm: events.comm[i],
            tag: events.tag[i],
            bytes: events.bytes[i],
            ts: events.ts[i],
            call_start: call.map_or(NONE_I64, |c| c.1),
            call_end: NONE_I64,
            aux_ts,
            complete_call_start: NONE_I64,
            place: Half::place(self.offset + i, events.thread[i]),
        }
    }

    pub fn cancelled(&mut self, events: &EventColumns<'_>, i: usize, w: &mut Warnings) {
        let (ts, request) = (events.ts[i], events.request[i]);
        let was_open = self.open_isends.remove(request).is_some() || self.posted_irecvs.remove(request).is_some();
        if !was_open {
            let rank = self.rank;
            w.add("cancel_of_unknown_request", || {
                format!("rank {rank}: cancelled request {request} at ts {ts} was not open")
            });
        }
    }

    /// Fill in the call ends from the stream's finished calls (`call_end` by call index) and
    /// report requests left open.
    pub fn finish(self, call_end: &[i64], w: &mut Warnings) {
        for (h, &(c, blocking)) in self.sends.iter_mut().zip(&self.send_calls) {
            if c != NO_CALL {
                h.call_end = call_end[c as usize];
            }
            if blocking {
                h.aux_ts = h.call_end;
                h.complete_call_start = h.call_start;
            }
        }
        for (h, &c) in self.recvs.iter_mut().zip(&self.recv_calls) {
            if c != NO_CALL {
                h.call_end = call_end[c as usize];
            }
        }
        debug_assert_eq!((self.send_calls.len(), self.recv_calls.len()), (self.sends.len(), self.recvs.len()));
        let rank = self.rank;
        w.add_many("isend_never_completed", self.open_isends.len() as i64, || {
            format!("rank {rank}: non-blocking sends whose completion is not in the trace")
        });
        w.add_many("irecv_never_completed", self.posted_irecvs.len() as i64, || {
            format!("rank {rank}: posted non-blocking receives that never completed")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_requests_behave_as_a_map_below_and_above_the_list_size() {
        let mut open = OpenRequests::default();
        let n = 3 * FEW_REQUESTS as i64;
        for r in 0..n {
            assert_eq!(open.insert(r, r * 10), None);
            assert_eq!(open.len(), r as usize + 1);
        }
        assert_eq!(open.insert(5, 7), Some(50), "reopening reports the open request");
        for r in (0..n).rev().filter(|r| r % 2 == 0) {
            assert_eq!(open.remove(r), Some(if r == 5 { 7 } else { r * 10 }));
        }
        assert_eq!(open.remove(0), None);
        assert_eq!(open.len(), n as usize / 2);
        for r in (1..n).step_by(2) {
            assert_eq!(open.remove(r), Some(if r == 5 { 7 } else { r * 10 }));
        }
        assert_eq!(open.len(), 0);
        assert_eq!(open.insert(1, 1), None, "an empty set starts over as a list");
        assert_eq!(open.remove(1), Some(1));
    }
}
