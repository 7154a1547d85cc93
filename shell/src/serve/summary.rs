//! The calls' overview, for views of the whole run or a wide part of it. For each row of the
//! folded timeline (a block of nodes, a node, or a rank alone on its node) it keeps every
//! region's exclusive time per slot, at each 1-2-5 slot width from a finest one up to the
//! whole run. It is made once, in the background as the server starts, by one query,
//! `lod_calls(per => 'group', regions => 'all')` at the finest width (two queries when that
//! width starts with a 2, whose 5 is not a multiple of it); each coarser width sums the slots of
//! a finer one that divides it. Intel Trace Analyzer's representative of a slot is the region
//! with the most time summed over the slot and the row's threads, so sums of finer slots give
//! the coarser slot's representative exactly (`lod_calls`' choice: the most time, ties to the
//! name that sorts first). A view at one of these widths takes its folded rows from here and
//! reads the calls only for the rows it opened. The finest width is the smallest whose slots,
//! over all folded rows, number at most `SLOTS`: the overview is bounded by a grid of a few
//! screens, not by the trace, and a view finer than it is a narrow window of the run.

use std::collections::HashMap;

use arrow::array::{Array, RecordBatch};
use commdb_analysis::columns;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::layout::{Opened, Row};
use super::views::{Facts, rows_function};

/// Slots of the finest width over all folded rows, at most (a few screens of rows x pixels).
pub const SLOTS: i64 = 4 << 20;

/// The overview's budget of slots for a trace of `calls` calls: `SLOTS`, and no more than a
/// slot for every 4 calls (finer slots than the calls would hold the calls again; a small
/// trace's overview is small and quickly made), at least 1,024.
pub fn budget(calls: i64) -> i64 {
    SLOTS.min((calls / 4).max(1024))
}

/// One slot width: per folded row, the regions' times in each slot.
#[derive(Debug)]
struct Level {
    /// Slot width (ns); slot k covers [k res, (k + 1) res).
    res: i64,
    /// The first slot kept.
    first: i64,
    /// Slots kept, from `first`.
    slots: usize,
    rows: Vec<Slots>,
}

/// One row's slots: the entries of slot i are `region[offsets[i]..offsets[i + 1]]` (and
/// `time` alike).
#[derive(Debug, Default)]
struct Slots {
    offsets: Vec<u32>,
    region: Vec<u32>,
    time: Vec<i64>,
}

/// A representative from the overview: (view row, slot start, slot end, region, share).
pub type Cell = (usize, i64, i64, String, f64);

/// Message lines between folded rows at most, at the finest width they are kept at.
pub const LINES: usize = 2 << 20;

/// No receive (a message whose receive is missing), as a slot or a time.
const NONE: i64 = i64::MIN;

/// The messages of one (source row, destination row, send slot, receive slot), summed as
/// `lod_messages` sums them: bytes (missing as 0), durations (the known ones), first send and
/// last receive.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    src: u32,
    dst: u32,
    send: i64,
    recv: i64,
    messages: i64,
    bytes: i64,
    duration: i64,
    durations: i64,
    /// Summed latency L (`message_latency`) of the messages that have one.
    latency: f64,
    latencies: i64,
    first_send: i64,
    last_recv: i64,
}

impl Line {
    fn add(&mut self, o: &Line) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.duration += o.duration;
        self.durations += o.durations;
        self.latency += o.latency;
        self.latencies += o.latencies;
        self.first_send = self.first_send.min(o.first_send);
        self.last_recv = self.last_recv.max(o.last_recv);
    }

    /// The line's key at width `res` (a multiple of the width its slots are at).
    fn key(&self, res: i64) -> (u32, u32, i64, i64) {
        let slot = |t: i64| if t == NONE { NONE } else { t.div_euclid(res) * res };
        (self.src, self.dst, slot(self.send), slot(self.recv))
    }
}

/// The message lines between folded rows at one width, by send slot.
#[derive(Debug)]
struct LineLevel {
    res: i64,
    lines: Vec<Line>,
}

/// A collective operation's instance, whole: its first begin, last end, operations (indices
/// of their names) and the set of ranks taking part (an index into the distinct sets).
#[derive(Debug)]
struct Instance {
    comm: i64,
    begin: i64,
    end: i64,
    ops: Vec<u32>,
    ranks: u32,
}

/// Every collective instance, by first begin: `lod_collectives` over the whole `collectives`
/// table for any window, without reading it again.
#[derive(Debug, Default)]
struct Collectives {
    instances: Vec<Instance>,
    ops: Vec<String>,
    /// The distinct sets of ranks taking part (most instances share a communicator's).
    rank_sets: Vec<Vec<u32>>,
}

/// What a mark gathers over its instances: their operations, count, summed duration and rank
/// sets.
type MarkSums = (Vec<u32>, i64, i128, Vec<u32>);

/// A collective mark of a view: (communicator, slot, operation or 'mixed', instances, mean
/// duration, ranks taking part).
pub type Mark = (i64, i64, String, i64, f64, i64);

/// A message line of a view: (source row, destination row, send slot, receive slot, messages,
/// mean bytes, mean duration, first send, last receive, mean latency L).
pub type ViewLine = (usize, usize, i64, Option<i64>, i64, f64, Option<f64>, Option<i64>, Option<i64>, Option<f64>);

/// Lines by their key at one width.
type LineMap = commdb_catalog::fast_hash::FastMap<(u32, u32, i64, i64), Line>;

