//! A rank's outermost MPI calls, as the replay and the delta histograms see them: per rank,
//! the calls whose region starts with `MPI_` (on any thread, in start order; a call nested in
//! another MPI call is part of it), each with the compute time before it (since the previous
//! MPI call, or the rank's first call of any region), read from a chunk of the calls.
//!
//! A chunk whose rows already come in rank and start order (a store's calls do) is read in one
//! pass that hands each rank's calls on as its rows end (`RankReader`), through buffers kept
//! from chunk to chunk; others are gathered whole and sorted first (`MpiCalls::read`). Both give
//! the same calls.

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use datafusion::common::DataFusionError;
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

/// A rank's run as `RankReader` hands it on: its id, the start of its first call of any region
/// and the end of its last (the start when it has none with times), and its outermost MPI calls.
#[derive(Debug)]
pub(crate) struct RankRun<'a> {
    pub rank: i64,
    pub origin: i64,
    pub end: i64,
    pub calls: &'a [Call],
}

/// The rank whose rows `RankReader` is reading: the start of its first row with times, the
/// latest end so far, and the end of its last outermost MPI call.
struct OpenRank {
    rank: i64,
    origin: Option<i64>,
    end: i64,
    mpi_end: Option<i64>,
}

impl OpenRank {
    /// Its run, its rows ended (a rank without times starts and ends at i64::MAX, as
    /// `MpiCalls::read` has it).
    fn run<'a>(&self, calls: &'a [Call]) -> RankRun<'a> {
        let origin = self.origin.unwrap_or(i64::MAX);
        RankRun { rank: self.rank, origin, end: self.end.max(origin), calls }
    }
}

fn is_mpi(name: &str) -> bool {
    name.starts_with("MPI_")
}

/// Reads chunks of the calls rank by rank (see the module's notes), its region names and
/// buffers kept from chunk to chunk: a call's `region` indexes `regions`, which only grows.
pub(crate) struct RankReader {
    pub regions: Vec<String>,
    region_ids: RegionIds<fn(&str) -> bool>,
    mpi_region: Vec<Option<u32>>,
    calls: Vec<Call>,
}

impl std::fmt::Debug for RankReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankReader").field("regions", &self.regions.len()).finish_non_exhaustive()
    }
}

/// A chunk's rank, start and end columns as Int64, batch by batch.
type Times = Vec<(PrimitiveArray<Int64Type>, PrimitiveArray<Int64Type>, PrimitiveArray<Int64Type>)>;

