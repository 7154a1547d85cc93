//! `wait_states` spread over a cluster's executors (docs/scale.md, "waits folded, then per
//! rank"): the MPI waits are found where the messages and collectives lie, and only the waits
//! travel to the answer.
//!
//! - Each part of the messages gives its Late Sender and Late Receiver candidates (a message
//!   that made no one wait is dropped where it is read). A call that completes several
//!   receives or sends waits once, for the latest of them, and a call with a late sender
//!   counts no late receiver: both are decided among the candidates of one rank's calls, so
//!   the candidates are exchanged by the rank that waited and reduced there.
//! - The participations in a collective are exchanged by (communicator, instance), so that each
//!   task holds whole instances and classifies their waits by Scalasca's per-operation
//!   patterns.
//! - The answer folds the waits (one row each, about 60 bytes) in place of the messages and
//!   collectives, and gives each its thread and call path from the calls as the embedded engine
//!   does.
//!
//! The critical path, its profile and the delay costs find their waits by the same steps
//! (`wait_steps`; the delay costs also each late send's end and each member's leaving of an
//! instance in which someone waited: their synchronisation points), then go on with steps of
//! their own (`crate::critical::path_steps`, `crate::critical::delays`).
//! The rules are those of the embedded fold (`super::MessageWaits`, `super::CollectiveWaits`);
//! only where they run changes, so the rows are the same.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::stream::{MessageWaitStream, WaitStream};
use super::{Candidate, CollectiveWaits, MPI_PATTERNS as PATTERNS, MessageWaits, Wait};
use crate::external_sort::ExternalSort;
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::derived::{Prefold, Spread};
use commdb_analysis::plan::{Main, Work};
use commdb_analysis::stream::{Folder, Mapper, Prepare, StartFold};

/// A Late Sender (late = true) or Late Receiver candidate of the messages of one part: the
/// rank that waited first, by which they are exchanged.
fn candidate_schema() -> SchemaRef {
    let int = |name: &str, nullable: bool| Field::new(name, DataType::Int64, nullable);
    Arc::new(Schema::new(vec![
        int("rank", false),
        Field::new("late", DataType::Boolean, false),
        int("ts", false),
        int("call", false),
        int("wait_ns", false),
        int("msg_id", true),
        int("partner", true),
        int("left", false),
    ]))
}

/// A row that is no wait: a member's leaving of a collective instance in which someone waited
/// (its rank, end as `ts`, comm and instance), for `delay_costs`' synchronisation points.
const COLLECTIVE_END: &str = "collective_end";

/// One wait found before the answer: the columns of `Wait`, and for a late sender when its
/// send call was left (`left`); or a member's leaving of an instance (`COLLECTIVE_END`).
fn wait_schema() -> SchemaRef {
    let int = |name: &str, nullable: bool| Field::new(name, DataType::Int64, nullable);
    Arc::new(Schema::new(vec![
        int("rank", false),
        Field::new("pattern", DataType::Utf8, false),
        int("wait_ns", false),
        int("ts", false),
        int("msg_id", true),
        int("comm", true),
        int("instance", true),
        int("partner", true),
        int("left", true),
    ]))
}

/// The rows of `candidates`.
fn candidate_rows(candidates: &[Candidate]) -> Result<RecordBatch> {
    let int =
        |f: fn(&Candidate) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(candidates.iter().map(f))) };
    let opt = |f: fn(&Candidate) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(candidates.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        int(|c| c.rank),
        Arc::new(BooleanArray::from(candidates.iter().map(|c| c.late).collect::<Vec<_>>())),
        int(|c| c.ts),
        int(|c| c.call),
        int(|c| c.wait_ns),
        opt(|c| c.msg_id),
        opt(|c| c.partner),
        int(|c| c.left),
    ];
    Ok(RecordBatch::try_new(candidate_schema(), columns)?)
}

