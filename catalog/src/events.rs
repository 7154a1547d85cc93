//! Raw events as columns: the buffer every reader and the generator fill, and from which
//! `build` derives calls, messages and collectives. One vector per column, sentinels for
//! missing values (converted to Arrow nulls once, at the end), no per-event allocation.
//!
//! Events are stored stream by stream: all events of (rank 0, thread 0) in recording order,
//! then (rank 0, thread 1), ... `RawEvents::streams` gives the ranges.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Int8Array, Int32Array, Int64Array, PrimitiveArray, RecordBatch, StringArray,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowNativeType, ArrowPrimitiveType, Int8Type, Int32Type, Int64Type};

use crate::error::Result;
use crate::model;

/// Sentinel of a missing Int32 value.
pub const NONE_I32: i32 = i32::MIN;
/// Sentinel of a missing Int64 value.
pub const NONE_I64: i64 = i64::MIN;

/// The kinds of raw events. The discriminant is the dictionary key in the `events` table; kinds
/// added later come after `Other`, so keys written before keep their meaning. The thread kinds
/// are OTF2's records of threading models (OpenMP, Pthreads): fork and join of a team, a team's
/// begin and end on each member, lock acquisition and release, task creation, switch and
/// completion, and a thread's creation, begin, wait and end. The RMA kinds are OTF2's one-sided
/// records, which Score-P also writes for an accelerator's transfers between host and device:
/// a window's creation and destruction, a put and a get, and the completion of an operation
/// (blocking, non-blocking, tested, at the remote end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    Enter = 0,
    Leave,
    Send,
    Isend,
    IsendComplete,
    IrecvRequest,
    Recv,
    Irecv,
    RequestTest,
    RequestCancelled,
    CollBegin,
    CollEnd,
    ProgramBegin,
    ProgramEnd,
    MeasurementOn,
    MeasurementOff,
    BufferFlush,
    Other,
    ThreadFork,
    ThreadJoin,
    ThreadTeamBegin,
    ThreadTeamEnd,
    ThreadAcquireLock,
    ThreadReleaseLock,
    ThreadTaskCreate,
    ThreadTaskSwitch,
    ThreadTaskComplete,
    ThreadCreate,
    ThreadBegin,
    ThreadWait,
    ThreadEnd,
    RmaWinCreate,
    RmaWinDestroy,
    RmaPut,
    RmaGet,
    RmaOpCompleteBlocking,
    RmaOpCompleteNonBlocking,
    RmaOpTest,
    RmaOpCompleteRemote,
}

impl EventKind {
    pub const ALL: [EventKind; 39] = [
        EventKind::Enter,
        EventKind::Leave,
        EventKind::Send,
        EventKind::Isend,
        EventKind::IsendComplete,
        EventKind::IrecvRequest,
        EventKind::Recv,
        EventKind::Irecv,
        EventKind::RequestTest,
        EventKind::RequestCancelled,
        EventKind::CollBegin,
        EventKind::CollEnd,
        EventKind::ProgramBegin,
        EventKind::ProgramEnd,
        EventKind::MeasurementOn,
        EventKind::MeasurementOff,
        EventKind::BufferFlush,
        EventKind::Other,
        EventKind::ThreadFork,
        EventKind::ThreadJoin,
        EventKind::ThreadTeamBegin,
        EventKind::ThreadTeamEnd,
        EventKind::ThreadAcquireLock,
        EventKind::ThreadReleaseLock,
        EventKind::ThreadTaskCreate,
        EventKind::ThreadTaskSwitch,
        EventKind::ThreadTaskComplete,
        EventKind::ThreadCreate,
        EventKind::ThreadBegin,
        EventKind::ThreadWait,
        EventKind::ThreadEnd,
        EventKind::RmaWinCreate,
        EventKind::RmaWinDestroy,
        EventKind::RmaPut,
        EventKind::RmaGet,
        EventKind::RmaOpCompleteBlocking,
        EventKind::RmaOpCompleteNonBlocking,
        EventKind::RmaOpTest,
        EventKind::RmaOpCompleteRemote,
    ];

    /// The name shown in the `kind` column.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Enter => "enter",
            EventKind::Leave => "leave",
            EventKind::Send => "send",
            EventKind::Isend => "isend",
            EventKind::IsendComplete => "isend_complete",
            EventKind::IrecvRequest => "irecv_request",
            EventKind::Recv => "recv",
            EventKind::Irecv => "irecv",
            EventKind::RequestTest => "request_test",
            EventKind::RequestCancelled => "request_cancelled",
            EventKind::CollBegin => "coll_begin",
            EventKind::CollEnd => "coll_end",
            EventKind::ProgramBegin => "program_begin",
            EventKind::ProgramEnd => "program_end",
            EventKind::MeasurementOn => "measurement_on",
            EventKind::MeasurementOff => "measurement_off",
            EventKind::BufferFlush => "buffer_flush",
            EventKind::Other => "other",
            EventKind::ThreadFork => "thread_fork",
            EventKind::ThreadJoin => "thread_join",
            EventKind::ThreadTeamBegin => "thread_team_begin",
            EventKind::ThreadTeamEnd => "thread_team_end",
            EventKind::ThreadAcquireLock => "thread_acquire_lock",
            EventKind::ThreadReleaseLock => "thread_release_lock",
            EventKind::ThreadTaskCreate => "thread_task_create",
            EventKind::ThreadTaskSwitch => "thread_task_switch",
            EventKind::ThreadTaskComplete => "thread_task_complete",
            EventKind::ThreadCreate => "thread_create",
            EventKind::ThreadBegin => "thread_begin",
            EventKind::ThreadWait => "thread_wait",
            EventKind::ThreadEnd => "thread_end",
            EventKind::RmaWinCreate => "rma_win_create",
            EventKind::RmaWinDestroy => "rma_win_destroy",
            EventKind::RmaPut => "rma_put",
            EventKind::RmaGet => "rma_get",
            EventKind::RmaOpCompleteBlocking => "rma_op_complete_blocking",
            EventKind::RmaOpCompleteNonBlocking => "rma_op_complete_non_blocking",
            EventKind::RmaOpTest => "rma_op_test",
            EventKind::RmaOpCompleteRemote => "rma_op_complete_remote",
        }
    }

    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// The kind stored as `v` in `RawEvents::kind` (an unknown value reads as Other).
    pub fn from_u8(v: u8) -> EventKind {
        EventKind::ALL.get(usize::from(v)).copied().unwrap_or(EventKind::Other)
    }
}

