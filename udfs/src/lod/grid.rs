//! The slot grid of a level-of-detail call: its arguments parsed once (`LodParams`), the span
//! it cuts when t0 or t1 is not given (the trace's first and last event, read once per open
//! trace and remembered, so the three lod functions share one grid), and the grid itself.

use std::sync::{Arc, Weak};

use commdb_analysis::remembered::Remembered;

use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;

use super::resolution;

use commdb_analysis::args::{Args, FromArg, Group};
use commdb_analysis::relation::Relation;

/// Where a lod function's default span comes from.
#[derive(Debug, Clone)]
pub(crate) enum Span {
    /// The relation's own rows (t0 and t1 given, or a relation from no trace).
    Own,
    /// The trace's span, known from an earlier call.
    Known(Option<i64>, Option<i64>),
    /// The trace's span, to read from its events (the extra input) and remember for the
    /// session (its events table, where the span is kept: a trace's tables never change, so its
    /// events are scanned for their first and last time once, not by every lod call).
    Scan(Weak<dyn TableProvider>, Option<Arc<Remembered>>),
}

/// What a trace's span is kept under.
const SPAN: &str = "span of the events";

/// First and last time, when there are any.
pub(crate) type TimeSpan = (Option<i64>, Option<i64>);

/// The span of the trace `relation` comes from (first and last event), when t0 or t1 is not
/// given, so the three lod functions share one slot grid. A relation that comes from no single
/// trace uses its own rows' span. Returns the span and the extra input to read, if any.
pub(crate) fn span_input(
    session: &dyn datafusion::catalog::Session,
    function: &str,
    relation: &Relation,
    p: &LodParams,
) -> Result<(Span, Option<commdb_analysis::relation::Projected>)> {
    if p.t0.is_some() && p.t1.is_some() {
        return Ok((Span::Own, None));
    }
    let Some(schema) = commdb_analysis::relation::trace_schema(session, relation) else { return Ok((Span::Own, None)) };
    let events = commdb_analysis::relation::trace_table(session, function, &schema, "events")?;
    let key = Arc::downgrade(&events.provider);
    let remembered = Remembered::of(session);
    if let Some(span) = remembered.as_ref().and_then(|r| r.get::<TimeSpan>(&key, SPAN)) {
        let (lo, hi) = *span;
        return Ok((Span::Known(lo, hi), None));
    }
    events.columns(function, &["ts"])?;
    // The first and last event time, aggregated as the events stream by: one row is read.
    let bounds = commdb_analysis::relation::bounds_of(
        &events,
        datafusion::logical_expr::col("ts"),
        datafusion::logical_expr::col("ts"),
    )?;
    Ok((Span::Scan(key, remembered), Some(bounds)))
}

/// The span to cut: the trace's (known, or read now and remembered) or else the data's own.
pub(crate) fn chosen_span(
    span: &Span,
    span_read: Option<&Vec<RecordBatch>>,
    own: (Option<i64>, Option<i64>),
) -> Result<(Option<i64>, Option<i64>)> {
    match (span, span_read) {
        (Span::Known(lo, hi), _) => Ok((*lo, *hi)),
        (Span::Scan(key, remembered), Some(batches)) => {
            let found = commdb_analysis::relation::bounds_read(batches)?;
            if let Some(r) = remembered {
                r.keep(key, SPAN, Arc::new(found));
            }
            Ok(found)
        }
        _ => Ok(own),
    }
}

/// The slot grid of a call: [t0, t1) in slots of `res`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grid {
    pub(crate) t0: i64,
    pub(crate) t1: i64,
    pub(crate) res: i64,
}

impl Grid {
    pub(crate) fn slot(&self, t: i64) -> i64 {
        (t - self.t0).div_euclid(self.res)
    }
    pub(crate) fn start(&self, k: i64) -> i64 {
        self.t0 + k * self.res
    }
}

/// The largest time or resolution (ns, about 73 years) the slot grid accepts.
pub(crate) const MAX_TIME: i64 = 1 << 61;

/// The arguments of the slot grid, shared by the lod table functions: resolution_ns, t0,
/// t1, pixels.
#[derive(Debug, Clone, Copy)]
pub struct LodParams {
    pub(crate) res: Option<i64>,
    pub(crate) t0: Option<i64>,
    pub(crate) t1: Option<i64>,
    pub(crate) pixels: Option<i64>,
}

impl Group for LodParams {
    const NAMES: &'static [&'static str] = &["resolution_ns", "t0", "t1", "pixels"];

    fn read(a: &Args) -> Result<Self> {
        let read = |name| Option::<i64>::from_arg(a, name);
        let p = LodParams { res: read("resolution_ns")?, t0: read("t0")?, t1: read("t1")?, pixels: read("pixels")? };
        // Slot arithmetic (t - t0, t + resolution) stays within 64 bits.
        for (name, v) in [("resolution_ns", p.res), ("t0", p.t0), ("t1", p.t1)] {
            if let Some(v) = v
                && !(-MAX_TIME..=MAX_TIME).contains(&v)
            {
                return plan_err!("{}: {name} must be within ±{MAX_TIME} ns (73 years), got {v}", a.function);
            }
        }
        if p.res.is_none() && p.pixels.is_none() {
            return plan_err!("{}: give resolution_ns, or pixels => N to derive it from the time range", a.function);
        }
        if let (Some(t0), Some(t1)) = (p.t0, p.t1)
            && t1 <= t0
        {
            return plan_err!("{}: t1 must be after t0, got t0 = {t0}, t1 = {t1}", a.function);
        }
        Ok(p)
    }
}

impl LodParams {
    /// The grid, filling t0/t1 from the data's span [lo, hi].
    pub(crate) fn grid(&self, function: &str, lo: Option<i64>, hi: Option<i64>) -> Result<Option<Grid>> {
        let t0 = self.t0.or(lo);
        let t1 = self.t1.or(hi.map(|h| h.saturating_add(1)));
        let (Some(t0), Some(t1)) = (t0, t1) else { return Ok(None) };
        if t1 <= t0 {
            return Ok(None);
        }
        let res = match (self.res, self.pixels) {
            (Some(r), _) => r,
            (None, Some(px)) => resolution(t0, t1, px).unwrap_or(1),
            (None, None) => return exec_err!("{function}: no resolution"),
        };
        Ok(Some(Grid { t0, t1, res }))
    }
}
