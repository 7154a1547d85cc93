//! PCLVis Algorithm 2's nodes, shared by the DAG's sweep in one process
//! (`crate::causality::dag`) and its steps on a cluster (`crate::causality::dag_steps`): the
//! columns both read of the messages, and the node of each of a rank's message halves taken
//! in time order (a send joins the rank's newest node; a receive too, unless that node holds a
//! send, when it opens the next).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::error::Result;

use super::Kind;
use super::halves::Half;
use crate::latency::MessageIndices;
use commdb_analysis::columns::int64_column;
use commdb_analysis::relation::Relation;

/// Algorithm 2's node of each of `halves` (whole ranks, each in its time order), numbered
/// within its rank from 0: a send joins the rank's newest node, a receive too unless that
/// node holds a send, when it opens the next.
pub(super) fn nodes_within_ranks(halves: &[Half]) -> impl Iterator<Item = u32> + '_ {
    let mut rank = None;
    let (mut node, mut holds_send) = (0u32, false);
    halves.iter().map(move |h| {
        if rank != Some(h.rank) {
            rank = Some(h.rank);
            (node, holds_send) = (0, false);
        } else if h.kind == Kind::Recv && holds_send {
            (node, holds_send) = (node + 1, false);
        }
        holds_send |= h.kind == Kind::Send;
        node
    })
}

/// A node of the DAG.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub rank: i64,
    pub first_ts: i64,
    pub last_ts: i64,
    pub sends: i64,
    pub recvs: i64,
    pub bytes_sent: i64,
    pub bytes_recv: i64,
}

/// The rows of `dag_nodes` (`schema`) of `nodes`, their ids `ids`, each rank's LB in `lb`.
pub(super) fn node_rows(
    schema: SchemaRef,
    ids: Int64Array,
    nodes: &[Node],
    lb: &HashMap<i64, f64>,
) -> Result<RecordBatch> {
    let col = |f: fn(&Node) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(nodes.iter().map(f))) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ids),
        col(|x| x.rank),
        col(|x| x.first_ts),
        col(|x| x.last_ts),
        col(|x| x.sends),
        col(|x| x.recvs),
        col(|x| x.bytes_sent),
        col(|x| x.bytes_recv),
        Arc::new(Float64Array::from_iter_values(nodes.iter().map(|x| lb.get(&x.rank).copied().unwrap_or(0.0)))),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

impl Node {
    /// An empty node of `h`'s rank starting at `h` (which is then added).
    pub(super) fn starting(h: &Half) -> Node {
        Node { rank: h.rank, first_ts: h.ts, last_ts: h.ts, sends: 0, recvs: 0, bytes_sent: 0, bytes_recv: 0 }
    }

    /// The node with half `h` added (the halves come in time order).
    pub(super) fn add(&mut self, h: &Half) {
        self.last_ts = self.last_ts.max(h.ts);
        if h.kind == Kind::Send {
            self.sends += 1;
            self.bytes_sent += h.bytes;
        } else {
            self.recvs += 1;
            self.bytes_recv += h.bytes;
        }
    }
}

/// Columns the DAG functions read from the relation.
pub(super) struct DagInput {
    /// msg_id, src, dst, send_ts, recv_ts.
    pub messages: [usize; 5],
    pub bytes: usize,
    pub latency: MessageIndices,
}

impl DagInput {
    pub(super) fn find(function: &str, rel: &Relation) -> Result<Self> {
        let idx = rel.columns(function, &super::vector_clock::MESSAGE_COLUMNS)?;
        let bytes = rel.columns(function, &["bytes"])?[0];
        Ok(DagInput {
            messages: [idx[0], idx[1], idx[2], idx[3], idx[4]],
            bytes,
            latency: MessageIndices::find(function, rel)?,
        })
    }

    /// The columns of `batch` (read through these indices): msg_id, src, dst, send_ts,
    /// recv_ts and bytes.
    pub(super) fn read(&self, batch: &RecordBatch) -> Result<[Int64Array; 6]> {
        let one = std::slice::from_ref(batch);
        let [i, s, d, st, rt] = self.messages;
        Ok([
            int64_column(one, i)?,
            int64_column(one, s)?,
            int64_column(one, d)?,
            int64_column(one, st)?,
            int64_column(one, rt)?,
            int64_column(one, self.bytes)?,
        ])
    }

    /// The relation's columns it reads, and the same input over a scan of only those.
    pub(super) fn projected(&self) -> (Vec<usize>, DagInput) {
        let mut cols: Vec<usize> = self.messages.to_vec();
        cols.push(self.bytes);
        cols.extend(self.latency.columns());
        cols.sort_unstable();
        cols.dedup();
        let at = |c: usize| cols.iter().position(|x| *x == c).expect("listed above");
        let inner =
            DagInput { messages: self.messages.map(at), bytes: at(self.bytes), latency: self.latency.moved(at) };
        (cols, inner)
    }
}
