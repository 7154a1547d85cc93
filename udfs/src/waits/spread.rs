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
//! The rules are those of the embedded fold (`super::MessageWaits`, `super::CollectiveWaits`);
//! only where they run changes, so the rows are the same.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::{Candidate, CollectiveWaits, MessageWaits, Wait};
use crate::waits::openmp::ThreadRecords;
use commdb_analysis::columns::{int64_column, text_column};
use commdb_analysis::derived::{Prefold, Spread};
use commdb_analysis::plan::{Main, Work};
use commdb_analysis::stream::{Folder, Mapper, Prepare, StartFold};

/// The MPI patterns a wait row may name.
const PATTERNS: [&str; 8] = [
    "late_sender",
    "late_receiver",
    "wait_at_barrier",
    "wait_at_nxn",
    "late_broadcast",
    "early_reduce",
    "early_scan",
    "wait_at_collective",
];

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

/// One wait found before the answer: the columns of `Wait`.
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
    ]))
}

/// The rows of `candidates` (late senders when `late`).
fn candidate_rows(late: &[Candidate], receivers: &[Candidate]) -> Result<RecordBatch> {
    let all: Vec<(bool, &Candidate)> =
        late.iter().map(|c| (true, c)).chain(receivers.iter().map(|c| (false, c))).collect();
    let int = |f: fn(&Candidate) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(all.iter().map(|(_, c)| f(c))))
    };
    let opt = |f: fn(&Candidate) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(all.iter().map(|(_, c)| f(c)).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        int(|c| c.rank),
        Arc::new(BooleanArray::from(all.iter().map(|(l, _)| *l).collect::<Vec<_>>())),
        int(|c| c.ts),
        int(|c| c.call),
        int(|c| c.wait_ns),
        opt(|c| c.msg_id),
        opt(|c| c.partner),
        int(|c| c.left),
    ];
    Ok(RecordBatch::try_new(candidate_schema(), columns)?)
}

/// The rows of `waits`.
fn wait_rows(waits: &[Wait]) -> Result<RecordBatch> {
    let int = |f: fn(&Wait) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(waits.iter().map(f))) };
    let opt = |f: fn(&Wait) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(waits.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        int(|w| w.rank),
        Arc::new(StringArray::from_iter_values(waits.iter().map(|w| w.pattern))),
        int(|w| w.wait_ns),
        int(|w| w.ts),
        opt(|w| w.msg_id),
        opt(|w| w.comm),
        opt(|w| w.instance),
        opt(|w| w.partner),
    ];
    Ok(RecordBatch::try_new(wait_schema(), columns)?)
}

