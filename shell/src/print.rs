//! Output of query results: an aligned table (at most `max_rows` rows, numbers right-aligned),
//! CSV, TSV, JSON (one array), NDJSON (one object per line), a Markdown table or a Parquet
//! file (one row group at a time through a buffer, written as it fills). Results are
//! written batch by batch as they stream in, so a large CSV export never sits in memory; the
//! table format keeps only the rows it shows and counts the rest, and fits them to the
//! terminal (`fit`).

use std::io::Write;
use std::str::FromStr;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::parquet::arrow::ArrowWriter;

use crate::error::{Result, ShellError};
use crate::fit::{self, Expanded, Width};

/// Output format of results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Tsv,
    Json,
    Ndjson,
    Markdown,
    Parquet,
}

impl FromStr for Format {
    type Err = ShellError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "tsv" => Ok(Format::Tsv),
            "json" => Ok(Format::Json),
            "ndjson" => Ok(Format::Ndjson),
            "markdown" | "md" => Ok(Format::Markdown),
            "parquet" => Ok(Format::Parquet),
            other => Err(ShellError::usage(format!(
                "unknown format '{other}': expected table, csv, tsv, json, ndjson, markdown or parquet"
            ))),
        }
    }
}

impl Format {
    /// The format a file's extension names (`.csv`, `.tsv`, `.json`, `.ndjson` or `.jsonl`,
    /// `.parquet`, `.md`), for `-o FILE` and `\o FILE` without --format; None for others.
    pub fn of_file(path: &std::path::Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "csv" => Format::Csv,
            "tsv" => Format::Tsv,
            "json" => Format::Json,
            "ndjson" | "jsonl" => Format::Ndjson,
            "parquet" => Format::Parquet,
            "md" => Format::Markdown,
            _ => return None,
        })
    }

    /// Whether the row-count footer belongs in the output itself (human formats) or on stderr.
    pub fn footer_in_output(self) -> bool {
        matches!(self, Format::Table | Format::Markdown)
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy)]
pub struct PrintOptions {
    pub format: Format,
    pub max_rows: usize,
    pub quiet: bool,
    pub timing: bool,
    /// How wide the table format may print.
    pub width: Width,
    /// Whether the table format prints each row as a block.
    pub expanded: Expanded,
}

fn cell_options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

/// Format cells of a column as text.
fn cells(array: &ArrayRef, out: &mut Vec<String>, limit: usize) -> Result<()> {
    let f = ArrayFormatter::try_new(array.as_ref(), &cell_options())?;
    for i in 0..array.len().min(limit) {
        out.push(f.value(i).to_string());
    }
    Ok(())
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric() || matches!(t, DataType::Dictionary(_, v) if v.is_numeric())
}

/// Collects a result and writes it in one format.
pub struct ResultWriter<'a> {
    out: &'a mut dyn Write,
    opts: PrintOptions,
    schema: SchemaRef,
    rows: usize,
    /// Table/markdown: the kept cells, per column.
    kept: Vec<Vec<String>>,
    kept_rows: usize,
    json_started: bool,
    /// Parquet: the writer, over a buffer emptied into `out` as row groups fill it.
    parquet: Option<ArrowWriter<Vec<u8>>>,
}

impl<'a> ResultWriter<'a> {
    pub fn new(out: &'a mut dyn Write, schema: SchemaRef, opts: PrintOptions) -> Result<Self> {
        let w = ResultWriter {
            out,
            opts,
            kept: vec![Vec::new(); schema.fields().len()],
            schema,
            rows: 0,
            kept_rows: 0,
            json_started: false,
            parquet: None,
        };
        let mut w = w;
        match opts.format {
            Format::Parquet => {
                let writer = ArrowWriter::try_new(Vec::new(), w.schema.clone(), None)
                    .map_err(|e| ShellError::Runtime(format!("cannot write Parquet: {e}")))?;
                w.parquet = Some(writer);
            }
            Format::Csv | Format::Tsv => {
                let sep = if opts.format == Format::Csv { "," } else { "\t" };
                let header: Vec<String> = w.schema.fields().iter().map(|f| quote(f.name(), opts.format)).collect();
                writeln!(w.out, "{}", header.join(sep))?;
            }
            Format::Json => write!(w.out, "[")?,
            _ => {}
        }
        Ok(w)
    }

