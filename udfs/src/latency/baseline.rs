//! The criteria an analysis measures latency against (`Baseline`), shared by message_latency,
//! latency_trend, attribution, region_graph and dag_edges: the whole trace's by default (a
//! narrowed view is measured against the trace it was cut from; learnt once per trace and
//! parameters, and remembered), a relation given as `criteria => ...`, or a relation's own.

use std::sync::{Arc, Weak};

use commdb_analysis::remembered::Remembered;

use arrow::array::{Array, Float64Array, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use rayon::prelude::*;

use arrow::array::AsArray;
use commdb_catalog::wallclock::Notices;
use datafusion::catalog::Session;
use datafusion::common::exec_err;

use super::*;
use crate::latency::params::{BUCKET_BYTES, CRITERIA, MAX_SAMPLES, MIN_MESSAGES};
use commdb_analysis::args::{Args, FromArg, Group};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::relation::{Projected, Relation, trace_schema, trace_table};
use commdb_catalog::fast_hash::FastMap;

/// Where an analysis takes its latency criteria from.
#[derive(Debug, Clone)]
enum Source {
    /// Learnt from the analysis's own input rows (a relation that comes from no trace).
    Own,
    /// Learnt from the whole `messages` table of the trace the rows come from (an extra input),
    /// then remembered for that table and these parameters.
    Trace(MessageIndices, Kept),
    /// The whole trace's, learnt by an earlier call.
    Known(Arc<CriteriaTable>),
    /// Given as a relation shaped like `latency_criteria`'s output (an extra input):
    /// locality, size_bucket and criterion_ns columns.
    Given { locality: usize, size_bucket: usize, criterion_ns: usize },
}

/// The criteria an analysis measures latency against. By default the whole trace's: a view or
/// filter of a trace's messages is measured against the trace it was cut from, so narrowing
/// to a slow period does not relearn that period as normal. `criteria => 'rel'` gives them
/// explicitly; a relation that comes from no trace learns them from itself.
#[derive(Debug, Clone)]
pub struct Baseline {
    source: Source,
    pub params: Params,
    /// What the criteria were taken from, for messages to the user.
    pub described: String,
    /// The analysis, and where it tells the user about messages left without a criterion.
    function: &'static str,
    notices: Option<Notices>,
}

/// Where the criteria learnt from a trace's messages table are kept for the session, so that
/// narrowed analyses of one trace learn them once (commdb_analysis::remembered).
#[derive(Debug, Clone)]
struct Kept {
    remembered: Option<Arc<Remembered>>,
    table: Weak<dyn TableProvider>,
}

impl Kept {
    fn keep(&self, params: &Params, table: &Arc<CriteriaTable>) {
        if let Some(r) = &self.remembered {
            r.keep(&self.table, &criteria_key(params), table.clone());
        }
    }
}

/// What criteria learnt with `params` are kept under.
fn criteria_key(params: &Params) -> String {
    format!("latency criteria {params:?}")
}

/// The arguments of a function that measures latency against criteria: how to learn them
/// (bucket_bytes, max_samples, min_messages) or a table of them (criteria).
#[derive(Debug, Clone)]
pub struct BaselineArgs {
    pub params: Params,
    pub criteria: Option<Relation>,
}

impl Group for BaselineArgs {
    const NAMES: &'static [&'static str] = &[BUCKET_BYTES.name, MAX_SAMPLES.name, MIN_MESSAGES.name, CRITERIA.name];

    fn read(a: &Args) -> Result<Self> {
        Ok(BaselineArgs { params: Params::read(a)?, criteria: Option::<Relation>::from_arg(a, CRITERIA.name)? })
    }
}

