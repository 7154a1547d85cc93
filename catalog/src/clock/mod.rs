//! Clock correction of per-rank timestamps, applied when a trace is opened. `model` fits one
//! clock model per rank from the `clock_sync` table (Intel Trace Collector's rules: offset,
//! linear regression or a monotone C1 spline by the number of sync sessions); `correct` maps
//! every event and metric time through its rank's model, keeping the raw local time in
//! `events.ts_local`; `clc` optionally goes on to shift receives that still precede their send
//! (a controlled logical clock in the spirit of Scalasca's).
//!
//! One clock is the global one: the master's, the lowest rank without samples (ITC's master
//! answers the others' ping-pongs and has none of its own). When several ranks have no samples
//! the choice is reported in `warnings`, and each of the others is placed by ITC's synced-host
//! case: a rank on a node where another rank has samples shares that node's timer and takes
//! that rank's model; a rank on the master's node keeps its times; a rank with neither is kept
//! as recorded and named in the warning (`clock_unsynced_rank`). Cost: O(events), ranks in
//! parallel.

pub mod clc;
pub mod model;
pub mod spline;

use std::collections::HashMap;
use std::str::FromStr;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::events::{EventParts, RawEvents};
use crate::trace::{ClockSample, RankInfo, RawMetrics, Warnings};
use model::{Fit, RankModel};

/// What correction to apply when a trace is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Correction {
    /// Keep the recorded local times.
    Off,
    /// Map each rank's times through its clock model (the default).
    #[default]
    Model,
    /// The model, then the controlled logical clock so that no message runs backwards.
    Clc,
}

impl Correction {
    pub fn name(self) -> &'static str {
        match self {
            Correction::Off => "off",
            Correction::Model => "model",
            Correction::Clc => "clc",
        }
    }
}

impl FromStr for Correction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "off" | "none" | "false" => Ok(Correction::Off),
            "model" | "on" | "true" => Ok(Correction::Model),
            "clc" => Ok(Correction::Clc),
            _ => Err(Error::argument(format!("unknown clock correction '{s}': expected off, model or clc"))),
        }
    }
}

/// Fit the models of `samples` and map every event and metric time through them. Returns the
/// models (empty when there are no samples or the correction is off).
pub fn correct(
    events: &mut EventParts,
    metrics: &mut RawMetrics,
    samples: &[ClockSample],
    ranks: &[RankInfo],
    correction: Correction,
    warnings: &mut Warnings,
) -> Vec<RankModel> {
    let models = fit(samples, ranks, correction, warnings);
    let fits = Fits::of(&models);
    events.parts.par_iter_mut().for_each(|part| correct_events(part, &fits));
    correct_metrics(metrics, &fits);
    models
}

/// The clock model of every rank, from `samples` (none when there are no samples or the
/// correction is off).
pub fn fit(
    samples: &[ClockSample],
    ranks: &[RankInfo],
    correction: Correction,
    warnings: &mut Warnings,
) -> Vec<RankModel> {
    if correction == Correction::Off || samples.is_empty() {
        return Vec::new();
    }
    let fitted = model::fit_all(samples, warnings);
    place_unsampled(fitted, ranks, warnings)
}

/// Map the times of the events of `part` (whole streams) through their rank's model, keeping
/// the recorded times in `ts_local`; a part whose ranks keep their times is left as it is.
/// Readers that decode in parallel call it as each part is decoded, while its times are in
/// cache and the memory the decoding freed can hold the corrected times.
pub fn correct_events(part: &mut RawEvents, fits: &Fits<'_>) {
    if fits.is_empty() || part.ts_local.is_some() {
        return;
    }
    let fit_of = |rank: i32| fits.of_rank(rank);
    let streams = part.streams();
    if streams.iter().all(|s| fit_of(s.rank).is_none_or(|f| *f == Fit::Identity)) {
        return;
    }
    let local = std::mem::take(&mut part.ts);
    let mut corrected = Vec::with_capacity(local.len());
    for s in streams {
        map_times(fit_of(s.rank).unwrap_or(&Fit::Identity), &local[s.start..s.end], &mut corrected);
    }
    part.ts = corrected;
    part.ts_local = Some(local);
}

/// Map the metric sample times (grouped by rank) through their rank's model.
pub fn correct_metrics(metrics: &mut RawMetrics, fits: &Fits<'_>) {
    if fits.is_empty() {
        return;
    }
    let fit_of = |rank: i32| fits.of_rank(rank);
    let local = std::mem::take(&mut metrics.ts);
    let mut corrected = Vec::with_capacity(local.len());
    let mut start = 0;
    while start < local.len() {
        let rank = metrics.rank[start];
        let end = start + metrics.rank[start..].iter().position(|&r| r != rank).unwrap_or(local.len() - start);
        map_times(fit_of(rank).unwrap_or(&Fit::Identity), &local[start..end], &mut corrected);
        start = end;
    }
    metrics.ts = corrected;
}

