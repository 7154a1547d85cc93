//! The PCLVis event shape: one row per point-to-point event, as the PCLVis paper's input
//! (rank, type = send|recv, timestamp, source, destination, size), with optional tag, comm
//! and node columns. Header names are case-insensitive and columns may come in any order.
//! A send becomes a `send` event of its source, a receive a `recv` event of its destination;
//! the rows carry no enter/leave, so such a trace has messages but no calls.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::{Error, Result};
use crate::events::{Event, EventKind, EventParts, RawEvents};
use crate::reading::csv::CsvOptions;
use crate::reading::csv::nodes::csv_error;
use crate::reading::csv::{next_record, open_reader, parse_time};
use crate::trace::{CommInfo, LocationInfo, RankInfo, RawTrace, TraceMeta};

const REQUIRED: [&str; 5] = ["rank", "type", "source", "destination", "size"];

struct Columns {
    rank: usize,
    kind: usize,
    timestamp: usize,
    unit: crate::reading::csv::TimeUnit,
    source: usize,
    destination: usize,
    size: usize,
    tag: Option<usize>,
    comm: Option<usize>,
    node: Option<usize>,
}

fn columns(path: &Path, header: &csv::StringRecord, unit: Option<crate::reading::csv::TimeUnit>) -> Result<Columns> {
    crate::reading::csv::check_unique_header(path, header.iter())?;
    let names: Vec<String> = header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
    let find = |n: &str| names.iter().position(|h| h == n);
    let timestamp = crate::reading::csv::timestamp_column(path, header, unit)?;
    let mut missing = REQUIRED.iter().filter(|n| find(n).is_none()).copied().collect::<Vec<_>>();
    if timestamp.is_none() {
        missing.insert(2, "timestamp");
    }
    let mut missing = missing.into_iter().peekable();
    if missing.peek().is_some() {
        let missing: Vec<_> = missing.collect();
        return Err(Error::at_line(
            path,
            1,
            None,
            format!("missing column(s) {}; expected rank,type,timestamp,source,destination,size", missing.join(", ")),
        ));
    }
    let get = |n: &str| find(n).unwrap_or_default();
    Ok(Columns {
        rank: get("rank"),
        kind: get("type"),
        timestamp: timestamp.map_or(0, |t| t.0),
        unit: timestamp.map_or_else(Default::default, |t| t.1),
        source: get("source"),
        destination: get("destination"),
        size: get("size"),
        tag: find("tag"),
        comm: find("comm"),
        node: find("node"),
    })
}

