//! The DAG on a distributed engine: `dag_nodes` and `dag_edges` planned as steps
//! ([`commdb_analysis::steps`]), so that no task reads the messages, their halves or the
//! nodes whole (docs/scale.md).
//!
//! 1. **Halves**, a task per part of the messages: each message's send and receive as rows
//!    of their rank.
//! 2. **Nodes counted**, the halves exchanged by rank: each task puts its ranks' halves in
//!    time order (`crate::causality::halves`, on disk) and counts each rank's nodes by
//!    Algorithm 2 ([`super::algorithm2::nodes_within_ranks`]); a row per rank.
//! 3. **The cycle check** (below), in its own steps.
//! 4. **The nodes**, the halves exchanged by rank again: Algorithm 2 as in 2, each node's id
//!    its number within its rank plus the nodes of the ranks before (from the counts, read by
//!    every task), each rank's LB from the counts' halves. `dag_edges` gives each half's node
//!    instead; each part of the messages gives each message's size, duration and latency (its
//!    criteria held by every task); both kinds of pieces are packed by range of msg_id and
//!    exchanged by range ([`super::pieces`]), and a last step keeps them on disk as they come,
//!    then pairs them a range at a time, in order of msg_id, into the messages' edges.
//!
//! Ids count as in one process: from 0 in order of rank, then time; at one instant on one
//! rank the halves are ordered by msg_id, which every message must have here.
//!
//! The check for a cycle is `crate::causality::dag_check`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::{DataFusionError, Result};

use super::Kind;
use super::algorithm2::{DagInput, Node, node_rows, nodes_within_ranks};
use super::dag_check::{
    check_acyclic, checked_schema, id_of, matched, matched_columns, merged_spans, spans_prepare, spans_schema,
    within_prepare, within_schema,
};
use super::halves::{Groups, Half, Halves, decode_rank, encode_rank};
use super::pieces::{Pairing, Piece, edge_columns, pack, packed_schema};
use crate::latency::{Baseline, CriteriaTable};
use commdb_analysis::columns::{int64_column, schema_of};
use commdb_analysis::plan::Work;
use commdb_analysis::steps::{From, Reads, Step};
use commdb_analysis::stream::{Mapper, Prepare};

/// Which table of the DAG the steps give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    Nodes,
    Edges,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Nodes => "dag_nodes",
            Table::Edges => "dag_edges",
        }
    }
}

/// Message halves, a row per rank of a batch: the rank, its halves, and the halves packed as
/// bytes ([`super::halves::encode_rank`], about 10 bytes a half where the five columns took
/// 33; [`crate::packed`]).
fn halves_schema() -> SchemaRef {
    crate::packed::schema("rank", "halves")
}

/// What the packed rows carry, as an error names it.
const HALVES: &str = "the message halves";

/// `halves` as a batch of [`halves_schema`] (`what` names the function in an error).
fn packed_halves(what: &str, halves: &mut [Half]) -> Result<RecordBatch> {
    if let Some(h) = halves.iter().find(|h| i32::try_from(h.rank).is_err()) {
        return exec_err!("{what}: rank {} is beyond 32 bits, which the halves of a message are kept in", h.rank);
    }
    halves.sort_by_key(|h| h.rank);
    let mut packed = crate::packed::Rows::default();
    for rank in halves.chunk_by(|a, b| a.rank == b.rank) {
        packed.push(rank[0].rank, rank.len(), &encode_rank(rank));
    }
    packed.finish(halves_schema())
}

/// Halves of `batch` (of [`halves_schema`]), in order (an error names `what` when the bytes
/// do not hold them).
fn halves_of(what: &str, batch: &RecordBatch) -> Result<Vec<Half>> {
    let mut out = Vec::new();
    crate::packed::each_row(what, HALVES, batch, |rank, count, bytes| {
        out.reserve(count as usize);
        decode_rank(bytes, count, rank, &mut |h| out.push(h)).ok_or_else(|| crate::packed::damaged(what, HALVES))
    })?;
    Ok(out)
}

