//! The DAG's check for a cycle on a distributed engine, in steps of `dag_nodes` and
//! `dag_edges` (`crate::causality::dag_steps`), and the columns those steps read of the
//! messages.
//!
//! The check needs no task to hold the graph. Along any path of the graph (program
//! order, then a message from its send to its receive) time never goes back except at a
//! message received no later than it was sent, so a cycle needs one; and every half on a
//! cycle lies within the span of such a message (from its receive to its send): a closed
//! walk that rises past an instant must fall past it again. So only the messages whose halves
//! both lie in the union of those spans are checked, each rank's halves among them in time
//! order, by Kahn's order: none when no message is received before it is sent (the clocks of
//! a corrected trace), a few under a small skew, the whole run only when the clocks are far
//! apart (then `clc` is the remedy). The check is exact: its cycles are the graph's.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::{DataFusionError, Result};

use super::Kind;
use super::algorithm2::DagInput;
use super::halves::Half;
use commdb_analysis::columns::{int64_column, schema_of};
use commdb_analysis::stream::{Mapper, Prepare};

/// The message's msg_id, or an error that names the function and the message.
pub(super) fn id_of(name: &str, ids: &Int64Array, r: usize, src: &Int64Array, send_ts: &Int64Array) -> Result<i64> {
    if ids.is_valid(r) {
        return Ok(ids.value(r));
    }
    let shown = |a: &Int64Array| if a.is_valid(r) { a.value(r).to_string() } else { "NULL".to_string() };
    exec_err!(
        "{name}: on a cluster every message needs its msg_id, which orders and pairs its halves; the message from rank {} sent at ts {} has none",
        shown(src),
        shown(send_ts)
    )
}

/// Spans of time from a message's receive to its send (`from` <= `to`).
pub(super) fn spans_schema() -> SchemaRef {
    schema_of(&[("from", DataType::Int64, false), ("to", DataType::Int64, false)])
}

/// Step 2: the spans of a part's messages received no later than they were sent, merged
/// where they meet (a skewed trace has many, and they overlap).
struct Spans {
    messages: [usize; 5],
    found: Vec<(i64, i64)>,
}

pub(super) fn spans_prepare(input: Arc<DagInput>) -> Prepare {
    Arc::new(move |_| Ok(Box::new(Spans { messages: input.messages, found: Vec::new() }) as Box<dyn Mapper>))
}

/// Of row `r`: its sender, receiver, send and receive times when it has all four.
pub(super) fn matched(cols: &[Int64Array; 4], r: usize) -> Option<[i64; 4]> {
    cols.iter().all(|c| c.is_valid(r)).then(|| [cols[0].value(r), cols[1].value(r), cols[2].value(r), cols[3].value(r)])
}

/// The sender, receiver, send and receive time columns of `batch` (its columns `messages`:
/// msg_id, src, dst, send_ts, recv_ts).
pub(super) fn matched_columns(messages: [usize; 5], batch: &RecordBatch) -> Result<[Int64Array; 4]> {
    let one = std::slice::from_ref(batch);
    let [_, s, d, st, rt] = messages;
    Ok([int64_column(one, s)?, int64_column(one, d)?, int64_column(one, st)?, int64_column(one, rt)?])
}

impl Mapper for Spans {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let cols = matched_columns(self.messages, batch)?;
        for r in 0..batch.num_rows() {
            if let Some([_, _, send, recv]) = matched(&cols, r)
                && recv <= send
            {
                self.found.push((recv, send));
            }
        }
        if self.found.len() > 1 << 16 {
            self.found = merged(std::mem::take(&mut self.found));
        }
        Ok(RecordBatch::new_empty(spans_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.found.capacity() * 16
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        Ok(vec![spans_batch(&merged(std::mem::take(&mut self.found)))?])
    }
}

/// `spans` sorted and merged where they meet.
fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut kept: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (from, to) in spans {
        match kept.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => kept.push((from, to)),
        }
    }
    kept
}

/// The spans of `batches`, sorted and merged where they meet.
fn spans_in(batches: &[RecordBatch]) -> Result<Vec<(i64, i64)>> {
    let mut spans = Vec::new();
    for b in batches {
        let one = std::slice::from_ref(b);
        let (from, to) = (int64_column(one, 0)?, int64_column(one, 1)?);
        spans.extend((0..b.num_rows()).map(|r| (from.value(r), to.value(r))));
    }
    Ok(merged(spans))
}

