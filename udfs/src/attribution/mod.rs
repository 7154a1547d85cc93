//! Why communication is slow, per time window, after PCLVis section 6: the paper attributes
//! latency to three causes and recommends an action for each. Every rule compares a window
//! with the run's own regular behaviour through ratios and shares, so a regular pattern gets
//! the same answer at 16 ranks and at 16,384: no rule counts ranks or grid cells.
//!
//! Latency L = transmission time / the criterion of the message's size bucket and locality,
//! against the whole trace's criteria by default (see `latency::Baseline`). A message is
//! *slow* when L >= `slow_level` (default 2: twice its normal time; the regular spread of a
//! run, receivers busy posting their own sends, stays below it).
//!
//! - A1 poor mapping: much traffic between nodes that a placement fitted to the traffic would
//!   keep on nodes, and off-node transfers that cost more than on-node ones. `inter_share` =
//!   inter-node messages / messages of known locality; `avoidable_share` = the share of the
//!   window's inter-node messages that `remap_suggestion`'s placement (METIS on the whole
//!   relation's traffic, same ranks per node) keeps on a node; `offnode_cost` = the window's
//!   inter-node transmission times over the trace's intra-node criterion of their size (NULL
//!   when the trace has no on-node message of those sizes: then the cost cannot be measured and
//!   is taken as real, since off-node transfers are the slower ones on every machine). Cause
//!   'mapping' when inter_share >= `max_inter_share` (default 0.75: a block placement keeps at
//!   least half of a 2-D stencil's neighbours together at any size), avoidable_share >= 0.5
//!   (remapping would halve the off-node traffic) and offnode_cost >= slow_level or unknown.
//!   Action O1: place the ranks that exchange most messages on the same node.
//! - A2 poor communication pattern: unbalanced communication load. mc_p = messages rank p sent
//!   plus received in the window, over the ranks that communicated in it (equation 9's n);
//!   `load_balance_mean` and `load_balance_max` by equations 9 and 10, as the paper's view
//!   shows them. LB grows with the number of ranks on a perfectly regular grid (its corners
//!   deviate from a mean that the interior dominates ever more), so the rule uses
//!   `load_ratio` = the busiest rank's mc / the median rank's mc instead: 1 for any regular
//!   stencil, ring or all-to-all, the number of workers for a master-worker. Cause 'pattern'
//!   when load_ratio >= `max_load_ratio` (default 1.5: one rank does half again the typical
//!   rank's communication) and a rank loaded that much has slow messages: the imbalance is
//!   making communication slow. Action O2: change the algorithm or use collective
//!   communication.
//! - A3 background traffic: "the transmission time of the same size message varies
//!   dramatically in the inter-node communication". `traffic_fluctuation` = mean over the
//!   window's inter-node messages of (L - 1), L against the run's criterion of the message's
//!   size bucket, so every message weighs the same and intra-node messages do not dilute it;
//!   0 is a usual window, 1 twice as slow. Cause 'background_traffic' when it reaches
//!   `max_fluctuation` (default 0.5). Action O3: rerun when the network is quieter, or ask for
//!   nodes under fewer switches.
//!
//! A window without slow messages and without a mapping cost is 'none' whatever its shares.
//! Windows are `window_ns` wide, aligned to its multiples (NULL: the 1-2-5 step that gives about
//! 50 windows over the run). A message belongs to the window of its send (of its receive when
//! the send is missing). Causes are listed comma-separated in the order above. Cost:
//! O(messages) plus O(windows x ranks) for the loads, plus one METIS partition.

pub mod diagnosis;
pub mod remap;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use crate::latency::{Baseline, BaselineArgs, CriteriaTable, INTER, INTRA, MESSAGES, MessageIndices, with_baseline};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::int64_column;
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;

