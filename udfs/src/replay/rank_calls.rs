//! Each rank's outermost MPI calls as one row, for the replay's last step on a distributed
//! engine ([`super::steps`]): the task that places the receives of a part of whole ranks of
//! the calls has read its ranks' MPI calls as the replay in one process does
//! ([`super::mpi_calls::RankReader`]) and gives a row per rank beside its placed items (a row
//! of kind `RANK` of [`super::placing::items`]: rank, origin, end, calls), and the replay's one
//! task puts the rows into its call store as they come, in any order of ranks. The calls are
//! bytes: the names of the regions the rank's calls use (each its length, then its UTF-8),
//! then per call its compute (its start less the previous call's end, or the origin), its
//! duration and its region's number among those names, each in as few bytes as it needs
//! ([`crate::varint`]; about 4 bytes a call, as in the call store's file).

use arrow::array::RecordBatch;
use arrow::array::{Array, AsArray, LargeBinaryBuilder};
use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MpiCall};
use super::mpi_calls::RankRun;
use super::placing::{CALLS, RANK};
use crate::varint;
use commdb_analysis::columns::int64_column;

/// Encodes ranks' MPI calls as rows, its buffers kept from rank to rank.
#[derive(Default)]
pub(super) struct RankEncoder {
    /// Each reader's region's number among the rank's names (u32::MAX: not used yet).
    local: Vec<u32>,
    used: Vec<u32>,
    body: Vec<u8>,
    bytes: Vec<u8>,
    /// The ranks encoded since the last `take`: rank, origin, end, and their calls.
    pub ranks: Vec<(i64, i64, i64)>,
    pub calls: LargeBinaryBuilder,
}

impl std::fmt::Debug for RankEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankEncoder").field("ranks", &self.ranks.len()).finish_non_exhaustive()
    }
}

impl RankEncoder {
    /// Encode `run`, its calls' regions indexing `names`.
    pub fn push(&mut self, run: &RankRun<'_>, names: &[String]) {
        let RankEncoder { local, used, body, bytes, ranks, calls } = self;
        local.resize(names.len(), u32::MAX);
        used.clear();
        body.clear();
        for c in run.calls {
            let r = c.region as usize;
            if local[r] == u32::MAX {
                local[r] = used.len() as u32;
                used.push(c.region);
            }
            varint::put_signed(body, c.compute);
            varint::put_signed(body, c.end - c.start);
            varint::put(body, u64::from(local[r]));
        }
        bytes.clear();
        varint::put(bytes, used.len() as u64);
        for &r in used.iter() {
            let name = names[r as usize].as_bytes();
            varint::put(bytes, name.len() as u64);
            bytes.extend_from_slice(name);
            local[r as usize] = u32::MAX;
        }
        varint::put(bytes, run.calls.len() as u64);
        bytes.extend_from_slice(body);
        calls.append_value(&bytes);
        ranks.push((run.rank, run.origin, run.end));
    }
}

