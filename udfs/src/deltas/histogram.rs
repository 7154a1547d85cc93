//! ScalaTrace's dynamically balanced histogram of delta times: a fixed number of contiguous
//! bins that follow the values as they arrive, so repeated calls are described without storing
//! every time stamp. The rules are the source's (section 4.2, Algorithms 1 and 2):
//!
//! - The first value v creates `bins` equal bins over [0, 2v] (over [2v, 0] for a negative v,
//!   [0, 1] for 0). A value outside the range stretches the first or last bin to it.
//! - Every value updates its bin's count, mean and variance incrementally.
//! - When the bin a value was added to reaches a multiple of `SMOOTH_INTERVAL` values, the
//!   histogram rebalances: B is the fullest bin; b1, b2 are adjacent bins (neither of them B)
//!   whose counts differ by less than m1 = `SMOOTH_INTERVAL` and whose counts together are at
//!   most k x B's count (k the number of bins); b1 and b2 merge into one bin over both ranges,
//!   and B splits at its mean into [min, mean] and [mean, max], with the new means sigma/2 on
//!   either side of the old one, the new sigma half the old one and half the values each.
//!
//! `Scheme::Balanced` is commdb's refinement, an option named as such: rebalance every
//! `SMOOTH_INTERVAL` additions; merge the adjacent pair with the fewest values and split the
//! fullest bin only when it holds more than that pair together (so two well-filled bins are
//! never blurred into one); split with the halves' counts, means and variances from the
//! uniform support the bin's mean and variance imply (mean +- sqrt(3) sd). On an imbalanced
//! run (one rank computing 3x longer) the source's rules blend the slow rank's values with
//! fast ones in a wide last bin whose mean hides them, while the refinement's last bin stands
//! out at over twice the first bin's mean (the unit test
//! `the_refinement_keeps_a_small_far_mode_apart` and deltas.slt).
//!
//! Where the source leaves a choice open, commdb takes: m1 = the smoothing interval; among the
//! pairs that qualify, the one with the fewest values (the "small, adjacent bins"); the merged
//! bin's variance combined exactly (Chan et al.) rather than under the uniform assumption.
//! Partial histograms (DataFusion aggregates in parallel) merge by adding each non-empty bin
//! of one as a weighted point to the bin of the other that holds its mean, stretching the
//! range to cover both, then rebalancing once. Count, total, minimum and maximum (and the
//! ranks holding them) are exact for any partitioning; bin boundaries depend on the order in
//! which values arrive, as in ScalaTrace, and bins always stay contiguous and cover [min, max].

/// The source's smooth_interval: a bin reaching a multiple of this many values triggers a
/// rebalance, and m1, how far apart two bins' counts may be to merge.
pub const SMOOTH_INTERVAL: u64 = 64;

/// One bin: [lo, hi) (the last bin includes hi), with count, mean and sum of squared
/// deviations (m2; variance = m2 / count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    pub lo: f64,
    pub hi: f64,
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
}

impl Bin {
    fn empty(lo: f64, hi: f64) -> Bin {
        Bin { lo, hi, count: 0, mean: 0.0, m2: 0.0 }
    }

    /// Combine another group (count, mean, m2) into this bin (Chan et al.'s parallel formula).
    fn absorb(&mut self, count: u64, mean: f64, m2: f64) {
        if count == 0 {
            return;
        }
        let (n1, n2) = (self.count as f64, count as f64);
        let n = n1 + n2;
        let delta = mean - self.mean;
        self.mean += delta * n2 / n;
        self.m2 += m2 + delta * delta * n1 * n2 / n;
        self.count += count;
    }

    pub fn variance(&self) -> f64 {
        if self.count > 0 { self.m2 / self.count as f64 } else { 0.0 }
    }
}

/// Split a bin along its mean (Algorithm 2): [lo, mean] and [mean, hi], half the values each,
/// the new means sigma/2 below and above the old one (kept within their ranges) and the new
/// sigma half the old one.
fn split(b: &Bin) -> (Bin, Bin) {
    let at = b.mean.clamp(b.lo, b.hi);
    let sd = b.variance().sqrt();
    let left_count = b.count / 2;
    let right_count = b.count - left_count;
    let m2 = |count: u64| (sd / 2.0) * (sd / 2.0) * count as f64;
    let part = |lo: f64, hi: f64, count: u64, mean: f64| Bin {
        lo,
        hi,
        count,
        mean: if count > 0 { mean.clamp(lo, hi) } else { 0.0 },
        m2: m2(count),
    };
    (part(b.lo, at, left_count, b.mean - sd / 2.0), part(at, b.hi, right_count, b.mean + sd / 2.0))
}