pub const ATTRIBUTION: Function = Function {
    name: "attribution",
    params: &[
        MESSAGES,
        param(
            "window_ns",
            Type::Duration { min: 1 },
            ParamDefault::Chosen("about 50 windows over the run"),
            "width of the time windows (aligned to its multiples)",
        ),
        param(
            "max_inter_share",
            Type::Number { min: 0.0 },
            ParamDefault::Number(0.75),
            "mapping: inter-node share of the window's messages at least this",
        ),
        param(
            "max_load_ratio",
            Type::Number { min: 1.0 },
            ParamDefault::Number(1.5),
            "pattern: the busiest rank's messages at least this x the median rank's",
        ),
        param(
            "max_fluctuation",
            Type::Number { min: 0.0 },
            ParamDefault::Number(0.5),
            "background_traffic: mean (L - 1) of the inter-node messages at least this",
        ),
        param(
            "slow_level",
            Type::Number { min: 1.0 },
            ParamDefault::Number(2.0),
            "a message is slow when L is at least this",
        ),
        BUCKET_BYTES,
        MAX_SAMPLES,
        MIN_MESSAGES,
        CRITERIA,
    ],
    output: Output::Columns(&[
        col("window_start", int64, "start of the window").never_null(),
        col("window_end", int64, "end of the window").never_null(),
        col("messages", int64, "messages of the window (by send time)").never_null(),
        col("delayed_share", float64, "share of them with L > 1").never_null(),
        col("slow_share", float64, "share of them with L >= slow_level").never_null(),
        col("inter_node", int64, "messages between nodes").never_null(),
        col("intra_node", int64, "messages within a node").never_null(),
        col("inter_share", float64, "inter_node / messages of known locality"),
        col(
            "avoidable_share",
            float64,
            "share of the inter-node messages remap_suggestion's placement keeps on a node",
        ),
        col("offnode_cost", float64, "inter-node transmission times over the intra-node criterion of their size"),
        col("load_balance_mean", float64, "mean LB of the window's ranks (equations 9-10)").never_null(),
        col("load_balance_max", float64, "largest LB of the window's ranks").never_null(),
        col("load_ratio", float64, "the busiest rank's messages / the median rank's"),
        col("traffic_fluctuation", float64, "mean (L - 1) of the inter-node messages"),
        col("cause", text, "mapping, pattern, background_traffic (comma-separated when several) or none").never_null(),
        col("recommendation", text, "the paper's action for each cause (O1, O2, O3)").never_null(),
    ]),
    description: "per time window, the cause of latency (mapping, pattern, background_traffic, none) by rules that do not depend on the number of ranks, and the paper's recommended action (PCLVis 6)",
    make: Make::Table(attribution),
};
/// Most windows x ranks one call may hold.
const MAX_CELLS: u128 = 100_000_000;
/// Share of the off-node messages a fitted placement must keep on nodes for 'mapping'.
const AVOIDABLE: f64 = 0.5;

/// Decision thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub window_ns: i64,
    pub max_inter_share: f64,
    pub max_load_ratio: f64,
    pub max_fluctuation: f64,
    pub slow_level: f64,
}

/// Counts of one window.
#[derive(Debug, Default, Clone)]
struct Acc {
    messages: i64,
    delayed: i64,
    slow: i64,
    inter: i64,
    intra: i64,
    /// Inter-node messages the suggested placement keeps on a node.
    avoidable: i64,
    /// Sum and count of inter-node L (for the fluctuation).
    inter_latency: (f64, i64),
    /// Sum and count of inter-node duration / intra-node criterion of the size.
    offnode: (f64, i64),
    /// Messages each rank sent plus received, by rank index ([`crate::attribution::Fold`]).
    mc: Vec<i64>,
    /// Slow messages each rank sent or received.
    slow_by_rank: Vec<i64>,
    /// Inter-node messages by rank pair (a <= b), for `avoidable` once the placement is
    /// suggested (only when the relation tells the nodes).
    inter_pairs: FastMap<(i64, i64), i64>,
}

