//! The replay itself, over the calls in the call store: every message side and collective
//! member is placed in the MPI call that holds its time (`link`), what each call waits for and
//! the collective instances it posts to are gathered call by call ([`super::call_lists`]: an
//! earlier call of its own rank is never listed, the rank having started it already), and the
//! calls are visited in dependency order (`simulate`), each rank as far as it can go, then the
//! next rank that can; the ideal starts go to [`super::ideal_starts`]. Both lists and starts lie
//! in scratch files and are read through a few blocks per rank, so what the replay holds does
//! not grow with the calls but for a bit per call (whether it completes an operation) and a few
//! numbers per collective instance. The rules are the module's ([`crate::replay`]). The sides
//! are placed a batch of rows at a time, the ranks shared out among the threads
//! (`CallStore::locate_all`); each rank sees its lookups in the same order as one by one. The
//! messages go through a pipeline of three batches: while one is placed, the one before is
//! written to the lists and the one after read. The ranks that can go on are taken last woken
//! first: the rank just woken by the call that held it reads what that call's rank has just
//! touched, so the simulation moves among a few ranks at a time rather than round all of them
//! (the ideal times do not depend on the order, only on what each call waits for). Since the
//! visit moves to another rank every few calls, what it reads of a rank it comes back to lies
//! in one record (`Visit`: its next call, its clock, the block of its calls it is in as the
//! store encodes it, read apart from the store's cache and decoded a call at a time), and the
//! rank of a call waited for is found among a few ranks ([`CallStore::rank_of_call`]).

use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

use super::call_lists::{CallLists, Item, ListsWriter};
use super::call_store::{CallStore, MAX_CALLS, MOST_BLOCK_BYTES, NOWHERE, RankCalls, RankLookup, next_encoded};
use super::ideal_starts::IdealStarts;
use crate::spill::{Rows, value};

/// The tag of a collective instance in a call's list (above every call's number).
const INSTANCE: u32 = MAX_CALLS;

/// Rows read and placed at a time.
const LINK_BATCH: usize = 1 << 16;

/// An ideal start not known yet.
const UNSET: i64 = i64::MIN;

/// A dependency: the ideal start of a call (its number), or the latest post of a collective
/// instance (its index, tagged by the high bit).
type Dep = u32;

/// Bits, one per call.
pub(super) struct Bits(Vec<u64>);

impl Bits {
    pub fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    pub fn set(&mut self, i: u32) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    fn get(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
}

/// What the calls wait for, found from the messages and collectives.
pub(super) struct Links {
    /// Per call, what it waits for and the instances it posts to.
    lists: CallLists,
    /// Calls that complete an operation (their end is the latest of what they wait for).
    completes: Bits,
    /// Posts each instance has.
    members: Vec<u32>,
    /// Message sides and collective members outside every MPI call of their rank, per rank.
    pub unplaced: Vec<i64>,
}

/// What call `done` (of the rank at `rank`) must wait for of the posting side `post` (its call,
/// if placed, and its rank): nothing when the post is `done` itself, or an earlier call of the
/// same rank, which the rank has started before it reaches `done` (ideal starts never go down
/// along a rank), so it could never be the latest; the lists keep only what can hold a call back.
fn waited_for(post: (Option<u32>, u32), done: u32, rank: u32) -> Option<u32> {
    let (p, p_rank) = post;
    let p = p?;
    (p != done && !(p_rank == rank && p < done)).then_some(p)
}

/// A batch of messages and the sides of each (send post, send completion, receive post,
/// receive completion) as ranks' indices and instants.
#[derive(Default)]
struct MessageBatch {
    rows: Vec<[i64; 7]>,
    sides: Vec<(u32, i64)>,
}

impl MessageBatch {
    /// The next batch of `messages` in place of this one's (none left: empty).
    fn read(&mut self, messages: &mut Rows<7>, ranks: &RankLookup) -> Result<()> {
        messages.next_rows(&mut self.rows, LINK_BATCH)?;
        self.sides.clear();
        let side = |rank: Option<i64>, t: Option<i64>| match (rank.and_then(|r| ranks.index(r)), t) {
            (Some(ri), Some(t)) => (ri as u32, t),
            _ => (NOWHERE, 0),
        };
        for m in &self.rows {
            let [src, dst, _, send_call_start, send_complete, recv_post, recv_call_start] = m.map(value);
            self.sides.push(side(src, send_call_start));
            self.sides.push(side(src, send_complete.or(send_call_start)));
            self.sides.push(side(dst, recv_post.or(recv_call_start)));
            self.sides.push(side(dst, recv_call_start));
        }
        Ok(())
    }

