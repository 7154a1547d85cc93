//! Each side of each wait, measured where its rank's calls lie (step 4 of
//! [`super::steps`]): a task holds a part of whole ranks, sweeps their calls into every thread's
//! stretches as one process does, and measures for each wait of its ranks the side it holds.
//!
//! - **The waiter's side**: the waiting thread (the one whose MPI call the wait is in), its
//!   time per call path from the two ranks' latest synchronisation to the wait's start, less its
//!   own waiting there, and that waiting.
//! - **The delayer's side**: the thread waited for (whose MPI call was under way when the wait
//!   ended), its time per call path from their latest synchronisation to the wait's end, its
//!   waiting there, and its waits in that interval with their time in it, to which the costs
//!   are handed on.
//!
//! The threads' waits for each other (`crate::critical::omp_handovers`) lie within one rank:
//! both their sides are measured here. A call path is named across tasks by a key of its
//! text; each task gives the texts of its keys first.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryBuilder, Int8Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::measure::runs_of_locations;
use super::side_rows::{SideRow, put_name, put_side};
use super::steps::{DELAYER, WAITER, run_start};
use super::{Blocks, RankWaits, Scratch, W, WAIT_BATCH, excess_of, time_in};
use crate::critical::stretch_store::{StretchReader, StretchStore, Swept, location};
use crate::sweeps::stretches::{NO_PATH, path_name, region_name};
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::columns::schema_of;
use commdb_analysis::stream::{Folder, Mapper, StartFold};
use commdb_catalog::fast_hash::{FastMap, FastSet};

/// A row of the sides that names a call path (column `side`): its key as `id`.
pub(super) const PATH: i8 = 2;

/// A row of both sides of a wait whose ranks are in one task (column `side`): `loc` the
/// waiter's, `delayer` and `delayer_since` the delayer's, `present` whether the waiter has
/// stretches, and already joined, the delayer's excess per call path (`path_ns`, only where
/// it is more than nothing), its excess waiting (`waiting`) and, when that is more than
/// nothing, its waits to hand on to.
pub(super) const BOTH: i8 = 3;

/// The key of time no region covers.
pub(super) const NO_PATH_KEY: i64 = 0;

/// Each side of each wait, the latest end first (`end_desc`, the end negated), and before them
/// every call path's key (`id`) with its text and region (`side` PATH, `end_desc` the least).
/// `packed` holds the rest ([`super::side_rows`]): the side's location
/// (`crate::critical::stretch_store::location`), the wait's start and `waiters` (the threads it
/// stands for), `since` the side's synchronisation of a threads' wait (none for a wait between
/// ranks), whether the location has stretches, its waiting in the interval, its time per call
/// path less that waiting and, on the delayer's side, its waits overlapping the interval that
/// end no later than this one (their time in it). A wait whose two sides are here comes as one
/// row (`BOTH`), with the delayer's location and synchronisation.
pub(super) fn sides_schema() -> SchemaRef {
    schema_of(&[
        ("end_desc", DataType::Int64, false),
        ("id", DataType::Int64, false),
        ("side", DataType::Int8, false),
        ("packed", DataType::Binary, false),
    ])
}

/// The key of a call path's text: the same in every task (a hash with fixed keys), never
/// `NO_PATH_KEY`. The task that hands the costs on checks that no two texts share one.
pub(super) fn path_key(text: &str) -> i64 {
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    text.hash(&mut h);
    match h.finish() as i64 {
        NO_PATH_KEY => 1,
        k => k,
    }
}

pub(super) fn sides_start() -> StartFold {
    Arc::new(|| Box::new(FoldSides::default()))
}

/// Folds the sides of the task's ranks (input 1), every location's first instant (2) and the
/// threads' records (3 on).
#[derive(Default)]
struct FoldSides {
    /// The sides routed here, each located on its rank until the calls are swept.
    jobs: Blocks<Job>,
    firsts: Vec<RecordBatch>,
    records: ThreadRecords,
}

