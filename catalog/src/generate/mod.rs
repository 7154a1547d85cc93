//! Synthetic MPI traces with known ground truth, deterministic for a seed. A small discrete
//! simulation runs `iterations` steps of a communication pattern (see `topology`): compute,
//! point-to-point exchange, then an MPI_Allreduce that synchronises the ranks. Transmission
//! time is latency + bytes / bandwidth, different within and between nodes, with noise.
//! Scenarios inject known problems: bad rank placement, background traffic in a time window,
//! imbalanced ranks, skewed and drifting clocks with sync samples. The ground truth (placement,
//! clocks, injected windows, expected counts) is returned and written as ground_truth.json,
//! with a matching Slurm log (`jobs`) when the trace has an absolute start.
//!
//! Generation is one sequential pass that appends each rank's events to its own column buffer
//! (no per-event allocation); cost is O(events).

pub mod clock;
pub mod jobs;
mod offload;
mod openmp;
mod simulate;
pub mod topology;

pub mod rng;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::trace::RawTrace;
pub use topology::Pattern;

/// Point-to-point network model: time = latency + bytes / bandwidth, times (1 +- noise).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Network {
    pub intra_latency_ns: f64,
    pub intra_bytes_per_ns: f64,
    pub inter_latency_ns: f64,
    pub inter_bytes_per_ns: f64,
    /// Relative noise amplitude of every transmission time (uniform in +-noise).
    pub noise: f64,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            intra_latency_ns: 500.0,
            intra_bytes_per_ns: 10.0,
            inter_latency_ns: 2_000.0,
            inter_bytes_per_ns: 2.0,
            noise: 0.05,
        }
    }
}

/// Inter-node transmission times multiplied by `factor` (with 20% noise) for messages sent in
/// [from_ns, to_ns).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Background {
    pub from_ns: i64,
    pub to_ns: i64,
    pub factor: f64,
}

/// Ranks with `factor` x more compute and `factor` x (rounded) more messages per channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imbalance {
    pub ranks: Vec<i32>,
    pub factor: f64,
}

/// Ranks whose compute takes `factor` x longer from iteration `from_iteration` (counted from 0)
/// on: a change that starts during the run, as after a node's thermal throttling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowRanks {
    pub ranks: Vec<i32>,
    pub factor: f64,
    pub from_iteration: u32,
}

/// Everything that determines a generated trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorConfig {
    pub ranks: i32,
    pub ranks_per_node: i32,
    pub pattern: Pattern,
    pub iterations: u32,
    pub seed: u64,
    /// Base message size in bytes (stencil: x halos; y halos are twice as large).
    pub bytes: i64,
    /// Mean compute time per iteration (ns).
    pub compute_ns: i64,
    pub network: Network,
    pub bad_mapping: bool,
    pub background_traffic: Option<Background>,
    /// Inter-node transmission times multiplied by a factor growing linearly from 1 at from_ns
    /// to `factor` at to_ns (with 20% noise): latency that builds up.
    #[serde(default)]
    pub latency_ramp: Option<Background>,
    pub imbalance: Option<Imbalance>,
    /// Ranks that compute slower from an iteration on.
    #[serde(default)]
    pub slow_ranks: Option<SlowRanks>,
    pub clock_skew: bool,
    /// Sync sessions during the run, besides the ones at start and end (with clock_skew).
    pub sync_sessions: u32,
    /// Absolute UTC time of ts = 0 (ns since the Unix epoch); None gives a trace without one.
    #[serde(default)]
    pub start_wallclock_ns: Option<i64>,
    /// Leave out the `main` region around each rank's run, as Extrae's Paraver traces and
    /// selectively instrumented OTF2 traces do.
    #[serde(default)]
    pub no_enclosing_region: bool,
    /// Leave the compute phases out (no `compute` region): uninstrumented code runs between
    /// the MPI calls, time that no region covers.
    #[serde(default)]
    pub uninstrumented_compute: bool,
    /// Messages of more bytes than this are sent by rendezvous: the transfer starts when both
    /// the send has begun and the receive is posted, and the send completes when it ends (the
    /// sender waits for a late receiver). None: every message is eager, and a send completes at
    /// once.
    #[serde(default)]
    pub eager_limit: Option<i64>,
    /// The MPI_Allreduce that closes a step comes every this many steps (a convergence check
    /// every k steps); in the steps between, the ranks run on without synchronising.
    #[serde(default = "every_step")]
    pub collective_every: u32,
    /// OpenMP threads per rank: with more than 1, each step's computation is a parallel region
    /// (fork, team, a critical section, the implicit barrier, join) after a serial part on the
    /// master, recorded as Score-P records OpenMP; MPI stays on the master thread.
    #[serde(default = "one_thread")]
    pub threads: u32,
    /// Offload each step's computation to a GPU stream per rank, as Score-P records CUDA
    /// (`crate::generate::offload`): copies, a kernel launch, the kernel on the stream, a
    /// synchronisation that waits for it.
    #[serde(default)]
    pub gpu: bool,
    /// With `gpu`, the ranks whose host launches its kernels late, and by how much (None: the
    /// middle rank, by the step's compute time).
    #[serde(default)]
    pub late_launch: Option<LateLaunch>,
}

