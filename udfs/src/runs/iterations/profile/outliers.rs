//! The first half of `iteration_profile`: the rows of `iterations` folded as they stream into
//! what the profile needs, then the outliers and their slow ranks. Per step group and iteration
//! it keeps the sums and extremes of the ranks' rows; per rank its computation and MPI time of
//! each iteration (8 bytes an iteration and rank, for the rank's median); each row's bounds
//! (rank, iteration, start, end) go to a scratch file ([`crate::spill`]), read once more when
//! the outliers are known to take the slow rank's bounds. Nothing is held per row but the one
//! number: 25.6 M rows (1,024 ranks, 25,000 iterations) take 205 MB, where the rows held whole
//! took 2 to 3 GB.
//!
//! The rules are those of the profile's declaration: an outlier is longer than its group's
//! median iteration by more than k robust standard deviations (1.4826 times the median absolute
//! deviation; Iglewicz and Hoaglin's modified z-score with k = 3.5), and its slow rank is the one
//! whose computation and MPI time exceeds its own median the most (the smallest rank of a tie).
//! A median of an even count is the mean of the two middle values, in floating point, as
//! SQL's `median` gives it (of integers too).

use arrow::array::{Array, RecordBatch};
use datafusion::common::exec_err;
use datafusion::error::Result;

use commdb_analysis::columns::{int64_column, text_column};
use commdb_catalog::fast_hash::FastMap;

use crate::spill::{Rows, Spill};

/// The columns read of `iterations`, in this order.
pub(super) const ITERATION_COLUMNS: [&str; 9] =
    ["iteration", "rank", "start_ts", "end_ts", "duration_ns", "compute_ns", "mpi_ns", "waiting_ns", "step_group"];

/// An iteration of a rank not given (a gap in its iterations' numbers).
const ABSENT: i64 = i64::MIN;

/// One iteration of one step group, over its ranks.
#[derive(Debug, Clone)]
pub(super) struct Step {
    pub group: u32,
    pub iteration: i64,
    pub start: i64,
    pub end: i64,
    pub ranks: i64,
    /// The sum of its ranks' durations (for their mean).
    pub durations: i128,
    pub compute_min: i64,
    pub compute_max: i64,
    pub waiting: i128,
    pub outlier: bool,
}

impl Step {
    pub fn duration(&self) -> i64 {
        self.end - self.start
    }

    pub fn mean_rank_ns(&self) -> f64 {
        self.durations as f64 / self.ranks as f64
    }
}

/// A rank's iterations as the fold keeps them.
#[derive(Debug, Default)]
struct RankSteps {
    group: u32,
    /// Its computation and MPI time, by iteration (ABSENT where it has none).
    work: Vec<i64>,
    /// Its iterations, its first start and its last end.
    n: i64,
    first: i64,
    last: i64,
}

/// The slowest rank of an outlier iteration, so far.
#[derive(Debug, Clone)]
pub(super) struct Slow {
    pub rank: i64,
    /// Its computation and MPI time beyond its own median.
    pub excess: f64,
    /// Its bounds of the iteration.
    pub start: i64,
    pub end: i64,
    /// Its iterations, its first start and its last end over them all.
    pub n: i64,
    pub first: i64,
    pub last: i64,
}

/// The profile's fold of the rows of `iterations`.
pub(super) struct StepFold {
    k: f64,
    groups: Vec<String>,
    group_ids: FastMap<String, u32>,
    steps: FastMap<(u32, i64), Step>,
    ranks: FastMap<i64, RankSteps>,
    /// (rank, iteration, start, end) of every row, from the first.
    bounds: Option<Spill<4>>,
    held: usize,
}

impl std::fmt::Debug for StepFold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepFold").field("steps", &self.steps.len()).field("ranks", &self.ranks.len()).finish()
    }
}

/// Bytes the fold holds per step beside the step (its key and the map's slot).
const STEP_BYTES: usize = std::mem::size_of::<Step>() + 24;

/// Bytes of the scratch file's buffer.
const SPILL_BUFFER: usize = 1 << 20;

/// The steps of every group with their outliers flagged, and each outlier's slow rank.
pub(super) struct Found {
    pub groups: Vec<String>,
    /// In order of iteration, then group name.
    pub steps: Vec<Step>,
    /// By (group, iteration) of each outlier.
    pub slow: FastMap<(u32, i64), Slow>,
}

impl StepFold {
    pub fn new(k: f64) -> Self {
        StepFold {
            k,
            groups: Vec::new(),
            group_ids: FastMap::default(),
            steps: FastMap::default(),
            ranks: FastMap::default(),
            bounds: None,
            held: 0,
        }
    }

