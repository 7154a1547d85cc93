//! Two runs side by side: `compare_runs(a => 'run1', b => 'run2', by => ...)` compares two
//! attached traces key by key (region, rank, node, pair of ranks, message size class or
//! iteration) and metric by metric: per key and metric the value in each run, the difference
//! (b minus a), the ratio, the difference's share of the metric's total difference, the
//! difference over its noise (z) and whether it exceeds run-to-run noise (`stats`). The rows
//! come with the significant differences first, computation before traffic, MPI time and then
//! waiting (waiting is most often the consequence of another rank's time, so the rank or region
//! that caused it comes before those that waited), each class by the size of its share.
//!
//! What is compared is gathered by one query per run over its tables and `iterations` (a row
//! per key, metric and sample: a rank, an iteration, or a mean over messages with its count
//! and spread; by rank and node the iterations' times come as a second query, a row per key
//! and iteration with a column per metric), and the two runs are compared when both are
//! read. Pipit compares the flat profiles of several runs side by side and Scalasca's cube
//! tools subtract two profiles; neither says which difference is beyond noise.

pub mod scaling;
pub mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use commdb_catalog::wallclock::Notices;
use datafusion::catalog::TableProvider;
use datafusion::common::{TableReference, exec_err, plan_err};
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::{Relation, quote, resolve};

use stats::Kind;

const KEYS: &[&str] = &["region", "rank", "node", "pair", "size_class", "iteration"];

pub const COMPARE_RUNS: Function = Function {
    name: "compare_runs",
    params: &[
        param(
            "a",
            Type::Text,
            ParamDefault::Chosen("the default trace (the first opened)"),
            "the schema of the first run (ATTACH 'run1/' AS run1)",
        ),
        param("b", Type::Text, ParamDefault::Required, "the schema of the second run"),
        param(
            "by",
            Type::Choice(KEYS),
            ParamDefault::Text("region"),
            "the key: region, rank, node, pair (of ranks), size_class (power-of-two message sizes) or iteration",
        ),
    ],
    output: Output::Columns(&[
        col("key", text, "the region, rank, node, pair 'src->dst', size class 'lo-hi bytes' or iteration").never_null(),
        col("metric", text, "what is compared (docs/guide.md lists them per key)").never_null(),
        col("a", float64, "its value in run a (a total; a mean for mean_* metrics, and a mean per rank by region when the runs have different ranks)"),
        col("b", float64, "its value in run b"),
        col("difference", float64, "b - a"),
        col("ratio", float64, "b / a (NULL when a is 0 or missing)"),
        col("share", float64, "the difference's share of the total difference of the metric over the keys"),
        col("z", float64, "the difference over its run-to-run noise (NULL for counts, which have none)"),
        col("significant", boolean, "the difference exceeds noise: |z| above the normal quantile of 1 % over the quantities tested (Bonferroni); counts: any difference").never_null(),
    ]),
    description: "two attached runs compared by region, rank, node, pair, size_class or iteration: per key and metric (exclusive time, computation, MPI and waiting time by kind, messages, bytes, inter-node messages, mean transmission time) the values, difference, ratio, share and whether the difference exceeds run-to-run noise measured over iterations or ranks; significant differences first, causes before waiting",
    make: Make::Table(compare_runs),
};

arguments! {
    struct CompareArgs(COMPARE_RUNS) {
        a: Option<String>,
        b: String,
        by: String,
    }
}

