//! A read-only reader of SQLite database files, enough to scan the tables of an export: the
//! file header (page size, reserved bytes, text encoding), the schema table on page 1, each
//! table's columns from its CREATE TABLE statement (an INTEGER PRIMARY KEY column is the row id,
//! which the record leaves NULL), and a table's rows in row-id order by walking its table
//! b-tree (interior pages, leaf pages, and overflow pages for a payload too large for its page).
//! The layout is the one SQLite's own documentation gives ("Database File Format", sqlite.org
//! /fileformat2.html): big-endian integers, variable-length integers of one to nine bytes, and
//! records made of a header of serial types followed by the values (text that is not UTF-8,
//! which SQLite does not refuse, is read as a blob). Index b-trees, WITHOUT ROWID
//! tables and free pages are not read; a table of another kind is an error that names it, and
//! every offset is checked, so a damaged file is an error naming the byte, never a panic.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One value of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The value as an integer (a real that is a whole number included); None otherwise.
    pub fn int(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::Real(v) if v.fract() == 0.0 && v.abs() < 9.2e18 => Some(v as i64),
            _ => None,
        }
    }

    /// The value as text; None for anything else.
    pub fn text(&self) -> Option<&'a str> {
        match *self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// A table of the database: its name, root page and columns.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    root: u32,
    pub columns: Vec<String>,
    /// The column that is the row id (an INTEGER PRIMARY KEY), stored as NULL in the record.
    rowid_column: Option<usize>,
    without_rowid: bool,
}

impl Table {
    /// The position of column `name` (case-insensitive, as SQL reads names).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.eq_ignore_ascii_case(name))
    }
}

/// An SQLite database file, read whole.
pub struct Database {
    path: PathBuf,
    bytes: Vec<u8>,
    page_size: usize,
    usable: usize,
    pub tables: Vec<Table>,
}

/// The first 16 bytes of every SQLite 3 database.
pub const MAGIC: &[u8; 16] = b"SQLite format 3\0";

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.path)
            .field("page_size", &self.page_size)
            .field("tables", &self.tables)
            .finish()
    }
}

/// Whether the file at `path` starts as an SQLite 3 database does.
pub fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    path.is_file() && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && &head == MAGIC
}

