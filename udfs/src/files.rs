//! Files as tables, the way duckdb users reach for them: `read_parquet(path)` and
//! `read_csv(path)` (a header line, fields between commas), beside the path-as-table form
//! (`SELECT * FROM 'x.parquet'`). Planning reads only what fixes the columns (a Parquet file's
//! footer; the first 1,000 lines of a CSV file, whose types are inferred as DataFusion and
//! arrow infer them); the rows are scanned in place when the query runs, by DataFusion's
//! Parquet and CSV readers, with their pruning and projection. A path may be a file or a
//! directory of such files (the first in name order fixes the columns). A missing or unreadable
//! file is an error naming it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::csv::CsvFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::Result;

use crate::args::{Args, arguments};
use crate::declare::{Function, Make, Output};
use crate::params::{Param, ParamDefault, Type, param};

const PATH: Param = param("path", Type::Text, ParamDefault::Required, "the file, or a directory of such files");

pub const READ_PARQUET: Function = Function {
    name: "read_parquet",
    params: &[PATH],
    output: Output::ColumnsThen(&[], "the file's columns, as its schema gives them"),
    description: "a Parquet file (or a directory of them) as a table, scanned in place",
    make: Make::Table(read_parquet),
};

pub const READ_CSV: Function = Function {
    name: "read_csv",
    params: &[PATH],
    output: Output::ColumnsThen(&[], "the file's columns, typed from its first 1,000 lines"),
    description: "a CSV file with a header line, fields between commas (or a directory of them), as a table scanned in place; column types inferred from the first 1,000 lines",
    make: Make::Table(read_csv),
};

/// The file that fixes the columns: `path` itself, or the first file in name order with
/// extension `ext` in the directory `path`.
fn first_file(function: &str, path: &str, ext: &str) -> Result<PathBuf> {
    let p = Path::new(path);
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return plan_err!("{function}: cannot open '{path}': {e}"),
    };
    if !meta.is_dir() {
        return Ok(p.to_path_buf());
    }
    let entries = match std::fs::read_dir(p) {
        Ok(entries) => entries,
        Err(e) => return plan_err!("{function}: cannot list the directory '{path}': {e}"),
    };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|f| f.extension().is_some_and(|x| x == ext)).collect();
    files.sort();
    match files.into_iter().next() {
        Some(f) => Ok(f),
        None => plan_err!("{function}: the directory '{path}' holds no .{ext} file"),
    }
}

/// The file `file`, open for reading the columns.
fn open(function: &str, file: &Path) -> Result<std::fs::File> {
    std::fs::File::open(file).or_else(|e| plan_err!("{function}: cannot open '{}': {e}", file.display()))
}

/// A listing table over `path` with `format` and the columns `schema`.
fn listing(
    function: &str,
    path: &str,
    format: Arc<dyn FileFormat>,
    ext: &str,
    schema: SchemaRef,
) -> Result<Arc<dyn TableProvider>> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
    let mut text = absolute.display().to_string();
    if absolute.is_dir() && !text.ends_with('/') {
        text.push('/');
    }
    let url = match ListingTableUrl::parse(&text) {
        Ok(url) => url,
        Err(e) => return plan_err!("{function}: '{path}' is not a path it can read: {e}"),
    };
    let options = ListingOptions::new(format).with_file_extension(format!(".{ext}"));
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(schema);
    Ok(Arc::new(ListingTable::try_new(config)?))
}

arguments! {
    /// The one argument of the file readers.
    struct PathArgs(READ_PARQUET, READ_CSV) {
        path: String,
    }
}

fn read_parquet(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    let file = first_file("read_parquet", &path, "parquet")?;
    let opened = open("read_parquet", &file)?;
    use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    let schema = match ArrowReaderMetadata::load(&opened, ArrowReaderOptions::default()) {
        Ok(m) => m.schema().clone(),
        Err(e) => return plan_err!("read_parquet: '{}' is not a Parquet file: {e}", file.display()),
    };
    listing("read_parquet", &path, Arc::new(ParquetFormat::default()), "parquet", schema)
}

fn read_csv(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    let file = first_file("read_csv", &path, "csv")?;
    let opened = open("read_csv", &file)?;
    let format = arrow::csv::reader::Format::default().with_header(true).with_delimiter(b',');
    let schema = match format.infer_schema(std::io::BufReader::new(opened), Some(1000)) {
        Ok((schema, _)) => Arc::new(schema),
        Err(e) => return plan_err!("read_csv: cannot read the columns of '{}': {e}", file.display()),
    };
    let csv = CsvFormat::default().with_has_header(true).with_delimiter(b',');
    listing("read_csv", &path, Arc::new(csv), "csv", schema)
}
