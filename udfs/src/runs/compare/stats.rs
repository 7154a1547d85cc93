//! Whether a difference between two runs exceeds run-to-run noise. Each compared quantity
//! comes with its samples in both runs, one per iteration, and the noise of one sample is
//! measured from the successive differences of the series: the root of their mean square over
//! 2 (von Neumann's mean square successive difference), the largest of them left out, so that a
//! change from one iteration on (one jump) does not count as noise, while noise that comes only
//! every few iterations (waits at a collective every 10th step) does. A median of the
//! differences instead (the median absolute deviation) is 0 for such a series, and then every
//! difference looked significant.
//!
//! - `IterationTotals` (a region's time over the ranks, per iteration: `iteration_regions`,
//!   and what lies outside the iterations as one more sample): the per-iteration differences
//!   b - a are paired by iteration (0 where a run has none of the region); their noise is
//!   that of their successive differences, and their sum is
//!   compared with it times the square root of the iterations. Ranks are no independent samples
//!   of a region's time: another seed or another day moves every rank's waiting in a collective
//!   together (each waits for the same last rank), so noise is measured over iterations, where
//!   it is independent, not over ranks; and over iterations rather than equal spans of time,
//!   whose edges cut through the phases every rank runs in step.
//! - `SeriesSamples` (a rank's time per iteration): the per-iteration differences are paired by
//!   iteration, and their noise is that of their successive differences.
//! - `Series` (one value per key, the keys being iterations): the noise of each run is that of
//!   the successive differences of its values over the keys; a key's difference is compared
//!   with the two runs' noise combined.
//! - `Mean` (a mean over messages, given with its count and standard deviation): Welch's
//!   statistic.
//! - `Exact` (counts of messages and bytes): no noise; any difference is one.
//!
//! The noise of a time is at least the timestamps' resolution, 1 ns per sample. The statistic z
//! is the difference over its noise. A difference is significant when |z|
//! exceeds the normal quantile that keeps the chance of naming any difference in two runs
//! that differ by noise alone at 1 % over the whole comparison (Bonferroni over the tested
//! quantities), and at least 3 samples stand on each side.

/// How a quantity's noise is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    IterationTotals,
    SeriesSamples,
    Series,
    Mean,
    Exact,
}

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "iteration_totals" => Kind::IterationTotals,
            "series_samples" => Kind::SeriesSamples,
            "series" => Kind::Series,
            "mean" => Kind::Mean,
            "exact" => Kind::Exact,
            _ => return None,
        })
    }
}

/// The family-wise chance of naming a difference that is noise.
pub const FAMILY_ALPHA: f64 = 0.01;

/// The fewest samples on each side for a statistical test.
pub const MIN_SAMPLES: usize = 3;

/// The resolution of the timestamps, 1 ns: the noise of a time is never taken to be less.
/// Without it, a run whose ranks mostly repeat the other's times exactly (the same input, the
/// same seed) would make a difference of a few nanoseconds of rounding infinitely significant.
pub const RESOLUTION_NS: f64 = 1.0;

/// The noise of one value of a series: the root of the mean square of its successive
/// differences over 2, the largest difference left out (a level shift from one value on).
pub fn series_sd(values: &[f64]) -> f64 {
    let mut squares: Vec<f64> = values.windows(2).map(|w| (w[1] - w[0]) * (w[1] - w[0])).collect();
    if squares.len() >= 2
        && let Some(largest) = squares.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i)
    {
        squares.swap_remove(largest);
    }
    if squares.is_empty() {
        return 0.0;
    }
    (squares.iter().sum::<f64>() / squares.len() as f64 / 2.0).sqrt()
}

/// `difference` over `noise`: infinite for a difference without noise, 0 for none.
pub fn z(difference: f64, noise: f64) -> f64 {
    if noise > 0.0 {
        difference / noise
    } else if difference == 0.0 {
        0.0
    } else {
        difference.signum() * f64::INFINITY
    }
}

