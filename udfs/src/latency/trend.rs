//! Latency over time, abstracted, after PCLVis section 5.1: the run is cut into bins of
//! `bin_ns` (by send time, aligned to multiples of bin_ns; NULL: the 1-2-5 step that gives
//! about 100 bins over the messages' span, as `lod_resolution` picks it), each bin's mean
//! message latency L is taken (L = transmission time / the criterion of the message's size
//! bucket and locality, against the whole trace's criteria by default, see `latency`), and
//! every bin is classified against Ave, the mean L of all the relation's messages (the paper's
//! Ave_region), by a window of `window` bins centred on it (clipped at the ends), by least
//! squares over the bins that hold messages:
//!
//! - `steady_high`: the bin's own mean L is at least `high_level` x Ave (default 1.5: half again
//!   the region's average), whatever its neighbours, so a burst of one bin is kept; or the
//!   window neither rises nor falls by growth_rise x Ave and its mean L is that high;
//! - `growth`: otherwise, the fitted line rises by at least `growth_rise` x Ave over the window
//!   (slope x (window - 1); default 0.15, while the mean L of a bin of a few dozen messages with
//!   5-20% noise wanders by a few hundredths of Ave) and the bin itself has risen (its mean is
//!   at least one bin's share of that rise above the mean of the window's bins before it: flat
//!   bins just before a jump are not growth);
//! - `compressed`: everything else, including windows with fewer than 3 bins with messages.
//!
//! A compressed run shorter than a window between two runs of one important class takes their
//! class (a ramp whose slope is near the threshold stays one growth period); growth and
//! steady-high runs are never absorbed, however short. Maximal runs of bins with the same class
//! are then the segments. Growth and steady-high segments keep every bin's point (bin centre,
//! mean L); a compressed segment keeps three timestamps, the centres of its start, middle and
//! end bins (L NULL for a kept bin without messages), which is the paper's abstraction: detail
//! where latency builds up or stays high, three points elsewhere. Cost: O(messages) plus
//! O(bins x window); the messages are binned as they stream, in a step that follows the span
//! seen so far (`Binned::extend`), so the memory is that of the bins, not of the messages.
//!
//! On a cluster a task per part of the messages bins its own latencies (`Binned`, in a step
//! that divides the run's bin width), and one task adds the parts' bins into the run's and
//! classifies them; the embedded engine takes the same route with one part.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Float64Array, Float64Builder, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringArray,
};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;

use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use crate::latency::{Baseline, BaselineArgs, CriteriaTable, MESSAGES, MessageIndices, with_baseline};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, list_float64, list_int64, text};
use commdb_analysis::derived::{Compute, Derived, Spread};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Work;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

pub const LATENCY_TREND: Function = Function {
    name: "latency_trend",
    params: &[
        MESSAGES,
        param(
            "bin_ns",
            Type::Duration { min: 1 },
            ParamDefault::Chosen("about 100 bins over the run"),
            "width of the time bins (by send time, aligned to its multiples)",
        ),
        param("window", Type::Integer { min: 2 }, ParamDefault::Integer(5), "bins in the window that classifies a bin"),
        param(
            "growth_rise",
            Type::Number { min: 0.0 },
            ParamDefault::Number(0.15),
            "growth: the window's fitted line rises by at least this x Ave",
        ),
        param(
            "high_level",
            Type::Number { min: 0.0 },
            ParamDefault::Number(1.5),
            "steady_high: the bin's mean L is at least this x Ave",
        ),
        BUCKET_BYTES,
        MAX_SAMPLES,
        MIN_MESSAGES,
        CRITERIA,
    ],
    output: Output::Columns(&[
        col("segment", int64, "segment number, from 0 in time order").never_null(),
        col("kind", text, "growth, steady_high or compressed").never_null(),
        col("t_start", int64, "start of the segment's first bin").never_null(),
        col("t_end", int64, "end of its last bin").never_null(),
        col("messages", int64, "messages sent in the segment").never_null(),
        col("mean_latency", float64, "their mean latency L"),
        col("delayed_messages", int64, "those with L > 1").never_null(),
        col("points_ts", list_int64, "kept bin centres: every bin of growth and steady_high, three of compressed")
            .never_null(),
        col("points_latency", list_float64, "mean L of each kept bin (NULL for a bin without messages)").never_null(),
    ]),
    description: "mean latency per time bin abstracted into growth, steady_high and compressed periods, thresholds relative to the relation's average latency (PCLVis 5.1)",
    make: Make::Table(latency_trend),
};
/// The most bins one call may make.
const MAX_BINS: i64 = 50_000_000;

