//! The report's drawings as inline SVG: a plot frame with labelled axes, and the figures the
//! sections draw (a grid heatmap, time series with shaded periods, the region graph, the
//! level-of-detail timeline, the dependency DAG, stacked bars, a placement). Large drawings are
//! written as one `<path>` per colour, a rectangle in some fifteen bytes, so a 512-rank trace
//! stays a page of a few megabytes. Colours are Okabe-Ito's for categories and a viridis-like
//! scale for quantities ([`crate::chart`]), readable by colour-blind readers.

use std::fmt::Write;

use crate::chart::{SERIES, esc, scale, short, ticks, truncate};

/// Grey for "everything else" in categorical legends.
pub const OTHER: &str = "#BBBBBB";

/// A plot area inside an SVG of `width` x `height`.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    pub fn new(width: f64, height: f64) -> Self {
        Frame { width, height, left: 70.0, right: 170.0, top: 16.0, bottom: 52.0 }
    }

    pub fn plot_width(&self) -> f64 {
        self.width - self.left - self.right
    }

    pub fn plot_height(&self) -> f64 {
        self.height - self.top - self.bottom
    }

    /// x of `v` on [lo, hi].
    pub fn x(&self, v: f64, lo: f64, hi: f64) -> f64 {
        self.left + if hi > lo { (v - lo) / (hi - lo) * self.plot_width() } else { 0.0 }
    }

    /// y of `v` on [lo, hi] (hi at the top).
    pub fn y(&self, v: f64, lo: f64, hi: f64) -> f64 {
        self.top + self.plot_height() - if hi > lo { (v - lo) / (hi - lo) * self.plot_height() } else { 0.0 }
    }

    /// The opening tag, with the figure's title for screen readers.
    pub fn open(&self, title: &str) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\"><title>{t}</title>\n",
            w = self.width,
            h = self.height,
            t = esc(title)
        )
    }

    /// Axes: ticks on both, the x label below and the y label at the left.
    pub fn axes(&self, x: (f64, f64, &str), y: (f64, f64, &str)) -> String {
        let mut s = String::new();
        let (bottom, right) = (self.top + self.plot_height(), self.left + self.plot_width());
        let _ = writeln!(
            s,
            "<path d=\"M{l} {t}V{b}H{r}\" fill=\"none\" stroke=\"#333\"/>",
            l = self.left,
            t = self.top,
            b = bottom,
            r = right
        );
        for v in ticks(x.0, x.1, 8).into_iter().filter(|_| x.1 > x.0) {
            let px = self.x(v, x.0, x.1);
            let _ = writeln!(
                s,
                "<path d=\"M{px:.1} {bottom}v4\" stroke=\"#333\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                bottom + 16.0,
                short(v)
            );
        }
        for v in ticks(y.0, y.1, 5).into_iter().filter(|_| y.1 > y.0) {
            let py = self.y(v, y.0, y.1);
            let _ = writeln!(
                s,
                "<path d=\"M{} {py:.1}h4\" stroke=\"#333\"/><path d=\"M{} {py:.1}H{right}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.left - 4.0,
                self.left,
                self.left - 7.0,
                py + 4.0,
                short(v)
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"label\">{}</text><text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\" class=\"label\">{}</text>",
            self.left + self.plot_width() / 2.0,
            self.height - 12.0,
            esc(x.2),
            self.top + self.plot_height() / 2.0,
            esc(y.2)
        );
        s
    }

    /// Legend entries (swatch, text) in the right margin from row `first`.
    pub fn legend(&self, entries: &[(String, String)], first: usize) -> String {
        self.faint_legend(entries, first, 1.0)
    }

    /// Legend entries whose swatches are drawn at `opacity`, as shaded areas are.
    pub fn faint_legend(&self, entries: &[(String, String)], first: usize, opacity: f64) -> String {
        let mut s = String::new();
        let x = self.width - self.right + 14.0;
        for (k, (name, colour)) in entries.iter().enumerate() {
            let y = self.top + 14.0 + 18.0 * (k + first) as f64;
            let _ = writeln!(
                s,
                "<rect x=\"{x}\" y=\"{}\" width=\"11\" height=\"11\" fill=\"{colour}\" fill-opacity=\"{opacity}\"/><text x=\"{}\" y=\"{y}\">{}</text>",
                y - 10.0,
                x + 16.0,
                esc(&truncate(name, 20))
            );
        }
        s
    }

    /// The colour scale from `lo` to `hi` in the right margin, labelled `what`.
    pub fn scale_legend(&self, lo: f64, hi: f64, what: &str) -> String {
        let mut s = String::new();
        let x = self.width - self.right + 14.0;
        let top = self.top + 24.0;
        let h = (self.plot_height() - 40.0).max(40.0);
        let _ = writeln!(s, "<text x=\"{x}\" y=\"{}\">{}</text>", self.top + 8.0, esc(what));
        let steps = 24;
        for k in 0..steps {
            let share = 1.0 - k as f64 / (steps - 1) as f64;
            let _ = write!(
                s,
                "<rect x=\"{x}\" y=\"{:.1}\" width=\"14\" height=\"{:.1}\" fill=\"{}\"/>",
                top + h * k as f64 / steps as f64,
                h / steps as f64 + 0.5,
                scale(share)
            );
        }
        let _ = writeln!(
            s,
            "\n<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\">{}</text>",
            x + 20.0,
            top + 8.0,
            short(hi),
            x + 20.0,
            top + h,
            short(lo)
        );
        s
    }
}