impl Folder for FoldSides {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 => {
                let jobs = &mut self.jobs;
                super::interval_rows::each_side(batch, |rank, s| {
                    jobs.push(Job {
                        id: s.id,
                        loc: rank,
                        start: s.start,
                        end: s.end,
                        from: s.from.unwrap_or(NO_FROM),
                        partner: s.partner,
                        waiters: 1,
                        side: s.side,
                        omp: false,
                    })
                })
            }
            2 => {
                self.firsts.push(batch.clone());
                Ok(())
            }
            _ => self.records.fold_input(input, batch),
        }
    }

    fn held_bytes(&self) -> usize {
        self.jobs.held_bytes()
            + self.firsts.iter().map(RecordBatch::get_array_memory_size).sum::<usize>()
            + self.records.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldSides { jobs, firsts, records } = *self;
        let (start, located) = run_start(&firsts, |rank| records.master(rank))?;
        let with_calls: FastSet<i64> = located.keys().copied().collect();
        Ok(Box::new(Sides {
            jobs,
            with_calls,
            start,
            records,
            swept: Swept::new("delay_costs")?,
            threads: BTreeMap::new(),
            omp: Vec::new(),
            measured: None,
        }))
    }

    fn mapper_counts_the_fold(&self) -> bool {
        true
    }
}

/// A side to measure: the wait's id, its location (its rank until the calls are swept), start
/// and end, the side's start of the interval (`NO_FROM`: the location's first instant), the
/// other side's rank (a wait between ranks), the threads it stands for, which side, and
/// whether it is a threads' wait (its `from` their synchronisation).
#[derive(Debug, Clone, Copy)]
struct Job {
    id: i64,
    loc: i64,
    start: i64,
    end: i64,
    from: i64,
    partner: i64,
    waiters: u32,
    side: i8,
    omp: bool,
}

/// A side whose interval starts at its location's first instant.
const NO_FROM: i64 = i64::MIN;

/// What the task measures, once its calls are swept: the jobs in the order they are given,
/// the waits by location, and the keys of the call paths.
struct Measured {
    jobs: Vec<Job>,
    next: usize,
    ids: Vec<i64>,
    by_loc: FastMap<i64, RankWaits>,
    keys: Vec<i64>,
    /// The call paths' names, given first.
    names: Option<RecordBatch>,
}

/// Sweeps the task's ranks' calls, then measures each side of their waits.
struct Sides {
    /// The sides routed here, each located on its rank until the calls are swept.
    jobs: Blocks<Job>,
    /// The ranks that have calls in any task.
    with_calls: FastSet<i64>,
    /// Where the run begins, over every task's ranks.
    start: Option<i64>,
    records: ThreadRecords,
    swept: Swept,
    /// Each rank's threads, in order (the master first).
    threads: BTreeMap<i64, Vec<i64>>,
    /// The threads' waits for each other, between locations.
    omp: Vec<W>,
    measured: Option<Measured>,
}

impl Mapper for Sides {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let (threads, omp) = (&mut self.threads, &mut self.omp);
        self.swept.sweep_threads("delay_costs", batches, &self.records, |rank, list, waits, _| {
            threads.insert(rank, list.iter().map(|t| t.thread).collect());
            for w in waits {
                omp.push(W::of_threads(rank, w));
            }
        })?;
        Ok(RecordBatch::new_empty(sides_schema()))
    }

    fn held_bytes(&self) -> usize {
        let measured = self.measured.as_ref().map_or(0, |m| {
            m.jobs.capacity() * std::mem::size_of::<Job>()
                + m.ids.capacity() * 8
                + m.by_loc.values().map(RankWaits::held_bytes).sum::<usize>()
        });
        self.swept.held_bytes()
            + self.records.held_bytes()
            + self.jobs.held_bytes()
            + self.omp.capacity() * std::mem::size_of::<W>()
            + 16 * self.with_calls.capacity()
            + measured
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.swept.finish_from(self.start)?;
        self.measured = Some(self.plan()?);
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(m) = self.measured.as_mut() else { return Ok(None) };
        if let Some(names) = m.names.take() {
            return Ok(Some(names));
        }
        if m.next >= m.jobs.len() {
            self.measured = None;
            return Ok(None);
        }
        let mut to = (m.next + WAIT_BATCH).min(m.jobs.len());
        // The two sides of a wait together (they follow each other).
        if to < m.jobs.len() && m.jobs[to].id == m.jobs[to - 1].id {
            to += 1;
        }
        let out = measure_batch(&self.swept, m, m.next, to)?;
        m.next = to;
        Ok(Some(out))
    }
}

