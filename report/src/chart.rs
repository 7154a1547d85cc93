//! A chart of any query's result as a self-contained SVG file (`\chart FILE.svg SQL`,
//! `--chart FILE.svg`). The first column is the x axis and the shape of the result picks the
//! chart: a heatmap for (x, y, value) rows whose x repeats (a grid, such as a communication
//! matrix), bars for a text x, lines for a numeric or time x; every other numeric column is a
//! series. Each chart has a title, axes labelled with their columns' names, a legend and a
//! sentence saying how to read it. Series take the Okabe-Ito colours and the heatmap a
//! viridis-like scale, both readable by colour-blind readers (Okabe & Ito, "Color Universal
//! Design", 2008; van der Walt & Smith's viridis for matplotlib, 2015).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, SchemaRef};

/// Okabe-Ito colours, black left out (it is the axes').
pub(crate) const SERIES: [&str; 7] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442"];
/// Stops of a viridis-like scale, low to high.
const SCALE: [(u8, u8, u8); 5] = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)];

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 600.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 110.0;

/// Rows a chart draws at most: past it the rows are sampled (`Sample`). A line of 960 pixels
/// shows no more; an SVG of this many points stays below a few megabytes.
pub const MAX_ROWS: usize = 5_000;

/// An even sample of a query's rows in their order, kept in bounded memory as they stream
/// by: every `stride`-th row, the stride doubling whenever more than twice `max` rows are kept,
/// so at most `2 x max` rows are held whatever the query gives, and at most `max` drawn.
#[derive(Debug)]
pub struct Sample {
    max: usize,
    stride: usize,
    seen: usize,
    kept: Vec<RecordBatch>,
    kept_rows: usize,
}

impl Sample {
    pub fn new(max: usize) -> Self {
        Sample { max: max.max(1), stride: 1, seen: 0, kept: Vec::new(), kept_rows: 0 }
    }

    /// Take the rows of `batch` that fall on the stride.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), String> {
        let first = (self.stride - self.seen % self.stride) % self.stride;
        self.seen += batch.num_rows();
        let rows: Vec<u32> = (first..batch.num_rows()).step_by(self.stride).map(|i| i as u32).collect();
        if rows.is_empty() {
            return Ok(());
        }
        let taken = if rows.len() == batch.num_rows() {
            batch.clone()
        } else {
            let indices = arrow::array::UInt32Array::from(rows);
            arrow::compute::take_record_batch(batch, &indices).map_err(|e| e.to_string())?
        };
        self.kept_rows += taken.num_rows();
        self.kept.push(taken);
        while self.kept_rows > 2 * self.max {
            self.halve()?;
        }
        Ok(())
    }

    /// Keep every other kept row (those on the doubled stride).
    fn halve(&mut self) -> Result<(), String> {
        let Some(schema) = self.kept.first().map(RecordBatch::schema) else { return Ok(()) };
        let all = arrow::compute::concat_batches(&schema, &self.kept).map_err(|e| e.to_string())?;
        let indices = arrow::array::UInt32Array::from_iter_values((0..all.num_rows() as u32).step_by(2));
        let half = arrow::compute::take_record_batch(&all, &indices).map_err(|e| e.to_string())?;
        self.kept_rows = half.num_rows();
        self.kept = vec![half];
        self.stride *= 2;
        Ok(())
    }

    /// The rows kept (at most `max`), the rows seen and the stride of those kept.
    pub fn finish(mut self) -> Result<(Vec<RecordBatch>, usize, usize), String> {
        while self.kept_rows > self.max {
            self.halve()?;
        }
        Ok((self.kept, self.seen, self.stride))
    }
}

/// The shape of a chart: chosen from the result (`Auto`), or asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A heatmap for (x, y, value) rows whose x repeats, bars for a text x, lines otherwise.
    Auto,
    /// One line per numeric column over a numeric or time x.
    Line,
    /// One bar per row (per series) over x read as categories.
    Bar,
    /// A grid of (x, y, value) rows.
    Heatmap,
}

impl std::str::FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Kind::Auto),
            "line" | "lines" => Ok(Kind::Line),
            "bar" | "bars" => Ok(Kind::Bar),
            "heatmap" => Ok(Kind::Heatmap),
            _ => Err(format!("unknown chart kind '{s}': expected auto, line, bar or heatmap")),
        }
    }
}