/// Ranks whose host does `ns` more work between the input copy and the kernel's launch, every
/// step: their device idles that much longer, waiting for the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LateLaunch {
    pub ranks: Vec<i32>,
    pub ns: i64,
}

fn one_thread() -> u32 {
    1
}

/// The most OpenMP threads per rank the generator simulates.
pub const MAX_THREADS: u32 = 256;

fn every_step() -> u32 {
    1
}

/// The largest base message size: 1 TiB (the stencil's y halos are twice it).
pub const MAX_BYTES: i64 = 1 << 40;

/// The longest run the generator simulates: 2^62 ns, half of what a time holds, so that every
/// time and every sum of two of them stays within 64 bits.
const MAX_RUN_NS: f64 = 4.6e18;

/// Start of generated traces unless `start=` says otherwise: 2026-03-02T08:00:00Z.
pub const DEFAULT_START_NS: i64 = 1_772_438_400_000_000_000;

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            ranks: 16,
            ranks_per_node: 4,
            pattern: Pattern::Stencil2d,
            iterations: 100,
            seed: 1,
            bytes: 4096,
            compute_ns: 100_000,
            network: Network::default(),
            bad_mapping: false,
            background_traffic: None,
            latency_ramp: None,
            imbalance: None,
            slow_ranks: None,
            clock_skew: false,
            sync_sessions: 0,
            start_wallclock_ns: Some(DEFAULT_START_NS),
            no_enclosing_region: false,
            uninstrumented_compute: false,
            eager_limit: None,
            collective_every: 1,
            threads: 1,
            gpu: false,
            late_launch: None,
        }
    }
}

/// Clock of one rank: local = true + offset + drift_ppm * 1e-6 * true.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockTruth {
    pub rank: i32,
    pub offset_ns: f64,
    pub drift_ppm: f64,
}

/// What was injected, for tests and for users checking an analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    pub config: GeneratorConfig,
    /// Node name of each rank.
    pub nodes: Vec<String>,
    pub clocks: Vec<ClockTruth>,
    pub events: u64,
    pub messages: u64,
    pub inter_node_messages: u64,
    pub collectives_per_rank: u64,
    /// True (uncorrected) end time of the run (ns).
    pub duration_ns: i64,
    /// The matching scheduler log and the neighbours the job reports must find (traces with
    /// an absolute start only).
    #[serde(default)]
    pub jobs: Option<jobs::JobsTruth>,
    /// Each rank's iterations, (start, end) in its local clock: from the end of the collective
    /// before (the barrier after MPI_Init for the first) to the end of the iteration's
    /// MPI_Allreduce; with `collective_every` above 1, whose steps compute first, from the end
    /// of one step's MPI_Waitall to the end of the next (the allreduce every k-th step falls in
    /// the iteration after it; the first iteration begins with its first call).
    /// Not written to ground_truth.json (ranks x iterations pairs).
    #[serde(skip)]
    pub iterations: Vec<Vec<(i64, i64)>>,
    /// What the offloaded steps plant (`gpu` traces only).
    #[serde(default)]
    pub gpu: Option<GpuTruth>,
}

/// What a GPU trace's offloaded steps plant, per rank (true ns; with clock skew the recorded
/// times differ by the clocks' drift): what `offload_waits` and `device_idle` must find.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuTruth {
    /// The ranks that launch late, and by how much more than the others each step.
    pub late_launch: LateLaunch,
    pub kernels: u64,
    pub transfers: u64,
    /// Each rank's early synchronisations (every cuCtxSynchronize): their time, and their
    /// time while the kernel ran.
    pub early_sync_ns: Vec<i64>,
    pub on_kernel_ns: Vec<i64>,
    /// Each rank's late launches (every kernel): the stream's idle time before the launch.
    pub host_late_ns: Vec<i64>,
    /// Each rank's device idle time within its offload interval (from its first copy to the end
    /// of its last), busy with any task.
    pub device_idle_ns: Vec<i64>,
}

