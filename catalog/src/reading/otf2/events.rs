//! Decoding one location's event file (`traces/<location>.evt`) straight into the `events`
//! columns: a timestamp record sets the time of the events that follow, an attribute list
//! belongs to the next event (skipped), and each event record is decoded by its type. Local
//! ids (regions, communicators, metrics) go through the location's mapping tables; peers and
//! roots, given as ranks within their communicator, become world ranks. Records of types this
//! reader does not use are skipped by their length and counted. Ticks become nanoseconds since
//! the trace's global offset. O(bytes), no allocation per event.

use std::collections::HashMap;
use std::path::Path;

use crate::error::Result;
use crate::events::{Event, EventKind, NONE_I32, NONE_I64, RawEvents};
use crate::fast_hash::FastMap;
use crate::reading::otf2::buffer::{ATTRIBUTE_LIST, Cursor, TIMESTAMP, UNDEFINED_U32, UNDEFINED_U64};
use crate::reading::otf2::defs::{
    LocalDefs, MAPPING_ATTRIBUTE, MAPPING_COMM, MAPPING_METRIC, MAPPING_REGION, MAPPING_RMA_WIN,
};
use crate::trace::Warnings;

const BUFFER_FLUSH: u8 = 10;
const MEASUREMENT_ON_OFF: u8 = 11;
const ENTER: u8 = 12;
const LEAVE: u8 = 13;
const MPI_SEND: u8 = 14;
const MPI_ISEND: u8 = 15;
const MPI_ISEND_COMPLETE: u8 = 16;
const MPI_IRECV_REQUEST: u8 = 17;
const MPI_RECV: u8 = 18;
const MPI_IRECV: u8 = 19;
const MPI_REQUEST_TEST: u8 = 20;
const MPI_REQUEST_CANCELLED: u8 = 21;
const MPI_COLLECTIVE_BEGIN: u8 = 22;
const MPI_COLLECTIVE_END: u8 = 23;
const OMP_FORK: u8 = 24;
const OMP_JOIN: u8 = 25;
const OMP_ACQUIRE_LOCK: u8 = 26;
const OMP_RELEASE_LOCK: u8 = 27;
const OMP_TASK_CREATE: u8 = 28;
const OMP_TASK_SWITCH: u8 = 29;
const OMP_TASK_COMPLETE: u8 = 30;
const METRIC: u8 = 31;
const RMA_WIN_CREATE: u8 = 35;
const RMA_WIN_DESTROY: u8 = 36;
const RMA_PUT: u8 = 46;
const RMA_GET: u8 = 47;
const RMA_OP_COMPLETE_BLOCKING: u8 = 49;
const RMA_OP_COMPLETE_NON_BLOCKING: u8 = 50;
const RMA_OP_TEST: u8 = 51;
const RMA_OP_COMPLETE_REMOTE: u8 = 52;
const THREAD_FORK: u8 = 53;
const THREAD_JOIN: u8 = 54;
const THREAD_TEAM_BEGIN: u8 = 55;
const THREAD_TEAM_END: u8 = 56;
const THREAD_ACQUIRE_LOCK: u8 = 57;
const THREAD_RELEASE_LOCK: u8 = 58;
const THREAD_TASK_CREATE: u8 = 59;
const THREAD_TASK_SWITCH: u8 = 60;
const THREAD_TASK_COMPLETE: u8 = 61;
const THREAD_CREATE: u8 = 62;
const THREAD_BEGIN: u8 = 63;
const THREAD_WAIT: u8 = 64;
const THREAD_END: u8 = 65;
/// The paradigm a fork, join or lock record is taken to be of (OTF2's code for OpenMP).
const OPENMP: u8 = 3;
const PROGRAM_BEGIN: u8 = 83;
const PROGRAM_END: u8 = 84;

/// Event types stored without a length (the reference library's "singleton" records): Enter,
/// Leave, MpiIsendComplete, MpiIrecvRequest, MpiRequestTest, MpiRequestCancelled, OmpFork and
/// OmpTaskCreate/Switch/Complete. Other records of one compressed field (RmaWinCreate,
/// ThreadTeamBegin, ...) carry a length like every record.
const SINGLETONS: [u8; 10] = [12, 13, 16, 17, 20, 21, 24, 28, 29, 30];

