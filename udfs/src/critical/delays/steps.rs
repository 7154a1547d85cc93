//! The delay costs on a distributed engine, planned as steps ([`commdb_analysis::steps`]) so
//! that no task reads the calls whole (docs/scale.md, "The delay costs"):
//!
//! 1. **The waits** where the messages and collectives lie (`crate::waits::spread::wait_steps`),
//!    with each late send's end and each member's leaving of an instance in which someone
//!    waited: the synchronisation points.
//! 2. **Each location's first instant**, a task per partition of the calls: where the run
//!    begins, before a rank's first call, is the same for every task.
//! 3. **Each wait's synchronisation interval**, in one task over the waits: when its two ranks
//!    last synchronised (`SyncPoints::previous`, which reads any pair's and any rank's points).
//!    Each wait goes on as two rows, one to its waiter's part of the calls and one to its
//!    delayer's.
//! 4. **Each side of each wait**, a task per part of the calls with the rows of its ranks
//!    ([`super::sides`]): the ranks' stretches swept as in one process, each wait's thread
//!    found on its side, and the side's time per call path in the interval, its waiting, and
//!    (the delayer's side) the delayer's waits there, to which the costs are handed on.
//! 5. **The costs handed on**, in one task reading the sides merged by the waits' end, latest
//!    first ([`super::handing`]): the two sides of each wait meet (they end together), and the
//!    costs go from wait to wait in the order of one process, so the answer is the same. This is
//!    one chain, wait by wait across the ranks, so it is not split among tasks: it reads a few
//!    numbers per call path a wait's interval holds, where the calls give a row per call.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::Result;

use super::SyncPoints;
use super::interval_rows::IntervalSide;
use crate::spill::{Rows, Spill};
use crate::waits::spread::{Found, waits_of};
use commdb_analysis::columns::{int64_column, schema_of};
use commdb_analysis::plan::{Main, Work};
use commdb_analysis::steps::{From, Reads, Step};
use commdb_analysis::stream::{Folder, Mapper, Prepare, StartFold};
use commdb_catalog::fast_hash::FastMap;

/// Which side of a wait a row is (column `side`).
pub(super) const WAITER: i8 = 0;
pub(super) const DELAYER: i8 = 1;

/// The steps of `delay_costs` over its inputs: calls, messages, collectives, events, regions
/// and, with `offload`, the accelerators' hand-overs.
pub(super) fn steps(schema: SchemaRef, offload: bool, run_bytes: usize) -> Vec<Step> {
    let mut steps = crate::waits::spread::wait_steps(true, run_bytes);
    // 3
    let first: Prepare = Arc::new(|_| Ok(Box::new(FirstInstants::default()) as Box<dyn Mapper>));
    steps.push(Step {
        label: "each location's first instant",
        schema: first_schema(),
        work: Work::Streamed(first),
        inputs: vec![From::Input(0)],
        reads: Reads::ByPart,
    });
    // 4
    // The collectives' waits and ends folded, then the message waits read: the two inputs are
    // read as they come, not first gathered into one.
    let intervals: StartFold = Arc::new(|| Box::new(Intervals::default()) as Box<dyn Folder>);
    steps.push(Step {
        label: "each wait's synchronisation interval, to its two ranks",
        schema: super::interval_rows::schema(),
        work: Work::Folded(intervals, Main::Batches),
        inputs: vec![From::Step(1), From::Step(2)],
        // Each wait's number follows the order they come in; it only joins a wait's two sides.
        reads: Reads::OnceAllAnyOrder,
    });
    // 5
    let mut inputs = vec![From::Input(0), From::Step(4), From::Step(3)];
    inputs.extend((3..if offload { 6 } else { 5 }).map(From::Input));
    steps.push(Step {
        label: "each side of each wait, measured where its calls lie",
        schema: super::sides::sides_schema(),
        work: Work::Folded(super::sides::sides_start(), Main::ByRank(0)),
        inputs,
        reads: Reads::Routed(vec![1]),
    });
    // 6
    let prepare: Prepare = {
        let schema = schema.clone();
        Arc::new(move |_| Ok(Box::new(super::handing::Handing::new(schema.clone())) as Box<dyn Mapper>))
    };
    steps.push(Step {
        label: "the costs handed on from wait to wait",
        schema,
        work: Work::Streamed(prepare),
        inputs: vec![From::Step(5)],
        reads: Reads::OnceInOrder(vec![0]),
    });
    steps
}