/// Add `l` to its line at width `res` (its slots cut to that width).
fn add_line(map: &mut LineMap, l: Line, res: i64) {
    let k = l.key(res);
    map.entry(k).and_modify(|x| x.add(&l)).or_insert(Line { send: k.2, recv: k.3, ..l });
}

/// The lines of `map` sorted by send slot, source, destination and receive slot.
fn sorted(map: LineMap) -> Vec<Line> {
    let mut out: Vec<Line> = map.into_values().collect();
    out.sort_unstable_by_key(|l| (l.send, l.src, l.dst, l.recv));
    out
}

/// Lines merged at width `res`, sorted.
fn merged(lines: impl Iterator<Item = Line>, res: i64) -> Vec<Line> {
    let mut map = LineMap::default();
    lines.for_each(|l| add_line(&mut map, l, res));
    sorted(map)
}

/// The width of the message lines' first level for slots of `res`: `res`, or half of it when
/// it starts with a 2 (every 1-2-5 width above a 1 or a 5 is a multiple of it; 5 is not a
/// multiple of 2).
fn line_base(res: i64) -> i64 {
    if leading_digit(res) == 2 { res / 2 } else { res }
}

fn leading_digit(res: i64) -> i64 {
    res / 10i64.pow(res.max(1).ilog10())
}

/// The next coarser base whose multiples are every coarser 1-2-5 width: 1 -> 5 -> 10.
fn next_multiple(res: i64) -> i64 {
    if leading_digit(res) == 1 { res * 5 } else { res * 2 }
}

/// The overview of the folded rows.
#[derive(Debug)]
pub struct Summary {
    /// The folded rows, as the layout gives them with nothing opened.
    rows: Vec<Row>,
    /// Threads each row's times are over (what `lod_calls` divides its share by).
    threads: Vec<i64>,
    regions: Vec<String>,
    /// Each region's place in name order (ties go to the name that sorts first).
    order: Vec<u32>,
    /// Slot widths, finest first.
    levels: Vec<Level>,
    /// The message lines between folded rows, finest first.
    lines: Vec<LineLevel>,
    /// Whether the lines carry latencies (`message_latency` answered over the trace).
    pub latency: bool,
    collectives: Collectives,
}

/// The 1-2-5 widths from `from` up to the first that holds [t0, t1) in one slot.
fn widths(from: i64, t0: i64, t1: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut scale = 1i64;
    'up: loop {
        for m in [1, 2, 5] {
            let Some(v) = scale.checked_mul(m) else { break 'up };
            if v < from {
                continue;
            }
            out.push(v);
            if slot_count(v, t0, t1) <= 1 {
                break 'up;
            }
        }
        let Some(next) = scale.checked_mul(10) else { break };
        scale = next;
    }
    out
}

/// Slots of width `res` (aligned to 0) that [t0, t1) touches.
fn slot_count(res: i64, t0: i64, t1: i64) -> i64 {
    (t1 - 1).div_euclid(res) - t0.div_euclid(res) + 1
}

/// The finest 1-2-5 width whose slots over `rows` rows number at most `budget`.
pub fn finest_width(t0: i64, t1: i64, rows: i64, budget: i64) -> i64 {
    let per_row = (budget / rows.max(1)).max(1);
    let mut res = commdb_udfs::lod::resolution(t0, t1, per_row).unwrap_or(1);
    while slot_count(res, t0, t1) > per_row {
        res = commdb_udfs::lod::resolution(0, res + 1, 1).unwrap_or(res + 1);
    }
    res
}

impl Summary {
    /// Make the overview of the served trace (the finest width at most `budget` slots, the
    /// finest message lines at most `lines`; the server's are `budget()` and `LINES`).
    pub async fn build(ctx: &SessionContext, facts: &Facts, budget: i64, lines: usize) -> Result<Summary, String> {
        let opened = Opened::default();
        let (rows, _) = facts.layout.rows(&opened);
        let rows_of = rows_function(ctx, facts, &opened);
        let all = widths(finest_width(facts.t0, facts.t1, rows.len() as i64, budget), facts.t0, facts.t1);
        let mut s = Summary {
            threads: vec![0; rows.len()],
            rows,
            regions: Vec::new(),
            order: Vec::new(),
            levels: Vec::new(),
            lines: Vec::new(),
            latency: false,
            collectives: Collectives::default(),
        };
        let mut names: HashMap<String, u32> = HashMap::new();
        for &res in &all {
            match s.levels.iter().rposition(|l| res % l.res == 0) {
                Some(from) => {
                    let level = s.levels[from].coarser(res);
                    s.levels.push(level);
                }
                None => {
                    let level = s.query(ctx, facts, &rows_of, res, &mut names).await?;
                    s.levels.push(level);
                }
            }
        }
        let finest = all.first().copied().unwrap_or(1);
        // With each message's latency L when the trace's latency criteria can be made (this
        // makes them, and the views' message_latency reuses them); else without.
        (s.lines, s.latency) = match Self::message_lines(ctx, &rows_of, (finest, lines), facts, true).await {
            Ok(lines) => (lines, true),
            Err(e) => {
                eprintln!("serve: message lines without latencies: {e}");
                (Self::message_lines(ctx, &rows_of, (finest, lines), facts, false).await?, false)
            }
        };
        s.collectives = Collectives::read(ctx).await?;
        s.regions = vec![String::new(); names.len()];
        for (name, id) in names {
            s.regions[id as usize] = name;
        }
        let mut by_name: Vec<u32> = (0..s.regions.len() as u32).collect();
        by_name.sort_by(|&a, &b| s.regions[a as usize].cmp(&s.regions[b as usize]));
        s.order = vec![0; by_name.len()];
        for (place, id) in by_name.into_iter().enumerate() {
            s.order[id as usize] = place as u32;
        }
        Ok(s)
    }

