//! `commdb report TRACE -o FILE.html` and `\report FILE.html`: one self-contained HTML page
//! (inline SVG and CSS, no script, nothing fetched) that answers "which ranks communicate
//! slowly, and why" for the session's default trace, built only from commdb's own SQL
//! functions: the trace's facts, the communication matrix ordered by communication region
//! (PCLVis 4.2), the region graph (4.2), latency over time with its growth and steady-high
//! periods and the attribution's causes (5.1, 6), Intel Trace Analyzer's level-of-detail
//! timeline, the communication-dependency DAG of the slowest period (5.3), waiting and
//! transfer efficiency (Scalasca's wait states, the ideal-network replay) and what to do
//! (attribution, rank diagnosis, remapping). Each section is computed on its own: one that
//! cannot be drawn for this trace (no nodes, no collectives) says why and the rest stands.
//! Large traces stay small pages: matrices are cut to at most 128 rank groups, timelines use
//! the level-of-detail functions at the page's resolution, drawings are one path per colour.

mod drawings;
mod figures;

use std::fmt::Write;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type};
use commdb_catalog::Session;

use crate::chart::{esc, short};
use drawings::{DagEdge, DagNode, Line, Region, RegionEdge, Slot};
use figures::Band;

/// Most rank groups a matrix shows.
const MAX_GROUPS: usize = 128;
/// Horizontal resolution of the timeline and the time series (slots, bins).
const TIMELINE_PIXELS: i64 = 400;
const TIME_BINS: i64 = 120;
/// Most message lines drawn on the timeline, and most messages in the DAG's period.
const MAX_LINES: usize = 1500;
const MAX_DAG_MESSAGES: i64 = 300;

/// A query's result, read by column.
struct Rows(RecordBatch);

impl Rows {
    fn len(&self) -> usize {
        self.0.num_rows()
    }

    fn cast(&self, col: usize, to: &DataType) -> ArrayRef {
        // A query that returned no batch has no columns: an empty column of each.
        if col >= self.0.num_columns() {
            return arrow::array::new_empty_array(to);
        }
        arrow::compute::cast(self.0.column(col), to).unwrap_or_else(|_| arrow::array::new_null_array(to, self.len()))
    }

    fn f64s(&self, col: usize) -> Vec<Option<f64>> {
        let a = self.cast(col, &DataType::Float64);
        let a = a.as_primitive::<Float64Type>();
        (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))).collect()
    }

    fn texts(&self, col: usize) -> Vec<Option<String>> {
        let a = self.cast(col, &DataType::Utf8);
        let a = a.as_string::<i32>();
        (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())).collect()
    }

    fn ints(&self, col: usize) -> Vec<i64> {
        self.f64s(col).into_iter().map(|v| v.unwrap_or(0.0) as i64).collect()
    }

    fn one(&self, col: usize) -> Option<f64> {
        self.f64s(col).first().copied().flatten()
    }
}

async fn query(session: &mut Session, sql: &str) -> Result<Rows, String> {
    let batches = session.collect(sql).await.map_err(|e| e.to_string())?;
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => return Ok(Rows(RecordBatch::new_empty(std::sync::Arc::new(arrow::datatypes::Schema::empty())))),
    };
    arrow::compute::concat_batches(&schema, &batches).map(Rows).map_err(|e| e.to_string())
}

/// What the report found, for the shell's message.
#[derive(Debug, Default)]
pub struct Written {
    pub bytes: usize,
    pub figures: usize,
    pub sections_missing: usize,
}

/// One section: its heading, and its HTML or why it could not be made.
struct Section {
    id: &'static str,
    title: &'static str,
    body: Result<String, String>,
}

/// A figure: title, drawing and a sentence on how to read it.
fn figure(title: &str, svg: &str, how: &str) -> String {
    format!("<figure><figcaption>{}</figcaption>\n{svg}\n<p class=\"how\">{}</p></figure>\n", esc(title), esc(how))
}

