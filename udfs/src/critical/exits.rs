//! Each location's exits, and the critical path's walk over them, on a distributed engine
//! ([`crate::critical::path_steps`]).
//!
//! The walk (`crate::critical::walk`) stays on a location, stretch by stretch backward, until
//! a stretch lets it leave: a stream's stretch (a kernel's launch), an OpenMP hand-over, a
//! synchronisation with an accelerator whose kernel ended in it, MPI_Finalize, or an MPI
//! stretch in which a wait of its call ends. Every other stretch it passes whole, whatever it
//! holds, and only the thread whose MPI call was under way matters of it when the walk arrives
//! on a rank of several threads. So each location's stretches are kept where the walk may
//! leave, with the waits that end in them, and merged into one between (on a rank of several
//! locations, runs of MPI and of other time apart): the walk over these takes the same hops as
//! over every stretch, and covers the same time. A merged stretch is marked, so that the pieces
//! the walk covers in it are cut at the real stretches where the calls lie.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::Answer;
use super::walk::{Finalize, RunWaits, WaitEnd, WaitEnds, walk_pieces};
use crate::accelerators::Handovers;
use crate::critical::stretch_store::{BLOCK, StretchStore, Sweeper, location};
use crate::sweeps::stretches::{NO_PATH, Stretch, UNCOVERED, path_name};
use crate::waits::openmp::ThreadRecords;
use crate::waits::spread::{Found, waits_of};
use commdb_analysis::columns::schema_of;
use commdb_analysis::stream::{Folder, Mapper, Prepare, StartFold};

/// What a row of the exits is (column `what`).
const KEPT: i8 = 0;
const MERGED: i8 = 1;
const LOCATION: i8 = 2;
const FINALIZE: i8 = 3;
const WAIT: i8 = 4;
const TOTAL: i8 = 5;

/// The region classes of a stretch of the exits (column `region`): MPI_Finalize, any other
/// region, or time no region covers (`UNCOVERED`).
const FINALIZE_REGION: u32 = 0;
const OTHER_REGION: u32 = 1;

/// The call path ids of the stretches the walk reads: a kept stretch, a merged one; the
/// padding before a rank's first stretch has `NO_PATH`.
pub(super) const KEPT_PATH: u32 = 0;
pub(super) const MERGED_PATH: u32 = 1;

/// The exits of each location, a rank's rows together, ranks in order: per thread of a rank
/// (the master first) a `LOCATION` row (`to` 1 for the master, whose time before its first
/// stretch is padded) and its stretches in order (`KEPT` or `MERGED`: from, to, call_start,
/// hand, region class); then its first entry into MPI_Finalize (`FINALIZE`: thread, entered
/// as `from`), its waits that end in a kept stretch (`WAIT`: start as `from`, end as `to`,
/// partner as `call_start`, `region` 1 for a late sender's transfer) and, for the profile, its
/// time per call path and thread less the waiting (`TOTAL`: thread, ns as `from`, path).
/// They cross the exchange packed as bytes ([`crate::packed`]), up to `PACKED_EXITS` of one
/// rank's rows in a row (`put_exit`): the walk's task fetches every part's exits, and a
/// distributed engine holds a partition fetched from another executor whole.
pub(super) fn index_schema() -> SchemaRef {
    crate::packed::schema("rank", "exits")
}

/// The pieces of time the walk covers, backward (rank, thread, start, end, kind; `kind` NULL:
/// compute or mpi by the stretch it lies in, a merged stretch's; `named`: its region and call
/// path are its stretch's, else none); and, for the profile, a row per call path with its mean
/// time per location less the waiting (`mean` not NULL, `path`; rank the first rank).
pub(super) fn pieces_schema() -> SchemaRef {
    schema_of(&[
        ("rank", DataType::Int64, false),
        ("thread", DataType::Int64, false),
        ("start", DataType::Int64, false),
        ("end", DataType::Int64, false),
        ("kind", DataType::Utf8, true),
        ("named", DataType::Boolean, false),
        ("path", DataType::Utf8, true),
        ("mean", DataType::Float64, true),
    ])
}

/// One row of the exits.
#[derive(Debug, Clone, Default, PartialEq)]
struct Row {
    rank: i64,
    what: i8,
    thread: i64,
    from: i64,
    to: i64,
    call_start: Option<i64>,
    hand: Option<i64>,
    region: i64,
    path: Option<String>,
}

/// Exit rows packed in one row at most. Ballista's shuffle read gathers the batches it fetches
/// into batches of the session's batch size in rows (8,192 by default) before the walk reads
/// them, whatever their bytes: a rank's rows in one packed row (a quarter of a million
/// stretches at 1 B events) made one batch of many parts' exits, and the walk's executor rose
/// to 1.5 GB at 1 B. At 512 rows a batch holds at most about 20 MB.
const PACKED_EXITS: usize = 512;

