//! Collective operations per rank. A coll_begin / coll_end pair of a stream is one rank's part
//! in one operation; the k-th operation a rank takes part in on a communicator is instance k
//! of that communicator (MPI requires every member to call collectives on a communicator in
//! the same order). Instances whose members disagree on the operation, or that fewer members
//! than the communicator's size took part in, are reported. O(events), streams in parallel.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use rayon::prelude::*;

use crate::error::Result;
use crate::events::{
    COLLECTIVE_OPS, EventKind, EventParts, NONE_I64, PartStream, RawEvents, nullable_i32, nullable_i64, op_dictionary,
};
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
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let p = &self.parts;
        let begin: Vec<i64> = p.iter().map(|x| x.begin).collect();
        let duration: Vec<i64> =
            p.iter().map(|x| if x.begin == NONE_I64 { NONE_I64 } else { x.end - x.begin }).collect();
        let root: Vec<i32> = p.iter().map(|x| x.root).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(p.iter().map(|x| x.instance))),
            Arc::new(Int32Array::from_iter_values(p.iter().map(|x| x.comm))),
            op_dictionary(&p.iter().map(|x| x.op.max(1)).collect::<Vec<_>>()),
            nullable_i32(&root),
            Arc::new(Int32Array::from_iter_values(p.iter().map(|x| x.rank))),
            Arc::new(Int32Array::from_iter_values(p.iter().map(|x| x.thread))),
            nullable_i64(&begin),
            Arc::new(Int64Array::from_iter_values(p.iter().map(|x| x.end))),
            nullable_i64(&duration),
            Arc::new(Int64Array::from_iter_values(p.iter().map(|x| x.bytes_sent.max(0)))),
            Arc::new(Int64Array::from_iter_values(p.iter().map(|x| x.bytes_recv.max(0)))),
        ];
        Ok(RecordBatch::try_new(model::COLLECTIVES.schema(), columns)?)
    }
}

/// Derive the collective parts of all streams and check them against the communicators.
pub fn derive(events: &EventParts, streams: &[PartStream], comms: &[CommInfo], warnings: &mut Warnings) -> Collectives {
    let per_stream: Vec<(Vec<Part>, Warnings)> =
        streams.par_iter().map(|ps| derive_stream(&events.parts[ps.part], &ps.stream)).collect();
    let mut parts = Vec::new();
    for (mut p, w) in per_stream {
        parts.append(&mut p);
        warnings.merge(w);
    }
    parts.par_sort_unstable_by_key(|p| (p.comm, p.instance, p.rank, p.thread));
    check_instances(&parts, comms, warnings);
    Collectives { parts }
}

fn derive_stream(events: &RawEvents, s: &crate::events::Stream) -> (Vec<Part>, Warnings) {
    let mut parts = Vec::new();
    let mut w = Warnings::default();
    let mut next_instance: HashMap<i32, i64> = HashMap::new();
    let mut begin = NONE_I64;
    for i in s.start..s.end {
        match events.kind(i) {
            EventKind::CollBegin => {
                if begin != NONE_I64 {
                    w.add("coll_begin_without_end", || {
                        format!("rank {} thread {}: a collective begun at ts {begin} never ended", s.rank, s.thread)
                    });
                }
                begin = events.ts[i];
            }
            EventKind::CollEnd => {
                let ts = events.ts[i];
                if begin == NONE_I64 {
                    w.add("coll_end_without_begin", || {
                        format!(
                            "rank {} thread {}: a collective ended at ts {ts} without a begin; begin_ts is NULL",
                            s.rank, s.thread
                        )
                    });
                }
                let comm = events.comm[i];
                let counter = next_instance.entry(comm).or_insert(0);
                parts.push(Part {
                    instance: *counter,
                    comm,
                    op: events.op[i],
                    root: events.peer[i],
                    rank: s.rank,
                    thread: s.thread,
                    begin,
                    end: ts,
                    bytes_sent: events.bytes[i],
                    bytes_recv: events.bytes_recv[i],
                });
                *counter += 1;
                begin = NONE_I64;
            }
            _ => {}
        }
    }
    if begin != NONE_I64 {
        w.add("coll_begin_without_end", || {
            format!("rank {} thread {}: a collective begun at ts {begin} never ended", s.rank, s.thread)
        });
    }
    (parts, w)
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
    use crate::events::{Event, collective_op_code};

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
        let c = derive(&e, &e.streams(), &comms, &mut w);
        assert!(w.is_empty(), "{w:?}");
        let got: Vec<_> = c.parts.iter().map(|p| (p.instance, p.rank, op_name(p.op))).collect();
        assert_eq!(got, vec![(0, 0, "barrier"), (0, 1, "barrier"), (1, 0, "allreduce"), (1, 1, "allreduce")]);
    }
}
