//! `commdb report A --vs B -o diff.html`: one page that draws what changed from run A (the
//! session's default trace) to run B (attached beside it), built from `compare_runs`: what got
//! slower (the differences beyond noise by region and by rank), where (a region-by-rank map of
//! the difference of exclusive time), since which iteration (the iterations' durations in
//! both runs, the iterations that differ beyond noise shaded), and through which
//! communication (a sender-by-receiver map of the difference of transmission time). Each
//! section is computed on its own, as in the report of one run.

use std::fmt::Write;

use commdb_catalog::Session;

use super::figures::{Band, Frame, Rects};
use super::{MAX_GROUPS, Section, Written, figure, query, table};
use crate::chart::{esc, truncate};

/// Most regions the region-by-rank map shows (those whose time changed most).
const MAX_REGIONS: usize = 24;

/// The page comparing the default trace with the trace attached as `b`.
pub async fn html(session: &mut Session, b: &str) -> Result<(String, Written), String> {
    let names = query(
        session,
        &format!("SELECT (SELECT name FROM trace_info) AS a, (SELECT name FROM {}.trace_info) AS b", quote(b)),
    )
    .await?;
    let (name_a, name_b) = (
        names.texts(0).first().cloned().flatten().unwrap_or_default(),
        names.texts(1).first().cloned().flatten().unwrap_or_default(),
    );
    let sections = vec![
        Section { id: "slower", title: "1. What got slower", body: slower(session, b).await },
        Section { id: "where", title: "2. Where", body: region_by_rank(session, b).await },
        Section { id: "since", title: "3. Since which iteration", body: since(session, b).await },
        Section { id: "through", title: "4. Through which communication", body: matrix(session, b).await },
    ];
    let title = format!("{name_a} against {name_b}");
    Ok(super::page(
        &format!("Two runs compared: {title}"),
        &format!(
            "Run a is {}, run b is {}. Differences are b minus a; a difference is named only when it exceeds run-to-run noise (compare_runs, docs/guide.md).",
            esc(&name_a),
            esc(&name_b)
        ),
        &sections,
    ))
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The differences beyond noise by region and by rank, as tables.
async fn slower(session: &mut Session, b: &str) -> Result<String, String> {
    let mut html = String::new();
    for (by, what) in [("region", "region"), ("rank", "rank")] {
        let rows = query(
            session,
            &format!(
                "SELECT key, metric, a, b, difference, ratio, share FROM compare_runs(b => {}, by => '{by}') WHERE significant LIMIT 12",
                text(b)
            ),
        )
        .await?;
        let mut cells = vec![vec![
            what.to_string(),
            "metric".into(),
            "a".into(),
            "b".into(),
            "b - a".into(),
            "b / a".into(),
            "share".into(),
        ]];
        let (keys, metrics) = (rows.texts(0), rows.texts(1));
        let (va, vb, d, r, s) = (rows.f64s(2), rows.f64s(3), rows.f64s(4), rows.f64s(5), rows.f64s(6));
        for i in 0..rows.len() {
            let metric = metrics[i].clone().unwrap_or_default();
            let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| value(&metric, v));
            cells.push(vec![
                keys[i].clone().unwrap_or_default(),
                metric.clone(),
                shown(va[i]),
                shown(vb[i]),
                shown(d[i]),
                r[i].map_or("-".into(), |r| format!("{r:.2}")),
                s[i].map_or("-".into(), |s| format!("{:.0}%", 100.0 * s)),
            ]);
        }
        let _ = writeln!(html, "<h3>By {what}</h3>");
        if rows.len() == 0 {
            let _ = writeln!(html, "<p>No difference by {what} exceeds run-to-run noise.</p>");
        } else {
            html.push_str(&table(&cells));
        }
    }
    let _ = writeln!(
        html,
        "<p class=\"how\">The differences that exceed run-to-run noise, the causes first: computation, then traffic, then MPI time, then waiting, which most often only follows another rank's computation.</p>"
    );
    Ok(html)
}