/// The rows of `waits`, each late sender with when its send call was left (`left`).
fn wait_rows(waits: &[(Wait, Option<i64>)]) -> Result<RecordBatch> {
    let int =
        |f: fn(&Wait) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(waits.iter().map(|(w, _)| f(w)))) };
    let opt = |f: fn(&Wait) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(waits.iter().map(|(w, _)| f(w)).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        int(|w| w.rank),
        Arc::new(StringArray::from_iter_values(waits.iter().map(|(w, _)| w.pattern))),
        int(|w| w.wait_ns),
        int(|w| w.ts),
        opt(|w| w.msg_id),
        opt(|w| w.comm),
        opt(|w| w.instance),
        opt(|w| w.partner),
        Arc::new(Int64Array::from(waits.iter().map(|(_, left)| *left).collect::<Vec<_>>())),
    ];
    Ok(RecordBatch::try_new(wait_schema(), columns)?)
}

/// The row saying that member `rank` of collective (`comm`, `instance`) left it at `end`.
fn end_row(comm: i64, instance: i64, rank: i64, end: i64) -> Wait {
    Wait {
        rank,
        pattern: COLLECTIVE_END,
        wait_ns: 0,
        ts: end,
        msg_id: None,
        comm: Some(comm),
        instance: Some(instance),
        partner: None,
    }
}

/// The waits a step gives once its input has ended, each late sender's with when its send
/// call was left, read as they are given.
enum Given {
    Messages(MessageWaitStream),
    Collectives(Box<dyn Iterator<Item = Wait> + Send>),
}

impl Given {
    fn next(&mut self) -> Result<Option<(Wait, Option<i64>)>> {
        match self {
            Given::Messages(stream) => stream.next(),
            Given::Collectives(list) => Ok(list.next().map(|w| (w, None))),
        }
    }
}

/// The next batch of the waits a step gives once its input has ended (None: no more).
fn next_rows(done: &mut Option<Given>) -> Result<Option<RecordBatch>> {
    let Some(done) = done else { return Ok(None) };
    let mut these = Vec::new();
    while these.len() < super::BATCH_ROWS {
        let Some(w) = done.next()? else { break };
        these.push(w);
    }
    if these.is_empty() { Ok(None) } else { wait_rows(&these).map(Some) }
}

/// What the steps before the answer found: the waits, when each late sender's send call was
/// left (by message), and, when asked for, each member's leaving of an instance in which
/// someone waited (comm, instance, rank, end).
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub waits: Vec<Wait>,
    pub left: HashMap<i64, i64>,
    pub ends: Vec<(i64, i64, i64, i64)>,
}

/// The waits of `batch` (rows of `wait_schema`) into `found`.
pub(crate) fn waits_of(batch: &RecordBatch, found: &mut Found) -> Result<()> {
    let batches = std::slice::from_ref(batch);
    let ints: Vec<Int64Array> =
        [0, 2, 3, 4, 5, 6, 7, 8].iter().map(|&i| int64_column(batches, i)).collect::<Result<_>>()?;
    let pattern = text_column(batches, 1)?;
    let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
    for r in 0..batch.num_rows() {
        let name = pattern.value(r);
        let (rank, ts) = (ints[0].value(r), ints[2].value(r));
        if name == COLLECTIVE_END {
            if let (Some(comm), Some(instance)) = (opt(&ints[4], r), opt(&ints[5], r)) {
                found.ends.push((comm, instance, rank, ts));
            }
            continue;
        }
        let Some(&pattern) = PATTERNS.iter().find(|p| **p == name) else {
            return exec_err!("a wait of the unknown pattern '{name}' came from another task");
        };
        let msg_id = opt(&ints[3], r);
        if let (Some(m), Some(left)) = (msg_id, opt(&ints[7], r)) {
            found.left.insert(m, left);
        }
        found.waits.push(Wait {
            rank,
            pattern,
            wait_ns: ints[1].value(r),
            ts,
            msg_id,
            comm: opt(&ints[4], r),
            instance: opt(&ints[5], r),
            partner: opt(&ints[6], r),
        });
    }
    Ok(())
}