fn compare_runs(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let CompareArgs { a: run_a, b: run_b, by } = CompareArgs::read(a)?;
    let run_a = run_a.unwrap_or_else(|| a.session.config().options().catalog.default_schema.clone());
    for run in [&run_a, &run_b] {
        if resolve(a.session, a.function, &format!("{}.calls", quote(run))).is_err() {
            return plan_err!(
                "compare_runs: no trace is attached as '{run}' (ATTACH 'trace' AS {run}; SHOW TABLES lists them)"
            );
        }
    }
    let view = |run: &str, what: &str, sql: String| -> Result<Relation> {
        let view = commdb_analysis::views::sql_view(a.session, a.function, sql)?;
        Ok(Relation { reference: TableReference::bare(format!("{by} {what} of {run}")), provider: Arc::new(view) })
    };
    // The runs' rank counts are read with the samples (not while the call is planned: on a
    // cluster, planning happens on every process and runs no query).
    let ranks = |run: &str| -> Result<Relation> {
        let sql = format!("SELECT count(*) AS ranks FROM {}.ranks", quote(run));
        let view = commdb_analysis::views::sql_view(a.session, a.function, sql)?;
        Ok(Relation { reference: TableReference::bare(format!("ranks of {run}")), provider: Arc::new(view) })
    };
    let mut inputs = Vec::with_capacity(6);
    for run in [&run_a, &run_b] {
        inputs.push((view(run, "samples", samples(&quote(run), &by))?, None));
    }
    for run in [&run_a, &run_b] {
        inputs.push((ranks(run)?, None));
    }
    for run in [&run_a, &run_b] {
        if let Some(sql) = iteration_samples(&quote(run), &by) {
            inputs.push((view(run, "iteration samples", sql)?, None));
        }
    }
    let out = a.schema();
    let schema = out.clone();
    let notices = a.session.config().get_extension::<Notices>().map(|n| (*n).clone());
    let compute = Arc::new(move |inputs: &[Vec<RecordBatch>]| {
        let count = |batches: &[RecordBatch]| -> Result<i64> {
            Ok(batches.first().map(|b| int64_column(std::slice::from_ref(b), 0)).transpose()?.map_or(0, |c| c.value(0)))
        };
        let (ranks_a, ranks_b) = (count(&inputs[2])?, count(&inputs[3])?);
        if ranks_a != ranks_b && matches!(by.as_str(), "rank" | "node" | "pair") {
            return exec_err!(
                "compare_runs: by => '{by}' pairs the runs' ranks, but {run_a} has {ranks_a} ranks and {run_b} {ranks_b}; compare by region, size_class or iteration"
            );
        }
        if ranks_a != ranks_b
            && by == "region"
            && let Some(n) = &notices
        {
            n.push(format!(
                "compare_runs: {run_a} has {ranks_a} ranks and {run_b} {ranks_b}: by region, a and b are means per rank"
            ));
        }
        let (mut qa, mut qb) = (Reader::default(), Reader::default());
        qa.long(&inputs[0])?;
        qb.long(&inputs[1])?;
        if ranks_a != ranks_b && by == "region" {
            qa.per_rank(ranks_a);
            qb.per_rank(ranks_b);
        }
        if let [wide_a, wide_b] = &inputs[4..] {
            qa.wide(wide_a)?;
            qb.wide(wide_b)?;
        }
        compare(qa.finish(), qb.finish(), &schema)
    });
    Ok(Arc::new(Derived::from_many(out, inputs, compute)))
}