    pub fn held_bytes(&self) -> usize {
        self.held
    }

    fn group(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.group_ids.get(name) {
            return id;
        }
        let id = self.groups.len() as u32;
        self.groups.push(name.to_string());
        self.group_ids.insert(name.to_string(), id);
        self.held += 2 * name.len() + 64;
        id
    }

    /// Fold a batch of `iterations`' rows (its columns `ITERATION_COLUMNS`).
    pub fn fold(&mut self, batch: &RecordBatch) -> Result<()> {
        let b = std::slice::from_ref(batch);
        let ints = (0..8).map(|c| int64_column(b, c)).collect::<Result<Vec<_>>>()?;
        let group = text_column(b, 8)?;
        let [iteration, rank, start, end, duration, compute, mpi, waiting] = &ints[..] else {
            unreachable!("eight integer columns")
        };
        for i in 0..batch.num_rows() {
            let nulls = ints.iter().any(|c| c.is_null(i)) || group.is_null(i);
            if nulls {
                return exec_err!("iteration_profile: a row of iterations has a NULL, which iterations never gives");
            }
            let (it, r, s, e) = (iteration.value(i), rank.value(i), start.value(i), end.value(i));
            if it < 0 {
                return exec_err!("iteration_profile: rank {r} has iteration {it}, below 0");
            }
            let g = self.group(group.value(i));
            let held_before = self.steps.len();
            let step = self.steps.entry((g, it)).or_insert(Step {
                group: g,
                iteration: it,
                start: s,
                end: e,
                ranks: 0,
                durations: 0,
                compute_min: i64::MAX,
                compute_max: i64::MIN,
                waiting: 0,
                outlier: false,
            });
            step.start = step.start.min(s);
            step.end = step.end.max(e);
            step.ranks += 1;
            step.durations += duration.value(i) as i128;
            step.compute_min = step.compute_min.min(compute.value(i));
            step.compute_max = step.compute_max.max(compute.value(i));
            step.waiting += waiting.value(i) as i128;
            self.held += (self.steps.len() - held_before) * STEP_BYTES;
            let steps =
                self.ranks.entry(r).or_insert_with(|| RankSteps { group: g, first: s, last: e, ..Default::default() });
            if steps.group != g {
                return exec_err!("iteration_profile: rank {r} is in two step groups, which iterations never gives");
            }
            let at = it as usize;
            let capacity = steps.work.capacity();
            if at >= steps.work.len() {
                steps.work.resize(at + 1, ABSENT);
            }
            if steps.work[at] != ABSENT {
                return exec_err!("iteration_profile: rank {r} has iteration {it} twice, which iterations never gives");
            }
            steps.work[at] = compute.value(i) + mpi.value(i);
            steps.n += 1;
            steps.first = steps.first.min(s);
            steps.last = steps.last.max(e);
            self.held += (steps.work.capacity() - capacity) * 8 + if steps.n == 1 { 64 } else { 0 };
            let bounds = match &mut self.bounds {
                Some(b) => b,
                None => {
                    self.held += SPILL_BUFFER;
                    self.bounds.insert(Spill::new("iteration_profile")?)
                }
            };
            bounds.push([r, it, s, e])?;
        }
        Ok(())
    }

    /// Every row has been folded: the steps with their outliers, and each outlier's slow rank.
    pub fn found(self) -> Result<Found> {
        let StepFold { k, groups, steps, ranks, bounds, .. } = self;
        let mut steps: Vec<Step> = steps.into_values().collect();
        flag_outliers(&mut steps, groups.len(), k);
        let mut slow: FastMap<(u32, i64), Option<Slow>> =
            steps.iter().filter(|s| s.outlier).map(|s| ((s.group, s.iteration), None)).collect();
        // An outlier has rows, so the bounds were written.
        if let (false, Some(bounds)) = (slow.is_empty(), bounds) {
            let medians: FastMap<i64, f64> = ranks.iter().map(|(r, s)| (*r, median_of_present(&s.work))).collect();
            slowest(bounds.into_rows()?, &ranks, &medians, &mut slow)?;
        }
        steps.sort_unstable_by(|a, b| {
            a.iteration.cmp(&b.iteration).then_with(|| groups[a.group as usize].cmp(&groups[b.group as usize]))
        });
        let slow = slow.into_iter().filter_map(|(key, s)| s.map(|s| (key, s))).collect();
        Ok(Found { groups, steps, slow })
    }
}

