//! Calls from enter/leave nesting. Each (rank, thread) stream is walked once with a stack of
//! open calls: an enter opens a call one level deeper than the current one, a leave closes the
//! innermost call; exclusive time is the duration minus the durations of direct children.
//! Unbalanced streams are repaired and reported: a leave with no open call is ignored, a leave
//! naming another region than the innermost call still closes it, a call still open at the end
//! of its stream is closed at the stream's last event time. O(events), streams in parallel.
//!
//! Besides the calls, the walk records the innermost open call of every point-to-point event,
//! which message matching uses for the send and receive call times.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use rayon::prelude::*;

use crate::error::Result;
use crate::events::{
    EventKind, EventParts, NONE_I32, NONE_I64, PartStream, RawEvents, owned_nullable, owned_region_dictionary,
};
use crate::model;
use crate::trace::Warnings;
use arrow::datatypes::Int64Type;

/// The calls of one (rank, thread) stream, plus the innermost call of each of its
/// point-to-point events.
#[derive(Debug, Default)]
pub struct Calls {
    pub rank: Vec<i32>,
    pub thread: Vec<i32>,
    pub region: Vec<i32>,
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub exclusive: Vec<i64>,
    pub depth: Vec<i32>,
    /// Index of the parent call within the stream, or NONE_I64.
    pub parent: Vec<i64>,
    /// (event index within its part, call index within the stream) for every point-to-point
    /// event inside a call, in event order.
    pub enclosing: Vec<(usize, i64)>,
}

impl Calls {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    fn with_capacity(calls: usize, point_to_point: usize) -> Self {
        Calls {
            rank: Vec::with_capacity(calls),
            thread: Vec::with_capacity(calls),
            region: Vec::with_capacity(calls),
            start: Vec::with_capacity(calls),
            end: Vec::with_capacity(calls),
            exclusive: Vec::with_capacity(calls),
            depth: Vec::with_capacity(calls),
            parent: Vec::with_capacity(calls),
            enclosing: Vec::with_capacity(point_to_point),
        }
    }

    /// The stream's rows of the `calls` table; call ids start at `first_id`.
    fn into_batch(self, region_names: &[String], first_id: i64) -> Result<RecordBatch> {
        let n = self.len();
        let duration: Vec<i64> = self.start.iter().zip(&self.end).map(|(s, e)| e - s).collect();
        let parent: Vec<i64> = self.parent.into_iter().map(|p| if p == NONE_I64 { p } else { p + first_id }).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(first_id..first_id + n as i64)),
            Arc::new(Int32Array::from(self.rank)),
            Arc::new(Int32Array::from(self.thread)),
            owned_region_dictionary(self.region, region_names)?,
            Arc::new(Int64Array::from(self.start)),
            Arc::new(Int64Array::from(self.end)),
            Arc::new(Int64Array::from(duration)),
            Arc::new(Int64Array::from(self.exclusive)),
            Arc::new(Int32Array::from(self.depth)),
            Arc::new(owned_nullable::<Int64Type>(parent, NONE_I64)),
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
        let mut first = 0i64;
        let firsts: Vec<i64> = self
            .parts
            .iter()
            .map(|c| {
                let f = first;
                first += c.len() as i64;
                f
            })
            .collect();
        self.parts
            .into_par_iter()
            .zip(firsts)
            .filter(|(c, _)| !c.is_empty())
            .map(|(c, f)| c.into_batch(region_names, f))
            .collect()
    }
}

fn is_point_to_point(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Send
            | EventKind::Isend
            | EventKind::IsendComplete
            | EventKind::IrecvRequest
            | EventKind::Recv
            | EventKind::Irecv
    )
}

/// Derive the calls of all streams (`streams` is `events.streams()`).
pub fn derive(events: &EventParts, streams: &[PartStream], warnings: &mut Warnings) -> CallParts {
    let parts: Vec<(Calls, Warnings)> =
        streams.par_iter().map(|ps| derive_stream(&events.parts[ps.part], ps)).collect();
    let mut out = CallParts { parts: Vec::with_capacity(parts.len()) };
    for (c, w) in parts {
        warnings.merge(w);
        out.parts.push(c);
    }
    out
}

