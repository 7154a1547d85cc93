//! The replay's message sides and collective members placed in their MPI calls where the
//! ranks' calls lie, on a distributed engine ([`super::steps`]). A task holds a part of whole
//! ranks of the calls: it spills the rows routed to its ranks as they come, puts its ranks'
//! outermost MPI calls into a call store of its own (the one the replay uses in one process,
//! [`super::call_store`]), then places each row's sides there by the same lookup
//! (`CallStore::locate_all`), a batch at a time, and gives them on with each side's call as
//! its number within its rank.
//!
//! - **Sends**: each message at its sender's part (`to_sender`), its send post and completion
//!   placed; it goes on to its receiver's part (rows of `at_receiver`).
//! - **Receives**: each message at its receiver's part, its receive post and completion
//!   placed, and each collective member at its own rank's part, its post and completion
//!   placed; each gives an [`Item`], as do the sides left out of every call (counted per rank
//!   as in one process: a side of a known rank with a time that no MPI call of the rank holds).
//!   Each of its ranks' MPI calls go on too, as a row of kind `RANK` ([`super::rank_calls`]).
//!
//! What crosses the engine's exchanges is packed as bytes (each row as a spill writes it,
//! about 12 bytes where eight integer columns take 64): a distributed engine may hold a
//! partition fetched from another executor whole in memory (Ballista does, so that a fetch cut
//! midway can be retried), and as integer columns the messages of a part held that way took
//! several times a task's memory limit. A packed row holds at most about [`ROW_BYTES`]:
//! Ballista 55's shuffle read gathers the batches it fetched into batches of the session's
//! batch size in rows (8,192), whatever their bytes, so rows of a batch of 65,536 items or of a
//! whole rank's calls made one gathered batch of every part's output for the replay's one
//! task.
//!
//! A side's instant is the one the replay in one process places (`super::simulate::link`):
//! the send's completion at `send_complete_ts` or else its call's start, the receive's post at
//! `recv_post_ts` or else its call's start, a member's post at its begin or else its end.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, LargeBinaryArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MpiCall, NOWHERE, RankLookup};
use super::mpi_calls::RankReader;
use super::rank_calls::{RankEncoder, RankRow};
use crate::spill::{NULL, Rows, Spill, value};
use commdb_analysis::columns::{int64_column, schema_of};
use commdb_analysis::stream::{Folder, Mapper};
use commdb_catalog::fast_hash::FastMap;

/// Rows placed at a time.
const BATCH: usize = 1 << 16;

/// A message at the part of its sender (`rank`; its receiver's when it has no sender): its
/// ranks, the instants of its four sides and its size. (Unlike the steps after it, these rows
/// are not packed: packing them cost more time in the first step than it saved, and the
/// executors' peak stayed where it was.)
pub(super) fn to_sender() -> SchemaRef {
    schema_of(&[
        ("rank", DataType::Int64, false),
        ("src", DataType::Int64, true),
        ("send_post_ts", DataType::Int64, true),
        ("send_done_ts", DataType::Int64, true),
        ("dst", DataType::Int64, true),
        ("recv_post_ts", DataType::Int64, true),
        ("recv_done_ts", DataType::Int64, true),
        ("bytes", DataType::Int64, true),
    ])
}

/// Messages at the part of their receiver (`rank`; the sender's for a message without a
/// receiver), `sides` of them packed as bytes ([`packed_by_rank`]), each its sender, its send's
/// sides placed (their calls' numbers within the sender's, NULL: not placed), its receiver,
/// its receive's instants and its size; or, with `unplaced` set and the rest NULL, the count
/// of send sides of `rank` left out of its calls: src, send_post, send_done, dst,
/// recv_post_ts, recv_done_ts, bytes, unplaced.
pub(super) fn at_receiver() -> SchemaRef {
    crate::packed::schema("rank", "sides")
}

/// A row of the messages packed in the rows of [`at_receiver`].
type Packed = [i64; 8];

