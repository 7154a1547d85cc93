//! The report's drawings of structure: PCLVis's region graph (regions as circles sized by their
//! ranks, edges weighted by messages and coloured by mean latency L), Intel Trace Analyzer's
//! level-of-detail timeline (ranks x time slots coloured by each slot's representative
//! region, with message lines), PCLVis's communication-dependency DAG (nodes by rank and time
//! coloured by load balance, edges coloured by L) and a placement of ranks on nodes before and
//! after remapping. Built on `figures`.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::figures::{Frame, OTHER, Rects, category, stepped};
use crate::chart::{esc, scale, short, truncate};

/// The colour of a latency L: the scale from 1 (normal) to `max` (slowest shown).
fn latency_colour(l: f64, max: f64) -> String {
    let share = if max > 1.0 { ((l - 1.0) / (max - 1.0)).clamp(0.0, 1.0) } else { 0.0 };
    scale(share)
}

/// A region of the graph: id, ranks in it.
#[derive(Debug, Clone)]
pub struct Region {
    pub id: i64,
    pub ranks: usize,
}

/// An edge of the region graph.
#[derive(Debug, Clone)]
pub struct RegionEdge {
    pub a: i64,
    pub b: i64,
    pub messages: f64,
    pub mean_latency: Option<f64>,
}

/// Regions on a circle, their area by ranks, edges as lines whose width follows the messages
/// and whose colour follows the mean latency; a region's own traffic is its outline.
pub fn region_graph(title: &str, regions: &[Region], edges: &[RegionEdge]) -> String {
    let f = Frame::new(760.0, 560.0);
    let (cx, cy) = (f.left + f.plot_width() / 2.0, f.top + f.plot_height() / 2.0);
    let radius = f.plot_height().min(f.plot_width()) / 2.0 - 40.0;
    let n = regions.len().max(1);
    let max_ranks = regions.iter().map(|r| r.ranks).max().unwrap_or(1) as f64;
    let size = |ranks: usize| 6.0 + 28.0 * (ranks as f64 / max_ranks).sqrt() * if n > 24 { 0.5 } else { 1.0 };
    let at: BTreeMap<i64, (f64, f64, usize)> = regions
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let angle = std::f64::consts::TAU * k as f64 / n as f64 - std::f64::consts::FRAC_PI_2;
            let radius = if n == 1 { 0.0 } else { radius };
            (r.id, (cx + radius * angle.cos(), cy + radius * angle.sin(), r.ranks))
        })
        .collect();
    // The scale reaches at least L = 2 (twice the normal time), so normal traffic is not bright.
    let max_l = edges.iter().filter_map(|e| e.mean_latency).fold(2.0, f64::max);
    let max_m = edges.iter().map(|e| e.messages).fold(1.0, f64::max);
    let mut s = f.open(title);
    let mut own: BTreeMap<i64, &RegionEdge> = BTreeMap::new();
    for e in edges {
        if e.a == e.b {
            own.insert(e.a, e);
            continue;
        }
        let (Some(p), Some(q)) = (at.get(&e.a), at.get(&e.b)) else { continue };
        let _ = writeln!(
            s,
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"{}\" stroke-width=\"{:.1}\" stroke-opacity=\"0.8\"><title>regions {} to {}: {} messages, mean L {}</title></path>",
            p.0,
            p.1,
            q.0,
            q.1,
            latency_colour(e.mean_latency.unwrap_or(1.0), max_l),
            0.7 + 7.0 * e.messages / max_m,
            e.a,
            e.b,
            short(e.messages),
            e.mean_latency.map_or("-".into(), |l| format!("{l:.2}"))
        );
    }
    for r in regions {
        let (x, y, ranks) = at[&r.id];
        let inner = own.get(&r.id);
        let fill = inner.and_then(|e| e.mean_latency).map_or("#dddddd".to_string(), |l| latency_colour(l, max_l));
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{:.1}\" fill=\"{fill}\" stroke=\"#222\"><title>region {}: {ranks} ranks{}</title></circle>",
            size(ranks),
            r.id,
            inner.map_or(String::new(), |e| format!(", {} messages within", short(e.messages)))
        );
        if n <= 32 {
            let _ = writeln!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"small\">R{} ({ranks})</text>",
                y + size(ranks) + 12.0,
                r.id
            );
        }
    }
    s.push_str(&f.scale_legend(1.0, max_l, "mean L"));
    s.push_str("</svg>");
    s
}