impl GroundTruth {
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::in_file(path, e.to_string()))?;
        std::fs::write(path, text).map_err(|e| Error::io(path, e))
    }
}

/// A generated trace and its ground truth.
#[derive(Debug)]
pub struct Generated {
    pub trace: RawTrace,
    pub truth: GroundTruth,
}

impl GeneratorConfig {
    /// The ranks that launch late and the delay, as `late_launch` gives them or by default (the
    /// middle rank, by the step's compute time).
    pub fn late_launch_or_default(&self) -> LateLaunch {
        self.late_launch.clone().unwrap_or(LateLaunch { ranks: vec![self.ranks / 2], ns: self.compute_ns })
    }

    /// Check the configuration, naming the offending option.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::argument(format!("generate: {m}")));
        if self.ranks < 1 || self.ranks > 1 << 20 {
            return bad(format!("ranks must be between 1 and 1048576, got {}", self.ranks));
        }
        if self.ranks_per_node < 1 {
            return bad(format!("ranks-per-node must be at least 1, got {}", self.ranks_per_node));
        }
        if self.bytes < 0 || self.compute_ns < 0 {
            return bad("bytes and compute must not be negative".into());
        }
        if self.bytes > MAX_BYTES {
            return bad(format!("bytes must be at most {MAX_BYTES} (1 TiB), got {}", self.bytes));
        }
        if self.collective_every == 0 {
            return bad("collective-every must be at least 1 (an allreduce every k steps)".into());
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return bad(format!("threads must be between 1 and {MAX_THREADS}, got {}", self.threads));
        }
        if let Some(late) = &self.late_launch {
            if !self.gpu {
                return bad("late-launch applies to GPU traces (gpu), whose host launches kernels".into());
            }
            if let Some(r) = late.ranks.iter().find(|r| **r < 0 || **r >= self.ranks) {
                return bad(format!("late-launch names rank {r}, but ranks are 0..{}", self.ranks - 1));
            }
            if late.ns < 0 {
                return bad(format!("late-launch's delay must not be negative, got {} ns", late.ns));
            }
        }
        if self.gpu && self.threads > 1 {
            return bad(
                "gpu and threads are not generated together: a step is offloaded to the GPU or run by OpenMP threads"
                    .into(),
            );
        }
        if let Some(limit) = self.eager_limit
            && limit < 0
        {
            return bad(format!("eager-limit must not be negative, got {limit}"));
        }
        if self.pattern == Pattern::MasterWorker && (self.eager_limit.is_some() || self.collective_every != 1) {
            return bad(
                "eager-limit and collective-every apply to the exchange patterns (stencil2d, ring, alltoall), not to master-worker, whose blocking sends and receives are served in turn"
                    .into(),
            );
        }
        for (name, window) in [("background-traffic", &self.background_traffic), ("latency-ramp", &self.latency_ramp)] {
            if let Some(b) = window
                && (b.to_ns <= b.from_ns || b.factor.is_nan() || b.factor <= 0.0)
            {
                return bad(format!("{name} needs T0 < T1 and FACTOR > 0, got {}:{}:{}", b.from_ns, b.to_ns, b.factor));
            }
        }
        if let Some(s) = &self.slow_ranks {
            if let Some(r) = s.ranks.iter().find(|r| **r < 0 || **r >= self.ranks) {
                return bad(format!("slow-rank names rank {r}, but ranks are 0..{}", self.ranks - 1));
            }
            if !(0.01..=1000.0).contains(&s.factor) {
                return bad(format!("slow-rank FACTOR must be between 0.01 and 1000, got {}", s.factor));
            }
            if s.from_iteration >= self.iterations {
                return bad(format!(
                    "slow-rank starts at iteration {}, but the run has iterations 0..{}",
                    s.from_iteration,
                    self.iterations.saturating_sub(1)
                ));
            }
        }
        if let Some(im) = &self.imbalance {
            if let Some(r) = im.ranks.iter().find(|r| **r < 0 || **r >= self.ranks) {
                return bad(format!("imbalance names rank {r}, but ranks are 0..{}", self.ranks - 1));
            }
            if !(1.0..=1000.0).contains(&im.factor) {
                return bad(format!("imbalance FACTOR must be between 1 and 1000, got {}", im.factor));
            }
        }
        let longest = self.longest_run_ns();
        if longest > MAX_RUN_NS {
            return bad(format!(
                "the run could last up to {longest:.3e} ns, beyond the {MAX_RUN_NS:.1e} ns (146 years) a trace's times hold: fewer iterations, less compute or smaller messages"
            ));
        }
        Ok(())
    }

    /// An upper bound of the run's simulated length: every iteration's compute at its slowest,
    /// and every message of an iteration sent one after another at its slowest.
    fn longest_run_ns(&self) -> f64 {
        let slowest = |w: &Option<Background>| w.as_ref().map_or(1.0, |b| b.factor.max(1.0));
        let imbalance = self.imbalance.as_ref().map_or(1.0, |im| im.factor);
        let slow = self.slow_ranks.as_ref().map_or(1.0, |s| s.factor.max(1.0));
        let net = &self.network;
        let per_message = (net.inter_latency_ns.max(net.intra_latency_ns)
            + 2.0 * self.bytes as f64 / net.inter_bytes_per_ns.min(net.intra_bytes_per_ns))
            * (1.0 + net.noise)
            * slowest(&self.background_traffic)
            * slowest(&self.latency_ramp)
            * 1.2;
        let messages = topology::edge_count(self.pattern, self.ranks) as f64 * imbalance.round().max(1.0);
        // The threads' critical sections run one after another, each 1/20 of a thread's share.
        let threads = 1.0 + f64::from(self.threads.saturating_sub(1)) * 0.1;
        // An offloaded step adds its copies, launch and synchronisation, and the late launch.
        let offload = if self.gpu {
            self.late_launch.as_ref().map_or(self.compute_ns, |l| l.ns) as f64
                + 5.0 * self.bytes as f64 / 10.0
                + 20_000.0
        } else {
            0.0
        };
        let per_iteration =
            self.compute_ns as f64 * imbalance * slow * 1.3 * threads + messages * (per_message + 1_000.0) + offload;
        f64::from(self.iterations) * per_iteration + 2.0 * clock::SESSION_NS as f64
    }

    /// Parse `key=value,...` as in `generate:ranks=64,pattern=ring,bad-mapping`.
    /// Keys: ranks, ranks-per-node, pattern, iterations, seed, bytes, compute, bad-mapping,
    /// background-traffic=T0:T1:FACTOR, latency-ramp=T0:T1:FACTOR, imbalance=RANKS:FACTOR,
    /// slow-rank=RANKS:FACTOR:ITERATION, eager-limit=BYTES, collective-every=K, threads=N,
    /// gpu, late-launch=RANKS:DURATION, clock-skew, sync-sessions,
    /// `start=YYYY-MM-DDTHH:MM:SS[Z]` or `start=none`.
    pub fn parse_spec(spec: &str) -> Result<Self> {
        let mut cfg = GeneratorConfig::default();
        let mut items: Vec<String> = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let is_flag =
                matches!(part, "bad-mapping" | "clock-skew" | "no-enclosing-region" | "uninstrumented-compute" | "gpu");
            match items.last_mut() {
                Some(last) if !part.contains('=') && !is_flag => {
                    last.push(',');
                    last.push_str(part);
                }
                _ => items.push(part.to_string()),
            }
        }
        for item in items {
            let (key, value) = item.split_once('=').unwrap_or((item.as_str(), ""));
            cfg.set(key.trim(), value.trim())?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Set one option by its command-line name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let num = |v: &str| -> Result<i64> {
            v.parse::<i64>().map_err(|_| Error::argument(format!("generate: {key} expects an integer, got '{v}'")))
        };
        match key {
            "ranks" => {
                self.ranks = i32::try_from(num(value)?).map_err(|_| Error::argument("generate: ranks out of range"))?
            }
            "ranks-per-node" => {
                self.ranks_per_node =
                    i32::try_from(num(value)?).map_err(|_| Error::argument("generate: ranks-per-node out of range"))?;
            }
            "pattern" => self.pattern = value.parse().map_err(|e: String| Error::argument(format!("generate: {e}")))?,
            "iterations" => {
                self.iterations =
                    u32::try_from(num(value)?).map_err(|_| Error::argument("generate: iterations out of range"))?;
            }
            "seed" => self.seed = num(value)? as u64,
            "bytes" => self.bytes = num(value)?,
            "compute" => self.compute_ns = parse_duration(value)?,
            "bad-mapping" => self.bad_mapping = value.is_empty() || value == "true",
            "clock-skew" => self.clock_skew = value.is_empty() || value == "true",
            "no-enclosing-region" => self.no_enclosing_region = value.is_empty() || value == "true",
            "uninstrumented-compute" => self.uninstrumented_compute = value.is_empty() || value == "true",
            "gpu" => self.gpu = value.is_empty() || value == "true",
            "late-launch" => self.late_launch = Some(parse_late_launch(value)?),
            "sync-sessions" => {
                self.sync_sessions =
                    u32::try_from(num(value)?).map_err(|_| Error::argument("generate: sync-sessions out of range"))?;
                self.clock_skew = true;
            }
            "background-traffic" => self.background_traffic = Some(parse_background(value)?),
            "latency-ramp" => self.latency_ramp = Some(parse_background(value)?),
            "imbalance" => self.imbalance = Some(parse_imbalance(value)?),
            "slow-rank" => self.slow_ranks = Some(parse_slow_ranks(value)?),
            "start" => self.start_wallclock_ns = parse_start(value)?,
            "eager-limit" => self.eager_limit = Some(num(value)?),
            "threads" => {
                self.threads =
                    u32::try_from(num(value)?).map_err(|_| Error::argument("generate: threads out of range"))?;
            }
            "collective-every" => {
                self.collective_every = u32::try_from(num(value)?)
                    .map_err(|_| Error::argument("generate: collective-every out of range"))?;
            }
            _ => {
                return Err(Error::argument(format!(
                    "generate: unknown option '{key}'; expected ranks, ranks-per-node, pattern, iterations, seed, bytes, compute, bad-mapping, background-traffic, latency-ramp, imbalance, slow-rank, clock-skew, sync-sessions, start, no-enclosing-region, uninstrumented-compute, eager-limit, collective-every, threads, gpu, late-launch"
                )));
            }
        }
        Ok(())
    }
}

