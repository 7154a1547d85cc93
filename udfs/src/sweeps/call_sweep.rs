//! A stream's calls swept in time: every stretch of the stream's time gets the innermost call
//! open over it (`sweep`, and `sweep_tagged` carrying a tag per open call, such as its call
//! path), the time no call covers (`uncovered`), and a relation's calls gathered by stream with
//! their region names interned (`streams_named`). `time_profile`, `call_tree`, the call paths,
//! the stretches of the wait-state analyses and `lod_calls` sweep with it.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::common::exec_err;
use datafusion::error::Result;

use commdb_analysis::columns::{each_name, int64_column};

/// One call as the sweep reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub start: i64,
    pub end: i64,
    pub region: u32,
}

/// Call `emit(region, from, to)` for every stretch of a stream's time that one call is the
/// innermost open call of; `calls` sorted by start, enclosing calls before the calls they
/// enclose.
pub(crate) fn sweep(calls: &[Call], mut emit: impl FnMut(u32, i64, i64)) {
    sweep_tagged(calls, |_, _| (), |call, _, from, to| emit(call.region, from, to));
}

/// `sweep`, carrying a tag per open call: `tag(enclosing call's tag, call)` gives a call's
/// when it opens (the call path of [`crate::sweeps::call_paths`]), and `emit(call, tag, from, to)` gets the
/// innermost call's with each stretch.
pub(crate) fn sweep_tagged<T: Copy>(
    calls: &[Call],
    mut tag: impl FnMut(Option<T>, &Call) -> T,
    mut emit: impl FnMut(&Call, T, i64, i64),
) {
    let mut stack: Vec<(Call, T)> = Vec::new();
    let mut cursor = i64::MIN;
    for c in calls {
        while let Some((top, t)) = stack.last().copied().filter(|t| t.0.end <= c.start) {
            emit(&top, t, cursor.max(top.start), top.end);
            cursor = top.end;
            stack.pop();
        }
        if let Some((top, t)) = stack.last() {
            emit(top, *t, cursor.max(top.start), c.start);
        }
        cursor = c.start;
        let t = tag(stack.last().map(|s| s.1), c);
        stack.push((*c, t));
    }
    while let Some((top, t)) = stack.pop() {
        emit(&top, t, cursor.max(top.start), top.end);
        cursor = top.end;
    }
}

/// The time of [t0, t1) that none of a stream's calls (start, end) covers; `calls` is
/// reordered.
pub(crate) fn uncovered(calls: &mut [(i64, i64)], t0: i64, t1: i64) -> i64 {
    calls.sort_unstable();
    let (mut covered, mut reach) = (0i64, t0);
    for &(start, end) in calls.iter() {
        let (a, b) = (start.max(reach), end.min(t1));
        if b > a {
            covered += b - a;
        }
        reach = reach.max(end);
    }
    (t1 - t0 - covered).max(0)
}

/// The calls of a relation (columns rank, thread, region, start_ts, end_ts) by stream (rank,
/// thread), each stream's sorted for the sweep (`streams_named`).
pub(crate) type Streams = Vec<((i64, i64), Vec<Call>)>;

/// Region names interned as ids, over every chunk an analysis reads.
#[derive(Debug, Default)]
pub(crate) struct Names {
    pub names: Vec<String>,
    ids: commdb_catalog::fast_hash::FastMap<String, u32>,
}

impl Names {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        self.ids.insert(name.to_string(), self.names.len() as u32);
        self.names.push(name.to_string());
        self.names.len() as u32 - 1
    }

    /// The id of every row's region of `column` into `out` (replacing what it held), NULL
    /// as the name "NULL", in the order of the rows (`columns::each_name`).
    pub fn ids_of(&mut self, column: &ArrayRef, out: &mut Vec<u32>) -> Result<()> {
        out.clear();
        each_name(column, out, |name| self.id(name.unwrap_or("NULL")))
    }
}

