//! The critical path of a run and its profile, after Scalasca's critical-path analysis (Böhme,
//! Wolf, de Supinski, Schulz, Geimer, "Scalable critical-path based performance analysis",
//! IPDPS 2012): the chain of activities that determines when the run ends.
//!
//! `critical_path([rel => 'calls'], messages => 'messages', collectives => 'collectives')`
//! walks backward from the end of the rank that finishes last. Each rank's time is cut into
//! stretches of its innermost region (the sweep of `call_tree` and `time_profile`). In a
//! computation stretch the path stays on the rank. In an MPI call it stays on the rank unless
//! the call waited for another rank (a wait state of `wait_states`: a late sender, a late
//! receiver, a collective's pattern): then the path covers the call from the end of that wait
//! to the current time and continues on the rank waited for, at the moment the wait ended (the
//! sender starting its send, the receiver posting, the last participant beginning), because
//! that rank's activity, not the waiting, determined the end. Time that no region covers (a
//! run without an enclosing region, uninstrumented code between calls) is the rank's own work:
//! the path walks through it as `compute` with region NULL. Waiting time is therefore never on
//! the path. The part of a receive after a late sender started sending is kind `transfer`;
//! other MPI time is `mpi`, time in non-MPI regions `compute`. MPI_Finalize synchronises every
//! rank, as Scalasca's analysis takes it: a rank in MPI_Finalize after the last rank entered it
//! waited there, and the path continues on that rank at its entry, so up to that instant the
//! path is the one Scalasca's starts from (its path ends there; commdb's goes on to the run's
//! end through the Finalize it was walked from). Consecutive stretches of one rank
//! and call path (crate::call_paths) are one segment; segments are numbered from the start of the run, and follow
//! each other without gap from the first segment's start to the run's end.
//!
//! `critical_path_profile(...)` gives per call path and rank the time on the path, its share of
//! the run, the call path's mean exclusive time per rank with waiting left out, and per call
//! path (rank NULL) the critical-path imbalance: path time beyond that mean, the indicator of
//! the source (time a region holds the run up more than its average load explains). Scalasca
//! defines it per call path as the path time minus the time without wait states, averaged over
//! the locations; waiting inside MPI regions would otherwise hide their imbalance.
//!
//! Only thread 0 of each rank is walked (the MPI thread of an MPI-only run); calls of other
//! threads are ignored.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::args::{Args, arguments};
use crate::call_paths::Paths;
use crate::declare::{Function, Make, Output, col, float64, int64, text};
use crate::derived::Derived;
use crate::params::{Param, ParamDefault, Type, param};
use crate::plan::Main;
use crate::relation::{Projected, Relation};
use crate::stream::{Mapper, StartFold};
use crate::stretch_store::{StretchStore, Swept};
use crate::stretches::{Stretch, path_name, region_name};
use crate::waits::{CollectiveWaits, FoldWaits, MESSAGE_COLUMNS, MessageWaits, Wait};

/// The parameters of the critical path and of the delay costs.
pub const RUN_PARAMS: &[Param] = &[
    param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
    param("messages", Type::Relation, ParamDefault::Text("messages"), "the matched messages between the calls"),
    param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations of the calls"),
];

pub const CRITICAL_PATH: Function = Function {
    name: "critical_path",
    params: RUN_PARAMS,
    output: Output::Columns(&[
        col("seq", int64, "position on the path, from 0 at the run's start").never_null(),
        col("rank", int64, "the rank the path is on").never_null(),
        col("region", text, "the region it is in (NULL: time no region covers, the rank's own work)"),
        col("path", text, "the call path to the region, as call_tree gives it ('main/solve/MPI_Wait')"),
        col("start_ts", int64, "start of the stretch").never_null(),
        col("end_ts", int64, "end of the stretch").never_null(),
        col("kind", text, "compute, mpi or transfer (a receive after its late sender started)").never_null(),
        col("duration", int64, "end_ts - start_ts").never_null(),
    ]),
    description: "the chain of activities that determines the run's end (Scalasca's critical path), walked back from the last rank's end: a call that waited continues on the rank it waited for; kind compute, mpi or transfer (a receive after its late sender started)",
    make: Make::Table(critical_path),
};

