//! Whether a difference between two runs exceeds run-to-run noise. Each compared quantity
//! comes with its samples in both runs, and the noise is measured from them robustly (the
//! median absolute deviation, scaled by 1.4826 to estimate a normal standard deviation), so
//! that one changed rank or a change from one iteration on does not count as noise:
//!
//! - `Units` (a region's time per rank): the per-unit differences b - a are paired by unit;
//!   their spread around their median is the noise of one unit, and the sum of the differences
//!   is compared with it times the square root of the units. Runs of different units (rank
//!   counts) compare the means per unit with Welch's statistic instead.
//! - `SeriesSamples` (a rank's time per iteration): the per-iteration differences are paired by
//!   iteration, and their noise is the spread of their successive differences divided by the
//!   square root of 2, which a level shift from one iteration on does not inflate.
//! - `Series` (one value per key, the keys being iterations): the noise of each run is the
//!   spread of the successive differences of its values over the keys (divided by the square
//!   root of 2); a key's difference is compared with the two runs' noise combined.
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
    Units,
    SeriesSamples,
    Series,
    Mean,
    Exact,
}

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "units" => Kind::Units,
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

/// 1.4826 x the median absolute deviation from the median: a normal standard deviation.
pub fn robust_sd(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let m = median(values.to_vec());
    1.4826 * median(values.iter().map(|v| (v - m).abs()).collect())
}

/// The noise of one value of a series: the robust spread of its successive differences over
/// the square root of 2.
pub fn series_sd(values: &[f64]) -> f64 {
    let steps: Vec<f64> = values.windows(2).map(|w| w[1] - w[0]).collect();
    robust_sd(&steps) / std::f64::consts::SQRT_2
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
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

/// Paired per-unit differences (of times): their sum over its noise.
pub fn z_paired_units(differences: &[f64]) -> f64 {
    let n = differences.len() as f64;
    z(differences.iter().sum(), robust_sd(differences).max(RESOLUTION_NS) * n.sqrt())
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
    fn one_changed_unit_stands_out_of_the_others() {
        let mut d = vec![0.1, -0.2, 0.15, -0.05, 0.0, 0.2, -0.1, 0.05];
        assert!(z_paired_units(&d).abs() < critical_z(1));
        d.push(50.0);
        assert!(z_paired_units(&d) > critical_z(100));
        // Identical values but for a rounding: no difference to name.
        let mut rounding = vec![0.0; 16];
        rounding[3] = 2.0;
        assert!(z_paired_units(&rounding).abs() < critical_z(1), "{}", z_paired_units(&rounding));
        assert_eq!(z(0.0, 0.0), 0.0);
        assert!(z(1.0, 0.0).is_infinite());
        // One changed unit among units that repeat the other run exactly.
        let mut same = vec![0.0; 16];
        same[5] = 1e6;
        assert!(z_paired_units(&same) > critical_z(100));
    }
}