/// Read a PCLVis-shaped CSV trace.
pub fn read(path: &Path, options: &CsvOptions) -> Result<RawTrace> {
    let mut reader = open_reader(csv::ReaderBuilder::new().trim(csv::Trim::All), path, options)?;
    let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    let cols = columns(path, &header, options.time_unit)?;
    let col_name = |i: usize| header.get(i).unwrap_or("?").trim().to_string();

    let mut events = RawEvents::default();
    let mut nodes: BTreeMap<i32, (String, u64)> = BTreeMap::new();
    let mut ranks: BTreeSet<i32> = BTreeSet::new();
    let mut comms: BTreeSet<i32> = BTreeSet::new();
    let mut record = csv::StringRecord::new();
    while let Some(line) = next_record(&mut reader, &mut record, path)? {
        let field = |i: usize| record.get(i).unwrap_or("");
        let int = |i: usize| -> Result<i64> {
            field(i).parse::<i64>().map_err(|_| {
                Error::at_line(path, line, Some(&col_name(i)), format!("expected an integer, found '{}'", field(i)))
            })
        };
        let rank_of = |i: usize| -> Result<i32> {
            let v = int(i)?;
            i32::try_from(v).ok().filter(|r| *r >= 0).ok_or_else(|| {
                Error::at_line(path, line, Some(&col_name(i)), format!("expected a rank (0 or more), found '{v}'"))
            })
        };
        let rank = rank_of(cols.rank)?;
        let source = rank_of(cols.source)?;
        let destination = rank_of(cols.destination)?;
        let kind = match field(cols.kind).to_ascii_lowercase().as_str() {
            "send" | "isend" => EventKind::Send,
            "recv" | "receive" | "irecv" => EventKind::Recv,
            other => {
                return Err(Error::at_line(
                    path,
                    line,
                    Some(&col_name(cols.kind)),
                    format!("expected send or recv, found '{other}'"),
                ));
            }
        };
        let (own, peer, own_col) = if kind == EventKind::Send {
            (source, destination, cols.source)
        } else {
            (destination, source, cols.destination)
        };
        if own != rank {
            return Err(Error::at_line(
                path,
                line,
                Some(&col_name(own_col)),
                format!(
                    "a {} recorded by rank {rank} must have {} = {rank}, found {own}",
                    field(cols.kind),
                    col_name(own_col)
                ),
            ));
        }
        let ts = parse_time(field(cols.timestamp), cols.unit).ok_or_else(|| {
            Error::at_line(
                path,
                line,
                Some(&col_name(cols.timestamp)),
                format!("expected a time, found '{}'", field(cols.timestamp)),
            )
        })?;
        let bytes = int(cols.size)?;
        if bytes < 0 {
            return Err(Error::at_line(
                path,
                line,
                Some(&col_name(cols.size)),
                format!("expected a size of 0 or more, found {bytes}"),
            ));
        }
        let small = |i: Option<usize>| -> Result<i32> {
            match i {
                None => Ok(0),
                Some(i) => i32::try_from(int(i)?).map_err(|_| {
                    Error::at_line(path, line, Some(&col_name(i)), format!("value '{}' out of range", field(i)))
                }),
            }
        };
        let tag = small(cols.tag)?;
        let comm = small(cols.comm)?;
        if let Some(c) = cols.node {
            let node = field(c);
            if !node.is_empty() {
                match nodes.get(&rank) {
                    Some((prev, prev_line)) if prev != node => {
                        return Err(Error::at_line(
                            path,
                            line,
                            Some(&col_name(c)),
                            format!("rank {rank} is on node '{prev}' at line {prev_line} but on '{node}' here"),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        nodes.insert(rank, (node.to_string(), line));
                    }
                }
            }
        }
        ranks.insert(source);
        ranks.insert(destination);
        comms.insert(comm);
        events.push(Event { peer, comm, tag, bytes, ..Event::new(rank, 0, ts, kind) });
    }
    // Stable per-rank time order (rows may be listed in any order).
    events.group_by_stream();
    sort_streams_by_time(&mut events);
    let events = EventParts::single(events);

    let ranks: Vec<RankInfo> = ranks
        .iter()
        .map(|&r| RankInfo { rank: r, node: nodes.get(&r).map(|n| n.0.clone()), name: format!("rank {r}") })
        .collect();
    let locations = ranks
        .iter()
        .map(|r| LocationInfo {
            location_id: i64::from(r.rank),
            rank: r.rank,
            thread: 0,
            kind: "cpu".into(),
            name: r.name.clone(),
        })
        .collect();
    let world: Vec<i32> = ranks.iter().map(|r| r.rank).collect();
    let communicators = comms
        .iter()
        .map(|&c| CommInfo {
            comm: c,
            name: if c == 0 { "MPI_COMM_WORLD".into() } else { format!("comm {c}") },
            members: world.clone(),
            per_rank: false,
        })
        .collect();
    Ok(RawTrace {
        meta: TraceMeta { format: "csv-pclvis".into(), ..TraceMeta::default() },
        ranks,
        locations,
        communicators,
        events,
        ..RawTrace::default()
    })
}

/// Sort each stream by time, keeping the file order of equal times.
fn sort_streams_by_time(events: &mut RawEvents) {
    let sorted = events.streams().iter().all(|s| events.ts[s.start..s.end].is_sorted());
    if sorted {
        return;
    }
    let mut order: Vec<usize> = (0..events.len()).collect();
    for s in events.streams() {
        order[s.start..s.end].sort_by_key(|&i| events.ts[i]);
    }
    let old = events.clone();
    let mut out = RawEvents::with_capacity(old.len());
    for &i in &order {
        out.push(Event {
            rank: old.rank[i],
            thread: old.thread[i],
            ts: old.ts[i],
            kind: old.kind(i),
            region: old.region[i],
            peer: old.peer[i],
            comm: old.comm[i],
            tag: old.tag[i],
            bytes: old.bytes[i],
            request: old.request[i],
            op: old.op[i],
            bytes_recv: old.bytes_recv[i],
        });
    }
    *events = out;
}
