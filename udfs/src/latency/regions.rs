//! Process regions, after PCLVis section 4.2. Ranks that exchanged at least one message are
//! neighbours in an undirected communication graph; h(p, q) is the hop distance (each process
//! counted once in p's correlation tree, at its shallowest depth: a breadth-first search).
//! With R(p, q) = 1 / h(p, q)^2 and w(p, q) = R(p, q) / sum_k R(p, k), the free-energy
//! distance is D(p, q) = -ln w(p, q), symmetrised as (D(p, q) + D(q, p)) / 2. Since h is
//! symmetric this is (ln S_p + ln S_q) / 2 + 2 ln h(p, q) with S_p = sum_k 1 / h(p, k)^2,
//! which this module computes without storing h: one parallel pass of breadth-first searches
//! for S, one for the condensed distance matrix. Unreachable pairs have no finite distance.
//!
//! Regions are found by average-linkage agglomerative clustering (kodama's nearest-neighbour
//! chain) of each connected component separately, so components never merge. Where to cut
//! the dendrogram: with `threshold => t`, the paper's fixed rule (merges at most t apart; the
//! paper uses 2). A fixed threshold does not carry over between sizes: S_p grows with the
//! number of reachable ranks, so on a 256-rank stencil every distance exceeds 2 and the rule
//! leaves one region per rank. By default the cut is scale-free and follows the paper's second
//! stop rule (stop when the clusters to merge exchange hardly any messages): each component is
//! cut at the level of its dendrogram whose regions have the highest modularity (Newman and
//! Girvan), with ranks linked by the messages they exchanged: a region keeps a merge when more
//! messages run between its two halves than their shares of all messages would give by chance.
//! This gives Table 1's two regions, recovers planted groups at any size, and keeps one region
//! when traffic has no group structure (all-to-all). Cost: O(n (n + m)) for the searches,
//! O(n^2) time and n^2 / 2 doubles of memory for the clustering of a component of n ranks, and
//! O(m log n) for the modularity of every level.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use rayon::prelude::*;

use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use crate::latency::{Baseline, BaselineArgs, CriteriaTable, MESSAGES, MessageIndices};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::int64_column;
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64};
use commdb_analysis::derived::{Compute, Derived};
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::relation::{Projected, Relation};
use commdb_analysis::stream::{Mapper, Prepare};

/// The undirected communication graph over the ranks that appear in a relation.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Ranks, ascending; vertex i is `ranks[i]`.
    pub ranks: Vec<i64>,
    /// Adjacency lists (sorted, no self loops).
    pub adjacent: Vec<Vec<u32>>,
    /// Messages exchanged (both directions) with each neighbour, aligned with `adjacent`.
    pub weight: Vec<Vec<f64>>,
}

impl Graph {
    /// The graph of (src, dst) pairs, one per message.
    pub fn from_pairs(pairs: impl Iterator<Item = (i64, i64)>) -> Self {
        Graph::from_counted_pairs(pairs.map(|(a, b)| (a, b, 1)))
    }