/// One row of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub start: i64,
    pub messages: i64,
    pub delayed_share: f64,
    pub slow_share: f64,
    pub inter: i64,
    pub intra: i64,
    pub inter_share: Option<f64>,
    pub avoidable_share: Option<f64>,
    pub offnode_cost: Option<f64>,
    pub lb_mean: f64,
    pub lb_max: f64,
    pub load_ratio: Option<f64>,
    pub fluctuation: Option<f64>,
    pub cause: String,
    pub recommendation: String,
}

/// Load balance of a window over the ranks that communicated in it.
struct Balance {
    lb_mean: f64,
    lb_max: f64,
    /// The busiest rank's load over the median rank's.
    load_ratio: Option<f64>,
    /// Whether a rank loaded at least `max_load_ratio` x the median has slow messages.
    overloaded_slow: bool,
}

/// Mean and maximum LB (equations 9-10), the load ratio and whether the overloaded ranks'
/// messages are slow.
fn balance(mc: &[i64], slow_by_rank: &[i64], max_load_ratio: f64) -> Balance {
    let mut active: Vec<i64> = mc.iter().copied().filter(|c| *c > 0).collect();
    if active.is_empty() {
        return Balance { lb_mean: 0.0, lb_max: 0.0, load_ratio: None, overloaded_slow: false };
    }
    let lb = crate::causality::balance::lb(&active);
    let lb_mean = lb.iter().sum::<f64>() / lb.len() as f64;
    let lb_max = lb.iter().copied().fold(0.0, f64::max);
    active.sort_unstable();
    let n = active.len();
    let median = if n % 2 == 1 { active[n / 2] as f64 } else { (active[n / 2 - 1] + active[n / 2]) as f64 / 2.0 };
    let overloaded_slow = mc.iter().zip(slow_by_rank).any(|(c, s)| *s > 0 && *c as f64 >= max_load_ratio * median);
    Balance { lb_mean, lb_max, load_ratio: Some(active[n - 1] as f64 / median), overloaded_slow }
}

const RECOMMENDATIONS: [(&str, &str); 3] = [
    ("mapping", "O1: remap - place the ranks that exchange most messages on the same node"),
    ("pattern", "O2: balance communication - change the algorithm or use collective communication"),
    ("background_traffic", "O3: rerun when the network is quieter, or choose nodes under fewer switches"),
];

/// Input columns: src, dst, send_ts, recv_ts, bytes, the nodes (when present) and the latency
/// columns.
#[derive(Debug, Clone)]
struct Input {
    src: usize,
    dst: usize,
    send_ts: usize,
    recv_ts: usize,
    bytes: usize,
    nodes: Option<(usize, usize)>,
    latency: MessageIndices,
}

/// Windows when window_ns is not given: the span cut into about this many 1-2-5 steps.
pub const DEFAULT_WINDOWS: i64 = 50;

/// The node remap_suggestion's placement gives each rank, from the relation's traffic: None
/// when the relation does not tell the current placement.
fn suggested_parts(t: crate::attribution::remap::Traffic) -> Result<Option<FastMap<i64, String>>> {
    if t.current.iter().any(Option::is_none) || t.ranks.len() < 2 {
        return Ok(None);
    }
    let mut per: FastMap<&str, usize> = FastMap::default();
    for n in t.current.iter().flatten() {
        *per.entry(n.as_str()).or_default() += 1;
    }
    let cap = per.values().copied().max().unwrap_or(1);
    let (suggested, _) = crate::attribution::remap::suggest(&t, cap, crate::attribution::remap::Weight::Messages)?;
    Ok(Some(t.ranks.iter().copied().zip(suggested).collect()))
}

