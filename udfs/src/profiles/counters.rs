//! Recorded metrics per call: `call_metrics([rel => 'calls'], metrics => 'metrics', mode)`
//! gives, for every call and every metric its stream recorded (hardware counters such as
//! PAPI_TOT_CYC), the inclusive value (what the metric counted between the call's enter and
//! leave) and the exclusive value (inclusive minus the inclusive values of the calls directly
//! nested in it), as Score-P's profiles and CUBE show counters per call path.
//!
//! How a value becomes a count over an interval depends on what the writer recorded, OTF2's
//! metric mode (trace table `metric_definitions`): an *accumulated* metric is a counter since a
//! fixed point (Score-P's PAPI counters, `accumulated_start`); a *relative_last* value is what
//! was counted since the stream's previous sample (Extrae's counters in Paraver); a
//! *relative_next* value what will be counted until the next one. Each stream's samples become a
//! running count C(t) (the value itself, the sum so far, or the sum before the sample), C(t) at a
//! call's enter or leave is C at the last sample at or before that time, and the inclusive value
//! is C(leave) minus C(enter). Score-P and Extrae sample exactly at enter and leave, so nothing is interpolated.
//! Absolute metrics (a reading such as a temperature) and relative_point values have no count
//! per call: they are left out with a warning. A call before an accumulated metric's first
//! sample has NULL values; the nested calls subtracted are those of `rel`.
//!
//! The samples are folded as they stream (about 36 bytes each), then the calls are read a
//! chunk of whole ranks at a time (commdb_analysis::by_rank): a call and those nested in it are of one
//! stream, so no more than a chunk of calls is held.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Float64Builder, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use commdb_catalog::wallclock::Notices;
use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{RegionIds, column, int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::Relation;
use commdb_analysis::relation::{Projected, trace_schema, trace_table};
use commdb_analysis::stream::{Folder, Mapper, StartFold};

pub const CALL_METRICS: Function = Function {
    name: "call_metrics",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to measure"),
        param("metrics", Type::Relation, ParamDefault::Text("metrics"), "the metric samples (hardware counters)"),
        param(
            "mode",
            Type::Choice(&["accumulated_start", "relative_last", "relative_next"]),
            ParamDefault::Chosen("each metric's mode in metric_definitions"),
            "how every metric's values become counts, for metrics that come from no trace",
        ),
    ],
    output: Output::Columns(&[
        col("call_id", int64, "").never_null(),
        col("rank", int64, "").never_null(),
        col("thread", int64, "").never_null(),
        col("region", text, ""),
        col("metric", text, "the metric's name").never_null(),
        col("inclusive", float64, "what it counted between the call's enter and leave"),
        col("exclusive", float64, "the same without the calls of rel directly nested in it"),
    ]),
    description: "per call and recorded metric (hardware counters), what it counted between enter and leave (inclusive) and without the calls nested in it (exclusive), read by the metric's mode in metric_definitions (or mode => 'accumulated_start' | 'relative_last' | 'relative_next')",
    make: Make::Table(call_metrics),
};

/// How a metric's samples become a running count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Running {
    /// The value is the count since a fixed point.
    Value,
    /// The count so far includes the sample (relative_last).
    SumThrough,
    /// The count so far stops before the sample (relative_next).
    SumBefore,
}

/// The running count of a mode, or why there is none.
fn running(mode: Option<&str>) -> std::result::Result<Running, String> {
    match mode {
        Some(m) if m.starts_with("accumulated") => Ok(Running::Value),
        Some("relative_last") => Ok(Running::SumThrough),
        Some("relative_next") => Ok(Running::SumBefore),
        Some(m) if m.starts_with("absolute") => Err(format!("mode {m}: a reading, not a count")),
        Some(m) => Err(format!("mode {m}: no count per interval")),
        None => Err("no recorded mode".to_string()),
    }
}

/// The modes `mode =>` accepts.
fn accepted_modes() -> String {
    match CALL_METRICS.params[2].ty {
        Type::Choice(words) => commdb_analysis::args::one_of(words),
        _ => String::new(),
    }
}

