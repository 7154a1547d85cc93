//! A run's iterations: `iterations([rel => 'calls'], marker => ...)` finds the repeated
//! structure of the run (the region whose calls end a step, `marker`) and gives per iteration
//! and rank its start and end and its time divided into computation, MPI and waiting (the
//! Scalasca wait states of `wait_states` that fall in it, by kind). When no region is called
//! alike by every rank, each rank's iterations follow the repeating signature of its own calls
//! (`signature`); a rank whose calls do not repeat gets one iteration, and a notice says so. The calls are swept a chunk of
//! whole ranks at a time, after the messages and collectives are folded into their waits and
//! the calls counted per rank and region (a row per region); only each rank's first thread is
//! cut (the MPI thread of an MPI-only run).

pub mod marker;
pub mod profile;
pub mod regions;
pub mod signature;
pub mod split;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use commdb_catalog::fast_hash::FastMap;
use commdb_catalog::wallclock::Notices;
use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::provider_as_source;
use datafusion::common::{TableReference, exec_err};
use datafusion::error::Result;
use datafusion::functions_aggregate::expr_fn::{count, max, min};
use datafusion::logical_expr::{LogicalPlanBuilder, col, lit};

use crate::sweeps::call_sweep::{Names, streams_named};
use crate::waits::{CollectiveWaits, MESSAGE_COLUMNS, MessageWaits, Wait};
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::declare::{Function, Make, Output, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::{Projected, Relation, resolve, trace_schema, trace_table};
use commdb_analysis::stream::{Folder, Mapper, StartFold};

use marker::Closing;
use marker::RegionCount;
use split::{COLLECTIVE, LATE_RECEIVER, LATE_SENDER, Waited};

pub const ITERATIONS: Function = Function {
    name: "iterations",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
        param(
            "marker",
            Type::Text,
            ParamDefault::Chosen(
                "found: the collective (else region) every rank calls alike, most often; else each rank's own repeating calls",
            ),
            "the region whose calls end an iteration",
        ),
        param(
            "messages",
            Type::Relation,
            ParamDefault::Chosen("the messages beside rel"),
            "the matched messages, for waiting",
        ),
        param(
            "collectives",
            Type::Relation,
            ParamDefault::Chosen("the collectives beside rel"),
            "the collective operations, for waiting",
        ),
    ],
    output: Output::Columns(&[
        commdb_analysis::declare::col("iteration", int64, "the iteration, from 0").never_null(),
        commdb_analysis::declare::col("rank", int64, "").never_null(),
        commdb_analysis::declare::col("start_ts", int64, "when the rank began the iteration").never_null(),
        commdb_analysis::declare::col("end_ts", int64, "when it ended it (the end of its marker call)").never_null(),
        commdb_analysis::declare::col("duration_ns", int64, "end_ts - start_ts").never_null(),
        commdb_analysis::declare::col("compute_ns", int64, "time outside MPI calls (computation, instrumented or not)")
            .never_null(),
        commdb_analysis::declare::col("mpi_ns", int64, "time in MPI calls not spent waiting").never_null(),
        commdb_analysis::declare::col("waiting_ns", int64, "time waiting in MPI calls (Scalasca's wait states)").never_null(),
        commdb_analysis::declare::col("late_sender_ns", int64, "of which waiting for a late sender").never_null(),
        commdb_analysis::declare::col("late_receiver_ns", int64, "of which waiting for a late receiver").never_null(),
        commdb_analysis::declare::col("collective_wait_ns", int64, "of which waiting in collective operations").never_null(),
        commdb_analysis::declare::col(
            "marker",
            text,
            "the region whose calls end the rank's iterations (NULL: its calls do not repeat)",
        ),
        commdb_analysis::declare::col(
            "step_group",
            text,
            "the ranks that step together: whose iterations end with the same region as many times ('MPI_Allreduce x60'); most runs have one",
        )
        .never_null(),
    ]),
    description: "the run's iterations: per iteration and rank, start and end and the time in computation, MPI and waiting (by kind); an iteration ends with each call of the marker region, found as the collective (else region) every rank calls alike, folded into steps when the calls between repeat with a longer period; without such a region, each rank's own repeating call signature",
    make: Make::Table(plan_iterations),
};

arguments! {
    struct IterationsArgs(ITERATIONS) {
        rel: Relation,
        marker: Option<String>,
        messages: Option<Relation>,
        collectives: Option<Relation>,
    }
}