/// The models of the ranks without samples: the lowest of them is the master (identity); the
/// others take the model of a sampled rank on their node (synced host), or the identity on
/// the master's node, or else the identity with a warning. Returns every model, by rank.
pub fn place_unsampled(fitted: Vec<RankModel>, ranks: &[RankInfo], warnings: &mut Warnings) -> Vec<RankModel> {
    let sampled: HashMap<i32, &RankModel> =
        fitted.iter().filter(|m| m.fit != Fit::Identity).map(|m| (m.rank, m)).collect();
    let mut unsampled: Vec<&RankInfo> = ranks.iter().filter(|r| !sampled.contains_key(&r.rank)).collect();
    unsampled.sort_by_key(|r| r.rank);
    let Some(master) = unsampled.first().copied() else { return fitted };
    // The model of each node: that of its lowest sampled rank.
    let mut by_node: HashMap<&str, &RankModel> = HashMap::new();
    for r in ranks {
        if let (Some(node), Some(m)) = (r.node.as_deref(), sampled.get(&r.rank)) {
            let e = by_node.entry(node).or_insert(m);
            if m.rank < e.rank {
                *e = m;
            }
        }
    }
    let mut out: Vec<RankModel> = sampled.values().map(|m| (*m).clone()).collect();
    let mut unsynced = Vec::new();
    let mut synced_host = 0usize;
    for r in &unsampled {
        let fit = if r.rank == master.rank {
            Fit::Identity
        } else if let Some(m) = r.node.as_deref().and_then(|n| by_node.get(n)) {
            synced_host += 1;
            m.fit.clone()
        } else if r.node.is_some() && r.node == master.node {
            Fit::Identity
        } else {
            unsynced.push(r.rank);
            Fit::Identity
        };
        out.push(RankModel { rank: r.rank, fit, samples_used: 0, samples_dropped: 0, rms_residual_ns: 0.0 });
    }
    out.sort_by_key(|m| m.rank);
    if unsampled.len() > 1 {
        let n = unsampled.len();
        warnings.add("clock_reference", || {
            format!(
                "{n} ranks have no clock sync samples; rank {} (the lowest) is taken as the master clock, {synced_host} take the model of a sampled rank on their node",
                master.rank
            )
        });
    }
    if !unsynced.is_empty() {
        let shown: Vec<String> = unsynced.iter().take(10).map(i32::to_string).collect();
        let more = if unsynced.len() > 10 { format!(" and {} more", unsynced.len() - 10) } else { String::new() };
        warnings.add_many("clock_unsynced_rank", unsynced.len() as i64, || {
            format!(
                "ranks {}{more} have no sync samples, share no node with a sampled rank or the master, and keep their recorded times",
                shown.join(", ")
            )
        });
    }
    out
}

/// Each rank's fit, indexed by rank once for all the parts and metrics it maps.
#[derive(Debug)]
pub struct Fits<'a>(Vec<Option<&'a Fit>>);

impl<'a> Fits<'a> {
    pub fn of(models: &'a [RankModel]) -> Self {
        let n = models.iter().map(|m| m.rank.max(-1) + 1).max().unwrap_or(0) as usize;
        let mut out = vec![None; n];
        for m in models {
            if let Ok(r) = usize::try_from(m.rank) {
                out[r] = Some(&m.fit);
            }
        }
        Fits(out)
    }

    /// No rank has a model: nothing to map.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn of_rank(&self, rank: i32) -> Option<&'a Fit> {
        usize::try_from(rank).ok().and_then(|r| self.0.get(r).copied().flatten())
    }
}

