//! Calls from enter/leave nesting. Each (rank, thread) stream is walked once with a stack of
//! open calls: an enter opens a call one level deeper than the current one, a leave closes the
//! innermost call; exclusive time is the duration minus the durations of direct children.
//! Unbalanced streams are repaired and reported: a leave with no open call is ignored, a leave
//! naming another region than the innermost call still closes it, a call still open at the end
//! of its stream is closed at the stream's last event time. O(events), streams in parallel.
//!
//! The stack is driven by the stream walk of `deriving::walk`, which also feeds message matching
//! (the innermost open call of a send or receive gives its call times) and collectives.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use rayon::prelude::*;

use crate::error::Result;
use crate::events::{NONE_I32, NONE_I64, owned_nullable, owned_region_dictionary};
use crate::model;
use crate::trace::Warnings;
use arrow::datatypes::Int64Type;

/// The calls of one (rank, thread) stream.
#[derive(Debug, Default)]
pub struct Calls {
    pub rank: Vec<i32>,
    pub thread: Vec<i32>,
    pub region: Vec<i32>,
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub duration: Vec<i64>,
    pub exclusive: Vec<i64>,
    pub depth: Vec<i32>,
    /// call_id of the parent call, or NONE_I64.
    pub parent: Vec<i64>,
    /// call_id of the stream's first call.
    pub first_id: i64,
}

impl Calls {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    fn with_capacity(calls: usize, first_id: i64) -> Self {
        Calls {
            rank: Vec::new(),
            thread: Vec::new(),
            region: Vec::with_capacity(calls),
            start: Vec::with_capacity(calls),
            end: Vec::with_capacity(calls),
            duration: Vec::with_capacity(calls),
            exclusive: Vec::with_capacity(calls),
            depth: Vec::with_capacity(calls),
            parent: Vec::with_capacity(calls),
            first_id,
        }
    }

    /// The stream's rows of the `calls` table.
    fn into_batch(self, region_names: &[String]) -> Result<RecordBatch> {
        let (n, first_id) = (self.len(), self.first_id);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(first_id..first_id + n as i64)),
            Arc::new(Int32Array::from(self.rank)),
            Arc::new(Int32Array::from(self.thread)),
            owned_region_dictionary(self.region, region_names)?,
            Arc::new(Int64Array::from(self.start)),
            Arc::new(Int64Array::from(self.end)),
            Arc::new(Int64Array::from(self.duration)),
            Arc::new(Int64Array::from(self.exclusive)),
            Arc::new(Int32Array::from(self.depth)),
            Arc::new(owned_nullable::<Int64Type>(self.parent, NONE_I64)),
        ];
        Ok(RecordBatch::try_new(model::CALLS.schema(), columns)?)
    }
}

/// The calls of every stream, in the order of `EventParts::streams`.
#[derive(Debug, Default)]
pub struct CallParts {
    pub parts: Vec<Calls>,
}