/// The rows as a batch of [`index_schema`]: each run of one rank's rows packed `PACKED_EXITS`
/// rows at a time.
fn index_batch(rows: &[Row]) -> Result<RecordBatch> {
    let mut packed = crate::packed::Rows::default();
    let mut bytes = Vec::new();
    for run in rows.chunk_by(|a, b| a.rank == b.rank) {
        for piece in run.chunks(PACKED_EXITS) {
            bytes.clear();
            let mut last = Last::default();
            for row in piece {
                put_exit(&mut bytes, row, &mut last);
            }
            packed.push(piece[0].rank, piece.len(), &bytes);
        }
    }
    packed.finish(index_schema())
}

/// Each exit row packed in `batch` (of [`index_schema`]), in order, given to `each`; bytes
/// that do not read back are an error naming the function and the exits.
fn each_exit(batch: &RecordBatch, mut each: impl FnMut(Row) -> Result<()>) -> Result<()> {
    const EXITS: &str = "the exits of a rank";
    crate::packed::each_row("critical_path", EXITS, batch, |rank, count, bytes| {
        let (mut at, mut last) = (0, Last::default());
        for _ in 0..count {
            let row = get_exit(rank, bytes, &mut at, &mut last)
                .ok_or_else(|| crate::packed::damaged("critical_path", EXITS))?;
            each(row)?;
        }
        if at == bytes.len() { Ok(()) } else { Err(crate::packed::damaged("critical_path", EXITS)) }
    })
}

/// What the row before in a packed run held, which the next one is written against.
#[derive(Default)]
struct Last {
    thread: i64,
    to: i64,
    call_start: i64,
    hand: i64,
    region: i64,
}

/// The head byte's flags: which of the optional values follow.
const HAS_CALL_START: u8 = 1 << 3;
const HAS_HAND: u8 = 1 << 4;
const HAS_PATH: u8 = 1 << 5;
/// And which values are the row before's, and do not follow.
const SAME_THREAD: u8 = 1 << 6;
const SAME_REGION: u8 = 1 << 7;

/// Append `row` (its rank is the packed row's) to `out`: a head byte (its kind in the low three
/// bits, then which of call_start, hand and path it has, and whether its thread and region
/// are the row before's), then as `varint` differences its thread and region when they are
/// not, its start from the row before's end, its end from its start, its call start and hand
/// from the last ones given, and its path's length and bytes. A location's stretches follow
/// each other, so most take a head, a byte for the start and a length of a few bytes.
fn put_exit(out: &mut Vec<u8>, row: &Row, last: &mut Last) {
    use crate::varint::{put, put_signed};
    let head = (row.what as u8 & 7)
        | if row.call_start.is_some() { HAS_CALL_START } else { 0 }
        | if row.hand.is_some() { HAS_HAND } else { 0 }
        | if row.path.is_some() { HAS_PATH } else { 0 }
        | if row.thread == last.thread { SAME_THREAD } else { 0 }
        | if row.region == last.region { SAME_REGION } else { 0 };
    out.push(head);
    if row.thread != last.thread {
        put_signed(out, row.thread.wrapping_sub(last.thread));
    }
    if row.region != last.region {
        put_signed(out, row.region.wrapping_sub(last.region));
    }
    put_signed(out, row.from.wrapping_sub(last.to));
    put_signed(out, row.to.wrapping_sub(row.from));
    if let Some(c) = row.call_start {
        put_signed(out, c.wrapping_sub(last.call_start));
        last.call_start = c;
    }
    if let Some(h) = row.hand {
        put_signed(out, h.wrapping_sub(last.hand));
        last.hand = h;
    }
    if let Some(path) = &row.path {
        put(out, path.len() as u64);
        out.extend_from_slice(path.as_bytes());
    }
    (last.thread, last.to, last.region) = (row.thread, row.to, row.region);
}

