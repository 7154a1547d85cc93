//! The PCLVis event shape: one row per point-to-point event, as the PCLVis paper's input
//! (rank, type = send|recv, timestamp, source, destination, size), with optional tag, comm
//! and node columns. Header names are case-insensitive and columns may come in any order.
//! A send becomes a `send` event of its source, a receive a `recv` event of its destination;
//! the rows carry no enter/leave, so such a trace has messages but no calls.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::{Error, Result};
use crate::events::{Event, EventKind, RawEvents};
use crate::reading::csv::CsvOptions;
use crate::reading::csv::nodes::csv_error;
use crate::reading::csv::{Record, next_record, open_reader, parse_time};
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
        // In the order of the expected header: after rank and type.
        let at = REQUIRED.iter().take(2).filter(|n| find(n).is_none()).count();
        missing.insert(at, "timestamp");
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

/// Read a PCLVis-shaped CSV trace's rows, handing each event to `sink` in file order;
/// returns the definitions.
pub fn read_rows(path: &Path, options: &CsvOptions, sink: &mut dyn FnMut(Event) -> Result<()>) -> Result<RawTrace> {
    let mut reader = open_reader(csv::ReaderBuilder::new().trim(csv::Trim::All), path, options)?;
    let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
    let cols = columns(path, &header, options.time_unit)?;
    let mut nodes: BTreeMap<i32, (String, u64)> = BTreeMap::new();
    let mut ranks: BTreeSet<i32> = BTreeSet::new();
    let mut comms: BTreeSet<i32> = BTreeSet::new();
    let mut record = csv::StringRecord::new();
    while let Some(line) = next_record(&mut reader, &mut record, path)? {
        let row = Record { path, line, header: &header, record: &record };
        let (event, source, destination) = row.event(&cols)?;
        if let Some(c) = cols.node {
            row.place(c, event.rank, &mut nodes)?;
        }
        ranks.insert(source);
        ranks.insert(destination);
        comms.insert(event.comm);
        sink(event)?;
    }
    let (ranks, locations, communicators) = definitions(&ranks, &nodes, &comms);
    Ok(RawTrace {
        meta: TraceMeta { format: "csv-pclvis".into(), ..TraceMeta::default() },
        ranks,
        locations,
        communicators,
        ..RawTrace::default()
    })
}

/// What a PCLVis row's fields mean.
impl Record<'_> {
    fn int(&self, i: usize) -> Result<i64> {
        self.field(i).parse::<i64>().map_err(|_| self.bad(i, "an integer"))
    }

    fn rank(&self, i: usize) -> Result<i32> {
        let v = self.int(i)?;
        i32::try_from(v)
            .ok()
            .filter(|r| *r >= 0)
            .ok_or_else(|| self.error(i, format!("expected a rank (0 or more), found '{v}'")))
    }

    /// A small optional number (tag, communicator): 0 when the column is absent.
    fn small(&self, i: Option<usize>) -> Result<i32> {
        match i {
            None => Ok(0),
            Some(i) => i32::try_from(self.int(i)?)
                .map_err(|_| self.error(i, format!("value '{}' out of range", self.field(i)))),
        }
    }

    /// The row's send or receive, and its source and destination ranks.
    fn event(&self, cols: &Columns) -> Result<(Event, i32, i32)> {
        let rank = self.rank(cols.rank)?;
        let source = self.rank(cols.source)?;
        let destination = self.rank(cols.destination)?;
        let kind = match self.field(cols.kind).to_ascii_lowercase().as_str() {
            "send" | "isend" => EventKind::Send,
            "recv" | "receive" | "irecv" => EventKind::Recv,
            other => return Err(self.error(cols.kind, format!("expected send or recv, found '{other}'"))),
        };
        let (own, peer, own_col) = if kind == EventKind::Send {
            (source, destination, cols.source)
        } else {
            (destination, source, cols.destination)
        };
        if own != rank {
            return Err(self.error(
                own_col,
                format!(
                    "a {} recorded by rank {rank} must have {} = {rank}, found {own}",
                    self.field(cols.kind),
                    self.column(own_col)
                ),
            ));
        }
        let ts = parse_time(self.field(cols.timestamp), cols.unit).ok_or_else(|| self.bad(cols.timestamp, "a time"))?;
        let bytes = self.int(cols.size)?;
        if bytes < 0 {
            return Err(self.error(cols.size, format!("expected a size of 0 or more, found {bytes}")));
        }
        let (tag, comm) = (self.small(cols.tag)?, self.small(cols.comm)?);
        Ok((Event { peer, comm, tag, bytes, ..Event::new(rank, 0, ts, kind) }, source, destination))
    }

    /// Record the rank's node from column `c`; a rank found on two nodes is an error.
    fn place(&self, c: usize, rank: i32, nodes: &mut BTreeMap<i32, (String, u64)>) -> Result<()> {
        let node = self.field(c);
        if node.is_empty() {
            return Ok(());
        }
        match nodes.get(&rank) {
            Some((prev, prev_line)) if prev != node => {
                Err(self.error(c, format!("rank {rank} is on node '{prev}' at line {prev_line} but on '{node}' here")))
            }
            Some(_) => Ok(()),
            None => {
                nodes.insert(rank, (node.to_string(), self.line));
                Ok(())
            }
        }
    }
}

/// Ranks (with the nodes the rows gave), one location per rank, and the communicators seen
/// (every rank a member: the shape does not say more).
fn definitions(
    ranks: &BTreeSet<i32>,
    nodes: &BTreeMap<i32, (String, u64)>,
    comms: &BTreeSet<i32>,
) -> (Vec<RankInfo>, Vec<LocationInfo>, Vec<CommInfo>) {
    let ranks: Vec<RankInfo> = ranks
        .iter()
        .map(|&r| RankInfo {
            rank: r,
            node: nodes.get(&r).map(|n| n.0.clone()),
            name: format!("rank {r}"),
            application: None,
        })
        .collect();
    let locations = ranks
        .iter()
        .map(|r| LocationInfo {
            location_id: i64::from(r.rank),
            rank: r.rank,
            thread: 0,
            kind: "cpu".into(),
            name: r.name.clone(),
            node: None,
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
    (ranks, locations, communicators)
}

/// Sort each stream by time, keeping the file order of equal times.
pub(super) fn sort_streams_by_time(events: &mut RawEvents) {
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
        out.push(old.event(i));
    }
    *events = out;
}