/// The steps of `table` over its inputs: the messages (columns as `input` says) and, for the
/// edges, their criteria (`baseline`, and the number of its inputs after the messages).
pub(super) fn steps(table: Table, input: &Arc<DagInput>, baseline: Option<(Baseline, usize)>) -> Result<Vec<Step>> {
    let name = table.name();
    let mut steps = vec![
        // 0
        Step {
            label: "each message's halves, per part of the messages",
            schema: halves_schema(),
            work: Work::Streamed(halves_prepare(name, input.clone())),
            inputs: vec![From::Input(0)],
            reads: Reads::ByPart,
        },
        // 1
        Step {
            label: "each rank's nodes counted (Algorithm 2)",
            schema: counts_schema(),
            work: Work::Streamed(Arc::new(move |_| Ok(Box::new(Counted::new(name)?) as Box<dyn Mapper>))),
            inputs: vec![From::Step(0)],
            reads: Reads::Exchanged(vec![0]),
        },
        // 2
        Step {
            label: "the spans of messages received no later than sent",
            schema: spans_schema(),
            work: Work::Streamed(spans_prepare(input.clone())),
            inputs: vec![From::Input(0)],
            reads: Reads::ByPart,
        },
        // 3
        Step {
            label: "the spans merged",
            schema: spans_schema(),
            work: Work::Whole(Arc::new(|inputs| merged_spans(&inputs[0]))),
            inputs: vec![From::Step(2)],
            reads: Reads::Once,
        },
        // 4
        Step {
            label: "the messages within the spans",
            schema: within_schema(),
            work: Work::Streamed(within_prepare(name, input.clone())),
            inputs: vec![From::Input(0), From::Step(3)],
            reads: Reads::ByPart,
        },
        // 5
        Step {
            label: "the check for a cycle",
            schema: checked_schema(),
            work: Work::Whole(Arc::new(|inputs| check_acyclic(&inputs[0]))),
            inputs: vec![From::Step(4)],
            reads: Reads::Once,
        },
    ];
    let numbered = vec![From::Step(0), From::Step(1), From::Step(5)];
    match (table, baseline) {
        (Table::Nodes, None) => steps.push(Step {
            label: "the nodes of each rank (Algorithm 2)",
            schema: nodes_schema(),
            work: Work::Streamed(numbered_prepare(Table::Nodes)),
            inputs: numbered,
            reads: Reads::Exchanged(vec![0]),
        }),
        (Table::Edges, Some((baseline, criteria))) => {
            steps.push(Step {
                label: "each half's node (Algorithm 2)",
                schema: packed_schema(),
                work: Work::Streamed(numbered_prepare(Table::Edges)),
                inputs: numbered,
                reads: Reads::Exchanged(vec![0]),
            });
            let mut inputs = vec![From::Input(0)];
            inputs.extend((1..=criteria).map(From::Input));
            steps.push(Step {
                label: "each message's size, duration and latency",
                schema: packed_schema(),
                work: Work::Streamed(sizes_prepare(input.clone(), baseline)),
                inputs,
                reads: Reads::ByPart,
            });
            let (half_nodes, sizes) = (steps.len() - 2, steps.len() - 1);
            steps.push(Step {
                label: "the edges, each message's pieces together",
                schema: edges_schema(),
                work: Work::Streamed(Arc::new(|_| {
                    Ok(Box::new(Paired { pairing: Pairing::new("dag_edges")? }) as Box<dyn Mapper>)
                })),
                inputs: vec![From::Union(vec![half_nodes, sizes])],
                reads: Reads::Exchanged(vec![0]),
            });
        }
        (table, _) => {
            return datafusion::common::internal_err!("{}: criteria are for the edges alone", table.name());
        }
    }
    Ok(steps)
}

/// Step 0: each message's halves.
struct HalvesOf {
    name: &'static str,
    input: Arc<DagInput>,
}

fn halves_prepare(name: &'static str, input: Arc<DagInput>) -> Prepare {
    Arc::new(move |_| Ok(Box::new(HalvesOf { name, input: input.clone() }) as Box<dyn Mapper>))
}

impl Mapper for HalvesOf {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let [ids, src, dst, send_ts, recv_ts, bytes] = self.input.read(batch)?;
        let mut halves = Vec::with_capacity(batch.num_rows() * 2);
        for r in 0..batch.num_rows() {
            let b = if bytes.is_valid(r) { bytes.value(r) } else { 0 };
            for (who, when, kind) in [(&src, &send_ts, Kind::Send), (&dst, &recv_ts, Kind::Recv)] {
                if who.is_valid(r) && when.is_valid(r) {
                    let id = id_of(self.name, &ids, r, &src, &send_ts)?;
                    halves.push(Half { rank: who.value(r), ts: when.value(r), id, row: 0, kind, bytes: b });
                }
            }
        }
        packed_halves(self.name, &mut halves)
    }
}

