//! The communication-dependency DAG, PCLVis Algorithm 2. Each rank's sends and receives are
//! taken in order: a send joins the rank's newest node (a new node when the rank has none); a
//! receive joins the newest node when that node holds no send yet, otherwise it starts a new
//! node. So a node is a run of receives followed by a run of sends: what a rank received, then
//! what it sent on that basis. Every matched message is an edge from the node holding its send
//! to the node holding its receive. Collectives are not part of the algorithm and are left out.
//!
//! Since a node's receives precede its sends, a cycle of edges and program order would be a
//! cycle of happened-before; the graph (with program-order edges between a rank's consecutive
//! nodes) is checked by Kahn's order and a cycle, which only contradicting clocks can produce,
//! is an error. Node ids count from 0 in order of rank, then time. A node's load_balance is
//! the LB of its rank (`balance`).
//!
//! The messages stream through, one partition after another (a store's parts in send-time
//! order, so each rank's halves come nearly in its time order): each one's send and receive go
//! to a scratch file of halves (`crate::causality::halves`), read back a run of whole ranks at a time in each rank's time
//! order, so memory holds a run of halves and, per message, the nodes of its two halves (8
//! bytes), not the messages. `dag_edges` writes each message's id, bytes, duration and latency
//! (its criteria held first, as `message_latency` does) to a second scratch file
//! (`crate::causality::edge_rows`), read back in the messages' order once every node is known. The check for a cycle (Kahn's order over the
//! nodes, the program order and the messages) runs when the nodes are known, and only when some
//! message is received no later than it is sent: along the program order and a message
//! received after it was sent time only rises, so a cycle needs such a message
//! (`crate::causality::dag_check` makes the same argument for the spread check). Without one,
//! nothing is kept per node for the check, and `dag_nodes` keeps nothing per message.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::exec_err;
use datafusion::error::{DataFusionError, Result};

use super::Kind;
use super::algorithm2::{DagInput, Node, node_rows, nodes_within_ranks};
use super::edge_rows::{EdgeReader, EdgeRow, EdgeWriter};
use super::halves::{Groups, Half, Halves, MAX_ROWS};
use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use crate::latency::{Baseline, BaselineArgs, CriteriaTable, MESSAGES, with_baseline};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64};
use commdb_analysis::derived::Derived;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

pub const DAG_NODES: Function = Function {
    name: "dag_nodes",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("node_id", int64, "node of the DAG, from 0 in order of rank, then time").never_null(),
        col("rank", int64, "the rank whose run of receives and sends the node is").never_null(),
        col("first_ts", int64, "time of its first event").never_null(),
        col("last_ts", int64, "time of its last event").never_null(),
        col("sends", int64, "messages it sent").never_null(),
        col("recvs", int64, "messages it received").never_null(),
        col("bytes_sent", int64, "bytes it sent").never_null(),
        col("bytes_recv", int64, "bytes it received").never_null(),
        col("load_balance", float64, "LB of its rank (load_balance())").never_null(),
    ]),
    description: "nodes of the communication-dependency DAG: per rank, runs of receives followed by sends (PCLVis Algorithm 2)",
    make: Make::Table(dag_nodes),
};

pub const DAG_EDGES: Function = Function {
    name: "dag_edges",
    params: &[MESSAGES, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES, CRITERIA],
    output: Output::Columns(&[
        col("from_node", int64, "the node holding the send").never_null(),
        col("to_node", int64, "the node holding the receive").never_null(),
        col("msg_id", int64, "").never_null(),
        col("bytes", int64, ""),
        col("duration", int64, ""),
        col("latency", float64, "the message's latency L (message_latency())"),
    ]),
    description: "edges of the communication-dependency DAG: each matched message from its send's node to its receive's node",
    make: Make::Table(dag_edges),
};
const NONE: u32 = u32::MAX;

