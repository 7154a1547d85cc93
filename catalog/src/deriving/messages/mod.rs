//! The `messages` table: point-to-point messages matched from the send and receive halves
//! that the stream walk collects (`halves`), by MPI's matching rules (`matching`). Halves
//! without a partner are kept as rows with NULL partner columns and counted as warnings.
//!
//! msg_id follows send time (the receive's completion for a receive without a send): the
//! messages are put in that order once (`deriving::time_order`), then the table is gathered in chunks of
//! `CHUNK_ROWS` messages in parallel, each chunk one record batch. The gather works a block of
//! messages at a time so that their halves are fetched from memory once for all columns.

pub mod channels;
pub mod halves;
pub mod matching;
pub mod spilled;

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, DictionaryArray, Int64Array, RecordBatch, StringArray};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::{Int32Type, Int64Type};
use rayon::prelude::*;

use crate::deriving::time_order;
use crate::error::{Error, Result};
use crate::events::{NONE_I32, NONE_I64, PartStream, owned_nullable};
use crate::model;
use crate::phases::LoadPhases;
use crate::trace::{NodeMap, Warnings};
use halves::{Half, Halves};
use matching::Pair;

/// Messages per record batch of the `messages` table: small enough that two threads share
/// the chunks of a few million messages evenly.
const CHUNK_ROWS: usize = 1 << 18;

/// Messages gathered at a time while a chunk is filled: their halves (32 KiB) stay in the
/// core's nearest caches while the chunk's columns are written one after the other.
const GATHER_BLOCK: usize = 256;

/// A message's halves while its row is written: a missing half is `Half::UNSET`, whose
/// columns are all NULL; `any` is the send, or the receive when there is no send.
struct Row<'a> {
    send: &'a Half,
    recv: &'a Half,
    any: &'a Half,
    matched: bool,
}

impl<'a> Row<'a> {
    fn new(p: &Pair, sends: &'a [Half], recvs: &'a [Half]) -> Self {
        let send = Pair::half(sends, p.send);
        let recv = Pair::half(recvs, p.recv);
        Row {
            send: send.unwrap_or(&Half::UNSET),
            recv: recv.unwrap_or(&Half::UNSET),
            any: send.or(recv).unwrap_or(&Half::UNSET),
            matched: send.is_some() && recv.is_some(),
        }
    }