/// MPI collective operations, as OTF2 enumerates them. The discriminant + 1 is the
/// dictionary key in `events.op` and `collectives.op` (0 means none).
pub const COLLECTIVE_OPS: [&str; 26] = [
    "barrier",
    "bcast",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "allreduce",
    "reduce",
    "reduce_scatter",
    "scan",
    "exscan",
    "reduce_scatter_block",
    "create_handle",
    "destroy_handle",
    "allocate",
    "deallocate",
    "create_handle_and_allocate",
    "destroy_handle_and_deallocate",
    "neighbor_allgather",
    "neighbor_alltoall",
    "other",
];

/// Code of a collective operation name (1-based), for `RawEvents::op`.
pub fn collective_op_code(name: &str) -> u8 {
    let lower = name.to_ascii_lowercase();
    let lower = lower.strip_prefix("mpi_").unwrap_or(&lower);
    COLLECTIVE_OPS.iter().position(|o| *o == lower).map_or(COLLECTIVE_OPS.len() as u8, |p| p as u8 + 1)
}

/// The columns of the `events` table before conversion to Arrow.
#[derive(Debug, Default, Clone)]
pub struct RawEvents {
    pub rank: Vec<i32>,
    pub thread: Vec<i32>,
    pub ts: Vec<i64>,
    pub kind: Vec<u8>,
    /// Index into the trace's region list, or NONE_I32.
    pub region: Vec<i32>,
    pub peer: Vec<i32>,
    pub comm: Vec<i32>,
    pub tag: Vec<i32>,
    pub bytes: Vec<i64>,
    pub request: Vec<i64>,
    /// Collective operation code (see `COLLECTIVE_OPS`), 0 for none.
    pub op: Vec<u8>,
    pub bytes_recv: Vec<i64>,
    /// The recorded local times, when clock correction changed `ts` (None: `ts` is local).
    pub ts_local: Option<Vec<i64>>,
}

/// One event to append; fields that do not apply keep their sentinel.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub rank: i32,
    pub thread: i32,
    pub ts: i64,
    pub kind: EventKind,
    pub region: i32,
    pub peer: i32,
    pub comm: i32,
    pub tag: i32,
    pub bytes: i64,
    pub request: i64,
    pub op: u8,
    pub bytes_recv: i64,
}

impl Event {
    pub fn new(rank: i32, thread: i32, ts: i64, kind: EventKind) -> Self {
        Event {
            rank,
            thread,
            ts,
            kind,
            region: NONE_I32,
            peer: NONE_I32,
            comm: NONE_I32,
            tag: NONE_I32,
            bytes: NONE_I64,
            request: NONE_I64,
            op: 0,
            bytes_recv: NONE_I64,
        }
    }
}

/// A contiguous range of events recorded by one (rank, thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream {
    pub rank: i32,
    pub thread: i32,
    pub start: usize,
    pub end: usize,
}

impl RawEvents {
    pub fn with_capacity(n: usize) -> Self {
        RawEvents {
            rank: Vec::with_capacity(n),
            thread: Vec::with_capacity(n),
            ts: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            region: Vec::with_capacity(n),
            peer: Vec::with_capacity(n),
            comm: Vec::with_capacity(n),
            tag: Vec::with_capacity(n),
            bytes: Vec::with_capacity(n),
            request: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            bytes_recv: Vec::with_capacity(n),
            ts_local: None,
        }
    }

    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Remove every event, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        for v in [&mut self.rank, &mut self.thread, &mut self.peer, &mut self.comm, &mut self.tag] {
            v.clear();
        }
        for v in [&mut self.ts, &mut self.bytes, &mut self.request, &mut self.bytes_recv] {
            v.clear();
        }
        self.kind.clear();
        self.region.clear();
        self.op.clear();
        self.ts_local = None;
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    #[inline]
    pub fn push(&mut self, e: Event) {
        self.rank.push(e.rank);
        self.thread.push(e.thread);
        self.push_sparse(&e);
        self.push_plain(e.ts, e.kind, e.region);
    }

    /// Append an event that only has a time, a kind and a region (enter, leave and the like), as
    /// a reader's decoding loop does: `rank` and `thread` are left to `finish_stream`, and the
    /// columns that only some kinds use are caught up by `push_detailed` or `finish_stream`.
    #[inline]
    pub fn push_plain(&mut self, ts: i64, kind: EventKind, region: i32) {
        self.ts.push(ts);
        self.kind.push(kind as u8);
        self.region.push(region);
    }

    /// Append an event with fields beyond time, kind and region, in the decoding loop that
    /// `push_plain` serves: the sparse columns are first padded with their sentinels up to it.
    pub fn push_detailed(&mut self, e: &Event) {
        self.pad_sparse(self.ts.len());
        self.push_sparse(e);
        self.push_plain(e.ts, e.kind, e.region);
    }