fn derive_stream(events: &RawEvents, ps: &PartStream) -> (Calls, Warnings) {
    let s = &ps.stream;
    // Sized exactly first: growing the columns would copy them and fault in fresh pages.
    let (enters, p2p) = events.kind[s.start..s.end].iter().fold((0, 0), |(e, p), &k| {
        let k = EventKind::from_u8(k);
        (e + usize::from(k == EventKind::Enter), p + usize::from(is_point_to_point(k)))
    });
    let mut c = Calls::with_capacity(enters, p2p);
    let mut w = Warnings::default();
    // (call index, summed duration of direct children)
    let mut stack: Vec<(usize, i64)> = Vec::new();
    for i in s.start..s.end {
        let ts = events.ts[i];
        match events.kind(i) {
            EventKind::Enter => {
                let idx = c.len();
                c.rank.push(s.rank);
                c.thread.push(s.thread);
                c.region.push(events.region[i]);
                c.start.push(ts);
                c.end.push(ts);
                c.exclusive.push(0);
                c.depth.push(stack.len() as i32);
                c.parent.push(stack.last().map_or(NONE_I64, |p| p.0 as i64));
                stack.push((idx, 0));
            }
            EventKind::Leave => {
                let Some((idx, children)) = stack.pop() else {
                    w.add("leave_without_enter", || {
                        format!("rank {} thread {}: a leave at ts {ts} has no open call; ignored", s.rank, s.thread)
                    });
                    continue;
                };
                if events.region[i] != NONE_I32 && events.region[i] != c.region[idx] {
                    w.add("leave_region_mismatch", || {
                        format!(
                            "rank {} thread {}: the leave at ts {ts} names another region than the innermost open call; it closes that call",
                            s.rank, s.thread
                        )
                    });
                }
                close(&mut c, &mut stack, idx, children, ts);
            }
            kind if is_point_to_point(kind) => {
                if let Some(&(idx, _)) = stack.last() {
                    c.enclosing.push((i, idx as i64));
                }
            }
            _ => {}
        }
    }
    if !stack.is_empty() {
        let last = if s.end > s.start { events.ts[s.end - 1] } else { 0 };
        w.add_many("call_never_left", stack.len() as i64, || {
            format!(
                "rank {} thread {}: calls still open at the end of the stream are closed at its last event (ts {last})",
                s.rank, s.thread
            )
        });
        while let Some((idx, children)) = stack.pop() {
            close(&mut c, &mut stack, idx, children, last);
        }
    }
    (c, w)
}

fn close(c: &mut Calls, stack: &mut [(usize, i64)], idx: usize, children: i64, end: i64) {
    let end = end.max(c.start[idx]);
    c.end[idx] = end;
    let duration = end - c.start[idx];
    c.exclusive[idx] = duration - children;
    if let Some(parent) = stack.last_mut() {
        parent.1 += duration;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;

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
        let all = derive(&e, &e.streams(), &mut w);
        let c = &all.parts[0];
        assert!(w.is_empty());
        assert_eq!(c.start, vec![0, 10, 25]);
        assert_eq!(c.end, vec![100, 20, 30]);
        assert_eq!(c.exclusive, vec![85, 10, 5]);
        assert_eq!(c.depth, vec![0, 1, 1]);
        assert_eq!(c.parent, vec![NONE_I64, 0, 0]);
        assert_eq!(c.enclosing, vec![(2, 1)], "the send at event 2 is inside call 1");
    }

    #[test]
    fn unbalanced_streams_are_repaired_and_reported() {
        let mut e = RawEvents::default();
        e.push(ev(0, EventKind::Leave, 0));
        e.push(ev(5, EventKind::Enter, 0));
        e.push(ev(9, EventKind::Enter, 1));
        let mut w = Warnings::default();
        let e = EventParts::single(e);
        let all = derive(&e, &e.streams(), &mut w);
        let c = &all.parts[0];
        assert_eq!(w.count("leave_without_enter"), 1);
        assert_eq!(w.count("call_never_left"), 2);
        assert_eq!(c.end, vec![9, 9]);
    }
}
