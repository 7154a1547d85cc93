//! A better placement of ranks on nodes, the action behind PCLVis recommendation O1: the
//! communication graph (ranks as vertices, edges weighted by the messages, or bytes, exchanged
//! in both directions) is cut into k = ceil(ranks / ranks_per_node) parts by METIS's multilevel
//! k-way partitioner (crate `metis`, which builds the METIS sources it ships, no system
//! library; fixed seed, 0.1% imbalance allowed). METIS balances parts only approximately, so a
//! greedy pass then moves ranks out of parts above ranks_per_node, each time the rank whose
//! move loses the least edge weight, into a part with room. The result is kept only when it
//! cuts less weight than the current placement (when the current one fits ranks_per_node):
//! the suggestion is never worse. Parts are named after the current node that holds most of
//! their ranks (largest overlaps first), then after unused current nodes, then `node+N`.
//!
//! The messages are read as they stream, five columns of them (src, dst, bytes and the nodes),
//! folded into the traffic per pair of ranks: the graph is held, never the messages. On a
//! cluster each part of the messages folds its own traffic (`TrafficFold::partials`: a row per
//! rank and per pair it saw), and one task adds the parts up and partitions the graph; the
//! graph is built the same whatever order the messages or the parts come in.
//!
//! Cost: METIS is near-linear in the edges; the balancing pass is O(moves x vertices x degree).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;

use crate::latency::MESSAGES;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::relation::Relation;
use commdb_catalog::fast_hash::FastMap;

/// Held while METIS partitions (its random state is the process's).
static METIS: std::sync::Mutex<()> = std::sync::Mutex::new(());

const REMAP_PARAMS: &[Param] = &[
    MESSAGES,
    param(
        "ranks_per_node",
        Type::Integer { min: 1 },
        ParamDefault::Chosen("the current placement's most ranks on a node"),
        "at most this many ranks on each node of the suggestion",
    ),
    param(
        "weight",
        Type::Choice(&["messages", "bytes"]),
        ParamDefault::Text("messages"),
        "what an edge between two ranks weighs: the messages or the bytes they exchange",
    ),
];

pub const REMAP_SUGGESTION: Function = Function {
    name: "remap_suggestion",
    params: REMAP_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, "").never_null(),
        col("current_node", text, "the node the rank ran on (NULL when the relation does not say)"),
        col("suggested_node", text, "the node the suggestion places it on").never_null(),
    ]),
    description: "a placement of ranks on nodes (at most ranks_per_node each) that cuts less traffic between nodes: METIS multilevel k-way, never worse than the current one",
    make: Make::Table(remap_suggestion),
};

pub const REMAP_SUMMARY: Function = Function {
    name: "remap_summary",
    params: REMAP_PARAMS,
    output: Output::Columns(&[
        col("ranks", int64, "ranks placed").never_null(),
        col("ranks_per_node", int64, "at most this many per node").never_null(),
        col("messages", int64, "messages between distinct ranks").never_null(),
        col("bytes", int64, "their bytes").never_null(),
        col("inter_messages_before", int64, "messages between nodes in the current placement (NULL: unknown)"),
        col("inter_messages_after", int64, "messages between nodes in the suggestion").never_null(),
        col("inter_bytes_before", int64, "bytes between nodes in the current placement (NULL: unknown)"),
        col("inter_bytes_after", int64, "bytes between nodes in the suggestion").never_null(),
        col("reduction", float64, "1 - after / before of the chosen weight"),
        col("kept_current", boolean, "the current placement was kept: no suggestion cut less").never_null(),
    ]),
    description: "inter-node messages and bytes of the current placement and of remap_suggestion's, and the reduction",
    make: Make::Table(remap_summary),
};

/// What the edges weigh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    Messages,
    Bytes,
}

