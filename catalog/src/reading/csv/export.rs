//! The event export shape: `Timestamp (ns),Event Type,Name,Thread,Process,Attributes`, one row
//! per OTF2 event as Python trace-analysis libraries export it. Enter/Leave rows become calls;
//! Instant rows named after OTF2 event records (MpiSend, MpiRecv, MpiIsend, MpiIrecv,
//! MpiIrecvRequest, MpiIsendComplete, MpiCollectiveBegin/End, ProgramBegin/End, ...) become
//! the matching event kinds; their Attributes column is a Python dict literal
//! (`{'receiver': 1, 'communicator': 'Comm 1', 'msg_tag': 10, 'msg_length': 16384}`).
//! Instant rows of other names are kept as kind `other` and counted in a warning.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use crate::error::{Error, Result};
use crate::events::{Event, EventKind, NONE_I32, NONE_I64, collective_op_code};
use crate::reading::csv::CsvOptions;
use crate::reading::csv::nodes::csv_error;
use crate::reading::csv::{Record, next_record, open_reader, parse_time};
use crate::trace::{CommInfo, LocationInfo, RankInfo, RawTrace, RegionInfo, TraceMeta, Warnings};

/// The columns every row needs besides the timestamp; Thread (default 0) and Attributes
/// (default none) are optional.
const REQUIRED: [&str; 3] = ["event type", "name", "process"];
const EXPECTED: &str = "Timestamp (ns),Event Type,Name,Thread,Process,Attributes";

/// A scalar value of the attribute dictionary.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Text(String),
    /// A nested dict or list, None, True or False: kept as its source text.
    Other(String),
}

impl Value {
    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Text(t) => t.rsplit(' ').next().and_then(|n| n.parse().ok()),
            _ => None,
        }
    }
}

/// Parse a Python dict literal into its top-level (key, value) pairs.
pub fn parse_attributes(text: &str) -> std::result::Result<Vec<(String, Value)>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Vec::new());
    }
    let b = t.as_bytes();
    if b[0] != b'{' || b[b.len() - 1] != b'}' {
        return Err(format!("expected a dict literal {{...}}, found '{t}'"));
    }
    let mut out = Vec::new();
    let mut i = 1;
    let end = b.len() - 1;
    let skip_ws = |i: &mut usize| {
        while *i < end && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= end {
            break;
        }
        let key = match parse_value(t, &mut i, end)? {
            Value::Text(k) => k,
            other => return Err(format!("expected a quoted key at character {i}, found {other:?}")),
        };
        skip_ws(&mut i);
        if i >= end || b[i] != b':' {
            return Err(format!("expected ':' after key '{key}'"));
        }
        i += 1;
        skip_ws(&mut i);
        let value = parse_value(t, &mut i, end)?;
        out.push((key, value));
        skip_ws(&mut i);
        if i < end && b[i] == b',' {
            i += 1;
        } else if i < end {
            return Err(format!("expected ',' or '}}' at character {i}"));
        }
    }
    Ok(out)
}

fn parse_value(t: &str, i: &mut usize, end: usize) -> std::result::Result<Value, String> {
    let b = t.as_bytes();
    let start = *i;
    match b.get(*i) {
        Some(&q @ (b'\'' | b'"')) => {
            let mut s = String::new();
            *i += 1;
            while *i < end && b[*i] != q {
                if b[*i] == b'\\' && *i + 1 < end {
                    *i += 1;
                }
                let ch = t[*i..].chars().next().unwrap_or(' ');
                s.push(ch);
                *i += ch.len_utf8();
            }
            if *i >= end {
                return Err(format!("unterminated string starting at character {start}"));
            }
            *i += 1;
            Ok(Value::Text(s))
        }
        Some(b'{' | b'[' | b'(') => {
            let mut depth = 0usize;
            let mut quote: Option<u8> = None;
            while *i < end {
                let c = b[*i];
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None => match c {
                        b'\'' | b'"' => quote = Some(c),
                        b'{' | b'[' | b'(' => depth += 1,
                        b'}' | b']' | b')' => {
                            depth -= 1;
                            if depth == 0 {
                                *i += 1;
                                return Ok(Value::Other(t[start..*i].to_string()));
                            }
                        }
                        _ => {}
                    },
                }
                *i += 1;
            }
            Err(format!("unbalanced brackets starting at character {start}"))
        }
        Some(_) => {
            while *i < end && b[*i] != b',' {
                *i += 1;
            }
            let word = t[start..*i].trim();
            if let Ok(v) = word.parse::<i64>() {
                Ok(Value::Int(v))
            } else if let Ok(v) = word.parse::<f64>() {
                Ok(Value::Float(v))
            } else {
                Ok(Value::Other(word.to_string()))
            }
        }
        None => Err("expected a value".to_string()),
    }
}