/// The nodes as Algorithm 2 makes them, run by run of whole ranks, numbered on from the
/// previous runs; and, where they are needed, per message row the node of its send and of its
/// receive, and the graph the check for a cycle walks.
#[derive(Debug, Default)]
struct Nodes {
    /// Nodes made so far.
    count: usize,
    /// Per message row (empty when neither the answer nor the check needs them).
    send_node: Vec<u32>,
    recv_node: Vec<u32>,
    /// Whether the check for a cycle runs (some message is received no later than it is sent).
    checked: bool,
    /// Of every node, when the check runs: its rank and first time (for the error that names a
    /// cycle), and whether the next node is of the same rank (the program order).
    first: Vec<(i64, i64)>,
    continues: Vec<bool>,
}

impl Nodes {
    /// For `rows` messages; `per_message`: the node of each message's send and receive is
    /// kept; `checked`: the graph is kept and checked for a cycle (which needs them too).
    fn new(rows: usize, per_message: bool, checked: bool) -> Nodes {
        let kept = if per_message || checked { rows } else { 0 };
        Nodes { send_node: vec![NONE; kept], recv_node: vec![NONE; kept], checked, ..Nodes::default() }
    }

    /// Algorithm 2 over a run of whole ranks' halves, each rank's in time order: its nodes.
    fn add(&mut self, halves: &[Half]) -> Result<Vec<Node>> {
        let mut nodes: Vec<Node> = Vec::new();
        let base = self.count;
        let per_message = !self.send_node.is_empty();
        let mut last: Option<(i64, u32)> = None;
        for (h, within) in halves.iter().zip(nodes_within_ranks(halves)) {
            if last != Some((h.rank, within)) {
                last = Some((h.rank, within));
                nodes.push(Node::starting(h));
            }
            let open = nodes.len() - 1;
            if base + open >= NONE as usize {
                return exec_err!(
                    "dag: more than {NONE} nodes are more than this analysis handles; narrow the relation"
                );
            }
            let id = (base + open) as u32;
            let node = &mut nodes[open];
            node.add(h);
            if !per_message {
                continue;
            }
            if h.kind == Kind::Send {
                self.send_node[h.row as usize] = id;
            } else {
                self.recv_node[h.row as usize] = id;
            }
        }
        self.count += nodes.len();
        if !self.checked {
            return Ok(nodes);
        }
        for (k, n) in nodes.iter().enumerate() {
            // A run holds whole ranks: the next node of the same rank is in this run.
            self.continues.push(nodes.get(k + 1).is_some_and(|next| next.rank == n.rank));
            self.first.push((n.rank, n.first_ts));
        }
        Ok(nodes)
    }

    /// Matched messages as (row, from node, to node).
    fn edges(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        (0..self.send_node.len())
            .filter(|&r| self.send_node[r] != NONE && self.recv_node[r] != NONE)
            .map(|r| (r, self.send_node[r], self.recv_node[r]))
    }

    /// An error if the nodes, with the program order and the messages as edges, run in a
    /// cycle (Kahn's order does not reach every node); it names a node on the cycle. Without a
    /// message received no later than it was sent there is none, and nothing to walk.
    fn check_acyclic(&self) -> Result<()> {
        if !self.checked {
            return Ok(());
        }
        let n = self.first.len();
        let mut indegree = vec![0u32; n];
        let mut offsets = vec![0u32; n + 1];
        for (_, from, to) in self.edges() {
            offsets[from as usize + 1] += 1;
            indegree[to as usize] += 1;
        }
        for k in 0..n {
            offsets[k + 1] += offsets[k];
            if self.continues[k] {
                indegree[k + 1] += 1;
            }
        }
        let mut targets = vec![0u32; offsets[n] as usize];
        let mut fill = offsets.clone();
        for (_, from, to) in self.edges() {
            targets[fill[from as usize] as usize] = to;
            fill[from as usize] += 1;
        }
        drop(fill);
        let mut ready: Vec<u32> = (0..n as u32).filter(|&k| indegree[k as usize] == 0).collect();
        let mut visited = 0usize;
        while let Some(k) = ready.pop() {
            visited += 1;
            let k = k as usize;
            let next = self.continues[k].then_some(k + 1);
            let sent = targets[offsets[k] as usize..offsets[k + 1] as usize].iter().map(|&t| t as usize);
            for t in next.into_iter().chain(sent) {
                indegree[t] -= 1;
                if indegree[t] == 0 {
                    ready.push(t as u32);
                }
            }
        }
        if visited == n {
            return Ok(());
        }
        // Every node left has a predecessor left: walking back from one reaches a cycle.
        let mut before: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (_, from, to) in self.edges() {
            if indegree[to as usize] > 0 && indegree[from as usize] > 0 {
                before[to as usize].push(from);
            }
        }
        let start = (0..n).find(|&k| indegree[k] > 0).unwrap_or(0);
        let mut seen = vec![false; n];
        let mut k = start;
        while !seen[k] {
            seen[k] = true;
            let program = (k > 0 && self.continues[k - 1] && indegree[k - 1] > 0).then(|| k - 1);
            match program.or_else(|| before[k].first().map(|&f| f as usize)) {
                Some(p) => k = p,
                None => break,
            }
        }
        let (rank, ts) = self.first[k];
        exec_err!(
            "dag: the dependencies run in a cycle through rank {rank}'s node starting at ts {ts} (messages received before the sends that cause them): the clocks contradict the messages; open the trace with clock correction clc or narrow the relation"
        )
    }
}

