//! commdb's own trace store: a directory with one Parquet file per table of the model and a
//! `manifest.json` naming them. Written by `commdb convert`, read back losslessly (same
//! schemas, same rows) and much faster than re-reading and re-matching the source trace.
//! Tables are read in parallel, one rayon task per file.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model;
use crate::trace::{Trace, TraceMeta, Warnings};

pub const MANIFEST: &str = "manifest.json";
const STORE_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    commdb_store_version: u32,
    name: String,
    source_path: String,
    source_format: String,
    tables: BTreeMap<String, TableEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TableEntry {
    file: String,
    rows: usize,
}

/// Whether `dir` is a commdb store.
pub fn is_store(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

/// Write `trace` into `dir` (created if missing).
pub fn write(trace: &Trace, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let entries: Vec<(String, TableEntry)> = model::TABLES
        .par_iter()
        .map(|t| {
            let file = format!("{}.parquet", t.name);
            let path = dir.join(&file);
            let rows = write_table(&path, t.schema(), trace.table(t.name))?;
            Ok((t.name.to_string(), TableEntry { file, rows }))
        })
        .collect::<Result<_>>()?;
    let manifest = Manifest {
        commdb_store_version: STORE_VERSION,
        name: trace.meta.name.clone(),
        source_path: trace.meta.path.clone(),
        source_format: trace.meta.format.clone(),
        tables: entries.into_iter().collect(),
    };
    let path = dir.join(MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| Error::in_file(&path, e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))
}

fn write_table(path: &Path, schema: arrow::datatypes::SchemaRef, batches: &[RecordBatch]) -> Result<usize> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    let engine = |e: parquet::errors::ParquetError| Error::in_file(path, e.to_string());
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(engine)?;
    let mut rows = 0;
    for b in batches {
        writer.write(b).map_err(engine)?;
        rows += b.num_rows();
    }
    writer.close().map_err(engine)?;
    Ok(rows)
}

/// Read a store written by `write`.
pub fn read(dir: &Path) -> Result<Trace> {
    read_with_progress(dir, None)
}

/// Read a store, counting tables read in `progress`.
pub fn read_with_progress(dir: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<Trace> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| Error::at_line(&path, e.line() as u64, None, format!("not a commdb manifest: {e}")))?;
    if manifest.commdb_store_version != STORE_VERSION {
        return Err(Error::in_file(
            &path,
            format!("store version {} is not supported (expected {STORE_VERSION})", manifest.commdb_store_version),
        ));
    }
    if let Some(p) = progress {
        p.set_total(model::TABLES.len() as u64);
    }
    let tables: Vec<(&'static str, Vec<RecordBatch>)> = model::TABLES
        .par_iter()
        .map(|t| {
            if let Some(p) = progress {
                p.add(1);
            }
            let entry = manifest
                .tables
                .get(t.name)
                .ok_or_else(|| Error::in_file(&path, format!("manifest lists no file for table '{}'", t.name)))?;
            let batches = read_table(&dir.join(&entry.file), t)?;
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            if rows != entry.rows {
                return Err(Error::in_file(
                    &dir.join(&entry.file),
                    format!("has {rows} rows but the manifest says {}", entry.rows),
                ));
            }
            Ok((t.name, batches))
        })
        .collect::<Result<_>>()?;
    let tables: BTreeMap<&'static str, Vec<RecordBatch>> = tables.into_iter().collect();
    let meta = meta_from_info(tables.get("trace_info").map_or(&[][..], Vec::as_slice), &manifest, dir);
    let warnings = warnings_from_table(tables.get("warnings").map_or(&[][..], Vec::as_slice));
    Ok(Trace::from_tables(meta, tables, warnings))
}

fn read_table(path: &Path, doc: &model::TableDoc) -> Result<Vec<RecordBatch>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let engine = |e: parquet::errors::ParquetError| Error::in_file(path, e.to_string());
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(engine)?
        .with_batch_size(1 << 16)
        .build()
        .map_err(engine)?;
    let expected = doc.schema();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::in_file(path, e.to_string()))?;
        if batch.schema().fields() != expected.fields() {
            return Err(Error::in_file(
                path,
                format!("columns do not match the '{}' table of this commdb version", doc.name),
            ));
        }
        out.push(batch.with_schema(expected.clone())?);
    }
    Ok(out)
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
            let a = arrow::compute::concat_batches(&t.schema(), trace.table(t.name)).unwrap();
            let b = arrow::compute::concat_batches(&t.schema(), back.table(t.name)).unwrap();
            assert_eq!(a, b, "table {}", t.name);
        }
        assert_eq!(back.meta.timer_resolution_hz, Some(1_000_000_000));
    }

    #[test]
    fn damaged_store_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST), "{ not json").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("manifest.json") && e.contains("not a commdb manifest"), "{e}");
        let trace = generate(&GeneratorConfig { ranks: 2, iterations: 1, ..GeneratorConfig::default() })
            .unwrap()
            .trace
            .build()
            .unwrap();
        write(&trace, dir.path()).unwrap();
        std::fs::write(dir.path().join("messages.parquet"), b"garbage").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("messages.parquet"), "{e}");
    }
}