    /// The graph of (src, dst, messages) rows: the messages of a pair, in either direction,
    /// weigh its edge.
    pub fn from_counted_pairs(pairs: impl Iterator<Item = (i64, i64, i64)>) -> Self {
        let mut edges: BTreeMap<(i64, i64), f64> = BTreeMap::new();
        let mut ranks: BTreeSet<i64> = BTreeSet::new();
        for (a, b, n) in pairs {
            ranks.insert(a);
            ranks.insert(b);
            if a != b {
                *edges.entry((a.min(b), a.max(b))).or_default() += n as f64;
            }
        }
        let ranks: Vec<i64> = ranks.into_iter().collect();
        let index: HashMap<i64, u32> = ranks.iter().enumerate().map(|(i, r)| (*r, i as u32)).collect();
        let mut adjacent = vec![Vec::new(); ranks.len()];
        let mut weight = vec![Vec::new(); ranks.len()];
        for ((a, b), w) in edges {
            let (ia, ib) = (index[&a], index[&b]);
            adjacent[ia as usize].push(ib);
            adjacent[ib as usize].push(ia);
            weight[ia as usize].push(w);
            weight[ib as usize].push(w);
        }
        Graph { ranks, adjacent, weight }
    }

    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Hop distances from `source` (0 for itself, u32::MAX when unreachable).
    fn bfs(&self, source: usize, dist: &mut [u32], queue: &mut VecDeque<u32>) {
        dist.fill(u32::MAX);
        dist[source] = 0;
        queue.clear();
        queue.push_back(source as u32);
        while let Some(v) = queue.pop_front() {
            let d = dist[v as usize] + 1;
            for &w in &self.adjacent[v as usize] {
                if dist[w as usize] == u32::MAX {
                    dist[w as usize] = d;
                    queue.push_back(w);
                }
            }
        }
    }

    /// Connected components, each a sorted list of vertices; ordered by their first vertex.
    pub fn components(&self) -> Vec<Vec<usize>> {
        let mut seen = vec![false; self.len()];
        let mut out = Vec::new();
        for start in 0..self.len() {
            if seen[start] {
                continue;
            }
            let mut comp = vec![start];
            seen[start] = true;
            let mut i = 0;
            while i < comp.len() {
                for &w in &self.adjacent[comp[i]] {
                    if !seen[w as usize] {
                        seen[w as usize] = true;
                        comp.push(w as usize);
                    }
                }
                i += 1;
            }
            comp.sort_unstable();
            out.push(comp);
        }
        out
    }

    /// ln S_p for every vertex: S_p = sum over reachable k != p of 1 / h(p, k)^2.
    fn log_strength(&self) -> Vec<f64> {
        (0..self.len())
            .into_par_iter()
            .map_init(
                || (vec![0u32; self.len()], VecDeque::new()),
                |(dist, queue), p| {
                    self.bfs(p, dist, queue);
                    let s: f64 =
                        dist.iter().filter(|d| **d != 0 && **d != u32::MAX).map(|&d| 1.0 / f64::from(d * d)).sum();
                    if s > 0.0 { s.ln() } else { f64::NAN }
                },
            )
            .collect()
    }

    /// The symmetric free-energy distance of every reachable pair, as (p, q, distance) rows
    /// in both orders, or the condensed matrix of one component.
    pub fn distances(&self) -> Distances<'_> {
        Distances { log_s: self.log_strength(), graph: self }
    }
}

/// Free-energy distances of a graph.
#[derive(Debug)]
pub struct Distances<'g> {
    graph: &'g Graph,
    log_s: Vec<f64>,
}

impl Distances<'_> {
    fn pair(&self, p: usize, q: usize, h: u32) -> f64 {
        (self.log_s[p] + self.log_s[q]) / 2.0 + 2.0 * f64::from(h).ln()
    }

    /// (p, q, distance) for every reachable ordered pair p != q, by p then q.
    pub fn rows(&self) -> Vec<(usize, usize, f64)> {
        let g = self.graph;
        (0..g.len())
            .into_par_iter()
            .map_init(
                || (vec![0u32; g.len()], VecDeque::new()),
                |(dist, queue), p| {
                    g.bfs(p, dist, queue);
                    dist.iter()
                        .enumerate()
                        .filter(|(q, d)| *q != p && **d != u32::MAX)
                        .map(|(q, &d)| (p, q, self.pair(p, q, d)))
                        .collect::<Vec<_>>()
                },
            )
            .flatten()
            .collect()
    }

    /// The condensed upper-triangle matrix of one component (vertices sorted ascending).
    pub fn condensed(&self, component: &[usize]) -> Vec<f64> {
        let g = self.graph;
        let n = component.len();
        let local: HashMap<usize, usize> = component.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        let rows: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .map_init(
                || (vec![0u32; g.len()], VecDeque::new()),
                |(dist, queue), i| {
                    let p = component[i];
                    g.bfs(p, dist, queue);
                    component[i + 1..].iter().map(|&q| self.pair(p, q, dist[q])).collect()
                },
            )
            .collect();
        debug_assert!(local.len() == n);
        rows.into_iter().flatten().collect()
    }
}