/// attribution's windows, message batch by message batch (commdb_analysis::stream): the criteria and
/// the windows' width are known before the messages come; the placement suggested from the
/// whole relation's traffic is known only at the end, so each window keeps its inter-node
/// messages by rank pair until then.
#[derive(Clone)]
struct Fold {
    input: Input,
    rules: Rules,
    table: Arc<CriteriaTable>,
    baseline: Baseline,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
    /// Index of every rank seen, in the windows' per-rank counts.
    rank_index: FastMap<i64, usize>,
    acc: BTreeMap<i64, Acc>,
    /// Entries of the windows' `inter_pairs`, counted as they are made (held_bytes is asked
    /// after every batch and must not walk the windows).
    pair_entries: usize,
    /// The relation's traffic, when it tells the nodes (for the suggested placement).
    traffic: Option<crate::attribution::remap::TrafficFold>,
    schema: SchemaRef,
    /// Whether it gives its state as it is, for a merge (`attribution_partials`).
    partial: bool,
}

impl Fold {
    fn too_many(&self, windows: usize) -> Result<()> {
        if windows as u128 * self.rank_index.len() as u128 > MAX_CELLS {
            return exec_err!(
                "attribution: window_ns = {} gives more than {} windows for {} ranks; choose a larger window_ns",
                self.rules.window_ns,
                windows - 1,
                self.rank_index.len()
            );
        }
        Ok(())
    }
}

impl Mapper for Fold {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let input = &self.input;
        let cols = input.latency.read(one)?;
        let latency = self.table.latency_values_counted(&cols, &mut self.counted);
        if let Some(t) = &mut self.traffic {
            t.add(batch, &[input.src, input.dst, input.bytes], input.nodes)?;
        }
        let (src, dst) = (int64_column(one, input.src)?, int64_column(one, input.dst)?);
        let (send, recv) = (int64_column(one, input.send_ts)?, int64_column(one, input.recv_ts)?);
        let pairs = self.traffic.is_some();
        for (row, &l) in latency.iter().enumerate() {
            for r in [&src, &dst] {
                if r.is_valid(row) {
                    let next = self.rank_index.len();
                    self.rank_index.entry(r.value(row)).or_insert(next);
                }
            }
            let t = if send.is_valid(row) {
                send.value(row)
            } else if recv.is_valid(row) {
                recv.value(row)
            } else {
                continue;
            };
            let w = t.div_euclid(self.rules.window_ns);
            if !self.acc.contains_key(&w) {
                self.too_many(self.acc.len() + 1)?;
            }
            let ranks = self.rank_index.len();
            let a = self.acc.entry(w).or_default();
            a.mc.resize(ranks, 0);
            a.slow_by_rank.resize(ranks, 0);
            a.messages += 1;
            match cols.locality[row] {
                INTRA => a.intra += 1,
                INTER => {
                    a.inter += 1;
                    if pairs && src.is_valid(row) && dst.is_valid(row) {
                        let (x, y) = (src.value(row), dst.value(row));
                        let n = a.inter_pairs.entry((x.min(y), x.max(y))).or_default();
                        self.pair_entries += usize::from(*n == 0);
                        *n += 1;
                    }
                    if !l.is_nan() {
                        a.inter_latency.0 += l;
                        a.inter_latency.1 += 1;
                    }
                    if let Some(on_node) = self.table.criterion_at(&cols, row, INTRA)
                        && on_node > 0.0
                        && cols.duration.is_valid(row)
                    {
                        a.offnode.0 += cols.duration.value(row) as f64 / on_node;
                        a.offnode.1 += 1;
                    }
                }
                _ => {}
            }
            if send.is_valid(row) && src.is_valid(row) {
                a.mc[self.rank_index[&src.value(row)]] += 1;
            }
            if recv.is_valid(row) && dst.is_valid(row) {
                a.mc[self.rank_index[&dst.value(row)]] += 1;
            }
            if !l.is_nan() {
                a.delayed += i64::from(l > 1.0);
                if l >= self.rules.slow_level {
                    a.slow += 1;
                    for r in [&src, &dst] {
                        if r.is_valid(row) {
                            a.slow_by_rank[self.rank_index[&r.value(row)]] += 1;
                        }
                    }
                }
            }
        }
        Ok(RecordBatch::new_empty(if self.partial { attribution_partials() } else { self.schema.clone() }))
    }

    /// The windows' per-rank counts and inter-node pairs, and the traffic's pairs.
    fn held_bytes(&self) -> usize {
        let windows = self.acc.len() * (16 * self.rank_index.len() + 160);
        let traffic = self.traffic.as_ref().map_or(0, crate::attribution::remap::TrafficFold::held_bytes);
        windows + 32 * self.pair_entries + traffic + 48 * self.rank_index.capacity()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if self.partial {
            return Ok(vec![self.partials()?]);
        }
        self.answer()
    }
}

