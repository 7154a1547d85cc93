//! Every figure of the HTML report read as a person reads it, against SQL that computes what
//! its caption says: positions through the axis ticks, colours through the legend, and
//! hover titles, compared with queries run on their own. A figure that plots the wrong
//! numbers (an integer division, a swapped axis, a lost row) fails here.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::common::*;

/// A 16-rank trace on 4 nodes with background traffic from 2 ms to 3 ms, ranks 0 and 1
/// sending three times as many messages (so no matrix is symmetric): every section has
/// something to draw.
const TRACE: &str = "generate:ranks=16,ranks-per-node=4,iterations=20,background-traffic=2ms:3ms:4,imbalance=0-1:3";

/// The report's figures, by caption.
fn figures() -> &'static Vec<(String, String)> {
    static PAGE: OnceLock<Vec<(String, String)>> = OnceLock::new();
    PAGE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.html");
        let o = run(&["report", TRACE, "-o", path.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let html = std::fs::read_to_string(&path).unwrap();
        html.split("<figure><figcaption>")
            .skip(1)
            .map(|f| {
                let (caption, rest) = f.split_once("</figcaption>").unwrap();
                let svg = rest.split("</svg>").next().unwrap().to_string();
                (caption.replace("&amp;", "&"), svg)
            })
            .collect()
    })
}

/// The captions' beginnings of the figures the tests below check.
const CHECKED: [&str; 10] = [
    "Messages between ranks",
    "Bytes between nodes",
    "3 communication regions",
    "Latency L over time",
    "Causes of latency by time window",
    "Timeline",
    "Communication dependencies",
    "Time each rank waited",
    "Transfer efficiency over time",
    "Ranks on nodes before and after remapping",
];

#[test]
fn every_figure_of_the_report_is_checked_here() {
    for (caption, _) in figures() {
        assert!(CHECKED.iter().any(|c| caption.starts_with(c)), "no test reads the figure '{caption}'");
    }
    assert_eq!(figures().len(), CHECKED.len());
}

fn figure(starts: &str) -> &'static str {
    let all = figures();
    let found = all.iter().find(|(c, _)| c.starts_with(starts));
    &found.unwrap_or_else(|| panic!("no figure '{starts}' in {:?}", all.iter().map(|f| &f.0).collect::<Vec<_>>())).1
}

/// Rows of a query on the trace (CSV, header dropped), split at commas.
fn sql(query: &str) -> Vec<Vec<String>> {
    let o = run(&[TRACE, "-q", "--format", "csv", "-c", query]);
    assert!(o.status.success(), "{query}: {}", stderr(&o));
    stdout(&o).lines().skip(1).map(|l| l.split(',').map(str::to_string).collect()).collect()
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: '{s}'"))
}

/// Each element `<tag ...>` of `svg`: its attributes and the text up to the next tag.
fn elements<'a>(svg: &'a str, tag: &str) -> Vec<(BTreeMap<&'a str, &'a str>, &'a str)> {
    let open = format!("<{tag}");
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find(&open) {
        rest = &rest[at + open.len()..];
        if !rest.starts_with([' ', '>']) {
            continue;
        }
        let end = rest.find('>').unwrap();
        let mut attrs = BTreeMap::new();
        let mut text = &rest[..end];
        while let Some(eq) = text.find("=\"") {
            let name = text[..eq].trim();
            let value_end = text[eq + 2..].find('"').unwrap();
            attrs.insert(name, &text[eq + 2..eq + 2 + value_end]);
            text = &text[eq + 3 + value_end..];
        }
        let after = &rest[end + 1..];
        out.push((attrs, &after[..after.find('<').unwrap_or(after.len())]));
    }
    out
}

/// A number as the figures label it: `2.5`, `12k`, `3.4M`.
fn label_value(s: &str) -> Option<f64> {
    let (digits, factor) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    digits.parse::<f64>().ok().map(|v| v * factor)
}

/// The linear map from pixels to values that two of an axis's ticks give.
fn axis(ticks: &[(f64, f64)]) -> impl Fn(f64) -> f64 + use<> {
    assert!(ticks.len() >= 2, "an axis needs two ticks: {ticks:?}");
    let ((p0, v0), (p1, v1)) = (ticks[0], ticks[ticks.len() - 1]);
    move |p| v0 + (p - p0) * (v1 - v0) / (p1 - p0)
}