/// A batch of [`at_receiver`]: `rows` (each its rank, then its values) packed by rank, a rank's
/// rows in rows of about [`ROW_BYTES`].
fn packed_by_rank(rows: &mut [(i64, Packed)]) -> Result<RecordBatch> {
    rows.sort_by_key(|r| r.0);
    let mut packed = crate::packed::Rows::default();
    for group in rows.chunk_by(|a, b| a.0 == b.0) {
        for (count, bytes) in pack(group.iter().map(|r| r.1)) {
            packed.push(group[0].0, count, &bytes);
        }
    }
    packed.finish(at_receiver())
}

/// Each message packed in a batch of [`at_receiver`], with its rank, given to `each` (an
/// error names packed rows that do not read back).
fn each_packed(what: &str, batch: &RecordBatch, mut each: impl FnMut(i64, Packed) -> Result<()>) -> Result<()> {
    const SENDS: &str = "the sends placed";
    crate::packed::each_row(what, SENDS, batch, |rank, count, bytes| {
        unpack(what, SENDS, bytes, count, |row| each(rank, row))
    })
}

/// The rows of the items: a row of kind `PACKED` holds rows of [`Item`] (its kind, then its
/// values, NULL where it has none) as bytes ([`each_item`] reads them); a row of kind
/// `RANK_PART` or `RANK` holds MPI calls of a rank, the second its last: `rank`, its origin as
/// `post`, its end as `done`, and the calls as bytes ([`super::rank_calls`]).
pub(super) fn items() -> SchemaRef {
    schema_of(&[
        ("kind", DataType::Int64, false),
        ("rank", DataType::Int64, true),
        ("post", DataType::Int64, true),
        ("done", DataType::Int64, true),
        ("other", DataType::Int64, true),
        ("other_post", DataType::Int64, true),
        ("other_done", DataType::Int64, true),
        ("value", DataType::Int64, true),
        ("calls", DataType::LargeBinary, true),
    ])
}

const MESSAGE: i64 = 0;
const MEMBER: i64 = 1;
const UNPLACED: i64 = 2;
/// The kind of a rank's last row of MPI calls, and the column of bytes.
pub(super) const RANK: i64 = 3;
/// The kind of a row holding items packed as bytes (in the column of bytes), as many as its
/// `value` (see the module's notes).
const PACKED: i64 = 4;
/// The kind of a rank's row of MPI calls that more rows of the rank follow.
pub(super) const RANK_PART: i64 = 5;
pub(super) const CALLS: usize = 8;
/// The bytes after which a packed row (of items, of the sends placed, of a rank's calls) ends:
/// 8,192 of them, the rows a shuffle read gathers into a batch, hold about 32 MiB.
pub(super) const ROW_BYTES: usize = 4096;

/// What the sides and members placed tell the replay, each call by its rank and its number
/// within the rank (None: not placed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    /// A message: its send's post and completion on `src`, its receive's on `dst`.
    Message {
        src: Option<i64>,
        send_post: Option<i64>,
        send_done: Option<i64>,
        dst: Option<i64>,
        recv_post: Option<i64>,
        recv_done: Option<i64>,
        bytes: Option<i64>,
    },
    /// A member of a collective instance, posting in call `post` and completing in `done`.
    Member { rank: i64, post: i64, done: i64, comm: i64, instance: i64 },
    /// Sides of `rank` left out of every MPI call of it.
    Unplaced { rank: i64, sides: i64 },
}

impl Item {
    /// As a row of [`items`] (NULL as [`NULL`]).
    fn row(self) -> [i64; 8] {
        let v = |x: Option<i64>| x.unwrap_or(NULL);
        match self {
            Item::Message { src, send_post, send_done, dst, recv_post, recv_done, bytes } => {
                [MESSAGE, v(src), v(send_post), v(send_done), v(dst), v(recv_post), v(recv_done), v(bytes)]
            }
            Item::Member { rank, post, done, comm, instance } => [MEMBER, rank, post, done, comm, instance, NULL, NULL],
            Item::Unplaced { rank, sides } => [UNPLACED, rank, NULL, NULL, NULL, NULL, NULL, sides],
        }
    }

    /// The item of a row (None: of no kind known, a rank's calls, or missing a value its kind
    /// needs).
    pub fn of(row: &[i64; 8]) -> Option<Item> {
        let [kind, a, b, c, d, e, f, g] = row.map(value);
        match kind? {
            MESSAGE => {
                Some(Item::Message { src: a, send_post: b, send_done: c, dst: d, recv_post: e, recv_done: f, bytes: g })
            }
            MEMBER => Some(Item::Member { rank: a?, post: b?, done: c?, comm: d?, instance: e? }),
            UNPLACED => Some(Item::Unplaced { rank: a?, sides: g? }),
            _ => None,
        }
    }
}