impl Baseline {
    /// Decide the baseline of `function` reading `relation`, from its arguments (`args`).
    /// Returns it with the extra input its computation reads, if any.
    pub fn plan(
        function: &'static str,
        args: &BaselineArgs,
        session: &dyn Session,
        relation: &Relation,
    ) -> Result<(Baseline, Option<Projected>)> {
        let params = args.params;
        let notices = session.config().get_extension::<Notices>().map(|n| (*n).clone());
        let baseline = |source: Source, params: Params, described: String| Baseline {
            source,
            params,
            described,
            function,
            notices: notices.clone(),
        };
        if let Some(given) = &args.criteria {
            let idx = given.columns(function, &["locality", "size_bucket", "criterion_ns"])?;
            let source = Source::Given { locality: 0, size_bucket: 1, criterion_ns: 2 };
            let described = format!("criteria from {}", given.described());
            return Ok((baseline(source, params, described), Some((given.clone(), Some(idx)))));
        }
        let Some(schema) = trace_schema(session, relation) else {
            let described =
                format!("criteria learnt from {} itself (it comes from no single trace)", relation.described());
            return Ok((baseline(Source::Own, params, described), None));
        };
        let whole = trace_table(session, function, &schema, "messages")?;
        let described = format!("criteria of the whole trace ({}.messages)", schema.1);
        if Arc::ptr_eq(&whole.provider, &relation.provider) {
            return Ok((baseline(Source::Own, params, described), None));
        }
        let kept = Kept { remembered: Remembered::of(session), table: Arc::downgrade(&whole.provider) };
        let known = kept.remembered.as_ref().and_then(|r| r.get::<CriteriaTable>(&kept.table, &criteria_key(&params)));
        if let Some(table) = known {
            return Ok((baseline(Source::Known(table), params, described), None));
        }
        let (projection, indices) = MessageIndices::find(function, &whole)?.projected();
        Ok((baseline(Source::Trace(indices, kept), params, described), Some((whole, Some(projection)))))
    }

    /// For an analysis that streams its messages (`relation`, whose message columns `indices`
    /// finds): the input its criteria are read from before the messages stream, as
    /// `latency_criteria` rows (computed as the relation's or the trace's messages stream by,
    /// holding their groups' samples) or the criteria given; none when they are known.
    pub fn streamed_input(
        &self,
        relation: &Relation,
        indices: &MessageIndices,
        extra: Option<Projected>,
    ) -> Option<Projected> {
        match (&self.source, extra) {
            (Source::Own, _) => {
                let (projection, own) = indices.projected();
                Some(criteria_of(relation.clone(), projection, own, self.params))
            }
            (Source::Trace(projected, _), Some((whole, Some(projection)))) => {
                Some(criteria_of(whole, projection, projected.clone(), self.params))
            }
            (_, extra) => extra,
        }
    }

    /// The criteria table of a streamed analysis, from its criteria input as `streamed_input`
    /// planned it (remembered for the trace when they are the trace's).
    pub fn held_table(&self, held: Option<&[RecordBatch]>) -> Result<Arc<CriteriaTable>> {
        let rows = |held: Option<&[RecordBatch]>, columns: (usize, usize, usize)| match held {
            Some(batches) => self.table_of_rows(batches, columns),
            None => exec_err!("{}: the criteria input was not read", self.described),
        };
        match &self.source {
            Source::Own => rows(held, (0, 1, 2)),
            Source::Trace(_, kept) => {
                let table = rows(held, (0, 1, 2))?;
                kept.keep(&self.params, &table);
                Ok(table)
            }
            Source::Known(table) => Ok(table.clone()),
            Source::Given { locality, size_bucket, criterion_ns } => {
                rows(held, (*locality, *size_bucket, *criterion_ns))
            }
        }
    }

    /// The criteria table: from `own` (the analysis's input read as message columns) or from
    /// the extra input's batches.
    pub fn table(&self, own: &MessageColumns, extra: Option<&[RecordBatch]>) -> Result<Arc<CriteriaTable>> {
        let table = self.criteria_table(Some(own), extra)?;
        self.report_uncovered(&table, own);
        Ok(table)
    }