/// Which rebalancing rules a histogram follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// ScalaTrace's Algorithm 2 (the default).
    #[default]
    Source,
    /// commdb's refinement (see the module doc).
    Balanced,
}

impl Scheme {
    pub fn parse(s: &str) -> Option<Scheme> {
        match s {
            "source" => Some(Scheme::Source),
            "balanced" => Some(Scheme::Balanced),
            _ => None,
        }
    }
}

/// The refinement's split: the halves' counts, means (centres of their parts of the support)
/// and variances (width^2 / 12) from the uniform support [mean - sqrt(3) sd, mean + sqrt(3) sd]
/// within the bin; when the support lies on one side of the split, that side keeps the bin.
fn split_uniform(b: &Bin) -> (Bin, Bin) {
    let at = if b.mean > b.lo && b.mean < b.hi { b.mean } else { (b.lo + b.hi) / 2.0 };
    let sd = b.variance().sqrt();
    let (a, z) = ((b.mean - 3f64.sqrt() * sd).max(b.lo), (b.mean + 3f64.sqrt() * sd).min(b.hi));
    let whole = |lo: f64, hi: f64| Bin { lo, hi, ..*b };
    if z <= at {
        return (whole(b.lo, at), Bin::empty(at, b.hi));
    }
    if a >= at {
        return (Bin::empty(b.lo, at), whole(at, b.hi));
    }
    let left_count = (((b.count as f64) * (at - a) / (z - a)).round() as u64).min(b.count);
    let part = |lo: f64, hi: f64, from: f64, to: f64, count: u64| Bin {
        lo,
        hi,
        count,
        mean: if count > 0 { (from + to) / 2.0 } else { 0.0 },
        m2: (to - from) * (to - from) / 12.0 * count as f64,
    };
    (part(b.lo, at, a, at, left_count), part(at, b.hi, at, z, b.count - left_count))
}

/// The histogram with its exact summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub target: usize,
    pub bins: Vec<Bin>,
    pub count: u64,
    pub total: f64,
    pub min: f64,
    pub max: f64,
    pub min_rank: Option<i64>,
    pub max_rank: Option<i64>,
    pub scheme: Scheme,
    /// Additions since the last rebalance (the refinement's trigger).
    since_smooth: u64,
}

impl Histogram {
    pub fn new(bins: usize) -> Histogram {
        Histogram::with_scheme(bins, Scheme::Source)
    }

    pub fn with_scheme(bins: usize, scheme: Scheme) -> Histogram {
        Histogram {
            target: bins.max(1),
            bins: Vec::new(),
            count: 0,
            total: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            min_rank: None,
            max_rank: None,
            scheme,
            since_smooth: 0,
        }
    }

    fn create(&mut self, v: f64) {
        let (lo, hi) = if v > 0.0 {
            (0.0, 2.0 * v)
        } else if v < 0.0 {
            (2.0 * v, 0.0)
        } else {
            (0.0, 1.0)
        };
        let width = (hi - lo) / self.target as f64;
        self.bins = (0..self.target)
            .map(|i| {
                let b_lo = lo + width * i as f64;
                let b_hi = if i + 1 == self.target { hi } else { lo + width * (i + 1) as f64 };
                Bin::empty(b_lo, b_hi)
            })
            .collect();
    }

    /// Stretch the range so that it holds [lo, hi].
    fn cover(&mut self, lo: f64, hi: f64) {
        if let Some(first) = self.bins.first_mut()
            && lo < first.lo
        {
            first.lo = lo;
        }
        if let Some(last) = self.bins.last_mut()
            && hi > last.hi
        {
            last.hi = hi;
        }
    }

    /// The bin holding v (the range must already cover it).
    fn bin_of(&self, v: f64) -> usize {
        let i = self.bins.partition_point(|b| b.hi <= v);
        i.min(self.bins.len() - 1)
    }

