//! The simulation behind `generate`: one pass over iterations; within an iteration the ranks
//! are advanced phase by phase (posting and sending, completion, compute, allreduce) so that
//! every receive knows the arrival time of its message. Events go straight into per-rank
//! column buffers, stamped with the rank's (possibly skewed) local clock.

use crate::error::Result;
use crate::events::{Event, EventKind, EventParts, RawEvents, collective_op_code};
use crate::generate::clock::{self, SESSION_NS};
use crate::generate::rng::{streams, symmetric};
use crate::generate::topology::{Pattern, Topology, placement};
use crate::generate::{ClockTruth, Generated, GeneratorConfig, GpuTruth, GroundTruth};
use crate::generate::{offload, openmp};
use crate::trace::{CommInfo, LocationInfo, RankInfo, RawTrace, RegionInfo, TraceMeta};

/// Software overhead of entering an MPI call or recording an event inside it (ns).
const OVERHEAD_NS: i64 = 200;
/// Duration of MPI_Init and MPI_Finalize (they host the sync sessions).
const INIT_NS: i64 = SESSION_NS + 50_000;

const REGIONS: [(&str, &str, &str); 11] = [
    ("main", "user", "function"),
    ("compute", "user", "function"),
    ("MPI_Init", "mpi", "function"),
    ("MPI_Finalize", "mpi", "function"),
    ("MPI_Send", "mpi", "point2point"),
    ("MPI_Recv", "mpi", "point2point"),
    ("MPI_Isend", "mpi", "point2point"),
    ("MPI_Irecv", "mpi", "point2point"),
    ("MPI_Waitall", "mpi", "point2point"),
    ("MPI_Allreduce", "mpi", "coll_all2all"),
    ("MPI_Barrier", "mpi", "barrier"),
];
const MAIN: i32 = 0;
const COMPUTE: i32 = 1;
const INIT: i32 = 2;
const FINALIZE: i32 = 3;
const SEND: i32 = 4;
const RECV: i32 = 5;
const ISEND: i32 = 6;
const IRECV: i32 = 7;
const WAITALL: i32 = 8;
const ALLREDUCE: i32 = 9;
const BARRIER: i32 = 10;
/// The first of the OpenMP regions ([`crate::generate::openmp::REGIONS`]) of a threaded trace.
const OMP_FIRST: i32 = REGIONS.len() as i32;
/// The first of the CUDA regions ([`crate::generate::offload::REGIONS`]) of a GPU trace (never
/// threaded).
const GPU_FIRST: i32 = REGIONS.len() as i32;

/// The communicator of rank `r`'s OpenMP thread team, or of its GPU's RMA window (after
/// MPI_COMM_WORLD; a trace has one or the other).
fn team_of(r: usize) -> i32 {
    r as i32 + 1
}

struct Sim<'a> {
    cfg: &'a GeneratorConfig,
    topo: Topology,
    node: Vec<i32>,
    clocks: Vec<ClockTruth>,
    /// Messages per iteration on each edge.
    mult: Vec<u32>,
    /// First message index of each edge within an iteration.
    first_msg: Vec<usize>,
    compute_factor: Vec<f64>,
    bufs: Vec<RawEvents>,
    /// Current true time of each rank.
    t: Vec<i64>,
    next_request: Vec<i64>,
    send_ts: Vec<i64>,
    /// When each message's receive was posted (the start of its MPI_Irecv call).
    post_ts: Vec<i64>,
    arrival: Vec<i64>,
    /// When each rank's last MPI_Waitall ended (the end of a step without its collective).
    exchanged: Vec<i64>,
    recv_request: Vec<i64>,
    /// OpenMP threads per rank (1: none).
    threads: usize,
    /// Locations per rank: its threads, then its GPU stream (`gpu`); `bufs` holds a buffer per
    /// location, rank by rank.
    locs: usize,
    /// Each rank's delay before its kernel launches (`gpu` traces), and what its offloaded
    /// steps planted.
    late_ns: Vec<i64>,
    offload: Vec<offload::Tally>,
    /// Each rank's lock acquisitions so far (OpenMP's acquisition order).
    lock_order: Vec<i64>,
    messages: u64,
    inter_messages: u64,
    iteration: u64,
}

