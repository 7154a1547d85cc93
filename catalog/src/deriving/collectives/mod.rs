//! Collective operations per rank. A coll_begin / coll_end pair of a stream is one rank's part
//! in one operation; the k-th operation a rank takes part in on a communicator is instance k
//! of that communicator (MPI requires every member to call collectives on a communicator in
//! the same order). Instances whose members disagree on the operation, or that fewer members
//! than the communicator's size took part in, are reported. On a communicator of each rank
//! alone (MPI_COMM_SELF) every part is an operation of its own. The parts are collected during the
//! stream walk of `deriving::walk`, then placed in (comm, instance, rank) order by a transpose.

pub mod spilled;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};

use crate::error::Result;
use crate::events::{COLLECTIVE_OPS, EventColumns, NONE_I32, NONE_I64, owned_nullable, owned_op_dictionary};
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
    /// Start of the MPI call the rank began the operation in (NONE_I64: outside any call).
    pub call_start: i64,
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
        let (mut duration, mut sent, mut received, mut call_start) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
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
            call_start.push(x.call_start);
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
            Arc::new(owned_nullable::<Int64Type>(call_start, NONE_I64)),
        ];
        Ok(RecordBatch::try_new(model::COLLECTIVES.schema(), columns)?)
    }
}

/// Order the parts found by the stream walks (in stream order) by communicator, instance, rank
/// and thread, and check them against the communicators.
///
/// No sort is needed: streams come in (rank, thread) order and number their parts by instance,
/// so the group of (comm, instance) holds the instance-th part on that communicator of every
/// stream that has that many, in stream order. Placing the parts is a transpose (streams by
/// instances to instances by streams), done a block of instances at a time so that both the
/// reads and the writes run in order.
pub fn assemble(per_stream: Vec<Vec<Part>>, comms: &[CommInfo], warnings: &mut Warnings) -> Collectives {
    let total: usize = per_stream.iter().map(Vec::len).sum();
    let Some(&first) = per_stream.iter().flatten().next() else {
        return Collectives::default();
    };
    let sizes: FastMap<i32, usize> = comms.iter().map(|c| (c.comm, c.members.len())).collect();
    let mut placed = vec![first; total];
    let mut next = 0;
    for (comm, members) in members_by_comm(&per_stream) {
        if comms.iter().any(|c| c.comm == comm && c.per_rank) {
            // Each rank alone (MPI_COMM_SELF): every part is an operation of its own, numbered
            // across the ranks so that (comm, instance) names one operation.
            let mut instance = 0;
            for m in &members {
                for k in 0..m.parts {
                    placed[next] = Part { instance, ..per_stream[m.stream][m.position(k)] };
                    instance += 1;
                    next += 1;
                }
            }
            continue;
        }
        // Start of each instance's group: its size is the number of members with more parts.
        let instances = members.iter().map(|m| m.parts).max().unwrap_or(0);
        let mut with_exactly = vec![0usize; instances + 1];
        for m in &members {
            with_exactly[m.parts] += 1;
        }
        let mut starts = Vec::with_capacity(instances + 1);
        let mut with_more = members.len();
        for ending in &with_exactly[..instances] {
            starts.push(next);
            with_more -= ending;
            next += with_more;
        }
        starts.push(next);
        // A block of instances at a time: each member's parts are read in order and each
        // group of the block is written in order.
        for block in (0..instances).step_by(TRANSPOSE_BLOCK) {
            let block_end = (block + TRANSPOSE_BLOCK).min(instances);
            let mut slot: Vec<usize> = starts[block..block_end].to_vec();
            for m in &members {
                let parts = &per_stream[m.stream];
                for k in block..block_end.min(m.parts) {
                    placed[slot[k - block]] = parts[m.position(k)];
                    slot[k - block] += 1;
                }
            }
        }
        let size = sizes.get(&comm).copied();
        for k in 0..instances {
            check_group(&mut placed[starts[k]..starts[k + 1]], size, warnings);
        }
    }
    Collectives { parts: placed }
}

/// Instances placed at a time by `assemble`.
const TRANSPOSE_BLOCK: usize = 32;

/// A stream taking part in the collectives of one communicator.
struct Member {
    stream: usize,
    /// How many parts the stream has on the communicator.
    parts: usize,
    /// Where they are among the stream's parts; None when the stream has parts on this
    /// communicator only, in which case instance k is its k-th part.
    positions: Option<Vec<u32>>,
}

impl Member {
    fn position(&self, instance: usize) -> usize {
        self.positions.as_ref().map_or(instance, |p| p[instance] as usize)
    }
}

/// The members of each communicator, communicators in ascending order, streams in order.
fn members_by_comm(per_stream: &[Vec<Part>]) -> BTreeMap<i32, Vec<Member>> {
    let mut members: BTreeMap<i32, Vec<Member>> = BTreeMap::new();
    for (stream, parts) in per_stream.iter().enumerate() {
        let Some(first) = parts.first() else { continue };
        if parts.iter().all(|p| p.comm == first.comm) {
            members.entry(first.comm).or_default().push(Member { stream, parts: parts.len(), positions: None });
            continue;
        }
        let mut positions: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
        for (k, p) in parts.iter().enumerate() {
            positions.entry(p.comm).or_default().push(k as u32);
        }
        for (comm, positions) in positions {
            members.entry(comm).or_default().push(Member {
                stream,
                parts: positions.len(),
                positions: Some(positions),
            });
        }
    }
    members
}