/// One slot of the timeline: [from, to) on `rank`'s row (`lane` None: its host threads; a
/// thread: that accelerator stream's row below it) in `region`.
#[derive(Debug, Clone)]
pub struct Slot {
    pub from: f64,
    pub to: f64,
    pub rank: i64,
    pub lane: Option<i64>,
    pub region: String,
}

/// A message line: from (send time, rank) to (receive time, rank), with the messages it merges.
#[derive(Debug, Clone)]
pub struct Line {
    pub send: f64,
    pub src: i64,
    pub recv: f64,
    pub dst: i64,
}

/// An arrow from a launch on a rank's host row to its kernel's start on a stream's row.
#[derive(Debug, Clone)]
pub struct Flow {
    pub launch: f64,
    pub rank: i64,
    pub start: f64,
    pub lane: i64,
}

/// A row of the timeline: a rank's host threads (`lane` None) or one of its streams.
#[derive(Debug, Clone)]
pub struct Row {
    pub rank: i64,
    pub lane: Option<i64>,
    pub label: String,
}

/// Colour of the launch arrows.
const FLOW: &str = "#882255";

/// Rows x time, each slot coloured by its representative region (the `named` regions get the
/// palette, the rest grey), message lines between host rows and launch arrows from a host row
/// to a stream's row on top.
pub fn timeline(title: &str, slots: &[Slot], lines: &[Line], flows: &[Flow], named: &[String], rows: &[Row]) -> String {
    let n = rows.len().max(1) as f64;
    let mut row = (560.0 / n).clamp(0.6, 14.0);
    let mut f = Frame::new(960.0, 0.0);
    // Tall enough for the rows and for the legend (the named regions, other regions, messages
    // and the launches' arrows, 18 px each), the rows sharing the height.
    let legend = f.top + 24.0 + 18.0 * (named.len() + 3) as f64 - f.top - f.bottom;
    row = row.max(legend / n);
    f.height = f.top + f.bottom + row * n;
    let index: BTreeMap<(i64, Option<i64>), usize> =
        rows.iter().enumerate().map(|(i, r)| ((r.rank, r.lane), i)).collect();
    let (t0, t1) = slots.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| (a.min(s.from), b.max(s.to)));
    let (t0, t1) = if t0.is_finite() { (t0, t1) } else { (0.0, 1.0) };
    let colour_of: BTreeMap<&str, &str> = named.iter().enumerate().map(|(k, n)| (n.as_str(), category(k))).collect();
    let mut s = f.open(title);
    let mut rects = Rects::default();
    for slot in slots {
        let Some(&i) = index.get(&(slot.rank, slot.lane)) else { continue };
        let colour = colour_of.get(slot.region.as_str()).copied().unwrap_or(OTHER);
        let (x0, x1) = (f.x(slot.from, t0, t1), f.x(slot.to, t0, t1));
        rects.add(colour, x0, f.top + row * i as f64, (x1 - x0).max(0.4), row);
    }
    s.push_str(&rects.svg());
    let centre = |i: usize| f.top + row * (i as f64 + 0.5);
    let mut d = String::new();
    for l in lines {
        let (Some(&a), Some(&b)) = (index.get(&(l.src, None)), index.get(&(l.dst, None))) else { continue };
        let _ = write!(d, "M{:.1} {:.1}L{:.1} {:.1}", f.x(l.send, t0, t1), centre(a), f.x(l.recv, t0, t1), centre(b));
    }
    if !d.is_empty() {
        let _ =
            writeln!(s, "<path d=\"{d}\" stroke=\"#000\" stroke-opacity=\"0.5\" stroke-width=\"0.7\" fill=\"none\"/>");
    }
    let mut d = String::new();
    for fl in flows {
        let (Some(&a), Some(&b)) = (index.get(&(fl.rank, None)), index.get(&(fl.rank, Some(fl.lane)))) else {
            continue;
        };
        let _ =
            write!(d, "M{:.1} {:.1}L{:.1} {:.1}", f.x(fl.launch, t0, t1), centre(a), f.x(fl.start, t0, t1), centre(b));
    }
    if !d.is_empty() {
        let _ = writeln!(
            s,
            "<path d=\"{d}\" stroke=\"{FLOW}\" stroke-opacity=\"0.7\" stroke-width=\"0.8\" fill=\"none\"/>"
        );
    }
    let streams = rows.iter().any(|r| r.lane.is_some());
    let what = if streams { "rank, streams" } else { "rank" };
    s.push_str(&f.axes((t0, t1, "time (ms)"), (0.0, 0.0, what)));
    let every = (rows.len() / 24).max(1);
    for (i, r) in rows.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"small\">{}</text>",
            f.left - 4.0,
            centre(i) + 3.0,
            esc(&r.label)
        );
    }
    let mut legend: Vec<(String, String)> =
        named.iter().enumerate().map(|(k, n)| (n.clone(), category(k).to_string())).collect();
    legend.push(("other regions".into(), OTHER.into()));
    legend.push(("messages".into(), "#777777".into()));
    if !flows.is_empty() {
        legend.push(("launch to kernel".into(), FLOW.into()));
    }
    s.push_str(&f.legend(&legend, 0));
    s.push_str("</svg>");
    s
}