/// `spans` as rows of `spans_schema`.
fn spans_batch(spans: &[(i64, i64)]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(spans.iter().map(|s| s.0))),
        Arc::new(Int64Array::from_iter_values(spans.iter().map(|s| s.1))),
    ];
    Ok(RecordBatch::try_new(spans_schema(), columns)?)
}

/// Step 3: the parts' spans merged.
pub(super) fn merged_spans(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    Ok(vec![spans_batch(&spans_in(batches)?)?])
}

/// A message whose halves both lie in the spans: msg_id, src, send_ts, dst, recv_ts.
pub(super) fn within_schema() -> SchemaRef {
    schema_of(&[
        ("msg_id", DataType::Int64, false),
        ("src", DataType::Int64, false),
        ("send_ts", DataType::Int64, false),
        ("dst", DataType::Int64, false),
        ("recv_ts", DataType::Int64, false),
    ])
}

/// Step 4: the messages whose halves both lie in the merged spans.
struct Within {
    name: &'static str,
    messages: [usize; 5],
    spans: Vec<(i64, i64)>,
}

pub(super) fn within_prepare(name: &'static str, input: Arc<DagInput>) -> Prepare {
    Arc::new(move |held| {
        let spans = spans_in(&held[0])?;
        Ok(Box::new(Within { name, messages: input.messages, spans }) as Box<dyn Mapper>)
    })
}

impl Within {
    fn covers(&self, t: i64) -> bool {
        let after = self.spans.partition_point(|s| s.0 <= t);
        after > 0 && self.spans[after - 1].1 >= t
    }
}

impl Mapper for Within {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut rows: [Vec<i64>; 5] = Default::default();
        if !self.spans.is_empty() {
            let cols = matched_columns(self.messages, batch)?;
            let ids = int64_column(std::slice::from_ref(batch), self.messages[0])?;
            for r in 0..batch.num_rows() {
                if let Some([src, dst, send, recv]) = matched(&cols, r)
                    && self.covers(send)
                    && self.covers(recv)
                {
                    let id = id_of(self.name, &ids, r, &cols[0], &cols[2])?;
                    for (column, v) in rows.iter_mut().zip([id, src, send, dst, recv]) {
                        column.push(v);
                    }
                }
            }
        }
        let columns: Vec<ArrayRef> = rows.into_iter().map(|c| Arc::new(Int64Array::from(c)) as ArrayRef).collect();
        Ok(RecordBatch::try_new(within_schema(), columns)?)
    }
}

/// The messages the check went through.
pub(super) fn checked_schema() -> SchemaRef {
    schema_of(&[("messages_checked", DataType::Int64, false)])
}