/// The SVG of `batches` (the result of a query whose columns `schema` gives), titled `title`,
/// in the shape the result calls for.
pub fn svg(schema: &SchemaRef, batches: &[RecordBatch], title: &str) -> Result<String, String> {
    svg_as(schema, batches, title, Kind::Auto)
}

/// The SVG of `batches` drawn as `kind`; a result that cannot be drawn so is an error saying
/// what the kind needs.
pub fn svg_as(schema: &SchemaRef, batches: &[RecordBatch], title: &str, kind: Kind) -> Result<String, String> {
    let batch = arrow::compute::concat_batches(schema, batches).map_err(|e| e.to_string())?;
    if batch.num_columns() < 2 {
        return Err("\\chart: the query must give an x column and at least one numeric column".into());
    }
    if batch.num_rows() == 0 {
        return Err("\\chart: the query returned no rows: nothing to draw".into());
    }
    let x = batch.column(0);
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let is_text = |c: &ArrayRef| matches!(text_type(c.data_type()), Some(true));
    let numeric = |c: &ArrayRef| matches!(text_type(c.data_type()), Some(false));
    let grid = batch.num_columns() == 3 && numeric(batch.column(2));
    match kind {
        Kind::Heatmap if !grid => {
            return Err(format!(
                "chart kind 'heatmap' needs three columns, x, y and a numeric value; the query gives {}",
                names.join(", ")
            ));
        }
        Kind::Heatmap => return heatmap(&batch, &names, title),
        Kind::Auto if grid && repeats(x) => return heatmap(&batch, &names, title),
        _ => {}
    }
    let series: Vec<usize> = (1..batch.num_columns()).filter(|&i| numeric(batch.column(i))).collect();
    if series.is_empty() {
        return Err(format!(
            "\\chart: no numeric column to draw after the x column '{}' (columns: {})",
            names[0],
            names.join(", ")
        ));
    }
    match kind {
        Kind::Line if !numeric(x) => Err(format!(
            "chart kind 'line' needs a numeric or time x column; '{}' is {}: draw it as kind 'bar'",
            names[0],
            x.data_type()
        )),
        Kind::Line => lines(&batch, &names, &series, title),
        Kind::Bar if is_text(x) || numeric(x) => bars(&batch, &names, &series, title),
        _ if is_text(x) => bars(&batch, &names, &series, title),
        _ if numeric(x) => lines(&batch, &names, &series, title),
        _ => {
            Err(format!("\\chart: the x column '{}' is {}: expected text, a number or a time", names[0], x.data_type()))
        }
    }
}

/// Some(true) for text, Some(false) for numbers and times, None for anything else.
fn text_type(t: &DataType) -> Option<bool> {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean => Some(true),
        DataType::Dictionary(_, v) => text_type(v),
        t if t.is_numeric() => Some(false),
        DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 | DataType::Duration(_) => Some(false),
        _ => None,
    }
}

/// Whether some value of `x` comes twice.
fn repeats(x: &ArrayRef) -> bool {
    let labels = labels(x);
    let mut seen = std::collections::HashSet::new();
    labels.iter().any(|l| !seen.insert(l.clone()))
}

/// Every value as text (NULL as "NULL").
fn labels(c: &ArrayRef) -> Vec<String> {
    let text = arrow::compute::cast(c, &DataType::Utf8).unwrap_or_else(|_| c.clone());
    match text.as_string_opt::<i32>() {
        Some(s) => (0..s.len()).map(|i| if s.is_null(i) { "NULL".into() } else { s.value(i).to_string() }).collect(),
        None => (0..c.len()).map(|i| format!("row {i}")).collect(),
    }
}