/// The ranks of the rows of kind `RANK` of a batch of [`super::placing::items`] into `store`
/// (other rows are left), `calls` a buffer kept from rank to rank.
pub(super) fn push_rows(
    what: &str,
    batch: &RecordBatch,
    store: &mut CallStore,
    calls: &mut Vec<MpiCall>,
) -> Result<()> {
    let one = std::slice::from_ref(batch);
    let (kinds, ranks, origins, ends) =
        (int64_column(one, 0)?, int64_column(one, 1)?, int64_column(one, 2)?, int64_column(one, 3)?);
    let bytes = batch
        .column(CALLS)
        .as_binary_opt::<i64>()
        .ok_or_else(|| DataFusionError::Internal(format!("{what}: a rank's MPI calls are not bytes")))?;
    let mut names = Vec::new();
    for i in (0..batch.num_rows()).filter(|&i| kinds.is_valid(i) && kinds.value(i) == RANK) {
        if ranks.is_null(i) || origins.is_null(i) || ends.is_null(i) || bytes.is_null(i) {
            return Err(DataFusionError::Internal(format!("{what}: a rank's row of MPI calls has a NULL")));
        }
        let rank = ranks.value(i);
        let damaged = || DataFusionError::Internal(format!("{what}: rank {rank}'s MPI calls did not read back"));
        let (b, mut at) = (bytes.value(i), 0usize);
        names.clear();
        for _ in 0..varint::get(b, &mut at).ok_or_else(damaged)? {
            let len = usize::try_from(varint::get(b, &mut at).ok_or_else(damaged)?).map_err(|_| damaged())?;
            let name = b.get(at..at.checked_add(len).ok_or_else(damaged)?).ok_or_else(damaged)?;
            let name = std::str::from_utf8(name).map_err(|_| damaged())?;
            names.push(store.region(name));
            at += len;
        }
        let count = varint::get(b, &mut at).ok_or_else(damaged)?;
        calls.clear();
        let mut previous_end = origins.value(i);
        for _ in 0..count {
            let compute = varint::get_signed(b, &mut at).ok_or_else(damaged)?;
            let duration = varint::get_signed(b, &mut at).ok_or_else(damaged)?;
            let region = usize::try_from(varint::get(b, &mut at).ok_or_else(damaged)?).map_err(|_| damaged())?;
            let region = *names.get(region).ok_or_else(damaged)?;
            let start = previous_end + compute;
            let end = start + duration;
            calls.push(MpiCall { start, end, compute, region });
            previous_end = end;
        }
        if at != b.len() {
            return Err(damaged());
        }
        store.push(rank, origins.value(i), ends.value(i), calls)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::mpi_calls::RankReader;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::DataType;
    use commdb_analysis::columns::schema_of;
    use std::sync::Arc;

    /// Calls of two ranks (one nesting a call in an MPI call, one with no MPI call) as rows,
    /// read back into a store: the same calls as the store takes from the calls themselves.
    #[test]
    fn rank_rows_give_the_store_the_calls_it_reads_itself() {
        let calls = RecordBatch::try_new(
            schema_of(&[
                ("rank", DataType::Int64, true),
                ("region", DataType::Utf8, true),
                ("start_ts", DataType::Int64, true),
                ("end_ts", DataType::Int64, true),
            ]),
            vec![
                Arc::new(Int64Array::from(vec![0, 0, 0, 0, 0, 3, 3])),
                Arc::new(StringArray::from(vec![
                    "main",
                    "MPI_Irecv",
                    "MPI_Waitall",
                    "MPI_Send",
                    "MPI_Irecv",
                    "main",
                    "compute",
                ])),
                Arc::new(Int64Array::from(vec![0, 10, 30, 35, 60, 5, 6])),
                Arc::new(Int64Array::from(vec![100, 20, 50, 40, 70, 90, 80])),
            ],
        )
        .unwrap();
        let mut encoder = RankEncoder::default();
        RankReader::default()
            .each_rank(std::slice::from_ref(&calls), "test", |run, names| {
                encoder.push(&run, names);
                Ok(())
            })
            .unwrap();
        let out = super::super::placing::with_ranks(&[], &mut encoder).unwrap();
        assert_eq!(out.num_rows(), 2);

        let mut from_rows = CallStore::new("test").unwrap();
        let mut buffer = Vec::new();
        push_rows("test", &out, &mut from_rows, &mut buffer).unwrap();
        let mut from_calls = CallStore::new("test").unwrap();
        let (mut regions, mut buffer) = (Vec::new(), Vec::new());
        super::super::sweep::push_ranks(
            "test",
            &mut RankReader::default(),
            &[calls],
            &mut from_calls,
            &mut regions,
            &mut buffer,
            |_, _| (),
        )
        .unwrap();
        from_rows.finish_writing().unwrap();
        from_calls.finish_writing().unwrap();
        assert_eq!(from_rows.len(), 3, "the Irecv, the Waitall and the Irecv after the Send nested in it");
        assert_eq!(from_rows.len(), from_calls.len());
        for (a, b) in from_rows.ranks.iter().zip(&from_calls.ranks) {
            assert_eq!((a.rank, a.origin, a.end, a.first, a.count), (b.rank, b.origin, b.end, b.first, b.count));
        }
        for ri in 0..2 {
            let r = &from_calls.ranks[ri];
            for number in r.first..r.first + r.count {
                let (a, b) = (from_rows.call(ri, number).unwrap(), from_calls.call(ri, number).unwrap());
                assert_eq!(a, b);
                assert_eq!(from_rows.regions[a.region as usize], from_calls.regions[b.region as usize]);
            }
        }

        // A row cut short is refused, naming the rank.
        let cut = {
            let whole = out.column(CALLS).as_binary::<i64>().value(0).to_vec();
            let mut encoder = RankEncoder::default();
            encoder.calls.append_value(&whole[..whole.len() - 1]);
            encoder.ranks.push((7, 0, 100));
            super::super::placing::with_ranks(&[], &mut encoder).unwrap()
        };
        let err = push_rows("test", &cut, &mut CallStore::new("test").unwrap(), &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("rank 7's MPI calls did not read back"), "{err}");
    }
}
