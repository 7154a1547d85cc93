//! The overlays a user toggles on the timeline: the critical path (`critical_path()`,
//! Scalasca's), the wait states (`wait_states()`) and the windows `attribution()` blames
//! (PCLVis's cause of latency per time window, where it is not none: bands over every row).
//! Each analysis reads the whole trace, so
//! it runs once, on first demand, in the background, and is kept compactly (sorted by time);
//! a view's overlay is then the window's part, merged per row and pixel, so it is bounded by
//! the screen like the view itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::Array;
use commdb_analysis::columns::{int64_column, text_column};
use datafusion::prelude::SessionContext;
use serde_json::{Value, json};

use super::layout::RowKey;
use super::views::collect;

/// One stretch of an overlay: a location, a span and a label (region or pattern).
#[derive(Debug, Clone, Copy)]
struct Stretch {
    rank: i64,
    thread: i64,
    start: i64,
    end: i64,
    label: u32,
}

/// An analysis's stretches, sorted by start, and the latest end of each prefix (to find those
/// that reach into a window from before it, without reading every earlier one: one long
/// stretch at the start of the run would otherwise make every window read from there).
#[derive(Debug, Default)]
pub struct Stretches {
    items: Vec<Stretch>,
    labels: Vec<String>,
    /// The latest end of each prefix of `items` (never decreasing).
    reach: Vec<i64>,
}

impl Stretches {
    /// Sort the stretches by start and work out their reach.
    fn sorted(mut items: Vec<Stretch>, labels: Vec<String>) -> Stretches {
        items.sort_unstable_by_key(|s| s.start);
        let reach = items
            .iter()
            .scan(i64::MIN, |r, s| {
                *r = (*r).max(s.end);
                Some(*r)
            })
            .collect();
        Stretches { items, labels, reach }
    }

    /// The first stretch that may overlap a window from `t0` on: every one before it ended
    /// before `t0`.
    fn first_reaching(&self, t0: i64) -> usize {
        self.reach.partition_point(|&r| r < t0)
    }
}

/// Which overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Overlay {
    CriticalPath,
    Waits,
    Blamed,
}

/// The rank of a stretch that covers every row (a blamed window).
const EVERY_ROW: i64 = -1;

impl Overlay {
    pub fn parse(name: &str) -> Result<Overlay, String> {
        match name {
            "critical_path" => Ok(Overlay::CriticalPath),
            "waits" => Ok(Overlay::Waits),
            "blamed" => Ok(Overlay::Blamed),
            other => Err(format!("overlay: expected critical_path, waits or blamed, got '{other}'")),
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Overlay::CriticalPath => "SELECT rank, thread, start_ts, end_ts, kind FROM critical_path()",
            Overlay::Waits => "SELECT rank, thread, ts, ts + wait_ns, pattern FROM wait_states()",
            Overlay::Blamed => {
                "SELECT -1 AS rank, 0 AS thread, window_start, window_end, \
                 cause || ': ' || CAST(CAST(round(delayed_share * 100) AS BIGINT) AS VARCHAR) || '% of the messages delayed; ' \
                 || recommendation FROM attribution() WHERE cause <> 'none'"
            }
        }
    }
}

/// The state of one overlay's analysis.
#[derive(Debug, Clone)]
pub enum State {
    Running,
    Ready(Arc<Stretches>),
    Failed(String),
}

/// The overlays computed or being computed.
#[derive(Debug, Default, Clone)]
pub struct Overlays {
    states: Arc<Mutex<HashMap<Overlay, State>>>,
}

impl Overlays {
    /// The overlay's state, starting its analysis when it was never asked for.
    pub fn get(&self, ctx: &SessionContext, which: Overlay) -> State {
        let mut states = self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = states.get(&which) {
            return s.clone();
        }
        states.insert(which, State::Running);
        let (ctx, all) = (ctx.clone(), self.states.clone());
        tokio::spawn(async move {
            let state = match stretches(&ctx, which).await {
                Ok(s) => State::Ready(Arc::new(s)),
                Err(e) => State::Failed(e),
            };
            all.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(which, state);
        });
        State::Running
    }
}

/// Run the overlay's analysis and keep its stretches.
async fn stretches(ctx: &SessionContext, which: Overlay) -> Result<Stretches, String> {
    let batches = collect(ctx, which.sql()).await?;
    let (mut items, mut names) = (Vec::new(), Vec::new());
    let mut labels: HashMap<String, u32> = HashMap::new();
    for b in &batches {
        let one = std::slice::from_ref(b);
        let ints = |i| int64_column(one, i).map_err(|e| e.to_string());
        let (rank, thread, start, end) = (ints(0)?, ints(1)?, ints(2)?, ints(3)?);
        let label = text_column(one, 4).map_err(|e| e.to_string())?;
        for k in (0..b.num_rows()).filter(|&k| rank.is_valid(k) && start.is_valid(k) && end.is_valid(k)) {
            let text = if label.is_null(k) { "" } else { label.value(k) };
            let id = match labels.get(text) {
                Some(&id) => id,
                None => {
                    let id = names.len() as u32;
                    labels.insert(text.to_string(), id);
                    names.push(text.to_string());
                    id
                }
            };
            let s = Stretch {
                rank: rank.value(k),
                thread: if thread.is_null(k) { 0 } else { thread.value(k) },
                start: start.value(k),
                end: end.value(k).max(start.value(k)),
                label: id,
            };
            items.push(s);
        }
    }
    Ok(Stretches::sorted(items, names))
}