/// The communication graph of a relation and its current placement.
#[derive(Debug)]
pub struct Traffic {
    /// Ranks, ascending.
    pub ranks: Vec<i64>,
    /// Current node of each rank, when the relation says.
    pub current: Vec<Option<String>>,
    /// (rank index a < b) -> (messages, bytes) in both directions.
    pub pairs: BTreeMap<(u32, u32), (i64, i64)>,
    /// Messages and bytes between distinct ranks, for the summary.
    pub messages: i64,
    pub bytes: i64,
}

impl Traffic {
    fn weight(&self, pair: &(i64, i64), w: Weight) -> i64 {
        match w {
            Weight::Messages => pair.0,
            Weight::Bytes => pair.1,
        }
    }

    /// (messages, bytes) between different parts of `part`.
    pub fn inter<T: PartialEq>(&self, part: &[T]) -> (i64, i64) {
        self.pairs
            .iter()
            .filter(|((a, b), _)| part[*a as usize] != part[*b as usize])
            .fold((0, 0), |acc, (_, v)| (acc.0 + v.0, acc.1 + v.1))
    }

    fn cut<T: PartialEq>(&self, part: &[T], w: Weight) -> i64 {
        self.pairs
            .iter()
            .filter(|((a, b), _)| part[*a as usize] != part[*b as usize])
            .map(|(_, v)| self.weight(v, w))
            .sum()
    }

    /// The current placement as part numbers, when every rank's node is known and no node
    /// holds more than `cap` ranks.
    fn current_parts(&self, cap: usize) -> Option<Vec<u32>> {
        let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
        let mut parts = Vec::with_capacity(self.ranks.len());
        for node in &self.current {
            let next = ids.len() as u32;
            parts.push(*ids.entry(node.as_deref()?).or_insert(next));
        }
        let mut size: FastMap<u32, usize> = FastMap::default();
        for p in &parts {
            *size.entry(*p).or_default() += 1;
        }
        size.values().all(|s| *s <= cap).then_some(parts)
    }
}

/// `Traffic` gathered batch by batch, by rank (as a streamed analysis reads its messages).
#[derive(Debug, Default, Clone)]
pub(crate) struct TrafficFold {
    /// Every rank seen, with the first node the rows give it.
    nodes: FastMap<i64, Option<String>>,
    /// (rank a < b) -> (messages, bytes) in both directions.
    pairs: FastMap<(i64, i64), (i64, i64)>,
    messages: i64,
    bytes: i64,
}

impl TrafficFold {
    /// Add a batch's rows: src, dst, bytes at `idx`, src_node and dst_node at `nodes`.
    pub fn add(&mut self, batch: &RecordBatch, idx: &[usize], nodes: Option<(usize, usize)>) -> Result<()> {
        let one = std::slice::from_ref(batch);
        let (src, dst, bytes) = (int64_column(one, idx[0])?, int64_column(one, idx[1])?, int64_column(one, idx[2])?);
        let node_columns = nodes
            .map(|(sn, dn)| Ok::<_, datafusion::error::DataFusionError>((text_column(one, sn)?, text_column(one, dn)?)))
            .transpose()?;
        for row in 0..src.len() {
            for (k, rank) in [&src, &dst].into_iter().enumerate() {
                if !rank.is_valid(row) {
                    continue;
                }
                let node = self.nodes.entry(rank.value(row)).or_default();
                if let Some(columns) = &node_columns {
                    let column = if k == 0 { &columns.0 } else { &columns.1 };
                    if node.is_none() && column.is_valid(row) {
                        *node = Some(column.value(row).to_string());
                    }
                }
            }
            if src.is_null(row) || dst.is_null(row) {
                continue;
            }
            let (a, b) = (src.value(row), dst.value(row));
            if a == b {
                continue;
            }
            let bytes = if bytes.is_valid(row) { bytes.value(row).max(0) } else { 0 };
            let e = self.pairs.entry((a.min(b), a.max(b))).or_default();
            e.0 += 1;
            e.1 += bytes;
            self.messages += 1;
            self.bytes += bytes;
        }
        Ok(())
    }

    /// Bytes of its ranks and pairs.
    pub fn held_bytes(&self) -> usize {
        64 * self.nodes.capacity() + 40 * self.pairs.capacity()
    }

