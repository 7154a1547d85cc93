//! commdb's own trace store: a directory with one Parquet file per table of the model and a
//! `manifest.json` naming them. Written by `commdb convert`, read back losslessly (same
//! schemas, same rows) and much faster than re-reading and re-matching the source trace.
//! Tables are read in parallel, one rayon task per file. A table of more than `PART_ROWS` rows
//! is written as a directory of parts of consecutive rows (`events/part-00000.parquet`, ...):
//! as the tables are in rank order (events, calls, collectives) or send-time order (messages),
//! each part covers a range of ranks or a window of time, so a query's filter skips whole
//! files by their statistics, and a part is the unit a streaming writer fills.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::column_sums::{ColumnSums, FileSums, column_sums};
use crate::deriving::steps::StoredTable;
use crate::error::{Error, Result};
use crate::model;
use crate::part_values::{PartValues, ValueSet, listed_column};
use crate::trace::{KeyRange, PartBounds, StoredFile, Trace, TraceMeta, Warnings};

pub use crate::stamp::{MANIFEST, Stamp};
const STORE_VERSION: u32 = 1;
/// Tables of the model that stores of this version written before them do not have.
const ADDED_LATER: [&str; 2] = ["states", "metric_definitions"];

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    commdb_store_version: u32,
    name: String,
    source_path: String,
    source_format: String,
    tables: BTreeMap<String, TableEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TableEntry {
    /// The table's file, or the directory of its parts.
    file: String,
    rows: usize,
    /// CRC-32 of the whole file, checked when the store is read (absent in stores written
    /// before checksums: then not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crc32: Option<u32>,
    /// The parts of a table cut into several files, in row order (none: one file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    parts: Vec<PartEntry>,
}

/// One file of a table written in parts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartEntry {
    file: String,
    rows: usize,
    crc32: u32,
    /// The CRC-32 of each column's chunks and of the tail (absent in stores written before:
    /// then a scan checks the whole file).
    #[serde(default, rename = "column_crc32", skip_serializing_if = "Option::is_none")]
    columns: Option<ColumnSums>,
    /// The range of the table's order column in the part (absent in stores written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<KeyRange>,
    /// The values of the table's kind column in the part, when few (absent in stores written
    /// before, and when there are more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    values: Option<PartValues>,
}

/// The column a table's rows are ordered by in a store, whose range each part records.
pub fn order_column(table: &str) -> Option<&'static str> {
    match table {
        "events" | "calls" | "collectives" | "metrics" | "states" => Some("rank"),
        "messages" => Some("send_ts"),
        _ => None,
    }
}

/// The range of `column` over `batches` (None when it has no value).
fn key_range(batches: &[RecordBatch], column: Option<&str>) -> Option<KeyRange> {
    let column = column?;
    let mut range: Option<(i64, i64)> = None;
    for b in batches {
        let Some(c) = b.column_by_name(column) else { continue };
        let Ok(c) = arrow::compute::cast(c, &arrow::datatypes::DataType::Int64) else { continue };
        let c = c.as_primitive::<Int64Type>();
        if let (Some(lo), Some(hi)) = (arrow::compute::min(c), arrow::compute::max(c)) {
            range = Some(range.map_or((lo, hi), |(a, z)| (a.min(lo), z.max(hi))));
        }
    }
    range.map(|(min, max)| KeyRange { column: column.to_string(), min, max })
}

impl TableEntry {
    /// The files of the table in the store at `dir`, with their checksums and rows.
    fn files(&self, dir: &Path) -> Vec<(std::path::PathBuf, FileSums, usize, PartBounds)> {
        if self.parts.is_empty() {
            let sums = FileSums { file: self.crc32, columns: None };
            return vec![(dir.join(&self.file), sums, self.rows, PartBounds::default())];
        }
        self.parts
            .iter()
            .map(|p| {
                let sums = FileSums { file: Some(p.crc32), columns: p.columns.clone().map(std::sync::Arc::new) };
                let bounds = PartBounds { key: p.key.clone(), values: p.values.clone() };
                (dir.join(&self.file).join(&p.file), sums, p.rows, bounds)
            })
            .collect()
    }
}

/// Rows of a table above which it is written in parts of this many rows (4 row groups).
pub const PART_ROWS: usize = 1 << 22;

/// Rows of a part of `table` when tables are cut into parts of `part_rows`: `messages` in
/// parts of a quarter (a row group each at `PART_ROWS`), so that a window of send time opens,
/// and checks the checksum of, about a million messages rather than four.
pub fn part_rows_of(table: &str, part_rows: usize) -> usize {
    if table == "messages" { (part_rows / 4).max(1) } else { part_rows.max(1) }
}