    /// What the calls of this batch's sides wait for, `found` being the call of each side
    /// (NOWHERE: not placed), written to the lists; the calls that complete an operation marked.
    fn list(&self, found: &[u32], eager_limit: i64, writer: &mut ListsWriter, completes: &mut Bits) -> Result<()> {
        let placed = |found: u32| (found != NOWHERE).then_some(found);
        for ((m, f), s) in self.rows.iter().zip(found.chunks_exact(4)).zip(self.sides.chunks_exact(4)) {
            let sides = [0, 1, 2, 3].map(|i| (placed(f[i]), s[i].0));
            list_message(sides, value(m[2]), eager_limit, writer, completes)?;
        }
        Ok(())
    }
}

/// A message's four sides placed (send post, send completion, receive post, receive
/// completion), each its call (None: not placed) and its rank's index: what the completing
/// calls wait for, written to the lists, and those calls marked as completing an operation. A
/// send of at most `eager_limit` bytes waits only for its own post.
pub(super) fn list_message(
    sides: [(Option<u32>, u32); 4],
    bytes: Option<i64>,
    eager_limit: i64,
    writer: &mut ListsWriter,
    completes: &mut Bits,
) -> Result<()> {
    let [send_post, send_done, recv_post, recv_done] = sides;
    if let (Some(done), rank) = recv_done {
        completes.set(done);
        for p in [recv_post, send_post] {
            if let Some(p) = waited_for(p, done, rank) {
                writer.push(done, Item::Waits(p))?;
            }
        }
    }
    if let (Some(done), rank) = send_done {
        completes.set(done);
        let eager = bytes.is_some_and(|b| b <= eager_limit);
        let posts = if eager { [send_post, (None, NOWHERE)] } else { [send_post, recv_post] };
        for p in posts {
            if let Some(p) = waited_for(p, done, rank) {
                writer.push(done, Item::Waits(p))?;
            }
        }
    }
    Ok(())
}

/// The collective instances met so far: each its index, in the order first met, and how many
/// members post to it.
pub(super) struct Instances {
    what: &'static str,
    index: FastMap<(i64, i64), u32>,
    members: Vec<u32>,
}

impl Instances {
    pub fn new(what: &'static str) -> Self {
        Instances { what, index: FastMap::default(), members: Vec::new() }
    }

