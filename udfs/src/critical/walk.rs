//! The critical path's walk (Böhme et al., IPDPS 2012, as the module above says): backward
//! from the end of the rank that finishes last, over every location's stretches
//! ([`crate::critical::stretch_store`]), staying on a location until it meets the end of a wait
//! of the call it is in (then it goes on with the rank waited for), an OpenMP hand-over, a
//! synchronisation with an accelerator or a kernel's launch, or MPI_Finalize after the last
//! rank entered it. The walk tells each piece of time it covers, backward, to a sink: in one
//! process the pieces merge into the path's segments here; on a distributed engine the walk
//! runs over each location's exits alone and the pieces are told their regions where the
//! calls lie ([`crate::critical::path_steps`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use datafusion::common::exec_err;
use datafusion::error::Result;

use super::Segment;
use crate::accelerators::Handovers;
use crate::critical::stretch_store::{StretchStore, location, rank_thread};
use crate::critical::waiting::Waiting;
use crate::sweeps::call_paths::Paths;
use crate::sweeps::stretches::{NO_PATH, Stretch, UNCOVERED, path_name, region_name};
use crate::waits::Wait;
use commdb_catalog::fast_hash::FastMap;

/// A wait as the walk reads it: when it ended, who ended it, and whether the rest of the call
/// is a transfer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitEnd {
    pub start: i64,
    pub end: i64,
    pub partner: i64,
    pub transfer: bool,
}

/// A wait's end as a rank's list holds it, 16 bytes where a [`WaitEnd`] takes 32: its end,
/// its length in ns and its partner's rank shifted past two flags; or, for a wait longer than
/// 2^32 - 1 ns (about 4.3 s), one that ends before it starts, or a partner outside the ranks 0
/// to 2^30 - 1, the place of its start and partner in [`RunWaits`]' `long`.
#[derive(Debug, Clone, Copy)]
struct Held {
    end: i64,
    len: u32,
    partner: u32,
}

/// `Held::partner`'s flags: the rest of the call is a transfer; `len` is a place in `long`
/// (which holds the start and the partner).
const TRANSFER: u32 = 1;
const LONG: u32 = 2;

impl Held {
    /// Its start and partner.
    fn start_partner(&self, long: &[(i64, i64)]) -> (i64, i64) {
        match self.partner & LONG {
            0 => (self.end - i64::from(self.len), i64::from(self.partner >> 2)),
            _ => long[self.len as usize],
        }
    }

    fn wait_end(&self, long: &[(i64, i64)]) -> WaitEnd {
        let (start, partner) = self.start_partner(long);
        WaitEnd { start, end: self.end, partner, transfer: self.partner & TRANSFER != 0 }
    }
}

/// What the walk and the profile need of the wait states: each rank's waits sorted by their
/// end, and (for the profile alone) its waiting, gathered beyond memory and read rank by rank
/// ([`crate::critical::waiting`]). A rank's lists grow by half when full, not twice, and are
/// made exact when sealed: at a thousand ranks and tens of millions of waits, what they hold is
/// most of what the path holds.
pub(crate) struct RunWaits {
    ends: FastMap<i64, Vec<Held>>,
    /// The start and partner of each wait whose length or partner a `Held` does not hold.
    long: Vec<(i64, i64)>,
    /// The waiting, when kept (the profile's mean leaves waiting out; the path reads none).
    waiting: Option<Waiting>,
    pub count: usize,
}

/// Push `item` to `list`, growing it by half when full.
fn push_growing<T>(list: &mut Vec<T>, item: T) {
    if list.len() == list.capacity() {
        list.reserve_exact(list.len() / 2 + 16);
    }
    list.push(item);
}

/// A rank's waits as [`RunWaits`] holds them, by their end once sealed.
pub(crate) struct RankEnds<'a> {
    list: &'a [Held],
    long: &'a [(i64, i64)],
}

impl RankEnds<'_> {
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The first wait for which `before(end)` is false (the ends in order make it a search).
    pub(crate) fn partition_point(&self, before: impl Fn(i64) -> bool) -> usize {
        self.list.partition_point(|h| before(h.end))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = WaitEnd> + '_ {
        self.iter_from(0).map(|(_, w)| w)
    }

    /// The waits from the `from`th on, each with its place.
    pub(crate) fn iter_from(&self, from: usize) -> impl Iterator<Item = (usize, WaitEnd)> + '_ {
        let rest = self.list.get(from..).unwrap_or(&[]);
        rest.iter().enumerate().map(move |(k, h)| (from + k, h.wait_end(self.long)))
    }
}

