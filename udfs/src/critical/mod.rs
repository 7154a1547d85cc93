//! The critical path of a run and its profile, after Scalasca's critical-path analysis (Böhme,
//! Wolf, de Supinski, Schulz, Geimer, "Scalable critical-path based performance analysis",
//! IPDPS 2012): the chain of activities that determines when the run ends.
//!
//! `critical_path([rel => 'calls'], messages => 'messages', collectives => 'collectives',
//! events => 'events', regions => 'regions')` walks backward from the end of the rank that finishes last. Each rank's time is cut into
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
//! and call path ([`crate::sweeps::call_paths`]) are one segment; segments are numbered from the start of the run, and follow
//! each other without gap from the first segment's start to the run's end.
//!
//! `critical_path_profile(...)` gives per call path, rank and thread the time on the path, its
//! share of the run, the call path's mean exclusive time per location (a rank's thread; a
//! kernel's over the accelerator streams) with
//! waiting left out (MPI waits and OpenMP barrier waits), and per call path (rank NULL) the
//! critical-path imbalance: path time beyond that mean, the indicator of
//! the source (time a region holds the run up more than its average load explains). Scalasca
//! defines it per call path as the path time minus the time without wait states, averaged over
//! the locations; waiting inside MPI regions would otherwise hide their imbalance.
//!
//! Every thread is walked. An MPI wait continues on the thread of the rank waited for whose
//! MPI call was under way when the wait ended (thread 0 when none or it was). Between the
//! threads of a rank the path moves as in Scalasca's hybrid analysis (`crate::critical::omp_handovers`): at
//! an OpenMP barrier to the thread that entered last, at the start of a parallel region to the
//! master at the fork; the fork and join times are the parallel region's, and the time of a
//! barrier after its last enter, the fork and the join are kind `omp`. The thread records come
//! from `events` (forks and joins) and the OpenMP roles from `regions`, by default those of the
//! trace the calls are in; without them a rank's threads are walked only where MPI leads.
//!
//! A rank's accelerator streams are walked too, after CASITA's dependency graph
//! (`crate::accelerators::Handovers`): an early synchronisation of the host with the device
//! hands the path to the stream of the kernel it waited for, at that kernel's end; a kernel on
//! the path is the device's compute (`device`), and at its start the path goes back to the host
//! thread that launched it when the kernel waited for its launch (the stream's time from the
//! launch to the kernel is `queue`).

pub mod delays;
pub(crate) mod exits;
pub(crate) mod named;
pub(crate) mod near;
pub(crate) mod omp_handovers;
pub(crate) mod path_steps;
pub mod stretch_store;
pub(crate) mod waiting;
pub(crate) mod walk;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use crate::accelerators::Handovers;
use crate::critical::stretch_store::{Swept, location};
use crate::critical::walk::{Finalize, RunWaits, walk};
use crate::sweeps::stretches::{Stretch, path_name};
use crate::waits::openmp::ThreadRecords;
use crate::waits::{CollectiveWaits, FoldWaits, MESSAGE_COLUMNS, MessageWaits};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::{Projected, Relation};
use commdb_analysis::stream::{Mapper, StartFold};
use commdb_catalog::fast_hash::FastMap;

/// The parameters of the critical path, its profile and the delay costs: the calls, messages
/// and collectives of a whole run, and the thread records and regions of its OpenMP parallel
/// regions.
pub const PATH_PARAMS: &[Param] = &[
    param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
    param("messages", Type::Relation, ParamDefault::Text("messages"), "the matched messages between the calls"),
    param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations of the calls"),
    param(
        "events",
        Type::Relation,
        ParamDefault::Text("events"),
        "the events whose thread forks and joins delimit the OpenMP parallel regions (by default the events beside rel)",
    ),
    param(
        "regions",
        Type::Relation,
        ParamDefault::Text("regions"),
        "the regions whose OpenMP roles (parallel, barrier) tell the parallel regions and barriers (by default the regions beside rel)",
    ),
];