/// Maps each batch of a part's messages to its wait candidates.
struct Candidates;

impl Mapper for Candidates {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut found = Vec::new();
        super::candidates_of(batch, |c| {
            found.push(c);
            Ok(())
        })?;
        candidate_rows(&found)
    }
}

/// Folds the candidates of the ranks exchanged to one task, and gives their waits at the end.
struct ReduceCandidates {
    waits: MessageWaits,
    done: Option<Given>,
}

impl ReduceCandidates {
    /// Candidates put in order in runs of `run_bytes`.
    fn new(run_bytes: usize) -> Self {
        ReduceCandidates { waits: MessageWaits::new(run_bytes), done: None }
    }
}

impl Mapper for ReduceCandidates {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let ints: Vec<Int64Array> =
            [0, 2, 3, 4, 5, 6, 7].iter().map(|&i| int64_column(batches, i)).collect::<Result<_>>()?;
        let Some(late) = batch.column(1).as_any().downcast_ref::<BooleanArray>() else {
            return exec_err!("the wait candidates' column late is not boolean");
        };
        let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
        for r in 0..batch.num_rows() {
            self.waits.push(Candidate {
                late: late.value(r),
                rank: ints[0].value(r),
                ts: ints[1].value(r),
                call: ints[2].value(r),
                wait_ns: ints[3].value(r),
                msg_id: opt(&ints[4], r),
                partner: opt(&ints[5], r),
                left: ints[6].value(r),
            })?;
        }
        Ok(RecordBatch::new_empty(wait_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.waits.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let waits = std::mem::take(&mut self.waits);
        self.done = Some(Given::Messages(waits.stream()?));
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        next_rows(&mut self.done)
    }
}

/// Folds the participations in the collective instances exchanged to one task, and gives
/// their waits at the end; when it must leave neighbourhood collectives out, it says so in a
/// notice when it has `notices` (`wait_states` does; the critical path and delay costs, as
/// their embedded fold, do not).
struct ReduceCollectives {
    collectives: CollectiveWaits,
    notices: Option<commdb_catalog::wallclock::Notices>,
    /// Whether to give each member's leaving of an instance in which someone waited.
    ends: bool,
    done: Option<Given>,
}

impl Mapper for ReduceCollectives {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.collectives.fold(batch)?;
        Ok(RecordBatch::new_empty(wait_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.collectives.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let collectives = std::mem::take(&mut self.collectives);
        // Each member's leaving as four numbers until it is given (an instance's members are
        // most of the rows, and a row of waits takes 80 bytes).
        let mut waits: Vec<Wait> = Vec::new();
        let mut ends: Vec<(i64, i64, i64, i64)> = Vec::new();
        let unclassified = if self.ends {
            let add = |c: i64, k: i64, e: &[(i64, i64)]| {
                ends.extend(e.iter().map(|&(r, t)| (c, k, r, t)));
                Ok(())
            };
            collectives.finish_each_with(
                |w| {
                    waits.push(w);
                    Ok(())
                },
                add,
            )?
        } else {
            collectives.finish_each(|w| {
                waits.push(w);
                Ok(())
            })?
        };
        super::notice_unclassified(self.notices.as_ref(), unclassified);
        let ends = ends.into_iter().map(|(c, k, r, t)| end_row(c, k, r, t));
        self.done = Some(Given::Collectives(Box::new(waits.into_iter().chain(ends))));
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        next_rows(&mut self.done)
    }
}

/// What the answer makes of the waits (in the order of `Wait::order`) and the threads'
/// records: the mapper of the calls.
pub(crate) type Then = Arc<dyn Fn(WaitStream, ThreadRecords) -> Result<Box<dyn Mapper>> + Send + Sync>;

/// The answer's fold on a cluster: the waits found before (inputs 1 and 2), put in order beyond
/// memory (`crate::external_sort`: a task's ranks' waits took about 100 bytes each in a list,
/// 428 MiB at 2 M waits on an executor of 273 MiB at 1 B events), and the threads' records
/// (inputs 3 and 4, and an accelerator's hand-overs after them) as the embedded fold reads them.
struct FoldFound {
    waits: ExternalSort<Wait>,
    threads: ThreadRecords,
    then: Then,
}

impl Folder for FoldFound {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 | 2 => {
                let mut found = Found::default();
                waits_of(batch, &mut found)?;
                found.waits.into_iter().try_for_each(|w| self.waits.push(w))
            }
            _ => self.threads.fold_input(input, batch),
        }
    }

