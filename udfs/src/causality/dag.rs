//! The communication-dependency DAG, PCLVis Algorithm 2. Each rank's sends and receives are
//! taken in order: a send joins the rank's newest node (a new node when the rank has none); a
//! receive joins the newest node when that node holds no send yet, otherwise it starts a new
//! node. So a node is a run of receives followed by a run of sends: what a rank received, then
//! what it sent on that basis. Every matched message is an edge from the node holding its send
//! to the node holding its receive. Collectives are not part of the algorithm and are left out.
//!
//! Since a node's receives precede its sends, a cycle of edges and program order would be a
//! cycle of happened-before; the graph (with program-order edges between a rank's consecutive
//! nodes) is checked with petgraph and a cycle, which only contradicting clocks can produce,
//! is an error. Node ids count from 0 in order of rank, then time. A node's load_balance is
//! the LB of its rank (`balance`).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::exec_err;
use datafusion::error::Result;
use petgraph::graph::DiGraph;

use super::{Kind, Messages, Timeline};
use crate::common::{Args, Compute, ComputeMany, Derived, Relation, int64_column};
use crate::declare::{BUCKET_BYTES, CRITERIA, Function, MAX_SAMPLES, MIN_MESSAGES, Make, Output, col, float64, int64};
use crate::latency::{Baseline, MESSAGES, MessageIndices, with_baseline};

pub const DAG_NODES: Function = Function {
    name: "dag_nodes",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("node_id", int64, "node of the DAG, from 0 in order of rank, then time"),
        col("rank", int64, "the rank whose run of receives and sends the node is"),
        col("first_ts", int64, "time of its first event"),
        col("last_ts", int64, "time of its last event"),
        col("sends", int64, "messages it sent"),
        col("recvs", int64, "messages it received"),
        col("bytes_sent", int64, "bytes it sent"),
        col("bytes_recv", int64, "bytes it received"),
        col("load_balance", float64, "LB of its rank (load_balance())"),
    ]),
    description: "nodes of the communication-dependency DAG: per rank, runs of receives followed by sends (PCLVis Algorithm 2)",
    make: Make::Table(|| Arc::new(DagNodes)),
};

pub const DAG_EDGES: Function = Function {
    name: "dag_edges",
    params: &[MESSAGES, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES, CRITERIA],
    output: Output::Columns(&[
        col("from_node", int64, "the node holding the send"),
        col("to_node", int64, "the node holding the receive"),
        col("msg_id", int64, ""),
        col("bytes", int64, ""),
        col("duration", int64, ""),
        col("latency", float64, "the message's latency L (message_latency())"),
    ]),
    description: "edges of the communication-dependency DAG: each matched message from its send's node to its receive's node",
    make: Make::Table(|| Arc::new(DagEdges)),
};
const NONE: u32 = u32::MAX;

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

/// The DAG: nodes, and the node of each message row's send and receive (u32::MAX if none).
#[derive(Debug)]
pub struct Dag {
    pub nodes: Vec<Node>,
    pub send_node: Vec<u32>,
    pub recv_node: Vec<u32>,
}

impl Dag {
    /// Matched messages as (row, from node, to node).
    pub fn edges(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        (0..self.send_node.len())
            .filter(|&r| self.send_node[r] != NONE && self.recv_node[r] != NONE)
            .map(|r| (r, self.send_node[r], self.recv_node[r]))
    }
}