/// The relation `given`, else table `table` of the trace `rel` reads, else the relation named
/// `table`.
pub(crate) fn beside(a: &Args, given: Option<Relation>, rel: &Relation, table: &str) -> Result<Relation> {
    if let Some(r) = given {
        return Ok(r);
    }
    if let Some(schema) = trace_schema(a.session, rel)
        && let Ok(found) = trace_table(a.session, a.function, &schema, table)
    {
        return Ok(found);
    }
    resolve(a.session, a.function, table)
}

arguments! {
    struct RegionsArgs(regions::ITERATION_REGIONS) {
        rel: Relation,
        marker: Option<String>,
    }
}

/// The marker given, refused when empty.
fn named_marker(function: &str, marker: Option<String>) -> Result<Option<String>> {
    match marker {
        Some(m) if m.trim().is_empty() => {
            datafusion::common::plan_err!(
                "{function}: marker must name a region, got ''; leave it out to have it found"
            )
        }
        other => Ok(other),
    }
}

fn plan_iteration_regions(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let RegionsArgs { rel, marker } = RegionsArgs::read(a)?;
    let marker = named_marker(a.function, marker)?;
    let ci = rel.columns(a.function, &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let counts = region_counts(&rel)?;
    let out = a.schema();
    let start = fold_start(marker, a, out.clone(), false);
    let inputs = vec![(rel, Some(ci)), counts];
    Ok(Arc::new(Derived::folded(out, inputs, Main::ByRank(0), start)))
}

/// The folder of `iterations` (`waits`: with the messages and collectives as inputs 1 and 2)
/// or of `iteration_regions` (without).
fn fold_start(marker: Option<String>, a: &Args, schema: SchemaRef, waits: bool) -> StartFold {
    let notices = a.session.config().get_extension::<Notices>().map(|n| (*n).clone());
    let run_bytes = crate::external_sort::run_bytes(a.session);
    Arc::new(move || {
        Box::new(Fold {
            waits,
            messages: MessageWaits::new(run_bytes),
            collectives: CollectiveWaits::new(run_bytes),
            counts: Vec::new(),
            marker: marker.clone(),
            notices: notices.clone(),
            schema: schema.clone(),
        })
    })
}

fn plan_iterations(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let IterationsArgs { rel, marker, messages, collectives } = IterationsArgs::read(a)?;
    let marker = named_marker(a.function, marker)?;
    Ok(Arc::new(iterations_of(a, rel, marker, messages, collectives)?))
}

/// The analysis `iterations` of the calls `rel` (the messages and collectives beside them
/// unless given), for the call `a` of it or of a function that reads it (`iteration_profile`).
fn iterations_of(
    a: &Args,
    rel: Relation,
    marker: Option<String>,
    messages: Option<Relation>,
    collectives: Option<Relation>,
) -> Result<Derived> {
    let messages = beside(a, messages, &rel, "messages")?;
    let collectives = beside(a, collectives, &rel, "collectives")?;
    let ci = rel.columns(a.function, &["rank", "thread", "region", "start_ts", "end_ts"])?;
    let mi = messages.columns(a.function, &MESSAGE_COLUMNS)?;
    let oi = crate::waits::collective_columns(&collectives, a.function)?;
    let counts = region_counts(&rel)?;
    let out = ITERATIONS.schema();
    let start = fold_start(marker, a, out.clone(), true);
    let inputs = vec![(rel, Some(ci)), (messages, Some(mi)), (collectives, Some(oi)), counts];
    Ok(Derived::folded(out, inputs, Main::ByRank(0), start).named(ITERATIONS.name))
}

/// Per region: the ranks that call it, and the least and most calls of a rank, aggregated as
/// the calls stream by.
fn region_counts(calls: &Relation) -> Result<Projected> {
    let plan = LogicalPlanBuilder::scan(calls.reference.clone(), provider_as_source(calls.provider.clone()), None)?
        .aggregate(vec![col("rank"), col("region")], vec![count(lit(1)).alias("n")])?
        .aggregate(
            vec![col("region")],
            vec![count(lit(1)).alias("ranks"), min(col("n")).alias("min_calls"), max(col("n")).alias("max_calls")],
        )?
        .build()?;
    let counts = Relation {
        reference: TableReference::bare(format!("region counts of {}", calls.reference)),
        provider: Arc::new(datafusion::datasource::ViewTable::new(plan, None)),
    };
    Ok((counts, None))
}

/// Folds the messages (input 1) and collectives (input 2) into their waits and keeps the
/// region counts (input 3); without `waits`, the region counts are input 1.
struct Fold {
    waits: bool,
    messages: MessageWaits,
    collectives: CollectiveWaits,
    counts: Vec<RecordBatch>,
    marker: Option<String>,
    notices: Option<Notices>,
    schema: SchemaRef,
}

impl Folder for Fold {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 if self.waits => self.messages.fold(batch),
            2 if self.waits => self.collectives.fold(batch),
            _ => {
                self.counts.push(batch.clone());
                Ok(())
            }
        }
    }

    fn held_bytes(&self) -> usize {
        self.messages.held_bytes()
            + self.collectives.held_bytes()
            + self.counts.iter().map(RecordBatch::get_array_memory_size).sum::<usize>()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let Fold { waits: with_waits, messages, collectives, counts, marker, notices, schema } = *self;
        let counts = read_counts(&counts)?;
        let ranks = counts.iter().map(|c| c.ranks).max().unwrap_or(0);
        let mut own = false;
        let mut pending = None;
        let marker = match marker {
            Some(m) => match counts.iter().find(|c| c.region == m) {
                Some(c) => {
                    if c.ranks != ranks || c.min_calls != c.max_calls {
                        notify(
                            &notices,
                            format!(
                                "iterations: {m} is called by {} of {ranks} ranks, {} to {} times: each rank's iterations end with its own calls",
                                c.ranks, c.min_calls, c.max_calls
                            ),
                        );
                    }
                    Some(m)
                }
                None => return exec_err!("iterations: marker '{m}' is no region of the calls"),
            },
            None if counts.is_empty() => {
                notify(&notices, "iterations: the relation has no calls, so it has no iterations".to_string());
                None
            }
            None => match marker::choose(&counts, ranks) {
                Some(c) => {
                    // Whether a region called more often closes every step by itself (the
                    // collective then comes every k steps) is known from the calls.
                    pending =
                        Some(Pending { collective: c.clone(), more_often: marker::more_often(&counts, ranks, c) });
                    None
                }
                None => {
                    notify(&notices, "iterations: no region is called alike (at least twice) by every rank, so each rank's iterations follow the repeating signature of its own calls; give marker => '...' to cut them all with one region".to_string());
                    own = true;
                    None
                }
            },
        };
        // The waits come in rank order: each rank's list is made whole before the next.
        let (collective, _) = collectives.sorted()?;
        let mut waits = crate::waits::stream::WaitStream::new(messages.stream()?, collective)?;
        let mut by_rank: FastMap<i64, Vec<Waited>> = FastMap::default();
        let mut rank: Option<(i64, Vec<Waited>)> = None;
        while let Some(w) = waits.next()? {
            if rank.as_ref().is_none_or(|(r, _)| *r != w.rank)
                && let Some((r, list)) = rank.replace((w.rank, Vec::new()))
            {
                by_rank.insert(r, rank_list(list));
            }
            rank.as_mut().expect("a rank is being read").1.push(waited(&w));
        }
        if let Some((r, list)) = rank {
            by_rank.insert(r, rank_list(list));
        }
        Ok(Box::new(Cut {
            regions: !with_waits,
            marker,
            pending,
            counts,
            own,
            found: FastMap::default(),
            notices,
            waits: by_rank,
            names: Names::default(),
            schema,
        }))
    }
}