impl RunWaits {
    /// Waits for the walk, and their waiting too when `waiting_runs` (gathered in runs of that
    /// many bytes).
    pub(crate) fn new(waiting_runs: Option<usize>) -> RunWaits {
        RunWaits { ends: FastMap::default(), long: Vec::new(), waiting: waiting_runs.map(Waiting::new), count: 0 }
    }

    pub(crate) fn add(&mut self, w: &Wait) -> Result<()> {
        self.count += 1;
        if let Some(waiting) = &mut self.waiting {
            waiting.push(w.rank, w.ts, w.ts + w.wait_ns)?;
        }
        if let Some(partner) = w.partner {
            let end = WaitEnd { start: w.ts, end: w.ts + w.wait_ns, partner, transfer: w.pattern == "late_sender" };
            self.add_end(w.rank, end)?;
        }
        Ok(())
    }

    /// `rank`'s waiting as disjoint intervals in time order (none when it is not kept); ranks
    /// are asked in increasing order, each once, after `seal`.
    pub(crate) fn waiting_of(&mut self, rank: i64) -> Result<Vec<(i64, i64)>> {
        match &mut self.waiting {
            Some(waiting) => waiting.of_rank(rank),
            None => Ok(Vec::new()),
        }
    }

    /// A wait of `rank` as the walk reads it.
    pub(crate) fn add_end(&mut self, rank: i64, end: WaitEnd) -> Result<()> {
        let flags = if end.transfer { TRANSFER } else { 0 };
        let partner = u32::try_from(end.partner).ok().filter(|&p| p < 1 << 30);
        let len = u32::try_from(end.end.wrapping_sub(end.start)).ok().filter(|_| end.start <= end.end);
        let held = match (partner, len) {
            (Some(partner), Some(len)) => Held { end: end.end, len, partner: partner << 2 | flags },
            _ => {
                let Ok(at) = u32::try_from(self.long.len()) else {
                    return exec_err!(
                        "critical path: rank {rank}'s wait ending at {} is one of more than 2^32 waits of 4.3 s or more",
                        end.end
                    );
                };
                self.long.push((end.start, end.partner));
                Held { end: end.end, len: at, partner: flags | LONG }
            }
        };
        push_growing(self.ends.entry(rank).or_default(), held);
        Ok(())
    }

    /// `rank`'s waits (none when it has none).
    pub(crate) fn of_rank(&self, rank: i64) -> RankEnds<'_> {
        RankEnds { list: self.ends.get(&rank).map_or(&[], Vec::as_slice), long: &self.long }
    }

    /// Bytes held: each wait's end (16 bytes, 16 more for a long one), a list per rank, and the
    /// waiting's run or buffers.
    pub(crate) fn held_bytes(&self) -> usize {
        let ends: usize = self.ends.values().map(|l| l.capacity() * std::mem::size_of::<Held>() + 48).sum();
        ends + 16 * self.long.capacity() + self.waiting.as_ref().map_or(0, Waiting::held_bytes)
    }

    /// Every wait has been added: the waits in order of their end, the waiting to be read.
    pub(crate) fn seal(&mut self) -> Result<()> {
        if let Some(waiting) = &mut self.waiting {
            waiting.seal()?;
        }
        let long = &self.long;
        for list in self.ends.values_mut() {
            list.sort_by_key(|h| (h.end, h.start_partner(long).0));
            list.shrink_to_fit();
        }
        self.long.shrink_to_fit();
        Ok(())
    }
}

/// The waits the walk reads: each rank's, by their end.
pub(crate) trait WaitEnds {
    /// The latest wait of `rank` that ended at or before `t` and after `after`, of those
    /// `take` takes.
    fn latest(
        &mut self,
        rank: i64,
        t: i64,
        after: i64,
        take: &mut dyn FnMut(&WaitEnd) -> bool,
    ) -> Result<Option<WaitEnd>>;

    /// How many there are.
    fn count(&self) -> usize;
}

impl WaitEnds for RunWaits {
    fn latest(
        &mut self,
        rank: i64,
        t: i64,
        after: i64,
        take: &mut dyn FnMut(&WaitEnd) -> bool,
    ) -> Result<Option<WaitEnd>> {
        let Some(list) = self.ends.get(&rank) else { return Ok(None) };
        let k = list.partition_point(|h| h.end <= t);
        Ok(list[..k].iter().rev().take_while(|h| h.end > after).map(|h| h.wait_end(&self.long)).find(|w| take(w)))
    }