/// Whether `n` ids up to `max` are indexed by a vector rather than a hash map: at most about
/// three unused slots per id.
fn dense_enough(max: usize, n: usize) -> bool {
    max <= n * 4 + 1024
}

/// Region ids to region indices: a vector when the ids are dense (as writers make them), a
/// hash map otherwise.
#[derive(Debug, Clone)]
pub enum RegionIndex {
    Dense(Vec<i32>),
    Sparse(HashMap<u32, i32>),
}

impl RegionIndex {
    pub fn new(ids: &[u32]) -> Self {
        let max = ids.iter().copied().max().unwrap_or(0) as usize;
        if dense_enough(max, ids.len()) {
            let mut v = vec![NONE_I32; max + 1];
            for (i, id) in ids.iter().enumerate() {
                v[*id as usize] = i as i32;
            }
            RegionIndex::Dense(v)
        } else {
            RegionIndex::Sparse(ids.iter().enumerate().map(|(i, id)| (*id, i as i32)).collect())
        }
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<i32> {
        match self {
            RegionIndex::Dense(v) => v.get(id as usize).copied().filter(|i| *i != NONE_I32),
            RegionIndex::Sparse(m) => m.get(&id).copied(),
        }
    }
}

/// Communicator id -> world rank of each of its ranks, looked up for every message: a vector
/// when the ids are dense (as writers make them), a hash map otherwise.
#[derive(Debug, Clone)]
pub enum CommMembers {
    Dense(Vec<Option<Vec<i32>>>),
    Sparse(FastMap<u32, Vec<i32>>),
}

impl CommMembers {
    pub fn new(members: &HashMap<u32, Vec<i32>>) -> Self {
        let max = members.keys().copied().max().unwrap_or(0) as usize;
        if dense_enough(max, members.len()) {
            let mut v = vec![None; max + 1];
            for (id, m) in members {
                v[*id as usize] = Some(m.clone());
            }
            CommMembers::Dense(v)
        } else {
            CommMembers::Sparse(members.iter().map(|(id, m)| (*id, m.clone())).collect())
        }
    }

    #[inline]
    pub fn get(&self, comm: u32) -> Option<&[i32]> {
        match self {
            CommMembers::Dense(v) => v.get(comm as usize).and_then(Option::as_deref),
            CommMembers::Sparse(m) => m.get(&comm).map(Vec::as_slice),
        }
    }
}

/// An RMA window: its communicator and the (rank, thread) of each of its members, by their
/// rank in it.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub comm: i32,
    pub members: Vec<(i32, i32)>,
}

/// What an attribute of an accelerator API call refers to (Score-P's `CUDA_STREAM_REF`,
/// `CUDA_EVENT_REF` and their kin for HIP and OpenCL): the stream it acts on (a location) or the
/// device event it records or waits for (an id). An enter or leave keeps them in its otherwise
/// unused columns: the stream as `peer` (rank) and `tag` (thread), the event as `request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    Stream,
    Event,
}

/// The references of the attribute list before an event.
#[derive(Debug, Clone, Copy)]
struct References {
    stream: (i32, i32),
    event: i64,
}

/// Read an attribute list (the cursor after its type byte): the references it carries among
/// the attributes `ctx` keeps, or None. Values are read by their type (OTF2's encoding: 8- and
/// 16-bit numbers, floats and doubles as they are, other numbers and references compressed);
/// a value of a type OTF2 did not define ends the list's reading at its end.
fn read_references(c: &mut Cursor<'_>, ctx: &Context<'_>) -> Result<Option<References>> {
    let end = c.record_end()?;
    let n = c.u32c()?;
    let mut refs = References { stream: (NONE_I32, NONE_I32), event: NONE_I64 };
    let mut found = false;
    for _ in 0..n {
        let id = ctx.local.map(MAPPING_ATTRIBUTE, c.u32c()?);
        let ty = c.u8()?;
        let value = match ty {
            1 | 5 => u64::from(c.u8()?),
            2 | 6 => u64::from(c.u8()?) | (u64::from(c.u8()?) << 8),
            9 => {
                for _ in 0..4 {
                    c.u8()?;
                }
                0
            }
            10 => {
                for _ in 0..8 {
                    c.u8()?;
                }
                0
            }
            4 | 8 | 13 => c.u64c()?,
            3 | 7 | 11 | 12 | 14..=25 => u64::from(c.u32c()?),
            _ => break,
        };
        match ctx.attributes.get(&id) {
            Some(Reference::Stream) if ty == 13 => {
                if let Some(&at) = ctx.location_of.get(&ctx.local.location(value)) {
                    refs.stream = at;
                    found = true;
                }
            }
            Some(Reference::Event) if matches!(ty, 3 | 4) => {
                refs.event = value as i64;
                found = true;
            }
            _ => {}
        }
    }
    c.finish(end)?;
    Ok(found.then_some(refs))
}