/// A plot's x axis: pixels to values, from the labels under its ticks.
fn x_axis(svg: &str) -> impl Fn(f64) -> f64 + use<> {
    let ticks: Vec<(f64, f64)> = elements(svg, "text")
        .iter()
        .filter(|(a, _)| a.get("text-anchor") == Some(&"middle") && !a.contains_key("class"))
        .filter_map(|(a, t)| Some((num(a.get("x")?), label_value(t)?)))
        .collect();
    axis(&ticks)
}

/// A plot's y axis: pixels to values, from the labels left of its ticks.
fn y_axis(svg: &str) -> impl Fn(f64) -> f64 + use<> {
    let ticks: Vec<(f64, f64)> = elements(svg, "text")
        .iter()
        .filter(|(a, _)| a.get("text-anchor") == Some(&"end") && !a.contains_key("class"))
        .filter_map(|(a, t)| Some((num(a.get("y")?) - 4.0, label_value(t)?)))
        .collect();
    axis(&ticks)
}

/// The points of the line drawn in `colour`.
fn line(svg: &str, colour: &str) -> Vec<(f64, f64)> {
    let paths = elements(svg, "path");
    let (attrs, _) = paths
        .iter()
        .find(|(a, _)| {
            a.get("stroke") == Some(&colour) && a.get("fill") == Some(&"none") && a.contains_key("stroke-width")
        })
        .unwrap_or_else(|| panic!("no line in {colour}"));
    attrs["d"]
        .split(['M', 'L'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (x, y) = p.split_once(' ').unwrap();
            (num(x), num(y))
        })
        .collect()
}

/// The rectangles of the paths filled in one colour (`M x y h w v h h -w z`), with it.
fn rects(svg: &str) -> Vec<(String, f64, f64, f64, f64)> {
    let mut out = Vec::new();
    for (a, _) in elements(svg, "path") {
        let (Some(fill), Some(d)) = (a.get("fill"), a.get("d")) else { continue };
        if !fill.starts_with('#') || !d.ends_with('z') {
            continue;
        }
        for r in d.split('M').filter(|r| !r.is_empty()) {
            let parts: Vec<f64> = r.split(['h', 'v', 'z', ' ']).filter(|p| !p.is_empty()).map(num).collect();
            out.push((fill.to_string(), parts[0], parts[1], parts[2], parts[3]));
        }
    }
    out
}

fn rgb(colour: &str) -> (f64, f64, f64) {
    let c = |i: usize| f64::from(u8::from_str_radix(&colour[i..i + 2], 16).unwrap());
    (c(1), c(3), c(5))
}

/// The share (0 to 1) a colour stands for on the figure's scale legend (the 24 swatches at
/// its right, the highest first): the nearest swatch's.
fn share_of(svg: &str, colour: &str) -> f64 {
    let swatches: Vec<&str> = elements(svg, "rect")
        .into_iter()
        .filter(|(a, _)| a.get("width") == Some(&"14"))
        .map(|(a, _)| a["fill"])
        .collect();
    assert_eq!(swatches.len(), 24, "the scale legend");
    let (r, g, b) = rgb(colour);
    let distance = |s: &&str| {
        let (r2, g2, b2) = rgb(s);
        (r - r2).powi(2) + (g - g2).powi(2) + (b - b2).powi(2)
    };
    let k = (0..24).min_by(|&i, &j| distance(&swatches[i]).total_cmp(&distance(&swatches[j]))).unwrap();
    1.0 - k as f64 / 23.0
}

/// Points of `plotted` (pixels) compared with `expected` (time in ms, value): each expected
/// point has a plotted one within a pixel of its time, at its value within 2% of the axis.
fn same_curve(what: &str, svg: &str, plotted: &[(f64, f64)], expected: &[(f64, f64)]) {
    let (x, y) = (x_axis(svg), y_axis(svg));
    let read: Vec<(f64, f64)> = plotted.iter().map(|(px, py)| (x(*px), y(*py))).collect();
    let top = expected.iter().map(|e| e.1).fold(0.0, f64::max);
    let ms_per_px = (x(1.0) - x(0.0)).abs();
    assert!(expected.len() > 10, "{what}: {expected:?}");
    assert_eq!(read.len(), expected.len(), "{what}: one point per bin");
    for (t, v) in expected {
        let (rt, rv) = read
            .iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .copied()
            .unwrap_or((f64::NAN, f64::NAN));
        assert!((rt - t).abs() <= ms_per_px, "{what}: no point at {t} ms (nearest {rt})");
        assert!((rv - v).abs() <= 0.02 * top, "{what} at {t} ms: the figure reads {rv}, the SQL gives {v}");
    }
}