pub const CRITICAL_PATH_PROFILE: Function = Function {
    name: "critical_path_profile",
    params: RUN_PARAMS,
    output: Output::Columns(&[
        col("region", text, "the call path's region (NULL: time no region covers, the rank's own work)"),
        col("path", text, "the call path, as call_tree gives it ('main/solve/MPI_Wait')"),
        col("rank", int64, "the rank (NULL: the call path over all ranks)"),
        col("path_ns", int64, "time of the region on the critical path").never_null(),
        col("path_share", float64, "path_ns over the run's length").never_null(),
        col("mean_ns", float64, "the call path's mean exclusive time per rank, waiting left out (rank NULL rows)"),
        col("imbalance_ns", float64, "path_ns beyond mean_ns: the critical-path imbalance (rank NULL rows)"),
    ]),
    description: "per call path and rank (rank NULL: the call path over all ranks) the time on the critical path and its share of the run; per call path its mean exclusive time per rank and the critical-path imbalance, path time beyond that mean (Scalasca)",
    make: Make::Table(critical_path_profile),
};

/// One segment of the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub rank: i64,
    /// None: time no region covers.
    pub region: Option<String>,
    /// The call path to the region (None: time no region covers).
    pub path: Option<String>,
    pub start: i64,
    pub end: i64,
    pub kind: &'static str,
}

/// A wait as the walk reads it: when it ended, who ended it, and whether the rest of the call
/// is a transfer.
#[derive(Debug, Clone, Copy)]
struct WaitEnd {
    start: i64,
    end: i64,
    partner: i64,
    transfer: bool,
}

/// What the walk and the profile need of the wait states: each rank's waits sorted by their
/// end, and its waiting as disjoint intervals in time order.
struct RunWaits {
    ends: HashMap<i64, Vec<WaitEnd>>,
    waiting: HashMap<i64, Vec<(i64, i64)>>,
    count: usize,
}

impl RunWaits {
    fn new() -> RunWaits {
        RunWaits { ends: HashMap::new(), waiting: HashMap::new(), count: 0 }
    }

    fn add(&mut self, w: &Wait) {
        self.count += 1;
        self.waiting.entry(w.rank).or_default().push((w.ts, w.ts + w.wait_ns));
        if let Some(partner) = w.partner {
            self.ends.entry(w.rank).or_default().push(WaitEnd {
                start: w.ts,
                end: w.ts + w.wait_ns,
                partner,
                transfer: w.pattern == "late_sender",
            });
        }
    }

    /// Every wait has been added: the waits in order of their end, the waiting merged.
    fn seal(&mut self) {
        for list in self.waiting.values_mut() {
            list.sort_unstable();
            let mut kept = 0;
            for i in 0..list.len() {
                let (a, b) = list[i];
                if kept > 0 && a <= list[kept - 1].1 {
                    list[kept - 1].1 = list[kept - 1].1.max(b);
                } else {
                    list[kept] = (a, b);
                    kept += 1;
                }
            }
            list.truncate(kept);
            list.shrink_to_fit();
        }
        for list in self.ends.values_mut() {
            list.sort_by_key(|w| (w.end, w.start));
            list.shrink_to_fit();
        }
    }
}

/// The critical path, in time order, walked over the stretches of `store` (every rank's,
/// written) with the region names and call paths they were swept with.
fn walk(
    store: &mut StretchStore,
    names: &[String],
    paths: &Paths,
    finalize: &Finalize,
    waits: &RunWaits,
) -> Result<Vec<Segment>> {
    // From the end of the rank that finishes last (the lowest such rank).
    let last = store.ends().max_by_key(|&(r, end)| (end, -r));
    let Some((mut rank, mut t)) = last else { return Ok(Vec::new()) };
    // MPI_Finalize synchronises every rank (Scalasca's path starts where the last rank enters
    // it): a rank in MPI_Finalize after the latest entry waited there for that rank.
    let finalize_region = names.iter().position(|n| n == "MPI_Finalize").map(|i| i as u32);
    let latest_finalize = finalize.entered.iter().map(|(r, c)| (*r, *c)).max_by_key(|&(r, c)| (c, -r));
    let mut backward: Vec<Segment> = Vec::new();
    let mut seen: HashSet<(i64, i64)> = HashSet::new();
    let budget = store.len() * 4 + waits.count + 16;
    let mut emit = |rank: i64, s: &Stretch, start: i64, end: i64, kind: &'static str| {
        if end <= start {
            return;
        }
        let path = path_name(paths, s.path);
        match backward.last_mut() {
            Some(seg) if seg.rank == rank && seg.kind == kind && seg.path.as_deref() == path && seg.start == end => {
                seg.start = start;
            }
            _ => backward.push(Segment {
                rank,
                region: region_name(names, s.region).map(str::to_string),
                path: path.map(str::to_string),
                start,
                end,
                kind,
            }),
        }
    };
    for step in 0.. {
        if step > budget {
            return exec_err!(
                "critical_path: the walk does not end; the dependencies of the relations contradict each other"
            );
        }
        if step % 65_536 == 0 {
            commdb_catalog::interrupt::check("critical_path")?;
        }
        // The stretch holding the instant just before t.
        let Some(s) = store.holding(rank, t)? else { break };
        let Some(call_start) = s.call_start else {
            emit(rank, &s, s.from, t, "compute");
            t = s.from;
            continue;
        };
        if let Some((last_rank, entered)) = latest_finalize
            && Some(s.region) == finalize_region
            && rank != last_rank
            && s.from <= entered
            && entered < t
            && seen.insert((rank, entered))
        {
            emit(rank, &s, entered, t, "mpi");
            rank = last_rank;
            t = entered;
            continue;
        }
        // The latest wait of this call that ended by t.
        let wait = waits.ends.get(&rank).and_then(|list| {
            let k = list.partition_point(|w| w.end <= t);
            list[..k].iter().rev().find(|w| w.start >= call_start && w.end > call_start && store.contains(w.partner))
        });
        match wait {
            Some(w) if w.end >= s.from && seen.insert((rank, w.end)) => {
                emit(rank, &s, w.end, t, if w.transfer { "transfer" } else { "mpi" });
                rank = w.partner;
                t = w.end;
            }
            _ => {
                emit(rank, &s, s.from, t, "mpi");
                t = s.from;
            }
        }
    }
    backward.reverse();
    Ok(backward)
}

