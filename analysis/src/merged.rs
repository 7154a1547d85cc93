//! A step's input put in the order of some of its columns beyond memory, for the steps that
//! read every partition of their input in one task, in an order ([`crate::steps::Reads::OnceInOrder`]).
//!
//! Each partition of such an input comes sorted. A merge of the partitions in the plan
//! (DataFusion's sort-preserving merge) reads a batch of every partition at once, and a
//! distributed engine hands each partition over whole: Ballista fetches a partition from
//! another executor into memory before it passes its first batch on, so a merge of 64
//! partitions held the whole input (at 1 B events, the delay costs' sides of every wait).
//! Here the partitions are read one after another as the engine hands them over, and the task
//! puts them in order itself, as an external merge sort does (DataFusion's own sorts spill the
//! same way): each batch goes to the end of a sorted run on disk (Arrow IPC, in an anonymous
//! scratch file), the run whose last row is the greatest not after the batch's first (a
//! partition's batches extend its own run; a batch out of order within itself is sorted
//! first), and when the input ends the runs are merged, a batch of each read at a time, into
//! the mapper that reads them in order. What is held is a batch per run and the keys of the
//! current rows; the runs are about as many as the partitions.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::row::{OwnedRow, RowConverter, Rows, SortField};
use datafusion::error::{DataFusionError, Result};

use crate::stream::{Mapper, Prepare};

/// Rows of a batch given to the mapper, at most.
const BATCH_ROWS: usize = 8192;

/// `prepare`'s mapper reading its input in the order of `columns` (ascending, NULLs first), the
/// input's partitions read as they come (see the module's notes). `what` names the analysis in
/// errors.
/// `schema` is the mapper's output.
pub fn in_order(what: &'static str, prepare: Prepare, columns: Vec<usize>, schema: SchemaRef) -> Prepare {
    Arc::new(move |held| {
        let inner = prepare(held)?;
        Ok(Box::new(InOrder::new(what, inner, columns.clone(), schema.clone())) as Box<dyn Mapper>)
    })
}

/// A sorted run on disk, being written.
struct Run {
    writer: StreamWriter<BufWriter<File>>,
    last: OwnedRow,
}

/// A run being read back in the merge: its current batch, that batch's keys and the next row.
struct Reading {
    reader: StreamReader<BufReader<File>>,
    batch: RecordBatch,
    keys: Rows,
    row: usize,
}

enum State {
    Gathering(Vec<Run>),
    Merging { runs: Vec<Reading>, heap: BinaryHeap<Reverse<(OwnedRow, usize)>> },
    Finished,
}

struct InOrder {
    what: &'static str,
    inner: Box<dyn Mapper>,
    schema: SchemaRef,
    columns: Vec<usize>,
    converter: Option<RowConverter>,
    state: State,
    /// The inner mapper's batches not yet passed on.
    pending: std::collections::VecDeque<RecordBatch>,
}