pub const CRITICAL_PATH: Function = Function {
    name: "critical_path",
    params: PATH_PARAMS,
    output: Output::Columns(&[
        col("seq", int64, "position on the path, from 0 at the run's start").never_null(),
        col("rank", int64, "the rank the path is on").never_null(),
        col("thread", int64, "the thread of the rank the path is on").never_null(),
        col("region", text, "the region it is in (NULL: time no region covers, the rank's own work)"),
        col("path", text, "the call path to the region, as call_tree gives it ('main/solve/MPI_Wait')"),
        col("start_ts", int64, "start of the stretch").never_null(),
        col("end_ts", int64, "end of the stretch").never_null(),
        col(
            "kind",
            text,
            "compute, mpi, transfer (a receive after its late sender started), omp (an OpenMP fork, join, or barrier after its last thread came), device (a kernel on an accelerator stream) or queue (a stream's time before a kernel began that no kernel covers: from its launch, or a copy ahead of it)",
        )
        .never_null(),
        col("duration", int64, "end_ts - start_ts").never_null(),
    ]),
    description: "the chain of activities that determines the run's end (Scalasca's critical path), walked back from the last rank's end over every thread: a call that waited continues on the rank it waited for, an OpenMP barrier on the thread that came last, a parallel region on the master at the fork, a synchronisation with an accelerator on the kernel it waited for (CASITA's graph); kind compute, mpi, transfer (a receive after its late sender started), omp, device (a kernel) or queue",
    make: Make::Table(critical_path),
};

pub const CRITICAL_PATH_PROFILE: Function = Function {
    name: "critical_path_profile",
    params: PATH_PARAMS,
    output: Output::Columns(&[
        col("region", text, "the call path's region (NULL: time no region covers, the rank's own work)"),
        col("path", text, "the call path, as call_tree gives it ('main/solve/MPI_Wait')"),
        col("rank", int64, "the rank (NULL: the call path over all ranks)"),
        col("thread", int64, "the thread of the rank (NULL with rank)"),
        col("path_ns", int64, "time of the region on the critical path").never_null(),
        col("path_share", float64, "path_ns over the run's length").never_null(),
        col(
            "mean_ns",
            float64,
            "the call path's mean exclusive time per location of its kind (a rank's thread; for a kernel, an accelerator stream), waiting left out (rank NULL rows)",
        ),
        col("imbalance_ns", float64, "path_ns beyond mean_ns: the critical-path imbalance (rank NULL rows)"),
    ]),
    description: "per call path, rank and thread (rank NULL: the call path over all of them) the time on the critical path and its share of the run; per call path its mean exclusive time per location and the critical-path imbalance, path time beyond that mean (Scalasca)",
    make: Make::Table(critical_path_profile),
};

/// One segment of the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub rank: i64,
    pub thread: i64,
    /// None: time no region covers.
    pub region: Option<String>,
    /// The call path to the region (None: time no region covers).
    pub path: Option<String>,
    pub start: i64,
    pub end: i64,
    pub kind: &'static str,
}

arguments! {
    /// The arguments of the critical path and its profile (PATH_PARAMS).
    struct PathArgs[PATH_PARAMS] {
        rel: Relation,
        messages: Relation,
        collectives: Relation,
        events: Option<Relation>,
        regions: Option<Relation>,
    }
}

