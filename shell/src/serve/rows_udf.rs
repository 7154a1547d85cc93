//! The scalar function that sends a location to its row in a view (`serve_rows_N(rank,
//! thread)`), one per set of opened nodes and ranks, registered in the served session. A
//! projection keeps the calls in rank order, so `lod_calls(per => 'group')` streams them a
//! chunk of whole ranks at a time, where a join with the rows would have read them whole.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use super::layout::RowKey;

/// rank and thread to row: (rank, thread) for a rank whose locations have rows, (rank, -1)
/// for every other rank.
#[derive(Debug)]
pub struct RowsOf {
    name: String,
    signature: Signature,
    rows: HashMap<RowKey, i64>,
}

impl PartialEq for RowsOf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for RowsOf {}
impl std::hash::Hash for RowsOf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

/// The function named `name` for the view rows `keys`.
pub fn udf(name: String, keys: &[(RowKey, usize)]) -> ScalarUDF {
    let rows = keys.iter().map(|&(k, row)| (k, row as i64)).collect();
    ScalarUDF::from(RowsOf { name, signature: Signature::any(2, Volatility::Immutable), rows })
}

impl ScalarUDFImpl for RowsOf {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [rank, thread] = arrays.as_slice() else {
            return exec_err!("{}: expects (rank, thread)", self.name);
        };
        let as_i64 = |a: &arrow::array::ArrayRef| -> Result<Int64Array> {
            let c = arrow::compute::cast(a, &DataType::Int64)?;
            Ok(c.as_any().downcast_ref::<Int64Array>().cloned().unwrap_or_else(|| Int64Array::from(vec![0i64; 0])))
        };
        let (rank, thread) = (as_i64(rank)?, as_i64(thread)?);
        let out: Int64Array = (0..rank.len())
            .map(|i| {
                if rank.is_null(i) {
                    return None;
                }
                let t = if thread.is_null(i) { 0 } else { thread.value(i) };
                self.rows.get(&(rank.value(i), t)).or_else(|| self.rows.get(&(rank.value(i), -1))).copied()
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