/// The row of `rank` at `bytes[*at..]` that [`put_exit`] wrote with the same `last`, moving
/// `at` past it (None: the bytes do not hold one).
fn get_exit(rank: i64, bytes: &[u8], at: &mut usize, last: &mut Last) -> Option<Row> {
    use crate::varint::{get, get_signed};
    let head = *bytes.get(*at)?;
    *at += 1;
    if head & 7 > TOTAL as u8 {
        return None;
    }
    let thread = if head & SAME_THREAD != 0 { last.thread } else { last.thread.wrapping_add(get_signed(bytes, at)?) };
    let region = if head & SAME_REGION != 0 { last.region } else { last.region.wrapping_add(get_signed(bytes, at)?) };
    let from = last.to.wrapping_add(get_signed(bytes, at)?);
    let to = from.wrapping_add(get_signed(bytes, at)?);
    let call_start = if head & HAS_CALL_START != 0 {
        last.call_start = last.call_start.wrapping_add(get_signed(bytes, at)?);
        Some(last.call_start)
    } else {
        None
    };
    let hand = if head & HAS_HAND != 0 {
        last.hand = last.hand.wrapping_add(get_signed(bytes, at)?);
        Some(last.hand)
    } else {
        None
    };
    let path = if head & HAS_PATH != 0 {
        let len = usize::try_from(get(bytes, at)?).ok()?;
        let text = bytes.get(*at..at.checked_add(len)?)?;
        *at += len;
        Some(String::from_utf8(text.to_vec()).ok()?)
    } else {
        None
    };
    (last.thread, last.to, last.region) = (thread, to, region);
    Some(Row { rank, what: (head & 7) as i8, thread, from, to, call_start, hand, region, path })
}

/// Folds the waits of the task's ranks (inputs 1 and 2) and the threads' records (3 on).
struct FoldExits {
    waits: RunWaits,
    records: ThreadRecords,
    answer: Answer,
}

pub(super) fn exits_start(answer: Answer, run_bytes: usize) -> StartFold {
    Arc::new(move || {
        Box::new(FoldExits {
            waits: RunWaits::new((answer == Answer::Profile).then_some(run_bytes)),
            records: ThreadRecords::default(),
            answer,
        })
    })
}

impl Folder for FoldExits {
    fn fold(&mut self, input: usize, batch: &RecordBatch) -> Result<()> {
        match input {
            1 | 2 => {
                let mut found = Found::default();
                waits_of(batch, &mut found)?;
                for w in &found.waits {
                    self.waits.add(w)?;
                }
                Ok(())
            }
            _ => self.records.fold_input(input, batch),
        }
    }

    fn held_bytes(&self) -> usize {
        self.waits.held_bytes() + self.records.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let FoldExits { mut waits, records, answer } = *self;
        waits.seal()?;
        let offload = Handovers::from_batches(records.offload())?;
        Ok(Box::new(Exits { waits, offload, sweeper: Sweeper::new(records), answer }))
    }

    fn mapper_counts_the_fold(&self) -> bool {
        true
    }
}

/// Sweeps a chunk of whole ranks' calls into their stretches and gives each location's exits.
struct Exits {
    waits: RunWaits,
    offload: Handovers,
    sweeper: Sweeper,
    answer: Answer,
}

impl Mapper for Exits {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.map_many(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let mut rows = Vec::new();
        let (waits, offload, profile) = (&mut self.waits, &self.offload, self.answer == Answer::Profile);
        self.sweeper.sweep("critical_path", batches, |rank, threads, omp, names, paths| {
            let waiting = if profile { waits.waiting_of(rank)? } else { Vec::new() };
            let finalize = names.names.iter().position(|n| n == "MPI_Finalize").map(|i| i as u32);
            let ends = waits.of_rank(rank);
            let mut used = vec![false; ends.len()];
            let mut entered: Option<(i64, i64)> = None;
            for (k, th) in threads.iter().enumerate() {
                rows.push(Row { rank, what: LOCATION, thread: th.thread, to: i64::from(k == 0), ..Row::default() });
                let stream = offload.is_stream(rank, th.thread);
                let mut merged: Option<Stretch> = None;
                for s in &th.stretches {
                    if Some(s.region) == finalize && entered.is_none_or(|e| s.from < e.1) {
                        entered = Some((th.thread, s.from));
                    }
                    let mut kept = stream
                        || s.hand.is_some()
                        || finalize == Some(s.region)
                        || offload.sync_within(rank, th.thread, s.from, s.to);
                    if let Some(call) = s.call_start {
                        // The waits of its call that end in it.
                        let first = ends.partition_point(|end| end < s.from);
                        for (i, w) in ends.iter_from(first).take_while(|(_, w)| w.end <= s.to) {
                            if w.start >= call && w.end > call {
                                used[i] = true;
                                kept = true;
                            }
                        }
                    }
                    if kept {
                        if let Some(m) = merged.take() {
                            rows.push(stretch_row(rank, th.thread, MERGED, &m, None));
                        }
                        rows.push(stretch_row(rank, th.thread, KEPT, s, finalize));
                        continue;
                    }
                    // Apart on a rank of several locations, the runs of MPI and of other time:
                    // the walk arriving there asks which thread was in an MPI call.
                    let mpi = s.call_start.is_some() && threads.len() > 1;
                    match &mut merged {
                        Some(m) if m.to == s.from && m.call_start.is_some() == mpi => {
                            m.to = s.to;
                            if mpi {
                                m.call_start = Some(s.to);
                            }
                        }
                        _ => {
                            if let Some(m) = merged.take() {
                                rows.push(stretch_row(rank, th.thread, MERGED, &m, None));
                            }
                            // An MPI call said to start at the stretch's end: no wait of the
                            // rank ends after it within it.
                            let call_start = mpi.then_some(s.to);
                            merged = Some(Stretch { call_start, hand: None, region: OTHER_REGION, ..*s });
                        }
                    }
                }
                if let Some(m) = merged.take() {
                    rows.push(stretch_row(rank, th.thread, MERGED, &m, None));
                }
            }
            if let Some((thread, at)) = entered {
                rows.push(Row { rank, what: FINALIZE, thread, from: at, ..Row::default() });
            }
            for (w, _) in ends.iter().zip(&used).filter(|(_, u)| **u) {
                rows.push(Row {
                    rank,
                    what: WAIT,
                    from: w.start,
                    to: w.end,
                    call_start: Some(w.partner),
                    region: i64::from(w.transfer),
                    ..Row::default()
                });
            }
            if profile {
                let mut totals: BTreeMap<(u32, i64), i64> = BTreeMap::new();
                for th in threads {
                    for s in &th.stretches {
                        *totals.entry((s.path, th.thread)).or_default() += super::not_waiting(s, &waiting);
                    }
                }
                for w in omp.iter().filter(|w| w.barrier) {
                    *totals.entry((w.path, w.thread)).or_default() -= w.end - w.start;
                }
                for ((path, thread), ns) in totals {
                    let path = path_name(paths, path).map(str::to_string);
                    rows.push(Row { rank, what: TOTAL, thread, from: ns, path, ..Row::default() });
                }
            }
            Ok(())
        })?;
        index_batch(&rows)
    }