    fn size_mismatch(&self) -> bool {
        self.matched && self.recv.bytes != NONE_I64 && self.send.bytes != self.recv.bytes
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
    pub send_complete_call_start: Vec<i64>,
    pub src_node: Vec<i32>,
    pub dst_node: Vec<i32>,
    pub src_thread: Vec<i32>,
    pub dst_thread: Vec<i32>,
}

impl MessageChunk {
    pub(crate) fn with_capacity(first_id: i64, n: usize) -> Self {
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
            send_complete_call_start: Vec::with_capacity(n),
            src_node: Vec::with_capacity(n),
            dst_node: Vec::with_capacity(n),
            src_thread: Vec::with_capacity(n),
            dst_thread: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Append the messages of `rows`, a block at a time: each block's halves are looked up
    /// once, then each column is filled from them in one tight loop while they are in cache.
    /// Returns how many matched messages report different sizes on the two sides.
    pub(crate) fn extend(&mut self, rows: &[Pair], sends: &[Half], recvs: &[Half], nodes: &NodeMap) -> i64 {
        let mut size_mismatch = 0;
        let mut block: Vec<Row> = Vec::with_capacity(GATHER_BLOCK);
        for part in rows.chunks(GATHER_BLOCK) {
            block.clear();
            block.extend(part.iter().map(|p| Row::new(p, sends, recvs)));
            size_mismatch += block.iter().filter(|r| r.size_mismatch()).count() as i64;
            self.src.extend(block.iter().map(|r| r.any.src));
            self.dst.extend(block.iter().map(|r| r.any.dst));
            self.comm.extend(block.iter().map(|r| r.any.comm));
            self.tag.extend(block.iter().map(|r| r.any.tag));
            self.bytes.extend(block.iter().map(|r| r.any.bytes));
            self.send_ts.extend(block.iter().map(|r| r.send.ts));
            self.recv_ts.extend(block.iter().map(|r| r.recv.ts));
            self.send_call_start.extend(block.iter().map(|r| r.send.call_start));
            self.send_call_end.extend(block.iter().map(|r| r.send.call_end));
            self.recv_call_start.extend(block.iter().map(|r| r.recv.call_start));
            self.recv_call_end.extend(block.iter().map(|r| r.recv.call_end));
            self.recv_post_ts.extend(block.iter().map(|r| r.recv.aux_ts));
            self.send_complete_ts.extend(block.iter().map(|r| r.send.aux_ts));
            self.send_complete_call_start.extend(block.iter().map(|r| r.send.complete_call_start));
            self.src_node.extend(block.iter().map(|r| nodes.node(r.any.src)));
            self.dst_node.extend(block.iter().map(|r| nodes.node(r.any.dst)));
            self.src_thread.extend(block.iter().map(|r| r.send.thread()));
            self.dst_thread.extend(block.iter().map(|r| r.recv.thread()));
        }
        size_mismatch
    }

    /// The chunk's record batch, moving the columns.
    pub(crate) fn into_batch(self, node_names: &ArrayRef) -> Result<RecordBatch> {
        let n = self.len();
        // Intra-node when both nodes are known and equal; NULL when either is unknown.
        let known = |i: usize| self.src_node[i] != NONE_I32 && self.dst_node[i] != NONE_I32;
        let nodes_known = (self.src_node.contains(&NONE_I32) || self.dst_node.contains(&NONE_I32))
            .then(|| NullBuffer::new(BooleanBuffer::collect_bool(n, known)));
        let same_node = BooleanBuffer::collect_bool(n, |i| self.src_node[i] == self.dst_node[i]);
        let intra = BooleanArray::new(same_node, nodes_known);
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
            Arc::new(owned_nullable::<Int32Type>(self.src, NONE_I32)),
            Arc::new(owned_nullable::<Int32Type>(self.dst, NONE_I32)),
            Arc::new(owned_nullable::<Int32Type>(self.comm, NONE_I32)),
            Arc::new(owned_nullable::<Int32Type>(self.tag, NONE_I32)),
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
            nullable(self.send_complete_call_start),
            Arc::new(owned_nullable::<Int32Type>(self.src_thread, NONE_I32)),
            Arc::new(owned_nullable::<Int32Type>(self.dst_thread, NONE_I32)),
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

/// Match the halves collected from all streams. `keep_matched` also lists the event pair of
/// every matched message (`Messages::matched_events`).
pub fn derive(
    halves: Halves,
    streams: &[PartStream],
    nodes: &NodeMap,
    keep_matched: bool,
    warnings: &mut Warnings,
    phases: &mut LoadPhases,
) -> Result<Messages> {
    let (sends, recvs) = (&halves.sends, &halves.recvs);
    if sends.len().max(recvs.len()) >= Pair::NONE as usize {
        return Err(Error::Engine(format!(
            "{} sends and {} receives: message matching handles fewer than {} of each",
            sends.len(),
            recvs.len(),
            Pair::NONE
        )));
    }
    // Interrupted, the matching stops between its phases.
    let what = "deriving calls, messages and collectives";
    let mut pairs = phases.time("message matching", || matching::pair(sends, recvs, streams, &halves.per_stream));
    crate::interrupt::check(what)?;
    // msg_id order: by send time (the receive's completion for a receive without a send).
    phases.time("msg_id order", || time_order::sort_by_time(&mut pairs, |p| p.ts, |p| p.event));
    crate::interrupt::check(what)?;
    report_unmatched(&pairs, sends, recvs, warnings);

    let start = std::time::Instant::now();
    let chunks: Vec<(MessageChunk, i64)> = pairs
        .par_chunks(CHUNK_ROWS)
        .enumerate()
        .map(|(k, rows)| {
            let mut chunk = MessageChunk::with_capacity((k * CHUNK_ROWS) as i64, rows.len());
            let size_mismatch = chunk.extend(rows, sends, recvs, nodes);
            (chunk, size_mismatch)
        })
        .collect();
    phases.since("messages gather", start);
    let size_mismatch = chunks.iter().map(|c| c.1).sum();
    report_size_mismatch(size_mismatch, warnings);
    let matched_events = if keep_matched {
        pairs
            .iter()
            .filter(|p| p.send != Pair::NONE && p.recv != Pair::NONE)
            .map(|p| (sends[p.send as usize].event(), recvs[p.recv as usize].event()))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Messages { chunks: chunks.into_iter().map(|c| c.0).collect(), matched_events, node_names: nodes.names.clone() })
}

/// A rank, communicator or tag as a warning shows it: NULL when unknown.
fn shown(v: i32) -> String {
    if v == NONE_I32 { "NULL".into() } else { v.to_string() }
}

/// Count the halves without a partner in `pairs` (in msg_id order), the earliest as example.
fn report_unmatched(pairs: &[Pair], sends: &[Half], recvs: &[Half], warnings: &mut Warnings) {
    let (lone_sends, lone_recvs) = pairs
        .par_iter()
        .map(|p| (i64::from(p.recv == Pair::NONE), i64::from(p.send == Pair::NONE)))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let first_send = (lone_sends > 0).then(|| pairs.iter().find(|p| p.recv == Pair::NONE)).flatten();
    let first_recv = (lone_recvs > 0).then(|| pairs.iter().find(|p| p.send == Pair::NONE)).flatten();
    let lone = Unmatched {
        sends: lone_sends,
        first_send: first_send.map(|p| sends[p.send as usize]),
        recvs: lone_recvs,
        first_recv: first_recv.map(|p| recvs[p.recv as usize]),
    };
    lone.report(warnings);
}

/// Halves without a partner: how many of each side, and the earliest in msg_id order.
#[derive(Debug, Default)]
pub(crate) struct Unmatched {
    pub sends: i64,
    pub first_send: Option<Half>,
    pub recvs: i64,
    pub first_recv: Option<Half>,
}

impl Unmatched {
    /// Count the half of `row` if it has no partner.
    pub fn count(&mut self, send: Option<&Half>, recv: Option<&Half>) {
        match (send, recv) {
            (Some(s), None) => {
                self.sends += 1;
                self.first_send.get_or_insert(*s);
            }
            (None, Some(r)) => {
                self.recvs += 1;
                self.first_recv.get_or_insert(*r);
            }
            _ => {}
        }
    }

    pub fn report(&self, warnings: &mut Warnings) {
        if let Some(s) = self.first_send {
            warnings.add_many("unmatched_send", self.sends, || {
                format!(
                    "sends without a matching receive are kept with NULL receive columns; first: {} -> {} comm {} tag {} at ts {}",
                    shown(s.src),
                    shown(s.dst),
                    shown(s.comm),
                    shown(s.tag),
                    s.ts
                )
            });
        }
        if let Some(r) = self.first_recv {
            warnings.add_many("unmatched_recv", self.recvs, || {
                format!(
                    "receives without a matching send are kept with NULL send columns; first: {} -> {} comm {} tag {} at ts {}",
                    shown(r.src),
                    shown(r.dst),
                    shown(r.comm),
                    shown(r.tag),
                    r.ts
                )
            });
        }
    }
}

/// The warning for matched messages whose two sides report different sizes.
pub(crate) fn report_size_mismatch(n: i64, warnings: &mut Warnings) {
    warnings.add_many("message_size_mismatch", n, || {
        "matched sends and receives that report different sizes; the send's size is kept".to_string()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deriving;
    use crate::events::{Event, EventKind, EventParts, RawEvents};
    use crate::trace::RankInfo;

    fn p2p(rank: i32, ts: i64, kind: EventKind, peer: i32, tag: i32, request: i64) -> Event {
        Event { peer, comm: 0, tag, bytes: 8, request, ..Event::new(rank, 0, ts, kind) }
    }

    fn derive_all(e: &RawEvents) -> (Messages, Warnings) {
        let e = &EventParts::single(e.clone());
        let mut w = Warnings::default();
        let ranks: Vec<RankInfo> = (0..2)
            .map(|r| RankInfo { rank: r, node: Some(format!("n{r}")), name: String::new(), application: None })
            .collect();
        let m =
            deriving::derive(&e.columns(), &e.streams(), &NodeMap::new(&ranks), &[], true, &mut w).unwrap().messages;
        assert_eq!(m.chunks.len(), 1, "a small trace is one chunk");
        (m, w)
    }

    /// A small xorshift generator for reproducible random traces.
    struct Draw(u64);

    impl Draw {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Random blocking and non-blocking traffic of 4 ranks with 2 threads each; receives
    /// complete in another order than they were posted.
    fn random_traffic(seed: u64) -> RawEvents {
        let mut d = Draw(seed);
        let mut e = RawEvents::default();
        for rank in 0..4 {
            for thread in 0..2 {
                let (mut ts, mut request) = (0i64, 0i64);
                // (request, is_send, peer, tag) of open non-blocking operations
                let mut open: Vec<(i64, bool, i32, i32)> = Vec::new();
                for _ in 0..400 {
                    ts += 1 + d.below(4) as i64;
                    let (peer, tag) = (d.below(4) as i32, d.below(3) as i32);
                    let ev = |kind, peer, tag, request| Event {
                        peer,
                        comm: 0,
                        tag,
                        bytes: 8,
                        request,
                        ..Event::new(rank, thread, ts, kind)
                    };
                    match d.below(6) {
                        0 => e.push(ev(EventKind::Send, peer, tag, NONE_I64)),
                        1 => e.push(ev(EventKind::Recv, peer, tag, NONE_I64)),
                        2 => {
                            request += 1;
                            e.push(ev(EventKind::Isend, peer, tag, request));
                            open.push((request, true, peer, tag));
                        }
                        3 => {
                            request += 1;
                            e.push(ev(EventKind::IrecvRequest, NONE_I32, NONE_I32, request));
                            open.push((request, false, peer, tag));
                        }
                        _ if !open.is_empty() => {
                            let (req, is_send, peer, tag) = open.swap_remove(d.below(open.len() as u64) as usize);
                            if is_send {
                                e.push(ev(EventKind::IsendComplete, NONE_I32, NONE_I32, req));
                            } else {
                                e.push(ev(EventKind::Irecv, peer, tag, req));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        e
    }

    /// The matching rule spelled out: per channel, sends in (send time, event) order pair with
    /// receives in (post time, event) order.
    fn reference_pairs(e: &RawEvents) -> (Vec<(usize, usize)>, usize, usize) {
        use std::collections::BTreeMap;
        type Channel = (i32, i32, i32, i32);
        let mut sends: BTreeMap<Channel, Vec<(i64, usize)>> = BTreeMap::new();
        let mut recvs: BTreeMap<Channel, Vec<(i64, usize)>> = BTreeMap::new();
        let mut posted: BTreeMap<(i32, i32, i64), i64> = BTreeMap::new();
        for i in 0..e.len() {
            let (rank, thread, ts) = (e.rank[i], e.thread[i], e.ts[i]);
            let channel = |src, dst| (src, dst, e.comm[i], e.tag[i]);
            match e.kind(i) {
                EventKind::Send | EventKind::Isend => {
                    sends.entry(channel(rank, e.peer[i])).or_default().push((ts, i));
                }
                EventKind::IrecvRequest => {
                    posted.insert((rank, thread, e.request[i]), ts);
                }
                EventKind::Recv => recvs.entry(channel(e.peer[i], rank)).or_default().push((ts, i)),
                EventKind::Irecv => {
                    let post = posted[&(rank, thread, e.request[i])];
                    recvs.entry(channel(e.peer[i], rank)).or_default().push((post, i));
                }
                _ => {}
            }
        }
        let (mut pairs, mut lone_sends, mut lone_recvs) = (Vec::new(), 0, 0);
        for (channel, mut s) in sends {
            let mut r = recvs.remove(&channel).unwrap_or_default();
            s.sort();
            r.sort();
            pairs.extend(s.iter().zip(&r).map(|(a, b)| (a.1, b.1)));
            lone_sends += s.len().saturating_sub(r.len());
            lone_recvs += r.len().saturating_sub(s.len());
        }
        lone_recvs += recvs.values().map(Vec::len).sum::<usize>();
        pairs.sort();
        (pairs, lone_sends, lone_recvs)
    }

    #[test]
    fn matching_agrees_with_the_rule_on_random_traffic() {
        for seed in [1u64, 7, 1234, 99991] {
            let mut e = random_traffic(seed);
            e.group_by_stream();
            let (want, lone_sends, lone_recvs) = reference_pairs(&e);
            let parts = EventParts::single(e);
            let mut w = Warnings::default();
            let ranks: Vec<RankInfo> =
                (0..4).map(|r| RankInfo { rank: r, node: None, name: String::new(), application: None }).collect();
            let m = deriving::derive(&parts.columns(), &parts.streams(), &NodeMap::new(&ranks), &[], true, &mut w)
                .unwrap()
                .messages;
            let mut got = m.matched_events.clone();
            got.sort();
            assert!(want.len() > 100, "seed {seed}: the traffic matches messages");
            assert_eq!(got, want, "seed {seed}");
            assert_eq!(w.count("unmatched_send") as usize, lone_sends, "seed {seed}");
            assert_eq!(w.count("unmatched_recv") as usize, lone_recvs, "seed {seed}");
            assert_eq!(m.len(), want.len() + lone_sends + lone_recvs, "seed {seed}");
            let c = &m.chunks[0];
            let order: Vec<i64> =
                c.send_ts.iter().zip(&c.recv_ts).map(|(&s, &r)| if s == NONE_I64 { r } else { s }).collect();
            assert!(order.is_sorted(), "seed {seed}: msg_id follows send time");
        }
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
    fn receives_completing_out_of_post_order_match_in_post_order() {
        let mut e = RawEvents::default();
        e.push(p2p(0, 10, EventKind::Send, 1, 4, NONE_I64));
        e.push(p2p(0, 15, EventKind::Send, 1, 4, NONE_I64));
        e.push(p2p(1, 5, EventKind::IrecvRequest, NONE_I32, NONE_I32, 1));
        e.push(p2p(1, 6, EventKind::IrecvRequest, NONE_I32, NONE_I32, 2));
        // The second receive posted completes first.
        e.push(p2p(1, 20, EventKind::Irecv, 0, 4, 2));
        e.push(p2p(1, 30, EventKind::Irecv, 0, 4, 1));
        e.group_by_stream();
        let (m, w) = derive_all(&e);
        assert!(w.is_empty(), "{w:?}");
        let c = &m.chunks[0];
        assert_eq!(
            (c.send_ts.clone(), c.recv_post_ts.clone(), c.recv_ts.clone()),
            (vec![10, 15], vec![5, 6], vec![30, 20])
        );
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
        let ranks: Vec<RankInfo> =
            (0..2).map(|r| RankInfo { rank: r, node: None, name: String::new(), application: None }).collect();
        let derived = deriving::derive(&e.columns(), &e.streams(), &NodeMap::new(&ranks), &[], false, &mut w).unwrap();
        let batches = derived.messages.into_batches().unwrap();
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