    /// The extremes and their ranks; on ties the lowest rank, so that neither the order of the
    /// values nor how partial histograms were split changes them.
    fn note_extremes(&mut self, lo: f64, lo_rank: Option<i64>, hi: f64, hi_rank: Option<i64>) {
        let lower = |new: Option<i64>, old: Option<i64>| match (new, old) {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if lo < self.min || (lo == self.min && lower(lo_rank, self.min_rank)) {
            self.min = lo;
            self.min_rank = lo_rank;
        }
        if hi > self.max || (hi == self.max && lower(hi_rank, self.max_rank)) {
            self.max = hi;
            self.max_rank = hi_rank;
        }
    }

    /// Add one value, with the rank it came from.
    pub fn add(&mut self, v: f64, rank: Option<i64>) {
        if !v.is_finite() {
            return;
        }
        if self.bins.is_empty() {
            self.create(v);
        }
        self.count += 1;
        self.total += v;
        self.note_extremes(v, rank, v, rank);
        self.cover(v, v);
        let i = self.bin_of(v);
        let b = &mut self.bins[i];
        b.count += 1;
        let delta = v - b.mean;
        b.mean += delta / b.count as f64;
        b.m2 += delta * (v - b.mean);
        let full = b.count.is_multiple_of(SMOOTH_INTERVAL);
        self.since_smooth += 1;
        match self.scheme {
            Scheme::Source if full => self.smooth(),
            Scheme::Balanced if self.since_smooth >= SMOOTH_INTERVAL => self.smooth(),
            _ => {}
        }
    }

    /// Algorithm 2's rebalance: merge two small adjacent bins of similar counts and split the
    /// fullest bin at its mean; nothing when no pair qualifies.
    pub fn smooth(&mut self) {
        self.since_smooth = 0;
        if self.scheme == Scheme::Balanced {
            return self.smooth_balanced();
        }
        let k = self.bins.len();
        if k < 3 {
            return;
        }
        let fullest = (0..k).max_by_key(|&i| (self.bins[i].count, std::cmp::Reverse(i))).unwrap_or(0);
        let top = self.bins[fullest].count;
        let (c, m1) = (|i: usize| self.bins[i].count, SMOOTH_INTERVAL);
        let pair = (0..k - 1)
            .filter(|&i| i != fullest && i + 1 != fullest)
            .filter(|&i| c(i).abs_diff(c(i + 1)) < m1 && c(i) + c(i + 1) <= k as u64 * top)
            .min_by_key(|&i| (c(i) + c(i + 1), i));
        let Some(pair) = pair else { return };
        self.merge_and_split(pair, fullest, split);
    }

    /// The refinement's rebalance: merge the lightest adjacent pair and split the fullest bin
    /// when it holds more than that pair together.
    fn smooth_balanced(&mut self) {
        if self.bins.len() < 2 {
            return;
        }
        let merged = |i: usize| self.bins[i].count + self.bins[i + 1].count;
        let pair = (0..self.bins.len() - 1).min_by_key(|&i| (merged(i), i)).unwrap_or(0);
        let fullest = (0..self.bins.len()).max_by_key(|&i| (self.bins[i].count, std::cmp::Reverse(i))).unwrap_or(0);
        if self.bins[fullest].count <= merged(pair) {
            return;
        }
        self.merge_and_split(pair, fullest, split_uniform);
    }

    /// Merge bins `pair` and `pair + 1`, then split bin `fullest` (an index from before the
    /// merge) in two with `split`: the bin count stays the same.
    fn merge_and_split(&mut self, pair: usize, fullest: usize, split: fn(&Bin) -> (Bin, Bin)) {
        let right = self.bins.remove(pair + 1);
        let left = &mut self.bins[pair];
        left.hi = right.hi;
        left.absorb(right.count, right.mean, right.m2);
        let fullest = if fullest > pair { fullest - 1 } else { fullest };
        let (left, right) = split(&self.bins[fullest]);
        self.bins[fullest] = left;
        self.bins.insert(fullest + 1, right);
    }

    /// Merge another partial histogram into this one.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = Histogram { target: self.target, scheme: self.scheme, ..other.clone() };
            return;
        }
        self.count += other.count;
        self.total += other.total;
        self.note_extremes(other.min, other.min_rank, other.max, other.max_rank);
        let (lo, hi) = (other.bins.first().map_or(other.min, |b| b.lo), other.bins.last().map_or(other.max, |b| b.hi));
        self.cover(lo.min(other.min), hi.max(other.max));
        for b in other.bins.iter().filter(|b| b.count > 0) {
            let i = self.bin_of(b.mean);
            self.bins[i].absorb(b.count, b.mean, b.m2);
        }
        self.smooth();
    }

    /// A compact binary form, for DataFusion's partial aggregate states.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.bins.len() * 40);
        let mut put = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        put(self.target as u64);
        put(self.count);
        put(self.total.to_bits());
        put(self.min.to_bits());
        put(self.max.to_bits());
        put(self.min_rank.map_or(u64::MAX, |r| r as u64));
        put(u64::from(self.min_rank.is_some()));
        put(self.max_rank.map_or(u64::MAX, |r| r as u64));
        put(u64::from(self.max_rank.is_some()));
        put(u64::from(self.scheme == Scheme::Balanced));
        put(self.since_smooth);
        put(self.bins.len() as u64);
        for b in &self.bins {
            put(b.lo.to_bits());
            put(b.hi.to_bits());
            put(b.count);
            put(b.mean.to_bits());
            put(b.m2.to_bits());
        }
        out
    }

    /// The inverse of `encode`; None for bytes it did not write.
    pub fn decode(bytes: &[u8]) -> Option<Histogram> {
        let mut words = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        let mut next = || words.next();
        let target = next()? as usize;
        let count = next()?;
        let total = f64::from_bits(next()?);
        let min = f64::from_bits(next()?);
        let max = f64::from_bits(next()?);
        let (min_rank, has_min) = (next()? as i64, next()? == 1);
        let (max_rank, has_max) = (next()? as i64, next()? == 1);
        let scheme = if next()? == 1 { Scheme::Balanced } else { Scheme::Source };
        let since_smooth = next()?;
        let n = next()? as usize;
        if n > 1 << 20 {
            return None;
        }
        let mut bins = Vec::with_capacity(n);
        for _ in 0..n {
            bins.push(Bin {
                lo: f64::from_bits(next()?),
                hi: f64::from_bits(next()?),
                count: next()?,
                mean: f64::from_bits(next()?),
                m2: f64::from_bits(next()?),
            });
        }
        Some(Histogram {
            target,
            bins,
            count,
            total,
            min,
            max,
            min_rank: has_min.then_some(min_rank),
            max_rank: has_max.then_some(max_rank),
            scheme,
            since_smooth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(h: &Histogram) {
        assert_eq!(h.bins.iter().map(|b| b.count).sum::<u64>(), h.count);
        for w in h.bins.windows(2) {
            assert_eq!(w[0].hi, w[1].lo, "contiguous: {:?}", h.bins);
        }
        assert!(h.bins[0].lo <= h.min && h.bins.last().unwrap().hi >= h.max, "covers: {h:?}");
    }

    #[test]
    fn count_total_and_range_are_exact() {
        let mut h = Histogram::new(5);
        let values: Vec<f64> = (0..10_000).map(|i| ((i * 7919) % 1000) as f64 + 0.5).collect();
        for (i, v) in values.iter().enumerate() {
            h.add(*v, Some(i as i64 % 8));
        }
        check(&h);
        assert_eq!(h.count, 10_000);
        assert_eq!(h.total, values.iter().sum::<f64>());
        assert_eq!((h.min, h.max), (0.5, 999.5));
        assert_eq!(h.bins.len(), 5);
    }

    #[test]
    fn a_bimodal_input_gives_two_groups_of_bins() {
        // ScalaTrace's imbalance example: most ranks compute ~100 us, a few ~1000 us.
        let mut h = Histogram::new(5);
        for i in 0..4_000u64 {
            let v = if i % 8 == 7 {
                1_000_000.0 + (i % 13) as f64 * 1_000.0
            } else {
                100_000.0 + (i % 11) as f64 * 1_000.0
            };
            h.add(v, Some((i % 8) as i64));
        }
        check(&h);
        // Algorithm 2 spends most bins where most values are: the bins below 200 us hold at
        // least 80% of the 3,500 values near 100 us, the rest reach up to the 1 ms mode.
        let low: u64 = h.bins.iter().filter(|b| b.hi <= 200_000.0).map(|b| b.count).sum();
        assert!(low >= 2_800 && h.bins.iter().filter(|b| b.hi <= 200_000.0).count() >= 2, "{:?}", h.bins);
        assert_eq!(h.bins.last().unwrap().hi, h.max);
        assert_eq!((h.min_rank, h.max_rank), (Some(0), Some(7)));
    }

    #[test]
    fn a_split_follows_algorithm_2() {
        // 100 values with mean 100 and sigma 10 over [80, 120).
        let b = Bin { lo: 80.0, hi: 120.0, count: 100, mean: 100.0, m2: 100.0 * 100.0 };
        let (l, r) = split(&b);
        assert_eq!((l.lo, l.hi, r.lo, r.hi), (80.0, 100.0, 100.0, 120.0));
        assert_eq!((l.count, r.count), (50, 50));
        assert_eq!((l.mean, r.mean), (95.0, 105.0));
        assert_eq!((l.variance().sqrt(), r.variance().sqrt()), (5.0, 5.0));
    }

    #[test]
    fn values_crowding_one_bin_are_spread_by_rebalancing() {
        // The first value 100 makes bins of 40 over [0, 200]; the next 2,000 fall in [90, 110],
        // all inside one initial bin. Without rebalancing that bin would hold every value.
        let mut h = Histogram::new(5);
        h.add(100.0, None);
        for i in 0..2_000u64 {
            h.add(90.0 + (i * 7919 % 2_000) as f64 / 100.0, None);
        }
        check(&h);
        let fullest = h.bins.iter().map(|b| b.count).max().unwrap();
        let used = h.bins.iter().filter(|b| b.count > 0).count();
        assert!(fullest * 2 < h.count && used >= 4, "{:?}", h.bins);
        // Rebalancing only moved boundaries towards the values: most bins now lie within them.
        assert!(h.bins.iter().filter(|b| b.lo >= 80.0 && b.hi <= 120.0).count() >= 3, "{:?}", h.bins);
    }

    #[test]
    fn rebalancing_waits_for_a_bin_to_fill_a_smoothing_interval() {
        let mut h = Histogram::new(5);
        h.add(100.0, None);
        for _ in 0..SMOOTH_INTERVAL - 2 {
            h.add(100.0, None);
        }
        // 63 values in one bin: not yet a multiple of the interval, the initial bins stand.
        assert_eq!(h.bins.iter().map(|b| b.hi - b.lo).collect::<Vec<_>>(), [40.0; 5]);
        h.add(100.0, None);
        assert_ne!(h.bins.iter().map(|b| b.hi - b.lo).collect::<Vec<_>>(), [40.0; 5], "{:?}", h.bins);
    }

    #[test]
    fn the_refinement_keeps_a_small_far_mode_apart() {
        // One rank in sixteen computes 3x longer (the imbalance of the deltas test): under the
        // source's rules its values share a wide last bin with fast ones, under the refinement
        // the last bin holds only them.
        let value = |i: u64| {
            if i % 16 == 5 { 300_000.0 + (i % 7) as f64 * 4_000.0 } else { 95_000.0 + (i % 11) as f64 * 1_000.0 }
        };
        let (mut source, mut refined) = (Histogram::new(5), Histogram::with_scheme(5, Scheme::Balanced));
        for i in 0..800u64 {
            source.add(value(i), Some((i % 16) as i64));
            refined.add(value(i), Some((i % 16) as i64));
        }
        check(&source);
        check(&refined);
        // How far the last bin stands out from the first: the slow rank's mode shows clearly
        // (over twice the first bin's mean) only under the refinement.
        let stands_out = |h: &Histogram| h.bins[h.bins.len() - 1].mean > 2.0 * h.bins[0].mean;
        assert!(stands_out(&refined), "{:?}", refined.bins);
        assert!(!stands_out(&source), "{:?}", source.bins);
        let merged = Histogram::decode(&refined.encode()).unwrap();
        assert_eq!(merged.scheme, Scheme::Balanced);
    }

    #[test]
    fn identical_values_stay_where_they_are() {
        let mut h = Histogram::new(5);
        (0..1_000).for_each(|_| h.add(0.0, Some(3)));
        check(&h);
        assert!(h.bins.iter().all(|b| b.count == 0 || (b.mean == 0.0 && b.variance() == 0.0)), "{:?}", h.bins);
        assert_eq!((h.count, h.total, h.min, h.max, h.min_rank), (1_000, 0.0, 0.0, 0.0, Some(3)));
    }

    #[test]
    fn merging_partitions_keeps_the_exact_summary() {
        let values: Vec<f64> = (0..5_000).map(|i| ((i * 31) % 977) as f64).collect();
        let mut whole = Histogram::new(5);
        values.iter().for_each(|v| whole.add(*v, None));
        for parts in [2, 3, 7] {
            let mut merged = Histogram::new(5);
            for p in 0..parts {
                let mut h = Histogram::new(5);
                values.iter().skip(p).step_by(parts).for_each(|v| h.add(*v, None));
                let h = Histogram::decode(&h.encode()).unwrap();
                merged.merge(&h);
            }
            check(&merged);
            assert_eq!((merged.count, merged.min, merged.max), (whole.count, whole.min, whole.max));
            assert!((merged.total - whole.total).abs() < 1e-6);
            assert_eq!(merged.bins.len(), 5);
        }
        assert!(Histogram::decode(&[1, 2, 3]).is_none());
    }
}