/// Every value as a number (None for NULL or what is not one).
pub(crate) fn numbers(c: &ArrayRef) -> Vec<Option<f64>> {
    let as_int = match c.data_type() {
        DataType::Timestamp(_, _) | DataType::Date64 | DataType::Duration(_) => {
            arrow::compute::cast(c, &DataType::Int64).ok()
        }
        DataType::Date32 => arrow::compute::cast(c, &DataType::Int32).ok(),
        _ => None,
    };
    let source = as_int.as_ref().unwrap_or(c);
    match arrow::compute::cast(source, &DataType::Float64) {
        Ok(f) => {
            let f = f.as_primitive::<Float64Type>();
            (0..f.len()).map(|i| (f.is_valid(i) && f.value(i).is_finite()).then(|| f.value(i))).collect()
        }
        Err(_) => vec![None; c.len()],
    }
}

/// Text escaped for SVG.
pub(crate) fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// About `n` round tick values covering [lo, hi].
pub(crate) fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut k = 0.0;
    while first + k * step <= hi + step * 1e-9 && out.len() < 50 {
        out.push(first + k * step);
        k += 1.0;
    }
    out
}

/// A number shortly: 1.5k, 2M, 0.25.
pub(crate) fn short(v: f64) -> String {
    let a = v.abs();
    let (scaled, unit) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{unit}")
}

/// How the x axis of a chart is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XLabels {
    /// Numbers under the ticks: the axis title goes centred below them.
    Level,
    /// Category names slanted down to the left, as long as 18 characters: they fill the room
    /// below the axis, so its title goes at the axis's right end, clear of them.
    Slanted,
}

/// The page: frame, title, axis labels, how to read it; `body` draws inside.
fn page(title: &str, x: (&str, XLabels), y_label: &str, how: &str, body: &str, legend: &str) -> String {
    let (x_label, x_labels) = x;
    // What fits the width at the title's size.
    let title = truncate(title, 88);
    let title = title.as_str();
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>{}</title>\n<desc>{}</desc>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"30\" font-size=\"17\" font-weight=\"bold\">{}</text>\n",
        esc(title),
        esc(how),
        LEFT,
        esc(title)
    );
    s.push_str(body);
    let plot_bottom = HEIGHT - BOTTOM;
    let (x_at, y_at, anchor) = match x_labels {
        XLabels::Level => (LEFT + (WIDTH - LEFT - RIGHT) / 2.0, plot_bottom + 62.0, "middle"),
        XLabels::Slanted => (WIDTH - RIGHT + 10.0, plot_bottom + 18.0, "start"),
    };
    let _ = write!(
        s,
        "<text x=\"{x_at}\" y=\"{y_at}\" text-anchor=\"{anchor}\" font-size=\"13\">{}</text>\n<text transform=\"translate(22 {}) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n<text x=\"{LEFT}\" y=\"{}\" font-size=\"12\" fill=\"#444\">{}</text>\n",
        esc(x_label),
        TOP + (plot_bottom - TOP) / 2.0,
        esc(y_label),
        HEIGHT - 16.0,
        esc(how)
    );
    s.push_str(legend);
    s.push_str("</svg>\n");
    s
}

/// Legend entries in the right margin.
fn legend(entries: &[(String, &str)]) -> String {
    let mut s = String::new();
    let x = WIDTH - RIGHT + 20.0;
    for (k, (name, colour)) in entries.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * k as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            y - 10.0,
            x + 18.0,
            y,
            esc(name)
        );
    }
    s
}

/// Round ticks covering [lo, hi] from the one at or below `lo` to the one at or above `hi`, so
/// that the axis starts and ends on a labelled value (a line chart of values near 5 us does not
/// start, unlabelled, at its minimum, where its lowest points would read as 0).
pub(crate) fn round_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let t = ticks(lo, hi, n);
    let (Some(&a), Some(&b)) = (t.first(), t.get(1)) else { return t };
    let step = b - a;
    let (first, last) = ((lo / step).floor() as i64, (hi / step).ceil() as i64);
    (first..=last).map(|k| k as f64 * step).collect()
}

/// The y axis with its grid lines over [lo, hi], widened to round ticks at both ends; returns
/// the drawing and the map value -> y.
fn y_axis(lo: f64, hi: f64) -> (String, impl Fn(f64) -> f64) {
    let marks = round_ticks(lo, hi, 6);
    let (lo, hi) = (marks.first().copied().unwrap_or(lo).min(lo), marks.last().copied().unwrap_or(hi).max(hi));
    let (top, bottom) = (TOP, HEIGHT - BOTTOM);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let to_y = move |v: f64| bottom - (v - lo) / span * (bottom - top);
    let mut s = String::new();
    for t in marks {
        let y = to_y(t);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            short(t)
        );
    }
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{top}\" y2=\"{bottom}\" stroke=\"black\"/><line x1=\"{LEFT}\" x2=\"{}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"black\"/>",
        WIDTH - RIGHT
    );
    (s, to_y)
}