    fn count(&self) -> usize {
        self.count
    }
}

/// The critical path, in time order, walked over the stretches of `store` (every thread's,
/// written under `location`; `threads` per rank, the master first) with the region names and
/// call paths they were swept with.
pub(crate) fn walk(
    store: &mut StretchStore,
    names: &[String],
    paths: &Paths,
    finalize: &Finalize,
    waits: &mut RunWaits,
    threads: &BTreeMap<i64, Vec<i64>>,
    offload: &Handovers,
) -> Result<Vec<Segment>> {
    let finalize_region = names.iter().position(|n| n == "MPI_Finalize").map(|i| i as u32);
    let mut backward: Vec<Segment> = Vec::new();
    walk_pieces(
        store,
        finalize_region,
        finalize,
        waits,
        threads,
        offload,
        &mut |rank, thread, s, start, end, kind| {
            let path = path_name(paths, s.path);
            match backward.last_mut() {
                Some(seg)
                    if seg.rank == rank
                        && seg.thread == thread
                        && seg.kind == kind
                        && seg.path.as_deref() == path
                        && seg.start == end =>
                {
                    seg.start = start;
                }
                _ => backward.push(Segment {
                    rank,
                    thread,
                    region: region_name(names, s.region).map(str::to_string),
                    path: path.map(str::to_string),
                    start,
                    end,
                    kind,
                }),
            }
        },
    )?;
    backward.reverse();
    Ok(backward)
}

/// A sink of the pieces the walk covers, backward: rank, thread, the stretch the piece lies in,
/// its start and end (end > start), its kind.
pub(crate) type Pieces<'a> = dyn FnMut(i64, i64, &Stretch, i64, i64, &'static str) + 'a;

/// The walk over the stretches of `store` (as `walk` says), telling each piece it covers to
/// `emit`, backward; stretches of region `finalize_region` are MPI_Finalize.
pub(crate) fn walk_pieces(
    store: &mut StretchStore,
    finalize_region: Option<u32>,
    finalize: &Finalize,
    waits: &mut dyn WaitEnds,
    threads: &BTreeMap<i64, Vec<i64>>,
    offload: &Handovers,
    pieces: &mut Pieces,
) -> Result<()> {
    let master = |rank: i64| threads.get(&rank).and_then(|t| t.first()).copied().unwrap_or(0);
    // From the end of the master of the rank that finishes last (the lowest such rank).
    let last = store
        .ends()
        .map(|(key, end)| (rank_thread(key), end))
        .filter(|&((rank, thread), _)| thread == master(rank))
        .max_by_key(|&((rank, _), end)| (end, -rank));
    let Some(((mut rank, mut thread), mut t)) = last else { return Ok(()) };
    // MPI_Finalize synchronises every rank (Scalasca's path starts where the last rank enters
    // it): a rank in MPI_Finalize after the latest entry waited there for that rank.
    let latest_finalize = finalize.entered.iter().map(|(r, &(th, c))| (*r, th, c)).max_by_key(|&(r, _, c)| (c, -r));
    let mut seen: HashSet<(i64, i64)> = HashSet::new();
    let mut handed: HashSet<(i64, i64, i64)> = HashSet::new();
    let budget = store.len() * 4 + waits.count() + offload.len() * 2 + 16;
    let mut emit = |rank: i64, thread: i64, s: &Stretch, start: i64, end: i64, kind: &'static str| {
        if end > start {
            pieces(rank, thread, s, start, end, kind);
        }
    };
    for step in 0.. {
        if step > budget {
            return exec_err!(
                "critical_path: the walk does not end; the dependencies of the relations contradict each other"
            );
        }
        if step % 65_536 == 0 {
            commdb_catalog::interrupt::check("critical_path")?;
        }
        // The stretch holding the instant just before t; before a thread's first, its master's.
        let Some(s) = store.holding(location(rank, thread), t)? else {
            if thread == master(rank) {
                break;
            }
            thread = master(rank);
            continue;
        };
        // An accelerator stream: a kernel is the device's compute; at its start the path goes on
        // with the launch it waited for (crate::accelerators::Handovers).
        if offload.is_stream(rank, thread) {
            if s.region == UNCOVERED {
                emit(rank, thread, &s, s.from, t, "queue");
                t = s.from;
                continue;
            }
            emit(rank, thread, &s, s.from, t, "device");
            t = s.from;
            if let Some((host, at)) = offload.launch_before(rank, thread, t)
                && handed.insert((rank, thread, t))
            {
                let queued =
                    Stretch { from: at, to: t, region: UNCOVERED, path: NO_PATH, call_start: None, hand: None };
                emit(rank, thread, &queued, at, t, "queue");
                (thread, t) = (host, at);
            }
            continue;
        }
        // An early synchronisation with the device: from the end of the kernel it waited for,
        // the path goes on with that kernel's stream.
        if let Some(sync) = offload.sync_at(rank, thread, t, s.from)
            && handed.insert((rank, thread, sync.kernel_end))
        {
            emit(rank, thread, &s, sync.kernel_end, t, "compute");
            (thread, t) = (sync.stream, sync.kernel_end);
            continue;
        }
        // An OpenMP hand-over: the path goes on with another thread (or the same) at its start.
        if let Some(hand) = s.hand {
            emit(rank, thread, &s, s.from, t, "omp");
            thread = i64::from(hand);
            t = s.from;
            continue;
        }
        let Some(call_start) = s.call_start else {
            emit(rank, thread, &s, s.from, t, "compute");
            t = s.from;
            continue;
        };
        if let Some((last_rank, last_thread, entered)) = latest_finalize
            && Some(s.region) == finalize_region
            && rank != last_rank
            && s.from <= entered
            && entered < t
            && seen.insert((rank, entered))
        {
            emit(rank, thread, &s, entered, t, "mpi");
            (rank, thread, t) = (last_rank, last_thread, entered);
            continue;
        }
        // The latest wait of this call that ended by t.
        // (Waits end in time order: none that ended by the call's start is of it.)
        let wait =
            waits.latest(rank, t, call_start, &mut |w| w.start >= call_start && threads.contains_key(&w.partner))?;
        match wait {
            Some(w) if w.end >= s.from && seen.insert((rank, w.end)) => {
                emit(rank, thread, &s, w.end, t, if w.transfer { "transfer" } else { "mpi" });
                rank = w.partner;
                thread = store.mpi_thread(&threads[&rank], rank, w.end)?;
                t = w.end;
            }
            _ => {
                emit(rank, thread, &s, s.from, t, "mpi");
                t = s.from;
            }
        }
    }
    Ok(())
}