/// Bins when bin_ns is not given: the span cut into about this many 1-2-5 steps.
pub const DEFAULT_BINS: i64 = 100;

/// Thresholds of the classification, relative to the region's average latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendParams {
    /// Bin width; 0: a 1-2-5 step giving about DEFAULT_BINS bins over the samples' span.
    pub bin_ns: i64,
    pub window: usize,
    /// Growth: the window's fitted line rises by at least this fraction of the average.
    pub growth_rise: f64,
    /// Steady high: the window's (or a bin's) mean L is at least this multiple of the average.
    pub high_level: f64,
}

/// One bin: messages with a latency, their latency sum, delayed ones (L > 1).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Bin {
    messages: i64,
    sum: f64,
    delayed: i64,
}

impl Bin {
    fn add(&mut self, l: f64) {
        self.messages += 1;
        self.sum += l;
        self.delayed += i64::from(l > 1.0);
    }

    fn absorb(&mut self, other: &Bin) {
        self.messages += other.messages;
        self.sum += other.sum;
        self.delayed += other.delayed;
    }

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
    /// (bin centre, mean L) of the bins kept; L is None for a kept bin without messages.
    pub points: Vec<(i64, Option<f64>)>,
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

/// A compressed run shorter than a window between two runs of one important kind joins them:
/// a ramp whose slope is near the threshold stays one growth period instead of flickering.
/// Growth and steady-high runs are never absorbed, however short: a burst is what the
/// abstraction exists to show.
fn absorb_short_runs(mut kinds: Vec<&'static str>, window: usize) -> Vec<&'static str> {
    let r = runs(&kinds);
    for k in 1..r.len().saturating_sub(1) {
        let ((a, _), (s, e), (b, _)) = (r[k - 1], r[k], r[k + 1]);
        if e - s < window && kinds[a] == kinds[b] && kinds[s] == "compressed" && kinds[a] != "compressed" {
            let kind = kinds[a];
            kinds[s..e].fill(kind);
        }
    }
    kinds
}

/// The segments of a series of (send_ts, latency) samples.
/// Bytes a bin costs while the segments are found and written: its sums, its kind and its point.
pub const BYTES_PER_BIN: usize = 80;

/// Bytes a bin held while the messages stream costs in its map (its index, sums and the map's
/// share of a node).
const BYTES_PER_HELD_BIN: usize = 64;

/// The bin width and the number of bins the samples' span `(lo, hi)` is cut into.
fn binning(lo: i64, hi: i64, p: &TrendParams) -> (i64, i64) {
    let bin_ns = if p.bin_ns > 0 { p.bin_ns } else { crate::lod::resolution(lo, hi + 1, DEFAULT_BINS).unwrap_or(1) };
    (bin_ns, hi.div_euclid(bin_ns) - lo.div_euclid(bin_ns) + 1)
}

pub fn segments(samples: impl Iterator<Item = (i64, f64)> + Clone, p: &TrendParams) -> Result<Vec<Segment>> {
    Binned::of(samples, p).segments(p)
}

/// The samples of some of the messages (a cluster's part of them, or all) in bins of `step`
/// (commdb_analysis::derived::Spread::Merged's partials): a step that divides the bin width
/// the whole run's span will give, so that parts merge into the bins one pass over all the
/// messages makes. With `bin_ns` given, the step is bin_ns; otherwise the power of ten at or
/// below the 1-2-5 step of the part's own span. That divides the whole span's step: the whole
/// span is at least the part's, so its step is 1, 2 or 5 times a power of ten at least as
/// large.
#[derive(Debug, Clone, Default, PartialEq)]
struct Binned {
    /// Earliest and latest send time of a sample (None: no sample).
    span: Option<(i64, i64)>,
    step: i64,
    /// The bins that hold samples, by index (send time div step).
    bins: BTreeMap<i64, Bin>,
}

impl Binned {
    fn of(samples: impl Iterator<Item = (i64, f64)> + Clone, p: &TrendParams) -> Binned {
        let mut binned = Binned::default();
        binned.extend(samples, p);
        binned
    }

    /// The step for samples sent from `lo` to `hi`: bin_ns when given; otherwise the power of
    /// ten at or below the 1-2-5 bin width of that span. It never shrinks as the span grows.
    fn step_for(lo: i64, hi: i64, p: &TrendParams) -> i64 {
        if p.bin_ns > 0 {
            return p.bin_ns;
        }
        let chosen = binning(lo, hi, p).0;
        let mut power = 1i64;
        while power <= chosen / 10 {
            power *= 10;
        }
        power
    }

    /// `samples` added as the messages stream by: the step follows the span seen so far, and
    /// the bins made at a finer step merge into the coarser one (a multiple of it), so about
    /// ten times DEFAULT_BINS bins are held whatever the number of messages, and the bins at
    /// the end are those one pass over all the samples makes.
    fn extend(&mut self, samples: impl Iterator<Item = (i64, f64)> + Clone, p: &TrendParams) {
        let seen = samples
            .clone()
            .fold(self.span, |acc: Option<(i64, i64)>, (t, _)| Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t)))));
        let Some((lo, hi)) = seen else { return };
        self.span = seen;
        let step = Self::step_for(lo, hi, p).max(self.step);
        if step != self.step && !self.bins.is_empty() {
            let mut coarser: BTreeMap<i64, Bin> = BTreeMap::new();
            for (i, b) in std::mem::take(&mut self.bins) {
                coarser.entry((i * self.step).div_euclid(step)).or_default().absorb(&b);
            }
            self.bins = coarser;
        }
        self.step = step;
        // Messages arrive in runs within one bin (a rank's messages in send order): a run is
        // summed before it meets the map.
        let mut run: Option<(i64, Bin)> = None;
        for (t, l) in samples {
            let i = t.div_euclid(step);
            match &mut run {
                Some((j, bin)) if *j == i => bin.add(l),
                _ => {
                    if let Some((j, bin)) = run.take() {
                        self.bins.entry(j).or_default().absorb(&bin);
                    }
                    let mut bin = Bin::default();
                    bin.add(l);
                    run = Some((i, bin));
                }
            }
        }
        if let Some((j, bin)) = run {
            self.bins.entry(j).or_default().absorb(&bin);
        }
    }

    /// `other`'s samples added to these, in the smaller of the two steps (the larger is a
    /// multiple of it: both divide the whole run's bin width and are powers of ten, or both
    /// are the bin_ns given).
    fn absorb(&mut self, other: Binned) {
        self.span = match (self.span, other.span) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        if other.bins.is_empty() {
            return;
        }
        if self.bins.is_empty() {
            (self.step, self.bins) = (other.step, other.bins);
            return;
        }
        let step = self.step.min(other.step);
        let mut merged: BTreeMap<i64, Bin> = BTreeMap::new();
        for (from, bins) in [(self.step, std::mem::take(&mut self.bins)), (other.step, other.bins)] {
            for (i, b) in bins {
                merged.entry((i * from).div_euclid(step)).or_default().absorb(&b);
            }
        }
        (self.step, self.bins) = (step, merged);
    }

    /// The segments of the samples' bins.
    fn segments(&self, p: &TrendParams) -> Result<Vec<Segment>> {
        let Some((lo, hi)) = self.span else { return Ok(Vec::new()) };
        segments_of(lo, hi, self.step, &self.bins, p)
    }
}

