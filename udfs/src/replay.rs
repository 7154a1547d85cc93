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

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::common::{Args, ComputeMany, Derived, FastMap, Projected, int64_column, region_ids};
use crate::declare::{Function, Make, Output, Param, ParamDefault, Type, col, float64, int64, param, text};

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
const UNSET: i64 = i64::MIN;

/// An MPI call on observed and ideal clocks.
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
    /// Whether it completes any operation.
    completes: bool,
    ideal_start: i64,
    ideal_end: i64,
}

/// The replay of every rank.
#[derive(Debug)]
pub struct Replay {
    pub ranks: Vec<i64>,
    /// Names of the MPI regions called.
    pub regions: Vec<String>,
    origins: Vec<i64>,
    /// The end of every rank's last call (MPI or not): its run ends there.
    ends: Vec<i64>,
    /// Every rank's calls, rank after rank: rank r's are calls[first[r]..first[r + 1]].
    calls: Vec<Call>,
    first: Vec<usize>,
    pub unplaced: Vec<i64>,
}

/// Index (within `calls`) of the call containing `t`.
fn call_at(calls: &[Call], t: i64) -> Option<usize> {
    let i = calls.partition_point(|c| c.start <= t).checked_sub(1)?;
    (t <= calls[i].end).then_some(i)
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
        if mpi.len() >= INSTANCE as usize {
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
            calls.push(Call {
                region,
                row,
                start: s,
                end: e,
                compute: (s - prev_end).max(0),
                completes: false,
                ideal_start: UNSET,
                ideal_end: UNSET,
            });
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

/// A dependency of a call's end: the ideal start of a call (index into `calls`), or the
/// latest post of a collective instance (index into the instances, tagged by the high bit).
type Dep = u32;
const INSTANCE: u32 = 1 << 31;

/// Build the calls and their dependencies from the three inputs, and replay them.
pub fn replay(
    calls_in: &[RecordBatch],
    messages: &[RecordBatch],
    colls: &[RecordBatch],
    eager_limit: i64,
) -> Result<Replay> {
    let MpiCalls { ranks, regions, origins, ends, mut calls, first } = MpiCalls::read(calls_in, "ideal_replay")?;
    let index: FastMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let mut unplaced = vec![0i64; ranks.len()];
    let locate = |unplaced: &mut Vec<i64>, rank: Option<i64>, t: Option<i64>| -> Option<u32> {
        let r = *index.get(&rank?)?;
        let t = t?;
        match call_at(&calls[first[r]..first[r + 1]], t) {
            Some(c) => Some((first[r] + c) as u32),
            None => {
                unplaced[r] += 1;
                None
            }
        }
    };
    // (call that waits, what it waits for)
    let mut deps: Vec<(u32, Dep)> = Vec::new();
    let m: Vec<Int64Vec> =
        (0..MESSAGE_COLUMNS.len()).map(|i| int64_column(messages, i).map(Int64Vec)).collect::<Result<_>>()?;
    for row in 0..m[0].0.len() {
        commdb_catalog::interrupt::check_every(row, "ideal_replay")?;
        let (src, dst, bytes) = (m[0].get(row), m[1].get(row), m[2].get(row));
        let send_post = locate(&mut unplaced, src, m[3].get(row));
        let send_done = locate(&mut unplaced, src, m[4].get(row).or(m[3].get(row)));
        let recv_post = locate(&mut unplaced, dst, m[5].get(row).or(m[6].get(row)));
        let recv_done = locate(&mut unplaced, dst, m[6].get(row));
        if let Some(done) = recv_done {
            deps.extend([recv_post, send_post].into_iter().flatten().map(|p| (done, p)));
            deps.push((done, done));
        }
        if let Some(done) = send_done {
            let eager = bytes.is_some_and(|b| b <= eager_limit);
            let posts = if eager { [send_post, None] } else { [send_post, recv_post] };
            deps.extend(posts.into_iter().flatten().map(|p| (done, p)));
            deps.push((done, done));
        }
    }
    let c: Vec<Int64Vec> =
        (0..COLLECTIVE_COLUMNS.len()).map(|i| int64_column(colls, i).map(Int64Vec)).collect::<Result<_>>()?;
    let mut instance_of: FastMap<(i64, i64), u32> = FastMap::default();
    let mut instance_posts: Vec<Vec<u32>> = Vec::new();
    for row in 0..c[0].0.len() {
        commdb_catalog::interrupt::check_every(row, "ideal_replay")?;
        let (Some(comm), Some(inst)) = (c[0].get(row), c[1].get(row)) else { continue };
        let begin = c[3].get(row).or(c[4].get(row));
        let post = locate(&mut unplaced, c[2].get(row), begin);
        let done = locate(&mut unplaced, c[2].get(row), c[4].get(row).or(begin));
        if let (Some(p), Some(d)) = (post, done) {
            let next = instance_posts.len() as u32;
            let i = *instance_of.entry((comm, inst)).or_insert(next);
            if i == next {
                instance_posts.push(Vec::new());
            }
            instance_posts[i as usize].push(p);
            deps.push((d, INSTANCE | i));
        }
    }
    drop(instance_of);
    // A (done, done) entry only marks the call as completing something.
    for &(d, _) in &deps {
        calls[d as usize].completes = true;
    }
    deps.retain(|(d, p)| d != p);
    deps.sort_unstable();
    deps.dedup();
    let mut dep_start = vec![0u32; calls.len() + 1];
    for &(d, _) in &deps {
        dep_start[d as usize + 1] += 1;
    }
    for i in 0..calls.len() {
        dep_start[i + 1] += dep_start[i];
    }
    let waits: Vec<Dep> = deps.into_iter().map(|(_, p)| p).collect();
    let mut replay = Replay { ranks, regions, origins, ends, calls, first, unplaced };
    simulate(&mut replay, &dep_start, &waits, &instance_posts)?;
    Ok(replay)
}

/// An Int64 column with option access.
struct Int64Vec(Int64Array);

impl Int64Vec {
    fn get(&self, i: usize) -> Option<i64> {
        self.0.is_valid(i).then(|| self.0.value(i))
    }
}

/// Ideal start and end of every call, in dependency order.
fn simulate(rp: &mut Replay, dep_start: &[u32], waits: &[Dep], instance_posts: &[Vec<u32>]) -> Result<()> {
    let n = rp.ranks.len();
    // Per instance: posts not yet started, and the latest ideal post so far.
    let mut remaining: Vec<usize> = instance_posts.iter().map(Vec::len).collect();
    let mut latest: Vec<i64> = vec![UNSET; instance_posts.len()];
    let mut instances_of_post: FastMap<u32, Vec<u32>> = FastMap::default();
    for (i, posts) in instance_posts.iter().enumerate() {
        for p in posts {
            instances_of_post.entry(*p).or_default().push(i as u32);
        }
    }
    let mut pos: Vec<usize> = rp.first[..n].to_vec();
    let mut clock: Vec<i64> = rp.origins.clone();
    let mut waiting: FastMap<Dep, Vec<usize>> = FastMap::default();
    let mut ready: VecDeque<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    let wake =
        |dep: Dep, waiting: &mut FastMap<Dep, Vec<usize>>, ready: &mut VecDeque<usize>, queued: &mut Vec<bool>| {
            if let Some(ws) = waiting.remove(&dep) {
                for w in ws {
                    if !queued[w] {
                        queued[w] = true;
                        ready.push_back(w);
                    }
                }
            }
        };
    while let Some(r) = ready.pop_front() {
        commdb_catalog::interrupt::check("ideal_replay")?;
        queued[r] = false;
        while pos[r] < rp.first[r + 1] {
            let k = pos[r];
            if rp.calls[k].ideal_start == UNSET {
                let s = clock[r] + rp.calls[k].compute;
                rp.calls[k].ideal_start = s;
                wake(k as u32, &mut waiting, &mut ready, &mut queued);
                if let Some(list) = instances_of_post.get(&(k as u32)) {
                    for &i in list {
                        let i = i as usize;
                        remaining[i] -= 1;
                        latest[i] = latest[i].max(s);
                        if remaining[i] == 0 {
                            wake(INSTANCE | i as u32, &mut waiting, &mut ready, &mut queued);
                        }
                    }
                }
            }
            let mut end = rp.calls[k].ideal_start;
            let mut blocked = None;
            for &dep in &waits[dep_start[k] as usize..dep_start[k + 1] as usize] {
                let s = if dep & INSTANCE != 0 {
                    let i = (dep & !INSTANCE) as usize;
                    if remaining[i] > 0 { UNSET } else { latest[i] }
                } else {
                    rp.calls[dep as usize].ideal_start
                };
                if s == UNSET {
                    blocked = Some(dep);
                    break;
                }
                end = end.max(s);
            }
            if let Some(dep) = blocked {
                waiting.entry(dep).or_default().push(r);
                break;
            }
            let call = &mut rp.calls[k];
            if !call.completes {
                end = call.ideal_start + (call.end - call.start);
            }
            call.ideal_end = end;
            clock[r] = end;
            pos[r] += 1;
        }
    }
    if let Some(r) = (0..n).find(|&r| pos[r] < rp.first[r + 1]) {
        let c = &rp.calls[pos[r]];
        return exec_err!(
            "ideal_replay: rank {}'s MPI call at {}..{} waits for operations posted after it on other ranks: the recorded times contradict the messages; open the trace with clock correction clc or narrow the relation",
            rp.ranks[r],
            c.start,
            c.end
        );
    }
    Ok(())
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

fn ratio(a: i64, b: i64) -> f64 {
    if b > 0 { a as f64 / b as f64 } else { 1.0 }
}

impl Replay {
    /// Rank r's MPI calls.
    fn calls_of(&self, r: usize) -> &[Call] {
        &self.calls[self.first[r]..self.first[r + 1]]
    }

    /// Compute after rank r's last MPI call, up to its last event, and the ideal end of its run.
    fn tail(&self, r: usize) -> (i64, i64, i64) {
        match self.calls_of(r).last() {
            Some(c) => ((self.ends[r] - c.end).max(0), c.end, c.ideal_end),
            None => (self.ends[r] - self.origins[r], self.origins[r], self.origins[r]),
        }
    }

    /// Equations 2 and 3 of the transfer-efficiency monitors, pair by pair: t_simulated of a
    /// pair is its compute plus the ideal MPI call's duration, t_observed its compute plus
    /// the observed call's. Nothing is clamped: an ideal call may last longer than the
    /// observed one (its partner's post moved less than its own), and trf_local is then
    /// above 1. A rank's compute after its last MPI call is a last pair without a call, so the
    /// pairs add up to the rank's whole run and the last trf_cumulative is its efficiency.
    pub fn pairs(&self) -> Vec<Pair> {
        let mut out = Vec::new();
        for r in 0..self.ranks.len() {
            let calls = self.calls_of(r);
            let (mut sim, mut obs) = (0i64, 0i64);
            for (i, c) in calls.iter().enumerate() {
                let observed = c.end - c.start;
                let ideal = c.ideal_end - c.ideal_start;
                sim += c.compute + ideal;
                obs += c.compute + observed;
                out.push(Pair {
                    rank: self.ranks[r],
                    pair: i as i64,
                    region: Some(c.region),
                    compute: c.compute,
                    observed,
                    ideal,
                    observed_end: c.end,
                    ideal_end: c.ideal_end,
                    trf_local: ratio(c.compute + ideal, c.compute + observed),
                    trf_cumulative: ratio(sim, obs),
                });
            }
            let (compute, end, ideal_end) = self.tail(r);
            if compute > 0 {
                sim += compute;
                obs += compute;
                out.push(Pair {
                    rank: self.ranks[r],
                    pair: calls.len() as i64,
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
        }
        out
    }

    /// Per rank (and overall, rank None): observed and ideal runtime from the origin to the
    /// rank's last event (overall: from the earliest origin to the latest end).
    pub fn efficiency(&self) -> Vec<(Option<i64>, i64, i64, i64)> {
        let mut out = Vec::new();
        let (mut obs_all, mut ideal_all, mut unplaced_all) = (0i64, 0i64, 0i64);
        let first = self.origins.iter().copied().min().unwrap_or(0);
        for r in 0..self.ranks.len() {
            let o = self.origins[r];
            let (compute, _, ideal_end) = self.tail(r);
            let (obs, ideal) = (self.ends[r] - o, ideal_end + compute - o);
            out.push((Some(self.ranks[r]), obs, ideal, self.unplaced[r]));
            obs_all = obs_all.max(self.ends[r] - first);
            ideal_all = ideal_all.max(ideal_end + compute - first);
            unplaced_all += self.unplaced[r];
        }
        out.push((None, obs_all, ideal_all, unplaced_all));
        out
    }
}

struct Inputs {
    eager_limit: i64,
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
    Ok((Inputs { eager_limit }, vec![(calls, Some(ci)), (messages, Some(mi)), (colls, Some(ki))]))
}

/// `ideal_replay([rel => 'calls'], eager_limit => 65536, messages => 'messages', collectives => 'collectives')`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct IdealReplay;

impl TableFunctionImpl for IdealReplay {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let (inp, rels) = inputs(&IDEAL_REPLAY, &args)?;
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
        let s = out.clone();
        let compute: ComputeMany = Arc::new(move |inputs| {
            let rp = replay(&inputs[0], &inputs[1], &inputs[2], inp.eager_limit)?;
            let rows = rp.pairs();
            let int = |f: fn(&Pair) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
            let columns: Vec<ArrayRef> = vec![
                int(|p| p.rank),
                int(|p| p.pair),
                Arc::new(StringArray::from(
                    rows.iter().map(|p| p.region.map(|r| rp.regions[r as usize].as_str())).collect::<Vec<_>>(),
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
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        Ok(Arc::new(Derived::from_many(out, rels, compute)))
    }
}

/// `transfer_efficiency([rel => 'calls'], eager_limit => 65536, ...)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct TransferEfficiency;

impl TableFunctionImpl for TransferEfficiency {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let (inp, rels) = inputs(&TRANSFER_EFFICIENCY, &args)?;
        let out: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, true),
            Field::new("observed_ns", DataType::Int64, false),
            Field::new("ideal_ns", DataType::Int64, false),
            Field::new("efficiency", DataType::Float64, false),
            Field::new("unplaced", DataType::Int64, false),
        ]));
        let s = out.clone();
        let compute: ComputeMany = Arc::new(move |inputs| {
            let rows = replay(&inputs[0], &inputs[1], &inputs[2], inp.eager_limit)?.efficiency();
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Float64Array::from_iter_values(
                    rows.iter().map(|r| if r.1 > 0 { r.2 as f64 / r.1 as f64 } else { 1.0 }),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ];
            Ok(vec![RecordBatch::try_new(s.clone(), columns)?])
        });
        Ok(Arc::new(Derived::from_many(out, rels, compute)))
    }
}