/// A value of `metric` as it reads: times with their unit, as the other pages write them.
fn value(metric: &str, v: f64) -> String {
    if metric.ends_with("_ns") {
        commdb_analysis::shown::duration(v)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The region-by-rank map of the difference of exclusive time.
async fn region_by_rank(session: &mut Session, b: &str) -> Result<String, String> {
    let rows = query(
        session,
        &format!(
            "WITH x AS (SELECT CAST(region AS VARCHAR) AS region, rank, sum(exclusive) AS t FROM calls GROUP BY 1, 2),
                  y AS (SELECT CAST(region AS VARCHAR) AS region, rank, sum(exclusive) AS t FROM {}.calls GROUP BY 1, 2)
             SELECT coalesce(x.region, y.region, '(none)'), coalesce(x.rank, y.rank),
                    CAST(coalesce(y.t, 0) - coalesce(x.t, 0) AS DOUBLE)
             FROM x FULL JOIN y ON (x.region IS NOT DISTINCT FROM y.region) AND x.rank = y.rank",
            quote(b)
        ),
    )
    .await?;
    if rows.len() == 0 {
        return Err("neither run has calls".into());
    }
    let (regions, ranks, diffs) = (rows.texts(0), rows.ints(1), rows.f64s(2));
    let mut by_region: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for i in 0..rows.len() {
        *by_region.entry(regions[i].clone().unwrap_or_default()).or_default() += diffs[i].unwrap_or(0.0).abs();
    }
    let mut chosen: Vec<(String, f64)> = by_region.into_iter().collect();
    chosen.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    chosen.truncate(MAX_REGIONS);
    let row_of: std::collections::BTreeMap<&str, usize> =
        chosen.iter().enumerate().map(|(k, (r, _))| (r.as_str(), k)).collect();
    let (lo, hi) = (ranks.iter().copied().min().unwrap_or(0), ranks.iter().copied().max().unwrap_or(0));
    let n = (hi - lo + 1) as usize;
    let groups = n.min(MAX_GROUPS);
    let mut cells: std::collections::BTreeMap<(usize, usize), f64> = std::collections::BTreeMap::new();
    for i in 0..rows.len() {
        let Some(&r) = row_of.get(regions[i].as_deref().unwrap_or_default()) else { continue };
        let c = (ranks[i] - lo) as usize * groups / n;
        *cells.entry((c, r)).or_default() += diffs[i].unwrap_or(0.0);
    }
    let columns: Vec<String> = (0..groups).map(|g| (lo + (g * n / groups) as i64).to_string()).collect();
    let labels: Vec<String> = chosen.iter().map(|c| c.0.clone()).collect();
    let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
    let svg =
        diverging("Exclusive time, b - a, per region and rank", &columns, &labels, &cells, ("rank", "region"), "ns");
    Ok(figure(
        "Where the time changed",
        &svg,
        "Each cell is the change of a region's exclusive time on a rank (ranks grouped when there are many): red got slower, blue faster, white unchanged. A region that changed on one rank only points at that rank; MPI regions that changed on every rank most often wait for it.",
    ))
}

/// The iterations' durations in both runs, with the iterations that differ beyond noise.
async fn since(session: &mut Session, b: &str) -> Result<String, String> {
    let rows = query(
        session,
        &format!(
            "SELECT CAST(key AS BIGINT) AS k, a, b, significant FROM compare_runs(b => {}, by => 'iteration')
             WHERE metric = 'duration_ns' ORDER BY k",
            text(b)
        ),
    )
    .await?;
    if rows.len() == 0 {
        return Err("no iterations were found in either run".into());
    }
    let (ks, va, vb) = (rows.ints(0), rows.f64s(1), rows.f64s(2));
    let significant = rows.texts(3);
    let points = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        ks.iter().zip(v).filter_map(|(k, v)| Some((*k as f64, (*v)? / 1e3))).collect()
    };
    let series = vec![("run a".to_string(), "#4c72b0", points(&va)), ("run b".to_string(), "#dd8452", points(&vb))];
    let bands: Vec<Band> = ks
        .iter()
        .zip(&significant)
        .filter(|(_, s)| s.as_deref() == Some("true"))
        .map(|(k, _)| Band {
            from: *k as f64 - 0.5,
            to: *k as f64 + 0.5,
            colour: "#c44e52",
            name: "differs beyond noise".into(),
        })
        .collect();
    let first = ks.iter().zip(&significant).find(|(_, s)| s.as_deref() == Some("true")).map(|(k, _)| *k);
    let svg = super::figures::time_series("Duration of each iteration", "iteration", "us", &series, &bands, None);
    let how = match first {
        Some(k) => format!(
            "The duration of each iteration (first rank's start to last rank's end) in both runs; shaded, the iterations whose difference exceeds the noise of the iteration-to-iteration variation. The first is iteration {k}."
        ),
        None => "The duration of each iteration (first rank's start to last rank's end) in both runs; no iteration differs beyond noise.".to_string(),
    };
    Ok(figure("Since which iteration", &svg, &how))
}

/// The sender-by-receiver map of the difference of transmission time.
async fn matrix(session: &mut Session, b: &str) -> Result<String, String> {
    let rows = query(
        session,
        &format!(
            "WITH x AS (SELECT src, dst, sum(duration) AS t FROM messages WHERE src IS NOT NULL AND dst IS NOT NULL GROUP BY 1, 2),
                  y AS (SELECT src, dst, sum(duration) AS t FROM {}.messages WHERE src IS NOT NULL AND dst IS NOT NULL GROUP BY 1, 2)
             SELECT coalesce(x.src, y.src), coalesce(x.dst, y.dst), CAST(coalesce(y.t, 0) - coalesce(x.t, 0) AS DOUBLE)
             FROM x FULL JOIN y ON x.src = y.src AND x.dst = y.dst",
            quote(b)
        ),
    )
    .await?;
    if rows.len() == 0 {
        return Err("neither run has matched messages".into());
    }
    let (src, dst, diffs) = (rows.ints(0), rows.ints(1), rows.f64s(2));
    if diffs.iter().all(|d| d.is_none_or(|d| d == 0.0)) {
        return Ok(
            "<p>No pair of ranks' transmission time changed: the difference is not in the messages' transfer.</p>\n"
                .into(),
        );
    }
    let lo = src.iter().chain(&dst).copied().min().unwrap_or(0);
    let hi = src.iter().chain(&dst).copied().max().unwrap_or(0);
    let n = (hi - lo + 1) as usize;
    let groups = n.min(MAX_GROUPS);
    let mut cells: std::collections::BTreeMap<(usize, usize), f64> = std::collections::BTreeMap::new();
    for i in 0..rows.len() {
        let (c, r) = ((dst[i] - lo) as usize * groups / n, (src[i] - lo) as usize * groups / n);
        *cells.entry((c, r)).or_default() += diffs[i].unwrap_or(0.0);
    }
    let labels: Vec<String> = (0..groups).map(|g| (lo + (g * n / groups) as i64).to_string()).collect();
    let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
    let svg = diverging(
        "Transmission time, b - a, per sender and receiver",
        &labels,
        &labels,
        &cells,
        ("receiver", "sender"),
        "ns",
    );
    Ok(figure(
        "Through which communication",
        &svg,
        "Each cell is the change of the total transmission time of the messages from a sender (row) to a receiver (column): red got slower, blue faster. Rows and columns that change together point at a rank or a node; a change of every pair across nodes at the network or the placement.",
    ))
}

/// A grid of `cells` (column, row, value) over `columns` and `rows`, coloured on a diverging
/// scale symmetric around 0: red above, blue below.
fn diverging(
    title: &str,
    columns: &[String],
    rows: &[String],
    cells: &[(usize, usize, f64)],
    axes: (&str, &str),
    what: &str,
) -> String {
    let (nc, nr) = (columns.len().max(1), rows.len().max(1));
    let mut f = Frame::new(860.0, 0.0);
    f.left = 130.0;
    f.bottom = 80.0;
    let width = f.plot_width();
    let cell_w = width / nc as f64;
    let cell_h = (width / nc as f64).clamp(8.0, 24.0);
    let height = cell_h * nr as f64;
    f.height = f.top + height + f.bottom;
    let hi = cells.iter().map(|c| c.2.abs()).fold(0.0, f64::max);
    let mut s = f.open(title);
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{width}\" height=\"{height}\" fill=\"#ffffff\" stroke=\"#333\"/>",
        f.left, f.top
    );
    let mut rects = Rects::default();
    for &(c, r, v) in cells {
        if v != 0.0 && hi > 0.0 {
            rects.add(&shade(v / hi), f.left + cell_w * c as f64, f.top + cell_h * r as f64, cell_w.max(0.6), cell_h);
        }
    }
    s.push_str(&rects.svg());
    let every = (nc / 24).max(1);
    for (k, l) in columns.iter().enumerate().filter(|(k, _)| k % every == 0) {
        let _ = writeln!(
            s,
            "<text transform=\"translate({:.1} {}) rotate(-50)\" text-anchor=\"end\" class=\"small\">{}</text>",
            f.left + cell_w * (k as f64 + 0.5),
            f.top + height + 12.0,
            esc(&truncate(l, 12))
        );
    }
    let every = (nr / 32).max(1);
    for (k, l) in rows.iter().enumerate().filter(|(k, _)| k % every == 0) {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"small\">{}</text>",
            f.left - 5.0,
            f.top + cell_h * (k as f64 + 0.5) + 3.0,
            esc(&truncate(l, 18))
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"label\">{}</text><text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\" class=\"label\">{}</text>",
        f.left + width / 2.0,
        f.height - 8.0,
        esc(axes.0),
        f.top + height / 2.0,
        esc(axes.1)
    );
    // The scale: from -hi (blue) through 0 (white) to +hi (red).
    let (x, y) = (f.left + width + 16.0, f.top);
    for k in 0..=20 {
        let v = 1.0 - k as f64 / 10.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"14\" height=\"6\" fill=\"{}\"/>",
            y + 6.0 * k as f64,
            shade(v)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" class=\"small\">+{}</text><text x=\"{}\" y=\"{}\" class=\"small\">-{}</text><text x=\"{}\" y=\"{}\" class=\"small\">{}</text>",
        x + 18.0,
        y + 6.0,
        short(hi),
        x + 18.0,
        y + 126.0,
        short(hi),
        x,
        y + 142.0,
        esc(what)
    );
    s.push_str("</svg>");
    s
}

/// A colour for `t` in [-1, 1]: blue through white to red, in 8 steps each way, so that cells
/// of a colour share a path.
fn shade(t: f64) -> String {
    let t = (t.clamp(-1.0, 1.0) * 8.0).round() / 8.0;
    let fade = |full: f64| (255.0 - (255.0 - full) * t.abs()).round() as u8;
    if t >= 0.0 {
        format!("#{:02x}{:02x}{:02x}", fade(196.0), fade(40.0), fade(40.0))
    } else {
        format!("#{:02x}{:02x}{:02x}", fade(40.0), fade(90.0), fade(196.0))
    }
}

fn short(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.1}s", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}us", v / 1e3)
    } else {
        format!("{v:.0}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_is_white_at_zero_and_saturated_at_the_ends() {
        assert_eq!(shade(0.0), "#ffffff");
        assert_eq!(shade(1.0), "#c42828");
        assert_eq!(shade(-1.0), "#285ac4");
        assert_eq!(value("compute_ns", 2_500_000.0), "2.5 ms");
        assert_eq!(value("messages", 12.0), "12");
    }
}