arguments! {
    struct MetricsArgs(CALL_METRICS) {
        rel: Relation,
        metrics: Relation,
        mode: Option<String>,
    }
}

fn call_metrics(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let session = a.session;
    let MetricsArgs { rel: calls, metrics, mode } = MetricsArgs::read(a)?;
    let call_idx =
        calls.columns(a.function, &["call_id", "parent_id", "rank", "thread", "region", "start_ts", "end_ts"])?;
    let metric_idx = metrics.columns(a.function, &["rank", "thread", "ts", "metric", "value"])?;
    let mut inputs: Vec<Projected> = vec![(calls, Some(call_idx)), (metrics.clone(), Some(metric_idx))];
    if mode.is_none() {
        let Some(schema) = trace_schema(session, &metrics) else {
            return plan_err!(
                "call_metrics: '{}' is not a trace's metrics table, so how its values relate to time is unknown; give mode => {}",
                metrics.reference,
                accepted_modes()
            );
        };
        let definitions = trace_table(session, a.function, &schema, "metric_definitions")?;
        let idx = definitions.columns(a.function, &["metric", "mode"])?;
        inputs.push((definitions, Some(idx)));
    }
    let out = a.schema();
    let schema = out.clone();
    let notices = session.config().get_extension::<Notices>().map(|n| (*n).clone());
    let start: StartFold = Arc::new(move || {
        Box::new(Samples {
            schema: schema.clone(),
            mode: mode.clone(),
            notices: notices.clone(),
            modes: HashMap::new(),
            names: Vec::new(),
            ids: RegionIds::new(any_name),
            rank: Vec::new(),
            thread: Vec::new(),
            ts: Vec::new(),
            metric: Vec::new(),
            value: Vec::new(),
        }) as Box<dyn Folder>
    });
    // The calls a chunk of whole ranks at a time (their column rank, third of those read):
    // a call and the calls nested in it are of one stream.
    // Over a cluster's parts of whole ranks, every task folds the metrics and the parts'
    // rows together are the answer.
    Ok(Arc::new(Derived::folded(out, inputs, Main::ByRank(2), start).spreading(commdb_analysis::derived::Spread::Rows)))
}

/// Every metric name is kept (`RegionIds` interns names of any kind).
fn any_name(_: &str) -> bool {
    true
}

/// The metric samples and the metrics' recorded modes, folded as they stream (every valid
/// sample as it came; its metric by its number in `names`, in order of first sight).
struct Samples {
    schema: SchemaRef,
    mode: Option<String>,
    notices: Option<Notices>,
    modes: HashMap<String, Option<String>>,
    names: Vec<String>,
    ids: RegionIds<fn(&str) -> bool>,
    rank: Vec<i64>,
    thread: Vec<i64>,
    ts: Vec<i64>,
    metric: Vec<u32>,
    value: Vec<f64>,
}

impl Folder for Samples {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        let one = std::slice::from_ref(batch);
        if input == 2 {
            let (names, modes) = (text_column(one, 0)?, text_column(one, 1)?);
            for i in (0..names.len()).filter(|&i| names.is_valid(i)) {
                self.modes.insert(names.value(i).to_string(), modes.is_valid(i).then(|| modes.value(i).to_string()));
            }
            return Ok(());
        }
        let (rank, thread, ts) = (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
        let value = column(one, 4, &DataType::Float64)?;
        let value = value.as_any().downcast_ref::<Float64Array>().expect("cast to Float64");
        let mut metric = Vec::with_capacity(ts.len());
        self.ids.append(batch.column(3), &mut self.names, &mut metric)?;
        for (i, id) in metric.into_iter().enumerate() {
            let Some(id) = id else { continue };
            if rank.is_null(i) || thread.is_null(i) || ts.is_null(i) || value.is_null(i) {
                continue;
            }
            self.rank.push(rank.value(i));
            self.thread.push(thread.value(i));
            self.ts.push(ts.value(i));
            self.metric.push(id);
            self.value.push(value.value(i));
        }
        Ok(())
    }

