//! Clock models fitted per rank from the `clock_sync` table, as Intel Trace Collector describes
//! its clock synchronisation (ITC reference guide, "Clock Synchronization"):
//!
//! - A raw ping-pong sample says master_time = (local_send + local_receive) / 2 + offset; in
//!   `clock_sync` it is stored as its midpoint `local_ts`, the master's `master_ts` and the
//!   `round_trip`. Within each sync session the 10% of samples with the longest round trip
//!   (floor of a tenth of the session's samples, ties broken by position) are dropped: a long
//!   round trip means an asymmetric, delayed path.
//! - One session: a constant offset (mean of master - local over the kept samples).
//! - Two sessions: a linear map master = slope * local + offset, fitted by least squares over
//!   every kept sample.
//! - Three or more sessions: each session condensed to one (mean local, mean master) point and
//!   joined by a monotone C1 cubic (`spline`), extended linearly outside the first and last
//!   point.
//! - OTF2 ClockOffset records are points already condensed (one per session); the same rules
//!   apply by their count. A rank without samples (the master, whose clock is the global one)
//!   keeps its times ('none').
//!
//! Documented fallbacks, each counted in the `warnings` table: a sample with a negative round
//! trip is ignored (`clock_invalid_sample`); a linear fit whose samples share one local time or
//! give a non-positive slope falls back to the offset model (`clock_degenerate_fit`); condensed
//! points whose master time does not increase with local time fall back to the linear fit
//! (`clock_non_monotone`). Fitting is O(n log n) in the samples of a rank.

use std::collections::BTreeMap;

use crate::clock::spline::MonotoneSpline;
use crate::trace::{ClockSample, Warnings};

/// How a rank's local time maps to the master's.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The rank's times are kept (no samples, or the master itself).
    Identity,
    /// master = local + offset.
    Offset(f64),
    /// master = slope * local + offset.
    Linear { slope: f64, offset: f64 },
    /// master = spline(local).
    Spline(MonotoneSpline),
}

impl Fit {
    /// The method's name as `clock_model()` shows it.
    pub fn method(&self) -> &'static str {
        match self {
            Fit::Identity => "none",
            Fit::Offset(_) => "offset",
            Fit::Linear { .. } => "linear",
            Fit::Spline(_) => "spline",
        }
    }

    /// Master time of a local time.
    pub fn master(&self, local: f64) -> f64 {
        match self {
            Fit::Identity => local,
            Fit::Offset(c) => local + c,
            Fit::Linear { slope, offset } => slope * local + offset,
            Fit::Spline(s) => s.eval(local),
        }
    }
}

/// One piece of a model over a range of local time: master ~ slope * local + offset (exact for
/// every method but the interior pieces of a spline, where it is the chord between the ends).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub local_from: Option<f64>,
    pub local_to: Option<f64>,
    pub slope: f64,
    pub offset: f64,
}

/// The clock model of one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct RankModel {
    pub rank: i32,
    pub fit: Fit,
    pub samples_used: i64,
    pub samples_dropped: i64,
    /// Root mean square of master - model(local) over the kept samples (0 without samples).
    pub rms_residual_ns: f64,
}

impl RankModel {
    /// The model's pieces in local-time order.
    pub fn segments(&self) -> Vec<Segment> {
        let whole = |slope: f64, offset: f64| vec![Segment { local_from: None, local_to: None, slope, offset }];
        match &self.fit {
            Fit::Identity => whole(1.0, 0.0),
            Fit::Offset(c) => whole(1.0, *c),
            Fit::Linear { slope, offset } => whole(*slope, *offset),
            Fit::Spline(s) => (0..=s.len())
                .map(|seg| {
                    let (from, to) = (s.segment_start(seg), s.segment_end(seg));
                    let slope = match (from, to) {
                        (Some(a), Some(b)) => (s.eval(b) - s.eval(a)) / (b - a),
                        (None, _) => s.tangent(0),
                        (_, None) => s.tangent(s.len() - 1),
                    };
                    let anchor = from.or(to).unwrap_or(0.0);
                    Segment { local_from: from, local_to: to, slope, offset: s.eval(anchor) - slope * anchor }
                })
                .collect(),
        }
    }
}

/// The samples of one session after dropping the longest round trips.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub session: i32,
    /// (local, master) of the kept samples.
    pub kept: Vec<(f64, f64)>,
    /// Indices (into the slice given to `condense`) of the dropped samples.
    pub dropped: Vec<usize>,
}

impl Session {
    /// The condensed point: mean local and mean master time of the kept samples.
    pub fn point(&self) -> (f64, f64) {
        let n = self.kept.len() as f64;
        let (sl, sm) = self.kept.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
        (sl / n, sm / n)
    }