/// Which sides a task places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sides {
    Sends,
    Receives,
}

/// Starts the placing of one task.
pub(super) fn start(what: &'static str, sides: Sides) -> Box<dyn Folder> {
    match Placer::new(what, sides) {
        Ok(p) => Box::new(p),
        Err(e) => Box::new(super::sweep::failed(e)),
    }
}

/// A batch of [`items`]: the items `rows` packed into rows of kind `PACKED` (none when there
/// are none), then the rows of ranks' calls `encoder` holds (taken from it).
pub(super) fn with_ranks(rows: &[[i64; 8]], encoder: &mut RankEncoder) -> Result<RecordBatch> {
    let ranks = std::mem::take(&mut encoder.ranks);
    let calls = encoder.calls.finish();
    let packed = pack(rows.iter().copied());
    let int = |of_packed: &dyn Fn(usize) -> Option<i64>, of_rank: &dyn Fn(&RankRow) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from_iter(
            packed.iter().map(|(count, _)| of_packed(*count)).chain(ranks.iter().map(of_rank)),
        ))
    };
    let (none, no_rank) = (|_| None, |_: &RankRow| None);
    let mut columns = vec![
        int(&|_| Some(PACKED), &|r| Some(r.0)),
        int(&none, &|r| Some(r.1)),
        int(&none, &|r| Some(r.2)),
        int(&none, &|r| Some(r.3)),
    ];
    columns.extend((4..7).map(|_| int(&none, &no_rank)));
    columns.push(int(&|count| i64::try_from(count).ok(), &no_rank));
    let packed_rows = LargeBinaryArray::from_iter_values(packed.iter().map(|(_, bytes)| bytes));
    columns.push(arrow::compute::concat(&[&packed_rows, &calls])?);
    Ok(RecordBatch::try_new(items(), columns)?)
}

/// `rows` as bytes, each as a spill writes it (a byte marking its NULLs, then its other values
/// as differences from the row before, [`crate::spill::put_row`]), in pieces that end once
/// they pass [`ROW_BYTES`] (each with its count of rows, and its first row's values whole).
fn pack(rows: impl Iterator<Item = [i64; 8]>) -> Vec<(usize, Vec<u8>)> {
    let mut pieces = Vec::new();
    let (mut count, mut bytes, mut last) = (0, Vec::new(), [0; 8]);
    for row in rows {
        crate::spill::put_row(&mut bytes, row, &mut last);
        count += 1;
        if bytes.len() >= ROW_BYTES {
            pieces.push((count, std::mem::take(&mut bytes)));
            (count, last) = (0, [0; 8]);
        }
    }
    if count > 0 {
        pieces.push((count, bytes));
    }
    pieces
}

/// The `count` rows [`pack`] wrote into `bytes`, each given to `each` (an error names `what`
/// and `rows` when they do not read back whole).
fn unpack(
    what: &str,
    rows: &str,
    bytes: &[u8],
    count: u32,
    mut each: impl FnMut([i64; 8]) -> Result<()>,
) -> Result<()> {
    let damaged = || crate::packed::damaged(what, rows);
    let (mut at, mut last) = (0usize, [0i64; 8]);
    for _ in 0..count {
        each(crate::spill::get_row(bytes, &mut at, &mut last).ok_or_else(damaged)?)?;
    }
    if at != bytes.len() {
        return Err(damaged());
    }
    Ok(())
}