/// Whether `dir` is a commdb store.
pub fn is_store(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

/// Write `trace` as a store at `dir`: a new directory, an empty one, or an existing commdb
/// store, which is replaced only when the new one is complete. The tables and the manifest are
/// written into a fresh directory beside `dir` that takes its place at the end, so an
/// interrupted write leaves the old store (or nothing) at `dir`, never a store that opens as if
/// it were complete. A non-empty directory that is not a store is refused (and `convert`
/// refuses the trace's own file or directory, `refuse_source`).
pub fn write(trace: &Trace, dir: &Path) -> Result<()> {
    write_in_parts(trace, dir, PART_ROWS)
}

/// `write`, cutting tables of more than `part_rows` rows into parts of that many rows.
pub fn write_in_parts(trace: &Trace, dir: &Path, part_rows: usize) -> Result<()> {
    let mut store = StoreWriter::create(dir)?;
    trace.build_all()?;
    let part_rows = part_rows.max(1);
    let entries: Vec<(&'static str, TableEntry)> = model::TABLES
        .par_iter()
        .map(|t| {
            let batches = trace.table(t.name)?;
            let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
            let part_rows = part_rows_of(t.name, part_rows);
            if total <= part_rows {
                return Ok((t.name, one_file(store.partial(), t, &batches)?));
            }
            let folder = store.partial().join(t.name);
            std::fs::create_dir(&folder).map_err(|e| Error::io(&folder, e))?;
            let pieces = in_parts(&batches, part_rows, cut_at_ranks(t.name));
            let parts = pieces
                .par_iter()
                .enumerate()
                .map(|(k, piece)| {
                    let file = part_name(k);
                    let (rows, crc32) = write_table(&folder.join(&file), t.name, t.schema(), piece)?;
                    let columns = Some(column_sums(&folder.join(&file))?);
                    let key = key_range(piece, order_column(t.name));
                    let values = crate::part_values::of_batches(t.name, piece);
                    Ok(PartEntry { file, rows, crc32, columns, key, values })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((t.name, TableEntry { file: t.name.to_string(), rows: total, crc32: None, parts }))
        })
        .collect::<Result<_>>()?;
    for (name, entry) in entries {
        store.add(name, entry);
    }
    store.finish(&trace.meta)
}

fn part_name(k: usize) -> String {
    format!("part-{k:05}.parquet")
}

/// A table written as one file in `dir`.
fn one_file(dir: &Path, t: &model::TableDoc, batches: &[RecordBatch]) -> Result<TableEntry> {
    let file = format!("{}.parquet", t.name);
    let (rows, crc32) = write_table(&dir.join(&file), t.name, t.schema(), batches)?;
    Ok(TableEntry { file, rows, crc32: Some(crc32), parts: Vec::new() })
}

/// A store being written: its tables go into a fresh directory beside the target, which takes
/// the target's place when `finish` has written the manifest. Dropped unfinished (an error, an
/// interruption), it removes that directory: nothing at the target looks like a store.
#[derive(Debug)]
pub struct StoreWriter {
    dir: PathBuf,
    partial: PathBuf,
    tables: BTreeMap<String, TableEntry>,
    finished: bool,
}

impl StoreWriter {
    /// Start a store at `dir`: a new directory, an empty one, or a commdb store (replaced when
    /// the new one is complete).
    pub fn create(dir: &Path) -> Result<Self> {
        check_target(dir)?;
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        // What converts that were killed left here is removed first.
        crate::writing::clean_stale(parent);
        let partial = parent.join(format!(".{name}.commdb-partial-{}", std::process::id()));
        if partial.exists() {
            std::fs::remove_dir_all(&partial).map_err(|e| Error::io(&partial, e))?;
        }
        std::fs::create_dir(&partial).map_err(|e| Error::io(&partial, e))?;
        Ok(StoreWriter { dir: dir.to_path_buf(), partial, tables: BTreeMap::new(), finished: false })
    }

    /// The directory the tables are written into until `finish`.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// A scratch directory beside the store for files the writing needs on the way (removed
    /// by whoever uses it, and with the partial store if the write fails).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.partial.with_extension(format!("scratch-{name}"))
    }

    /// Write a table of the model whose batches are all at hand, as one file.
    pub fn table(&mut self, name: &'static str, batches: &[RecordBatch]) -> Result<()> {
        let doc = model::table_doc(name).ok_or_else(|| Error::Engine(format!("{name} is not a table of the model")))?;
        let entry = one_file(&self.partial, doc, batches)?;
        self.add(name, entry);
        Ok(())
    }

    /// A writer for a table of the model whose batches come a few at a time: it is written as
    /// parts of `part_rows` rows.
    pub fn parts(&self, name: &'static str, part_rows: usize) -> Result<PartWriter> {
        let doc = model::table_doc(name).ok_or_else(|| Error::Engine(format!("{name} is not a table of the model")))?;
        let folder = self.partial.join(name);
        std::fs::create_dir(&folder).map_err(|e| Error::io(&folder, e))?;
        Ok(PartWriter {
            name,
            folder,
            schema: doc.schema(),
            part_rows: part_rows.max(1),
            open: None,
            key: None,
            values: ValueSet::default(),
            parts: Vec::new(),
            rows: 0,
            by_rank: cut_at_ranks(name),
            last_rank: None,
        })
    }

    /// Record a table written through `parts`.
    pub fn add_parts(&mut self, parts: PartWriter) -> Result<()> {
        let name = parts.name;
        let entry = parts.finish()?;
        self.add(name, entry);
        Ok(())
    }

    fn add(&mut self, name: &str, entry: TableEntry) {
        self.tables.insert(name.to_string(), entry);
    }

    /// Write the manifest (every table of the model must have been written) and put the store
    /// in its place.
    pub fn finish(mut self, meta: &TraceMeta) -> Result<()> {
        if let Some(t) = model::TABLES.iter().find(|t| !self.tables.contains_key(t.name)) {
            return Err(Error::Engine(format!("the store lacks table {}", t.name)));
        }
        let manifest = Manifest {
            commdb_store_version: STORE_VERSION,
            name: meta.name.clone(),
            source_path: meta.path.clone(),
            source_format: meta.format.clone(),
            tables: std::mem::take(&mut self.tables),
        };
        let path = self.partial.join(MANIFEST);
        let text = serde_json::to_string_pretty(&manifest).map_err(|e| Error::in_file(&path, e.to_string()))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        let (dir, partial) = (self.dir.clone(), self.partial.clone());
        let parent = partial.parent().unwrap_or(Path::new("."));
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
        let previous = parent.join(format!(".{name}.commdb-previous-{}", std::process::id()));
        let had_old = dir.exists();
        if had_old {
            std::fs::rename(&dir, &previous).map_err(|e| Error::io(&dir, e))?;
        }
        if let Err(e) = std::fs::rename(&partial, &dir) {
            if had_old {
                let _ = std::fs::rename(&previous, &dir);
            }
            return Err(Error::io(&dir, e));
        }
        self.finished = true;
        if had_old {
            std::fs::remove_dir_all(&previous).map_err(|e| Error::io(&previous, e))?;
        }
        Ok(())
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.partial);
        }
    }
}

/// The Parquet writer of a part being filled.
type OpenPart = (TableWriter, String, usize);

/// A table of a store written a batch at a time into parts of consecutive rows
/// (`StoreWriter::parts`); the rows keep the order they are given in.
pub struct PartWriter {
    name: &'static str,
    folder: PathBuf,
    schema: arrow::datatypes::SchemaRef,
    part_rows: usize,
    open: Option<OpenPart>,
    /// The range of the order column in the open part, and the values of its kind column.
    key: Option<KeyRange>,
    values: ValueSet,
    parts: Vec<PartEntry>,
    rows: usize,
    /// Whether parts end at rank boundaries (`cut_at_ranks`), and the rank the open part ends with.
    by_rank: bool,
    last_rank: Option<i32>,
}

impl std::fmt::Debug for PartWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartWriter").field("folder", &self.folder).field("rows", &self.rows).finish()
    }
}