    fn held_bytes(&self) -> usize {
        self.waits.held_bytes() + self.threads.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldFound { waits, threads, then } = *self;
        then(WaitStream::of_sorted(waits.sorted()?)?, threads)
    }
}

/// How an analysis that folds the MPI waits spreads (`wait_states` and the views over it):
/// its messages (input 1) and collectives (input 2) reduced to their waits where they lie, the
/// answer making the mapper of its calls from the waits by `then`; when `routed`, a task per
/// part of the calls with their ranks' waits (an answer per rank), else one task; with `ends`,
/// the collectives also give each member's leaving of an instance in which someone waited
/// (`delay_costs`' synchronisation points). What is put in order beyond memory goes in runs of
/// `run_bytes` (`crate::external_sort::run_bytes` of the session that plans it: on a cluster,
/// the executor's).
pub(crate) fn spread(
    notices: Option<commdb_catalog::wallclock::Notices>,
    routed: bool,
    ends: bool,
    run_bytes: usize,
    then: Then,
) -> Spread {
    let start: StartFold = Arc::new(move || {
        let waits = ExternalSort::new("the waits found", run_bytes);
        Box::new(FoldFound { waits, threads: ThreadRecords::default(), then: then.clone() })
    });
    spread_folding(notices, routed, ends, run_bytes, start)
}

/// The mappers that find the waits, as `spread_folding` and `wait_steps` place them: each part
/// of the messages' candidates, the candidates of a rank's calls reduced to their waits, and
/// the collective instances' waits (with `ends`, each member's leaving of an instance in which
/// someone waited), what they put in order in runs of `run_bytes`.
fn finders(notices: Option<commdb_catalog::wallclock::Notices>, ends: bool, run_bytes: usize) -> [Prepare; 3] {
    let candidates: Prepare = Arc::new(|_| Ok(Box::new(Candidates) as Box<dyn Mapper>));
    let reduce_messages: Prepare = Arc::new(move |_| Ok(Box::new(ReduceCandidates::new(run_bytes)) as Box<dyn Mapper>));
    let reduce_collectives: Prepare = Arc::new(move |_| {
        let collectives = CollectiveWaits::new(run_bytes);
        let notices = notices.clone();
        Ok(Box::new(ReduceCollectives { collectives, notices, ends, done: None }) as Box<dyn Mapper>)
    });
    [candidates, reduce_messages, reduce_collectives]
}

/// `spread`, the answer folding the waits found before (inputs 1 and 2, rows `waits_of` reads)
/// and the threads' records (3 on) by the folder `start` makes.
pub(crate) fn spread_folding(
    notices: Option<commdb_catalog::wallclock::Notices>,
    routed: bool,
    ends: bool,
    run_bytes: usize,
    start: StartFold,
) -> Spread {
    let [candidates, reduce_messages, reduce_collectives] = finders(notices, ends, run_bytes);
    let messages = Prefold {
        input: 1,
        partial: Some((candidate_schema(), Work::Streamed(candidates), "each part's late senders and receivers")),
        by: vec![0],
        reduce: (wait_schema(), Work::Streamed(reduce_messages), "the message waits of each rank's calls"),
    };
    let collectives = Prefold {
        input: 2,
        partial: None,
        by: vec![0, 1],
        reduce: (wait_schema(), Work::Streamed(reduce_collectives), "the waits of each collective instance"),
    };
    Spread::Prefolded {
        prefolds: vec![messages, collectives],
        work: Work::Folded(start, Main::ByRank(0)),
        label: "over the waits its messages and collectives gave",
        routed,
    }
}