#[test]
fn latency_over_time_plots_the_mean_latency_of_each_bin() {
    let svg = figure("Latency L over time");
    // The figure's bins: lod_resolution of the messages' span into 120.
    let expected: Vec<(f64, f64)> = sql(
        "WITH span AS (SELECT lod_resolution(min(send_ts), max(coalesce(recv_ts, send_ts)) + 1, 120) AS w FROM messages) \
         SELECT (floor(send_ts / w) + 0.5) * w / 1e6, avg(CAST(latency AS DOUBLE)) FROM message_latency(), span \
         WHERE latency IS NOT NULL AND send_ts IS NOT NULL GROUP BY 1 ORDER BY 1",
    )
    .iter()
    .map(|r| (num(&r[0]), num(&r[1])))
    .collect();
    same_curve("mean L", svg, &line(svg, "#0072B2"), &expected);
    // The injected background traffic shows: L is higher from 2 to 3 ms than before.
    let mean = |a: f64, b: f64| {
        let v: Vec<f64> = expected.iter().filter(|p| p.0 >= a && p.0 < b).map(|p| p.1).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean(2.0, 2.6) > 1.3 * mean(0.0, 1.9), "{expected:?}");
}

#[test]
fn causes_are_shaded_over_the_windows_attribution_blames() {
    let svg = figure("Causes of latency by time window");
    let x = x_axis(svg);
    // A band per window and cause, named by its hover title.
    let mut bands: Vec<(f64, f64, String)> = Vec::new();
    for band in svg.split("<rect ").skip(1).filter(|r| r.contains("fill-opacity=\"0.28\"><title>")) {
        let tag = format!("<rect {band}");
        let (a, _) = &elements(&tag, "rect")[0];
        let (from, w) = (num(a["x"]), num(a["width"]));
        let name = band.split("<title>").nth(1).unwrap().split("</title>").next().unwrap();
        bands.push((x(from), x(from + w), name.replace(' ', "_")));
    }
    let px = (x(1.0) - x(0.0)).abs();
    let mut expected = Vec::new();
    for r in sql(
        "SELECT window_start / 1e6, window_end / 1e6, cause FROM attribution() WHERE cause <> 'none' ORDER BY window_start",
    ) {
        for cause in r[2..].join(",").trim_matches('"').split(',') {
            expected.push((num(&r[0]), num(&r[1]), cause.to_string()));
        }
    }
    assert!(expected.iter().any(|w| w.2 == "background_traffic"), "{expected:?}");
    assert_eq!(bands.len(), expected.len(), "one band per window and cause: {bands:?} against {expected:?}");
    for w in &expected {
        // A band is at least a pixel wide.
        let found =
            bands.iter().any(|b| b.2 == w.2 && (b.0 - w.0).abs() <= px && (b.1 - w.1.max(w.0 + px)).abs() <= px);
        assert!(found, "no {} band over {} to {} ms: {bands:?}", w.2, w.0, w.1);
    }
}

#[test]
fn transfer_efficiency_plots_ideal_over_observed_time_per_bin() {
    let svg = figure("Transfer efficiency over time");
    let expected: Vec<(f64, f64)> = sql(
        "WITH span AS (SELECT (max(coalesce(recv_ts, send_ts)) - min(send_ts)) / 120.0 AS w FROM messages), \
         bins AS (SELECT (floor(observed_end / w) + 0.5) * w / 1e6 AS t, \
                  sum(CAST(compute_ns + mpi_ideal_ns AS DOUBLE)) AS ideal, sum(CAST(compute_ns + mpi_observed_ns AS DOUBLE)) AS observed \
                  FROM ideal_replay(), span GROUP BY 1) \
         SELECT t, ideal / observed FROM bins WHERE observed > 0 ORDER BY t",
    )
    .iter()
    .map(|r| (num(&r[0]), num(&r[1])))
    .collect();
    // Bins hold a fraction: more than 0, and at most about 1 (on the ideal network a rank
    // that got faster can wait a little longer for a partner than it did).
    assert!(expected.iter().all(|p| p.1 > 0.0 && p.1 <= 1.05), "{expected:?}");
    same_curve("transfer efficiency", svg, &line(svg, "#0072B2"), &expected);
    // The whole run's efficiency in the caption is transfer_efficiency()'s.
    let total = num(&sql("SELECT round(efficiency * 100, 1) FROM transfer_efficiency() WHERE rank IS NULL")[0][0]);
    let caption = &figures().iter().find(|f| f.0.starts_with("Transfer efficiency")).unwrap().0;
    assert!(caption.contains(&format!("(whole run: {total:.1}%)")), "{caption} against {total}");
}

