//! Files as tables, the way duckdb users reach for them: `read_parquet(path)` and
//! `read_csv(path)` (a header line, fields between commas), beside the path-as-table form
//! (`SELECT * FROM 'x.parquet'`). Planning reads only what fixes the columns (a Parquet file's
//! footer; the first 1,000 lines of a CSV file, whose types are inferred as DataFusion and
//! arrow infer them); the rows are scanned in place when the query runs, by DataFusion's
//! Parquet and CSV readers, with their pruning and projection. A path may be a file or a
//! directory of such files: the first in name order fixes the columns, and every other must
//! have the same column names in the same order (a CSV file's header line; a Parquet file's
//! columns and their types), else the call is refused naming both files, since the readers
//! would match CSV columns by position and fill a Parquet file's missing columns with NULL.
//! Only regular files are read: a device or a pipe has no end (`/dev/zero`, a FIFO), and a CSV
//! file whose first line does not end within 1 MiB is no CSV file with a header. A missing or
//! unreadable file is an error naming it.

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

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output};
use commdb_analysis::params::{Param, ParamDefault, Type, param};

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

/// The files `path` names: itself, or the files with extension `ext` in the directory `path`,
/// in name order; each a regular file.
fn files_of(function: &str, path: &str, ext: &str) -> Result<Vec<PathBuf>> {
    let p = Path::new(path);
    if let Err(refused) = commdb_catalog::data_dirs::check(p) {
        return plan_err!("{function}: {refused}");
    }
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return plan_err!("{function}: cannot open '{path}': {e}"),
    };
    let files = if meta.is_dir() {
        let entries = match std::fs::read_dir(p) {
            Ok(entries) => entries,
            Err(e) => return plan_err!("{function}: cannot list the directory '{path}': {e}"),
        };
        let mut files: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|f| f.extension().is_some_and(|x| x == ext)).collect();
        files.sort();
        if files.is_empty() {
            return plan_err!("{function}: the directory '{path}' holds no .{ext} file");
        }
        files
    } else {
        vec![p.to_path_buf()]
    };
    for f in &files {
        if let Err(e) = commdb_catalog::Error::regular_file(f) {
            return plan_err!("{function}: {e}");
        }
    }
    Ok(files)
}

/// The file `file`, open for reading the columns.
fn open(function: &str, file: &Path) -> Result<std::fs::File> {
    std::fs::File::open(file).or_else(|e| plan_err!("{function}: cannot open '{}': {e}", file.display()))
}

/// The longest first line of a CSV file read: its header.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// The bytes of a CSV file read to infer the columns' types (its first 1,000 lines, or fewer
/// when they are longer).
const MAX_INFER_BYTES: u64 = 64 << 20;

/// The header line of the CSV file `file`, without its line end.
fn header_of(file: &Path) -> Result<String> {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    let reader = std::io::BufReader::new(open("read_csv", file)?);
    let read = reader.take(MAX_HEADER_BYTES).read_until(b'\n', &mut line);
    if let Err(e) = read {
        return plan_err!("read_csv: cannot read '{}': {e}", file.display());
    }
    if !line.ends_with(b"\n") && line.len() as u64 >= MAX_HEADER_BYTES {
        return plan_err!(
            "read_csv: the first line of '{}' does not end within {} MiB: expected a CSV file whose first line names its columns",
            file.display(),
            MAX_HEADER_BYTES >> 20
        );
    }
    let text = String::from_utf8_lossy(&line);
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// A file's columns in order, as (name, type) when the type is known.
fn describe(columns: &[(String, Option<String>)]) -> String {
    let names: Vec<String> =
        columns.iter().map(|(n, t)| t.as_ref().map_or_else(|| n.clone(), |t| format!("{n} {t}"))).collect();
    names.join(", ")
}

/// Refuse `files` unless every one has the columns of the first.
fn same_columns(
    function: &str,
    files: &[PathBuf],
    columns: impl Fn(&Path) -> Result<Vec<(String, Option<String>)>>,
) -> Result<()> {
    let Some(first) = files.first() else { return Ok(()) };
    let expected = columns(first)?;
    for f in &files[1..] {
        let got = columns(f)?;
        if got != expected {
            return plan_err!(
                "{function}: '{}' has other columns than '{}' ({} against {}): read the files one at a time, or put files of one schema in a directory",
                f.display(),
                first.display(),
                describe(&got),
                describe(&expected)
            );
        }
    }
    Ok(())
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

/// A Parquet file's columns and their types, from its footer.
fn parquet_schema(file: &Path) -> Result<SchemaRef> {
    use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    let opened = open("read_parquet", file)?;
    match ArrowReaderMetadata::load(&opened, ArrowReaderOptions::default()) {
        Ok(m) => Ok(m.schema().clone()),
        Err(e) => plan_err!("read_parquet: '{}' is not a Parquet file: {e}", file.display()),
    }
}

fn read_parquet(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    let files = files_of("read_parquet", &path, "parquet")?;
    same_columns("read_parquet", &files, |f| {
        Ok(parquet_schema(f)?.fields().iter().map(|c| (c.name().clone(), Some(c.data_type().to_string()))).collect())
    })?;
    let schema = parquet_schema(&files[0])?;
    listing("read_parquet", &path, Arc::new(ParquetFormat::default()), "parquet", schema)
}

fn read_csv(a: &Args) -> Result<Arc<dyn TableProvider>> {
    use std::io::Read;
    let PathArgs { path } = PathArgs::read(a)?;
    let files = files_of("read_csv", &path, "csv")?;
    same_columns("read_csv", &files, |f| {
        Ok(header_of(f)?.split(',').map(|c| (c.trim_matches('"').to_string(), None)).collect())
    })?;
    let file = &files[0];
    let opened = open("read_csv", file)?;
    let format = arrow::csv::reader::Format::default().with_header(true).with_delimiter(b',');
    let sample = std::io::BufReader::new(opened).take(MAX_INFER_BYTES);
    let schema = match format.infer_schema(sample, Some(1000)) {
        Ok((schema, _)) => Arc::new(schema),
        Err(e) => return plan_err!("read_csv: cannot read the columns of '{}': {e}", file.display()),
    };
    let csv = CsvFormat::default().with_has_header(true).with_delimiter(b',');
    listing("read_csv", &path, Arc::new(csv), "csv", schema)
}