    /// One width read from the calls: every region's time per folded row and slot.
    async fn query(
        &mut self,
        ctx: &SessionContext,
        facts: &Facts,
        rows_of: &str,
        res: i64,
        names: &mut HashMap<String, u32>,
    ) -> Result<Level, String> {
        let (a, b) = (facts.t0.div_euclid(res) * res, ((facts.t1 - 1).div_euclid(res) + 1) * res);
        let sql = format!(
            "SELECT rank, slot_start, region, time_in_slot_ns, share FROM lod_calls(rel => (\
               SELECT rank, thread, region, start_ts, end_ts, {rows_of}(rank, thread) AS grp FROM calls), \
             t0 => {a}, t1 => {b}, resolution_ns => {res}, per => 'group', regions => 'all')"
        );
        let df = ctx.sql(&sql).await.map_err(|e| e.to_string())?;
        let mut stream = df.execute_stream().await.map_err(|e| e.to_string())?;
        let first = a / res;
        let slots = ((b - a) / res) as usize;
        // (slot, region, time) per row, as the batches come.
        let mut entries: Vec<Vec<(u32, u32, i64)>> = vec![Vec::new(); self.rows.len()];
        while let Some(batch) = stream.next().await {
            let batch: RecordBatch = batch.map_err(|e| e.to_string())?;
            let one = std::slice::from_ref(&batch);
            let err = |e: datafusion::error::DataFusionError| e.to_string();
            let (row, start) =
                (columns::int64_column(one, 0).map_err(err)?, columns::int64_column(one, 1).map_err(err)?);
            let region = columns::text_column(one, 2).map_err(err)?;
            let time = columns::int64_column(one, 3).map_err(err)?;
            let share = columns::column(one, 4, &arrow::datatypes::DataType::Float64).map_err(err)?;
            let share = arrow::array::AsArray::as_primitive::<arrow::datatypes::Float64Type>(&share);
            for i in 0..batch.num_rows() {
                let r = row.value(i) as usize;
                let Some(list) = entries.get_mut(r) else {
                    return Err(format!("the overview's query gave row {r}, of {} rows", self.rows.len()));
                };
                let next = names.len() as u32;
                let id = *names.entry(region.value(i).to_string()).or_insert(next);
                let t = time.value(i);
                // The share is that time over the slot and the row's threads: the thread count.
                if self.threads[r] == 0 && share.value(i) > 0.0 {
                    self.threads[r] = (t as f64 / (share.value(i) * res as f64)).round() as i64;
                }
                list.push(((start.value(i).div_euclid(res) - first) as u32, id, t));
            }
        }
        let rows = entries
            .into_iter()
            .map(|mut list| {
                list.sort_by_key(|e| e.0);
                let mut s = Slots { offsets: Vec::with_capacity(slots + 1), ..Default::default() };
                let mut at = 0;
                for k in 0..slots as u32 {
                    s.offsets.push(s.region.len() as u32);
                    while at < list.len() && list[at].0 == k {
                        s.region.push(list[at].1);
                        s.time.push(list[at].2);
                        at += 1;
                    }
                }
                s.offsets.push(s.region.len() as u32);
                s
            })
            .collect();
        Ok(Level { res, first, slots, rows })
    }

    /// The message lines between different folded rows, at the finest width from `finest` up
    /// whose lines number at most `budget` (the width grows while the messages are read when
    /// they would be more), then at each coarser width that width divides.
    async fn message_lines(
        ctx: &SessionContext,
        rows_of: &str,
        (finest, budget): (i64, usize),
        facts: &Facts,
        latency: bool,
    ) -> Result<Vec<LineLevel>, String> {
        let (l, from) = if latency { ("latency", "message_latency()") } else { ("NULL::double", "messages") };
        let sql = format!(
            "SELECT {rows_of}(src, src_thread), {rows_of}(dst, dst_thread), send_ts, recv_ts, bytes, duration, {l} \
             FROM {from} WHERE send_ts IS NOT NULL"
        );
        let df = ctx.sql(&sql).await.map_err(|e| e.to_string())?;
        let mut stream = df.execute_stream().await.map_err(|e| e.to_string())?;
        let mut res = line_base(finest);
        let mut map = LineMap::default();
        let err = |e: datafusion::error::DataFusionError| e.to_string();
        while let Some(batch) = stream.next().await {
            let batch: RecordBatch = batch.map_err(|e| e.to_string())?;
            let one = std::slice::from_ref(&batch);
            let c = |i| columns::int64_column(one, i).map_err(err);
            let (src, dst, send, recv, bytes, duration) = (c(0)?, c(1)?, c(2)?, c(3)?, c(4)?, c(5)?);
            let latency = columns::column(one, 6, &arrow::datatypes::DataType::Float64).map_err(err)?;
            let latency = arrow::array::AsArray::as_primitive::<arrow::datatypes::Float64Type>(&latency).clone();
            for i in 0..batch.num_rows() {
                if src.is_null(i) || dst.is_null(i) || src.value(i) == dst.value(i) {
                    continue;
                }
                let get = |a: &arrow::array::Int64Array| if a.is_null(i) { None } else { Some(a.value(i)) };
                let (t, r) = (send.value(i), get(&recv).unwrap_or(NONE));
                let d = get(&duration);
                let lat = Some(latency.value(i)).filter(|x| latency.is_valid(i) && !x.is_nan());
                let line = Line {
                    src: src.value(i) as u32,
                    dst: dst.value(i) as u32,
                    send: t,
                    recv: r,
                    messages: 1,
                    bytes: get(&bytes).unwrap_or(0),
                    duration: d.unwrap_or(0),
                    durations: i64::from(d.is_some()),
                    latency: lat.unwrap_or(0.0),
                    latencies: i64::from(lat.is_some()),
                    first_send: t,
                    last_recv: r,
                };
                add_line(&mut map, line, res);
            }
            // Too many lines at this width: go on at a coarser one.
            while map.len() > budget {
                res = next_multiple(res);
                let lines: Vec<Line> = map.drain().map(|(_, l)| l).collect();
                lines.into_iter().for_each(|l| add_line(&mut map, l, res));
            }
        }
        let mut levels = vec![LineLevel { res, lines: sorted(map) }];
        for v in widths(res, facts.t0, facts.t1).into_iter().skip(1) {
            let Some(from) = levels.iter().rposition(|l| v % l.res == 0) else {
                return Err(format!("the message lines at {res} ns do not divide {v} ns"));
            };
            let lines = merged(levels[from].lines.iter().copied(), v);
            levels.push(LineLevel { res: v, lines });
        }
        Ok(levels)
    }