/// How times and ids of a location are translated.
#[derive(Debug)]
pub struct Context<'a> {
    pub rank: i32,
    pub thread: i32,
    pub global_offset: u64,
    pub timer_resolution: u64,
    /// The ticks the archive announces its events within (ClockProperties: global offset to
    /// offset plus trace length), when it announces a length.
    pub announced: Option<(u64, u64)>,
    pub local: &'a LocalDefs,
    /// Region id -> index into the trace's region list.
    pub region_index: &'a RegionIndex,
    /// Communicator id -> world rank of each communicator rank.
    pub comm_members: &'a CommMembers,
    /// Communicators whose only member is the calling rank (groups of type COMM_SELF).
    pub self_comms: &'a [u32],
    /// RMA windows by id.
    pub windows: &'a HashMap<u32, Window>,
    /// The attributes an enter or leave keeps, by id.
    pub attributes: &'a HashMap<u32, Reference>,
    /// (rank, thread) of every location id.
    pub location_of: &'a HashMap<u64, (i32, i32)>,
    /// Metric (class or instance) id -> (member name index, value type) per value.
    pub metric_members: &'a HashMap<u32, Vec<(i32, u8)>>,
    /// Number of events the location's definition announces (used to size the columns).
    pub expected_events: u64,
}

impl Context<'_> {
    /// Ticks to nanoseconds since the global offset.
    #[inline]
    pub fn ns(&self, ticks: u64) -> i64 {
        let d = i128::from(ticks) - i128::from(self.global_offset);
        let ns = if self.timer_resolution == 1_000_000_000 {
            d
        } else {
            d * 1_000_000_000 / i128::from(self.timer_resolution)
        };
        ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// The communicator and definition of the RMA window a location names `local`.
    fn window(&self, local: u32, warnings: &mut Warnings) -> (i32, Option<&Window>) {
        let id = self.local.map(MAPPING_RMA_WIN, local);
        match self.windows.get(&id) {
            Some(w) => (w.comm, Some(w)),
            None => {
                warnings.add("otf2_rma_window_undefined", || {
                    format!("RMA window {id} is not defined; its operations' communicator and peer are NULL")
                });
                (NONE_I32, None)
            }
        }
    }

    #[inline]
    fn world_rank(&self, comm: u32, rank: u32, warnings: &mut Warnings) -> i32 {
        if rank == UNDEFINED_U32 {
            return NONE_I32;
        }
        match self.comm_members.get(comm) {
            Some(m) => match m.get(rank as usize) {
                Some(&w) => w,
                None if rank == 0 && self.self_comms.contains(&comm) => self.rank,
                None => {
                    warnings.add("otf2_rank_outside_communicator", || {
                        format!("rank {rank} of communicator {comm} is outside the communicator; the peer is NULL")
                    });
                    NONE_I32
                }
            },
            None => i32::try_from(rank).unwrap_or(NONE_I32),
        }
    }
}

/// Metric samples decoded from a location.
#[derive(Debug, Default)]
pub struct MetricSamples {
    pub ts: Vec<i64>,
    pub metric: Vec<i32>,
    pub value: Vec<f64>,
}

/// Events and metric samples of one location, plus what was skipped.
#[derive(Debug, Default)]
pub struct Decoded {
    pub events: RawEvents,
    pub metrics: MetricSamples,
    pub warnings: Warnings,
}