/// One merge of the dendrogram, in rank terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    pub a: i64,
    pub b: i64,
    pub distance: f64,
    pub size: i64,
}

/// Average-linkage dendrogram of every component; merges ordered by distance. Cluster ids: a
/// single rank is its rank number; the cluster made by merge k is max_rank + 1 + k.
pub fn dendrogram(graph: &Graph) -> Vec<Merge> {
    let d = graph.distances();
    let components = graph.components();
    let next_id = graph.ranks.last().copied().unwrap_or(-1) + 1;
    // (distance, component, local step, a local, b local, size)
    let mut steps: Vec<(f64, usize, usize, usize, usize, usize)> = components
        .par_iter()
        .enumerate()
        .filter(|(_, c)| c.len() > 1)
        .flat_map_iter(|(ci, comp)| {
            let mut m = d.condensed(comp);
            let den = kodama::linkage(&mut m, comp.len(), kodama::Method::Average);
            den.steps()
                .iter()
                .enumerate()
                .map(|(k, s)| (s.dissimilarity, ci, k, s.cluster1, s.cluster2, s.size))
                .collect::<Vec<_>>()
        })
        .collect();
    steps.sort_by(|x, y| x.0.total_cmp(&y.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    let mut global: HashMap<(usize, usize), i64> = HashMap::new();
    let mut out = Vec::with_capacity(steps.len());
    for (k, &(dist, ci, local_step, a, b, size)) in steps.iter().enumerate() {
        let comp = &components[ci];
        let id = |x: usize| if x < comp.len() { graph.ranks[comp[x]] } else { global[&(ci, x - comp.len())] };
        let (ia, ib) = (id(a), id(b));
        out.push(Merge { a: ia.min(ib), b: ia.max(ib), distance: dist, size: size as i64 });
        global.insert((ci, local_step), next_id + k as i64);
    }
    out
}

/// Where to cut the dendrogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cut {
    /// Keep the merges at most this far apart (the paper's rule with 2).
    Threshold(f64),
    /// In each component, the level whose regions have the highest modularity.
    Modularity,
}

/// For every merge, whether the modularity rule keeps it: in each component, the merges up
/// to the level of highest modularity Q = sum over regions of (w_in / W - (d / 2W)^2), w_in the
/// messages within the region, d the messages its ranks sent or received and W all messages.
/// Merging A and B changes Q by w_AB / W - d_A d_B / (2 W^2), so one pass over the merges (in
/// distance order, with cluster adjacencies merged small into large) finds every level's Q.
fn modularity_keeps(graph: &Graph, merges: &[Merge]) -> Vec<bool> {
    let n = graph.len();
    let next_id = graph.ranks.last().copied().unwrap_or(-1) + 1;
    let vertex: HashMap<i64, usize> = graph.ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let node = |id: i64| if id < next_id { vertex[&id] } else { n + (id - next_id) as usize };
    let total: f64 = graph.weight.iter().flatten().sum::<f64>() / 2.0;
    let mut keep = vec![false; merges.len()];
    if total <= 0.0 {
        return keep;
    }
    // Per cluster slot: degree and adjacency (cluster slot -> weight); a merge's slot is n + k.
    let mut degree: Vec<f64> = graph.weight.iter().map(|w| w.iter().sum()).collect();
    degree.resize(n + merges.len(), 0.0);
    let mut adjacency: Vec<HashMap<usize, f64>> = (0..n)
        .map(|v| graph.adjacent[v].iter().zip(&graph.weight[v]).map(|(u, w)| (*u as usize, *w)).collect())
        .collect();
    adjacency.resize_with(n + merges.len(), HashMap::new);
    let mut component: Vec<usize> = vec![0; n + merges.len()];
    for (c, vs) in graph.components().iter().enumerate() {
        for v in vs {
            component[*v] = c;
        }
    }
    // Per component: running change of Q, best change so far and the merges up to it.
    let mut running: HashMap<usize, (f64, f64, usize)> = HashMap::new();
    let mut order: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, m) in merges.iter().enumerate() {
        let (a, b, to) = (node(m.a), node(m.b), n + k);
        let w_ab = adjacency[a].get(&b).copied().unwrap_or(0.0);
        let delta = w_ab / total - degree[a] * degree[b] / (2.0 * total * total);
        let (small, large) = if adjacency[a].len() < adjacency[b].len() { (a, b) } else { (b, a) };
        let mut merged = std::mem::take(&mut adjacency[large]);
        for (other, w) in std::mem::take(&mut adjacency[small]) {
            *merged.entry(other).or_default() += w;
        }
        merged.remove(&a);
        merged.remove(&b);
        for (&other, &w) in &merged {
            let back = &mut adjacency[other];
            back.remove(&a);
            back.remove(&b);
            back.insert(to, w);
        }
        adjacency[to] = merged;
        degree[to] = degree[a] + degree[b];
        component[to] = component[a];
        let c = component[a];
        let r = running.entry(c).or_insert((0.0, 0.0, 0));
        r.0 += delta;
        let list = order.entry(c).or_default();
        list.push(k);
        // Ties keep the coarser level: as good a division with fewer regions.
        if r.0 >= r.1 - 1e-12 {
            r.1 = r.0.max(r.1);
            r.2 = list.len();
        }
    }
    for (c, list) in order {
        let best = running.get(&c).map_or(0, |r| r.2);
        for &k in &list[..best] {
            keep[k] = true;
        }
    }
    keep
}

