//! A stream's calls swept in time: every stretch of the stream's time gets the innermost call
//! open over it (`sweep`, and `sweep_tagged` carrying a tag per open call, such as its call
//! path), the time no call covers (`uncovered`), and a relation's calls gathered by stream with
//! their region names interned (`streams_named`). `time_profile`, `call_tree`, the call paths,
//! the stretches of the wait-state analyses and `lod_calls` sweep with it.

use std::collections::BTreeMap;

use arrow::array::{Array, RecordBatch};
use datafusion::common::exec_err;
use datafusion::error::Result;

use commdb_analysis::columns::{int64_column, text_column};

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
}

/// `streams`, interning the region names in `names`.
pub(crate) fn streams_named(batches: &[RecordBatch], function: &str, names: &mut Names) -> Result<Streams> {
    let (rank, thread, region) = (int64_column(batches, 0)?, int64_column(batches, 1)?, text_column(batches, 2)?);
    let (start, end) = (int64_column(batches, 3)?, int64_column(batches, 4)?);
    let mut by_stream: BTreeMap<(i64, i64), Vec<Call>> = BTreeMap::new();
    for i in 0..rank.len() {
        if rank.is_null(i) || start.is_null(i) || end.is_null(i) {
            return exec_err!("{function}: a row has no rank, start_ts or end_ts; filter such calls out first");
        }
        let id = names.id(if region.is_valid(i) { region.value(i) } else { "NULL" });
        let key = (rank.value(i), if thread.is_valid(i) { thread.value(i) } else { 0 });
        by_stream.entry(key).or_default().push(Call { start: start.value(i), end: end.value(i), region: id });
    }
    let mut out: Streams = by_stream.into_iter().collect();
    for (_, calls) in &mut out {
        // Enclosing calls first among calls that start together.
        calls.sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
    }
    Ok(out)
}