    /// Standard deviation of master - local over the kept samples.
    pub fn offset_std_dev(&self) -> f64 {
        let n = self.kept.len() as f64;
        let mean = self.kept.iter().map(|p| p.1 - p.0).sum::<f64>() / n;
        (self.kept.iter().map(|p| (p.1 - p.0 - mean).powi(2)).sum::<f64>() / n).sqrt()
    }
}

/// Apply the 10% rule to the samples of one session (all of one rank and session). Samples
/// with a negative round trip are ignored and counted in `warnings`. None when nothing is left.
pub fn condense(session: i32, samples: &[ClockSample], warnings: &mut Warnings) -> Option<Session> {
    let mut valid: Vec<usize> = Vec::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        match s.round_trip {
            Some(rt) if rt < 0 => warnings.add("clock_invalid_sample", || {
                format!(
                    "rank {} session {session}: sync sample at local {} has a negative round trip ({rt} ns) and is ignored",
                    s.rank, s.local_ts
                )
            }),
            _ => valid.push(i),
        }
    }
    if valid.is_empty() {
        return None;
    }
    let raw: Vec<usize> = valid.iter().copied().filter(|&i| samples[i].round_trip.is_some()).collect();
    let mut longest = raw.clone();
    longest.sort_by_key(|&i| (std::cmp::Reverse(samples[i].round_trip), i));
    let mut dropped: Vec<usize> = longest.into_iter().take(raw.len() / 10).collect();
    dropped.sort_unstable();
    let kept = valid.iter().filter(|i| dropped.binary_search(i).is_err()).map(|&i| samples[i].point()).collect();
    Some(Session { session, kept, dropped })
}