fn instant_kind(name: &str) -> EventKind {
    match name {
        "MpiSend" => EventKind::Send,
        "MpiIsend" => EventKind::Isend,
        "MpiIsendComplete" => EventKind::IsendComplete,
        "MpiIrecvRequest" => EventKind::IrecvRequest,
        "MpiRecv" => EventKind::Recv,
        "MpiIrecv" => EventKind::Irecv,
        "MpiRequestTest" => EventKind::RequestTest,
        "MpiRequestCancelled" => EventKind::RequestCancelled,
        "MpiCollectiveBegin" => EventKind::CollBegin,
        "MpiCollectiveEnd" => EventKind::CollEnd,
        "ProgramBegin" => EventKind::ProgramBegin,
        "ProgramEnd" => EventKind::ProgramEnd,
        "BufferFlush" => EventKind::BufferFlush,
        _ => EventKind::Other,
    }
}

/// Read an event-export CSV trace's rows, handing each event to `sink` in file order;
/// returns the definitions.
pub fn read_rows(path: &Path, options: &CsvOptions, sink: &mut dyn FnMut(Event) -> Result<()>) -> Result<RawTrace> {
    let mut reader = open_reader(&csv::ReaderBuilder::new(), path, options)?;
    let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    let c = Columns::find(path, &header, options)?;
    let mut regions = Regions::default();
    let mut streams: BTreeSet<(i32, i32)> = BTreeSet::new();
    let mut comm_names: BTreeMap<i32, String> = BTreeMap::new();
    let mut warnings = Warnings::default();
    let mut record = csv::StringRecord::new();
    while let Some(line) = next_record(&mut reader, &mut record, path)? {
        let at = Record { path, line, header: &header, record: &record };
        let ts = parse_time(at.field(c.ts), c.unit).ok_or_else(|| at.bad(c.ts, "a time"))?;
        let thread: i32 = match c.thread {
            Some(i) => at.field(i).parse().map_err(|_| at.bad(i, "a thread number"))?,
            None => 0,
        };
        let rank: i32 = at
            .field(c.process)
            .parse()
            .ok()
            .filter(|r: &i32| *r >= 0)
            .ok_or_else(|| at.bad(c.process, "a rank (0 or more)"))?;
        let attrs = match c.attrs {
            Some(i) => parse_attributes(at.field(i))
                .map_err(|m| Error::at_line(path, line, Some(header.get(i).unwrap_or("Attributes")), m))?,
            None => Vec::new(),
        };
        let name = at.field(c.name);
        streams.insert((rank, thread));
        let mut e = Event::new(rank, thread, ts, EventKind::Other);
        match at.field(c.kind) {
            kind @ ("Enter" | "Leave") => {
                e.kind = if kind == "Enter" { EventKind::Enter } else { EventKind::Leave };
                e.region = regions.index(name, &attrs);
            }
            "Instant" => instant(&mut e, name, &attrs, &at, &c, &mut comm_names, &mut warnings)?,
            other => {
                return Err(Error::at_line(
                    path,
                    line,
                    Some(header.get(c.kind).unwrap_or("Event Type")),
                    format!("expected Enter, Leave or Instant, found '{other}'"),
                ));
            }
        }
        sink(e)?;
    }
    let (ranks, locations, communicators) = definitions(&streams, comm_names);
    Ok(RawTrace {
        meta: TraceMeta { format: "csv-events".into(), ..TraceMeta::default() },
        ranks,
        locations,
        regions: regions.list,
        communicators,
        warnings,
        ..RawTrace::default()
    })
}

/// Where the export shape's columns are, and the unit of its timestamps.
struct Columns {
    ts: usize,
    unit: crate::reading::csv::TimeUnit,
    kind: usize,
    name: usize,
    process: usize,
    thread: Option<usize>,
    attrs: Option<usize>,
}

impl Columns {
    fn find(path: &Path, header: &csv::StringRecord, options: &CsvOptions) -> Result<Columns> {
        crate::reading::csv::check_unique_header(path, header.iter())?;
        let names: Vec<String> =
            header.iter().map(|h| h.trim().trim_start_matches('\u{feff}').to_ascii_lowercase()).collect();
        let missing = |want: &str| {
            Error::at_line(
                path,
                1,
                None,
                format!("missing column '{want}'; expected {EXPECTED} (Thread and Attributes may be left out)"),
            )
        };
        let (ts, unit) = crate::reading::csv::timestamp_column(path, header, options.time_unit)?
            .ok_or_else(|| missing("timestamp (ns)"))?;
        let mut idx = [0usize; 3];
        for (k, want) in REQUIRED.iter().enumerate() {
            idx[k] = names.iter().position(|n| n == want).ok_or_else(|| missing(want))?;
        }
        let [kind, name, process] = idx;
        let thread = names.iter().position(|n| n == "thread");
        let attrs = names.iter().position(|n| n == "attributes");
        Ok(Columns { ts, unit, kind, name, process, thread, attrs })
    }
}

/// The regions named by Enter and Leave records, numbered in order of first appearance (or
/// by their `region` attribute).
#[derive(Default)]
struct Regions {
    list: Vec<RegionInfo>,
    index: HashMap<String, i32>,
}