/// Each rank's nodes and halves (its messages sent plus received).
fn counts_schema() -> SchemaRef {
    schema_of(&[
        ("rank", DataType::Int64, false),
        ("nodes", DataType::Int64, false),
        ("halves", DataType::Int64, false),
    ])
}

/// A task's halves, put in their ranks' time order on disk as they come.
struct Sorted {
    name: &'static str,
    halves: Option<Halves>,
    groups: Option<Groups>,
}

impl Sorted {
    fn new(name: &'static str) -> Result<Sorted> {
        Ok(Sorted { name, halves: Some(Halves::new(name)?), groups: None })
    }

    fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let halves =
            self.halves.as_mut().ok_or_else(|| DataFusionError::Internal("dag: halves after the end".into()))?;
        for h in halves_of(self.name, batch)? {
            halves.push(h)?;
        }
        Ok(())
    }

    fn held_bytes(&self) -> usize {
        self.halves.as_ref().map_or(0, Halves::held_bytes)
    }

    /// The halves have ended.
    fn finish(&mut self) -> Result<()> {
        let halves = self.halves.take().ok_or_else(|| DataFusionError::Internal("dag: finished twice".into()))?;
        self.groups = Some(halves.into_groups()?);
        Ok(())
    }

    /// The next run of whole ranks' halves, in their time order.
    fn next_group(&mut self, name: &str) -> Result<Option<Vec<Half>>> {
        commdb_catalog::interrupt::check(name)?;
        match self.groups.as_mut() {
            Some(groups) => groups.next_group(),
            None => Ok(None),
        }
    }
}

/// Step 1: each rank's nodes counted.
struct Counted {
    name: &'static str,
    sorted: Sorted,
}

impl Counted {
    fn new(name: &'static str) -> Result<Counted> {
        Ok(Counted { name, sorted: Sorted::new(name)? })
    }
}

impl Mapper for Counted {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.sorted.push(batch)?;
        Ok(RecordBatch::new_empty(counts_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.sorted.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.sorted.finish()?;
        Ok(Vec::new())
    }

    /// Of each rank of the next run (in rank order): its nodes (its last half's, plus one) and
    /// its halves.
    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(halves) = self.sorted.next_group(self.name)? else { return Ok(None) };
        let (mut ranks, mut nodes, mut counts) = (Vec::new(), Vec::new(), Vec::new());
        for (h, within) in halves.iter().zip(nodes_within_ranks(&halves)) {
            if ranks.last() != Some(&h.rank) {
                ranks.push(h.rank);
                nodes.push(0);
                counts.push(0);
            }
            *nodes.last_mut().expect("pushed above") = i64::from(within) + 1;
            *counts.last_mut().expect("pushed above") += 1;
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ranks)),
            Arc::new(Int64Array::from(nodes)),
            Arc::new(Int64Array::from(counts)),
        ];
        Ok(Some(RecordBatch::try_new(counts_schema(), columns)?))
    }
}

/// The nodes as `dag_nodes` gives them.
fn nodes_schema() -> SchemaRef {
    schema_of(&[
        ("node_id", DataType::Int64, false),
        ("rank", DataType::Int64, false),
        ("first_ts", DataType::Int64, false),
        ("last_ts", DataType::Int64, false),
        ("sends", DataType::Int64, false),
        ("recvs", DataType::Int64, false),
        ("bytes_sent", DataType::Int64, false),
        ("bytes_recv", DataType::Int64, false),
        ("load_balance", DataType::Float64, false),
    ])
}

/// Step 6: Algorithm 2 over the ranks of a task, the nodes numbered after those of the ranks
/// before (from the counts), or each half's node.
struct Numbered {
    table: Table,
    sorted: Sorted,
    /// Of each rank: the id of its first node, and its LB.
    first: HashMap<i64, i64>,
    lb: HashMap<i64, f64>,
}

