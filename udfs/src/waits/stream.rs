//! The MPI waits given in rank order without holding them all: the message candidates and the
//! collectives' waits come back sorted from `crate::external_sort`, the candidates of each call
//! are reduced to its one wait as they are read (the rules of `super::MessageWaits`), and the two
//! streams are merged by `Wait::order`. How the records look on disk is here too: fixed widths,
//! a byte of flags for what is NULL.

use std::collections::VecDeque;

use datafusion::common::internal_err;
use datafusion::error::Result;

use super::{Candidate, MPI_PATTERNS as PATTERNS, Part, Wait};
use crate::external_sort::{Record, Sorted};

fn put(out: &mut [u8], at: usize, v: i64) {
    out[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `v`'s value (0 for NULL) and its bit in the flags when NULL.
fn nullable(v: Option<i64>, bit: u8) -> (i64, u8) {
    v.map_or((0, bit), |v| (v, 0))
}

fn unless(flags: u8, bit: u8, v: i64) -> Option<i64> {
    (flags & bit == 0).then_some(v)
}

impl Record for Candidate {
    const BYTES: usize = 1 + 7 * 8;
    const HEAD: usize = 1;
    /// Rank, start, late senders first, the call.
    type Key = (i64, i64, bool, i64);

    fn key(&self) -> Self::Key {
        (self.rank, self.ts, !self.late, self.call)
    }

    fn encode(&self, out: &mut [u8]) -> Result<()> {
        let (msg, m) = nullable(self.msg_id, 2);
        let (partner, p) = nullable(self.partner, 4);
        out[0] = u8::from(self.late) | m | p;
        for (i, v) in [self.rank, self.ts, self.call, self.wait_ns, msg, partner, self.left].into_iter().enumerate() {
            put(out, 1 + 8 * i, v);
        }
        Ok(())
    }

    fn decode(b: &[u8]) -> Self {
        let f = b[0];
        Candidate {
            late: f & 1 != 0,
            rank: get(b, 1),
            ts: get(b, 9),
            call: get(b, 17),
            wait_ns: get(b, 25),
            msg_id: unless(f, 2, get(b, 33)),
            partner: unless(f, 4, get(b, 41)),
            left: get(b, 49),
        }
    }
}

impl Record for Part {
    const BYTES: usize = 1 + 8 * 8 + 4;
    const HEAD: usize = 1;
    /// The instance, then the order the parts came in.
    type Key = (i64, i64, u64);

    fn key(&self) -> Self::Key {
        (self.comm, self.instance, self.seq)
    }

    fn encode(&self, out: &mut [u8]) -> Result<()> {
        let (begin, b) = nullable(self.begin, 1);
        let (end, e) = nullable(self.end, 2);
        let (call, c) = nullable(self.call_start, 4);
        let (root, r) = nullable(self.root, 8);
        out[0] = b | e | c | r;
        let seq = self.seq as i64;
        for (i, v) in [self.comm, self.instance, seq, self.rank, begin, end, call, root].into_iter().enumerate() {
            put(out, 1 + 8 * i, v);
        }
        out[65..69].copy_from_slice(&self.op.to_le_bytes());
        Ok(())
    }

    fn decode(b: &[u8]) -> Self {
        let f = b[0];
        Part {
            comm: get(b, 1),
            instance: get(b, 9),
            seq: get(b, 17) as u64,
            rank: get(b, 25),
            begin: unless(f, 1, get(b, 33)),
            end: unless(f, 2, get(b, 41)),
            call_start: unless(f, 4, get(b, 49)),
            root: unless(f, 8, get(b, 57)),
            op: u32::from_le_bytes(b[65..69].try_into().expect("4 bytes")),
        }
    }
}

impl Record for Wait {
    const BYTES: usize = 2 + 7 * 8;
    const HEAD: usize = 2;
    type Key = (i64, i64, &'static str, Option<i64>, Option<i64>);

    fn key(&self) -> Self::Key {
        self.order()
    }

    fn encode(&self, out: &mut [u8]) -> Result<()> {
        let Some(pattern) = PATTERNS.iter().position(|p| *p == self.pattern) else {
            return internal_err!("a wait of pattern {} cannot be kept on disk", self.pattern);
        };
        let (msg, m) = nullable(self.msg_id, 1);
        let (comm, c) = nullable(self.comm, 2);
        let (instance, i) = nullable(self.instance, 4);
        let (partner, p) = nullable(self.partner, 8);
        out[0] = m | c | i | p;
        out[1] = pattern as u8;
        for (k, v) in [self.rank, self.wait_ns, self.ts, msg, comm, instance, partner].into_iter().enumerate() {
            put(out, 2 + 8 * k, v);
        }
        Ok(())
    }

    fn decode(b: &[u8]) -> Self {
        let f = b[0];
        Wait {
            rank: get(b, 2),
            // Written from PATTERNS.
            pattern: PATTERNS[usize::from(b[1]) % PATTERNS.len()],
            wait_ns: get(b, 10),
            ts: get(b, 18),
            msg_id: unless(f, 1, get(b, 26)),
            comm: unless(f, 2, get(b, 34)),
            instance: unless(f, 4, get(b, 42)),
            partner: unless(f, 8, get(b, 50)),
        }
    }
}

/// A message's wait and, for a late sender, when its send call was left (when recorded).
pub(crate) type MessageWait = (Wait, Option<i64>);

/// The message waits in the order of `Wait::order`, from the candidates in the order of their
/// key: the candidates of one rank and start are read together; when a late sender is among
/// them, the late receivers are left out (Scalasca's MPI_LATERECEIVER leaves out a
/// multiple-completion call that had a late-sender candidate: the two would overlap in the
/// same call); of each call's candidates, the longest wait is kept (of equal ones, the first
/// message's).
pub(crate) struct MessageWaitStream {
    candidates: Sorted<Candidate>,
    /// The candidates of one rank and start.
    group: Vec<Candidate>,
    ready: VecDeque<MessageWait>,
}

impl MessageWaitStream {
    pub(super) fn new(candidates: Sorted<Candidate>) -> Self {
        MessageWaitStream { candidates, group: Vec::new(), ready: VecDeque::new() }
    }

    pub fn next(&mut self) -> Result<Option<MessageWait>> {
        while self.ready.is_empty() {
            let Some(first) = self.candidates.next()? else { return Ok(None) };
            self.group.clear();
            self.group.push(first);
            while let Some(c) = self.candidates.peek()?
                && (c.rank, c.ts) == (first.rank, first.ts)
            {
                let c = *c;
                self.candidates.next()?;
                // Late senders come first: a late receiver after one is left out.
                if c.late || !first.late {
                    self.group.push(c);
                }
            }
            self.reduce();
        }
        Ok(self.ready.pop_front())
    }

    /// The waits of `group` (candidates of one kind, in call order), ordered by message.
    fn reduce(&mut self) {
        let better = |c: &Candidate, k: &Candidate| {
            (c.wait_ns, std::cmp::Reverse(c.msg_id)) > (k.wait_ns, std::cmp::Reverse(k.msg_id))
        };
        let start = self.ready.len();
        let mut kept = self.group[0];
        for c in &self.group[1..] {
            if c.call != kept.call {
                self.ready.push_back(message_wait(&kept));
                kept = *c;
            } else if better(c, &kept) {
                kept = *c;
            }
        }
        self.ready.push_back(message_wait(&kept));
        self.ready.make_contiguous()[start..].sort_unstable_by_key(|(w, _)| w.msg_id);
    }

    pub fn held_bytes(&self) -> usize {
        self.candidates.held_bytes()
            + (self.group.capacity() + self.ready.capacity()) * std::mem::size_of::<Candidate>()
    }
}

/// The wait of candidate `k`, the one kept of its call.
fn message_wait(k: &Candidate) -> MessageWait {
    let wait = Wait {
        rank: k.rank,
        pattern: if k.late { "late_sender" } else { "late_receiver" },
        wait_ns: k.wait_ns,
        ts: k.ts,
        msg_id: k.msg_id,
        comm: None,
        instance: None,
        partner: k.partner,
    };
    (wait, (k.late && k.left != i64::MIN).then_some(k.left))
}

/// Every MPI wait in the order of `Wait::order`: the message waits merged with the
/// collectives'.
pub(crate) struct WaitStream {
    messages: MessageWaitStream,
    collectives: Sorted<Wait>,
    message: Option<Wait>,
}

impl WaitStream {
    pub(crate) fn new(mut messages: MessageWaitStream, collectives: Sorted<Wait>) -> Result<Self> {
        let message = messages.next()?.map(|(w, _)| w);
        Ok(WaitStream { messages, collectives, message })
    }

    /// The waits of `sorted`, in the order of `Wait::order`.
    pub fn of_sorted(sorted: Sorted<Wait>) -> Result<Self> {
        Self::new(super::MessageWaits::default().stream()?, sorted)
    }

    pub fn next(&mut self) -> Result<Option<Wait>> {
        let take_message = match (&self.message, self.collectives.peek()?) {
            (None, None) => return Ok(None),
            (Some(m), Some(c)) => m.order() <= c.order(),
            (m, _) => m.is_some(),
        };
        if take_message {
            let next = self.messages.next()?.map(|(w, _)| w);
            Ok(std::mem::replace(&mut self.message, next))
        } else {
            self.collectives.next()
        }
    }

    /// The waits of the ranks up to `last`, onto `out`.
    pub fn through(&mut self, last: i64, out: &mut Vec<Wait>) -> Result<()> {
        loop {
            let rank = match (&self.message, self.collectives.peek()?) {
                (Some(m), Some(c)) => m.rank.min(c.rank),
                (Some(m), None) => m.rank,
                (None, Some(c)) => c.rank,
                (None, None) => return Ok(()),
            };
            if rank > last {
                return Ok(());
            }
            out.extend(self.next()?);
        }
    }

    pub fn held_bytes(&self) -> usize {
        self.messages.held_bytes() + self.collectives.held_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external_sort::ExternalSort;

    fn candidate(late: bool, rank: i64, ts: i64, call: i64, wait_ns: i64, msg: Option<i64>) -> Candidate {
        Candidate { late, rank, ts, call, wait_ns, msg_id: msg, partner: Some(rank + 1), left: ts + 5 }
    }

    fn round_trip<T: Record + PartialEq + std::fmt::Debug>(r: T) {
        let mut bytes = vec![0; T::BYTES];
        r.encode(&mut bytes).unwrap();
        assert_eq!(T::decode(&bytes), r);
    }

    #[test]
    fn records_come_back_from_their_bytes_nulls_included() {
        round_trip(candidate(true, 3, -7, i64::MIN, 9, None));
        round_trip(Candidate { partner: None, msg_id: Some(i64::MAX), ..candidate(false, -1, 0, 0, 1, None) });
        let part = Part {
            comm: 1,
            instance: 2,
            seq: u64::MAX >> 1,
            rank: 3,
            begin: None,
            end: Some(-4),
            call_start: Some(5),
            root: None,
            op: 7,
        };
        round_trip(part);
        round_trip(Part { begin: Some(0), end: None, call_start: None, root: Some(i64::MIN), ..part });
        for pattern in PATTERNS {
            let w = Wait {
                rank: 1,
                pattern,
                wait_ns: 2,
                ts: 3,
                msg_id: None,
                comm: Some(4),
                instance: None,
                partner: Some(i64::MIN),
            };
            round_trip(w);
        }
        let thread = Wait { pattern: "omp_fork", ..Wait::decode(&[0; Wait::BYTES]) };
        assert!(thread.encode(&mut [0; Wait::BYTES]).is_err(), "a pattern outside the table is refused");
    }

    /// The waits `MessageWaitStream` gives for `candidates`, pushed in runs of two.
    fn waits_of(candidates: &[Candidate]) -> Vec<MessageWait> {
        let mut sort = ExternalSort::with_run("test", 2);
        for c in candidates {
            sort.push(*c).unwrap();
        }
        let mut stream = MessageWaitStream::new(sort.sorted().unwrap());
        let mut out = Vec::new();
        while let Some(w) = stream.next().unwrap() {
            out.push(w);
        }
        out
    }

    #[test]
    fn a_call_waits_once_and_a_late_sender_leaves_out_the_late_receiver() {
        let waits = waits_of(&[
            // Rank 0's Waitall at 10 completes three receives: the longest wait is kept, of
            // equal ones the lower message; its late receiver is left out.
            candidate(true, 0, 10, 50, 4, Some(3)),
            candidate(false, 0, 10, 0, 30, Some(9)),
            candidate(true, 0, 10, 50, 6, Some(2)),
            candidate(true, 0, 10, 50, 6, Some(1)),
            // Two calls of rank 0 that begin at 20 (calls told apart by their end).
            candidate(true, 0, 20, 70, 1, Some(8)),
            candidate(true, 0, 20, 60, 2, Some(7)),
            // Late receivers of rank 1's call at 5: the longer one.
            candidate(false, 1, 5, 0, 2, Some(4)),
            candidate(false, 1, 5, 0, 3, Some(5)),
        ]);
        let got: Vec<_> = waits.iter().map(|(w, l)| (w.rank, w.ts, w.pattern, w.wait_ns, w.msg_id, *l)).collect();
        assert_eq!(
            got,
            vec![
                (0, 10, "late_sender", 6, Some(1), Some(15)),
                (0, 20, "late_sender", 2, Some(7), Some(25)),
                (0, 20, "late_sender", 1, Some(8), Some(25)),
                (1, 5, "late_receiver", 3, Some(5), None),
            ]
        );
    }

    #[test]
    fn message_and_collective_waits_merge_in_order_and_stop_at_a_rank() {
        let list = waits_of(&[candidate(true, 0, 10, 1, 1, Some(1)), candidate(true, 2, 10, 1, 1, Some(2))]);
        let mut messages = ExternalSort::with_run("test", 1);
        for (w, _) in &list {
            let c = candidate(true, w.rank, w.ts, 1, w.wait_ns, w.msg_id);
            messages.push(c).unwrap();
        }
        let collective = |rank, ts| Wait {
            rank,
            pattern: "wait_at_nxn",
            wait_ns: 1,
            ts,
            msg_id: None,
            comm: Some(0),
            instance: Some(0),
            partner: Some(9),
        };
        let mut sort = ExternalSort::with_run("test", 1);
        for w in [collective(2, 5), collective(0, 10), collective(1, 3)] {
            sort.push(w).unwrap();
        }
        let mut stream =
            WaitStream::new(MessageWaitStream::new(messages.sorted().unwrap()), sort.sorted().unwrap()).unwrap();
        let mut first = Vec::new();
        stream.through(1, &mut first).unwrap();
        let keys = |l: &[Wait]| l.iter().map(|w| (w.rank, w.ts, w.pattern)).collect::<Vec<_>>();
        assert_eq!(keys(&first), vec![(0, 10, "late_sender"), (0, 10, "wait_at_nxn"), (1, 3, "wait_at_nxn")]);
        let mut rest = Vec::new();
        stream.through(i64::MAX, &mut rest).unwrap();
        assert_eq!(keys(&rest), vec![(2, 5, "wait_at_nxn"), (2, 10, "late_sender")]);
        assert_eq!(stream.next().unwrap(), None);
    }

    /// A participation: comm, instance, rank, begin_ts, op, root, end_ts, call_start.
    type Participation = (i64, i64, i64, Option<i64>, &'static str, Option<i64>, Option<i64>, Option<i64>);

    /// Collective participations.
    fn participations() -> arrow::array::RecordBatch {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        use std::sync::Arc;
        let mut rows: Vec<Participation> = Vec::new();
        for k in 0..40i64 {
            let op = ["allreduce", "bcast", "scan", "reduce", "barrier"][k as usize % 5];
            for rank in (0..6).rev() {
                let begin = 100 * k + (rank * 7 + k * 3) % 11;
                rows.push((k % 2, k, rank, Some(begin), op, Some(2), Some(100 * k + 50 - rank), Some(begin - 1)));
            }
            // A part without a begin, which only leaves the instance.
            rows.push((k % 2, k, 9, None, op, Some(2), Some(100 * k + 60), None));
        }
        let int = |f: &dyn Fn(&Participation) -> Option<i64>| {
            Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>())) as ArrayRef
        };
        let columns = vec![
            int(&|r| Some(r.0)),
            int(&|r| Some(r.1)),
            int(&|r| Some(r.2)),
            int(&|r| r.3),
            Arc::new(StringArray::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())) as ArrayRef,
            int(&|r| r.5),
            int(&|r| r.6),
            int(&|r| r.7),
        ];
        let names = super::super::COLLECTIVE_COLUMNS;
        let fields: Vec<_> = names
            .iter()
            .zip(&columns)
            .map(|(n, c)| arrow::datatypes::Field::new(*n, c.data_type().clone(), true))
            .collect();
        arrow::array::RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap()
    }

    #[test]
    fn collectives_give_the_same_waits_and_ends_whether_or_not_they_spill() {
        let batch = participations();
        let run = |collectives: super::super::CollectiveWaits| {
            let mut collectives = collectives;
            collectives.fold(&batch).unwrap();
            let (mut waits, mut ends) = (Vec::new(), Vec::new());
            let left_out = collectives
                .finish_each_with(
                    |w| {
                        waits.push(w);
                        Ok(())
                    },
                    |c, k, e| {
                        ends.push((c, k, e.to_vec()));
                        Ok(())
                    },
                )
                .unwrap();
            (waits, ends, left_out)
        };
        let held = run(super::super::CollectiveWaits::default());
        let spilled = run(super::super::CollectiveWaits::with_run(3));
        assert_eq!(held, spilled);
        let (waits, ends, _) = held;
        assert!(waits.len() > 100, "the instances make waits: {}", waits.len());
        assert!(ends.iter().all(|(_, _, e)| e.len() == 7), "every part's end, the loose one's included");
        // Sorted beyond memory, they come in the order of Wait::order.
        let mut collectives = super::super::CollectiveWaits::with_run(4);
        collectives.fold(&batch).unwrap();
        let (mut stream, _) = collectives.sorted().unwrap();
        let mut got = Vec::new();
        while let Some(w) = stream.next().unwrap() {
            got.push(w);
        }
        let mut want = waits.clone();
        want.sort_by_key(Wait::order);
        assert_eq!(got.iter().map(Wait::order).collect::<Vec<_>>(), want.iter().map(Wait::order).collect::<Vec<_>>());
    }

    #[test]
    fn messages_give_the_same_waits_whether_or_not_they_spill() {
        use arrow::array::{ArrayRef, Int64Array};
        use std::sync::Arc;
        // Rank r receives from r + 1 in calls of three receives each; some sends are late,
        // some receives are posted late for a sender that waits in its own call.
        let n = 600i64;
        let value = |c: usize, i: i64| -> Option<i64> {
            let call = i / 3;
            let start = 1000 * call;
            match c {
                0 => Some(i),
                1 => Some((i * 5) % 7),
                2 => Some((i * 5) % 7 + 1),
                3 => Some(start + (i * 37) % 50 - 10),
                4 => Some(start + 60),
                5 => Some(start),
                6 => Some(start + 100),
                7 => Some(start + (i * 13) % 30),
                8 => Some(start - 5 + (i % 2) * 10),
                9 => (i % 11 != 0).then_some(start + 40),
                _ => None,
            }
        };
        let columns: Vec<ArrayRef> = (0..super::super::MESSAGE_COLUMNS.len())
            .map(|c| Arc::new(Int64Array::from((0..n).map(|i| value(c, i)).collect::<Vec<_>>())) as ArrayRef)
            .collect();
        let fields: Vec<_> = super::super::MESSAGE_COLUMNS
            .iter()
            .map(|name| arrow::datatypes::Field::new(*name, arrow::datatypes::DataType::Int64, true))
            .collect();
        let batch =
            arrow::array::RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap();
        let waits = |mut m: super::super::MessageWaits| {
            m.fold(&batch).unwrap();
            m.finish().unwrap()
        };
        let held = waits(super::super::MessageWaits::default());
        assert_eq!(held, waits(super::super::MessageWaits::with_run(7)));
        let patterns = |p: &str| held.iter().filter(|w| w.pattern == p).count();
        assert!(patterns("late_sender") > 10 && patterns("late_receiver") > 10, "both kinds: {held:?}");
        assert!(held.windows(2).all(|w| w[0].order() <= w[1].order()), "in order");
    }
}
