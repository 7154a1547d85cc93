//! `lod_calls`: per slot and thread (or rank), the region where it spent the most exclusive
//! time; a call segment that covers whole slots becomes one merged row. With
//! `regions => 'all'`, every region with exclusive time in the slot, one row each (what a
//! coarser view sums, slot by slot, to find its own representatives). The calls come a chunk
//! of whole ranks at a time and are slotted per thread.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use rayon::prelude::*;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{RegionIds, int64_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::ComputeMany;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};

use super::grid::*;
use super::{PIXELS, RESOLUTION, T0, T1};

pub const LOD_CALLS: Function = Function {
    name: "lod_calls",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to slot"),
        RESOLUTION,
        T0,
        T1,
        PIXELS,
        param(
            "per",
            Type::Choice(&["thread", "rank", "group"]),
            ParamDefault::Text("thread"),
            "one representative per thread, per rank (all its threads), or per group (all the threads whose calls have one value of the relation's column grp, such as a node: the rows come with rank = grp)",
        ),
        param(
            "regions",
            Type::Choice(&["top", "all"]),
            ParamDefault::Text("top"),
            "the representative of each slot only (top), or every region with exclusive time in the slot, a row each and no slots merged (all)",
        ),
    ],
    output: Output::Columns(&[
        col("slot_start", int64, "start of the slot (of the first slot, for a merged row)").never_null(),
        col("slot_end", int64, "end of the slot (of the last slot, for a merged row)").never_null(),
        col("rank", int64, "").never_null(),
        col("thread", int64, "the thread (NULL with per => 'rank' or 'group')"),
        col(
            "region",
            text,
            "the region with the most exclusive time in the slot (with regions => 'all', each region with time in it)",
        )
        .never_null(),
        col("time_in_slot_ns", int64, "its exclusive time in the slot").never_null(),
        col(
            "share",
            float64,
            "that time over the slot's width (times the rank's or group's threads with per => 'rank' or 'group')",
        )
        .never_null(),
    ]),
    description: "per time slot and thread (or per rank, per => 'rank'), the region with the most exclusive time, on the trace's slot grid (Intel Trace Analyzer level of detail)",
    make: Make::Table(lod_calls),
};

/// Calls of each (rank, thread): (start, end, region id).
type CallsByThread = BTreeMap<(i64, i64), Vec<(i64, i64, u32)>>;

/// Calls of each (rank, thread, group): (start, end, region id).
type CallsByGroup = BTreeMap<Key, Vec<Call>>;
/// (rank, thread, group) of a call.
type Key = (i64, i64, i64);
/// A call: (start, end, region id).
type Call = (i64, i64, u32);

/// Exclusive-time segments (start, end, region id) of one thread's calls: the innermost open
/// call owns the time.
fn segments(calls: &mut [(i64, i64, u32)]) -> Vec<(i64, i64, u32)> {
    calls.sort_unstable_by_key(|c| (c.0, std::cmp::Reverse(c.1), c.2));
    let mut out = Vec::with_capacity(calls.len() * 2);
    let mut stack: Vec<(i64, u32)> = Vec::new();
    let mut t = i64::MIN;
    let flush_until = |limit: i64, stack: &mut Vec<(i64, u32)>, t: &mut i64, out: &mut Vec<(i64, i64, u32)>| {
        while let Some(&(end, region)) = stack.last() {
            if end > limit {
                break;
            }
            if end > *t {
                out.push((*t, end, region));
                *t = end;
            }
            stack.pop();
        }
    };
    for &(start, end, region) in calls.iter() {
        flush_until(start, &mut stack, &mut t, &mut out);
        if let Some(&(_, top)) = stack.last()
            && start > t
        {
            out.push((t, start, top));
        }
        t = t.max(start);
        let end = stack.last().map_or(end, |&(parent_end, _)| end.min(parent_end));
        stack.push((end, region));
    }
    flush_until(i64::MAX, &mut stack, &mut t, &mut out);
    out.retain(|s| s.1 > s.0);
    out
}

/// One output row of lod_calls.
type CallRow = (i64, i64, i64, i64, u32, i64);
/// Exclusive-time segments (start, end, region id) of one thread.
type Segments = Vec<(i64, i64, u32)>;