/// The inputs of the critical path and its profile: the calls (swept by rank), the messages
/// and the collectives (folded into their waits), and the thread records and OpenMP regions.
pub(crate) fn path_inputs(a: &Args) -> Result<Vec<Projected>> {
    let function = a.function;
    let PathArgs { rel: calls, messages, collectives, events, regions } = PathArgs::read(a)?;
    let ci = calls.columns(function, &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let mi = messages.columns(function, &MESSAGE_COLUMNS)?;
    let oi = crate::waits::collective_columns(&collectives, function)?;
    let events = crate::waits::beside(events, a.session, &calls, "events")?;
    let regions = crate::waits::beside(regions, a.session, &calls, "regions")?;
    // The hand-overs between host threads and accelerator streams, when the trace has streams.
    let offload = match &events {
        Some(e) => crate::accelerators::offload_input(a, e)?,
        None => None,
    };
    // The forks and joins: the locks are no synchronisation the path or the delays follow.
    let kinds = &crate::waits::openmp::THREAD_KINDS[..2];
    let (events, regions) = crate::waits::thread_inputs(a, function, events, regions, kinds)?;
    let mut inputs =
        vec![(calls, Some(ci)), (messages, Some(mi)), (collectives, Some(oi)), (events, None), (regions, None)];
    inputs.extend(offload);
    Ok(inputs)
}

/// Time of `s` that is not waiting, `list` being its rank's waiting as disjoint intervals in
/// order (MPI waits: only an MPI stretch holds any).
fn not_waiting(s: &Stretch, list: &[(i64, i64)]) -> i64 {
    if s.call_start.is_none() {
        return s.to - s.from;
    }
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

/// The sweep of the calls, once the messages and collectives are folded into their waits and
/// the thread records read.
fn run_sweep(
    messages: MessageWaits,
    collectives: CollectiveWaits,
    records: ThreadRecords,
    answer: Answer,
    schema: SchemaRef,
    run_bytes: usize,
) -> Result<Box<dyn Mapper>> {
    let mut waits = RunWaits::new((answer == Answer::Profile).then_some(run_bytes));
    let mut message_waits = messages.stream()?;
    while let Some((w, _)) = message_waits.next()? {
        waits.add(&w)?;
    }
    drop(message_waits);
    collectives.finish_each(|w| waits.add(&w))?;
    sweep_over(waits, records, answer, schema)
}

/// The sweep of the calls over the run's waits (`waits` unsealed).
fn sweep_over(
    mut waits: RunWaits,
    records: ThreadRecords,
    answer: Answer,
    schema: SchemaRef,
) -> Result<Box<dyn Mapper>> {
    waits.seal()?;
    let name = if answer == Answer::Path { "critical_path" } else { "critical_path_profile" };
    Ok(Box::new(RunSweep {
        name,
        waits,
        records,
        swept: Swept::new(name)?,
        finalize: Finalize::default(),
        threads: BTreeMap::new(),
        totals: Totals::default(),
        answer,
        schema,
    }))
}

/// Per call path and location (rank, thread), the time not waiting: added to for every stretch
/// of the sweep, so hashed with the fast hasher (std's SipHash was a twentieth of the profile's
/// time).
pub(crate) type Totals = FastMap<(u32, Location), i64>;

/// Sweeps the calls a chunk of whole ranks at a time into the store of every thread's
/// stretches (and the profile's totals), then walks the path when the calls end.
struct RunSweep {
    name: &'static str,
    waits: RunWaits,
    records: ThreadRecords,
    swept: Swept,
    finalize: Finalize,
    /// Each rank's threads, in order (the master first).
    threads: BTreeMap<i64, Vec<i64>>,
    /// Per call path and location (rank, thread), the time of its stretches that is not
    /// waiting.
    totals: Totals,
    answer: Answer,
    schema: SchemaRef,
}

impl Mapper for RunSweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let profile = self.answer == Answer::Profile;
        let (finalize, totals, waits, threads) =
            (&mut self.finalize, &mut self.totals, &mut self.waits, &mut self.threads);
        let mut refused = Ok(());
        self.swept.sweep_threads(self.name, batches, &self.records, |rank, list, omp, names| {
            let waiting = match waits.waiting_of(rank) {
                Ok(w) => w,
                Err(e) => {
                    refused = Err(e);
                    Vec::new()
                }
            };
            let f = names.names.iter().position(|n| n == "MPI_Finalize").map(|i| i as u32);
            for th in list {
                threads.entry(rank).or_default().push(th.thread);
                if let Some(f) = f
                    && let Some(s) = th.stretches.iter().find(|s| s.region == f)
                    && finalize.entered.get(&rank).is_none_or(|e| s.from < e.1)
                {
                    finalize.entered.insert(rank, (th.thread, s.from));
                }
                if profile {
                    for s in &th.stretches {
                        *totals.entry((s.path, (rank, th.thread))).or_default() += not_waiting(s, &waiting);
                    }
                }
            }
            // Waiting at OpenMP barriers is left out of the mean too (Scalasca's wait map holds
            // every synchronisation point's waiting).
            if profile {
                for w in omp.iter().filter(|w| w.barrier) {
                    *totals.entry((w.path, (rank, w.thread))).or_default() -= w.end - w.start;
                }
            }
        })?;
        refused?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.swept.held_bytes() + 64 * self.totals.len() + self.records.held_bytes() + 16 * self.threads.len()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.swept.finish()?;
        let Swept { store, names, paths } = &mut self.swept;
        if self.answer == Answer::Profile {
            for (&rank, list) in &self.threads {
                if let Some((&master, pad)) =
                    list.first().and_then(|m| Some((m, store.padding_of(location(rank, *m))?)))
                {
                    // Time before a rank's first call is not in an MPI call: none of it waits.
                    *self.totals.entry((pad.path, (rank, master))).or_default() += not_waiting(&pad, &[]);
                }
            }
        }
        let offload = Handovers::from_batches(self.records.offload())?;
        let path = walk(store, &names.names, paths, &self.finalize, &mut self.waits, &self.threads, &offload)?;
        let batch = match self.answer {
            Answer::Path => path_batch(&path, &self.schema)?,
            Answer::Profile => {
                let means = means(&self.totals, &self.threads, &offload, |p| path_name(paths, p));
                profile_batch(&path, &means, &self.schema)?
            }
        };
        Ok(vec![batch])
    }
}