/// The waits of `batch` (rows of `wait_schema`).
fn waits_of(batch: &RecordBatch, into: &mut Vec<Wait>) -> Result<()> {
    let batches = std::slice::from_ref(batch);
    let ints: Vec<Int64Array> =
        [0, 2, 3, 4, 5, 6, 7].iter().map(|&i| int64_column(batches, i)).collect::<Result<_>>()?;
    let pattern = text_column(batches, 1)?;
    let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
    for r in 0..batch.num_rows() {
        let name = pattern.value(r);
        let Some(&pattern) = PATTERNS.iter().find(|p| **p == name) else {
            return exec_err!("wait_states: a wait of the unknown pattern '{name}' came from another task");
        };
        into.push(Wait {
            rank: ints[0].value(r),
            pattern,
            wait_ns: ints[1].value(r),
            ts: ints[2].value(r),
            msg_id: opt(&ints[3], r),
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
        let mut found = MessageWaits::default();
        found.fold(batch)?;
        candidate_rows(&found.late, &found.receivers)
    }
}

/// Folds the candidates of the ranks exchanged to one task, and gives their waits at the end.
#[derive(Default)]
struct ReduceCandidates {
    waits: MessageWaits,
    done: Option<std::vec::IntoIter<Wait>>,
}

impl Mapper for ReduceCandidates {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let batches = std::slice::from_ref(batch);
        let ints: Vec<Int64Array> =
            [0, 2, 3, 4, 5, 6, 7].iter().map(|&i| int64_column(batches, i)).collect::<Result<_>>()?;
        let Some(late) = batch.column(1).as_any().downcast_ref::<BooleanArray>() else {
            return exec_err!("wait_states: the candidates' column late is not boolean");
        };
        let opt = |a: &Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
        for r in 0..batch.num_rows() {
            let c = Candidate {
                rank: ints[0].value(r),
                ts: ints[1].value(r),
                call: ints[2].value(r),
                wait_ns: ints[3].value(r),
                msg_id: opt(&ints[4], r),
                partner: opt(&ints[5], r),
                left: ints[6].value(r),
            };
            if late.value(r) { self.waits.late.push(c) } else { self.waits.receivers.push(c) }
        }
        Ok(RecordBatch::new_empty(wait_schema()))
    }

    fn held_bytes(&self) -> usize {
        self.waits.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.done = Some(std::mem::take(&mut self.waits).finish().into_iter());
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(done) = &mut self.done else { return Ok(None) };
        let these: Vec<Wait> = done.by_ref().take(super::BATCH_ROWS).collect();
        if these.is_empty() { Ok(None) } else { wait_rows(&these).map(Some) }
    }
}

/// Folds the participations in the collective instances exchanged to one task, and gives
/// their waits at the end.
struct ReduceCollectives {
    collectives: CollectiveWaits,
    notices: Option<commdb_catalog::wallclock::Notices>,
    done: Option<std::vec::IntoIter<Wait>>,
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
        let (waits, unclassified) = std::mem::take(&mut self.collectives).finish();
        super::notice_unclassified(self.notices.as_ref(), unclassified);
        self.done = Some(waits.into_iter());
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let Some(done) = &mut self.done else { return Ok(None) };
        let these: Vec<Wait> = done.by_ref().take(super::BATCH_ROWS).collect();
        if these.is_empty() { Ok(None) } else { wait_rows(&these).map(Some) }
    }
}

/// The answer's fold on a cluster: the waits found before (inputs 1 and 2), and the threads'
/// records (inputs 3 and 4) as the embedded fold reads them.
struct FoldFound {
    waits: Vec<Wait>,
    threads: ThreadRecords,
    schema: SchemaRef,
}

impl Folder for FoldFound {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 | 2 => waits_of(batch, &mut self.waits),
            3 => self.threads.fold_events(batch),
            4 => self.threads.fold_regions(batch),
            _ => exec_err!("wait_states: no input {input} on a cluster"),
        }
    }

    fn held_bytes(&self) -> usize {
        self.waits.capacity() * std::mem::size_of::<Wait>() + self.threads.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldFound { waits, threads, schema } = *self;
        super::paths_of(waits, threads, schema)
    }
}

/// How `wait_states` spreads: its messages (input 1) and collectives (input 2) reduced to
/// their waits where they lie, the answer folding the waits (`schema`, its output).
pub(super) fn spread(notices: Option<commdb_catalog::wallclock::Notices>, schema: SchemaRef) -> Spread {
    let candidates: Prepare = Arc::new(|_| Ok(Box::new(Candidates) as Box<dyn Mapper>));
    let reduce_messages: Prepare = Arc::new(|_| Ok(Box::new(ReduceCandidates::default()) as Box<dyn Mapper>));
    let reduce_collectives: Prepare = Arc::new(move |_| {
        let collectives = CollectiveWaits::default();
        Ok(Box::new(ReduceCollectives { collectives, notices: notices.clone(), done: None }) as Box<dyn Mapper>)
    });
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
    let start: StartFold = Arc::new(move || {
        Box::new(FoldFound { waits: Vec::new(), threads: ThreadRecords::default(), schema: schema.clone() })
    });
    Spread::Prefolded {
        prefolds: vec![messages, collectives],
        work: Work::Folded(start, Main::ByRank(0)),
        label: "over the waits its messages and collectives gave",
    }
}