fn name_of(t: u8) -> &'static str {
    match t {
        BUFFER_FLUSH => "BufferFlush",
        MEASUREMENT_ON_OFF => "MeasurementOnOff",
        ENTER => "Enter",
        LEAVE => "Leave",
        MPI_SEND => "MpiSend",
        MPI_ISEND => "MpiIsend",
        MPI_ISEND_COMPLETE => "MpiIsendComplete",
        MPI_IRECV_REQUEST => "MpiIrecvRequest",
        MPI_RECV => "MpiRecv",
        MPI_IRECV => "MpiIrecv",
        MPI_REQUEST_TEST => "MpiRequestTest",
        MPI_REQUEST_CANCELLED => "MpiRequestCancelled",
        MPI_COLLECTIVE_BEGIN => "MpiCollectiveBegin",
        MPI_COLLECTIVE_END => "MpiCollectiveEnd",
        METRIC => "Metric",
        OMP_FORK => "OmpFork",
        OMP_JOIN => "OmpJoin",
        OMP_ACQUIRE_LOCK => "OmpAcquireLock",
        OMP_RELEASE_LOCK => "OmpReleaseLock",
        OMP_TASK_CREATE => "OmpTaskCreate",
        OMP_TASK_SWITCH => "OmpTaskSwitch",
        OMP_TASK_COMPLETE => "OmpTaskComplete",
        THREAD_FORK => "ThreadFork",
        THREAD_JOIN => "ThreadJoin",
        THREAD_TEAM_BEGIN => "ThreadTeamBegin",
        THREAD_TEAM_END => "ThreadTeamEnd",
        THREAD_ACQUIRE_LOCK => "ThreadAcquireLock",
        THREAD_RELEASE_LOCK => "ThreadReleaseLock",
        THREAD_TASK_CREATE => "ThreadTaskCreate",
        THREAD_TASK_SWITCH => "ThreadTaskSwitch",
        THREAD_TASK_COMPLETE => "ThreadTaskComplete",
        THREAD_CREATE => "ThreadCreate",
        THREAD_BEGIN => "ThreadBegin",
        THREAD_WAIT => "ThreadWait",
        THREAD_END => "ThreadEnd",
        PROGRAM_BEGIN => "ProgramBegin",
        PROGRAM_END => "ProgramEnd",
        _ => "event",
    }
}

#[inline]
fn opt_i32(v: u32) -> i32 {
    if v == UNDEFINED_U32 { NONE_I32 } else { v.min(i32::MAX as u32) as i32 }
}

#[inline]
fn opt_i64(v: u64) -> i64 {
    if v == UNDEFINED_U64 { NONE_I64 } else { v.min(i64::MAX as u64) as i64 }
}

/// The farthest an event's time may be from the archive's global offset (2^61 ns, 73 years).
const MAX_NS: i64 = 1 << 61;

/// What a location's times and records must be: times never go backwards within a location
/// (OTF2 writes each location's events in time order), end by the end the archive announces,
/// and no event record repeats another of the same time (a record, or a block of records,
/// written twice). A bit flip in a
/// time or a record written twice breaks one of these; each is counted in `warnings` with its
/// first place, and the events are kept as the file has them.
#[derive(Debug, Default)]
struct TimeChecks {
    /// The last time record's ticks.
    last: Option<u64>,
    /// Where the event records since the time last moved are in the file (start, end); the
    /// first `SAME_TIME` of them are kept.
    at_this_time: Vec<(usize, usize)>,
}

/// Event records at one time compared with each other for repeats: a block of records written
/// twice repeats within it; more records at one instant are rare, and not compared.
const SAME_TIME: usize = 64;

impl TimeChecks {
    fn see(&mut self, ticks: u64, at: usize, ctx: &Context<'_>, path: &Path, warnings: &mut Warnings) {
        if let Some(last) = self.last
            && ticks < last
        {
            warnings.add("otf2_time_backwards", || {
                format!(
                    "{} at byte {at}: time {ticks} ticks is before the previous event's {last}: times go backwards within the location (a damaged time?); events keep the file's order",
                    path.display()
                )
            });
        }
        // Only the end is checked: local clocks skewed behind the global clock record times
        // before the global offset (commdb's own archives do), which a reader cannot tell
        // from damage; a time that went down is caught as going backwards. The announced
        // range is of global times, and the file holds local ones: a local clock may run
        // ahead by its offset to the global one (Score-P's ClockOffset records), so that much
        // past the end, twice over for the extrapolation after the last offset, is allowed.
        let slack = ctx.local.clock_offsets.iter().map(|o| o.1.unsigned_abs()).max().unwrap_or(0);
        if let Some((lo, hi)) = ctx.announced
            && ticks > hi.saturating_add(slack.saturating_mul(2))
        {
            warnings.add("otf2_time_outside_range", || {
                format!(
                    "{} at byte {at}: time {ticks} ticks is after the end the archive announces ({hi}: global offset {lo} plus trace length, its ClockProperties): a damaged time?",
                    path.display()
                )
            });
        }
        if self.last != Some(ticks) {
            self.at_this_time.clear();
        }
        self.last = Some(ticks);
    }