impl PartWriter {
    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Append a batch, starting new parts as they fill (for a table cut at rank boundaries,
    /// once full at the next rank).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let ranks = ranks_of(batch, self.by_rank);
        let mut at = 0;
        while at < batch.num_rows() {
            let (writer, file, filled) = match &mut self.open {
                Some(open) => open,
                None => {
                    let file = part_name(self.parts.len());
                    let writer = parquet_writer(&self.folder.join(&file), self.name, self.schema.clone())?;
                    self.open.insert((writer, file, 0))
                }
            };
            let (n, complete) =
                rows_for_part(batch.num_rows(), at, *filled, self.part_rows, ranks.as_ref(), self.last_rank);
            if n == 0 {
                self.close_part()?;
                continue;
            }
            let path = self.folder.join(&*file);
            let slice = batch.slice(at, n);
            writer.write(&slice, &path)?;
            if let Some(column) = listed_column(self.name) {
                self.values.add(&slice, column);
            }
            if let Some(r) = key_range(&[slice], order_column(self.name)) {
                self.key = Some(match self.key.take() {
                    Some(k) => KeyRange { min: k.min.min(r.min), max: k.max.max(r.max), ..k },
                    None => r,
                });
            }
            *filled += n;
            self.rows += n;
            self.last_rank = ranks.as_ref().map(|r| r.value(at + n - 1));
            at += n;
            if complete {
                self.close_part()?;
            }
        }
        Ok(())
    }

    fn close_part(&mut self) -> Result<()> {
        self.last_rank = None;
        let Some((writer, file, rows)) = self.open.take() else { return Ok(()) };
        let path = self.folder.join(&file);
        let mut out = writer.into_inner(&path)?;
        out.flush().map_err(|e| Error::io(&path, e))?;
        let columns = Some(column_sums(&path)?);
        let values = listed_column(self.name).and_then(|c| self.values.take(c));
        let (crc32, key) = (out.crc.finalize(), self.key.take());
        self.parts.push(PartEntry { file, rows, crc32, columns, key, values });
        Ok(())
    }

    /// Close the last part (a table without rows gets one empty part, with its schema).
    fn finish(mut self) -> Result<TableEntry> {
        if self.parts.is_empty() && self.open.is_none() {
            let file = part_name(0);
            self.open = Some((parquet_writer(&self.folder.join(&file), self.name, self.schema.clone())?, file, 0));
        }
        self.close_part()?;
        Ok(TableEntry { file: self.name.to_string(), rows: self.rows, crc32: None, parts: self.parts })
    }
}

/// Refuse converting a trace into the file or directory it is read from (or one that holds it).
pub fn refuse_source(source: &Path, dir: &Path) -> Result<()> {
    if let (Ok(target), Ok(source)) = (std::fs::canonicalize(dir), std::fs::canonicalize(source))
        && (source == target || source.starts_with(&target))
    {
        return Err(Error::argument(format!(
            "{}: the trace is read from there; write the store to another directory",
            dir.display()
        )));
    }
    Ok(())
}