    /// Append the fields that only some kinds use.
    #[inline]
    fn push_sparse(&mut self, e: &Event) {
        self.peer.push(e.peer);
        self.comm.push(e.comm);
        self.tag.push(e.tag);
        self.bytes.push(e.bytes);
        self.request.push(e.request);
        self.op.push(e.op);
        self.bytes_recv.push(e.bytes_recv);
    }

    /// End a decoding loop of `push_plain` and `push_detailed` on one (rank, thread) stream:
    /// fill `rank` and `thread` and pad the sparse columns, so that every column has one value
    /// per event again.
    pub fn finish_stream(&mut self, rank: i32, thread: i32) {
        let n = self.ts.len();
        self.rank.resize(n, rank);
        self.thread.resize(n, thread);
        self.pad_sparse(n);
    }

    /// Pad the columns that only some kinds use with their sentinels up to `n` events.
    fn pad_sparse(&mut self, n: usize) {
        self.peer.resize(n, NONE_I32);
        self.comm.resize(n, NONE_I32);
        self.tag.resize(n, NONE_I32);
        self.bytes.resize(n, NONE_I64);
        self.request.resize(n, NONE_I64);
        self.op.resize(n, 0);
        self.bytes_recv.resize(n, NONE_I64);
    }

    #[inline]
    pub fn kind(&self, i: usize) -> EventKind {
        EventKind::from_u8(self.kind[i])
    }

    /// The `i`-th event, every field.
    pub fn event(&self, i: usize) -> Event {
        Event {
            rank: self.rank[i],
            thread: self.thread[i],
            ts: self.ts[i],
            kind: self.kind(i),
            region: self.region[i],
            peer: self.peer[i],
            comm: self.comm[i],
            tag: self.tag[i],
            bytes: self.bytes[i],
            request: self.request[i],
            op: self.op[i],
            bytes_recv: self.bytes_recv[i],
        }
    }

    /// Append all events of `other`.
    pub fn append(&mut self, other: &mut RawEvents) {
        self.rank.append(&mut other.rank);
        self.thread.append(&mut other.thread);
        self.ts.append(&mut other.ts);
        self.kind.append(&mut other.kind);
        self.region.append(&mut other.region);
        self.peer.append(&mut other.peer);
        self.comm.append(&mut other.comm);
        self.tag.append(&mut other.tag);
        self.bytes.append(&mut other.bytes);
        self.request.append(&mut other.request);
        self.op.append(&mut other.op);
        self.bytes_recv.append(&mut other.bytes_recv);
    }

    /// Concatenate per-stream buffers (already in (rank, thread) order) into one.
    pub fn concat(mut parts: Vec<RawEvents>) -> RawEvents {
        let total = parts.iter().map(RawEvents::len).sum();
        let mut all = RawEvents::with_capacity(total);
        for p in &mut parts {
            all.append(p);
        }
        all
    }

    /// The (rank, thread) streams, assuming events are grouped by stream.
    pub fn streams(&self) -> Vec<Stream> {
        self.columns().streams()
    }

    /// The columns, borrowed.
    pub fn columns(&self) -> EventColumns<'_> {
        EventColumns {
            rank: &self.rank,
            thread: &self.thread,
            ts: &self.ts,
            kind: &self.kind,
            region: &self.region,
            peer: &self.peer,
            comm: &self.comm,
            tag: &self.tag,
            bytes: &self.bytes,
            request: &self.request,
            op: &self.op,
            bytes_recv: &self.bytes_recv,
        }
    }

    /// Reorder events so that streams are contiguous in (rank, thread) order, keeping the
    /// recording order within each stream.
    pub fn group_by_stream(&mut self) {
        let sorted = self.rank.windows(2).zip(self.thread.windows(2)).all(|(r, t)| (r[0], t[0]) <= (r[1], t[1]));
        if sorted {
            return;
        }
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_by_key(|&i| (self.rank[i as usize], self.thread[i as usize]));
        fn permute<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
            *v = order.iter().map(|&i| v[i as usize]).collect();
        }
        permute(&mut self.rank, &order);
        permute(&mut self.thread, &order);
        permute(&mut self.ts, &order);
        permute(&mut self.kind, &order);
        permute(&mut self.region, &order);
        permute(&mut self.peer, &order);
        permute(&mut self.comm, &order);
        permute(&mut self.tag, &order);
        permute(&mut self.bytes, &order);
        permute(&mut self.request, &order);
        permute(&mut self.op, &order);
        permute(&mut self.bytes_recv, &order);
        if let Some(local) = &mut self.ts_local {
            permute(local, &order);
        }
    }

    /// Convert to the `events` table, moving the columns (no copy). `region_names[i]` is the
    /// name of region index i.
    pub fn into_batch(self, region_names: &[String]) -> Result<RecordBatch> {
        let columns = self.into_columns(ColumnSet::ALL, region_names)?;
        Ok(RecordBatch::try_new(model::EVENTS.schema(), columns.into_iter().map(|(_, c)| c).collect())?)
    }

    /// The columns of the `events` table in `wanted` (with their index in its schema, in
    /// order), moving the buffers (no copy); the others are dropped unbuilt, and their memory
    /// goes back to the allocator for the next buffer decoded.
    pub fn into_columns(self, wanted: ColumnSet, region_names: &[String]) -> Result<Vec<(usize, ArrayRef)>> {
        use column::*;
        let seq = wanted.has(SEQ).then(|| self.columns().seq());
        let RawEvents { rank, thread, ts, kind, region, peer, comm, tag, bytes, request, op, bytes_recv, ts_local } =
            self;
        let mut out: Vec<(usize, ArrayRef)> = Vec::with_capacity(wanted.len());
        if wanted.has(RANK) {
            out.push((RANK, Arc::new(Int32Array::from(rank))));
        }
        if wanted.has(THREAD) {
            out.push((THREAD, Arc::new(Int32Array::from(thread))));
        }
        if let Some(seq) = seq {
            out.push((SEQ, Arc::new(seq)));
        }
        // `ts_local` is `ts` itself when the clocks were not corrected.
        let local = ts_local.filter(|_| wanted.has(TS_LOCAL)).map(|l| Arc::new(Int64Array::from(l)) as ArrayRef);
        let ts_needed = wanted.has(TS) || (wanted.has(TS_LOCAL) && local.is_none());
        let ts: Option<ArrayRef> = ts_needed.then(|| Arc::new(Int64Array::from(ts)) as ArrayRef);
        if let (true, Some(ts)) = (wanted.has(TS), &ts) {
            out.push((TS, ts.clone()));
        }
        if wanted.has(KIND) {
            out.push((KIND, owned_kind_dictionary(kind)));
        }
        if wanted.has(REGION) {
            out.push((REGION, owned_region_dictionary(region, region_names)?));
        }
        for (i, values) in [(PEER, peer), (COMM, comm), (TAG, tag)] {
            if wanted.has(i) {
                out.push((i, Arc::new(owned_nullable::<Int32Type>(values, NONE_I32))));
            }
        }
        for (i, values) in [(BYTES, bytes), (REQUEST, request)] {
            if wanted.has(i) {
                out.push((i, Arc::new(owned_nullable::<Int64Type>(values, NONE_I64))));
            }
        }
        if wanted.has(OP) {
            out.push((OP, owned_op_dictionary(op)));
        }
        if wanted.has(BYTES_RECV) {
            out.push((BYTES_RECV, Arc::new(owned_nullable::<Int64Type>(bytes_recv, NONE_I64))));
        }
        if let Some(local) = local.or(ts).filter(|_| wanted.has(TS_LOCAL)) {
            out.push((TS_LOCAL, local));
        }
        Ok(out)
    }
}