/// Rows per batch of the answer.
const BATCH_ROWS: usize = 1 << 16;

/// What `dag_edges` keeps of each message for its rows, and the latencies' criteria.
struct EdgeRows {
    file: EdgeWriter,
    table: Arc<CriteriaTable>,
    baseline: Baseline,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
}

/// Which table of the DAG the sweep gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Nodes,
    Edges,
}

/// The DAG over the messages as they stream (see the module's notes).
struct DagSweep {
    answer: Answer,
    input: DagInput,
    halves: Option<Halves>,
    rows: usize,
    /// Matched messages received no later than they were sent (the check runs when any is).
    late: usize,
    edge_rows: Option<EdgeRows>,
    schema: SchemaRef,
    /// Once the messages have ended: the runs of halves still to read, the nodes so far, the
    /// LB of every rank, and (edges) the scratch file read back.
    groups: Option<Groups>,
    nodes: Nodes,
    lb: HashMap<i64, f64>,
    checked: bool,
    reader: Option<EdgeReader>,
    /// Rows read back from the scratch file.
    read: usize,
}

impl DagSweep {
    fn new(answer: Answer, input: DagInput, edge_rows: Option<EdgeRows>, schema: SchemaRef) -> Result<DagSweep> {
        Ok(DagSweep {
            answer,
            input,
            halves: Some(Halves::new(if answer == Answer::Nodes { "dag_nodes" } else { "dag_edges" })?),
            rows: 0,
            late: 0,
            edge_rows,
            schema,
            groups: None,
            nodes: Nodes::default(),
            lb: HashMap::new(),
            checked: false,
            reader: None,
            read: 0,
        })
    }

    fn name(&self) -> &'static str {
        if self.answer == Answer::Nodes { "dag_nodes" } else { "dag_edges" }
    }

    /// The rows of `nodes`, numbered from `first`.
    fn node_batch(&self, first: usize, nodes: &[Node]) -> Result<RecordBatch> {
        let ids = Int64Array::from_iter_values((first..first + nodes.len()).map(|k| k as i64));
        node_rows(self.schema.clone(), ids, nodes, &self.lb)
    }

    /// The next run's nodes (None: no run is left).
    fn next_nodes(&mut self) -> Result<Option<(usize, Vec<Node>)>> {
        commdb_catalog::interrupt::check(self.name())?;
        let Some(groups) = self.groups.as_mut() else { return Ok(None) };
        let Some(halves) = groups.next_group()? else {
            self.groups = None;
            return Ok(None);
        };
        let first = self.nodes.count;
        Ok(Some((first, self.nodes.add(&halves)?)))
    }

    /// The next batch of edges from the scratch file (None: no more).
    fn next_edges(&mut self) -> Result<Option<RecordBatch>> {
        let Some(reader) = self.reader.as_mut() else { return Ok(None) };
        let mut from = Vec::new();
        let mut to = Vec::new();
        let (mut id, mut bytes, mut duration, mut latency) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        while id.len() < BATCH_ROWS && self.read < self.rows {
            let row = reader.next_row()?;
            let r = self.read;
            self.read += 1;
            let (s, d) = (self.nodes.send_node[r], self.nodes.recv_node[r]);
            if s == NONE || d == NONE {
                continue;
            }
            from.push(i64::from(s));
            to.push(i64::from(d));
            id.push(row.id);
            bytes.push(row.bytes);
            duration.push(row.duration);
            latency.push(row.latency);
        }
        if id.is_empty() {
            self.reader = None;
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(from)),
            Arc::new(Int64Array::from(to)),
            Arc::new(Int64Array::from(id)),
            Arc::new(Int64Array::from(bytes)),
            Arc::new(Int64Array::from(duration)),
            Arc::new(Float64Array::from(latency)),
        ];
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }
}