/// Rectangles gathered by colour, written as one path per colour.
#[derive(Debug, Default)]
pub struct Rects {
    by_colour: std::collections::BTreeMap<String, String>,
}

impl Rects {
    pub fn add(&mut self, colour: &str, x: f64, y: f64, w: f64, h: f64) {
        let d = self.by_colour.entry(colour.to_string()).or_default();
        let _ = write!(d, "M{x:.1} {y:.1}h{w:.1}v{h:.1}h{:.1}z", -w);
    }

    pub fn svg(&self) -> String {
        let mut s = String::new();
        for (colour, d) in &self.by_colour {
            let _ = writeln!(s, "<path fill=\"{colour}\" d=\"{d}\"/>");
        }
        s
    }
}

/// One of `levels` steps of the scale for a share in [0, 1], so cells of a colour share a path.
pub fn stepped(share: f64, levels: usize) -> String {
    let k = (share.clamp(0.0, 1.0) * (levels - 1) as f64).round();
    scale(k / (levels - 1) as f64)
}

/// The colour of category `k` of the legend; categories beyond the palette are grey.
pub fn category(k: usize) -> &'static str {
    SERIES.get(k).copied().unwrap_or(OTHER)
}

/// A grid heatmap: `cells` (column index, row index, value) over `labels` on both axes (the
/// same order), values coloured on a scale from 0 to the largest.
pub fn heatmap(title: &str, labels: &[String], cells: &[(usize, usize, f64)], axis: &str, what: &str) -> String {
    let n = labels.len().max(1);
    let mut f = Frame::new(760.0, 0.0);
    f.left = 90.0;
    f.bottom = 80.0;
    let side = f.plot_width();
    f.height = f.top + side + f.bottom;
    let cell = side / n as f64;
    let hi = cells.iter().map(|c| c.2).fold(0.0, f64::max);
    let mut s = f.open(title);
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{side}\" height=\"{side}\" fill=\"#f4f4f4\" stroke=\"#333\"/>",
        f.left, f.top
    );
    let mut rects = Rects::default();
    for &(c, r, v) in cells {
        if v > 0.0 {
            let colour = stepped(if hi > 0.0 { v / hi } else { 0.0 }, 16);
            rects.add(&colour, f.left + cell * c as f64, f.top + cell * r as f64, cell.max(0.6), cell.max(0.6));
        }
    }
    s.push_str(&rects.svg());
    let every = (n / 24).max(1);
    for (k, l) in labels.iter().enumerate().filter(|(k, _)| k % every == 0) {
        let at = cell * (k as f64 + 0.5);
        let _ = writeln!(
            s,
            "<text transform=\"translate({:.1} {}) rotate(-50)\" text-anchor=\"end\" class=\"small\">{}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"small\">{}</text>",
            f.left + at,
            f.top + side + 12.0,
            esc(&truncate(l, 12)),
            f.left - 5.0,
            f.top + at + 3.0,
            esc(&truncate(l, 12))
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"label\">receiver: {}</text><text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\" class=\"label\">sender: {}</text>",
        f.left + side / 2.0,
        f.height - 8.0,
        esc(axis),
        f.top + side / 2.0,
        esc(axis)
    );
    s.push_str(&f.scale_legend(0.0, hi, what));
    s.push_str("</svg>");
    s
}