/// Region of every rank of the graph (by vertex), numbered from 0 in order of lowest rank.
pub fn regions(graph: &Graph, cut: Cut) -> Vec<usize> {
    let merges = dendrogram(graph);
    let keep: Vec<bool> = match cut {
        Cut::Modularity => modularity_keeps(graph, &merges),
        Cut::Threshold(t) => merges.iter().map(|m| m.distance <= t).collect(),
    };
    let next_id = graph.ranks.last().copied().unwrap_or(-1) + 1;
    let n = graph.len();
    let mut parent: Vec<usize> = (0..n + merges.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let vertex: HashMap<i64, usize> = graph.ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let node = |id: i64| if id < next_id { vertex[&id] } else { n + (id - next_id) as usize };
    for (k, m) in merges.iter().enumerate() {
        if !keep[k] {
            continue;
        }
        let (a, b) = (find(&mut parent, node(m.a)), find(&mut parent, node(m.b)));
        parent[a] = n + k;
        parent[b] = n + k;
    }
    let mut number: BTreeMap<usize, usize> = BTreeMap::new();
    let roots: Vec<usize> = (0..n).map(|v| find(&mut parent, v)).collect();
    let mut out = vec![0; n];
    for v in 0..n {
        let next = number.len();
        out[v] = *number.entry(roots[v]).or_insert(next);
    }
    out
}

/// The communication graph of a relation with src and dst columns.
/// The communication graph of a relation of messages, as an input of a row per (src, dst)
/// pair and its messages, aggregated as the relation streams by (`graph_of` reads it): the
/// graph analyses hold a row per pair, never the messages.
fn pairs_of(relation: &Relation) -> Result<Projected> {
    use datafusion::functions_aggregate::expr_fn::count;
    use datafusion::logical_expr::{LogicalPlanBuilder, col, lit};
    let source = datafusion::datasource::provider_as_source(relation.provider.clone());
    let plan = LogicalPlanBuilder::scan(relation.reference.clone(), source, None)?
        .filter(col("src").is_not_null().and(col("dst").is_not_null()))?
        .aggregate(vec![col("src"), col("dst")], vec![count(lit(1)).alias("messages")])?
        .build()?;
    let pairs = Relation {
        reference: datafusion::common::TableReference::bare(format!("pairs of {}", relation.reference)),
        provider: Arc::new(datafusion::datasource::ViewTable::new(plan, None)),
    };
    Ok((pairs, None))
}

/// The graph of `pairs_of`'s rows.
fn graph_of(batches: &[RecordBatch]) -> Result<Graph> {
    let (s, d, n) = (int64_column(batches, 0)?, int64_column(batches, 1)?, int64_column(batches, 2)?);
    Ok(Graph::from_counted_pairs((0..s.len()).map(|i| (s.value(i), d.value(i), n.value(i)))))
}

const THRESHOLD: Param = param(
    "threshold",
    Type::Number { min: 0.0 },
    ParamDefault::Chosen("the level of highest modularity"),
    "cut the dendrogram at this distance (the paper's fixed rule) instead of where modularity is best",
);

pub const PROCESS_DISTANCE: Function = Function {
    name: "process_distance",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("p", int64, "a rank").never_null(),
        col("q", int64, "a rank it communicates with (p < q)").never_null(),
        col("distance", float64, "free-energy distance of p and q in the communication graph").never_null(),
    ]),
    description: "free-energy distance of every pair of ranks connected in the communication graph (PCLVis 4.2)",
    make: Make::Table(process_distance),
};

