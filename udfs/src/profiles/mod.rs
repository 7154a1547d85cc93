//! Where the time goes, from the calls: over time (`time_profile`: per time bin and region,
//! the time the ranks spent with that region innermost, as the summary timeline of Vampir
//! and Intel Trace Analyzer's function profile over time shows it) and by calling context
//! (`call_tree`: per call path and rank, calls, inclusive and exclusive time, as a profile's
//! calling-context tree; HPCToolkit and Score-P's CUBE present the same tree).
//!
//! Each stream (rank, thread) is swept once in start order with a stack of open calls: the
//! time between two consecutive enters or leaves belongs to the innermost open call, so
//! every region's time over all bins is its exclusive time (`calls.exclusive`). In
//! `time_profile`, time no call covers (a run without an enclosing region, uninstrumented code
//! between calls) is the stream's own work, region NULL, so the bins partition every stream's
//! time from the first call to the last. `call_tree` gives each rank that time as a path of
//! its own (path and region NULL, no calls), and `load_imbalance` ([`crate::profiles::summaries`]) as region
//! NULL, so a rank's exclusive times add up to the span of the run on every stream.
//!
//! Threads: both sweep every (rank, thread) stream, so a hybrid run's time is counted on every
//! location (a rank of 8 threads holds 8 times the span). In `call_tree` a worker thread's
//! outermost calls continue the master's call path at the fork before them (the master's
//! innermost call open at the fork), as Score-P's profiles and Cube give them
//! (`main/!$omp parallel @solver.c:10/compute`), so the rank's threads add up per call path; a
//! worker's time between parallel regions is its own uncovered time (path NULL): where it idled
//! while the master ran, which `wait_states` gives as omp_idle_threads.

pub mod counters;
pub mod partners;
pub mod summaries;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;

use crate::sweeps::call_paths::{Paths, Up};
use crate::sweeps::call_rows::RowOf;
use crate::sweeps::call_sweep::{Names, streams_named, sweep, uncovered};
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int32, int64, text};
use commdb_analysis::derived::{Derived, Spread};
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::plan::Work;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;

/// The relation of calls a profile reads.
pub const CALLS: Param = param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to profile");

pub const TIME_PROFILE: Function = Function {
    name: "time_profile",
    params: &[
        CALLS,
        param("bins", Type::Integer { min: 1 }, ParamDefault::Integer(100), "equal time bins over the calls' span"),
    ],
    output: Output::Columns(&[
        col("bin", int64, "bin number, from 0").never_null(),
        col("bin_start", int64, "start of the bin").never_null(),
        col("bin_end", int64, "end of the bin").never_null(),
        col(
            "region",
            text,
            "a region innermost in some stream during the bin (NULL: time no call covers, the stream's own work)",
        ),
        col("time_ns", int64, "time the streams spent with it innermost in the bin").never_null(),
        col("share", float64, "time_ns over the bin's time of all streams").never_null(),
    ]),
    description: "per equal time bin and region, the time the streams spent with that region innermost (a region's time over all bins is its exclusive time); share of the bin's time over all streams",
    make: Make::Table(time_profile),
};

/// The events whose forks start the parallel regions a worker thread's call paths continue.
const FORKS: Param = param(
    "events",
    Type::Relation,
    ParamDefault::Text("events"),
    "the events whose thread forks start the OpenMP parallel regions: a worker thread's call paths continue the master's at the fork (by default the events beside rel)",
);

pub const CALL_TREE: Function = Function {
    name: "call_tree",
    params: &[CALLS, FORKS],
    output: Output::Columns(&[
        col(
            "path",
            text,
            "the call path, regions joined by '/' ('...' first when it starts outside rel; NULL: time no call covers)",
        ),
        col("depth", int32, "nesting depth of the path's last region, from 0").never_null(),
        col("region", text, "the path's last region (NULL: time no call covers, the rank's own work)"),
        col("rank", int64, "").never_null(),
        col("calls", int64, "calls of this path on the rank (0 for time no call covers)").never_null(),
        col("inclusive_ns", int64, "their time with nested calls").never_null(),
        col("exclusive_ns", int64, "their time without nested calls").never_null(),
    ]),
    description: "the calling-context tree: per call path ('main/compute') and rank, calls, inclusive and exclusive time summed over the rank's threads, a worker thread's paths continuing the master's at the fork (a path whose start lies outside rel begins with '...'; path NULL holds the time of the run's span no call covers on the rank's streams, a worker's idling between parallel regions included)",
    make: Make::Table(call_tree),
};

