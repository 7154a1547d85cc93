//! Ideal-network replay and transfer efficiency, after the transfer-efficiency monitors: each
//! rank's run is replayed on ideal clocks over a network with zero latency and infinite
//! bandwidth, and the simulated time is set against the observed time pair by pair, a pair
//! being a compute stretch (time outside MPI) and the MPI call that follows it.
//!
//! Per rank, the outermost calls whose region starts with `MPI_` (on any thread, in start
//! order; calls nested in another MPI call are part of it) are the MPI calls; the rest is
//! compute. On ideal clocks:
//!
//! - a compute stretch keeps its observed duration; the ideal clock starts at the rank's first
//!   call (its origin);
//! - an MPI call starts when the previous one ended plus the compute stretch; an operation is
//!   posted at the ideal start of the call that posted it (the call containing the recorded
//!   post time: send_call_start, recv_post_ts, a collective's begin);
//! - a receive completes at max(its own post, the matching send's post);
//! - a send completes at its post when eager (bytes <= eager_limit), otherwise at max(its post,
//!   the matching receive's post) (rendezvous);
//! - non-blocking operations complete in the call where their completion was recorded
//!   (send_complete_ts, recv_call_start: the Wait or Test), by the same rules;
//! - a collective completes for every participant at the latest participant's post;
//! - an MPI call ends at the latest completion it holds, and at its start when it holds none of
//!   them (an MPI call that completes nothing — MPI_Init, MPI_Comm_rank, a failed Test — keeps
//!   its observed duration, as local work).
//!
//! The replay visits calls in dependency order (a call ends only after the calls that post what
//! it waits for have started); times that contradict the messages leave no such order and are
//! an error. Message sides whose times fall outside every MPI call of their rank cannot be
//! placed and are counted (`unplaced` in transfer_efficiency). Reported per pair (equations 2
//! and 3 of the source, as written): compute_ns, mpi_observed_ns, mpi_ideal_ns = the ideal
//! call's duration, transfer_ns = observed - ideal, trf_local = (compute + ideal) / (compute +
//! observed), trf_cumulative = the same sums over the rank's pairs so far. Nothing is clamped:
//! a call can last longer on ideal clocks than observed (the rank itself arrives earlier while
//! its partner's post moves less), so transfer_ns can be negative and trf_local above 1. The
//! compute after a rank's last MPI call, up to its last event, is a last pair without a call
//! (region NULL), so a rank's pairs add up to its whole run and its last trf_cumulative equals
//! its `transfer_efficiency`. Causality holds on the ideal clocks, and no ideal end is later
//! than the observed one (by induction: every post is no later than observed).

mod call_store;
mod simulate;
mod spill;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::exec_err;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

use crate::common::{Args, Derived, FastMap, Projected, int64_column, region_ids};
use crate::declare::{Function, Make, Output, Param, ParamDefault, Type, col, float64, int64, param, text};
use crate::plan::Main;
use crate::stream::{Folder, Mapper, StartFold};
use call_store::{CallStore, MpiCall};
use simulate::{Links, Simulated};
use spill::{NULL, Spill};

pub const EAGER_LIMIT: i64 = 65_536;

const REPLAY_PARAMS: &[Param] = &[
    param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls to replay"),
    param(
        "eager_limit",
        Type::Integer { min: 0 },
        ParamDefault::Integer(EAGER_LIMIT),
        "a send of at most this many bytes completes at its post (eager); larger ones wait for the receive (rendezvous)",
    ),
    param("messages", Type::Relation, ParamDefault::Text("messages"), "the matched messages between the calls"),
    param("collectives", Type::Relation, ParamDefault::Text("collectives"), "the collective operations of the calls"),
];

pub const IDEAL_REPLAY: Function = Function {
    name: "ideal_replay",
    params: REPLAY_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, ""),
        col("pair", int64, "the pair's number on the rank, from 0"),
        col("region", text, "the MPI call of the pair (NULL: the compute after the last call)"),
        col("compute_ns", int64, "time outside MPI before the call"),
        col("mpi_observed_ns", int64, "the call's observed duration"),
        col("mpi_ideal_ns", int64, "its duration on the ideal network"),
        col("transfer_ns", int64, "observed - ideal (can be negative)"),
        col("observed_end", int64, "end of the call as recorded"),
        col("ideal_end", int64, "end of the call on ideal clocks"),
        col("trf_local", float64, "(compute + ideal) / (compute + observed) (equation 2)"),
        col("trf_cumulative", float64, "the same over the rank's pairs so far (equation 3)"),
    ]),
    description: "the run replayed on an ideal network (zero latency, infinite bandwidth): per rank and compute/MPI pair (region NULL for the compute after the last call), observed and simulated MPI time and the transfer efficiency (equations 2-3)",
    make: Make::Table(|| Arc::new(IdealReplay)),
};