impl Sim<'_> {
    fn push(&mut self, r: usize, ts: i64, kind: EventKind, f: impl FnOnce(&mut Event)) {
        let mut e = Event::new(r as i32, 0, clock::local(&self.clocks[r], ts), kind);
        f(&mut e);
        self.bufs[r * self.locs].push(e);
    }

    fn call(&mut self, r: usize, region: i32, start: i64, end: i64) {
        self.push(r, start, EventKind::Enter, |e| e.region = region);
        self.push(r, end, EventKind::Leave, |e| e.region = region);
    }

    fn bytes(&self, edge: usize) -> i64 {
        self.cfg.bytes * self.topo.edges[edge].size_factor
    }

    fn transmission(&self, edge: usize, msg: usize, send_ts: i64) -> i64 {
        let e = self.topo.edges[edge];
        let net = &self.cfg.network;
        let intra = self.node[e.src as usize] == self.node[e.dst as usize];
        let bytes = self.bytes(edge) as f64;
        let base = if intra {
            net.intra_latency_ns + bytes / net.intra_bytes_per_ns
        } else {
            net.inter_latency_ns + bytes / net.inter_bytes_per_ns
        };
        let key = self.iteration << 32 | msg as u64;
        let mut x = base * (1.0 + net.noise * symmetric(self.cfg.seed, streams::NETWORK, key, 0));
        if let Some(bg) = &self.cfg.background_traffic
            && !intra
            && (bg.from_ns..bg.to_ns).contains(&send_ts)
        {
            x *= bg.factor * (1.0 + 0.2 * symmetric(self.cfg.seed, streams::BACKGROUND, key, 0));
        }
        if let Some(ramp) = &self.cfg.latency_ramp
            && !intra
            && (ramp.from_ns..ramp.to_ns).contains(&send_ts)
        {
            let share = (send_ts - ramp.from_ns) as f64 / (ramp.to_ns - ramp.from_ns) as f64;
            let factor = 1.0 + (ramp.factor - 1.0) * share;
            x *= factor * (1.0 + 0.2 * symmetric(self.cfg.seed, streams::BACKGROUND, key, 1));
        }
        (x.round() as i64).max(1)
    }

    fn compute(&mut self, r: usize, scale: f64) {
        let noise = 1.0 + 0.1 * symmetric(self.cfg.seed, streams::COMPUTE, self.iteration, r as u64);
        // self.iteration counts from 1; slow-rank's iteration from 0.
        let slow = match &self.cfg.slow_ranks {
            Some(s) if self.iteration > u64::from(s.from_iteration) && s.ranks.contains(&(r as i32)) => s.factor,
            _ => 1.0,
        };
        let dur = (self.cfg.compute_ns as f64 * self.compute_factor[r] * slow * scale * noise).round() as i64;
        let t = self.t[r];
        if self.cfg.gpu {
            self.offloaded(r, t, dur);
            return;
        }
        if self.threads > 1 {
            let (clock, threads) = (self.clocks[r], self.threads);
            let regions = openmp::Regions {
                parallel: OMP_FIRST,
                barrier: OMP_FIRST + 1,
                critical: OMP_FIRST + 2,
                block: OMP_FIRST + 3,
                compute: COMPUTE,
            };
            let bufs = &mut self.bufs[r * self.locs..r * self.locs + threads];
            let mut push = |thread: u32, ts: i64, kind: EventKind, f: &dyn Fn(&mut Event)| {
                let mut e = Event::new(r as i32, thread as i32, clock::local(&clock, ts), kind);
                f(&mut e);
                bufs[thread as usize].push(e);
            };
            let seeds = (self.cfg.seed, self.iteration);
            let instrumented = !self.cfg.uninstrumented_compute;
            let order = &mut self.lock_order[r];
            let team = team_of(r);
            self.t[r] = openmp::step(r, threads as u32, team, t, dur, instrumented, regions, seeds, order, &mut push);
            return;
        }
        if !self.cfg.uninstrumented_compute {
            self.call(r, COMPUTE, t, t + dur);
        }
        self.t[r] = t + dur;
    }

    /// Rank `r`'s step of `dur` ns of work from `t`, offloaded to its stream.
    fn offloaded(&mut self, r: usize, t: i64, dur: i64) {
        let regions = offload::Regions {
            window: team_of(r),
            copy_in: GPU_FIRST,
            copy_out: GPU_FIRST + 1,
            launch: GPU_FIRST + 2,
            sync: GPU_FIRST + 3,
            kernel: GPU_FIRST + 4,
            compute: COMPUTE,
        };
        let clock = self.clocks[r];
        let bufs = &mut self.bufs[r * self.locs..(r + 1) * self.locs];
        let mut push = |thread: u32, ts: i64, kind: EventKind, f: &dyn Fn(&mut Event)| {
            let mut e = Event::new(r as i32, thread as i32, clock::local(&clock, ts), kind);
            f(&mut e);
            bufs[thread as usize].push(e);
        };
        let instrumented = !self.cfg.uninstrumented_compute;
        let (late, bytes) = (self.late_ns[r], self.cfg.bytes);
        self.t[r] =
            offload::step(r as i32, t, dur, late, bytes, instrumented, regions, &mut self.offload[r], &mut push);
    }

    fn send(&mut self, r: usize, edge: usize, k: u32, blocking: bool) {
        let t = self.t[r];
        let msg = self.first_msg[edge] + k as usize;
        let dst = self.topo.edges[edge].dst;
        let bytes = self.bytes(edge);
        let request = if blocking { crate::events::NONE_I64 } else { self.new_request(r) };
        let (region, kind) = if blocking { (SEND, EventKind::Send) } else { (ISEND, EventKind::Isend) };
        let tag = tag(self.cfg.pattern, edge, &self.topo);
        self.push(r, t, EventKind::Enter, |e| e.region = region);
        self.push(r, t + OVERHEAD_NS, kind, |e| {
            e.peer = dst;
            e.comm = 0;
            e.tag = tag;
            e.bytes = bytes;
            e.request = request;
        });
        self.push(r, t + 2 * OVERHEAD_NS, EventKind::Leave, |e| e.region = region);
        self.send_ts[msg] = t + OVERHEAD_NS;
        self.recv_request[msg] = request;
        // A rendezvous transfer starts once the receive is posted as well.
        let start = if self.rendezvous(edge) { (t + OVERHEAD_NS).max(self.post_ts[msg]) } else { t + OVERHEAD_NS };
        self.arrival[msg] = start + self.transmission(edge, msg, start);
        self.messages += 1;
        let e = self.topo.edges[edge];
        if self.node[e.src as usize] != self.node[e.dst as usize] {
            self.inter_messages += 1;
        }
        self.t[r] = t + 2 * OVERHEAD_NS;
    }

    /// Whether the messages of `edge` are sent by rendezvous (larger than the eager limit).
    fn rendezvous(&self, edge: usize) -> bool {
        self.cfg.eager_limit.is_some_and(|limit| self.bytes(edge) > limit)
    }

    fn new_request(&mut self, r: usize) -> i64 {
        self.next_request[r] += 1;
        self.next_request[r]
    }

    fn blocking_recv(&mut self, r: usize, edge: usize, k: u32) {
        let t = self.t[r];
        let msg = self.first_msg[edge] + k as usize;
        let done = self.arrival[msg].max(t + OVERHEAD_NS);
        let src = self.topo.edges[edge].src;
        let bytes = self.bytes(edge);
        let tag = tag(self.cfg.pattern, edge, &self.topo);
        self.push(r, t, EventKind::Enter, |e| e.region = RECV);
        self.push(r, done, EventKind::Recv, |e| {
            e.peer = src;
            e.comm = 0;
            e.tag = tag;
            e.bytes = bytes;
        });
        self.push(r, done + OVERHEAD_NS, EventKind::Leave, |e| e.region = RECV);
        self.t[r] = done + OVERHEAD_NS;
    }

    /// Non-blocking exchange: post receives, send, wait for all. The exchange starts right
    /// after the previous collective (or step), so receivers wait for their messages and the
    /// recorded receive times follow the arrivals. Every rank's receives are posted before any
    /// message is sent, so that a rendezvous send knows its post.
    fn exchange(&mut self) {
        let n = self.t.len();
        let mut posted: Vec<(usize, u32, i64)> = Vec::new();
        let mut post_requests: Vec<Vec<(usize, u32, i64)>> = vec![Vec::new(); n];
        for (r, requests) in post_requests.iter_mut().enumerate() {
            posted.clear();
            for i in 0..self.topo.incoming[r].len() {
                let edge = self.topo.incoming[r][i];
                for k in 0..self.mult[edge] {
                    let t = self.t[r];
                    let request = self.new_request(r);
                    self.push(r, t, EventKind::Enter, |e| e.region = IRECV);
                    self.push(r, t + OVERHEAD_NS, EventKind::IrecvRequest, |e| e.request = request);
                    self.push(r, t + 2 * OVERHEAD_NS, EventKind::Leave, |e| e.region = IRECV);
                    self.t[r] = t + 2 * OVERHEAD_NS;
                    self.post_ts[self.first_msg[edge] + k as usize] = t;
                    posted.push((edge, k, request));
                }
            }
            requests.clone_from(&posted);
        }
        for r in 0..n {
            for i in 0..self.topo.outgoing[r].len() {
                let edge = self.topo.outgoing[r][i];
                for k in 0..self.mult[edge] {
                    self.send(r, edge, k, false);
                }
            }
        }
        let mut completions: Vec<(i64, usize, u32, i64, bool)> = Vec::new();
        for (r, posted) in post_requests.iter().enumerate() {
            let w0 = self.t[r];
            completions.clear();
            for &(edge, k, request) in posted {
                let msg = self.first_msg[edge] + k as usize;
                completions.push((self.arrival[msg].max(w0 + OVERHEAD_NS), edge, k, request, true));
            }
            for i in 0..self.topo.outgoing[r].len() {
                let edge = self.topo.outgoing[r][i];
                for k in 0..self.mult[edge] {
                    let msg = self.first_msg[edge] + k as usize;
                    // An eager send completes at once; a rendezvous one when its transfer ends.
                    let done =
                        if self.rendezvous(edge) { self.arrival[msg].max(w0 + OVERHEAD_NS) } else { w0 + OVERHEAD_NS };
                    completions.push((done, edge, k, self.recv_request[msg], false));
                }
            }
            completions.sort_by_key(|c| c.0);
            let end = completions.last().map_or(w0, |c| c.0) + OVERHEAD_NS;
            self.push(r, w0, EventKind::Enter, |e| e.region = WAITALL);
            for &(ts, edge, _, request, is_recv) in &completions {
                if is_recv {
                    let src = self.topo.edges[edge].src;
                    let bytes = self.bytes(edge);
                    let tag = tag(self.cfg.pattern, edge, &self.topo);
                    self.push(r, ts, EventKind::Irecv, |e| {
                        e.peer = src;
                        e.comm = 0;
                        e.tag = tag;
                        e.bytes = bytes;
                        e.request = request;
                    });
                } else {
                    self.push(r, ts, EventKind::IsendComplete, |e| e.request = request);
                }
            }
            self.push(r, end, EventKind::Leave, |e| e.region = WAITALL);
            self.t[r] = end;
            self.exchanged[r] = end;
        }
    }

    /// Rank 0 hands work to every other rank and collects results, with blocking calls.
    fn master_worker(&mut self) {
        let n = self.t.len();
        self.compute(0, 0.1);
        for i in 0..self.topo.outgoing[0].len() {
            let edge = self.topo.outgoing[0][i];
            for k in 0..self.mult[edge] {
                self.send(0, edge, k, true);
            }
        }
        for w in 1..n {
            for i in 0..self.topo.incoming[w].len() {
                let edge = self.topo.incoming[w][i];
                for k in 0..self.mult[edge] {
                    self.blocking_recv(w, edge, k);
                }
            }
            self.compute(w, 1.0);
            for i in 0..self.topo.outgoing[w].len() {
                let edge = self.topo.outgoing[w][i];
                for k in 0..self.mult[edge] {
                    self.send(w, edge, k, true);
                }
            }
        }
        for i in 0..self.topo.incoming[0].len() {
            let edge = self.topo.incoming[0][i];
            for k in 0..self.mult[edge] {
                self.blocking_recv(0, edge, k);
            }
        }
    }

    /// A collective over all ranks: everyone leaves after the last one arrived.
    fn collective(&mut self, region: i32, op: &str, bytes: i64) {
        let n = self.t.len();
        let cost = OVERHEAD_NS * (1 + i64::from(usize::BITS - n.leading_zeros()));
        let exit = self.t.iter().map(|t| t + OVERHEAD_NS).max().unwrap_or(0) + cost;
        let op = collective_op_code(op);
        for r in 0..n {
            let t = self.t[r];
            let jitter = (OVERHEAD_NS as f64
                * (1.0 + symmetric(self.cfg.seed, streams::JITTER, self.iteration, r as u64) * 0.5))
                as i64;
            self.push(r, t, EventKind::Enter, |e| e.region = region);
            self.push(r, t + OVERHEAD_NS, EventKind::CollBegin, |_| {});
            self.push(r, exit, EventKind::CollEnd, |e| {
                e.comm = 0;
                e.op = op;
                e.bytes = bytes;
                e.bytes_recv = bytes;
            });
            self.push(r, exit + jitter, EventKind::Leave, |e| e.region = region);
            self.t[r] = exit + jitter;
        }
    }
}

