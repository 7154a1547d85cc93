//! A view of the timeline is three level-of-detail queries over the visible window at the
//! page's width: `lod_calls` (per row and slot the region with the most exclusive time, Intel
//! Trace Analyzer's representative), `lod_messages` (messages merged per pair of rows and
//! slots) and `lod_collectives`. The window's calls and messages are selected before they are
//! slotted, so a narrow window reads a narrow part of the trace, and the rows are the view's
//! (`layout`), so the answer is bounded by the screen (rows x pixels), never by the trace.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type};
use commdb_analysis::columns;
use datafusion::prelude::SessionContext;
use serde_json::{Value, json};

use super::layout::{Layout, Location, Node, Opened};
use super::summary::{Cell, Mark, Summary, ViewLine};
use super::tiles::{self, Tiles};

/// Widest drawing a view is computed for.
pub const MAX_WIDTH: i64 = 8192;
/// Message lines sent for one view at most (the busiest first); the rest are counted.
pub const MAX_LINES: usize = 4000;
/// Collective marks sent for one view at most.
pub const MAX_MARKS: usize = 8000;

/// How the ranks are grouped into rows: by node, or by communication region
/// (`process_regions`: ranks that exchange messages mostly among themselves, PCLVis 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Grouping {
    #[default]
    Node,
    Region,
}