pub const TRANSFER_EFFICIENCY: Function = Function {
    name: "transfer_efficiency",
    params: REPLAY_PARAMS,
    output: Output::Columns(&[
        col("rank", int64, "the rank (NULL: all ranks, the run)"),
        col("observed_ns", int64, "its observed runtime"),
        col("ideal_ns", int64, "its runtime on the ideal network"),
        col("efficiency", float64, "ideal / observed"),
        col("unplaced", int64, "message sides outside every MPI call of the rank, left out"),
    ]),
    description: "per rank and overall (rank NULL): observed and ideal-network runtime and their ratio",
    make: Make::Table(|| Arc::new(TransferEfficiency)),
};
const CALL_COLUMNS: [&str; 4] = ["rank", "region", "start_ts", "end_ts"];
const MESSAGE_COLUMNS: [&str; 7] =
    ["src", "dst", "bytes", "send_call_start", "send_complete_ts", "recv_post_ts", "recv_call_start"];
const COLLECTIVE_COLUMNS: [&str; 5] = ["comm", "instance", "rank", "begin_ts", "end_ts"];

/// An outermost MPI call, as read from a chunk of the calls.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// Index into the region names.
    pub region: u32,
    /// Row of the call in the input batches (all batches counted in order).
    pub row: usize,
    pub start: i64,
    pub end: i64,
    /// Compute time before it (since the previous MPI call or the origin).
    pub compute: i64,
}

/// Every rank's outermost MPI calls in order, with the compute time before each.
#[derive(Debug)]
pub(crate) struct MpiCalls {
    pub ranks: Vec<i64>,
    pub regions: Vec<String>,
    pub origins: Vec<i64>,
    /// The end of each rank's last call of any region.
    pub ends: Vec<i64>,
    /// Rank after rank: rank r's calls are calls[first[r]..first[r + 1]].
    pub calls: Vec<Call>,
    pub first: Vec<usize>,
}

impl MpiCalls {
    /// From batches whose columns are rank, region, start_ts, end_ts.
    pub fn read(calls_in: &[RecordBatch], function: &str) -> Result<MpiCalls> {
        let rank = int64_column(calls_in, 0)?;
        let (start, end) = (int64_column(calls_in, 2)?, int64_column(calls_in, 3)?);
        let mut regions: Vec<String> = Vec::new();
        let mpi_region = region_ids(calls_in, 1, |name| name.starts_with("MPI_"), &mut regions)?;
        let mut ranks: Vec<i64> = rank.iter().flatten().collect();
        ranks.sort_unstable();
        ranks.dedup();
        let index: FastMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
        let mut origins = vec![i64::MAX; ranks.len()];
        let mut ends = vec![i64::MIN; ranks.len()];
        let mut mpi: Vec<(usize, i64, i64, u32, usize)> = Vec::new();
        for row in 0..rank.len() {
            commdb_catalog::interrupt::check_every(row, function)?;
            if rank.is_null(row) || start.is_null(row) || end.is_null(row) {
                continue;
            }
            let r = index[&rank.value(row)];
            origins[r] = origins[r].min(start.value(row));
            ends[r] = ends[r].max(end.value(row));
            if let Some(region) = mpi_region[row] {
                mpi.push((r, start.value(row), end.value(row), region, row));
            }
        }
        mpi.sort_unstable();
        if mpi.len() >= call_store::MAX_CALLS as usize {
            return exec_err!("{function}: {} MPI calls are more than it handles; narrow the relation", mpi.len());
        }
        let mut calls: Vec<Call> = Vec::with_capacity(mpi.len());
        let mut first = vec![0usize; ranks.len() + 1];
        let mut prev: Option<(usize, i64)> = None;
        for (i, &(r, s, e, region, row)) in mpi.iter().enumerate() {
            commdb_catalog::interrupt::check_every(i, function)?;
            let prev_end = match prev {
                Some((pr, pe)) if pr == r => {
                    if s < pe {
                        continue; // nested in the previous MPI call
                    }
                    pe
                }
                _ => origins[r],
            };
            calls.push(Call { region, row, start: s, end: e, compute: (s - prev_end).max(0) });
            first[r + 1] = calls.len();
            prev = Some((r, e));
        }
        for r in 0..ranks.len() {
            first[r + 1] = first[r + 1].max(first[r]);
        }
        for r in 0..ranks.len() {
            if ends[r] < origins[r] {
                ends[r] = origins[r];
            }
        }
        Ok(MpiCalls { ranks, regions, origins, ends, calls, first })
    }
}

