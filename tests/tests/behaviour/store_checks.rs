//! A store's parts are checked by what a query reads of them: each column it projects or
//! filters on by that column's checksum, and the tail (page indexes, footer) always. Damage in
//! a column a query reads is an error naming the file and the column; a query that reads other
//! columns is answered; a part that the files' statistics rule out for the query's filter is
//! neither checked nor read; a store written before columns were summed is checked whole.

use std::path::{Path, PathBuf};

use commdb_catalog::OpenOptions;
use parquet::file::metadata::ParquetMetaDataReader;

/// The byte ranges of each column chunk of the Parquet file at `file`, and where its tail (the
/// bytes after the last chunk) begins and its footer (the last 8 bytes and the metadata) begins.
fn layout(file: &Path) -> (Vec<(String, u64, u64)>, u64, u64) {
    let f = std::fs::File::open(file).unwrap();
    let meta = ParquetMetaDataReader::new().parse_and_finish(&f).unwrap();
    let mut chunks = Vec::new();
    for g in meta.row_groups() {
        for c in g.columns() {
            let (start, n) = c.byte_range();
            chunks.push((c.column_path().string(), start, n));
        }
    }
    let tail = chunks.iter().map(|(_, s, n)| s + n).max().unwrap();
    let bytes = std::fs::read(file).unwrap();
    let n = bytes.len();
    let metadata_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as u64;
    (chunks, tail, n as u64 - 8 - metadata_len)
}

fn flip(file: &Path, at: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    bytes[at as usize] ^= 0x10;
    std::fs::write(file, &bytes).unwrap();
}

/// Flip a bit in the middle of the first chunk of `column` in the part at `file`.
pub fn damage_column(file: &Path, column: &str) {
    let (chunks, _, _) = layout(file);
    let (_, start, n) = chunks.iter().find(|(c, _, _)| c == column).unwrap();
    flip(file, start + n / 2);
}

/// A store of `generate:ranks=16,...` in parts of 500 rows, and a part of its messages.
fn store() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace =
        commdb_catalog::open("generate:ranks=16,ranks-per-node=4,iterations=40", &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 500).unwrap();
    let part = store.join("messages").join("part-00001.parquet");
    assert!(part.exists());
    (dir, store, part)
}

fn query(store: &Path, sql: &str) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).map_err(|e| e.to_string())?;
    let batches = runtime.block_on(session.collect(sql)).map_err(|e| e.to_string())?;
    Ok(arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string())
}

const SEND: &str = "SELECT sum(send_ts), count(*) FROM messages";
const DURATION: &str = "SELECT sum(duration) FROM messages";
const WINDOW: &str = "SELECT count(*) FROM messages WHERE duration > 0";

#[test]
fn the_manifest_sums_every_column_of_every_part() {
    let (_dir, store, _) = store();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap()).unwrap();
    for table in ["events", "calls", "messages"] {
        let parts = manifest["tables"][table]["parts"].as_array().unwrap();
        assert!(parts.len() > 2, "{table}");
        for p in parts {
            let sums = &p["column_crc32"];
            let columns = sums["columns"].as_object().unwrap();
            let schema = commdb_catalog::model::table_doc(table).unwrap().schema();
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(columns.len(), names.len(), "{table}: {p}");
            assert!(names.iter().all(|n| columns.contains_key(*n)), "{table}: {p}");
            assert!(sums["tail"].is_u64(), "{table}: {p}");
        }
    }
}

#[test]
fn damage_in_a_column_is_named_by_the_queries_that_read_it() {
    let (_dir, store, part) = store();
    let send = query(&store, SEND).unwrap();
    damage_column(&part, "duration");
    // Neither sum(send_ts) nor count(*) reads the durations.
    assert_eq!(query(&store, SEND).unwrap(), send);
    for sql in [DURATION, WINDOW] {
        let err = query(&store, sql).unwrap_err();
        assert!(
            err.contains("part-00001.parquet") && err.contains("column duration") && err.contains("damaged"),
            "{sql}: {err}"
        );
    }
}

#[test]
fn a_part_the_files_statistics_rule_out_is_neither_checked_nor_read() {
    let (_dir, store, part) = store();
    // The filter's column and a column the query sums, both damaged: no message carries a
    // petabyte, so every part's maximum of bytes rules it out before it is opened.
    damage_column(&part, "bytes");
    damage_column(&part, "duration");
    let none = "SELECT count(*) AS n, sum(duration) AS d FROM messages WHERE bytes > 1000000000000000";
    let answer = query(&store, none).unwrap();
    assert!(answer.contains("| 0 |"), "{answer}");
    // A filter that keeps the part checks what it reads of it.
    let err = query(&store, "SELECT sum(duration) FROM messages WHERE bytes >= 0").unwrap_err();
    assert!(err.contains("part-00001.parquet") && err.contains("damaged"), "{err}");
}

#[test]
fn damage_in_the_page_indexes_is_named_by_a_query_that_scans() {
    let (_dir, store, part) = store();
    let (_, tail, footer) = layout(&part);
    assert!(footer > tail, "the part has page indexes between its chunks and its footer");
    flip(&part, tail + (footer - tail) / 2);
    // Named by the check of the tail, or, where the scan's planning reads the page indexes
    // first and fails, by the check of the whole file that follows.
    let err = query(&store, SEND).unwrap_err();
    assert!(err.contains("part-00001.parquet") && err.contains("damaged"), "{err}");
}

#[test]
fn a_store_written_before_columns_were_summed_is_checked_whole() {
    let (_dir, store, part) = store();
    let path = store.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (_, t) in manifest["tables"].as_object_mut().unwrap() {
        for p in t.get_mut("parts").and_then(|p| p.as_array_mut()).into_iter().flatten() {
            p.as_object_mut().unwrap().remove("column_crc32");
        }
    }
    std::fs::write(&path, serde_json::to_string(&manifest).unwrap()).unwrap();
    let send = query(&store, SEND).unwrap();
    damage_column(&part, "duration");
    let err = query(&store, SEND).unwrap_err();
    assert!(err.contains("part-00001.parquet") && err.contains("the file is damaged: its checksum"), "{err}");
    // Its manifest, once damage is gone, reads as before.
    damage_column(&part, "duration");
    assert_eq!(query(&store, SEND).unwrap(), send);
}