/// The rows of the items in a batch of [`items`], each given to `each`: the rows packed in
/// the rows of kind `PACKED`, in order; the ranks' rows are left (an error names a row of
/// another kind, or packed rows that do not read back).
pub(super) fn each_item(what: &str, batch: &RecordBatch, mut each: impl FnMut([i64; 8]) -> Result<()>) -> Result<()> {
    use arrow::array::{Array, AsArray};
    let one = std::slice::from_ref(batch);
    let (kinds, counts) = (int64_column(one, 0)?, int64_column(one, 7)?);
    let bytes = batch
        .column(CALLS)
        .as_binary_opt::<i64>()
        .ok_or_else(|| DataFusionError::Internal(format!("{what}: placed items are not bytes")))?;
    for i in 0..batch.num_rows() {
        match kinds.is_valid(i).then(|| kinds.value(i)) {
            Some(RANK | RANK_PART) => {}
            Some(PACKED) if counts.is_valid(i) && bytes.is_valid(i) => {
                let count = u32::try_from(counts.value(i)).map_err(|_| crate::packed::damaged(what, "placed items"))?;
                unpack(what, "placed items", bytes.value(i), count, &mut each)?
            }
            kind => {
                return Err(DataFusionError::Internal(format!(
                    "{what}: a placed row of an unknown kind {kind:?}, or without its items"
                )));
            }
        }
    }
    Ok(())
}

/// Where a task stands once its calls are in: the rows still to place.
struct Reading {
    messages: Rows<8>,
    members: Option<Rows<5>>,
    /// The counts of sides left out are given last.
    counted: bool,
}

/// One task of a placing step: folds the rows routed to it, sweeps its ranks' calls into its
/// store, then gives the rows on, placed, a batch at a time.
struct Placer {
    what: &'static str,
    sides: Sides,
    store: Option<CallStore>,
    reader: RankReader,
    regions: Vec<u32>,
    calls: Vec<MpiCall>,
    messages: Option<Spill<8>>,
    members: Option<Spill<5>>,
    /// Send sides of its ranks left out of their calls, as the sends' step counted them.
    sent_unplaced: FastMap<i64, i64>,
    reading: Option<Reading>,
    /// Where its ranks lie in its store, once its calls are in.
    lookup: RankLookup,
    /// Per rank of its store, the sides it left out.
    unplaced: Vec<i64>,
    /// Buffers kept from batch to batch.
    rows: Vec<[i64; 8]>,
    members_read: Vec<[i64; 5]>,
    lookups: Vec<(u32, i64)>,
    found: Vec<u32>,
    /// Its ranks' MPI calls as rows (the receives' step).
    encoder: RankEncoder,
}

impl Placer {
    fn new(what: &'static str, sides: Sides) -> Result<Self> {
        Ok(Placer {
            what,
            sides,
            store: Some(CallStore::new(what)?),
            reader: RankReader::default(),
            regions: Vec::new(),
            calls: Vec::new(),
            messages: Some(Spill::new(what)?),
            members: match sides {
                Sides::Sends => None,
                Sides::Receives => Some(Spill::new(what)?),
            },
            sent_unplaced: FastMap::default(),
            reading: None,
            lookup: RankLookup::default(),
            unplaced: Vec::new(),
            rows: Vec::new(),
            members_read: Vec::new(),
            lookups: Vec::new(),
            found: Vec::new(),
            encoder: RankEncoder::default(),
        })
    }

    fn schema(&self) -> SchemaRef {
        match self.sides {
            Sides::Sends => at_receiver(),
            Sides::Receives => items(),
        }
    }

    fn store(&mut self) -> Result<&mut CallStore> {
        let what = self.what;
        self.store.as_mut().ok_or_else(|| DataFusionError::Internal(format!("{what}: placed without its calls")))
    }

    /// Each side's call (NOWHERE: not placed), a side being its rank and instant.
    fn locate(&mut self) -> Result<()> {
        let Placer { store, lookups, found, unplaced, what, .. } = self;
        let store =
            store.as_mut().ok_or_else(|| DataFusionError::Internal(format!("{what}: placed without its calls")))?;
        store.locate_all(lookups, found, unplaced)
    }

    /// The number of call `found` (NOWHERE: none) within its rank `ri`.
    fn within(&self, ri: u32, found: u32) -> Option<i64> {
        let store = self.store.as_ref()?;
        (found != NOWHERE).then(|| i64::from(found - store.ranks[ri as usize].first))
    }

    /// A side to look up: its rank's index in the store and its instant (NOWHERE: none).
    fn side(&self, rank: Option<i64>, t: Option<i64>) -> (u32, i64) {
        let index = rank.and_then(|r| self.lookup.index(r));
        match (index, t) {
            (Some(ri), Some(t)) => (ri as u32, t),
            _ => (NOWHERE, 0),
        }
    }