pub const PROCESS_REGIONS: Function = Function {
    name: "process_regions",
    params: &[MESSAGES, THRESHOLD],
    output: Output::Columns(&[
        col("rank", int64, "").never_null(),
        col("region", int64, "communication region, numbered from 0 in order of lowest rank").never_null(),
        col("region_size", int64, "ranks in the region").never_null(),
    ]),
    description: "communication regions: average-linkage clusters of ranks, cut at the dendrogram level of highest message-graph modularity (or at threshold, the paper's fixed rule) (PCLVis 4.2)",
    make: Make::Table(process_regions),
};

pub const PROCESS_DENDROGRAM: Function = Function {
    name: "process_dendrogram",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("step", int64, "merge step, from 0").never_null(),
        col("cluster_a", int64, "a merged cluster: a rank, or (max rank + 1 + step) for the cluster a step made")
            .never_null(),
        col("cluster_b", int64, "the other merged cluster").never_null(),
        col("distance", float64, "average free-energy distance between the two clusters").never_null(),
        col("size", int64, "ranks in the merged cluster").never_null(),
    ]),
    description: "the merge steps of the average-linkage clustering, to choose a region threshold",
    make: Make::Table(process_dendrogram),
};

pub const REGION_GRAPH: Function = Function {
    name: "region_graph",
    params: &[MESSAGES, THRESHOLD, BUCKET_BYTES, MAX_SAMPLES, MIN_MESSAGES, CRITERIA],
    output: Output::Columns(&[
        col("region_a", int64, "sending region").never_null(),
        col("region_b", int64, "receiving region (equal to region_a within a region)").never_null(),
        col("messages", int64, "messages from region_a to region_b").never_null(),
        col("bytes", int64, "their bytes").never_null(),
        col("mean_latency", float64, "their mean latency L"),
    ]),
    description: "messages, bytes and mean latency L between (and within) communication regions",
    make: Make::Table(region_graph),
};

arguments! {
    struct RegionsOf(PROCESS_DISTANCE, PROCESS_DENDROGRAM) {
        rel: Relation,
    }
}

arguments! {
    struct CutArgs(PROCESS_REGIONS) {
        rel: Relation,
        threshold: Option<f64>,
    }
}

