//! Values packed as bytes to cross a distributed engine's exchange, a row per key: the key
//! (the rank or the range of ids the values go to), how many values the row holds, and their
//! bytes, in an encoding of the caller's (`crate::spill`'s rows for the replay's sends placed,
//! `crate::causality::halves` for the DAG's message halves, `crate::causality::pieces` for its
//! edges' pieces). Ballista holds a partition fetched from another executor whole in memory,
//! and packed a value takes a fifth to a third of its Arrow columns. A row that does not read
//! back (a NULL, a count that is not one, bytes that are not bytes) is an error that names the
//! function and what the row carried.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, LargeBinaryBuilder, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};

use commdb_analysis::columns::{int64_column, schema_of};

/// The rows: `key`, `count` (the values in the row) and `packed` (their bytes).
pub(crate) fn schema(key: &str, count: &str) -> SchemaRef {
    schema_of(&[
        (key, DataType::Int64, false),
        (count, DataType::Int64, false),
        ("packed", DataType::LargeBinary, false),
    ])
}

/// The error for a row of `carried` (what its values are, as a user reads it) that does not
/// read back in `what` (the function).
pub(crate) fn damaged(what: &str, carried: &str) -> DataFusionError {
    DataFusionError::Internal(format!("{what}: {carried} did not read back"))
}

/// Rows of a [`schema`] being built.
#[derive(Default)]
pub(crate) struct Rows {
    keys: Vec<i64>,
    counts: Vec<i64>,
    bytes: LargeBinaryBuilder,
}

impl Rows {
    /// A row: `count` values of `key` packed in `bytes`.
    pub fn push(&mut self, key: i64, count: usize, bytes: &[u8]) {
        self.keys.push(key);
        self.counts.push(count as i64);
        self.bytes.append_value(bytes);
    }

    /// The rows as a batch of `schema` (one of [`schema`]).
    pub fn finish(mut self, schema: SchemaRef) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(self.keys)),
            Arc::new(Int64Array::from(self.counts)),
            Arc::new(self.bytes.finish()),
        ];
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

/// Each row of `batch` (of a [`schema`]): its key, count and bytes, given to `each`; a row
/// that does not read back is the error [`damaged`] names.
pub(crate) fn each_row(
    what: &str,
    carried: &str,
    batch: &RecordBatch,
    mut each: impl FnMut(i64, u32, &[u8]) -> Result<()>,
) -> Result<()> {
    let one = std::slice::from_ref(batch);
    let damaged = || damaged(what, carried);
    if batch.num_columns() != 3 {
        return Err(damaged());
    }
    let (keys, counts) = (int64_column(one, 0).map_err(|_| damaged())?, int64_column(one, 1).map_err(|_| damaged())?);
    let bytes = batch.column(2).as_binary_opt::<i64>().ok_or_else(damaged)?;
    for i in 0..batch.num_rows() {
        if keys.is_null(i) || counts.is_null(i) || bytes.is_null(i) {
            return Err(damaged());
        }
        let count = u32::try_from(counts.value(i)).map_err(|_| damaged())?;
        each(keys.value(i), count, bytes.value(i))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> RecordBatch {
        let mut rows = Rows::default();
        rows.push(3, 2, b"ab");
        rows.push(-1, 0, b"");
        rows.push(7, 1, &[0, 255, 9]);
        rows.finish(schema("rank", "sides")).unwrap()
    }

    #[test]
    fn rows_read_back_as_they_were_packed() {
        let batch = rows();
        assert_eq!(batch.schema().field(1).name(), "sides");
        let mut back = Vec::new();
        each_row("test", "the rows", &batch, |key, count, bytes| {
            back.push((key, count, bytes.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(back, [(3, 2, b"ab".to_vec()), (-1, 0, vec![]), (7, 1, vec![0, 255, 9])]);
    }

    #[test]
    fn a_row_that_does_not_read_back_is_an_error_naming_the_function_and_what_it_carried() {
        let batch = rows();
        let negative = RecordBatch::try_new(
            batch.schema(),
            vec![batch.column(0).clone(), Arc::new(Int64Array::from(vec![2, -1, 1])), batch.column(2).clone()],
        )
        .unwrap();
        let not_bytes = RecordBatch::try_new(
            schema_of(&[
                ("rank", DataType::Int64, false),
                ("sides", DataType::Int64, false),
                ("packed", DataType::Int64, false),
            ]),
            vec![batch.column(0).clone(), batch.column(1).clone(), batch.column(0).clone()],
        )
        .unwrap();
        for bad in [negative, not_bytes, batch.project(&[0, 1]).unwrap()] {
            match each_row("ideal_replay", "the sends placed", &bad, |_, _, _| Ok(())) {
                Ok(()) => panic!("{} damaged rows read", bad.num_rows()),
                Err(e) => assert!(e.to_string().contains("ideal_replay: the sends placed did not read back"), "{e}"),
            }
        }
    }
}
