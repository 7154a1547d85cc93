//! Why communication is slow, per time window, after PCLVis section 6: the paper attributes
//! latency to three causes and recommends an action for each.
//!
//! - A1 poor mapping: much traffic between nodes. `inter_share` = inter-node messages / messages
//!   of known locality sent in the window; cause 'mapping' when it reaches `max_inter_share`
//!   (default 0.75: blocks of consecutive ranks on a node keep at least half of a 2-D stencil's
//!   neighbours together, so three quarters off-node means the placement ignores the pattern).
//!   Action O1: place the ranks that exchange most messages on the same node.
//! - A2 poor communication pattern: unbalanced load. Within the window, mc_p = messages rank p
//!   sent plus received (every rank of the relation, 0 if silent), LB_p by equations 9 and 10;
//!   `load_balance_mean` and `load_balance_max`. Cause 'pattern' when the maximum reaches
//!   `max_load_balance` (default 3: the boundary of a regular 2-D grid alone gives LB up to 2,
//!   corner against interior ranks). Action O2: change the algorithm or use collective
//!   communication.
//! - A3 background traffic: messages of the same size and locality take longer than usual.
//!   `traffic_fluctuation` = mean over the (size bucket, locality) groups present in the window
//!   of (the group's mean latency L in the window - 1), L being the transmission time over the
//!   run's median for that group (`latency`); 0 is a usual window, 1 twice as slow. Cause
//!   'background_traffic' when it reaches `max_fluctuation` (default 0.5). Action O3: rerun
//!   when the network is quieter, or ask for nodes under fewer switches.
//!
//! Windows are `window_ns` wide, aligned to its multiples (NULL: the 1-2-5 step that gives about
//! 50 windows over the run). A message belongs to the window of its send (of its receive when
//! the send is missing).
//! Causes are listed comma-separated in the order above, 'none' when no rule fires. Cost:
//! O(messages) plus O(windows x ranks) for the load balance.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::common::{Args, Compute, Derived, FastMap, int64_column};
use crate::latency::{INTER, INTRA, MessageIndices, Params, key, latency_values};

pub const ATTRIBUTION_ARGS: &[&str] = &["window_ns", "rel", "max_inter_share", "max_load_balance", "max_fluctuation"];
/// Most windows x ranks one call may hold.
const MAX_CELLS: u128 = 100_000_000;

/// Decision thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub window_ns: i64,
    pub max_inter_share: f64,
    pub max_load_balance: f64,
    pub max_fluctuation: f64,
}

/// Counts of one window.
#[derive(Debug, Default, Clone)]
struct Acc {
    messages: i64,
    delayed: i64,
    inter: i64,
    intra: i64,
    /// (locality, bucket) -> (sum of L, count)
    groups: FastMap<(u8, i64), (f64, i64)>,
    mc: Vec<i64>,
}

/// One row of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub start: i64,
    pub messages: i64,
    pub delayed_share: f64,
    pub inter: i64,
    pub intra: i64,
    pub inter_share: Option<f64>,
    pub lb_mean: f64,
    pub lb_max: f64,
    pub fluctuation: Option<f64>,
    pub cause: String,
    pub recommendation: String,
}

/// Mean and maximum LB of the window's loads.
fn balance(mc: &[i64]) -> (f64, f64) {
    let lb = crate::causality::balance::lb(mc);
    (lb.iter().sum::<f64>() / lb.len().max(1) as f64, lb.iter().copied().fold(0.0, f64::max))
}

const RECOMMENDATIONS: [(&str, &str); 3] = [
    ("mapping", "O1: remap - place the ranks that exchange most messages on the same node"),
    ("pattern", "O2: balance communication - change the algorithm or use collective communication"),
    ("background_traffic", "O3: rerun when the network is quieter, or choose nodes under fewer switches"),
];

/// Input columns: src, dst, send_ts, recv_ts and the latency columns.
struct Input {
    src: usize,
    dst: usize,
    send_ts: usize,
    recv_ts: usize,
    latency: MessageIndices,
}

/// Windows when window_ns is not given: the span cut into about this many 1-2-5 steps.
pub const DEFAULT_WINDOWS: i64 = 50;

