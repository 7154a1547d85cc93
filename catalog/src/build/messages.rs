//! Point-to-point message matching, following MPI's non-overtaking rule: for each
//! (src, dst, comm, tag) the k-th send posted matches the k-th receive posted. Sends are
//! ordered by their send event, receives by the time they were posted (the MpiIrecvRequest of
//! a non-blocking receive, found by request id; the call start of a blocking one).
//! Non-blocking halves are tied to their completion by request id: an isend to its
//! isend_complete, an irecv_request to its irecv. Halves without a partner are kept as rows
//! with NULL partner columns and counted as warnings.
//!
//! Cost: one pass over the events (streams in parallel), two parallel sorts of the halves by
//! key, one merge: O(n log n) in the number of point-to-point events. Every buffer is sized
//! before it is filled (a counting pass over the event kinds), and the table is built in
//! chunks of `CHUNK_ROWS` messages in parallel, each chunk one record batch.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Int32Type, Int64Type};
use rayon::prelude::*;

use crate::build::calls::{CallParts, Calls};
use crate::error::Result;
use crate::events::{EventKind, EventParts, NONE_I32, NONE_I64, PartStream, RawEvents, owned_nullable};
use crate::fast_hash::FastMap;
use crate::model;
use crate::trace::{NodeMap, Warnings};

/// Messages per record batch of the `messages` table: small enough that two threads share
/// the chunks of a few million messages evenly.
const CHUNK_ROWS: usize = 1 << 18;

/// One side of a message as found in the events.
#[derive(Debug, Clone, Copy)]
struct Half {
    src: i32,
    dst: i32,
    comm: i32,
    tag: i32,
    bytes: i64,
    /// Send: the send event. Receive: the completion event.
    ts: i64,
    /// Position in the matching order: send time, or receive post time.
    order_ts: i64,
    event: usize,
    call_start: i64,
    call_end: i64,
    /// Send: completion of a non-blocking send. Receive: post time.
    aux_ts: i64,
}

impl Half {
    const UNSET: Half = Half {
        src: NONE_I32,
        dst: NONE_I32,
        comm: NONE_I32,
        tag: NONE_I32,
        bytes: NONE_I64,
        ts: NONE_I64,
        order_ts: NONE_I64,
        event: 0,
        call_start: NONE_I64,
        call_end: NONE_I64,
        aux_ts: NONE_I64,
    };

    fn key(&self) -> (i32, i32, i32, i32, i64, usize) {
        (self.src, self.dst, self.comm, self.tag, self.order_ts, self.event)
    }
    fn channel(&self) -> (i32, i32, i32, i32) {
        (self.src, self.dst, self.comm, self.tag)
    }
}

/// A message as indices of its halves (`NONE` for a missing half), with its msg_id order.
#[derive(Debug, Clone, Copy)]
struct Pair {
    ts: i64,
    event: usize,
    send: u32,
    recv: u32,
}

impl Pair {
    const NONE: u32 = u32::MAX;

    /// The half at index `k` of `halves`, if any.
    fn half(halves: &[Half], k: u32) -> Option<&Half> {
        (k != Pair::NONE).then(|| &halves[k as usize])
    }
}

/// Consecutive rows of the `messages` table as columns.
#[derive(Debug, Default)]
pub struct MessageChunk {
    /// msg_id of the first row.
    pub first_id: i64,
    pub src: Vec<i32>,
    pub dst: Vec<i32>,
    pub comm: Vec<i32>,
    pub tag: Vec<i32>,
    pub bytes: Vec<i64>,
    pub send_ts: Vec<i64>,
    pub recv_ts: Vec<i64>,
    pub send_call_start: Vec<i64>,
    pub send_call_end: Vec<i64>,
    pub recv_call_start: Vec<i64>,
    pub recv_call_end: Vec<i64>,
    pub recv_post_ts: Vec<i64>,
    pub send_complete_ts: Vec<i64>,
    pub src_node: Vec<i32>,
    pub dst_node: Vec<i32>,
}

