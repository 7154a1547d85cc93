//! The critical path's pieces named where their calls lie, and the path (or its profile) made
//! of them, on a distributed engine ([`crate::critical::path_steps`]): each piece the walk
//! covered is cut at the stretches of its location (swept again, as in one process) and takes
//! their regions and call paths; a piece of a merged stretch takes each stretch's kind as the
//! walk would have there (compute, or mpi in an MPI call it did not leave). The pieces, in time
//! order, then merge into segments by the rule of the walk in one process (`crate::critical::
//! walk`): one location, kind and call path, without a gap.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
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
        let FoldPieces { mut pieces, means, records } = *self;
        // Without forks, locks or accelerators a thread's stretches follow from its own calls
        // alone (a worker's paths continue its master's only under a fork), so only the calls
        // that overlap a piece of their location need sweeping.
        let only_near_pieces = records.is_empty() && records.offload().is_empty();
        for list in pieces.values_mut() {
            list.sort_unstable_by_key(|p| (p.0, p.1));
        }
        Ok(Box::new(NamePieces { pieces, means, sweeper: Sweeper::new(records), only_near_pieces }))
    }
}

/// The rows of `batch` (calls: rank, thread, region, start, end) worth sweeping to name
/// `pieces`: those of a location with pieces whose call overlaps one of them (a stretch within
/// a piece is made only of the calls open in it), and those without a rank or time, which the
/// sweep refuses. Every location with rows is added to `seen`.
fn near_pieces(
    batch: &RecordBatch,
    pieces: &HashMap<(i64, i64), Vec<Piece>>,
    seen: &mut Vec<(i64, i64)>,
) -> Result<RecordBatch> {
    let one = std::slice::from_ref(batch);
    let (rank, thread) = (int64_column(one, 0)?, int64_column(one, 1)?);
    let (start, end) = (int64_column(one, 3)?, int64_column(one, 4)?);
    let mut keep = Vec::with_capacity(batch.num_rows());
    // The location of the rows being read, and its pieces.
    let mut current: Option<(Location, Option<&Vec<Piece>>)> = None;
    for i in 0..batch.num_rows() {
        if rank.is_null(i) || start.is_null(i) || end.is_null(i) {
            keep.push(true);
            continue;
        }
        let key = (rank.value(i), if thread.is_valid(i) { thread.value(i) } else { 0 });
        let list = match current {
            Some((k, list)) if k == key => list,
            _ => {
                if seen.last() != Some(&key) {
                    seen.push(key);
                }
                let list = pieces.get(&key);
                current = Some((key, list));
                list
            }
        };
        let (from, to) = (start.value(i), end.value(i));
        let overlaps = list.is_some_and(|list| {
            let k = list.partition_point(|p| p.1 <= from);
            list.get(k).is_some_and(|p| p.0 < to)
        });
        keep.push(overlaps);
    }
    Ok(arrow::compute::filter_record_batch(batch, &BooleanArray::from(keep))?)
}

/// A location: rank, thread.
type Location = (i64, i64);

/// Sweeps a chunk of whole ranks' calls and names the pieces of their locations.
struct NamePieces {
    pieces: HashMap<(i64, i64), Vec<Piece>>,
    means: Vec<(Option<String>, f64)>,
    sweeper: Sweeper,
    /// Whether only the calls near the pieces are swept ([`near_pieces`]).
    only_near_pieces: bool,
}