fn tag(pattern: Pattern, edge: usize, topo: &Topology) -> i32 {
    match pattern {
        Pattern::MasterWorker => {
            if topo.edges[edge].src == 0 {
                1
            } else {
                2
            }
        }
        _ => topo.edges[edge].size_factor as i32,
    }
}

/// Where a streamed run hands its events: every `events` events or so (at the end of an
/// iteration), each rank's buffer since the last hand-over, in rank order.
pub(super) struct Flush<'a> {
    pub events: usize,
    pub sink: &'a mut dyn FnMut(&[RawEvents]) -> Result<()>,
}

/// Run the simulation, keeping every event in the trace, or handing them to `flush` as they
/// come (the trace then has none).
pub(super) fn run(cfg: &GeneratorConfig, mut flush: Option<Flush<'_>>) -> Result<Generated> {
    let n = cfg.ranks as usize;
    let topo = Topology::new(cfg.pattern, cfg.ranks);
    let node = placement(cfg.pattern, cfg.ranks, cfg.ranks_per_node, cfg.bad_mapping);
    let clocks = clock::truths(cfg);
    let imbalanced = |r: i32| cfg.imbalance.as_ref().is_some_and(|im| im.ranks.contains(&r));
    let factor = cfg.imbalance.as_ref().map_or(1.0, |im| im.factor);
    let mult: Vec<u32> =
        topo.edges.iter().map(|e| if imbalanced(e.src) { factor.round().max(1.0) as u32 } else { 1 }).collect();
    let mut first_msg = Vec::with_capacity(mult.len());
    let mut total = 0usize;
    for m in &mult {
        first_msg.push(total);
        total += *m as usize;
    }
    let compute_factor = (0..cfg.ranks).map(|r| if imbalanced(r) { factor } else { 1.0 }).collect();
    let threads = cfg.threads.max(1) as usize;
    let locs = threads + usize::from(cfg.gpu);
    let offload_events = if cfg.gpu { 10 } else { 0 };
    let mut per_rank_events =
        12 + (cfg.iterations as usize) * (8 + 8 * total.div_ceil(n.max(1)) + 6 + 16 * threads + offload_events);
    // A worker thread records 14 events a step.
    // (A stream records 6.)
    let mut per_worker_events = if threads > 1 {
        16 * cfg.iterations as usize + 16
    } else if cfg.gpu {
        6 * cfg.iterations as usize + 8
    } else {
        0
    };
    if let Some(f) = &flush {
        // The events held between hand-overs, shared by every location's buffer.
        let share = f.events / (n * locs).max(1);
        per_rank_events = per_rank_events.min(share + 64 + 8 * total.div_ceil(n.max(1)) + 16 * threads);
        per_worker_events = per_worker_events.min(share + 16);
    }
    let mut handed = 0usize;
    let mut sim = Sim {
        cfg,
        topo,
        node: node.clone(),
        clocks: clocks.clone(),
        mult,
        first_msg,
        compute_factor,
        bufs: (0..n * locs)
            .map(|i| RawEvents::with_capacity(if i % locs == 0 { per_rank_events } else { per_worker_events }))
            .collect(),
        t: vec![0; n],
        next_request: vec![0; n],
        send_ts: vec![0; total],
        post_ts: vec![0; total],
        arrival: vec![0; total],
        exchanged: vec![0; n],
        recv_request: vec![0; total],
        threads,
        locs,
        late_ns: {
            let late = cfg.late_launch_or_default();
            (0..n as i32).map(|r| if cfg.gpu && late.ranks.contains(&r) { late.ns } else { 0 }).collect()
        },
        offload: vec![offload::Tally::default(); if cfg.gpu { n } else { 0 }],
        lock_order: vec![0; n],
        messages: 0,
        inter_messages: 0,
        iteration: 0,
    };
    for r in 0..n {
        if !cfg.no_enclosing_region {
            sim.push(r, 0, EventKind::Enter, |e| e.region = MAIN);
        }
        sim.call(r, INIT, 0, INIT_NS);
        sim.t[r] = INIT_NS;
    }
    sim.collective(BARRIER, "barrier", 0);
    let local = |r: usize, t: i64| clock::local(&clocks[r], t);
    let mut iterations: Vec<Vec<(i64, i64)>> = vec![Vec::with_capacity(cfg.iterations as usize); n];
    // A step: exchange, compute, then the allreduce; with the allreduce every k-th step only,
    // compute, exchange, and the allreduce after every k-th (a solver's loop with a
    // convergence check), so that each step ends with its MPI_Waitall.
    let every = cfg.collective_every.max(1);
    let mut starts = sim.t.clone();
    for i in 0..cfg.iterations {
        sim.iteration = u64::from(i) + 1;
        match cfg.pattern {
            Pattern::MasterWorker => sim.master_worker(),
            _ if every == 1 => {
                sim.exchange();
                (0..n).for_each(|r| sim.compute(r, 1.0));
            }
            _ => {
                (0..n).for_each(|r| sim.compute(r, 1.0));
                if i == 0 && cfg.uninstrumented_compute {
                    // The first iteration begins with its first call: the computation before
                    // it is no call, and belongs to none.
                    starts.clone_from(&sim.t);
                }
                sim.exchange();
            }
        }
        if (i + 1) % every == 0 {
            sim.collective(ALLREDUCE, "allreduce", 8);
        }
        // A step ends with its collective; without one every step, with its MPI_Waitall.
        let ends = if every == 1 { &sim.t } else { &sim.exchanged };
        for (r, bounds) in iterations.iter_mut().enumerate() {
            bounds.push((local(r, starts[r]), local(r, ends[r])));
        }
        starts.clone_from(ends);
        if let Some(f) = &mut flush {
            handed += sim.hand_over(f, false)?;
        }
    }
    let finalize = sim.t.iter().copied().max().unwrap_or(0);
    for r in 0..n {
        let t = sim.t[r];
        sim.call(r, FINALIZE, t, finalize + INIT_NS);
        if !cfg.no_enclosing_region {
            sim.push(r, finalize + INIT_NS + OVERHEAD_NS, EventKind::Leave, |e| e.region = MAIN);
        }
    }
    let duration_ns = finalize + INIT_NS + OVERHEAD_NS;
    if let Some(f) = &mut flush {
        handed += sim.hand_over(f, true)?;
    }

    let mut sessions = vec![0];
    for s in 1..=i64::from(cfg.sync_sessions) {
        sessions.push(INIT_NS + (finalize - INIT_NS) * s / (i64::from(cfg.sync_sessions) + 1));
    }
    sessions.push(finalize);
    let clock_sync = if cfg.clock_skew { clock::samples(cfg, &clocks, &sessions) } else { Vec::new() };

    let events = EventParts::new(std::mem::take(&mut sim.bufs));
    let mut trace = skeleton(cfg, &node);
    let truth = GroundTruth {
        config: cfg.clone(),
        nodes: trace.ranks.iter().map(|r| r.node.clone().unwrap_or_default()).collect(),
        clocks,
        events: (events.len() + handed) as u64,
        messages: sim.messages,
        inter_node_messages: sim.inter_messages,
        collectives_per_rank: u64::from(cfg.iterations / every) + 1,
        duration_ns,
        jobs: None,
        iterations,
        gpu: cfg.gpu.then(|| GpuTruth {
            late_launch: cfg.late_launch_or_default(),
            kernels: sim.offload.iter().map(|t| t.kernels).sum(),
            transfers: sim.offload.iter().map(|t| t.transfers).sum(),
            early_sync_ns: sim.offload.iter().map(|t| t.early_sync_ns).collect(),
            on_kernel_ns: sim.offload.iter().map(|t| t.on_kernel_ns).collect(),
            host_late_ns: sim.offload.iter().map(|t| t.host_late_ns).collect(),
            device_idle_ns: sim.offload.iter().map(offload::Tally::idle_ns).collect(),
        }),
    };
    trace.events = events;
    trace.clock_sync = clock_sync;
    Ok(Generated { trace, truth })
}