/// The region index of time no call covers (no name: NULL).
const UNCOVERED: u32 = u32::MAX;

/// The time of each (bin, region) over the streams, a chunk of whole ranks at a time
/// (commdb_analysis::by_rank), on bins fixed before the calls are read.
struct Profile {
    /// First time, bin width and last time; None when the relation has no calls.
    bins: Option<(i64, i64, i64)>,
    time: BTreeMap<(i64, u32), i64>,
    names: Names,
    streams: usize,
    schema: SchemaRef,
    /// Whether it gives its times as they are, for a merge (`profile_partials`).
    partial: bool,
}

/// The schema of a part's times (a cluster's task's, commdb_analysis::derived::Spread): the answer's
/// columns but the share, with a last row of bin NULL whose time_ns is the part's streams.
fn profile_partials(answer: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = answer.fields().iter().take(5).map(|f| f.as_ref().clone()).collect();
    fields[0] = fields[0].clone().with_nullable(true);
    fields[1] = fields[1].clone().with_nullable(true);
    fields[2] = fields[2].clone().with_nullable(true);
    Arc::new(Schema::new(fields))
}

/// A bin's start, end and time.
type Bin = (i64, i64, i64);

/// time_profile's answer from the parts' times (`profile_partials`): their times added up,
/// each bin's share of the time of every part's streams.
fn merge_profile(partials: &[RecordBatch], answer: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut names = Names::default();
    // (bin, region) -> (bin_start, bin_end, time_ns)
    let mut time: BTreeMap<(i64, u32), Bin> = BTreeMap::new();
    let mut streams = 0i64;
    for batch in partials {
        let one = std::slice::from_ref(batch);
        let (bin, from, to) = (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?);
        let (region, ns) = (text_column(one, 3)?, int64_column(one, 4)?);
        for i in 0..batch.num_rows() {
            if bin.is_null(i) {
                streams += ns.value(i);
                continue;
            }
            let id = if region.is_valid(i) { names.id(region.value(i)) } else { UNCOVERED };
            time.entry((bin.value(i), id)).or_insert((from.value(i), to.value(i), 0)).2 += ns.value(i);
        }
    }
    let rows: Vec<(&(i64, u32), &Bin)> = time.iter().collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.0))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1))),
        Arc::new(StringArray::from(
            rows.iter().map(|r| names.names.get(r.0.1 as usize).map(String::as_str)).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.2))),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.2 as f64 / ((r.1.1 - r.1.0) * streams) as f64),
        )),
    ];
    Ok(vec![RecordBatch::try_new(answer.clone(), columns)?])
}

impl Profile {
    /// The schema of what it gives: the answer's, or its partial times'.
    fn output(&self) -> SchemaRef {
        if self.partial { profile_partials(&self.schema) } else { self.schema.clone() }
    }
}

impl Mapper for Profile {
    fn held_bytes(&self) -> usize {
        48 * self.time.len()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let streams = streams_named(batches, "time_profile", &mut self.names)?;
        self.streams += streams.len();
        let Some((t0, width, t1)) = self.bins else { return Ok(RecordBatch::new_empty(self.output())) };
        let time = &mut self.time;
        let mut add = |region: u32, from: i64, to: i64| {
            let mut a = from;
            while a < to {
                let bin = (a - t0) / width;
                let b = to.min(t0 + (bin + 1) * width);
                *time.entry((bin, region)).or_default() += b - a;
                a = b;
            }
        };
        for (_, calls) in &streams {
            // Time no call covers, from the first call of all to the last, is the stream's
            // own work: region NULL (UNCOVERED).
            let mut covered_to = t0;
            sweep(calls, |region, from, to| {
                add(UNCOVERED, covered_to, from);
                add(region, from, to);
                covered_to = covered_to.max(to);
            });
            add(UNCOVERED, covered_to, t1);
        }
        Ok(RecordBatch::new_empty(self.output()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let Some((t0, width, _)) = self.bins else { return Ok(vec![RecordBatch::new_empty(self.output())]) };
        let names = &self.names.names;
        let rows: Vec<(&(i64, u32), &i64)> = self.time.iter().filter(|(_, t)| **t > 0).collect();
        if self.partial {
            let streams = self.streams as i64;
            let bins = rows.iter().map(|r| Some(r.0.0)).chain([None]);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter(bins.clone())),
                Arc::new(Int64Array::from_iter(bins.clone().map(|b| b.map(|b| t0 + b * width)))),
                Arc::new(Int64Array::from_iter(bins.map(|b| b.map(|b| t0 + (b + 1) * width)))),
                Arc::new(StringArray::from(
                    rows.iter()
                        .map(|r| names.get(r.0.1 as usize).map(String::as_str))
                        .chain([None])
                        .collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| *r.1).chain([streams]))),
            ];
            return Ok(vec![RecordBatch::try_new(self.output(), columns)?]);
        }
        let room = (width * self.streams as i64) as f64;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| t0 + r.0.0 * width))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| t0 + (r.0.0 + 1) * width))),
            Arc::new(StringArray::from(
                rows.iter().map(|r| names.get(r.0.1 as usize).map(String::as_str)).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| *r.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| *r.1 as f64 / room))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