    /// Say how many of the analysis's messages have no criterion, and what would give them
    /// one: on a small trace every bucket may have fewer than `min_messages` messages, and
    /// the analysis would otherwise show NULLs and zero shares without a word.
    fn report_uncovered(&self, table: &CriteriaTable, own: &MessageColumns) {
        if self.notices.is_none() {
            return;
        }
        // One lookup per message, on every core: the analysis itself looks them up again.
        let (total, uncovered) = (0..own.bytes.len())
            .into_par_iter()
            .filter(|&row| own.duration.is_valid(row))
            .map(|row| (1usize, usize::from(table.criterion(own, row).is_none())))
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        self.notice_uncovered(total, uncovered);
    }

    /// Tell that `uncovered` of `total` messages with a duration have no criterion.
    pub(crate) fn notice_uncovered(&self, total: usize, uncovered: usize) {
        let Some(notices) = &self.notices else { return };
        if uncovered == 0 {
            return;
        }
        let p = &self.params;
        let why = match self.source {
            Source::Given { .. } => "the criteria given have none for their locality and size bucket".to_string(),
            _ => format!(
                "their locality is unknown or their size bucket has fewer than min_messages = {} messages",
                p.min_messages
            ),
        };
        notices.push(format!(
            "{}: {uncovered} of {total} messages have no latency criterion ({why}); their latency is NULL and they \
             count as not delayed. Lower min_messages (e.g. min_messages => 2) or widen bucket_bytes (now {}) to give \
             them one",
            self.function, p.bucket_bytes
        ));
    }

    /// The criteria table of `latency_criteria`-shaped rows: the columns (locality,
    /// size_bucket, criterion_ns) of `batches`.
    fn table_of_rows(&self, batches: &[RecordBatch], columns: (usize, usize, usize)) -> Result<Arc<CriteriaTable>> {
        let (locality, size_bucket, criterion_ns) = columns;
        let p = &self.params;
        let loc = text_column(batches, locality)?;
        let bucket = int64_column(batches, size_bucket)?;
        let crit = float64_column(batches, criterion_ns)?;
        let mut map = FastMap::default();
        for row in 0..loc.len() {
            if bucket.is_null(row) {
                continue;
            }
            let b = bucket.value(row);
            if b.rem_euclid(p.bucket_bytes) != 0 {
                return exec_err!(
                    "{}: size_bucket {b} is not a multiple of bucket_bytes = {}; pass the bucket_bytes the criteria were computed with",
                    self.described,
                    p.bucket_bytes
                );
            }
            let locality = match loc.is_valid(row).then(|| loc.value(row)) {
                Some("intra") => INTRA,
                Some("inter") => INTER,
                None => UNKNOWN,
                Some(other) => {
                    return exec_err!("{}: locality must be 'intra', 'inter' or NULL, got '{other}'", self.described);
                }
            };
            map.insert((locality, b), crit.is_valid(row).then(|| crit.value(row)));
        }
        Ok(Arc::new(CriteriaTable { bucket_bytes: p.bucket_bytes, map }))
    }

    fn criteria_table(
        &self,
        own: Option<&MessageColumns>,
        extra: Option<&[RecordBatch]>,
    ) -> Result<Arc<CriteriaTable>> {
        let p = &self.params;
        match (&self.source, extra) {
            (Source::Own, _) => match own {
                Some(own) => Ok(Arc::new(CriteriaTable::new(&criteria(own, p), p.bucket_bytes))),
                None => exec_err!("{}: the messages to learn the criteria from were not read", self.described),
            },
            (Source::Known(table), _) => Ok(table.clone()),
            (Source::Trace(indices, kept), Some(batches)) => {
                let table = Arc::new(CriteriaTable::new(&criteria(&indices.read(batches)?, p), p.bucket_bytes));
                kept.keep(p, &table);
                Ok(table)
            }
            (Source::Given { locality, size_bucket, criterion_ns }, Some(batches)) => {
                self.table_of_rows(batches, (*locality, *size_bucket, *criterion_ns))
            }
            _ => exec_err!("{}: the criteria input was not read", self.described),
        }
    }
}

/// A Float64 column of all batches.
fn float64_column(batches: &[RecordBatch], index: usize) -> Result<Float64Array> {
    Ok(commdb_analysis::columns::column(batches, index, &DataType::Float64)?
        .as_primitive::<arrow::datatypes::Float64Type>()
        .clone())
}