/// A duration: a number with its unit (ns, us, ms, s), as `100us` or `1.5ms`; only 0 may go
/// without one (a bare number is refused rather than read as nanoseconds).
pub fn parse_duration(text: &str) -> Result<i64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" if num.trim().parse::<f64>().is_ok_and(|v| v == 0.0) => 1.0,
        "" => {
            return Err(Error::argument(format!("duration '{t}': give its unit (ns, us, ms or s), e.g. {t}ms")));
        }
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(Error::argument(format!("duration '{t}': unit must be ns, us, ms or s"))),
    };
    let v: f64 = num.trim().parse().map_err(|_| Error::argument(format!("duration '{t}': expected a number")))?;
    let ns = (v * scale).round();
    if !ns.is_finite() || !(0.0..=9.0e18).contains(&ns) {
        return Err(Error::argument(format!("duration '{t}' is out of range")));
    }
    Ok(ns as i64)
}

/// The absolute start of a generated trace: `YYYY-MM-DDTHH:MM:SS` in UTC (a trailing `Z` is
/// allowed), or `none` for a trace without one.
pub fn parse_start(text: &str) -> Result<Option<i64>> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    crate::jobs::time::parse_timestamp(t.strip_suffix('Z').unwrap_or(t))
        .map(Some)
        .ok_or_else(|| Error::argument(format!("generate: start '{t}': expected YYYY-MM-DDTHH:MM:SS (UTC) or none")))
}

