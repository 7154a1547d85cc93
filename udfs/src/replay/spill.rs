//! Rows of a few integers kept out of memory while an analysis reads its other inputs: the
//! replay folds the messages and the collectives before the calls they must be placed in have
//! been read, so it writes their columns to an anonymous scratch file (8 bytes a value, NULL as
//! `i64::MIN`) and reads them back in the order they came once the calls are known. The file
//! goes when the analysis ends, however it ends.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use datafusion::error::{DataFusionError, Result};

/// A NULL on disk.
pub(super) const NULL: i64 = i64::MIN;

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} its scratch file failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// Rows of `N` integers written so far.
pub(super) struct Spill<const N: usize> {
    what: &'static str,
    file: BufWriter<File>,
    rows: u64,
}

impl<const N: usize> std::fmt::Debug for Spill<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spill").field("rows", &self.rows).finish()
    }
}

impl<const N: usize> Spill<N> {
    pub fn new(what: &'static str) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(Spill { what, file: BufWriter::with_capacity(1 << 20, file), rows: 0 })
    }

    pub fn push(&mut self, row: [i64; N]) -> Result<()> {
        for v in row {
            self.file.write_all(&v.to_le_bytes()).map_err(|e| io_error(self.what, "writing", e))?;
        }
        self.rows += 1;
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Every row has been written: read them back from the first.
    pub fn into_rows(self) -> Result<Rows<N>> {
        let what = self.what;
        let mut file = self.file.into_inner().map_err(|e| io_error(what, "writing", e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error(what, "reading", e))?;
        Ok(Rows { what, file: BufReader::with_capacity(1 << 20, file), left: self.rows, bytes: Vec::new() })
    }
}

/// The rows of a spill, in the order they were written.
pub(super) struct Rows<const N: usize> {
    what: &'static str,
    file: BufReader<File>,
    left: u64,
    /// The bytes of the rows read last.
    bytes: Vec<u8>,
}

impl<const N: usize> Rows<N> {
    /// The next rows, at most `max`, in place of `out`'s (none: no more).
    pub fn next_rows(&mut self, out: &mut Vec<[i64; N]>, max: usize) -> Result<usize> {
        out.clear();
        let n = (self.left.min(max as u64)) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.bytes.resize(n * N * 8, 0);
        self.file.read_exact(&mut self.bytes).map_err(|e| io_error(self.what, "reading", e))?;
        out.extend(self.bytes.chunks_exact(N * 8).map(|row| {
            std::array::from_fn(|i| i64::from_le_bytes(row[i * 8..i * 8 + 8].try_into().expect("8 bytes")))
        }));
        self.left -= n as u64;
        Ok(n)
    }
}

/// A value read back: None for NULL.
pub(super) fn value(v: i64) -> Option<i64> {
    (v != NULL).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_in_order_with_their_nulls() {
        let mut s = Spill::<3>::new("test").unwrap();
        for k in 0..10_000i64 {
            s.push([k, if k % 7 == 0 { NULL } else { -k }, i64::MAX - k]).unwrap();
        }
        assert_eq!(s.rows(), 10_000);
        let mut rows = s.into_rows().unwrap();
        let (mut batch, mut k) = (Vec::new(), 0i64);
        // Batches of uneven sizes, the last one short.
        while rows.next_rows(&mut batch, 333).unwrap() > 0 {
            assert!(batch.len() == 333 || k + batch.len() as i64 == 10_000);
            for r in &batch {
                assert_eq!((r[0], value(r[1]), r[2]), (k, (k % 7 != 0).then_some(-k), i64::MAX - k));
                k += 1;
            }
        }
        assert_eq!(k, 10_000);
        assert_eq!(rows.next_rows(&mut batch, 333).unwrap(), 0);
        assert!(batch.is_empty());
    }
}
