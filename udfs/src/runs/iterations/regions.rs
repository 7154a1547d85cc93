//! A run's iterations region by region: `iteration_regions([rel => 'calls'], marker => ...)`
//! cuts each rank's calls into iterations exactly as `iterations` does (the same marker, the
//! same steps) and gives per iteration, rank and region the calls that begin in it and their
//! exclusive time (a call's time less that of the calls it encloses). What lies outside the
//! iterations (MPI_Init and the setup before the first, what follows the last) is in none. It
//! is what `compare_runs(by => 'region')` pairs two runs by: a region's time iteration by
//! iteration, whose noise is independent from one iteration to the next, where its time rank
//! by rank shares the noise every rank waits for. Cost: O(calls) per rank after the sort by
//! start that the calls stream in.

use crate::sweeps::call_sweep::Call;
use commdb_analysis::declare::{Function, Make, Output, col, int64, text};
use commdb_analysis::params::{ParamDefault, Type, param};

use super::split::Iteration;

pub const ITERATION_REGIONS: Function = Function {
    name: "iteration_regions",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
        param(
            "marker",
            Type::Text,
            ParamDefault::Chosen("found as iterations() finds it"),
            "the region whose calls end an iteration",
        ),
    ],
    output: Output::Columns(&[
        col("iteration", int64, "the iteration, from 0, as iterations() numbers it").never_null(),
        col("rank", int64, "").never_null(),
        col("region", text, "the region (NULL: calls without a region)"),
        col("calls", int64, "its calls that begin in the iteration").never_null(),
        col("exclusive_ns", int64, "their time less that of the calls they enclose").never_null(),
        col("step_group", text, "as iterations() gives it ('MPI_Allreduce x60')").never_null(),
    ]),
    description: "the run's iterations region by region: per iteration, rank and region, the calls that begin in it and their exclusive time, the iterations cut as iterations() cuts them",
    make: Make::Table(super::plan_iteration_regions),
};

/// Per iteration of `cut` and region: the calls of `calls` (sorted by start, enclosing calls
/// first) that begin in it, and their exclusive time, as (iteration, region, calls, ns) in
/// iteration then region order.
pub(crate) fn by_region(calls: &[Call], cut: &[Iteration]) -> Vec<(usize, u32, i64, i64)> {
    // Exclusive times: each call's duration less its direct children's.
    let mut exclusive: Vec<i64> = calls.iter().map(|c| c.end - c.start).collect();
    let mut open: Vec<usize> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        while open.last().is_some_and(|&p| calls[p].end <= c.start) {
            open.pop();
        }
        if let Some(&p) = open.last() {
            exclusive[p] -= c.end.min(calls[p].end) - c.start;
        }
        open.push(i);
    }
    // The calls come by start, so the iteration a call begins in only moves on: each
    // iteration's sums are made per region id, then handed on in region order.
    let mut out: Vec<(usize, u32, i64, i64)> = Vec::new();
    let mut sums: Vec<(i64, i64)> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    let mut hand_on = |k: usize, sums: &mut Vec<(i64, i64)>, touched: &mut Vec<u32>| {
        touched.sort_unstable();
        for r in touched.drain(..) {
            let (n, x) = std::mem::take(&mut sums[r as usize]);
            out.push((k, r, n, x));
        }
    };
    let (mut next, mut current) = (0usize, None);
    for (c, x) in calls.iter().zip(&exclusive) {
        while next < cut.len() && cut[next].start <= c.start {
            next += 1;
        }
        let Some(k) = next.checked_sub(1) else { continue };
        if c.start >= cut[k].end {
            continue;
        }
        if current != Some(k) {
            if let Some(done) = current {
                hand_on(done, &mut sums, &mut touched);
            }
            current = Some(k);
        }
        let r = c.region as usize;
        if sums.len() <= r {
            sums.resize(r + 1, (0, 0));
        }
        if sums[r].0 == 0 {
            touched.push(c.region);
        }
        sums[r].0 += 1;
        sums[r].1 += x;
    }
    if let Some(done) = current {
        hand_on(done, &mut sums, &mut touched);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(region: u32, start: i64, end: i64) -> Call {
        Call { start, end, region }
    }

    #[test]
    fn calls_go_to_the_iteration_they_begin_in_with_their_exclusive_time() {
        // main [0, 300) encloses two iterations [10, 110) and [110, 210): in each, work 50
        // holding a send of 10, and an allreduce of 30; init [0, 10) is in none.
        let calls = vec![
            call(0, 0, 300),
            call(1, 0, 10),
            call(2, 10, 60),
            call(3, 20, 30),
            call(4, 80, 110),
            call(2, 110, 160),
            call(3, 120, 130),
            call(4, 180, 210),
        ];
        let cut = [
            Iteration { start: 10, end: 110, mpi: 0, waiting: [0; 3] },
            Iteration { start: 110, end: 210, mpi: 0, waiting: [0; 3] },
        ];
        let got = by_region(&calls, &cut);
        assert_eq!(got, vec![(0, 2, 1, 40), (0, 3, 1, 10), (0, 4, 1, 30), (1, 2, 1, 40), (1, 3, 1, 10), (1, 4, 1, 30)]);
    }
}