fn numbered_prepare(table: Table) -> Prepare {
    Arc::new(move |held| {
        // held[0]: each rank's counts; held[1]: the check, which failed if it found a cycle.
        let mut counts: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for b in &held[0] {
            let one = std::slice::from_ref(b);
            let (rank, nodes, halves) = (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
            for r in 0..b.num_rows() {
                if counts.insert(rank.value(r), (nodes.value(r), halves.value(r))).is_some() {
                    return exec_err!("{}: rank {} was counted by two tasks", table.name(), rank.value(r));
                }
            }
        }
        if held[1].iter().map(RecordBatch::num_rows).sum::<usize>() != 1 {
            return exec_err!("{}: the check for a cycle gave no answer", table.name());
        }
        let mut first = HashMap::with_capacity(counts.len());
        let mut next = 0i64;
        for (&rank, &(nodes, _)) in &counts {
            first.insert(rank, next);
            next += nodes;
        }
        let loads: Vec<i64> = counts.values().map(|c| c.1).collect();
        let lb = counts.keys().copied().zip(super::balance::lb(&loads)).collect();
        Ok(Box::new(Numbered { table, sorted: Sorted::new(table.name())?, first, lb }) as Box<dyn Mapper>)
    })
}

impl Numbered {
    fn first_of(&self, rank: i64) -> Result<i64> {
        match self.first.get(&rank) {
            Some(&id) => Ok(id),
            None => exec_err!("{}: rank {rank} has halves but was not counted", self.table.name()),
        }
    }

    /// The nodes of a run of whole ranks.
    fn nodes(&self, halves: &[Half]) -> Result<RecordBatch> {
        let mut ids: Vec<i64> = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut last = None;
        for (h, within) in halves.iter().zip(nodes_within_ranks(halves)) {
            if last != Some((h.rank, within)) {
                last = Some((h.rank, within));
                ids.push(self.first_of(h.rank)? + i64::from(within));
                nodes.push(Node::starting(h));
            }
            nodes.last_mut().expect("pushed above").add(h);
        }
        node_rows(nodes_schema(), Int64Array::from(ids), &nodes, &self.lb)
    }

    /// Each half of a run of whole ranks with its node, packed by range of msg_id.
    fn half_nodes(&self, halves: &[Half]) -> Result<RecordBatch> {
        let mut node = Vec::with_capacity(halves.len());
        let mut first = None;
        for (h, within) in halves.iter().zip(nodes_within_ranks(halves)) {
            let id = match first {
                Some((rank, id)) if rank == h.rank => id,
                _ => self.first_of(h.rank)?,
            };
            first = Some((h.rank, id));
            node.push(id + i64::from(within));
        }
        pack(
            halves.len(),
            |i| halves[i].id,
            |i| if halves[i].kind == Kind::Recv { Piece::Recv(node[i]) } else { Piece::Send(node[i]) },
        )
    }
}

impl Mapper for Numbered {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.sorted.push(batch)?;
        let schema = if self.table == Table::Nodes { nodes_schema() } else { packed_schema() };
        Ok(RecordBatch::new_empty(schema))
    }

    fn held_bytes(&self) -> usize {
        self.sorted.held_bytes() + self.first.len() * 48
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.sorted.finish()?;
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(halves) = self.sorted.next_group(self.table.name())? else { return Ok(None) };
        match self.table {
            Table::Nodes => self.nodes(&halves).map(Some),
            Table::Edges => self.half_nodes(&halves).map(Some),
        }
    }
}

/// A step of the edges: each matched message's size, duration and latency (`Piece::Size`).
struct Sizes {
    input: Arc<DagInput>,
    table: Arc<CriteriaTable>,
    baseline: Option<Baseline>,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
}

fn sizes_prepare(input: Arc<DagInput>, baseline: Baseline) -> Prepare {
    Arc::new(move |held| {
        let table = baseline.held_table(held.first().map(Vec::as_slice))?;
        Ok(Box::new(Sizes { input: input.clone(), table, baseline: Some(baseline.clone()), counted: (0, 0) })
            as Box<dyn Mapper>)
    })
}