fn io_error(what: &str, doing: &str, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its input's sorted runs failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

impl InOrder {
    fn new(what: &'static str, inner: Box<dyn Mapper>, columns: Vec<usize>, schema: SchemaRef) -> InOrder {
        InOrder {
            what,
            inner,
            schema,
            columns,
            converter: None,
            state: State::Gathering(Vec::new()),
            pending: std::collections::VecDeque::new(),
        }
    }

    fn keys(&mut self, batch: &RecordBatch) -> Result<Rows> {
        if self.converter.is_none() {
            let mut fields = Vec::with_capacity(self.columns.len());
            for &c in &self.columns {
                let Some(field) = batch.schema().fields().get(c).cloned() else {
                    return Err(DataFusionError::Internal(format!("{}: no column {c} to order by", self.what)));
                };
                fields.push(SortField::new(field.data_type().clone()));
            }
            self.converter = Some(RowConverter::new(fields)?);
        }
        let columns: Vec<_> = self.columns.iter().map(|&c| batch.column(c).clone()).collect();
        let converter = self.converter.as_ref().expect("made above");
        Ok(converter.convert_columns(&columns)?)
    }

    /// Put `batch` at the end of a run.
    fn gather(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let mut keys = self.keys(batch)?;
        let mut batch = batch.clone();
        if (1..keys.num_rows()).any(|i| keys.row(i) < keys.row(i - 1)) {
            let mut order: Vec<u32> = (0..keys.num_rows() as u32).collect();
            order.sort_by(|&a, &b| keys.row(a as usize).cmp(&keys.row(b as usize)));
            let indices = arrow::array::UInt32Array::from(order);
            batch = arrow::compute::take_record_batch(&batch, &indices)?;
            keys = self.keys(&batch)?;
        }
        let (first, last) = (keys.row(0), keys.row(keys.num_rows() - 1).owned());
        let what = self.what;
        let State::Gathering(runs) = &mut self.state else {
            return Err(DataFusionError::Internal(format!("{what}: input after its end")));
        };
        // The run whose last row is the greatest not after the batch's first.
        let run = runs.iter_mut().filter(|r| r.last.row() <= first).max_by(|a, b| a.last.cmp(&b.last));
        let run = match run {
            Some(run) => run,
            None => {
                let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
                let writer = StreamWriter::try_new(BufWriter::with_capacity(1 << 20, file), &batch.schema())
                    .map_err(|e| io_error(what, "writing", e))?;
                runs.push(Run { writer, last: last.clone() });
                runs.last_mut().expect("pushed above")
            }
        };
        run.writer.write(&batch).map_err(|e| io_error(what, "writing", e))?;
        run.last = last;
        Ok(())
    }

    /// The input has ended: the runs read back, a batch of each.
    fn start_merge(&mut self) -> Result<()> {
        let what = self.what;
        let State::Gathering(runs) = std::mem::replace(&mut self.state, State::Finished) else {
            return Ok(());
        };
        let mut reading = Vec::with_capacity(runs.len());
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for run in runs {
            let mut writer = run.writer;
            writer.finish().map_err(|e| io_error(what, "writing", e))?;
            let mut file = writer
                .into_inner()
                .map_err(|e| io_error(what, "writing", e))?
                .into_inner()
                .map_err(|e| io_error(what, "writing", e.into_error()))?;
            file.seek(SeekFrom::Start(0)).map_err(|e| io_error(what, "reading", e))?;
            let reader = StreamReader::try_new(BufReader::with_capacity(1 << 16, file), None)
                .map_err(|e| io_error(what, "reading", e))?;
            let schema = reader.schema();
            let mut r = Reading { reader, batch: RecordBatch::new_empty(schema), keys: self.empty_keys()?, row: 0 };
            if self.advance(&mut r)? {
                heap.push(Reverse((r.keys.row(0).owned(), reading.len())));
                reading.push(r);
            }
        }
        self.state = State::Merging { runs: reading, heap };
        Ok(())
    }

    fn empty_keys(&self) -> Result<Rows> {
        let converter = self
            .converter
            .as_ref()
            .ok_or_else(|| DataFusionError::Internal(format!("{}: runs read back before any row came", self.what)))?;
        Ok(converter.empty_rows(0, 0))
    }

    /// The next non-empty batch of run `r` (false: the run has ended).
    fn advance(&mut self, r: &mut Reading) -> Result<bool> {
        for batch in r.reader.by_ref() {
            let batch = batch.map_err(|e| io_error(self.what, "reading", e))?;
            if batch.num_rows() == 0 {
                continue;
            }
            r.keys = self.keys(&batch)?;
            r.batch = batch;
            r.row = 0;
            return Ok(true);
        }
        Ok(false)
    }

    /// The next batch of the merge (None: the runs have ended).
    fn next_merged(&mut self) -> Result<Option<RecordBatch>> {
        let State::Merging { mut runs, mut heap } = std::mem::replace(&mut self.state, State::Finished) else {
            return Ok(None);
        };
        // The batches rows are taken from (each run's current one, and those a run left while
        // this batch was made), and each run's among them.
        let mut batches: Vec<RecordBatch> = runs.iter().map(|r| r.batch.clone()).collect();
        let mut slot: Vec<usize> = (0..runs.len()).collect();
        let mut taken: Vec<(usize, usize)> = Vec::with_capacity(BATCH_ROWS);
        while taken.len() < BATCH_ROWS {
            let Some(Reverse((_, k))) = heap.pop() else { break };
            taken.push((slot[k], runs[k].row));
            runs[k].row += 1;
            if runs[k].row < runs[k].batch.num_rows() {
                heap.push(Reverse((runs[k].keys.row(runs[k].row).owned(), k)));
            } else if self.advance(&mut runs[k])? {
                batches.push(runs[k].batch.clone());
                slot[k] = batches.len() - 1;
                heap.push(Reverse((runs[k].keys.row(0).owned(), k)));
            }
        }
        // Left merging while the heap is empty too: the next call says the runs have ended.
        self.state = State::Merging { runs, heap };
        if taken.is_empty() {
            return Ok(None);
        }
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        Ok(Some(arrow::compute::interleave_record_batch(&refs, &taken)?))
    }
}

impl Mapper for InOrder {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.gather(batch)?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.start_merge()?;
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Ok(Some(b));
            }
            match &self.state {
                State::Merging { .. } => {
                    if let Some(batch) = self.next_merged()? {
                        let out = self.inner.map(&batch)?;
                        if out.num_rows() > 0 {
                            return Ok(Some(out));
                        }
                    } else {
                        self.pending.extend(self.inner.finish()?);
                        self.state = State::Finished;
                    }
                }
                State::Gathering(_) => self.start_merge()?,
                State::Finished => return self.inner.more(),
            }
        }
    }

    fn held_bytes(&self) -> usize {
        let held = match &self.state {
            State::Merging { runs, heap } => {
                runs.iter().map(|r| r.batch.get_array_memory_size() + r.keys.size()).sum::<usize>() + 64 * heap.len()
            }
            State::Gathering(runs) => runs.len() * ((1 << 20) + 64),
            State::Finished => 0,
        };
        held + self.inner.held_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    /// Keeps every row it is given.
    struct Seen(Arc<std::sync::Mutex<Vec<(i64, String)>>>, SchemaRef);

    impl Mapper for Seen {
        fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
            let k = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            let v = batch.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            let mut seen = self.0.lock().unwrap();
            seen.extend((0..batch.num_rows()).map(|i| (k.value(i), v.value(i).to_string())));
            Ok(RecordBatch::new_empty(self.1.clone()))
        }

        /// Its answer once every row has come: how many came.
        fn finish(&mut self) -> Result<Vec<RecordBatch>> {
            let n = self.0.lock().unwrap().len() as i64;
            Ok(vec![batch(&self.1, &[(n, "rows".to_string())])])
        }
    }

    fn batch(schema: &SchemaRef, rows: &[(i64, String)]) -> RecordBatch {
        let k = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
        let v = StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str()));
        RecordBatch::try_new(schema.clone(), vec![Arc::new(k), Arc::new(v)]).unwrap()
    }

    #[test]
    fn partitions_that_come_one_batch_at_a_time_are_merged_in_order() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Utf8, false),
        ]));
        // Five partitions, each sorted by (k, v), with ties across partitions; their batches of
        // uneven sizes come interleaved, one batch of them out of order within itself.
        let mut parts: Vec<Vec<(i64, String)>> = (0..5)
            .map(|p| (0..3000i64).map(|i| ((i * 7 + p * 13) % 997 * (p + 1), format!("{p}-{i:05}"))).collect())
            .collect();
        for part in &mut parts {
            part.sort();
        }
        let mut batches: Vec<Vec<RecordBatch>> = parts
            .iter()
            .enumerate()
            .map(|(p, rows)| rows.chunks(100 + 37 * p).map(|c| batch(&schema, c)).collect())
            .collect();
        let first = batches[2][0].num_rows();
        let reversed: Vec<(i64, String)> = parts[2][..first].iter().rev().cloned().collect();
        batches[2][0] = batch(&schema, &reversed);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let inner = Seen(seen.clone(), schema.clone());
        let mut merged = InOrder::new("test", Box::new(inner), vec![0, 1], schema.clone());
        let mut next = vec![0; batches.len()];
        let mut turn = 0;
        while next.iter().zip(&batches).any(|(n, b)| *n < b.len()) {
            let p = turn % batches.len();
            turn += 1;
            if next[p] < batches[p].len() {
                assert_eq!(merged.map(&batches[p][next[p]]).unwrap().num_rows(), 0);
                next[p] += 1;
            }
        }
        assert!(merged.finish().unwrap().is_empty());
        if let State::Merging { runs, .. } = &merged.state {
            assert!(runs.len() <= 6, "{} runs for 5 partitions", runs.len());
        }
        let mut answers = Vec::new();
        while let Some(b) = merged.more().unwrap() {
            answers.push(b);
        }
        let mut expected: Vec<(i64, String)> = parts.concat();
        // The mapper's answer comes after all the rows.
        assert_eq!(answers.len(), 1);
        let counted = answers[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
        assert_eq!(counted as usize, expected.len());
        expected.sort();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), expected.len());
        assert!(*seen == expected, "the rows came out of order");
        assert!(merged.held_bytes() < 1 << 20);
    }

    #[test]
    fn no_input_gives_nothing() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Utf8, false),
        ]));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut merged = InOrder::new("test", Box::new(Seen(seen.clone(), schema.clone())), vec![0], schema);
        assert!(merged.finish().unwrap().is_empty());
        let answer = merged.more().unwrap().expect("the mapper's answer");
        assert_eq!(answer.column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0), 0);
        assert!(merged.more().unwrap().is_none());
        assert!(seen.lock().unwrap().is_empty());
    }
}