/// The index of each column in the `events` table's schema ([`model::EVENTS`]).
pub mod column {
    pub const RANK: usize = 0;
    pub const THREAD: usize = 1;
    pub const SEQ: usize = 2;
    pub const TS: usize = 3;
    pub const KIND: usize = 4;
    pub const REGION: usize = 5;
    pub const PEER: usize = 6;
    pub const COMM: usize = 7;
    pub const TAG: usize = 8;
    pub const BYTES: usize = 9;
    pub const REQUEST: usize = 10;
    pub const OP: usize = 11;
    pub const BYTES_RECV: usize = 12;
    pub const TS_LOCAL: usize = 13;
    /// How many columns the table has.
    pub const COUNT: usize = 14;
}

/// A set of the `events` table's columns, by their index in its schema (`column`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColumnSet(u16);

impl ColumnSet {
    pub const ALL: ColumnSet = ColumnSet((1 << column::COUNT) - 1);
    pub const NONE: ColumnSet = ColumnSet(0);

    /// The columns of `indices` (an index past the table's columns is refused).
    pub fn of(indices: &[usize]) -> Result<ColumnSet> {
        let mut set = ColumnSet::NONE;
        for &i in indices {
            if i >= column::COUNT {
                return Err(crate::error::Error::argument(format!(
                    "the events table has {} columns; column {i} was asked for",
                    column::COUNT
                )));
            }
            set.0 |= 1 << i;
        }
        Ok(set)
    }

    pub fn has(self, i: usize) -> bool {
        i < column::COUNT && self.0 & (1 << i) != 0
    }

    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The columns of `self` not in `other`.
    pub fn without(self, other: ColumnSet) -> ColumnSet {
        ColumnSet(self.0 & !other.0)
    }

    pub fn with(self, other: ColumnSet) -> ColumnSet {
        ColumnSet(self.0 | other.0)
    }

    /// The indices, in schema order.
    pub fn indices(self) -> impl Iterator<Item = usize> {
        (0..column::COUNT).filter(move |&i| self.has(i))
    }
}

/// The columns the derivation reads, borrowed from a reader's buffers (`RawEvents::columns`)
/// or from a batch of the `events` table built here (`without_seq`), whose value
/// buffers keep the sentinels under their nulls. Either way no event is copied.
#[derive(Debug, Clone, Copy)]
pub struct EventColumns<'a> {
    pub rank: &'a [i32],
    pub thread: &'a [i32],
    pub ts: &'a [i64],
    pub kind: &'a [u8],
    pub region: &'a [i32],
    pub peer: &'a [i32],
    pub comm: &'a [i32],
    pub tag: &'a [i32],
    pub bytes: &'a [i64],
    pub request: &'a [i64],
    pub op: &'a [u8],
    pub bytes_recv: &'a [i64],
}

impl<'a> EventColumns<'a> {
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    #[inline]
    pub fn kind(&self, i: usize) -> EventKind {
        EventKind::from_u8(self.kind[i])
    }

    /// The (rank, thread) streams, assuming events are grouped by stream.
    pub fn streams(&self) -> Vec<Stream> {
        let n = self.len();
        // Grouped by stream: when the first and last events share one, it is the only one.
        if n > 0 && self.rank[0] == self.rank[n - 1] && self.thread[0] == self.thread[n - 1] {
            return vec![Stream { rank: self.rank[0], thread: self.thread[0], start: 0, end: n }];
        }
        let mut out = Vec::new();
        let mut start = 0;
        for i in 1..=n {
            if i == n || self.rank[i] != self.rank[start] || self.thread[i] != self.thread[start] {
                out.push(Stream { rank: self.rank[start], thread: self.thread[start], start, end: i });
                start = i;
            }
        }
        out
    }