/// The collective parts of one stream while its events are walked in order.
#[derive(Debug)]
pub struct PartCollector {
    parts: Vec<Part>,
    /// Next instance number per communicator.
    next_instance: Vec<(i32, i64)>,
    /// The open collectives, innermost last: their begin time and the start of the call each
    /// began in (NONE_I64: not known). Collectives nest where an MPI library's collective calls
    /// others through the traced entry points (MPItrace's MPI_Allreduce of an MPI_Reduce and an
    /// MPI_Bcast).
    open: Vec<(i64, i64)>,
    rank: i32,
    thread: i32,
}

impl PartCollector {
    pub fn new(rank: i32, thread: i32, ends: usize) -> Self {
        PartCollector { parts: Vec::with_capacity(ends), next_instance: Vec::new(), open: Vec::new(), rank, thread }
    }

    /// A collective begins at `ts`, inside the call that started at `call_start` (if any).
    pub fn begin(&mut self, ts: i64, call_start: Option<i64>, _w: &mut Warnings) {
        self.open.push((ts, call_start.unwrap_or(NONE_I64)));
    }

    /// The collective_end event `i` of `events` closes this rank's part in the next instance of
    /// its communicator.
    pub fn end(&mut self, events: &EventColumns<'_>, i: usize, w: &mut Warnings) {
        let ts = events.ts[i];
        let (begin, call_start) = self.open.pop().unwrap_or((NONE_I64, NONE_I64));
        if begin == NONE_I64 {
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
            begin,
            end: ts,
            bytes_sent: events.bytes[i],
            bytes_recv: events.bytes_recv[i],
            call_start: if begin == NONE_I64 { NONE_I64 } else { call_start },
        });
    }

    pub fn finish(self, w: &mut Warnings) -> Vec<Part> {
        let (rank, thread) = (self.rank, self.thread);
        for &(begin, _) in &self.open {
            w.add("coll_begin_without_end", || {
                format!("rank {rank} thread {thread}: a collective begun at ts {begin} never ended")
            });
        }
        self.parts
    }
}

/// Report a (comm, instance) group whose members disagree on the operation or the root, or that
/// has another number of members than its communicator (`size`, when known); members that do
/// not say the root (Extrae marks only the root's own part) take the one the others say.
pub(crate) fn check_group(group: &mut [Part], size: Option<usize>, warnings: &mut Warnings) {
    let mut said = group.iter().map(|p| p.root).filter(|r| *r != NONE_I32);
    if let Some(root) = said.next() {
        if said.any(|r| r != root) {
            let first = group[0];
            warnings.add("collective_root_mismatch", || {
                format!(
                    "comm {} instance {}: members name different roots (first: rank {root})",
                    first.comm, first.instance
                )
            });
        } else {
            for p in group.iter_mut() {
                p.root = root;
            }
        }
    }
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
    if let Some(size) = size
        && group.len() != size
    {
        warnings.add("collective_incomplete", || {
            format!("comm {} instance {}: {} of {} members took part", first.comm, first.instance, group.len(), size)
        });
    }
}

fn op_name(code: u8) -> &'static str {
    COLLECTIVE_OPS.get(usize::from(code.max(1)) - 1).copied().unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deriving::walk::walk;
    use crate::events::{Event, EventKind, EventParts, NONE_I32, RawEvents, collective_op_code};

    #[test]
    fn placement_equals_a_sort_when_ranks_take_part_unevenly() {
        // 8 streams (4 ranks x 2 threads). Streams 0 to 5 take part in (s * 37) % 50 + 40 * s
        // operations, more than one transpose block for most, cycling over communicators 3, -1
        // and 0 in a stream-dependent order; streams 6 and 7 use communicator -1 only.
        let mut per_stream = Vec::new();
        for s in 0..8i32 {
            let mut next = [0i64; 3];
            let comms = [3, -1, 0];
            let n = if s < 6 { (s * 37) % 50 + 40 * s } else { 45 + s };
            let parts: Vec<Part> = (0..n)
                .map(|k| {
                    let c = if s < 6 { ((k + s) % 3) as usize } else { 1 };
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
                        call_start: i64::from(k),
                    }
                })
                .collect();
            per_stream.push(parts);
        }
        let most_on_one =
            |p: &Vec<Part>| [3, -1, 0].map(|c| p.iter().filter(|x| x.comm == c).count()).into_iter().max();
        assert!(per_stream.iter().filter_map(most_on_one).any(|n| n > 2 * TRANSPOSE_BLOCK));
        let mut want: Vec<Part> = per_stream.iter().flatten().copied().collect();
        want.sort_by_key(|p| (p.comm, p.instance, p.rank, p.thread));
        // Communicator -1 has all 8 streams as members: its instances beyond the shortest
        // stream's count are incomplete.
        let on_world = |p: &Vec<Part>| p.iter().filter(|x| x.comm == -1).count();
        let (fewest, most) =
            (per_stream.iter().map(on_world).min().unwrap(), per_stream.iter().map(on_world).max().unwrap());
        let world = [CommInfo { comm: -1, name: "world".into(), members: (0..8).collect(), per_rank: false }];
        let mut w = Warnings::default();
        let got = assemble(per_stream, &world, &mut w).parts;
        assert_eq!(got, want);
        assert_eq!(w.count("collective_incomplete"), (most - fewest) as i64);
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
        let comms = [CommInfo { comm: 0, name: "MPI_COMM_WORLD".into(), members: vec![0, 1], per_rank: false }];
        let mut w = Warnings::default();
        let e = EventParts::single(e);
        let c = assemble(walk(&e.columns(), &e.streams(), &mut w).unwrap().collective_parts, &comms, &mut w);
        assert!(w.is_empty(), "{w:?}");
        let got: Vec<_> = c.parts.iter().map(|p| (p.instance, p.rank, op_name(p.op))).collect();
        assert_eq!(got, vec![(0, 0, "barrier"), (0, 1, "barrier"), (1, 0, "allreduce"), (1, 1, "allreduce")]);
    }
}