    /// The next batch of messages placed (None: none left).
    fn messages(&mut self) -> Result<Option<RecordBatch>> {
        let Some(reading) = self.reading.as_mut() else { return Ok(None) };
        let mut rows = std::mem::take(&mut self.rows);
        if reading.messages.next_rows(&mut rows, BATCH)? == 0 {
            self.rows = rows;
            return Ok(None);
        }
        self.lookups.clear();
        for r in &rows {
            let [_, src, send_post, send_done, dst, recv_post, recv_done, _] = r.map(value);
            let lookups = match self.sides {
                Sides::Sends => [self.side(src, send_post), self.side(src, send_done)],
                Sides::Receives => [self.side(dst, recv_post), self.side(dst, recv_done)],
            };
            self.lookups.extend(lookups);
        }
        self.locate()?;
        let batch = match self.sides {
            Sides::Sends => {
                let mut out = Vec::with_capacity(rows.len());
                for (r, f) in rows.iter().zip(self.found.chunks_exact(2)) {
                    let [_, src, _, _, dst, recv_post, recv_done, bytes] = r.map(value);
                    let (at, s) = (self.lookups[out.len() * 2].0, self.lookups[out.len() * 2 + 1].0);
                    let v = |x: Option<i64>| x.unwrap_or(NULL);
                    out.push((
                        dst.or(src).unwrap_or(NULL),
                        [
                            v(src),
                            v(self.within(at, f[0])),
                            v(self.within(s, f[1])),
                            v(dst),
                            v(recv_post),
                            v(recv_done),
                            v(bytes),
                            NULL,
                        ],
                    ));
                }
                packed_by_rank(&mut out)?
            }
            Sides::Receives => {
                let mut out = Vec::with_capacity(rows.len());
                for (k, (r, f)) in rows.iter().zip(self.found.chunks_exact(2)).enumerate() {
                    let [_, src, send_post, send_done, dst, _, _, bytes] = r.map(value);
                    let (at, d) = (self.lookups[k * 2].0, self.lookups[k * 2 + 1].0);
                    let item = Item::Message {
                        src,
                        send_post,
                        send_done,
                        dst,
                        recv_post: self.within(at, f[0]),
                        recv_done: self.within(d, f[1]),
                        bytes,
                    };
                    out.push(item.row());
                }
                with_ranks(&out, &mut RankEncoder::default())?
            }
        };
        self.rows = rows;
        Ok(Some(batch))
    }

    /// The next batch of collective members placed (None: none left).
    fn members(&mut self) -> Result<Option<RecordBatch>> {
        let Some(members) = self.reading.as_mut().and_then(|r| r.members.as_mut()) else { return Ok(None) };
        let mut rows = std::mem::take(&mut self.members_read);
        if members.next_rows(&mut rows, BATCH)? == 0 {
            self.members_read = rows;
            return Ok(None);
        }
        self.lookups.clear();
        for c in &rows {
            let [comm, instance, rank, begin, end] = c.map(value);
            // Members without a communicator or instance are not placed (nor counted).
            let known = comm.is_some() && instance.is_some();
            let begin = begin.or(end);
            self.lookups.push(if known { self.side(rank, begin) } else { (NOWHERE, 0) });
            self.lookups.push(if known { self.side(rank, end.or(begin)) } else { (NOWHERE, 0) });
        }
        self.locate()?;
        let mut out = Vec::new();
        for (k, (c, f)) in rows.iter().zip(self.found.chunks_exact(2)).enumerate() {
            let [comm, instance, rank, ..] = c.map(value);
            let ri = self.lookups[k * 2].0;
            if let (Some(comm), Some(instance), Some(rank), Some(post), Some(done)) =
                (comm, instance, rank, self.within(ri, f[0]), self.within(ri, f[1]))
            {
                out.push(Item::Member { rank, post, done, comm, instance }.row());
            }
        }
        self.members_read = rows;
        Ok(Some(with_ranks(&out, &mut RankEncoder::default())?))
    }