impl Sides {
    /// The jobs of the task's waits, each located on its thread, and the waits by location.
    fn plan(&mut self) -> Result<Measured> {
        let Swept { store, names, paths } = &mut self.swept;
        let none = Vec::new();
        let mut jobs = std::mem::take(&mut self.jobs).into_vec(2 * self.omp.len());
        for j in &mut jobs {
            let rank = j.loc;
            let t = if j.side == WAITER { j.start } else { j.end };
            let thread = store.mpi_thread(self.threads.get(&rank).unwrap_or(&none), rank, t)?;
            j.loc = location(rank, thread);
        }
        // The delayer of each wait whose two sides are both here.
        let delayers: FastMap<i64, i64> = jobs.iter().filter(|j| j.side == DELAYER).map(|j| (j.id, j.loc)).collect();
        // The waits whose waiter is here, as one process keeps them: not a location's wait for
        // itself, nor a wait for a location without stretches (whose rank has no calls).
        let waiters = jobs.iter().filter(|j| j.side == WAITER).count() + self.omp.len();
        let (mut all, mut ids): (Vec<W>, Vec<i64>) = (Vec::with_capacity(waiters), Vec::with_capacity(waiters));
        for j in jobs.iter().filter(|j| j.side == WAITER) {
            let kept = match delayers.get(&j.id) {
                Some(&d) => d != j.loc && store.contains(d),
                None => self.with_calls.contains(&j.partner),
            };
            if kept {
                let delayer = delayers.get(&j.id).copied().unwrap_or(location(j.partner, 0));
                all.push(W { waiter: j.loc, delayer, start: j.start, end: j.end, since: super::NO_SYNC, waiters: 1 });
                ids.push(j.id);
            }
        }
        drop(delayers);
        // The threads' waits: numbered apart from the waits between ranks (from 0 up) by
        // negative ids, by rank.
        let mut seq: FastMap<i64, i64> = FastMap::default();
        for w in std::mem::take(&mut self.omp) {
            let rank = crate::critical::stretch_store::rank_thread(w.waiter).0;
            let k = seq.entry(rank).or_default();
            if !(0..1 << 30).contains(&rank) {
                return exec_err!("delay_costs: rank {rank}'s threads' waits are numbered by rank, from 0 to 2^30 - 1");
            }
            if *k >= 1 << 32 {
                return exec_err!("delay_costs: rank {rank} has more than 2^32 waits of threads for each other");
            }
            let id = -(1 + (rank << 32) + *k);
            *k += 1;
            for (side, loc, from) in [(WAITER, w.waiter, w.since[0]), (DELAYER, w.delayer, w.since[1])] {
                let (start, end, waiters) = (w.start, w.end, w.waiters);
                jobs.push(Job { id, loc, start, end, from, partner: rank, waiters, side, omp: true });
            }
            if w.delayer != w.waiter && store.contains(w.delayer) {
                all.push(w);
                ids.push(id);
            }
        }
        if u32::try_from(all.len()).is_err() {
            return exec_err!(
                "delay_costs: {} waits in one part; at most {} are measured at once",
                all.len(),
                u32::MAX
            );
        }
        let by_loc = RankWaits::of(&all);
        drop(all);
        // The latest end first, as the costs are handed on.
        jobs.sort_unstable_by_key(|j| (std::cmp::Reverse(j.end), j.id, j.side));
        jobs.shrink_to_fit();
        store.forget_blocks();
        let keys: Vec<i64> =
            (0..paths.text.len() as u32).map(|p| path_name(paths, p).map_or(NO_PATH_KEY, path_key)).collect();
        let named: Vec<(i64, &str, Option<&str>)> = (0..paths.text.len() as u32)
            .filter_map(|p| {
                let leaf = paths.leaf.get(p as usize).copied().unwrap_or(u32::MAX);
                path_name(paths, p).map(|t| (keys[p as usize], t, region_name(&names.names, leaf)))
            })
            .collect();
        let names = names_batch(&named)?;
        Ok(Measured { jobs, next: 0, ids, by_loc, keys, names: Some(names) })
    }
}