impl Grouping {
    /// The `group` parameter: node (the default) or region.
    pub fn parse(text: Option<&str>) -> Result<Grouping, String> {
        match text.unwrap_or("node") {
            "node" | "" => Ok(Grouping::Node),
            "region" => Ok(Grouping::Region),
            other => Err(format!("group: expected node or region, got '{other}'")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Grouping::Node => "node",
            Grouping::Region => "region",
        }
    }
}

/// What the server knows about the trace it serves, read once (the layout for one grouping).
#[derive(Debug, Clone)]
pub struct Facts {
    pub name: String,
    /// First event and one past the last (ns).
    pub t0: i64,
    pub t1: i64,
    pub ranks: usize,
    /// Calls in the trace.
    pub calls: i64,
    pub layout: Layout,
    pub grouping: Grouping,
}

/// Run `sql` and collect it.
pub async fn collect(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, String> {
    let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    df.collect().await.map_err(|e| e.to_string())
}

/// Column `i` of every batch as i64 (NULL as None).
fn ints(batches: &[RecordBatch], i: usize) -> Result<Vec<Option<i64>>, String> {
    Ok(columns::int64_column(batches, i).map_err(|e| e.to_string())?.iter().collect())
}

/// Column `i` of every batch as f64 (NULL as None).
fn floats(batches: &[RecordBatch], i: usize) -> Result<Vec<Option<f64>>, String> {
    let c = columns::column(batches, i, &DataType::Float64).map_err(|e| e.to_string())?;
    Ok(c.as_primitive::<Float64Type>().iter().collect())
}

/// Column `i` of every batch as text (NULL as None).
fn texts(batches: &[RecordBatch], i: usize) -> Result<Vec<Option<String>>, String> {
    Ok(columns::text_column(batches, i).map_err(|e| e.to_string())?.iter().map(|v| v.map(str::to_string)).collect())
}

/// Read the trace's name, span and layout.
pub async fn facts(ctx: &SessionContext) -> Result<Facts, String> {
    let info = collect(ctx, "SELECT name, ranks FROM trace_info").await?;
    let name = texts(&info, 0)?.into_iter().next().flatten().unwrap_or_default();
    let ranks = ints(&info, 1)?.into_iter().next().flatten().unwrap_or(0) as usize;
    let span = collect(ctx, "SELECT min(ts), max(ts) FROM events").await?;
    let (t0, t1) = match (ints(&span, 0)?.first().copied().flatten(), ints(&span, 1)?.first().copied().flatten()) {
        (Some(a), Some(b)) => (a, b + 1),
        _ => return Err("the trace has no events to draw".into()),
    };
    let r = collect(ctx, "SELECT rank, node, node_index FROM ranks ORDER BY node_index, rank").await?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut last = None;
    for ((rank, node), index) in ints(&r, 0)?.into_iter().zip(texts(&r, 1)?).zip(ints(&r, 2)?) {
        let Some(rank) = rank else { continue };
        if last != Some(index) || nodes.is_empty() {
            nodes.push(Node { name: node.unwrap_or_else(|| "(no node)".into()), ranks: Vec::new() });
            last = Some(index);
        }
        nodes.last_mut().expect("pushed").ranks.push(rank);
    }
    let l = collect(
        ctx,
        "SELECT rank, thread, kind, name FROM locations WHERE rank IN \
         (SELECT rank FROM locations GROUP BY rank HAVING count(*) > 1) ORDER BY rank, thread",
    )
    .await?;
    let mut locations: std::collections::BTreeMap<i64, Vec<Location>> = Default::default();
    for (((rank, thread), kind), name) in
        ints(&l, 0)?.into_iter().zip(ints(&l, 1)?).zip(texts(&l, 2)?).zip(texts(&l, 3)?)
    {
        let (Some(rank), Some(thread)) = (rank, thread) else { continue };
        let name = name.unwrap_or_else(|| format!("thread {thread}"));
        locations.entry(rank).or_default().push(Location { thread, kind: kind.unwrap_or_default(), name });
    }
    let calls = ints(&collect(ctx, "SELECT count(*) FROM calls").await?, 0)?.first().copied().flatten().unwrap_or(0);
    Ok(Facts { name, t0, t1, ranks, calls, layout: Layout { nodes, locations }, grouping: Grouping::Node })
}

/// The facts with the ranks grouped by communication region (`process_regions()`), each region
/// a group of rows as a node is; ranks in no region (no messages) are one more group.
pub async fn by_region(ctx: &SessionContext, facts: &Facts) -> Result<Facts, String> {
    let r = collect(ctx, "SELECT region, rank FROM process_regions() ORDER BY region, rank").await?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut placed = std::collections::BTreeSet::new();
    for (region, rank) in ints(&r, 0)?.into_iter().zip(ints(&r, 1)?) {
        let (Some(region), Some(rank)) = (region, rank) else { continue };
        let name = format!("region {region}");
        if nodes.last().is_none_or(|n| n.name != name) {
            nodes.push(Node { name, ranks: Vec::new() });
        }
        nodes.last_mut().expect("pushed").ranks.push(rank);
        placed.insert(rank);
    }
    let rest: Vec<i64> =
        facts.layout.nodes.iter().flat_map(|n| n.ranks.iter().copied()).filter(|r| !placed.contains(r)).collect();
    if !rest.is_empty() {
        nodes.push(Node { name: "no messages".into(), ranks: rest });
    }
    Ok(Facts {
        layout: Layout { nodes, locations: facts.layout.locations.clone() },
        grouping: Grouping::Region,
        ..facts.clone()
    })
}

/// A view asked for: the window [t0, t1) in ns, the width in pixels and what is opened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewRequest {
    pub t0: i64,
    pub t1: i64,
    pub width: i64,
    /// The slot width (ns).
    pub res: i64,
    pub opened: Opened,
}

impl ViewRequest {
    /// Parse and check the parameters against the run's span.
    pub fn parse(params: &dyn Fn(&str) -> Option<String>, facts: &Facts) -> Result<ViewRequest, String> {
        let number = |name: &str, default: i64| -> Result<i64, String> {
            match params(name) {
                None => Ok(default),
                Some(text) => text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .map(|x| x.round() as i64)
                    .ok_or_else(|| format!("{name}: expected a number, got '{text}'")),
            }
        };
        let (t0, t1) = (number("t0", facts.t0)?, number("t1", facts.t1)?);
        let width = number("width", 1000)?;
        if !(1..=MAX_WIDTH).contains(&width) {
            return Err(format!("width: expected 1 to {MAX_WIDTH} pixels, got {width}"));
        }
        if t1 <= t0 {
            return Err(format!("the window is empty: t1 ({t1} ns) is not after t0 ({t0} ns)"));
        }
        if t0 >= facts.t1 || t1 <= facts.t0 {
            return Err(format!(
                "the window [{t0}, {t1}) ns is outside the run, which spans [{}, {}) ns",
                facts.t0, facts.t1
            ));
        }
        let opened =
            Opened::parse(params("blocks").as_deref(), params("open").as_deref(), params("threads").as_deref())?;
        let nodes = facts.layout.nodes.len();
        if let Some(n) = opened.nodes.iter().find(|&&n| n >= nodes) {
            return Err(format!("open: node {n} does not exist; the trace has {nodes} nodes"));
        }
        let blocks = nodes.div_ceil(facts.layout.nodes_per_block());
        if let Some(b) = opened.blocks.iter().find(|&&b| b >= blocks) {
            return Err(format!("blocks: block {b} does not exist; the trace's nodes are in {blocks}"));
        }
        Ok(ViewRequest::snapped(t0, t1, width, opened))
    }

