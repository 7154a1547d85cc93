//! Reading OTF2 buffers: a file is a sequence of fixed-size chunks, each starting with a
//! header (0x03, an endianness byte — 0x42 little, 0x23 big — and two u64 event numbers) and
//! holding records up to an end-of-chunk byte (0x00); the file ends with 0x02. Integers are
//! "compressed": a size byte n (0 is the value 0, 0xFF is undefined) and n value bytes in the
//! buffer's byte order. A record is a type byte and, for most types, a length (a byte, or 0xFF
//! and a full u64). Every read is bounds-checked; errors name the file, the byte offset and
//! what was being read.

use std::path::Path;

use crate::error::{Error, Result};

pub const END_OF_CHUNK: u8 = 0;
pub const END_OF_FILE: u8 = 2;
pub const CHUNK_HEADER: u8 = 3;
pub const TIMESTAMP: u8 = 5;
pub const ATTRIBUTE_LIST: u8 = 6;
pub const UNDEFINED_U32: u32 = u32::MAX;
pub const UNDEFINED_U64: u64 = u64::MAX;

/// A cursor over one OTF2 buffer file.
#[derive(Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
    path: &'a Path,
    chunk_size: usize,
    chunk_start: usize,
    chunk_end: usize,
    pub pos: usize,
    pub big_endian: bool,
    /// Name of the record being read, for error messages.
    pub record: &'static str,
}

impl<'a> Cursor<'a> {
    /// Open a chunked buffer and read its first chunk header.
    pub fn new(data: &'a [u8], chunk_size: u64, path: &'a Path) -> Result<Self> {
        let chunk_size = usize::try_from(chunk_size).unwrap_or(usize::MAX).max(19);
        let mut c = Cursor {
            data,
            path,
            chunk_size,
            chunk_start: 0,
            chunk_end: 0,
            pos: 0,
            big_endian: false,
            record: "chunk header",
        };
        c.start_chunk(0)?;
        Ok(c)
    }

    /// A cursor over an unchunked buffer (the anchor file) starting at `pos`.
    pub fn plain(data: &'a [u8], path: &'a Path, pos: usize, big_endian: bool) -> Self {
        Cursor {
            data,
            path,
            chunk_size: data.len(),
            chunk_start: 0,
            chunk_end: data.len(),
            pos,
            big_endian,
            record: "anchor",
        }
    }

    pub fn path(&self) -> &Path {
        self.path
    }

    pub fn error(&self, message: impl Into<String>) -> Error {
        Error::at_offset(self.path, self.pos as u64, format!("{}: {}", self.record, message.into()))
    }

    fn start_chunk(&mut self, at: usize) -> Result<()> {
        self.pos = at;
        self.record = "chunk header";
        if at + 18 > self.data.len() {
            return Err(self.error("file ends inside a chunk header (truncated file?)"));
        }
        if self.data[at] != CHUNK_HEADER {
            return Err(self.error(format!("expected a chunk header (0x03), found 0x{:02x}", self.data[at])));
        }
        self.big_endian = match self.data[at + 1] {
            0x42 => false,
            0x23 => true,
            b => {
                self.pos = at + 1;
                return Err(self.error(format!("unknown endianness byte 0x{b:02x} (expected 0x42 or 0x23)")));
            }
        };
        self.chunk_start = at;
        self.chunk_end = at.saturating_add(self.chunk_size).min(self.data.len());
        self.pos = at + 18;
        Ok(())
    }