/// Exclusive time per slot and region, (slot, region, time), in slot order: the entries of a
/// slot are together. One thread's segments come in time order, so its slots are added in
/// order and an entry is found among the last slot's few; threads' times are merged by sorting.
type SlotTimes = Vec<(i64, u32, i64)>;

/// Add the time of [a, b) in `region` to the slots it covers; [a, b) starts at or after the
/// slots already in `acc`.
fn add_to_slots(acc: &mut SlotTimes, a: i64, b: i64, region: u32, g: Grid) {
    let mut x = a.max(g.t0);
    let b = b.min(g.t1);
    while x < b {
        let k = g.slot(x);
        let end = g.start(k + 1).min(b);
        let same_slot = acc.iter_mut().rev().take_while(|e| e.0 == k);
        match same_slot.into_iter().find(|e| e.1 == region) {
            Some(e) => e.2 += end - x,
            None => acc.push((k, region, end - x)),
        }
        x = end;
    }
}

/// `acc` (sorted by slot and region, one entry each, as this leaves it) and `more` as one:
/// the new entries are sorted and summed, then merged into `acc` in one pass.
fn merge_slots(acc: &mut SlotTimes, more: impl IntoIterator<Item = SlotTimes>) {
    let mut new: SlotTimes = more.into_iter().flatten().collect();
    sort_by_slot_and_region(&mut new);
    new.dedup_by(|later, kept| {
        let same = later.0 == kept.0 && later.1 == kept.1;
        if same {
            kept.2 += later.2;
        }
        same
    });
    if acc.is_empty() {
        *acc = new;
        return;
    }
    let old = std::mem::take(acc);
    acc.reserve(old.len() + new.len());
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        match (old[i].0, old[i].1).cmp(&(new[j].0, new[j].1)) {
            std::cmp::Ordering::Less => {
                acc.push(old[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                acc.push(new[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                acc.push((old[i].0, old[i].1, old[i].2 + new[j].2));
                i += 1;
                j += 1;
            }
        }
    }
    acc.extend_from_slice(&old[i..]);
    acc.extend_from_slice(&new[j..]);
}

/// Sort slot times by slot and region. The slots of a window's threads are few and dense, so
/// they are counted into place by slot (a pass over the entries and one over the slots), each
/// slot's few entries then sorted by region; sparse slots are sorted.
fn sort_by_slot_and_region(v: &mut SlotTimes) {
    let (Some(lo), Some(hi)) = (v.iter().map(|e| e.0).min(), v.iter().map(|e| e.0).max()) else { return };
    let span = (hi - lo) as usize + 1;
    if span > 2 * v.len() {
        v.sort_unstable_by_key(|e| (e.0, e.1));
        return;
    }
    let mut starts = vec![0usize; span + 1];
    for e in v.iter() {
        starts[(e.0 - lo) as usize + 1] += 1;
    }
    for k in 1..=span {
        starts[k] += starts[k - 1];
    }
    let mut placed = vec![(0, 0, 0); v.len()];
    let mut next = starts.clone();
    for &e in v.iter() {
        let k = (e.0 - lo) as usize;
        placed[next[k]] = e;
        next[k] += 1;
    }
    for k in 0..span {
        placed[starts[k]..starts[k + 1]].sort_unstable_by_key(|e| e.1);
    }
    *v = placed;
}

/// One row per slot of `acc`: its representative region and that region's time; with `all`,
/// a row per region of the slot (the most time first, ties by name).
fn representatives(
    acc: SlotTimes,
    rank: i64,
    thread: i64,
    g: Grid,
    names: &[String],
    all: bool,
) -> impl Iterator<Item = CallRow> {
    let mut slots: Vec<(i64, Vec<(u32, i64)>)> = Vec::new();
    for (k, region, t) in acc {
        match slots.last_mut() {
            Some((last, v)) if *last == k => v.push((region, t)),
            _ => slots.push((k, vec![(region, t)])),
        }
    }
    slots.into_iter().flat_map(move |(k, mut v)| {
        let (a, b) = (g.start(k), g.start(k + 1).min(g.t1));
        if all {
            v.sort_unstable_by(|p, q| q.1.cmp(&p.1).then_with(|| names[p.0 as usize].cmp(&names[q.0 as usize])));
        } else {
            v = representative(&v, names).into_iter().collect();
        }
        v.into_iter().map(move |(region, t)| (a, b, rank, thread, region, t))
    })
}

/// The region with the most time in a slot; ties go to the name that sorts first.
fn representative(v: &[(u32, i64)], names: &[String]) -> Option<(u32, i64)> {
    v.iter().max_by(|p, q| p.1.cmp(&q.1).then_with(|| names[q.0 as usize].cmp(&names[p.0 as usize]))).copied()
}

/// ITA's per-process representative: per slot, the region where the rank's threads together
/// spent the most exclusive time (thread reported as 0 and shown as NULL).
fn rank_rows(rank: i64, threads: &[Segments], g: Grid, names: &[String], all: bool) -> Vec<CallRow> {
    let each = threads.iter().map(|segs| {
        let mut one = SlotTimes::new();
        for &(a, b, region) in segs {
            add_to_slots(&mut one, a, b, region, g);
        }
        one
    });
    let mut acc = SlotTimes::new();
    merge_slots(&mut acc, each);
    representatives(acc, rank, 0, g, names, all).collect()
}

/// The representative rows of one thread (with `all`, every region of every slot).
fn call_rows(rank: i64, thread: i64, segs: &[(i64, i64, u32)], g: Grid, names: &[String], all: bool) -> Vec<CallRow> {
    let mut out = Vec::new();
    let mut acc = SlotTimes::new();
    for &(a, b, region) in segs {
        let (a, b) = (a.max(g.t0), b.min(g.t1));
        if a >= b {
            continue;
        }
        let first_full = g.slot(a + g.res - 1);
        let last_full = g.slot(b) - 1;
        if last_full > first_full && !all {
            // Covers two or more whole slots: one merged row, partial slots on both sides.
            let (s, e) = (g.start(first_full), g.start(last_full + 1).min(g.t1));
            out.push((s, e, rank, thread, region, e - s));
            add_to_slots(&mut acc, a, s, region, g);
            add_to_slots(&mut acc, e, b, region, g);
        } else {
            add_to_slots(&mut acc, a, b, region, g);
        }
    }
    out.extend(representatives(acc, rank, thread, g, names, all));
    out.sort_by_key(|r| r.0);
    out
}

arguments! {
    struct LodCallsArgs(LOD_CALLS) {
        rel: Relation,
        per: String,
        regions: String,
        ..grid: LodParams,
    }
}

fn lod_calls(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let LodCallsArgs { rel: relation, per, regions, grid: p } = LodCallsArgs::read(a)?;
    let all = regions == "all";
    let per = match per.as_str() {
        "rank" => Per::Rank,
        "group" => Per::Group,
        _ => Per::Thread,
    };
    let mut wanted = vec!["rank", "thread", "region", "start_ts", "end_ts"];
    if per == Per::Group {
        wanted.push("grp");
    }
    let idx = relation.columns("lod_calls", &wanted)?;
    let (span, span_read) = span_input(a.session, "lod_calls", &relation, &p)?;
    let out = a.schema();
    let make = CallSlots::maker(p, per, all, out.clone());
    let mut inputs = vec![(relation, Some(idx))];
    inputs.extend(span_read);
    // With the span known before the calls are read (given, or the trace's), they stream a
    // chunk of whole ranks at a time; a relation cut on its own span is read whole first.
    if matches!(span, Span::Own) && (p.t0.is_none() || p.t1.is_none()) {
        let compute: ComputeMany = Arc::new(move |inputs| {
            let (lo, hi) = own_call_span(&inputs[0])?;
            let make = make.clone();
            let prepare: Prepare = Arc::new(move |_| make(lo, hi));
            commdb_analysis::by_rank::whole(&prepare, &inputs[..1])
        });
        return Ok(Arc::new(Derived::from_many(out, inputs, compute)));
    }
    let prepare: Prepare = Arc::new(move |held| {
        let (lo, hi) = chosen_span(&span, held.first(), (None, None))?;
        make(lo, hi)
    });
    let derived = Derived::by_rank(out, inputs, 0, prepare);
    if per == Per::Group {
        // A group's slots gather over every chunk: the rows come at the end.
        return Ok(Arc::new(derived));
    }
    // Each rank's slots are its own: over a cluster's parts of whole ranks, the parts' rows
    // together are the answer.
    Ok(Arc::new(derived.spreading(commdb_analysis::derived::Spread::Rows)))
}

/// Whether a call row (rank, thread, region, start_ts, end_ts) counts: none of them NULL.
fn call_counts(batch: &RecordBatch, i: usize) -> bool {
    (0..5).all(|c| batch.column(c).is_valid(i))
}

/// The first start and last end of the calls that count (a call ending before it starts
/// ends at its start).
fn own_call_span(batches: &[RecordBatch]) -> Result<TimeSpan> {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for b in batches {
        let one = std::slice::from_ref(b);
        let (start, end) = (int64_column(one, 3)?, int64_column(one, 4)?);
        for i in (0..b.num_rows()).filter(|&i| call_counts(b, i)) {
            let (a, e) = (start.value(i), end.value(i).max(start.value(i)));
            lo = Some(lo.map_or(a, |l| l.min(a)));
            hi = Some(hi.map_or(e, |h| h.max(e)));
        }
    }
    Ok((lo, hi))
}

/// Threads slotted at once with per => 'group', before they are merged into their groups.
const THREADS_AT_ONCE: usize = 16;

/// Rows of a batch of groups' rows at the end, about.
const BATCH_ROWS: usize = 1 << 16;

/// Whose representative a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Per {
    Thread,
    Rank,
    Group,
}

/// What a group has gathered: per slot and region its threads' exclusive time, and its threads.
#[derive(Debug, Default)]
struct Group {
    slots: SlotTimes,
    threads: i64,
}

/// lod_calls' representatives, a chunk of whole ranks at a time (commdb_analysis::by_rank): each
/// thread's (or rank's) calls are all in the chunk.
struct CallSlots {
    /// None: the span is empty, and so is the answer.
    grid: Option<Grid>,
    per: Per,
    /// regions => 'all': every region of a slot, not only its representative.
    all: bool,
    /// With per => 'group': what each group gathered so far (its rows come at the end).
    groups: BTreeMap<i64, Group>,
    /// With per => 'group', once every chunk is in: the groups whose rows are still to give.
    finishing: Option<std::collections::btree_map::IntoIter<i64, Group>>,
    /// Region names, interned over the chunks (ids index `names`).
    regions: RegionIds<fn(&str) -> bool>,
    names: Vec<String>,
    schema: SchemaRef,
}

/// Makes lod_calls' mapper for the span (lo, hi).
type MakeCallSlots = Arc<dyn Fn(Option<i64>, Option<i64>) -> Result<Box<dyn Mapper>> + Send + Sync>;

impl CallSlots {
    fn maker(p: LodParams, per: Per, all: bool, schema: SchemaRef) -> MakeCallSlots {
        Arc::new(move |lo, hi| {
            let grid = p.grid("lod_calls", lo, hi)?;
            let slots = CallSlots {
                grid,
                per,
                all,
                groups: BTreeMap::new(),
                finishing: None,
                regions: RegionIds::new(|_| true),
                names: Vec::new(),
                schema: schema.clone(),
            };
            Ok(Box::new(slots) as Box<dyn Mapper>)
        })
    }
}

impl Mapper for CallSlots {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let Some(g) = self.grid else { return Ok(RecordBatch::new_empty(self.schema.clone())) };
        if self.per == Per::Group {
            let by_group = self.calls_by_key(batches, true)?;
            // A few threads at a time (their slot times can be megabytes each), merged into
            // their groups before the next.
            let mut threads = by_group.into_iter();
            loop {
                let some: Vec<_> = threads.by_ref().take(THREADS_AT_ONCE).collect();
                if some.is_empty() {
                    break;
                }
                let gathered: Vec<(i64, SlotTimes)> = some
                    .into_par_iter()
                    .map(|((_, _, grp), mut calls)| {
                        let mut acc = SlotTimes::new();
                        for (a, b, region) in segments(&mut calls) {
                            add_to_slots(&mut acc, a, b, region, g);
                        }
                        (grp, acc)
                    })
                    .collect();
                let mut by_grp: BTreeMap<i64, Vec<SlotTimes>> = BTreeMap::new();
                for (grp, acc) in gathered {
                    by_grp.entry(grp).or_default().push(acc);
                }
                for (grp, runs) in by_grp {
                    let into = self.groups.entry(grp).or_default();
                    into.threads += runs.len() as i64;
                    merge_slots(&mut into.slots, runs);
                }
            }
            return Ok(RecordBatch::new_empty(self.schema.clone()));
        }
        let by_thread: CallsByThread =
            self.calls_by_key(batches, false)?.into_iter().map(|((r, t, _), calls)| ((r, t), calls)).collect();
        let (names, all) = (&self.names, self.all);
        // (row, threads sharing it: 1 per thread, the rank's thread count per rank)
        let rows: Vec<(CallRow, i64)> = if self.per == Per::Rank {
            let mut by_rank: BTreeMap<i64, Vec<Segments>> = BTreeMap::new();
            for ((r, _), mut calls) in by_thread {
                by_rank.entry(r).or_default().push(segments(&mut calls));
            }
            by_rank
                .into_par_iter()
                .flat_map_iter(|(r, threads)| {
                    let n = threads.len() as i64;
                    rank_rows(r, &threads, g, names, all).into_iter().map(move |row| (row, n))
                })
                .collect()
        } else {
            by_thread
                .into_par_iter()
                .flat_map_iter(|((r, t), mut calls)| {
                    call_rows(r, t, &segments(&mut calls), g, names, all).into_iter().map(|row| (row, 1))
                })
                .collect()
        };
        self.batch(&rows)
    }

    /// With per => 'group': every chunk is in; the groups' rows come from `more`.
    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if self.grid.is_some() && self.per == Per::Group {
            self.finishing = Some(std::mem::take(&mut self.groups).into_iter());
        }
        Ok(Vec::new())
    }

    /// With per => 'group': the next batch of the groups' rows (about `BATCH_ROWS`), each group's
    /// slots dropped as its rows are made, so the answer is never held whole.
    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let (Some(g), Some(groups)) = (self.grid, self.finishing.as_mut()) else { return Ok(None) };
        let (names, all) = (&self.names, self.all);
        let mut rows: Vec<(CallRow, i64)> = Vec::new();
        for (grp, group) in groups.by_ref() {
            rows.extend(representatives(group.slots, grp, 0, g, names, all).map(|row| (row, group.threads)));
            if rows.len() >= BATCH_ROWS {
                break;
            }
        }
        if rows.is_empty() {
            self.finishing = None;
            return Ok(None);
        }
        Ok(Some(self.batch(&rows)?))
    }
}

