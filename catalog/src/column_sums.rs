//! Checksums of a store's part by column, so that a query checks the bytes it reads and no
//! others. A part's manifest entry has the CRC-32 of the whole file (what a full read checks)
//! and, since stores written with this module, the CRC-32 of each column's chunks (the byte
//! ranges the Parquet footer gives them, in row-group order) and of the part's tail (every byte
//! after the last column chunk: page indexes and the footer itself, which every scan reads). A
//! scan then checks the columns it projects or filters on and the tail: `count(*)` of 1 B
//! events checks a few hundred MB of footers and page indexes rather than the 13 GB of the
//! `events` files, and `delay_costs`, which reads four of `events`' fourteen columns, checks
//! those four. Parquet's own page checksums would do the same page by page, but its Rust
//! writer does not write them; the column is the unit a scan reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use parquet::file::metadata::ParquetMetaDataReader;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The checksums of one part by column (see the module's notes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnSums {
    /// CRC-32 of each column's chunks, in row-group order, by the column's name.
    pub columns: BTreeMap<String, u32>,
    /// CRC-32 of the bytes after the last column chunk to the end of the file.
    pub tail: u32,
}

/// What of a part a scan checks: one column's chunks, or the tail.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Piece {
    Column(String),
    Tail,
}

/// Each column's chunks (first byte, length) in a part, in row-group order.
type ChunkRanges = BTreeMap<String, Vec<(u64, u64)>>;

/// Where each column's chunks and the tail lie in the part at `path` (from its footer): the
/// chunks, the first byte after the last of them, and the file's length.
fn layout(path: &Path, file: &File) -> Result<(ChunkRanges, u64, u64)> {
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(file)
        .map_err(|e| Error::in_file(path, format!("its Parquet footer cannot be read: {e}")))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut ranges = ChunkRanges::new();
    let mut last = 4u64;
    for group in meta.row_groups() {
        for chunk in group.columns() {
            let (start, n) = chunk.byte_range();
            if start.checked_add(n).is_none_or(|end| end > len) {
                return Err(Error::in_file(
                    path,
                    format!(
                        "its footer places a chunk of column {} beyond the file's {len} bytes",
                        chunk.column_path()
                    ),
                ));
            }
            last = last.max(start + n);
            ranges.entry(chunk.column_path().string()).or_default().push((start, n));
        }
    }
    Ok((ranges, last, len))
}

/// The CRC-32 of the byte ranges `ranges` of `file`, in order, read through one buffer.
fn crc_of(path: &Path, file: &File, ranges: &[(u64, u64)]) -> Result<u32> {
    const BUFFER: u64 = 1 << 20;
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0u8; BUFFER as usize];
    for &(start, n) in ranges {
        let mut at = 0;
        while at < n {
            let take = (n - at).min(BUFFER) as usize;
            file.read_exact_at(&mut buffer[..take], start + at).map_err(|e| Error::io(path, e))?;
            hasher.update(&buffer[..take]);
            at += take as u64;
        }
    }
    Ok(hasher.finalize())
}

/// The checksums of the part at `path` by column, as written into the manifest.
pub fn column_sums(path: &Path) -> Result<ColumnSums> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let (ranges, last, len) = layout(path, &file)?;
    let columns = ranges.iter().map(|(name, r)| Ok((name.clone(), crc_of(path, &file, r)?))).collect::<Result<_>>()?;
    Ok(ColumnSums { columns, tail: crc_of(path, &file, &[(last, len - last)])? })
}

/// Check `piece` of the part at `path` against the manifest's `sums`: an error naming the file
/// and the column when they differ. A column the part does not hold (added to the table after
/// the store was written: read as nulls) has nothing to check.
pub fn check_piece(path: &Path, sums: &ColumnSums, piece: &Piece) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let (ranges, last, len) = layout(path, &file)?;
    let (what, found, expected) = match piece {
        Piece::Tail => {
            ("its footer and page indexes".to_string(), crc_of(path, &file, &[(last, len - last)])?, sums.tail)
        }
        Piece::Column(name) => {
            let (Some(r), Some(&expected)) = (ranges.get(name), sums.columns.get(name)) else {
                if ranges.contains_key(name) != sums.columns.contains_key(name) {
                    return Err(Error::in_file(
                        path,
                        format!("the file is damaged: its columns are not those the manifest lists (column {name})"),
                    ));
                }
                return Ok(());
            };
            (format!("column {name}"), crc_of(path, &file, r)?, expected)
        }
    };
    if found != expected {
        return Err(Error::in_file(
            path,
            format!("the file is damaged: the checksum of {what} is {found:08x}, the manifest's {expected:08x}"),
        ));
    }
    Ok(())
}

/// A store file's checksums as a scan finds them: the whole file's, and by column for a part
/// written since columns were summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSums {
    pub file: Option<u32>,
    pub columns: Option<std::sync::Arc<ColumnSums>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;

    fn flip(path: &Path, at: u64) {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[at as usize] ^= 1;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn each_piece_is_checked_by_its_own_sum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let a = Int64Array::from_iter_values(0..5000);
        let b = StringArray::from_iter_values((0..5000).map(|i| format!("v{}", i % 7)));
        let batch = RecordBatch::try_from_iter([("a", Arc::new(a) as _), ("b", Arc::new(b) as _)]).unwrap();
        let props =
            parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(2000)).build();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let sums = column_sums(&path).unwrap();
        assert_eq!(sums.columns.keys().collect::<Vec<_>>(), ["a", "b"]);
        let (a, b, tail) = (Piece::Column("a".into()), Piece::Column("b".into()), Piece::Tail);
        for p in [&a, &b, &tail, &Piece::Column("not stored".into())] {
            check_piece(&path, &sums, p).unwrap();
        }
        // A bit of column a's last chunk: only a's check fails.
        let file = File::open(&path).unwrap();
        let (ranges, last, len) = layout(&path, &file).unwrap();
        let (start, n) = *ranges["a"].last().unwrap();
        flip(&path, start + n / 2);
        let err = check_piece(&path, &sums, &a).unwrap_err().to_string();
        assert!(err.contains("part.parquet") && err.contains("column a") && err.contains("damaged"), "{err}");
        check_piece(&path, &sums, &b).unwrap();
        check_piece(&path, &sums, &tail).unwrap();
        flip(&path, start + n / 2);
        // A bit between the last chunk and the footer's metadata (the page indexes).
        let meta_len =
            u32::from_le_bytes(std::fs::read(&path).unwrap()[len as usize - 8..len as usize - 4].try_into().unwrap());
        let footer = len - 8 - u64::from(meta_len);
        assert!(footer > last);
        flip(&path, last + (footer - last) / 2);
        let err = check_piece(&path, &sums, &tail).unwrap_err().to_string();
        assert!(err.contains("footer and page indexes"), "{err}");
        check_piece(&path, &sums, &a).unwrap();
        // A manifest that lists another set of columns than the file holds.
        flip(&path, last + (footer - last) / 2);
        let mut other = sums.clone();
        other.columns.remove("b");
        let err = check_piece(&path, &other, &b).unwrap_err().to_string();
        assert!(err.contains("columns are not those the manifest lists"), "{err}");
    }
}