fn notify(notices: &Option<Notices>, text: String) {
    if let Some(n) = notices {
        n.push(text);
    }
}

/// A rank's waits in the order the cut reads them, holding no more than they need.
fn rank_list(mut list: Vec<Waited>) -> Vec<Waited> {
    list.sort_unstable_by_key(|w| (w.ts, w.kind));
    list.shrink_to_fit();
    list
}

fn waited(w: &Wait) -> Waited {
    let kind = match w.pattern {
        "late_sender" => LATE_SENDER,
        "late_receiver" => LATE_RECEIVER,
        _ => COLLECTIVE,
    };
    Waited { ts: w.ts, wait_ns: w.wait_ns, kind }
}

fn read_counts(batches: &[RecordBatch]) -> Result<Vec<RegionCount>> {
    let mut out = Vec::new();
    for b in batches {
        let one = std::slice::from_ref(b);
        let region = text_column(one, 0)?;
        let (ranks, lo, hi) = (int64_column(one, 1)?, int64_column(one, 2)?, int64_column(one, 3)?);
        for i in 0..b.num_rows() {
            out.push(RegionCount {
                region: if region.is_valid(i) { region.value(i).to_string() } else { "NULL".into() },
                ranks: ranks.value(i),
                min_calls: lo.value(i),
                max_calls: hi.value(i),
            });
        }
    }
    Ok(out)
}

/// The marker before the calls are seen: the collective every rank calls alike most often,
/// unless one of the regions every rank calls alike more often closes every step by itself.
struct Pending {
    collective: RegionCount,
    more_often: Vec<RegionCount>,
}