/// A shaded period of a time series: [from, to), its colour and its legend name.
#[derive(Debug, Clone)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub colour: &'static str,
    pub name: String,
}

/// A line of a time series: its name, colour and (x, y) points.
pub type Series<'a> = (String, &'a str, Vec<(f64, f64)>);

/// Lines over time (x in ms) with shaded bands behind them.
pub fn time_series(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    bands: &[Band],
    reference: Option<(f64, &str)>,
) -> String {
    let f = Frame::new(960.0, 380.0);
    let xs = series.iter().flat_map(|s| s.2.iter().map(|p| p.0)).chain(bands.iter().flat_map(|b| [b.from, b.to]));
    let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let ys = series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).chain(reference.map(|r| r.0));
    let y1 = ys.fold(0.0, f64::max) * 1.05;
    let (x0, x1, y1) = if x0.is_finite() { (x0, x1, y1.max(1e-9)) } else { (0.0, 1.0, 1.0) };
    let mut s = f.open(title);
    for b in bands {
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.28\"><title>{}</title></rect>",
            f.x(b.from, x0, x1),
            f.top,
            (f.x(b.to, x0, x1) - f.x(b.from, x0, x1)).max(1.0),
            f.plot_height(),
            b.colour,
            esc(&b.name)
        );
    }
    s.push_str(&f.axes((x0, x1, x_label), (0.0, y1, y_label)));
    if let Some((v, name)) = reference {
        let y = f.y(v, 0.0, y1);
        let _ = writeln!(
            s,
            "<path d=\"M{} {y:.1}h{}\" stroke=\"#555\" stroke-dasharray=\"5 4\"/><text x=\"{}\" y=\"{:.1}\" class=\"small\">{}</text>",
            f.left,
            f.plot_width(),
            f.left + 4.0,
            y - 4.0,
            esc(name)
        );
    }
    let mut legend = Vec::new();
    for (name, colour, points) in series {
        let mut d = String::new();
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(d, "{}{:.1} {:.1}", if i == 0 { "M" } else { "L" }, f.x(*x, x0, x1), f.y(*y, 0.0, y1));
        }
        let _ = writeln!(s, "<path d=\"{d}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>");
        legend.push((name.clone(), colour.to_string()));
    }
    s.push_str(&f.legend(&legend, 0));
    // Bands' swatches as faint as the bands.
    let mut faint: Vec<(String, String)> = Vec::new();
    for b in bands {
        if !faint.iter().any(|(name, _)| *name == b.name) {
            faint.push((b.name.clone(), b.colour.to_string()));
        }
    }
    s.push_str(&f.faint_legend(&faint, legend.len(), 0.45));
    s.push_str("</svg>");
    s
}

/// Stacked bars, one per x label, one colour per series.
pub fn stacked_bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    labels: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let f = Frame::new(960.0, 380.0);
    let n = labels.len().max(1);
    let totals: Vec<f64> = (0..n).map(|i| series.iter().map(|s| s.1.get(i).copied().unwrap_or(0.0)).sum()).collect();
    let y1 = totals.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.05;
    let mut s = f.open(title);
    s.push_str(&f.axes((0.0, 0.0, x_label), (0.0, y1, y_label)));
    let w = f.plot_width() / n as f64;
    let mut rects = Rects::default();
    let mut base = vec![0.0; n];
    let mut legend = Vec::new();
    for (k, (name, values)) in series.iter().enumerate() {
        let colour = category(k);
        for (i, v) in values.iter().enumerate().take(n) {
            if *v > 0.0 {
                let (top, bottom) = (f.y(base[i] + v, 0.0, y1), f.y(base[i], 0.0, y1));
                rects.add(colour, f.left + w * i as f64, top, (w * 0.9).max(0.5), bottom - top);
                base[i] += v;
            }
        }
        legend.push((name.clone(), colour.to_string()));
    }
    s.push_str(&rects.svg());
    let every = (n / 32).max(1);
    for (i, l) in labels.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"small\">{}</text>",
            f.left + w * (i as f64 + 0.5),
            f.top + f.plot_height() + 14.0,
            esc(&truncate(l, 8))
        );
    }
    s.push_str(&f.legend(&legend, 0));
    s.push_str("</svg>");
    s
}
