//! Results that fit the memory budget. A few of DataFusion's scalar functions build a value
//! whose size a small number decides (`lpad('x', 1000000000)`, `array_repeat(1, 2000000000)`,
//! `range(1, 10000000000)`): the memory pool does not see such values, so a mistyped count used
//! to end the process on a failed allocation (or get it killed by the operating system). Each
//! is registered again wrapped: before it runs, the size its arguments ask for (with the
//! working copies the implementation makes, measured on DataFusion 55: about 4 bytes per
//! padded character, 16 per repeated or resized element, 16 per range element) is compared
//! with the session's memory budget, and a request past it is an error naming the function,
//! the size and the budget. Everything else the wrapper hands to DataFusion's function
//! unchanged, except a negative pad length, which pads to nothing instead of reaching a
//! DataFusion 55 panic. Functions whose result is bounded by their inputs' size are not wrapped.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

/// How a function's arguments decide its result's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Size {
    /// `f(text, n, ...)`: n characters per row.
    Pad,
    /// `repeat(text, n)`: n copies of the text per row.
    Repeat,
    /// `f(x, n, ...)`: n elements per row.
    Count,
    /// `range(start, stop [, step])`: (stop - start) / step elements per row.
    Range,
}

/// The functions wrapped, and how their size is read.
const WRAPPED: &[(&str, Size)] = &[
    ("lpad", Size::Pad),
    ("rpad", Size::Pad),
    ("repeat", Size::Repeat),
    ("array_repeat", Size::Count),
    ("array_resize", Size::Count),
    ("range", Size::Range),
    ("generate_series", Size::Range),
];

/// Bytes of working memory per unit of size, as measured (see the module's notes).
fn bytes_per_unit(size: Size) -> f64 {
    match size {
        Size::Pad => 4.0,
        Size::Repeat => 2.0,
        Size::Count | Size::Range => 16.0,
    }
}

/// A DataFusion function checked against the budget before it runs.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn ScalarUDFImpl>,
    size: Size,
    budget: usize,
}

impl PartialEq for Bounded {
    fn eq(&self, other: &Self) -> bool {
        self.inner.name() == other.inner.name() && self.size == other.size && self.budget == other.budget
    }
}

impl Eq for Bounded {}

impl Hash for Bounded {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
        self.size.hash(state);
        self.budget.hash(state);
    }
}

/// The integer argument `i` of every row (scalar: `rows` times), NULLs and non-integers as 0.
fn counts(args: &[ColumnarValue], i: usize, rows: usize) -> Vec<f64> {
    match args.get(i) {
        Some(ColumnarValue::Scalar(s)) => {
            let v = match s.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(Some(v))) => v as f64,
                _ => 0.0,
            };
            vec![v; rows]
        }
        Some(ColumnarValue::Array(a)) => match arrow::compute::cast(a, &DataType::Int64) {
            Ok(a) => {
                let a = a.as_primitive::<Int64Type>();
                (0..a.len()).map(|r| if a.is_valid(r) { a.value(r) as f64 } else { 0.0 }).collect()
            }
            Err(_) => vec![0.0; rows],
        },
        None => vec![0.0; rows],
    }
}

/// The length in bytes of text argument `i` of every row.
fn lengths(args: &[ColumnarValue], i: usize, rows: usize) -> Vec<f64> {
    match args.get(i) {
        Some(ColumnarValue::Scalar(s)) => {
            let len = match s {
                ScalarValue::Utf8(Some(t)) | ScalarValue::LargeUtf8(Some(t)) | ScalarValue::Utf8View(Some(t)) => {
                    t.len()
                }
                _ => 0,
            };
            vec![len as f64; rows]
        }
        // Byte lengths without copying the text.
        Some(ColumnarValue::Array(a)) => {
            match arrow::compute::kernels::length::length(a).and_then(|l| arrow::compute::cast(&l, &DataType::Int64)) {
                Ok(l) => {
                    let l = l.as_primitive::<Int64Type>();
                    (0..l.len()).map(|r| if l.is_valid(r) { l.value(r) as f64 } else { 0.0 }).collect()
                }
                Err(_) => vec![0.0; rows],
            }
        }
        None => vec![0.0; rows],
    }
}

impl Bounded {
    /// The bytes the call would need, as far as its arguments tell.
    fn need(&self, args: &ScalarFunctionArgs) -> f64 {
        let rows = args.number_rows.max(1);
        let a = &args.args;
        let units: f64 = match self.size {
            Size::Pad | Size::Count => counts(a, 1, rows).iter().map(|n| n.max(0.0)).sum(),
            Size::Repeat => lengths(a, 0, rows).iter().zip(counts(a, 1, rows)).map(|(l, n)| l * n.max(0.0)).sum(),
            Size::Range => {
                // Only integer ranges: dates and times step by intervals, which this does not read.
                if !a.iter().all(|v| v.data_type().is_integer()) {
                    return 0.0;
                }
                let (start, stop, step) = match a.len() {
                    1 => (vec![0.0; rows], counts(a, 0, rows), vec![1.0; rows]),
                    2 => (counts(a, 0, rows), counts(a, 1, rows), vec![1.0; rows]),
                    _ => (counts(a, 0, rows), counts(a, 1, rows), counts(a, 2, rows)),
                };
                (0..rows).map(|r| if step[r] == 0.0 { 0.0 } else { ((stop[r] - start[r]) / step[r]).max(0.0) }).sum()
            }
        };
        units * bytes_per_unit(self.size)
    }
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let need = self.need(&args);
        if need > self.budget as f64 {
            let message = format!(
                "{}: the result would need about {:.1} GiB, more than the memory budget for queries ({} MiB); ask for less or raise --memory-limit",
                self.name(),
                need / (1u64 << 30) as f64,
                self.budget >> 20
            );
            return Err(DataFusionError::External(Box::new(commdb_catalog::Error::OutOfMemory {
                message,
                advised: true,
            })));
        }
        let args = if self.size == Size::Pad { pad_to_at_least_zero(args) } else { args };
        self.inner.invoke_with_args(args)
    }
}

/// A negative pad length pads to nothing (an empty text, as PostgreSQL does): DataFusion 55
/// panics on one when the fill is a column, so the length is raised to 0 before it runs.
fn pad_to_at_least_zero(mut args: ScalarFunctionArgs) -> ScalarFunctionArgs {
    let Some(length) = args.args.get_mut(1) else { return args };
    match length {
        ColumnarValue::Scalar(ScalarValue::Int64(Some(v))) if *v < 0 => *v = 0,
        ColumnarValue::Array(a) if a.data_type() == &DataType::Int64 => {
            let values = a.as_primitive::<Int64Type>();
            if values.iter().any(|v| v.is_some_and(|v| v < 0)) {
                let clamped: arrow::array::Int64Array = values.iter().map(|v| v.map(|v| v.max(0))).collect();
                *a = Arc::new(clamped);
            }
        }
        _ => {}
    }
    args
}

/// Register the wrapped functions in `ctx`, checked against `budget` bytes.
pub fn register(ctx: &datafusion::prelude::SessionContext, budget: usize) {
    for (name, size) in WRAPPED {
        let Some(udf) = ctx.state().scalar_functions().get(*name).cloned() else { continue };
        let bounded = Bounded { inner: udf.inner().clone(), size: *size, budget };
        ctx.register_udf(ScalarUDF::new_from_impl(bounded));
    }
}