/// The schema of a part's windows (a cluster's task's, commdb_analysis::derived::Spread), a row per
/// piece of its state, told apart by `kind`: 0 a window's counts (`messages`, `delayed`,
/// `slow`, `inter`, `intra` in i1 to i5, the sums and counts of inter-node latency and
/// off-node cost in f1, a, f2, b); 1 a window's counts of rank `a` (i1 its messages, i2 its
/// slow ones); 2 a window's inter-node pair (a, b) (i1 messages); 3 a rank `a` of the traffic
/// with its node (`node`); 4 a pair (a, b) of the traffic (i1 messages, i2 bytes); 5 the part's
/// totals (i1, i2 the messages with a duration and those without a criterion; i3 the window;
/// i4, i5 the traffic's messages and bytes).
fn attribution_partials() -> SchemaRef {
    let i = |n: &str| Field::new(n, DataType::Int64, false);
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    Arc::new(Schema::new(vec![
        i("kind"),
        i("w"),
        i("a"),
        i("b"),
        i("i1"),
        i("i2"),
        i("i3"),
        i("i4"),
        i("i5"),
        f("f1"),
        f("f2"),
        Field::new("node", DataType::Utf8, true),
    ]))
}

/// Rows of `attribution_partials`, built one at a time.
#[derive(Default)]
struct PartialRows {
    ints: [Vec<i64>; 9],
    floats: [Vec<f64>; 2],
    node: Vec<Option<String>>,
}

impl PartialRows {
    fn push(&mut self, ints: [i64; 9], floats: [f64; 2], node: Option<&str>) {
        for (c, v) in self.ints.iter_mut().zip(ints) {
            c.push(v);
        }
        for (c, v) in self.floats.iter_mut().zip(floats) {
            c.push(v);
        }
        self.node.push(node.map(str::to_string));
    }

    fn batch(self) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> =
            self.ints.into_iter().map(|c| Arc::new(Int64Array::from(c)) as ArrayRef).collect();
        columns.extend(self.floats.into_iter().map(|c| Arc::new(Float64Array::from(c)) as ArrayRef));
        columns.push(Arc::new(StringArray::from(self.node)));
        Ok(RecordBatch::try_new(attribution_partials(), columns)?)
    }
}

