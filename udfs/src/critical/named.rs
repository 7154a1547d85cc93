//! The critical path's pieces named where their calls lie, and the path (or its profile) made
//! of them, on a distributed engine ([`crate::critical::path_steps`]): each piece the walk
//! covered is cut at the stretches of its location (swept again, as in one process) and takes
//! their regions and call paths; a piece of a merged stretch takes each stretch's kind as the
//! walk would have there (compute, or mpi in an MPI call it did not leave). The pieces, in time
//! order, then merge into segments by the rule of the walk in one process (`crate::critical::
//! walk`): one location, kind and call path, without a gap.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::{Answer, Segment};
use crate::critical::stretch_store::Sweeper;
use crate::sweeps::stretches::{path_name, region_name};
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::columns::{bool_column, int64_column, schema_of, text_column};
use commdb_analysis::stream::{Folder, Mapper, StartFold};

/// The kinds of a segment of the path.
const KINDS: [&str; 6] = ["compute", "mpi", "transfer", "omp", "device", "queue"];

/// The path's pieces with their regions and call paths (rank, thread, start, end, kind,
/// region, path), and the profile's means per call path passed on (`mean` not NULL).
pub(super) fn named_schema() -> SchemaRef {
    schema_of(&[
        ("rank", DataType::Int64, false),
        ("thread", DataType::Int64, false),
        ("start", DataType::Int64, false),
        ("end", DataType::Int64, false),
        ("kind", DataType::Utf8, true),
        ("region", DataType::Utf8, true),
        ("path", DataType::Utf8, true),
        ("mean", DataType::Float64, true),
    ])
}

/// A piece of the path the walk gave: start, end, its kind (None: by its stretches), whether
/// its stretches name it.
type Piece = (i64, i64, Option<&'static str>, bool);

/// A piece of the path named: rank, thread, start, end, kind, region, call path.
type Named = (i64, i64, i64, i64, &'static str, Option<String>, Option<String>);

/// The kind `text` names.
fn kind_of(text: &str) -> Result<&'static str> {
    match KINDS.iter().find(|k| **k == text) {
        Some(k) => Ok(k),
        None => exec_err!("critical_path: a piece of the path of the unknown kind '{text}'"),
    }
}

/// Folds the pieces of the task's ranks (input 1) and the threads' records (2 on).
#[derive(Default)]
struct FoldPieces {
    pieces: HashMap<(i64, i64), Vec<Piece>>,
    means: Vec<(Option<String>, f64)>,
    records: ThreadRecords,
}

pub(super) fn named_start() -> StartFold {
    Arc::new(|| Box::<FoldPieces>::default())
}

impl Folder for FoldPieces {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        if input != 1 {
            // The threads' records are inputs 3 on of the analysis.
            return self.records.fold_input(input + 1, batch);
        }
        let b = std::slice::from_ref(batch);
        let (rank, thread, start, end) =
            (int64_column(b, 0)?, int64_column(b, 1)?, int64_column(b, 2)?, int64_column(b, 3)?);
        let (kind, named, path) = (text_column(b, 4)?, bool_column(b, 5)?, text_column(b, 6)?);
        let Some(mean) = batch.column(7).as_any().downcast_ref::<Float64Array>() else {
            return exec_err!("critical_path: the pieces' column mean is not float64");
        };
        for r in 0..batch.num_rows() {
            if mean.is_valid(r) {
                self.means.push((path.is_valid(r).then(|| path.value(r).to_string()), mean.value(r)));
                continue;
            }
            let kind = if kind.is_valid(r) { Some(kind_of(kind.value(r))?) } else { None };
            let piece = (start.value(r), end.value(r), kind, named.value(r));
            self.pieces.entry((rank.value(r), thread.value(r))).or_default().push(piece);
        }
        Ok(())
    }

    fn held_bytes(&self) -> usize {
        self.pieces.values().map(|p| 32 * p.len() + 48).sum::<usize>() + self.records.held_bytes()
    }

    fn mapper_counts_the_fold(&self) -> bool {
        true
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldPieces { pieces, means, records } = *self;
        Ok(Box::new(NamePieces { pieces, means, sweeper: Sweeper::new(records) }))
    }
}

/// Sweeps a chunk of whole ranks' calls and names the pieces of their locations.
struct NamePieces {
    pieces: HashMap<(i64, i64), Vec<Piece>>,
    means: Vec<(Option<String>, f64)>,
    sweeper: Sweeper,
}

