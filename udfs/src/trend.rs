//! Latency over time, abstracted, after PCLVis section 5.1: the run is cut into bins of
//! `bin_ns` (by send time, aligned to multiples of bin_ns; NULL: the 1-2-5 step that gives
//! about 100 bins over the messages' span, as `lod_resolution` picks it), each bin's mean message latency L
//! (the paper's Ave; L = transmission time / the criterion of the message's size bucket and
//! locality, see `latency`) is taken, and every bin is classified by a window of `window` bins
//! centred on it (clipped at the ends), by least squares over the bins that hold messages:
//!
//! - `growth`: the fitted line rises by at least `growth_rise` over the window (slope x
//!   (window - 1) >= growth_rise; default 0.25: a quarter of the normal transmission time per
//!   window, while the mean L of a bin of a few dozen messages with 5-20% noise wanders by a
//!   few hundredths);
//! - `steady_high`: not rising or falling by that much, and the window's mean L is at least
//!   `high_level` (default 1.5: messages take half again their normal time);
//! - `compressed`: everything else, including windows with fewer than 3 bins with messages.
//!
//! A run shorter than a window between two runs of one class takes their class (a ramp whose
//! slope is near the threshold stays one growth period). Maximal runs of bins with the same
//! class are then the segments. Growth and steady-high segments
//! keep every bin's point (bin centre, mean L); a compressed segment keeps only its first,
//! middle and last bin with messages, which is the paper's abstraction: detail where latency
//! builds up or stays high, three points elsewhere. Cost: O(messages) plus O(bins x window).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Float64Array, Float64Builder, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;

use crate::common::{Args, Compute, Derived};
use crate::latency::{MessageIndices, Params, latency_values};

pub const TREND_ARGS: &[&str] = &["bin_ns", "rel", "window", "growth_rise", "high_level"];
/// The most bins one call may make.
const MAX_BINS: i64 = 50_000_000;

/// Bins when bin_ns is not given: the span cut into about this many 1-2-5 steps.
pub const DEFAULT_BINS: i64 = 100;

/// Thresholds of the classification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendParams {
    /// Bin width; 0: a 1-2-5 step giving about DEFAULT_BINS bins over the samples' span.
    pub bin_ns: i64,
    pub window: usize,
    pub growth_rise: f64,
    pub high_level: f64,
}

/// One bin: messages with a latency, their latency sum, delayed ones (L > 1).
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    messages: i64,
    sum: f64,
    delayed: i64,
}

impl Bin {
    fn mean(&self) -> Option<f64> {
        (self.messages > 0).then(|| self.sum / self.messages as f64)
    }
}

/// A run of bins with one class.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub kind: &'static str,
    pub t_start: i64,
    pub t_end: i64,
    pub messages: i64,
    pub mean_latency: Option<f64>,
    pub delayed_messages: i64,
    /// (bin centre, mean L) of the bins kept.
    pub points: Vec<(i64, f64)>,
}

/// Least-squares slope and mean of (x, y).
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in points {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
    }
    (if sxx > 0.0 { sxy / sxx } else { 0.0 }, my)
}