impl Fold {
    /// Its state as rows (`attribution_partials`).
    fn partials(&mut self) -> Result<RecordBatch> {
        let mut rows = PartialRows::default();
        let by_index: Vec<i64> = {
            let mut ranks = vec![0; self.rank_index.len()];
            for (r, i) in &self.rank_index {
                ranks[*i] = *r;
            }
            ranks
        };
        for (w, a) in &self.acc {
            let (l, o) = (a.inter_latency, a.offnode);
            rows.push([0, *w, l.1, o.1, a.messages, a.delayed, a.slow, a.inter, a.intra], [l.0, o.0], None);
            for (i, rank) in by_index.iter().enumerate() {
                let (mc, slow) = (a.mc.get(i).copied().unwrap_or(0), a.slow_by_rank.get(i).copied().unwrap_or(0));
                if mc != 0 || slow != 0 {
                    rows.push([1, *w, *rank, 0, mc, slow, 0, 0, 0], [0.0; 2], None);
                }
            }
            for ((x, y), n) in &a.inter_pairs {
                rows.push([2, *w, *x, *y, *n, 0, 0, 0, 0], [0.0; 2], None);
            }
        }
        // Every rank seen, for the count of ranks the windows are judged over.
        for rank in &by_index {
            rows.push([1, i64::MIN, *rank, 0, 0, 0, 0, 0, 0], [0.0; 2], None);
        }
        let mut traffic = (0, 0);
        if let Some(t) = &self.traffic {
            let (nodes, pairs, totals) = t.parts();
            for (rank, node) in nodes {
                rows.push([3, 0, rank, 0, 0, 0, 0, 0, 0], [0.0; 2], node);
            }
            for ((x, y), (n, bytes)) in pairs {
                rows.push([4, 0, x, y, n, bytes, 0, 0, 0], [0.0; 2], None);
            }
            traffic = totals;
        }
        let (c, w) = (self.counted, self.rules.window_ns);
        rows.push([5, 0, 0, 0, c.0 as i64, c.1 as i64, w, traffic.0, traffic.1], [0.0; 2], None);
        rows.batch()
    }

    /// Add a part's state (`partials`).
    fn absorb(&mut self, batch: &RecordBatch) -> Result<()> {
        let one = std::slice::from_ref(batch);
        let ints: Vec<Int64Array> = (0..9).map(|c| int64_column(one, c)).collect::<Result<_>>()?;
        let floats: Vec<&Float64Array> = (9..11)
            .map(|c| batch.column(c).as_any().downcast_ref::<Float64Array>())
            .collect::<Option<_>>()
            .ok_or_else(|| datafusion::error::DataFusionError::Internal("attribution: damaged partials".into()))?;
        let node = commdb_analysis::columns::text_column(one, 11)?;
        for i in 0..batch.num_rows() {
            let v = |c: usize| ints[c].value(i);
            let (w, a, b) = (v(1), v(2), v(3));
            match v(0) {
                0 => {
                    let acc = self.acc.entry(w).or_default();
                    acc.inter_latency.0 += floats[0].value(i);
                    acc.inter_latency.1 += a;
                    acc.offnode.0 += floats[1].value(i);
                    acc.offnode.1 += b;
                    acc.messages += v(4);
                    acc.delayed += v(5);
                    acc.slow += v(6);
                    acc.inter += v(7);
                    acc.intra += v(8);
                }
                1 => {
                    let next = self.rank_index.len();
                    let k = *self.rank_index.entry(a).or_insert(next);
                    if w != i64::MIN {
                        let acc = self.acc.entry(w).or_default();
                        if acc.mc.len() <= k {
                            acc.mc.resize(k + 1, 0);
                            acc.slow_by_rank.resize(k + 1, 0);
                        }
                        acc.mc[k] += v(4);
                        acc.slow_by_rank[k] += v(5);
                    }
                }
                2 => *self.acc.entry(w).or_default().inter_pairs.entry((a, b)).or_default() += v(4),
                3 => {
                    if let Some(t) = &mut self.traffic {
                        t.absorb_rank(a, node.is_valid(i).then(|| node.value(i)));
                    }
                }
                4 => {
                    if let Some(t) = &mut self.traffic {
                        t.absorb_pair((a, b), v(4), v(5));
                    }
                }
                5 => {
                    self.counted.0 += v(4) as usize;
                    self.counted.1 += v(5) as usize;
                    self.rules.window_ns = v(6);
                    if let Some(t) = &mut self.traffic {
                        t.absorb_totals(v(7), v(8));
                    }
                }
                kind => return exec_err!("attribution: a partial of unknown kind {kind}"),
            }
        }
        Ok(())
    }