/// Refuse a target that would lose data: a non-empty directory that is not a store, a file.
fn check_target(dir: &Path) -> Result<()> {
    if dir.is_file() {
        return Err(Error::argument(format!("{}: is a file, not a directory for a store", dir.display())));
    }
    if dir.is_dir() && !is_store(dir) {
        let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        if entries.next().is_some() {
            return Err(Error::argument(format!(
                "{}: the directory is not empty and is not a commdb store; choose a new or empty directory",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Whether a table's parts end at rank boundaries: the tables kept in rank order
/// ([`crate::model::rank_ordered`]), so that a part holds whole ranks, all a
/// distributed engine's task needs to sweep them (docs/scale.md).
fn cut_at_ranks(table: &str) -> bool {
    crate::model::rank_ordered(table)
}

/// The `rank` column of a batch of a table cut at rank boundaries.
fn ranks_of(batch: &RecordBatch, by_rank: bool) -> Option<arrow::array::Int32Array> {
    if !by_rank {
        return None;
    }
    let column = batch.column_by_name("rank")?;
    arrow::compute::cast(column, &arrow::datatypes::DataType::Int32).ok()?.as_primitive_opt().cloned()
}

/// How many rows of a batch, from row `at`, go into a part that holds `filled` rows: up to
/// `part_rows`, and for a table cut at rank boundaries (`ranks`) on past it while the rank the
/// part ends with (`last`) goes on. Also whether the part is then complete.
fn rows_for_part(
    rows: usize,
    at: usize,
    filled: usize,
    part_rows: usize,
    ranks: Option<&arrow::array::Int32Array>,
    last: Option<i32>,
) -> (usize, bool) {
    let left = rows - at;
    if filled < part_rows {
        let n = (part_rows - filled).min(left);
        return (n, ranks.is_none() && filled + n == part_rows);
    }
    match (ranks, last) {
        (Some(ranks), Some(last)) => {
            let n = (at..rows).take_while(|&i| ranks.is_valid(i) && ranks.value(i) == last).count();
            (n, n < left)
        }
        _ => (0, true),
    }
}

/// Batches cut into pieces of `part_rows` consecutive rows (slices, no copies); with
/// `by_rank`, each piece goes on to the end of the rank it ends in.
fn in_parts(batches: &[RecordBatch], part_rows: usize, by_rank: bool) -> Vec<Vec<RecordBatch>> {
    let mut pieces: Vec<Vec<RecordBatch>> = vec![Vec::new()];
    let mut filled = 0;
    let mut last = None;
    for b in batches {
        let ranks = ranks_of(b, by_rank);
        let mut at = 0;
        while at < b.num_rows() {
            let (n, complete) = rows_for_part(b.num_rows(), at, filled, part_rows, ranks.as_ref(), last);
            if n > 0 {
                pieces.last_mut().expect("one piece at least").push(b.slice(at, n));
                filled += n;
                last = ranks.as_ref().map(|r| r.value(at + n - 1));
                at += n;
            }
            if complete {
                pieces.push(Vec::new());
                filled = 0;
                last = None;
            }
        }
    }
    if pieces.len() > 1 && pieces.last().is_some_and(Vec::is_empty) {
        pieces.pop();
    }
    pieces
}

/// A writer that keeps the CRC-32 of everything written through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Columns of times and ids, nearly every value its own: a dictionary would only be built to
/// be given up (it was a sixth of a conversion's time), so they are written plain. A column
/// chunk written with a dictionary keeps the dictionary page it gave up on (up to 1 MiB), and
/// every read of the chunk, however few of its pages a window needs, decodes that page.
const NEARLY_UNIQUE: [&str; 23] = [
    "ts",
    "ts_local",
    "seq",
    "msg_id",
    "call_id",
    "start_ts",
    "end_ts",
    "duration",
    "exclusive",
    "send_ts",
    "recv_ts",
    "send_call_start",
    "send_call_end",
    "recv_call_start",
    "recv_call_end",
    "recv_post_ts",
    "send_complete_ts",
    "send_complete_call_start",
    "begin_ts",
    "call_start",
    "master_ts",
    "local_ts",
    "value",
];

/// Rows of a data page at most. A window of time reads the pages whose page-index bounds
/// reach into it; the tables are in rank order, so each rank's rows span a few pages of every
/// column, and a narrow window of a run decodes about one page per rank (a page of 20,000 rows,
/// Parquet's size default at these widths, made a window of 1% of a 1,024-rank run decode a
/// third of the calls).
const PAGE_ROWS: usize = 1024;

/// Rows of a row group at least before it may end where a thread's rows do. Data pages end
/// only when full, so a page that holds the end of one thread's rows and the start of the
/// next spans the whole run in time and is read by every window; a row group ends its pages.
/// A table in rank order ends a row group at a thread's end once it holds this many rows, so a
/// thread of more rows has no such page; threads of fewer rows share row groups (their few
/// pages each span most of the run anyway).
const ROW_GROUP_AT_LEAST: usize = 16 * PAGE_ROWS;

/// The Parquet writer of a table's file, keeping the CRC-32 of its bytes; for a table in rank
/// order, it ends row groups where threads end (`ROW_GROUP_AT_LEAST`).
struct TableWriter {
    inner: ArrowWriter<Checksummed<std::io::BufWriter<File>>>,
    /// The columns whose change ends a thread's rows (rank, thread), if the table is in rank order.
    threads: Vec<usize>,
    /// The thread the rows written so far end with.
    last: Option<Vec<i64>>,
}

impl TableWriter {
    fn write(&mut self, batch: &RecordBatch, path: &Path) -> Result<()> {
        let engine = |e: parquet::errors::ParquetError| Error::in_file(path, e.to_string());
        if self.threads.is_empty() {
            return self.inner.write(batch).map_err(engine);
        }
        let keys: Vec<arrow::array::Int64Array> = self
            .threads
            .iter()
            .map(|&c| {
                arrow::compute::cast(batch.column(c), &arrow::datatypes::DataType::Int64)
                    .map(|a| a.as_primitive::<Int64Type>().clone())
                    .map_err(|e| Error::in_file(path, e.to_string()))
            })
            .collect::<Result<_>>()?;
        let key =
            |i: usize| -> Vec<i64> { keys.iter().map(|k| if k.is_valid(i) { k.value(i) } else { i64::MIN }).collect() };
        let same = |i: usize, j: usize| keys.iter().all(|k| k.is_valid(i) == k.is_valid(j) && k.value(i) == k.value(j));
        // The batch in runs of one thread.
        let mut at = 0;
        while at < batch.num_rows() {
            let first = key(at);
            let end = (at + 1..batch.num_rows()).find(|&i| !same(at, i)).unwrap_or(batch.num_rows());
            if self.last.as_ref() != Some(&first) {
                if self.inner.in_progress_rows() >= ROW_GROUP_AT_LEAST {
                    self.inner.flush().map_err(engine)?;
                }
                self.last = Some(first);
            }
            self.inner.write(&batch.slice(at, end - at)).map_err(engine)?;
            at = end;
        }
        Ok(())
    }

    fn into_inner(self, path: &Path) -> Result<Checksummed<std::io::BufWriter<File>>> {
        self.inner.into_inner().map_err(|e| Error::in_file(path, e.to_string()))
    }
}

/// A Parquet writer for `table`'s file at `path`.
fn parquet_writer(path: &Path, table: &str, schema: arrow::datatypes::SchemaRef) -> Result<TableWriter> {
    let file = Checksummed {
        inner: std::io::BufWriter::new(File::create(path).map_err(|e| Error::io(path, e))?),
        crc: crc32fast::Hasher::new(),
    };
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(1 << 20))
        .set_data_page_row_count_limit(PAGE_ROWS);
    for field in schema.fields().iter().filter(|f| NEARLY_UNIQUE.contains(&f.name().as_str())) {
        props = props.set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false);
    }
    let props = props.build();
    let threads = match order_column(table) {
        Some("rank") => ["rank", "thread"].iter().filter_map(|c| schema.index_of(c).ok()).collect(),
        _ => Vec::new(),
    };
    let inner = ArrowWriter::try_new(file, schema, Some(props)).map_err(|e| Error::in_file(path, e.to_string()))?;
    Ok(TableWriter { inner, threads, last: None })
}

/// Write one table's file; its row count and the CRC-32 of the file's bytes.
fn write_table(
    path: &Path,
    table: &str,
    schema: arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<(usize, u32)> {
    let mut writer = parquet_writer(path, table, schema)?;
    let mut rows = 0;
    for b in batches {
        writer.write(b, path)?;
        rows += b.num_rows();
    }
    let mut file = writer.into_inner(path)?;
    file.flush().map_err(|e| Error::io(path, e))?;
    Ok((rows, file.crc.finalize()))
}

/// Read a store written by `write`.
pub fn read(dir: &Path) -> Result<Trace> {
    read_with_progress(dir, None)
}

/// Read a store, counting tables read in `progress`.
pub fn read_with_progress(dir: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<Trace> {
    let path = dir.join(MANIFEST);
    let stamp = Stamp::of(dir);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| Error::at_line(&path, e.line() as u64, None, format!("not a commdb manifest: {e}")))?;
    if manifest.commdb_store_version != STORE_VERSION {
        return Err(Error::in_file(
            &path,
            format!("store version {} is not supported (expected {STORE_VERSION})", manifest.commdb_store_version),
        ));
    }
    check_parts(dir, &path, &manifest)?;
    let lazy = |name: &str| LATER.contains(&name) && manifest.tables.contains_key(name);
    if let Some(p) = progress {
        p.set_total(model::TABLES.iter().filter(|t| !lazy(t.name)).count() as u64);
    }
    let entry_of = |t: &model::TableDoc| -> Result<Option<TableEntry>> {
        match manifest.tables.get(t.name) {
            Some(entry) => Ok(Some(entry.clone())),
            // A table added after the store was written is empty in it.
            None if ADDED_LATER.contains(&t.name) => Ok(None),
            None => Err(Error::in_file(&path, format!("manifest lists no file for table '{}'", t.name))),
        }
    };
    let mut stored: BTreeMap<&'static str, StoredTable> = BTreeMap::new();
    for t in model::TABLES.iter().filter(|t| lazy(t.name)) {
        if let Some(entry) = entry_of(t)? {
            let files = entry.files(dir).into_iter().map(|(p, crc, _, bounds)| (p, crc, bounds)).collect();
            let file = StoredFile { path: dir.join(&entry.file), files, rows: entry.rows, stamp: stamp.clone() };
            let dir = dir.to_path_buf();
            let stamp = stamp.clone();
            stored.insert(
                t.name,
                StoredTable {
                    file,
                    load: Box::new(move || {
                        let read = read_checked(&dir, t, &entry);
                        match &stamp {
                            Some(s) if !s.holds() => Err(s.replaced()),
                            _ => read,
                        }
                    }),
                },
            );
        }
    }
    let tables: Vec<(&'static str, Vec<RecordBatch>)> = model::TABLES
        .par_iter()
        .filter(|t| !lazy(t.name))
        .map(|t| {
            if let Some(p) = progress {
                p.add(1);
            }
            match entry_of(t)? {
                Some(entry) => Ok((t.name, read_checked(dir, t, &entry)?)),
                None => Ok((t.name, vec![RecordBatch::new_empty(t.schema())])),
            }
        })
        .collect::<Result<_>>()?;
    let tables: BTreeMap<&'static str, Vec<RecordBatch>> = tables.into_iter().collect();
    let meta = meta_from_info(tables.get("trace_info").map_or(&[][..], Vec::as_slice), &manifest, dir);
    let warnings = warnings_from_table(tables.get("warnings").map_or(&[][..], Vec::as_slice));
    Ok(crate::deriving::steps::stored_trace(meta, tables, warnings, stored))
}

/// Check what the manifest says of the tables in parts before any is read: no part listed
/// twice, the parts' rows add up to the table's, and each part's file has the rows the
/// manifest gives it (read from its Parquet footer; a part whose footer cannot be read is
/// checked against its checksum, so damage is reported as such, naming the part).
fn check_parts(dir: &Path, manifest_path: &Path, manifest: &Manifest) -> Result<()> {
    let mut footers = Vec::new();
    for (name, entry) in &manifest.tables {
        if entry.parts.is_empty() {
            continue;
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = entry.parts.iter().find(|p| !seen.insert(p.file.as_str())) {
            return Err(Error::in_file(
                manifest_path,
                format!("table '{name}' lists its part {} twice: the manifest was edited or damaged", twice.file),
            ));
        }
        let sum: usize = entry.parts.iter().map(|p| p.rows).sum();
        if sum != entry.rows {
            return Err(Error::in_file(
                manifest_path,
                format!(
                    "table '{name}' has {} rows but its parts add up to {sum}: the manifest was edited or damaged",
                    entry.rows
                ),
            ));
        }
        footers.extend(entry.parts.iter().map(|p| (dir.join(&entry.file).join(&p.file), p.crc32, p.rows)));
    }
    footers.par_iter().try_for_each(|(path, crc32, rows)| {
        let found = File::open(path)
            .map_err(|e| Error::io(path, e))
            .and_then(|f| ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| Error::in_file(path, e.to_string())))
            .map(|b| b.metadata().file_metadata().num_rows());
        match found {
            Ok(n) if n as usize == *rows => Ok(()),
            Ok(n) => Err(Error::in_file(path, format!("has {n} rows but the manifest says {rows}"))),
            Err(e @ Error::Io { .. }) => Err(e),
            Err(e) => {
                check_file(path, Some(*crc32))?;
                Err(e)
            }
        }
    })
}

/// The tables of a store read when a query first uses them: the large ones. The others (the
/// definitions, trace_info, warnings, clock_sync) are read when it is opened.
const LATER: [&str; 6] = ["events", "calls", "messages", "collectives", "metrics", "states"];

/// A table's file read and checked against its manifest entry (checksum, then row count).
fn read_checked(dir: &Path, t: &model::TableDoc, entry: &TableEntry) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for (path, sums, expected, _) in entry.files(dir) {
        let batches = read_table(&path, t, sums.file)?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows != expected {
            return Err(Error::in_file(&path, format!("has {rows} rows but the manifest says {expected}")));
        }
        out.extend(batches);
    }
    Ok(out)
}

/// Check a table's file against the manifest's checksum (none given: nothing to check): a
/// damaged store is an error naming the file, never a table with different contents. Streamed,
/// so the check holds no more than a buffer of the file in memory.
pub fn check_file(path: &Path, crc32: Option<u32>) -> Result<()> {
    let Some(expected) = crc32 else { return Ok(()) };
    let mut file = std::io::BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| Error::io(path, e))?);
    let mut hasher = crc32fast::Hasher::new();
    loop {
        let chunk = std::io::BufRead::fill_buf(&mut file).map_err(|e| Error::io(path, e))?;
        if chunk.is_empty() {
            break;
        }
        hasher.update(chunk);
        let n = chunk.len();
        std::io::BufRead::consume(&mut file, n);
    }
    let found = hasher.finalize();
    if found != expected {
        return Err(Error::in_file(
            path,
            format!("the file is damaged: its checksum is {found:08x}, the manifest's {expected:08x}"),
        ));
    }
    Ok(())
}

/// Read one table's file, checking it against the manifest's checksum first: a damaged store
/// is an error naming the file, never a table with different contents.
fn read_table(path: &Path, doc: &model::TableDoc, crc32: Option<u32>) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    read_batches(path, doc, crc32, &mut |b| {
        out.push(b);
        Ok(())
    })?;
    Ok(out)
}

/// Every batch of the table `name` of `trace`, in row order, handed to `f` one at a time: a
/// table kept in a store's files is read a file and a batch at a time (each file checked
/// against its checksum first), never whole.
pub fn each_batch(trace: &Trace, name: &str, f: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
    let Some(stored) = trace.stored_file(name) else {
        return trace.table(name)?.into_iter().try_for_each(f);
    };
    let doc = model::table_doc(name).ok_or_else(|| Error::Engine(format!("{name} is not a table of the model")))?;
    for (path, sums, _) in &stored.files {
        read_batches(path, doc, sums.file, f)?;
    }
    Ok(())
}

/// `read_table`, handing each batch to `f` as it is read.
fn read_batches(
    path: &Path,
    doc: &model::TableDoc,
    crc32: Option<u32>,
    f: &mut dyn FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    check_file(path, crc32)?;
    let engine = |e: parquet::errors::ParquetError| Error::in_file(path, e.to_string());
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(engine)?
        .with_batch_size(1 << 16)
        .build()
        .map_err(engine)?;
    let expected = doc.schema();
    for batch in reader {
        let batch = batch.map_err(|e| Error::in_file(path, e.to_string()))?;
        let batch = with_later_columns(batch, &expected);
        // A column this version allows to be NULL may have been written by one that did not.
        let fits = batch.schema().fields().len() == expected.fields().len()
            && batch.schema().fields().iter().zip(expected.fields()).all(|(got, want)| {
                got.name() == want.name()
                    && got.data_type() == want.data_type()
                    && (want.is_nullable() || !got.is_nullable())
            });
        if !fits {
            return Err(Error::in_file(
                path,
                format!("columns do not match the '{}' table of this commdb version", doc.name),
            ));
        }
        f(batch.with_schema(expected.clone())?)?;
    }
    Ok(())
}

/// `batch` with the NULL-able columns this version added after the ones it has (the ranks'
/// `application`), all NULL: a store written before them reads as it was.
fn with_later_columns(batch: RecordBatch, expected: &arrow::datatypes::SchemaRef) -> RecordBatch {
    let have = batch.num_columns();
    let later = expected.fields().iter().skip(have);
    let prefix = expected.fields().len() > have
        && batch.schema().fields().iter().zip(expected.fields()).all(|(g, w)| g.name() == w.name());
    if !prefix || !later.clone().all(|f| f.is_nullable()) {
        return batch;
    }
    let mut columns = batch.columns().to_vec();
    columns.extend(later.map(|f| arrow::array::new_null_array(f.data_type(), batch.num_rows())));
    RecordBatch::try_new(expected.clone(), columns).unwrap_or(batch)
}

fn meta_from_info(info: &[RecordBatch], manifest: &Manifest, dir: &Path) -> TraceMeta {
    let mut meta = TraceMeta {
        name: manifest.name.clone(),
        path: dir.display().to_string(),
        format: "parquet".into(),
        ..TraceMeta::default()
    };
    if let Some(b) = info.iter().find(|b| b.num_rows() > 0) {
        let text = |i: usize| {
            let a = b.column(i).as_string::<i32>();
            (!a.is_null(0)).then(|| a.value(0).to_string())
        };
        meta.format_version = text(3);
        meta.creator = text(4);
        let res = b.column(7).as_primitive::<Int64Type>();
        meta.timer_resolution_hz = (!res.is_null(0)).then(|| res.value(0));
        let start = b.column(8).as_primitive::<TimestampNanosecondType>();
        meta.start_wallclock_ns = (!start.is_null(0)).then(|| start.value(0));
        meta.clock_correction = text(12).unwrap_or_default();
        meta.clock_violations = b.column(13).as_primitive::<Int64Type>().value(0);
    }
    meta
}

fn warnings_from_table(batches: &[RecordBatch]) -> Warnings {
    let mut w = Warnings::default();
    for b in batches {
        let code = b.column(0).as_string::<i32>();
        let count = b.column(1).as_primitive::<Int64Type>();
        let message = b.column(2).as_string::<i32>();
        for i in 0..b.num_rows() {
            w.add_many(code.value(i), count.value(i), || message.value(i).to_string());
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{GeneratorConfig, generate};

    /// A generated trace of `ranks` ranks and `iterations` iterations, built.
    fn generated(ranks: i32, iterations: u32) -> Trace {
        generate(&GeneratorConfig { ranks, iterations, ..GeneratorConfig::default() }).unwrap().trace.build().unwrap()
    }

    #[test]
    fn the_columns_written_without_a_dictionary_are_columns_of_the_tables() {
        let columns: std::collections::HashSet<&str> =
            model::TABLES.iter().flat_map(|t| t.columns.iter().map(|c| c.name)).collect();
        for name in NEARLY_UNIQUE {
            assert!(columns.contains(name), "{name} is not a column of any table");
        }
        // Every timestamp column is among them.
        for name in columns.iter().filter(|c| c.ends_with("_ts")) {
            assert!(NEARLY_UNIQUE.contains(name), "{name} is written with a dictionary");
        }
    }

    #[test]
    fn a_store_written_before_a_column_was_added_reads_it_as_null() {
        let trace = generated(3, 1);
        let ranks = &trace.table("ranks").unwrap()[0];
        let expected = model::RANKS.schema();
        let old = ranks.project(&(0..ranks.num_columns() - 1).collect::<Vec<_>>()).unwrap();
        let back = with_later_columns(old, &expected);
        assert_eq!(back.schema(), expected);
        assert_eq!(back.column(back.num_columns() - 1).null_count(), 3);
        // A column that is not NULL-able, or names that differ, are not made up.
        let renamed = RecordBatch::try_new(
            std::sync::Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
                "other",
                arrow::datatypes::DataType::Int32,
                false,
            )])),
            vec![ranks.column(0).clone()],
        )
        .unwrap();
        assert_eq!(with_later_columns(renamed.clone(), &expected).num_columns(), 1);
    }

    #[test]
    fn round_trip_keeps_every_table() {
        let cfg = GeneratorConfig {
            ranks: 6,
            iterations: 4,
            clock_skew: true,
            sync_sessions: 1,
            ..GeneratorConfig::default()
        };
        let mut raw = generate(&cfg).unwrap().trace;
        raw.meta.name = "rt".into();
        let trace = raw.build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        write(&trace, dir.path()).unwrap();
        let back = read(dir.path()).unwrap();
        for t in model::TABLES {
            let a = arrow::compute::concat_batches(&t.schema(), &trace.table(t.name).unwrap()).unwrap();
            let b = arrow::compute::concat_batches(&t.schema(), &back.table(t.name).unwrap()).unwrap();
            assert_eq!(a, b, "table {}", t.name);
        }
        assert_eq!(back.meta.timer_resolution_hz, Some(1_000_000_000));
    }

    #[test]
    fn a_store_is_replaced_whole_and_other_directories_are_refused() {
        let small = |ranks: i32| generated(ranks, 1);
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("store");
        write(&small(2), &dir).unwrap();
        write(&small(4), &dir).unwrap();
        assert_eq!(read(&dir).unwrap().row_count("ranks").unwrap(), 4);
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["store"], "no partial or previous directory is left");
        // A directory with other files is not overwritten.
        let other = root.path().join("photos");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("cat.jpg"), b"meow").unwrap();
        let e = write(&small(2), &other).unwrap_err().to_string();
        assert!(e.contains("photos") && e.contains("not a commdb store"), "{e}");
        assert_eq!(std::fs::read(other.join("cat.jpg")).unwrap(), b"meow");
        // Nor the directory the trace is read from, or one holding it.
        let e = refuse_source(&dir, &dir).unwrap_err().to_string();
        assert!(e.contains("read from there"), "{e}");
        assert!(refuse_source(&other.join("cat.jpg"), &other).is_err());
        assert!(refuse_source(&other, &dir).is_ok());
    }

    #[test]
    fn any_changed_byte_of_a_table_file_is_found() {
        let trace = generated(4, 3);
        let dir = tempfile::tempdir().unwrap();
        write(&trace, dir.path()).unwrap();
        let file = dir.path().join("messages.parquet");
        let original = std::fs::read(&file).unwrap();
        let step = (original.len() / 150).max(1);
        let mut checked = 0;
        for at in (0..original.len()).step_by(step) {
            let mut bytes = original.clone();
            bytes[at] ^= 0x01;
            std::fs::write(&file, &bytes).unwrap();
            // The store opens; the damage is found when the table is first used.
            let e = read(dir.path()).unwrap().table("messages").map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("messages.parquet"), "byte {at}: {e}");
            checked += 1;
        }
        assert!(checked >= 150);
        std::fs::write(&file, &original).unwrap();
        assert!(read(dir.path()).unwrap().build_all().is_ok());
    }

    #[test]
    fn damaged_store_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST), "{ not json").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("manifest.json") && e.contains("not a commdb manifest"), "{e}");
        let trace = generated(2, 1);
        write(&trace, dir.path()).unwrap();
        std::fs::write(dir.path().join("messages.parquet"), b"garbage").unwrap();
        let back = read(dir.path()).unwrap();
        let e = back.table("messages").unwrap_err().to_string();
        assert!(e.contains("messages.parquet"), "{e}");
        // Every use reads the file again, and says so again; the manifest still counts its rows.
        assert_eq!(back.table("messages").unwrap_err().to_string(), e);
        assert_eq!(back.row_count("messages").unwrap(), trace.row_count("messages").unwrap());
        // A table read at open is damaged at open.
        std::fs::write(dir.path().join("ranks.parquet"), b"garbage").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("ranks.parquet"), "{e}");
    }

    #[test]
    fn parts_of_the_rank_ordered_tables_hold_whole_ranks() {
        // Written whole, and a batch at a time with batches that cut ranks.
        let trace = generated(4, 3);
        let dir = tempfile::tempdir().unwrap();
        write_in_parts(&trace, dir.path(), 100).unwrap();
        let streamed = tempfile::tempdir().unwrap();
        let target = streamed.path().join("store");
        let store = StoreWriter::create(&target).unwrap();
        let mut events = store.parts("events", 100).unwrap();
        for b in trace.table("events").unwrap() {
            for at in (0..b.num_rows()).step_by(37) {
                events.write(&b.slice(at, 37.min(b.num_rows() - at))).unwrap();
            }
        }
        let entry = events.finish().unwrap();
        let total = trace.row_count("events").unwrap();
        for (parts, what) in
            [(read_manifest(dir.path()).tables["events"].parts.clone(), "whole"), (entry.parts, "streamed")]
        {
            assert!(parts.len() >= 2, "{what}: {} parts", parts.len());
            assert_eq!(parts.iter().map(|p| p.rows).sum::<usize>(), total, "{what}");
            for pair in parts.windows(2) {
                let (a, b) = (pair[0].key.as_ref().unwrap(), pair[1].key.as_ref().unwrap());
                assert!(a.max < b.min, "{what}: a rank in two parts: {a:?} then {b:?}");
                assert!(pair[0].rows >= 100, "{what}: a part cut before it was full");
            }
        }
    }

    #[test]
    fn row_groups_of_a_rank_ordered_table_end_where_its_large_threads_end() {
        use arrow::array::Int32Array;
        use arrow::datatypes::{DataType, Field, Schema};
        use std::sync::Arc;
        // Threads of 20,000, 100, 40,000 and 30,000 rows, given in batches that cut them.
        let threads = [((0, 0), 20_000), ((0, 1), 100), ((1, 0), 40_000), ((1, 1), 30_000)];
        let (rank, thread): (Vec<i32>, Vec<i32>) =
            threads.iter().flat_map(|&((r, t), n)| std::iter::repeat_n((r, t), n)).unzip();
        let schema = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int32, false),
            Field::new("thread", DataType::Int32, false),
        ]));
        let all = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int32Array::from(rank)), Arc::new(Int32Array::from(thread))],
        )
        .unwrap();
        let batches: Vec<RecordBatch> =
            (0..all.num_rows()).step_by(7_000).map(|at| all.slice(at, 7_000.min(all.num_rows() - at))).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.parquet");
        let (rows, _) = write_table(&path, "calls", schema.clone(), &batches).unwrap();
        assert_eq!(rows, all.num_rows());
        let groups = |path: &Path| -> Vec<i64> {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
            reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect()
        };
        // The small thread shares the row group of the thread after it.
        assert_eq!(groups(&path), vec![20_000, 40_100, 30_000]);
        // A table not in rank order is written in row groups of the writer's own size.
        let other = dir.path().join("messages.parquet");
        write_table(&other, "messages", schema, &batches).unwrap();
        assert_eq!(groups(&other), vec![90_100]);
    }

    fn read_manifest(dir: &Path) -> Manifest {
        serde_json::from_str(&std::fs::read_to_string(dir.join(MANIFEST)).unwrap()).unwrap()
    }

    #[test]
    fn parts_are_checked_against_the_manifest_when_opened() {
        let trace = generated(4, 3);
        let dir = tempfile::tempdir().unwrap();
        write_in_parts(&trace, dir.path(), 100).unwrap();
        assert!(read(dir.path()).is_ok());
        let part = dir.path().join("events").join(part_name(1));
        let original = std::fs::read(&part).unwrap();
        // A damaged footer is reported as damage of that part, not as a Parquet error.
        let mut bytes = original.clone();
        let n = bytes.len();
        bytes[n - 20] ^= 0xFF;
        std::fs::write(&part, &bytes).unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("events/part-00001.parquet") && e.contains("damaged"), "{e}");
        std::fs::write(&part, &original).unwrap();
        // A part's row count edited in the manifest (and the table's with it).
        let manifest = dir.path().join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap();
        let mut m: Manifest = serde_json::from_str(&text).unwrap();
        let events = m.tables.get_mut("events").unwrap();
        let rows = events.parts[1].rows;
        events.parts[1].rows += 5;
        events.rows += 5;
        std::fs::write(&manifest, serde_json::to_string(&m).unwrap()).unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        let said = format!("part-00001.parquet: has {rows} rows but the manifest says {}", rows + 5);
        assert!(e.contains(&said), "{e}");
        // A part listed twice.
        let mut m: Manifest = serde_json::from_str(&text).unwrap();
        let events = m.tables.get_mut("events").unwrap();
        let twice = events.parts[0].clone();
        events.rows += twice.rows;
        events.parts.push(twice);
        std::fs::write(&manifest, serde_json::to_string(&m).unwrap()).unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("manifest.json") && e.contains("lists its part part-00000.parquet twice"), "{e}");
    }

    #[test]
    fn a_store_replaced_after_it_was_opened_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        write(&generated(4, 3), &store).unwrap();
        let opened = read(&store).unwrap();
        let stamp = opened.stored_file("events").unwrap().stamp.unwrap();
        assert!(stamp.holds());
        write(&generated(6, 2), &store).unwrap();
        assert!(!stamp.holds());
        let e = opened.table("events").unwrap_err().to_string();
        assert!(e.contains("the store was replaced while this query read it"), "{e}");
        assert_eq!(read(&store).unwrap().table("ranks").unwrap()[0].num_rows(), 6);
    }

    #[test]
    fn opening_a_store_reads_its_large_tables_when_first_used() {
        let trace = generated(4, 3);
        let dir = tempfile::tempdir().unwrap();
        write(&trace, dir.path()).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back.built_rows("ranks"), Some(4));
        for t in LATER {
            assert_eq!(back.built_rows(t), None, "{t} is read when first used");
        }
        let events = std::fs::read(dir.path().join("events.parquet")).unwrap();
        std::fs::remove_file(dir.path().join("events.parquet")).unwrap();
        assert!(!back.table("messages").unwrap().is_empty(), "one table is read on its own");
        assert!(back.table("events").unwrap_err().to_string().contains("events.parquet"));
        assert_eq!(back.row_count("events").unwrap(), trace.row_count("events").unwrap(), "from the manifest");
        std::fs::write(dir.path().join("events.parquet"), events).unwrap();
        let rows: usize = back.table("events").unwrap().iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, trace.row_count("events").unwrap());
        assert_eq!(back.built_rows("events"), Some(rows));
    }
}