    /// Its ranks with their nodes, its pairs and its totals (messages, bytes): a part's, for a
    /// merge (`absorb`).
    #[allow(clippy::type_complexity)]
    pub fn parts(&self) -> (Vec<(i64, Option<&str>)>, Vec<((i64, i64), (i64, i64))>, (i64, i64)) {
        let nodes = self.nodes.iter().map(|(r, n)| (*r, n.as_deref())).collect();
        let pairs = self.pairs.iter().map(|(k, v)| (*k, *v)).collect();
        (nodes, pairs, (self.messages, self.bytes))
    }

    /// Add a part's rank (with the node its rows gave it, if any), pair or totals.
    pub fn absorb_rank(&mut self, rank: i64, node: Option<&str>) {
        let known = self.nodes.entry(rank).or_default();
        if known.is_none() {
            *known = node.map(str::to_string);
        }
    }

    pub fn absorb_pair(&mut self, pair: (i64, i64), messages: i64, bytes: i64) {
        let e = self.pairs.entry(pair).or_default();
        e.0 += messages;
        e.1 += bytes;
    }

    pub fn absorb_totals(&mut self, messages: i64, bytes: i64) {
        self.messages += messages;
        self.bytes += bytes;
    }

    /// Its state as rows of [`traffic_partials`]: a row per rank (kind 0, with its node), per
    /// pair (kind 1) and one of the totals (kind 2).
    pub fn partials(&self) -> Result<RecordBatch> {
        let rows = self.nodes.len() + self.pairs.len() + 1;
        let mut columns: [Vec<i64>; 5] = std::array::from_fn(|_| Vec::with_capacity(rows));
        let mut node: Vec<Option<&str>> = Vec::with_capacity(rows);
        let mut push = |row: [i64; 5], n| {
            for (column, v) in columns.iter_mut().zip(row) {
                column.push(v);
            }
            node.push(n);
        };
        for (&rank, n) in &self.nodes {
            push([0, rank, 0, 0, 0], n.as_deref());
        }
        for (&(a, b), &(messages, bytes)) in &self.pairs {
            push([1, a, b, messages, bytes], None);
        }
        push([2, 0, 0, self.messages, self.bytes], None);
        let mut arrays: Vec<ArrayRef> =
            columns.into_iter().map(|c| Arc::new(Int64Array::from(c)) as ArrayRef).collect();
        arrays.push(Arc::new(StringArray::from(node)));
        Ok(RecordBatch::try_new(traffic_partials(), arrays)?)
    }

    /// Add a part's rows ([`TrafficFold::partials`]).
    pub fn absorb(&mut self, batch: &RecordBatch) -> Result<()> {
        let one = std::slice::from_ref(batch);
        let ints: Vec<Int64Array> = (0..5).map(|c| int64_column(one, c)).collect::<Result<_>>()?;
        let node = text_column(one, 5)?;
        for i in 0..batch.num_rows() {
            let v = |c: usize| ints[c].value(i);
            match v(0) {
                0 => self.absorb_rank(v(1), node.is_valid(i).then(|| node.value(i))),
                1 => self.absorb_pair((v(1), v(2)), v(3), v(4)),
                2 => self.absorb_totals(v(3), v(4)),
                kind => return exec_err!("remap: a partial of unknown kind {kind}"),
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Traffic {
        let mut ranks: Vec<i64> = self.nodes.keys().copied().collect();
        ranks.sort_unstable();
        let index: FastMap<i64, u32> = ranks.iter().enumerate().map(|(i, r)| (*r, i as u32)).collect();
        let mut nodes = self.nodes;
        let current = ranks.iter().map(|r| nodes.remove(r).flatten()).collect();
        let pairs = self.pairs.into_iter().map(|((a, b), v)| ((index[&a], index[&b]), v)).collect();
        Traffic { ranks, current, pairs, messages: self.messages, bytes: self.bytes }
    }
}

/// The rows a part of the messages gives on a cluster ([`TrafficFold::partials`]).
fn traffic_partials() -> SchemaRef {
    let i = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        i("kind"),
        i("a"),
        i("b"),
        i("messages"),
        i("bytes"),
        Field::new("node", DataType::Utf8, true),
    ]))
}