/// Cuts each chunk of ranks' calls into iterations.
struct Cut {
    /// Gives a row per iteration, rank and region (`iteration_regions`), not per iteration
    /// and rank.
    regions: bool,
    /// The region that ends every rank's iterations.
    marker: Option<String>,
    /// The marker to choose on the first chunk of calls.
    pending: Option<Pending>,
    /// Every region's calls per rank.
    counts: Vec<RegionCount>,
    /// Without one, whether each rank's iterations follow its own calls' signature.
    own: bool,
    /// Ranks by the region that ended their own iterations (None: their calls do not repeat)
    /// and their number of iterations.
    found: FastMap<(Option<u32>, usize), usize>,
    notices: Option<Notices>,
    waits: FastMap<i64, Vec<Waited>>,
    names: Names,
    schema: SchemaRef,
}

impl Mapper for Cut {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let streams = streams_named(batches, "iterations", &mut self.names)?;
        if let Some(pending) = self.pending.take() {
            self.choose(pending, &streams);
        }
        let marker = self.marker.as_deref().map(|m| self.names.id(m));
        let inserted_ids = self.inserted();
        let inserted = |r: u32| inserted_ids.contains(&r);
        let names = &self.names.names;
        let mpi = |r: u32| names.get(r as usize).is_some_and(|n| n.starts_with("MPI_"));
        let class = |r: u32| names.get(r as usize).map_or(Closing::Other, |n| Closing::of(n));
        let mut rows: Vec<Row> = Vec::new();
        let mut region_rows: Vec<RegionRow> = Vec::new();
        let mut last_rank = None;
        for ((rank, _), calls) in &streams {
            // The rank's first thread only.
            if last_rank == Some(*rank) {
                continue;
            }
            last_rank = Some(*rank);
            let waits = self.waits.remove(rank).unwrap_or_default();
            let ends = match marker {
                Some(m) => Some(m),
                None if self.own => signature::signature(calls, class).map(|s| s.closing),
                None => None,
            };
            let cut = split::iterations(calls, ends, mpi, &inserted, &waits);
            if self.own {
                *self.found.entry((ends, cut.len())).or_default() += 1;
            }
            let group: Arc<str> =
                step_group(ends.and_then(|m| names.get(m as usize)).map(String::as_str), cut.len()).into();
            if self.regions {
                for (k, region, n, ns) in regions::by_region(calls, &cut) {
                    region_rows.push(RegionRow {
                        iteration: k as i64,
                        rank: *rank,
                        region,
                        calls: n,
                        ns,
                        group: group.clone(),
                    });
                }
                continue;
            }
            for (k, it) in cut.into_iter().enumerate() {
                rows.push(Row { iteration: k as i64, rank: *rank, it, marker: ends, group: group.clone() });
            }
        }
        if self.regions {
            return region_batch(&region_rows, names, &self.schema);
        }
        batch(&rows, names, &self.schema)
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if self.own && !self.found.is_empty() {
            notify(&self.notices, own_summary(&self.found, &self.names.names));
        }
        Ok(Vec::new())
    }

    fn held_bytes(&self) -> usize {
        self.waits.values().map(|w| w.capacity() * std::mem::size_of::<Waited>()).sum()
    }
}

/// Ranks of the first chunk on which a region must close every step to end the iterations.
const RANKS_CHECKED: usize = 64;

impl Cut {
    /// The marker, from the first chunk of calls: the first of the regions called more often
    /// than the collective that closes every step by itself on every rank checked, else the
    /// collective; and a notice that says which and why.
    fn choose(&mut self, pending: Pending, streams: &crate::sweeps::call_sweep::Streams) {
        let Pending { collective, more_often } = pending;
        // Each rank's first thread, as the iterations are cut.
        let mut firsts: Vec<&[crate::sweeps::call_sweep::Call]> = Vec::new();
        let mut last_rank = None;
        for ((rank, _), calls) in streams {
            if last_rank != Some(*rank) && firsts.len() < RANKS_CHECKED {
                firsts.push(calls);
            }
            last_rank = Some(*rank);
        }
        let mut chosen = None;
        for region in &more_often {
            let id = self.names.id(&region.region);
            let inserted_ids = self.inserted_below(region.min_calls);
            let inserted = |r: u32| inserted_ids.contains(&r);
            if !firsts.is_empty() && firsts.iter().all(|calls| split::closes_every_step(calls, id, &inserted)) {
                chosen = Some(region.clone());
                break;
            }
        }
        let text = match &chosen {
            Some(r) => format!(
                "iterations: an iteration ends with each call of {} (every rank calls it {} times); {}, called {} times, comes only every few steps and is part of those iterations; give marker => '...' for another region",
                r.region, r.min_calls, collective.region, collective.min_calls,
            ),
            None => format!(
                "iterations: an iteration ends with each call of {} (every rank calls it {} times); give marker => '...' for another region",
                collective.region, collective.min_calls
            ),
        };
        notify(&self.notices, text);
        self.marker = Some(chosen.unwrap_or(collective).region);
    }