    /// The type byte of the next record, moving across chunk boundaries; `None` at the end of
    /// the file.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<u8>> {
        // The common case: a record type inside the chunk that is not end-of-chunk or end-of-file.
        if self.pos < self.chunk_end {
            let t = self.data[self.pos];
            if t != END_OF_CHUNK && t != END_OF_FILE {
                self.pos += 1;
                return Ok(Some(t));
            }
        }
        self.next_record_slow()
    }

    #[cold]
    #[inline(never)]
    fn next_record_slow(&mut self) -> Result<Option<u8>> {
        loop {
            if self.pos >= self.chunk_end {
                self.record = "record type";
                return Err(self.error("file ends without an end-of-file record (truncated file?)"));
            }
            let t = self.data[self.pos];
            self.pos += 1;
            match t {
                END_OF_CHUNK => {
                    let next = self.chunk_start + self.chunk_size;
                    if next >= self.data.len() {
                        self.record = "end of chunk";
                        return Err(self.error("file ends after an end-of-chunk record (truncated file?)"));
                    }
                    self.start_chunk(next)?;
                }
                END_OF_FILE => return Ok(None),
                _ => return Ok(Some(t)),
            }
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.chunk_end);
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.error(format!("needs {n} more bytes than the chunk holds (truncated or corrupt)"))),
        }
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    pub fn u64_full(&mut self) -> Result<u64> {
        let b: [u8; 8] = self.take(8)?.try_into().unwrap_or([0; 8]);
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    pub fn u32_full(&mut self) -> Result<u32> {
        let b: [u8; 4] = self.take(4)?.try_into().unwrap_or([0; 4]);
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    pub fn f64_full(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64_full()?))
    }

    /// A compressed integer of at most `max` bytes.
    #[inline]
    fn compressed(&mut self, max: u8) -> Result<u64> {
        // Away from the chunk's end, the size byte and the widest value are read as one word
        // and the value masked out of it.
        if self.pos + 9 <= self.chunk_end {
            let n = self.data[self.pos];
            if n <= max {
                let word: [u8; 8] = self.data[self.pos + 1..self.pos + 9].try_into().unwrap_or([0; 8]);
                self.pos += 1 + usize::from(n);
                return Ok(match n {
                    0 => 0,
                    8 if self.big_endian => u64::from_be_bytes(word),
                    8 => u64::from_le_bytes(word),
                    _ if self.big_endian => u64::from_be_bytes(word) >> (64 - 8 * u32::from(n)),
                    _ => u64::from_le_bytes(word) & ((1u64 << (8 * u32::from(n))) - 1),
                });
            }
        }
        self.compressed_slow(max)
    }

    #[cold]
    #[inline(never)]
    fn compressed_slow(&mut self, max: u8) -> Result<u64> {
        let n = self.u8()?;
        if n == 0 {
            return Ok(0);
        }
        if n == 0xFF {
            return Ok(UNDEFINED_U64);
        }
        if n > max {
            self.pos -= 1;
            return Err(self.error(format!("bad compressed integer: size byte {n} exceeds {max}")));
        }
        let bytes = self.take(usize::from(n))?;
        let mut v = 0u64;
        if self.big_endian {
            for &b in bytes {
                v = v << 8 | u64::from(b);
            }
        } else {
            for &b in bytes.iter().rev() {
                v = v << 8 | u64::from(b);
            }
        }
        Ok(v)
    }

    #[inline]
    pub fn u32c(&mut self) -> Result<u32> {
        let v = self.compressed(4)?;
        Ok(if v == UNDEFINED_U64 { UNDEFINED_U32 } else { v as u32 })
    }

    #[inline]
    pub fn u64c(&mut self) -> Result<u64> {
        self.compressed(8)
    }

    pub fn i64c(&mut self) -> Result<i64> {
        Ok(self.compressed(8)? as i64)
    }

    /// A NUL-terminated string.
    pub fn string(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..self.chunk_end];
        match rest.iter().position(|&b| b == 0) {
            Some(n) => {
                let s = String::from_utf8_lossy(&rest[..n]).into_owned();
                self.pos += n + 1;
                Ok(s)
            }
            None => Err(self.error("string without its terminating NUL byte")),
        }
    }

    /// Read a record length and return the position where the record ends.
    #[inline]
    pub fn record_end(&mut self) -> Result<usize> {
        let n = self.u8()?;
        let len = if n == 0xFF { self.u64_full()? } else { u64::from(n) };
        let end = usize::try_from(len).ok().and_then(|l| self.pos.checked_add(l)).filter(|e| *e <= self.chunk_end);
        end.ok_or_else(|| self.error(format!("record length {len} runs past the end of its chunk")))
    }

    /// Whether the record ending at `end` has more fields (older writers omit newer fields).
    #[inline]
    pub fn more(&self, end: usize) -> bool {
        self.pos < end
    }

    /// Continue after the record ending at `end` (skipping fields this reader does not use).
    #[inline]
    pub fn finish(&mut self, end: usize) -> Result<()> {
        if self.pos > end {
            return Err(self.error("fields run past the record's announced length"));
        }
        self.pos = end;
        Ok(())
    }

    /// Skip a record that has a length.
    pub fn skip_record(&mut self) -> Result<()> {
        let end = self.record_end()?;
        self.pos = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(endian: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![CHUNK_HEADER, endian];
        v.extend_from_slice(&[0; 16]);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn compressed_integers_in_both_byte_orders() {
        let p = Path::new("t.evt");
        let le = chunk(0x42, &[0x02, 0x34, 0x12, 0x00, 0xFF, 0x02]);
        let mut c = Cursor::new(&le, 1 << 20, p).unwrap();
        assert_eq!(c.u32c().unwrap(), 0x1234);
        assert_eq!(c.u32c().unwrap(), 0);
        assert_eq!(c.u32c().unwrap(), UNDEFINED_U32);
        assert_eq!(c.next_record().unwrap(), None);
        let be = chunk(0x23, &[0x02, 0x12, 0x34]);
        let mut c = Cursor::new(&be, 1 << 20, p).unwrap();
        assert_eq!(c.u64c().unwrap(), 0x1234);
    }

    #[test]
    fn compressed_integers_of_every_width_near_and_far_from_the_chunk_end() {
        // Each value of n bytes (0..=8) once in a run of 16 (read a word at a time) and once as
        // the chunk's last bytes (read byte by byte): both give the same value.
        let p = Path::new("t.evt");
        for (endian, big) in [(0x42u8, false), (0x23u8, true)] {
            for n in 0..=8u8 {
                let value: u64 = if n == 0 { 0 } else { 0x8877_6655_4433_2211u64 >> (64 - 8 * u32::from(n)) };
                let mut field = vec![n];
                let bytes = value.to_le_bytes();
                let mut body: Vec<u8> = bytes[..usize::from(n)].to_vec();
                if big {
                    body.reverse();
                }
                field.extend_from_slice(&body);
                let far: Vec<u8> = field.iter().copied().cycle().take(field.len() * 16).collect();
                let data = chunk(endian, &far);
                let mut c = Cursor::new(&data, 1 << 20, p).unwrap();
                for _ in 0..16 {
                    assert_eq!(c.u64c().unwrap(), value, "n {n}, big endian {big}, far from the end");
                }
                let data = chunk(endian, &field);
                let mut c = Cursor::new(&data, 1 << 20, p).unwrap();
                assert_eq!(c.u64c().unwrap(), value, "n {n}, big endian {big}, at the end");
                assert_eq!(c.pos, data.len());
            }
        }
        // A u32 field refuses a 5-byte value wherever it is.
        let data = chunk(0x42, &[5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0]);
        assert!(Cursor::new(&data, 1 << 20, p).unwrap().u32c().unwrap_err().to_string().contains("size byte 5"));
    }

    #[test]
    fn errors_name_offsets() {
        let p = Path::new("t.evt");
        let bad = chunk(0x42, &[0x09, 1, 2]);
        let mut c = Cursor::new(&bad, 1 << 20, p).unwrap();
        let e = c.u32c().unwrap_err().to_string();
        assert!(e.contains("t.evt at byte 18") && e.contains("size byte 9"), "{e}");
        let cut = chunk(0x42, &[0x0c]);
        let mut c = Cursor::new(&cut, 1 << 20, p).unwrap();
        assert_eq!(c.next_record().unwrap(), Some(0x0c));
        assert!(c.u32c().is_err());
        assert!(c.next_record().unwrap_err().to_string().contains("truncated"));
        assert!(Cursor::new(&[3, 0x99], 64, p).is_err());
    }
}