    fn held_bytes(&self) -> usize {
        self.waits.held_bytes() + self.sweeper.held_bytes()
    }
}

/// The row of stretch `s` of a location, kept (its region class by `finalize`) or merged.
fn stretch_row(rank: i64, thread: i64, what: i8, s: &Stretch, finalize: Option<u32>) -> Row {
    let region = match s.region {
        UNCOVERED => UNCOVERED,
        r if Some(r) == finalize => FINALIZE_REGION,
        _ => OTHER_REGION,
    };
    Row {
        rank,
        what,
        thread,
        from: s.from,
        to: s.to,
        call_start: s.call_start,
        hand: s.hand.map(i64::from),
        region: i64::from(region),
        path: None,
    }
}

pub(super) fn walk_prepare(answer: Answer, offload: bool) -> Prepare {
    Arc::new(move |held| {
        let offload = match (offload, held.first()) {
            (true, Some(batches)) => Handovers::from_batches(batches)?,
            _ => Handovers::default(),
        };
        Ok(Box::new(Walk::new(answer, offload)?) as Box<dyn Mapper>)
    })
}

/// Reads every location's exits into a store of stretches and the waits, and walks the path
/// when they end. The exits come in any order of the ranks (the parts' rows one after another
/// as the engine hands them over, not merged): a location's rows lie together in its part, so
/// a batch holds the end of the location it began with, whole locations, and the beginning of
/// the one it ends with. What a location has so far waits in `open` until whole blocks of the
/// store can be written, and all of it is written once a later location of the same batch
/// shows it has ended. A rank's waits come together too, in order of their end, and go to a
/// store of their own on disk the same way (at 1 B events, 27 M waits: 0.9 GB in memory).
struct Walk {
    answer: Answer,
    offload: Handovers,
    store: StretchStore,
    waits: StoredWaits,
    finalize: Finalize,
    threads: BTreeMap<i64, Vec<i64>>,
    /// The locations whose stretches are being read (a rank's waits: thread `WAITS`), whether
    /// each is padded, and its stretches (waits) not yet written.
    open: HashMap<(i64, i64), (bool, Vec<Stretch>)>,
    /// Per call path (an index of `paths`, or `NO_PATH`) and location, the time less waiting.
    totals: super::Totals,
    paths: Vec<String>,
    path_ids: HashMap<String, u32>,
}

impl Walk {
    fn new(answer: Answer, offload: Handovers) -> Result<Walk> {
        Ok(Walk {
            answer,
            offload,
            store: StretchStore::new("critical_path")?,
            // The walk's task is given each location's time less waiting: it keeps no waiting.
            waits: StoredWaits { store: StretchStore::new("critical_path")?, count: 0 },
            finalize: Finalize::default(),
            threads: BTreeMap::new(),
            open: HashMap::new(),
            totals: super::Totals::default(),
            paths: Vec::new(),
            path_ids: HashMap::new(),
        })
    }