/// The segments of the bins (by index in `step`) of samples sent from `lo` to `hi`.
fn segments_of(lo: i64, hi: i64, step: i64, held: &BTreeMap<i64, Bin>, p: &TrendParams) -> Result<Vec<Segment>> {
    let (bin_ns, count) = binning(lo, hi, p);
    let p = &TrendParams { bin_ns, ..*p };
    let first = lo.div_euclid(p.bin_ns);
    if count > MAX_BINS {
        return exec_err!(
            "latency_trend: bin_ns = {} cuts the run into {count} bins, more than {MAX_BINS}; choose a larger bin_ns",
            p.bin_ns
        );
    }
    // A window wider than the run would make every bin fit a line over all of them (and cost
    // bins x bins).
    if p.window as i64 > count.max(3) {
        return exec_err!(
            "latency_trend: window = {} is wider than the run's {count} bins of {} ns; choose a window of at most {}",
            p.window,
            p.bin_ns,
            count.max(3)
        );
    }
    let mut bins = vec![Bin::default(); count as usize];
    for (&i, b) in held {
        bins[((i * step).div_euclid(p.bin_ns) - first) as usize].absorb(b);
    }
    // Ave_region: the mean latency of all the region's messages (PCLVis 5.1).
    let (count, total) = bins.iter().fold((0i64, 0.0), |a, b| (a.0 + b.messages, a.1 + b.sum));
    let average = total / count.max(1) as f64;
    let (rise_needed, high) = (p.growth_rise * average, p.high_level * average);
    let (before, after) = ((p.window - 1) / 2, p.window / 2);
    let kinds: Vec<&'static str> = (0..bins.len())
        .map(|b| {
            let range = b.saturating_sub(before)..(b + after + 1).min(bins.len());
            let points: Vec<(f64, f64)> = range.filter_map(|i| bins[i].mean().map(|m| (i as f64, m))).collect();
            let own = bins[b].mean();
            if own.is_some_and(|m| m >= high) {
                return "steady_high";
            }
            if points.len() < 3 {
                return "compressed";
            }
            let (slope, level) = fit(&points);
            let rise = slope * (p.window - 1) as f64;
            // A growth bin has risen itself: by at least one bin's share of the required rise
            // above the mean of the window's bins before it (the flat bins just before a jump
            // see a rising line but did not rise).
            let before: Vec<f64> = points.iter().filter(|q| (q.0 as usize) < b).map(|q| q.1).collect();
            let step = rise_needed / (p.window - 1) as f64;
            let risen =
                before.is_empty() || own.is_some_and(|m| m >= before.iter().sum::<f64>() / before.len() as f64 + step);
            if rise >= rise_needed && risen {
                "growth"
            } else if rise.abs() < rise_needed && level >= high {
                "steady_high"
            } else {
                "compressed"
            }
        })
        .collect();
    let kinds = absorb_short_runs(kinds, p.window);
    let start_of = |b: usize| (first + b as i64) * p.bin_ns;
    let centre = |b: usize| start_of(b) + p.bin_ns / 2;
    let mut out = Vec::new();
    for (s, end) in runs(&kinds) {
        let e = end - 1;
        let run = &bins[s..=e];
        let (messages, sum, delayed) =
            run.iter().fold((0, 0.0, 0), |a, b| (a.0 + b.messages, a.1 + b.sum, a.2 + b.delayed));
        let points = if kinds[s] == "compressed" {
            // The period's start, middle and end (the paper's three kept timestamps).
            let mut keep = vec![s, s + (e - s) / 2, e];
            keep.dedup();
            keep.into_iter().map(|i| (centre(i), bins[i].mean())).collect()
        } else {
            (s..=e).filter_map(|i| bins[i].mean().map(|m| (centre(i), Some(m)))).collect()
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
    LATENCY_TREND.schema()
}

arguments! {
    struct TrendArgs(LATENCY_TREND) {
        rel: Relation,
        bin_ns: Option<i64>,
        window: usize,
        growth_rise: f64,
        high_level: f64,
        ..baseline: BaselineArgs,
    }
}

fn latency_trend(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let TrendArgs { rel, bin_ns, window, growth_rise, high_level, baseline } = TrendArgs::read(a)?;
    let params = TrendParams { bin_ns: bin_ns.unwrap_or(0), window, growth_rise, high_level };
    let (baseline, extra) = Baseline::plan(a.function, &baseline, a.session, &rel)?;
    let found = MessageIndices::find("latency_trend", &rel)?;
    if !found.has_send_ts() {
        return plan_err!("latency_trend: {} has no column 'send_ts'", rel.described());
    }
    let (projection, input) = found.projected();
    let out = output_schema();
    // The messages stream through, each kept as (send_ts, L) once its criterion is known;
    // the criteria are read first (crate::latency::Baseline::streamed_input).
    let extra = baseline.streamed_input(&rel, &found, extra);
    let mapper = |partial: bool, schema: SchemaRef| -> Prepare {
        let (baseline, input) = (baseline.clone(), input.clone());
        Arc::new(move |held| {
            let table = baseline.held_table(held.first().map(Vec::as_slice))?;
            let samples = Samples {
                table,
                input: input.clone(),
                baseline: baseline.clone(),
                params,
                binned: Binned::default(),
                counted: (0, 0),
                partial,
                schema: schema.clone(),
            };
            Ok(Box::new(samples) as Box<dyn Mapper>)
        })
    };
    // On a cluster, a task per part of the messages bins its samples; one task merges the
    // bins and classifies them (the bins' sums are added in another order than one pass adds
    // them: the means agree to the last digits).
    let (work, answer) = (mapper(true, partial_schema()), mapper(false, out.clone()));
    let merge: Compute = Arc::new(move |partials| {
        let mut all = Binned::default();
        let mut counted = (0, 0);
        for batch in partials {
            let (binned, c) = partial_read(batch)?;
            all.absorb(binned);
            counted = (counted.0 + c.0, counted.1 + c.1);
        }
        baseline.notice_uncovered(counted.0, counted.1);
        Ok(vec![batch(&output_schema(), &all.segments(&params)?)?])
    });
    let spread = Spread::Merged { schema: partial_schema(), work: Work::Streamed(work), merge };
    let derived = Derived::streamed(out, with_baseline(rel, Some(projection), extra), answer);
    Ok(Arc::new(derived.spreading(spread)))
}

/// The partial rows of a part (a cluster's task): its samples' bins (bin set), and one row of
/// its totals (bin NULL: the span of its samples, the messages with a duration and those of
/// them without a criterion).
fn partial_schema() -> SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    let int = |name: &str, nullable: bool| Field::new(name, DataType::Int64, nullable);
    Arc::new(Schema::new(vec![
        int("step", false),
        int("bin", true),
        int("messages", false),
        Field::new("sum", DataType::Float64, false),
        int("delayed", false),
        int("lo", true),
        int("hi", true),
        int("counted", false),
        int("uncovered", false),
    ]))
}

/// A part's partial rows (`partial_schema`).
fn partial_rows(binned: &Binned, counted: (usize, usize)) -> Result<RecordBatch> {
    let rows = binned.bins.len() + 1;
    let bins = binned.bins.iter();
    let zeros = |n: usize| std::iter::repeat_n(0i64, n);
    let column = |values: Vec<i64>| -> ArrayRef { Arc::new(Int64Array::from(values)) };
    let columns: Vec<ArrayRef> = vec![
        column(vec![binned.step; rows]),
        Arc::new(Int64Array::from(bins.clone().map(|(&i, _)| Some(i)).chain([None]).collect::<Vec<_>>())),
        column(bins.clone().map(|(_, b)| b.messages).chain([0]).collect()),
        Arc::new(Float64Array::from(bins.clone().map(|(_, b)| b.sum).chain([0.0]).collect::<Vec<_>>())),
        column(bins.clone().map(|(_, b)| b.delayed).chain([0]).collect()),
        Arc::new(Int64Array::from(
            std::iter::repeat_n(None, rows - 1).chain([binned.span.map(|s| s.0)]).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            std::iter::repeat_n(None, rows - 1).chain([binned.span.map(|s| s.1)]).collect::<Vec<_>>(),
        )),
        column(zeros(rows - 1).chain([counted.0 as i64]).collect()),
        column(zeros(rows - 1).chain([counted.1 as i64]).collect()),
    ];
    Ok(RecordBatch::try_new(partial_schema(), columns)?)
}

/// A part's bins and counts, from its partial rows.
fn partial_read(batch: &RecordBatch) -> Result<(Binned, (usize, usize))> {
    let int = |i: usize| -> Result<&Int64Array> {
        match batch.column(i).as_any().downcast_ref::<Int64Array>() {
            Some(a) => Ok(a),
            None => exec_err!("latency_trend: a part's partial rows have no integer column {i}"),
        }
    };
    let Some(sum) = batch.column(3).as_any().downcast_ref::<Float64Array>() else {
        return exec_err!("latency_trend: a part's partial rows have no sums");
    };
    let (step, bin, messages, delayed, lo, hi, counted, uncovered) =
        (int(0)?, int(1)?, int(2)?, int(4)?, int(5)?, int(6)?, int(7)?, int(8)?);
    let mut binned = Binned::default();
    let mut count = (0, 0);
    for r in 0..batch.num_rows() {
        if bin.is_null(r) {
            if !lo.is_null(r) && !hi.is_null(r) {
                binned.span = Some((lo.value(r), hi.value(r)));
            }
            count = (count.0 + counted.value(r) as usize, count.1 + uncovered.value(r) as usize);
            continue;
        }
        binned.step = step.value(r);
        let b = Bin { messages: messages.value(r), sum: sum.value(r), delayed: delayed.value(r) };
        binned.bins.insert(bin.value(r), b);
    }
    Ok((binned, count))
}

/// latency_trend's bins of (send_ts, L) of each message with a latency, gathered as the
/// messages stream; the segments at the end.
struct Samples {
    table: Arc<CriteriaTable>,
    input: MessageIndices,
    baseline: Baseline,
    params: TrendParams,
    binned: Binned,
    /// Messages with a duration, and those of them without a criterion.
    counted: (usize, usize),
    /// A cluster's part: give the bins (`partial_rows`), not the segments.
    partial: bool,
    schema: SchemaRef,
}

impl Mapper for Samples {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let cols = self.input.read(std::slice::from_ref(batch))?;
        let latency = self.table.latency_values_counted(&cols, &mut self.counted);
        let send = cols.send_ts.as_ref().expect("checked when planned");
        let kept = latency.iter().enumerate().filter(|(i, l)| !l.is_nan() && send.is_valid(*i));
        self.binned.extend(kept.map(|(i, l)| (send.value(i), *l)), &self.params);
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.binned.bins.len() * BYTES_PER_HELD_BIN
    }

    /// The bins the run is cut into (a bin_ns of 1 ns over a 25 ms run makes 25 million).
    fn finish_bytes(&self) -> usize {
        let span = self.binned.span;
        span.map_or(0, |(lo, hi)| binning(lo, hi, &self.params).1.clamp(0, MAX_BINS) as usize * BYTES_PER_BIN)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let binned = std::mem::take(&mut self.binned);
        if self.partial {
            return Ok(vec![partial_rows(&binned, self.counted)?]);
        }
        self.baseline.notice_uncovered(self.counted.0, self.counted.1);
        Ok(vec![batch(&self.schema, &binned.segments(&self.params)?)?])
    }
}

