//! The `events` table built a column at a time, as queries read them. A query that scans
//! `events` before any query has needed the whole table (a derived table, or every column)
//! has the reader decode the events again and build only the columns the scan projects that no
//! query built before; each column built is kept, so a later query builds only what it adds.
//! `SELECT count(*) FROM events` builds no column at all: the rows of each part are all it
//! reads. The parts (one per location of an OTF2 archive) are those of the whole table, so
//! the columns of different decodings line up row for row, and the whole table, once a query
//! needs it, replaces them.
//!
//! The columns are the arrays `RawEvents::into_columns` makes, so a column built here equals
//! the same column of the whole table (`tests/slt/event_columns.slt` compares them).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};

use crate::error::{Error, Result};
use crate::events::ColumnSet;
use crate::model;
use crate::trace::Warnings;

/// Some columns of the `events` table, part by part.
#[derive(Debug, Default)]
pub struct ColumnParts {
    /// Rows of each part, in (rank, thread) order; a part is a batch of the table.
    rows: Vec<usize>,
    /// Each built column (by its index in the table's schema): its array in each part.
    columns: BTreeMap<usize, Vec<ArrayRef>>,
}

/// What decoding some columns gives: them, and the problems decoding found (the same as a
/// decoding of the whole table finds).
#[derive(Debug, Default)]
pub struct DecodedColumns {
    pub parts: ColumnParts,
    pub warnings: Warnings,
}

impl ColumnParts {
    /// Parts of `rows` rows, no column built.
    pub fn new(rows: Vec<usize>) -> Self {
        ColumnParts { rows, columns: BTreeMap::new() }
    }

    /// Add column `index` (its arrays, one per part; as many rows each as the part has).
    pub fn insert(&mut self, index: usize, arrays: Vec<ArrayRef>) -> Result<()> {
        let lengths: Vec<usize> = arrays.iter().map(|a| a.len()).collect();
        if lengths != self.rows {
            return Err(Error::Engine(format!(
                "column {index} of the events table was decoded into {} parts of {} rows, the table has {} parts of {} rows",
                lengths.len(),
                lengths.iter().sum::<usize>(),
                self.rows.len(),
                self.rows.iter().sum::<usize>()
            )));
        }
        self.columns.insert(index, arrays);
        Ok(())
    }

    /// The columns built so far.
    pub fn built(&self) -> ColumnSet {
        let indices: Vec<usize> = self.columns.keys().copied().collect();
        ColumnSet::of(&indices).unwrap_or_default()
    }

    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.rows.iter().sum()
    }

    /// Add the columns of `other`, decoded from the same events (the same parts): an error,
    /// and nothing added, when its parts differ.
    pub fn merge(&mut self, other: ColumnParts) -> Result<()> {
        if other.rows != self.rows {
            return Err(Error::Engine(format!(
                "decoding the events again gave {} events in {} parts, the first decoding {} in {}",
                other.rows(),
                other.rows.len(),
                self.rows(),
                self.rows.len()
            )));
        }
        self.columns.extend(other.columns);
        Ok(())
    }

    /// The table projected on `projection` (indices into its schema, each built), one batch
    /// per part; an empty projection gives batches of rows without columns.
    pub fn batches(&self, projection: &[usize]) -> Result<Vec<RecordBatch>> {
        let schema = Arc::new(model::EVENTS.schema().project(projection)?);
        let mut chosen = Vec::with_capacity(projection.len());
        for i in projection {
            let arrays = self
                .columns
                .get(i)
                .ok_or_else(|| Error::Engine(format!("column {i} of the events table was read before it was built")))?;
            chosen.push(arrays);
        }
        self.rows
            .iter()
            .enumerate()
            .map(|(part, &rows)| {
                let columns = chosen.iter().map(|arrays| arrays[part].clone()).collect();
                let options = RecordBatchOptions::new().with_row_count(Some(rows));
                Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventKind, RawEvents};

    fn part(rank: i32, n: i64) -> RawEvents {
        let mut e = RawEvents::default();
        for ts in 0..n {
            let mut ev = Event::new(rank, 0, ts * 10 + i64::from(rank), EventKind::Send);
            (ev.peer, ev.bytes) = (rank + 1, ts);
            e.push(ev);
        }
        e
    }

    /// Columns built in two decodings, then read together, equal the whole table's.
    #[test]
    fn columns_built_apart_equal_the_whole_tables() {
        let whole: Vec<RecordBatch> = [part(0, 3), part(1, 5)].map(|p| p.into_batch(&[]).unwrap()).to_vec();
        let decode = |wanted: &[usize]| {
            let set = ColumnSet::of(wanted).unwrap();
            let mut parts = ColumnParts::new(vec![3, 5]);
            let built: Vec<Vec<(usize, ArrayRef)>> =
                [part(0, 3), part(1, 5)].map(|p| p.into_columns(set, &[]).unwrap()).to_vec();
            for (k, &i) in wanted.iter().enumerate() {
                parts.insert(i, built.iter().map(|b| b[k].1.clone()).collect()).unwrap();
            }
            parts
        };
        let mut parts = decode(&[]);
        let counted = parts.batches(&[]).unwrap();
        assert_eq!(counted.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [3, 5]);
        assert_eq!(counted[0].num_columns(), 0);
        parts.merge(decode(&[3, 6])).unwrap();
        parts.merge(decode(&[2, 9, 13])).unwrap();
        assert_eq!(parts.built(), ColumnSet::of(&[2, 3, 6, 9, 13]).unwrap());
        let projection = [13, 2, 6, 3, 9];
        let read = parts.batches(&projection).unwrap();
        for (a, b) in read.iter().zip(&whole) {
            assert_eq!(a, &b.project(&projection).unwrap());
        }
        let missing = parts.batches(&[4]).unwrap_err().to_string();
        assert!(missing.contains("column 4"), "{missing}");
        let other = ColumnParts::new(vec![3, 4]);
        let differ = parts.merge(other).unwrap_err().to_string();
        assert!(differ.contains("7 events in 2 parts, the first decoding 8 in 2"), "{differ}");
        assert!(ColumnSet::of(&[14]).is_err());
    }
}