    /// The window widened to whole slots of its resolution (lod_resolution's 1-2-5 step for
    /// the width), so that views that pan share the slot grid and the cache.
    pub fn snapped(t0: i64, t1: i64, width: i64, opened: Opened) -> ViewRequest {
        let res = commdb_udfs::lod::resolution(t0, t1, width).unwrap_or(1);
        let a = t0.div_euclid(res) * res;
        let b = (t1 + res - 1).div_euclid(res) * res;
        ViewRequest { t0: a, t1: b.max(a + res), width, res, opened }
    }

    /// The slot width of the view.
    pub fn resolution(&self) -> i64 {
        self.res
    }
}

/// The SQL of the view's three queries (calls, messages, collectives); `rows` names the
/// function that sends a location to its row (`rows_udf`), `ranks` (a condition on `rank`)
/// keeps the calls of the rows that are read from the calls, and `ends` (a condition on `src`
/// and `dst`) the messages; with `latency`, the messages' latency L comes from
/// `message_latency` (the trace's criteria, made once).
pub fn view_sql(req: &ViewRequest, rows: &str, ranks: &str, ends: &str, latency: bool) -> [String; 3] {
    let (t0, t1, res) = (req.t0, req.t1, req.resolution());
    let calls = format!(
        "SELECT rank, slot_start, slot_end, region, share FROM lod_calls(rel => (\
           SELECT rank, thread, region, start_ts, end_ts, {rows}(rank, thread) AS grp FROM calls \
           WHERE start_ts < {t1} AND end_ts > {t0} AND {ranks}), \
         t0 => {t0}, t1 => {t1}, resolution_ns => {res}, per => 'group') ORDER BY rank, slot_start"
    );
    let window = format!(
        "SELECT * FROM messages WHERE send_ts >= {t0} AND send_ts < {t1} AND {ends} \
         AND {rows}(src, src_thread) <> {rows}(dst, dst_thread)"
    );
    let (latency, from) = if latency {
        (", latency", format!("message_latency(rel => ({window}))"))
    } else {
        ("", format!("({window})"))
    };
    let messages = format!(
        "SELECT src, dst, send_slot, recv_slot, messages, bytes_avg, duration_avg, first_send_ts, last_recv_ts, \
           latency_avg FROM lod_messages(rel => (\
           SELECT {rows}(src, src_thread) AS src, {rows}(dst, dst_thread) AS dst, bytes, send_ts, recv_ts, duration\
           {latency} FROM {from}), \
         t0 => {t0}, t1 => {t1}, resolution_ns => {res}) ORDER BY messages DESC, send_slot, src, dst"
    );
    let collectives = format!(
        "SELECT comm, first_slot, op, instances, duration_avg, participants FROM lod_collectives(rel => (\
           SELECT comm, instance, op, rank, begin_ts, end_ts FROM collectives \
           WHERE begin_ts < {t1} AND end_ts > {t0}), \
         t0 => {t0}, t1 => {t1}, resolution_ns => {res}) ORDER BY first_slot, comm"
    );
    [calls, messages, collectives]
}

/// The name of the row function of a view's opened nodes and ranks, registered in `ctx` the
/// first time.
pub(super) fn rows_function(ctx: &SessionContext, facts: &Facts, opened: &Opened) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (facts.grouping, opened).hash(&mut h);
    let name = format!("serve_rows_{:016x}", h.finish());
    if datafusion::execution::FunctionRegistry::udf(ctx, &name).is_err() {
        let (_, keys) = facts.layout.rows(opened);
        ctx.register_udf(super::rows_udf::udf(name.clone(), &keys));
    }
    name
}