/// Part of every rank: METIS k-way, then at most `cap` ranks per part.
pub fn partition(t: &Traffic, cap: usize, w: Weight) -> Result<Vec<u32>> {
    let n = t.ranks.len();
    let k = n.div_ceil(cap.max(1));
    if k <= 1 {
        return Ok(vec![0; n]);
    }
    // METIS weights are 32-bit: scale so the largest edge fits.
    let max = t.pairs.values().map(|v| t.weight(v, w)).max().unwrap_or(1).max(1);
    let scale = (max / (1 << 24)).max(1);
    let mut adjacency: Vec<Vec<(u32, i64)>> = vec![Vec::new(); n];
    for ((a, b), v) in &t.pairs {
        let wt = (t.weight(v, w) / scale).max(1);
        adjacency[*a as usize].push((*b, wt));
        adjacency[*b as usize].push((*a, wt));
    }
    // The same graph whatever order the messages came in.
    for list in &mut adjacency {
        list.sort_unstable();
    }
    let mut xadj: Vec<metis::Idx> = Vec::with_capacity(n + 1);
    let (mut adjncy, mut adjwgt): (Vec<metis::Idx>, Vec<metis::Idx>) = (Vec::new(), Vec::new());
    xadj.push(0);
    for list in &adjacency {
        for (v, wt) in list {
            adjncy.push(*v as metis::Idx);
            adjwgt.push(*wt as metis::Idx);
        }
        xadj.push(adjncy.len() as metis::Idx);
    }
    let mut part = vec![0 as metis::Idx; n];
    let graph = metis::Graph::new(1, k as metis::Idx, &xadj, &adjncy)
        .map_err(|e| datafusion::error::DataFusionError::Execution(format!("remap: METIS: {e}")))?
        .set_adjwgt(&adjwgt)
        .set_option(metis::option::Seed(1))
        .set_option(metis::option::UFactor(1));
    // METIS draws from one random state for the whole process: two partitions at once (a
    // query that reads remap_suggestion twice) would interleave their draws and answer
    // differently from run to run.
    let partitioned = {
        let _one_at_a_time = METIS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        graph.part_kway(&mut part)
    };
    if let Err(e) = partitioned {
        return exec_err!("remap: METIS could not partition the graph: {e}");
    }
    let mut part: Vec<u32> = part.into_iter().map(|p| p as u32).collect();
    rebalance(&mut part, &adjacency, k, cap);
    // Number parts in order of their lowest rank, so the result reads the same for any labels.
    let mut label: FastMap<u32, u32> = FastMap::default();
    for p in part.iter_mut() {
        let next = label.len() as u32;
        *p = *label.entry(*p).or_insert(next);
    }
    Ok(part)
}

/// Move ranks out of parts above `cap`, each time the move that loses the least weight.
fn rebalance(part: &mut [u32], adjacency: &[Vec<(u32, i64)>], k: usize, cap: usize) {
    let mut size = vec![0usize; k];
    for p in part.iter() {
        size[*p as usize] += 1;
    }
    while let Some(over) = (0..k).find(|&p| size[p] > cap) {
        let mut best: Option<(i64, usize, u32)> = None;
        for v in (0..part.len()).filter(|&v| part[v] as usize == over) {
            let mut to_part: FastMap<u32, i64> = FastMap::default();
            for (u, wt) in &adjacency[v] {
                *to_part.entry(part[*u as usize]).or_default() += wt;
            }
            let inside = to_part.get(&(over as u32)).copied().unwrap_or(0);
            for target in (0..k).filter(|&p| size[p] < cap) {
                let gain = to_part.get(&(target as u32)).copied().unwrap_or(0) - inside;
                if best.is_none_or(|b| gain > b.0) {
                    best = Some((gain, v, target as u32));
                }
            }
        }
        let Some((_, v, target)) = best else { break };
        size[over] -= 1;
        size[target as usize] += 1;
        part[v] = target;
    }
}