/// `T0:T1:FACTOR`, times with optional units.
pub fn parse_background(text: &str) -> Result<Background> {
    let parts: Vec<&str> = text.split(':').collect();
    let [from, to, factor] = parts.as_slice() else {
        return Err(Error::argument(format!("background-traffic '{text}': expected T0:T1:FACTOR, e.g. 20ms:60ms:4")));
    };
    let factor: f64 = factor
        .parse()
        .map_err(|_| Error::argument(format!("background-traffic '{text}': FACTOR '{factor}' is not a number")))?;
    Ok(Background { from_ns: parse_duration(from)?, to_ns: parse_duration(to)?, factor })
}

/// `RANKS:FACTOR` with RANKS like `0-3,7`.
pub fn parse_imbalance(text: &str) -> Result<Imbalance> {
    let (ranks, factor) = text
        .rsplit_once(':')
        .ok_or_else(|| Error::argument(format!("imbalance '{text}': expected RANKS:FACTOR, e.g. 0-3,7:2.5")))?;
    let factor: f64 = factor
        .parse()
        .map_err(|_| Error::argument(format!("imbalance '{text}': FACTOR '{factor}' is not a number")))?;
    Ok(Imbalance { ranks: parse_rank_list(ranks)?, factor })
}

/// `RANKS:FACTOR:ITERATION` with RANKS like `0-3,7`: those ranks compute FACTOR x longer from
/// iteration ITERATION (counted from 0) on.
pub fn parse_slow_ranks(text: &str) -> Result<SlowRanks> {
    let bad = || Error::argument(format!("slow-rank '{text}': expected RANKS:FACTOR:ITERATION, e.g. 5:2:40"));
    let mut parts = text.rsplitn(3, ':');
    let (Some(from), Some(factor), Some(ranks)) = (parts.next(), parts.next(), parts.next()) else { return Err(bad()) };
    let factor: f64 = factor.trim().parse().map_err(|_| bad())?;
    let from_iteration: u32 = from.trim().parse().map_err(|_| bad())?;
    Ok(SlowRanks { ranks: parse_rank_list(ranks)?, factor, from_iteration })
}

