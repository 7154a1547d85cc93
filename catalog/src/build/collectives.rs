//! Collective operations per rank. A coll_begin / coll_end pair of a stream is one rank's part
//! in one operation; the k-th operation a rank takes part in on a communicator is instance k
//! of that communicator (MPI requires every member to call collectives on a communicator in
//! the same order). Instances whose members disagree on the operation, or that fewer members
//! than the communicator's size took part in, are reported. The parts are collected during the
//! stream walk of `build::walk`, then placed in (comm, instance, rank) order by counting.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};

use crate::error::Result;
use crate::events::{COLLECTIVE_OPS, NONE_I32, NONE_I64, RawEvents, owned_nullable, owned_op_dictionary};
use crate::fast_hash::FastMap;
use crate::model;
use crate::trace::{CommInfo, Warnings};

/// One rank's part in one collective operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub instance: i64,
    pub comm: i32,
    pub op: u8,
    pub root: i32,
    pub rank: i32,
    pub thread: i32,
    pub begin: i64,
    pub end: i64,
    pub bytes_sent: i64,
    pub bytes_recv: i64,
}

/// The `collectives` table, ordered by communicator, instance and rank.
#[derive(Debug, Default)]
pub struct Collectives {
    pub parts: Vec<Part>,
}

impl Collectives {
    /// The `collectives` table, its columns filled in one pass over the parts.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let n = self.parts.len();
        let (mut instance, mut comm, mut op, mut root) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut rank, mut thread, mut begin, mut end) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut duration, mut sent, mut received) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for x in &self.parts {
            instance.push(x.instance);
            comm.push(x.comm);
            op.push(x.op.max(1));
            root.push(x.root);
            rank.push(x.rank);
            thread.push(x.thread);
            begin.push(x.begin);
            end.push(x.end);
            duration.push(if x.begin == NONE_I64 { NONE_I64 } else { x.end - x.begin });
            sent.push(x.bytes_sent.max(0));
            received.push(x.bytes_recv.max(0));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(instance)),
            Arc::new(Int32Array::from(comm)),
            owned_op_dictionary(op),
            Arc::new(owned_nullable::<Int32Type>(root, NONE_I32)),
            Arc::new(Int32Array::from(rank)),
            Arc::new(Int32Array::from(thread)),
            Arc::new(owned_nullable::<Int64Type>(begin, NONE_I64)),
            Arc::new(Int64Array::from(end)),
            Arc::new(owned_nullable::<Int64Type>(duration, NONE_I64)),
            Arc::new(Int64Array::from(sent)),
            Arc::new(Int64Array::from(received)),
        ];
        Ok(RecordBatch::try_new(model::COLLECTIVES.schema(), columns)?)
    }
}

/// Order the parts found by the stream walks (in stream order) by communicator, instance, rank
/// and thread, and check them against the communicators.
///
/// No sort is needed: streams come in (rank, thread) order and number their parts by instance,
/// so the group of (comm, instance) holds one part from each stream with more than `instance`
/// parts on that communicator. Group sizes follow from each stream's count per communicator;
/// the streams then place their parts in turn.
pub fn assemble(per_stream: Vec<Vec<Part>>, comms: &[CommInfo], warnings: &mut Warnings) -> Collectives {
    let total: usize = per_stream.iter().map(Vec::len).sum();
    let Some(&first) = per_stream.iter().flatten().next() else {
        return Collectives::default();
    };
    // Instances per communicator: `counts[c][n]` streams have n parts on communicator c.
    let mut comm_ids: Vec<i32> = Vec::new();
    let mut counts: Vec<Vec<usize>> = Vec::new();
    let mut by_comm: FastMap<i32, usize> = FastMap::default();
    for parts in &per_stream {
        let mut seen: Vec<(usize, usize)> = Vec::new();
        for p in parts {
            let c = *by_comm.entry(p.comm).or_insert_with(|| {
                comm_ids.push(p.comm);
                counts.push(Vec::new());
                comm_ids.len() - 1
            });
            match seen.iter_mut().find(|s| s.0 == c) {
                Some(s) => s.1 += 1,
                None => seen.push((c, 1)),
            }
        }
        for (c, n) in seen {
            if counts[c].len() <= n {
                counts[c].resize(n + 1, 0);
            }
            counts[c][n] += 1;
        }
    }
    // Start of each (comm, instance) group, communicators in ascending order.
    let mut order: Vec<usize> = (0..comm_ids.len()).collect();
    order.sort_by_key(|&c| comm_ids[c]);
    let mut group_start: Vec<Vec<usize>> = vec![Vec::new(); comm_ids.len()];
    let mut next = 0;
    for &c in &order {
        // Streams with more than k parts: the counts above k.
        let mut more = counts[c].iter().sum::<usize>() - counts[c][0];
        for k in 0..counts[c].len().saturating_sub(1) {
            group_start[c].push(next);
            next += more;
            more -= counts[c][k + 1];
        }
    }
    let mut placed = vec![first; total];
    for parts in &per_stream {
        for p in parts {
            let slot = &mut group_start[by_comm[&p.comm]][p.instance as usize];
            placed[*slot] = *p;
            *slot += 1;
        }
    }
    check_instances(&placed, comms, warnings);
    Collectives { parts: placed }
}

/// The collective parts of one stream while its events are walked in order.
#[derive(Debug)]
pub struct PartCollector {
    parts: Vec<Part>,
    /// Next instance number per communicator.
    next_instance: Vec<(i32, i64)>,
    /// Begin time of the open collective, NONE_I64 when none is open.
    begin: i64,
    rank: i32,
    thread: i32,
}

