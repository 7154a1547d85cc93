//! `wallclock(ts [, trace])`: a trace time (ns since the trace's zero) as a UTC timestamp, from
//! the trace's absolute start (`trace_info.start_wallclock`), so trace events join with
//! scheduler logs and other wall-clock records. Without `trace` the default trace is meant.
//! A trace without an absolute start gives NULL and a warning (a session notice) naming it.

use commdb_analysis::declare::{Function, Make, Output};
use commdb_analysis::params::{ParamDefault, Type, param};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError};

use arrow::array::{Array, ArrayRef, AsArray, TimestampNanosecondBuilder};
use arrow::datatypes::{DataType, Int64Type, TimeUnit};
use commdb_catalog::wallclock::{Notices, SharedStarts};
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

pub const WALLCLOCK: Function = Function {
    name: "wallclock",
    params: &[
        param("ts", Type::Value("Int64"), ParamDefault::Required, "a trace time (ns)"),
        param(
            "trace",
            Type::Value("Utf8"),
            ParamDefault::Chosen("the default trace"),
            "the attached trace the time belongs to",
        ),
    ],
    output: Output::Value("UTC timestamp"),
    description: "a trace time as absolute UTC time, from trace_info.start_wallclock of the default (or named) trace; NULL and a warning when unknown",
    make: Make::Scalar(|_, session| {
        datafusion::logical_expr::ScalarUDF::from(Wallclock::new(session.starts(), session.notices()))
    }),
};

/// The declaration as a place of its own (a constant's reference is not one).
static WALLCLOCK_DECLARED: Function = WALLCLOCK;

/// The scalar function, reading the session's trace starts.
#[derive(Debug)]
pub struct Wallclock {
    signature: Signature,
    starts: SharedStarts,
    notices: Notices,
}

impl Wallclock {
    pub fn new(starts: SharedStarts, notices: Notices) -> Self {
        let mut forms = vec![TypeSignature::Exact(vec![DataType::Int64])];
        for text in [DataType::Utf8, DataType::Utf8View, DataType::LargeUtf8] {
            forms.push(TypeSignature::Exact(vec![DataType::Int64, text]));
        }
        Wallclock { signature: Signature::one_of(forms, Volatility::Stable), starts, notices }
    }

    /// The trace starts it reads.
    pub fn starts(&self) -> &SharedStarts {
        &self.starts
    }

    /// The start of `trace` (None: the default trace); NULL with a notice when unknown.
    fn start_of(&self, trace: Option<&str>) -> Result<Option<i64>> {
        let starts = self.starts.read().unwrap_or_else(PoisonError::into_inner);
        match starts.start(trace) {
            Ok((_, Some(start))) => Ok(Some(start)),
            Ok((name, None)) => {
                self.notices.push(format!(
                    "wallclock: trace '{name}' has no absolute start time (trace_info.start_wallclock is NULL); the result is NULL"
                ));
                Ok(None)
            }
            Err(e) => exec_err!("wallclock: {e}"),
        }
    }
}

impl PartialEq for Wallclock {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.starts, &other.starts)
    }
}

impl Eq for Wallclock {}

impl Hash for Wallclock {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.starts), state);
    }
}

impl ScalarUDFImpl for Wallclock {
    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        WALLCLOCK_DECLARED.doc()
    }

    fn name(&self) -> &str {
        WALLCLOCK.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> =
            args.args.iter().map(|a| a.to_array(rows)).collect::<std::result::Result<_, _>>()?;
        let Some(ts) = arrays.first() else { return exec_err!("wallclock: expects wallclock(ts [, trace])") };
        let ts = arrow::compute::cast(ts, &DataType::Int64)?;
        let ts = ts.as_primitive::<Int64Type>();
        let traces = match arrays.get(1) {
            Some(t) => Some(arrow::compute::cast(t, &DataType::Utf8)?),
            None => None,
        };
        let traces = traces.as_ref().map(|t| t.as_string::<i32>());
        let mut out = TimestampNanosecondBuilder::with_capacity(rows).with_timezone("UTC");
        // Consecutive rows usually name the same trace: look each name up once per run of rows.
        let mut cached: Option<(Option<String>, Option<i64>)> = None;
        for i in 0..rows {
            let trace = match traces {
                Some(t) if t.is_null(i) => {
                    out.append_null();
                    continue;
                }
                Some(t) => Some(t.value(i)),
                None => None,
            };
            let start = match &cached {
                Some((name, start)) if name.as_deref() == trace => *start,
                _ => {
                    let start = self.start_of(trace)?;
                    cached = Some((trace.map(str::to_string), start));
                    start
                }
            };
            match (start, ts.is_null(i)) {
                (Some(start), false) => match start.checked_add(ts.value(i)) {
                    Some(t) => out.append_value(t),
                    None => return exec_err!("wallclock: ts {} is out of range of a timestamp", ts.value(i)),
                },
                _ => out.append_null(),
            }
        }
        let array: ArrayRef = Arc::new(out.finish());
        Ok(ColumnarValue::Array(array))
    }
}