#[test]
fn waiting_bars_stand_as_high_as_each_ranks_waiting() {
    let svg = figure("Time each rank waited");
    let y = y_axis(svg);
    let bars = rects(svg);
    let labels: Vec<(f64, i64)> = elements(svg, "text")
        .into_iter()
        .filter(|(a, _)| a.get("class") == Some(&"small") && a.get("text-anchor") == Some(&"middle"))
        .filter_map(|(a, t)| Some((num(a["x"]), t.parse().ok()?)))
        .collect();
    let expected: BTreeMap<i64, f64> = sql("SELECT rank, sum(wait_ns) / 1e6 FROM wait_states() GROUP BY rank")
        .iter()
        .map(|r| (num(&r[0]) as i64, num(&r[1])))
        .collect();
    assert_eq!(labels.len(), expected.len(), "a bar per rank that waited: {labels:?}");
    let top = expected.values().copied().fold(0.0, f64::max);
    for (centre, rank) in labels {
        let column: Vec<&(String, f64, f64, f64, f64)> =
            bars.iter().filter(|r| r.1 <= centre && centre <= r.1 + r.3).collect();
        let highest = column.iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
        let read = y(highest);
        assert!(
            (read - expected[&rank]).abs() <= 0.02 * top,
            "rank {rank}: the bar reads {read} ms, the SQL gives {}",
            expected[&rank]
        );
    }
}

/// A heatmap's cells as (row label, column label) and the share of the largest they show.
fn heatmap(svg: &str) -> (Vec<String>, BTreeMap<(String, String), f64>) {
    let frame: Vec<(BTreeMap<&str, &str>, &str)> =
        elements(svg, "rect").into_iter().filter(|(a, _)| a.get("fill") == Some(&"#f4f4f4")).collect();
    let (left, top, side) = (num(frame[0].0["x"]), num(frame[0].0["y"]), num(frame[0].0["width"]));
    let rows: Vec<String> = elements(svg, "text")
        .into_iter()
        .filter(|(a, _)| {
            a.get("text-anchor") == Some(&"end") && a.get("class") == Some(&"small") && a.contains_key("x")
        })
        .map(|(_, t)| t.to_string())
        .collect();
    let cell = side / rows.len() as f64;
    let mut cells = BTreeMap::new();
    for (colour, x, y, _, _) in rects(svg) {
        let (c, r) = (((x - left) / cell).round() as usize, ((y - top) / cell).round() as usize);
        cells.insert((rows[r].clone(), rows[c].clone()), share_of(svg, &colour));
    }
    (rows, cells)
}

#[test]
fn the_message_matrix_colours_each_pair_by_its_messages() {
    let svg = figure("Messages between ranks");
    let (rows, cells) = heatmap(svg);
    // Rows are labelled "RANK Rregion".
    let rank_of = |label: &str| label.split(' ').next().unwrap().to_string();
    let expected: BTreeMap<(String, String), f64> =
        sql("SELECT CAST(src AS VARCHAR), CAST(dst AS VARCHAR), count(*) FROM messages WHERE src IS NOT NULL AND dst IS NOT NULL GROUP BY 1, 2")
            .into_iter()
            .map(|r| ((r[0].clone(), r[1].clone()), num(&r[2])))
            .collect();
    assert_eq!(rows.len(), 16);
    let most = expected.values().copied().fold(0.0, f64::max);
    let shown: BTreeMap<(String, String), f64> =
        cells.into_iter().map(|((r, c), share)| ((rank_of(&r), rank_of(&c)), share)).collect();
    assert_eq!(shown.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "the pairs that sent messages");
    for (pair, n) in &expected {
        // 16 colour steps, read back against a legend of 24.
        assert!(
            (shown[pair] - n / most).abs() <= 0.11,
            "{pair:?}: {n} of at most {most} messages reads {}",
            shown[pair]
        );
    }
    // Rows run in process_regions() order.
    let regions: Vec<i64> = rows.iter().map(|l| l.split(" R").nth(1).unwrap().parse().unwrap()).collect();
    assert!(regions.windows(2).all(|w| w[0] <= w[1]), "{rows:?}");
}