/// `streams`, interning the region names in `names`. The batches are read one at a time (no
/// column is gathered whole), a dictionary-encoded region's names once per entry, and a run of
/// rows of one stream is appended without looking the stream up again; a stream's calls are
/// sorted only when they do not come in order.
pub(crate) fn streams_named(batches: &[RecordBatch], function: &str, names: &mut Names) -> Result<Streams> {
    let mut by_stream: BTreeMap<(i64, i64), Vec<Call>> = BTreeMap::new();
    // The stream whose rows are being read, taken out of `by_stream` until another comes.
    let mut current: Option<((i64, i64), Vec<Call>)> = None;
    let mut regions = Vec::new();
    for b in batches {
        let one = std::slice::from_ref(b);
        let (rank, thread) = (int64_column(one, 0)?, int64_column(one, 1)?);
        let (start, end) = (int64_column(one, 3)?, int64_column(one, 4)?);
        names.ids_of(b.column(2), &mut regions)?;
        for (i, &region) in regions.iter().enumerate() {
            if rank.is_null(i) || start.is_null(i) || end.is_null(i) {
                return exec_err!("{function}: a row has no rank, start_ts or end_ts; filter such calls out first");
            }
            let key = (rank.value(i), if thread.is_valid(i) { thread.value(i) } else { 0 });
            let call = Call { start: start.value(i), end: end.value(i), region };
            match &mut current {
                Some((k, calls)) if *k == key => calls.push(call),
                _ => {
                    if let Some((k, calls)) = current.take() {
                        by_stream.insert(k, calls);
                    }
                    let mut calls = by_stream.remove(&key).unwrap_or_default();
                    calls.push(call);
                    current = Some((key, calls));
                }
            }
        }
    }
    if let Some((k, calls)) = current {
        by_stream.insert(k, calls);
    }
    let mut out: Streams = by_stream.into_iter().collect();
    for (_, calls) in &mut out {
        // Enclosing calls first among calls that start together.
        let key = |c: &Call| (c.start, std::cmp::Reverse(c.end));
        if !calls.is_sorted_by_key(key) {
            calls.sort_by_key(key);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{DictionaryArray, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::Int32Type;
    use std::sync::Arc;

    /// A call's row: rank, thread, region, start, end.
    type Row<'a> = (i64, i64, Option<&'a str>, i64, i64);
    /// A stream and its calls as (start, end, region id).
    type Got = Vec<((i64, i64), Vec<(i64, i64, u32)>)>;

    /// A batch of calls (rank, thread, region, start, end), the region dictionary-encoded
    /// over `entries` when given.
    fn batch(rows: &[Row], entries: Option<&[&str]>) -> RecordBatch {
        let region: ArrayRef = match entries {
            Some(entries) => {
                let keys: Int32Array = rows
                    .iter()
                    .map(|r| r.2.map(|name| entries.iter().position(|e| *e == name).unwrap() as i32))
                    .collect();
                Arc::new(
                    DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(entries.to_vec()))).unwrap(),
                )
            }
            None => Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
        };
        let int =
            |f: fn(&Row) -> i64| -> ArrayRef { Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>())) };
        RecordBatch::try_from_iter([
            ("rank", int(|r| r.0)),
            ("thread", int(|r| r.1)),
            ("region", region),
            ("start_ts", int(|r| r.3)),
            ("end_ts", int(|r| r.4)),
        ])
        .unwrap()
    }

    #[test]
    fn streams_gather_their_calls_across_batches_in_order_with_names_in_order_of_use() {
        // The dictionary lists its entries in another order than the rows use them; rank 1's
        // rows are split by rank 2's and come out of order.
        let entries: &[&str] = &["unused", "MPI_Send", "main"];
        let first =
            batch(&[(1, 0, Some("main"), 0, 100), (1, 0, Some("MPI_Send"), 50, 60), (2, 0, None, 5, 6)], Some(entries));
        let second = batch(&[(1, 0, Some("MPI_Send"), 10, 20), (2, 0, Some("main"), 0, 10)], None);
        let mut names = Names::default();
        let streams = streams_named(&[first, second], "test", &mut names).unwrap();
        assert_eq!(names.names, vec!["main", "MPI_Send", "NULL"], "ids in order of first use");
        let got: Got = streams
            .into_iter()
            .map(|(k, calls)| (k, calls.iter().map(|c| (c.start, c.end, c.region)).collect()))
            .collect();
        assert_eq!(
            got,
            vec![((1, 0), vec![(0, 100, 0), (10, 20, 1), (50, 60, 1)]), ((2, 0), vec![(0, 10, 0), (5, 6, 2)])]
        );
    }

    #[test]
    fn a_call_without_a_rank_or_time_is_an_error_that_says_so() {
        let int = |v: Option<i64>| -> ArrayRef { Arc::new(Int64Array::from(vec![v])) };
        let bad = RecordBatch::try_from_iter([
            ("rank", int(Some(1))),
            ("thread", int(Some(0))),
            ("region", Arc::new(StringArray::from(vec!["main"])) as ArrayRef),
            ("start_ts", int(None)),
            ("end_ts", int(Some(100))),
        ])
        .unwrap();
        let err = streams_named(&[bad], "call_tree", &mut Names::default()).unwrap_err().to_string();
        assert!(err.contains("call_tree: a row has no rank, start_ts or end_ts"), "{err}");
    }
}