impl Mapper for NamePieces {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let mut out: Vec<Named> = Vec::new();
        let pieces = &mut self.pieces;
        self.sweeper.sweep("critical_path", batches, |rank, threads, _, names, paths| {
            for th in threads {
                let Some(list) = pieces.remove(&(rank, th.thread)) else { continue };
                let stretches = &th.stretches;
                for (start, end, kind, named) in list {
                    let first = stretches.partition_point(|s| s.to <= start);
                    // Before the location's first stretch (the padding of a rank's time from
                    // the run's first instant), or a queue: no region.
                    if !named || stretches.get(first).is_none_or(|s| s.from >= end) {
                        out.push((rank, th.thread, start, end, kind.unwrap_or("compute"), None, None));
                        continue;
                    }
                    if start < stretches[first].from {
                        out.push((
                            rank,
                            th.thread,
                            start,
                            stretches[first].from,
                            kind.unwrap_or("compute"),
                            None,
                            None,
                        ));
                    }
                    for s in stretches[first..].iter().take_while(|s| s.from < end) {
                        let kind = kind.unwrap_or(if s.call_start.is_some() { "mpi" } else { "compute" });
                        let region = region_name(&names.names, s.region).map(str::to_string);
                        let path = path_name(paths, s.path).map(str::to_string);
                        out.push((rank, th.thread, s.from.max(start), s.to.min(end), kind, region, path));
                    }
                }
            }
            Ok(())
        })?;
        named_batch(&out, &[])
    }

    fn held_bytes(&self) -> usize {
        self.pieces.values().map(|p| 32 * p.len() + 48).sum::<usize>() + self.sweeper.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        // A piece left is of a location without calls here: the answer's step finds the gap.
        // The means come under the run's first rank, to its task only.
        Ok(vec![named_batch(&[], &self.means)?])
    }
}

fn named_batch(pieces: &[Named], means: &[(Option<String>, f64)]) -> Result<RecordBatch> {
    let n = pieces.len() + means.len();
    let int = |f: fn(&Named) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(pieces.iter().map(f).chain(std::iter::repeat_n(0, means.len()))))
    };
    let mut kinds: Vec<Option<&str>> = pieces.iter().map(|p| Some(p.4)).collect();
    let mut regions: Vec<Option<&str>> = pieces.iter().map(|p| p.5.as_deref()).collect();
    let mut paths: Vec<Option<&str>> = pieces.iter().map(|p| p.6.as_deref()).collect();
    let mut mean: Vec<Option<f64>> = vec![None; pieces.len()];
    for (path, m) in means {
        kinds.push(None);
        regions.push(None);
        paths.push(path.as_deref());
        mean.push(Some(*m));
    }
    debug_assert_eq!(kinds.len(), n);
    let columns: Vec<ArrayRef> = vec![
        int(|p| p.0),
        int(|p| p.1),
        int(|p| p.2),
        int(|p| p.3),
        Arc::new(StringArray::from(kinds)),
        Arc::new(StringArray::from(regions)),
        Arc::new(StringArray::from(paths)),
        Arc::new(Float64Array::from(mean)),
    ];
    Ok(RecordBatch::try_new(named_schema(), columns)?)
}

/// The answer from the named pieces of every task (`batches`): the path, or its profile.
pub(super) fn answer_of(answer: Answer, batches: &[RecordBatch], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut pieces: Vec<Named> = Vec::new();
    let mut means: HashMap<Option<String>, f64> = HashMap::new();
    for batch in batches {
        let b = std::slice::from_ref(batch);
        let (rank, thread, start, end) =
            (int64_column(b, 0)?, int64_column(b, 1)?, int64_column(b, 2)?, int64_column(b, 3)?);
        let (kind, region, path) = (text_column(b, 4)?, text_column(b, 5)?, text_column(b, 6)?);
        let Some(mean) = batch.column(7).as_any().downcast_ref::<Float64Array>() else {
            return exec_err!("critical_path: the named pieces' column mean is not float64");
        };
        let text = |a: &StringArray, r: usize| a.is_valid(r).then(|| a.value(r).to_string());
        for r in 0..batch.num_rows() {
            if mean.is_valid(r) {
                means.insert(text(&path, r), mean.value(r));
                continue;
            }
            let kind = kind_of(if kind.is_valid(r) { kind.value(r) } else { "" })?;
            pieces.push((
                rank.value(r),
                thread.value(r),
                start.value(r),
                end.value(r),
                kind,
                text(&region, r),
                text(&path, r),
            ));
        }
    }
    // Backward, as the walk gave them: each piece ends where the one after it starts.
    pieces.sort_unstable_by_key(|p| std::cmp::Reverse(p.2));
    let mut backward: Vec<Segment> = Vec::new();
    let mut until: Option<i64> = None;
    for (rank, thread, start, end, kind, region, path) in pieces {
        // The walk's pieces follow each other without a gap: a gap is a piece no task named.
        if let Some(t) = until.filter(|&t| t != end) {
            return exec_err!(
                "critical_path: the path's piece from {end} to {t} ns was named by no task: the calls of the location the walk was on then came to none"
            );
        }
        until = Some(start);
        match backward.last_mut() {
            Some(seg)
                if seg.rank == rank
                    && seg.thread == thread
                    && seg.kind == kind
                    && seg.path == path
                    && seg.start == end =>
            {
                seg.start = start;
            }
            _ => backward.push(Segment { rank, thread, region, path, start, end, kind }),
        }
    }
    backward.reverse();
    let batch = match answer {
        Answer::Path => super::path_batch(&backward, schema)?,
        Answer::Profile => {
            let means: HashMap<Option<&str>, f64> = means.iter().map(|(p, m)| (p.as_deref(), *m)).collect();
            super::profile_batch(&backward, &means, schema)?
        }
    };
    Ok(vec![batch])
}
