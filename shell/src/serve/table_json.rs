//! Query results as compact JSON for the page: a table is `{"columns": [...], "rows": [[...]]}`
//! with numbers as JSON numbers (integers exact up to 2^53, which covers nanoseconds for 104
//! days) and everything else as its text; NULL is null.

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use serde_json::{Value, json};

/// One column's values as JSON, by its type.
fn values(column: &ArrayRef) -> Vec<Value> {
    let n = column.len();
    let numeric = column.data_type().is_numeric();
    let as_float = numeric && !column.data_type().is_integer();
    let to = if !numeric {
        DataType::Utf8
    } else if as_float {
        DataType::Float64
    } else {
        DataType::Int64
    };
    let Ok(converted) = cast(column, &to) else { return vec![Value::Null; n] };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if converted.is_null(i) {
            out.push(Value::Null);
            continue;
        }
        let v = match &to {
            DataType::Int64 => json!(converted.as_any().downcast_ref::<arrow::array::Int64Array>().map(|a| a.value(i))),
            DataType::Float64 => {
                let x =
                    converted.as_any().downcast_ref::<arrow::array::Float64Array>().map_or(f64::NAN, |a| a.value(i));
                serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
            }
            _ => json!(converted.as_any().downcast_ref::<arrow::array::StringArray>().map(|a| a.value(i))),
        };
        out.push(v);
    }
    out
}

/// The rows of `batches` as arrays of JSON values, at most `limit` of them.
pub fn rows(batches: &[RecordBatch], limit: usize) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for batch in batches {
        if out.len() >= limit {
            break;
        }
        let take = batch.num_rows().min(limit - out.len());
        let columns: Vec<Vec<Value>> = batch.columns().iter().map(|c| values(&c.slice(0, take))).collect();
        for i in 0..take {
            out.push(columns.iter().map(|c| c[i].clone()).collect());
        }
    }
    out
}

/// A whole table: its column names, its first `limit` rows and how many it had.
pub fn table(schema: &arrow::datatypes::Schema, batches: &[RecordBatch], limit: usize) -> Value {
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    json!({
        "columns": schema.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
        "rows": rows(batches, limit),
        "total_rows": total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn numbers_stay_numbers_and_nulls_null() {
        let batch = RecordBatch::try_from_iter([
            ("a", Arc::new(arrow::array::Int32Array::from(vec![Some(1), None])) as ArrayRef),
            ("b", Arc::new(arrow::array::Float64Array::from(vec![0.5, f64::NAN])) as ArrayRef),
            ("c", Arc::new(arrow::array::StringArray::from(vec!["x", "y"])) as ArrayRef),
        ])
        .unwrap();
        let t = table(&batch.schema(), &[batch], 10);
        assert_eq!(t["rows"], json!([[1, 0.5, "x"], [null, null, "y"]]));
        assert_eq!(t["total_rows"], 2);
    }
}