/// Node names for parts: the current node holding most of a part's ranks, then unused nodes.
fn name_parts(t: &Traffic, part: &[u32]) -> Vec<String> {
    let k = part.iter().max().map_or(0, |m| *m as usize + 1);
    let mut overlap: BTreeMap<(u32, &str), usize> = BTreeMap::new();
    for (v, p) in part.iter().enumerate() {
        if let Some(node) = t.current[v].as_deref() {
            *overlap.entry((*p, node)).or_default() += 1;
        }
    }
    let mut by_size: Vec<((u32, &str), usize)> = overlap.into_iter().collect();
    by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut names: Vec<Option<String>> = vec![None; k];
    let mut used: BTreeSet<&str> = BTreeSet::new();
    for ((p, node), _) in by_size {
        if names[p as usize].is_none() && !used.contains(node) {
            names[p as usize] = Some(node.to_string());
            used.insert(node);
        }
    }
    let all: BTreeSet<&str> = t.current.iter().flatten().map(String::as_str).collect();
    let mut spare = all.difference(&used).map(|s| s.to_string()).collect::<Vec<_>>().into_iter();
    let mut fresh = 0;
    names
        .into_iter()
        .map(|n| {
            n.or_else(|| spare.next()).unwrap_or_else(|| {
                fresh += 1;
                format!("node+{fresh}")
            })
        })
        .collect()
}

/// The suggested node of every rank, and whether the current placement was kept.
pub fn suggest(t: &Traffic, cap: usize, w: Weight) -> Result<(Vec<String>, bool)> {
    let part = partition(t, cap, w)?;
    if let Some(current) = t.current_parts(cap)
        && t.cut(&current, w) <= t.cut(&part, w)
    {
        return Ok((t.current.iter().map(|n| n.clone().unwrap_or_default()).collect(), true));
    }
    let names = name_parts(t, &part);
    Ok((part.iter().map(|p| names[*p as usize].clone()).collect(), false))
}

/// Arguments shared by the two functions.
struct Call {
    cap: Option<usize>,
    weight: Weight,
    idx: Vec<usize>,
    nodes: Option<(usize, usize)>,
}

arguments! {
    /// The arguments of both remapping functions (REMAP_PARAMS).
    struct RemapArgs(REMAP_SUGGESTION, REMAP_SUMMARY) {
        rel: Relation,
        ranks_per_node: Option<usize>,
        weight: String,
    }
}

fn remap_call(a: &Args) -> Result<(Relation, Call)> {
    let function = a.function;
    let RemapArgs { rel, ranks_per_node: cap, weight } = RemapArgs::read(a)?;
    let weight = match weight.as_str() {
        "bytes" => Weight::Bytes,
        _ => Weight::Messages,
    };
    let idx = rel.columns(function, &["src", "dst", "bytes"])?;
    let schema = rel.schema();
    let nodes = match (schema.index_of("src_node"), schema.index_of("dst_node")) {
        (Ok(a), Ok(b)) => Some((a, b)),
        _ => None,
    };
    if cap.is_none() && nodes.is_none() {
        return plan_err!(
            "{function}: {} has no src_node/dst_node columns to tell the current ranks per node; give ranks_per_node",
            rel.described()
        );
    }
    Ok((rel, Call { cap, weight, idx, nodes }))
}

impl Call {
    /// The columns read (src, dst, bytes, and src_node, dst_node when present), and the call
    /// over them as projected.
    fn projected(&self) -> (Vec<usize>, Call) {
        let mut read = self.idx.clone();
        if let Some((a, b)) = self.nodes {
            read.extend([a, b]);
        }
        let nodes = self.nodes.map(|_| (3, 4));
        (read, Call { cap: self.cap, weight: self.weight, idx: vec![0, 1, 2], nodes })
    }

