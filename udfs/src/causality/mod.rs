//! How events depend on each other, after PCLVis section 5: vector clocks and happened-before
//! (`vector_clock`), the communication-dependency DAG of the paper's Algorithm 2 (`dag`) and
//! the load balance of equations 9 and 10 (`balance`).
//!
//! All of them read a messages-shaped relation (msg_id, src, dst, send_ts, recv_ts, ...). A
//! message gives a send event on its sender at send_ts and a receive event on its receiver at
//! recv_ts (either is missing for an unmatched message). Each rank's events are ordered by
//! time, ties by msg_id (never by the order the rows arrive in), a send before the receive of
//! the same message, then collectives by communicator and instance. A collectives relation (comm, instance, rank, begin_ts, optionally
//! end_ts for participations whose begin was not recorded) may add one event per participant. The logical order visits every event after the
//! events it depends on: earlier events of its rank, the send of a receive, every participant's
//! arrival at a collective. When the recorded times contradict the messages (a receive that
//! must precede its own send's cause, as uncorrected clocks can produce) there is no such order
//! and the error says so. Cost: O(events log events) for the sort, O(events) for the visit.

mod algorithm2;
pub mod balance;
pub mod dag;
mod dag_check;
mod dag_steps;
mod edge_rows;
mod halves;
mod pieces;
pub mod vector_clock;

use std::collections::VecDeque;

use arrow::array::{Array, RecordBatch};
use datafusion::common::exec_err;
use datafusion::error::Result;

use commdb_analysis::columns::int64_column;
use commdb_catalog::fast_hash::FastMap;

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Send,
    Recv,
    Collective,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Recv => "recv",
            Kind::Collective => "collective",
        }
    }
}

/// One event of a rank: a message side (row of the messages relation) or a collective
/// (index into `Timeline::collectives`).
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub ts: i64,
    pub kind: Kind,
    pub item: u32,
}

/// A collective operation instance: (comm, instance) and its participants' event indices.
#[derive(Debug, Clone)]
pub struct Collective {
    pub comm: i64,
    pub instance: i64,
    pub events: Vec<u32>,
}

/// The messages' columns the analyses read.
#[derive(Debug, Default)]
pub struct Messages {
    pub msg_id: Vec<i64>,
    pub src: Vec<Option<i64>>,
    pub dst: Vec<Option<i64>>,
    pub send_ts: Vec<Option<i64>>,
    pub recv_ts: Vec<Option<i64>>,
}

impl Messages {
    /// Read from batches whose columns are msg_id, src, dst, send_ts, recv_ts at `idx` (a NULL
    /// msg_id becomes the row's number).
    pub fn read(batches: &[RecordBatch], idx: &[usize]) -> Result<Self> {
        let mut m = Messages::default();
        m.extend(batches, idx)?;
        Ok(m)
    }

    /// Add the messages of `batches` (see `read`), a NULL msg_id numbered on from the messages
    /// already held.
    pub fn extend(&mut self, batches: &[RecordBatch], idx: &[usize]) -> Result<()> {
        let first = self.len() as i64;
        let ids = int64_column(batches, idx[0])?;
        self.msg_id.extend((0..ids.len()).map(|i| if ids.is_null(i) { first + i as i64 } else { ids.value(i) }));
        self.src.extend(&int64_column(batches, idx[1])?);
        self.dst.extend(&int64_column(batches, idx[2])?);
        self.send_ts.extend(&int64_column(batches, idx[3])?);
        self.recv_ts.extend(&int64_column(batches, idx[4])?);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.msg_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.msg_id.is_empty()
    }
}

/// Collective participations: comm, instance, rank, begin_ts.
#[derive(Debug, Default)]
pub struct Participations {
    pub comm: Vec<i64>,
    pub instance: Vec<i64>,
    pub rank: Vec<i64>,
    pub begin_ts: Vec<Option<i64>>,
}

impl Participations {
    /// Add the participations of `batches`, whose columns are comm, instance, rank, begin_ts
    /// and optionally end_ts at `idx` (a NULL comm, instance or rank as -1); a participation
    /// whose begin was not recorded stands at its end_ts, when `idx` gives one.
    pub fn extend(&mut self, batches: &[RecordBatch], idx: &[usize]) -> Result<()> {
        for (out, i) in [(&mut self.comm, 0), (&mut self.instance, 1), (&mut self.rank, 2)] {
            out.extend(int64_column(batches, idx[i])?.iter().map(|v| v.unwrap_or(-1)));
        }
        let begin = int64_column(batches, idx[3])?;
        match idx.get(4) {
            Some(&e) => {
                let end = int64_column(batches, e)?;
                self.begin_ts.extend(begin.iter().zip(&end).map(|(b, e)| b.or(e)));
            }
            None => self.begin_ts.extend(&begin),
        }
        Ok(())
    }
}