#[test]
fn the_node_matrix_colours_each_pair_by_its_bytes() {
    let svg = figure("Bytes between nodes");
    let (_, cells) = heatmap(svg);
    let expected: BTreeMap<(String, String), f64> = sql(
        "SELECT CAST(src_node AS VARCHAR), CAST(dst_node AS VARCHAR), sum(bytes) FROM messages WHERE src_node IS NOT NULL AND dst_node IS NOT NULL GROUP BY 1, 2",
    )
    .into_iter()
    .map(|r| ((r[0].clone(), r[1].clone()), num(&r[2])))
    .collect();
    let most = expected.values().copied().fold(0.0, f64::max);
    assert_eq!(cells.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (pair, b) in &expected {
        assert!((cells[pair] - b / most).abs() <= 0.11, "{pair:?}: {b} of at most {most} bytes reads {}", cells[pair]);
    }
}

#[test]
fn the_region_graph_shows_region_graphs_rows() {
    let svg = figure("3 communication regions");
    let titles: Vec<&str> = elements(svg, "title").into_iter().map(|(_, t)| t).collect();
    for r in sql(
        "SELECT region_a, region_b, messages, round(mean_latency, 2) FROM region_graph() WHERE region_a <> region_b",
    ) {
        let text = format!("regions {} to {}: {} messages, mean L {}", r[0], r[1], r[2], num(&r[3]));
        assert!(titles.contains(&text.as_str()), "no edge '{text}' in {titles:?}");
    }
    for r in sql("SELECT region, count(*) FROM process_regions() GROUP BY region") {
        let prefix = format!("region {}: {} ranks", r[0], r[1]);
        assert!(titles.iter().any(|t| t.starts_with(&prefix)), "no circle '{prefix}' in {titles:?}");
    }
}

#[test]
fn the_timeline_colours_a_slot_by_the_call_that_fills_it() {
    let svg = figure("Timeline");
    let x = x_axis(svg);
    // The legend: colour to region.
    let texts = elements(svg, "text");
    let swatches: Vec<(BTreeMap<&str, &str>, &str)> =
        elements(svg, "rect").into_iter().filter(|(a, _)| a.get("width") == Some(&"11")).collect();
    let legend: BTreeMap<String, String> = swatches
        .iter()
        .map(|(a, _)| {
            let y = num(a["y"]) + 10.0;
            let name = texts.iter().find(|(t, _)| t.get("y").is_some_and(|v| (num(v) - y).abs() < 0.5)).unwrap().1;
            (a["fill"].to_string(), name.to_string())
        })
        .collect();
    // Rank 0's row is the first. A call of rank 0 that calls nothing and lasts three slots
    // (a 400th of the run each) fills the slot at its middle: that slot has its colour.
    let calls: Vec<(f64, f64, String, i64)> =
        sql("SELECT start_ts / 1e6, end_ts / 1e6, region, depth FROM calls WHERE rank = 0")
            .into_iter()
            .map(|r| (num(&r[0]), num(&r[1]), r[2].clone(), num(&r[3]) as i64))
            .collect();
    let all = rects(svg);
    let first_row = all.iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
    let row: Vec<(f64, f64, String)> = all
        .iter()
        .filter(|r| (r.2 - first_row).abs() < 0.05)
        .map(|(colour, px, _, w, _)| (x(*px), x(px + w), legend.get(colour).cloned().unwrap_or_default()))
        .collect();
    let run = calls.iter().map(|c| c.1).fold(0.0, f64::max);
    let slot = run / 400.0;
    let mut checked = 0;
    for call in &calls {
        let calls_something = calls.iter().any(|o| o.3 > call.3 && o.0 < call.1 && call.0 < o.1);
        if calls_something || call.1 - call.0 < 3.0 * slot {
            continue;
        }
        let middle = (call.0 + call.1) / 2.0;
        let shown = row.iter().find(|r| r.0 <= middle && middle < r.1).map(|r| r.2.as_str()).unwrap_or("nothing");
        assert!(shown == call.2 || shown == "other regions", "rank 0 at {middle} ms shows {shown}, inside {call:?}");
        checked += usize::from(shown == call.2);
    }
    assert!(checked >= 5, "only {checked} calls are three slots long");
}

#[test]
fn dag_nodes_carry_their_load_balance_in_the_slowest_period() {
    let svg = figure("Communication dependencies");
    // The period the figure draws: the latency_trend() period of the highest mean latency,
    // its first 300 messages.
    let period = "CREATE VIEW period AS WITH slow AS (SELECT t_start, t_end FROM latency_trend() \
                  WHERE kind <> 'compressed' ORDER BY mean_latency DESC LIMIT 1), \
                  cut AS (SELECT min(send_ts) AS at FROM (SELECT send_ts FROM messages, slow WHERE send_ts >= t_start \
                  ORDER BY send_ts LIMIT 1 OFFSET 300)) \
                  SELECT m.* FROM messages m, slow, cut WHERE m.send_ts >= slow.t_start \
                  AND m.send_ts < least(slow.t_end, coalesce(cut.at, slow.t_end))";
    let o = run(&[
        TRACE,
        "-q",
        "--format",
        "csv",
        "-c",
        period,
        "-c",
        "SELECT node_id, rank, load_balance FROM dag_nodes(rel => 'period')",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected: BTreeMap<String, (String, f64)> = stdout(&o)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((f.first()?.to_string(), (f.get(1)?.to_string(), f.get(2)?.parse().ok()?)))
        })
        .collect();
    let mut checked = 0;
    for (_, title) in elements(svg, "title") {
        let Some(rest) = title.strip_prefix("node ") else { continue };
        let (id, rest) = rest.split_once(" on rank ").unwrap();
        let (rank, lb) = rest.split_once(": LB ").unwrap();
        let (want_rank, want_lb) = &expected[id];
        assert_eq!(rank, want_rank, "node {id}");
        assert!((want_lb - num(lb)).abs() <= 0.006, "node {id}: LB {lb} against {want_lb}");
        checked += 1;
    }
    assert_eq!(checked, expected.len(), "a circle per node of the period");
}

#[test]
fn placement_squares_have_their_ranks_regions_on_each_node() {
    let svg = figure("Ranks on nodes before and after remapping");
    // Region colours from the legend under the panels.
    let texts = elements(svg, "text");
    let colour_region: BTreeMap<String, String> = elements(svg, "rect")
        .into_iter()
        .filter(|(a, _)| a.get("width") == Some(&"10"))
        .map(|(a, _)| {
            let x = num(a["x"]) + 14.0;
            let name = texts.iter().find(|(t, _)| t.get("x").is_some_and(|v| (num(v) - x).abs() < 0.5)).unwrap().1;
            (a["fill"].to_string(), name.trim_start_matches("region ").to_string())
        })
        .collect();
    // Node blocks: their label's x; a square belongs to the block whose label is left of it.
    let labels: Vec<(f64, f64, String)> = texts
        .iter()
        .filter(|(a, t)| a.get("class") == Some(&"small") && t.starts_with("node"))
        .map(|(a, t)| (num(a["x"]), num(a["y"]), t.to_string()))
        .collect();
    let half = 480.0;
    let node_of = |x: f64, y: f64| -> String {
        let panel = x >= half;
        labels
            .iter()
            .filter(|l| (l.0 >= half) == panel && l.0 <= x + 0.05 && l.1 > y)
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)))
            .map(|l| l.2.clone())
            .unwrap()
    };
    let mut shown: BTreeMap<(bool, String), Vec<String>> = BTreeMap::new();
    for (colour, x, y, _, _) in rects(svg) {
        shown.entry((x >= half, node_of(x, y))).or_default().push(colour_region[&colour].clone());
    }
    let region: BTreeMap<String, String> =
        sql("SELECT rank, region FROM process_regions()").into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let mut expected: BTreeMap<(bool, String), Vec<String>> = BTreeMap::new();
    for r in sql("SELECT rank, node FROM ranks") {
        expected.entry((false, r[1].clone())).or_default().push(region[&r[0]].clone());
    }
    for r in sql("SELECT rank, suggested_node FROM remap_suggestion()") {
        expected.entry((true, r[1].clone())).or_default().push(region[&r[0]].clone());
    }
    for v in shown.values_mut().chain(expected.values_mut()) {
        v.sort();
    }
    assert_eq!(shown, expected, "regions of the squares of each node, before and after");
}
