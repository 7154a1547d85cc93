//! CSV traces. Two shapes are recognised from the header line:
//! - the PCLVis event shape (`pclvis`): one row per send or receive, columns rank, type,
//!   timestamp, source, destination, size, optional tag, comm and node;
//! - the event export shape (`export`): Timestamp (ns), Event Type, Name, Thread, Process,
//!   Attributes, as written by Python trace-analysis libraries from OTF2 traces.
//!
//! Placement (rank to node) comes from a `node` column or from a separate rank,node CSV
//! (`nodes` module); clock sync samples from a separate CSV (`sync` module); any other CSV can
//! be read as a plain lookup table (`table` module). Every bad row is an error naming the file, line, column and value.

pub mod export;
pub mod nodes;
pub mod pclvis;
pub mod pieces;
pub mod sync;
pub mod table;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::events::{EventParts, RawEvents};
use crate::progress::LoadProgress;
use crate::trace::RawTrace;

/// What reading a CSV trace takes: the unit of a timestamp column whose header names none,
/// a rank,node file placing the ranks, and where to report the bytes read.
#[derive(Debug, Clone, Default)]
pub struct CsvOptions {
    pub time_unit: Option<TimeUnit>,
    pub nodes: Option<PathBuf>,
    pub progress: Option<Arc<LoadProgress>>,
}

/// Time unit of CSV timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeUnit {
    Seconds,
    Milliseconds,
    Microseconds,
    #[default]
    Nanoseconds,
}

impl TimeUnit {
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Milliseconds => "ms",
            TimeUnit::Microseconds => "us",
            TimeUnit::Nanoseconds => "ns",
        }
    }

    pub fn nanoseconds(self) -> f64 {
        match self {
            TimeUnit::Seconds => 1e9,
            TimeUnit::Milliseconds => 1e6,
            TimeUnit::Microseconds => 1e3,
            TimeUnit::Nanoseconds => 1.0,
        }
    }
}

impl std::str::FromStr for TimeUnit {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "s" | "sec" | "seconds" => Ok(TimeUnit::Seconds),
            "ms" | "milliseconds" => Ok(TimeUnit::Milliseconds),
            "us" | "microseconds" => Ok(TimeUnit::Microseconds),
            "ns" | "nanoseconds" => Ok(TimeUnit::Nanoseconds),
            other => Err(Error::argument(format!("time unit must be one of s, ms, us, ns; got '{other}'"))),
        }
    }
}

/// The timestamp column of a CSV header and the unit its values are in: a column named
/// `timestamp` takes the unit given by `--time-unit` (ns when none is), one named with its unit
/// (`Timestamp (s)`, `timestamp [us]`, `time (ms)`) takes that unit. Two timestamp columns, a
/// unit that is not one of s, ms, us, ns, or a `--time-unit` that contradicts the header's unit
/// are errors naming the column.
pub(crate) fn timestamp_column(
    path: &Path,
    header: &::csv::StringRecord,
    given: Option<TimeUnit>,
) -> Result<Option<(usize, TimeUnit)>> {
    let mut found: Option<(usize, TimeUnit)> = None;
    for (i, raw) in header.iter().enumerate() {
        let name = raw.trim().trim_start_matches('\u{feff}').to_ascii_lowercase();
        let (word, unit) = match name.find(['(', '[']) {
            Some(open) => {
                let unit = name[open + 1..].trim_end_matches([')', ']']).trim().to_string();
                (name[..open].trim().to_string(), Some(unit))
            }
            None => (name.clone(), None),
        };
        if word != "timestamp" && !(word == "time" && unit.is_some()) {
            continue;
        }
        if let Some((first, _)) = found {
            return Err(Error::at_line(
                path,
                1,
                Some(raw),
                format!("two timestamp columns ('{}' and '{raw}'): keep one", header.get(first).unwrap_or("?").trim()),
            ));
        }
        let unit = match unit {
            None => given.unwrap_or_default(),
            Some(u) => {
                let u = if u == "µs" || u == "μs" { "us".to_string() } else { u };
                let unit: TimeUnit = u.parse().map_err(|_| {
                    Error::at_line(path, 1, Some(raw), format!("unknown time unit '{u}': expected s, ms, us or ns"))
                })?;
                if let Some(g) = given
                    && g != unit
                {
                    return Err(Error::at_line(
                        path,
                        1,
                        Some(raw),
                        format!(
                            "the header gives times in {} but --time-unit says {}: drop --time-unit or fix the header",
                            unit.name(),
                            g.name()
                        ),
                    ));
                }
                unit
            }
        };
        found = Some((i, unit));
    }
    Ok(found)
}

/// Removes the spaces and tabs that follow a field separator outside quotes, so that
/// `1, "{'a': 1, 'b': 2}", 3` (as some writers put it) reads as three fields with the quoted
/// one intact. Unquoted fields are trimmed anyway.
pub(crate) struct SpacesAfterCommas<R> {
    inner: R,
    in_quotes: bool,
    after_comma: bool,
}