/// `RANKS:DURATION` with RANKS like `0-3,7` and DURATION with its unit (`5:200us`): those
/// ranks launch their kernels DURATION later every step.
pub fn parse_late_launch(text: &str) -> Result<LateLaunch> {
    let (ranks, delay) = text
        .rsplit_once(':')
        .ok_or_else(|| Error::argument(format!("late-launch '{text}': expected RANKS:DURATION, e.g. 5:200us")))?;
    Ok(LateLaunch { ranks: parse_rank_list(ranks)?, ns: parse_duration(delay.trim())? })
}

/// `0-3,7` -> [0, 1, 2, 3, 7].
pub fn parse_rank_list(text: &str) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || Error::argument(format!("rank list '{text}': '{part}' is not a rank or a range a-b"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (i32, i32) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                if b < a || b - a > 1 << 20 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err(Error::argument(format!("rank list '{text}' is empty")));
    }
    Ok(out)
}

/// The demo trace (`commdb --demo`, `commdb.demo()` in Python): a 64-rank 2-D stencil, 16 ranks
/// per node, neighbours placed on different nodes, and background traffic making inter-node
/// messages 5x slower between 8 and 14 ms.
pub fn demo_config() -> GeneratorConfig {
    GeneratorConfig {
        ranks: 64,
        ranks_per_node: 16,
        pattern: Pattern::Stencil2d,
        iterations: 200,
        seed: 42,
        bad_mapping: true,
        background_traffic: Some(Background { from_ns: 8_000_000, to_ns: 14_000_000, factor: 5.0 }),
        ..GeneratorConfig::default()
    }
}

/// The demo trace, generated and built with `correction`, named `demo`.
pub fn demo(correction: crate::clock::Correction) -> Result<crate::trace::Trace> {
    let mut raw = generate(&demo_config())?.trace;
    raw.meta.name = "demo".into();
    raw.meta.path = "--demo".into();
    raw.build_with(correction)
}

/// About how many events `cfg` generates (an upper bound: imbalance adds messages).
pub fn estimated_events(cfg: &GeneratorConfig) -> u64 {
    let ranks = u64::from(cfg.ranks.max(1) as u32);
    let edges = topology::edge_count(cfg.pattern, cfg.ranks);
    let factor = cfg.imbalance.as_ref().map_or(1, |im| im.factor.round().max(1.0) as u64);
    // An offloaded step records 10 events on the host and 6 on the stream.
    let offload = if cfg.gpu { 16u64 } else { 0 };
    let per_rank = 12u64.saturating_add(u64::from(cfg.iterations).saturating_mul(
        (14u64 + offload).saturating_add(8u64.saturating_mul(edges.saturating_mul(factor).div_ceil(ranks))),
    ));
    ranks.saturating_mul(per_rank)
}

/// Generate a trace.
pub fn generate(cfg: &GeneratorConfig) -> Result<Generated> {
    generate_with(cfg, None)
}

