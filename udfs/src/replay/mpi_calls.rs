//! A rank's outermost MPI calls, as the replay and the delta histograms see them: per rank,
//! the calls whose region starts with `MPI_` (on any thread, in start order; a call nested in
//! another MPI call is part of it), each with the compute time before it (since the previous
//! MPI call, or the rank's first call of any region), read from a chunk of the calls.

use arrow::array::{Array, RecordBatch};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::call_store::MAX_CALLS;
use crate::common::{FastMap, int64_column, region_ids};

/// An outermost MPI call, as read from a chunk of the calls.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// Index into the region names.
    pub region: u32,
    /// Row of the call in the input batches (all batches counted in order).
    pub row: usize,
    pub start: i64,
    pub end: i64,
    /// Compute time before it (since the previous MPI call or the origin).
    pub compute: i64,
}

/// Every rank's outermost MPI calls in order, with the compute time before each.
#[derive(Debug)]
pub(crate) struct MpiCalls {
    pub ranks: Vec<i64>,
    pub regions: Vec<String>,
    pub origins: Vec<i64>,
    /// The end of each rank's last call of any region.
    pub ends: Vec<i64>,
    /// Rank after rank: rank r's calls are calls[first[r]..first[r + 1]].
    pub calls: Vec<Call>,
    pub first: Vec<usize>,
}

impl MpiCalls {
    /// From batches whose columns are rank, region, start_ts, end_ts.
    pub fn read(calls_in: &[RecordBatch], function: &str) -> Result<MpiCalls> {
        let rank = int64_column(calls_in, 0)?;
        let (start, end) = (int64_column(calls_in, 2)?, int64_column(calls_in, 3)?);
        let mut regions: Vec<String> = Vec::new();
        let mpi_region = region_ids(calls_in, 1, |name| name.starts_with("MPI_"), &mut regions)?;
        let mut ranks: Vec<i64> = rank.iter().flatten().collect();
        ranks.sort_unstable();
        ranks.dedup();
        let index: FastMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
        let mut origins = vec![i64::MAX; ranks.len()];
        let mut ends = vec![i64::MIN; ranks.len()];
        let mut mpi: Vec<(usize, i64, i64, u32, usize)> = Vec::new();
        for row in 0..rank.len() {
            commdb_catalog::interrupt::check_every(row, function)?;
            if rank.is_null(row) || start.is_null(row) || end.is_null(row) {
                continue;
            }
            let r = index[&rank.value(row)];
            origins[r] = origins[r].min(start.value(row));
            ends[r] = ends[r].max(end.value(row));
            if let Some(region) = mpi_region[row] {
                mpi.push((r, start.value(row), end.value(row), region, row));
            }
        }
        mpi.sort_unstable();
        if mpi.len() >= MAX_CALLS as usize {
            return exec_err!("{function}: {} MPI calls are more than it handles; narrow the relation", mpi.len());
        }
        let mut calls: Vec<Call> = Vec::with_capacity(mpi.len());
        let mut first = vec![0usize; ranks.len() + 1];
        let mut prev: Option<(usize, i64)> = None;
        for (i, &(r, s, e, region, row)) in mpi.iter().enumerate() {
            commdb_catalog::interrupt::check_every(i, function)?;
            let prev_end = match prev {
                Some((pr, pe)) if pr == r => {
                    if s < pe {
                        continue; // nested in the previous MPI call
                    }
                    pe
                }
                _ => origins[r],
            };
            calls.push(Call { region, row, start: s, end: e, compute: (s - prev_end).max(0) });
            first[r + 1] = calls.len();
            prev = Some((r, e));
        }
        for r in 0..ranks.len() {
            first[r + 1] = first[r + 1].max(first[r]);
        }
        for r in 0..ranks.len() {
            if ends[r] < origins[r] {
                ends[r] = origins[r];
            }
        }
        Ok(MpiCalls { ranks, regions, origins, ends, calls, first })
    }
}