/// A condition on `column` that holds for `ranks` (sorted): ranges of consecutive ranks.
fn rank_condition(column: &str, ranks: &[i64]) -> String {
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for &r in ranks {
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == r => last.1 = r,
            Some(last) if last.1 == r => {}
            _ => ranges.push((r, r)),
        }
    }
    if ranges.is_empty() {
        return "false".into();
    }
    let each: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| if a == b { format!("{column} = {a}") } else { format!("{column} BETWEEN {a} AND {b}") })
        .collect();
    format!("({})", each.join(" OR "))
}

/// Compute a view: its rows, the calls' representatives, the message lines and the collective
/// marks, as the page draws them. The folded rows come from `summary` when it has the view's
/// slot width; the other rows' calls and messages are read, in tiles kept in `tile_cache`. With
/// `latency`, the message lines carry their mean latency L.
pub async fn view(
    ctx: &SessionContext,
    facts: &Facts,
    req: &ViewRequest,
    summary: Option<&Summary>,
    latency: bool,
    tile_cache: &Tiles,
) -> Result<Value, String> {
    let started = std::time::Instant::now();
    let (rows, keys) = facts.layout.rows(&req.opened);
    let rows_of = rows_function(ctx, facts, &req.opened);
    // The rows the overview has, and the ranks of the others, whose calls and messages are read.
    let (mut from_summary, mut read, mut overview_rows) = (Vec::new(), "true".to_string(), 0);
    let (mut summary_lines, mut ends, mut line_res) = (Vec::new(), "true".to_string(), req.res);
    if let Some(s) = summary {
        let matched: Vec<(usize, usize)> =
            s.matching(&rows).into_iter().enumerate().filter_map(|(v, m)| Some((v, m?))).collect();
        let summarized: std::collections::HashSet<usize> = matched.iter().map(|m| m.0).collect();
        let mut ranks: Vec<i64> =
            keys.iter().filter(|(_, row)| !summarized.contains(row)).map(|((rank, _), _)| *rank).collect();
        ranks.sort_unstable();
        if let Some(cells) = s.cells(&matched, req.t0, req.t1, req.res) {
            read = rank_condition("rank", &ranks);
            from_summary = cells;
            overview_rows = matched.len();
        }
        if let Some((width, lines)) = s.lines(&matched, req.t0, req.t1, req.res) {
            let (src, dst) = (rank_condition("src", &ranks), rank_condition("dst", &ranks));
            ends = if ranks.is_empty() { "false".into() } else { format!("({src} OR {dst})") };
            summary_lines = lines;
            line_res = width;
        }
    }
    // The rows read: their calls and message lines in tiles, those not kept computed by one
    // query over the span of them; collective marks (without the overview) over the window.
    let ks = tiles::covering(req.t0, req.t1, req.res);
    let scope: Arc<str> = format!("{rows_of}|{read}|{ends}|{latency}|{}", req.res).into();
    let mut have = tile_cache.get(&scope, ks.clone());
    // From the first tile not kept to the last (kept ones between are computed again).
    let missing = |k: &i64| have[(k - ks.start) as usize].is_none();
    let computing = match (ks.clone().find(missing), ks.clone().rev().find(missing)) {
        (Some(a), Some(b)) => a..b + 1,
        _ => ks.start..ks.start,
    };
    let tiles_computed = computing.clone().count();
    let tiles_cached = have.len() - tiles_computed;
    let (a, b) = tiles::window(&computing, req.res);
    let span = ViewRequest { t0: a, t1: b, ..req.clone() };
    let [calls_sql, messages_sql, _] = view_sql(&span, &rows_of, &read, &ends, latency);
    let [_, _, collectives_sql] = view_sql(req, &rows_of, &read, &ends, latency);
    let maybe = |skip: bool, sql: String| async move { if skip { Ok(Vec::new()) } else { collect(ctx, &sql).await } };
    let nothing = computing.is_empty();
    let (calls, messages, collectives) = tokio::try_join!(
        maybe(nothing || read == "false", calls_sql),
        maybe(nothing || ends == "false", messages_sql),
        maybe(summary.is_some(), collectives_sql)
    )?;
    if !nothing {
        let computed = tiles::split(read_cells(&calls)?, read_lines(&messages)?, &computing, req.res);
        for (k, tile) in computing.clone().zip(computed) {
            let tile = Arc::new(tile);
            tile_cache.keep(&scope, k, tile.clone());
            have[(k - ks.start) as usize] = Some(tile);
        }
    }
    let within = |slot: i64| slot >= req.t0 && slot < req.t1;
    let mut all: Vec<Cell> = from_summary;
    // Each line with the width of its slots (the overview's may be coarser than the view's).
    let mut lines: Vec<(ViewLine, i64)> = summary_lines.into_iter().map(|l| (l, line_res)).collect();
    let overview_lines = lines.len();
    for tile in have.iter().flatten() {
        all.extend(tile.cells.iter().filter(|c| within(c.1)).cloned());
        lines.extend(tile.lines.iter().filter(|l| within(l.2)).map(|l| (*l, req.res)));
    }
    all.sort_by_key(|c| (c.0, c.1));
    // Calls: [row, slot_start, slot_end, region index, share], regions named once.
    let mut region_index: HashMap<String, usize> = HashMap::new();
    let mut regions: Vec<String> = Vec::new();
    let mut cells = Vec::new();
    // Adjacent slots of a row with one representative become one cell (share: their mean).
    let mut open: Option<(i64, i64, i64, usize, f64, f64)> = None;
    let round = |s: f64| (s * 1000.0).round() / 1000.0;
    for (r, x, y, name, s) in all {
        let next = regions.len();
        let k = *region_index.entry(name.clone()).or_insert_with(|| {
            regions.push(name);
            next
        });
        let r = r as i64;
        let slots = ((y - x) as f64 / req.resolution() as f64).max(1.0);
        open = match open {
            Some((r0, x0, y0, k0, sum, n)) if r0 == r && k0 == k && y0 == x => {
                Some((r0, x0, y, k0, sum + s * slots, n + slots))
            }
            Some((r0, x0, y0, k0, sum, n)) => {
                cells.push(json!([r0, x0, y0, k0, round(sum / n)]));
                Some((r, x, y, k, s * slots, slots))
            }
            None => Some((r, x, y, k, s * slots, slots)),
        };
    }
    if let Some((r0, x0, y0, k0, sum, n)) = open {
        cells.push(json!([r0, x0, y0, k0, round(sum / n)]));
    }
    // Message lines: the busiest first (ties by send slot, rows and receive slot).
    let busiest = |(p, _): &(ViewLine, i64), (q, _): &(ViewLine, i64)| {
        q.4.cmp(&p.4).then_with(|| (p.2, p.0, p.1, p.3).cmp(&(q.2, q.0, q.1, q.3)))
    };
    let line_rows = lines.len();
    let merged: i64 = lines.iter().map(|l| l.0.4).sum();
    if lines.len() > MAX_LINES {
        lines.select_nth_unstable_by(MAX_LINES, busiest);
        lines.truncate(MAX_LINES);
    }
    lines.sort_unstable_by(busiest);
    let m: Vec<Value> = lines
        .iter()
        .take(MAX_LINES)
        .map(|(l, w)| json!([l.0, l.1, l.2, l.3, l.4, l.5, l.6, l.7, l.8, l.9, w]))
        .collect();
    // Collective marks: every instance by its first begin from the overview, else the
    // window's participations read.
    let marks: Vec<Mark> = match summary {
        Some(s) => s.marks(req.t0, req.t1, req.res),
        None => {
            let (comm, slot, op, n) =
                (ints(&collectives, 0)?, ints(&collectives, 1)?, texts(&collectives, 2)?, ints(&collectives, 3)?);
            let (duration, participants) = (floats(&collectives, 4)?, ints(&collectives, 5)?);
            (0..comm.len())
                .filter_map(|i| {
                    Some((comm[i]?, slot[i]?, op[i].clone()?, n[i]?, duration[i].unwrap_or(0.0), participants[i]?))
                })
                .collect()
        }
    };
    let c: Vec<Value> = marks.iter().take(MAX_MARKS).map(|m| json!([m.0, m.1, m.2, m.3, m.4, m.5])).collect();
    let marks = marks.len();
    Ok(json!({
        "t0": req.t0,
        "t1": req.t1,
        "width": req.width,
        "resolution": req.resolution(),
        "rows": rows,
        "regions": regions,
        "calls": cells,
        "messages": m,
        "message_rows": line_rows,
        "messages_in_window": merged,
        "collectives": c,
        "collective_rows": marks,
        "overview_rows": overview_rows,
        "overview_lines": overview_lines,
        "line_resolution": line_res,
        "tiles_cached": tiles_cached,
        "tiles_computed": tiles_computed,
        "elapsed_ms": started.elapsed().as_millis() as u64,
    }))
}