impl Mapper for NamePieces {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let mut out: Vec<Named> = Vec::new();
        let mut seen = Vec::new();
        let near: Vec<RecordBatch>;
        let batches = if self.only_near_pieces {
            near = batches.iter().map(|b| near_pieces(b, &self.pieces, &mut seen)).collect::<Result<_>>()?;
            near.as_slice()
        } else {
            batches
        };
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
                    let mut covered = start;
                    for s in stretches[first..].iter().take_while(|s| s.from < end) {
                        let kind = kind.unwrap_or(if s.call_start.is_some() { "mpi" } else { "compute" });
                        let region = region_name(&names.names, s.region).map(str::to_string);
                        let path = path_name(paths, s.path).map(str::to_string);
                        out.push((rank, th.thread, s.from.max(start), s.to.min(end), kind, region, path));
                        covered = s.to.min(end);
                    }
                    // After the last stretch swept (the location's last call, or the last that
                    // overlaps a piece): time no region covers, as between two calls.
                    if covered < end {
                        out.push((rank, th.thread, covered, end, kind.unwrap_or("compute"), None, None));
                    }
                }
            }
            Ok(())
        })?;
        // A location whose calls overlap none of its pieces: each piece lies before its first
        // call, after its last or between two, where no region covers it.
        for key in seen {
            for (start, end, kind, _) in pieces.remove(&key).unwrap_or_default() {
                out.push((key.0, key.1, start, end, kind.unwrap_or("compute"), None, None));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    /// Calls (rank, thread, region, start, end), in each location's start order.
    fn calls(rows: &[(i64, i64, &str, i64, i64)]) -> RecordBatch {
        let int = |f: fn(&(i64, i64, &str, i64, i64)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, false),
            Field::new("thread", DataType::Int64, true),
            Field::new("region", DataType::Utf8, false),
            Field::new("start_ts", DataType::Int64, false),
            Field::new("end_ts", DataType::Int64, false),
        ]));
        let columns = vec![
            int(|r| r.0),
            int(|r| r.1),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))) as ArrayRef,
            int(|r| r.3),
            int(|r| r.4),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    /// The named pieces of `batch`, sweeping only the calls near the pieces or all of them.
    fn named(only_near_pieces: bool, pieces: &[((i64, i64), Piece)], batch: &RecordBatch) -> Vec<String> {
        let mut by_location: HashMap<(i64, i64), Vec<Piece>> = HashMap::new();
        for &(key, piece) in pieces {
            by_location.entry(key).or_default().push(piece);
        }
        for list in by_location.values_mut() {
            list.sort_unstable_by_key(|p| (p.0, p.1));
        }
        let mut mapper = NamePieces {
            pieces: by_location,
            means: Vec::new(),
            sweeper: Sweeper::new(ThreadRecords::default()),
            only_near_pieces,
        };
        let out = mapper.map_many(std::slice::from_ref(batch)).unwrap();
        let b = std::slice::from_ref(&out);
        let (rank, thread, start, end) = (
            int64_column(b, 0).unwrap(),
            int64_column(b, 1).unwrap(),
            int64_column(b, 2).unwrap(),
            int64_column(b, 3).unwrap(),
        );
        let (kind, region, path) = (text_column(b, 4).unwrap(), text_column(b, 5).unwrap(), text_column(b, 6).unwrap());
        let text = |a: &StringArray, r: usize| if a.is_valid(r) { a.value(r).to_string() } else { "-".into() };
        let mut rows: Vec<String> = (0..out.num_rows())
            .map(|r| {
                format!(
                    "{} {} {}..{} {} {} {}",
                    rank.value(r),
                    thread.value(r),
                    start.value(r),
                    end.value(r),
                    text(&kind, r),
                    text(&region, r),
                    text(&path, r)
                )
            })
            .collect();
        rows.sort();
        rows
    }

    #[test]
    fn sweeping_only_the_calls_near_the_pieces_names_them_alike() {
        // Rank 0 without an enclosing region: A with B inside, a gap, C, then two MPI calls
        // that touch. Rank 1: X, a long gap, Y. Rank 2 has pieces but no calls here.
        let batch = calls(&[
            (0, 0, "A", 0, 100),
            (0, 0, "B", 20, 40),
            (0, 0, "B", 60, 70),
            (0, 0, "C", 150, 300),
            (0, 0, "MPI_Send", 300, 320),
            (0, 0, "MPI_Recv", 320, 400),
            (1, 0, "X", 0, 50),
            (1, 0, "X", 50, 50),
            (1, 0, "Y", 500, 600),
        ]);
        let pieces = [
            ((0, 0), (10, 30, None, true)),
            ((0, 0), (120, 140, None, true)),
            ((0, 0), (290, 330, None, true)),
            ((0, 0), (390, 450, None, true)),
            ((0, 0), (450, 460, None, false)),
            ((1, 0), (100, 200, Some("transfer"), true)),
            ((1, 0), (200, 300, None, true)),
            ((1, 0), (550, 700, None, true)),
            ((2, 0), (0, 10, None, true)),
        ];
        let near = named(true, &pieces, &batch);
        assert_eq!(near, named(false, &pieces, &batch));
        let expected = [
            "0 0 10..20 compute A A",
            "0 0 120..140 compute - -",
            "0 0 20..30 compute B A/B",
            "0 0 290..300 compute C C",
            "0 0 300..320 mpi MPI_Send MPI_Send",
            "0 0 320..330 mpi MPI_Recv MPI_Recv",
            "0 0 390..400 mpi MPI_Recv MPI_Recv",
            "0 0 400..450 compute - -",
            "0 0 450..460 compute - -",
            "1 0 100..200 transfer - -",
            "1 0 200..300 compute - -",
            "1 0 550..600 compute Y Y",
            "1 0 600..700 compute - -",
        ];
        assert_eq!(near, expected);
        // Rank 1's pieces all lie where no call is: its calls are all left out, and its pieces
        // are still named.
        let gaps = [((1, 0), (100, 200, None, true)), ((1, 0), (300, 400, None, true))];
        assert_eq!(named(true, &gaps, &batch), named(false, &gaps, &batch));
        assert_eq!(named(true, &gaps, &batch), ["1 0 100..200 compute - -", "1 0 300..400 compute - -"]);
        // A piece that leaves its last call overlapped for time no region covers, before a call
        // that overlaps no piece: the rest of the piece is that time, as between the two calls.
        let tail = [((1, 0), (40, 100, None, true))];
        assert_eq!(named(true, &tail, &batch), named(false, &tail, &batch));
        assert_eq!(named(true, &tail, &batch), ["1 0 40..50 compute X X", "1 0 50..100 compute - -"]);
    }
}