    fn held_bytes(&self) -> usize {
        self.ts.len() * 36 + self.names.iter().map(|n| 2 * n.len() + 64).sum::<usize>()
    }

    /// Every sample is in: each stream's running counts, and a notice for the metrics that
    /// give no count per call.
    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let Samples { schema, mode, notices, modes, names: seen, rank, thread, ts, metric, value, .. } = *self;
        // Which metrics count, and how: numbered by name (the samples' partitions may
        // interleave in any order as they stream, and a call's rows follow this order).
        let mut by_name: Vec<usize> = (0..seen.len()).collect();
        by_name.sort_by(|a, b| seen[*a].cmp(&seen[*b]));
        let mut names: Vec<String> = Vec::new();
        let mut how: Vec<Running> = Vec::new();
        let mut skipped: Vec<String> = Vec::new();
        let mut counted: Vec<Option<u32>> = vec![None; seen.len()];
        for k in by_name {
            let name = &seen[k];
            let given = mode.clone().or_else(|| modes.get(name).cloned().flatten());
            match running(given.as_deref()) {
                Ok(r) => {
                    names.push(name.clone());
                    how.push(r);
                    counted[k] = Some(names.len() as u32 - 1);
                }
                Err(why) => skipped.push(format!("{name} ({why})")),
            }
        }
        if let (Some(n), false) = (&notices, skipped.is_empty()) {
            n.push(format!(
                "call_metrics: no value per call for {}; give mode => {} if the trace's mode is wrong or missing",
                skipped.join(", "),
                accepted_modes()
            ));
        }
        let mut rows_of: HashMap<(i64, i64, u32), Vec<usize>> = HashMap::new();
        for i in 0..ts.len() {
            if let Some(id) = counted[metric[i] as usize] {
                rows_of.entry((rank[i], thread[i], id)).or_default().push(i);
            }
        }
        // Each stream's series, in time order (samples of equal time in the order they came).
        let mut series: HashMap<(i64, i64), Vec<(u32, Series)>> = HashMap::new();
        for ((r, t, id), mut rows) in rows_of {
            rows.sort_by_key(|&i| ts[i]);
            let mut sum = 0.0;
            let mut count = Vec::with_capacity(rows.len());
            for &i in &rows {
                let v = value[i];
                count.push(match how[id as usize] {
                    Running::Value => v,
                    Running::SumThrough => {
                        sum += v;
                        sum
                    }
                    Running::SumBefore => {
                        let before = sum;
                        sum += v;
                        before
                    }
                });
            }
            let times = rows.iter().map(|&i| ts[i]).collect();
            series.entry((r, t)).or_default().push((id, Series { ts: times, count }));
        }
        for s in series.values_mut() {
            s.sort_by_key(|(id, _)| *id);
        }
        let bytes = series.values().flatten().map(|(_, s)| s.ts.len() * 16 + 64).sum();
        Ok(Box::new(PerCall { schema, names, how, series, bytes }))
    }
}

/// Gives every call of a chunk of whole ranks its values, metric by metric of its stream.
struct PerCall {
    schema: SchemaRef,
    names: Vec<String>,
    how: Vec<Running>,
    series: HashMap<(i64, i64), Vec<(u32, Series)>>,
    /// What the series hold.
    bytes: usize,
}

impl Mapper for PerCall {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, calls: &[RecordBatch]) -> Result<RecordBatch> {
        per_call(calls, &self.series, &self.how, &self.names, &self.schema)
    }

    fn held_bytes(&self) -> usize {
        self.bytes
    }
}

/// One stream's samples of one metric, as running counts by time.
struct Series {
    ts: Vec<i64>,
    count: Vec<f64>,
}

