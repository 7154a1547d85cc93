//! Level of detail for timelines, after the Intel Trace Analyzer's scheme: the interval
//! [t0, t1) is cut into slots of `resolution_ns` and each slot gets deterministic
//! representatives instead of samples.
//! - `lod_calls`: per slot and (rank, thread), the region where the thread spent most of its
//!   exclusive time (a nested call's time belongs to the nested region; ties go to the region
//!   name that sorts first). A call segment that covers two or more whole slots becomes one
//!   merged row spanning them.
//! - `lod_messages`: one row per (src, dst, send slot, receive slot) with averages; the
//!   message counts add up exactly to the number of messages sent in [t0, t1).
//! - `lod_collectives`: one row per (communicator, slot of the operation's first begin), with
//!   the common operation or 'mixed'.
//! - `lod_resolution(t0, t1, pixels)`: the smallest 1-2-5 step (1, 2, 5, 10, 20, ... ns) at or
//!   above (t1 - t0) / pixels, so a drawing never gets more slots than pixels and zooms reuse
//!   slot grids.
//!
//! Every function can take `pixels => N` instead of a resolution (then derived from [t0, t1)
//! by the lod_resolution rule). When t0 or t1 is not given, it is the span of the trace the
//! relation comes from (first and last event of its `events`), the same for the three
//! functions and for any view of the trace's tables, so their slot boundaries coincide and a
//! timeline drawn from them lines up; a relation that comes from no trace uses its own span.
//! A trace's span is read once per open trace and remembered (its tables never change).
//! `lod_calls(..., per => 'rank')` gives ITA's per-process representative: per slot, the
//! region where all threads of the rank together spent the most exclusive time (thread NULL,
//! share = that time over the slot width times the rank's threads). Costs: O(n log n) in the input rows; the output is bounded by
//! slots x threads (calls) or by the input (messages, collectives). `lod_messages` sums its
//! groups as the messages come (commdb_analysis::stream) whenever the slot grid is known before they
//! are read (t0 and t1 given, or the trace's span, aggregated from its events), so it holds
//! only its groups, never the messages; a relation of no trace cut on its own span is read
//! whole first.

mod calls;
mod collectives;
mod grid;
mod messages;

pub use calls::LOD_CALLS;
pub use collectives::LOD_COLLECTIVES;
pub use messages::LOD_MESSAGES;

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use commdb_analysis::declare::{Function, Make, Output};
use commdb_analysis::params::{Param, ParamDefault, Type, param};

/// The smallest 1-2-5 step at or above (t1 - t0) / pixels (at least 1 ns).
pub fn resolution(t0: i64, t1: i64, pixels: i64) -> Option<i64> {
    if pixels <= 0 || t1 <= t0 {
        return None;
    }
    let raw = ((t1 as i128 - t0 as i128) as f64 / pixels as f64).max(1.0);
    let mut scale: i64 = 1;
    loop {
        for m in [1, 2, 5] {
            let v = m * scale;
            if v as f64 >= raw {
                return Some(v);
            }
        }
        scale = scale.checked_mul(10)?;
    }
}

/// The scalar function (declared in LOD_RESOLUTION).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LodResolution {
    declaration: &'static Function,
    signature: Signature,
}

impl LodResolution {
    pub fn new(declaration: &'static Function) -> Self {
        LodResolution { declaration, signature: Signature::uniform(3, vec![DataType::Int64], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for LodResolution {
    commdb_analysis::declare::declared_function!();

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let cols: Vec<Int64Array> = arrays
            .iter()
            .map(|a| {
                arrow::compute::cast(a, &DataType::Int64).map(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            })
            .collect::<std::result::Result<Option<Vec<_>>, _>>()?
            .unwrap_or_default();
        if cols.len() != 3 {
            return exec_err!("lod_resolution: expects (t0, t1, pixels) as integers");
        }
        let mut out = Vec::with_capacity(args.number_rows);
        for i in 0..args.number_rows {
            if cols.iter().any(|c| c.is_null(i)) {
                out.push(None);
                continue;
            }
            let (t0, t1, px) = (cols[0].value(i), cols[1].value(i), cols[2].value(i));
            if px <= 0 {
                return exec_err!("lod_resolution: pixels must be positive, got {px}");
            }
            if t1 <= t0 {
                return exec_err!("lod_resolution: t1 must be after t0, got t0 = {t0}, t1 = {t1}");
            }
            out.push(resolution(t0, t1, px));
        }
        Ok(ColumnarValue::Array(Arc::new(Int64Array::from(out))))
    }
}

pub(crate) const RESOLUTION: Param = param(
    "resolution_ns",
    Type::Duration { min: 1 },
    ParamDefault::Chosen("from pixels"),
    "width of a slot (give it or pixels)",
);
pub(crate) const T0: Param = param(
    "t0",
    Type::Duration { min: i64::MIN },
    ParamDefault::Chosen("the trace's first event"),
    "start of the interval",
);
pub(crate) const T1: Param = param(
    "t1",
    Type::Duration { min: i64::MIN },
    ParamDefault::Chosen("the trace's last event"),
    "end of the interval",
);
pub(crate) const PIXELS: Param = param(
    "pixels",
    Type::Integer { min: 1 },
    ParamDefault::Chosen("none"),
    "derive resolution_ns from [t0, t1) by lod_resolution's rule for a drawing this wide",
);

pub const LOD_RESOLUTION: Function = Function {
    name: "lod_resolution",
    params: &[
        param("t0", Type::Value("Int64"), ParamDefault::Required, "start of the interval (ns)"),
        param("t1", Type::Value("Int64"), ParamDefault::Required, "end of the interval (ns)"),
        param("pixels", Type::Value("Int64"), ParamDefault::Required, "width of the drawing"),
    ],
    output: Output::Value("resolution_ns"),
    description: "the smallest 1-2-5 step (ns) at or above (t1 - t0) / pixels, for a timeline of that many pixels",
    make: Make::Scalar(|f, _| datafusion::logical_expr::ScalarUDF::from(LodResolution::new(f))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_are_1_2_5_steps() {
        assert_eq!(resolution(0, 1_000_000, 1920), Some(1000));
        assert_eq!(resolution(0, 1_000, 1000), Some(1));
        assert_eq!(resolution(0, 3_000, 1000), Some(5));
        assert_eq!(resolution(0, 1_500_000_000, 1920), Some(1_000_000));
        assert_eq!(resolution(5, 5, 10), None);
        assert_eq!(resolution(0, 10, 0), None);
    }
}
