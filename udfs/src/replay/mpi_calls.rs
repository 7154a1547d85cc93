//! A rank's outermost MPI calls, as the replay and the delta histograms see them: per rank,
//! the calls whose region starts with `MPI_` (on any thread, in start order; a call nested in
//! another MPI call is part of it), each with the compute time before it (since the previous
//! MPI call, or the rank's first call of any region), read from a chunk of the calls.

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::call_store::MAX_CALLS;
use commdb_analysis::columns::RegionIds;
use commdb_catalog::fast_hash::FastMap;

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

/// Call `f` with every row's index and integer value of `col` (None for NULL), typed once per
/// column rather than per row; a column of another type is cast to Int64 first.
fn each_int(col: &ArrayRef, mut f: impl FnMut(usize, Option<i64>) -> Result<()>) -> Result<()> {
    fn typed<T: ArrowPrimitiveType>(
        a: &PrimitiveArray<T>,
        f: &mut impl FnMut(usize, Option<i64>) -> Result<()>,
    ) -> Result<()>
    where
        T::Native: Into<i64>,
    {
        for i in 0..a.len() {
            f(i, a.is_valid(i).then(|| a.value(i).into()))?;
        }
        Ok(())
    }
    match col.data_type() {
        DataType::Int64 => typed(col.as_primitive::<Int64Type>(), &mut f),
        DataType::Int32 => typed(col.as_primitive::<Int32Type>(), &mut f),
        _ => typed(cast(col, &DataType::Int64)?.as_primitive::<Int64Type>(), &mut f),
    }
}

/// An MPI call as read: its rank's index, start, end, region and row.
type Read = (usize, i64, i64, u32, usize);

/// `mpi` ordered by rank and start: placed rank by rank (counting), then each rank's calls
/// sorted, so a cancelled query stops between ranks instead of after one sort of every call.
fn by_rank_and_start(mpi: Vec<Read>, ranks: usize, function: &str) -> Result<Vec<Read>> {
    let mut first = vec![0usize; ranks + 1];
    for call in &mpi {
        first[call.0 + 1] += 1;
    }
    for r in 0..ranks {
        first[r + 1] += first[r];
    }
    let mut next = first.clone();
    let mut placed = vec![(0usize, 0i64, 0i64, 0u32, 0usize); mpi.len()];
    for (i, call) in mpi.into_iter().enumerate() {
        commdb_catalog::interrupt::check_every(i, function)?;
        placed[next[call.0]] = call;
        next[call.0] += 1;
    }
    for r in 0..ranks {
        commdb_catalog::interrupt::check(function)?;
        let of_rank = &mut placed[first[r]..first[r + 1]];
        if !of_rank.is_sorted() {
            of_rank.sort_unstable();
        }
    }
    Ok(placed)
}

impl MpiCalls {
    /// From batches whose columns are rank, region, start_ts, end_ts. Rows that come in rank
    /// and start order (a chunk of a store's calls) are taken as they come; others are sorted.
    pub fn read(calls_in: &[RecordBatch], function: &str) -> Result<MpiCalls> {
        // The ranks: a chunk's rows come rank after rank, so runs of one rank are gathered first.
        let mut ranks: Vec<i64> = Vec::new();
        for b in calls_in {
            each_int(b.column(0), |_, r| {
                if let Some(r) = r
                    && ranks.last() != Some(&r)
                {
                    ranks.push(r);
                }
                Ok(())
            })?;
        }
        ranks.sort_unstable();
        ranks.dedup();
        let index: FastMap<i64, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
        let mut regions: Vec<String> = Vec::new();
        let mut region_ids = RegionIds::new(|name: &str| name.starts_with("MPI_"));
        let mut origins = vec![i64::MAX; ranks.len()];
        let mut ends = vec![i64::MIN; ranks.len()];
        let rows: usize = calls_in.iter().map(RecordBatch::num_rows).sum();
        let mut mpi: Vec<Read> = Vec::with_capacity(rows);
        let mut in_order = true;
        let (mut first_row, mut last, mut mpi_region) = (0usize, None::<(i64, usize)>, Vec::new());
        for b in calls_in {
            let (start, end) = (cast(b.column(2), &DataType::Int64)?, cast(b.column(3), &DataType::Int64)?);
            let (start, end) = (start.as_primitive::<Int64Type>(), end.as_primitive::<Int64Type>());
            mpi_region.clear();
            region_ids.append(b.column(1), &mut regions, &mut mpi_region)?;
            each_int(b.column(0), |i, rank_id| {
                let row = first_row + i;
                commdb_catalog::interrupt::check_every(row, function)?;
                let Some(rank_id) = rank_id else { return Ok(()) };
                if start.is_null(i) || end.is_null(i) {
                    return Ok(());
                }
                let r = match last {
                    Some((id, r)) if id == rank_id => r,
                    _ => {
                        let r = index[&rank_id];
                        last = Some((rank_id, r));
                        r
                    }
                };
                let (s, e) = (start.value(i), end.value(i));
                origins[r] = origins[r].min(s);
                ends[r] = ends[r].max(e);
                if let Some(region) = mpi_region[i] {
                    let call = (r, s, e, region, row);
                    in_order &= mpi.last().is_none_or(|before| *before < call);
                    mpi.push(call);
                }
                Ok(())
            })?;
            first_row += b.num_rows();
        }
        if !in_order {
            mpi = by_rank_and_start(mpi, ranks.len(), function)?;
        }
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