impl Mapper for DagSweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let [ids, src, dst, send_ts, recv_ts, bytes] = self.input.read(batch)?;
        let halves =
            self.halves.as_mut().ok_or_else(|| DataFusionError::Internal("dag: halves after the end".into()))?;
        if self.rows + batch.num_rows() >= MAX_ROWS as usize {
            return exec_err!(
                "{}: more than {MAX_ROWS} messages are more than this analysis handles; narrow the relation",
                self.name()
            );
        }
        let get = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
        for r in 0..batch.num_rows() {
            let row = (self.rows + r) as u32;
            let b = get(&bytes, r).unwrap_or(0);
            // An id the row lacks is its position, as the messages read whole had.
            let id = get(&ids, r).unwrap_or((self.rows + r) as i64);
            if let (Some(rank), Some(ts)) = (get(&src, r), get(&send_ts, r)) {
                halves.push(Half { rank, ts, id, row, kind: Kind::Send, bytes: b })?;
            }
            if let (Some(rank), Some(ts)) = (get(&dst, r), get(&recv_ts, r)) {
                halves.push(Half { rank, ts, id, row, kind: Kind::Recv, bytes: b })?;
            }
            let sent = get(&src, r).and(get(&send_ts, r));
            let received = get(&dst, r).and(get(&recv_ts, r));
            if let (Some(sent), Some(received)) = (sent, received) {
                self.late += usize::from(received <= sent);
            }
        }
        if let Some(e) = self.edge_rows.as_mut() {
            let cols = self.input.latency.read(one)?;
            let (criterion, latency) = e.table.latencies(&cols);
            for r in 0..batch.num_rows() {
                if cols.duration.is_valid(r) {
                    e.counted.0 += 1;
                    e.counted.1 += usize::from(criterion[r].is_none());
                }
                // An id the row lacks is its position, as the messages read whole had.
                let id = get(&ids, r).unwrap_or((self.rows + r) as i64);
                let row = EdgeRow { id, bytes: get(&bytes, r), duration: get(&cols.duration, r), latency: latency[r] };
                e.file.push(&row)?;
            }
        }
        self.rows += batch.num_rows();
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.halves.as_ref().map_or(0, Halves::held_bytes)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let halves = self.halves.take().ok_or_else(|| DataFusionError::Internal("dag: finished twice".into()))?;
        // Every rank's messages sent plus received (equations 9 and 10).
        let counts = halves.counts();
        let loads: Vec<i64> = counts.values().copied().collect();
        self.lb = counts.keys().copied().zip(super::balance::lb(&loads)).collect();
        self.nodes = Nodes::new(self.rows, self.answer == Answer::Edges, self.late > 0);
        self.groups = Some(halves.into_groups()?);
        if let Some(e) = self.edge_rows.take() {
            e.baseline.notice_uncovered(e.counted.0, e.counted.1);
            self.reader = Some(e.file.into_reader()?);
        }
        Ok(Vec::new())
    }

    /// dag_nodes: each run's nodes as they are made, then the check; dag_edges: every run's
    /// nodes and the check first, then the edges in the messages' order.
    fn more(&mut self) -> Result<Option<RecordBatch>> {
        match self.answer {
            Answer::Nodes => {
                while let Some((first, nodes)) = self.next_nodes()? {
                    if !nodes.is_empty() {
                        return self.node_batch(first, &nodes).map(Some);
                    }
                }
                if !self.checked {
                    self.checked = true;
                    self.nodes.check_acyclic()?;
                }
                Ok(None)
            }
            Answer::Edges => {
                if !self.checked {
                    while self.next_nodes()?.is_some() {}
                    self.checked = true;
                    self.nodes.check_acyclic()?;
                }
                self.next_edges()
            }
        }
    }
}