/// A table of text cells (first row the header).
fn table(rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table>");
    for (i, r) in rows.iter().enumerate() {
        let cell = if i == 0 { "th" } else { "td" };
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<{cell}>{}</{cell}>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>\n");
    s
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

fn duration(ns: f64) -> String {
    commdb_udfs::units::duration(ns)
}

/// The report of the session's default trace as one HTML page.
pub async fn html(session: &mut Session) -> Result<(String, Written), String> {
    let info = query(session, "SELECT name, path, format, creator, ranks, locations, duration_ns, events, clock_correction, clock_violations FROM trace_info")
        .await?;
    if info.len() == 0 {
        return Err("\\report: the trace has no trace_info row".into());
    }
    let name = info.texts(0)[0].clone().unwrap_or_default();
    let mut sections = Vec::new();
    sections.push(Section { id: "overview", title: "1. Overview", body: overview(session, &info).await });
    sections.push(Section { id: "matrix", title: "2. Who communicates with whom", body: matrix(session).await });
    sections.push(Section { id: "regions", title: "3. Communication regions", body: region_graph(session).await });
    sections.push(Section { id: "latency", title: "4. Latency over time", body: latency(session).await });
    sections.push(Section { id: "timeline", title: "5. Timeline", body: timeline(session).await });
    sections.push(Section { id: "dag", title: "6. Dependencies in the slowest period", body: dag(session).await });
    sections.push(Section { id: "waiting", title: "7. Waiting and efficiency", body: waiting(session).await });
    sections.push(Section { id: "advice", title: "8. What to do", body: advice(session).await });
    let mut body = String::new();
    let mut written = Written::default();
    for s in &sections {
        let _ = writeln!(body, "<section id=\"{}\"><h2>{}</h2>", s.id, s.title);
        match &s.body {
            Ok(html) => {
                written.figures += html.matches("<figure>").count();
                body.push_str(html);
            }
            Err(why) => {
                written.sections_missing += 1;
                let _ = writeln!(body, "<p class=\"missing\">Not available for this trace: {}</p>", esc(why));
            }
        }
        body.push_str("</section>\n");
    }
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>commdb report: {t}</title>\n<style>{STYLE}</style></head>\n<body><header><h1>Communication report: {t}</h1><p>Written by commdb {v} from its SQL functions; every figure says how to read it. Times are from the run's start.</p><nav>{nav}</nav></header>\n{body}</body></html>\n",
        t = esc(&name),
        v = env!("CARGO_PKG_VERSION"),
        nav = sections
            .iter()
            .map(|s| format!("<a href=\"#{}\">{}</a>", s.id, esc(s.title)))
            .collect::<Vec<_>>()
            .join(" "),
    );
    written.bytes = page.len();
    Ok((page, written))
}

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;max-width:1000px;margin:1em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}\
nav a{margin-right:.8em;font-size:.9em}figure{margin:1em 0;break-inside:avoid}\
figcaption{font-weight:bold;margin-bottom:.3em}svg{max-width:100%;height:auto;font-size:12px}\
svg .small{font-size:10px}svg .label{font-size:13px}p.how{color:#444;font-size:.92em;margin:.3em 0}\
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}\
p.missing{color:#8a4b00}.key{font-weight:bold}@media print{nav{display:none}body{max-width:none}}";

async fn overview(session: &mut Session, info: &Rows) -> Result<String, String> {
    let nodes = query(session, "SELECT count(DISTINCT node) FROM ranks").await?.one(0).unwrap_or(0.0);
    let messages = query(session, "SELECT count(*), sum(bytes) FROM messages").await?;
    let warnings = query(session, "SELECT code, count, message FROM warnings ORDER BY count DESC LIMIT 8").await?;
    let text = |c: usize| info.texts(c)[0].clone().unwrap_or_else(|| "-".into());
    let num = |c: usize| info.one(c).unwrap_or(0.0);
    let mut rows = vec![vec!["fact".to_string(), "value".to_string()]];
    rows.push(vec!["trace".into(), format!("{} ({}, written by {})", text(1), text(2), text(3))]);
    rows.push(vec!["ranks and nodes".into(), format!("{} ranks on {} nodes, {} locations", num(4), nodes, num(5))]);
    rows.push(vec!["duration".into(), duration(num(6))]);
    rows.push(vec!["events".into(), format!("{}", num(7))]);
    rows.push(vec![
        "messages".into(),
        format!(
            "{} matched, {}",
            messages.one(0).unwrap_or(0.0),
            commdb_udfs::units::bytes(messages.one(1).unwrap_or(0.0))
        ),
    ]);
    rows.push(vec!["clock correction".into(), format!("{}; {} messages still received before sent", text(8), num(9))]);
    let mut s = table(&rows);
    if warnings.len() == 0 {
        s.push_str("<p>No problem was found while reading the trace.</p>\n");
    } else {
        s.push_str("<p>Problems found while reading the trace (see the <code>warnings</code> table):</p>\n");
        let mut rows = vec![vec!["problem".into(), "count".into(), "what it means".into()]];
        let (code, count, message) = (warnings.texts(0), warnings.f64s(1), warnings.texts(2));
        for i in 0..warnings.len() {
            rows.push(vec![
                code[i].clone().unwrap_or_default(),
                format!("{}", count[i].unwrap_or(0.0)),
                message[i].clone().unwrap_or_default(),
            ]);
        }
        s.push_str(&table(&rows));
    }
    Ok(s)
}

/// Ranks in region order with their region, from process_regions().
async fn regions(session: &mut Session) -> Result<Vec<(i64, i64)>, String> {
    let r = query(session, "SELECT rank, region FROM process_regions() ORDER BY region, rank").await?;
    Ok(r.ints(0).into_iter().zip(r.ints(1)).collect())
}

async fn matrix(session: &mut Session) -> Result<String, String> {
    let order = regions(session).await?;
    if order.is_empty() {
        return Err("no matched messages".into());
    }
    let groups = order.len().div_ceil(MAX_GROUPS).max(1);
    let group_of: std::collections::HashMap<i64, usize> =
        order.iter().enumerate().map(|(i, (r, _))| (*r, i / groups)).collect();
    let labels: Vec<String> = order
        .chunks(groups)
        .map(|c| if groups == 1 { format!("{} R{}", c[0].0, c[0].1) } else { format!("{}+ R{}", c[0].0, c[0].1) })
        .collect();
    let m = query(session, "SELECT src, dst, messages FROM comm_matrix()").await?;
    let mut cells: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
    let (src, dst, n) = (m.ints(0), m.ints(1), m.f64s(2));
    for i in 0..m.len() {
        if let (Some(a), Some(b)) = (group_of.get(&src[i]), group_of.get(&dst[i])) {
            *cells.entry((*b, *a)).or_default() += n[i].unwrap_or(0.0);
        }
    }
    let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
    let axis = if groups == 1 { "rank (and its region)" } else { "rank group, in region order" };
    let mut s = figure(
        "Messages between ranks, ordered by communication region",
        &figures::heatmap("messages between ranks", &labels, &cells, axis, "messages"),
        &format!(
            "Each cell is the number of messages the row's rank sent to the column's rank{}; ranks are sorted by the communication region process_regions() puts them in, so regions appear as blocks on the diagonal and traffic between regions off it.",
            if groups == 1 {
                String::new()
            } else {
                format!(
                    " (groups of {groups} ranks consecutive in region order, labelled by their first rank and its region)"
                )
            }
        ),
    );
    let nodes = query(
        session,
        "SELECT src, dst, bytes FROM comm_matrix(by => 'node') WHERE src IS NOT NULL AND dst IS NOT NULL",
    )
    .await?;
    if nodes.len() > 0 {
        let (src, dst, bytes) = (nodes.texts(0), nodes.texts(1), nodes.f64s(2));
        let mut names: Vec<String> = src.iter().chain(&dst).flatten().cloned().collect();
        names.sort();
        names.dedup();
        let groups = names.len().div_ceil(MAX_GROUPS).max(1);
        let at = |n: &Option<String>| n.as_ref().and_then(|n| names.binary_search(n).ok()).map(|i| i / groups);
        let labels: Vec<String> = names.chunks(groups).map(|c| c[0].clone()).collect();
        let mut cells: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
        for i in 0..nodes.len() {
            if let (Some(a), Some(b)) = (at(&src[i]), at(&dst[i])) {
                *cells.entry((b, a)).or_default() += bytes[i].unwrap_or(0.0);
            }
        }
        let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
        s.push_str(&figure(
            "Bytes between nodes",
            &figures::heatmap("bytes between nodes", &labels, &cells, "node", "bytes"),
            "Each cell is the bytes the row's node sent to the column's node; the diagonal is traffic that stayed on a node, everything off it crossed the network.",
        ));
    }
    Ok(s)
}

async fn region_graph(session: &mut Session) -> Result<String, String> {
    let sizes =
        query(session, "SELECT region, count(*) FROM process_regions() GROUP BY region ORDER BY region").await?;
    let regions: Vec<Region> =
        sizes.ints(0).into_iter().zip(sizes.ints(1)).map(|(id, n)| Region { id, ranks: n as usize }).collect();
    if regions.is_empty() {
        return Err("no matched messages".into());
    }
    let g = query(session, "SELECT region_a, region_b, messages, mean_latency FROM region_graph()").await?;
    let (a, b, m, l) = (g.ints(0), g.ints(1), g.f64s(2), g.f64s(3));
    let edges: Vec<RegionEdge> = (0..g.len())
        .map(|i| RegionEdge { a: a[i], b: b[i], messages: m[i].unwrap_or(0.0), mean_latency: l[i] })
        .collect();
    Ok(figure(
        &format!("{} communication regions and the messages between them", regions.len()),
        &drawings::region_graph("region graph", &regions, &edges),
        "Each circle is a region of ranks that mostly talk among themselves (its area follows its ranks, its fill the mean latency L of the messages inside it); a line joins regions that exchange messages, thicker for more messages, coloured by their mean L (1 is the normal time for the message's size; higher is slower).",
    ))
}

async fn span(session: &mut Session) -> Result<(f64, f64), String> {
    let s = query(session, "SELECT min(send_ts), max(coalesce(recv_ts, send_ts)) FROM messages").await?;
    match (s.one(0), s.one(1)) {
        (Some(a), Some(b)) if b > a => Ok((a, b)),
        _ => Err("no timed messages".into()),
    }
}

async fn latency(session: &mut Session) -> Result<String, String> {
    let (t0, t1) = span(session).await?;
    let bin = query(session, &format!("SELECT lod_resolution({}, {}, {TIME_BINS})", t0 as i64, t1 as i64 + 1))
        .await?
        .one(0)
        .unwrap_or(1.0)
        .max(1.0);
    let b = query(
        session,
        &format!(
            "SELECT floor(send_ts / {bin}) * {bin} + {half} AS t, avg(latency), approx_percentile_cont(latency, 0.95) \
             FROM message_latency() WHERE latency IS NOT NULL AND send_ts IS NOT NULL GROUP BY 1 ORDER BY 1",
            half = bin / 2.0
        ),
    )
    .await?;
    let (t, mean, p95) = (b.f64s(0), b.f64s(1), b.f64s(2));
    let points = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        t.iter().zip(v).filter_map(|(t, v)| Some((ms((*t)?), (*v)?))).collect()
    };
    let mut bands = Vec::new();
    let trend = query(session, "SELECT kind, t_start, t_end FROM latency_trend() WHERE kind <> 'compressed'").await?;
    let (kind, from, to) = (trend.texts(0), trend.f64s(1), trend.f64s(2));
    for i in 0..trend.len() {
        let growth = kind[i].as_deref() == Some("growth");
        bands.push(Band {
            from: ms(from[i].unwrap_or(0.0)),
            to: ms(to[i].unwrap_or(0.0)),
            colour: if growth { "#F0E442" } else { "#D55E00" },
            name: if growth { "growth period".into() } else { "steady-high period".into() },
        });
    }
    let mut s = figure(
        "Latency L over time: mean and 95th percentile per time bin",
        &figures::time_series(
            "latency over time",
            "send time (ms)",
            "latency L (1 = normal)",
            &[("mean L".into(), "#0072B2", points(&mean)), ("95th percentile L".into(), "#E69F00", points(&p95))],
            &bands,
            Some((1.0, "L = 1: normal for the size")),
        ),
        &format!(
            "L is a message's transmission time over the median time of messages of its size and locality (PCLVis 4.1), averaged over bins of {}. Shaded: the periods latency_trend() finds where latency grows (yellow) or stays high (vermilion).",
            duration(bin)
        ),
    );
    let causes = query(
        session,
        "SELECT window_start, window_end, cause FROM attribution() WHERE cause <> 'none' ORDER BY window_start",
    )
    .await?;
    let (from, to, cause) = (causes.f64s(0), causes.f64s(1), causes.texts(2));
    let colour = |c: &str| match c {
        "mapping" => "#56B4E9",
        "pattern" => "#009E73",
        "background_traffic" => "#CC79A7",
        _ => "#999999",
    };
    let mut cause_bands = Vec::new();
    for i in 0..causes.len() {
        for c in cause[i].as_deref().unwrap_or("").split(',') {
            cause_bands.push(Band {
                from: ms(from[i].unwrap_or(0.0)),
                to: ms(to[i].unwrap_or(0.0)),
                colour: colour(c),
                name: c.replace('_', " "),
            });
        }
    }
    s.push_str(&figure(
        "Causes of latency by time window",
        &figures::time_series("causes of latency", "send time (ms)", "mean latency L", &[("mean L".into(), "#000000", points(&mean))], &cause_bands, Some((1.0, "L = 1"))),
        if cause_bands.is_empty() {
            "attribution() found no window whose slow messages it can attribute to a cause: no band is shaded."
        } else {
            "Shaded: the windows where attribution() (PCLVis 6) blames bad mapping (light blue), an unbalanced communication pattern (green) or background traffic on the network (purple); the line is the mean L for reference."
        },
    ));
    Ok(s)
}

