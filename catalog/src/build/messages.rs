//! Point-to-point message matching, following MPI's non-overtaking rule: for each
//! (src, dst, comm, tag) the k-th send posted matches the k-th receive posted. Sends are
//! ordered by their send event, receives by the time they were posted (the MpiIrecvRequest of
//! a non-blocking receive, found by request id; the call start of a blocking one).
//! Non-blocking halves are tied to their completion by request id: an isend to its
//! isend_complete, an irecv_request to its irecv. Halves without a partner are kept as rows
//! with NULL partner columns and counted as warnings.
//!
//! Cost: one pass over the events (streams in parallel), two parallel sorts of the halves by
//! key, one merge: O(n log n) in the number of point-to-point events.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Int32Type, Int64Type};
use rayon::prelude::*;

use crate::build::calls::{CallParts, Calls};
use crate::error::Result;
use crate::events::{EventKind, EventParts, NONE_I32, NONE_I64, PartStream, RawEvents, owned_nullable};
use crate::model;
use crate::trace::{NodeMap, Warnings};

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
    fn key(&self) -> (i32, i32, i32, i32, i64, usize) {
        (self.src, self.dst, self.comm, self.tag, self.order_ts, self.event)
    }
    fn channel(&self) -> (i32, i32, i32, i32) {
        (self.src, self.dst, self.comm, self.tag)
    }
}

/// The `messages` table as columns.
#[derive(Debug, Default)]
pub struct Messages {
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
    /// (send event, receive event) global indices of every matched message, in msg_id order.
    pub matched_events: Vec<(usize, usize)>,
    node_names: Vec<String>,
}