/// The definitions of the trace `cfg` generates (ranks, locations, regions, communicators),
/// without events, and the earliest time an event of it can have.
pub fn skeleton(cfg: &GeneratorConfig) -> Result<(RawTrace, i64)> {
    cfg.validate()?;
    let node = topology::placement(cfg.pattern, cfg.ranks, cfg.ranks_per_node, cfg.bad_mapping);
    // Every rank's first event is at true time 0: the earliest local time is a clock's at 0.
    let earliest = clock::truths(cfg).iter().map(|c| clock::local(c, 0)).min().unwrap_or(0);
    Ok((simulate::skeleton(cfg, &node), earliest))
}

/// Generate a trace without keeping its events: every `flush_events` events or so (at the end
/// of an iteration) each rank's events since the last time go to `sink`, in rank order. The
/// trace returned has no events.
pub fn generate_streamed(
    cfg: &GeneratorConfig,
    flush_events: usize,
    sink: &mut dyn FnMut(&[crate::events::RawEvents]) -> Result<()>,
) -> Result<Generated> {
    generate_with(cfg, Some(simulate::Flush { events: flush_events.max(1), sink }))
}

fn generate_with(cfg: &GeneratorConfig, flush: Option<simulate::Flush<'_>>) -> Result<Generated> {
    cfg.validate()?;
    let mut generated = simulate::run(cfg, flush)?;
    let run_ns = generated.truth.duration_ns;
    for (name, window) in [("background-traffic", &cfg.background_traffic), ("latency-ramp", &cfg.latency_ramp)] {
        if let Some(w) = window
            && w.from_ns >= run_ns
        {
            return Err(Error::argument(format!(
                "generate: {name} starts at {} ms, but the run lasts {} ms, so no message would be affected; \
                 give T0 and T1 within the run (or more iterations)",
                w.from_ns as f64 / 1e6,
                run_ns as f64 / 1e6
            )));
        }
    }
    generated.truth.jobs = jobs::scheduler_log(&generated.truth);
    Ok(generated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        let c = GeneratorConfig::parse_spec(
            "ranks=8,pattern=ring,bad-mapping,imbalance=0-2,5:2,background-traffic=1ms:2ms:3",
        )
        .unwrap();
        assert_eq!(c.ranks, 8);
        assert_eq!(c.pattern, Pattern::Ring);
        assert!(c.bad_mapping);
        assert_eq!(c.imbalance.unwrap().ranks, vec![0, 1, 2, 5]);
        assert_eq!(c.background_traffic.unwrap().to_ns, 2_000_000);
        assert!(GeneratorConfig::parse_spec("ranks=0").is_err());
        assert!(GeneratorConfig::parse_spec("colour=red").is_err());
        assert!(GeneratorConfig::parse_spec("imbalance=9:2,ranks=4").is_err());
        let slow = GeneratorConfig::parse_spec("ranks=8,slow-rank=1-2,5:2:40").unwrap().slow_ranks.unwrap();
        assert_eq!((slow.ranks, slow.factor, slow.from_iteration), (vec![1, 2, 5], 2.0, 40));
        let late = GeneratorConfig::parse_spec("iterations=10,slow-rank=1:2:10").unwrap_err().to_string();
        assert!(late.contains("slow-rank starts at iteration 10, but the run has iterations 0..9"), "{late}");
        assert!(GeneratorConfig::parse_spec("slow-rank=1:2").is_err());
        assert_eq!(GeneratorConfig::parse_spec("ranks=4").unwrap().start_wallclock_ns, Some(DEFAULT_START_NS));
        let c = GeneratorConfig::parse_spec("start=2026-03-02T08:00:00Z").unwrap();
        assert_eq!(c.start_wallclock_ns, Some(DEFAULT_START_NS));
        assert_eq!(GeneratorConfig::parse_spec("start=none").unwrap().start_wallclock_ns, None);
        assert!(GeneratorConfig::parse_spec("start=yesterday").is_err());
        let late = GeneratorConfig::parse_spec("ranks=4,iterations=2,background-traffic=8s:14s:5").unwrap();
        let e = generate(&late).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("background-traffic starts at 8000 ms, but the run lasts"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration("20ns").unwrap(), 20);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert_eq!(
            parse_duration("20").unwrap_err().to_string(),
            "duration '20': give its unit (ns, us, ms or s), e.g. 20ms"
        );
        assert!(parse_duration("5 parsecs").is_err());
    }
}