fn windows(batches: &[RecordBatch], input: &Input, rules: &Rules) -> Result<(i64, Vec<Window>)> {
    let cols = input.latency.read(batches)?;
    let latency = latency_values(&cols, &Params::default());
    let (src, dst) = (int64_column(batches, input.src)?, int64_column(batches, input.dst)?);
    let (send, recv) = (int64_column(batches, input.send_ts)?, int64_column(batches, input.recv_ts)?);
    let mut ranks: Vec<i64> = src.iter().chain(dst.iter()).flatten().collect();
    ranks.sort_unstable();
    ranks.dedup();
    let index: FastMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let times = || {
        (0..send.len()).filter_map(|r| {
            if send.is_valid(r) { Some(send.value(r)) } else { recv.is_valid(r).then(|| recv.value(r)) }
        })
    };
    let rules = &Rules {
        window_ns: match (rules.window_ns, times().min(), times().max()) {
            (0, Some(lo), Some(hi)) => crate::lod::resolution(lo, hi + 1, DEFAULT_WINDOWS).unwrap_or(1),
            (0, _, _) => 1,
            (w, _, _) => w,
        },
        ..*rules
    };
    let bucket = Params::default().bucket_bytes;
    let mut acc: BTreeMap<i64, Acc> = BTreeMap::new();
    for row in 0..src.len() {
        let t = if send.is_valid(row) {
            send.value(row)
        } else if recv.is_valid(row) {
            recv.value(row)
        } else {
            continue;
        };
        let w = t.div_euclid(rules.window_ns);
        if !acc.contains_key(&w) && (acc.len() as u128 + 1) * ranks.len() as u128 > MAX_CELLS {
            return exec_err!(
                "attribution: window_ns = {} gives more than {} windows for {} ranks; choose a larger window_ns",
                rules.window_ns,
                acc.len(),
                ranks.len()
            );
        }
        let a = acc.entry(w).or_insert_with(|| Acc { mc: vec![0; ranks.len()], ..Acc::default() });
        a.messages += 1;
        match cols.locality[row] {
            INTRA => a.intra += 1,
            INTER => a.inter += 1,
            _ => {}
        }
        if send.is_valid(row) && src.is_valid(row) {
            a.mc[index[&src.value(row)]] += 1;
        }
        if recv.is_valid(row) && dst.is_valid(row) {
            a.mc[index[&dst.value(row)]] += 1;
        }
        let l = latency[row];
        if !l.is_nan() {
            a.delayed += i64::from(l > 1.0);
            if let Some(k) = key(&cols, row, bucket) {
                let g = a.groups.entry(k).or_default();
                g.0 += l;
                g.1 += 1;
            }
        }
    }
    Ok((rules.window_ns, acc.into_iter().map(|(w, a)| judge(w * rules.window_ns, &a, rules)).collect()))
}

fn judge(start: i64, a: &Acc, rules: &Rules) -> Window {
    let known = a.inter + a.intra;
    let inter_share = (known > 0).then(|| a.inter as f64 / known as f64);
    let (lb_mean, lb_max) = balance(&a.mc);
    let fluctuation = (!a.groups.is_empty())
        .then(|| a.groups.values().map(|(sum, n)| sum / *n as f64 - 1.0).sum::<f64>() / a.groups.len() as f64);
    let fired = [
        inter_share.is_some_and(|s| s >= rules.max_inter_share),
        lb_max >= rules.max_load_balance,
        fluctuation.is_some_and(|f| f >= rules.max_fluctuation),
    ];
    let chosen: Vec<(&str, &str)> = RECOMMENDATIONS.iter().zip(fired).filter(|(_, f)| *f).map(|(r, _)| *r).collect();
    Window {
        start,
        messages: a.messages,
        delayed_share: a.delayed as f64 / a.messages.max(1) as f64,
        inter: a.inter,
        intra: a.intra,
        inter_share,
        lb_mean,
        lb_max,
        fluctuation,
        cause: if chosen.is_empty() { "none".into() } else { chosen.iter().map(|c| c.0).collect::<Vec<_>>().join(",") },
        recommendation: chosen.iter().map(|c| c.1).collect::<Vec<_>>().join("; "),
    }
}

fn output_schema() -> SchemaRef {
    let i = |n: &str| Field::new(n, DataType::Int64, false);
    let f = |n: &str, null: bool| Field::new(n, DataType::Float64, null);
    Arc::new(Schema::new(vec![
        i("window_start"),
        i("window_end"),
        i("messages"),
        f("delayed_share", false),
        i("inter_node"),
        i("intra_node"),
        f("inter_share", true),
        f("load_balance_mean", false),
        f("load_balance_max", false),
        f("traffic_fluctuation", true),
        Field::new("cause", DataType::Utf8, false),
        Field::new("recommendation", DataType::Utf8, false),
    ]))
}

/// `attribution([window_ns] [, rel => 'messages'], max_inter_share => 0.75, max_load_balance => 3,
/// max_fluctuation => 0.5)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct Attribution;

impl TableFunctionImpl for Attribution {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = crate::common::number_first(args.exprs());
        let a = Args::new("attribution", ATTRIBUTION_ARGS, &exprs)?;
        let window_ns = a.opt_int(0, 1)?.unwrap_or(0);
        let rel = a.relation(args.session(), 1, "messages")?;
        let rules = Rules {
            window_ns,
            max_inter_share: a.float(2, 0.75, 0.0)?,
            max_load_balance: a.float(3, 3.0, 0.0)?,
            max_fluctuation: a.float(4, 0.5, 0.0)?,
        };
        let idx = rel.columns("attribution", &["src", "dst", "send_ts", "recv_ts"])?;
        let input = Input {
            src: idx[0],
            dst: idx[1],
            send_ts: idx[2],
            recv_ts: idx[3],
            latency: MessageIndices::find("attribution", &rel)?,
        };
        let out = output_schema();
        let s = out.clone();
        let compute: Compute = Arc::new(move |batches| {
            let (w, rows) = windows(batches, &input, &rules)?;
            let fl =
                |f: fn(&Window) -> f64| -> ArrayRef { Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) };
            let opt = |f: fn(&Window) -> Option<f64>| -> ArrayRef {
                Arc::new(Float64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
            };
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.start))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.start + w))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.messages))),
                fl(|r| r.delayed_share),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.inter))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.intra))),
                opt(|r| r.inter_share),
                fl(|r| r.lb_mean),
                fl(|r| r.lb_max),
                opt(|r| r.fluctuation),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.cause.as_str()))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.recommendation.as_str()))),
            ];
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        Ok(Arc::new(Derived::new(out, rel, None, compute)))
    }
}