    /// A member of instance (`comm`, `instance`) placed, posting in call `post` and completing
    /// in call `done`: listed, and `done` marked as completing an operation. `hold` is told the
    /// bytes the instances take when they grow.
    pub fn member(
        &mut self,
        (comm, instance): (i64, i64),
        post: u32,
        done: u32,
        writer: &mut ListsWriter,
        completes: &mut Bits,
        hold: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let (what, next) = (self.what, self.members.len() as u32);
        if next == INSTANCE {
            return Err(DataFusionError::Execution(format!(
                "{what}: more than {INSTANCE} collective instances are more than it handles; narrow the relation it reads"
            )));
        }
        let i = *self.index.entry((comm, instance)).or_insert(next);
        if i == next {
            self.members.push(0);
            if self.members.len().is_power_of_two() {
                hold(self.members.capacity() * 36)?;
            }
        }
        self.members[i as usize] += 1;
        writer.push(post, Item::Posts(i))?;
        completes.set(done);
        writer.push(done, Item::Waits(INSTANCE | i))
    }
}

/// Bytes held from the lists' end on beside their buckets: the bits, the instances' counts and
/// the ranks' buffers of the lists.
fn lists_fixed(calls: usize, instances: usize, ranks: usize) -> usize {
    calls / 8 + instances * 16 + CallLists::most_bytes(ranks) + ranks * 8
}

/// The links once every item is written: the lists in call order.
fn links_of(
    store: &CallStore,
    writer: ListsWriter,
    completes: Bits,
    instances: Instances,
    unplaced: Vec<i64>,
    hold: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Links> {
    let Instances { index, members, .. } = instances;
    drop(index);
    let fixed = lists_fixed(store.len(), members.len(), store.ranks.len());
    let firsts: Vec<u32> = store.ranks.iter().map(|r| r.first).collect();
    let lists = writer.finish(&firsts, &mut |bucket| hold(fixed + bucket))?;
    Ok(Links { lists, completes, members, unplaced })
}

/// Place every message side and collective member in its call, and gather what each call
/// waits for. `hold` is told the bytes held before they are taken (the memory budget), and
/// `bucket_bytes` bounds what the lists read back at a time.
pub(super) fn link(
    what: &'static str,
    store: &mut CallStore,
    mut messages: Rows<7>,
    mut collectives: Rows<5>,
    eager_limit: i64,
    bucket_bytes: usize,
    hold: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Links> {
    let n = store.len();
    // A message gives a call at most two dependencies on each side, a collective member a
    // post and a dependency.
    let most = messages.left() as usize * 4 + collectives.left() as usize * 2;
    let mut writer = ListsWriter::new(what, n, most, bucket_bytes)?;
    let fixed = n / 8 + writer.most_bytes() + store.ranks.len() * 8;
    hold(fixed)?;
    let mut unplaced = vec![0i64; store.ranks.len()];
    let ranks = store.rank_lookup();
    let mut completes = Bits::new(n);
    // The messages a batch at a time, in a pipeline: while all threads place one batch's sides
    // in their calls, the batch before is written to the lists and the next one read.
    let (mut placing, mut read, mut written) =
        (MessageBatch::default(), MessageBatch::default(), MessageBatch::default());
    let (mut found, mut found_before) = (Vec::new(), Vec::new());
    placing.read(&mut messages, &ranks)?;
    while !placing.rows.is_empty() || !written.rows.is_empty() {
        commdb_catalog::interrupt::check(what)?;
        let (located, listed) = rayon::join(
            || store.locate_all(&placing.sides, &mut found, &mut unplaced),
            || -> Result<()> {
                written.list(&found_before, eager_limit, &mut writer, &mut completes)?;
                read.read(&mut messages, &ranks)
            },
        );
        located?;
        listed?;
        // The batch placed is written next, the one read placed next.
        std::mem::swap(&mut written, &mut placing);
        std::mem::swap(&mut found_before, &mut found);
        std::mem::swap(&mut placing, &mut read);
    }
    // A side to place: its rank's index among the store's (NOWHERE: no such rank, or no time).
    let side = |rank: Option<i64>, t: Option<i64>| -> (u32, i64) {
        match (rank.and_then(|r| ranks.index(r)), t) {
            (Some(ri), Some(t)) => (ri as u32, t),
            _ => (NOWHERE, 0),
        }
    };
    let placed = |found: u32| (found != NOWHERE).then_some(found);
    let mut sides = Vec::new();
    let mut instances = Instances::new(what);
    let mut batch = Vec::new();
    while collectives.next_rows(&mut batch, LINK_BATCH)? > 0 {
        commdb_catalog::interrupt::check(what)?;
        sides.clear();
        for c in &batch {
            let [_, _, rank, begin, end] = c.map(value);
            let begin = begin.or(end);
            // Members without a communicator or instance are not placed (nor counted).
            let known = value(c[0]).is_some() && value(c[1]).is_some();
            sides.push(if known { side(rank, begin) } else { (NOWHERE, 0) });
            sides.push(if known { side(rank, end.or(begin)) } else { (NOWHERE, 0) });
        }
        store.locate_all(&sides, &mut found, &mut unplaced)?;
        for (c, f) in batch.iter().zip(found.chunks_exact(2)) {
            let (Some(comm), Some(instance)) = (value(c[0]), value(c[1])) else { continue };
            if let (Some(p), Some(d)) = (placed(f[0]), placed(f[1])) {
                instances.member((comm, instance), p, d, &mut writer, &mut completes, &mut |b| hold(fixed + b))?;
            }
        }
    }
    links_of(store, writer, completes, instances, unplaced, hold)
}

/// What the calls wait for, from sides and members already placed in their calls where the
/// ranks' calls lie (a distributed engine's steps, [`super::placing`]): `items` are rows of
/// [`super::placing::Item`], each call known by its rank and its number within the rank,
/// which the store's numbering turns into its number here. The lists are the same as
/// [`link`] makes from the same messages and collectives.
pub(super) fn link_placed(
    what: &'static str,
    store: &mut CallStore,
    mut items: Rows<8>,
    eager_limit: i64,
    bucket_bytes: usize,
    hold: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Links> {
    use super::placing::Item as Placed;
    let n = store.len();
    // A row lists at most four items (a message's two completions, two each).
    let most = items.left() as usize * 4;
    let mut writer = ListsWriter::new(what, n, most, bucket_bytes)?;
    let fixed = n / 8 + writer.most_bytes() + store.ranks.len() * 8;
    hold(fixed)?;
    let ranks = store.rank_lookup();
    let bounds: Vec<(u32, u32)> = store.ranks.iter().map(|r| (r.first, r.count)).collect();
    // A side: its call's number here (None: not placed) and its rank's index.
    let call = |rank: Option<i64>, number: Option<i64>| -> Result<(Option<u32>, u32)> {
        let ri = rank.and_then(|r| ranks.index(r));
        match (ri, number) {
            (Some(ri), Some(k)) => match u32::try_from(k).ok().filter(|&k| k < bounds[ri].1) {
                Some(k) => Ok((Some(bounds[ri].0 + k), ri as u32)),
                None => Err(DataFusionError::Internal(format!(
                    "{what}: a side placed in call {k} of rank {}, which has {} MPI calls",
                    rank.unwrap_or_default(),
                    bounds[ri].1
                ))),
            },
            (None, Some(k)) => Err(DataFusionError::Internal(format!(
                "{what}: a side placed in call {k} of rank {rank:?}, which has no calls"
            ))),
            (ri, None) => Ok((None, ri.map_or(NOWHERE, |ri| ri as u32))),
        }
    };
    let mut unplaced = vec![0i64; store.ranks.len()];
    let mut completes = Bits::new(n);
    let mut instances = Instances::new(what);
    let mut batch = Vec::new();
    while items.next_rows(&mut batch, LINK_BATCH)? > 0 {
        commdb_catalog::interrupt::check(what)?;
        for row in &batch {
            match Placed::of(row) {
                Some(Placed::Message { src, send_post, send_done, dst, recv_post, recv_done, bytes }) => {
                    let sides =
                        [call(src, send_post)?, call(src, send_done)?, call(dst, recv_post)?, call(dst, recv_done)?];
                    list_message(sides, bytes, eager_limit, &mut writer, &mut completes)?;
                }
                Some(Placed::Member { rank, post, done, comm, instance }) => {
                    let (Some(p), _) = call(Some(rank), Some(post))? else { continue };
                    let (Some(d), _) = call(Some(rank), Some(done))? else { continue };
                    instances.member((comm, instance), p, d, &mut writer, &mut completes, &mut |b| hold(fixed + b))?;
                }
                Some(Placed::Unplaced { rank, sides }) => match ranks.index(rank) {
                    Some(ri) => unplaced[ri] += sides,
                    None => {
                        return Err(DataFusionError::Internal(format!(
                            "{what}: unplaced sides of rank {rank}, which has no calls"
                        )));
                    }
                },
                None => {
                    return Err(DataFusionError::Internal(format!(
                        "{what}: a placed row of an unknown kind {}",
                        row[0]
                    )));
                }
            }
        }
    }
    links_of(store, writer, completes, instances, unplaced, hold)
}

/// The ideal start of every call and the ideal end of every rank's last one.
pub(super) struct Simulated {
    pub starts: IdealStarts,
    pub last_ideal_end: Vec<i64>,
}

impl Simulated {
    /// Bytes held at most for `ranks` ranks and `calls` calls.
    pub fn most_bytes(ranks: usize, calls: usize) -> usize {
        IdealStarts::most_bytes(ranks)
            + IdealStarts::index_bytes(calls)
            + ranks * (std::mem::size_of::<Visit>() + MOST_BLOCK_BYTES)
            + calls / 8
    }
}

/// Where a rank stands in the visit, in one place: the visit moves from rank to rank every few
/// calls (a rank goes on until a call waits for another's), so what it reads of a rank it comes
/// back to lies together, and its calls are read as the store encodes them (4 to 5 bytes a
/// call), a call when the visit reaches it.
#[derive(Debug, Default)]
struct Visit {
    /// Its next call to visit, and the number past its last.
    pos: u32,
    last: u32,
    /// The ideal end of its call before `pos` (its origin before its first).
    clock: i64,
    /// The ideal start of call `pos` once given (the rank stopped there to wait), else UNSET.
    start: i64,
    /// Call `pos`'s compute and duration, once read (`read`).
    compute: i64,
    duration: i64,
    read: bool,
    /// The number past the last call of the block in `bytes`, and where call `pos` (or the
    /// next to read) lies in them.
    block_end: u32,
    bytes: Vec<u8>,
    at: usize,
}

impl Visit {
    /// A rank before its first call.
    fn at_origin(r: &RankCalls) -> Visit {
        Visit {
            pos: r.first,
            last: r.first + r.count,
            clock: r.origin,
            start: UNSET,
            block_end: r.first,
            ..Visit::default()
        }
    }

    /// Read call `pos` (its compute and duration) from the rank's block, the next block first
    /// when the one held ends.
    fn read(&mut self, what: &str, store: &CallStore, ri: usize) -> Result<()> {
        let damaged = || {
            DataFusionError::Internal(format!(
                "{what}: a block of rank {}'s MPI calls did not read back",
                store.ranks[ri].rank
            ))
        };
        if self.pos == self.block_end {
            // The block before ends where its last call did.
            if self.at != self.bytes.len() {
                return Err(damaged());
            }
            self.block_end = store.read_encoded(ri, self.pos, &mut self.bytes)?;
            self.at = 0;
        }
        let (compute, duration, _) = next_encoded(&self.bytes, &mut self.at).ok_or_else(damaged)?;
        (self.compute, self.duration, self.read) = (compute, duration, true);
        Ok(())
    }
}

/// Ideal start and end of every call, in dependency order: each rank goes as far as what its
/// calls wait for has started, then waits to be woken by it.
pub(super) fn simulate(what: &'static str, store: &mut CallStore, links: &mut Links) -> Result<Simulated> {
    let n = store.ranks.len();
    let mut starts = IdealStarts::new(what, store.ranks.iter().map(|r| r.first))?;
    let mut remaining: Vec<u32> = links.members.clone();
    let mut latest: Vec<i64> = vec![UNSET; links.members.len()];
    let mut ranks: Vec<Visit> = store.ranks.iter().map(Visit::at_origin).collect();
    let mut waiting: FastMap<Dep, Vec<usize>> = FastMap::default();
    let mut ready: Vec<usize> = (0..n).rev().collect();
    let mut queued = vec![true; n];
    // Calls some rank waits for: a call's start wakes them, and most calls have none to wake.
    let mut awaited = Bits::new(store.len());
    let wake = |dep: Dep, waiting: &mut FastMap<Dep, Vec<usize>>, ready: &mut Vec<usize>, queued: &mut [bool]| {
        if let Some(ws) = waiting.remove(&dep) {
            for w in ws {
                if !queued[w] {
                    queued[w] = true;
                    ready.push(w);
                }
            }
        }
    };
    let mut visits = 0usize;
    while let Some(r) = ready.pop() {
        queued[r] = false;
        let v = &mut ranks[r];
        while v.pos < v.last {
            commdb_catalog::interrupt::check_every(visits, what)?;
            visits += 1;
            let k = v.pos;
            if !v.read {
                v.read(what, store, r)?;
            }
            let lists = links.lists.of(r, k)?;
            let start = if v.start != UNSET {
                v.start
            } else {
                let s = v.clock + v.compute;
                starts.set(r, k, s)?;
                if awaited.get(k) {
                    wake(k, &mut waiting, &mut ready, &mut queued);
                }
                for &i in lists.posts {
                    let i = i as usize;
                    remaining[i] -= 1;
                    latest[i] = latest[i].max(s);
                    if remaining[i] == 0 {
                        wake(INSTANCE | i as u32, &mut waiting, &mut ready, &mut queued);
                    }
                }
                s
            };
            let mut end = start;
            let mut blocked = None;
            for &dep in lists.waits {
                let s = if dep & INSTANCE != 0 {
                    let i = (dep & !INSTANCE) as usize;
                    if remaining[i] > 0 { UNSET } else { latest[i] }
                } else {
                    starts.get(store.rank_of_call(dep), dep)?.unwrap_or(UNSET)
                };
                if s == UNSET {
                    blocked = Some(dep);
                    break;
                }
                end = end.max(s);
            }
            if let Some(dep) = blocked {
                // It goes on from here when woken, its start given.
                v.start = start;
                if dep & INSTANCE == 0 {
                    awaited.set(dep);
                }
                waiting.entry(dep).or_default().push(r);
                break;
            }
            if !links.completes.get(k) {
                end = start + v.duration;
            }
            (v.clock, v.start, v.read) = (end, UNSET, false);
            v.pos += 1;
        }
        if v.pos == v.last {
            v.bytes = Vec::new();
        }
    }
    // The least rank that could not go on, whatever order its ranks came in.
    let stuck = (0..n).filter(|&r| ranks[r].pos < ranks[r].last).min_by_key(|&r| store.ranks[r].rank);
    if let Some(r) = stuck {
        let (number, rank_id) = (ranks[r].pos, store.ranks[r].rank);
        let c = store.call(r, number)?;
        return Err(DataFusionError::Execution(format!(
            "{what}: rank {rank_id}'s MPI call at {}..{} waits for operations posted after it on other ranks: the recorded times contradict the messages; open the trace with clock correction clc or narrow the relation",
            c.start, c.end
        )));
    }
    Ok(Simulated { starts, last_ideal_end: ranks.iter().map(|v| v.clock).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::call_store::MpiCall;

    #[test]
    fn a_visit_reads_its_rank_s_calls_in_order_across_blocks() {
        let mut store = CallStore::new("test").unwrap();
        // Two ranks of several blocks each (the second's last block short), one without calls.
        let mut runs = Vec::new();
        for (rank, n) in [(3i64, 300i64), (5, 0), (8, 257)] {
            let calls: Vec<MpiCall> = (0..n)
                .map(|i| MpiCall {
                    start: 1_000 + i * 100,
                    end: 1_000 + i * 100 + 1 + i % 7 * 10,
                    compute: if i == 0 { 0 } else { 100 - 1 - (i - 1) % 7 * 10 },
                    region: (i % 3) as u32,
                })
                .collect();
            store.push(rank, 1_000, 1_000 + n * 100, &calls).unwrap();
            runs.push(calls);
        }
        store.finish_writing().unwrap();
        for (ri, calls) in runs.iter().enumerate() {
            let mut v = Visit::at_origin(&store.ranks[ri]);
            for c in calls {
                v.read("test", &store, ri).unwrap();
                assert_eq!((v.compute, v.duration), (c.compute, c.end - c.start), "call {} of rank {ri}", v.pos);
                v.pos += 1;
            }
            assert_eq!(v.pos, v.last);
        }
    }

    #[test]
    fn a_call_waits_for_other_ranks_and_for_later_calls_of_its_own() {
        let (done, rank) = (50u32, 3u32);
        assert_eq!(waited_for((Some(20), 4), done, rank), Some(20), "another rank's post");
        assert_eq!(waited_for((Some(70), 4), done, rank), Some(70), "another rank's, numbered after");
        assert_eq!(waited_for((Some(20), 3), done, rank), None, "an earlier call of its own rank");
        assert_eq!(waited_for((Some(50), 3), done, rank), None, "itself");
        assert_eq!(waited_for((Some(60), 3), done, rank), Some(60), "a later call of its own: the times contradict");
        assert_eq!(waited_for((None, 4), done, rank), None, "not placed");
    }
}