arguments! {
    struct TimeProfileArgs(TIME_PROFILE) {
        rel: Relation,
        bins: i64,
    }
}

fn time_profile(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let TimeProfileArgs { rel, bins } = TimeProfileArgs::read(a)?;
    if bins > 1_000_000 {
        return plan_err!("time_profile: bins must be at most 1000000, got {bins}");
    }
    let idx = rel.columns(a.function, &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let out = a.schema();
    // The bins come from the calls' first start and last end, aggregated before the calls
    // stream through the sweep.
    let bounds = commdb_analysis::relation::bounds_of(
        &rel,
        datafusion::logical_expr::col("start_ts"),
        datafusion::logical_expr::col("end_ts"),
    )?;
    let schema = out.clone();
    let profile = move |partial: bool| -> Prepare {
        let schema = schema.clone();
        Arc::new(move |held| {
            let (first, last) = commdb_analysis::relation::bounds_read(&held[0])?;
            let bins = match (first, last) {
                (Some(t0), Some(t1)) => Some((t0, ((t1 - t0) as f64 / bins as f64).ceil().max(1.0) as i64, t1)),
                _ => None,
            };
            let (time, names, schema) = (BTreeMap::new(), Names::default(), schema.clone());
            Ok(Box::new(Profile { bins, time, names, streams: 0, schema, partial }) as Box<dyn Mapper>)
        })
    };
    // Spread over a cluster's parts of whole ranks, each part's times are added up in one
    // task.
    let answer = out.clone();
    let merge: commdb_analysis::derived::Compute = Arc::new(move |partials| merge_profile(partials, &answer));
    let spread = Spread::Merged { schema: profile_partials(&out), work: Work::ByRank(profile(true), 0), merge };
    let inputs = vec![(rel, Some(idx)), bounds];
    Ok(Arc::new(Derived::by_rank(out, inputs, 0, profile(false)).spreading(spread)))
}

/// A call path's depth, calls, inclusive and exclusive time on one rank.
type Totals = (i32, i64, i64, i64);

/// The call tree's totals per (path, rank), a chunk of whole ranks at a time
/// (commdb_analysis::by_rank): a call's parent is on its own rank, so each chunk holds the calls its
/// paths go through.
struct Tree {
    names: Names,
    paths: Paths,
    totals: FastMap<(u32, i64), Totals>,
    /// The run's span (first start, last end of rel); None when rel has no calls.
    span: Option<(i64, i64)>,
    /// Per rank, the time of the span no call covers, summed over its streams.
    uncovered: BTreeMap<i64, i64>,
    /// The thread forks, whose master's paths the workers' paths continue.
    forks: ThreadRecords,
    schema: SchemaRef,
}

/// For each (rank, non-master thread) outermost row, the master's row open just before the
/// fork before it (started before the fork, not ended before it): the row whose path it
/// continues, by the rule `thread_waits::rank_threads` follows on stretches. Rows of ranks that
/// forked no thread are left out.
fn fork_parents(
    forks: &ThreadRecords,
    rank: &Int64Array,
    thread: &Int64Array,
    parent: &Int64Array,
    start: &Int64Array,
    end: &Int64Array,
) -> HashMap<usize, usize> {
    let mut out = HashMap::new();
    let valid = |i: usize| start.is_valid(i) && end.is_valid(i) && rank.is_valid(i);
    let thread_of = |i: usize| if thread.is_valid(i) { thread.value(i) } else { 0 };
    let mut by_rank: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for i in (0..rank.len()).filter(|&i| valid(i)) {
        by_rank.entry(rank.value(i)).or_default().push(i);
    }
    for (r, rows) in by_rank {
        let list = forks.forks(r);
        let Some(&(_, master)) = list.first() else { continue };
        let mut fork_times: Vec<i64> = list.iter().map(|f| f.0).collect();
        fork_times.sort_unstable();
        // The master's open row at each fork: its calls swept in start order with a stack.
        let mut calls: Vec<usize> = rows.iter().copied().filter(|&i| thread_of(i) == master).collect();
        calls.sort_by_key(|&i| (start.value(i), std::cmp::Reverse(end.value(i))));
        let mut open_at: Vec<Option<usize>> = Vec::with_capacity(fork_times.len());
        let (mut stack, mut next) = (Vec::<usize>::new(), 0);
        for &f in &fork_times {
            while next < calls.len() && start.value(calls[next]) < f {
                let c = calls[next];
                while stack.last().is_some_and(|&top| end.value(top) <= start.value(c)) {
                    stack.pop();
                }
                stack.push(c);
                next += 1;
            }
            while stack.last().is_some_and(|&top| end.value(top) < f) {
                stack.pop();
            }
            open_at.push(stack.last().copied());
        }
        for &i in rows.iter().filter(|&&i| thread_of(i) != master && parent.is_null(i)) {
            let k = fork_times.partition_point(|&f| f <= start.value(i));
            if let Some(Some(up)) = k.checked_sub(1).map(|k| open_at[k]) {
                out.insert(i, up);
            }
        }
    }
    out
}

impl Mapper for Tree {
    fn held_bytes(&self) -> usize {
        56 * self.totals.capacity()
            + self.forks.held_bytes()
            + self.paths.text_bytes
            + 48 * self.paths.text.len()
            + 32 * self.uncovered.len()
    }

    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let (id, parent) = (int64_column(batches, 0)?, int64_column(batches, 1)?);
        let (rank, region) = (int64_column(batches, 2)?, text_column(batches, 3)?);
        let (duration, exclusive) = (int64_column(batches, 4)?, int64_column(batches, 5)?);
        let row_of = RowOf::new(&id);
        let names = &mut self.names;
        let region: Vec<u32> =
            (0..id.len()).map(|i| names.id(if region.is_valid(i) { region.value(i) } else { "NULL" })).collect();
        let (thread, start, end) = (int64_column(batches, 6)?, int64_column(batches, 7)?, int64_column(batches, 8)?);
        // A worker's outermost call continues the master's row open at the fork before it.
        let fork_parent = if self.forks.is_empty() {
            HashMap::new()
        } else {
            fork_parents(&self.forks, &rank, &thread, &parent, &start, &end)
        };
        let (names, paths) = (&self.names, &mut self.paths);
        // The path of each row, from its parent's (memoised; a parent outside the relation
        // starts the path with "..."). Paths are interned: text is built once per path.
        let mut row_path: Vec<Option<u32>> = vec![None; id.len()];
        // The rows from one whose path is not known yet up to the first whose path is.
        let mut chain: Vec<usize> = Vec::new();
        let up_of = |row: usize| {
            if parent.is_valid(row) {
                row_of.get(parent.value(row)).map(|r| r as usize)
            } else {
                fork_parent.get(&row).copied()
            }
        };
        for i in 0..id.len() {
            chain.clear();
            chain.push(i);
            while let Some(&top) = chain.last() {
                if row_path[top].is_some() {
                    chain.pop();
                    break;
                }
                match (up_of(top), parent.is_valid(top)) {
                    (Some(p), _) if !chain.contains(&p) => chain.push(p),
                    (Some(_), _) => return exec_err!("call_tree: call {} is its own ancestor", id.value(top)),
                    (None, true) => {
                        row_path[top] = Some(paths.id(Up::Outside, region[top], names));
                        chain.pop();
                        break;
                    }
                    (None, false) => {
                        row_path[top] = Some(paths.id(Up::Root, region[top], names));
                        chain.pop();
                        break;
                    }
                }
            }
            while let Some(row) = chain.pop() {
                let up =
                    row_path[up_of(row).expect("a row on the chain has a parent")].expect("the parent's path is known");
                row_path[row] = Some(paths.id(Up::Path(up), region[row], names));
            }
        }
        for (i, path) in row_path.into_iter().enumerate() {
            let path = path.expect("every row has a path");
            let t = self.totals.entry((path, rank.value(i))).or_insert((paths.depth[path as usize], 0, 0, 0));
            t.1 += 1;
            t.2 += duration.value(i);
            t.3 += exclusive.value(i);
        }
        if let Some((t0, t1)) = self.span {
            let mut by_stream: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
            for i in 0..id.len() {
                if start.is_valid(i) && end.is_valid(i) {
                    let t = if thread.is_valid(i) { thread.value(i) } else { 0 };
                    by_stream.entry((rank.value(i), t)).or_default().push((start.value(i), end.value(i)));
                }
            }
            for ((r, _), mut calls) in by_stream {
                *self.uncovered.entry(r).or_default() += uncovered(&mut calls, t0, t1);
            }
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let (paths, names) = (&self.paths, &self.names.names);
        let mut rows: Vec<((u32, i64), Totals)> = std::mem::take(&mut self.totals).into_iter().collect();
        rows.sort_by(|a, b| (&paths.text[a.0.0 as usize], a.0.1).cmp(&(&paths.text[b.0.0 as usize], b.0.1)));
        // Time no call covers, after the paths: path and region NULL, no calls.
        let bare: Vec<(i64, i64)> = self.uncovered.iter().filter(|u| *u.1 > 0).map(|(r, t)| (*r, *t)).collect();
        let path = |r: &((u32, i64), Totals)| Some(paths.text[r.0.0 as usize].as_str());
        let leaf = |r: &((u32, i64), Totals)| Some(names[paths.leaf[r.0.0 as usize] as usize].as_str());
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter(rows.iter().map(path).chain(bare.iter().map(|_| None)))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1.0).chain(bare.iter().map(|_| 0)))),
            Arc::new(StringArray::from_iter(rows.iter().map(leaf).chain(bare.iter().map(|_| None)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0.1).chain(bare.iter().map(|b| b.0)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.1).chain(bare.iter().map(|_| 0)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.2).chain(bare.iter().map(|b| b.1)))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.3).chain(bare.iter().map(|b| b.1)))),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}