    /// Move what the Parquet writer has put in its buffer to the output.
    fn drain_parquet(&mut self) -> Result<()> {
        if let Some(p) = &mut self.parquet {
            let buf = p.inner_mut();
            if !buf.is_empty() {
                self.out.write_all(buf)?;
                buf.clear();
            }
        }
        Ok(())
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let n = batch.num_rows();
        match self.opts.format {
            Format::Parquet => {
                if let Some(p) = &mut self.parquet {
                    p.write(batch).map_err(|e| ShellError::Runtime(format!("cannot write Parquet: {e}")))?;
                }
                self.drain_parquet()?;
            }
            Format::Table | Format::Markdown => {
                let room = if self.opts.format == Format::Table {
                    self.opts.max_rows.saturating_sub(self.kept_rows)
                } else {
                    n
                };
                if room > 0 {
                    for (c, col) in batch.columns().iter().enumerate() {
                        cells(col, &mut self.kept[c], room)?;
                    }
                    self.kept_rows += room.min(n);
                }
            }
            Format::Csv | Format::Tsv => {
                let sep = if self.opts.format == Format::Csv { "," } else { "\t" };
                let formatters: Vec<ArrayFormatter> = batch
                    .columns()
                    .iter()
                    .map(|a| ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default()))
                    .collect::<Result<_, _>>()?;
                let mut line = String::new();
                for i in 0..n {
                    line.clear();
                    for (c, f) in formatters.iter().enumerate() {
                        if c > 0 {
                            line.push_str(sep);
                        }
                        if batch.column(c).is_valid(i) {
                            line.push_str(&quote(&f.value(i).to_string(), self.opts.format));
                        }
                    }
                    writeln!(self.out, "{line}")?;
                }
            }
            Format::Json | Format::Ndjson => {
                let plain = plain_batch(batch)?;
                let mut buf = Vec::new();
                {
                    let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
                    w.write(&plain)?;
                    w.finish()?;
                }
                let text = String::from_utf8_lossy(&buf);
                for line in text.lines() {
                    if self.opts.format == Format::Json {
                        let sep = if self.json_started { ",\n" } else { "\n" };
                        write!(self.out, "{sep}{line}")?;
                        self.json_started = true;
                    } else {
                        writeln!(self.out, "{line}")?;
                    }
                }
            }
        }
        self.rows += n;
        Ok(())
    }

    /// Finish the output; returns the footer line for the caller to place, and whether rows
    /// were left out (--max-rows), which is said even when footers are not.
    pub fn finish(mut self, elapsed: Duration) -> Result<(String, bool)> {
        match self.opts.format {
            Format::Table => self.write_table()?,
            Format::Markdown => self.write_markdown()?,
            Format::Json => writeln!(self.out, "{}]", if self.json_started { "\n" } else { "" })?,
            Format::Parquet => {
                if let Some(p) = self.parquet.take() {
                    let rest = p.into_inner().map_err(|e| ShellError::Runtime(format!("cannot write Parquet: {e}")))?;
                    self.out.write_all(&rest)?;
                }
            }
            _ => {}
        }
        self.out.flush()?;
        let mut footer = format!("{} row{}", self.rows, if self.rows == 1 { "" } else { "s" });
        if self.opts.format == Format::Table && self.rows > self.kept_rows {
            footer.push_str(&format!(", {} not shown (--max-rows {})", self.rows - self.kept_rows, self.opts.max_rows));
        }
        let cut = self.opts.format == Format::Table && self.rows > self.kept_rows;
        footer.push_str(&format!(" ({})", human_duration(elapsed)));
        Ok((footer, cut))
    }

    /// Cells and headers wider than MAX_CELL_CHARS are cut for display (the table format
    /// only; csv, json and the others print every character). A table wider than the width
    /// limit wraps its text columns (`fit::wrap_widths`); one that cannot show every column
    /// even so is printed expanded (`\x auto`, the default), or with `\x off` narrowed with
    /// its last columns hidden and named.
    fn write_table(&mut self) -> Result<()> {
        let fields = self.schema.fields();
        if fields.is_empty() {
            return Ok(());
        }
        let names: Vec<std::borrow::Cow<str>> = fields.iter().map(|f| shown(f.name())).collect();
        let columns: Vec<Vec<std::borrow::Cow<str>>> = names
            .iter()
            .enumerate()
            .map(|(c, name)| std::iter::once(name.clone()).chain(self.kept[c].iter().map(|s| shown(s))).collect())
            .collect();
        let columns: Vec<Vec<&str>> = columns.iter().map(|col| col.iter().map(|s| s.as_ref()).collect()).collect();
        let numeric: Vec<bool> = fields.iter().map(|f| is_numeric(f.data_type())).collect();
        let limit = self.opts.width.columns();
        let wrapped = match limit {
            Some(l) => fit::wrap_widths(&columns, &numeric, l),
            None => Some(columns.iter().map(|col| col.iter().map(|s| s.chars().count()).max().unwrap_or(0)).collect()),
        };
        if self.opts.expanded == Expanded::On || (self.opts.expanded == Expanded::Auto && wrapped.is_none()) {
            let names: Vec<&str> = columns.iter().map(|col| col[0]).collect();
            let rows: Vec<Vec<&str>> =
                (1..=self.kept_rows).map(|r| columns.iter().map(|col| col[r]).collect()).collect();
            let text = fit::expanded(&names, &rows, limit);
            return write!(self.out, "{text}").map_err(|e| ShellError::file("the output", e));
        }
        let text = match wrapped {
            Some(widths) => wrapped_table(&columns, &numeric, &widths),
            None => self.cut_table(&names, limit),
        };
        write!(self.out, "{text}").map_err(|e| ShellError::file("the output", e))
    }

    /// The table with its widest columns cut with an ellipsis and, when that is not enough,
    /// its last columns hidden and named below it (`\x off` on a table that cannot wrap).
    fn cut_table(&self, names: &[std::borrow::Cow<str>], limit: Option<usize>) -> String {
        let fields = self.schema.fields();
        let natural: Vec<usize> = names
            .iter()
            .enumerate()
            .map(|(c, name)| {
                self.kept[c]
                    .iter()
                    .map(|s| s.chars().count().min(MAX_CELL_CHARS))
                    .chain([name.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let widths = match limit {
            Some(l) => fit::fit(&natural, l),
            None => natural,
        };
        let rule: String = widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+");
        let shown_names: Vec<&str> = names.iter().take(widths.len()).map(|n| n.as_ref()).collect();
        let header: Vec<String> = fit::cut_headers(&shown_names, &widths)
            .iter()
            .zip(&widths)
            .map(|(name, w)| format!(" {name:<w$} "))
            .collect();
        let mut text = String::new();
        text.push_str(header.join("|").trim_end());
        text.push('\n');
        text.push_str(&rule);
        text.push('\n');
        for r in 0..self.kept_rows {
            let row: Vec<String> = fields
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (f, w))| {
                    let v = fit::cut(&shown(&self.kept[c][r]), *w).into_owned();
                    if is_numeric(f.data_type()) { format!(" {v:>w$} ") } else { format!(" {v:<w$} ") }
                })
                .collect();
            text.push_str(row.join("|").trim_end());
            text.push('\n');
        }
        let hidden: Vec<&str> = fields.iter().skip(widths.len()).map(|f| f.name().as_str()).collect();
        if !hidden.is_empty() {
            let n = hidden.len();
            let line = format!(
                "{n} more column{} not shown (\\x on shows every column): {}",
                if n == 1 { "" } else { "s" },
                hidden.join(", ")
            );
            text.push_str(&fit::cut(&line, limit.unwrap_or(usize::MAX)));
            text.push('\n');
        }
        text
    }

    fn write_markdown(&mut self) -> Result<()> {
        let fields = self.schema.fields();
        let esc = |s: &str| s.replace('|', "\\|");
        let mut text = String::new();
        let names: Vec<String> = fields.iter().map(|f| esc(f.name())).collect();
        text.push_str(&format!("| {} |\n", names.join(" | ")));
        let align: Vec<&str> = fields.iter().map(|f| if is_numeric(f.data_type()) { "---:" } else { "---" }).collect();
        text.push_str(&format!("| {} |\n", align.join(" | ")));
        for r in 0..self.kept_rows {
            let row: Vec<String> = (0..fields.len()).map(|c| esc(&self.kept[c][r])).collect();
            text.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        write!(self.out, "{text}").map_err(|e| ShellError::file("the output", e))
    }
}

/// A table whose columns have `widths`: `columns` hold the header, then the cells; text
/// (and every header) wraps onto as many lines as it needs, numbers stand right-aligned on
/// a row's first line.
fn wrapped_table(columns: &[Vec<&str>], numeric: &[bool], widths: &[usize]) -> String {
    let mut text = String::new();
    let rows = columns.first().map_or(0, |c| c.len());
    for r in 0..rows {
        let right = |c: usize| r > 0 && numeric[c];
        let parts: Vec<Vec<&str>> = columns
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(c, (col, w))| if right(c) { vec![col[r]] } else { fit::wrap(col[r], *w) })
            .collect();
        let height = parts.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..height {
            let cells: Vec<String> = parts
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(c, (p, w))| {
                    let v = p.get(line).copied().unwrap_or("");
                    if right(c) { format!(" {v:>w$} ") } else { format!(" {v:<w$} ") }
                })
                .collect();
            text.push_str(cells.join("|").trim_end());
            text.push('\n');
        }
        if r == 0 {
            text.push_str(&widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"));
            text.push('\n');
        }
    }
    text
}

/// Dictionary columns cast to their values, so every writer handles them.
fn plain_batch(batch: &RecordBatch) -> Result<RecordBatch> {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        match f.data_type() {
            DataType::Dictionary(_, value) => {
                columns.push(cast(c, value)?);
                fields.push(Field::new(f.name(), value.as_ref().clone(), true));
            }
            _ => {
                columns.push(c.clone());
                fields.push(f.as_ref().clone());
            }
        }
    }
    Ok(RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns)?)
}