/// The query of run `r` (a quoted schema) that gives the samples compared by `by`: columns
/// key, metric, class (0 computation, 1 traffic, 2 MPI, 3 waiting), kind (stats::Kind),
/// sample, value, n, sd (by rank and node, the traffic; the iterations' times come from
/// `iteration_samples`).
fn samples(r: &str, by: &str) -> String {
    let s = |text: &str| format!("'{}'", text.replace('\'', "''"));
    let calls = s(&format!("{r}.calls"));
    // The messages' counts and mean transmission time, per key expression `k` of the messages.
    // Latency L is measured against each run's own criteria, which differ by noise between
    // runs; the ratio of the mean transmission times is the latency of b against a's.
    let traffic = |k: &str| {
        format!(
            "SELECT g.key, t.metric, CAST(t.class AS BIGINT) AS class, t.kind, CAST(NULL AS BIGINT) AS sample,
                    CAST(CASE t.metric WHEN 'messages' THEN g.messages WHEN 'bytes' THEN g.bytes
                         WHEN 'inter_node_messages' THEN g.inter ELSE g.mean END AS DOUBLE) AS value,
                    CAST(CASE t.metric WHEN 'mean_duration_ns' THEN g.n ELSE g.messages END AS BIGINT) AS n,
                    CAST(CASE t.metric WHEN 'mean_duration_ns' THEN g.sd END AS DOUBLE) AS sd
             FROM (SELECT {k} AS key, count(*) AS messages, sum(bytes) AS bytes,
                          sum(CASE WHEN intra_node THEN 0 WHEN NOT intra_node THEN 1 END) AS inter,
                          avg(duration) AS mean, count(duration) AS n, stddev(duration) AS sd
                   FROM {r}.messages WHERE {k} IS NOT NULL GROUP BY 1) g
             CROSS JOIN (VALUES ('messages', 1, 'exact'), ('bytes', 1, 'exact'), ('inter_node_messages', 1, 'exact'),
                                ('mean_duration_ns', 2, 'mean')) t(metric, class, kind)"
        )
    };
    match by {
        // A region's exclusive time per iteration over the ranks (`iteration_regions`), and what
        // lies outside the iterations (setup, the end) as one more sample, -1.
        "region" => format!(
            "WITH ir AS (SELECT region, iteration, CAST(sum(exclusive_ns) AS DOUBLE) AS x
                         FROM iteration_regions({calls}) GROUP BY region, iteration),
                  inside AS (SELECT region, sum(x) AS x FROM ir GROUP BY region),
                  total AS (SELECT region, CAST(sum(exclusive) AS DOUBLE) AS x, count(*) AS n FROM {r}.calls GROUP BY region)
             SELECT coalesce(region, '(no region)') AS key, 'exclusive_ns' AS metric,
                    CAST(CASE WHEN starts_with(region, 'MPI_') THEN 2 ELSE 0 END AS BIGINT) AS class,
                    'iteration_totals' AS kind, iteration AS sample, x AS value, CAST(1 AS BIGINT) AS n,
                    CAST(NULL AS DOUBLE) AS sd
             FROM ir
             UNION ALL
             SELECT coalesce(t.region, '(no region)'), 'exclusive_ns',
                    CAST(CASE WHEN starts_with(t.region, 'MPI_') THEN 2 ELSE 0 END AS BIGINT), 'iteration_totals',
                    CAST(-1 AS BIGINT), t.x - coalesce(i.x, 0), CAST(1 AS BIGINT), CAST(NULL AS DOUBLE)
             FROM total t LEFT JOIN inside i ON i.region IS NOT DISTINCT FROM t.region
             UNION ALL
             SELECT coalesce(region, '(no region)'), 'calls', CAST(1 AS BIGINT), 'exact', CAST(NULL AS BIGINT),
                    CAST(n AS DOUBLE), n, CAST(NULL AS DOUBLE)
             FROM total"
        ),
        "rank" => traffic("CAST(src AS VARCHAR)"),
        "node" => traffic("CAST(src_node AS VARCHAR)"),
        "pair" => traffic("concat(CAST(src AS VARCHAR), '->', CAST(dst AS VARCHAR))"),
        "size_class" => traffic(
            "CASE WHEN bytes IS NULL THEN NULL WHEN bytes <= 0 THEN '0 bytes'
                  ELSE concat(CAST(power(2, floor(log2(CAST(bytes AS DOUBLE)))) AS BIGINT), '-',
                              CAST(power(2, floor(log2(CAST(bytes AS DOUBLE))) + 1) AS BIGINT) - 1, ' bytes') END",
        ),
        _ => format!(
            "SELECT CAST(g.iteration AS VARCHAR) AS key, t.metric, CAST(t.class AS BIGINT) AS class, 'series' AS kind,
                    g.iteration AS sample,
                    CAST(CASE t.metric WHEN 'duration_ns' THEN g.duration WHEN 'compute_ns' THEN g.compute
                         WHEN 'mpi_ns' THEN g.mpi ELSE g.waiting END AS DOUBLE) AS value,
                    CAST(g.ranks AS BIGINT) AS n, CAST(NULL AS DOUBLE) AS sd
             FROM (SELECT iteration, count(*) AS ranks, max(end_ts) - min(start_ts) AS duration,
                          sum(compute_ns) AS compute, sum(mpi_ns) AS mpi, sum(waiting_ns) AS waiting
                   FROM iterations({calls}) GROUP BY iteration) g
             CROSS JOIN (VALUES ('duration_ns', 0), ('compute_ns', 0), ('mpi_ns', 2), ('waiting_ns', 3)) t(metric, class)"
        ),
    }
}