/// When each rank first entered MPI_Finalize, and on which thread.
#[derive(Debug, Default)]
pub(crate) struct Finalize {
    pub entered: HashMap<i64, (i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits of every length a list holds in 16 bytes and beyond (4.3 s and more, one that ends
    /// before it starts), partners in 0 to 2^30 - 1 and beyond (2^30, a negative one), both
    /// kinds: each is read back as it was added, in order of end and start.
    #[test]
    fn a_wait_is_read_back_as_added_whatever_its_length_and_partner() {
        let max = i64::from(u32::MAX);
        let lengths = [0, 1, 999, max - 1, max, max + 1, 1_000_000_000_000, -5];
        let mut added = Vec::new();
        let mut waits = RunWaits::new(None);
        for (k, len) in lengths.iter().enumerate() {
            for (j, partner) in [0, 7, (1 << 30) - 1, 1 << 30, -2].into_iter().enumerate() {
                let end = 10_000_000_000_000 - 1_000 * (k as i64) + 3 * j as i64;
                let w = WaitEnd { start: end - len, end, partner, transfer: (k + j) % 2 == 0 };
                waits.add_end(4, w).unwrap();
                added.push(w);
            }
        }
        waits.seal().unwrap();
        let key = |w: &WaitEnd| (w.end, w.start, w.partner, w.transfer);
        added.sort_by_key(|w| (w.end, w.start));
        let held: Vec<_> = waits.of_rank(4).iter().map(|w| key(&w)).collect();
        assert_eq!(held, added.iter().map(key).collect::<Vec<_>>());
        assert_eq!(waits.of_rank(5).len(), 0);
        for w in &added {
            let found = waits.latest(4, w.end, w.end - 1, &mut |x| x.start == w.start && x.partner == w.partner);
            assert_eq!(found.unwrap().map(|f| key(&f)), Some(key(w)));
        }
        // Beyond 16 bytes: the three lengths with every partner, the other five with the two
        // partners outside.
        assert_eq!(waits.long.len(), 3 * 5 + 5 * 2);
    }
}