impl Database {
    /// Open the database at `path`: its header and schema.
    pub fn open(path: &Path) -> Result<Database> {
        Error::regular_file(path)?;
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        if bytes.len() < 100 || &bytes[..16] != MAGIC {
            return Err(Error::in_file(path, "not an SQLite 3 database: expected it to begin with 'SQLite format 3'"));
        }
        let page_size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
            1 => 65536,
            n if n >= 512 && n.is_power_of_two() => usize::from(n),
            n => {
                return Err(Error::at_offset(
                    path,
                    16,
                    format!("page size {n} is not a power of two from 512 to 65536"),
                ));
            }
        };
        let reserved = usize::from(bytes[20]);
        let encoding = u32::from_be_bytes([bytes[56], bytes[57], bytes[58], bytes[59]]);
        if encoding > 1 {
            return Err(Error::at_offset(
                path,
                56,
                format!("text encoding {encoding} is UTF-16: only UTF-8 databases are read (nsys writes UTF-8)"),
            ));
        }
        let mut db =
            Database { path: path.to_path_buf(), bytes, page_size, usable: page_size - reserved, tables: Vec::new() };
        if db.usable < 480 {
            return Err(Error::at_offset(path, 20, format!("{reserved} reserved bytes leave too little of a page")));
        }
        db.tables = db.schema()?;
        Ok(db)
    }

    /// The table named `name` (case-insensitive).
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name.eq_ignore_ascii_case(name))
    }

    /// The tables of the schema table (page 1).
    fn schema(&self) -> Result<Vec<Table>> {
        let master = Table {
            name: "sqlite_schema".into(),
            root: 1,
            columns: ["type", "name", "tbl_name", "rootpage", "sql"].map(String::from).to_vec(),
            rowid_column: None,
            without_rowid: false,
        };
        let mut tables = Vec::new();
        let mut bad = None;
        self.scan(&master, |row| {
            if row.get(0).text() != Some("table") {
                return Ok(());
            }
            let name = row.get(1).text().unwrap_or_default().to_string();
            let root = row.get(3).int().unwrap_or(0);
            let sql = row.get(4).text().unwrap_or_default();
            match (u32::try_from(root), columns_of(sql)) {
                (Ok(root), Some((columns, rowid_column, without_rowid))) if root > 0 => {
                    tables.push(Table { name, root, columns, rowid_column, without_rowid })
                }
                _ => {
                    bad.get_or_insert(format!(
                        "table '{name}' has no root page or a CREATE TABLE that was not understood"
                    ));
                }
            }
            Ok(())
        })?;
        match bad {
            Some(message) => Err(Error::in_file(&self.path, message)),
            None => Ok(tables),
        }
    }

    /// Rows of `table` in the table: its leaf pages' cell counts, no row decoded.
    pub fn count(&self, table: &Table) -> Result<u64> {
        let mut n = 0;
        self.leaves(table, |_, _, cells| {
            n += cells as u64;
            Ok(())
        })?;
        Ok(n)
    }

    /// Call `f` with each row of `table` in row-id order (a column the row was written without,
    /// as after ALTER TABLE ADD COLUMN, reads as NULL). A row's values are decoded when asked
    /// for, from a list of where each lies that is kept from row to row.
    pub fn scan(&self, table: &Table, mut f: impl FnMut(&Row<'_>) -> Result<()>) -> Result<()> {
        let mut payload = Vec::new();
        let mut places = Vec::with_capacity(table.columns.len());
        self.leaves(table, |start, pointers, cells| {
            for i in 0..cells {
                let cell = start + self.u16_at(pointers + 2 * i)?;
                let (size, n) = self.varint(cell)?;
                let (rowid, m) = self.varint(cell + n)?;
                let body = self.payload(cell + n + m, size, &mut payload)?;
                fields(body, &mut places).map_err(|what| self.at(cell, format!("table '{}': {what}", table.name)))?;
                f(&Row { body, places: &places, rowid: rowid as i64, rowid_column: table.rowid_column })?;
            }
            Ok(())
        })
    }

    /// Walk `table`'s b-tree from its root, left to right, calling `f` with each leaf page's
    /// start, the byte where its cell pointers begin and its number of cells.
    fn leaves(&self, table: &Table, mut f: impl FnMut(usize, usize, usize) -> Result<()>) -> Result<()> {
        if table.without_rowid {
            return Err(Error::in_file(
                &self.path,
                format!("table '{}' is a WITHOUT ROWID table, which is not read", table.name),
            ));
        }
        let pages = self.bytes.len() / self.page_size;
        let mut stack = vec![table.root];
        let mut visited = 0usize;
        while let Some(page) = stack.pop() {
            visited += 1;
            if visited > pages {
                return Err(Error::in_file(
                    &self.path,
                    format!("table '{}': its b-tree pages form a cycle", table.name),
                ));
            }
            let (start, header) = self.page(page)?;
            let kind = self.bytes[header];
            let cells = self.u16_at(header + 3)?;
            match kind {
                0x05 => {
                    // Children left to right: pushed in reverse so the leftmost is read first.
                    stack.push(self.u32_at(header + 8)?);
                    for i in (0..cells).rev() {
                        let cell = start + self.u16_at(header + 12 + 2 * i)?;
                        stack.push(self.u32_at(cell)?);
                    }
                }
                0x0d => f(start, header + 8, cells)?,
                other => {
                    return Err(self.at(
                        header,
                        format!(
                            "table '{}': page {page} is of b-tree type {other:#04x}, expected a table page",
                            table.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The byte where page `page` starts and where its b-tree header is (after the file header on
    /// page 1).
    fn page(&self, page: u32) -> Result<(usize, usize)> {
        let start = (page as usize).checked_sub(1).map(|p| p * self.page_size);
        match start {
            Some(start) if page >= 1 && start + self.page_size <= self.bytes.len() => {
                Ok((start, if page == 1 { start + 100 } else { start }))
            }
            _ => Err(Error::in_file(&self.path, format!("page {page} is beyond the end of the file"))),
        }
    }

    /// The payload of `size` bytes whose local part starts at `at`, with its overflow pages
    /// appended when it spills (the local part's length as SQLite computes it for a table leaf).
    fn payload<'a>(&'a self, at: usize, size: u64, buffer: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let size = usize::try_from(size).map_err(|_| self.at(at, "payload size out of range"))?;
        let u = self.usable;
        let x = u - 35;
        if size <= x {
            return self.slice(at, size);
        }
        let m = (u - 12) * 32 / 255 - 23;
        let k = m + (size - m) % (u - 4);
        let local = if k <= x { k } else { m };
        buffer.clear();
        buffer.extend_from_slice(self.slice(at, local)?);
        let mut next = self.u32_at(at + local)?;
        let mut hops = 0usize;
        while buffer.len() < size {
            hops += 1;
            if next == 0 || hops > self.bytes.len() / self.page_size {
                return Err(self.at(at, format!("a payload of {size} bytes ends after {} bytes", buffer.len())));
            }
            let (start, _) = self.page(next)?;
            let take = (size - buffer.len()).min(u - 4);
            buffer.extend_from_slice(self.slice(start + 4, take)?);
            next = self.u32_at(start)?;
        }
        Ok(buffer)
    }

    fn slice(&self, at: usize, len: usize) -> Result<&[u8]> {
        self.bytes.get(at..at + len).ok_or_else(|| self.at(at, format!("{len} bytes run past the end of the file")))
    }

    fn u16_at(&self, at: usize) -> Result<usize> {
        let b = self.slice(at, 2)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn u32_at(&self, at: usize) -> Result<u32> {
        let b = self.slice(at, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn varint(&self, at: usize) -> Result<(u64, usize)> {
        varint(self.bytes.get(at..).unwrap_or_default())
            .ok_or_else(|| self.at(at, "a variable-length integer runs past the end of the file"))
    }

    fn at(&self, at: usize, message: impl Into<String>) -> Error {
        Error::at_offset(&self.path, at as u64, message)
    }
}

/// A variable-length integer at the start of `b` and its length: up to eight bytes of seven
/// bits each (high bit set: more follow), then a ninth of eight bits.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..9 {
        let byte = *b.get(i)?;
        if i == 8 {
            return Some(((v << 8) | u64::from(byte), 9));
        }
        v = (v << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// A row of a table: its record's body and where each value lies in it.
#[derive(Debug)]
pub struct Row<'a> {
    body: &'a [u8],
    places: &'a [(u64, usize)],
    rowid: i64,
    rowid_column: Option<usize>,
}

impl<'a> Row<'a> {
    /// The value of column `i` (NULL beyond the record's values).
    pub fn get(&self, i: usize) -> Value<'a> {
        if self.rowid_column == Some(i) {
            return Value::Int(self.rowid);
        }
        match self.places.get(i) {
            Some(&(serial, at)) => value(self.body, serial, at),
            None => Value::Null,
        }
    }
}

/// The length in the body of a value of serial type `serial`; None for a reserved type.
fn width(serial: u64) -> Option<usize> {
    Some(match serial {
        0 | 8 | 9 => 0,
        1..=4 => serial as usize,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return None,
        s => ((s - 12) / 2) as usize,
    })
}

/// Where each value of a record lies: the record's header (its length, then a serial type per
/// value) read into `(serial type, offset in the body)`, every value checked to lie in the body.
fn fields(body: &[u8], out: &mut Vec<(u64, usize)>) -> std::result::Result<(), String> {
    out.clear();
    let (header_len, n) = varint(body).ok_or("a record header is cut short")?;
    let header_len = header_len as usize;
    if header_len > body.len() {
        return Err(format!("a record header of {header_len} bytes is longer than its record of {}", body.len()));
    }
    let (mut h, mut at) = (n, header_len);
    while h < header_len {
        let (serial, k) = varint(&body[h..header_len]).ok_or("a serial type is cut short")?;
        h += k;
        let len = width(serial).ok_or_else(|| format!("serial type {serial} is reserved"))?;
        if at + len > body.len() {
            return Err("a value runs past its record".into());
        }
        out.push((serial, at));
        at += len;
    }
    Ok(())
}

/// The value of serial type `serial` at `at` in `body` (checked by `fields` to lie in it).
fn value(body: &[u8], serial: u64, at: usize) -> Value<'_> {
    let int = |len: usize| -> i64 {
        let b = &body[at..at + len];
        let mut v = if b[0] & 0x80 != 0 { -1i64 } else { 0 };
        for &byte in b {
            v = (v << 8) | i64::from(byte);
        }
        v
    };
    match serial {
        0 | 10 | 11 => Value::Null,
        1..=4 => Value::Int(int(serial as usize)),
        5 => Value::Int(int(6)),
        6 => Value::Int(int(8)),
        7 => Value::Real(f64::from_bits(int(8) as u64)),
        8 => Value::Int(0),
        9 => Value::Int(1),
        s => {
            let bytes = &body[at..at + ((s - 12) / 2) as usize];
            // SQLite does not check that text is UTF-8 (nsys keeps binary settings in a TEXT
            // column): text that is not is read as the bytes it is.
            match std::str::from_utf8(bytes) {
                Ok(text) if s % 2 == 1 => Value::Text(text),
                _ => Value::Blob(bytes),
            }
        }
    }
}

/// The columns of a CREATE TABLE statement, the one that is the row id (INTEGER PRIMARY KEY),
/// and whether it is WITHOUT ROWID; None when it is not a CREATE TABLE with a column list.
fn columns_of(sql: &str) -> Option<(Vec<String>, Option<usize>, bool)> {
    let sql = without_comments(sql);
    let open = sql.find('(')?;
    let parts = top_level(&sql[open + 1..])?;
    let (items, rest) = parts;
    let mut columns = Vec::new();
    let mut rowid = None;
    for item in items {
        let item = item.trim();
        let (name, definition) = first_token(item)?;
        let keyword = name.to_ascii_uppercase();
        if !name.starts_with(['"', '`', '['])
            && ["CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"].contains(&keyword.as_str())
        {
            continue;
        }
        let upper = definition.to_ascii_uppercase();
        let words: Vec<&str> = upper.split_whitespace().collect();
        if words.first() == Some(&"INTEGER")
            && words.windows(2).any(|w| w == ["PRIMARY", "KEY"])
            && !words.contains(&"DESC")
        {
            rowid = Some(columns.len());
        }
        columns.push(unquote(name));
    }
    let without_rowid =
        rest.to_ascii_uppercase().split_whitespace().collect::<Vec<_>>().windows(2).any(|w| w == ["WITHOUT", "ROWID"]);
    (!columns.is_empty()).then_some((columns, if without_rowid { None } else { rowid }, without_rowid))
}

/// `sql` with its `--` and `/* */` comments blanked (outside quotes).
fn without_comments(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '-' && chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            None if c == '/' && chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            None => {
                if matches!(c, '\'' | '"' | '`') {
                    quote = Some(c);
                } else if c == '[' {
                    quote = Some(']');
                }
                out.push(c);
            }
        }
    }
    out
}

/// The comma-separated items up to the parenthesis that closes the list `s` begins inside, and
/// what follows that parenthesis.
fn top_level(s: &str) -> Option<(Vec<&str>, &str)> {
    let (mut depth, mut quote, mut from) = (0usize, None::<char>, 0usize);
    let mut items = Vec::new();
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '[' => quote = Some(']'),
            '(' => depth += 1,
            ')' if depth == 0 => {
                items.push(&s[from..i]);
                return Some((items, &s[i + 1..]));
            }
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// The first token of a column definition (a name, quoted or not) and the rest.
fn first_token(item: &str) -> Option<(&str, &str)> {
    let close = match item.chars().next()? {
        '"' => '"',
        '`' => '`',
        '[' => ']',
        _ => {
            let end = item.find(char::is_whitespace).unwrap_or(item.len());
            return Some((&item[..end], &item[end..]));
        }
    };
    let end = item[1..].find(close)? + 2;
    Some((&item[..end], &item[end..]))
}

fn unquote(name: &str) -> String {
    let n = name.len();
    if n >= 2 && (name.starts_with(['"', '`', '['])) { name[1..n - 1].to_string() } else { name.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_of_one_to_nine_bytes() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
    }

    #[test]
    fn records_decode_every_serial_type() {
        // header: length 7, then NULL, int8, int16, zero, one, text of 2 bytes (serial 17)
        let body = [7u8, 0, 1, 2, 8, 9, 17, 0xfe, 0x01, 0x00, b'h', b'i'];
        let mut places = Vec::new();
        fields(&body, &mut places).unwrap();
        let row = Row { body: &body, places: &places, rowid: 5, rowid_column: None };
        let values: Vec<Value<'_>> = (0..7).map(|i| row.get(i)).collect();
        let expected = [Value::Null, Value::Int(-2), Value::Int(256), Value::Int(0), Value::Int(1), Value::Text("hi")];
        assert_eq!(values[..6], expected);
        assert_eq!(values[6], Value::Null, "beyond the record's values");
        assert!(fields(&[3, 6, 1], &mut places).unwrap_err().contains("past its record"));
        assert!(fields(&[2, 10], &mut places).unwrap_err().contains("reserved"));
    }

    #[test]
    fn columns_from_create_table_with_comments_and_keys() {
        let sql = "CREATE TABLE StringIds (\n  -- Consolidation, of values.\n  id INTEGER NOT NULL PRIMARY KEY, -- ID (reference)\n  value TEXT NOT NULL\n)";
        assert_eq!(columns_of(sql), Some((vec!["id".into(), "value".into()], Some(0), false)));
        let sql = "CREATE TABLE t (\"a b\" INT, [c] TEXT DEFAULT 'x,y', PRIMARY KEY (\"a b\", c)) WITHOUT ROWID";
        assert_eq!(columns_of(sql), Some((vec!["a b".into(), "c".into()], None, true)));
        assert_eq!(columns_of("CREATE TABLE t AS SELECT 1"), None);
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("commdb-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.sqlite");
        std::fs::write(&path, vec![b'x'; 200]).unwrap();
        let e = Database::open(&path).err().unwrap().to_string();
        assert!(e.contains("x.sqlite") && e.contains("not an SQLite 3 database"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }
}
