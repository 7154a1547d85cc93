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
/// for every other rank. The ranks' rows are a table indexed by rank (the function runs once
/// or twice per call and message of a view).
#[derive(Debug)]
pub struct RowsOf {
    name: String,
    signature: Signature,
    /// The row of each rank from `first`, for the ranks whose locations are not opened.
    by_rank: Vec<Option<i64>>,
    first: i64,
    /// The rows of opened locations.
    located: HashMap<RowKey, i64>,
}

impl RowsOf {
    fn row(&self, rank: i64, thread: i64) -> Option<i64> {
        if !self.located.is_empty()
            && let Some(&row) = self.located.get(&(rank, thread))
        {
            return Some(row);
        }
        if self.by_rank.is_empty() {
            return self.located.get(&(rank, -1)).copied();
        }
        let i = usize::try_from(rank.checked_sub(self.first)?).ok()?;
        self.by_rank.get(i).copied().flatten()
    }
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
    ScalarUDF::from(RowsOf::new(name, keys))
}

impl RowsOf {
    fn new(name: String, keys: &[(RowKey, usize)]) -> RowsOf {
        let ranks = keys.iter().filter(|k| k.0.1 == -1).map(|k| k.0.0);
        let first = ranks.clone().min().unwrap_or(0);
        let last = ranks.max().unwrap_or(-1);
        // Rank numbers far apart (not 0..n): every key in the map.
        let span = usize::try_from(last.saturating_sub(first).saturating_add(1)).unwrap_or(usize::MAX);
        let dense = span <= 4 * keys.len() + 1024;
        let mut by_rank = vec![None; if dense { span } else { 0 }];
        let mut located = HashMap::new();
        for &((rank, thread), row) in keys {
            if thread == -1 && dense {
                by_rank[(rank - first) as usize] = Some(row as i64);
            } else {
                located.insert((rank, thread), row as i64);
            }
        }
        RowsOf { name, signature: Signature::any(2, Volatility::Immutable), by_rank, first, located }
    }
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
                self.row(rank.value(i), t)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_of(keys: &[(RowKey, usize)]) -> RowsOf {
        RowsOf::new("rows".into(), keys)
    }

    #[test]
    fn ranks_map_by_table_opened_locations_by_thread_and_far_ranks_by_map() {
        // Ranks 0-2 in rows 0, 0, 1; rank 3's threads opened into rows 2 and 3.
        let keys = [((0, -1), 0), ((1, -1), 0), ((2, -1), 1), ((3, 0), 2), ((3, 1), 3)];
        let r = rows_of(&keys);
        assert!(!r.by_rank.is_empty());
        assert_eq!((r.row(0, 0), r.row(1, 5), r.row(2, 0)), (Some(0), Some(0), Some(1)));
        assert_eq!((r.row(3, 0), r.row(3, 1), r.row(3, 2)), (Some(2), Some(3), None));
        assert_eq!((r.row(4, 0), r.row(-1, 0), r.row(i64::MIN, 0)), (None, None, None));
        // Rank numbers a billion apart: no table of a billion rows.
        let r = rows_of(&[((0, -1), 0), ((1_000_000_000, -1), 1)]);
        assert!(r.by_rank.is_empty());
        assert_eq!((r.row(0, 3), r.row(1_000_000_000, 0), r.row(5, 0)), (Some(0), Some(1), None));
    }
}