/// The analysis reading `inputs` (calls, messages, collectives, thread events, regions and, for
/// a trace with accelerator streams, their hand-overs) and giving `answer`; on a distributed
/// engine planned as steps ([`path_steps`]).
fn run_analysis(a: &Args, inputs: Vec<Projected>, answer: Answer) -> Result<Derived> {
    let schema = a.schema();
    let out = schema.clone();
    let run_bytes = crate::external_sort::run_bytes(a.session);
    let start: StartFold = Arc::new(move || {
        let schema = out.clone();
        FoldWaits::boxed(run_bytes, move |messages, collectives, records| {
            run_sweep(messages, collectives, records, answer, schema, run_bytes)
        })
    });
    let offload = inputs.len() > 5;
    let steps = path_steps::steps(answer, schema.clone(), offload, run_bytes);
    Derived::folded(schema, inputs, Main::ByRank(0), start).in_steps(steps)
}

/// The path's rows.
fn path_batch(path: &[Segment], schema: &SchemaRef) -> Result<RecordBatch> {
    let int = |f: &dyn Fn(&Segment) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(path.iter().map(f))) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..path.len() as i64)),
        int(&|s| s.rank),
        int(&|s| s.thread),
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
    Ok(Arc::new(run_analysis(a, path_inputs(a)?, Answer::Path)?))
}

/// A call path's time on the critical path and its region.
type OnPath<'a> = (i64, Option<&'a str>);

/// A location: rank and thread.
type Location = (i64, i64);

/// One row of the profile: call path, location (None: all of them), time on the path, region.
type ProfileRow<'a> = (Option<&'a str>, Option<Location>, i64, Option<&'a str>);

/// Every call path's mean exclusive time per location, waiting left out (Scalasca's
/// critical-path imbalance compares the path with the time minus all wait states), over the
/// locations of its kind: a host call path over every rank's threads, a kernel's over the
/// accelerator streams (a stream runs no host call path, a thread no kernel: dividing one's
/// time by the other's locations would make a run's imbalance depend on how many streams it
/// used). A call path on both kinds is averaged over both.
fn means<'a>(
    totals: &Totals,
    threads: &BTreeMap<i64, Vec<i64>>,
    offload: &Handovers,
    name: impl Fn(u32) -> Option<&'a str>,
) -> HashMap<Option<&'a str>, f64> {
    let (mut hosts, mut streams) = (0usize, 0usize);
    for (&rank, list) in threads {
        for &thread in list {
            if offload.is_stream(rank, thread) {
                streams += 1;
            } else {
                hosts += 1;
            }
        }
    }
    // Per call path: (time on host threads, on streams, seen on a host thread, on a stream).
    let mut by_path: HashMap<Option<&str>, (i64, i64, bool, bool)> = HashMap::new();
    for (&(path, (rank, thread)), &t) in totals {
        let e = by_path.entry(name(path)).or_default();
        if offload.is_stream(rank, thread) {
            (e.1, e.3) = (e.1 + t, true);
        } else {
            (e.0, e.2) = (e.0 + t, true);
        }
    }
    by_path
        .into_iter()
        .map(|(p, (host, device, on_host, on_stream))| {
            let locations = if on_host { hosts } else { 0 } + if on_stream { streams } else { 0 };
            (p, (host + device) as f64 / locations.max(1) as f64)
        })
        .collect()
}

/// The profile's rows: per call path and location (rank, thread), and per call path over all
/// locations, the time on `path`; `means` is each call path's mean time not waiting per
/// location (`means`).
fn profile_batch(path: &[Segment], means: &HashMap<Option<&str>, f64>, schema: &SchemaRef) -> Result<RecordBatch> {
    let runtime = match (path.first(), path.last()) {
        (Some(a), Some(b)) => (b.end - a.start).max(1),
        _ => 1,
    };
    // Per (call path, location) and per call path (location None): the time on the path and
    // the path's region.
    let mut on_path: BTreeMap<(Option<&str>, Option<Location>), OnPath> = BTreeMap::new();
    for s in path {
        for at in [Some((s.rank, s.thread)), None] {
            let e = on_path.entry((s.path.as_deref(), at)).or_insert((0, s.region.as_deref()));
            e.0 += s.end - s.start;
        }
    }
    let mut rows: Vec<ProfileRow> = on_path.into_iter().map(|((p, k), (v, region))| (p, k, v, region)).collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    let mean = |path: Option<&str>| means.get(&path).copied().unwrap_or(0.0);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.1.map(|l| l.0)).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.1.map(|l| l.1)).collect::<Vec<_>>())),
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
    Ok(Arc::new(run_analysis(a, path_inputs(a)?, Answer::Profile)?))
}