/// Algorithm 2 over a timeline of sends and receives; an error if the result has a cycle.
pub fn build(t: &Timeline, m: &Messages, bytes: &[Option<i64>]) -> Result<Dag> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut send_node = vec![NONE; m.len()];
    let mut recv_node = vec![NONE; m.len()];
    for r in 0..t.ranks.len() {
        // (node index, holds a send)
        let mut newest: Option<(usize, bool)> = None;
        for e in &t.events[t.rank_start[r]..t.rank_start[r + 1]] {
            let b = bytes[e.item as usize].unwrap_or(0);
            let open = match (e.kind, newest) {
                (Kind::Collective, _) => continue,
                (Kind::Send, Some((k, _))) => k,
                (Kind::Recv, Some((k, false))) => k,
                _ => {
                    nodes.push(Node {
                        rank: t.ranks[r],
                        first_ts: e.ts,
                        last_ts: e.ts,
                        sends: 0,
                        recvs: 0,
                        bytes_sent: 0,
                        bytes_recv: 0,
                    });
                    nodes.len() - 1
                }
            };
            let node = &mut nodes[open];
            node.last_ts = node.last_ts.max(e.ts);
            if e.kind == Kind::Send {
                node.sends += 1;
                node.bytes_sent += b;
                send_node[e.item as usize] = open as u32;
                newest = Some((open, true));
            } else {
                node.recvs += 1;
                node.bytes_recv += b;
                recv_node[e.item as usize] = open as u32;
                newest = Some((open, newest.is_some_and(|n| n.0 == open && n.1)));
            }
        }
    }
    let dag = Dag { nodes, send_node, recv_node };
    check_acyclic(&dag, m)?;
    Ok(dag)
}

fn check_acyclic(dag: &Dag, m: &Messages) -> Result<()> {
    let mut g: DiGraph<(), Option<usize>> = DiGraph::with_capacity(dag.nodes.len(), dag.nodes.len() + m.len());
    let ids: Vec<_> = dag.nodes.iter().map(|_| g.add_node(())).collect();
    for k in 1..dag.nodes.len() {
        if dag.nodes[k].rank == dag.nodes[k - 1].rank {
            g.add_edge(ids[k - 1], ids[k], None);
        }
    }
    for (row, from, to) in dag.edges() {
        g.add_edge(ids[from as usize], ids[to as usize], Some(row));
    }
    if let Err(cycle) = petgraph::algo::toposort(&g, None) {
        let node = &dag.nodes[cycle.node_id().index()];
        return exec_err!(
            "dag: the dependencies run in a cycle through rank {}'s node starting at ts {} (messages received before the sends that cause them): the clocks contradict the messages; open the trace with clock correction clc or narrow the relation",
            node.rank,
            node.first_ts
        );
    }
    Ok(())
}

/// Columns the DAG functions read from the relation.
struct DagInput {
    messages: [usize; 5],
    bytes: usize,
    latency: MessageIndices,
}

impl DagInput {
    fn find(function: &str, rel: &Relation) -> Result<Self> {
        let idx = rel.columns(function, &super::vector_clock::MESSAGE_COLUMNS)?;
        let bytes = rel.columns(function, &["bytes"])?[0];
        Ok(DagInput {
            messages: [idx[0], idx[1], idx[2], idx[3], idx[4]],
            bytes,
            latency: MessageIndices::find(function, rel)?,
        })
    }

    /// The relation's columns it reads, and the same input over a scan of only those.
    fn projected(&self) -> (Vec<usize>, DagInput) {
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

    fn dag(&self, batches: &[RecordBatch]) -> Result<(Messages, Dag)> {
        let m = Messages::read(batches, &self.messages)?;
        let bytes: Vec<Option<i64>> = int64_column(batches, self.bytes)?.iter().collect();
        let t = Timeline::new(&m, None)?;
        let dag = build(&t, &m, &bytes)?;
        Ok((m, dag))
    }
}

fn schema(fields: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(fields))
}

/// `dag_nodes([rel => 'messages'])`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct DagNodes;

impl TableFunctionImpl for DagNodes {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&DAG_NODES, args.exprs())?;
        let rel = a.relation(args.session(), "rel")?;
        let (read, input) = DagInput::find("dag_nodes", &rel)?.projected();
        let i64f = |n: &str| Field::new(n, DataType::Int64, false);
        let out = schema(vec![
            i64f("node_id"),
            i64f("rank"),
            i64f("first_ts"),
            i64f("last_ts"),
            i64f("sends"),
            i64f("recvs"),
            i64f("bytes_sent"),
            i64f("bytes_recv"),
            Field::new("load_balance", DataType::Float64, false),
        ]);
        let s = out.clone();
        let compute: Compute = Arc::new(move |batches| {
            let (m, dag) = input.dag(batches)?;
            let lb: HashMap<i64, f64> = super::balance::load_balance(&m).into_iter().map(|r| (r.0, r.2)).collect();
            let n = &dag.nodes;
            let col = |f: fn(&Node) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(n.iter().map(f))) };
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(0..n.len() as i64)),
                col(|x| x.rank),
                col(|x| x.first_ts),
                col(|x| x.last_ts),
                col(|x| x.sends),
                col(|x| x.recvs),
                col(|x| x.bytes_sent),
                col(|x| x.bytes_recv),
                Arc::new(Float64Array::from_iter_values(n.iter().map(|x| lb.get(&x.rank).copied().unwrap_or(0.0)))),
            ];
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        Ok(Arc::new(Derived::new(out, rel, Some(read), compute)))
    }
}