impl MessageChunk {
    fn with_capacity(first_id: i64, n: usize) -> Self {
        MessageChunk {
            first_id,
            src: Vec::with_capacity(n),
            dst: Vec::with_capacity(n),
            comm: Vec::with_capacity(n),
            tag: Vec::with_capacity(n),
            bytes: Vec::with_capacity(n),
            send_ts: Vec::with_capacity(n),
            recv_ts: Vec::with_capacity(n),
            send_call_start: Vec::with_capacity(n),
            send_call_end: Vec::with_capacity(n),
            recv_call_start: Vec::with_capacity(n),
            recv_call_end: Vec::with_capacity(n),
            recv_post_ts: Vec::with_capacity(n),
            send_complete_ts: Vec::with_capacity(n),
            src_node: Vec::with_capacity(n),
            dst_node: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    fn push(&mut self, send: Option<&Half>, recv: Option<&Half>, nodes: &NodeMap) {
        let any = send.or(recv).expect("a message has at least one half");
        let get = |h: Option<&Half>, f: fn(&Half) -> i64| h.map_or(NONE_I64, f);
        self.src.push(any.src);
        self.dst.push(any.dst);
        self.comm.push(any.comm);
        self.tag.push(any.tag);
        self.bytes.push(send.map_or(any.bytes, |s| s.bytes));
        self.send_ts.push(get(send, |h| h.ts));
        self.recv_ts.push(get(recv, |h| h.ts));
        self.send_call_start.push(get(send, |h| h.call_start));
        self.send_call_end.push(get(send, |h| h.call_end));
        self.recv_call_start.push(get(recv, |h| h.call_start));
        self.recv_call_end.push(get(recv, |h| h.call_end));
        self.recv_post_ts.push(get(recv, |h| h.aux_ts));
        self.send_complete_ts.push(get(send, |h| h.aux_ts));
        self.src_node.push(nodes.node(any.src));
        self.dst_node.push(nodes.node(any.dst));
    }

    /// The chunk's record batch, moving the columns.
    fn into_batch(self, node_names: &ArrayRef) -> Result<RecordBatch> {
        let n = self.len();
        let intra: BooleanArray = self
            .src_node
            .iter()
            .zip(&self.dst_node)
            .map(|(&a, &b)| (a != NONE_I32 && b != NONE_I32).then_some(a == b))
            .collect();
        let duration: Vec<i64> = self
            .send_ts
            .iter()
            .zip(&self.recv_ts)
            .map(|(&s, &r)| if s == NONE_I64 || r == NONE_I64 { NONE_I64 } else { r - s })
            .collect();
        let node_dict = |keys: Vec<i32>| -> Result<ArrayRef> {
            let keys = owned_nullable::<Int32Type>(keys, NONE_I32);
            Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(keys, node_names.clone())?))
        };
        let nullable = |v: Vec<i64>| -> ArrayRef { Arc::new(owned_nullable::<Int64Type>(v, NONE_I64)) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(self.first_id..self.first_id + n as i64)),
            Arc::new(Int32Array::from(self.src)),
            Arc::new(Int32Array::from(self.dst)),
            Arc::new(Int32Array::from(self.comm)),
            Arc::new(Int32Array::from(self.tag)),
            Arc::new(Int64Array::from(self.bytes)),
            nullable(self.send_ts),
            nullable(self.recv_ts),
            nullable(self.send_call_start),
            nullable(self.send_call_end),
            nullable(self.recv_call_start),
            nullable(self.recv_call_end),
            nullable(self.recv_post_ts),
            nullable(self.send_complete_ts),
            node_dict(self.src_node)?,
            node_dict(self.dst_node)?,
            Arc::new(intra),
            nullable(duration),
        ];
        Ok(RecordBatch::try_new(model::MESSAGES.schema(), columns)?)
    }
}

/// The `messages` table as chunks of columns, in msg_id order.
#[derive(Debug, Default)]
pub struct Messages {
    pub chunks: Vec<MessageChunk>,
    /// (send event, receive event) global indices of every matched message, in msg_id order;
    /// filled only when `derive` is asked for them.
    pub matched_events: Vec<(usize, usize)>,
    node_names: Vec<String>,
}