arguments! {
    struct CallTreeArgs(CALL_TREE) {
        rel: Relation,
        events: Option<Relation>,
    }
}

fn call_tree(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let CallTreeArgs { rel, events } = CallTreeArgs::read(a)?;
    let events = crate::waits::beside(events, a.session, &rel, "events")?;
    let forks = &crate::waits::openmp::THREAD_KINDS[..1];
    let (forks, _) = crate::waits::thread_inputs(a, a.function, events, None, forks)?;
    let idx = rel.columns(
        a.function,
        &["call_id", "parent_id", "rank", "region", "duration", "exclusive", "thread", "start_ts", "end_ts"],
    )?;
    let out = a.schema();
    let bounds = commdb_analysis::relation::bounds_of(
        &rel,
        datafusion::logical_expr::col("start_ts"),
        datafusion::logical_expr::col("end_ts"),
    )?;
    let schema = out.clone();
    let prepare: Prepare = Arc::new(move |held| {
        let span = match commdb_analysis::relation::bounds_read(&held[0])? {
            (Some(t0), Some(t1)) => Some((t0, t1)),
            _ => None,
        };
        let mut forks = ThreadRecords::default();
        for batch in &held[1] {
            forks.fold_events(batch)?;
        }
        let tree = Tree {
            forks,
            names: Names::default(),
            paths: Paths::default(),
            totals: FastMap::default(),
            span,
            uncovered: BTreeMap::new(),
            schema: schema.clone(),
        };
        Ok(Box::new(tree) as Box<dyn Mapper>)
    });
    // A call's path is on its own rank: over a cluster's parts of whole ranks, the parts'
    // rows together are the answer.
    let inputs = vec![(rel, Some(idx)), bounds, (forks, None)];
    Ok(Arc::new(Derived::by_rank(out, inputs, 2, prepare).spreading(Spread::Rows)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweeps::call_sweep::Call;

    #[test]
    fn the_sweep_gives_each_stretch_to_the_innermost_call() {
        // main [0, 100) holding a [10, 40) holding b [20, 30), then c [50, 60).
        let calls = [
            Call { start: 0, end: 100, region: 0 },
            Call { start: 10, end: 40, region: 1 },
            Call { start: 20, end: 30, region: 2 },
            Call { start: 50, end: 60, region: 3 },
        ];
        let mut per = [0i64; 4];
        sweep(&calls, |r, a, b| per[r as usize] += b - a);
        assert_eq!(per, [60, 20, 10, 10]);
    }

    #[test]
    fn uncovered_time_is_the_span_less_the_union_of_the_calls() {
        // [0, 100): calls [10, 40) holding [20, 30), [35, 50) overlapping it, [90, 120) past
        // the end: covered 10..50 and 90..100.
        let mut calls = vec![(90, 120), (10, 40), (20, 30), (35, 50)];
        assert_eq!(uncovered(&mut calls, 0, 100), 50);
        assert_eq!(uncovered(&mut [], 0, 100), 100);
        assert_eq!(uncovered(&mut [(0, 100)], 0, 100), 0);
    }
}