/// One output row of ideal_replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub rank: i64,
    pub pair: i64,
    /// The MPI call's region; None for the compute after a rank's last MPI call.
    pub region: Option<u32>,
    pub compute: i64,
    pub observed: i64,
    pub ideal: i64,
    pub observed_end: i64,
    pub ideal_end: i64,
    pub trf_local: f64,
    pub trf_cumulative: f64,
}

/// One output row of transfer_efficiency: the rank (None: all), observed and ideal runtime,
/// and the message sides left out.
type Efficiency = (Option<i64>, i64, i64, i64);

fn ratio(a: i64, b: i64) -> f64 {
    if b > 0 { a as f64 / b as f64 } else { 1.0 }
}

/// The replayed run: the calls in their store, their ideal starts, and what could not be placed.
struct Replayed {
    store: CallStore,
    simulated: Simulated,
    unplaced: Vec<i64>,
}

impl Replayed {
    /// The ideal end of rank `ri`'s call `number` (the next call's ideal start less its
    /// compute, or the rank's last ideal end).
    fn ideal_end(&mut self, ri: usize, number: u32) -> Result<i64> {
        let rank = &self.store.ranks[ri];
        if number + 1 < rank.first + rank.count {
            let next = self.store.call(ri, number + 1)?;
            Ok(self.simulated.ideal_start[number as usize + 1] - next.compute)
        } else {
            Ok(self.simulated.last_ideal_end[ri])
        }
    }

    /// Compute after rank `ri`'s last MPI call, up to its last event; the observed end of that
    /// call (its origin without one) and its ideal end.
    fn tail(&mut self, ri: usize) -> Result<(i64, i64, i64)> {
        let (first, count, origin, end) = {
            let r = &self.store.ranks[ri];
            (r.first, r.count, r.origin, r.end)
        };
        if count == 0 {
            return Ok((end - origin, origin, origin));
        }
        let last = self.store.call(ri, first + count - 1)?;
        Ok(((end - last.end).max(0), last.end, self.simulated.last_ideal_end[ri]))
    }

    /// Equations 2 and 3 of the transfer-efficiency monitors for rank `ri`, pair by pair: a
    /// pair's simulated time is its compute plus the ideal MPI call's duration, its observed
    /// time its compute plus the observed call's. Nothing is clamped: an ideal call may last
    /// longer than the observed one (its partner's post moved less than its own), and
    /// trf_local is then above 1. A rank's compute after its last MPI call is a last pair
    /// without a call, so the pairs add up to the rank's whole run and the last
    /// trf_cumulative is its efficiency.
    fn pairs(&mut self, ri: usize, out: &mut Vec<Pair>) -> Result<()> {
        let (rank, first, count) = {
            let r = &self.store.ranks[ri];
            (r.rank, r.first, r.count)
        };
        let (mut sim, mut obs) = (0i64, 0i64);
        for i in 0..count {
            let number = first + i;
            let c = self.store.call(ri, number)?;
            let ideal_start = self.simulated.ideal_start[number as usize];
            let ideal_end = self.ideal_end(ri, number)?;
            let (observed, ideal) = (c.end - c.start, ideal_end - ideal_start);
            sim += c.compute + ideal;
            obs += c.compute + observed;
            out.push(Pair {
                rank,
                pair: i64::from(i),
                region: Some(c.region),
                compute: c.compute,
                observed,
                ideal,
                observed_end: c.end,
                ideal_end,
                trf_local: ratio(c.compute + ideal, c.compute + observed),
                trf_cumulative: ratio(sim, obs),
            });
        }
        let (compute, end, ideal_end) = self.tail(ri)?;
        if compute > 0 {
            sim += compute;
            obs += compute;
            out.push(Pair {
                rank,
                pair: i64::from(count),
                region: None,
                compute,
                observed: 0,
                ideal: 0,
                observed_end: end + compute,
                ideal_end: ideal_end + compute,
                trf_local: 1.0,
                trf_cumulative: ratio(sim, obs),
            });
        }
        Ok(())
    }