impl Mapper for Sizes {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let cols = self.input.latency.read(one)?;
        let (criterion, latency) = self.table.latencies(&cols);
        let matched_cols = matched_columns(self.input.messages, batch)?;
        let ids = int64_column(one, self.input.messages[0])?;
        let bytes = int64_column(one, self.input.bytes)?;
        let n = batch.num_rows();
        let (mut id, mut sizes) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for r in 0..n {
            if cols.duration.is_valid(r) {
                self.counted.0 += 1;
                self.counted.1 += usize::from(criterion[r].is_none());
            }
            if matched(&matched_cols, r).is_none() {
                continue;
            }
            id.push(id_of("dag_edges", &ids, r, &matched_cols[0], &matched_cols[2])?);
            sizes.push(Piece::Size {
                bytes: bytes.is_valid(r).then(|| bytes.value(r)),
                duration: cols.duration.is_valid(r).then(|| cols.duration.value(r)),
                latency: latency[r],
            });
        }
        pack(id.len(), |i| id[i], |i| sizes[i])
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if let Some(baseline) = self.baseline.take() {
            baseline.notice_uncovered(self.counted.0, self.counted.1);
        }
        Ok(Vec::new())
    }
}

/// The edges as `dag_edges` gives them.
fn edges_schema() -> SchemaRef {
    schema_of(&[
        ("from_node", DataType::Int64, false),
        ("to_node", DataType::Int64, false),
        ("msg_id", DataType::Int64, false),
        ("bytes", DataType::Int64, true),
        ("duration", DataType::Int64, true),
        ("latency", DataType::Float64, true),
    ])
}

/// The last step of the edges: each message's pieces (its send's node, its receive's node, its
/// size) kept on disk as they come, then paired a range of ids at a time, in order of msg_id
/// ([`Pairing`]). A message without both nodes or its size (not matched) makes none.
struct Paired {
    pairing: Pairing,
}

/// Edges a batch of the last step holds at least.
const EDGES_PER_BATCH: usize = 65_536;

impl Mapper for Paired {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.pairing.push(batch)?;
        Ok(RecordBatch::new_empty(edges_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.pairing.held_bytes()
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        commdb_catalog::interrupt::check("dag_edges")?;
        let Some(edges) = self.pairing.next_edges(EDGES_PER_BATCH)? else { return Ok(None) };
        Ok(Some(RecordBatch::try_new(edges_schema(), edge_columns(&edges))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    /// The halves cross their exchanges packed a row per rank and come back as they went
    /// (ranks put in order, each rank's halves in the order given); a rank beyond 32 bits and
    /// damaged bytes are errors.
    #[test]
    fn halves_read_back_from_their_packed_rows() {
        let ranks = [5i64, -3, 0, i64::from(i32::MAX), i64::from(i32::MIN)];
        let mut halves: Vec<Half> = (0..10_000i64)
            .map(|k| Half {
                rank: ranks[(k % 5) as usize],
                ts: (k * 7919) % 1_000 - 500 + if k % 11 == 0 { i64::MAX / 4 } else { 0 },
                id: if k % 3 == 0 { -k } else { k << 33 },
                row: 0,
                kind: if k % 2 == 0 { Kind::Send } else { Kind::Recv },
                bytes: (k % 13) * 1_000_000 - 4,
            })
            .collect();
        let mut want = halves.clone();
        want.sort_by_key(|h| h.rank);
        let batch = packed_halves("test", &mut halves).unwrap();
        assert_eq!(batch.num_rows(), ranks.len());
        let got = halves_of("test", &batch).unwrap();
        assert!(got == want, "the halves did not come back as they went");

        let mut wide = vec![Half { rank: 1 << 40, ..want[0] }];
        match packed_halves("dag_nodes", &mut wide) {
            Ok(b) => panic!("{} rows packed of a rank beyond 32 bits", b.num_rows()),
            Err(e) => assert!(e.to_string().contains("dag_nodes: rank 1099511627776 is beyond 32 bits"), "{e}"),
        }

        // Bytes cut short.
        let one = std::slice::from_ref(&batch);
        let (r, c) = (int64_column(one, 0).unwrap(), int64_column(one, 1).unwrap());
        let bytes = batch.column(2).as_binary::<i64>().value(0);
        let row = RecordBatch::try_new(
            halves_schema(),
            vec![
                Arc::new(Int64Array::from(vec![r.value(0)])),
                Arc::new(Int64Array::from(vec![c.value(0)])),
                Arc::new(arrow::array::LargeBinaryArray::from_iter_values([&bytes[..bytes.len() - 1]])),
            ],
        )
        .unwrap();
        match halves_of("dag_edges", &row) {
            Ok(h) => panic!("{} halves read from damaged bytes", h.len()),
            Err(e) => assert!(e.to_string().contains("dag_edges: the message halves did not read back"), "{e}"),
        }
    }
}