arguments! {
    struct RegionGraphArgs(REGION_GRAPH) {
        rel: Relation,
        threshold: Option<f64>,
        ..baseline: BaselineArgs,
    }
}

fn process_distance(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let RegionsOf { rel: relation } = RegionsOf::read(a)?;
    relation.columns("process_distance", &["src", "dst"])?;
    let out = a.schema();
    let s = out.clone();
    let compute: Compute = Arc::new(move |batches| {
        let g = graph_of(batches)?;
        let rows = g.distances().rows();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| g.ranks[r.0]))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| g.ranks[r.1]))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ];
        Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
    });
    Ok(Arc::new(Derived::new(out, pairs_of(&relation)?.0, None, compute)))
}

/// The cut: `threshold => t` for the paper's fixed rule, else the modularity rule.
fn cut_of(threshold: Option<f64>) -> Cut {
    threshold.map_or(Cut::Modularity, Cut::Threshold)
}

fn process_regions(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let CutArgs { rel: relation, threshold } = CutArgs::read(a)?;
    let cut = cut_of(threshold);
    relation.columns("process_regions", &["src", "dst"])?;
    let out = a.schema();
    let s = out.clone();
    let compute: Compute = Arc::new(move |batches| {
        let g = graph_of(batches)?;
        let region = regions(&g, cut);
        let mut size: HashMap<usize, i64> = HashMap::new();
        for r in &region {
            *size.entry(*r).or_default() += 1;
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(g.ranks.clone())),
            Arc::new(Int64Array::from_iter_values(region.iter().map(|r| *r as i64))),
            Arc::new(Int64Array::from_iter_values(region.iter().map(|r| size[r]))),
        ];
        Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
    });
    Ok(Arc::new(Derived::new(out, pairs_of(&relation)?.0, None, compute)))
}

fn process_dendrogram(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let RegionsOf { rel: relation } = RegionsOf::read(a)?;
    relation.columns("process_dendrogram", &["src", "dst"])?;
    let out = a.schema();
    let s = out.clone();
    let compute: Compute = Arc::new(move |batches| {
        let merges = dendrogram(&graph_of(batches)?);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..merges.len() as i64)),
            Arc::new(Int64Array::from_iter_values(merges.iter().map(|m| m.a))),
            Arc::new(Int64Array::from_iter_values(merges.iter().map(|m| m.b))),
            Arc::new(Float64Array::from_iter_values(merges.iter().map(|m| m.distance))),
            Arc::new(Int64Array::from_iter_values(merges.iter().map(|m| m.size))),
        ];
        Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
    });
    Ok(Arc::new(Derived::new(out, pairs_of(&relation)?.0, None, compute)))
}

fn region_graph(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let RegionGraphArgs { rel: relation, threshold, baseline } = RegionGraphArgs::read(a)?;
    let cut = cut_of(threshold);
    let (baseline, extra) = Baseline::plan(a.function, &baseline, a.session, &relation)?;
    let idx = relation.columns("region_graph", &["src", "dst", "bytes"])?;
    let message_idx = MessageIndices::find("region_graph", &relation)?;
    let out = a.schema();
    // The regions come from the graph (a row per pair) and the latency from the criteria,
    // both read first; then the messages stream through the region pairs' sums.
    let criteria = baseline.streamed_input(&relation, &message_idx, extra);
    let criteria_at = criteria.is_some().then_some(1);
    let mut inputs = vec![(relation.clone(), None), pairs_of(&relation)?];
    inputs.extend(criteria);
    let s = out.clone();
    let prepare: Prepare = Arc::new(move |held| {
        let g = graph_of(&held[0])?;
        let region = regions(&g, cut);
        let region_of = g.ranks.iter().zip(&region).map(|(r, k)| (*r, *k as i64)).collect();
        let table = baseline.held_table(criteria_at.map(|k| held[k].as_slice()))?;
        let fold = RegionFold {
            region_of,
            table,
            baseline: baseline.clone(),
            idx: idx.clone(),
            message_idx: message_idx.clone(),
            acc: BTreeMap::new(),
            counted: (0, 0),
            schema: s.clone(),
        };
        Ok(Box::new(fold) as Box<dyn Mapper>)
    });
    Ok(Arc::new(Derived::streamed(out, inputs, prepare)))
}