    /// The message lines of the view rows `matched` (view row, overview row) sent in [t0, t1)
    /// at width `res`, both ends in those rows, and the width they are at: `res`, or, for a
    /// width the overview has for the calls but finer than its finest lines, those finest
    /// lines whose slots meet the window (a line stands for all its slot's messages, so the
    /// window's edges are those slots'). None when the overview has neither.
    pub fn lines(&self, matched: &[(usize, usize)], t0: i64, t1: i64, res: i64) -> Option<(i64, Vec<ViewLine>)> {
        let level = self.lines.iter().find(|l| l.res == res).or_else(|| {
            let finest = self.lines.first()?;
            (res < finest.res && self.level(res).is_some()).then_some(finest)
        })?;
        let mut view_row = vec![None; self.rows.len()];
        for &(v, r) in matched {
            view_row[r] = Some(v);
        }
        let from = level.lines.partition_point(|l| l.send < t0.div_euclid(level.res) * level.res);
        let to = level.lines.partition_point(|l| l.send < t1);
        let some = |t: i64| (t != NONE).then_some(t);
        Some((
            level.res,
            level.lines[from..to]
                .iter()
                .filter_map(|l| {
                    let (s, d) = (view_row[l.src as usize]?, view_row[l.dst as usize]?);
                    Some((
                        s,
                        d,
                        l.send,
                        some(l.recv),
                        l.messages,
                        l.bytes as f64 / l.messages as f64,
                        (l.durations > 0).then(|| l.duration as f64 / l.durations as f64),
                        Some(l.first_send),
                        some(l.last_recv),
                        (l.latencies > 0).then(|| l.latency / l.latencies as f64),
                    ))
                })
                .collect(),
        ))
    }

    /// The collective marks of the window [t0, t1) at width `res`: `lod_collectives` with t0,
    /// t1 and resolution_ns over the whole table (an instance counts where its first begin is).
    pub fn marks(&self, t0: i64, t1: i64, res: i64) -> Vec<Mark> {
        self.collectives.marks(t0, t1, res)
    }

    /// The level of slot width `res`, if the overview has it.
    fn level(&self, res: i64) -> Option<&Level> {
        self.levels.iter().find(|l| l.res == res)
    }

    /// The finest slot width kept.
    pub fn finest(&self) -> i64 {
        self.levels.first().map_or(i64::MAX, |l| l.res)
    }

    /// Bytes the overview holds, about.
    pub fn bytes(&self) -> usize {
        let calls: usize =
            self.levels.iter().flat_map(|l| &l.rows).map(|s| s.offsets.len() * 4 + s.region.len() * 12).sum();
        calls + self.lines.iter().map(|l| l.lines.len() * std::mem::size_of::<Line>()).sum::<usize>()
    }

    /// The finest width of the message lines kept.
    pub fn finest_lines(&self) -> i64 {
        self.lines.first().map_or(i64::MAX, |l| l.res)
    }

    /// What the server says when the overview is made.
    pub fn describe(&self) -> String {
        format!(
            "{} MiB: calls in slots of {} ns and wider, message lines of {} ns and wider",
            self.bytes() >> 20,
            self.finest(),
            self.finest_lines()
        )
    }

    /// For each of a view's rows, the overview's row that is the same folded row, if any.
    pub fn matching(&self, view_rows: &[Row]) -> Vec<Option<usize>> {
        view_rows.iter().map(|v| self.rows.iter().position(|r| r == v)).collect()
    }