/// Append the master times of `local` to `out`, rounded to the nanosecond.
fn map_times(fit: &Fit, local: &[i64], out: &mut Vec<i64>) {
    match fit {
        Fit::Identity => out.extend_from_slice(local),
        Fit::Offset(c) => {
            let c = c.round() as i64;
            out.extend(local.iter().map(|t| t + c));
        }
        Fit::Linear { slope, offset } => {
            let d = slope - 1.0;
            out.extend(local.iter().map(|&t| t + (d * t as f64 + offset).round() as i64));
        }
        Fit::Spline(s) => {
            // Times of a stream mostly increase: walk the segment index along with them.
            let mut seg = 0;
            out.extend(local.iter().map(|&t| {
                let x = t as f64;
                while seg < s.len() && s.segment_end(seg).is_some_and(|e| x >= e) {
                    seg += 1;
                }
                while seg > 0 && s.segment_start(seg).is_some_and(|b| x < b) {
                    seg -= 1;
                }
                s.eval_in(seg, x).round() as i64
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::spline::MonotoneSpline;
    use crate::trace::RankInfo;

    #[test]
    fn spline_walk_matches_lookup() {
        let s = MonotoneSpline::new(&[(0.0, 10.0), (1e6, 1e6 + 30.0), (2e6, 2e6 + 20.0), (4e6, 4e6 + 90.0)]).unwrap();
        let times: Vec<i64> = vec![-5_000, 0, 10, 999_999, 1_000_000, 500, 3_000_000, 1_500_000, 9_000_000];
        let mut walked = Vec::new();
        map_times(&Fit::Spline(s.clone()), &times, &mut walked);
        let looked: Vec<i64> = times.iter().map(|&t| s.eval(t as f64).round() as i64).collect();
        assert_eq!(walked, looked);
    }

    fn rank(rank: i32, node: &str) -> RankInfo {
        RankInfo { rank, node: Some(node.to_string()), name: format!("rank {rank}"), application: None }
    }

    #[test]
    fn the_lowest_unsampled_rank_is_the_master_and_synced_hosts_share_a_model() {
        // Nodes a: 0, 1; b: 2, 3; c: 4. Only rank 2 has samples.
        let ranks = [rank(0, "a"), rank(1, "a"), rank(2, "b"), rank(3, "b"), rank(4, "c")];
        let fitted = vec![RankModel {
            rank: 2,
            fit: Fit::Offset(500.0),
            samples_used: 9,
            samples_dropped: 1,
            rms_residual_ns: 3.0,
        }];
        let mut w = Warnings::default();
        let models = place_unsampled(fitted, &ranks, &mut w);
        let fit = |r: i32| models.iter().find(|m| m.rank == r).map(|m| m.fit.clone());
        assert_eq!(fit(0), Some(Fit::Identity), "the master");
        assert_eq!(fit(1), Some(Fit::Identity), "on the master's node");
        assert_eq!(fit(2), Some(Fit::Offset(500.0)));
        assert_eq!(fit(3), Some(Fit::Offset(500.0)), "synced host: rank 2's node");
        assert_eq!(fit(4), Some(Fit::Identity), "nothing to go by");
        assert_eq!(w.count("clock_reference"), 1);
        assert_eq!(w.count("clock_unsynced_rank"), 1);
        // Every rank sampled but one: that one is the master, silently.
        let all = (1..5).map(|r| RankModel { rank: r, ..models[2].clone() }).collect();
        let mut quiet = Warnings::default();
        let models = place_unsampled(all, &ranks, &mut quiet);
        assert_eq!(models.iter().find(|m| m.rank == 0).map(|m| m.fit.clone()), Some(Fit::Identity));
        assert!(quiet.is_empty(), "{quiet:?}");
    }

    #[test]
    fn synced_hosts_at_sixteen_thousand_ranks() {
        // 16,384 ranks on 512 nodes of 32; only each node's first rank has samples (an offset
        // equal to its node number). Every other rank takes its node's model; rank 0 samples
        // too, so the master is rank 1, on node 0, and the rest of node 0 keeps node 0's model.
        let ranks: Vec<RankInfo> = (0..16_384).map(|r| rank(r, &format!("n{}", r / 32))).collect();
        let fitted: Vec<RankModel> = (0..512)
            .map(|n| RankModel {
                rank: n * 32,
                fit: Fit::Offset(f64::from(n)),
                samples_used: 1,
                samples_dropped: 0,
                rms_residual_ns: 0.0,
            })
            .collect();
        let mut w = Warnings::default();
        let models = place_unsampled(fitted, &ranks, &mut w);
        assert_eq!(models.len(), 16_384);
        for m in &models {
            let want = if m.rank == 1 { Fit::Identity } else { Fit::Offset(f64::from(m.rank / 32)) };
            assert_eq!(m.fit, want, "rank {}", m.rank);
        }
        assert_eq!(w.count("clock_unsynced_rank"), 0);
    }

    #[test]
    fn parses_names() {
        assert_eq!("CLC".parse::<Correction>().unwrap(), Correction::Clc);
        assert_eq!("off".parse::<Correction>().unwrap(), Correction::Off);
        assert!("maybe".parse::<Correction>().unwrap_err().to_string().contains("expected off, model or clc"));
    }
}
