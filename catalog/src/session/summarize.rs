//! `SUMMARIZE table` and `SUMMARIZE SELECT ...`, as duckdb users know it: one row per column of
//! the relation with its type, minimum and maximum, approximate number of distinct values,
//! mean, standard deviation and approximate median (numeric columns), count of values and share
//! of NULLs. The aggregates are computed in one pass over the relation (one aggregate query),
//! then turned into rows.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Column, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::functions_aggregate::expr_fn::{approx_distinct, approx_median, avg, count, max, min, stddev};
use datafusion::logical_expr::{Expr, cast as cast_expr, col, lit};
use datafusion::prelude::SessionContext;

use crate::error::Result;

/// The aggregates of one column: min, max, distinct values, mean, deviation, median, count.
const PER_COLUMN: usize = 7;

/// The summary of `input`, one row per column.
pub async fn summarize(ctx: &SessionContext, input: DataFrame) -> Result<DataFrame> {
    let fields: Vec<Field> = input.schema().as_arrow().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut aggregates: Vec<Expr> = vec![count(lit(1)).alias("rows")];
    for (i, f) in fields.iter().enumerate() {
        let c = col(Column::from_name(f.name()));
        let plain = match f.data_type() {
            DataType::Dictionary(..) => cast_expr(c.clone(), DataType::Utf8),
            _ => c.clone(),
        };
        aggregates.push(cast_expr(min(plain.clone()), DataType::Utf8).alias(format!("min{i}")));
        aggregates.push(cast_expr(max(plain.clone()), DataType::Utf8).alias(format!("max{i}")));
        let countable = f.data_type().is_numeric()
            || matches!(plain_type(f.data_type()), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        aggregates.push(
            if countable { approx_distinct(plain) } else { lit(ScalarValue::UInt64(None)) }
                .alias(format!("distinct{i}")),
        );
        if f.data_type().is_numeric() {
            let x = cast_expr(c.clone(), DataType::Float64);
            aggregates.push(avg(x.clone()).alias(format!("avg{i}")));
            aggregates.push(stddev(x.clone()).alias(format!("std{i}")));
            aggregates.push(approx_median(x).alias(format!("q50{i}")));
        } else {
            for name in ["avg", "std", "q50"] {
                aggregates.push(lit(ScalarValue::Float64(None)).alias(format!("{name}{i}")));
            }
        }
        aggregates.push(count(c).alias(format!("count{i}")));
    }
    let summary = input.aggregate(vec![], aggregates)?;
    let schema = Arc::new(summary.schema().as_arrow().clone());
    let batch = arrow::compute::concat_batches(&schema, &summary.collect().await?)?;
    if batch.num_rows() != 1 {
        return Err(crate::error::Error::Engine(format!(
            "SUMMARIZE: the aggregate over the relation gave {} rows, not one",
            batch.num_rows()
        )));
    }
    let value = |c: usize, to: &DataType| -> Result<ArrayRef> { Ok(cast(batch.column(c), to)?) };
    let rows = value(0, &DataType::Int64)?.as_any().downcast_ref::<Int64Array>().map_or(0, |a| a.value(0));
    let (mut name, mut kind, mut lo, mut hi) = (vec![], vec![], vec![], vec![]);
    let (mut distinct, mut mean, mut std, mut q50, mut values, mut nulls) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (i, f) in fields.iter().enumerate() {
        let at = 1 + i * PER_COLUMN;
        let text = |c: usize| -> Result<Option<String>> {
            let a = value(c, &DataType::Utf8)?;
            let a = a.as_any().downcast_ref::<StringArray>().expect("cast to Utf8");
            Ok(a.is_valid(0).then(|| a.value(0).to_string()))
        };
        let float = |c: usize| -> Result<Option<f64>> {
            let a = value(c, &DataType::Float64)?;
            let a = a.as_any().downcast_ref::<Float64Array>().expect("cast to Float64");
            Ok(a.is_valid(0).then(|| a.value(0)))
        };
        let int = |c: usize| -> Result<Option<i64>> {
            let a = value(c, &DataType::Int64)?;
            let a = a.as_any().downcast_ref::<Int64Array>().expect("cast to Int64");
            Ok(a.is_valid(0).then(|| a.value(0)))
        };
        name.push(f.name().clone());
        kind.push(f.data_type().to_string());
        lo.push(text(at)?);
        hi.push(text(at + 1)?);
        distinct.push(int(at + 2)?);
        mean.push(float(at + 3)?);
        std.push(float(at + 4)?);
        q50.push(float(at + 5)?);
        let n = int(at + 6)?.unwrap_or(0);
        values.push(n);
        nulls.push(if rows > 0 { 100.0 * (rows - n) as f64 / rows as f64 } else { 0.0 });
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("column_name", DataType::Utf8, false),
        Field::new("column_type", DataType::Utf8, false),
        Field::new("min", DataType::Utf8, true),
        Field::new("max", DataType::Utf8, true),
        Field::new("approx_unique", DataType::Int64, true),
        Field::new("avg", DataType::Float64, true),
        Field::new("std", DataType::Float64, true),
        Field::new("q50", DataType::Float64, true),
        Field::new("count", DataType::Int64, false),
        Field::new("null_percentage", DataType::Float64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(name)),
        Arc::new(StringArray::from(kind)),
        Arc::new(StringArray::from(lo)),
        Arc::new(StringArray::from(hi)),
        Arc::new(Int64Array::from(distinct)),
        Arc::new(Float64Array::from(mean)),
        Arc::new(Float64Array::from(std)),
        Arc::new(Float64Array::from(q50)),
        Arc::new(Int64Array::from(values)),
        Arc::new(Float64Array::from(nulls)),
    ];
    Ok(ctx.read_batch(RecordBatch::try_new(schema, columns)?)?)
}

/// The type of a column's values (a dictionary's value type).
fn plain_type(t: &DataType) -> &DataType {
    match t {
        DataType::Dictionary(_, value) => value,
        other => other,
    }
}