impl Messages {
    pub fn len(&self) -> usize {
        self.chunks.iter().map(MessageChunk::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Matched messages whose receive precedes their send.
    pub fn violations(&self) -> i64 {
        self.chunks
            .par_iter()
            .map(|c| {
                c.send_ts.iter().zip(&c.recv_ts).filter(|&(&s, &r)| s != NONE_I64 && r != NONE_I64 && r < s).count()
            })
            .sum::<usize>() as i64
    }

    /// The `messages` table, one batch per chunk, moving the columns.
    pub fn into_batches(self) -> Result<Vec<RecordBatch>> {
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(self.node_names.iter()));
        if self.chunks.is_empty() {
            return Ok(vec![MessageChunk::default().into_batch(&names)?]);
        }
        self.chunks.into_par_iter().map(|c| c.into_batch(&names)).collect()
    }
}

/// Match the sends and receives of all streams. `keep_matched` also lists the event pair of
/// every matched message (`Messages::matched_events`).
pub fn derive(
    events: &EventParts,
    streams: &[PartStream],
    calls: &CallParts,
    nodes: &NodeMap,
    keep_matched: bool,
    warnings: &mut Warnings,
) -> Messages {
    let (mut sends, mut recvs) = collect_halves(events, streams, calls, warnings);
    rayon::join(|| sends.par_sort_unstable_by_key(Half::key), || recvs.par_sort_unstable_by_key(Half::key));

    // Merge the two sorted lists channel by channel; the k-th send pairs with the k-th receive.
    // Each pair carries its msg_id order (send time, or receive time for receives without a
    // send) so the sort that follows does not chase indices.
    let mut pairs: Vec<Pair> = Vec::with_capacity(sends.len().max(recvs.len()));
    // (first index, count) of the sends and of the receives left unmatched.
    let (mut unmatched_sends, mut unmatched_recvs) = ((None, 0i64), (None, 0i64));
    let mut size_mismatch = 0i64;
    let (mut i, mut j) = (0, 0);
    loop {
        // Which half comes first in channel order: None when both do (a match).
        let (lone_send, lone_recv) = match (sends.get(i), recvs.get(j)) {
            (None, None) => break,
            (Some(s), None) => (Some(s), None),
            (None, Some(r)) => (None, Some(r)),
            (Some(s), Some(r)) => match s.channel().cmp(&r.channel()) {
                std::cmp::Ordering::Less => (Some(s), None),
                std::cmp::Ordering::Greater => (None, Some(r)),
                std::cmp::Ordering::Equal => {
                    if s.bytes != r.bytes && r.bytes != NONE_I64 {
                        size_mismatch += 1;
                    }
                    pairs.push(Pair { ts: s.ts, event: s.event, send: i as u32, recv: j as u32 });
                    i += 1;
                    j += 1;
                    continue;
                }
            },
        };
        if let Some(s) = lone_send {
            pairs.push(Pair { ts: s.ts, event: s.event, send: i as u32, recv: Pair::NONE });
            unmatched_sends = (unmatched_sends.0.or(Some(i)), unmatched_sends.1 + 1);
            i += 1;
        } else if let Some(r) = lone_recv {
            pairs.push(Pair { ts: r.ts, event: r.event, send: Pair::NONE, recv: j as u32 });
            unmatched_recvs = (unmatched_recvs.0.or(Some(j)), unmatched_recvs.1 + 1);
            j += 1;
        }
    }
    if let (Some(first), n) = unmatched_sends {
        let s = sends[first];
        warnings.add_many("unmatched_send", n, || {
            format!(
                "sends without a matching receive are kept with NULL receive columns; first: {} -> {} comm {} tag {} at ts {}",
                s.src, s.dst, s.comm, s.tag, s.ts
            )
        });
    }
    if let (Some(first), n) = unmatched_recvs {
        let r = recvs[first];
        warnings.add_many("unmatched_recv", n, || {
            format!(
                "receives without a matching send are kept with NULL send columns; first: {} -> {} comm {} tag {} at ts {}",
                r.src, r.dst, r.comm, r.tag, r.ts
            )
        });
    }
    warnings.add_many("message_size_mismatch", size_mismatch, || {
        "matched sends and receives that report different sizes; the send's size is kept".to_string()
    });
    pairs.par_sort_unstable_by_key(|p| (p.ts, p.event));

    let chunks: Vec<MessageChunk> = pairs
        .par_chunks(CHUNK_ROWS)
        .enumerate()
        .map(|(k, rows)| {
            let mut chunk = MessageChunk::with_capacity((k * CHUNK_ROWS) as i64, rows.len());
            for p in rows {
                chunk.push(Pair::half(&sends, p.send), Pair::half(&recvs, p.recv), nodes);
            }
            chunk
        })
        .collect();
    let matched_events = if keep_matched {
        pairs
            .iter()
            .filter(|p| p.send != Pair::NONE && p.recv != Pair::NONE)
            .map(|p| (sends[p.send as usize].event, recvs[p.recv as usize].event))
            .collect()
    } else {
        Vec::new()
    };
    Messages { chunks, matched_events, node_names: nodes.names.clone() }
}

/// The sends and receives of every stream, each list sized exactly before the streams fill
/// their parts of it in parallel.
fn collect_halves(
    events: &EventParts,
    streams: &[PartStream],
    calls: &CallParts,
    warnings: &mut Warnings,
) -> (Vec<Half>, Vec<Half>) {
    let counts: Vec<(usize, usize)> = streams
        .par_iter()
        .map(|ps| {
            events.parts[ps.part].kind[ps.stream.start..ps.stream.end].iter().fold((0, 0), |(s, r), &k| {
                match EventKind::from_u8(k) {
                    EventKind::Send | EventKind::Isend => (s + 1, r),
                    EventKind::Recv | EventKind::Irecv => (s, r + 1),
                    _ => (s, r),
                }
            })
        })
        .collect();
    let mut sends = vec![Half::UNSET; counts.iter().map(|c| c.0).sum()];
    let mut recvs = vec![Half::UNSET; counts.iter().map(|c| c.1).sum()];
    let mut jobs = Vec::with_capacity(streams.len());
    let (mut send_rest, mut recv_rest) = (sends.as_mut_slice(), recvs.as_mut_slice());
    for ((ps, c), &(ns, nr)) in streams.iter().zip(&calls.parts).zip(&counts) {
        let (s, rest) = std::mem::take(&mut send_rest).split_at_mut(ns);
        send_rest = rest;
        let (r, rest) = std::mem::take(&mut recv_rest).split_at_mut(nr);
        recv_rest = rest;
        jobs.push((ps, c, s, r));
    }
    let found: Vec<Warnings> =
        jobs.into_par_iter().map(|(ps, c, s, r)| stream_halves(&events.parts[ps.part], c, ps, s, r)).collect();
    for w in found {
        warnings.merge(w);
    }
    (sends, recvs)
}

/// Fill `sends` and `recvs` (sized by the counting pass) with the halves of one stream.
fn stream_halves(
    events: &RawEvents,
    calls: &Calls,
    ps: &PartStream,
    sends: &mut [Half],
    recvs: &mut [Half],
) -> Warnings {
    let s = &ps.stream;
    let (mut ns, mut nr) = (0, 0);
    let mut w = Warnings::default();
    let mut open_isends: FastMap<i64, usize> = FastMap::default();
    let mut posted_irecvs: FastMap<i64, i64> = FastMap::default();
    // The stream's `calls.enclosing` is in event order: walk it forward with the events.
    let mut cursor = 0;
    let mut call_times = |i: usize| {
        while cursor < calls.enclosing.len() && calls.enclosing[cursor].0 < i {
            cursor += 1;
        }
        match calls.enclosing.get(cursor) {
            Some(&(e, c)) if e == i => (calls.start[c as usize], calls.end[c as usize]),
            _ => (NONE_I64, NONE_I64),
        }
    };
    for i in s.start..s.end {
        let kind = events.kind(i);
        let ts = events.ts[i];
        let request = events.request[i];
        match kind {
            EventKind::Send | EventKind::Isend => {
                let (call_start, call_end) = call_times(i);
                let blocking = kind == EventKind::Send;
                if !blocking && open_isends.insert(request, ns).is_some() {
                    w.add("request_reused_while_open", || {
                        format!("rank {}: request {request} reused before it completed (ts {ts})", s.rank)
                    });
                }
                sends[ns] = Half {
                    src: s.rank,
                    dst: events.peer[i],
                    comm: events.comm[i],
                    tag: events.tag[i],
                    bytes: events.bytes[i],
                    ts,
                    order_ts: ts,
                    event: ps.offset + i,
                    call_start,
                    call_end,
                    aux_ts: if blocking { call_end } else { NONE_I64 },
                };
                ns += 1;
            }
            EventKind::IsendComplete => match open_isends.remove(&request) {
                Some(k) => sends[k].aux_ts = ts,
                None => w.add("isend_complete_without_isend", || {
                    format!("rank {}: completion of request {request} at ts {ts} has no isend", s.rank)
                }),
            },
            EventKind::IrecvRequest => {
                let reused = posted_irecvs.insert(request, ts).is_some();
                if reused {
                    w.add("request_reused_while_open", || {
                        format!("rank {}: request {request} reused before it completed (ts {ts})", s.rank)
                    });
                }
            }
            EventKind::Recv | EventKind::Irecv => {
                let (call_start, call_end) = call_times(i);
                let post = if kind == EventKind::Recv {
                    if call_start == NONE_I64 { ts } else { call_start }
                } else {
                    match posted_irecvs.remove(&request) {
                        Some(p) => p,
                        None => {
                            w.add("irecv_without_request", || {
                                format!(
                                    "rank {}: irecv completion of request {request} at ts {ts} has no irecv_request; its completion time is used as post time",
                                    s.rank
                                )
                            });
                            ts
                        }
                    }
                };
                recvs[nr] = Half {
                    src: events.peer[i],
                    dst: s.rank,
                    comm: events.comm[i],
                    tag: events.tag[i],
                    bytes: events.bytes[i],
                    ts,
                    order_ts: post,
                    event: ps.offset + i,
                    call_start,
                    call_end,
                    aux_ts: post,
                };
                nr += 1;
            }
            EventKind::RequestCancelled => {
                let was_open = open_isends.remove(&request).is_some() || posted_irecvs.remove(&request).is_some();
                if !was_open {
                    w.add("cancel_of_unknown_request", || {
                        format!("rank {}: cancelled request {request} at ts {ts} was not open", s.rank)
                    });
                }
            }
            _ => {}
        }
    }
    w.add_many("isend_never_completed", open_isends.len() as i64, || {
        format!("rank {}: non-blocking sends whose completion is not in the trace", s.rank)
    });
    w.add_many("irecv_never_completed", posted_irecvs.len() as i64, || {
        format!("rank {}: posted non-blocking receives that never completed", s.rank)
    });
    debug_assert_eq!((ns, nr), (sends.len(), recvs.len()));
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::calls;
    use crate::events::Event;
    use crate::trace::RankInfo;

    fn p2p(rank: i32, ts: i64, kind: EventKind, peer: i32, tag: i32, request: i64) -> Event {
        Event { peer, comm: 0, tag, bytes: 8, request, ..Event::new(rank, 0, ts, kind) }
    }

    fn derive_all(e: &RawEvents) -> (Messages, Warnings) {
        let e = &EventParts::single(e.clone());
        let mut w = Warnings::default();
        let streams = e.streams();
        let c = calls::derive(e, &streams, &mut w);
        let ranks: Vec<RankInfo> =
            (0..2).map(|r| RankInfo { rank: r, node: Some(format!("n{r}")), name: String::new() }).collect();
        let m = derive(e, &streams, &c, &NodeMap::new(&ranks), true, &mut w);
        assert_eq!(m.chunks.len(), 1, "a small trace is one chunk");
        (m, w)
    }

    #[test]
    fn non_overtaking_order_per_channel() {
        let mut e = RawEvents::default();
        // rank 0 sends tag 1 twice and tag 2 once; rank 1 receives tag 2 first.
        e.push(p2p(0, 10, EventKind::Send, 1, 1, NONE_I64));
        e.push(p2p(0, 20, EventKind::Send, 1, 2, NONE_I64));
        e.push(p2p(0, 30, EventKind::Send, 1, 1, NONE_I64));
        e.push(p2p(1, 25, EventKind::Recv, 0, 2, NONE_I64));
        e.push(p2p(1, 40, EventKind::Recv, 0, 1, NONE_I64));
        e.push(p2p(1, 50, EventKind::Recv, 0, 1, NONE_I64));
        e.group_by_stream();
        let (m, w) = derive_all(&e);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(m.chunks[0].send_ts, vec![10, 20, 30]);
        assert_eq!(m.chunks[0].recv_ts, vec![40, 25, 50]);
        assert_eq!(m.chunks[0].tag, vec![1, 2, 1]);
    }

    #[test]
    fn non_blocking_halves_follow_their_requests() {
        let mut e = RawEvents::default();
        e.push(p2p(0, 10, EventKind::Isend, 1, 0, 7));
        e.push(p2p(0, 50, EventKind::IsendComplete, NONE_I32, NONE_I32, 7));
        e.push(p2p(1, 5, EventKind::IrecvRequest, NONE_I32, NONE_I32, 3));
        e.push(p2p(1, 60, EventKind::Irecv, 0, 0, 3));
        e.group_by_stream();
        let (m, w) = derive_all(&e);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(m.len(), 1);
        assert_eq!(
            (
                m.chunks[0].send_ts[0],
                m.chunks[0].recv_ts[0],
                m.chunks[0].recv_post_ts[0],
                m.chunks[0].send_complete_ts[0]
            ),
            (10, 60, 5, 50)
        );
    }

    #[test]
    fn unmatched_halves_are_kept_and_counted() {
        let mut e = RawEvents::default();
        e.push(p2p(0, 10, EventKind::Send, 1, 0, NONE_I64));
        e.push(p2p(0, 20, EventKind::Send, 1, 0, NONE_I64));
        e.push(p2p(1, 30, EventKind::Recv, 0, 0, NONE_I64));
        e.push(p2p(1, 40, EventKind::Recv, 0, 5, NONE_I64));
        e.group_by_stream();
        let (m, w) = derive_all(&e);
        assert_eq!(m.len(), 3);
        assert_eq!(w.count("unmatched_send"), 1);
        assert_eq!(w.count("unmatched_recv"), 1);
        let batch = m.into_batches().unwrap().remove(0);
        assert_eq!(batch.column(17).null_count(), 2);
    }

    #[test]
    fn large_tables_are_chunked_with_contiguous_ids() {
        let n = CHUNK_ROWS + 1000;
        let mut e = RawEvents::default();
        for k in 0..n as i64 {
            e.push(p2p(0, 10 * k, EventKind::Send, 1, 0, NONE_I64));
        }
        for k in 0..n as i64 {
            e.push(p2p(1, 10 * k + 5, EventKind::Recv, 0, 0, NONE_I64));
        }
        let e = &EventParts::single(e);
        let mut w = Warnings::default();
        let streams = e.streams();
        let c = calls::derive(e, &streams, &mut w);
        let ranks: Vec<RankInfo> = (0..2).map(|r| RankInfo { rank: r, node: None, name: String::new() }).collect();
        let batches = derive(e, &streams, &c, &NodeMap::new(&ranks), false, &mut w).into_batches().unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(batches.len(), 2);
        let mut next = 0;
        for b in &batches {
            let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            let send = b.column(6).as_any().downcast_ref::<Int64Array>().unwrap();
            for r in 0..b.num_rows() {
                assert_eq!((ids.value(r), send.value(r)), (next, 10 * next), "msg_id follows send time");
                next += 1;
            }
        }
        assert_eq!(next, n as i64);
    }
}