    /// The columns of an `events` batch checked to be one (`seq` is not read).
    fn of_columns(columns: &'a [ArrayRef]) -> EventColumns<'a> {
        use arrow::array::AsArray;
        fn values<T: ArrowPrimitiveType>(columns: &[ArrayRef], i: usize) -> &[T::Native] {
            columns[i].as_primitive::<T>().values()
        }
        // Kind and operation codes were moved in as bytes: read them back as bytes.
        fn codes(columns: &[ArrayRef], i: usize) -> &[u8] {
            columns[i].as_dictionary::<Int8Type>().keys().values().inner().typed_data::<u8>()
        }
        EventColumns {
            rank: values::<Int32Type>(columns, 0),
            thread: values::<Int32Type>(columns, 1),
            ts: values::<Int64Type>(columns, 3),
            kind: codes(columns, 4),
            region: columns[5].as_dictionary::<Int32Type>().keys().values(),
            peer: values::<Int32Type>(columns, 6),
            comm: values::<Int32Type>(columns, 7),
            tag: values::<Int32Type>(columns, 8),
            bytes: values::<Int64Type>(columns, 9),
            request: values::<Int64Type>(columns, 10),
            op: codes(columns, 11),
            bytes_recv: values::<Int64Type>(columns, 12),
        }
    }

    /// The `seq` column: each event's position in its stream. The columns of one stream (a
    /// location's, as the readers decode them) take a slice of positions 0, 1, 2, ... that all
    /// such columns share ([`shared_positions`]), so that `seq` holds no memory of its own.
    fn seq(&self) -> Int64Array {
        let streams = self.streams();
        if let [only] = streams.as_slice() {
            return Int64Array::new(ScalarBuffer::new(shared_positions(only.end - only.start), 0, self.len()), None);
        }
        let mut seq = Vec::with_capacity(self.len());
        for s in streams {
            seq.extend(0..(s.end - s.start) as i64);
        }
        Int64Array::from(seq)
    }
}

/// Run `work` on the columns of `events` batches (made by `RawEvents::into_batch`) with their
/// `seq` column dropped, and make it anew after: `seq` (8 bytes an event) and the working
/// memory of `work` (the derivation's) are then never held at once, and the new `seq` reuses
/// memory `work` freed. Returns the batches, equal to those given, and what `work` gave (its
/// failure too: the batches come back either way).
pub fn without_seq<T>(
    batches: Vec<RecordBatch>,
    work: impl FnOnce(&[EventColumns<'_>]) -> Result<T>,
) -> Result<(Vec<RecordBatch>, Result<T>)> {
    let schema = model::EVENTS.schema();
    if batches.iter().any(|b| b.schema().fields() != schema.fields()) {
        return Err(crate::error::Error::argument("a batch that is not of the events table cannot be derived from"));
    }
    let bare: Vec<Vec<ArrayRef>> = batches
        .into_iter()
        .map(|b| {
            let mut columns = b.columns().to_vec();
            columns[2] = Arc::new(Int64Array::from(Vec::<i64>::new()));
            columns
        })
        .collect();
    let views: Vec<EventColumns<'_>> = bare.iter().map(|c| EventColumns::of_columns(c)).collect();
    let out = work(&views);
    let seqs: Vec<Int64Array> = views.iter().map(EventColumns::seq).collect();
    drop(views);
    let batches = bare
        .into_iter()
        .zip(seqs)
        .map(|(mut columns, seq)| {
            columns[2] = Arc::new(seq);
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        })
        .collect::<Result<_>>()?;
    Ok((batches, out))
}

/// One (rank, thread) stream inside a part of `EventParts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartStream {
    /// Index of the part.
    pub part: usize,
    /// Global index of the part's first event.
    pub offset: usize,
    pub stream: Stream,
}

/// Every stream of `parts` (each holding whole streams, in (rank, thread) order) with its part
/// and global offset, in order.
pub fn part_streams(parts: &[EventColumns<'_>]) -> Vec<PartStream> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (part, e) in parts.iter().enumerate() {
        out.extend(e.streams().into_iter().map(|stream| PartStream { part, offset, stream }));
        offset += e.len();
    }
    out
}

/// Raw events as parts (one per location, or per rank from the generator), each holding whole
/// streams, the parts in (rank, thread) order. Readers fill parts in parallel and never
/// concatenate them; each part becomes one record batch of the `events` table. A global event
/// index is the part's offset plus the index within the part.
#[derive(Debug, Clone, Default)]
pub struct EventParts {
    pub parts: Vec<RawEvents>,
}

impl EventParts {
    /// Parts already in stream order (empty parts are dropped).
    pub fn new(parts: Vec<RawEvents>) -> Self {
        let mut p = EventParts { parts: parts.into_iter().filter(|p| !p.is_empty()).collect() };
        if !p.is_ordered() {
            let mut all = RawEvents::concat(std::mem::take(&mut p.parts));
            all.group_by_stream();
            p.parts = vec![all];
        }
        p
    }

    /// One buffer in any order: its events are grouped by stream.
    pub fn single(mut events: RawEvents) -> Self {
        events.group_by_stream();
        EventParts::new(vec![events])
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(RawEvents::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn is_ordered(&self) -> bool {
        use rayon::prelude::*;
        let key = |e: &RawEvents, i: usize| (e.rank[i], e.thread[i]);
        let within = self
            .parts
            .par_iter()
            .all(|e| e.rank.windows(2).zip(e.thread.windows(2)).all(|(r, t)| (r[0], t[0]) <= (r[1], t[1])));
        let across = self.parts.windows(2).all(|w| key(&w[0], w[0].len() - 1) < key(&w[1], 0));
        within && across
    }

    /// Every stream with its part and global offset, in order.
    pub fn streams(&self) -> Vec<PartStream> {
        part_streams(&self.columns())
    }

    /// The columns of every part, borrowed.
    pub fn columns(&self) -> Vec<EventColumns<'_>> {
        self.parts.iter().map(RawEvents::columns).collect()
    }

    /// Earliest and latest event time (0, 0 when empty).
    pub fn time_span(&self) -> (i64, i64) {
        use rayon::prelude::*;
        let span = |ts: &[i64]| ts.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        let (lo, hi) = self
            .parts
            .par_iter()
            .map(|p| span(&p.ts))
            .reduce(|| (i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)));
        if lo > hi { (0, 0) } else { (lo, hi) }
    }

    /// The `events` table: one batch per part, converted in parallel.
    pub fn into_batches(self, region_names: &[String]) -> Result<Vec<RecordBatch>> {
        use rayon::prelude::*;
        self.parts.into_par_iter().map(|p| p.into_batch(region_names)).collect()
    }
}

/// A primitive array that takes `values` without copying, `sentinel` marking nulls. A column
/// of nothing but nulls (the MPI fields of an OpenMP thread or a GPU stream, the request of a
/// rank that only calls blocking operations) keeps no memory of its own: its values (the
/// sentinel) and validity are slices of buffers that such columns share, and `values` goes back
/// to the allocator.
pub fn owned_nullable<T: ArrowPrimitiveType>(values: Vec<T::Native>, sentinel: T::Native) -> PrimitiveArray<T>
where
    T::Native: PartialEq,
{
    let nulls = sentinel_nulls(&values, sentinel);
    if nulls.as_ref().is_some_and(|n| n.null_count() == values.len()) {
        let n = values.len();
        drop(values);
        return PrimitiveArray::<T>::new(ScalarBuffer::new(shared_filled(n, sentinel), 0, n), Some(all_null(n)));
    }
    PrimitiveArray::<T>::new(ScalarBuffer::from(values), nulls)
}

/// The validity of `n` values of which none is valid, a slice of shared zeros.
fn all_null(n: usize) -> NullBuffer {
    NullBuffer::new(BooleanBuffer::new(shared_filled(n.div_ceil(8), 0u8), 0, n))
}

/// Buffers that columns share, by what fills them and their size: (the filling's key, size in
/// bytes, buffer). All-null columns share buffers of their sentinel ([`shared_filled`]), `seq`
/// columns buffers of positions ([`shared_positions`]).
type Shared = Vec<(Vec<u8>, usize, Buffer)>;
static SHARED: std::sync::Mutex<Shared> = std::sync::Mutex::new(Vec::new());

/// The first `bytes` bytes of a buffer filled as `key` names (`make` fills one of a size),
/// shared by the columns of that filling and about that size: one buffer per key and power of
/// two of bytes (4 KiB at least), made on first use and let go once no column points into it
/// (checked on each call), so it lives as long as the tables that use it. A column's slice
/// points into at most twice its own bytes, so what an operator counts for a batch of it (the
/// buffers' capacities) is never much more than for a column of its own.
fn shared_slice(key: &[u8], bytes: usize, make: impl FnOnce(usize) -> Buffer) -> Buffer {
    let size = bytes.next_power_of_two().max(1 << 12);
    let mut shared = SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    shared.retain(|(_, _, b)| b.strong_count() > 1);
    let buffer = match shared.iter().find(|(k, s, _)| k.as_slice() == key && *s == size) {
        Some((_, _, b)) => b.clone(),
        None => {
            let b = make(size);
            shared.push((key.to_vec(), size, b.clone()));
            b
        }
    };
    buffer.slice_with_length(0, bytes)
}

/// `n` copies of `value` (a column's sentinel, or 0 for a validity of no valid value), sliced
/// from a buffer that all-null columns of that sentinel and about that size share
/// ([`shared_slice`]). The values under the nulls stay the sentinels, as readers of the raw
/// columns ([`EventColumns`]) expect.
fn shared_filled<T: ArrowNativeType>(n: usize, value: T) -> Buffer {
    use arrow::datatypes::ToByteSlice;
    let width = std::mem::size_of::<T>();
    // A sentinel's bytes as the key: a width of its own, never empty.
    shared_slice(value.to_byte_slice(), n * width, |size| Buffer::from_vec(vec![value; size / width]))
}

/// The positions 0 to `n` - 1 as 64-bit integers, sliced from a buffer of positions that the
/// `seq` columns of about that length share ([`shared_slice`]).
fn shared_positions(n: usize) -> Buffer {
    let width = std::mem::size_of::<i64>();
    // The empty key: no sentinel is empty.
    shared_slice(&[], n * width, |size| Buffer::from_vec((0..(size / width) as i64).collect::<Vec<i64>>()))
}

/// The validity of `values` where `sentinel` marks a null, packed 64 values at a time; None
/// when nothing is null.
fn sentinel_nulls<V: PartialEq + Copy>(values: &[V], sentinel: V) -> Option<NullBuffer> {
    // Most columns have no nulls at all, and a scan for one costs less than packing the bits.
    if !values.contains(&sentinel) {
        return None;
    }
    let nulls = NullBuffer::new(BooleanBuffer::collect_bool(values.len(), |i| values[i] != sentinel));
    (nulls.null_count() > 0).then_some(nulls)
}

/// A region column that takes its keys without copying.
pub fn owned_region_dictionary(regions: Vec<i32>, names: &[String]) -> Result<ArrayRef> {
    let keys = owned_nullable::<Int32Type>(regions, NONE_I32);
    let values = StringArray::from_iter_values(names.iter());
    Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values))?))
}