impl Messages {
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
        if let (Some(s), Some(r)) = (send, recv) {
            self.matched_events.push((s.event, r.event));
        }
    }

    /// Matched messages whose receive precedes their send.
    pub fn violations(&self) -> i64 {
        self.send_ts.iter().zip(&self.recv_ts).filter(|&(&s, &r)| s != NONE_I64 && r != NONE_I64 && r < s).count()
            as i64
    }

    /// The `messages` table, moving the columns.
    pub fn into_batch(self) -> Result<RecordBatch> {
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
        let values: ArrayRef = Arc::new(StringArray::from_iter_values(self.node_names.iter()));
        let node_dict = |keys: Vec<i32>| -> Result<ArrayRef> {
            let keys = owned_nullable::<Int32Type>(keys, NONE_I32);
            Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values.clone())?))
        };
        let nullable = |v: Vec<i64>| -> ArrayRef { Arc::new(owned_nullable::<Int64Type>(v, NONE_I64)) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
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

/// Match the sends and receives of all streams.
pub fn derive(
    events: &EventParts,
    streams: &[PartStream],
    calls: &CallParts,
    nodes: &NodeMap,
    warnings: &mut Warnings,
) -> Messages {
    let parts: Vec<(Vec<Half>, Vec<Half>, Warnings)> = streams
        .par_iter()
        .zip(calls.parts.par_iter())
        .map(|(ps, c)| collect_halves(&events.parts[ps.part], c, ps))
        .collect();
    let mut sends = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut recvs = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    for (mut s, mut r, w) in parts {
        sends.append(&mut s);
        recvs.append(&mut r);
        warnings.merge(w);
    }
    rayon::join(|| sends.par_sort_unstable_by_key(Half::key), || recvs.par_sort_unstable_by_key(Half::key));

    // Merge the two sorted lists channel by channel; the k-th send pairs with the k-th receive.
    let mut pairs: Vec<(Option<u32>, Option<u32>)> = Vec::with_capacity(sends.len().max(recvs.len()));
    let (mut i, mut j) = (0, 0);
    while i < sends.len() || j < recvs.len() {
        let order = match (sends.get(i), recvs.get(j)) {
            (Some(s), Some(r)) => s.channel().cmp(&r.channel()),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                pairs.push((Some(i as u32), None));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                pairs.push((None, Some(j as u32)));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                pairs.push((Some(i as u32), Some(j as u32)));
                i += 1;
                j += 1;
            }
        }
    }

    let unmatched_sends = pairs.iter().filter(|p| p.1.is_none()).count();
    let unmatched_recvs = pairs.iter().filter(|p| p.0.is_none()).count();
    if let Some(&(Some(s), None)) = pairs.iter().find(|p| p.1.is_none()) {
        let s = sends[s as usize];
        warnings.add_many("unmatched_send", unmatched_sends as i64, || {
            format!(
                "sends without a matching receive are kept with NULL receive columns; first: {} -> {} comm {} tag {} at ts {}",
                s.src, s.dst, s.comm, s.tag, s.ts
            )
        });
    }
    if let Some(&(None, Some(r))) = pairs.iter().find(|p| p.0.is_none()) {
        let r = recvs[r as usize];
        warnings.add_many("unmatched_recv", unmatched_recvs as i64, || {
            format!(
                "receives without a matching send are kept with NULL send columns; first: {} -> {} comm {} tag {} at ts {}",
                r.src, r.dst, r.comm, r.tag, r.ts
            )
        });
    }
    let size_mismatch = pairs
        .iter()
        .filter(|p| matches!(p, (Some(s), Some(r)) if sends[*s as usize].bytes != recvs[*r as usize].bytes && recvs[*r as usize].bytes != NONE_I64))
        .count();
    warnings.add_many("message_size_mismatch", size_mismatch as i64, || {
        "matched sends and receives that report different sizes; the send's size is kept".to_string()
    });

    // msg_id follows send time (receive time for receives without a send); the keys are
    // copied next to the pair so the sort does not chase pointers.
    let mut keyed: Vec<(i64, usize, Option<u32>, Option<u32>)> = pairs
        .into_iter()
        .map(|(s, r)| match (s, r) {
            (Some(si), _) => (sends[si as usize].ts, sends[si as usize].event, s, r),
            (None, Some(ri)) => (recvs[ri as usize].ts, recvs[ri as usize].event, s, r),
            (None, None) => (i64::MAX, usize::MAX, s, r),
        })
        .collect();
    keyed.par_sort_unstable_by_key(|k| (k.0, k.1));
    let pairs: Vec<(Option<u32>, Option<u32>)> = keyed.into_iter().map(|k| (k.2, k.3)).collect();

    let mut out = Messages { node_names: nodes.names.clone(), ..Messages::default() };
    for (s, r) in pairs {
        out.push(s.map(|s| &sends[s as usize]), r.map(|r| &recvs[r as usize]), nodes);
    }
    out
}

fn collect_halves(events: &RawEvents, calls: &Calls, ps: &PartStream) -> (Vec<Half>, Vec<Half>, Warnings) {
    let s = &ps.stream;
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    let mut w = Warnings::default();
    let mut open_isends: HashMap<i64, usize> = HashMap::new();
    let mut posted_irecvs: HashMap<i64, i64> = HashMap::new();
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
                if !blocking && open_isends.insert(request, sends.len()).is_some() {
                    w.add("request_reused_while_open", || {
                        format!("rank {}: request {request} reused before it completed (ts {ts})", s.rank)
                    });
                }
                sends.push(Half {
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
                });
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
                recvs.push(Half {
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
                });
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
    (sends, recvs, w)
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
        let m = derive(e, &streams, &c, &NodeMap::new(&ranks), &mut w);
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
        assert_eq!(m.send_ts, vec![10, 20, 30]);
        assert_eq!(m.recv_ts, vec![40, 25, 50]);
        assert_eq!(m.tag, vec![1, 2, 1]);
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
        assert_eq!((m.send_ts[0], m.recv_ts[0], m.recv_post_ts[0], m.send_complete_ts[0]), (10, 60, 5, 50));
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
        let batch = m.into_batch().unwrap();
        assert_eq!(batch.column(17).null_count(), 2);
    }
}
