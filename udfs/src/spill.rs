//! Rows of a few integers kept out of memory while an analysis reads its other inputs, read
//! back in the order they came: the replay folds the messages and the collectives before the
//! calls they must be placed in have been read, and `iteration_profile` keeps each rank's
//! iteration bounds until it knows which iterations are outliers. A row is a byte whose bits
//! mark its NULLs, then each other value as its difference from the same column's last value
//! ([`crate::varint`]): messages in send order take about 11 bytes, not 56. The file is
//! anonymous and goes when the analysis ends, however it ends.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

use datafusion::error::{DataFusionError, Result};

use crate::varint;

/// A NULL in a row.
pub(crate) const NULL: i64 = i64::MIN;

/// Bytes gathered before they are written, and read at a time.
pub(crate) const BUFFER: usize = 1 << 20;

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} its scratch file failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// The most bytes a row of `n` values takes.
const fn row_bytes(n: usize) -> usize {
    1 + n * varint::MAX_BYTES
}

/// Each row of `batch`'s columns 0..N as integers, NULL as [`NULL`].
pub(crate) fn each_row<const N: usize>(
    batch: &arrow::array::RecordBatch,
    mut each: impl FnMut([i64; N]) -> Result<()>,
) -> Result<()> {
    use arrow::array::Array;
    let one = std::slice::from_ref(batch);
    let columns: Vec<arrow::array::Int64Array> =
        (0..N).map(|i| commdb_analysis::columns::int64_column(one, i)).collect::<Result<_>>()?;
    for row in 0..batch.num_rows() {
        let mut values = [NULL; N];
        for (v, c) in values.iter_mut().zip(&columns) {
            if c.is_valid(row) {
                *v = c.value(row);
            }
        }
        each(values)?;
    }
    Ok(())
}

/// Rows of `N` integers (at most 8) written so far.
pub(crate) struct Spill<const N: usize> {
    what: &'static str,
    file: File,
    buffer: Vec<u8>,
    /// Each column's last value that was not NULL (0 at first).
    last: [i64; N],
    rows: u64,
}

impl<const N: usize> std::fmt::Debug for Spill<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spill").field("rows", &self.rows).finish()
    }
}

impl<const N: usize> Spill<N> {
    pub fn new(what: &'static str) -> Result<Self> {
        const { assert!(N <= 8, "a row's NULLs fit one byte") };
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(Spill { what, file, buffer: Vec::with_capacity(BUFFER), last: [0; N], rows: 0 })
    }

    pub fn push(&mut self, row: [i64; N]) -> Result<()> {
        put_row(&mut self.buffer, row, &mut self.last);
        self.rows += 1;
        if self.buffer.len() + row_bytes(N) > BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.file.write_all(&self.buffer).map_err(|e| io_error(self.what, "writing", e))?;
        self.buffer.clear();
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Every row has been written: read them back from the first.
    pub fn into_rows(mut self) -> Result<Rows<N>> {
        let what = self.what;
        self.flush()?;
        self.file.seek(SeekFrom::Start(0)).map_err(|e| io_error(what, "reading", e))?;
        Ok(Rows { what, file: self.file, left: self.rows, bytes: vec![0; BUFFER], at: 0, end: 0, last: [0; N] })
    }
}

/// The rows of a spill, in the order they were written.
pub(crate) struct Rows<const N: usize> {
    what: &'static str,
    file: File,
    /// Rows not read yet.
    left: u64,
    /// Bytes read from the file, those at at..end not decoded yet.
    bytes: Vec<u8>,
    at: usize,
    end: usize,
    last: [i64; N],
}

impl<const N: usize> Rows<N> {
    /// Rows not read yet.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// At least a whole row's bytes ahead, unless the file ends first.
    fn fill(&mut self) -> Result<()> {
        if self.end - self.at >= row_bytes(N) {
            return Ok(());
        }
        self.bytes.copy_within(self.at..self.end, 0);
        self.end -= self.at;
        self.at = 0;
        while self.end < self.bytes.len() {
            let n = self.file.read(&mut self.bytes[self.end..]).map_err(|e| io_error(self.what, "reading", e))?;
            if n == 0 {
                break;
            }
            self.end += n;
        }
        Ok(())
    }

    /// The next rows, at most `max`, in place of `out`'s (none: no more).
    pub fn next_rows(&mut self, out: &mut Vec<[i64; N]>, max: usize) -> Result<usize> {
        out.clear();
        let n = (self.left.min(max as u64)) as usize;
        for _ in 0..n {
            self.fill()?;
            let bytes = &self.bytes[..self.end];
            let ended = || DataFusionError::Internal(format!("{}: its scratch file ended inside a row", self.what));
            let mut at = self.at;
            let row = get_row(bytes, &mut at, &mut self.last).ok_or_else(ended)?;
            self.at = at;
            out.push(row);
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Append `row` to `out` as a spill writes it: a byte whose bits mark its NULLs, then each
/// other value as its difference from `last`'s (the same column's last value not NULL, 0 at
/// first), which it updates.
pub(crate) fn put_row<const N: usize>(out: &mut Vec<u8>, row: [i64; N], last: &mut [i64; N]) {
    const { assert!(N <= 8, "a row's NULLs fit one byte") };
    let mask = row.iter().enumerate().fold(0u8, |m, (i, v)| if *v == NULL { m | 1 << i } else { m });
    out.push(mask);
    for (v, last) in row.into_iter().zip(last.iter_mut()).filter(|(v, _)| *v != NULL) {
        varint::put_signed(out, v.wrapping_sub(*last));
        *last = v;
    }
}

/// The row at `bytes[*at..]` written by [`put_row`] with the same `last`, moving `at` past it
/// (None: the bytes end inside it).
pub(crate) fn get_row<const N: usize>(bytes: &[u8], at: &mut usize, last: &mut [i64; N]) -> Option<[i64; N]> {
    let mask = *bytes.get(*at)?;
    *at += 1;
    let mut row = [NULL; N];
    for (i, (v, last)) in row.iter_mut().zip(last.iter_mut()).enumerate() {
        if mask & (1 << i) == 0 {
            *last = last.wrapping_add(varint::get_signed(bytes, at)?);
            *v = *last;
        }
    }
    Some(row)
}

/// A value read back: None for NULL.
pub(crate) fn value(v: i64) -> Option<i64> {
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

    #[test]
    fn rows_of_many_buffers_and_far_apart_values_come_back() {
        let row = |k: i64| [k * 1_000_003, if k % 5 == 0 { NULL } else { i64::MAX - k * k }, -k, k % 3 - 1];
        let mut s = Spill::<4>::new("test").unwrap();
        for k in 0..300_000 {
            s.push(row(k)).unwrap();
        }
        let mut rows = s.into_rows().unwrap();
        let (mut batch, mut k) = (Vec::new(), 0i64);
        while rows.next_rows(&mut batch, 65_536).unwrap() > 0 {
            for r in &batch {
                assert_eq!(*r, row(k));
                k += 1;
            }
        }
        assert_eq!(k, 300_000);
    }
}