    /// Write what location `key` has so far: all of it when `ended`, else its whole blocks.
    fn write(&mut self, key: (i64, i64), ended: bool) -> Result<()> {
        let Some((padded, list)) = self.open.get_mut(&key) else { return Ok(()) };
        let whole = if ended { list.len() } else { list.len() - list.len() % BLOCK };
        if ended || whole > 0 {
            match key {
                (rank, WAITS) => self.waits.store.append(rank, &list[..whole], false)?,
                (rank, thread) => self.store.append(location(rank, thread), &list[..whole], *padded)?,
            }
            list.drain(..whole);
        }
        if ended {
            self.open.remove(&key);
        }
        Ok(())
    }
}

/// The thread of the `open` key of a rank's waits.
const WAITS: i64 = -1;

/// Each rank's waits for the walk, by their end, on disk: a wait is written as a stretch (from
/// its start to its end, its partner as the call's start, a late sender's transfer as region 1),
/// and the walk reads back the blocks it needs as it does the stretches.
struct StoredWaits {
    store: StretchStore,
    count: usize,
}

impl StoredWaits {
    fn stretch(w: &WaitEnd) -> Stretch {
        Stretch {
            from: w.start,
            to: w.end,
            region: u32::from(w.transfer),
            path: KEPT_PATH,
            call_start: Some(w.partner),
            hand: None,
        }
    }

    /// The wait a stretch of the store stands for; None for one without its partner, which the
    /// walk never writes (a damaged scratch file).
    fn wait(s: &Stretch) -> Option<WaitEnd> {
        let partner = s.call_start?;
        Some(WaitEnd { start: s.from, end: s.to, partner, transfer: s.region == 1 })
    }
}

impl WaitEnds for StoredWaits {
    fn latest(
        &mut self,
        rank: i64,
        t: i64,
        after: i64,
        take: &mut dyn FnMut(&WaitEnd) -> bool,
    ) -> Result<Option<WaitEnd>> {
        let mut damaged = false;
        let found = self.store.latest_by(rank, t, after, &mut |s| match StoredWaits::wait(s) {
            Some(w) => take(&w),
            None => {
                damaged = true;
                false
            }
        })?;
        if damaged {
            return exec_err!("critical_path: a wait of rank {rank} read back from its scratch file has no partner");
        }
        // A stretch taken is one whose wait was read.
        Ok(found.and_then(|s| StoredWaits::wait(&s)))
    }

    fn count(&self) -> usize {
        self.count
    }
}

impl Walk {
    /// Take one row of the exits. `current` is the location whose rows came last in this batch:
    /// a row of another ends it.
    fn take(&mut self, row: Row, current: &mut Option<(i64, i64)>) -> Result<()> {
        let Row { rank, what, thread, from, to, call_start, hand, region, path } = row;
        let key = match what {
            KEPT | MERGED | LOCATION => Some((rank, thread)),
            WAIT => Some((rank, WAITS)),
            _ => None,
        };
        if let Some(ended) = current.filter(|&c| Some(c) != key) {
            self.write(ended, true)?;
        }
        *current = key;
        match what {
            KEPT | MERGED => {
                let Some((_, list)) = self.open.get_mut(&(rank, thread)) else {
                    return exec_err!(
                        "critical_path: a stretch of rank {rank} thread {thread} came before its location or after its end"
                    );
                };
                let class = u32::try_from(region).unwrap_or(OTHER_REGION);
                list.push(Stretch {
                    from,
                    to,
                    region: class,
                    path: if what == KEPT { KEPT_PATH } else { MERGED_PATH },
                    call_start,
                    hand: hand.and_then(|h| u32::try_from(h).ok()),
                });
            }
            LOCATION => {
                if self.open.insert((rank, thread), (to == 1, Vec::new())).is_some()
                    || self.store.contains(location(rank, thread))
                {
                    return exec_err!("critical_path: the exits of rank {rank} thread {thread} came twice");
                }
                self.threads.entry(rank).or_default().push(thread);
            }
            FINALIZE => {
                self.finalize.entered.insert(rank, (thread, from));
            }
            WAIT => {
                let Some(partner) = call_start else {
                    return exec_err!("critical_path: a wait of rank {rank} without its partner");
                };
                self.waits.count += 1;
                let wait = WaitEnd { start: from, end: to, partner, transfer: region == 1 };
                let (_, list) = self.open.entry((rank, WAITS)).or_default();
                if list.last().is_some_and(|w| w.to > wait.end) {
                    return exec_err!("critical_path: the waits of rank {rank} came out of the order of their end");
                }
                list.push(StoredWaits::stretch(&wait));
            }
            TOTAL => {
                let id = match path {
                    None => NO_PATH,
                    Some(p) => match self.path_ids.get(&p) {
                        Some(&id) => id,
                        None => {
                            let id = self.paths.len() as u32;
                            self.paths.push(p.clone());
                            self.path_ids.insert(p, id);
                            id
                        }
                    },
                };
                *self.totals.entry((id, (rank, thread))).or_default() += from;
            }
            other => return exec_err!("critical_path: an exit of unknown kind {other}"),
        }
        Ok(())
    }
}