/// Paired per-iteration differences (of times), in iteration order: their sum over its noise.
pub fn z_paired_series(differences: &[f64]) -> f64 {
    let n = differences.len() as f64;
    z(differences.iter().sum(), series_sd(differences).max(RESOLUTION_NS) * n.sqrt())
}

/// Welch's statistic of two means with their standard deviations and counts.
pub fn z_means(a: (f64, f64, f64), b: (f64, f64, f64)) -> f64 {
    let ((ma, sa, na), (mb, sb, nb)) = (a, b);
    z(mb - ma, (sa * sa / na + sb * sb / nb).sqrt())
}

/// The complementary error function, erfc(x), to about 1e-7 (the Chebyshev fit of Numerical
/// Recipes' erfcc).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The |z| above which a difference is significant when `tests` quantities are tested: the
/// two-sided normal quantile of FAMILY_ALPHA / tests.
pub fn critical_z(tests: usize) -> f64 {
    let p = FAMILY_ALPHA / tests.max(1) as f64;
    // Two-sided tail erfc(z / sqrt 2) = p, by bisection (the tail falls as z grows).
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if erfc(mid / std::f64::consts::SQRT_2) > p { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_critical_values_are_the_normal_quantiles() {
        // One test at 1 %: 2.5758; 100 tests: the quantile of 1e-4, 3.8906.
        assert!((critical_z(1) - 2.5758).abs() < 1e-3, "{}", critical_z(1));
        assert!((critical_z(100) - 3.8906).abs() < 1e-3, "{}", critical_z(100));
        assert!((erfc(0.0) - 1.0).abs() < 1e-6 && (erfc(-1.0) - 1.842_700_79).abs() < 1e-6);
    }

    #[test]
    fn a_shift_from_one_iteration_on_is_no_noise() {
        let noise = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0, -0.1, 0.3, -0.3, 0.1];
        let shifted: Vec<f64> = (0..40).map(|i| noise[i % 10] + if i >= 20 { 10.0 } else { 0.0 }).collect();
        assert!(series_sd(&shifted) < 1.0, "{}", series_sd(&shifted));
        assert!(z_paired_series(&shifted) > critical_z(100));
        let pure: Vec<f64> = (0..40).map(|i| noise[i % 10]).collect();
        assert!(z_paired_series(&pure).abs() < critical_z(1));
    }

    #[test]
    fn noise_every_tenth_iteration_is_noise() {
        // Waits at a collective every 10th step: the differences are 0 but every 10th, where
        // they are large and of either sign. Their median spread is 0; their noise is not.
        let spikes = [40.0, -35.0, 20.0, -50.0, 30.0, -10.0];
        let d: Vec<f64> = (0..60).map(|i| if i % 10 == 9 { spikes[i / 10] } else { 0.0 }).collect();
        assert!(series_sd(&d) > 5.0, "{}", series_sd(&d));
        assert!(z_paired_series(&d).abs() < critical_z(1), "{}", z_paired_series(&d));
    }

    #[test]
    fn a_shift_common_to_every_bin_is_a_difference_a_wobble_is_not() {
        let wobble = [0.1, -0.2, 0.15, -0.05, 0.0, 0.2, -0.1, 0.05];
        let d: Vec<f64> = (0..64).map(|i| wobble[i % 8]).collect();
        assert!(z_paired_series(&d).abs() < critical_z(1));
        let shifted: Vec<f64> = d.iter().map(|x| x + 5.0).collect();
        assert!(z_paired_series(&shifted) > critical_z(100));
        // Identical values but for a rounding: no difference to name.
        let mut rounding = vec![0.0; 64];
        rounding[3] = 2.0;
        assert!(z_paired_series(&rounding).abs() < critical_z(1), "{}", z_paired_series(&rounding));
        assert_eq!(z(0.0, 0.0), 0.0);
        assert!(z(1.0, 0.0).is_infinite());
    }
}