impl PartCollector {
    pub fn new(rank: i32, thread: i32, ends: usize) -> Self {
        PartCollector { parts: Vec::with_capacity(ends), next_instance: Vec::new(), begin: NONE_I64, rank, thread }
    }

    pub fn begin(&mut self, ts: i64, w: &mut Warnings) {
        if self.begin != NONE_I64 {
            self.report_unended(w);
        }
        self.begin = ts;
    }

    /// The collective_end event `i` of `events` closes this rank's part in the next instance of
    /// its communicator.
    pub fn end(&mut self, events: &RawEvents, i: usize, w: &mut Warnings) {
        let ts = events.ts[i];
        if self.begin == NONE_I64 {
            w.add("coll_end_without_begin", || {
                format!(
                    "rank {} thread {}: a collective ended at ts {ts} without a begin; begin_ts is NULL",
                    self.rank, self.thread
                )
            });
        }
        let comm = events.comm[i];
        let k = match self.next_instance.iter().position(|&(c, _)| c == comm) {
            Some(k) => k,
            None => {
                self.next_instance.push((comm, 0));
                self.next_instance.len() - 1
            }
        };
        let instance = self.next_instance[k].1;
        self.next_instance[k].1 += 1;
        self.parts.push(Part {
            instance,
            comm,
            op: events.op[i],
            root: events.peer[i],
            rank: self.rank,
            thread: self.thread,
            begin: self.begin,
            end: ts,
            bytes_sent: events.bytes[i],
            bytes_recv: events.bytes_recv[i],
        });
        self.begin = NONE_I64;
    }

    pub fn finish(self, w: &mut Warnings) -> Vec<Part> {
        if self.begin != NONE_I64 {
            self.report_unended(w);
        }
        self.parts
    }

    fn report_unended(&self, w: &mut Warnings) {
        let (rank, thread, begin) = (self.rank, self.thread, self.begin);
        w.add("coll_begin_without_end", || {
            format!("rank {rank} thread {thread}: a collective begun at ts {begin} never ended")
        });
    }
}

fn check_instances(parts: &[Part], comms: &[CommInfo], warnings: &mut Warnings) {
    let sizes: BTreeMap<i32, usize> = comms.iter().map(|c| (c.comm, c.members.len())).collect();
    for group in parts.chunk_by(|a, b| (a.comm, a.instance) == (b.comm, b.instance)) {
        let first = group[0];
        if group.iter().any(|p| p.op != first.op) {
            warnings.add("collective_op_mismatch", || {
                format!(
                    "comm {} instance {}: members report different operations (first: {})",
                    first.comm,
                    first.instance,
                    op_name(first.op)
                )
            });
        }
        if let Some(&size) = sizes.get(&first.comm)
            && group.len() != size
        {
            warnings.add("collective_incomplete", || {
                format!(
                    "comm {} instance {}: {} of {} members took part",
                    first.comm,
                    first.instance,
                    group.len(),
                    size
                )
            });
        }
    }
}

fn op_name(code: u8) -> &'static str {
    COLLECTIVE_OPS.get(usize::from(code.max(1)) - 1).copied().unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::walk::walk;
    use crate::events::{Event, EventKind, EventParts, NONE_I32, collective_op_code};

    #[test]
    fn placement_equals_a_sort_when_ranks_take_part_unevenly() {
        // 6 streams (3 ranks x 2 threads); stream s takes part in (s * 7) % 5 + s operations,
        // cycling over communicators 3, -1 and 0 in a stream-dependent order.
        let mut per_stream = Vec::new();
        for s in 0..6i32 {
            let mut next = [0i64; 3];
            let comms = [3, -1, 0];
            let parts: Vec<Part> = (0..(s * 7) % 5 + s)
                .map(|k| {
                    let c = ((k + s) % 3) as usize;
                    next[c] += 1;
                    Part {
                        instance: next[c] - 1,
                        comm: comms[c],
                        op: 1,
                        root: NONE_I32,
                        rank: s / 2,
                        thread: s % 2,
                        begin: i64::from(k),
                        end: i64::from(k) + 1,
                        bytes_sent: 0,
                        bytes_recv: 0,
                    }
                })
                .collect();
            per_stream.push(parts);
        }
        let mut want: Vec<Part> = per_stream.iter().flatten().copied().collect();
        want.sort_by_key(|p| (p.comm, p.instance, p.rank, p.thread));
        let mut w = Warnings::default();
        let got = assemble(per_stream, &[], &mut w).parts;
        assert_eq!(got, want);
        assert!(assemble(Vec::new(), &[], &mut w).parts.is_empty());
    }

    #[test]
    fn instances_follow_per_communicator_order() {
        let mut e = RawEvents::default();
        for rank in 0..2 {
            for (k, op) in ["MPI_Barrier", "MPI_Allreduce"].iter().enumerate() {
                let t = 100 * k as i64 + rank as i64;
                e.push(Event::new(rank, 0, t, EventKind::CollBegin));
                e.push(Event {
                    comm: 0,
                    op: collective_op_code(op),
                    bytes: 8,
                    bytes_recv: 8,
                    ..Event::new(rank, 0, t + 10, EventKind::CollEnd)
                });
            }
        }
        let comms = [CommInfo { comm: 0, name: "MPI_COMM_WORLD".into(), members: vec![0, 1] }];
        let mut w = Warnings::default();
        let e = EventParts::single(e);
        let c = assemble(walk(&e, &e.streams(), &mut w).collective_parts, &comms, &mut w);
        assert!(w.is_empty(), "{w:?}");
        let got: Vec<_> = c.parts.iter().map(|p| (p.instance, p.rank, op_name(p.op))).collect();
        assert_eq!(got, vec![(0, 0, "barrier"), (0, 1, "barrier"), (1, 0, "allreduce"), (1, 1, "allreduce")]);
    }
}