impl<R> SpacesAfterCommas<R> {
    pub(crate) fn new(inner: R) -> Self {
        SpacesAfterCommas { inner, in_quotes: false, after_comma: false }
    }
}

impl<R: std::io::Read> std::io::Read for SpacesAfterCommas<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let mut kept = 0;
            for i in 0..n {
                let b = buf[i];
                if self.after_comma && (b == b' ' || b == b'\t') {
                    continue;
                }
                self.after_comma = false;
                if b == b'"' {
                    self.in_quotes = !self.in_quotes;
                } else if b == b',' && !self.in_quotes {
                    self.after_comma = true;
                }
                buf[kept] = b;
                kept += 1;
            }
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

/// One record of a CSV file being read: its fields, and errors that name the file, the line and
/// the column.
pub(crate) struct Record<'a> {
    pub path: &'a Path,
    pub line: u64,
    pub header: &'a ::csv::StringRecord,
    pub record: &'a ::csv::StringRecord,
}

impl Record<'_> {
    /// Field `i`, trimmed ("" when the record is short).
    pub fn field(&self, i: usize) -> &str {
        self.record.get(i).unwrap_or("").trim()
    }

    /// The header's name of column `i`.
    pub fn column(&self, i: usize) -> &str {
        self.header.get(i).unwrap_or("?").trim()
    }

    pub fn error(&self, i: usize, message: String) -> Error {
        Error::at_line(self.path, self.line, Some(self.column(i)), message)
    }

    /// Field `i` is not `what`.
    pub fn bad(&self, i: usize, what: &str) -> Error {
        self.error(i, format!("expected {what}, found '{}'", self.field(i)))
    }
}

/// The shapes of CSV trace commdb reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One row per send or receive (`pclvis`).
    Pclvis,
    /// One row per OTF2 event (`export`).
    Export,
}

impl Shape {
    /// The shape of the CSV trace at `path`, from its header.
    pub fn of(path: &Path) -> Result<Shape> {
        Error::regular_file(path)?;
        let header = first_line(path)?;
        let lower = header.to_ascii_lowercase();
        if lower.contains("event type") && lower.contains("timestamp") {
            Ok(Shape::Export)
        } else if lower.contains("rank") && lower.contains("type") && lower.contains("timestamp") {
            Ok(Shape::Pclvis)
        } else {
            Err(Error::at_line(
                path,
                1,
                None,
                format!(
                    "unrecognised CSV header '{header}': expected the PCLVis shape (rank,type,timestamp,source,destination,size[,node]) or the event export shape (Timestamp (ns),Event Type,Name,Thread,Process,Attributes)"
                ),
            ))
        }
    }

    /// Read the rows of the trace at `path`, handing each event to `sink` in file order;
    /// returns the trace's definitions (ranks placed by `options.nodes` too), without events.
    pub fn read_rows(
        self,
        path: &Path,
        options: &CsvOptions,
        sink: &mut dyn FnMut(crate::events::Event) -> Result<()>,
    ) -> Result<RawTrace> {
        let mut trace = match self {
            Shape::Pclvis => pclvis::read_rows(path, options, sink)?,
            Shape::Export => export::read_rows(path, options, sink)?,
        };
        if let Some(nodes_file) = &options.nodes {
            nodes::apply(nodes_file, &mut trace.ranks)?;
        }
        Ok(trace)
    }

    /// Events of whole ranks, in file order, put in the trace's order: grouped by (rank,
    /// thread), each stream of the PCLVis shape in time order (its rows may come in any).
    pub fn order(self, mut events: RawEvents) -> EventParts {
        events.group_by_stream();
        if self == Shape::Pclvis {
            pclvis::sort_streams_by_time(&mut events);
        }
        EventParts::single(events)
    }
}

/// Read a CSV trace, choosing the shape from its header.
pub fn read(path: &Path, options: &CsvOptions) -> Result<RawTrace> {
    let shape = Shape::of(path)?;
    let mut events = RawEvents::default();
    let mut trace = shape.read_rows(path, options, &mut |e| {
        events.push(e);
        Ok(())
    })?;
    trace.events = shape.order(events);
    Ok(trace)
}

/// A header whose column names (compared without case, as SQL compares them) repeat is
/// ambiguous: an error naming the file and the column.
pub fn check_unique_header<'a>(path: &Path, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, name) in names.into_iter().enumerate() {
        let key = name.trim().trim_start_matches('\u{feff}').to_ascii_lowercase();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(Error::at_line(
                path,
                1,
                Some(name),
                format!(
                    "column '{name}' appears twice in the header (columns {} and {}; names are compared without case)",
                    first + 1,
                    i + 1
                ),
            ));
        }
        seen.push((key, i));
    }
    Ok(())
}

fn first_line(path: &Path) -> Result<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut line = String::new();
    std::io::BufReader::new(file).read_line(&mut line).map_err(|e| Error::io(path, e))?;
    if line.trim().is_empty() {
        return Err(Error::at_line(path, 1, None, "empty file: expected a CSV header line"));
    }
    Ok(line.trim_start_matches('\u{feff}').trim_end().to_string())
}