/// Flags each step longer than its group's median by more than `k` robust standard deviations.
fn flag_outliers(steps: &mut [Step], groups: usize, k: f64) {
    let mut durations: Vec<Vec<f64>> = vec![Vec::new(); groups];
    for s in steps.iter() {
        durations[s.group as usize].push(s.duration() as f64);
    }
    let limits: Vec<Option<f64>> = durations
        .iter_mut()
        .map(|d| {
            let m = median(d)?;
            let mut deviations: Vec<f64> = d.iter().map(|x| (x - m).abs()).collect();
            let mad = median(&mut deviations)?;
            Some(m + k * 1.4826 * mad)
        })
        .collect();
    for s in steps.iter_mut() {
        s.outlier = limits[s.group as usize].is_some_and(|limit| s.duration() as f64 > limit);
    }
}

/// Reads the rows' bounds back and keeps, per outlier, the rank whose computation and MPI time
/// exceeds its own median the most (the smallest rank of a tie), with its bounds.
fn slowest(
    mut rows: Rows<4>,
    ranks: &FastMap<i64, RankSteps>,
    medians: &FastMap<i64, f64>,
    slow: &mut FastMap<(u32, i64), Option<Slow>>,
) -> Result<()> {
    let mut batch = Vec::new();
    while rows.next_rows(&mut batch, 65_536)? > 0 {
        for &[rank, iteration, start, end] in &batch {
            let Some(steps) = ranks.get(&rank) else { continue };
            let Some(entry) = slow.get_mut(&(steps.group, iteration)) else { continue };
            let excess = steps.work[iteration as usize] as f64 - medians[&rank];
            let better = entry.as_ref().is_none_or(|s| excess.total_cmp(&s.excess).then(s.rank.cmp(&rank)).is_gt());
            if better {
                *entry = Some(Slow { rank, excess, start, end, n: steps.n, first: steps.first, last: steps.last });
            }
        }
    }
    Ok(())
}

/// The median of the values not ABSENT (0 when none: a rank with rows has one).
fn median_of_present(work: &[i64]) -> f64 {
    let mut present: Vec<f64> = work.iter().filter(|&&w| w != ABSENT).map(|&w| w as f64).collect();
    median(&mut present).unwrap_or(0.0)
}

/// The median of `values` (reordered), the mean of the middle two when their count is even, as
/// SQL's `median` (which takes integers as floating point); None when empty.
pub(super) fn median(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (low, mid, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    let high = *mid;
    if n % 2 == 1 {
        return Some(high);
    }
    let low = low.iter().copied().max_by(f64::total_cmp).expect("an even count has a lower half");
    Some((low + high) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_those_of_sql() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [7.0]), Some(7.0));
        assert_eq!(median(&mut [9.0, 1.0, 4.0]), Some(4.0));
        assert_eq!(median(&mut [1.0, 4.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut [-3.0, 2.0]), Some(-0.5));
        assert_eq!(median_of_present(&[5, ABSENT, 8, 6, ABSENT]), 6.0);
    }

    fn step(group: u32, iteration: i64, duration: i64) -> Step {
        Step {
            group,
            iteration,
            start: 0,
            end: duration,
            ranks: 1,
            durations: 0,
            compute_min: 0,
            compute_max: 0,
            waiting: 0,
            outlier: false,
        }
    }

    #[test]
    fn an_outlier_is_beyond_k_robust_deviations_of_its_own_group() {
        // Group 0: median 100, deviations 0, 2, 2, 50 -> MAD 2, limit 100 + 3.5 * 1.4826 * 2.
        // Group 1: every step as long as group 0's outlier, so none of its own.
        let mut steps = vec![step(0, 0, 100), step(0, 1, 98), step(0, 2, 102), step(0, 3, 150), step(0, 4, 100)];
        steps.extend((0..4).map(|i| step(1, i, 150)));
        flag_outliers(&mut steps, 2, 3.5);
        let flagged: Vec<(u32, i64)> = steps.iter().filter(|s| s.outlier).map(|s| (s.group, s.iteration)).collect();
        assert_eq!(flagged, [(0, 3)]);
        // 110 is 10 above the median: an outlier for k = 3 (limit 108.9), not for k = 3.5 (110.4).
        let mut steps = vec![step(0, 0, 100), step(0, 1, 98), step(0, 2, 102), step(0, 3, 110), step(0, 4, 100)];
        flag_outliers(&mut steps, 1, 3.5);
        assert!(steps.iter().all(|s| !s.outlier));
        flag_outliers(&mut steps, 1, 3.0);
        assert!(steps[3].outlier);
    }
}