/// The range of the series' values, 0 included (bars start there).
fn value_range(columns: &[Vec<Option<f64>>], with_zero: bool) -> (f64, f64) {
    let all = columns.iter().flatten().flatten().copied();
    let (mut lo, mut hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if with_zero {
        (lo, hi) = (lo.min(0.0), hi.max(0.0));
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi)
}

fn bars(batch: &RecordBatch, names: &[String], series: &[usize], title: &str) -> Result<String, String> {
    let x = labels(batch.column(0));
    let values: Vec<Vec<Option<f64>>> = series.iter().map(|&i| numbers(batch.column(i))).collect();
    let (lo, hi) = value_range(&values, true);
    let (mut body, to_y) = y_axis(lo, hi);
    let width = (WIDTH - LEFT - RIGHT) / x.len() as f64;
    let bar = width * 0.8 / series.len() as f64;
    let every = (x.len() / 40).max(1);
    for (k, label) in x.iter().enumerate() {
        let left = LEFT + width * k as f64 + width * 0.1;
        for (j, column) in values.iter().enumerate() {
            if let Some(v) = column[k] {
                let (y0, y1) = (to_y(0.0_f64.max(lo)), to_y(v));
                let _ = writeln!(
                    body,
                    "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"><title>{}: {} = {}</title></rect>",
                    left + bar * j as f64,
                    y0.min(y1),
                    bar.max(0.5),
                    (y0 - y1).abs(),
                    SERIES[j % SERIES.len()],
                    esc(label),
                    esc(&names[series[j]]),
                    short(v)
                );
            }
        }
        if k % every == 0 {
            let cx = left + width * 0.4;
            let _ = writeln!(
                body,
                "<text transform=\"translate({cx:.1} {}) rotate(-40)\" text-anchor=\"end\">{}</text>",
                HEIGHT - BOTTOM + 14.0,
                esc(&truncate(label, 18))
            );
        }
    }
    let entries: Vec<(String, &str)> =
        series.iter().enumerate().map(|(j, &i)| (names[i].clone(), SERIES[j % SERIES.len()])).collect();
    let how = format!(
        "Bar height is the value of each column per {}{}.",
        names[0],
        if x.len() > 40 { format!("; {} of {} labels shown", x.len().div_ceil(every), x.len()) } else { String::new() }
    );
    let y_label = if series.len() == 1 { names[series[0]].clone() } else { "value".into() };
    Ok(page(title, (&names[0], XLabels::Slanted), &y_label, &how, &body, &legend(&entries)))
}

pub(crate) fn truncate(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(n - 1).collect::<String>())
    }
}

fn lines(batch: &RecordBatch, names: &[String], series: &[usize], title: &str) -> Result<String, String> {
    let xs = numbers(batch.column(0));
    let values: Vec<Vec<Option<f64>>> = series.iter().map(|&i| numbers(batch.column(i))).collect();
    let (lo, hi) = value_range(&values, false);
    let (xlo, xhi) = value_range(std::slice::from_ref(&xs), false);
    let (mut body, to_y) = y_axis(lo, hi);
    let to_x = |v: f64| LEFT + (v - xlo) / (xhi - xlo) * (WIDTH - LEFT - RIGHT);
    for t in ticks(xlo, xhi, 8) {
        let x = to_x(t);
        let _ = writeln!(
            body,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 5.0,
            HEIGHT - BOTTOM + 20.0,
            short(t)
        );
    }
    let mut order: Vec<usize> = (0..xs.len()).filter(|&i| xs[i].is_some()).collect();
    order.sort_by(|&a, &b| xs[a].unwrap_or(0.0).total_cmp(&xs[b].unwrap_or(0.0)));
    for (j, column) in values.iter().enumerate() {
        let colour = SERIES[j % SERIES.len()];
        let points: Vec<String> =
            order.iter().filter_map(|&i| Some(format!("{:.2},{:.2}", to_x(xs[i]?), to_y(column[i]?)))).collect();
        let _ = writeln!(
            body,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>",
            points.join(" "),
            esc(&names[series[j]])
        );
        if points.len() <= 60 {
            for p in &points {
                let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(body, "<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{colour}\"/>");
            }
        }
    }
    let entries: Vec<(String, &str)> =
        series.iter().enumerate().map(|(j, &i)| (names[i].clone(), SERIES[j % SERIES.len()])).collect();
    let how = format!("Each line is a column of the query against {}, in order of {}.", names[0], names[0]);
    let y_label = if series.len() == 1 { names[series[0]].clone() } else { "value".into() };
    Ok(page(title, (&names[0], XLabels::Level), &y_label, &how, &body, &legend(&entries)))
}