/// The rows naming the call paths: `(key, text, region)`.
fn names_batch(named: &[(i64, &str, Option<&str>)]) -> Result<RecordBatch> {
    let n = named.len();
    let mut packed =
        BinaryBuilder::with_capacity(n, named.iter().map(|r| 12 + r.1.len() + r.2.map_or(0, str::len)).sum());
    let mut bytes = Vec::new();
    for &(_, text, region) in named {
        bytes.clear();
        put_name(&mut bytes, text, region);
        packed.append_value(&bytes);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![i64::MIN; n])),
        Arc::new(Int64Array::from_iter_values(named.iter().map(|r| r.0))),
        Arc::new(Int8Array::from(vec![PATH; n])),
        Arc::new(packed.finish()),
    ];
    Ok(RecordBatch::try_new(sides_schema(), columns)?)
}

/// A row of the sides: a side of a wait (its job), or both (the waiter's job and the
/// delayer's, what they found joined).
struct Row<'a> {
    job: &'a Job,
    side: i8,
    delayer: Option<&'a Job>,
    found: Found,
}

/// What a side found: whether its location has stretches, its waiting, its time per call path
/// (key, ns) and, on the delayer's side, its waits it hands on to (id, ns in the interval).
#[derive(Debug, Default, PartialEq)]
struct Found {
    present: bool,
    waiting: i64,
    paths: Vec<(i64, i64)>,
    theirs: Vec<(i64, i64)>,
}

/// Where a job's walk runs: its location and interval (from the side's synchronisation, or its
/// location's first instant, to the wait's start on the waiter's side, its end on the
/// delayer's).
fn interval(store: &StretchStore, j: &Job) -> Interval {
    let from = if j.from == NO_FROM { store.origin(j.loc).unwrap_or(0) } else { j.from };
    let until = if j.side == WAITER { j.start } else { j.end };
    (j.loc, from, until)
}

/// A walk's interval: its location, from, until.
type Interval = (i64, i64, i64);

/// What a walk found: its location's waiting in the interval, and its time per call path (by
/// key) less that waiting.
type Walked = (i64, Vec<(i64, i64)>);

/// The walk of a side's interval; None where the location has no stretches.
fn walk(
    reader: &mut StretchReader,
    swept: &Swept,
    m: &Measured,
    (loc, from, until): Interval,
) -> Result<Option<Walked>> {
    if !swept.store.contains(loc) {
        return Ok(None);
    }
    let none = RankWaits::default();
    let waits = m.by_loc.get(&loc).unwrap_or(&none);
    let mut scratch = Scratch::default();
    let waiting = time_in(reader, loc, waits, from, until, &mut scratch)?;
    let paths = scratch
        .paths
        .0
        .iter()
        .map(|&(p, t)| {
            (if p == NO_PATH { NO_PATH_KEY } else { m.keys.get(p as usize).copied().unwrap_or(NO_PATH_KEY) }, t)
        })
        .collect();
    Ok(Some((waiting, paths)))
}

/// What a side found, given its interval's walk: on the delayer's side with waiting, its waits
/// overlapping the interval that end no later than this one, other than itself.
fn found(m: &Measured, j: &Job, (loc, from, _): Interval, walked: Option<&Walked>) -> Found {
    let Some((waiting, paths)) = walked else { return Found::default() };
    let theirs = match m.by_loc.get(&loc) {
        Some(waits) if j.side == DELAYER && *waiting > 0 => waits
            .overlapping(from, j.end)
            .filter(|v| v.end <= j.end && m.ids[v.index] != j.id)
            .map(|v| (m.ids[v.index], v.end.min(j.end) - v.start.max(from)))
            .collect(),
        _ => Vec::new(),
    };
    Found { present: true, waiting: *waiting, paths: paths.clone(), theirs }
}