/// The iterations' times a quantity per metric compares, with their classes, as the columns
/// of `iteration_samples` after key and sample.
const ITERATION_METRICS: [(&str, i64); 6] = [
    ("compute_ns", 0),
    ("mpi_ns", 2),
    ("waiting_ns", 3),
    ("late_sender_ns", 3),
    ("late_receiver_ns", 3),
    ("collective_wait_ns", 3),
];

/// The query of run `r` that gives, by rank or node, the iterations' times: columns key,
/// sample (the iteration), then the metrics of ITERATION_METRICS; a row per key and iteration
/// (read as they are rather than a row per metric, six times fewer).
fn iteration_samples(r: &str, by: &str) -> Option<String> {
    let calls = format!("'{}'", format!("{r}.calls").replace('\'', "''"));
    let metrics = ITERATION_METRICS.map(|(m, _)| m);
    Some(match by {
        "rank" => format!(
            "SELECT CAST(rank AS VARCHAR) AS key, iteration AS sample, {} FROM iterations({calls})",
            metrics.join(", ")
        ),
        "node" => format!(
            "SELECT CAST(rk.node AS VARCHAR) AS key, it.iteration AS sample, {}
             FROM iterations({calls}) it JOIN {r}.ranks rk ON rk.rank = it.rank
             GROUP BY rk.node, it.iteration",
            metrics.map(|m| format!("sum(it.{m}) AS {m}")).join(", ")
        ),
        _ => return None,
    })
}

/// One compared quantity's samples in one run.
#[derive(Debug, Default, Clone)]
struct Side {
    /// (sample, value); for a mean, one entry (None, mean).
    values: Vec<(Option<i64>, f64)>,
    n: f64,
    sd: f64,
}

impl Side {
    fn total(&self) -> f64 {
        self.values.iter().map(|v| v.1).sum()
    }
}

/// One quantity of a run: its class, kind and samples.
type Quantity = (i64, Kind, Side);

/// The quantities of one run, by (metric, key).
type Quantities = BTreeMap<(String, String), Quantity>;

/// The quantities of one run as its samples are read, metrics and keys interned (a row per
/// sample: hundreds of thousands by rank).
#[derive(Default)]
struct Reader {
    names: crate::sweeps::call_sweep::Names,
    index: commdb_catalog::fast_hash::FastMap<(u32, u32), usize>,
    entries: Vec<((u32, u32), Quantity)>,
}

impl Reader {
    /// The side of (metric, key), made with `class` and `kind` when new.
    fn side(&mut self, metric: &str, key: &str, class: i64, kind: Kind) -> &mut Side {
        let id = (self.names.id(metric), self.names.id(key));
        let entries = &mut self.entries;
        let at = *self.index.entry(id).or_insert_with(|| {
            entries.push((id, (class, kind, Side::default())));
            entries.len() - 1
        });
        &mut self.entries[at].1.2
    }

    /// Samples a row per key, metric and sample: key, metric, class, kind, sample, value, n, sd.
    fn long(&mut self, batches: &[RecordBatch]) -> Result<()> {
        for b in batches {
            let one = std::slice::from_ref(b);
            let (key, metric, kind) = (text_column(one, 0)?, text_column(one, 1)?, text_column(one, 3)?);
            let (class, sample, n) = (int64_column(one, 2)?, int64_column(one, 4)?, int64_column(one, 6)?);
            let (value, sd) = (floats(b.column(5))?, floats(b.column(7))?);
            for i in 0..b.num_rows() {
                if key.is_null(i) || value.is_null(i) {
                    continue;
                }
                let Some(k) = Kind::parse(kind.value(i)) else { continue };
                let s = self.side(metric.value(i), key.value(i), class.value(i), k);
                s.values.push((sample.is_valid(i).then(|| sample.value(i)), value.value(i)));
                s.n += if n.is_valid(i) { n.value(i) as f64 } else { 1.0 };
                if sd.is_valid(i) {
                    s.sd = sd.value(i);
                }
            }
        }
        Ok(())
    }