    /// The windows judged: the answer.
    fn answer(&mut self) -> Result<Vec<RecordBatch>> {
        self.baseline.notice_uncovered(self.counted.0, self.counted.1);
        self.too_many(self.acc.len())?;
        let suggested = match self.traffic.take() {
            Some(t) => suggested_parts(t.finish())?,
            None => None,
        };
        let ranks = self.rank_index.len();
        let rules = self.rules;
        let rows: Vec<Window> = std::mem::take(&mut self.acc)
            .into_iter()
            .map(|(w, mut a)| {
                a.mc.resize(ranks, 0);
                a.slow_by_rank.resize(ranks, 0);
                if let Some(s) = &suggested {
                    a.avoidable = a.inter_pairs.iter().filter(|((x, y), _)| s.get(x) == s.get(y)).map(|(_, n)| n).sum();
                }
                judge(w * rules.window_ns, &a, &rules, suggested.is_some())
            })
            .collect();
        Ok(vec![window_batch(&self.schema, rules.window_ns, &rows)?])
    }
}

/// The result's rows, windows `w` wide.
fn window_batch(schema: &SchemaRef, w: i64, rows: &[Window]) -> Result<RecordBatch> {
    let fl = |f: fn(&Window) -> f64| -> ArrayRef { Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) };
    let opt = |f: fn(&Window) -> Option<f64>| -> ArrayRef {
        Arc::new(Float64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.start))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.start + w))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.messages))),
        fl(|r| r.delayed_share),
        fl(|r| r.slow_share),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.inter))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.intra))),
        opt(|r| r.inter_share),
        opt(|r| r.avoidable_share),
        opt(|r| r.offnode_cost),
        fl(|r| r.lb_mean),
        fl(|r| r.lb_max),
        opt(|r| r.load_ratio),
        opt(|r| r.fluctuation),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.cause.as_str()))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.recommendation.as_str()))),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn judge(start: i64, a: &Acc, rules: &Rules, has_placement: bool) -> Window {
    let known = a.inter + a.intra;
    let inter_share = (known > 0).then(|| a.inter as f64 / known as f64);
    let avoidable_share = (has_placement && a.inter > 0).then(|| a.avoidable as f64 / a.inter as f64);
    let offnode_cost = (a.offnode.1 > 0).then(|| a.offnode.0 / a.offnode.1 as f64);
    let b = balance(&a.mc, &a.slow_by_rank, rules.max_load_ratio);
    let fluctuation = (a.inter_latency.1 > 0).then(|| a.inter_latency.0 / a.inter_latency.1 as f64 - 1.0);
    let slow = a.slow > 0;
    let fired = [
        inter_share.is_some_and(|s| s >= rules.max_inter_share)
            && avoidable_share.is_none_or(|s| s >= AVOIDABLE)
            && offnode_cost.is_none_or(|c| c >= rules.slow_level),
        b.overloaded_slow && b.load_ratio.is_some_and(|r| r >= rules.max_load_ratio),
        slow && fluctuation.is_some_and(|f| f >= rules.max_fluctuation),
    ];
    let chosen: Vec<(&str, &str)> = RECOMMENDATIONS.iter().zip(fired).filter(|(_, f)| *f).map(|(r, _)| *r).collect();
    let with_latency = a.messages.max(1) as f64;
    Window {
        start,
        messages: a.messages,
        delayed_share: a.delayed as f64 / with_latency,
        slow_share: a.slow as f64 / with_latency,
        inter: a.inter,
        intra: a.intra,
        inter_share,
        avoidable_share,
        offnode_cost,
        lb_mean: b.lb_mean,
        lb_max: b.lb_max,
        load_ratio: b.load_ratio,
        fluctuation,
        cause: if chosen.is_empty() { "none".into() } else { chosen.iter().map(|c| c.0).collect::<Vec<_>>().join(",") },
        recommendation: chosen.iter().map(|c| c.1).collect::<Vec<_>>().join("; "),
    }
}

fn output_schema() -> SchemaRef {
    ATTRIBUTION.schema()
}

