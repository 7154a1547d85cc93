//! Numbers in the units people read: `format_duration(ns)` writes a time in nanoseconds with
//! the largest unit that keeps it at least 1 (ns, us, ms, s), `format_bytes(n)` a size in
//! binary units (B, KiB, MiB, GiB, TiB, PiB), both with four significant digits and trailing
//! zeros dropped: `38.3 us`, `1.204 s`, `64 KiB`. NULL stays NULL.

use commdb_analysis::shown::{bytes, duration};

use commdb_analysis::declare::{Function, Make, Output};
use commdb_analysis::params::{ParamDefault, Type, param};
use datafusion::logical_expr::ScalarUDF;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

pub const FORMAT_DURATION: Function = Function {
    name: "format_duration",
    params: &[param("ns", Type::Value("numeric"), ParamDefault::Required, "a time in nanoseconds")],
    output: Output::Value("text"),
    description: "a time in nanoseconds with the unit that reads best, four significant digits: 38.3 us, 1.204 s",
    make: Make::Scalar(|f, _| ScalarUDF::from(Format::new(f, Unit::Duration))),
};

pub const FORMAT_BYTES: Function = Function {
    name: "format_bytes",
    params: &[param("n", Type::Value("numeric"), ParamDefault::Required, "a size in bytes")],
    output: Output::Value("text"),
    description: "a size in bytes in binary units, four significant digits: 64 KiB, 1.5 MiB",
    make: Make::Scalar(|f, _| ScalarUDF::from(Format::new(f, Unit::Bytes))),
};

/// What a formatting function writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Unit {
    Duration,
    Bytes,
}

/// One of the two formatting functions.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Format {
    declaration: &'static Function,
    unit: Unit,
    signature: Signature,
}

impl Format {
    fn new(declaration: &'static Function, unit: Unit) -> Self {
        Format { declaration, unit, signature: Signature::numeric(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Format {
    commdb_analysis::declare::declared_function!();

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let values = arrow::compute::cast(&arrays[0], &DataType::Float64)?;
        let values = values.as_primitive::<Float64Type>();
        let write = match self.unit {
            Unit::Duration => duration,
            Unit::Bytes => bytes,
        };
        let out: StringArray = (0..values.len()).map(|i| values.is_valid(i).then(|| write(values.value(i)))).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