/// `dag_edges([rel => 'messages'])`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct DagEdges;

impl TableFunctionImpl for DagEdges {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&DAG_EDGES, args.exprs())?;
        let rel = a.relation(args.session(), "rel")?;
        let (baseline, extra) = Baseline::plan(&a, args.session(), &rel)?;
        let (read, input) = DagInput::find("dag_edges", &rel)?.projected();
        let out = schema(vec![
            Field::new("from_node", DataType::Int64, false),
            Field::new("to_node", DataType::Int64, false),
            Field::new("msg_id", DataType::Int64, false),
            Field::new("bytes", DataType::Int64, true),
            Field::new("duration", DataType::Int64, true),
            Field::new("latency", DataType::Float64, true),
        ]);
        let s = out.clone();
        let compute: ComputeMany = Arc::new(move |inputs| {
            let batches = &inputs[0];
            let (m, dag) = input.dag(batches)?;
            let cols = input.latency.read(batches)?;
            let (_, latency) = baseline.table(&cols, inputs.get(1).map(Vec::as_slice))?.latencies(&cols);
            let bytes = int64_column(batches, input.bytes)?;
            let edges: Vec<(usize, u32, u32)> = dag.edges().collect();
            let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| i64::from(e.1)))),
                Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| i64::from(e.2)))),
                Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| m.msg_id[e.0]))),
                Arc::new(Int64Array::from(edges.iter().map(|e| opt(&bytes, e.0)).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(edges.iter().map(|e| opt(&cols.duration, e.0)).collect::<Vec<_>>())),
                Arc::new(Float64Array::from(edges.iter().map(|e| latency[e.0]).collect::<Vec<_>>())),
            ];
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        Ok(Arc::new(Derived::from_many(out, with_baseline(rel, Some(read), extra), compute)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::*;

    #[test]
    fn algorithm_2_groups_receives_then_sends() {
        // Rank 1: recv a, recv b, send c, recv d, send e -> nodes {a, b, c} and {d, e}.
        let m = messages(&[
            (0, 1, Some(1), Some(2)),
            (2, 1, Some(1), Some(3)),
            (1, 0, Some(4), Some(5)),
            (2, 1, Some(5), Some(6)),
            (1, 2, Some(7), Some(8)),
        ]);
        let t = Timeline::new(&m, None).unwrap();
        let dag = build(&t, &m, &[Some(10); 5]).unwrap();
        let of =
            |rank: i64| dag.nodes.iter().filter(|n| n.rank == rank).map(|n| (n.recvs, n.sends)).collect::<Vec<_>>();
        assert_eq!(of(1), [(2, 1), (1, 1)]);
        // Rank 0: send a, then recv c joins... a new node, since its node holds a send.
        assert_eq!(of(0), [(0, 1), (1, 0)]);
        assert_eq!(of(2), [(0, 2), (1, 0)]);
        assert_eq!(dag.edges().count(), 5);
    }

    #[test]
    fn a_cycle_is_an_error() {
        // Ranks 0 and 1 each receive the other's message before sending their own.
        let m = messages(&[(0, 1, Some(20), Some(10)), (1, 0, Some(20), Some(10))]);
        let t = Timeline::new(&m, None).unwrap();
        let e = build(&t, &m, &[None, None]).unwrap_err().to_string();
        assert!(e.contains("cycle"), "{e}");
    }
}