/// The `kind` column, taking the codes without copying.
fn owned_kind_dictionary(kinds: Vec<u8>) -> ArrayRef {
    let n = kinds.len();
    let keys = Int8Array::new(ScalarBuffer::new(Buffer::from_vec(kinds), 0, n), None);
    let values = StringArray::from(EventKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
    Arc::new(DictionaryArray::<Int8Type>::try_new(keys, Arc::new(values)).expect("kind codes are in range"))
}

/// A collective operation column taking the codes without copying: code 0 is NULL, code c is
/// COLLECTIVE_OPS[c - 1], so the dictionary's values start with an entry no key refers to.
pub fn owned_op_dictionary(ops: Vec<u8>) -> ArrayRef {
    let n = ops.len();
    let nulls = sentinel_nulls(&ops, 0);
    let keys = match nulls.as_ref().is_some_and(|v| v.null_count() == n) {
        // No collective operation at all: the keys (0) and validity are shared (as
        // `owned_nullable`).
        true => Int8Array::new(ScalarBuffer::new(shared_filled(n, 0u8), 0, n), Some(all_null(n))),
        false => Int8Array::new(ScalarBuffer::new(Buffer::from_vec(ops), 0, n), nulls),
    };
    let values = StringArray::from_iter_values(std::iter::once("").chain(COLLECTIVE_OPS.iter().copied()));
    Arc::new(DictionaryArray::<Int8Type>::try_new(keys, Arc::new(values)).expect("op codes are in range"))
}

/// A region column: Int32 keys into the trace's region names, NONE_I32 as null.
pub fn region_dictionary(regions: &[i32], names: &[String]) -> Result<ArrayRef> {
    owned_region_dictionary(regions.to_vec(), names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_and_grouping() {
        let mut ev = RawEvents::default();
        for (rank, ts) in [(1, 5), (0, 1), (1, 6), (0, 2)] {
            ev.push(Event::new(rank, 0, ts, EventKind::Enter));
        }
        ev.group_by_stream();
        assert_eq!(ev.ts, vec![1, 2, 5, 6]);
        let s = ev.streams();
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].rank, s[1].start, s[1].end), (1, 2, 4));
    }

    /// A thread's events (enter and leave only) and a rank's with one send: the thread's MPI
    /// columns are all null and point into shared buffers of their sentinel of at most twice
    /// their size (4 KiB at least); the rank's keep their values.
    #[test]
    fn all_null_columns_share_buffers_of_their_sentinel() {
        use column::*;
        let names = vec!["main".to_string()];
        let thread = |n: usize| {
            let mut ev = RawEvents::default();
            for i in 0..n {
                ev.push_plain(i as i64, if i % 2 == 0 { EventKind::Enter } else { EventKind::Leave }, 0);
            }
            ev.finish_stream(0, 1);
            ev.into_batch(&names).unwrap()
        };
        // Where a column's values and validity are, and what they point into.
        let at = |b: &RecordBatch, column: usize| {
            let data = b.column(column).to_data();
            let (values, validity) = (&data.buffers()[0], data.nulls().expect("nulls").buffer());
            let base = |x: &Buffer| x.as_ptr() as usize - x.ptr_offset();
            ([base(values), base(validity)], values.capacity())
        };
        let (small, large, after) = (thread(500), thread(300_001), thread(7));
        let sparse = [PEER, COMM, TAG, BYTES, REQUEST, OP, BYTES_RECV];
        for b in [&small, &large, &after] {
            for &c in &sparse {
                assert_eq!(b.column(c).null_count(), b.num_rows(), "column {c}");
                let own = b.column(c).to_data().get_slice_memory_size().unwrap();
                assert!(at(b, c).1 <= (2 * own).max(1 << 12), "column {c}: {} for {own}", at(b, c).1);
            }
            assert_eq!(b.column(TS).null_count(), 0);
            assert_eq!(at(b, PEER).0, at(b, TAG).0);
            assert_eq!(at(b, BYTES).0, at(b, BYTES_RECV).0);
        }
        for &c in &sparse {
            assert_eq!(at(&small, c).0, at(&after, c).0, "column {c}");
        }
        assert_ne!(at(&small, REQUEST).0[0], at(&large, REQUEST).0[0]);
        // Under the nulls, the raw columns the derivations read hold the sentinels.
        let (_, seen) = without_seq(vec![small.clone(), large.clone()], |views| {
            for v in views {
                assert!(v.peer.iter().chain(v.comm).chain(v.tag).all(|&x| x == NONE_I32));
                assert!(v.bytes.iter().chain(v.request).chain(v.bytes_recv).all(|&x| x == NONE_I64));
                assert!(v.op.iter().all(|&x| x == 0) && v.region.iter().all(|&x| x == 0));
            }
            Ok(views.len())
        })
        .unwrap();
        assert_eq!(seen.unwrap(), 2);

        let mut rank = RawEvents::default();
        rank.push_plain(0, EventKind::Enter, 0);
        let mut send = Event::new(0, 0, 1, EventKind::Send);
        (send.peer, send.comm, send.tag, send.bytes) = (1, 0, 7, 64);
        rank.push_detailed(&send);
        rank.push_plain(2, EventKind::Leave, 0);
        rank.finish_stream(0, 0);
        let b = rank.into_batch(&names).unwrap();
        for c in [PEER, COMM, TAG, BYTES] {
            assert_eq!(b.column(c).null_count(), 2, "column {c}");
            assert_ne!(at(&b, c).0[0], at(&small, c).0[0]);
        }
        let bytes = b.column(BYTES).as_any().downcast_ref::<Int64Array>().unwrap();
        use arrow::array::Array;
        assert_eq!((bytes.value(1), bytes.is_null(0)), (64, true));
        assert_eq!(at(&b, REQUEST).0, at(&small, REQUEST).0);

        // Once nothing points into it, a shared buffer is let go (a sentinel of no column, so
        // that no test beside this one shares it).
        let odd = shared_filled(1_000, 0x1234_5678_i32);
        let base = odd.as_ptr() as usize;
        let held = || SHARED.lock().unwrap().iter().any(|(_, _, x)| x.as_ptr() as usize == base);
        assert!(held());
        drop(shared_filled(1, 0u8));
        assert!(held(), "still in use");
        drop(odd);
        drop(shared_filled(1, 0u8));
        assert!(!held());
    }

    /// A location's `seq` is its events' positions, a slice of positions that locations of
    /// about its length share (at most twice its bytes); events of several streams in one
    /// batch count each stream from 0; the derivation's round trip gives the same positions.
    #[test]
    fn seq_columns_share_their_positions() {
        use arrow::array::Array;
        let names = vec!["main".to_string()];
        let location = |rank: i32, n: usize| {
            let mut ev = RawEvents::default();
            for i in 0..n {
                ev.push_plain(i as i64, if i % 2 == 0 { EventKind::Enter } else { EventKind::Leave }, 0);
            }
            ev.finish_stream(rank, 0);
            ev
        };
        let seq = |b: &RecordBatch| b.column(column::SEQ).as_any().downcast_ref::<Int64Array>().unwrap().clone();
        let base = |a: &Int64Array| a.values().inner().as_ptr() as usize - a.values().inner().ptr_offset();
        let (a, b, big) = (
            location(0, 700).into_batch(&names).unwrap(),
            location(1, 900).into_batch(&names).unwrap(),
            location(2, 100_000).into_batch(&names).unwrap(),
        );
        for (batch, n) in [(&a, 700), (&b, 900), (&big, 100_000)] {
            let s = seq(batch);
            assert_eq!(s.null_count(), 0);
            assert!(s.values().iter().copied().eq(0..n as i64));
            let own = s.to_data().get_slice_memory_size().unwrap();
            assert!(s.values().inner().capacity() <= (2 * own).max(1 << 12), "{own}");
        }
        assert_eq!(base(&seq(&a)), base(&seq(&b)));
        assert_ne!(base(&seq(&a)), base(&seq(&big)));

        let mut two = location(3, 5);
        two.append(&mut location(4, 3));
        let both = seq(&two.into_batch(&names).unwrap());
        assert_eq!(both.values().to_vec(), vec![0, 1, 2, 3, 4, 0, 1, 2]);

        let (again, _) = without_seq(vec![a.clone(), big.clone()], |_| Ok(())).unwrap();
        assert_eq!((seq(&again[0]), seq(&again[1])), (seq(&a), seq(&big)));
    }

    #[test]
    fn a_decoding_loop_fills_every_column() {
        let mut ev = RawEvents::with_capacity(4);
        ev.push_plain(10, EventKind::Enter, 3);
        let mut send = Event::new(7, 1, 11, EventKind::Send);
        (send.peer, send.tag, send.bytes) = (2, 5, 64);
        ev.push_detailed(&send);
        ev.push_plain(12, EventKind::Leave, 3);
        ev.finish_stream(7, 1);
        assert_eq!((ev.rank.clone(), ev.thread.clone()), (vec![7; 3], vec![1; 3]));
        assert_eq!(ev.peer, vec![NONE_I32, 2, NONE_I32]);
        assert_eq!(ev.bytes, vec![NONE_I64, 64, NONE_I64]);
        assert_eq!(ev.region, vec![3, NONE_I32, 3]);
        assert_eq!(ev.op, vec![0; 3]);
        let batch = ev.into_batch(&["a".into(), "b".into(), "c".into(), "work".into()]).unwrap();
        let op = batch.column_by_name("op").unwrap();
        assert_eq!(op.null_count(), 3);
        let kind = arrow::compute::cast(batch.column_by_name("kind").unwrap(), &arrow::datatypes::DataType::Utf8);
        let kind = kind.unwrap();
        let kind = kind.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(kind.iter().flatten().collect::<Vec<_>>(), ["enter", "send", "leave"]);
    }

    #[test]
    fn op_codes_become_names_or_nulls() {
        let mut ev = RawEvents::default();
        for op in [0, 1, 12, COLLECTIVE_OPS.len() as u8] {
            let mut e = Event::new(0, 0, 1, EventKind::CollEnd);
            e.op = op;
            ev.push(e);
        }
        let batch = ev.into_batch(&[]).unwrap();
        let op = arrow::compute::cast(batch.column_by_name("op").unwrap(), &arrow::datatypes::DataType::Utf8);
        let op = op.unwrap();
        let op = op.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(op.iter().collect::<Vec<_>>(), [None, Some("barrier"), Some("allreduce"), Some("other")]);
    }

    #[test]
    fn collective_op_codes() {
        assert_eq!(COLLECTIVE_OPS[collective_op_code("MPI_Allreduce") as usize - 1], "allreduce");
        assert_eq!(COLLECTIVE_OPS[collective_op_code("weird") as usize - 1], "other");
    }
}
