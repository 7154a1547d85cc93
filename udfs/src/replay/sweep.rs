//! How the replay runs as a folded analysis (commdb_analysis::stream): the messages and collectives are
//! spilled as they stream (`FoldReplay`), the calls come a chunk of whole ranks at a time into
//! the call store (`Sweep`), and when they end the sides are placed, the calls replayed within
//! the memory budget, and the answer handed back batch by batch. On a distributed engine the
//! last step of [`super::steps`] is the same sweep over what the steps before found: the
//! sides and members already placed in their calls are spilled in place of the messages and
//! collectives, and each rank's MPI calls come as rows of their own ([`super::rank_calls`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

use super::answer::{Efficiency, Pair, RankAnswer, Replayed};
use super::call_store::{CallStore, MpiCall};
use super::mpi_calls::RankReader;
use super::rank_calls::RankRows;
use super::simulate::{self, Links, Simulated};
use crate::spill::Spill;
use commdb_analysis::stream::{Folder, Mapper};

/// Spill the rows of `batch` (N integer columns) with NULL as NULL.
fn spill_rows<const N: usize>(spill: &mut Spill<N>, batch: &RecordBatch) -> Result<()> {
    crate::spill::each_row::<N>(batch, |row| spill.push(row))
}

/// Spill the items of a batch of [`super::placing::items`] (its ranks' calls are not items).
fn spill_items(what: &str, spill: &mut Spill<8>, batch: &RecordBatch) -> Result<()> {
    super::placing::each_item(what, batch, |row| spill.push(row))
}

/// The folder of one execution of the replay: scratch files for the messages and the
/// collectives, and the sweep of the calls it makes when they are folded (a folder whose
/// scratch files could not be made gives that error at once).
pub(super) fn start(
    what: &'static str,
    answer: Answer,
    eager_limit: i64,
    schema: SchemaRef,
    pool: Arc<dyn MemoryPool>,
    placed: bool,
) -> Box<dyn Folder> {
    let folder: Result<FoldReplay> = (|| {
        let sweep = Sweep {
            what,
            answer,
            eager_limit,
            bucket_bytes: crate::external_sort::run_bytes_under(pool.as_ref()),
            schema,
            pool,
            store: Some(CallStore::new(what)?),
            reader: if placed { Main::RankCalls(RankRows::default()) } else { Main::Calls(RankReader::default()) },
            regions: Vec::new(),
            calls: Vec::new(),
            inputs: None,
            reservation: None,
            replayed: None,
            answering: Answering::default(),
            projection: None,
        };
        let linking = if placed {
            Linking::Placed(Spill::new(what)?)
        } else {
            Linking::Rows(Spill::new(what)?, Spill::new(what)?)
        };
        Ok(FoldReplay { linking, sweep })
    })();
    match folder {
        Ok(f) => Box::new(f),
        Err(e) => Box::new(Failed(Some(e))),
    }
}

/// What the replay answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    Pairs,
    Efficiency,
}

/// What the calls are linked from: the messages and collectives, or (the last step on a
/// distributed engine) the sides and members placed in their calls ([`super::placing::Item`]).
enum Linking {
    Rows(Spill<7>, Spill<5>),
    Placed(Spill<8>),
}

/// What the sweep's main input is: the calls (rank, region, start_ts, end_ts), or the placed
/// items with each rank's MPI calls as rows among them ([`super::rank_calls`]).
enum Main {
    Calls(RankReader),
    RankCalls(RankRows),
}

/// Folds the messages and the collectives (or the placed items) into scratch files, then makes
/// the sweep of the calls.
struct FoldReplay {
    linking: Linking,
    sweep: Sweep,
}

impl Folder for FoldReplay {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match (&mut self.linking, input) {
            (Linking::Rows(messages, _), 1) => spill_rows(messages, batch),
            (Linking::Rows(_, collectives), _) => spill_rows(collectives, batch),
            // The placed items come as the main input, with the ranks' calls.
            (Linking::Placed(_), _) => Err(DataFusionError::Internal(format!(
                "{}: the replay over placed items folds no input {input}",
                self.sweep.what
            ))),
        }
    }

    fn held_bytes(&self) -> usize {
        0
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldReplay { linking, mut sweep } = *self;
        sweep.inputs = Some(linking);
        Ok(Box::new(sweep))
    }
}