impl Sim<'_> {
    /// Hand the events buffered since the last time to `flush` when there are enough of them
    /// (or at the `end`); returns how many were handed.
    fn hand_over(&mut self, flush: &mut Flush<'_>, end: bool) -> Result<usize> {
        let buffered: usize = self.bufs.iter().map(RawEvents::len).sum();
        if buffered == 0 || (!end && buffered < flush.events) {
            return Ok(0);
        }
        (flush.sink)(&self.bufs)?;
        for b in &mut self.bufs {
            b.clear();
        }
        Ok(buffered)
    }
}

/// The trace's definitions (ranks on their nodes, one location each, regions, the world
/// communicator), without events; `node[r]` is the node of rank r.
pub(super) fn skeleton(cfg: &GeneratorConfig, node: &[i32]) -> RawTrace {
    let node_names: Vec<String> = node.iter().map(|k| format!("node{k:03}")).collect();
    let ranks: Vec<RankInfo> = (0..cfg.ranks)
        .map(|r| RankInfo {
            rank: r,
            node: Some(node_names[r as usize].clone()),
            name: format!("rank {r}"),
            application: None,
        })
        .collect();
    let threads = cfg.threads.max(1) as i32;
    let locs = threads + i32::from(cfg.gpu);
    let locations = (0..cfg.ranks)
        .flat_map(|r| {
            (0..locs).map(move |t| LocationInfo {
                // A GPU trace numbers its locations as Score-P does, the host thread by its
                // rank (its location group's id: CASITA takes such a location for the MPI
                // process) and the stream above 2^32.
                location_id: if cfg.gpu {
                    i64::from(r) | (i64::from(t) << 32)
                } else {
                    i64::from(r) * i64::from(locs) + i64::from(t)
                },
                rank: r,
                thread: t,
                kind: if t < threads { "cpu" } else { "gpu" }.into(),
                name: if t == threads {
                    offload::STREAM_NAME.to_string()
                } else if threads == 1 {
                    format!("rank {r}")
                } else if t == 0 {
                    format!("rank {r} master thread")
                } else {
                    format!("rank {r} OMP thread {t}")
                },
                node: None,
            })
        })
        .collect();
    let openmp = if threads > 1 { &openmp::REGIONS[..] } else { &[] };
    let cuda = if cfg.gpu { &offload::REGIONS[..] } else { &[] };
    let regions = REGIONS
        .iter()
        .chain(openmp)
        .chain(cuda)
        .enumerate()
        .map(|(i, (name, paradigm, role))| RegionInfo {
            region_id: i as i64,
            name: (*name).into(),
            paradigm: (*paradigm).into(),
            role: Some((*role).into()),
            file: None,
            line: None,
        })
        .collect();
    RawTrace {
        meta: TraceMeta {
            name: "generated".into(),
            path: String::new(),
            format: "generated".into(),
            format_version: None,
            creator: Some(format!("commdb generate {}", env!("CARGO_PKG_VERSION"))),
            timer_resolution_hz: Some(1_000_000_000),
            start_wallclock_ns: cfg.start_wallclock_ns,
            ..TraceMeta::default()
        },
        ranks,
        locations,
        regions,
        communicators: std::iter::once(CommInfo {
            comm: 0,
            name: "MPI_COMM_WORLD".into(),
            members: (0..cfg.ranks).collect(),
            per_rank: false,
        })
        .chain((0..cfg.ranks).filter(|_| threads > 1).map(|r| CommInfo {
            comm: team_of(r as usize),
            name: format!("OpenMP team of rank {r}"),
            members: vec![r; threads as usize],
            per_rank: false,
        }))
        .chain((0..cfg.ranks).filter(|_| cfg.gpu).map(|r| CommInfo {
            comm: team_of(r as usize),
            name: format!("CUDA window of rank {r}"),
            members: vec![r; 2],
            per_rank: false,
        }))
        .collect(),
        ..RawTrace::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Background, Imbalance, generate};

    fn build(cfg: &GeneratorConfig) -> (crate::trace::Trace, GroundTruth) {
        let g = generate(cfg).unwrap();
        (g.trace.build().unwrap(), g.truth)
    }

    #[test]
    fn every_pattern_matches_all_messages() {
        for pattern in [Pattern::Stencil2d, Pattern::Ring, Pattern::Alltoall, Pattern::MasterWorker] {
            let cfg =
                GeneratorConfig { ranks: 9, ranks_per_node: 3, pattern, iterations: 5, ..GeneratorConfig::default() };
            let (trace, truth) = build(&cfg);
            assert!(trace.warnings().unwrap().is_empty(), "{pattern:?}: {:?}", trace.warnings());
            assert_eq!(trace.row_count("messages").unwrap() as u64, truth.messages, "{pattern:?}");
            assert_eq!(trace.row_count("events").unwrap() as u64, truth.events);
            assert_eq!(trace.row_count("collectives").unwrap() as u64, 9 * truth.collectives_per_rank);
        }
    }

    #[test]
    fn threads_record_a_parallel_region_per_step_on_every_thread() {
        for pattern in [Pattern::Stencil2d, Pattern::MasterWorker] {
            let cfg = GeneratorConfig { ranks: 4, iterations: 6, threads: 3, pattern, ..GeneratorConfig::default() };
            let g = generate(&cfg).unwrap();
            assert_eq!(g.trace.locations.len(), 12);
            assert_eq!(g.trace.communicators.len(), 5, "the world and a team per rank");
            let events = &g.trace.events;
            assert_eq!(events.len() as u64, g.truth.events);
            let count = |kind: EventKind, thread: i32| {
                events
                    .parts
                    .iter()
                    .map(|p| (0..p.len()).filter(|&i| p.kind[i] == kind as u8 && p.thread[i] == thread).count())
                    .sum::<usize>()
            };
            // A fork and join per step (and per master-worker compute) on the master, a team
            // begin, a lock taken and an implicit barrier on every thread.
            let steps = count(EventKind::ThreadFork, 0);
            assert!(steps >= 24, "{pattern:?}: {steps}");
            assert_eq!(count(EventKind::ThreadJoin, 0), steps);
            for t in 0..3 {
                assert_eq!(count(EventKind::ThreadTeamBegin, t), steps, "{pattern:?} thread {t}");
                assert_eq!(count(EventKind::ThreadAcquireLock, t), steps);
                assert_eq!(count(EventKind::ThreadReleaseLock, t), steps);
            }
            let trace = g.trace.build().unwrap();
            assert!(trace.warnings().unwrap().is_empty(), "{pattern:?}: {:?}", trace.warnings());
            assert_eq!(trace.row_count("messages").unwrap() as u64, g.truth.messages);
        }
        let bad = GeneratorConfig { threads: 0, ..GeneratorConfig::default() };
        assert!(generate(&bad).unwrap_err().to_string().contains("threads must be between 1 and 256, got 0"));
    }

    #[test]
    fn rendezvous_sends_wait_for_the_post_and_collectives_come_every_k_steps() {
        let base = GeneratorConfig {
            ranks: 16,
            ranks_per_node: 4,
            iterations: 30,
            imbalance: Some(Imbalance { ranks: vec![5], factor: 3.0 }),
            collective_every: 10,
            ..GeneratorConfig::default()
        };
        let (eager, _) = build(&base);
        let (rendezvous, truth) = build(&GeneratorConfig { eager_limit: Some(1024), ..base.clone() });
        assert_eq!(truth.collectives_per_rank, 3 + 1, "three allreduces and the barrier");
        assert_eq!(rendezvous.row_count("collectives").unwrap(), 16 * 4);
        let late_posts = |t: &crate::trace::Trace| -> usize {
            let b = arrow::compute::concat_batches(
                &crate::model::schema("messages").unwrap(),
                &t.table("messages").unwrap(),
            )
            .unwrap();
            let col = |n: &str| {
                b.column_by_name(n).unwrap().as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().clone()
            };
            let (post, start, done) = (col("recv_post_ts"), col("send_complete_call_start"), col("send_complete_ts"));
            (0..b.num_rows()).filter(|&i| post.value(i) > start.value(i) && done.value(i) > post.value(i)).count()
        };
        // An eager send completes as soon as its MPI_Waitall begins (a post in those first ns
        // is rare); a rendezvous one to the slow rank waits for its post.
        let (e, r) = (late_posts(&eager), late_posts(&rendezvous));
        assert!(r > 20 && e * 10 < r, "eager {e}, rendezvous {r}");
        // The same calls and messages, other times.
        assert_eq!(eager.row_count("messages").unwrap(), rendezvous.row_count("messages").unwrap());
        // Refused where it does not apply, or beyond the limits.
        let bad = |c: GeneratorConfig| c.validate().unwrap_err().to_string();
        assert!(
            bad(GeneratorConfig { pattern: Pattern::MasterWorker, eager_limit: Some(1), ..base.clone() })
                .contains("exchange patterns")
        );
        assert!(bad(GeneratorConfig { collective_every: 0, ..base.clone() }).contains("at least 1"));
        assert!(bad(GeneratorConfig { bytes: i64::MAX, ..base.clone() }).contains("at most"));
        assert!(bad(GeneratorConfig { iterations: u32::MAX, compute_ns: 1_000_000_000, ..base }).contains("146 years"));
    }

    #[test]
    fn same_seed_same_trace() {
        let cfg = GeneratorConfig { ranks: 8, iterations: 3, ..GeneratorConfig::default() };
        let ts = |c: &GeneratorConfig| -> Vec<i64> {
            generate(c).unwrap().trace.events.parts.iter().flat_map(|p| p.ts.clone()).collect()
        };
        assert_eq!(ts(&cfg), ts(&cfg));
        assert_ne!(ts(&cfg), ts(&GeneratorConfig { seed: 2, ..cfg.clone() }));
    }

    #[test]
    fn scenarios_change_what_they_should() {
        let base = GeneratorConfig { ranks: 16, ranks_per_node: 4, iterations: 20, ..GeneratorConfig::default() };
        let (_, clean) = build(&base);
        let (_, bad) = build(&GeneratorConfig { bad_mapping: true, ..base.clone() });
        assert_eq!(bad.inter_node_messages, bad.messages);
        assert!(clean.inter_node_messages < clean.messages / 2 + 1);
        let (_, imb) =
            build(&GeneratorConfig { imbalance: Some(Imbalance { ranks: vec![5], factor: 3.0 }), ..base.clone() });
        assert_eq!(imb.messages, clean.messages + 2 * 4 * 20);
        let bg = Background { from_ns: clean.duration_ns / 4, to_ns: clean.duration_ns / 2, factor: 5.0 };
        let g = generate(&GeneratorConfig { background_traffic: Some(bg), ..base.clone() }).unwrap();
        assert!(g.truth.duration_ns > clean.duration_ns);
        let slow = crate::generate::SlowRanks { ranks: vec![5], factor: 2.0, from_iteration: 10 };
        let (_, slowed) = build(&GeneratorConfig { slow_ranks: Some(slow), ..base.clone() });
        assert_eq!(slowed.messages, clean.messages);
        let lengths = |t: &GroundTruth| t.iterations[5].iter().map(|(a, b)| b - a).collect::<Vec<_>>();
        let (before, after) = (lengths(&clean), lengths(&slowed));
        assert_eq!(before[..10], after[..10], "nothing changes before the slowdown");
        assert!(after[10..].iter().zip(&before[10..]).all(|(a, b)| *a > b + base.compute_ns / 2));
        let skew = generate(&GeneratorConfig { clock_skew: true, sync_sessions: 2, ..base }).unwrap();
        assert_eq!(skew.trace.clock_sync.len(), 15 * 4 * 20);
    }
}