/// Step 5: an error if the messages within the spans, with each rank's halves of them in time
/// order, run in a cycle; it names a half on the cycle.
pub(super) fn check_acyclic(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    let mut halves: Vec<Half> = Vec::new();
    for b in batches {
        let one = std::slice::from_ref(b);
        let (id, src, send) = (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
        let (dst, recv) = (int64_column(one, 3)?, int64_column(one, 4)?);
        for r in 0..b.num_rows() {
            let row = u32::try_from(halves.len() / 2).map_err(|_| {
                DataFusionError::Execution("dag: more messages within the spans than the check handles".into())
            })?;
            let (id, bytes) = (id.value(r), 0);
            halves.push(Half { rank: src.value(r), ts: send.value(r), id, row, kind: Kind::Send, bytes });
            halves.push(Half { rank: dst.value(r), ts: recv.value(r), id, row, kind: Kind::Recv, bytes });
        }
    }
    let messages = halves.len() / 2;
    halves.sort_unstable_by_key(Half::order);
    // Each half's successors: the next half of its rank, and a send's receive.
    let n = halves.len();
    let mut receive_of = vec![usize::MAX; messages];
    for (v, h) in halves.iter().enumerate() {
        if h.kind == Kind::Recv {
            receive_of[h.row as usize] = v;
        }
    }
    let next = |v: usize| (v + 1 < n && halves[v + 1].rank == halves[v].rank).then_some(v + 1);
    let sent = |v: usize| (halves[v].kind == Kind::Send).then(|| receive_of[halves[v].row as usize]);
    let mut indegree = vec![0u32; n];
    for v in 0..n {
        for t in next(v).into_iter().chain(sent(v)) {
            indegree[t] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut visited = 0;
    while let Some(v) = ready.pop() {
        visited += 1;
        for t in next(v).into_iter().chain(sent(v)) {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.push(t);
            }
        }
    }
    if visited < n {
        // Every half left has a predecessor left: walking back from one reaches a cycle.
        let mut send_of = vec![usize::MAX; messages];
        for (v, h) in halves.iter().enumerate() {
            if h.kind == Kind::Send {
                send_of[h.row as usize] = v;
            }
        }
        let mut v = (0..n).find(|&v| indegree[v] > 0).unwrap_or(0);
        let mut seen = vec![false; n];
        while !seen[v] {
            seen[v] = true;
            let program = (v > 0 && halves[v - 1].rank == halves[v].rank && indegree[v - 1] > 0).then(|| v - 1);
            let message = (halves[v].kind == Kind::Recv).then(|| send_of[halves[v].row as usize]);
            match program.or(message.filter(|&s| indegree[s] > 0)) {
                Some(p) => v = p,
                None => break,
            }
        }
        let h = halves[v];
        return exec_err!(
            "dag: the dependencies run in a cycle through rank {} at ts {} (messages received before the sends that cause them): the clocks contradict the messages; open the trace with clock correction clc or narrow the relation",
            h.rank,
            h.ts
        );
    }
    let column: ArrayRef = Arc::new(Int64Array::from(vec![messages as i64]));
    Ok(vec![RecordBatch::try_new(checked_schema(), vec![column])?])
}

/// Steps 2 to 5 over messages (src, dst, send_ts, recv_ts), msg_id their position, as two
/// parts (their first and second halves): the check as the spread steps make it.
#[cfg(test)]
pub(super) fn checked_as_spread(rows: &[(i64, i64, i64, i64)]) -> Result<()> {
    let col = |f: fn(&(i64, i64, i64, i64)) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
    };
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows.len() as i64));
    let messages = RecordBatch::try_new(
        schema_of(&[
            ("msg_id", DataType::Int64, false),
            ("src", DataType::Int64, false),
            ("dst", DataType::Int64, false),
            ("send_ts", DataType::Int64, false),
            ("recv_ts", DataType::Int64, false),
        ]),
        vec![ids, col(|m| m.0), col(|m| m.1), col(|m| m.2), col(|m| m.3)],
    )?;
    let columns = [0, 1, 2, 3, 4];
    let half = rows.len() / 2;
    let mut parts = Vec::new();
    for part in [messages.slice(0, half), messages.slice(half, rows.len() - half)] {
        let mut spans = Spans { messages: columns, found: Vec::new() };
        spans.map(&part)?;
        parts.extend(spans.finish()?);
    }
    let mut within = Within { name: "test", messages: columns, spans: spans_in(&merged_spans(&parts)?)? };
    check_acyclic(&[within.map(&messages)?]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(rows: &[(i64, i64, i64, i64)]) -> RecordBatch {
        let col = |f: fn(&(i64, i64, i64, i64)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows.len() as i64));
        RecordBatch::try_new(within_schema(), vec![ids, col(|m| m.0), col(|m| m.2), col(|m| m.1), col(|m| m.3)])
            .unwrap()
    }

    #[test]
    fn spans_merge_where_they_meet() {
        let b = RecordBatch::try_new(
            spans_schema(),
            vec![Arc::new(Int64Array::from(vec![5, 1, 3, 20])), Arc::new(Int64Array::from(vec![8, 4, 5, 20]))],
        )
        .unwrap();
        assert_eq!(spans_in(&[b]).unwrap(), [(1, 8), (20, 20)]);
    }

    #[test]
    fn the_check_finds_a_cycle_only_where_the_messages_make_one() {
        // (src, dst, send_ts, recv_ts). Ranks 0 and 1 each receive the other's message before
        // sending their own: a cycle.
        let e = check_acyclic(&[within(&[(0, 1, 20, 10), (1, 0, 20, 10)])]).unwrap_err().to_string();
        assert!(e.contains("cycle through rank"), "{e}");
        // Received early, but each receive after the other's send on its rank: no cycle.
        check_acyclic(&[within(&[(0, 1, 20, 10), (1, 0, 5, 15)])]).unwrap();
        // Two messages at one instant: rank 1 receives the first and sends the second at ts
        // 7; in msg_id order its receive comes first, so there is no cycle.
        check_acyclic(&[within(&[(0, 1, 7, 7), (1, 2, 7, 7)])]).unwrap();
        assert_eq!(check_acyclic(&[]).unwrap()[0].num_rows(), 1);
    }
}