    /// The relation `rel` read as this call needs it: its five columns, folded into the
    /// traffic between ranks as they stream (a row per pair is held, not the messages), then
    /// `answer` made of the traffic. On a cluster a task per part of the messages folds its
    /// traffic, and one task adds the parts' up and answers.
    fn streamed(
        self,
        out: SchemaRef,
        rel: commdb_analysis::relation::Relation,
        answer: impl Fn(&Call, Traffic) -> Result<RecordBatch> + Send + Sync + 'static,
    ) -> Derived {
        let (read, call) = self.projected();
        let answer = Arc::new(answer);
        let call = Arc::new(call);
        let schema = out.clone();
        let mapper = |partial: bool| -> commdb_analysis::stream::Prepare {
            let (call, answer, schema) = (call.clone(), answer.clone(), schema.clone());
            Arc::new(move |_| {
                Ok(Box::new(TrafficMapper {
                    fold: TrafficFold::default(),
                    call: call.clone(),
                    answer: answer.clone(),
                    schema: if partial { traffic_partials() } else { schema.clone() },
                    partial,
                }) as Box<dyn commdb_analysis::stream::Mapper>)
            })
        };
        let (whole, partial) = (mapper(false), mapper(true));
        let merge: commdb_analysis::derived::Compute = Arc::new(move |partials| {
            let mut fold = TrafficFold::default();
            for batch in partials {
                fold.absorb(batch)?;
            }
            Ok(vec![answer(&call, fold.finish())?])
        });
        let work = commdb_analysis::plan::Work::Streamed(partial);
        let spread = commdb_analysis::derived::Spread::Merged { schema: traffic_partials(), work, merge };
        Derived::streamed(out, vec![(rel, Some(read))], whole).spreading(spread)
    }

    fn run(&self, t: Traffic, function: &str) -> Result<(Traffic, usize, Vec<String>, bool)> {
        let cap = match self.cap {
            Some(c) => c,
            None => {
                let mut per: FastMap<&str, usize> = FastMap::default();
                for n in t.current.iter().flatten() {
                    *per.entry(n.as_str()).or_default() += 1;
                }
                match per.values().max() {
                    Some(m) => *m,
                    None if t.ranks.is_empty() => 1,
                    None => return exec_err!("{function}: no rank has a known node; give ranks_per_node"),
                }
            }
        };
        let (suggested, kept) = suggest(&t, cap, self.weight)?;
        Ok((t, cap, suggested, kept))
    }
}

/// Folds the messages into the traffic between ranks, and answers when they end (or gives
/// its part's traffic, when `partial`).
struct TrafficMapper<F> {
    fold: TrafficFold,
    call: Arc<Call>,
    answer: Arc<F>,
    schema: SchemaRef,
    partial: bool,
}

impl<F: Fn(&Call, Traffic) -> Result<RecordBatch> + Send + Sync> commdb_analysis::stream::Mapper for TrafficMapper<F> {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.fold.add(batch, &self.call.idx, self.call.nodes)?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.fold.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if self.partial {
            return Ok(vec![self.fold.partials()?]);
        }
        let t = std::mem::take(&mut self.fold).finish();
        Ok(vec![(self.answer)(&self.call, t)?])
    }
}

fn remap_suggestion(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let (rel, c) = remap_call(a)?;
    let out = a.schema();
    let s = out.clone();
    Ok(Arc::new(c.streamed(out, rel, move |c, t| {
        let (t, _, suggested, _) = c.run(t, "remap_suggestion")?;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(t.ranks.clone())),
            Arc::new(StringArray::from(t.current.clone())),
            Arc::new(StringArray::from(suggested)),
        ];
        Ok(RecordBatch::try_new(s.clone(), columns)?)
    })))
}

