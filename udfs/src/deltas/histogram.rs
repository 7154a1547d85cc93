//! ScalaTrace's dynamically balanced histogram of delta times: a fixed number of contiguous
//! bins that follow the values as they arrive, so repeated calls are described without storing
//! every time stamp.
//!
//! The first value v creates `bins` equal bins over [0, 2v] (over [2v, 0] for a negative v,
//! [0, 1] for 0). Every later value updates its bin's count, mean and variance incrementally
//! (Welford); a value outside the range stretches the first or last bin to it. After every
//! `SMOOTH_INTERVAL` additions the histogram rebalances: the two adjacent bins whose merged
//! count is smallest are merged (counts, means and variances combined exactly), and the fullest
//! bin is split at its mean — when the fullest bin holds more than that pair together, so that
//! rebalancing never merges two well-filled bins (which would blur two modes into one) — assuming its values uniform over the support its mean and variance
//! imply (mean +- sqrt(3) sd, within the bin) for the new halves' counts, means (centres of
//! their parts of the support) and variances (width^2 / 12). Partial histograms (DataFusion
//! aggregates in parallel) merge by adding each non-empty bin of one as a weighted point to the
//! bin of the other that holds its mean, stretching the range to cover both, then
//! rebalancing. Count, total, minimum and maximum (and the ranks holding them) are exact for
//! any partitioning; bin boundaries depend on the order in which values arrive, as in
//! ScalaTrace, and bins always stay contiguous and cover [min, max].

/// Additions between rebalancing passes.
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

/// Split a bin at its mean (its middle when the mean is on an edge). Its values are taken as
/// uniform over the support its mean and variance imply ([mean - sqrt(3) sd, mean + sqrt(3) sd]
/// within the bin), which gives the halves' counts, means (centres of their parts of the
/// support) and variances (width^2 / 12); when the support lies on one side of the split, that
/// side keeps the bin's count, mean and variance unchanged.
fn split(b: &Bin) -> (Bin, Bin) {
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
    since_smooth: u64,
}

impl Histogram {
    pub fn new(bins: usize) -> Histogram {
        Histogram {
            target: bins.max(1),
            bins: Vec::new(),
            count: 0,
            total: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            min_rank: None,
            max_rank: None,
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

    fn note_extremes(&mut self, lo: f64, lo_rank: Option<i64>, hi: f64, hi_rank: Option<i64>) {
        if lo < self.min || (lo == self.min && self.min_rank.is_none()) {
            self.min = lo;
            self.min_rank = lo_rank;
        }
        if hi > self.max || (hi == self.max && self.max_rank.is_none()) {
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
        self.since_smooth += 1;
        if self.since_smooth >= SMOOTH_INTERVAL {
            self.smooth();
        }
    }

    /// Merge the lightest adjacent pair and split the fullest bin at its mean, when that makes
    /// the bins more even (the fullest bin holds more than the pair together).
    pub fn smooth(&mut self) {
        self.since_smooth = 0;
        if self.bins.len() < 2 {
            return;
        }
        let merged = |i: usize| self.bins[i].count + self.bins[i + 1].count;
        let pair = (0..self.bins.len() - 1).min_by_key(|&i| (merged(i), i)).unwrap_or(0);
        let fullest = (0..self.bins.len()).max_by_key(|&i| (self.bins[i].count, std::cmp::Reverse(i))).unwrap_or(0);
        if self.bins[fullest].count <= merged(pair) {
            return;
        }
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
            *self = Histogram { target: self.target, ..other.clone() };
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
        // The bins fall into two groups by their means, holding about 7/8 and 1/8 of the values.
        let low: u64 = h.bins.iter().filter(|b| b.mean < 200_000.0).map(|b| b.count).sum();
        let high: u64 = h.bins.iter().filter(|b| b.mean > 900_000.0).map(|b| b.count).sum();
        assert!(low.abs_diff(3_500) <= 175 && high.abs_diff(500) <= 50, "{:?}", h.bins);
        assert_eq!(low + high, h.count, "no bin between the modes: {:?}", h.bins);
        assert_eq!((h.min_rank, h.max_rank), (Some(0), Some(7)));
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