impl Regions {
    fn index(&mut self, name: &str, attrs: &[(String, Value)]) -> i32 {
        let next = self.list.len() as i32;
        let list = &mut self.list;
        *self.index.entry(name.to_string()).or_insert_with(|| {
            let region_id =
                attrs.iter().find(|(k, _)| k == "region").and_then(|(_, v)| v.int()).unwrap_or(i64::from(next));
            list.push(RegionInfo {
                region_id,
                name: name.to_string(),
                paradigm: if name.starts_with("MPI_") { "mpi" } else { "user" }.into(),
                role: None,
                file: None,
                line: None,
            });
            next
        })
    }
}

/// An Instant record: its kind from the name, peer, communicator, tag, sizes, request and
/// collective operation from the attributes.
fn instant(
    e: &mut Event,
    name: &str,
    attrs: &[(String, Value)],
    at: &Record<'_>,
    c: &Columns,
    comm_names: &mut BTreeMap<i32, String>,
    warnings: &mut Warnings,
) -> Result<()> {
    let attr = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    let attr_i64 = |k: &str| attr(k).and_then(Value::int).unwrap_or(NONE_I64);
    let attr_i32 = |k: &str| attr(k).and_then(Value::int).and_then(|v| i32::try_from(v).ok()).unwrap_or(NONE_I32);
    e.kind = instant_kind(name);
    if e.kind == EventKind::Other {
        warnings.add("unknown_instant_event", || {
            format!("{}:{}: instant event '{name}' is kept with kind 'other'", at.path.display(), at.line)
        });
    }
    e.peer = match e.kind {
        EventKind::Send | EventKind::Isend => attr_i32("receiver"),
        EventKind::Recv | EventKind::Irecv => attr_i32("sender"),
        EventKind::CollEnd => Some(attr_i32("root")).filter(|r| *r >= 0).unwrap_or(NONE_I32),
        _ => NONE_I32,
    };
    e.comm = attr_i32("communicator");
    if let Some(Value::Text(name)) = attr("communicator") {
        comm_names.entry(e.comm).or_insert_with(|| name.clone());
    }
    e.tag = attr_i32("msg_tag");
    e.bytes = if e.kind == EventKind::CollEnd { attr_i64("size_sent") } else { attr_i64("msg_length") };
    e.bytes_recv = attr_i64("size_received");
    e.request = attr_i64("request_id");
    if e.kind == EventKind::CollEnd {
        let op = match attr("collective_op") {
            Some(Value::Text(t)) => t.rsplit('.').next().unwrap_or(t).to_string(),
            _ => "other".to_string(),
        };
        e.op = collective_op_code(&op);
    }
    let needs_peer = matches!(e.kind, EventKind::Send | EventKind::Isend | EventKind::Recv | EventKind::Irecv);
    if needs_peer && (e.peer == NONE_I32 || e.comm == NONE_I32 || e.tag == NONE_I32) {
        return Err(Error::at_line(
            at.path,
            at.line,
            Some(c.attrs.and_then(|i| at.header.get(i)).unwrap_or("Attributes")),
            format!(
                "{name} needs {}, communicator and msg_tag attributes{}",
                if matches!(e.kind, EventKind::Send | EventKind::Isend) { "receiver" } else { "sender" },
                if c.attrs.is_none() { ", and the file has no Attributes column" } else { "" }
            ),
        ));
    }
    Ok(())
}

/// Ranks, locations (one per rank and thread seen) and communicators (every rank a member:
/// the export does not say more).
fn definitions(
    streams: &BTreeSet<(i32, i32)>,
    comm_names: BTreeMap<i32, String>,
) -> (Vec<RankInfo>, Vec<LocationInfo>, Vec<CommInfo>) {
    let rank_set: BTreeSet<i32> = streams.iter().map(|s| s.0).collect();
    let ranks = rank_set
        .iter()
        .map(|&r| RankInfo { rank: r, node: None, name: format!("rank {r}"), application: None })
        .collect();
    let locations = streams
        .iter()
        .enumerate()
        .map(|(i, &(rank, thread))| LocationInfo {
            location_id: i as i64,
            rank,
            thread,
            kind: "cpu".into(),
            name: format!("rank {rank} thread {thread}"),
            node: None,
        })
        .collect();
    let world: Vec<i32> = rank_set.iter().copied().collect();
    let communicators = comm_names
        .into_iter()
        .filter(|(c, _)| *c != NONE_I32)
        .map(|(comm, name)| CommInfo { comm, name, members: world.clone(), per_rank: false })
        .collect();
    (ranks, locations, communicators)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_dict_literals() {
        let a =
            parse_attributes("{'receiver': 1, 'communicator': 'Comm 1', 'msg_tag': 10, 'msg_length': 16384}").unwrap();
        assert_eq!(a[0], ("receiver".into(), Value::Int(1)));
        assert_eq!(a[1].1.int(), Some(1));
        let b = parse_attributes(
            "{'attributes': {'Attribute 2': 26602}, 'program_name': '/a, b', 'program_arguments': []}",
        )
        .unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b[1].1, Value::Text("/a, b".into()));
        assert!(parse_attributes("{'a': 'open}").is_err());
        assert!(parse_attributes("[1]").is_err());
        assert_eq!(parse_attributes("{'exit_status': -9223372036854775808}").unwrap()[0].1, Value::Int(i64::MIN));
    }
}