/// Least-squares line through points: (slope, offset), None when all x are equal.
fn regression(points: impl Iterator<Item = (f64, f64)> + Clone) -> Option<(f64, f64)> {
    let (n, sx, sy) = points.clone().fold((0.0, 0.0, 0.0), |(n, sx, sy), p| (n + 1.0, sx + p.0, sy + p.1));
    let (mx, my) = (sx / n, sy / n);
    let (sxx, sxy) =
        points.fold((0.0, 0.0), |(sxx, sxy), p| (sxx + (p.0 - mx) * (p.0 - mx), sxy + (p.0 - mx) * (p.1 - my)));
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

/// Fit the model of one rank from its samples (any order).
pub fn fit_rank(rank: i32, samples: &[ClockSample], warnings: &mut Warnings) -> RankModel {
    let mut by_session: BTreeMap<i32, Vec<ClockSample>> = BTreeMap::new();
    for s in samples {
        by_session.entry(s.session).or_default().push(*s);
    }
    let sessions: Vec<Session> = by_session.iter().filter_map(|(&k, v)| condense(k, v, warnings)).collect();
    let used: i64 = sessions.iter().map(|s| s.kept.len() as i64).sum();
    let dropped: i64 = sessions.iter().map(|s| s.dropped.len() as i64).sum();
    let all = || sessions.iter().flat_map(|s| s.kept.iter().copied());
    let mean_offset = || {
        let n = used.max(1) as f64;
        all().map(|p| p.1 - p.0).sum::<f64>() / n
    };
    let linear = |warnings: &mut Warnings| match regression(all()) {
        Some((slope, offset)) if slope > 0.0 => Fit::Linear { slope, offset },
        other => {
            warnings.add("clock_degenerate_fit", || match other {
                Some((slope, _)) => format!("rank {rank}: linear clock fit has slope {slope}; using a constant offset"),
                None => format!("rank {rank}: sync samples share one local time; using a constant offset"),
            });
            Fit::Offset(mean_offset())
        }
    };
    let fit = match sessions.len() {
        0 => Fit::Identity,
        1 => Fit::Offset(mean_offset()),
        2 => linear(warnings),
        _ => {
            let mut points: Vec<(f64, f64)> = sessions.iter().map(Session::point).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            match MonotoneSpline::new(&points) {
                Some(s) => Fit::Spline(s),
                None => {
                    warnings.add("clock_non_monotone", || {
                        format!(
                            "rank {rank}: condensed sync points do not increase in both local and master time; using a linear fit"
                        )
                    });
                    linear(warnings)
                }
            }
        }
    };
    let rms = if used == 0 {
        0.0
    } else {
        (all().map(|(l, m)| (m - fit.master(l)).powi(2)).sum::<f64>() / used as f64).sqrt()
    };
    RankModel { rank, fit, samples_used: used, samples_dropped: dropped, rms_residual_ns: rms }
}

/// Fit every rank that has samples, in rank order.
pub fn fit_all(samples: &[ClockSample], warnings: &mut Warnings) -> Vec<RankModel> {
    let mut by_rank: BTreeMap<i32, Vec<ClockSample>> = BTreeMap::new();
    for s in samples {
        by_rank.entry(s.rank).or_default().push(*s);
    }
    by_rank.iter().map(|(&rank, v)| fit_rank(rank, v, warnings)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rank: i32, session: i32, local: i64, master: i64, rt: Option<i64>) -> ClockSample {
        ClockSample { rank, session, local_ts: local, master_ts: master, round_trip: rt, std_dev_ns: None, exact: None }
    }

    #[test]
    fn drops_the_longest_tenth_of_each_session() {
        let mut s: Vec<ClockSample> = (0..20).map(|i| sample(1, 0, i * 10, i * 10 + 100, Some(1000 + i))).collect();
        s[3].round_trip = Some(9000);
        s[3].master_ts += 5000;
        s[11].round_trip = Some(8000);
        let mut w = Warnings::default();
        let c = condense(0, &s, &mut w).unwrap();
        assert_eq!(c.dropped, vec![3, 11]);
        assert_eq!(c.kept.len(), 18);
        let m = fit_rank(1, &s, &mut w);
        assert_eq!(m.fit, Fit::Offset(100.0));
        assert_eq!((m.samples_used, m.samples_dropped), (18, 2));
        assert!(w.is_empty());
    }

    #[test]
    fn two_sessions_give_a_line_and_more_give_a_spline() {
        let mut w = Warnings::default();
        let line: Vec<ClockSample> = [(0, 1000), (0, 1010), (1, 1_000_000), (1, 1_000_020)]
            .iter()
            .map(|&(k, l)| sample(2, k, l, l * 2 + 7, Some(10)))
            .collect();
        match fit_rank(2, &line, &mut w).fit {
            Fit::Linear { slope, offset } => assert!((slope - 2.0).abs() < 1e-12 && (offset - 7.0).abs() < 1e-6),
            other => panic!("{other:?}"),
        }
        let pts: Vec<ClockSample> = (0..4)
            .map(|k| sample(2, k, i64::from(k) * 1_000_000, i64::from(k) * 1_000_000 + i64::from(k * k), None))
            .collect();
        let m = fit_rank(2, &pts, &mut w);
        assert_eq!(m.fit.method(), "spline");
        assert!(m.rms_residual_ns < 1e-6);
        assert_eq!(m.segments().len(), 5);
        assert!(w.is_empty());
    }

    #[test]
    fn fractional_offsets_are_fitted_before_rounding() {
        // Two OTF2-style points 1.19 s apart whose offsets differ by 20.6 ns: the slope is
        // 1 + 20.6 / 1.19e9. Rounding each offset first (0.4 ns and 21.0 ns) bends it by 2%.
        let exact = |session: i32, local: f64, offset: f64| ClockSample {
            exact: Some((local, local + offset)),
            ..sample(1, session, local as i64, (local + offset).round() as i64, None)
        };
        let points = [exact(0, 1_000.0, 0.4), exact(1, 1_190_001_000.0, 21.0 - 0.0)];
        let mut w = Warnings::default();
        let Fit::Linear { slope, .. } = fit_rank(1, &points, &mut w).fit else { panic!() };
        assert!(((slope - 1.0) - 20.6 / 1.19e9).abs() < 1e-15, "{}", slope - 1.0);
        let rounded: Vec<ClockSample> = points.iter().map(|p| ClockSample { exact: None, ..*p }).collect();
        let Fit::Linear { slope: bent, .. } = fit_rank(1, &rounded, &mut w).fit else { panic!() };
        assert!(((bent - 1.0) / (slope - 1.0) - 1.0).abs() > 0.01, "rounding first bends the slope");
    }

    #[test]
    fn bad_input_falls_back_with_a_warning() {
        let mut w = Warnings::default();
        let same_local = [sample(1, 0, 500, 600, None), sample(1, 1, 500, 610, None)];
        assert_eq!(fit_rank(1, &same_local, &mut w).fit, Fit::Offset(105.0));
        assert_eq!(w.count("clock_degenerate_fit"), 1);
        let backwards = [sample(1, 0, 0, 100, None), sample(1, 1, 1_000, 1_100, None), sample(1, 2, 2_000, 900, None)];
        assert_eq!(fit_rank(1, &backwards, &mut w).fit.method(), "linear");
        assert_eq!(w.count("clock_non_monotone"), 1);
        let invalid = [sample(1, 0, 0, 100, Some(-5))];
        assert_eq!(fit_rank(1, &invalid, &mut w).fit, Fit::Identity);
        assert_eq!(w.count("clock_invalid_sample"), 1);
    }
}