async fn timeline(session: &mut Session) -> Result<String, String> {
    let calls = query(
        session,
        &format!(
            "SELECT slot_start, slot_end, rank, region FROM lod_calls(pixels => {TIMELINE_PIXELS}, per => 'rank')"
        ),
    )
    .await?;
    if calls.len() == 0 {
        return Err("no calls".into());
    }
    let (from, to, rank, region) = (calls.f64s(0), calls.f64s(1), calls.ints(2), calls.texts(3));
    let mut slots = Vec::with_capacity(calls.len());
    let mut time: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for i in 0..calls.len() {
        let (a, b) = (from[i].unwrap_or(0.0), to[i].unwrap_or(0.0));
        let name = region[i].clone().unwrap_or_default();
        *time.entry(name.clone()).or_default() += b - a;
        // Consecutive slots of one region on a rank are one rectangle.
        match slots.last_mut() {
            Some(Slot { to, rank: r, region: g, .. }) if *r == rank[i] && *g == name && (*to - ms(a)).abs() < 1e-9 => {
                *to = ms(b)
            }
            _ => slots.push(Slot { from: ms(a), to: ms(b), rank: rank[i], region: name }),
        }
    }
    let mut named: Vec<(String, f64)> = time.into_iter().collect();
    named.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: Vec<String> = named.into_iter().take(6).map(|n| n.0).collect();
    let mut ranks: Vec<i64> = rank.clone();
    ranks.sort_unstable();
    ranks.dedup();
    let m = query(
        session,
        &format!("SELECT send_slot, src, recv_slot, dst FROM lod_messages(pixels => {TIMELINE_PIXELS}) WHERE send_slot IS NOT NULL AND recv_slot IS NOT NULL ORDER BY send_slot, src, dst"),
    )
    .await?;
    let (send, src, recv, dst) = (m.f64s(0), m.ints(1), m.f64s(2), m.ints(3));
    // Every k-th line in time order, so the drawn ones spread over the run and the ranks.
    let stride = m.len().div_ceil(MAX_LINES).max(1);
    let res = (0..calls.len())
        .map(|i| to[i].unwrap_or(0.0) - from[i].unwrap_or(0.0))
        .filter(|w| *w > 0.0)
        .fold(f64::INFINITY, f64::min);
    let half = if res.is_finite() { res / 2.0 } else { 0.0 };
    let lines: Vec<Line> = (0..m.len())
        .step_by(stride)
        .map(|i| Line {
            send: ms(send[i].unwrap_or(0.0) + half),
            src: src[i],
            recv: ms(recv[i].unwrap_or(0.0) + half),
            dst: dst[i],
        })
        .collect();
    Ok(figure(
        "Timeline: what each rank does, slot by slot",
        &drawings::timeline("timeline", &slots, &lines, &named, &ranks),
        &format!(
            "One row per rank, time to the right in slots of {} (Intel Trace Analyzer's level of detail: each slot shows the region where the rank spent most of its time). Grey lines join the slots of a send and of its receive{}.",
            duration(if res.is_finite() { res } else { 0.0 }),
            if stride > 1 {
                format!(" (one in {stride} of the {} slot pairs, evenly over the run)", m.len())
            } else {
                String::new()
            }
        ),
    ))
}