/// Rows of ideal_replay's answer per batch.
const BATCH_ROWS: usize = 8192;

/// Where ideal_replay's answer stands: the ranks are answered in rank order, several side by
/// side (a thread each) while the batches they make fit in a sixteenth of the budget, a rank
/// too large for that alone, a batch at a time.
#[derive(Debug, Default)]
struct Answering {
    /// The ranks (indices into the store's), in rank order, and how many were taken.
    order: Vec<usize>,
    taken: usize,
    /// A rank answered a batch at a time.
    large: Option<RankAnswer>,
    /// Batches made and not yet handed on.
    made: std::collections::VecDeque<RecordBatch>,
    /// The regions' names, the bytes a row takes in the columns read, and the bytes the
    /// replay held before its answer.
    regions: Vec<String>,
    row_bytes: usize,
    held: usize,
}

/// Sweeps the calls a chunk of whole ranks at a time into the call store, then replays them
/// when they end, and hands the answer back batch by batch.
struct Sweep {
    what: &'static str,
    answer: Answer,
    eager_limit: i64,
    /// Bytes of what the replay's lists read back at a time (a sixteenth of the budget).
    bucket_bytes: usize,
    schema: SchemaRef,
    pool: Arc<dyn MemoryPool>,
    store: Option<CallStore>,
    /// Reads the chunks of calls rank by rank (or takes each rank's MPI calls from its rows).
    reader: Main,
    /// The store's number of each of the reader's regions.
    regions: Vec<u32>,
    /// A rank's calls as the store takes them (kept from rank to rank).
    calls: Vec<MpiCall>,
    inputs: Option<Linking>,
    reservation: Option<MemoryReservation>,
    replayed: Option<Replayed>,
    /// Where ideal_replay's answer stands.
    answering: Answering,
    /// The columns of ideal_replay's answer that are read, and their schema (None: all).
    projection: Option<(Vec<usize>, SchemaRef)>,
}

impl Sweep {
    fn empty(&self) -> RecordBatch {
        RecordBatch::new_empty(self.projection.as_ref().map_or(self.schema.clone(), |p| p.1.clone()))
    }

    /// Place, link and simulate, within the memory budget.
    fn replay(&mut self) -> Result<Replayed> {
        let what = self.what;
        if let Main::RankCalls(rank_rows) = &self.reader {
            rank_rows.finish(what)?;
        }
        let mut store =
            self.store.take().ok_or_else(|| DataFusionError::Internal(format!("{what}: replayed twice")))?;
        store.finish_writing()?;
        let linking =
            self.inputs.take().ok_or_else(|| DataFusionError::Internal(format!("{what}: no messages folded")))?;
        let messages_rows = match &linking {
            Linking::Rows(messages, _) => messages.rows() as usize,
            Linking::Placed(items) => items.rows() as usize,
        };
        let reservation = MemoryConsumer::new(format!("{what} replay")).register(&self.pool);
        let reservation = self.reservation.insert(reservation);
        let pool = self.pool.clone();
        let hold = |bytes: usize| -> Result<()> {
            reservation
                .try_resize(bytes)
                .map_err(|_| commdb_analysis::budget::over_budget(what, &pool, bytes, messages_rows, "replaying"))
        };
        let ranks = store.ranks.len();
        let simulated_bytes = Simulated::most_bytes(ranks, store.len()) + ranks * 64;
        let (eager_limit, bucket_bytes) = (self.eager_limit, self.bucket_bytes);
        let hold = &mut |bytes| hold(simulated_bytes + bytes);
        let mut links: Links = match linking {
            Linking::Rows(messages, collectives) => simulate::link(
                what,
                &mut store,
                messages.into_rows()?,
                collectives.into_rows()?,
                eager_limit,
                bucket_bytes,
                hold,
            )?,
            Linking::Placed(items) => {
                simulate::link_placed(what, &mut store, items.into_rows()?, eager_limit, bucket_bytes, hold)?
            }
        };
        let simulated = simulate::simulate(what, &mut store, &mut links)?;
        Ok(Replayed { store, simulated, unplaced: links.unplaced })
    }