fn remap_summary(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let (rel, c) = remap_call(a)?;
    let out = a.schema();
    let s = out.clone();
    let weight = c.weight;
    Ok(Arc::new(c.streamed(out, rel, move |c, t| {
        let (t, cap, suggested, kept) = c.run(t, "remap_summary")?;
        let before = t.current.iter().all(Option::is_some).then(|| t.inter(&t.current));
        let after = t.inter(&suggested);
        let reduction = before.map(|b| {
            let (b, a) = match weight {
                Weight::Messages => (b.0, after.0),
                Weight::Bytes => (b.1, after.1),
            };
            if b > 0 { 1.0 - a as f64 / b as f64 } else { 0.0 }
        });
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![t.ranks.len() as i64])),
            Arc::new(Int64Array::from(vec![cap as i64])),
            Arc::new(Int64Array::from(vec![t.messages])),
            Arc::new(Int64Array::from(vec![t.bytes])),
            Arc::new(Int64Array::from(vec![before.map(|b| b.0)])),
            Arc::new(Int64Array::from(vec![after.0])),
            Arc::new(Int64Array::from(vec![before.map(|b| b.1)])),
            Arc::new(Int64Array::from(vec![after.1])),
            Arc::new(Float64Array::from(vec![reduction])),
            Arc::new(arrow::array::BooleanArray::from(vec![kept])),
        ];
        Ok(RecordBatch::try_new(s.clone(), columns)?)
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message: src, dst, bytes, src_node, dst_node.
    type Row<'a> = (Option<i64>, Option<i64>, i64, Option<&'a str>, Option<&'a str>);

    /// Messages as one batch.
    fn messages(rows: &[Row]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("src", DataType::Int64, true),
            Field::new("dst", DataType::Int64, true),
            Field::new("bytes", DataType::Int64, true),
            Field::new("src_node", DataType::Utf8, true),
            Field::new("dst_node", DataType::Utf8, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|r| Some(r.2)).collect::<Vec<_>>())),
            Arc::new(StringArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
            Arc::new(StringArray::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    fn fold(batches: &[RecordBatch]) -> TrafficFold {
        let mut f = TrafficFold::default();
        for b in batches {
            f.add(b, &[0, 1, 2], Some((3, 4))).unwrap();
        }
        f
    }

    fn seen(t: &Traffic) -> String {
        format!("{:?} {:?} {:?} {} {}", t.ranks, t.current, t.pairs, t.messages, t.bytes)
    }

    #[test]
    fn parts_added_up_are_the_whole_traffic() {
        let a = messages(&[
            (Some(0), Some(1), 10, Some("n0"), Some("n0")),
            (Some(1), Some(2), 5, Some("n0"), None),
            (Some(2), Some(2), 7, None, None),
        ]);
        let b = messages(&[
            (Some(1), Some(0), 3, Some("n0"), Some("n0")),
            (Some(2), Some(3), 4, Some("n1"), Some("n1")),
            (None, Some(4), 1, None, Some("n2")),
        ]);
        let traffic = fold(&[a.clone(), b.clone()]).finish();
        // Rank 2's node comes from the second part's rows; rank 4 is seen without a partner.
        assert_eq!(traffic.ranks, [0, 1, 2, 3, 4]);
        assert_eq!(traffic.current[2].as_deref(), Some("n1"));
        assert_eq!(traffic.current[4].as_deref(), Some("n2"));
        let whole = seen(&traffic);
        for order in [[&a, &b], [&b, &a]] {
            let mut merged = TrafficFold::default();
            for part in order {
                merged.absorb(&fold(std::slice::from_ref(part)).partials().unwrap()).unwrap();
            }
            assert_eq!(seen(&merged.finish()), whole);
        }
    }

    #[test]
    fn a_partial_of_an_unknown_kind_is_an_error() {
        let mut rows = fold(&[messages(&[(Some(0), Some(1), 1, None, None)])]).partials().unwrap();
        let mut columns = rows.columns().to_vec();
        columns[0] = Arc::new(Int64Array::from(vec![9; rows.num_rows()]));
        rows = RecordBatch::try_new(rows.schema(), columns).unwrap();
        let err = TrafficFold::default().absorb(&rows).unwrap_err().to_string();
        assert!(err.contains("unknown kind 9"), "{err}");
    }
}