fn int64(col: &ArrayRef) -> Result<PrimitiveArray<Int64Type>> {
    Ok(cast(col, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

impl Default for RankReader {
    fn default() -> Self {
        RankReader {
            regions: Vec::new(),
            region_ids: RegionIds::new(is_mpi as fn(&str) -> bool),
            mpi_region: Vec::new(),
            calls: Vec::new(),
        }
    }
}

impl RankReader {
    /// Hand every rank of the chunk `calls_in` (columns rank, region, start_ts, end_ts) to
    /// `each`, in rank order, with the same runs and calls as `MpiCalls::read` finds.
    pub fn each_rank(
        &mut self,
        calls_in: &[RecordBatch],
        function: &str,
        mut each: impl FnMut(RankRun<'_>, &[String]) -> Result<()>,
    ) -> Result<()> {
        let times: Times = calls_in
            .iter()
            .map(|b| Ok((int64(b.column(0))?, int64(b.column(2))?, int64(b.column(3))?)))
            .collect::<Result<_>>()?;
        self.mpi_region.clear();
        for b in calls_in {
            self.region_ids.append(b.column(1), &mut self.regions, &mut self.mpi_region)?;
        }
        if !in_rank_and_start_order(&times, &self.mpi_region) {
            return self.each_rank_sorted(calls_in, function, each);
        }
        let mut open: Option<OpenRank> = None;
        self.calls.clear();
        let mut row = 0usize;
        for (ranks, starts, ends) in &times {
            for i in 0..ranks.len() {
                commdb_catalog::interrupt::check_every(row, function)?;
                let region = self.mpi_region[row];
                row += 1;
                if ranks.is_null(i) {
                    continue;
                }
                let rank = ranks.value(i);
                if open.as_ref().is_none_or(|o| o.rank != rank) {
                    if let Some(o) = open.take() {
                        each(o.run(&self.calls), &self.regions)?;
                        self.calls.clear();
                    }
                    open = Some(OpenRank { rank, origin: None, end: i64::MIN, mpi_end: None });
                }
                if starts.is_null(i) || ends.is_null(i) {
                    continue;
                }
                let (s, e) = (starts.value(i), ends.value(i));
                let o = open.as_mut().expect("a rank is open");
                // Rows in start order: the first with times starts the rank.
                let origin = *o.origin.get_or_insert(s);
                o.end = o.end.max(e);
                let Some(region) = region else { continue };
                let before = match o.mpi_end {
                    Some(pe) if s < pe => continue, // nested in the previous MPI call
                    Some(pe) => pe,
                    None => origin,
                };
                self.calls.push(Call { region, row: row - 1, start: s, end: e, compute: (s - before).max(0) });
                o.mpi_end = Some(e);
            }
        }
        if let Some(o) = open {
            each(o.run(&self.calls), &self.regions)?;
        }
        Ok(())
    }

    /// The same for a chunk in another order: gathered whole and sorted, its regions renamed
    /// to the reader's.
    fn each_rank_sorted(
        &mut self,
        calls_in: &[RecordBatch],
        function: &str,
        mut each: impl FnMut(RankRun<'_>, &[String]) -> Result<()>,
    ) -> Result<()> {
        let m = MpiCalls::read(calls_in, function)?;
        let renamed: Vec<u32> = m
            .regions
            .iter()
            .map(|name| {
                self.region_ids
                    .id(name, &mut self.regions)
                    .ok_or_else(|| DataFusionError::Internal(format!("{function}: region {name} is not an MPI call's")))
            })
            .collect::<Result<_>>()?;
        for r in 0..m.ranks.len() {
            self.calls.clear();
            self.calls.extend(
                m.calls[m.first[r]..m.first[r + 1]].iter().map(|c| Call { region: renamed[c.region as usize], ..*c }),
            );
            each(
                RankRun { rank: m.ranks[r], origin: m.origins[r], end: m.ends[r], calls: &self.calls },
                &self.regions,
            )?;
        }
        Ok(())
    }
}

/// Whether the rows come rank after rank (a rank's rows together, ranks ascending), each rank's
/// rows with times in start order, and its MPI calls in start and end order: then one pass in
/// row order finds what sorting would.
fn in_rank_and_start_order(times: &Times, mpi_region: &[Option<u32>]) -> bool {
    let (mut rank, mut start, mut mpi) = (None::<i64>, i64::MIN, (i64::MIN, i64::MIN));
    let mut row = 0usize;
    for (ranks, starts, ends) in times {
        for i in 0..ranks.len() {
            let region = mpi_region[row];
            row += 1;
            if ranks.is_null(i) {
                continue;
            }
            let r = ranks.value(i);
            if rank != Some(r) {
                if rank.is_some_and(|before| before > r) {
                    return false;
                }
                (rank, start, mpi) = (Some(r), i64::MIN, (i64::MIN, i64::MIN));
            }
            if starts.is_null(i) || ends.is_null(i) {
                continue;
            }
            let (s, e) = (starts.value(i), ends.value(i));
            if s < start {
                return false;
            }
            start = s;
            if region.is_some() {
                if (s, e) < mpi {
                    return false;
                }
                mpi = (s, e);
            }
        }
    }
    true
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    /// A rank's run as names and numbers, to compare the readers.
    type Run = (i64, i64, i64, Vec<(String, i64, i64, i64)>);

    /// A row of the calls: rank, region, start, end.
    pub(in crate::replay) type Row<'a> = (Option<i64>, &'a str, Option<i64>, Option<i64>);

    /// The calls' columns the replay reads, a row of each of `rows`.
    pub(in crate::replay) fn batch(rows: &[Row<'_>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, true),
            Field::new("region", DataType::Utf8, true),
            Field::new("start_ts", DataType::Int64, true),
            Field::new("end_ts", DataType::Int64, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(rows.iter().map(|r| r.0).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|r| Some(r.1)).collect::<StringArray>()),
            Arc::new(rows.iter().map(|r| r.2).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|r| r.3).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    fn by_reader(reader: &mut RankReader, batches: &[RecordBatch]) -> Vec<Run> {
        let mut runs = Vec::new();
        reader
            .each_rank(batches, "test", |run, names| {
                let calls = run.calls.iter().map(|c| (names[c.region as usize].clone(), c.start, c.end, c.compute));
                runs.push((run.rank, run.origin, run.end, calls.collect()));
                Ok(())
            })
            .unwrap();
        runs
    }

    fn by_sorting(batches: &[RecordBatch]) -> Vec<Run> {
        let m = MpiCalls::read(batches, "test").unwrap();
        (0..m.ranks.len())
            .map(|r| {
                let calls = m.calls[m.first[r]..m.first[r + 1]]
                    .iter()
                    .map(|c| (m.regions[c.region as usize].clone(), c.start, c.end, c.compute));
                (m.ranks[r], m.origins[r], m.ends[r], calls.collect())
            })
            .collect()
    }

    #[test]
    fn a_chunk_in_rank_order_is_read_in_one_pass_as_sorting_reads_it() {
        let rows = [
            (Some(0), "main", Some(0), Some(100)),
            (Some(0), "MPI_Init", Some(2), Some(5)),
            (Some(0), "compute", Some(6), Some(9)),
            (Some(0), "MPI_Send", Some(10), Some(20)),
            (Some(0), "MPI_Isend", Some(12), Some(14)), // nested in the MPI_Send
            (None, "MPI_Recv", Some(13), Some(15)),     // no rank
            (Some(0), "MPI_Recv", Some(20), Some(30)),  // touches the Send's end
            (Some(0), "MPI_Wait", None, Some(40)),      // no start
            (Some(2), "MPI_Barrier", Some(5), Some(8)), // no enclosing region
            (Some(2), "work", Some(9), Some(50)),
            (Some(2), "MPI_Finalize", Some(60), Some(61)),
            (Some(3), "MPI_Send", None, None),   // a rank without times
            (Some(4), "work", Some(1), Some(3)), // no MPI call
        ];
        let (first, second) = rows.split_at(7);
        let in_order = [batch(first), batch(second)];
        let expected: Vec<Run> = vec![
            (
                0,
                0,
                100,
                vec![("MPI_Init".into(), 2, 5, 2), ("MPI_Send".into(), 10, 20, 5), ("MPI_Recv".into(), 20, 30, 0)],
            ),
            (2, 5, 61, vec![("MPI_Barrier".into(), 5, 8, 0), ("MPI_Finalize".into(), 60, 61, 52)]),
            (3, i64::MAX, i64::MAX, vec![]),
            (4, 1, 3, vec![]),
        ];
        let mut reader = RankReader::default();
        assert_eq!(by_reader(&mut reader, &in_order), expected);
        assert_eq!(by_sorting(&in_order), expected);
        // The same rows in another order: gathered and sorted, the same runs; the reader's
        // region names stay the same from chunk to chunk.
        let mut shuffled = rows.to_vec();
        shuffled.reverse();
        shuffled.swap(0, 5);
        let shuffled = [batch(&shuffled)];
        assert!(!in_rank_and_start_order(
            &shuffled
                .iter()
                .map(|b| (int64(b.column(0)).unwrap(), int64(b.column(2)).unwrap(), int64(b.column(3)).unwrap()))
                .collect(),
            &[None; 13]
        ));
        assert_eq!(by_reader(&mut reader, &shuffled), expected);
        assert_eq!(by_sorting(&shuffled), expected);
        assert_eq!(reader.regions.len(), 7, "each MPI region named once: {:?}", reader.regions);
    }
}