    /// The regions left out of the steps' signatures: collectives called less often than the
    /// marker (a convergence check every k steps is part of every k-th step, not its end).
    fn inserted(&mut self) -> Vec<u32> {
        let Some(m) = self.marker.clone() else { return Vec::new() };
        let calls = self.counts.iter().find(|c| c.region == m).map_or(0, |c| c.min_calls);
        self.inserted_below(calls)
    }

    /// The ids of the collectives that every rank calls fewer than `calls` times.
    fn inserted_below(&mut self, calls: i64) -> Vec<u32> {
        let names: Vec<String> = self
            .counts
            .iter()
            .filter(|c| marker::is_collective(&c.region) && c.max_calls < calls)
            .map(|c| c.region.clone())
            .collect();
        names.iter().map(|n| self.names.id(n)).collect()
    }
}

/// What each rank's own calls gave: the commonest outcomes first, four at most.
fn own_summary(found: &FastMap<(Option<u32>, usize), usize>, names: &[String]) -> String {
    let mut groups: Vec<(&(Option<u32>, usize), &usize)> = found.iter().collect();
    groups.sort_unstable_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let said: Vec<String> = groups
        .iter()
        .take(4)
        .map(|((closing, n), ranks)| match closing.and_then(|c| names.get(c as usize)) {
            Some(region) => format!("{ranks} rank(s) end theirs with {region}, {n} iteration(s) each"),
            None => format!("{ranks} rank(s) repeat no sequence of calls, one iteration each"),
        })
        .collect();
    let more = groups.len().saturating_sub(4);
    let tail = if more > 0 { format!("; and {more} other outcome(s)") } else { String::new() };
    format!("iterations: by the signature of their own calls, {}{tail}", said.join("; "))
}

/// The step group of a rank whose iterations end with `marker`, `n` of them.
fn step_group(marker: Option<&str>, n: usize) -> String {
    format!("{} x{n}", marker.unwrap_or("(no marker)"))
}

/// One row of the answer.
struct Row {
    iteration: i64,
    rank: i64,
    it: split::Iteration,
    /// The region whose calls ended the rank's iterations.
    marker: Option<u32>,
    /// Its step group.
    group: Arc<str>,
}

/// One row of `iteration_regions`.
struct RegionRow {
    iteration: i64,
    rank: i64,
    region: u32,
    calls: i64,
    ns: i64,
    group: Arc<str>,
}

fn region_batch(rows: &[RegionRow], names: &[String], schema: &SchemaRef) -> Result<RecordBatch> {
    let int =
        |f: &dyn Fn(&RegionRow) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
    // Calls without a region are interned as "NULL" (`call_sweep::streams_named`).
    let region = rows.iter().map(|r| names.get(r.region as usize).map(String::as_str).filter(|n| *n != "NULL"));
    let columns: Vec<ArrayRef> = vec![
        int(&|r| r.iteration),
        int(&|r| r.rank),
        Arc::new(StringArray::from_iter(region)),
        int(&|r| r.calls),
        int(&|r| r.ns),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &*r.group))),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

fn batch(rows: &[Row], names: &[String], schema: &SchemaRef) -> Result<RecordBatch> {
    let int = |f: &dyn Fn(&Row) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
    let marker = rows.iter().map(|r| r.marker.and_then(|m| names.get(m as usize)).map(String::as_str));
    let columns: Vec<ArrayRef> = vec![
        int(&|r| r.iteration),
        int(&|r| r.rank),
        int(&|r| r.it.start),
        int(&|r| r.it.end),
        int(&|r| r.it.end - r.it.start),
        int(&|r| r.it.compute_ns()),
        int(&|r| r.it.mpi_ns()),
        int(&|r| r.it.waiting_ns()),
        int(&|r| r.it.waiting[LATE_SENDER]),
        int(&|r| r.it.waiting[LATE_RECEIVER]),
        int(&|r| r.it.waiting[COLLECTIVE]),
        Arc::new(StringArray::from_iter(marker)),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &*r.group))),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