impl Series {
    /// The running count at `t`: at the last sample at or before it. None before the first
    /// sample of a counter whose count starts elsewhere; 0 before the first relative sample.
    fn at(&self, t: i64, how: Running) -> Option<f64> {
        let k = self.ts.partition_point(|&s| s <= t);
        match k {
            0 if how == Running::Value => None,
            0 => Some(0.0),
            _ => Some(self.count[k - 1]),
        }
    }
}

/// The rows of `call_metrics` for `calls` (a chunk of whole ranks), from each stream's series.
fn per_call(
    calls: &[RecordBatch],
    series: &HashMap<(i64, i64), Vec<(u32, Series)>>,
    how: &[Running],
    names: &[String],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let (call_id, parent) = (int64_column(calls, 0)?, int64_column(calls, 1)?);
    let (rank, thread, region) = (int64_column(calls, 2)?, int64_column(calls, 3)?, text_column(calls, 4)?);
    let (start, end) = (int64_column(calls, 5)?, int64_column(calls, 6)?);
    // Inclusive values: one row per call and metric of its stream.
    let mut out_call: Vec<usize> = Vec::new();
    let mut out_metric: Vec<u32> = Vec::new();
    let mut inclusive: Vec<Option<f64>> = Vec::new();
    let mut row_of: HashMap<(i64, u32), usize> = HashMap::new();
    for c in 0..call_id.len() {
        if c % 65_536 == 0 {
            commdb_catalog::interrupt::check("call_metrics")?;
        }
        if call_id.is_null(c) || rank.is_null(c) || thread.is_null(c) || start.is_null(c) || end.is_null(c) {
            continue;
        }
        let Some(stream) = series.get(&(rank.value(c), thread.value(c))) else { continue };
        for (id, s) in stream {
            let h = how[*id as usize];
            let v = match (s.at(start.value(c), h), s.at(end.value(c), h)) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            };
            row_of.insert((call_id.value(c), *id), inclusive.len());
            out_call.push(c);
            out_metric.push(*id);
            inclusive.push(v);
        }
    }
    // Exclusive: minus the directly nested calls' inclusive values (unknown if any is).
    let mut nested: Vec<Option<f64>> = vec![Some(0.0); inclusive.len()];
    for (r, (&c, &id)) in out_call.iter().zip(&out_metric).enumerate() {
        if parent.is_null(c) {
            continue;
        }
        if let Some(&p) = row_of.get(&(parent.value(c), id)) {
            nested[p] = match (nested[p], inclusive[r]) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
    }
    let mut exclusive = Float64Builder::with_capacity(inclusive.len());
    for (i, n) in inclusive.iter().zip(&nested) {
        exclusive.append_option(match (i, n) {
            (Some(i), Some(n)) => Some(i - n),
            _ => None,
        });
    }
    let take =
        |a: &Int64Array| -> ArrayRef { Arc::new(Int64Array::from_iter_values(out_call.iter().map(|&c| a.value(c)))) };
    let columns: Vec<ArrayRef> = vec![
        take(&call_id),
        take(&rank),
        take(&thread),
        Arc::new(StringArray::from_iter(out_call.iter().map(|&c| region.is_valid(c).then(|| region.value(c))))),
        Arc::new(StringArray::from_iter_values(out_metric.iter().map(|&id| names[id as usize].as_str()))),
        Arc::new(Float64Array::from(inclusive)),
        Arc::new(exclusive.finish()),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_counts_follow_the_mode() {
        let s = Series { ts: vec![10, 20, 30], count: vec![5.0, 8.0, 12.0] };
        assert_eq!(s.at(9, Running::Value), None);
        assert_eq!(s.at(9, Running::SumThrough), Some(0.0));
        assert_eq!(s.at(10, Running::Value), Some(5.0));
        assert_eq!(s.at(25, Running::Value), Some(8.0));
        assert_eq!(s.at(99, Running::Value), Some(12.0));
        assert!(running(Some("absolute_point")).is_err());
        assert!(running(None).is_err());
        assert_eq!(running(Some("accumulated_start")), Ok(Running::Value));
    }
}