    /// Per rank (and overall, rank None): observed and ideal runtime from the origin to the
    /// rank's last event (overall: from the earliest origin to the latest end), and the
    /// message sides left out.
    fn efficiency(&mut self) -> Result<Vec<Efficiency>> {
        let mut out = Vec::new();
        let (mut obs_all, mut ideal_all, mut unplaced_all) = (0i64, 0i64, 0i64);
        let first = self.store.ranks.iter().map(|r| r.origin).min().unwrap_or(0);
        for ri in self.order() {
            let (rank, origin, end) = {
                let r = &self.store.ranks[ri];
                (r.rank, r.origin, r.end)
            };
            let (compute, _, ideal_end) = self.tail(ri)?;
            let (obs, ideal) = (end - origin, ideal_end + compute - origin);
            out.push((Some(rank), obs, ideal, self.unplaced[ri]));
            obs_all = obs_all.max(end - first);
            ideal_all = ideal_all.max(ideal_end + compute - first);
            unplaced_all += self.unplaced[ri];
        }
        out.push((None, obs_all, ideal_all, unplaced_all));
        Ok(out)
    }

    /// The ranks in rank order (indices into the store's ranks, which come as the calls did).
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.store.ranks.len()).collect();
        order.sort_unstable_by_key(|&ri| self.store.ranks[ri].rank);
        order
    }
}

/// An Int64 column of a batch (cast when it is another integer type).
fn int64s(batch: &RecordBatch, i: usize) -> Result<Int64Array> {
    let c = arrow::compute::cast(batch.column(i), &DataType::Int64)?;
    Ok(c.as_any().downcast_ref::<Int64Array>().cloned().unwrap_or_else(|| Int64Array::from(vec![None; c.len()])))
}

/// Spill the rows of `batch` (N integer columns) with NULL as NULL.
fn spill_rows<const N: usize>(spill: &mut Spill<N>, batch: &RecordBatch) -> Result<()> {
    let columns: Vec<Int64Array> = (0..N).map(|i| int64s(batch, i)).collect::<Result<_>>()?;
    for row in 0..batch.num_rows() {
        let mut values = [NULL; N];
        for (v, c) in values.iter_mut().zip(&columns) {
            if c.is_valid(row) {
                *v = c.value(row);
            }
        }
        spill.push(values)?;
    }
    Ok(())
}

/// What the replay answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Pairs,
    Efficiency,
}

/// Folds the messages and the collectives into scratch files, then makes the sweep of the calls.
struct FoldReplay {
    what: &'static str,
    messages: Spill<7>,
    collectives: Spill<5>,
    sweep: Option<Sweep>,
}

impl Folder for FoldReplay {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 => spill_rows(&mut self.messages, batch),
            _ => spill_rows(&mut self.collectives, batch),
        }
    }

    fn held_bytes(&self) -> usize {
        0
    }

    fn into_mapper(mut self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let mut sweep = self.sweep.take().ok_or_else(|| DataFusionError::Internal("replay folded twice".into()))?;
        sweep.inputs = Some((
            std::mem::replace(&mut self.messages, Spill::new(self.what)?),
            std::mem::replace(&mut self.collectives, Spill::new(self.what)?),
        ));
        Ok(Box::new(sweep))
    }
}

/// Rows of ideal_replay's answer per batch.
const BATCH_ROWS: usize = 8192;

/// Sweeps the calls a chunk of whole ranks at a time into the call store, then replays them
/// when they end, and hands the answer back batch by batch.
struct Sweep {
    what: &'static str,
    answer: Answer,
    eager_limit: i64,
    schema: SchemaRef,
    pool: Arc<dyn MemoryPool>,
    store: Option<CallStore>,
    inputs: Option<(Spill<7>, Spill<5>)>,
    reservation: Option<MemoryReservation>,
    replayed: Option<Replayed>,
    /// The ranks still to answer for (ideal_replay), in rank order.
    next: std::vec::IntoIter<usize>,
}