/// Maximal runs of equal labels as (start, end exclusive).
fn runs(kinds: &[&'static str]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = 0;
    while s < kinds.len() {
        let e = (s..kinds.len()).find(|&i| kinds[i] != kinds[s]).unwrap_or(kinds.len());
        out.push((s, e));
        s = e;
    }
    out
}

/// A run shorter than a window between two runs of one kind joins them: a ramp whose slope is
/// near the threshold stays one growth period instead of flickering.
fn absorb_short_runs(mut kinds: Vec<&'static str>, window: usize) -> Vec<&'static str> {
    let r = runs(&kinds);
    for k in 1..r.len().saturating_sub(1) {
        let ((a, _), (s, e), (b, _)) = (r[k - 1], r[k], r[k + 1]);
        if e - s < window && kinds[a] == kinds[b] && kinds[s] != kinds[a] {
            let kind = kinds[a];
            kinds[s..e].fill(kind);
        }
    }
    kinds
}

/// The segments of a series of (send_ts, latency) samples.
pub fn segments(samples: impl Iterator<Item = (i64, f64)> + Clone, p: &TrendParams) -> Result<Vec<Segment>> {
    let Some((lo, hi)) = samples
        .clone()
        .fold(None, |acc: Option<(i64, i64)>, (t, _)| Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t)))))
    else {
        return Ok(Vec::new());
    };
    let bin_ns = if p.bin_ns > 0 { p.bin_ns } else { crate::lod::resolution(lo, hi + 1, DEFAULT_BINS).unwrap_or(1) };
    let p = &TrendParams { bin_ns, ..*p };
    let first = lo.div_euclid(p.bin_ns);
    let count = hi.div_euclid(p.bin_ns) - first + 1;
    if count > MAX_BINS {
        return exec_err!(
            "latency_trend: bin_ns = {} cuts the run into {count} bins, more than {MAX_BINS}; choose a larger bin_ns",
            p.bin_ns
        );
    }
    let mut bins = vec![Bin::default(); count as usize];
    for (t, l) in samples {
        let b = &mut bins[(t.div_euclid(p.bin_ns) - first) as usize];
        b.messages += 1;
        b.sum += l;
        b.delayed += i64::from(l > 1.0);
    }
    let (before, after) = ((p.window - 1) / 2, p.window / 2);
    let kinds: Vec<&'static str> = (0..bins.len())
        .map(|b| {
            let range = b.saturating_sub(before)..(b + after + 1).min(bins.len());
            let points: Vec<(f64, f64)> = range.filter_map(|i| bins[i].mean().map(|m| (i as f64, m))).collect();
            if points.len() < 3 {
                return "compressed";
            }
            let (slope, level) = fit(&points);
            let rise = slope * (p.window - 1) as f64;
            if rise >= p.growth_rise {
                "growth"
            } else if rise.abs() < p.growth_rise && level >= p.high_level {
                "steady_high"
            } else {
                "compressed"
            }
        })
        .collect();
    let kinds = absorb_short_runs(kinds, p.window);
    let start_of = |b: usize| (first + b as i64) * p.bin_ns;
    let mut out = Vec::new();
    for (s, end) in runs(&kinds) {
        let e = end - 1;
        let run = &bins[s..=e];
        let (messages, sum, delayed) =
            run.iter().fold((0, 0.0, 0), |a, b| (a.0 + b.messages, a.1 + b.sum, a.2 + b.delayed));
        let with_data: Vec<(i64, f64)> =
            (s..=e).filter_map(|i| bins[i].mean().map(|m| (start_of(i) + p.bin_ns / 2, m))).collect();
        let points = if kinds[s] == "compressed" && with_data.len() > 3 {
            vec![with_data[0], with_data[with_data.len() / 2], with_data[with_data.len() - 1]]
        } else {
            with_data
        };
        out.push(Segment {
            kind: kinds[s],
            t_start: start_of(s),
            t_end: start_of(e + 1),
            messages,
            mean_latency: (messages > 0).then(|| sum / messages as f64),
            delayed_messages: delayed,
            points,
        });
    }
    Ok(out)
}