impl Stretches {
    /// The stretches of (rank, thread) that overlap [a, b): (label, start, end), by start.
    pub fn overlapping(&self, rank: i64, thread: i64, a: i64, b: i64) -> Vec<(String, i64, i64)> {
        let first = self.first_reaching(a);
        self.items[first..]
            .iter()
            .take_while(|x| x.start < b)
            .filter(|x| x.rank == rank && x.thread == thread && (x.end > a || (x.start == x.end && x.start >= a)))
            .map(|x| (self.labels[x.label as usize].clone(), x.start, x.end))
            .collect()
    }
}

/// The window's stretches merged per (row, pixel, label): [row, x0, x1, label, time ns],
/// consecutive pixels of one row and label joined; the stretches over every row as bands
/// [x0, x1, label].
pub fn window(s: &Stretches, keys: &[(RowKey, usize)], split: &[i64], t0: i64, t1: i64, width: i64) -> Value {
    let rows: HashMap<RowKey, usize> = keys.iter().copied().collect();
    let first = s.first_reaching(t0);
    let px = (t1 - t0) as f64 / width as f64;
    // (row, label) -> pixels with time
    let mut cells: HashMap<(usize, u32), std::collections::BTreeMap<i64, i64>> = HashMap::new();
    let mut bands = Vec::new();
    let pixel = |t: i64| (((t - t0) as f64 / px) as i64).clamp(0, width - 1);
    for x in &s.items[first..] {
        if x.start >= t1 {
            break;
        }
        if x.end <= t0 {
            continue;
        }
        if x.rank == EVERY_ROW {
            let (a, b) = (x.start.max(t0), x.end.min(t1));
            bands.push(json!([pixel(a), pixel(b - 1).max(pixel(a)) + 1, x.label]));
            continue;
        }
        let key = if split.contains(&x.rank) { (x.rank, x.thread) } else { (x.rank, -1) };
        let Some(&row) = rows.get(&key) else { continue };
        let (a, b) = (x.start.max(t0), x.end.min(t1));
        let (pa, pb) = (pixel(a), pixel(b - 1).max(pixel(a)));
        let (n, dt) = (pb - pa + 1, b - a);
        let per = cells.entry((row, x.label)).or_default();
        for p in pa..=pb {
            let share = if p == pa { dt - dt / n * (n - 1) } else { dt / n };
            *per.entry(p).or_default() += share;
        }
    }
    let mut out = Vec::new();
    for ((row, label), pixels) in cells {
        let mut run: Option<(i64, i64, i64)> = None;
        for (p, t) in pixels {
            run = match run {
                Some((a, b, sum)) if p == b + 1 => Some((a, p, sum + t)),
                Some((a, b, sum)) => {
                    out.push(json!([row, a, b + 1, label, sum]));
                    Some((p, p, t))
                }
                None => Some((p, p, t)),
            };
        }
        if let Some((a, b, sum)) = run {
            out.push(json!([row, a, b + 1, label, sum]));
        }
    }
    json!({ "labels": s.labels, "stretches": out, "bands": bands })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_merge_per_row_and_pixel_and_reach_in_from_before() {
        let s = Stretches::sorted(
            vec![
                Stretch { rank: 1, thread: 0, start: 60, end: 100, label: 0 },
                Stretch { rank: 0, thread: 0, start: 0, end: 50, label: 0 },
                Stretch { rank: 1, thread: 0, start: 40, end: 45, label: 0 },
                Stretch { rank: 1, thread: 0, start: 5, end: 10, label: 0 },
            ],
            vec!["mpi".into()],
        );
        // Rank 1's stretch at 5-10 ended before the window; rank 0's from 0 reaches into it.
        assert_eq!(s.first_reaching(20), 0);
        assert_eq!(s.first_reaching(51), 3);
        let keys = [((0, -1), 0), ((1, -1), 1)];
        let w = window(&s, &keys, &[], 20, 100, 8);
        let mut got: Vec<Value> = w["stretches"].as_array().unwrap().clone();
        got.sort_by_key(|v| (v[0].as_i64(), v[1].as_i64()));
        assert_eq!(got.len(), 3, "{got:?}");
        // Rank 0 from 20 to 50 (pixels 0-2), rank 1 at 40-45 (pixel 2) and 60-100 (4-7).
        assert_eq!(got[0], json!([0, 0, 3, 0, 30]));
        assert_eq!((&got[1][1], &got[1][2]), (&json!(2), &json!(3)));
        assert_eq!((&got[2][1], &got[2][2]), (&json!(4), &json!(8)));
    }
}