fn quote(s: &str, format: Format) -> String {
    let sep = if format == Format::Csv { ',' } else { '\t' };
    if s.contains(sep) || s.contains('"') || s.contains('\n') || s.contains('\r') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// "12 ms", "1.52 s", "830 us".
pub fn human_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1_000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{} ms", us / 1_000)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

/// The widest cell the table format shows; longer ones end in an ellipsis.
pub const MAX_CELL_CHARS: usize = 1_000;

/// A cell as the table shows it: cut to MAX_CELL_CHARS characters, the last one an ellipsis.
fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(MAX_CELL_CHARS) {
        None => std::borrow::Cow::Borrowed(s),
        Some(_) => {
            let cut = s.char_indices().nth(MAX_CELL_CHARS - 1).map_or(s.len(), |(i, _)| i);
            std::borrow::Cow::Owned(format!("{}…", &s[..cut]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let schema =
            Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true), Field::new("s", DataType::Utf8, true)]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(300)])),
                Arc::new(StringArray::from(vec![Some("a,b"), Some("x"), None])),
            ],
        )
        .unwrap()
    }

    /// `batch()` written in `format`: the bytes, the footer and whether rows were cut.
    fn write_out(format: Format, max_rows: usize) -> (Vec<u8>, String, bool) {
        let mut out = Vec::new();
        let b = batch();
        let opts = PrintOptions {
            format,
            max_rows,
            quiet: false,
            timing: false,
            width: Width::Unlimited,
            expanded: Expanded::Off,
        };
        let mut w = ResultWriter::new(&mut out, b.schema(), opts).unwrap();
        w.write(&b).unwrap();
        let (footer, cut) = w.finish(Duration::from_millis(3)).unwrap();
        (out, footer, cut)
    }

    fn render(format: Format, max_rows: usize) -> (String, String) {
        let (out, footer, _) = write_out(format, max_rows);
        (String::from_utf8(out).unwrap(), footer)
    }

    #[test]
    fn table_limits_rows_and_aligns_numbers() {
        let (text, footer) = render(Format::Table, 2);
        assert!(text.contains("    1 | a,b"), "{text}");
        assert!(text.contains(" NULL | x"), "{text}");
        assert!(!text.contains("300"));
        assert_eq!(footer, "3 rows, 1 not shown (--max-rows 2) (3 ms)");
    }

    #[test]
    fn narrow_tables_wrap_text_and_keep_numbers_on_the_first_line() {
        let columns = vec![vec!["rank", "12"], vec!["meaning", "sending rank; NULL when unmatched"]];
        let text = wrapped_table(&columns, &[true, false], &[4, 14]);
        assert_eq!(
            text,
            " rank | meaning\n------+----------------\n   12 | sending rank;\n      | NULL when\n      | unmatched\n"
        );
    }

    #[test]
    fn csv_quotes_and_leaves_nulls_empty() {
        let (text, _) = render(Format::Csv, 40);
        assert_eq!(text, "n,s\n1,\"a,b\"\n,x\n300,\n");
    }

    #[test]
    fn parquet_holds_every_row() {
        let (out, footer, cut) = write_out(Format::Parquet, 1);
        let b = batch();
        assert!(footer.starts_with("3 rows") && !cut, "{footer}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &out).unwrap();
        let reader = datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(file.path()).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let back: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
        assert_eq!(back.iter().map(RecordBatch::num_rows).sum::<usize>(), 3);
        assert_eq!(back[0].column(0).as_ref(), b.column(0).as_ref());
    }

    #[test]
    fn files_name_their_format() {
        let of = |p: &str| Format::of_file(std::path::Path::new(p));
        assert_eq!(of("out.csv"), Some(Format::Csv));
        assert_eq!(of("OUT.TSV"), Some(Format::Tsv));
        assert_eq!(of("a.ndjson"), Some(Format::Ndjson));
        assert_eq!(of("a.parquet"), Some(Format::Parquet));
        assert_eq!(of("a.txt"), None);
        assert_eq!(of("noext"), None);
    }

    #[test]
    fn json_and_markdown() {
        let (json, _) = render(Format::Json, 40);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 3);
        let (md, _) = render(Format::Markdown, 40);
        assert!(md.starts_with("| n | s |\n| ---: | --- |\n| 1 | a,b |"), "{md}");
    }
}