fn output_schema() -> SchemaRef {
    let list = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    Arc::new(Schema::new(vec![
        Field::new("segment", DataType::Int64, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("t_start", DataType::Int64, false),
        Field::new("t_end", DataType::Int64, false),
        Field::new("messages", DataType::Int64, false),
        Field::new("mean_latency", DataType::Float64, true),
        Field::new("delayed_messages", DataType::Int64, false),
        Field::new("points_ts", list(DataType::Int64), false),
        Field::new("points_latency", list(DataType::Float64), false),
    ]))
}

/// `latency_trend(bin_ns [, rel => 'messages'], window => 5, growth_rise => 0.25, high_level => 1.5)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct LatencyTrend;

impl TableFunctionImpl for LatencyTrend {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = crate::common::number_first(args.exprs());
        let a = Args::new("latency_trend", TREND_ARGS, &exprs)?;
        let bin_ns = a.opt_int(0, 1)?.unwrap_or(0);
        let rel = a.relation(args.session(), 1, "messages")?;
        let params = TrendParams {
            bin_ns,
            window: a.int(2, 5, 2)?.min(1 << 20) as usize,
            growth_rise: a.float(3, 0.25, 0.0)?,
            high_level: a.float(4, 1.5, 0.0)?,
        };
        let found = MessageIndices::find("latency_trend", &rel)?;
        if !found.has_send_ts() {
            return plan_err!("latency_trend: relation '{}' has no column 'send_ts'", rel.reference);
        }
        let (projection, input) = found.projected();
        let out = output_schema();
        let s = out.clone();
        let compute: Compute = Arc::new(move |batches| {
            let cols = input.read(batches)?;
            let latency = latency_values(&cols, &Params::default());
            let send = cols.send_ts.as_ref().expect("checked when planned");
            let samples = latency
                .iter()
                .enumerate()
                .filter(|(i, l)| !l.is_nan() && send.is_valid(*i))
                .map(|(i, l)| (send.value(i), *l));
            let segs = segments(samples, &params)?;
            Ok(vec![batch(&s, &segs)?])
        });
        Ok(Arc::new(Derived::new(out, rel, Some(projection), compute)))
    }
}

fn batch(schema: &SchemaRef, segs: &[Segment]) -> Result<RecordBatch> {
    let mut ts = ListBuilder::new(Int64Builder::new());
    let mut ls = ListBuilder::new(Float64Builder::new());
    for s in segs {
        for (t, l) in &s.points {
            ts.values().append_value(*t);
            ls.values().append_value(*l);
        }
        ts.append(true);
        ls.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..segs.len() as i64)),
        Arc::new(StringArray::from_iter_values(segs.iter().map(|s| s.kind))),
        Arc::new(Int64Array::from_iter_values(segs.iter().map(|s| s.t_start))),
        Arc::new(Int64Array::from_iter_values(segs.iter().map(|s| s.t_end))),
        Arc::new(Int64Array::from_iter_values(segs.iter().map(|s| s.messages))),
        Arc::new(Float64Array::from(segs.iter().map(|s| s.mean_latency).collect::<Vec<_>>())),
        Arc::new(Int64Array::from_iter_values(segs.iter().map(|s| s.delayed_messages))),
        Arc::new(ts.finish()),
        Arc::new(ls.finish()),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> TrendParams {
        TrendParams { bin_ns: 10, window: 5, growth_rise: 0.25, high_level: 1.5 }
    }

    /// One sample per ns: flat 1.0 on [0, 300), a ramp to 3.0 on [300, 500), 3.0 on [500, 800),
    /// flat 1.0 after.
    fn series(t: i64) -> f64 {
        match t {
            0..300 => 1.0,
            300..500 => 1.0 + 2.0 * (t - 300) as f64 / 200.0,
            500..800 => 3.0,
            _ => 1.0,
        }
    }

    #[test]
    fn ramp_and_plateau_are_found_within_a_window() {
        let segs = segments((0..1_100).map(|t| (t, series(t))), &params()).unwrap();
        let kinds: Vec<&str> = segs.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["compressed", "growth", "steady_high", "compressed"], "{segs:?}");
        let window = 5 * 10;
        assert!((segs[1].t_start - 300).abs() <= window && (segs[1].t_end - 500).abs() <= window, "{segs:?}");
        assert!((segs[2].t_end - 800).abs() <= window, "{segs:?}");
        assert_eq!(segs.iter().map(|s| s.messages).sum::<i64>(), 1_100);
        assert_eq!(segs[0].points.len(), 3);
        assert!(segs[1].points.len() > 3);
    }

    #[test]
    fn a_flat_series_has_no_growth() {
        let segs =
            segments((0..1_000).map(|t| (t, 1.0 + 0.05 * ((t * 7919 % 13) as f64 / 13.0 - 0.5))), &params()).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].kind, "compressed");
        assert!(segments(std::iter::empty(), &params()).unwrap().is_empty());
        let e = segments([(0, 1.0), (i64::MAX / 2, 1.0)].into_iter(), &params()).unwrap_err().to_string();
        assert!(e.contains("choose a larger bin_ns"), "{e}");
    }
}