impl Sweep {
    fn empty(&self) -> RecordBatch {
        RecordBatch::new_empty(self.schema.clone())
    }

    /// Place, link and simulate, within the memory budget.
    fn replay(&mut self) -> Result<Replayed> {
        let what = self.what;
        let mut store =
            self.store.take().ok_or_else(|| DataFusionError::Internal(format!("{what}: replayed twice")))?;
        store.finish_writing()?;
        let (messages, collectives) =
            self.inputs.take().ok_or_else(|| DataFusionError::Internal(format!("{what}: no messages folded")))?;
        let messages_rows = messages.rows() as usize;
        let reservation = MemoryConsumer::new(format!("{what} replay")).register(&self.pool);
        let reservation = self.reservation.insert(reservation);
        let pool = self.pool.clone();
        let mut grow = |bytes: usize| -> Result<()> {
            reservation.try_grow(bytes).map_err(|_| {
                crate::budget::over_budget(what, &pool, reservation.size() + bytes, messages_rows, "replaying")
            })
        };
        grow(store.len() * 8 + store.ranks.len() * 64)?;
        let links: Links = simulate::link(
            what,
            &mut store,
            messages.into_rows()?,
            collectives.into_rows()?,
            self.eager_limit,
            &mut grow,
        )?;
        let simulated = simulate::simulate(what, &mut store, &links)?;
        Ok(Replayed { store, simulated, unplaced: links.unplaced })
    }

    fn pairs_batch(&self, rows: &[Pair], regions: &[String]) -> Result<RecordBatch> {
        let int = |f: fn(&Pair) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
        let columns: Vec<ArrayRef> = vec![
            int(|p| p.rank),
            int(|p| p.pair),
            Arc::new(StringArray::from(
                rows.iter().map(|p| p.region.map(|r| regions[r as usize].as_str())).collect::<Vec<_>>(),
            )),
            int(|p| p.compute),
            int(|p| p.observed),
            int(|p| p.ideal),
            int(|p| p.observed - p.ideal),
            int(|p| p.observed_end),
            int(|p| p.ideal_end),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|p| p.trf_local))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|p| p.trf_cumulative))),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    fn efficiency_batch(&self, rows: &[Efficiency]) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|r| if r.1 > 0 { r.2 as f64 / r.1 as f64 } else { 1.0 }),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

impl Mapper for Sweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    /// A chunk of whole ranks: their outermost MPI calls into the store.
    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let what = self.what;
        let store =
            self.store.as_mut().ok_or_else(|| DataFusionError::Internal(format!("{what}: calls after the replay")))?;
        let m = MpiCalls::read(batches, what)?;
        let regions: Vec<u32> = m.regions.iter().map(|name| store.region(name)).collect();
        for r in 0..m.ranks.len() {
            let calls: Vec<MpiCall> = m.calls[m.first[r]..m.first[r + 1]]
                .iter()
                .map(|c| MpiCall { start: c.start, end: c.end, compute: c.compute, region: regions[c.region as usize] })
                .collect();
            store.push(m.ranks[r], m.origins[r], m.ends[r], &calls)?;
        }
        Ok(self.empty())
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut replayed = self.replay()?;
        match self.answer {
            Answer::Efficiency => {
                let rows = replayed.efficiency()?;
                Ok(vec![self.efficiency_batch(&rows)?])
            }
            Answer::Pairs => {
                self.next = replayed.order().into_iter();
                self.replayed = Some(replayed);
                Ok(Vec::new())
            }
        }
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(mut replayed) = self.replayed.take() else { return Ok(None) };
        let mut rows = Vec::new();
        while rows.len() < BATCH_ROWS {
            let Some(ri) = self.next.next() else { break };
            replayed.pairs(ri, &mut rows)?;
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let batch = self.pairs_batch(&rows, &replayed.store.regions)?;
        self.replayed = Some(replayed);
        Ok(Some(batch))
    }

    fn held_bytes(&self) -> usize {
        self.store.as_ref().map_or(0, CallStore::held_bytes)
    }
}

struct Inputs {
    eager_limit: i64,
    pool: Arc<dyn MemoryPool>,
}

