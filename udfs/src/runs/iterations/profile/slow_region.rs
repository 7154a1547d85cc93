//! The second half of `iteration_profile`: the calls of the outliers' slow ranks, read as they
//! stream (every other rank's calls are passed over), name each outlier's slow region: the
//! region whose exclusive time inside the outlier exceeds the rank's mean per iteration the
//! most, where the time no call inside covers counts as a region of its own (`UNCOVERED`,
//! computation left uninstrumented). A call is inside an iteration when it starts and ends
//! within it; the rank's mean per iteration of a region is its exclusive time over all the
//! rank's calls divided by the rank's iterations, and that of the uncovered time is the span of
//! its iterations less the exclusive time of the calls within, divided the same way. Ties go to
//! the region first in byte order; a region whose calls inside have no exclusive time recorded
//! (NULL) comes first, as SQL's `ORDER BY x DESC` puts NULLs.

use std::cmp::Ordering;

use arrow::array::{Array, RecordBatch};
use datafusion::error::Result;

use commdb_analysis::columns::{RegionIds, int64_column};
use commdb_catalog::fast_hash::FastMap;

use super::UNCOVERED;
use super::outliers::Slow;

/// The columns read of the calls, in this order.
pub(super) const CALL_COLUMNS: [&str; 5] = ["rank", "region", "start_ts", "end_ts", "exclusive"];

/// A sum of exclusive times; None until a value that is not NULL is added (SQL's `sum`).
type Sum = Option<i64>;

fn add(sum: &mut Sum, v: Option<i64>) {
    if let Some(v) = v {
        *sum = Some(sum.unwrap_or(0).wrapping_add(v));
    }
}

/// One outlier of a slow rank: its key and its bounds, and what its calls inside add up to.
#[derive(Debug)]
struct Window {
    key: (u32, i64),
    start: i64,
    end: i64,
    /// Per region (None: calls without one), the exclusive time of its calls inside.
    regions: FastMap<Option<u32>, Sum>,
    /// The exclusive time of all calls inside.
    inside: Sum,
}

/// A slow rank's calls as they are read.
#[derive(Debug)]
struct Rank {
    n: i64,
    first: i64,
    last: i64,
    /// Per region, the exclusive time of all its calls.
    regions: FastMap<Option<u32>, Sum>,
    /// The exclusive time of the calls within its first start and last end.
    covered: Sum,
    /// Its outliers, by start.
    windows: Vec<Window>,
}

/// The slow ranks' calls, summed.
#[derive(Debug)]
pub(super) struct SlowRegions {
    ranks: FastMap<i64, Rank>,
    names: Vec<String>,
    ids: RegionIds<fn(&str) -> bool>,
}

fn any_name(_: &str) -> bool {
    true
}

impl SlowRegions {
    pub fn new(slow: &FastMap<(u32, i64), Slow>) -> Self {
        let mut ranks: FastMap<i64, Rank> = FastMap::default();
        for (key, s) in slow {
            let rank = ranks.entry(s.rank).or_insert_with(|| Rank {
                n: s.n,
                first: s.first,
                last: s.last,
                regions: FastMap::default(),
                covered: None,
                windows: Vec::new(),
            });
            rank.windows.push(Window {
                key: *key,
                start: s.start,
                end: s.end,
                regions: FastMap::default(),
                inside: None,
            });
        }
        for rank in ranks.values_mut() {
            rank.windows.sort_unstable_by_key(|w| (w.start, w.end));
        }
        SlowRegions { ranks, names: Vec::new(), ids: RegionIds::new(any_name) }
    }

    /// Bytes held: a few per outlier and per region of a slow rank.
    pub fn held_bytes(&self) -> usize {
        self.ranks
            .values()
            .map(|r| {
                128 + r.regions.capacity() * 32
                    + r.windows.iter().map(|w| 96 + w.regions.capacity() * 32).sum::<usize>()
            })
            .sum::<usize>()
            + self.names.iter().map(|n| 2 * n.len() + 48).sum::<usize>()
    }