/// A node of the DAG.
#[derive(Debug, Clone)]
pub struct DagNode {
    pub id: i64,
    pub rank: i64,
    pub first: f64,
    pub last: f64,
    pub load_balance: f64,
}

/// An edge of the DAG.
#[derive(Debug, Clone)]
pub struct DagEdge {
    pub from: i64,
    pub to: i64,
    pub latency: Option<f64>,
}

/// Nodes placed by rank (rows) and time (their span), coloured by load balance; edges from a
/// send's node to its receive's node coloured by the message's L.
pub fn dag(title: &str, nodes: &[DagNode], edges: &[DagEdge]) -> String {
    let mut ranks: Vec<i64> = nodes.iter().map(|n| n.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    // At most about 560 px of rows, however many ranks the period involves.
    let row = (560.0 / ranks.len().max(1) as f64).clamp(1.0, 26.0);
    let mut f = Frame::new(960.0, 0.0);
    f.height = f.top + f.bottom + row * ranks.len().max(1) as f64;
    let index: BTreeMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let (t0, t1) = nodes.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), n| (a.min(n.first), b.max(n.last)));
    let (t0, t1) = if t0.is_finite() && t1 > t0 { (t0, t1) } else { (0.0, 1.0) };
    let max_lb = nodes.iter().map(|n| n.load_balance).fold(1.0, f64::max);
    let max_l = edges.iter().filter_map(|e| e.latency).fold(2.0, f64::max);
    let place: BTreeMap<i64, (f64, f64)> = nodes
        .iter()
        .map(|n| (n.id, (f.x((n.first + n.last) / 2.0, t0, t1), f.top + row * (index[&n.rank] as f64 + 0.5))))
        .collect();
    let mut s = f.open(title);
    s.push_str(&f.axes((t0, t1, "time (ms)"), (0.0, 0.0, "rank")));
    for e in edges {
        let (Some(a), Some(b)) = (place.get(&e.from), place.get(&e.to)) else { continue };
        let _ = writeln!(
            s,
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"{}\" stroke-width=\"1.2\"/>",
            a.0,
            a.1,
            b.0,
            b.1,
            latency_colour(e.latency.unwrap_or(1.0), max_l)
        );
    }
    let r = (row / 2.0 - 0.5).clamp(1.5, 6.0);
    for n in nodes {
        let (x, y) = place[&n.id];
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{}\" stroke=\"#222\" stroke-width=\"0.5\"><title>node {} on rank {}: LB {:.2}</title></circle>",
            stepped(n.load_balance / max_lb, 12),
            n.id,
            n.rank,
            n.load_balance
        );
    }
    let every = (ranks.len() / 24).max(1);
    for (i, rank) in ranks.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"small\">{rank}</text>",
            f.left - 4.0,
            f.top + row * (i as f64 + 0.5) + 3.0
        );
    }
    s.push_str(&f.scale_legend(0.0, max_lb, "node LB / edge L"));
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" class=\"small\">edges: L 1 to {}</text>",
        f.width - f.right + 14.0,
        f.height - 8.0,
        short(max_l)
    );
    s.push_str("</svg>");
    s
}