/// When each rank first entered MPI_Finalize.
#[derive(Debug, Default)]
struct Finalize {
    entered: HashMap<i64, i64>,
}

arguments! {
    /// The arguments of the analyses of a whole run (RUN_PARAMS): its calls, messages and
    /// collectives.
    pub struct RunArgs[RUN_PARAMS] {
        rel: Relation,
        messages: Relation,
        collectives: Relation,
    }
}

/// The inputs the analyses of a whole run read: the calls (swept by rank), the messages and
/// the collectives (folded into their waits).
pub fn inputs(a: &Args) -> Result<Vec<Projected>> {
    let function = a.function;
    let RunArgs { rel: calls, messages, collectives } = RunArgs::read(a)?;
    let ci = calls.columns(function, &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let mi = messages.columns(function, &MESSAGE_COLUMNS)?;
    let oi = crate::waits::collective_columns(&collectives, function)?;
    Ok(vec![(calls, Some(ci)), (messages, Some(mi)), (collectives, Some(oi))])
}

/// Time of `s` that is not waiting, `waiting` being its rank's disjoint intervals in order.
fn not_waiting(s: &Stretch, waiting: Option<&Vec<(i64, i64)>>) -> i64 {
    let Some(list) = waiting else { return s.to - s.from };
    let first = list.partition_point(|w| w.1 <= s.from);
    let waited: i64 = list[first..].iter().take_while(|w| w.0 < s.to).map(|w| w.1.min(s.to) - w.0.max(s.from)).sum();
    s.to - s.from - waited
}

/// What the analysis gives: the path, or its profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Path,
    Profile,
}

/// The sweep of the calls, once the messages and collectives are folded into their waits.
fn run_sweep(
    messages: MessageWaits,
    collectives: CollectiveWaits,
    answer: Answer,
    schema: SchemaRef,
) -> Result<Box<dyn Mapper>> {
    let mut waits = RunWaits::new();
    for w in messages.finish() {
        waits.add(&w);
    }
    collectives.finish_each(|w| waits.add(&w));
    waits.seal();
    let name = if answer == Answer::Path { "critical_path" } else { "critical_path_profile" };
    Ok(Box::new(RunSweep {
        name,
        waits,
        swept: Swept::new(name)?,
        finalize: Finalize::default(),
        totals: HashMap::new(),
        answer,
        schema,
    }))
}

/// Sweeps the calls a chunk of whole ranks at a time into the store of stretches (and the
/// profile's totals), then walks the path when the calls end.
struct RunSweep {
    name: &'static str,
    waits: RunWaits,
    swept: Swept,
    finalize: Finalize,
    /// Per call path, the time of every rank's stretches that is not waiting.
    totals: HashMap<u32, i64>,
    answer: Answer,
    schema: SchemaRef,
}