    fn efficiency_batch(&self, rows: &[Efficiency]) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|r| if r.1 > 0 { r.2 as f64 / r.1 as f64 } else { 1.0 }),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ];
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

impl Mapper for Sweep {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    /// A chunk of whole ranks: their outermost MPI calls into the store.
    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let what = self.what;
        let store =
            self.store.as_mut().ok_or_else(|| DataFusionError::Internal(format!("{what}: calls after the replay")))?;
        match &mut self.reader {
            Main::Calls(reader) => {
                push_ranks(what, reader, batches, store, &mut self.regions, &mut self.calls, |_, _| ())?
            }
            Main::RankCalls(rank_rows) => {
                let Some(Linking::Placed(items)) = self.inputs.as_mut() else {
                    return Err(DataFusionError::Internal(format!("{what}: placed items without their scratch file")));
                };
                for batch in batches {
                    rank_rows.push(what, batch, store)?;
                    spill_items(what, items, batch)?;
                }
            }
        }
        Ok(self.empty())
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut replayed = self.replay()?;
        match self.answer {
            Answer::Efficiency => {
                let rows = replayed.efficiency()?;
                Ok(vec![self.efficiency_batch(&rows)?])
            }
            Answer::Pairs => {
                let regions = replayed.store.regions.clone();
                self.answering = Answering {
                    order: replayed.order(),
                    row_bytes: row_bytes(self.schema.fields().len(), &self.projection, &regions),
                    held: self.reservation.as_ref().map_or(0, MemoryReservation::size),
                    regions,
                    ..Answering::default()
                };
                self.replayed = Some(replayed);
                Ok(Vec::new())
            }
        }
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(batch) = self.answering.made.pop_front() {
                return Ok(Some(batch));
            }
            let Some(replayed) = self.replayed.as_mut() else { return Ok(None) };
            let a = &mut self.answering;
            let (schema, projection, regions) = (&self.schema, &self.projection, &a.regions);
            let make = |rows: &[Pair]| pairs_batch(schema, projection, rows, regions);
            // A large rank goes on a batch at a time.
            if let Some(large) = a.large.as_mut() {
                let batches = replayed.answer(std::slice::from_mut(large), BATCH_ROWS, BATCH_ROWS, &make)?;
                if large.done() {
                    a.large = None;
                }
                a.made.extend(batches.into_iter().flatten());
                continue;
            }
            // The next ranks, one per thread, whole, while their batches fit in what the replay
            // may hold beside what it holds (a rank that does not fit alone goes a batch at a time).
            let (threads, room) = (rayon::current_num_threads().max(1), self.bucket_bytes);
            let mut round: Vec<RankAnswer> = Vec::new();
            let mut bytes = 0usize;
            while round.len() < threads
                && let Some(&ri) = a.order.get(a.taken)
            {
                let next = replayed.answer_for(ri);
                let more = next.rows().saturating_mul(a.row_bytes);
                let fits = bytes.saturating_add(more) <= room
                    && self.reservation.as_mut().is_none_or(|r| r.try_resize(a.held + bytes + more).is_ok());
                if !fits {
                    if round.is_empty() {
                        a.large = Some(next);
                        a.taken += 1;
                    }
                    break;
                }
                bytes += more;
                round.push(next);
                a.taken += 1;
            }
            if round.is_empty() && a.large.is_none() {
                self.replayed = None;
                return Ok(None);
            }
            let batches = replayed.answer(&mut round, usize::MAX, BATCH_ROWS, &make)?;
            a.made.extend(batches.into_iter().flatten());
        }
    }

    fn held_bytes(&self) -> usize {
        self.store.as_ref().map_or(0, CallStore::held_bytes)
    }

    /// ideal_replay builds only the columns read (its answer has 11, a sum reads a few).
    fn projected(&mut self, projection: &[usize]) -> bool {
        if self.answer != Answer::Pairs || projection.iter().any(|&i| i >= self.schema.fields().len()) {
            return false;
        }
        match self.schema.project(projection) {
            Ok(schema) => {
                self.projection = Some((projection.to_vec(), Arc::new(schema)));
                true
            }
            Err(_) => false,
        }
    }
}