/// The cells of a `lod_calls` answer (row, slot start, slot end, region, share).
fn read_cells(calls: &[RecordBatch]) -> Result<Vec<Cell>, String> {
    let (row, a, b, region, share) =
        (ints(calls, 0)?, ints(calls, 1)?, ints(calls, 2)?, texts(calls, 3)?, floats(calls, 4)?);
    let mut cells = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        let (Some(r), Some(x), Some(y)) = (row[i], a[i], b[i]) else { continue };
        cells.push((r as usize, x, y, region[i].clone().unwrap_or_default(), share[i].unwrap_or(0.0)));
    }
    Ok(cells)
}

/// The message lines of a `lod_messages` answer, as `view_sql` selects its columns.
fn read_lines(messages: &[RecordBatch]) -> Result<Vec<ViewLine>, String> {
    let (src, dst, send, recv, count) =
        (ints(messages, 0)?, ints(messages, 1)?, ints(messages, 2)?, ints(messages, 3)?, ints(messages, 4)?);
    let (bytes, duration, first, last) =
        (floats(messages, 5)?, floats(messages, 6)?, ints(messages, 7)?, ints(messages, 8)?);
    let latency = floats(messages, 9)?;
    let mut lines = Vec::with_capacity(src.len());
    for i in 0..src.len() {
        let (Some(s), Some(d), Some(t), Some(n)) = (src[i], dst[i], send[i], count[i]) else { continue };
        let l = latency[i].filter(|x| !x.is_nan());
        lines.push((s as usize, d as usize, t, recv[i], n, bytes[i].unwrap_or(0.0), duration[i], first[i], last[i], l));
    }
    Ok(lines)
}

