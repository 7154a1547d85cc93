//! Each rank's outermost MPI calls as rows, for the replay's last step on a distributed
//! engine ([`super::steps`]): the task that places the receives of a part of whole ranks of
//! the calls has read its ranks' MPI calls as the replay in one process does
//! ([`super::mpi_calls::RankReader`]) and gives them on beside its placed items, and the
//! replay's one task puts each rank into its call store once its last row has come, in any
//! order of ranks ([`RankRows`]).
//!
//! A rank's calls are cut into rows of about [`super::placing::ROW_BYTES`] each (rows of kind
//! `RANK_PART` of [`super::placing::items`], the last of kind `RANK`; each row: rank, origin,
//! end, calls): the engine's shuffle read gathers what it fetched into batches of a number of
//! rows, whatever their bytes (Ballista 55: the session's batch size, 8,192 rows), so a row of
//! a whole rank made the replay's task hold many ranks' calls at once. A row's calls are
//! bytes: the names of the regions its calls use (each its length, then its UTF-8), then per
//! call its compute (its start less the previous call's end, or the origin), its duration and
//! its region's number among those names, each in as few bytes as it needs
//! ([`crate::varint`]; about 4 bytes a call, as in the call store's file).

use arrow::array::RecordBatch;
use arrow::array::{Array, AsArray, LargeBinaryBuilder};
use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MpiCall};
use super::mpi_calls::RankRun;
use super::placing::{CALLS, RANK, RANK_PART, ROW_BYTES};
use crate::varint;
use commdb_analysis::columns::int64_column;
use commdb_catalog::fast_hash::FastMap;

/// A row of a rank's calls: its kind (`RANK`: the rank's last, `RANK_PART`: more follow),
/// the rank, its origin and its end.
pub(super) type RankRow = (i64, i64, i64, i64);

/// Encodes ranks' MPI calls as rows, its buffers kept from rank to rank.
#[derive(Default)]
pub(super) struct RankEncoder {
    /// Each reader's region's number among the row's names (u32::MAX: not used yet).
    local: Vec<u32>,
    used: Vec<u32>,
    body: Vec<u8>,
    bytes: Vec<u8>,
    /// The rows encoded since the last `take`, and their calls.
    pub ranks: Vec<RankRow>,
    pub calls: LargeBinaryBuilder,
}

impl std::fmt::Debug for RankEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankEncoder").field("rows", &self.ranks.len()).finish_non_exhaustive()
    }
}

impl RankEncoder {
    /// Encode `run` as rows of about [`ROW_BYTES`] of calls (one row when it has none), its
    /// calls' regions indexing `names`.
    pub fn push(&mut self, run: &RankRun<'_>, names: &[String]) {
        self.local.resize(names.len(), u32::MAX);
        let mut in_row = 0u64;
        for c in run.calls {
            let r = c.region as usize;
            if self.local[r] == u32::MAX {
                self.local[r] = self.used.len() as u32;
                self.used.push(c.region);
            }
            varint::put_signed(&mut self.body, c.compute);
            varint::put_signed(&mut self.body, c.end - c.start);
            varint::put(&mut self.body, u64::from(self.local[r]));
            in_row += 1;
            if self.body.len() >= ROW_BYTES {
                self.row(RANK_PART, run, names, in_row);
                in_row = 0;
            }
        }
        self.row(RANK, run, names, in_row);
    }

    /// The `count` calls encoded since the last row, as a row of `kind`.
    fn row(&mut self, kind: i64, run: &RankRun<'_>, names: &[String], count: u64) {
        let RankEncoder { local, used, body, bytes, ranks, calls } = self;
        bytes.clear();
        varint::put(bytes, used.len() as u64);
        for &r in used.iter() {
            let name = names[r as usize].as_bytes();
            varint::put(bytes, name.len() as u64);
            bytes.extend_from_slice(name);
            local[r as usize] = u32::MAX;
        }
        varint::put(bytes, count);
        bytes.extend_from_slice(body);
        calls.append_value(&bytes);
        ranks.push((kind, run.rank, run.origin, run.end));
        used.clear();
        body.clear();
    }
}