arguments! {
    struct AttributionArgs(ATTRIBUTION) {
        rel: Relation,
        window_ns: Option<i64>,
        max_inter_share: f64,
        max_load_ratio: f64,
        max_fluctuation: f64,
        slow_level: f64,
        ..baseline: BaselineArgs,
    }
}

fn attribution(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let p = AttributionArgs::read(a)?;
    let rel = p.rel;
    let window_ns = p.window_ns.unwrap_or(0);
    let rules = Rules {
        window_ns,
        max_inter_share: p.max_inter_share,
        max_load_ratio: p.max_load_ratio,
        max_fluctuation: p.max_fluctuation,
        slow_level: p.slow_level,
    };
    let (baseline, extra) = Baseline::plan(a.function, &p.baseline, a.session, &rel)?;
    let idx = rel.columns("attribution", &["src", "dst", "send_ts", "recv_ts", "bytes"])?;
    let schema = rel.schema();
    let nodes = match (schema.index_of("src_node"), schema.index_of("dst_node")) {
        (Ok(a), Ok(b)) => Some((a, b)),
        _ => None,
    };
    let input = Input {
        src: idx[0],
        dst: idx[1],
        send_ts: idx[2],
        recv_ts: idx[3],
        bytes: idx[4],
        nodes,
        latency: MessageIndices::find("attribution", &rel)?,
    };
    let out = output_schema();
    // The criteria come first (crate::latency::Baseline::streamed_input), and the span of
    // the windows when their width is not given; then the messages stream through.
    let criteria = baseline.streamed_input(&rel, &input.latency, extra);
    let criteria_at = criteria.is_some().then_some(0);
    let mut inputs = with_baseline(rel.clone(), None, criteria);
    let bounds_at = (window_ns == 0).then(|| inputs.len() - 1);
    if bounds_at.is_some() {
        let at = |c: &str| datafusion::logical_expr::col(c);
        let time = datafusion::functions::expr_fn::coalesce(vec![at("send_ts"), at("recv_ts")]);
        inputs.push(commdb_analysis::relation::bounds_of(&rel, time.clone(), time)?);
    }
    let empty = Fold {
        input: input.clone(),
        rules,
        table: Arc::new(CriteriaTable::default()),
        baseline: baseline.clone(),
        counted: (0, 0),
        rank_index: FastMap::default(),
        acc: BTreeMap::new(),
        pair_entries: 0,
        traffic: input.nodes.map(|_| crate::attribution::remap::TrafficFold::default()),
        schema: out.clone(),
        partial: false,
    };
    let start = empty.clone();
    let fold = |partial: bool| -> Prepare {
        let (baseline, empty) = (baseline.clone(), empty.clone());
        Arc::new(move |held| {
            let table = baseline.held_table(criteria_at.map(|k| held[k].as_slice()))?;
            let window_ns = match bounds_at.map(|k| commdb_analysis::relation::bounds_read(&held[k])).transpose()? {
                None => rules.window_ns,
                Some((Some(lo), Some(hi))) => crate::lod::resolution(lo, hi + 1, DEFAULT_WINDOWS).unwrap_or(1),
                Some(_) => 1,
            };
            let rules = Rules { window_ns, ..rules };
            Ok(Box::new(Fold { rules, table, partial, ..empty.clone() }) as Box<dyn Mapper>)
        })
    };
    // Over a cluster's parts of the messages, each part's windows are added up in one task,
    // which judges them (the placement it suggests needs the whole relation's traffic).
    let merge: commdb_analysis::derived::Compute = Arc::new(move |partials| {
        let mut merged = start.clone();
        for batch in partials {
            merged.absorb(batch)?;
        }
        merged.answer()
    });
    let work = commdb_analysis::plan::Work::Streamed(fold(true));
    let spread = commdb_analysis::derived::Spread::Merged { schema: attribution_partials(), work, merge };
    Ok(Arc::new(Derived::streamed(out, inputs, fold(false)).spreading(spread)))
}