/// The call stack at `ts` on a rank's thread, outermost first: what a hover shows.
pub async fn stack_at(ctx: &SessionContext, rank: i64, thread: i64, ts: i64) -> Result<Value, String> {
    let sql = format!(
        "SELECT region, start_ts, end_ts, end_ts - start_ts AS duration, depth FROM calls \
         WHERE rank = {rank} AND thread = {thread} AND start_ts <= {ts} AND end_ts > {ts} ORDER BY depth"
    );
    let batches = collect(ctx, &sql).await?;
    Ok(json!({
        "rank": rank, "thread": thread, "ts": ts,
        "stack": super::table_json::rows(&batches, 256),
    }))
}

/// The shared text of a cache key: the window, its slot width and what is opened (views at
/// widths with one slot width are one view).
pub fn cache_key(req: &ViewRequest, grouping: Grouping) -> Arc<str> {
    let list = |set: Vec<String>| set.join(",");
    let o = &req.opened;
    let (blocks, nodes, ranks) = (
        list(o.blocks.iter().map(ToString::to_string).collect()),
        list(o.nodes.iter().map(ToString::to_string).collect()),
        list(o.ranks.iter().map(ToString::to_string).collect()),
    );
    format!("{}:{}:{}:{}:{blocks}:{nodes}:{ranks}", grouping.name(), req.t0, req.t1, req.resolution()).into()
}