fn inputs(declaration: &'static Function, args: &TableFunctionArgs) -> Result<(Inputs, Vec<Projected>)> {
    let function = declaration.name;
    let a = Args::new(declaration, args.exprs())?;
    let calls = a.relation(args.session(), "rel")?;
    let eager_limit = a.int("eager_limit")?;
    let messages = a.relation(args.session(), "messages")?;
    let colls = a.relation(args.session(), "collectives")?;
    let ci = calls.columns(function, &CALL_COLUMNS)?;
    let mi = messages.columns(function, &MESSAGE_COLUMNS)?;
    let ki = colls.columns(function, &COLLECTIVE_COLUMNS)?;
    let pool = args.session().runtime_env().memory_pool.clone();
    Ok((Inputs { eager_limit, pool }, vec![(calls, Some(ci)), (messages, Some(mi)), (colls, Some(ki))]))
}

/// The replay as a folded analysis: the messages and collectives spilled as they stream, the
/// calls swept a chunk of whole ranks at a time (crate::by_rank), the answer made at the end.
fn replay_analysis(
    declaration: &'static Function,
    out: SchemaRef,
    args: &TableFunctionArgs,
    answer: Answer,
) -> Result<Derived> {
    let (inp, rels) = inputs(declaration, args)?;
    let what = declaration.name;
    let schema = out.clone();
    let start: StartFold = Arc::new(move || {
        let sweep = Sweep {
            what,
            answer,
            eager_limit: inp.eager_limit,
            schema: out.clone(),
            pool: inp.pool.clone(),
            store: None,
            inputs: None,
            reservation: None,
            replayed: None,
            next: Vec::new().into_iter(),
        };
        let folder: Result<FoldReplay> = (|| {
            Ok(FoldReplay {
                what,
                messages: Spill::new(what)?,
                collectives: Spill::new(what)?,
                sweep: Some(Sweep { store: Some(CallStore::new(what)?), ..sweep }),
            })
        })();
        match folder {
            Ok(f) => Box::new(f) as Box<dyn Folder>,
            Err(e) => Box::new(Failed(Some(e))),
        }
    });
    Ok(Derived::folded(schema, rels, Main::ByRank(0), start))
}

/// A folder that could not be made (its scratch files could not be created): its error, at once.
struct Failed(Option<DataFusionError>);

impl Folder for Failed {
    fn fold(&mut self, _input: usize, _batch: &RecordBatch) -> Result<()> {
        Err(self.0.take().unwrap_or_else(|| DataFusionError::Internal("replay: no scratch file".into())))
    }

    fn held_bytes(&self) -> usize {
        0
    }

    fn into_mapper(mut self: Box<Self>) -> Result<Box<dyn Mapper>> {
        Err(self.0.take().unwrap_or_else(|| DataFusionError::Internal("replay: no scratch file".into())))
    }
}

/// `ideal_replay([rel => 'calls'], eager_limit => 65536, messages => 'messages', collectives => 'collectives')`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct IdealReplay;

impl TableFunctionImpl for IdealReplay {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let i = |n: &str| Field::new(n, DataType::Int64, false);
        let out: SchemaRef = Arc::new(Schema::new(vec![
            i("rank"),
            i("pair"),
            Field::new("region", DataType::Utf8, true),
            i("compute_ns"),
            i("mpi_observed_ns"),
            i("mpi_ideal_ns"),
            i("transfer_ns"),
            i("observed_end"),
            i("ideal_end"),
            Field::new("trf_local", DataType::Float64, false),
            Field::new("trf_cumulative", DataType::Float64, false),
        ]));
        Ok(Arc::new(replay_analysis(&IDEAL_REPLAY, out, &args, Answer::Pairs)?))
    }
}

/// `transfer_efficiency([rel => 'calls'], eager_limit => 65536, ...)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct TransferEfficiency;

impl TableFunctionImpl for TransferEfficiency {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let out: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, true),
            Field::new("observed_ns", DataType::Int64, false),
            Field::new("ideal_ns", DataType::Int64, false),
            Field::new("efficiency", DataType::Float64, false),
            Field::new("unplaced", DataType::Int64, false),
        ]));
        Ok(Arc::new(replay_analysis(&TRANSFER_EFFICIENCY, out, &args, Answer::Efficiency)?))
    }
}