/// Every rank's events in order.
#[derive(Debug)]
pub struct Timeline {
    /// Ranks of the relation, ascending; rank index i is `ranks[i]`.
    pub ranks: Vec<i64>,
    /// Events grouped by rank index, each rank's in order.
    pub events: Vec<Event>,
    /// `events[rank_start[i]..rank_start[i + 1]]` are rank i's.
    pub rank_start: Vec<usize>,
    /// Rank index of every event.
    pub rank_of: Vec<u32>,
    /// Event index of each message row's send and receive (u32::MAX when missing).
    pub send_event: Vec<u32>,
    pub recv_event: Vec<u32>,
    pub collectives: Vec<Collective>,
}

const NONE: u32 = u32::MAX;

/// Where an event stands among its rank's events at the same time: messages (0) by msg_id then
/// row, collectives (1) by communicator then instance.
type ItemOrder = (u8, i64, i64);

impl Timeline {
    pub fn new(m: &Messages, colls: Option<&Participations>) -> Result<Self> {
        let mut ranks: Vec<i64> = m.src.iter().chain(&m.dst).flatten().copied().collect();
        if let Some(c) = colls {
            ranks.extend(&c.rank);
        }
        ranks.sort_unstable();
        ranks.dedup();
        let index: FastMap<i64, u32> = ranks.iter().enumerate().map(|(i, r)| (*r, i as u32)).collect();
        // (rank index, ts, item order, kind, item). Events of a rank at the same time are in
        // the order of their messages' ids, then of their collectives' (comm, instance): never
        // in the order the rows happened to arrive in, which the partitions of a scan decide.
        let mut keyed: Vec<(u32, i64, ItemOrder, Kind, u32)> = Vec::with_capacity(2 * m.len());
        for row in 0..m.len() {
            let order = (0, m.msg_id[row], row as i64);
            if let (Some(s), Some(t)) = (m.src[row], m.send_ts[row]) {
                keyed.push((index[&s], t, order, Kind::Send, row as u32));
            }
            if let (Some(d), Some(t)) = (m.dst[row], m.recv_ts[row]) {
                keyed.push((index[&d], t, order, Kind::Recv, row as u32));
            }
        }
        let mut collectives: Vec<Collective> = Vec::new();
        if let Some(c) = colls {
            let mut key: FastMap<(i64, i64), u32> = FastMap::default();
            for i in 0..c.rank.len() {
                // A participation without any time has no place in the rank's order.
                let Some(t) = c.begin_ts[i] else {
                    return exec_err!(
                        "causality: rank {}'s part in collective instance {} of communicator {} has no begin_ts or end_ts",
                        c.rank[i],
                        c.instance[i],
                        c.comm[i]
                    );
                };
                let next = key.len() as u32;
                let k = *key.entry((c.comm[i], c.instance[i])).or_insert(next);
                if k as usize == collectives.len() {
                    collectives.push(Collective { comm: c.comm[i], instance: c.instance[i], events: Vec::new() });
                }
                keyed.push((index[&c.rank[i]], t, (1, c.comm[i], c.instance[i]), Kind::Collective, k));
            }
        }
        if keyed.len() >= NONE as usize {
            return exec_err!(
                "causality: {} events are more than this analysis handles; narrow the relation",
                keyed.len()
            );
        }
        keyed.sort_unstable_by_key(|k| (k.0, k.1, k.2, k.3));
        let mut rank_start = vec![0usize; ranks.len() + 1];
        for k in &keyed {
            rank_start[k.0 as usize + 1] += 1;
        }
        for i in 0..ranks.len() {
            rank_start[i + 1] += rank_start[i];
        }
        let mut send_event = vec![NONE; m.len()];
        let mut recv_event = vec![NONE; m.len()];
        let mut events = Vec::with_capacity(keyed.len());
        let mut rank_of = Vec::with_capacity(keyed.len());
        for (i, k) in keyed.iter().enumerate() {
            match k.3 {
                Kind::Send => send_event[k.4 as usize] = i as u32,
                Kind::Recv => recv_event[k.4 as usize] = i as u32,
                Kind::Collective => collectives[k.4 as usize].events.push(i as u32),
            }
            events.push(Event { ts: k.1, kind: k.3, item: k.4 });
            rank_of.push(k.0);
        }
        Ok(Timeline { ranks, events, rank_start, rank_of, send_event, recv_event, collectives })
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Visit every event after the events it depends on: `visit` gets one event index, or all
    /// participants' events of a collective at once. An error when no such order exists.
    pub fn visit_in_logical_order(&self, m: &Messages, mut visit: impl FnMut(&[u32])) -> Result<()> {
        let n = self.ranks.len();
        let mut pos: Vec<usize> = self.rank_start[..n].to_vec();
        let mut done = vec![false; self.len()];
        let mut waiting_for_send: Vec<u32> = vec![NONE; m.len()];
        let mut arrived = vec![0u32; self.collectives.len()];
        let mut ready: VecDeque<usize> = (0..n).collect();
        let mut visited = 0usize;
        while let Some(r) = ready.pop_front() {
            commdb_catalog::interrupt::check("logical order")?;
            while pos[r] < self.rank_start[r + 1] {
                let i = pos[r];
                let e = self.events[i];
                match e.kind {
                    Kind::Send => {
                        visit(&[i as u32]);
                        done[i] = true;
                        pos[r] += 1;
                        visited += 1;
                        let w = std::mem::replace(&mut waiting_for_send[e.item as usize], NONE);
                        if w != NONE {
                            ready.push_back(w as usize);
                        }
                    }
                    Kind::Recv => {
                        let s = self.send_event[e.item as usize];
                        if s != NONE && !done[s as usize] {
                            waiting_for_send[e.item as usize] = r as u32;
                            break;
                        }
                        visit(&[i as u32]);
                        done[i] = true;
                        pos[r] += 1;
                        visited += 1;
                    }
                    Kind::Collective => {
                        let c = &self.collectives[e.item as usize];
                        arrived[e.item as usize] += 1;
                        if (arrived[e.item as usize] as usize) < c.events.len() {
                            break;
                        }
                        visit(&c.events);
                        for &p in &c.events {
                            done[p as usize] = true;
                            let pr = self.rank_of[p as usize] as usize;
                            pos[pr] += 1;
                            visited += 1;
                            if pr != r {
                                ready.push_back(pr);
                            }
                        }
                    }
                }
            }
        }
        if visited < self.len() {
            return exec_err!("{}", self.describe_stuck(m, &pos));
        }
        Ok(())
    }

    /// Why the visit stopped: the first rank whose next event could not be visited.
    fn describe_stuck(&self, m: &Messages, pos: &[usize]) -> String {
        let stuck = (0..self.ranks.len()).find(|&r| pos[r] < self.rank_start[r + 1]);
        let Some(r) = stuck else { return "no consistent order of events".into() };
        let e = self.events[pos[r]];
        let what = match e.kind {
            Kind::Recv => {
                let row = e.item as usize;
                format!(
                    "the receive of message {} from rank {} (recv_ts {}) waits for its send (send_ts {}), which depends on later events",
                    m.msg_id[row],
                    m.src[row].map_or("?".into(), |s| s.to_string()),
                    e.ts,
                    m.send_ts[row].map_or("?".into(), |s| s.to_string())
                )
            }
            _ => {
                let c = &self.collectives[e.item as usize];
                format!(
                    "collective instance {} of communicator {} (ts {}) waits for participants that never reach it",
                    c.instance, c.comm, e.ts
                )
            }
        };
        format!(
            "no order of events agrees with both the recorded times and the messages: on rank {}, {what}. The clocks contradict the messages; open the trace with clock correction clc (SET clock_correction = clc, then ATTACH) or narrow the relation",
            self.ranks[r]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn messages(rows: &[(i64, i64, Option<i64>, Option<i64>)]) -> Messages {
        Messages {
            msg_id: (0..rows.len() as i64).collect(),
            src: rows.iter().map(|r| Some(r.0)).collect(),
            dst: rows.iter().map(|r| Some(r.1)).collect(),
            send_ts: rows.iter().map(|r| r.2).collect(),
            recv_ts: rows.iter().map(|r| r.3).collect(),
        }
    }

    #[test]
    fn events_at_the_same_time_follow_their_message_ids_whatever_the_row_order() {
        // Rank 2 receives two messages at time 50; their rows come in either order.
        let rows = [(0, 2, Some(10), Some(50)), (1, 2, Some(20), Some(50))];
        let ids_in_order = |swap: bool| {
            let mut m = messages(&rows);
            if swap {
                m = messages(&[rows[1], rows[0]]);
                m.msg_id = vec![1, 0];
            }
            let t = Timeline::new(&m, None).unwrap();
            let r = t.ranks.iter().position(|&r| r == 2).unwrap();
            t.events[t.rank_start[r]..t.rank_start[r + 1]].iter().map(|e| m.msg_id[e.item as usize]).collect::<Vec<_>>()
        };
        assert_eq!(ids_in_order(false), [0, 1]);
        assert_eq!(ids_in_order(true), [0, 1]);
    }

    #[test]
    fn logical_order_waits_for_sends() {
        // Rank 1's receive is stamped before the send (a clock violation) but still follows it.
        let m = messages(&[(0, 1, Some(10), Some(5)), (1, 2, Some(20), Some(30))]);
        let t = Timeline::new(&m, None).unwrap();
        let mut order = Vec::new();
        t.visit_in_logical_order(&m, |ev| order.extend_from_slice(ev)).unwrap();
        let send0 = order.iter().position(|&e| e == t.send_event[0]).unwrap();
        let recv0 = order.iter().position(|&e| e == t.recv_event[0]).unwrap();
        assert!(send0 < recv0);
        assert_eq!(order.len(), 4);
    }

    #[test]
    fn contradicting_times_are_an_error() {
        // Each rank receives before it sends, and each receive needs the other's send.
        let m = messages(&[(0, 1, Some(20), Some(10)), (1, 0, Some(20), Some(10))]);
        let t = Timeline::new(&m, None).unwrap();
        let e = t.visit_in_logical_order(&m, |_| {}).unwrap_err().to_string();
        assert!(e.contains("on rank 0, the receive of message 1 from rank 1"), "{e}");
        assert!(e.contains("clc"), "{e}");
    }
}