/// A CSV reader over `path` that reports the bytes it reads.
pub(crate) fn open_reader(
    builder: &::csv::ReaderBuilder,
    path: &Path,
    options: &CsvOptions,
) -> Result<::csv::Reader<SpacesAfterCommas<crate::progress::ProgressReader<std::fs::File>>>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    if let Some(p) = &options.progress {
        p.set_total(file.metadata().map(|m| m.len()).unwrap_or(0));
    }
    Ok(builder
        .from_reader(SpacesAfterCommas::new(crate::progress::ProgressReader::new(file, options.progress.clone()))))
}

/// Read the next record; its line number, or `None` at the end of the file.
pub(crate) fn next_record<R: std::io::Read>(
    reader: &mut ::csv::Reader<R>,
    record: &mut ::csv::StringRecord,
    path: &Path,
) -> Result<Option<u64>> {
    match reader.read_record(record) {
        Ok(true) => Ok(Some(record.position().map_or(0, ::csv::Position::line))),
        Ok(false) => Ok(None),
        Err(e) => Err(nodes::csv_error(path, e)),
    }
}

/// Parse a timestamp given in `unit` into integer nanoseconds.
pub(crate) fn parse_time(text: &str, unit: TimeUnit) -> Option<i64> {
    let t = text.trim();
    if let Ok(v) = t.parse::<i64>() {
        return v.checked_mul(unit.nanoseconds() as i64);
    }
    let v: f64 = t.parse().ok()?;
    let ns = (v * unit.nanoseconds()).round();
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_after_commas_go_outside_quotes_only() {
        use std::io::Read;
        let text = "1, \"{'a': 1, 'b': 2}\",\t3\n\"x, y\", z\n";
        // Read a byte at a time too, so that a space split from its comma is still dropped.
        for chunk in [1, 4, 1024] {
            let mut out = Vec::new();
            let mut r = SpacesAfterCommas::new(std::io::Read::take(text.as_bytes(), u64::MAX));
            let mut buf = vec![0u8; chunk];
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            assert_eq!(String::from_utf8(out).unwrap(), "1,\"{'a': 1, 'b': 2}\",3\n\"x, y\",z\n", "chunk {chunk}");
        }
    }

    #[test]
    fn the_timestamp_column_says_its_unit() {
        let header = |h: &str| ::csv::StringRecord::from(h.split(',').collect::<Vec<_>>());
        let p = Path::new("t.csv");
        let unit = |h: &str, given| timestamp_column(p, &header(h), given).map(|c| c.map(|(i, u)| (i, u.name())));
        assert_eq!(unit("rank,timestamp", None).unwrap(), Some((1, "ns")));
        assert_eq!(unit("rank,timestamp", Some(TimeUnit::Microseconds)).unwrap(), Some((1, "us")));
        assert_eq!(unit("Timestamp (s),x", None).unwrap(), Some((0, "s")));
        assert_eq!(unit("x,time [µs]", None).unwrap(), Some((1, "us")));
        assert_eq!(unit("Timestamp (ms)", Some(TimeUnit::Milliseconds)).unwrap(), Some((0, "ms")));
        assert_eq!(unit("rank,time", None).unwrap(), None, "a bare 'time' is not taken for a timestamp");
        let e = unit("Timestamp (fortnights)", None).unwrap_err().to_string();
        assert!(e.contains("t.csv:1: column 'Timestamp (fortnights)'") && e.contains("unknown time unit"), "{e}");
        let e = unit("Timestamp (s)", Some(TimeUnit::Nanoseconds)).unwrap_err().to_string();
        assert!(e.contains("the header gives times in s but --time-unit says ns"), "{e}");
    }

    #[test]
    fn repeated_header_names_are_errors_naming_the_column() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("a.csv", "rank,type,timestamp,source,destination,size,rank\n0,send,1,0,1,8,0\n"),
            ("b.csv", "rank,type,timestamp,source,destination,size,TYPE\n0,send,1,0,1,8,x\n"),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            let e = read(&p, &CsvOptions::default()).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("appears twice"), "{e}");
        }
        let p = dir.path().join("t.csv");
        std::fs::write(&p, "node,Node\nn1,n2\n").unwrap();
        let e = table::read(&p).unwrap_err().to_string();
        assert!(e.contains("t.csv") && e.contains("'Node' appears twice"), "{e}");
    }

    #[test]
    fn times_in_units() {
        assert_eq!(parse_time("12", TimeUnit::Microseconds), Some(12_000));
        assert_eq!(parse_time("1.5", TimeUnit::Seconds), Some(1_500_000_000));
        assert_eq!(parse_time("30083.086937435106", TimeUnit::Nanoseconds), Some(30083));
        assert_eq!(parse_time("x", TimeUnit::Nanoseconds), None);
        assert_eq!(parse_time("1e300", TimeUnit::Nanoseconds), None);
    }
}