impl Mapper for RunSweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let profile = self.answer == Answer::Profile;
        let (finalize, totals, waits) = (&mut self.finalize, &mut self.totals, &self.waits);
        self.swept.sweep(self.name, batches, |rank, list, names| {
            let f = names.names.iter().position(|n| n == "MPI_Finalize").map(|i| i as u32);
            if let Some(f) = f
                && let Some(s) = list.iter().find(|s| s.region == f)
            {
                finalize.entered.insert(rank, s.from);
            }
            if profile {
                let waiting = waits.waiting.get(&rank);
                for s in list {
                    *totals.entry(s.path).or_default() += not_waiting(s, waiting);
                }
            }
        })?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.swept.held_bytes() + 64 * self.totals.len()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.swept.finish()?;
        let Swept { store, names, paths } = &mut self.swept;
        if self.answer == Answer::Profile {
            let ranks: Vec<i64> = store.ranks().collect();
            for rank in ranks {
                if let Some(pad) = store.padding_of(rank) {
                    *self.totals.entry(pad.path).or_default() += not_waiting(&pad, self.waits.waiting.get(&rank));
                }
            }
        }
        let path = walk(store, &names.names, paths, &self.finalize, &self.waits)?;
        let batch = match self.answer {
            Answer::Path => path_batch(&path, &self.schema)?,
            Answer::Profile => {
                let totals: HashMap<Option<&str>, i64> =
                    self.totals.iter().map(|(p, t)| (path_name(paths, *p), *t)).collect();
                profile_batch(&path, &totals, store.ranks().count(), &self.schema)?
            }
        };
        Ok(vec![batch])
    }
}

/// The analysis reading `inputs` (calls, messages, collectives) and giving `answer`.
fn run_analysis(schema: SchemaRef, inputs: Vec<Projected>, answer: Answer) -> Derived {
    let out = schema.clone();
    let start: StartFold = Arc::new(move || {
        let schema = out.clone();
        FoldWaits::boxed(move |messages, collectives, _| run_sweep(messages, collectives, answer, schema))
    });
    Derived::folded(schema, inputs, Main::ByRank(0), start)
}

/// The path's rows.
fn path_batch(path: &[Segment], schema: &SchemaRef) -> Result<RecordBatch> {
    let int = |f: &dyn Fn(&Segment) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(path.iter().map(f))) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..path.len() as i64)),
        int(&|s| s.rank),
        Arc::new(StringArray::from(path.iter().map(|s| s.region.as_deref()).collect::<Vec<_>>())),
        Arc::new(StringArray::from(path.iter().map(|s| s.path.as_deref()).collect::<Vec<_>>())),
        int(&|s| s.start),
        int(&|s| s.end),
        Arc::new(StringArray::from_iter_values(path.iter().map(|s| s.kind))),
        int(&|s| s.end - s.start),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn critical_path(a: &Args) -> Result<Arc<dyn TableProvider>> {
    Ok(Arc::new(run_analysis(a.schema(), inputs(a)?, Answer::Path)))
}

/// A call path's time on the critical path and its region.
type OnPath<'a> = (i64, Option<&'a str>);

/// One row of the profile: call path, rank (None: all ranks), time on the path, region.
type ProfileRow<'a> = (Option<&'a str>, Option<i64>, i64, Option<&'a str>);

/// The profile's rows: per call path and rank, and per call path over all ranks, the time
/// on `path`; `totals` is each call path's time not waiting over all `ranks` ranks.
fn profile_batch(
    path: &[Segment],
    totals: &HashMap<Option<&str>, i64>,
    ranks: usize,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let runtime = match (path.first(), path.last()) {
        (Some(a), Some(b)) => (b.end - a.start).max(1),
        _ => 1,
    };
    // Mean exclusive time per rank of every call path, waiting left out (Scalasca's
    // critical-path imbalance compares the path with the time minus all wait states), over
    // all walked ranks.
    let ranks = ranks.max(1) as f64;
    // Per (call path, rank) and per call path (rank None): the time on the path and the
    // path's region.
    let mut on_path: BTreeMap<(Option<&str>, Option<i64>), OnPath> = BTreeMap::new();
    for s in path {
        for rank in [Some(s.rank), None] {
            let e = on_path.entry((s.path.as_deref(), rank)).or_insert((0, s.region.as_deref()));
            e.0 += s.end - s.start;
        }
    }
    let mut rows: Vec<ProfileRow> = on_path.into_iter().map(|((p, k), (v, region))| (p, k, v, region)).collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    let mean = |path: Option<&str>| totals.get(&path).map_or(0.0, |&t| t as f64 / ranks);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2 as f64 / runtime as f64))),
        Arc::new(Float64Array::from(rows.iter().map(|r| r.1.is_none().then(|| mean(r.0))).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.1.is_none().then(|| (r.2 as f64 - mean(r.0)).max(0.0))).collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn critical_path_profile(a: &Args) -> Result<Arc<dyn TableProvider>> {
    Ok(Arc::new(run_analysis(a.schema(), inputs(a)?, Answer::Profile)))
}