    /// The counts of sides left out, per rank (those of the sends' step added to the
    /// receives').
    fn counts(&mut self) -> Result<RecordBatch> {
        let store = self.store.as_ref().ok_or_else(|| DataFusionError::Internal("placed without calls".into()))?;
        let mut by_rank = std::mem::take(&mut self.sent_unplaced);
        for (r, n) in store.ranks.iter().zip(&self.unplaced).filter(|(_, n)| **n > 0) {
            *by_rank.entry(r.rank).or_default() += n;
        }
        let mut counts: Vec<(i64, i64)> = by_rank.into_iter().collect();
        counts.sort_unstable();
        match self.sides {
            Sides::Sends => {
                let mut rows: Vec<(i64, Packed)> =
                    counts.iter().map(|&(rank, n)| (rank, [NULL, NULL, NULL, NULL, NULL, NULL, NULL, n])).collect();
                packed_by_rank(&mut rows)
            }
            Sides::Receives => {
                let rows: Vec<[i64; 8]> =
                    counts.iter().map(|&(rank, sides)| Item::Unplaced { rank, sides }.row()).collect();
                with_ranks(&rows, &mut RankEncoder::default())
            }
        }
    }
}

impl Folder for Placer {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        let what = self.what;
        match (input, self.sides) {
            (1, Sides::Sends) => {
                let spill = self.messages.as_mut().ok_or_else(|| DataFusionError::Internal(what.into()))?;
                crate::spill::each_row::<8>(batch, |row| spill.push(row))
            }
            (1, Sides::Receives) => {
                let spill = self.messages.as_mut().ok_or_else(|| DataFusionError::Internal(what.into()))?;
                let sent = &mut self.sent_unplaced;
                each_packed(what, batch, |rank, row| {
                    let [src, send_post, send_done, dst, recv_post, recv_done, bytes, unplaced] = row;
                    if unplaced != NULL {
                        *sent.entry(rank).or_default() += unplaced;
                        return Ok(());
                    }
                    spill.push([rank, src, send_post, send_done, dst, recv_post, recv_done, bytes])
                })
            }
            (2, Sides::Receives) => {
                let spill = self.members.as_mut().ok_or_else(|| DataFusionError::Internal(what.into()))?;
                crate::spill::each_row::<5>(batch, |row| spill.push(row))
            }
            _ => Err(DataFusionError::Internal(format!("{what}: placing has no input {input}"))),
        }
    }

    fn held_bytes(&self) -> usize {
        self.sent_unplaced.len() * 32
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        Ok(self)
    }
}

