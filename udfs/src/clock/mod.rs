//! The clock functions: `clock_model([rel])` shows the model that clock correction fitted for
//! every rank (commdb_catalog::clock::model, after Intel Trace Collector's clock
//! synchronisation), `clock_violations([rel])` lists the messages that still run backwards.
//! The model is fitted again from the sync samples when the query runs (O(samples log samples)),
//! so a view over `clock_sync` (some sessions, some ranks) shows what that subset would give.
//! `clock_violations` streams the messages batch by batch, keeping only those that run backwards.

pub mod wallclock;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use commdb_catalog::clock::model::fit_rank;
use commdb_catalog::trace::{ClockSample, Warnings};
use datafusion::catalog::TableProvider;
use datafusion::common::{ScalarValue, TableReference};
use datafusion::datasource::{ViewTable, provider_as_source};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, cast, lit};

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::int64_column;
use commdb_analysis::declare::{Function, Make, Output, col, float64, int32, int64, text};
use commdb_analysis::derived::{Compute, Derived};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::{Relation, resolve};

pub const CLOCK_MODEL: Function = Function {
    name: "clock_model",
    params: &[param("rel", Type::Relation, ParamDefault::Text("clock_sync"), "the clock sync samples to fit")],
    output: Output::Columns(&[
        col("rank", int32, "").never_null(),
        col("segment", int32, "0-based segment of the rank's model (piecewise models have several)").never_null(),
        col("local_from", int64, "first local time the segment covers (NULL: from the start)"),
        col("local_to", int64, "last local time the segment covers (NULL: to the end)"),
        col("slope", float64, "master time per local time").never_null(),
        col("offset_ns", float64, "master ~ slope * local + offset_ns").never_null(),
        col("method", text, "how the model was fitted: none (the master), offset, linear or spline").never_null(),
        col("samples_used", int64, "sync samples the fit used").never_null(),
        col("samples_dropped", int64, "sync samples dropped for their long round trip (a tenth of each session)")
            .never_null(),
        col("rms_residual_ns", float64, "root mean square of the used samples' residuals").never_null(),
    ]),
    description: "per rank and segment, the clock model fitted from the sync samples: master ~ slope * local + offset_ns (Intel Trace Collector clock sync)",
    make: Make::Table(clock_model),
};

pub const CLOCK_VIOLATIONS: Function = Function {
    name: "clock_violations",
    params: &[param("rel", Type::Relation, ParamDefault::Text("messages"), "the matched messages to check")],
    output: Output::Columns(&[
        col("msg_id", int64, "").never_null(),
        col("src", int64, "").never_null(),
        col("dst", int64, "").never_null(),
        col("send_ts", int64, "").never_null(),
        col("recv_ts", int64, "").never_null(),
        col("violation_ns", int64, "how much earlier the receive is than the send").never_null(),
    ]),
    description: "matched messages received before they were sent, by how much (ns)",
    make: Make::Table(clock_violations),
};

/// The sync columns the model needs.
const SYNC_COLUMNS: [&str; 6] = ["rank", "session", "local_ts", "master_ts", "round_trip", "std_dev_ns"];

arguments! {
    /// The one argument of the clock functions: the clock-sync measurements.
    struct SyncArgs(CLOCK_MODEL, CLOCK_VIOLATIONS) {
        rel: Relation,
    }
}

fn clock_model(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let SyncArgs { rel: relation } = SyncArgs::read(a)?;
    relation.columns("clock_model", &SYNC_COLUMNS)?;
    let input = with_ranks_of_trace(a.session, relation)?;
    let idx = input.columns("clock_model", &SYNC_COLUMNS)?;
    let out = a.schema();
    let s = out.clone();
    let compute: Compute = Arc::new(move |batches| {
        let c: Vec<Int64Array> = (0..6).map(|i| int64_column(batches, i)).collect::<Result<_>>()?;
        let mut by_rank: BTreeMap<i32, Vec<ClockSample>> = BTreeMap::new();
        for i in 0..c[0].len() {
            let samples = by_rank.entry(c[0].value(i) as i32).or_default();
            if c[1].is_null(i) || c[2].is_null(i) || c[3].is_null(i) {
                continue;
            }
            let opt = |a: &Int64Array| (!a.is_null(i)).then(|| a.value(i));
            samples.push(ClockSample {
                rank: c[0].value(i) as i32,
                session: c[1].value(i) as i32,
                local_ts: c[2].value(i),
                master_ts: c[3].value(i),
                round_trip: opt(&c[4]),
                std_dev_ns: opt(&c[5]),
                exact: None,
            });
        }
        let mut rows = Rows::default();
        let mut ignored = Warnings::default();
        for (rank, samples) in &by_rank {
            let m = fit_rank(*rank, samples, &mut ignored);
            for (k, seg) in m.segments().iter().enumerate() {
                rows.rank.push(*rank);
                rows.segment.push(k as i32);
                rows.local_from.push(seg.local_from.map(|x| x.round() as i64));
                rows.local_to.push(seg.local_to.map(|x| x.round() as i64));
                rows.slope.push(seg.slope);
                rows.offset.push(seg.offset);
                rows.method.push(m.fit.method());
                rows.used.push(m.samples_used);
                rows.dropped.push(m.samples_dropped);
                rows.rms.push(m.rms_residual_ns);
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(rows.rank)),
            Arc::new(Int32Array::from(rows.segment)),
            Arc::new(Int64Array::from(rows.local_from)),
            Arc::new(Int64Array::from(rows.local_to)),
            Arc::new(Float64Array::from(rows.slope)),
            Arc::new(Float64Array::from(rows.offset)),
            Arc::new(StringArray::from(rows.method)),
            Arc::new(Int64Array::from(rows.used)),
            Arc::new(Int64Array::from(rows.dropped)),
            Arc::new(Float64Array::from(rows.rms)),
        ];
        Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
    });
    Ok(Arc::new(Derived::new(out, input, Some(idx), compute)))
}