/// Per location of a partition of the calls: the start of its first call that lasts (rank,
/// thread, first; `NONE_LASTS` when every call of it is an instant).
pub(super) fn first_schema() -> SchemaRef {
    schema_of(&[
        ("rank", DataType::Int64, false),
        ("thread", DataType::Int64, false),
        ("first", DataType::Int64, false),
    ])
}

/// The first instant of a location whose calls are all instants: it has no stretches.
const NONE_LASTS: i64 = i64::MAX;

/// Each location's first call that lasts: where its first stretch begins
/// (`crate::sweeps::stretches::thread_stretches_under` gives none for an instant).
#[derive(Default)]
struct FirstInstants {
    first: FastMap<(i64, i64), i64>,
}

impl Mapper for FirstInstants {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let b = std::slice::from_ref(batch);
        let (rank, thread, start, end) =
            (int64_column(b, 0)?, int64_column(b, 1)?, int64_column(b, 3)?, int64_column(b, 4)?);
        for i in 0..batch.num_rows() {
            if rank.is_null(i) || start.is_null(i) || end.is_null(i) {
                continue;
            }
            let key = (rank.value(i), if thread.is_valid(i) { thread.value(i) } else { 0 });
            let at = self.first.entry(key).or_insert(NONE_LASTS);
            if end.value(i) > start.value(i) {
                *at = (*at).min(start.value(i));
            }
        }
        Ok(RecordBatch::new_empty(first_schema()))
    }

    fn held_bytes(&self) -> usize {
        48 * self.first.capacity()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut rows: Vec<((i64, i64), i64)> = self.first.drain().collect();
        rows.sort_unstable();
        let int = |f: fn(&((i64, i64), i64)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let columns = vec![int(|r| r.0.0), int(|r| r.0.1), int(|r| r.1)];
        Ok(vec![RecordBatch::try_new(first_schema(), columns)?])
    }
}

/// Each rank's locations with calls: (thread, its first instant), in thread order.
pub(super) type Located = FastMap<i64, Vec<(i64, i64)>>;

/// Where the run begins, as a store of every rank's stretches takes it
/// (`StretchStore::finish_writing`): the earliest first stretch of a rank's master thread (the
/// thread of its first fork, `ThreadRecords::master`; without calls of its own, the rank's
/// lowest thread). `master(rank)` gives a rank's master; `firsts` are rows of `first_schema`.
pub(super) fn run_start(firsts: &[RecordBatch], master: impl Fn(i64) -> i64) -> Result<(Option<i64>, Located)> {
    let mut ranks: Located = FastMap::default();
    for batch in firsts {
        let b = std::slice::from_ref(batch);
        let (rank, thread, first) = (int64_column(b, 0)?, int64_column(b, 1)?, int64_column(b, 2)?);
        for i in 0..batch.num_rows() {
            let list = ranks.entry(rank.value(i)).or_default();
            match list.iter_mut().find(|t| t.0 == thread.value(i)) {
                Some(t) => t.1 = t.1.min(first.value(i)),
                None => list.push((thread.value(i), first.value(i))),
            }
        }
    }
    let mut start: Option<i64> = None;
    for (&rank, list) in &mut ranks {
        list.sort_unstable();
        let master = master(rank);
        let m = list.iter().find(|t| t.0 == master).or(list.first());
        if let Some(&(_, first)) = m.filter(|t| t.1 != NONE_LASTS) {
            start = Some(start.map_or(first, |s| s.min(first)));
        }
    }
    Ok((start, ranks))
}

/// Folds the waits and the synchronisation points they make (as the embedded `delay_sweep`
/// does): the collectives' (its other input) as they come, then the messages' (its first);
/// then gives each wait between ranks its interval, on both sides.
#[derive(Default)]
struct Intervals {
    /// Waiter rank, delayer rank, start, end of each wait between ranks, in a scratch file
    /// while the fold reads (32 bytes a wait in memory were most of what the step held: at
    /// 1 B events it failed on an executor of 395 MiB), then read back a block at a time.
    waits: Option<Spill<4>>,
    reading: Option<Rows<4>>,
    sync: SyncPoints,
    /// The waits given so far (the next one's id).
    given: usize,
}