/// The colour of a share in [0, 1] on the scale.
pub(crate) fn scale(share: f64) -> String {
    let s = share.clamp(0.0, 1.0) * (SCALE.len() - 1) as f64;
    let k = (s.floor() as usize).min(SCALE.len() - 2);
    let f = s - k as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (SCALE[k], SCALE[k + 1]);
    format!("#{:02x}{:02x}{:02x}", mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Categories in order: numerically when they all are numbers, else as they first come.
fn categories(labels: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut known = std::collections::HashSet::new();
    for l in labels {
        if known.insert(l.clone()) {
            seen.push(l.clone());
        }
    }
    if seen.iter().all(|l| l.parse::<f64>().is_ok()) {
        seen.sort_by(|a, b| a.parse::<f64>().unwrap_or(0.0).total_cmp(&b.parse::<f64>().unwrap_or(0.0)));
    }
    seen
}

fn heatmap(batch: &RecordBatch, names: &[String], title: &str) -> Result<String, String> {
    let (xl, yl, v) = (labels(batch.column(0)), labels(batch.column(1)), numbers(batch.column(2)));
    let (xs, ys) = (categories(&xl), categories(&yl));
    let xi: BTreeMap<&str, usize> = xs.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    let yi: BTreeMap<&str, usize> = ys.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    let (lo, hi) = value_range(std::slice::from_ref(&v), false);
    let (w, h) = ((WIDTH - LEFT - RIGHT) / xs.len() as f64, (HEIGHT - TOP - BOTTOM) / ys.len() as f64);
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\" stroke=\"black\"/>",
        WIDTH - LEFT - RIGHT,
        HEIGHT - TOP - BOTTOM
    );
    for i in 0..xl.len() {
        let Some(value) = v[i] else { continue };
        let (cx, cy) = (xi[xl[i].as_str()], yi[yl[i].as_str()]);
        let _ = writeln!(
            body,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"><title>{} {}, {} {}: {}</title></rect>",
            LEFT + w * cx as f64,
            TOP + h * cy as f64,
            w.max(0.5),
            h.max(0.5),
            scale((value - lo) / (hi - lo)),
            esc(&names[0]),
            esc(&xl[i]),
            esc(&names[1]),
            esc(&yl[i]),
            short(value)
        );
    }
    let every = |n: usize| (n / 32).max(1);
    for (k, l) in xs.iter().enumerate().filter(|(k, _)| k % every(xs.len()) == 0) {
        let _ = writeln!(
            body,
            "<text transform=\"translate({:.1} {}) rotate(-40)\" text-anchor=\"end\">{}</text>",
            LEFT + w * (k as f64 + 0.5),
            HEIGHT - BOTTOM + 14.0,
            esc(&truncate(l, 14))
        );
    }
    for (k, l) in ys.iter().enumerate().filter(|(k, _)| k % every(ys.len()) == 0) {
        let _ = writeln!(
            body,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            TOP + h * (k as f64 + 0.5) + 4.0,
            esc(&truncate(l, 12))
        );
    }
    // The colour scale, low at the bottom.
    let (sx, steps) = (WIDTH - RIGHT + 20.0, 40);
    let bar_h = (HEIGHT - TOP - BOTTOM) / steps as f64;
    for k in 0..steps {
        let share = 1.0 - k as f64 / (steps - 1) as f64;
        let _ = writeln!(
            body,
            "<rect x=\"{sx}\" y=\"{:.2}\" width=\"18\" height=\"{:.2}\" fill=\"{}\"/>",
            TOP + bar_h * k as f64,
            bar_h + 0.5,
            scale(share)
        );
    }
    let _ = writeln!(
        body,
        "<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\">{}</text><text x=\"{sx}\" y=\"{}\">{}</text>",
        sx + 24.0,
        TOP + 10.0,
        short(hi),
        sx + 24.0,
        HEIGHT - BOTTOM,
        short(lo),
        TOP - 10.0,
        esc(&truncate(&names[2], 22))
    );
    let how = format!(
        "Each cell is one ({}, {}) row; its colour is {}, dark low to yellow high (missing rows stay grey).",
        names[0], names[1], names[2]
    );
    Ok(page(title, (&names[0], XLabels::Slanted), &names[1], &how, &body, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn grid() -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("src", DataType::Int64, false),
            Field::new("dst", DataType::Int64, false),
            Field::new("bytes", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![0, 0, 1, 1])),
                Arc::new(Int64Array::from(vec![0, 1, 0, 1])),
                Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])),
            ],
        )
        .unwrap();
        (schema, batch)
    }

    #[test]
    fn a_kind_asked_for_is_drawn_or_refused_saying_what_it_needs() {
        let (schema, batch) = grid();
        let auto = svg(&schema, std::slice::from_ref(&batch), "t").unwrap();
        assert_eq!(svg_as(&schema, std::slice::from_ref(&batch), "t", Kind::Heatmap).unwrap(), auto);
        let lines = svg_as(&schema, std::slice::from_ref(&batch), "t", Kind::Line).unwrap();
        let bars = svg_as(&schema, std::slice::from_ref(&batch), "t", Kind::Bar).unwrap();
        assert!(lines != auto && bars != auto && lines != bars);
        let text = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("v", DataType::Float64, false),
        ]));
        let named = RecordBatch::try_new(
            text.clone(),
            vec![Arc::new(StringArray::from(vec!["a", "b"])), Arc::new(Float64Array::from(vec![1.0, 2.0]))],
        )
        .unwrap();
        let e = svg_as(&text, std::slice::from_ref(&named), "t", Kind::Line).unwrap_err();
        assert!(e.contains("'line' needs a numeric or time x column") && e.contains("'bar'"), "{e}");
        let e = svg_as(&text, &[named], "t", Kind::Heatmap).unwrap_err();
        assert!(e.contains("three columns"), "{e}");
        assert_eq!("LINE".parse::<Kind>(), Ok(Kind::Line));
        assert!("pie".parse::<Kind>().unwrap_err().contains("auto, line, bar or heatmap"));
    }

    #[test]
    fn a_sample_keeps_evenly_spaced_rows_in_bounded_memory() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let mut sample = Sample::new(100);
        for start in (0..100_000i64).step_by(777) {
            let values: Int64Array = (start..(start + 777).min(100_000)).collect();
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap();
            sample.push(&batch).unwrap();
            assert!(sample.kept_rows <= 200);
        }
        let (kept, seen, stride) = sample.finish().unwrap();
        assert_eq!(seen, 100_000);
        let xs: Vec<i64> = kept
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<arrow::datatypes::Int64Type>().values().to_vec())
            .collect();
        assert!(xs.len() > 50 && xs.len() <= 100, "{}", xs.len());
        assert!(xs.iter().enumerate().all(|(i, &x)| x == i as i64 * stride as i64), "every {stride}th row, in order");
        // Fewer rows than the bound are all kept.
        let mut small = Sample::new(100);
        let values: Int64Array = (0..50).collect();
        small.push(&RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap()).unwrap();
        assert_eq!(small.finish().unwrap().1, 50);
    }

    fn batch(columns: Vec<(&str, ArrayRef)>) -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(
            columns.iter().map(|(n, c)| Field::new(*n, c.data_type().clone(), true)).collect::<Vec<_>>(),
        ));
        let b = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|(_, c)| c).collect()).unwrap();
        (schema, b)
    }

    #[test]
    fn the_shape_of_the_result_picks_the_chart() {
        let (s, b) = batch(vec![
            ("region", Arc::new(StringArray::from(vec!["MPI_Send", "MPI_Recv"])) as ArrayRef),
            ("calls", Arc::new(Int64Array::from(vec![10, 20]))),
        ]);
        let bars = svg(&s, &[b], "calls per region").unwrap();
        assert_eq!(bars.matches("<rect x=").count(), 2 + 1, "two bars and the legend swatch");
        assert!(bars.contains("MPI_Send") && bars.contains("Bar height"));

        let (s, b) = batch(vec![
            ("t", Arc::new(Int64Array::from(vec![3, 1, 2])) as ArrayRef),
            ("a", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))),
            ("b", Arc::new(Int64Array::from(vec![Some(5), None, Some(7)]))),
        ]);
        let lines = svg(&s, &[b], "two series").unwrap();
        assert_eq!(lines.matches("<polyline").count(), 2);
        assert!(lines.contains("Each line is a column"));

        let (s, b) = batch(vec![
            ("src", Arc::new(Int64Array::from(vec![0, 0, 1, 1])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![0, 1, 0, 1]))),
            ("bytes", Arc::new(Int64Array::from(vec![1, 2, 3, 4]))),
        ]);
        let map = svg(&s, &[b], "matrix").unwrap();
        assert!(map.contains("Each cell is one (src, dst) row"));
        assert!(map.contains(&scale(1.0)) && map.contains(&scale(0.0)));
    }

    #[test]
    fn slanted_category_names_leave_the_axis_title_clear() {
        // Names of 18 characters slant about 90 px below the axis; the title of a category
        // axis stands at the axis's right end instead of under them.
        let (s, b) = batch(vec![
            ("region", Arc::new(StringArray::from(vec!["MPI_Neighbor_allgatherv", "MPI_Recv"])) as ArrayRef),
            ("calls", Arc::new(Int64Array::from(vec![10, 20]))),
        ]);
        let bars = svg(&s, &[b], "calls per region").unwrap();
        let title = format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"start\" font-size=\"13\">region</text>",
            WIDTH - RIGHT + 10.0,
            HEIGHT - BOTTOM + 18.0
        );
        assert!(bars.contains(&title), "{bars}");
        // A numeric axis keeps its title centred under its level numbers.
        let (s, b) = batch(vec![
            ("t", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            ("a", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))),
        ]);
        let lines = svg(&s, &[b], "one series").unwrap();
        assert!(lines.contains("text-anchor=\"middle\" font-size=\"13\">t</text>"), "{lines}");
    }

    #[test]
    fn what_cannot_be_drawn_is_said() {
        let (s, b) = batch(vec![
            ("a", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("b", Arc::new(StringArray::from(vec!["y"]))),
        ]);
        assert!(svg(&s, &[b], "t").unwrap_err().contains("no numeric column"));
        let (s, b) = batch(vec![
            ("a", Arc::new(StringArray::from(Vec::<&str>::new())) as ArrayRef),
            ("b", Arc::new(Int64Array::from(Vec::<i64>::new()))),
        ]);
        assert!(svg(&s, &[b], "t").unwrap_err().contains("no rows"));
    }

    #[test]
    fn the_y_axis_starts_and_ends_on_a_labelled_tick() {
        // Values between 5.2 and 6.1 (us, say): the ticks run from at or below 5.2 to at or above
        // 6.1, so the axis's ends are labelled.
        let t = round_ticks(5.2, 6.1, 6);
        assert!(t[0] <= 5.2 && *t.last().unwrap() >= 6.1, "{t:?}");
        assert!(t.len() <= 8, "{t:?}");
        assert_eq!(round_ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 10.0, 4), vec![0.0, 2.5, 5.0, 7.5, 10.0]);
        let t = ticks(3.2, 987.0, 6);
        assert!(t.first().unwrap() >= &3.2 && t.last().unwrap() <= &987.0 && t.len() >= 4);
        assert_eq!(short(1_500_000.0), "1.5M");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(esc("a<b&\"c\""), "a&lt;b&amp;&quot;c&quot;");
    }
}