impl Mapper for Walk {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut current: Option<(i64, i64)> = None;
        each_exit(batch, |row| self.take(row, &mut current))?;
        // The batch's last location may go on in a later batch of its part.
        if let Some(key) = current {
            self.write(key, false)?;
        }
        Ok(RecordBatch::new_empty(pieces_schema()))
    }

    fn held_bytes(&self) -> usize {
        let open: usize = self.open.values().map(|(_, l)| 64 + l.capacity() * std::mem::size_of::<Stretch>()).sum();
        self.store.held_bytes()
            + self.waits.store.held_bytes()
            + 48 * self.totals.len()
            + open
            + 32 * self.threads.len()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let mut open: Vec<(i64, i64)> = self.open.keys().copied().collect();
        open.sort_unstable();
        for key in open {
            self.write(key, true)?;
        }
        self.store.finish_writing(UNCOVERED)?;
        self.waits.store.finish_writing(UNCOVERED)?;
        let mut pieces: Vec<Walked> = Vec::new();
        walk_pieces(
            &mut self.store,
            Some(FINALIZE_REGION),
            &self.finalize,
            &mut self.waits,
            &self.threads,
            &self.offload,
            &mut |rank, thread, s, start, end, kind| {
                let piece = match s.path {
                    MERGED_PATH => (rank, thread, start, end, None, true),
                    KEPT_PATH => (rank, thread, start, end, Some(kind), true),
                    _ => (rank, thread, start, end, Some(kind), false),
                };
                pieces.push(piece);
            },
        )?;
        let mut means: Vec<(Option<String>, f64)> = Vec::new();
        if self.answer == Answer::Profile {
            for (&rank, list) in &self.threads {
                if let Some(&master) = list.first()
                    && let Some(pad) = self.store.padding_of(location(rank, master))
                {
                    *self.totals.entry((NO_PATH, (rank, master))).or_default() += pad.to - pad.from;
                }
            }
            let paths = &self.paths;
            let found =
                super::means(&self.totals, &self.threads, &self.offload, |p| paths.get(p as usize).map(String::as_str));
            means = found.into_iter().map(|(p, m)| (p.map(str::to_string), m)).collect();
        }
        let first = self.threads.keys().next().copied().unwrap_or(0);
        Ok(vec![pieces_batch(&pieces, &means, first)?])
    }
}