    /// Samples a row per key and iteration: key, sample, then ITERATION_METRICS.
    fn wide(&mut self, batches: &[RecordBatch]) -> Result<()> {
        for b in batches {
            let one = std::slice::from_ref(b);
            let (key, sample) = (text_column(one, 0)?, int64_column(one, 1)?);
            let values: Vec<Float64Array> =
                (0..ITERATION_METRICS.len()).map(|m| floats(b.column(2 + m))).collect::<Result<_>>()?;
            for i in 0..b.num_rows() {
                if key.is_null(i) || sample.is_null(i) {
                    continue;
                }
                for (&(metric, class), value) in ITERATION_METRICS.iter().zip(&values) {
                    if value.is_valid(i) {
                        let s = self.side(metric, key.value(i), class, Kind::SeriesSamples);
                        s.values.push((Some(sample.value(i)), value.value(i)));
                        s.n += 1.0;
                    }
                }
            }
        }
        Ok(())
    }

    /// Every value divided by the run's `ranks`: means per rank, to compare runs of different
    /// sizes.
    fn per_rank(&mut self, ranks: i64) {
        let ranks = ranks.max(1) as f64;
        for (_, (_, _, side)) in &mut self.entries {
            for v in &mut side.values {
                v.1 /= ranks;
            }
        }
    }

    fn finish(self) -> Quantities {
        let Reader { names, entries, .. } = self;
        let name = |id: u32| names.names[id as usize].clone();
        entries.into_iter().map(|((m, k), q)| ((name(m), name(k)), q)).collect()
    }
}

/// A column as 64-bit floats.
fn floats(column: &ArrayRef) -> Result<Float64Array> {
    let cast = cast(column, &DataType::Float64)?;
    Ok(cast.as_any().downcast_ref::<Float64Array>().cloned().unwrap_or_else(|| Float64Array::from(Vec::<f64>::new())))
}

/// One row of the answer.
#[derive(Debug, Clone)]
struct Row {
    key: String,
    metric: String,
    class: i64,
    a: Option<f64>,
    b: Option<f64>,
    z: Option<f64>,
    exact: bool,
    share: Option<f64>,
    significant: bool,
}

impl Row {
    fn difference(&self) -> Option<f64> {
        Some(self.b.unwrap_or(0.0) - self.a.unwrap_or(0.0)).filter(|_| self.a.is_some() || self.b.is_some())
    }
}