arguments! {
    struct NodesArgs(DAG_NODES) {
        rel: Relation,
    }
}

arguments! {
    struct EdgesArgs(DAG_EDGES) {
        rel: Relation,
        ..baseline: BaselineArgs,
    }
}

fn dag_nodes(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let NodesArgs { rel } = NodesArgs::read(a)?;
    let (read, input) = DagInput::find("dag_nodes", &rel)?.projected();
    let out = a.schema();
    let s = out.clone();
    let input = Arc::new(input);
    let steps = super::dag_steps::steps(super::dag_steps::Table::Nodes, &input, None)?;
    let prepare: Prepare = Arc::new(move |_| {
        let input = DagInput { messages: input.messages, bytes: input.bytes, latency: input.latency.clone() };
        Ok(Box::new(DagSweep::new(Answer::Nodes, input, None, s.clone())?) as Box<dyn Mapper>)
    });
    let derived = Derived::streamed(out, vec![(rel, Some(read))], prepare).reading_parts_in_turn();
    Ok(Arc::new(derived.in_steps(steps)?))
}

fn dag_edges(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let EdgesArgs { rel, baseline } = EdgesArgs::read(a)?;
    let (baseline, extra) = Baseline::plan(a.function, &baseline, a.session, &rel)?;
    let found = DagInput::find("dag_edges", &rel)?;
    let extra = baseline.streamed_input(&rel, &found.latency, extra);
    let (read, input) = found.projected();
    let out = a.schema();
    let s = out.clone();
    let input = Arc::new(input);
    let criteria = extra.is_some() as usize;
    let steps = super::dag_steps::steps(super::dag_steps::Table::Edges, &input, Some((baseline.clone(), criteria)))?;
    let prepare: Prepare = Arc::new(move |held| {
        let table = baseline.held_table(held.first().map(Vec::as_slice))?;
        let rows = EdgeRows { file: EdgeWriter::new()?, table, baseline: baseline.clone(), counted: (0, 0) };
        let input = DagInput { messages: input.messages, bytes: input.bytes, latency: input.latency.clone() };
        Ok(Box::new(DagSweep::new(Answer::Edges, input, Some(rows), s.clone())?) as Box<dyn Mapper>)
    });
    let derived = Derived::streamed(out, with_baseline(rel, Some(read), extra), prepare).reading_parts_in_turn();
    Ok(Arc::new(derived.in_steps(steps)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DAG of messages (src, dst, send_ts, recv_ts), rows in order, as the sweep makes it.
    fn dag(rows: &[(i64, i64, i64, i64)]) -> Result<(Nodes, Vec<Node>)> {
        let mut halves: Vec<Half> = Vec::new();
        for (row, &(s, d, st, rt)) in rows.iter().enumerate() {
            let (id, row) = (row as i64, row as u32);
            halves.push(Half { rank: s, ts: st, id, row, kind: Kind::Send, bytes: 10 });
            halves.push(Half { rank: d, ts: rt, id, row, kind: Kind::Recv, bytes: 10 });
        }
        halves.sort_unstable_by_key(Half::order);
        let mut nodes = Nodes::new(rows.len(), true, true);
        // Two runs of whole ranks, as the scratch files give them.
        let cut = halves.partition_point(|h| h.rank < 1);
        let mut all = nodes.add(&halves[..cut])?;
        all.extend(nodes.add(&halves[cut..])?);
        nodes.check_acyclic()?;
        Ok((nodes, all))
    }

    #[test]
    fn algorithm_2_groups_receives_then_sends() {
        // Rank 1: recv a, recv b, send c, recv d, send e -> nodes {a, b, c} and {d, e}.
        let (nodes, all) = dag(&[(0, 1, 1, 2), (2, 1, 1, 3), (1, 0, 4, 5), (2, 1, 5, 6), (1, 2, 7, 8)]).unwrap();
        let of = |rank: i64| all.iter().filter(|n| n.rank == rank).map(|n| (n.recvs, n.sends)).collect::<Vec<_>>();
        assert_eq!(of(1), [(2, 1), (1, 1)]);
        // Rank 0: send a, then recv c joins... a new node, since its node holds a send.
        assert_eq!(of(0), [(0, 1), (1, 0)]);
        assert_eq!(of(2), [(0, 2), (1, 0)]);
        assert_eq!(nodes.edges().count(), 5);
        // Ids count in order of rank, then time, across the runs.
        assert_eq!(all.iter().map(|n| n.rank).collect::<Vec<_>>(), [0, 0, 1, 1, 2, 2]);
        assert_eq!(nodes.continues, [true, false, true, false, true, false]);
    }

    #[test]
    fn the_spread_check_finds_the_cycles_the_whole_graph_has() {
        // Random messages among 4 ranks, some received before they are sent (skewed clocks):
        // the check over the spans' messages alone agrees with the check over every node.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as i64
        };
        let (mut cycles, mut acyclic) = (0, 0);
        for _ in 0..3000 {
            let count = 1 + next(8) as usize;
            let rows: Vec<(i64, i64, i64, i64)> = (0..count)
                .map(|_| {
                    let (src, dst) = (next(4), next(4));
                    let send = next(40);
                    let recv = send + next(14) - 4;
                    (src, dst, send, recv)
                })
                .collect();
            let whole = dag(&rows).map(|_| ());
            let spread = super::super::dag_check::checked_as_spread(&rows);
            assert_eq!(whole.is_ok(), spread.is_ok(), "{rows:?}: {whole:?} {spread:?}");
            if whole.is_ok() { acyclic += 1 } else { cycles += 1 }
        }
        assert!(cycles > 100 && acyclic > 100, "{cycles} with a cycle, {acyclic} without");
    }

    #[test]
    fn nodes_not_checked_keep_nothing_per_message_or_node() {
        // Every message received after it was sent: the sweep makes its nodes without the check.
        let mut halves = Vec::new();
        for (row, (s, d, st, rt)) in [(0i64, 1i64, 1i64, 2i64), (1, 0, 3, 4), (0, 1, 5, 6)].into_iter().enumerate() {
            let (id, row) = (row as i64, row as u32);
            halves.push(Half { rank: s, ts: st, id, row, kind: Kind::Send, bytes: 10 });
            halves.push(Half { rank: d, ts: rt, id, row, kind: Kind::Recv, bytes: 10 });
        }
        halves.sort_unstable_by_key(Half::order);
        let mut nodes = Nodes::new(3, false, false);
        let made = nodes.add(&halves).unwrap();
        let kept = Nodes::new(3, true, true).add(&halves).unwrap();
        assert_eq!(
            made.iter().map(|n| (n.rank, n.sends, n.recvs)).collect::<Vec<_>>(),
            [(0, 1, 0), (0, 1, 1), (1, 1, 1), (1, 0, 1)]
        );
        assert_eq!(made.len(), kept.len());
        assert_eq!(nodes.count, 4);
        assert!(nodes.send_node.is_empty() && nodes.first.is_empty() && nodes.continues.is_empty());
        nodes.check_acyclic().unwrap();
    }

    #[test]
    fn a_cycle_is_an_error_that_names_a_node_on_it() {
        // Ranks 0 and 1 each receive the other's message before sending their own.
        let e = dag(&[(0, 1, 20, 10), (1, 0, 20, 10)]).unwrap_err().to_string();
        assert!(e.contains("cycle through rank"), "{e}");
        assert!(e.contains("clc"), "{e}");
        // A third rank downstream of the cycle is not named.
        let e = dag(&[(0, 1, 20, 10), (1, 0, 20, 10), (1, 2, 30, 40)]).unwrap_err().to_string();
        assert!(e.contains("rank 0's node") || e.contains("rank 1's node"), "{e}");
    }
}
