//! `dag_edges`' scratch file of what each message gives its edge beyond the two nodes: its id,
//! bytes, duration and latency, in the messages' order, read back once every node is known.
//! Rows go in frames of about `FRAME_BYTES` (its length and row count, then the rows): a row is
//! a byte saying which of bytes, duration and latency it has, the id less the row's position
//! and the bytes and duration in as few bytes as they need (`crate::varint`), the latency as
//! its eight bytes; about 13 bytes a message where a fixed layout takes 35.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use datafusion::error::{DataFusionError, Result};

use crate::varint;

/// Bytes a frame gathers before it is written.
const FRAME_BYTES: usize = 64 << 10;

/// What a message gives its edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct EdgeRow {
    pub id: i64,
    pub bytes: Option<i64>,
    pub duration: Option<i64>,
    pub latency: Option<f64>,
}

fn io_error(doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "dag_edges: {doing} the scratch file of its messages failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// Writes the rows in order.
pub(super) struct EdgeWriter {
    file: BufWriter<File>,
    frame: Vec<u8>,
    count: u32,
    row: i64,
}

impl EdgeWriter {
    pub fn new() -> Result<EdgeWriter> {
        let file = tempfile::tempfile().map_err(|e| io_error("creating", e))?;
        Ok(EdgeWriter { file: BufWriter::with_capacity(1 << 20, file), frame: Vec::new(), count: 0, row: 0 })
    }

    /// The next message's row.
    pub fn push(&mut self, r: &EdgeRow) -> Result<()> {
        let has =
            u8::from(r.bytes.is_some()) | u8::from(r.duration.is_some()) << 1 | u8::from(r.latency.is_some()) << 2;
        self.frame.push(has);
        varint::put_signed(&mut self.frame, r.id.wrapping_sub(self.row));
        for v in [r.bytes, r.duration].into_iter().flatten() {
            varint::put_signed(&mut self.frame, v);
        }
        if let Some(l) = r.latency {
            self.frame.extend_from_slice(&l.to_le_bytes());
        }
        self.count += 1;
        self.row += 1;
        if self.frame.len() >= FRAME_BYTES {
            self.write_frame()?;
        }
        Ok(())
    }

    fn write_frame(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let head = [(self.frame.len() as u32).to_le_bytes(), self.count.to_le_bytes()].concat();
        self.file.write_all(&head).map_err(|e| io_error("writing", e))?;
        self.file.write_all(&self.frame).map_err(|e| io_error("writing", e))?;
        self.frame.clear();
        self.count = 0;
        Ok(())
    }

    /// Every row is written: read them back from the first.
    pub fn into_reader(mut self) -> Result<EdgeReader> {
        self.write_frame()?;
        let mut file = self.file.into_inner().map_err(|e| io_error("writing", e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error("reading", e))?;
        Ok(EdgeReader { file: BufReader::with_capacity(1 << 20, file), frame: Vec::new(), at: 0, left: 0, row: 0 })
    }
}

/// Reads the rows back in order.
pub(super) struct EdgeReader {
    file: BufReader<File>,
    frame: Vec<u8>,
    at: usize,
    left: u32,
    row: i64,
}

impl EdgeReader {
    /// The next row (the file ends: an error, the caller knowing how many rows it wrote).
    pub fn next_row(&mut self) -> Result<EdgeRow> {
        if self.left == 0 {
            let mut head = [0u8; 8];
            self.file.read_exact(&mut head).map_err(|e| io_error("reading", e))?;
            let len = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize;
            self.left = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
            self.frame.resize(len, 0);
            self.file.read_exact(&mut self.frame).map_err(|e| io_error("reading", e))?;
            self.at = 0;
        }
        let row = self.decode().ok_or_else(|| {
            DataFusionError::Internal(format!(
                "dag_edges: row {} of the scratch file of its messages does not decode",
                self.row
            ))
        })?;
        self.left -= 1;
        self.row += 1;
        Ok(row)
    }

    fn decode(&mut self) -> Option<EdgeRow> {
        let (b, at) = (&self.frame, &mut self.at);
        let has = *b.get(*at)?;
        *at += 1;
        let id = varint::get_signed(b, at)?.wrapping_add(self.row);
        let bytes = if has & 1 != 0 { Some(varint::get_signed(b, at)?) } else { None };
        let duration = if has & 2 != 0 { Some(varint::get_signed(b, at)?) } else { None };
        let latency = if has & 4 != 0 {
            let word = b.get(*at..*at + 8)?;
            *at += 8;
            Some(f64::from_le_bytes(word.try_into().ok()?))
        } else {
            None
        };
        Some(EdgeRow { id, bytes, duration, latency })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_as_they_went_with_whatever_they_lack() {
        let rows: Vec<EdgeRow> = (0..40_000i64)
            .map(|k| EdgeRow {
                id: if k % 7 == 0 { i64::MIN + k } else { k },
                bytes: (k % 3 != 0).then_some(k * 1_000_003),
                duration: (k % 5 != 0).then_some(-k),
                latency: (k % 2 == 0).then_some(k as f64 / 3.0),
            })
            .collect();
        let mut w = EdgeWriter::new().unwrap();
        for r in &rows {
            w.push(r).unwrap();
        }
        let mut back = w.into_reader().unwrap();
        for r in &rows {
            assert_eq!(back.next_row().unwrap(), *r);
        }
        let e = back.next_row().unwrap_err().to_string();
        assert!(e.contains("dag_edges: reading the scratch file"), "{e}");
    }
}