#[derive(Default)]
struct Rows {
    rank: Vec<i32>,
    segment: Vec<i32>,
    local_from: Vec<Option<i64>>,
    local_to: Vec<Option<i64>>,
    slope: Vec<f64>,
    offset: Vec<f64>,
    method: Vec<&'static str>,
    used: Vec<i64>,
    dropped: Vec<i64>,
    rms: Vec<f64>,
}

/// When `rel` is a trace's `clock_sync` table, add a sample-less row for every rank of the same
/// trace, so ranks without samples (the master) show as 'none'. A view is taken as it is.
fn with_ranks_of_trace(session: &dyn datafusion::catalog::Session, rel: Relation) -> Result<Relation> {
    let table = rel.reference.table().to_string();
    if !table.eq_ignore_ascii_case("clock_sync") {
        return Ok(rel);
    }
    let ranks_name = match rel.reference.schema() {
        Some(schema) => format!("{schema}.ranks"),
        None => "ranks".to_string(),
    };
    let Ok(ranks) = resolve(session, "clock_model", &ranks_name) else { return Ok(rel) };
    let typed = |name: &str, t: &DataType| cast(datafusion::logical_expr::col(name), t.clone()).alias(name);
    let sync_schema = rel.schema();
    let sync_exprs: Vec<Expr> = SYNC_COLUMNS
        .iter()
        .map(|c| sync_schema.field_with_name(c).map(|f| typed(c, f.data_type())))
        .collect::<std::result::Result<_, _>>()?;
    let null_of = |name: &str| -> Result<Expr> {
        let t = sync_schema.field_with_name(name)?.data_type().clone();
        Ok(cast(lit(ScalarValue::try_from(&t)?), t).alias(name))
    };
    let mut rank_exprs = vec![typed("rank", sync_schema.field_with_name("rank")?.data_type())];
    for c in &SYNC_COLUMNS[1..] {
        rank_exprs.push(null_of(c)?);
    }
    let sync_plan = LogicalPlanBuilder::scan(rel.reference.clone(), provider_as_source(rel.provider.clone()), None)?
        .project(sync_exprs)?;
    let ranks_plan = LogicalPlanBuilder::scan(ranks.reference.clone(), provider_as_source(ranks.provider), None)?
        .project(rank_exprs)?
        .build()?;
    let plan = sync_plan.union(ranks_plan)?.build()?;
    Ok(Relation {
        reference: TableReference::bare(format!("{}+ranks", rel.reference)),
        provider: Arc::new(ViewTable::new(plan, None)),
    })
}

fn clock_violations(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let SyncArgs { rel: relation } = SyncArgs::read(a)?;
    let idx = relation.columns("clock_violations", &["msg_id", "src", "dst", "send_ts", "recv_ts"])?;
    let out = a.schema();
    let s = out.clone();
    let prepare: commdb_analysis::stream::Prepare =
        Arc::new(move |_| Ok(Box::new(Backwards { schema: s.clone() }) as Box<dyn commdb_analysis::stream::Mapper>));
    Ok(Arc::new(Derived::streamed(out, vec![(relation, Some(idx))], prepare)))
}

/// The messages of a batch received before they were sent: each batch on its own, so that the
/// messages stream through and only the violations are kept.
struct Backwards {
    schema: SchemaRef,
}

impl commdb_analysis::stream::Mapper for Backwards {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let one = std::slice::from_ref(batch);
        let c: Vec<Int64Array> = (0..5).map(|i| int64_column(one, i)).collect::<Result<_>>()?;
        let (send, recv) = (&c[3], &c[4]);
        let hits: Vec<usize> = (0..send.len())
            .filter(|&i| !send.is_null(i) && !recv.is_null(i) && recv.value(i) < send.value(i))
            .collect();
        let pick = |a: &Int64Array| Int64Array::from_iter_values(hits.iter().map(|&i| a.value(i)));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(pick(&c[0])),
            Arc::new(pick(&c[1])),
            Arc::new(pick(&c[2])),
            Arc::new(pick(send)),
            Arc::new(pick(recv)),
            Arc::new(Int64Array::from_iter_values(hits.iter().map(|&i| send.value(i) - recv.value(i)))),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}