fn compare(qa: Quantities, qb: Quantities, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut keys: Vec<&(String, String)> = qa.keys().chain(qb.keys()).collect();
    keys.sort();
    keys.dedup();
    // The series' noise, per metric and run: over the keys in iteration order.
    let series_sd = |q: &Quantities, metric: &str| {
        let mut points: Vec<(i64, f64)> = q
            .iter()
            .filter(|((m, _), (_, kind, _))| m == metric && *kind == Kind::Series)
            .filter_map(|(_, (_, _, s))| Some((s.values.first()?.0?, s.total())))
            .collect();
        points.sort_by_key(|p| p.0);
        stats::series_sd(&points.iter().map(|p| p.1).collect::<Vec<_>>())
    };
    let mut noise_of_series: BTreeMap<&str, f64> = BTreeMap::new();
    let mut rows = Vec::with_capacity(keys.len());
    for key in keys {
        let (sa, sb) = (qa.get(key), qb.get(key));
        let Some(&(class, kind, _)) = sa.or(sb) else { continue };
        let (ea, eb) = (sa.map(|s| &s.2), sb.map(|s| &s.2));
        let mut row = Row {
            key: key.1.clone(),
            metric: key.0.clone(),
            class,
            a: ea.map(Side::total),
            b: eb.map(Side::total),
            z: None,
            exact: kind == Kind::Exact,
            share: None,
            significant: false,
        };
        let empty = Side::default();
        let (ea, eb) = (ea.unwrap_or(&empty), eb.unwrap_or(&empty));
        match kind {
            Kind::Exact => {}
            Kind::Mean => {
                row.a = ea.values.first().map(|v| v.1);
                row.b = eb.values.first().map(|v| v.1);
                if ea.n >= stats::MIN_SAMPLES as f64 && eb.n >= stats::MIN_SAMPLES as f64 {
                    row.z =
                        Some(stats::z_means((row.a.unwrap_or(0.0), ea.sd, ea.n), (row.b.unwrap_or(0.0), eb.sd, eb.n)));
                }
            }
            Kind::IterationTotals => {
                // Every iteration from the first to the last either run has, 0 where one has
                // none, so the differences add up to the total difference.
                let (ma, mb) = (by_sample(ea), by_sample(eb));
                let first = ma.keys().chain(mb.keys()).min().copied();
                let last = ma.keys().chain(mb.keys()).max().copied();
                if let (Some(first), Some(last)) = (first, last) {
                    let at = |m: &BTreeMap<i64, f64>, k: i64| m.get(&k).copied().unwrap_or(0.0);
                    let d: Vec<f64> = (first..=last).map(|k| at(&mb, k) - at(&ma, k)).collect();
                    if d.len() >= stats::MIN_SAMPLES {
                        row.z = Some(stats::z_paired_series(&d));
                    }
                }
            }
            Kind::SeriesSamples => {
                let (ma, mb) = (by_sample(ea), by_sample(eb));
                let d: Vec<f64> = ma.iter().filter_map(|(s, x)| Some(mb.get(s)? - x)).collect();
                if d.len() >= stats::MIN_SAMPLES {
                    row.z = Some(stats::z_paired_series(&d));
                }
            }
            Kind::Series => {
                let metric = key.0.as_str();
                let noise = match noise_of_series.get(metric) {
                    Some(n) => *n,
                    None => {
                        let (na, nb) = (series_sd(&qa, metric), series_sd(&qb, metric));
                        let n = (na * na + nb * nb).sqrt().max(stats::RESOLUTION_NS);
                        noise_of_series.insert(key.0.as_str(), n);
                        n
                    }
                };
                if let Some(d) = row.difference() {
                    row.z = Some(stats::z(d, noise));
                }
            }
        }
        rows.push(row);
    }
    // Shares of each metric's total difference.
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    for r in &rows {
        *totals.entry(r.metric.clone()).or_default() += r.difference().unwrap_or(0.0);
    }
    let tests = rows.iter().filter(|r| r.z.is_some()).count();
    let critical = stats::critical_z(tests);
    for r in &mut rows {
        let total = totals.get(&r.metric).copied().unwrap_or(0.0);
        r.share = r.difference().filter(|_| total != 0.0).map(|d| d / total);
        r.significant = match (r.exact, r.z) {
            (true, _) => r.difference().is_some_and(|d| d != 0.0),
            (false, Some(z)) => z.abs() > critical,
            (false, None) => false,
        };
    }
    rows.sort_by(|x, y| {
        y.significant
            .cmp(&x.significant)
            .then(x.class.cmp(&y.class))
            .then(y.share.unwrap_or(0.0).abs().total_cmp(&x.share.unwrap_or(0.0).abs()))
            .then_with(|| x.metric.cmp(&y.metric))
            .then_with(|| natural(&x.key).cmp(&natural(&y.key)))
    });
    Ok(vec![batch(&rows, schema)?])
}

/// A key as it sorts: numbers by value.
fn natural(key: &str) -> (i64, &str) {
    (key.parse::<i64>().unwrap_or(i64::MAX), key)
}

fn by_sample(side: &Side) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for (s, v) in &side.values {
        *out.entry(s.unwrap_or(0)).or_insert(0.0) += v;
    }
    out
}

fn batch(rows: &[Row], schema: &SchemaRef) -> Result<RecordBatch> {
    let opt = |f: &dyn Fn(&Row) -> Option<f64>| -> ArrayRef {
        Arc::new(Float64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.key.as_str()))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.metric.as_str()))),
        opt(&|r| r.a),
        opt(&|r| r.b),
        opt(&|r| r.difference()),
        opt(&|r| match (r.a, r.b) {
            (Some(a), Some(b)) if a != 0.0 => Some(b / a),
            _ => None,
        }),
        opt(&|r| r.share),
        opt(&|r| r.z),
        Arc::new(BooleanArray::from(rows.iter().map(|r| r.significant).collect::<Vec<_>>())),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