    /// Adds a batch of calls (their columns `CALL_COLUMNS`).
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let b = std::slice::from_ref(batch);
        let rank = int64_column(b, 0)?;
        let wanted = |i: usize| rank.is_valid(i) && self.ranks.contains_key(&rank.value(i));
        if !(0..batch.num_rows()).any(wanted) {
            return Ok(());
        }
        let (start, end, exclusive) = (int64_column(b, 2)?, int64_column(b, 3)?, int64_column(b, 4)?);
        let mut region = Vec::with_capacity(batch.num_rows());
        self.ids.append(batch.column(1), &mut self.names, &mut region)?;
        for (i, &region) in region.iter().enumerate() {
            if !rank.is_valid(i) {
                continue;
            }
            let Some(r) = self.ranks.get_mut(&rank.value(i)) else { continue };
            let x = exclusive.is_valid(i).then(|| exclusive.value(i));
            add(r.regions.entry(region).or_insert(None), x);
            // SQL's comparisons with NULL bounds are never true.
            if start.is_null(i) || end.is_null(i) {
                continue;
            }
            let (s, e) = (start.value(i), end.value(i));
            if s >= r.first && e <= r.last {
                add(&mut r.covered, x);
            }
            // The rank's iterations do not overlap, so their ends rise with their starts: the
            // outliers that hold the call are the last ones starting at or before it whose
            // ends reach its end.
            let upto = r.windows.partition_point(|w| w.start <= s);
            for w in r.windows[..upto].iter_mut().rev() {
                if w.end < e {
                    break;
                }
                add(w.regions.entry(region).or_insert(None), x);
                add(&mut w.inside, x);
            }
        }
        Ok(())
    }

    /// Each outlier's slow region (None: a region that is NULL).
    pub fn regions(&self) -> FastMap<(u32, i64), Option<String>> {
        let mut out = FastMap::default();
        for r in self.ranks.values() {
            let per_iteration = |sum: Sum| sum.map_or(0.0, |s| s as f64 / r.n as f64);
            let span = (r.last - r.first) as f64;
            let uncovered_mean = (span - r.covered.unwrap_or(0) as f64) / r.n as f64;
            for w in &r.windows {
                let mut best: Option<Candidate> = None;
                for (region, sum) in &w.regions {
                    let mean = r.regions.get(region).copied().flatten();
                    let x = sum.map(|s| s as f64 - per_iteration(mean));
                    consider(&mut best, (x, region.map(|id| self.names[id as usize].as_str())));
                }
                let own = (w.end - w.start) as f64 - w.inside.unwrap_or(0) as f64 - uncovered_mean;
                consider(&mut best, (Some(own), Some(UNCOVERED)));
                out.insert(w.key, best.and_then(|(_, name)| name.map(str::to_string)));
            }
        }
        out
    }
}

/// A candidate for an outlier's slow region: its excess (None: NULL) and its name (None: NULL).
type Candidate<'a> = (Option<f64>, Option<&'a str>);

/// Keeps `c` in `best` when it ranks before it.
fn consider<'a>(best: &mut Option<Candidate<'a>>, c: Candidate<'a>) {
    if best.is_none_or(|b| before(c, b) == Ordering::Less) {
        *best = Some(c);
    }
}

/// The order in which the candidates of a slow region are ranked: excess descending with NULL
/// first, then region ascending with NULL last (SQL's defaults).
fn before(a: Candidate, b: Candidate) -> Ordering {
    let excess = match (a.0, b.0) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.total_cmp(&x),
    };
    let region = match (a.1, b.1) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.as_bytes().cmp(y.as_bytes()),
    };
    excess.then(region)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_rank_by_excess_then_name_with_sqls_nulls() {
        assert_eq!(before((Some(5.0), Some("b")), (Some(3.0), Some("a"))), Ordering::Less);
        assert_eq!(before((Some(3.0), Some("a")), (Some(3.0), Some("b"))), Ordering::Less);
        assert_eq!(before((None, Some("z")), (Some(1e18), Some("a"))), Ordering::Less);
        assert_eq!(before((Some(3.0), Some("a")), (Some(3.0), None)), Ordering::Less);
    }
}