async fn dag(session: &mut Session) -> Result<String, String> {
    let (t0, t1) = span(session).await?;
    let slow = query(session, "SELECT t_start, t_end, kind FROM latency_trend() WHERE kind <> 'compressed' ORDER BY mean_latency DESC LIMIT 1").await?;
    let (from, what) = match slow.one(0) {
        Some(a) => (
            a,
            format!(
                "the {} period from {} ms",
                slow.texts(2)[0].clone().unwrap_or_default().replace('_', "-"),
                short(ms(a))
            ),
        ),
        None => (t0, "the run's start (latency_trend() found no slow period)".to_string()),
    };
    let end = slow.one(1).unwrap_or(t1);
    let cut = query(
        session,
        &format!(
            "SELECT send_ts FROM messages WHERE send_ts >= {from} ORDER BY send_ts LIMIT 1 OFFSET {MAX_DAG_MESSAGES}"
        ),
    )
    .await?;
    let to = cut.one(0).map_or(end, |c| c.min(end)).max(from + 1.0);
    let view = "__commdb_report_period";
    query(
        session,
        &format!(
            "CREATE OR REPLACE VIEW {view} AS SELECT * FROM messages WHERE send_ts >= {} AND send_ts < {}",
            from as i64, to as i64
        ),
    )
    .await?;
    let nodes = query(
        session,
        &format!("SELECT node_id, rank, first_ts, last_ts, load_balance FROM dag_nodes(rel => '{view}')"),
    )
    .await;
    let edges = query(session, &format!("SELECT from_node, to_node, latency FROM dag_edges(rel => '{view}')")).await;
    let _ = query(session, &format!("DROP VIEW IF EXISTS {view}")).await;
    let (nodes, edges) = (nodes?, edges?);
    if nodes.len() == 0 {
        return Err("no messages in the slowest period".into());
    }
    let (id, rank, first, last, lb) = (nodes.ints(0), nodes.ints(1), nodes.f64s(2), nodes.f64s(3), nodes.f64s(4));
    let nodes: Vec<DagNode> = (0..nodes.len())
        .map(|i| DagNode {
            id: id[i],
            rank: rank[i],
            first: ms(first[i].unwrap_or(0.0)),
            last: ms(last[i].unwrap_or(0.0)),
            load_balance: lb[i].unwrap_or(0.0),
        })
        .collect();
    let (a, b, l) = (edges.ints(0), edges.ints(1), edges.f64s(2));
    let edges: Vec<DagEdge> = (0..edges.len()).map(|i| DagEdge { from: a[i], to: b[i], latency: l[i] }).collect();
    Ok(figure(
        &format!("Communication dependencies from {what}"),
        &drawings::dag("dependency DAG", &nodes, &edges),
        &format!(
            "The messages sent between {} and {} ms (at most {MAX_DAG_MESSAGES}) as PCLVis's dependency DAG: a node is what a rank received and then sent on that basis, placed on its rank's row at its time and coloured by the rank's load balance LB (dark: balanced, bright: far from the mean); an edge is a message, coloured by its latency L (bright: slow). Slow edges into a node delay everything after it.",
            short(ms(from)),
            short(ms(to))
        ),
    ))
}

