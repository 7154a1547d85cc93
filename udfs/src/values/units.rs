//! Numbers in the units people read: `format_duration(ns)` writes a time in nanoseconds with
//! the largest unit that keeps it at least 1 (ns, us, ms, s), `format_bytes(n)` a size in
//! binary units (B, KiB, MiB, GiB, TiB, PiB), both with four significant digits and trailing
//! zeros dropped: `38.3 us`, `1.204 s`, `64 KiB`. NULL stays NULL.

use crate::declare::{Function, Make, Output};
use crate::params::{ParamDefault, Type, param};
use datafusion::logical_expr::ScalarUDF;
use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// `value` with four significant digits, trailing zeros (and a trailing point) dropped.
fn significant(value: f64) -> String {
    let digits = if value.abs() >= 1000.0 {
        0
    } else if value.abs() >= 100.0 {
        1
    } else if value.abs() >= 10.0 {
        2
    } else {
        3
    };
    let text = format!("{value:.digits$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// A duration in nanoseconds as text.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 1e9 {
        (ns / 1e9, "s")
    } else if a >= 1e6 {
        (ns / 1e6, "ms")
    } else if a >= 1e3 {
        (ns / 1e3, "us")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", significant(v))
}

/// A size in bytes as text, in binary units.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", significant(v), UNITS[unit])
}

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
    crate::declare::declared_function!();

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_units() {
        assert_eq!(duration(38_300.0), "38.3 us");
        assert_eq!(duration(1_204_000_000.0), "1.204 s");
        assert_eq!(duration(999.0), "999 ns");
        assert_eq!(duration(2_000_000.0), "2 ms");
        assert_eq!(duration(123_456_789_000.0), "123.5 s");
        assert_eq!(bytes(65_536.0), "64 KiB");
        assert_eq!(bytes(1000.0), "1000 B");
        assert_eq!(bytes(1_572_864.0), "1.5 MiB");
    }
}