impl CallParts {
    pub fn len(&self) -> usize {
        self.parts.iter().map(Calls::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `calls` table: one batch per stream, built in parallel without copying.
    pub fn into_batches(self, region_names: &[String]) -> Result<Vec<RecordBatch>> {
        self.parts.into_par_iter().filter(|c| !c.is_empty()).map(|c| c.into_batch(region_names)).collect()
    }
}

/// The open calls of one stream while its events are walked in order, and the calls found so
/// far (sized for the stream's enters up front: growing the columns would copy them). Every
/// column is final when the stream ends, call ids included: the counting pass of the walk
/// gives each stream the id of its first call.
#[derive(Debug)]
pub struct CallStack {
    calls: Calls,
    /// (call index, summed duration of direct children) of every open call, innermost last.
    open: Vec<(usize, i64)>,
    rank: i32,
    thread: i32,
}

impl CallStack {
    /// The stack of a stream with `enters` calls, the first of which has call_id `first_id`.
    pub fn new(rank: i32, thread: i32, enters: usize, first_id: i64) -> Self {
        CallStack { calls: Calls::with_capacity(enters, first_id), open: Vec::new(), rank, thread }
    }

    /// An enter opens a call one level deeper than the innermost one.
    #[inline]
    pub fn enter(&mut self, ts: i64, region: i32) {
        let c = &mut self.calls;
        let idx = c.len();
        c.region.push(region);
        c.start.push(ts);
        c.end.push(ts);
        c.duration.push(0);
        c.exclusive.push(0);
        c.depth.push(self.open.len() as i32);
        c.parent.push(self.open.last().map_or(NONE_I64, |p| c.first_id + p.0 as i64));
        self.open.push((idx, 0));
    }

    /// A leave closes the innermost call, whatever region it names (reported when it differs).
    #[inline]
    pub fn leave(&mut self, ts: i64, region: i32, w: &mut Warnings) {
        let Some((idx, children)) = self.open.pop() else {
            w.add("leave_without_enter", || {
                format!("rank {} thread {}: a leave at ts {ts} has no open call; ignored", self.rank, self.thread)
            });
            return;
        };
        if region != NONE_I32 && region != self.calls.region[idx] {
            w.add("leave_region_mismatch", || {
                format!(
                    "rank {} thread {}: the leave at ts {ts} names another region than the innermost open call; it closes that call",
                    self.rank, self.thread
                )
            });
        }
        self.close(idx, children, ts);
    }

    /// Index and start time of the innermost open call.
    #[inline]
    pub fn innermost(&self) -> Option<(usize, i64)> {
        self.open.last().map(|&(idx, _)| (idx, self.calls.start[idx]))
    }

    /// The stream's calls; calls still open are closed at `last_ts`, the stream's last event.
    pub fn finish(mut self, last_ts: i64, w: &mut Warnings) -> Calls {
        if !self.open.is_empty() {
            w.add_many("call_never_left", self.open.len() as i64, || {
                format!(
                    "rank {} thread {}: calls still open at the end of the stream are closed at its last event (ts {last_ts})",
                    self.rank, self.thread
                )
            });
            while let Some((idx, children)) = self.open.pop() {
                self.close(idx, children, last_ts);
            }
        }
        // Filled once here rather than pushed with every call by `enter`.
        let n = self.calls.len();
        self.calls.rank = vec![self.rank; n];
        self.calls.thread = vec![self.thread; n];
        self.calls
    }

    fn close(&mut self, idx: usize, children: i64, end: i64) {
        let c = &mut self.calls;
        let end = end.max(c.start[idx]);
        c.end[idx] = end;
        // Saturating: times damaged far apart (reported by the readers) must not overflow.
        let duration = end.saturating_sub(c.start[idx]);
        c.duration[idx] = duration;
        c.exclusive[idx] = duration.saturating_sub(children);
        if let Some(parent) = self.open.last_mut() {
            parent.1 = parent.1.saturating_add(duration);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deriving::walk::walk;
    use crate::events::{Event, EventKind, EventParts, RawEvents};

    fn ev(ts: i64, kind: EventKind, region: i32) -> Event {
        Event { region, ..Event::new(0, 0, ts, kind) }
    }

    #[test]
    fn nesting_depth_parent_and_exclusive_time() {
        let mut e = RawEvents::default();
        e.push(ev(0, EventKind::Enter, 0));
        e.push(ev(10, EventKind::Enter, 1));
        e.push(Event { peer: 1, ..ev(12, EventKind::Send, NONE_I32) });
        e.push(ev(20, EventKind::Leave, 1));
        e.push(ev(25, EventKind::Enter, 1));
        e.push(ev(30, EventKind::Leave, 1));
        e.push(ev(100, EventKind::Leave, 0));
        let mut w = Warnings::default();
        let e = EventParts::single(e);
        let walked = walk(&e.columns(), &e.streams(), &mut w).unwrap();
        let c = &walked.calls.parts[0];
        assert!(w.is_empty());
        assert_eq!(c.start, vec![0, 10, 25]);
        assert_eq!(c.end, vec![100, 20, 30]);
        assert_eq!(c.exclusive, vec![85, 10, 5]);
        assert_eq!(c.depth, vec![0, 1, 1]);
        assert_eq!(c.parent, vec![NONE_I64, 0, 0]);
        let send = walked.halves.sends[0];
        assert_eq!((send.call_start, send.call_end), (10, 20), "the send at ts 12 is inside call 1");
    }

    #[test]
    fn unbalanced_streams_are_repaired_and_reported() {
        let mut e = RawEvents::default();
        e.push(ev(0, EventKind::Leave, 0));
        e.push(ev(5, EventKind::Enter, 0));
        e.push(ev(9, EventKind::Enter, 1));
        let mut w = Warnings::default();
        let e = EventParts::single(e);
        let all = walk(&e.columns(), &e.streams(), &mut w).unwrap().calls;
        let c = &all.parts[0];
        assert_eq!(w.count("leave_without_enter"), 1);
        assert_eq!(w.count("call_never_left"), 2);
        assert_eq!(c.end, vec![9, 9]);
    }
}