/// The first steps of an analysis planned as steps of its own that walks the MPI waits (the
/// critical path, the delay costs): 0, each part of the messages' Late Sender and Late Receiver
/// candidates; 1, the message waits of each rank's calls (the candidates exchanged by rank); 2,
/// the waits of each collective instance (the collectives, input 2, exchanged by instance) and,
/// with `ends`, each member's leaving of an instance in which someone waited. Steps 1 and 2
/// give rows of the same schema, their rank first, which `waits_of` reads.
pub(crate) fn wait_steps(ends: bool, run_bytes: usize) -> Vec<commdb_analysis::steps::Step> {
    use commdb_analysis::steps::{From, Reads, Step};
    let [candidates, reduce_messages, reduce_collectives] = finders(None, ends, run_bytes);
    vec![
        Step {
            label: "each part's late senders and receivers",
            schema: candidate_schema(),
            work: Work::Streamed(candidates),
            inputs: vec![From::Input(1)],
            reads: Reads::ByPart,
        },
        Step {
            label: "the message waits of each rank's calls",
            schema: wait_schema(),
            work: Work::Streamed(reduce_messages),
            inputs: vec![From::Step(0)],
            reads: Reads::Exchanged(vec![0]),
        },
        Step {
            label: "the waits of each collective instance",
            schema: wait_schema(),
            work: Work::Streamed(reduce_collectives),
            inputs: vec![From::Input(2)],
            reads: Reads::Exchanged(vec![0, 1]),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The answer's fold on a cluster keeps the waits its task is given in runs on disk, not
    /// in a list, and gives them to the calls' mapper in the order of `Wait::order`.
    #[test]
    fn the_waits_found_are_put_in_order_beyond_memory() {
        let wait = |rank: i64, ts: i64, k: i64| Wait {
            rank,
            pattern: if k % 3 == 0 { "late_sender" } else { "wait_at_barrier" },
            wait_ns: 10 + k,
            ts,
            msg_id: (k % 3 == 0).then_some(k),
            comm: (k % 3 != 0).then_some(7),
            instance: (k % 3 != 0).then_some(k),
            partner: Some(rank + 1),
        };
        let all: Vec<Wait> = (0..1000i64).map(|k| wait((k * 37) % 11, (k * 7919) % 1009, k)).collect();
        let given = Arc::new(Mutex::new(Vec::new()));
        let seen = given.clone();
        let then: Then = Arc::new(move |mut waits: WaitStream, _| {
            while let Some(w) = waits.next()? {
                seen.lock().unwrap().push(w);
            }
            Ok(Box::new(Candidates) as Box<dyn Mapper>)
        });
        let mut fold = Box::new(FoldFound {
            waits: ExternalSort::with_run("the waits found", 16),
            threads: ThreadRecords::default(),
            then,
        });
        let mut most = 0;
        for chunk in all.chunks(100) {
            let rows: Vec<(Wait, Option<i64>)> = chunk.iter().map(|w| (*w, None)).collect();
            fold.fold(1, &wait_rows(&rows).unwrap()).unwrap();
            most = most.max(fold.held_bytes());
        }
        assert!(most <= 32 * std::mem::size_of::<Wait>() + 4096, "{most} bytes held for runs of 16 waits");
        fold.into_mapper().unwrap();
        let mut want = all.clone();
        want.sort_by_key(Wait::order);
        let got = given.lock().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got.iter().zip(&want).all(|(g, w)| g == w), "the waits did not come back in order");
    }
}