impl Mapper for Placer {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    /// A chunk of whole ranks of the calls: their outermost MPI calls into the store (and, for
    /// the receives, on as rows).
    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let what = self.what;
        let store =
            self.store.as_mut().ok_or_else(|| DataFusionError::Internal(format!("{what}: calls after placing")))?;
        let (reader, regions, calls, encoder) =
            (&mut self.reader, &mut self.regions, &mut self.calls, &mut self.encoder);
        match self.sides {
            Sides::Sends => {
                super::sweep::push_ranks(what, reader, batches, store, regions, calls, |_, _| ())?;
                Ok(RecordBatch::new_empty(self.schema()))
            }
            Sides::Receives => {
                super::sweep::push_ranks(what, reader, batches, store, regions, calls, |run, names| {
                    encoder.push(run, names)
                })?;
                with_ranks(&[], encoder)
            }
        }
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let what = self.what;
        let store = self.store()?;
        store.finish_writing()?;
        let ranks = store.ranks.len();
        self.lookup = store.rank_lookup();
        self.unplaced = vec![0; ranks];
        let missing = || DataFusionError::Internal(format!("{what}: placed twice"));
        let messages = self.messages.take().ok_or_else(missing)?.into_rows()?;
        let members = self.members.take().map(Spill::into_rows).transpose()?;
        self.reading = Some(Reading { messages, members, counted: false });
        Ok(Vec::new())
    }

    fn more(&mut self) -> Result<Option<RecordBatch>> {
        commdb_catalog::interrupt::check(self.what)?;
        if let Some(batch) = self.messages()? {
            return Ok(Some(batch));
        }
        if let Some(batch) = self.members()? {
            return Ok(Some(batch));
        }
        match self.reading.as_mut() {
            Some(r) if !r.counted => {
                r.counted = true;
                Ok(Some(self.counts()?))
            }
            _ => Ok(None),
        }
    }

    fn held_bytes(&self) -> usize {
        self.store.as_ref().map_or(0, CallStore::held_bytes) + self.sent_unplaced.len() * 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    #[test]
    fn items_read_back_as_written() {
        let items = [
            Item::Message {
                src: Some(3),
                send_post: Some(0),
                send_done: None,
                dst: Some(4),
                recv_post: Some(7),
                recv_done: Some(8),
                bytes: None,
            },
            Item::Member { rank: 2, post: 5, done: 6, comm: 1, instance: 9 },
            Item::Unplaced { rank: 1, sides: 4 },
        ];
        for item in items {
            assert_eq!(Item::of(&item.row()), Some(item));
        }
        assert_eq!(Item::of(&[7, 0, 0, 0, 0, 0, 0, 0]), None, "an unknown kind");
        assert_eq!(Item::of(&[MEMBER, 1, NULL, 0, 0, 0, NULL, NULL]), None, "a member without its post");
    }

    /// Items and the sends placed cross the exchanges packed as bytes: every row comes back,
    /// NULLs and all, the ranks' rows of calls are left, and damaged bytes are an error.
    #[test]
    fn packed_rows_read_back_as_written() {
        let items: Vec<[i64; 8]> = (0..1000i64)
            .map(|k| match k % 3 {
                0 => Item::Message {
                    src: Some(k % 7),
                    send_post: Some(k),
                    send_done: (k % 5 != 0).then_some(k + 1),
                    dst: Some(k % 11),
                    recv_post: Some(k * 3),
                    recv_done: None,
                    bytes: Some(1 << (k % 40)),
                },
                1 => Item::Member { rank: k % 13, post: k, done: k + 2, comm: 1, instance: k / 3 },
                _ => Item::Unplaced { rank: k % 17, sides: k },
            })
            .map(Item::row)
            .collect();
        let batch = with_ranks(&items, &mut RankEncoder::default()).unwrap();
        let sizes = batch.column(CALLS).as_binary::<i64>();
        assert!(batch.num_rows() > 1, "a batch's items are rows of about ROW_BYTES");
        for i in 0..batch.num_rows() {
            assert!(sizes.value(i).len() < ROW_BYTES + 80, "row {i}: {} bytes", sizes.value(i).len());
        }
        let mut back = Vec::new();
        each_item("test", &batch, |row| {
            back.push(row);
            Ok(())
        })
        .unwrap();
        assert_eq!(back, items);
        assert_eq!(with_ranks(&[], &mut RankEncoder::default()).unwrap().num_rows(), 0);

        let mut sends: Vec<(i64, Packed)> = (0..500i64)
            .map(|k| (k % 9, [k, if k % 4 == 0 { NULL } else { k * 2 }, -k, k % 9, k << 20, NULL, k, NULL]))
            .chain([(3, [NULL, NULL, NULL, NULL, NULL, NULL, NULL, 42])])
            .chain((0..4000i64).map(|k| (11, [k, k, k + 1, 2, k * 5, k * 5 + 3, 1 << 20, NULL])))
            .collect();
        let batch = packed_by_rank(&mut sends.clone()).unwrap();
        let keys = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(keys.iter().filter(|k| *k != Some(11)).count(), 9, "a row per rank of few sends");
        assert!(keys.iter().filter(|k| *k == Some(11)).count() > 1, "a rank of many in rows of about ROW_BYTES");
        let mut back = Vec::new();
        each_packed("test", &batch, |rank, row| {
            back.push((rank, row));
            Ok(())
        })
        .unwrap();
        sends.sort_by_key(|r| r.0);
        assert_eq!(back, sends);

        let cut = batch.slice(0, 1);
        let columns = vec![
            cut.column(0).clone(),
            Arc::new(Int64Array::from(vec![cut.column(1).as_any().downcast_ref::<Int64Array>().unwrap().value(0) + 1]))
                as ArrayRef,
            cut.column(2).clone(),
        ];
        let damaged = RecordBatch::try_new(at_receiver(), columns).unwrap();
        let e = each_packed("ideal_replay", &damaged, |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("ideal_replay") && e.contains("did not read back"), "{e}");
    }
}