/// A piece the walk covered: rank, thread, start, end, kind (None: by its stretches), whether
/// its stretches name it.
type Walked = (i64, i64, i64, i64, Option<&'static str>, bool);

/// The rows of `pieces` and, for the profile, of the means per call path (under rank `first`).
fn pieces_batch(pieces: &[Walked], means: &[(Option<String>, f64)], first: i64) -> Result<RecordBatch> {
    let blank = means.len();
    let int = |f: fn(&Walked) -> i64, other: i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(pieces.iter().map(f).chain(std::iter::repeat_n(other, blank))))
    };
    let kinds = pieces.iter().map(|p| p.4).chain(std::iter::repeat_n(None, blank));
    let named = pieces.iter().map(|p| Some(p.5)).chain(std::iter::repeat_n(Some(false), blank));
    let paths = std::iter::repeat_n(None, pieces.len()).chain(means.iter().map(|(p, _)| p.as_deref()));
    let mean = std::iter::repeat_n(None, pieces.len()).chain(means.iter().map(|(_, m)| Some(*m)));
    let columns: Vec<ArrayRef> = vec![
        int(|p| p.0, first),
        int(|p| p.1, 0),
        int(|p| p.2, 0),
        int(|p| p.3, 0),
        Arc::new(StringArray::from_iter(kinds)),
        Arc::new(BooleanArray::from_iter(named)),
        Arc::new(StringArray::from_iter(paths)),
        Arc::new(Float64Array::from_iter(mean)),
    ];
    Ok(RecordBatch::try_new(pieces_schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;
    use commdb_analysis::columns::{int64_column, text_column};

    /// Two ranks of one thread, each a run of compute (merged) and MPI (kept) stretches, each
    /// MPI stretch ending a wait for the other rank: the walk hops between them all the way.
    fn exits() -> Vec<Vec<Row>> {
        (0..2i64)
            .map(|rank| {
                let mut rows = vec![Row { rank, what: LOCATION, thread: 0, to: 1, ..Row::default() }];
                let mut waits = Vec::new();
                for k in 0..(3 * BLOCK as i64 + 11) {
                    let t = 1000 + 100 * k + 7 * rank;
                    rows.push(Row {
                        rank,
                        what: MERGED,
                        from: t,
                        to: t + 50,
                        region: OTHER_REGION as i64,
                        ..Row::default()
                    });
                    let call = t + 50;
                    rows.push(Row {
                        rank,
                        what: KEPT,
                        from: call,
                        to: t + 100,
                        call_start: Some(call),
                        region: OTHER_REGION as i64,
                        ..Row::default()
                    });
                    if (k + rank) % 2 == 0 {
                        waits.push(Row {
                            rank,
                            what: WAIT,
                            from: call,
                            to: t + 90,
                            call_start: Some(1 - rank),
                            ..Row::default()
                        });
                    }
                }
                rows.extend(waits);
                rows
            })
            .collect()
    }

    fn walked(batches: &[RecordBatch]) -> Vec<(i64, i64, i64, i64, Option<String>)> {
        let mut walk = Walk::new(Answer::Path, Handovers::default()).unwrap();
        for b in batches {
            walk.map(b).unwrap();
        }
        let out = walk.finish().unwrap();
        let b = &out[..];
        let (rank, thread, start, end) = (
            int64_column(b, 0).unwrap(),
            int64_column(b, 1).unwrap(),
            int64_column(b, 2).unwrap(),
            int64_column(b, 3).unwrap(),
        );
        let kind = text_column(b, 4).unwrap();
        (0..out[0].num_rows())
            .map(|r| {
                let kind = kind.is_valid(r).then(|| kind.value(r).to_string());
                (rank.value(r), thread.value(r), start.value(r), end.value(r), kind)
            })
            .collect()
    }

    #[test]
    fn the_walk_over_parts_that_come_interleaved_is_the_walk_over_them_in_rank_order() {
        let ranks = exits();
        // In rank order, a batch a rank.
        let in_order: Vec<RecordBatch> = ranks.iter().map(|rows| index_batch(rows).unwrap()).collect();
        let expected = walked(&in_order);
        assert!(expected.len() > 2 * BLOCK, "the walk hops across both ranks: {} pieces", expected.len());
        assert!(expected.iter().any(|p| p.0 == 0) && expected.iter().any(|p| p.0 == 1));
        // Each rank's rows in batches of uneven sizes, the two ranks' batches by turns.
        let mut interleaved = Vec::new();
        let chunks: Vec<Vec<&[Row]>> =
            ranks.iter().enumerate().map(|(i, rows)| rows.chunks(97 + 60 * i).collect()).collect();
        for k in 0..chunks.iter().map(Vec::len).max().unwrap() {
            for c in chunks.iter().rev() {
                if let Some(rows) = c.get(k) {
                    interleaved.push(index_batch(rows).unwrap());
                }
            }
        }
        assert_eq!(walked(&interleaved), expected);
        // A location's stretches after its end (another location of its batch came between).
        let mut broken = exits().swap_remove(0);
        broken.insert(3, Row { rank: 1, what: LOCATION, thread: 0, to: 1, ..Row::default() });
        let mut walk = Walk::new(Answer::Path, Handovers::default()).unwrap();
        let err = walk.map(&index_batch(&broken).unwrap()).unwrap_err().to_string();
        assert!(err.contains("rank 0 thread 0 came before its location or after its end"), "{err}");
    }

    #[test]
    fn exits_packed_read_back_as_they_were_and_damaged_ones_are_refused() {
        // Every kind, each optional value present and not, values far apart and extreme,
        // two ranks' runs and a rank coming back after another.
        let mut rows = Vec::new();
        for (k, rank) in [3i64, 3, 3, 9, 9, 3, 3, 3, 3, 0, 0, 0].into_iter().enumerate() {
            let k = k as i64;
            rows.push(Row {
                rank,
                what: (k % 6) as i8,
                thread: [0, 7, -1, 1 << 40][k as usize % 4],
                from: [i64::MIN + 1, -5, 1_000_000_007, i64::MAX][k as usize % 4],
                to: [i64::MAX, 3, -12, 1_000_000_100][k as usize % 4],
                call_start: (k % 3 != 0).then_some([i64::MIN, 17, 4_000_000_000][k as usize % 3]),
                hand: (k % 4 == 1).then_some(k * 1_000),
                region: [i64::from(UNCOVERED), 0, 1][k as usize % 3],
                path: (k % 5 == 2).then(|| format!("main/MPI_Waitall {k}")),
            });
        }
        rows.push(Row { rank: 0, what: TOTAL, path: Some(String::new()), ..Row::default() });
        let unpacked = |batch: &RecordBatch| {
            let mut back = Vec::new();
            each_exit(batch, |row| {
                back.push(row);
                Ok(())
            })
            .unwrap();
            back
        };
        let batch = index_batch(&rows).unwrap();
        assert_eq!(batch.num_rows(), 4, "a packed row per run of a rank's rows");
        assert_eq!(unpacked(&batch), rows);
        // A location's stretches take a few bytes each.
        let run: Vec<Row> = (0..1000i64)
            .map(|k| Row {
                rank: 5,
                what: KEPT,
                thread: 0,
                from: 1_000_000_000 + 900 * k,
                to: 1_000_000_900 + 900 * k,
                call_start: Some(1_000_000_000 + 900 * (k - k % 4)),
                region: i64::from(OTHER_REGION),
                ..Row::default()
            })
            .collect();
        let packed = index_batch(&run).unwrap();
        assert_eq!(packed.num_rows(), run.len().div_ceil(PACKED_EXITS));
        let size =
            packed.column(2).as_any().downcast_ref::<arrow::array::LargeBinaryArray>().unwrap().value_data().len();
        assert!(size <= 11 * run.len() / 2, "{size} bytes for {} rows", run.len());
        assert_eq!(unpacked(&packed), run);
        // Bytes cut short, a byte too many, a head of no kind: the walk refuses them.
        let valid = [
            Row { rank: 3, what: LOCATION, to: 1, ..Row::default() },
            Row { rank: 3, what: KEPT, from: 10, to: 20, call_start: Some(10), region: 1, ..Row::default() },
            Row { rank: 3, what: WAIT, from: 12, to: 20, call_start: Some(1), ..Row::default() },
        ];
        let one = index_batch(&valid).unwrap();
        let mut walk = Walk::new(Answer::Path, Handovers::default()).unwrap();
        walk.map(&one).unwrap();
        let bytes = one.column(2).as_any().downcast_ref::<arrow::array::LargeBinaryArray>().unwrap().value(0).to_vec();
        let mut short = bytes.clone();
        short.pop();
        let mut long = bytes.clone();
        long.push(0);
        let mut no_kind = bytes.clone();
        no_kind[0] = 6;
        for damaged in [short, long, no_kind] {
            let mut packed = crate::packed::Rows::default();
            packed.push(3, 3, &damaged);
            let batch = packed.finish(index_schema()).unwrap();
            let mut walk = Walk::new(Answer::Path, Handovers::default()).unwrap();
            let err = walk.map(&batch).unwrap_err().to_string();
            assert!(err.contains("critical_path") && err.contains("the exits of a rank"), "{err}");
        }
    }

    #[test]
    fn the_waits_on_disk_answer_as_the_waits_in_memory() {
        let mut memory = RunWaits::new(None);
        let mut disk = StoredWaits { store: StretchStore::new("test").unwrap(), count: 0 };
        for rank in [3i64, 8] {
            // Ends in order, some equal, starts before and after one another, both kinds.
            // (As the exits give them: by end, then start.)
            let mut waits: Vec<WaitEnd> = (0..5 * BLOCK as i64 + 3)
                .map(|k| WaitEnd {
                    start: 40 * k - (k % 7) * 30,
                    end: 40 * (k - k % 3) + 25,
                    partner: k % 5,
                    transfer: k % 4 == 0,
                })
                .collect();
            waits.sort_by_key(|w| (w.end, w.start));
            for w in &waits {
                memory.add_end(rank, *w).unwrap();
            }
            let stretches: Vec<Stretch> = waits.iter().map(StoredWaits::stretch).collect();
            disk.store.append(rank, &stretches, false).unwrap();
            disk.count += waits.len();
        }
        memory.seal().unwrap();
        disk.store.finish_writing(UNCOVERED).unwrap();
        let key = |w: Option<WaitEnd>| w.map(|w| (w.start, w.end, w.partner, w.transfer));
        for rank in [3, 8, 5] {
            for t in (-50..40 * 650).step_by(13) {
                for back in [0, 45, 200, 100_000] {
                    let mut take = |w: &WaitEnd| w.partner != 2 && w.start >= t - back;
                    let a = memory.latest(rank, t, t - back, &mut take).unwrap();
                    let b = disk.latest(rank, t, t - back, &mut take).unwrap();
                    assert_eq!(key(a), key(b), "rank {rank} t {t} back {back}");
                }
            }
        }
        assert_eq!(disk.count(), 2 * (5 * BLOCK + 3));
        // A stored wait without its partner (a damaged scratch file) is an error, not a wait.
        let mut damaged = StoredWaits { store: StretchStore::new("test").unwrap(), count: 1 };
        let lost = Stretch {
            call_start: None,
            ..StoredWaits::stretch(&WaitEnd { start: 0, end: 10, partner: 1, transfer: false })
        };
        damaged.store.append(4, &[lost], false).unwrap();
        damaged.store.finish_writing(UNCOVERED).unwrap();
        let err = damaged.latest(4, 20, -1, &mut |_| true).unwrap_err().to_string();
        assert!(err.contains("rank 4") && err.contains("no partner"), "{err}");
    }
}