/// Reads the rows of ranks' calls into a call store: a rank goes in when its last row has
/// come, its rows before that held (a rank's rows come in order from the one task that read
/// it; other ranks' rows may come between them).
#[derive(Default)]
pub(super) struct RankRows {
    /// Ranks whose last row has not come: their origin, end and calls so far.
    open: FastMap<i64, (i64, i64, Vec<MpiCall>)>,
    /// The calls of a rank of one row, kept from rank to rank.
    calls: Vec<MpiCall>,
    names: Vec<u32>,
}

impl RankRows {
    /// The rows of kind `RANK` and `RANK_PART` of a batch of [`super::placing::items`] (other
    /// rows are left): each rank whose last row this is into `store`.
    pub fn push(&mut self, what: &str, batch: &RecordBatch, store: &mut CallStore) -> Result<()> {
        let one = std::slice::from_ref(batch);
        let (kinds, ranks, origins, ends) =
            (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?, int64_column(one, 3)?);
        let bytes = batch
            .column(CALLS)
            .as_binary_opt::<i64>()
            .ok_or_else(|| DataFusionError::Internal(format!("{what}: a rank's MPI calls are not bytes")))?;
        for i in 0..batch.num_rows() {
            let kind = kinds.is_valid(i).then(|| kinds.value(i));
            if kind != Some(RANK) && kind != Some(RANK_PART) {
                continue;
            }
            if ranks.is_null(i) || origins.is_null(i) || ends.is_null(i) || bytes.is_null(i) {
                return Err(DataFusionError::Internal(format!("{what}: a rank's row of MPI calls has a NULL")));
            }
            let (rank, origin, end) = (ranks.value(i), origins.value(i), ends.value(i));
            let damaged = || DataFusionError::Internal(format!("{what}: rank {rank}'s MPI calls did not read back"));
            let mut open = self.open.remove(&rank);
            if open.as_ref().is_some_and(|(o, e, _)| (*o, *e) != (origin, end)) {
                return Err(damaged());
            }
            let calls = match open.as_mut() {
                Some((_, _, calls)) => calls,
                None => {
                    self.calls.clear();
                    &mut self.calls
                }
            };
            read_row(bytes.value(i), origin, store, &mut self.names, calls).ok_or_else(damaged)?;
            if kind == Some(RANK) {
                store.push(rank, origin, end, calls)?;
            } else {
                let calls = std::mem::take(calls);
                self.open.insert(rank, (origin, end, calls));
            }
        }
        Ok(())
    }

    /// Every rank's rows have come whole (else an error naming a rank whose last row did not).
    pub fn finish(&self, what: &str) -> Result<()> {
        match self.open.keys().min() {
            Some(rank) => {
                Err(DataFusionError::Internal(format!("{what}: rank {rank}'s MPI calls stopped before their last row")))
            }
            None => Ok(()),
        }
    }
}

