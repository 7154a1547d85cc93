//! Each wait's synchronisation interval as it crosses to the tasks of its two ranks (from the
//! intervals' step to the sides' step of [`super::steps`]), packed as bytes
//! ([`crate::packed`]): a row per rank of a block of waits, up to [`ROW_SIDES`] of its sides in
//! a row. As seven Arrow columns a side took 57 bytes; packed, each number is a LEB128 varint
//! ([`crate::varint`]) of its difference from what is near it (the partner from the rank, the
//! id and the start from the side before in the row, the end and the synchronisation from the
//! start), a few bytes each.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::error::Result;

use super::steps::{DELAYER, WAITER};
use crate::varint::{get_signed, put_signed};

/// The sides a row holds at most: a batch the engine gathers from many rows stays small.
const ROW_SIDES: usize = 512;

/// What the rows carry, as an error names it.
const CARRIED: &str = "the waits' synchronisation intervals";

/// A side of a wait between ranks, routed to its rank: which side (`WAITER` or `DELAYER`), the
/// other side's rank, the wait's id, start and end, and the side's time of the two ranks'
/// latest synchronisation before the wait (None: none is known, the interval starts at the
/// side's first instant).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct IntervalSide {
    pub side: i8,
    pub partner: i64,
    pub id: i64,
    pub start: i64,
    pub end: i64,
    pub from: Option<i64>,
}

/// The rows: `rank`, `sides` (how many it holds) and `packed`.
pub(super) fn schema() -> SchemaRef {
    crate::packed::schema("rank", "sides")
}

/// `sides` (rank, side) as rows of [`schema`], a rank's in the order given.
pub(super) fn pack(sides: &mut [(i64, IntervalSide)]) -> Result<RecordBatch> {
    sides.sort_by_key(|s| s.0);
    let mut rows = crate::packed::Rows::default();
    let mut bytes = Vec::new();
    for rank in sides.chunk_by(|a, b| a.0 == b.0) {
        for chunk in rank.chunks(ROW_SIDES) {
            bytes.clear();
            let (mut id, mut start) = (0i64, 0i64);
            for &(r, s) in chunk {
                bytes.push(u8::from(s.side == DELAYER) | (u8::from(s.from.is_some()) << 1));
                put_signed(&mut bytes, s.partner.wrapping_sub(r));
                put_signed(&mut bytes, s.id.wrapping_sub(id));
                put_signed(&mut bytes, s.start.wrapping_sub(start));
                put_signed(&mut bytes, s.end.wrapping_sub(s.start));
                if let Some(from) = s.from {
                    put_signed(&mut bytes, s.start.wrapping_sub(from));
                }
                (id, start) = (s.id, s.start);
            }
            rows.push(chunk[0].0, chunk.len(), &bytes);
        }
    }
    rows.finish(schema())
}

/// Each side of `batch` (of [`schema`]) with its rank, given to `each`; a row that does not
/// read back is an error.
pub(super) fn each_side(batch: &RecordBatch, mut each: impl FnMut(i64, IntervalSide)) -> Result<()> {
    let what = "delay_costs";
    crate::packed::each_row(what, CARRIED, batch, |rank, count, bytes| {
        let damaged = || crate::packed::damaged(what, CARRIED);
        let at = &mut 0;
        let (mut id, mut start) = (0i64, 0i64);
        for _ in 0..count {
            let head = *bytes.get(*at).ok_or_else(damaged)?;
            *at += 1;
            if head > 3 {
                return Err(damaged());
            }
            let mut next = || get_signed(bytes, at).ok_or_else(damaged);
            let partner = rank.wrapping_add(next()?);
            id = id.wrapping_add(next()?);
            start = start.wrapping_add(next()?);
            let end = start.wrapping_add(next()?);
            let from = if head & 2 != 0 { Some(start.wrapping_sub(next()?)) } else { None };
            let side = if head & 1 != 0 { DELAYER } else { WAITER };
            each(rank, IntervalSide { side, partner, id, start, end, from });
        }
        if *at != bytes.len() {
            return Err(damaged());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_come_back_by_rank_in_their_order() {
        let mut sides = Vec::new();
        for k in 0..3_000i64 {
            let start = 1_000_000_000 + 37 * k * k % 100_003;
            let side = |rank, side, partner, from| {
                (rank, IntervalSide { side, partner, id: k, start, end: start + 40_000 + k, from })
            };
            let (w, d) = ((k * 7) % 5, (k * 3) % 1024);
            sides.push(side(w, WAITER, d, (k % 3 != 0).then_some(start - 5_000)));
            sides.push(side(d, DELAYER, w, (k % 3 != 0).then_some(start - 9_000 - k)));
        }
        sides.push((
            i64::MAX,
            IntervalSide {
                side: DELAYER,
                partner: i64::MIN,
                id: -1,
                start: i64::MIN,
                end: i64::MAX,
                from: Some(i64::MAX),
            },
        ));
        let mut expected = sides.clone();
        expected.sort_by_key(|s| s.0);
        let batch = pack(&mut sides).unwrap();
        // A rank's 600 sides take two rows.
        assert!(batch.num_rows() > 1024 && batch.num_rows() < 1_100, "{} rows", batch.num_rows());
        let mut got = Vec::new();
        each_side(&batch, |rank, s| got.push((rank, s))).unwrap();
        assert_eq!(got, expected);
        let bytes: usize = batch.column(2).to_data().buffers().iter().map(|b| b.len()).sum();
        assert!(bytes < 20 * got.len(), "{bytes} bytes for {} sides", got.len());
    }

    #[test]
    fn damaged_rows_are_errors() {
        let side = IntervalSide { side: WAITER, partner: 1, id: 2, start: 3, end: 4, from: None };
        let batch = pack(&mut [(0, side)]).unwrap();
        let mut rows = crate::packed::Rows::default();
        let bytes =
            batch.column(2).as_any().downcast_ref::<arrow::array::LargeBinaryArray>().unwrap().value(0).to_vec();
        rows.push(0, 2, &bytes);
        rows.push(0, 1, &[bytes.as_slice(), &[0]].concat());
        rows.push(0, 1, &[&[9u8], &bytes[1..]].concat());
        let rows = rows.finish(schema()).unwrap();
        for r in 0..3 {
            let e = each_side(&rows.slice(r, 1), |_, _| {}).unwrap_err().to_string();
            assert!(e.contains("delay_costs: the waits' synchronisation intervals did not read back"), "{e}");
        }
    }
}