/// What each job of `from..to` found, in the jobs' order. As in one process
/// (`super::measure`), the jobs' walks are put in order of location and interval and shared
/// among the threads a run of whole locations each (a reader each), so a location's walks
/// follow one another through stretches still in the cache, and a walk of the same location
/// and interval as the one before it is not walked again: the members of a collective that
/// all waited for its last share the delayer's side, and all come to the task of the last
/// one's rank.
fn found_all(swept: &Swept, m: &Measured, from: usize, to: usize) -> Result<Vec<Found>> {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads().max(1);
    let mut walks: Vec<(Interval, u32)> =
        (from..to).map(|i| (interval(&swept.store, &m.jobs[i]), (i - from) as u32)).collect();
    walks.par_sort_unstable();
    let runs = runs_of_locations(&walks, threads, |w| w.0.0);
    let parts: Vec<Result<Vec<(u32, Found)>>> = runs
        .into_par_iter()
        .map(|(lo, hi)| {
            let mut reader = swept.store.reader()?;
            let mut out = Vec::with_capacity(hi - lo);
            let mut last: Option<(Interval, Option<Walked>)> = None;
            for &(at, k) in &walks[lo..hi] {
                if last.as_ref().is_none_or(|l| l.0 != at) {
                    last = Some((at, walk(&mut reader, swept, m, at)?));
                }
                let walked = last.as_ref().and_then(|l| l.1.as_ref());
                out.push((k, found(m, &m.jobs[from + k as usize], at, walked)));
            }
            Ok(out)
        })
        .collect();
    let mut all: Vec<Found> = (from..to).map(|_| Found::default()).collect();
    for part in parts {
        for (k, f) in part? {
            all[k as usize] = f;
        }
    }
    Ok(all)
}