fn batch(schema: &SchemaRef, segs: &[Segment]) -> Result<RecordBatch> {
    let mut ts = ListBuilder::new(Int64Builder::new());
    let mut ls = ListBuilder::new(Float64Builder::new());
    for s in segs {
        for (t, l) in &s.points {
            ts.values().append_value(*t);
            ls.values().append_option(*l);
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
        TrendParams { bin_ns: 10, window: 5, growth_rise: 0.15, high_level: 1.5 }
    }

    /// A cluster's parts, each binned in the step of its own span and sent as partial rows,
    /// merge into the segments one pass over all the samples gives: with the bin width chosen
    /// from the span (parts of very different spans) and given.
    #[test]
    fn parts_merge_into_the_segments_of_one_pass() {
        let all: Vec<(i64, f64)> = (0..1_100).map(|t| (t * 37, series(t))).collect();
        for p in [TrendParams { bin_ns: 0, ..params() }, TrendParams { bin_ns: 370, ..params() }] {
            let whole = segments(all.iter().copied(), &p).unwrap();
            // A short part, a long one, one with nothing, the rest.
            let cuts = [&all[..40], &all[40..700], &all[700..700], &all[700..]];
            let mut merged = Binned::default();
            for (n, part) in cuts.iter().enumerate() {
                let binned = Binned::of(part.iter().copied(), &p);
                let (read, counted) = partial_read(&partial_rows(&binned, (part.len(), n)).unwrap()).unwrap();
                assert_eq!(read, binned);
                assert_eq!(counted, (part.len(), n));
                merged.absorb(read);
            }
            let parts = merged.segments(&p).unwrap();
            assert_eq!(parts.len(), whole.len());
            assert!(whole.len() > 1, "{whole:?}");
            for (a, b) in parts.iter().zip(&whole) {
                assert_eq!(
                    (a.kind, a.t_start, a.t_end, a.messages, a.delayed_messages),
                    (b.kind, b.t_start, b.t_end, b.messages, b.delayed_messages)
                );
                let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
                assert!(close(a.mean_latency.unwrap(), b.mean_latency.unwrap()));
                assert_eq!(a.points.len(), b.points.len());
            }
        }
    }

    /// Samples binned as they stream, in batches whose span grows (from a single instant to
    /// the whole run, early and late batches out of order), hold a bounded number of bins and
    /// give the bins and segments of one pass over all of them.
    #[test]
    fn streamed_batches_hold_few_bins_and_give_the_bins_of_one_pass() {
        let all: Vec<(i64, f64)> = (0..100_000).map(|t| (t * 7, series(t / 100))).collect();
        let p = TrendParams { bin_ns: 0, ..params() };
        let whole = Binned::of(all.iter().copied(), &p);
        let mut streamed = Binned::default();
        let mut most = 0;
        for range in [50_000..50_001, 50_001..60_000, 0..1_000, 90_000..100_000, 1_000..50_000, 60_000..90_000] {
            streamed.extend(all[range].iter().copied(), &p);
            most = most.max(streamed.bins.len());
        }
        assert_eq!((streamed.span, streamed.step), (whole.span, whole.step));
        assert_eq!(streamed.bins.keys().collect::<Vec<_>>(), whole.bins.keys().collect::<Vec<_>>());
        for (a, b) in streamed.bins.values().zip(whole.bins.values()) {
            assert_eq!((a.messages, a.delayed), (b.messages, b.delayed));
            assert!((a.sum - b.sum).abs() <= 1e-9 * b.sum.abs());
        }
        assert!(most <= 10 * DEFAULT_BINS as usize + 1, "{most} bins held");
        let kinds = |s: Vec<Segment>| s.iter().map(|x| (x.kind, x.t_start, x.t_end, x.messages)).collect::<Vec<_>>();
        assert_eq!(kinds(streamed.segments(&p).unwrap()), kinds(whole.segments(&p).unwrap()));
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
        // The compressed periods keep their start, middle and end bins.
        let first = &segs[0];
        let bins = (first.t_end - first.t_start) / 10;
        assert_eq!(first.points[0].0, first.t_start + 5);
        assert_eq!(first.points[2].0, first.t_end - 5);
        assert_eq!(first.points[1].0, first.t_start + (bins - 1) / 2 * 10 + 5);
    }

    #[test]
    fn short_bursts_are_kept_whatever_their_length() {
        // A flat run at 1.0 with bursts at 4x of 1, 2, 3 and 8 bins: every one is a steady-high
        // segment of its own, and nothing else is.
        let bursts = [(200, 210), (400, 420), (600, 630), (800, 880)];
        let l = |t: i64| if bursts.iter().any(|(a, b)| (*a..*b).contains(&t)) { 4.0 } else { 1.0 };
        let segs = segments((0..1_200).map(|t| (t, l(t))), &params()).unwrap();
        let high: Vec<(i64, i64)> =
            segs.iter().filter(|s| s.kind != "compressed").map(|s| (s.t_start, s.t_end)).collect();
        assert_eq!(high.len(), 4, "{segs:?}");
        for ((a, b), (s, e)) in bursts.iter().zip(&high) {
            assert!(s <= a && e >= b, "burst {a}..{b} inside {s}..{e}: {segs:?}");
            assert!(e - s <= b - a + 2 * 50, "burst {a}..{b} widened to {s}..{e}");
        }
    }

    #[test]
    fn thresholds_follow_the_average() {
        // The same shape at twice the level is classified the same way: a ramp from 2 to 6 and
        // back reads like one from 1 to 3.
        let shape = |t: i64| series(t);
        let one = segments((0..1_100).map(|t| (t, shape(t))), &params()).unwrap();
        let two = segments((0..1_100).map(|t| (t, 2.0 * shape(t))), &params()).unwrap();
        let kinds = |s: &[Segment]| s.iter().map(|x| (x.kind, x.t_start, x.t_end)).collect::<Vec<_>>();
        assert_eq!(kinds(&one), kinds(&two));
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