/// Ranks on nodes: one column per node, one square per rank coloured by its communication
/// region, before (current) and after (suggested) side by side.
pub fn placement(title: &str, before: &[(String, Vec<(i64, i64)>)], after: &[(String, Vec<(i64, i64)>)]) -> String {
    let nodes = before.len().max(after.len()).max(1);
    let tallest = before.iter().chain(after).map(|n| n.1.len()).max().unwrap_or(1).max(1);
    let (grid, cell) = node_grid(nodes, tallest);
    let (block_w, block_h) = (cell * (grid.columns as f64 + 1.5), cell * (grid.rows as f64 + 1.5));
    let labelled = nodes <= 24;
    let label_room = if labelled { 14.0 } else { 0.0 };
    let node_rows = nodes.div_ceil(grid.per_row);
    let mut regions: Vec<i64> = before.iter().chain(after).flat_map(|n| n.1.iter().map(|r| r.1)).collect();
    regions.sort_unstable();
    regions.dedup();
    let legend_rows = if regions.len() <= 12 { regions.len().div_ceil(6) } else { 1 };
    let panels_h = node_rows as f64 * (block_h + label_room);
    let height = 36.0 + panels_h + 14.0 + 18.0 * legend_rows as f64 + 20.0;
    let f = Frame { width: 960.0, height: height.max(160.0), left: 20.0, right: 20.0, top: 36.0, bottom: 20.0 };
    let mut s = f.open(title);
    let colour = |region: i64| {
        let k = regions.binary_search(&region).unwrap_or(0);
        if regions.len() <= 7 { category(k).to_string() } else { scale(k as f64 / (regions.len() - 1).max(1) as f64) }
    };
    for (panel, (label, layout)) in
        [("before: current placement", before), ("after: suggested placement", after)].iter().enumerate()
    {
        let x0 = f.left + panel as f64 * (f.width - f.left - f.right) / 2.0;
        let _ = writeln!(s, "<text x=\"{x0}\" y=\"18\" class=\"label\">{}</text>", esc(label));
        let mut rects = Rects::default();
        for (k, (node, ranks)) in layout.iter().enumerate() {
            let nx = x0 + block_w * (k % grid.per_row) as f64;
            let ny = f.top + (block_h + label_room) * (k / grid.per_row) as f64;
            for (i, (_, region)) in ranks.iter().enumerate() {
                let (c, r) = (i % grid.columns, i / grid.columns);
                rects.add(&colour(*region), nx + cell * c as f64, ny + cell * r as f64, cell * 0.85, cell * 0.85);
            }
            if labelled {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" class=\"small\">{}</text>",
                    nx,
                    ny + cell * grid.rows as f64 + 10.0,
                    esc(&truncate(node, 10))
                );
            }
        }
        s.push_str(&rects.svg());
    }
    // Which colour is which region.
    let y = f.top + panels_h + 14.0;
    if regions.len() <= 12 {
        for (k, region) in regions.iter().enumerate() {
            let (x, yy) = (f.left + 150.0 * (k % 6) as f64, y + 18.0 * (k / 6) as f64);
            let name = if *region < 0 { "no region".to_string() } else { format!("region {region}") };
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"small\">{}</text>",
                yy - 9.0,
                colour(*region),
                x + 14.0,
                yy,
                esc(&name)
            );
        }
    } else {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{y:.1}\" class=\"small\">{} communication regions, coloured from the first (dark) to the last (bright), as process_regions() numbers them</text>",
            f.left,
            regions.len()
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" class=\"small\">one block per node, one square per rank, coloured by its communication region</text>",
        f.left,
        f.height - 6.0
    );
    s.push_str("</svg>");
    s
}

/// How the ranks of a node and the nodes of a panel are laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
struct NodeGrid {
    /// Squares per row and rows of a node's block.
    columns: usize,
    rows: usize,
    /// Blocks per row of a panel.
    per_row: usize,
}

/// Each node a near-square block of its ranks, the blocks wrapped into rows: the arrangement
/// that gives the largest squares within a panel of 450 x 480 px, and the square's size.
fn node_grid(nodes: usize, ranks_per_node: usize) -> (NodeGrid, f64) {
    let columns = (ranks_per_node as f64).sqrt().ceil().max(1.0) as usize;
    let rows = ranks_per_node.div_ceil(columns);
    let mut best = (NodeGrid { columns, rows, per_row: nodes }, 0.0);
    for per_row in 1..=nodes {
        let node_rows = nodes.div_ceil(per_row);
        let wide = 450.0 / (per_row as f64 * (columns as f64 + 1.5));
        let tall = 480.0 / (node_rows as f64 * (rows as f64 + 1.5));
        // Of equal squares (at the largest size drawn), the fewest rows of blocks.
        let cell = wide.min(tall).min(14.0);
        if cell >= best.1 {
            best = (NodeGrid { columns, rows, per_row }, cell);
        }
    }
    (best.0, best.1.clamp(2.0, 14.0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn many_nodes_wrap_into_rows_of_blocks_with_squares_large_enough_to_see() {
        // 512 ranks on 32 nodes of 16: 4 x 4 blocks, several rows of them.
        let (g, cell) = super::node_grid(32, 16);
        assert_eq!((g.columns, g.rows), (4, 4));
        assert!(g.per_row < 32 && cell >= 8.0, "{g:?} {cell}");
        // A handful of nodes keeps one row.
        let (g, cell) = super::node_grid(4, 16);
        assert_eq!(g.per_row, 4);
        assert!(cell >= 10.0, "{cell}");
    }
}