async fn waiting(session: &mut Session) -> Result<String, String> {
    let w = query(session, "SELECT rank, pattern, sum(wait_ns) FROM wait_states() GROUP BY rank, pattern").await?;
    let mut s = String::new();
    if w.len() > 0 {
        let (rank, pattern, ns) = (w.ints(0), w.texts(1), w.f64s(2));
        let mut ranks: Vec<i64> = rank.clone();
        ranks.sort_unstable();
        ranks.dedup();
        let mut patterns: Vec<(String, f64)> = Vec::new();
        for i in 0..w.len() {
            let p = pattern[i].clone().unwrap_or_default();
            match patterns.iter_mut().find(|x| x.0 == p) {
                Some(x) => x.1 += ns[i].unwrap_or(0.0),
                None => patterns.push((p, ns[i].unwrap_or(0.0))),
            }
        }
        patterns.sort_by(|a, b| b.1.total_cmp(&a.1));
        let series: Vec<(String, Vec<f64>)> = patterns
            .iter()
            .take(7)
            .map(|(p, _)| {
                let mut v = vec![0.0; ranks.len()];
                for i in 0..w.len() {
                    if pattern[i].as_deref() == Some(p.as_str()) {
                        v[ranks.binary_search(&rank[i]).unwrap_or(0)] += ms(ns[i].unwrap_or(0.0));
                    }
                }
                (p.replace('_', " "), v)
            })
            .collect();
        let labels: Vec<String> = ranks.iter().map(ToString::to_string).collect();
        s.push_str(&figure(
            "Time each rank waited, by wait state",
            &figures::stacked_bars("waiting per rank", "rank", "waiting (ms)", &labels, &series),
            "Scalasca's wait states: a bar is a rank's time blocked waiting for others, split by why (a late sender, a late receiver, a collective whose last participant came late). A rank with a short bar while its partners have long ones is the one they wait for.",
        ));
    } else {
        s.push_str("<p>No wait state was found: no rank waited for another.</p>\n");
    }
    let (t0, t1) = span(session).await?;
    let bin = ((t1 - t0) / TIME_BINS as f64).max(1.0);
    let e = query(
        session,
        &format!(
            "WITH per AS (SELECT floor(observed_end / {bin}) * {bin} + {} AS t, rank, sum(compute_ns + mpi_ideal_ns) AS ideal, \
             sum(compute_ns + mpi_observed_ns) AS observed FROM ideal_replay() GROUP BY 1, 2) \
             SELECT t, sum(ideal) / sum(observed) FROM per WHERE observed > 0 GROUP BY t ORDER BY t",
            bin / 2.0
        ),
    )
    .await?;
    let per = query(session, "SELECT rank, efficiency FROM transfer_efficiency() ORDER BY rank NULLS FIRST").await?;
    let (who, eff) = (per.f64s(0), per.f64s(1));
    let total = (per.len() > 0 && who[0].is_none()).then(|| eff[0]).flatten();
    let worst = (0..per.len())
        .filter(|&i| who[i].is_some())
        .min_by(|&a, &b| eff[a].unwrap_or(1.0).total_cmp(&eff[b].unwrap_or(1.0)));
    let (t, mean) = (e.f64s(0), e.f64s(1));
    let points = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        t.iter().zip(v).filter_map(|(t, v)| Some((ms((*t)?), (*v)?))).collect()
    };
    if let Some(i) = worst {
        let _ = writeln!(
            s,
            "<p>Least efficient rank over the whole run: {} ({:.1}% of its time would remain on an ideal network).</p>",
            who[i].unwrap_or(0.0),
            eff[i].unwrap_or(0.0) * 100.0
        );
    }
    s.push_str(&figure(
        &format!("Transfer efficiency over time{}", total.map_or(String::new(), |e| format!(" (whole run: {:.1}%)", e * 100.0))),
        &figures::time_series("transfer efficiency", "time (ms)", "efficiency (1 = ideal network)", &[("all ranks".into(), "#0072B2", points(&mean))], &[], Some((1.0, "ideal network"))),
        "The run replayed on an ideal network (zero latency, infinite bandwidth; ideal_replay()): per time bin, (compute + ideal MPI time) / (compute + observed MPI time) of the compute and MPI pairs ending in it, over all ranks. 1 means the network cost nothing; 0.5 means that work took twice as long as on an ideal network.",
    ));
    Ok(s)
}