    /// The representatives of the view rows `matched` (view row, overview row) in the window
    /// [t0, t1) at slot width `res`; None when the overview has no such width.
    pub fn cells(&self, matched: &[(usize, usize)], t0: i64, t1: i64, res: i64) -> Option<Vec<Cell>> {
        let level = self.level(res)?;
        let mut out = Vec::new();
        let from = (t0.div_euclid(res) - level.first).max(0) as usize;
        let to = ((t1 - 1).div_euclid(res) - level.first + 1).clamp(0, level.slots as i64) as usize;
        for &(view_row, row) in matched {
            let s = &level.rows[row];
            let threads = self.threads[row].max(1);
            for k in from..to {
                let (a, b) = (s.offsets[k] as usize, s.offsets[k + 1] as usize);
                let best = (a..b).max_by(|&p, &q| {
                    s.time[p]
                        .cmp(&s.time[q])
                        .then_with(|| self.order[s.region[q] as usize].cmp(&self.order[s.region[p] as usize]))
                });
                if let Some(p) = best {
                    let start = (level.first + k as i64) * res;
                    let share = s.time[p] as f64 / (res * threads) as f64;
                    out.push((view_row, start, start + res, self.regions[s.region[p] as usize].clone(), share));
                }
            }
        }
        Some(out)
    }
}

impl Collectives {
    /// Read every participation, folded into instances as `lod_collectives` folds them (no
    /// communicator, instance or end: left out; no begin: the end; no operation: 'unknown'; no
    /// rank: no participant).
    async fn read(ctx: &SessionContext) -> Result<Collectives, String> {
        let sql = "SELECT comm, instance, op, rank, begin_ts, end_ts FROM collectives";
        let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
        let mut stream = df.execute_stream().await.map_err(|e| e.to_string())?;
        let err = |e: datafusion::error::DataFusionError| e.to_string();
        let mut op_index: HashMap<String, u32> = HashMap::new();
        let mut ops: Vec<String> = Vec::new();
        // (comm, instance) -> (begin, end, ops, ranks)
        type Open = (i64, i64, Vec<u32>, Vec<u32>);
        let mut open: commdb_catalog::fast_hash::FastMap<(i64, i64), Open> = Default::default();
        while let Some(batch) = stream.next().await {
            let batch: RecordBatch = batch.map_err(|e| e.to_string())?;
            let one = std::slice::from_ref(&batch);
            let (comm, instance) =
                (columns::int64_column(one, 0).map_err(err)?, columns::int64_column(one, 1).map_err(err)?);
            let op = columns::text_column(one, 2).map_err(err)?;
            let (rank, begin, end) = (
                columns::int64_column(one, 3).map_err(err)?,
                columns::int64_column(one, 4).map_err(err)?,
                columns::int64_column(one, 5).map_err(err)?,
            );
            for i in 0..batch.num_rows() {
                if comm.is_null(i) || instance.is_null(i) || end.is_null(i) {
                    continue;
                }
                let e = end.value(i);
                let b = if begin.is_null(i) { e } else { begin.value(i) };
                let name = if op.is_null(i) { "unknown" } else { op.value(i) };
                let o = match op_index.get(name) {
                    Some(&o) => o,
                    None => {
                        ops.push(name.to_string());
                        op_index.insert(name.to_string(), ops.len() as u32 - 1);
                        ops.len() as u32 - 1
                    }
                };
                let x = open.entry((comm.value(i), instance.value(i))).or_insert((b, e, Vec::new(), Vec::new()));
                x.0 = x.0.min(b);
                x.1 = x.1.max(e);
                if !x.2.contains(&o) {
                    x.2.push(o);
                }
                if rank.is_valid(i)
                    && let Ok(r) = u32::try_from(rank.value(i))
                {
                    x.3.push(r);
                }
            }
        }
        let mut sets: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut c = Collectives { ops, ..Default::default() };
        for ((comm, _), (begin, end, ops, mut ranks)) in open {
            ranks.sort_unstable();
            ranks.dedup();
            let next = c.rank_sets.len() as u32;
            let id = *sets.entry(ranks.clone()).or_insert_with(|| {
                c.rank_sets.push(ranks);
                next
            });
            c.instances.push(Instance { comm, begin, end, ops, ranks: id });
        }
        c.instances.sort_unstable_by_key(|x| (x.begin, x.comm));
        Ok(c)
    }

    fn marks(&self, t0: i64, t1: i64, res: i64) -> Vec<Mark> {
        let from = self.instances.partition_point(|x| x.begin < t0);
        let to = self.instances.partition_point(|x| x.begin < t1);
        let mut groups: std::collections::BTreeMap<(i64, i64), MarkSums> = Default::default();
        for x in &self.instances[from..to] {
            let slot = t0 + (x.begin - t0).div_euclid(res) * res;
            let g = groups.entry((x.comm, slot)).or_default();
            for o in &x.ops {
                if !g.0.contains(o) {
                    g.0.push(*o);
                }
            }
            g.1 += 1;
            g.2 += i128::from(x.end - x.begin);
            if !g.3.contains(&x.ranks) {
                g.3.push(x.ranks);
            }
        }
        let mut seen: Vec<bool> = Vec::new();
        let mut marks: Vec<Mark> = groups
            .into_iter()
            .map(|((comm, slot), (ops, instances, duration, sets))| {
                let participants = match sets.as_slice() {
                    [one] => self.rank_sets[*one as usize].len(),
                    _ => {
                        let mut n = 0;
                        for &set in &sets {
                            for &r in &self.rank_sets[set as usize] {
                                let r = r as usize;
                                if r >= seen.len() {
                                    seen.resize(r + 1, false);
                                }
                                n += usize::from(!seen[r]);
                                seen[r] = true;
                            }
                        }
                        for &set in &sets {
                            for &r in &self.rank_sets[set as usize] {
                                seen[r as usize] = false;
                            }
                        }
                        n
                    }
                };
                let op = if ops.len() == 1 { self.ops[ops[0] as usize].clone() } else { "mixed".to_string() };
                (comm, slot, op, instances, duration as f64 / instances as f64, participants as i64)
            })
            .collect();
        marks.sort_by_key(|m| (m.1, m.0));
        marks
    }
}