/// A batch of ideal_replay's answer (`schema`): the columns read (`projection`, None: all), in
/// the order asked.
fn pairs_batch(
    schema: &SchemaRef,
    projection: &Option<(Vec<usize>, SchemaRef)>,
    rows: &[Pair],
    regions: &[String],
) -> Result<RecordBatch> {
    let int = |f: fn(&Pair) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
    let float = |f: fn(&Pair) -> f64| -> ArrayRef { Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) };
    let column = |i: usize| -> ArrayRef {
        match i {
            0 => int(|p| p.rank),
            1 => int(|p| p.pair),
            2 => Arc::new(StringArray::from(
                rows.iter().map(|p| p.region.map(|r| regions[r as usize].as_str())).collect::<Vec<_>>(),
            )),
            3 => int(|p| p.compute),
            4 => int(|p| p.observed),
            5 => int(|p| p.ideal),
            6 => int(|p| p.observed - p.ideal),
            7 => int(|p| p.observed_end),
            8 => int(|p| p.ideal_end),
            9 => float(|p| p.trf_local),
            _ => float(|p| p.trf_cumulative),
        }
    };
    match projection {
        Some((wanted, schema)) => Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            wanted.iter().map(|&i| column(i)).collect(),
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )?),
        None => Ok(RecordBatch::try_new(schema.clone(), (0..schema.fields().len()).map(column).collect())?),
    }
}

/// The bytes a row of ideal_replay's answer takes in the columns read (`projection`, None:
/// all), the region's column by its longest name.
fn row_bytes(columns: usize, projection: &Option<(Vec<usize>, SchemaRef)>, regions: &[String]) -> usize {
    let region = 4 + regions.iter().map(String::len).max().unwrap_or(0);
    let bytes = |i: usize| if i == 2 { region } else { 8 };
    match projection {
        Some((wanted, _)) => wanted.iter().map(|&i| bytes(i)).sum(),
        None => (0..columns).map(bytes).sum(),
    }
}

/// The ranks of a chunk of calls (columns rank, region, start_ts, end_ts) into `store`, each
/// its outermost MPI calls, each rank handed to `each` first; `regions` is the store's number
/// of each of the reader's regions, `calls` a buffer kept from rank to rank.
pub(super) fn push_ranks(
    what: &str,
    reader: &mut RankReader,
    batches: &[RecordBatch],
    store: &mut CallStore,
    regions: &mut Vec<u32>,
    calls: &mut Vec<MpiCall>,
    mut each: impl FnMut(&super::mpi_calls::RankRun<'_>, &[String]),
) -> Result<()> {
    reader.each_rank(batches, what, |run, names| {
        each(&run, names);
        regions.extend(names[regions.len()..].iter().map(|name| store.region(name)));
        calls.clear();
        calls.extend(run.calls.iter().map(|c| MpiCall {
            start: c.start,
            end: c.end,
            compute: c.compute,
            region: regions[c.region as usize],
        }));
        store.push(run.rank, run.origin, run.end, calls)
    })
}

/// A folder that could not be made (its scratch files could not be created): its error, at once.
pub(super) fn failed(e: DataFusionError) -> impl Folder {
    Failed(Some(e))
}

/// A folder that could not be made: its error, at once.
struct Failed(Option<DataFusionError>);

impl Folder for Failed {
    fn fold(&mut self, _input: usize, _batch: &RecordBatch) -> Result<()> {
        Err(self.0.take().unwrap_or_else(|| DataFusionError::Internal("replay: no scratch file".into())))
    }

    fn held_bytes(&self) -> usize {
        0
    }

    fn into_mapper(mut self: Box<Self>) -> Result<Box<dyn Mapper>> {
        Err(self.0.take().unwrap_or_else(|| DataFusionError::Internal("replay: no scratch file".into())))
    }
}