async fn advice(session: &mut Session) -> Result<String, String> {
    let mut s = String::new();
    let causes = query(
        session,
        "SELECT cause, recommendation, count(*), min(window_start), max(window_end) FROM attribution() WHERE cause <> 'none' GROUP BY cause, recommendation ORDER BY 3 DESC",
    )
    .await?;
    if causes.len() == 0 {
        s.push_str("<p class=\"key\">attribution() found no window where latency has a cause it recognises: communication looks healthy.</p>\n");
    } else {
        let mut rows = vec![vec!["cause".into(), "windows".into(), "from".into(), "to".into(), "what to do".into()]];
        let (c, r, n, a, b) = (causes.texts(0), causes.texts(1), causes.f64s(2), causes.f64s(3), causes.f64s(4));
        for i in 0..causes.len() {
            rows.push(vec![
                c[i].clone().unwrap_or_default().replace('_', " ").replace(',', ", "),
                format!("{}", n[i].unwrap_or(0.0)),
                format!("{} ms", short(ms(a[i].unwrap_or(0.0)))),
                format!("{} ms", short(ms(b[i].unwrap_or(0.0)))),
                r[i].clone().unwrap_or_default(),
            ]);
        }
        let mut found: Vec<&str> = Vec::new();
        for cause in c.iter().flatten().flat_map(|c| c.split(',')) {
            let phrase = match cause {
                "mapping" => "bad mapping of ranks to nodes",
                "pattern" => "an unbalanced communication pattern",
                "background_traffic" => "background traffic on the network",
                other => other,
            };
            if !found.contains(&phrase) {
                found.push(phrase);
            }
        }
        let _ = writeln!(s, "<p class=\"key\">Diagnosis: latency is caused by {}.</p>", esc(&found.join(" and ")));
        s.push_str(&table(&rows));
    }
    let ranks = query(session, "SELECT cause, count(*), min(rank), max(rank) FROM rank_diagnosis() WHERE cause <> 'none' GROUP BY cause ORDER BY 2 DESC").await;
    if let Ok(ranks) = ranks
        && ranks.len() > 0
    {
        let mut rows = vec![vec!["ranks diagnosed".into(), "ranks".into(), "lowest".into(), "highest".into()]];
        let (c, n, lo, hi) = (ranks.texts(0), ranks.f64s(1), ranks.ints(2), ranks.ints(3));
        for i in 0..ranks.len() {
            rows.push(vec![
                c[i].clone().unwrap_or_default().replace('_', " "),
                format!("{}", n[i].unwrap_or(0.0)),
                lo[i].to_string(),
                hi[i].to_string(),
            ]);
        }
        s.push_str("<p>Which ranks, by rank_diagnosis():</p>\n");
        s.push_str(&table(&rows));
    }
    match placement(session).await {
        Ok(p) => s.push_str(&p),
        Err(why) => {
            let _ = writeln!(s, "<p class=\"missing\">No remapping suggestion: {}</p>", esc(&why));
        }
    }
    Ok(s)
}

