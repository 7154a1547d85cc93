//! The row of a call in a chunk of the calls, by its `call_id`: the calls that `call_tree` and
//! `compute_deltas` read name their parent by id, and each row looks its parent's row up. A
//! store's calls are numbered one after another from 0, so a chunk's ids fill a range and a
//! table by offset answers without hashing; ids spread wider than four times the rows go
//! through a hash map.

use arrow::array::{Array, Int64Array};

use commdb_catalog::fast_hash::FastMap;

/// Row of each call_id: a dense table when the ids are, a hash map otherwise (a repeated id
/// gives its last row).
pub(crate) enum RowOf {
    Dense { first: i64, rows: Vec<u32> },
    Sparse(FastMap<i64, u32>),
}

impl RowOf {
    pub fn new(id: &Int64Array) -> RowOf {
        let n = id.len();
        let valid = || (0..n).filter(|&i| id.is_valid(i));
        let (lo, hi) = valid().fold((i64::MAX, i64::MIN), |(l, h), i| (l.min(id.value(i)), h.max(id.value(i))));
        let span = hi.checked_sub(lo).and_then(|d| usize::try_from(d).ok());
        match span {
            Some(d) if d < 4 * n.max(1) => {
                let mut rows = vec![u32::MAX; d + 1];
                for i in valid() {
                    rows[(id.value(i) - lo) as usize] = i as u32;
                }
                RowOf::Dense { first: lo, rows }
            }
            _ => RowOf::Sparse(valid().map(|i| (id.value(i), i as u32)).collect()),
        }
    }

    /// The row of `call_id`, if a row has it.
    pub fn get(&self, call_id: i64) -> Option<u32> {
        match self {
            RowOf::Dense { first, rows } => {
                let at = usize::try_from(call_id.checked_sub(*first)?).ok()?;
                rows.get(at).copied().filter(|r| *r != u32::MAX)
            }
            RowOf::Sparse(map) => map.get(&call_id).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_found_by_id_dense_or_sparse() {
        let dense = Int64Array::from(vec![Some(10), Some(12), None, Some(11), Some(12)]);
        let rows = RowOf::new(&dense);
        assert!(matches!(rows, RowOf::Dense { .. }));
        assert_eq!([9, 10, 11, 12, 13].map(|id| rows.get(id)), [None, Some(0), Some(3), Some(4), None]);
        let sparse = Int64Array::from_iter_values((0..9).map(|i| i * 1_000_003));
        let rows = RowOf::new(&sparse);
        assert!(matches!(rows, RowOf::Sparse(_)));
        assert_eq!(rows.get(2_000_006), Some(2));
        assert_eq!(rows.get(5), None);
        assert_eq!(RowOf::new(&Int64Array::from_iter_values(0..9)).get(9), None);
        assert_eq!(RowOf::new(&Int64Array::from(Vec::<i64>::new())).get(0), None);
    }
}