/// Waits read back and given their intervals at a time.
const WAITS_AT_A_TIME: usize = 1 << 16;

impl Folder for Intervals {
    fn fold(&mut self, _input: usize, batch: &RecordBatch) -> Result<()> {
        self.add(batch)
    }

    fn held_bytes(&self) -> usize {
        Mapper::held_bytes(self)
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        Ok(self)
    }

    fn mapper_counts_the_fold(&self) -> bool {
        true
    }
}

impl Intervals {
    /// Fold a batch of waits (`waits_of`): their synchronisation points, and the waits between
    /// ranks.
    fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut found = Found::default();
        waits_of(batch, &mut found)?;
        for w in &found.waits {
            self.sync.message_wait(w, &found.left);
            if let Some(w) = super::as_wait(w) {
                let waits = match &mut self.waits {
                    Some(waits) => waits,
                    None => self.waits.insert(Spill::new("delay_costs")?),
                };
                waits.push([w.waiter, w.delayer, w.start, w.end])?;
            }
        }
        for (comm, instance, rank, end) in found.ends {
            self.sync.waited_in(comm, instance, &[(rank, end)])?;
        }
        Ok(())
    }
}

impl Mapper for Intervals {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.add(batch)?;
        Ok(RecordBatch::new_empty(super::interval_rows::schema()))
    }

    fn held_bytes(&self) -> usize {
        self.sync.held_bytes()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        self.sync.sort_messages();
        self.sync.seal()?;
        self.reading = self.waits.take().map(Spill::into_rows).transpose()?;
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        let mut block: Vec<[i64; 4]> = Vec::new();
        if let Some(reading) = &mut self.reading {
            reading.next_rows(&mut block, WAITS_AT_A_TIME)?;
        }
        if block.is_empty() {
            self.reading = None;
            self.sync = SyncPoints::default();
            return Ok(None);
        }
        let first = self.given;
        let found: Vec<Option<(i64, i64)>> = {
            use rayon::prelude::*;
            let sync = &self.sync;
            block.par_iter().map(|&[w, d, s, e]| sync.previous(w, s, d, e)).collect()
        };
        let mut sides = Vec::with_capacity(2 * block.len());
        for (k, (&[w, d, start, end], since)) in block.iter().zip(found).enumerate() {
            let id = (first + k) as i64;
            for (rank, side, partner, from) in [(w, WAITER, d, since.map(|p| p.0)), (d, DELAYER, w, since.map(|p| p.1))]
            {
                sides.push((rank, IntervalSide { side, partner, id, start, end, from }));
            }
        }
        self.given += block.len();
        super::interval_rows::pack(&mut sides).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firsts(rows: &[(i64, i64, i64)]) -> RecordBatch {
        let col =
            |f: fn(&(i64, i64, i64)) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
        RecordBatch::try_new(first_schema(), vec![col(|r| r.0), col(|r| r.1), col(|r| r.2)]).unwrap()
    }

    #[test]
    fn the_run_begins_at_the_earliest_master_s_first_lasting_call() {
        // Rank 0: thread 1 forks (its master), thread 0 begins earlier but idles before the
        // fork as a worker would. Rank 1: no fork, thread 0 is the master. Rank 2: its master
        // has only instants, so it begins nowhere; its thread 3 is no master.
        let a = firsts(&[(0, 0, 5), (0, 1, 40), (1, 0, 30), (2, 0, NONE_LASTS)]);
        let b = firsts(&[(1, 0, 20), (2, 3, 1)]);
        let master = |rank: i64| if rank == 0 { 1 } else { 0 };
        let (start, ranks) = run_start(&[a, b], master).unwrap();
        assert_eq!(start, Some(20));
        assert_eq!(ranks[&1], vec![(0, 20)]);
        assert_eq!(ranks[&2], vec![(0, NONE_LASTS), (3, 1)]);
        // Without a fork rank 0's master is thread 0.
        let a = firsts(&[(0, 0, 5), (0, 1, 40)]);
        assert_eq!(run_start(&[a], |_| 0).unwrap().0, Some(5));
        assert_eq!(run_start(&[], |_| 0).unwrap().0, None);
    }
}