/// region_graph's sums per (region, region), message batch by message batch.
struct RegionFold {
    region_of: HashMap<i64, i64>,
    table: Arc<CriteriaTable>,
    baseline: Baseline,
    /// src, dst, bytes.
    idx: Vec<usize>,
    message_idx: MessageIndices,
    /// (messages, bytes, latency sum, latency count)
    acc: BTreeMap<(i64, i64), (i64, i64, f64, i64)>,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
    schema: SchemaRef,
}

impl Mapper for RegionFold {
    fn held_bytes(&self) -> usize {
        64 * self.acc.len() + 48 * self.region_of.capacity()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let (src, dst, bytes) = (
            int64_column(batches, self.idx[0])?,
            int64_column(batches, self.idx[1])?,
            int64_column(batches, self.idx[2])?,
        );
        let cols = self.message_idx.read(batches)?;
        let latency = self.table.latency_values_counted(&cols, &mut self.counted);
        for (row, l) in latency.iter().enumerate() {
            if src.is_null(row) || dst.is_null(row) {
                continue;
            }
            let (Some(&ra), Some(&rb)) = (self.region_of.get(&src.value(row)), self.region_of.get(&dst.value(row)))
            else {
                continue;
            };
            let e = self.acc.entry((ra.min(rb), ra.max(rb))).or_default();
            e.0 += 1;
            e.1 += if bytes.is_valid(row) { bytes.value(row) } else { 0 };
            if !l.is_nan() {
                e.2 += l;
                e.3 += 1;
            }
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.baseline.notice_uncovered(self.counted.0, self.counted.1);
        let rows: Vec<_> = std::mem::take(&mut self.acc).into_iter().collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1))),
            Arc::new(Float64Array::from(
                rows.iter().map(|r| (r.1.3 > 0).then(|| r.1.2 / r.1.3 as f64)).collect::<Vec<_>>(),
            )),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PCLVis Table 1 communication graph (paper's P1 = rank 0).
    fn table1() -> Graph {
        let pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (2, 3), (2, 6), (3, 4), (4, 5), (4, 6), (5, 6), (6, 7)];
        Graph::from_pairs(pairs.into_iter())
    }

    #[test]
    fn table1_distances_and_regions() {
        let g = table1();
        let rows = g.distances().rows();
        let d = |p: usize, q: usize| rows.iter().find(|r| r.0 == p && r.1 == q).unwrap().2;
        assert_eq!(format!("{:.2}", d(0, 1)), "1.18");
        assert_eq!(format!("{:.2}", d(0, 4)), "2.72");
        assert!((d(3, 5) - d(5, 3)).abs() < 1e-12);
        assert_eq!(regions(&g, Cut::Threshold(2.0)), vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(regions(&g, Cut::Modularity), vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(regions(&g, Cut::Threshold(100.0)), vec![0; 8]);
        assert_eq!(regions(&g, Cut::Threshold(0.0)), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn components_never_merge() {
        let g = Graph::from_pairs([(0, 1), (1, 2), (10, 11)].into_iter());
        assert_eq!(g.components().len(), 2);
        assert_eq!(regions(&g, Cut::Threshold(1e300)), vec![0, 0, 0, 1, 1]);
        assert_eq!(regions(&g, Cut::Modularity), vec![0, 0, 0, 1, 1]);
        let merges = dendrogram(&g);
        assert_eq!(merges.len(), 3);
        assert!(merges.iter().all(|m| m.distance.is_finite()));
        assert_eq!(merges.last().unwrap().size, 3);
    }
}