impl CallSlots {
    /// The calls of a chunk that count (no column NULL), by (rank, thread, and with `grouped`
    /// the group; else 0): (start, end, region id), an end before its start moved to it. The
    /// chunk's rows come in runs of one key, so a key is looked up once per run, and regions
    /// once per dictionary entry.
    fn calls_by_key(&mut self, batches: &[RecordBatch], grouped: bool) -> Result<CallsByGroup> {
        let (rank, thread) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        let (start, end) = (int64_column(batches, 3)?, int64_column(batches, 4)?);
        let grp = if grouped { Some(int64_column(batches, 5)?) } else { None };
        let mut region = Vec::with_capacity(rank.len());
        for b in batches {
            self.regions.append(b.column(2), &mut self.names, &mut region)?;
        }
        let mut by_key: CallsByGroup = BTreeMap::new();
        // The key of the run being read and its calls.
        let mut run: Option<(Key, Vec<Call>)> = None;
        for (i, &id) in region.iter().enumerate() {
            let g = match &grp {
                Some(g) if g.is_null(i) => continue,
                Some(g) => g.value(i),
                None => 0,
            };
            let (Some(id), true) = (id, rank.is_valid(i) && thread.is_valid(i) && start.is_valid(i) && end.is_valid(i))
            else {
                continue;
            };
            let key = (rank.value(i), thread.value(i), g);
            let call = (start.value(i), end.value(i).max(start.value(i)), id);
            match &mut run {
                Some((k, calls)) if *k == key => calls.push(call),
                _ => {
                    if let Some((k, calls)) = run.replace((key, vec![call])) {
                        by_key.entry(k).or_default().extend(calls);
                    }
                }
            }
        }
        if let Some((k, calls)) = run {
            by_key.entry(k).or_default().extend(calls);
        }
        Ok(by_key)
    }