    /// An event record occupies `data[start..end]`: it must not repeat one of the same time.
    fn record(&mut self, data: &[u8], start: usize, end: usize, path: &Path, warnings: &mut Warnings) {
        let this = data.get(start..end);
        if self.at_this_time.iter().any(|&(a, b)| data.get(a..b) == this) {
            warnings.add("otf2_repeated_record", || {
                format!(
                    "{} at byte {start}: the event record repeats one of the same time (written twice?); both are kept",
                    path.display()
                )
            });
        }
        if self.at_this_time.len() < SAME_TIME {
            self.at_this_time.push((start, end));
        }
    }
}

/// Decode the event file `path` of one location.
pub fn decode(path: &Path, data: &[u8], chunk_size: u64, ctx: &Context<'_>) -> Result<Decoded> {
    // Every event takes at least two bytes, which bounds what a corrupt count can reserve.
    let capacity = ctx.expected_events.min(data.len() as u64 / 2) as usize;
    let mut out = Decoded { events: RawEvents::with_capacity(capacity), ..Decoded::default() };
    let mut c = Cursor::new(data, chunk_size, path)?;
    let mut ts: i64 = ctx.ns(0);
    let mut skipped: HashMap<u8, i64> = HashMap::new();
    let mut times = TimeChecks::default();
    // The references of the attribute list just read, for the event after it.
    let mut references: Option<References> = None;
    while let Some(t) = c.next_record()? {
        c.record = name_of(t);
        let start = c.pos - 1;
        if t == TIMESTAMP {
            let ticks = c.u64_full()?;
            times.see(ticks, start, ctx, path, &mut out.warnings);
            ts = ctx.ns(ticks);
            // Farther than 73 years from the archive's start is damage, not a measurement, and
            // differences of such times would overflow.
            if !(-MAX_NS..=MAX_NS).contains(&ts) {
                return Err(c.error(format!(
                    "time {ticks} ticks is {ts} ns from the archive's global offset, more than 2^61 ns (73 years): a damaged time"
                )));
            }
            continue;
        }
        if t == ATTRIBUTE_LIST {
            c.record = "attribute list";
            if ctx.attributes.is_empty() {
                c.skip_record()?;
            } else {
                references = read_references(&mut c, ctx)?;
            }
            continue;
        }
        let refs = references.take();
        if t == ENTER || t == LEAVE {
            let region = ctx.local.map(MAPPING_REGION, c.u32c()?);
            let kind = if t == ENTER { EventKind::Enter } else { EventKind::Leave };
            match (ctx.region_index.get(region), refs) {
                (Some(i), None) => out.events.push_plain(ts, kind, i),
                (Some(i), Some(r)) => {
                    let mut e = Event::new(ctx.rank, ctx.thread, ts, kind);
                    e.region = i;
                    (e.peer, e.tag) = r.stream;
                    e.request = r.event;
                    out.events.push_detailed(&e);
                }
                (None, _) => return Err(c.error(format!("refers to region {region}, which is not defined"))),
            }
            times.record(data, start, c.pos, path, &mut out.warnings);
            continue;
        }
        let mut e = Event::new(ctx.rank, ctx.thread, ts, EventKind::Other);
        match t {
            MPI_SEND | MPI_ISEND | MPI_RECV | MPI_IRECV => {
                let end = c.record_end()?;
                let peer = c.u32c()?;
                let comm = ctx.local.map(MAPPING_COMM, c.u32c()?);
                let tag = c.u32c()?;
                let bytes = c.u64c()?;
                e.kind = match t {
                    MPI_SEND => EventKind::Send,
                    MPI_ISEND => EventKind::Isend,
                    MPI_RECV => EventKind::Recv,
                    _ => EventKind::Irecv,
                };
                if t == MPI_ISEND || t == MPI_IRECV {
                    e.request = opt_i64(c.u64c()?);
                }
                c.finish(end)?;
                e.peer = ctx.world_rank(comm, peer, &mut out.warnings);
                e.comm = comm as i32;
                e.tag = tag as i32;
                e.bytes = opt_i64(bytes);
            }
            MPI_ISEND_COMPLETE | MPI_IRECV_REQUEST | MPI_REQUEST_TEST | MPI_REQUEST_CANCELLED => {
                e.request = opt_i64(c.u64c()?);
                e.kind = match t {
                    MPI_ISEND_COMPLETE => EventKind::IsendComplete,
                    MPI_IRECV_REQUEST => EventKind::IrecvRequest,
                    MPI_REQUEST_TEST => EventKind::RequestTest,
                    _ => EventKind::RequestCancelled,
                };
            }
            MPI_COLLECTIVE_BEGIN => {
                let end = c.record_end()?;
                c.finish(end)?;
                e.kind = EventKind::CollBegin;
            }
            MPI_COLLECTIVE_END => {
                let end = c.record_end()?;
                let op = c.u8()?;
                let comm = ctx.local.map(MAPPING_COMM, c.u32c()?);
                let root = c.u32c()?;
                let sent = c.u64c()?;
                let received = c.u64c()?;
                c.finish(end)?;
                e.kind = EventKind::CollEnd;
                e.op = op.saturating_add(1).min(crate::events::COLLECTIVE_OPS.len() as u8);
                e.comm = comm as i32;
                e.peer = ctx.world_rank(comm, root, &mut out.warnings);
                e.bytes = opt_i64(sent);
                e.bytes_recv = opt_i64(received);
            }
            THREAD_FORK | THREAD_JOIN | THREAD_ACQUIRE_LOCK | THREAD_RELEASE_LOCK => {
                let end = c.record_end()?;
                let model = c.u8()?;
                if model != OPENMP {
                    out.warnings.add("otf2_thread_model", || {
                        format!(
                            "{}: fork, join and lock records of threading paradigm {model} (not OpenMP) are kept without their paradigm",
                            path.display()
                        )
                    });
                }
                e.kind = match t {
                    THREAD_FORK => {
                        e.tag = opt_i32(c.u32c()?);
                        EventKind::ThreadFork
                    }
                    THREAD_JOIN => EventKind::ThreadJoin,
                    _ => {
                        e.request = i64::from(c.u32c()?);
                        e.tag = opt_i32(c.u32c()?);
                        if t == THREAD_ACQUIRE_LOCK {
                            EventKind::ThreadAcquireLock
                        } else {
                            EventKind::ThreadReleaseLock
                        }
                    }
                };
                c.finish(end)?;
            }
            THREAD_TEAM_BEGIN | THREAD_TEAM_END => {
                let end = c.record_end()?;
                e.comm = ctx.local.map(MAPPING_COMM, c.u32c()?) as i32;
                c.finish(end)?;
                e.kind = if t == THREAD_TEAM_BEGIN { EventKind::ThreadTeamBegin } else { EventKind::ThreadTeamEnd };
            }
            THREAD_TASK_CREATE | THREAD_TASK_SWITCH | THREAD_TASK_COMPLETE => {
                let end = c.record_end()?;
                e.comm = ctx.local.map(MAPPING_COMM, c.u32c()?) as i32;
                e.peer = opt_i32(c.u32c()?);
                e.tag = opt_i32(c.u32c()?);
                c.finish(end)?;
                e.kind = match t {
                    THREAD_TASK_CREATE => EventKind::ThreadTaskCreate,
                    THREAD_TASK_SWITCH => EventKind::ThreadTaskSwitch,
                    _ => EventKind::ThreadTaskComplete,
                };
            }
            THREAD_CREATE | THREAD_BEGIN | THREAD_WAIT | THREAD_END => {
                let end = c.record_end()?;
                e.comm = ctx.local.map(MAPPING_COMM, c.u32c()?) as i32;
                e.request = opt_i64(c.u64c()?);
                c.finish(end)?;
                e.kind = match t {
                    THREAD_CREATE => EventKind::ThreadCreate,
                    THREAD_BEGIN => EventKind::ThreadBegin,
                    THREAD_WAIT => EventKind::ThreadWait,
                    _ => EventKind::ThreadEnd,
                };
            }
            // One-sided operations (Score-P writes an accelerator's transfers so): the window's
            // communicator; a put or get's remote end (rank and thread), bytes and matching id;
            // a completion's matching id.
            RMA_WIN_CREATE | RMA_WIN_DESTROY => {
                let end = c.record_end()?;
                e.comm = ctx.window(c.u32c()?, &mut out.warnings).0;
                c.finish(end)?;
                e.kind = if t == RMA_WIN_CREATE { EventKind::RmaWinCreate } else { EventKind::RmaWinDestroy };
            }
            RMA_PUT | RMA_GET => {
                let end = c.record_end()?;
                let (comm, window) = ctx.window(c.u32c()?, &mut out.warnings);
                let remote = c.u32c()?;
                e.comm = comm;
                (e.peer, e.tag) = match window.and_then(|w| w.members.get(remote as usize)) {
                    Some(&m) => m,
                    None => {
                        if remote != UNDEFINED_U32 {
                            out.warnings.add("otf2_rma_remote_outside_window", || {
                                format!("{}: an RMA operation's remote end {remote} is outside its window's communicator; its peer is NULL", path.display())
                            });
                        }
                        (NONE_I32, NONE_I32)
                    }
                };
                e.bytes = opt_i64(c.u64c()?);
                e.request = opt_i64(c.u64c()?);
                c.finish(end)?;
                e.kind = if t == RMA_PUT { EventKind::RmaPut } else { EventKind::RmaGet };
            }
            RMA_OP_COMPLETE_BLOCKING | RMA_OP_COMPLETE_NON_BLOCKING | RMA_OP_TEST | RMA_OP_COMPLETE_REMOTE => {
                let end = c.record_end()?;
                e.comm = ctx.window(c.u32c()?, &mut out.warnings).0;
                e.request = opt_i64(c.u64c()?);
                c.finish(end)?;
                e.kind = match t {
                    RMA_OP_COMPLETE_BLOCKING => EventKind::RmaOpCompleteBlocking,
                    RMA_OP_COMPLETE_NON_BLOCKING => EventKind::RmaOpCompleteNonBlocking,
                    RMA_OP_TEST => EventKind::RmaOpTest,
                    _ => EventKind::RmaOpCompleteRemote,
                };
            }
            // OTF2 1.x's OpenMP records, which the thread records replaced: the same events
            // without a team (a task is named by its id alone).
            OMP_FORK => {
                e.tag = opt_i32(c.u32c()?);
                e.kind = EventKind::ThreadFork;
            }
            OMP_JOIN => {
                c.skip_record()?;
                e.kind = EventKind::ThreadJoin;
            }
            OMP_ACQUIRE_LOCK | OMP_RELEASE_LOCK => {
                let end = c.record_end()?;
                e.request = i64::from(c.u32c()?);
                e.tag = opt_i32(c.u32c()?);
                c.finish(end)?;
                e.kind =
                    if t == OMP_ACQUIRE_LOCK { EventKind::ThreadAcquireLock } else { EventKind::ThreadReleaseLock };
            }
            OMP_TASK_CREATE | OMP_TASK_SWITCH | OMP_TASK_COMPLETE => {
                e.request = opt_i64(c.u64c()?);
                e.kind = match t {
                    OMP_TASK_CREATE => EventKind::ThreadTaskCreate,
                    OMP_TASK_SWITCH => EventKind::ThreadTaskSwitch,
                    _ => EventKind::ThreadTaskComplete,
                };
            }
            METRIC => {
                let end = c.record_end()?;
                let metric = ctx.local.map(MAPPING_METRIC, c.u32c()?);
                let n = c.u8()?;
                let members = ctx.metric_members.get(&metric);
                // Each value follows its type byte.
                for k in 0..usize::from(n) {
                    let ty = c.u8()?;
                    let raw = c.u64c()?;
                    let value = match ty {
                        8 => raw as i64 as f64,
                        10 => f64::from_bits(raw),
                        _ => raw as f64,
                    };
                    let name = members.and_then(|m| m.get(k)).map_or(NONE_I32, |m| m.0);
                    if name == NONE_I32 {
                        out.warnings.add("otf2_undefined_metric", || {
                            format!("{}: metric {metric} value {k} has no definition; skipped", path.display())
                        });
                        continue;
                    }
                    out.metrics.ts.push(ts);
                    out.metrics.metric.push(name);
                    out.metrics.value.push(value);
                }
                c.finish(end)?;
                times.record(data, start, c.pos, path, &mut out.warnings);
                continue;
            }
            MEASUREMENT_ON_OFF => {
                let end = c.record_end()?;
                let mode = c.u8()?;
                c.finish(end)?;
                e.kind = if mode == 2 { EventKind::MeasurementOff } else { EventKind::MeasurementOn };
            }
            BUFFER_FLUSH | PROGRAM_BEGIN | PROGRAM_END => {
                c.skip_record()?;
                e.kind = match t {
                    BUFFER_FLUSH => EventKind::BufferFlush,
                    PROGRAM_BEGIN => EventKind::ProgramBegin,
                    _ => EventKind::ProgramEnd,
                };
            }
            other => {
                if other < 5 {
                    return Err(c.error(format!("unexpected internal record type {other} among the events")));
                }
                if SINGLETONS.contains(&other) {
                    c.u64c()?;
                } else {
                    c.skip_record()?;
                }
                *skipped.entry(other).or_default() += 1;
            }
        }
        times.record(data, start, c.pos, path, &mut out.warnings);
        out.events.push_detailed(&e);
    }
    out.events.finish_stream(ctx.rank, ctx.thread);
    for (t, n) in skipped {
        out.warnings.add_many(&format!("otf2_event_type_{t}"), n, || {
            format!("events of OTF2 record type {t} are kept with kind 'other' (no fields decoded)")
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communicator_members_are_found_by_dense_and_sparse_ids() {
        let dense: HashMap<u32, Vec<i32>> = [(0, vec![0, 1, 2]), (3, vec![2, 0])].into_iter().collect();
        let sparse: HashMap<u32, Vec<i32>> = [(7, vec![5, 4]), (4_000_000_000, vec![1])].into_iter().collect();
        let d = CommMembers::new(&dense);
        assert!(matches!(d, CommMembers::Dense(_)));
        assert_eq!(d.get(3), Some(&[2, 0][..]));
        assert_eq!(d.get(1), None, "an id below the largest that is not defined");
        assert_eq!(d.get(4), None);
        assert_eq!(d.get(UNDEFINED_U32), None);
        let s = CommMembers::new(&sparse);
        assert!(matches!(s, CommMembers::Sparse(_)));
        assert_eq!(s.get(4_000_000_000), Some(&[1][..]));
        assert_eq!(s.get(7), Some(&[5, 4][..]));
        assert_eq!(s.get(8), None);
    }

    #[test]
    fn peers_become_world_ranks_through_their_communicator() {
        let members: HashMap<u32, Vec<i32>> = [(1, vec![4, 6]), (3, vec![])].into_iter().collect();
        let (local, regions, comms, metrics) =
            (LocalDefs::default(), RegionIndex::new(&[]), CommMembers::new(&members), HashMap::new());
        let ctx = Context {
            rank: 5,
            thread: 0,
            global_offset: 0,
            timer_resolution: 1_000_000_000,
            announced: None,
            local: &local,
            region_index: &regions,
            comm_members: &comms,
            self_comms: &[3],
            windows: &HashMap::new(),
            attributes: &HashMap::new(),
            location_of: &HashMap::new(),
            metric_members: &metrics,
            expected_events: 0,
        };
        let mut w = Warnings::default();
        assert_eq!(ctx.world_rank(1, 1, &mut w), 6);
        assert_eq!(ctx.world_rank(9, 3, &mut w), 3, "an undefined communicator keeps the rank");
        assert_eq!(ctx.world_rank(1, UNDEFINED_U32, &mut w), NONE_I32);
        assert_eq!(ctx.world_rank(3, 0, &mut w), 5, "rank 0 of a COMM_SELF communicator is the caller");
        assert!(w.is_empty());
        assert_eq!(ctx.world_rank(3, 1, &mut w), NONE_I32);
        assert_eq!(w.count("otf2_rank_outside_communicator"), 1);
        assert_eq!(ctx.world_rank(1, 2, &mut w), NONE_I32);
        assert_eq!(w.count("otf2_rank_outside_communicator"), 2);
    }
}