/// Measure jobs `from..to` into rows.
fn measure_batch(swept: &Swept, m: &Measured, from: usize, to: usize) -> Result<RecordBatch> {
    let mut found = found_all(swept, m, from, to)?;
    let jobs = &m.jobs[from..to];
    // A row per side, or per wait whose two sides are here.
    let mut rows: Vec<Row> = Vec::with_capacity(jobs.len());
    let mut k = 0;
    while k < jobs.len() {
        let j = &jobs[k];
        if j.side == WAITER && jobs.get(k + 1).is_some_and(|d| d.id == j.id && d.side == DELAYER) {
            let d = &jobs[k + 1];
            let (fw, fd) = (std::mem::take(&mut found[k]), std::mem::take(&mut found[k + 1]));
            k += 2;
            // As one process keeps them: not a location's wait for itself, nor a wait for a
            // location without stretches.
            if d.loc == j.loc || !fd.present {
                continue;
            }
            let mut row = Row { job: j, side: BOTH, delayer: Some(d), found: Found::default() };
            if fw.present {
                let (paths, waiting) = excess_of(&fd.paths, &fw.paths, fd.waiting, fw.waiting);
                let theirs = if waiting > 0 { fd.theirs } else { Vec::new() };
                row.found = Found { present: true, waiting, paths, theirs };
            }
            rows.push(row);
            continue;
        }
        rows.push(Row { job: j, side: j.side, delayer: None, found: std::mem::take(&mut found[k]) });
        k += 1;
    }
    let mut packed = BinaryBuilder::with_capacity(rows.len(), rows.len() * 48);
    let mut bytes = Vec::new();
    for r in &rows {
        let side = SideRow {
            loc: r.job.loc,
            start: r.job.start,
            since: r.job.omp.then_some(r.job.from),
            waiters: r.job.waiters,
            present: r.found.present,
            waiting: r.found.waiting,
            delayer: r.delayer.map(|d| (d.loc, d.omp.then_some(d.from))),
        };
        bytes.clear();
        put_side(&mut bytes, r.job.id, r.job.end, &side, &r.found.paths, &r.found.theirs);
        packed.append_value(&bytes);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| -r.job.end))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.job.id))),
        Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.side))),
        Arc::new(packed.finish()),
    ];
    Ok(RecordBatch::try_new(sides_schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweeps::stretches::Stretch;

    /// Ranks 0-5 with stretches every 10 ns on call paths 0-4; in each of 30 collectives a
    /// microsecond apart, ranks 0-4 wait for rank 5 since the collective before (five delayer
    /// sides of one interval), rank 5 waits once for rank 4 (so that it has waits to hand on
    /// to), rank 1 for rank 2 from its location's first instant, and rank 3 for rank 9, which
    /// has no stretches.
    fn task() -> (Swept, Measured) {
        let mut swept = Swept::new("test").unwrap();
        for rank in 0..6 {
            let list: Vec<Stretch> = (0..3_000)
                .map(|k| {
                    let path = ((k + rank) % 5) as u32;
                    Stretch { from: 10 * k, to: 10 * k + 10, region: path, path, call_start: None, hand: None }
                })
                .collect();
            swept.store.push(location(rank, 0), &list, true).unwrap();
        }
        swept.store.finish_writing(99).unwrap();
        let mut jobs = Vec::new();
        let mut waits = Vec::new();
        let mut wait = |waiter: i64, delayer: i64, start: i64, end: i64, since: Option<i64>| {
            let id = waits.len() as i64;
            let from = since.unwrap_or(NO_FROM);
            for (side, loc) in [(WAITER, waiter), (DELAYER, delayer)] {
                let partner = if side == WAITER { delayer } else { waiter };
                jobs.push(Job { id, loc: location(loc, 0), start, end, from, partner, waiters: 1, side, omp: false });
            }
            let since = [since.unwrap_or(0); 2];
            waits.push(W { waiter: location(waiter, 0), delayer: location(delayer, 0), start, end, since, waiters: 1 });
        };
        for j in 1..30 {
            let (end, before) = (1_000 * j, 1_000 * (j - 1));
            for rank in 0..5 {
                wait(rank, 5, end - 30 * (rank + 1), end, Some(before));
            }
            wait(5, 4, end - 600, end - 400, Some(before));
            wait(1, 2, end - 300, end - 250, None);
            wait(3, 9, end - 200, end - 100, Some(before));
        }
        jobs.sort_unstable_by_key(|j| (std::cmp::Reverse(j.end), j.id, j.side));
        let ids = (0..waits.len() as i64).collect();
        let by_loc = RankWaits::of(&waits);
        (swept, Measured { jobs, next: 0, ids, by_loc, keys: vec![100, 101, 102, 103, 104], names: None })
    }

    #[test]
    fn jobs_measured_in_order_of_location_find_what_each_finds_alone() {
        let (swept, m) = task();
        let alone: Vec<Found> = {
            let mut reader = swept.store.reader().unwrap();
            m.jobs
                .iter()
                .map(|j| {
                    let at = interval(&swept.store, j);
                    found(&m, j, at, walk(&mut reader, &swept, &m, at).unwrap().as_ref())
                })
                .collect()
        };
        let distinct: FastSet<Interval> = m.jobs.iter().map(|j| interval(&swept.store, j)).collect();
        assert!(distinct.len() + 4 * 29 <= m.jobs.len(), "the delayer's sides of a collective share their walk");
        assert!(alone.iter().any(|f| !f.present) && alone.iter().any(|f| !f.theirs.is_empty()));
        for threads in 1..4 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for (from, to) in [(0, m.jobs.len()), (7, m.jobs.len() - 5), (3, 4)] {
                let got = pool.install(|| found_all(&swept, &m, from, to)).unwrap();
                assert_eq!(got, alone[from..to], "jobs {from}..{to} on {threads} threads");
            }
        }
    }
}