/// The calls of a row's bytes `b` appended to `calls` (the first following the last of
/// `calls`, or `origin`), their regions numbered in `store`, `names` a buffer (None: the bytes
/// do not read back whole).
fn read_row(
    b: &[u8],
    origin: i64,
    store: &mut CallStore,
    names: &mut Vec<u32>,
    calls: &mut Vec<MpiCall>,
) -> Option<()> {
    let mut at = 0usize;
    names.clear();
    for _ in 0..varint::get(b, &mut at)? {
        let len = usize::try_from(varint::get(b, &mut at)?).ok()?;
        let name = std::str::from_utf8(b.get(at..at.checked_add(len)?)?).ok()?;
        names.push(store.region(name));
        at += len;
    }
    let count = varint::get(b, &mut at)?;
    let mut previous_end = calls.last().map_or(origin, |c| c.end);
    for _ in 0..count {
        let compute = varint::get_signed(b, &mut at)?;
        let duration = varint::get_signed(b, &mut at)?;
        let region = *names.get(usize::try_from(varint::get(b, &mut at)?).ok()?)?;
        let start = previous_end.checked_add(compute)?;
        let end = start.checked_add(duration)?;
        calls.push(MpiCall { start, end, compute, region });
        previous_end = end;
    }
    (at == b.len()).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::mpi_calls::RankReader;
    use crate::replay::placing::with_ranks;
    use arrow::array::Int64Array;

    /// Calls (rank, region, start_ts, end_ts) as a batch of the calls' columns the replay reads.
    fn calls_batch(rows: &[(i64, &str, i64, i64)]) -> RecordBatch {
        let rows: Vec<_> =
            rows.iter().map(|&(rank, region, start, end)| (Some(rank), region, Some(start), Some(end))).collect();
        crate::replay::mpi_calls::tests::batch(&rows)
    }

    /// The rows of kind `RANK` and `RANK_PART` that `calls` give, in one batch of items.
    fn rank_rows(calls: &RecordBatch) -> RecordBatch {
        let mut encoder = RankEncoder::default();
        RankReader::default()
            .each_rank(std::slice::from_ref(calls), "test", |run, names| {
                encoder.push(&run, names);
                Ok(())
            })
            .unwrap();
        with_ranks(&[], &mut encoder).unwrap()
    }

    /// `calls` in a store as the replay in one process puts them there.
    fn store_of(calls: &RecordBatch) -> CallStore {
        let mut store = CallStore::new("test").unwrap();
        let (mut regions, mut buffer) = (Vec::new(), Vec::new());
        super::super::sweep::push_ranks(
            "test",
            &mut RankReader::default(),
            std::slice::from_ref(calls),
            &mut store,
            &mut regions,
            &mut buffer,
            |_, _| (),
        )
        .unwrap();
        store.finish_writing().unwrap();
        store
    }

    /// Rank `ra` of `a` and `rb` of `b` the same: run, count of calls, calls and their names.
    fn assert_same_rank(a: &mut CallStore, ra: usize, b: &mut CallStore, rb: usize) {
        let (x, y) = (&a.ranks[ra], &b.ranks[rb]);
        assert_eq!((x.rank, x.origin, x.end, x.count), (y.rank, y.origin, y.end, y.count));
        let (fa, fb, count) = (x.first, y.first, x.count);
        for k in 0..count {
            let (c, d) = (a.call(ra, fa + k).unwrap(), b.call(rb, fb + k).unwrap());
            assert_eq!((c.start, c.end, c.compute), (d.start, d.end, d.compute));
            assert_eq!(a.regions[c.region as usize], b.regions[d.region as usize]);
        }
    }

    /// The same ranks, in the same order, with the same calls and regions' names.
    fn assert_same(a: &mut CallStore, b: &mut CallStore) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a.ranks.len(), b.ranks.len());
        for ri in 0..a.ranks.len() {
            assert_eq!(a.ranks[ri].first, b.ranks[ri].first);
            assert_same_rank(a, ri, b, ri);
        }
    }

    /// Calls of two ranks (one nesting a call in an MPI call, one with no MPI call) as rows,
    /// read back into a store: the same calls as the store takes from the calls themselves.
    #[test]
    fn rank_rows_give_the_store_the_calls_it_reads_itself() {
        let calls = calls_batch(&[
            (0, "main", 0, 100),
            (0, "MPI_Irecv", 10, 20),
            (0, "MPI_Waitall", 30, 50),
            (0, "MPI_Send", 35, 40),
            (0, "MPI_Irecv", 60, 70),
            (3, "main", 5, 90),
            (3, "compute", 6, 80),
        ]);
        let out = rank_rows(&calls);
        assert_eq!(out.num_rows(), 2, "a row a rank");

        let mut from_rows = CallStore::new("test").unwrap();
        let mut reader = RankRows::default();
        reader.push("test", &out, &mut from_rows).unwrap();
        reader.finish("test").unwrap();
        from_rows.finish_writing().unwrap();
        assert_eq!(from_rows.len(), 3, "the Irecv, the Waitall and the Irecv after the Send nested in it");
        assert_same(&mut from_rows, &mut store_of(&calls));

        // A row cut short is refused, naming the rank.
        let cut = {
            let whole = out.column(CALLS).as_binary::<i64>().value(0).to_vec();
            let mut encoder = RankEncoder::default();
            encoder.calls.append_value(&whole[..whole.len() - 1]);
            encoder.ranks.push((RANK, 7, 0, 100));
            with_ranks(&[], &mut encoder).unwrap()
        };
        let err = RankRows::default().push("test", &cut, &mut CallStore::new("test").unwrap()).unwrap_err();
        assert!(err.to_string().contains("rank 7's MPI calls did not read back"), "{err}");
    }

    /// A rank of many calls crosses as rows of about `ROW_BYTES`, each with the names of the
    /// regions it uses; its rows read back whole in any interleaving with another rank's, and
    /// a rank whose last row does not come, or whose rows disagree on its run, is refused.
    #[test]
    fn a_long_rank_crosses_in_rows_of_bounded_bytes() {
        let regions = ["MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Barrier", "MPI_Wait"];
        let mut rows = Vec::new();
        for rank in [2i64, 9] {
            let n = if rank == 2 { 20_000 } else { 3_000 };
            rows.push((rank, "main", 0, 1 << 40));
            let mut t = 1_000 * rank;
            for k in 0..n {
                let (compute, duration) = ((k * 7919) % 100_003, (k * 104_729) % 9_973 + 1);
                t += compute;
                rows.push((rank, regions[(k as usize * k as usize) % regions.len()], t, t + duration));
                t += duration;
            }
        }
        let calls = calls_batch(&rows);
        let out = rank_rows(&calls);
        let kinds = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let bytes = out.column(CALLS).as_binary::<i64>();
        assert!(out.num_rows() > 10, "{} rows", out.num_rows());
        for i in 0..out.num_rows() {
            assert!(bytes.value(i).len() < ROW_BYTES + 64, "row {i}: {} bytes", bytes.value(i).len());
        }
        assert_eq!((0..out.num_rows()).filter(|&i| kinds.value(i) == RANK).count(), 2, "a last row per rank");
        let mut expected = store_of(&calls);

        // The rows one at a time: the first half of rank 2's, rank 9's, the rest of rank 2's.
        let ranks = out.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let (of_2, of_9): (Vec<usize>, Vec<usize>) = (0..out.num_rows()).partition(|&i| ranks.value(i) == 2);
        let (early, late) = of_2.split_at(of_2.len() / 2);
        let order: Vec<usize> = early.iter().chain(&of_9).chain(late).copied().collect();
        assert_eq!(order.len(), out.num_rows());
        let mut from_rows = CallStore::new("test").unwrap();
        let mut reader = RankRows::default();
        for &i in &order {
            reader.push("test", &out.slice(i, 1), &mut from_rows).unwrap();
        }
        reader.finish("test").unwrap();
        from_rows.finish_writing().unwrap();
        let mut by_rank: Vec<usize> = (0..from_rows.ranks.len()).collect();
        by_rank.sort_by_key(|&ri| from_rows.ranks[ri].rank);
        assert_eq!(from_rows.len(), expected.len());
        assert_eq!(by_rank.iter().map(|&ri| from_rows.ranks[ri].rank).collect::<Vec<_>>(), vec![2, 9]);
        for (ri, er) in by_rank.into_iter().zip(0..expected.ranks.len()) {
            assert_same_rank(&mut from_rows, ri, &mut expected, er);
        }

        // Without its last row, the rank is named when the rows end.
        let mut reader = RankRows::default();
        let mut store = CallStore::new("test").unwrap();
        for &i in order.iter().filter(|&&i| i != of_2[of_2.len() - 1]) {
            reader.push("test", &out.slice(i, 1), &mut store).unwrap();
        }
        let err = reader.finish("ideal_replay").unwrap_err().to_string();
        assert!(err.contains("ideal_replay: rank 2's MPI calls stopped before their last row"), "{err}");

        // A later row of the rank with another origin does not read back.
        let mut encoder = RankEncoder::default();
        let raw = out.column(CALLS).as_binary::<i64>();
        encoder.calls.append_value(raw.value(0));
        encoder.calls.append_value(raw.value(1));
        encoder.ranks.push((RANK_PART, 2, 0, 1 << 40));
        encoder.ranks.push((RANK, 2, 5, 1 << 40));
        let changed = with_ranks(&[], &mut encoder).unwrap();
        let err = RankRows::default().push("test", &changed, &mut CallStore::new("test").unwrap()).unwrap_err();
        assert!(err.to_string().contains("rank 2's MPI calls did not read back"), "{err}");
    }
}
