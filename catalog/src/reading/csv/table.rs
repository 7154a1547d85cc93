//! Any CSV file with a header line as a plain table, for lookups that join with trace data: a
//! node-to-switch map, a rank-to-phase list. Column types are inferred by Arrow's CSV reader
//! from the first 1,000 rows (integers, floats, booleans, otherwise text); a later value that
//! does not fit its column's type is an error naming the file and the reader's position.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::csv::ReaderBuilder;
use arrow::csv::reader::Format;

use crate::error::{Error, Result};

/// Rows read to infer the column types.
const INFER_ROWS: usize = 1_000;

/// Read the whole file as one table.
pub fn read(path: &Path) -> Result<RecordBatch> {
    Error::regular_file(path)?;
    let mut file = BufReader::new(File::open(path).map_err(|e| Error::io(path, e))?);
    let format = Format::default().with_header(true);
    let (schema, _) =
        format.infer_schema(&mut file, Some(INFER_ROWS)).map_err(|e| Error::in_file(path, e.to_string()))?;
    if schema.fields().is_empty() {
        return Err(Error::in_file(path, "the file is empty: expected a header line with column names"));
    }
    crate::reading::csv::check_unique_header(path, schema.fields().iter().map(|f| f.name().as_str()))?;
    file.rewind().map_err(|e| Error::io(path, e))?;
    let schema = Arc::new(schema);
    let reader = ReaderBuilder::new(schema.clone())
        .with_format(format)
        .build(file)
        .map_err(|e| Error::in_file(path, e.to_string()))?;
    let batches: Vec<RecordBatch> =
        reader.collect::<std::result::Result<_, _>>().map_err(|e| Error::in_file(path, e.to_string()))?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|e| Error::in_file(path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_types_and_names_the_file_on_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("switches.csv");
        std::fs::write(&path, "node,switch,ports\nnode000,sw00,48\nnode008,sw01,48\n").unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.num_rows(), 2);
        assert_eq!(t.schema().field(2).data_type(), &arrow::datatypes::DataType::Int64);
        std::fs::write(&path, "").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("switches.csv"));
        std::fs::write(&path, "a,b\n1,2\n3\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("switches.csv"), "{e}");
    }
}
