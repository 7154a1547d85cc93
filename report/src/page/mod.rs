//! `commdb report TRACE -o FILE.html` and `\report FILE.html`: one self-contained HTML page
//! (inline SVG and CSS, no script, nothing fetched) that answers "which ranks communicate
//! slowly, and why" for the session's default trace, built only from commdb's own SQL
//! functions: the trace's facts, the communication matrix ordered by communication region
//! (PCLVis 4.2), the region graph (4.2), latency over time with its growth and steady-high
//! periods and the attribution's causes (5.1, 6), Intel Trace Analyzer's level-of-detail
//! timeline (GPU streams as rows below their rank, with launch-to-kernel arrows), the communication-dependency DAG of the slowest period (5.3), waiting and
//! transfer efficiency (Scalasca's wait states, the ideal-network replay) and what to do
//! (attribution, rank diagnosis, remapping). Each section is computed on its own: one that
//! cannot be drawn for this trace (no nodes, no collectives) says why and the rest stands.
//! Large traces stay small pages: matrices are cut to at most 128 rank groups, timelines use
//! the level-of-detail functions at the page's resolution, drawings are one path per colour.

mod advice;
pub mod diff;
mod drawings;
mod figures;
mod structure;
mod time;

use std::fmt::Write;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use commdb_catalog::Session;

use crate::chart::esc;

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
        match self.0.columns().get(col) {
            Some(c) => crate::chart::numbers(c),
            None => Vec::new(),
        }
    }

    fn texts(&self, col: usize) -> Vec<Option<String>> {
        let a = self.cast(col, &DataType::Utf8);
        let a = a.as_string::<i32>();
        (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())).collect()
    }

    /// Integers (ranks, ids, counts), NULL as 0.
    fn ints(&self, col: usize) -> Vec<i64> {
        let a = self.cast(col, &DataType::Int64);
        let a = a.as_primitive::<Int64Type>();
        (0..a.len()).map(|i| if a.is_valid(i) { a.value(i) } else { 0 }).collect()
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

/// The report of the session's default trace as one HTML page.
pub async fn html(session: &mut Session) -> Result<(String, Written), String> {
    let info = query(session, "SELECT name, path, format, creator, ranks, locations, duration_ns, events, clock_correction, clock_violations FROM trace_info")
        .await?;
    if info.len() == 0 {
        return Err("\\report: the trace has no trace_info row".into());
    }
    let name = info.texts(0)[0].clone().unwrap_or_default();
    let mut sections = Vec::new();
    sections.push(Section { id: "overview", title: "1. Overview", body: structure::overview(session, &info).await });
    sections.push(Section {
        id: "matrix",
        title: "2. Who communicates with whom",
        body: structure::matrix(session).await,
    });
    sections.push(Section {
        id: "regions",
        title: "3. Communication regions",
        body: structure::region_graph(session).await,
    });
    sections.push(Section { id: "latency", title: "4. Latency over time", body: time::latency(session).await });
    sections.push(Section { id: "timeline", title: "5. Timeline", body: time::timeline(session).await });
    sections.push(Section {
        id: "dag",
        title: "6. Dependencies in the slowest period",
        body: time::dag(session).await,
    });
    sections.push(Section { id: "waiting", title: "7. Waiting and efficiency", body: advice::waiting(session).await });
    sections.push(Section { id: "advice", title: "8. What to do", body: advice::advice(session).await });
    Ok(page(
        &format!("Communication report: {}", esc(&name)),
        "Written by commdb from its SQL functions; every figure says how to read it. Times are from the run's start.",
        &sections,
    ))
}

/// The page of `sections` under heading `heading` (HTML) and `intro` (HTML).
fn page(heading: &str, intro: &str, sections: &[Section]) -> (String, Written) {
    let mut body = String::new();
    let mut written = Written::default();
    for s in sections {
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
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>commdb: {heading}</title>\n<style>{STYLE}</style></head>\n<body><header><h1>{heading}</h1><p>{intro} (commdb {v})</p><nav>{nav}</nav></header>\n{body}</body></html>\n",
        v = env!("CARGO_PKG_VERSION"),
        nav = sections
            .iter()
            .map(|s| format!("<a href=\"#{}\">{}</a>", s.id, esc(s.title)))
            .collect::<Vec<_>>()
            .join(" "),
    );
    written.bytes = page.len();
    (page, written)
}

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;max-width:1000px;margin:1em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}\
nav a{margin-right:.8em;font-size:.9em}figure{margin:1em 0;break-inside:avoid}\
figcaption{font-weight:bold;margin-bottom:.3em}svg{max-width:100%;height:auto;font-size:12px}\
svg .small{font-size:10px}svg .label{font-size:13px}p.how{color:#444;font-size:.92em;margin:.3em 0}\
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}\
p.missing{color:#8a4b00}.key{font-weight:bold}@media print{nav{display:none}body{max-width:none}}";