async fn placement(session: &mut Session) -> Result<String, String> {
    let summary = query(
        session,
        "SELECT inter_messages_before, inter_messages_after, reduction, kept_current FROM remap_summary()",
    )
    .await?;
    let order = regions(session).await?;
    let region_of: std::collections::HashMap<i64, i64> = order.into_iter().collect();
    let r = query(session, "SELECT rank, current_node, suggested_node FROM remap_suggestion() ORDER BY rank").await?;
    let (rank, current, suggested) = (r.ints(0), r.texts(1), r.texts(2));
    let layout = |nodes: &[Option<String>]| {
        let mut by: std::collections::BTreeMap<String, Vec<(i64, i64)>> = std::collections::BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            by.entry(n.clone().unwrap_or_else(|| "?".into()))
                .or_default()
                .push((rank[i], region_of.get(&rank[i]).copied().unwrap_or(-1)));
        }
        by.into_iter().collect::<Vec<_>>()
    };
    let before = summary.one(0);
    let after = summary.one(1).unwrap_or(0.0);
    let kept = summary.f64s(3).first().copied().flatten().unwrap_or(0.0) > 0.0;
    let text = match (before, kept) {
        (_, true) => {
            "The current placement already cuts the least traffic between nodes: remapping would not help.".to_string()
        }
        (Some(b), false) => format!(
            "Remapping ranks as below would cut inter-node messages from {} to {} ({:.0}% fewer).",
            short(b),
            short(after),
            summary.one(2).unwrap_or(0.0) * 100.0
        ),
        (None, false) => format!("The suggested placement sends {} messages between nodes.", short(after)),
    };
    let mut s = format!("<p class=\"key\">{}</p>\n", esc(&text));
    s.push_str(&figure(
        "Ranks on nodes before and after remapping",
        &drawings::placement("placement", &layout(&current), &layout(&suggested)),
        "Each column is a node and each square a rank on it, coloured by its communication region: a node of one colour keeps a region's traffic on the node. remap_suggestion() (METIS) groups ranks that exchange most messages.",
    ));
    Ok(s)
}