impl Level {
    /// The level of width `res` (a multiple of this one's): each of its slots sums the regions'
    /// times of the slots it covers.
    fn coarser(&self, res: i64) -> Level {
        let m = res / self.res;
        let first = self.first.div_euclid(m);
        let last = (self.first + self.slots as i64 - 1).div_euclid(m);
        let slots = (last - first + 1) as usize;
        let rows = self
            .rows
            .iter()
            .map(|s| {
                let mut out = Slots { offsets: Vec::with_capacity(slots + 1), ..Default::default() };
                let mut sums: Vec<(u32, i64)> = Vec::new();
                for j in 0..slots as i64 {
                    out.offsets.push(out.region.len() as u32);
                    sums.clear();
                    let lo = ((first + j) * m - self.first).max(0);
                    let hi = ((first + j + 1) * m - self.first).min(self.slots as i64);
                    for k in lo as usize..hi as usize {
                        for e in s.offsets[k] as usize..s.offsets[k + 1] as usize {
                            match sums.iter_mut().find(|x| x.0 == s.region[e]) {
                                Some(x) => x.1 += s.time[e],
                                None => sums.push((s.region[e], s.time[e])),
                            }
                        }
                    }
                    for &(region, time) in &sums {
                        out.region.push(region);
                        out.time.push(time);
                    }
                }
                out.offsets.push(out.region.len() as u32);
                out
            })
            .collect();
        Level { res, first, slots, rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::views::{ViewRequest, facts, view};

    /// The demo trace (64 ranks on 4 nodes) open in a session with commdb's functions.
    fn demo_session() -> commdb_catalog::session::Session {
        let mut session = commdb_catalog::session::Session::with_partitions(2);
        commdb_udfs::register_all(&mut session);
        let trace = commdb_catalog::generate::demo(Default::default()).expect("demo trace");
        session.attach(trace, Some("demo")).expect("attached");
        session
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn views_from_the_overview_are_the_views_read_from_the_calls() {
        let session = demo_session();
        let ctx = session.context().clone();
        let facts = facts(&ctx).await.expect("facts");
        // 4 folded nodes of 5,000 slots at the finest: widths from run / 2,000 at most up.
        let s = Summary::build(&ctx, &facts, 4 * 5000, LINES).await.expect("overview");
        assert!(s.levels.len() > 4, "{:?}", s.levels.iter().map(|l| l.res).collect::<Vec<_>>());
        assert_eq!(s.threads, vec![16; 4]);
        let span = facts.t1 - facts.t0;
        let windows = [
            (facts.t0, facts.t1, 1000, ""),
            (facts.t0, facts.t1, 333, ""),
            (facts.t0, facts.t1, 120, "2"),
            (facts.t0 + span / 3, facts.t0 + span / 2, 40, ""),
            (facts.t0 + span / 5, facts.t0 + span / 4, 7, "0,3"),
            (facts.t1 - span / 10, facts.t1 + span, 25, "1"),
        ];
        for (t0, t1, width, open) in windows {
            let opened = Opened::parse(None, Some(open), None).expect("opened");
            let req = ViewRequest::snapped(t0, t1, width, opened);
            assert!(req.res >= s.finest(), "{} < {}", req.res, s.finest());
            assert!(s.latency);
            let with =
                view(&ctx, &facts, &req, Some(&s), true, &Default::default()).await.expect("view with the overview");
            let without = view(&ctx, &facts, &req, None, true, &Default::default()).await.expect("view from the calls");
            let folded = 4 - open.split(',').filter(|n| !n.is_empty()).count();
            assert_eq!(with["overview_rows"], folded, "{t0} {t1} {width} {open}");
            assert_eq!(without["overview_rows"], 0);
            assert!(!with["calls"].as_array().expect("cells").is_empty());
            assert_eq!(with["calls"], without["calls"], "{t0} {t1} {width} {open}");
            assert_eq!(with["regions"], without["regions"], "{t0} {t1} {width} {open}");
            // Message lines between folded rows from the overview, the others read.
            assert!(with["overview_lines"].as_u64().expect("lines") > 0, "{t0} {t1} {width} {open}");
            for key in ["message_rows", "messages_in_window"] {
                assert_eq!(with[key], without[key], "{key}: {t0} {t1} {width} {open}");
            }
            // The lines alike, their mean latencies summed in another order (to 1e-9).
            let (a, b) = (with["messages"].as_array().expect("lines"), without["messages"].as_array().expect("lines"));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert_eq!(x.as_array().expect("line")[..9], y.as_array().expect("line")[..9], "{x} {y}");
                let (lx, ly) = (x[9].as_f64().expect("latency"), y[9].as_f64().expect("latency"));
                assert!((lx - ly).abs() <= 1e-9 * ly.abs().max(1.0), "{x} {y}");
            }
            // Collective marks: lod_collectives over the whole table.
            let (a, b, res) = (req.t0, req.t1, req.res);
            let sql = format!(
                "SELECT comm, first_slot, op, instances, duration_avg, participants FROM lod_collectives(\
                 t0 => {a}, t1 => {b}, resolution_ns => {res}) ORDER BY first_slot, comm"
            );
            let apart = crate::serve::views::collect(&ctx, &sql).await.expect("lod_collectives");
            let apart: Vec<serde_json::Value> =
                crate::serve::table_json::rows(&apart, usize::MAX).into_iter().map(serde_json::Value::Array).collect();
            assert!(!apart.is_empty());
            assert_eq!(with["collectives"], serde_json::Value::Array(apart), "{t0} {t1} {width} {open}");
        }
        // Rows by communication region: their own overview, alike.
        let regions = crate::serve::views::by_region(&ctx, &facts).await.expect("regions");
        let s = Summary::build(&ctx, &regions, 20_000, LINES).await.expect("overview by region");
        for (t0, t1, width) in [(facts.t0, facts.t1, 900), (facts.t0 + span / 4, facts.t0 + span / 2, 100)] {
            let req = ViewRequest::snapped(t0, t1, width, Opened::default());
            let with =
                view(&ctx, &regions, &req, Some(&s), true, &Default::default()).await.expect("view with the overview");
            let without =
                view(&ctx, &regions, &req, None, true, &Default::default()).await.expect("view from the calls");
            assert_eq!(with["overview_rows"].as_u64(), Some(regions.layout.nodes.len() as u64));
            assert_eq!(with["calls"], without["calls"], "by region: {t0} {t1} {width}");
            assert_eq!(with["messages_in_window"], without["messages_in_window"]);
        }
        // A width the overview does not keep: no cells (the view reads every row's calls).
        assert!(s.cells(&[(0, 0)], facts.t0, facts.t1, s.finest() - 1).is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_finer_than_the_overview_lines_draws_them_at_their_width() {
        let session = demo_session();
        let ctx = session.context().clone();
        let facts = facts(&ctx).await.expect("facts");
        // Message lines held to 3,000: coarser than the calls' finest width.
        let s = Summary::build(&ctx, &facts, 4 * 5000, 3000).await.expect("overview");
        let line_res = s.lines[0].res;
        assert!(line_res > s.finest(), "lines at {line_res}, calls at {}", s.finest());
        let span = facts.t1 - facts.t0;
        let (t0, t1) = (facts.t0 + span / 3 + 7, facts.t0 + span / 3 + span / 20);
        let width = ((t1 - t0) / s.finest()) as i64;
        let req = ViewRequest::snapped(t0, t1, width, Opened::parse(None, Some("2"), None).expect("opened"));
        assert!(req.res < line_res && req.res >= s.finest(), "{} {line_res}", req.res);
        let v = view(&ctx, &facts, &req, Some(&s), true, &Default::default()).await.expect("view");
        assert_eq!(v["line_resolution"], line_res);
        // The folded rows' lines: lod_messages at the line width over the line slots that meet
        // the window; the opened node's ranks' lines at the view's width.
        let (a, b) = (req.t0.div_euclid(line_res) * line_res, req.t1);
        let folded = |r: &str| format!("CASE WHEN {r}.node_index = 2 THEN -1 ELSE {r}.node_index END");
        let sql = format!(
            "SELECT count(*), coalesce(sum(messages), 0) FROM lod_messages(rel => (\
               SELECT {} AS src, {} AS dst, m.bytes, m.send_ts, m.recv_ts, m.duration FROM messages m \
               JOIN ranks s ON m.src = s.rank JOIN ranks d ON m.dst = d.rank \
               WHERE s.node_index <> 2 AND d.node_index <> 2 AND s.node_index <> d.node_index), \
             t0 => {a}, t1 => {b}, resolution_ns => {line_res})",
            folded("s"),
            folded("d")
        );
        let apart = crate::serve::views::collect(&ctx, &sql).await.expect("lod_messages");
        let apart = crate::serve::table_json::rows(&apart, 1);
        let lines = v["messages"].as_array().expect("lines");
        let coarse: Vec<&serde_json::Value> = lines.iter().filter(|l| l[10] == line_res).collect();
        assert_eq!(v["overview_lines"].as_u64(), apart[0][0].as_u64(), "{apart:?}");
        assert!(!coarse.is_empty() && coarse.len() as u64 <= v["overview_lines"].as_u64().expect("lines"));
        // Lines with an opened rank at an end are at the view's width.
        let rows = v["rows"].as_array().expect("rows");
        let opened = |r: &serde_json::Value| rows[r.as_u64().expect("row") as usize]["kind"] == "rank";
        assert!(lines.iter().any(|l| opened(&l[0]) || opened(&l[1])));
        for l in lines {
            let width = if opened(&l[0]) || opened(&l[1]) { req.res } else { line_res };
            assert_eq!(l[10], width, "{l}");
        }
        let summed: i64 = lines.iter().map(|l| l[4].as_i64().expect("messages")).sum();
        assert!(summed > 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_made_of_kept_tiles_is_the_view_computed_whole() {
        use crate::serve::tiles::Tiles;
        let session = demo_session();
        let ctx = session.context().clone();
        let facts = facts(&ctx).await.expect("facts");
        let span = facts.t1 - facts.t0;
        let opened = Opened::parse(None, Some("1"), None).expect("opened");
        let at = |from: i64| ViewRequest::snapped(facts.t0 + from, facts.t0 + from + span / 8, 700, opened.clone());
        // A window, pans of it both ways, the whole run, and the second window again.
        let whole = ViewRequest::snapped(facts.t0, facts.t1, 700, opened.clone());
        let moves = [at(span / 4), at(span / 4 + span / 40), at(span / 4 - span / 30), whole, at(span / 4 + span / 40)];
        let tiles = Tiles::default();
        for (i, req) in moves.iter().enumerate() {
            let kept = view(&ctx, &facts, req, None, false, &tiles).await.expect("view from kept tiles");
            let fresh = view(&ctx, &facts, req, None, false, &Tiles::default()).await.expect("view computed whole");
            assert!(!fresh["calls"].as_array().expect("cells").is_empty(), "move {i}");
            assert!(fresh["message_rows"].as_u64().expect("lines") > 0, "move {i}");
            for key in ["calls", "regions", "messages", "message_rows", "messages_in_window", "collectives"] {
                assert_eq!(kept[key], fresh[key], "move {i}: {key}");
            }
            assert_eq!(fresh["tiles_cached"], 0, "move {i}");
            let (cached, computed) = (kept["tiles_cached"].as_u64(), kept["tiles_computed"].as_u64());
            match i {
                0 | 3 => assert_eq!(cached, Some(0), "move {i}"),
                1 | 2 => assert!(cached > Some(0) && computed > Some(0), "move {i}: {cached:?} {computed:?}"),
                _ => assert_eq!(computed, Some(0), "move {i}: the window again"),
            }
        }
        let (n, bytes) = tiles.held();
        assert!(n > 0 && bytes > 0);
    }

    #[test]
    fn lines_coarsen_to_a_multiple_and_merge_their_sums() {
        assert_eq!((next_multiple(1), next_multiple(5), next_multiple(10)), (5, 10, 50));
        assert_eq!((next_multiple(100_000), next_multiple(500)), (500_000, 1000));
        assert_eq!((line_base(20_000), line_base(50), line_base(1), line_base(2)), (10_000, 50, 1, 1));
        // From a base of 1 or 5, every coarser 1-2-5 width is a multiple.
        for base in [1, 5, 10, 50, 100_000] {
            assert!(widths(base, 0, 10_000_000).iter().all(|w| w % base == 0), "{base}");
        }
        let line = |src, send, recv, bytes| Line {
            src,
            dst: 9,
            send,
            recv,
            messages: 1,
            bytes,
            duration: if recv == NONE { 0 } else { recv - send },
            durations: i64::from(recv != NONE),
            latency: 0.5,
            latencies: 1,
            first_send: send,
            last_recv: recv,
        };
        let lines = [line(0, 12, 15, 100), line(0, 8, 13, 300), line(0, 25, NONE, 50), line(1, 11, 14, 8)];
        let m = merged(lines.iter().copied(), 10);
        // Source 0's first two messages are in different slots at width 10 and one line at
        // 20; the third has no receive; source 1's is its own line.
        assert_eq!(m.len(), 4);
        let m = merged(lines.iter().copied(), 20);
        assert_eq!(m.len(), 3);
        let both = m.iter().find(|l| l.src == 0 && l.recv == 0).expect("merged");
        assert_eq!((both.send, both.messages, both.bytes, both.duration, both.durations), (0, 2, 400, 8, 2));
        assert_eq!((both.first_send, both.last_recv), (8, 15));
        assert_eq!((both.latency, both.latencies), (1.0, 2));
        let lost = m.iter().find(|l| l.recv == NONE).expect("no receive");
        assert_eq!((lost.send, lost.durations, lost.last_recv), (20, 0, NONE));
    }

    #[test]
    fn the_budget_follows_the_calls_up_to_its_bound() {
        assert_eq!((budget(0), budget(40_000), budget(55_044_096)), (1024, 10_000, SLOTS));
    }

    #[test]
    fn widths_run_from_the_finest_to_one_slot_and_the_finest_fits_the_budget() {
        assert_eq!(widths(20, 0, 95), vec![20, 50, 100]);
        assert_eq!(widths(5, 10, 30), vec![5, 10, 20, 50]);
        // 64 rows of a 611.9 ms run in 4 Mi slots: 65,536 a row at most.
        let res = finest_width(0, 611_863_066, 64, SLOTS);
        assert_eq!(res, 10_000);
        assert!(slot_count(res, 0, 611_863_066) <= SLOTS / 64);
        assert!(slot_count(res / 2, 0, 611_863_066) > SLOTS / 64);
        // Alignment: a span that straddles a boundary counts both slots.
        assert_eq!(slot_count(10, 5, 15), 2);
        assert_eq!(finest_width(5, 15, 1, 1), 20);
    }

    #[test]
    fn a_coarser_level_sums_the_slots_it_covers() {
        // Width 10 over slots 3..7 (one row): slot 3 a:4, slot 4 a:2 b:5, slot 6 b:1.
        let fine = Level {
            res: 10,
            first: 3,
            slots: 4,
            rows: vec![Slots { offsets: vec![0, 1, 3, 3, 4], region: vec![0, 0, 1, 1], time: vec![4, 2, 5, 1] }],
        };
        let c = fine.coarser(20);
        // Slot 1 ([20, 40)) holds fine slot 3, slot 2 fine slots 4 and 5, slot 3 fine slot 6.
        assert_eq!((c.first, c.slots), (1, 3));
        assert_eq!(c.rows[0].offsets, vec![0, 1, 3, 4]);
        assert_eq!(c.rows[0].region, vec![0, 0, 1, 1]);
        assert_eq!(c.rows[0].time, vec![4, 2, 5, 1]);
        let c = fine.coarser(50);
        assert_eq!((c.first, c.slots), (0, 2));
        assert_eq!(c.rows[0].offsets, vec![0, 2, 3]);
        assert_eq!((c.rows[0].region.clone(), c.rows[0].time.clone()), (vec![0, 1, 1], vec![6, 5, 1]));
    }
}