    /// Output rows as a batch; each row's share is its time over the slot times its threads.
    fn batch(&self, rows: &[(CallRow, i64)]) -> Result<RecordBatch> {
        let names = &self.names;
        let per_thread = self.per == Per::Thread;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.2))),
            Arc::new(Int64Array::from(rows.iter().map(|r| per_thread.then_some(r.0.3)).collect::<Vec<_>>())),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| names[r.0.4 as usize].as_str()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.5))),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|(r, n)| r.5 as f64 / ((r.1 - r.0).max(1) * n) as f64),
            )),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_give_exclusive_segments() {
        // main [0,100) with f [10,40) and g [50,60) nested; f has h [20,30).
        let mut calls = vec![(0, 100, 0), (10, 40, 1), (20, 30, 2), (50, 60, 3)];
        let segs = segments(&mut calls);
        assert_eq!(
            segs,
            vec![(0, 10, 0), (10, 20, 1), (20, 30, 2), (30, 40, 1), (40, 50, 0), (50, 60, 3), (60, 100, 0)]
        );
    }

    #[test]
    fn slot_times_add_in_order_and_merge_by_slot_and_region() {
        let g = Grid { t0: 0, t1: 100, res: 10 };
        let mut a = SlotTimes::new();
        add_to_slots(&mut a, 5, 12, 1, g);
        add_to_slots(&mut a, 12, 15, 0, g);
        add_to_slots(&mut a, 15, 18, 1, g);
        assert_eq!(a, vec![(0, 1, 5), (1, 1, 5), (1, 0, 3)]);
        let mut acc = SlotTimes::new();
        merge_slots(&mut acc, [a.clone()]);
        assert_eq!(acc, vec![(0, 1, 5), (1, 0, 3), (1, 1, 5)]);
        let mut b = SlotTimes::new();
        add_to_slots(&mut b, 0, 30, 0, g);
        merge_slots(&mut acc, [b, a]);
        assert_eq!(acc, vec![(0, 0, 10), (0, 1, 10), (1, 0, 16), (1, 1, 10), (2, 0, 10)]);
    }

    #[test]
    fn slot_times_sort_by_slot_and_region_dense_or_sparse() {
        let mut dense: SlotTimes = vec![(3, 2, 1), (1, 5, 2), (3, 0, 3), (2, 1, 4), (1, 1, 5), (3, 1, 6)];
        let mut expected = dense.clone();
        expected.sort_unstable_by_key(|e| (e.0, e.1));
        sort_by_slot_and_region(&mut dense);
        assert_eq!(dense, expected);
        let mut sparse: SlotTimes = vec![(1_000_000, 2, 1), (5, 1, 2), (-7, 0, 3)];
        sort_by_slot_and_region(&mut sparse);
        assert_eq!(sparse, vec![(-7, 0, 3), (5, 1, 2), (1_000_000, 2, 1)]);
        let mut none = SlotTimes::new();
        sort_by_slot_and_region(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn long_calls_merge_slots_and_ties_are_deterministic() {
        let names: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let g = Grid { t0: 0, t1: 100, res: 10 };
        // a covers [0, 35): slots 0..2 whole (merged), 3 partly; b covers [35, 40), tie in slot 3.
        let rows = call_rows(0, 0, &[(0, 35, 0), (35, 40, 1)], g, &names, false);
        assert_eq!(rows, vec![(0, 30, 0, 0, 0, 30), (30, 40, 0, 0, 0, 5)]);
        let rows = call_rows(0, 0, &[(30, 35, 1), (35, 40, 0)], g, &names, false);
        assert_eq!(rows, vec![(30, 40, 0, 0, 0, 5)]);
        // Every region: slots not merged, the most time first, the tie by name.
        let rows = call_rows(0, 0, &[(0, 35, 0), (35, 40, 1)], g, &names, true);
        assert_eq!(
            rows,
            vec![
                (0, 10, 0, 0, 0, 10),
                (10, 20, 0, 0, 0, 10),
                (20, 30, 0, 0, 0, 10),
                (30, 40, 0, 0, 0, 5),
                (30, 40, 0, 0, 1, 5)
            ]
        );
    }
}
