//! Skewed clocks for generated traces and the ping-pong sync samples that let a reader
//! recover them, in the way Intel Trace Collector measures clocks: in a sync session each
//! rank exchanges ping-pongs with the master (rank 0); a sample records the local send time,
//! the master's time stamp and the local receive time. Local time is
//! true + offset + drift_ppm * 1e-6 * true; rank 0 is the master and keeps the true clock.
//! Round trips take 2.0-2.4 us, symmetric on average. In every session exactly a tenth of the
//! samples (2 of 20) are delayed by 5-25 us on the way to the master (a long, asymmetric round
//! trip of at least 7 us): these are the samples a clock model must discard.

use crate::generate::rng::{streams, symmetric, uniform};
use crate::generate::{ClockTruth, GeneratorConfig};
use crate::trace::ClockSample;

/// Samples per rank in one sync session.
pub const SAMPLES_PER_SESSION: i64 = 20;
/// Time between two samples of a session (ns).
pub const SAMPLE_SPACING_NS: i64 = 10_000;
/// How long a session takes (ns).
pub const SESSION_NS: i64 = SAMPLES_PER_SESSION * SAMPLE_SPACING_NS;

/// The clock of every rank: zero skew without `clock_skew`, else offsets within +-50 us and
/// drifts within +-20 ppm (rank 0 exact).
pub fn truths(cfg: &GeneratorConfig) -> Vec<ClockTruth> {
    (0..cfg.ranks)
        .map(|r| {
            let skewed = cfg.clock_skew && r != 0;
            let u = |k: u64| symmetric(cfg.seed, streams::CLOCK, r as u64, k);
            ClockTruth {
                rank: r,
                offset_ns: if skewed { 50_000.0 * u(0) } else { 0.0 },
                drift_ppm: if skewed { 20.0 * u(1) } else { 0.0 },
            }
        })
        .collect()
}

/// Local time of true time `t` on a clock.
#[inline]
pub fn local(c: &ClockTruth, t: i64) -> i64 {
    if c.offset_ns == 0.0 && c.drift_ppm == 0.0 {
        return t;
    }
    t + (c.offset_ns + c.drift_ppm * 1e-6 * t as f64).round() as i64
}

/// Sync samples of all non-master ranks for sessions starting at the given true times.
pub fn samples(cfg: &GeneratorConfig, clocks: &[ClockTruth], session_starts: &[i64]) -> Vec<ClockSample> {
    let mut out = Vec::new();
    for c in clocks.iter().filter(|c| c.rank != 0) {
        for (s, &start) in session_starts.iter().enumerate() {
            let pick =
                |k: u64| uniform(cfg.seed, streams::SYNC, c.rank as u64, ((s as u64) << 32 | 0xffff_ffff) * 4 + k);
            let first = (pick(0) * SAMPLES_PER_SESSION as f64) as i64 % SAMPLES_PER_SESSION;
            let second = (first + 1 + (pick(1) * (SAMPLES_PER_SESSION - 1) as f64) as i64) % SAMPLES_PER_SESSION;
            for j in 0..SAMPLES_PER_SESSION {
                let key = (s as u64) << 32 | j as u64;
                let draw = |k: u64| uniform(cfg.seed, streams::SYNC, c.rank as u64, key * 4 + k);
                let t = start + j * SAMPLE_SPACING_NS + i64::from(c.rank % 64) * 100;
                let mut there = 1_000 + (200.0 * draw(0)) as i64;
                let back = 1_000 + (200.0 * draw(1)) as i64;
                if j == first || j == second {
                    there += 5_000 + (20_000.0 * draw(3)) as i64;
                }
                let local_send = local(c, t);
                let local_recv = local(c, t + there + back);
                out.push(ClockSample {
                    rank: c.rank,
                    session: s as i32,
                    local_ts: local_send + (local_recv - local_send) / 2,
                    master_ts: t + there,
                    round_trip: Some(local_recv - local_send),
                    std_dev_ns: None,
                    exact: None,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_is_exact_and_others_skewed() {
        let cfg = GeneratorConfig { ranks: 4, clock_skew: true, ..GeneratorConfig::default() };
        let c = truths(&cfg);
        assert_eq!(local(&c[0], 1_000_000), 1_000_000);
        assert!(c[1..].iter().all(|x| x.offset_ns.abs() <= 50_000.0 && x.drift_ppm.abs() <= 20.0));
        let s = samples(&cfg, &c, &[0, 1_000_000]);
        assert_eq!(s.len(), 3 * 2 * SAMPLES_PER_SESSION as usize);
        for chunk in s.chunks(SAMPLES_PER_SESSION as usize) {
            assert_eq!(chunk.iter().filter(|x| x.round_trip.unwrap() >= 7_000).count(), 2);
            assert!(chunk.iter().all(|x| x.round_trip.unwrap() >= 7_000 || x.round_trip.unwrap() <= 2_400));
        }
        // An undelayed sample's offset estimate is within the path asymmetry of the truth.
        let good = s.iter().find(|x| x.round_trip.unwrap() < 3_000).unwrap();
        let truth = &c[good.rank as usize];
        let est = (good.master_ts - good.local_ts) as f64;
        let true_offset = -(truth.offset_ns + truth.drift_ppm * 1e-6 * good.master_ts as f64);
        assert!((est - true_offset).abs() < 300.0, "{est} vs {true_offset}");
    }
}
