//! The replay itself, over the calls in the call store: every message side and collective
//! member is placed in the MPI call that holds its time (`link`), what each call waits for is
//! gathered call by call (a compressed list: a start per call, then the calls and collective
//! instances it waits for; an earlier call of its own rank is never listed, the rank having
//! started it already), and the calls are visited in dependency order (`simulate`), each
//! rank as far as it can go, then the next rank that can. In memory: per MPI call its ideal
//! start (8 bytes), where its list starts (4) and its list (4 a dependency); the messages'
//! dependencies pass through a scratch file on their way to the lists. The rules are the
//! module's ([`crate::replay`]). The sides are placed a batch of rows at a time, the ranks shared
//! out among the threads (`CallStore::locate_all`); each rank sees its lookups in the same
//! order as one by one.

use std::collections::VecDeque;

use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

use super::call_store::{CallStore, MAX_CALLS, NOWHERE};
use super::spill::{Rows, Spill, value};

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
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: u32) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    fn get(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
}

/// What the calls wait for, found from the messages and collectives.
pub(super) struct Links {
    /// Call d waits for waits[start[d]..start[d + 1]].
    start: Vec<u32>,
    waits: Vec<Dep>,
    /// Calls that complete an operation (their end is the latest of what they wait for).
    completes: Bits,
    /// Calls that post to a collective instance, and (post, instance) sorted by post.
    posts_flag: Bits,
    instance_posts: Vec<(u32, u32)>,
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

/// Bytes the links of `calls` calls and `deps` dependencies hold.
pub(super) fn links_bytes(calls: usize, deps: usize) -> usize {
    calls * 4 + deps * 4 + calls / 4
}

/// Place every message side and collective member in its call, and gather what each call
/// waits for. `grow` is asked for the bytes before they are taken (the memory budget).
pub(super) fn link(
    what: &'static str,
    store: &mut CallStore,
    mut messages: Rows<7>,
    mut collectives: Rows<5>,
    eager_limit: i64,
    grow: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Links> {
    let n = store.len();
    grow(links_bytes(n, 0))?;
    let mut unplaced = vec![0i64; store.ranks.len()];
    // A side to place: its rank's index among the store's (NOWHERE: no such rank, or no time).
    let side = |store: &CallStore, rank: Option<i64>, t: Option<i64>| -> (u32, i64) {
        match (rank.and_then(|r| store.rank_index(r)), t) {
            (Some(ri), Some(t)) => (ri as u32, t),
            _ => (NOWHERE, 0),
        }
    };
    let placed = |found: u32| (found != NOWHERE).then_some(found);
    let mut count = vec![0u32; n + 1];
    let mut completes = Bits::new(n);
    // (call that waits, what it waits for), packed in one integer, on their way to the lists.
    let mut pairs = Spill::<1>::new(what)?;
    let add = |count: &mut Vec<u32>, pairs: &mut Spill<1>, done: u32, dep: Dep| -> Result<()> {
        count[done as usize] += 1;
        pairs.push([(i64::from(done) << 32) | i64::from(dep)])
    };
    // The rows come in batches, whose sides are placed by all threads at once.
    let (mut batch, mut sides, mut found) = (Vec::new(), Vec::new(), Vec::new());
    while messages.next_rows(&mut batch, LINK_BATCH)? > 0 {
        commdb_catalog::interrupt::check(what)?;
        sides.clear();
        for m in &batch {
            let [src, dst, _, send_call_start, send_complete, recv_post, recv_call_start] = m.map(value);
            sides.push(side(store, src, send_call_start));
            sides.push(side(store, src, send_complete.or(send_call_start)));
            sides.push(side(store, dst, recv_post.or(recv_call_start)));
            sides.push(side(store, dst, recv_call_start));
        }
        store.locate_all(&sides, &mut found, &mut unplaced)?;
        for ((m, f), s) in batch.iter().zip(found.chunks_exact(4)).zip(sides.chunks_exact(4)) {
            let bytes = value(m[2]);
            // A side: its call (None: not placed) and its rank's index.
            let [send_post, send_done, recv_post, recv_done] = [0, 1, 2, 3].map(|i| (placed(f[i]), s[i].0));
            if let (Some(done), rank) = recv_done {
                completes.set(done);
                for p in [recv_post, send_post] {
                    if let Some(p) = waited_for(p, done, rank) {
                        add(&mut count, &mut pairs, done, p)?;
                    }
                }
            }
            if let (Some(done), rank) = send_done {
                completes.set(done);
                let eager = bytes.is_some_and(|b| b <= eager_limit);
                let posts = if eager { [send_post, (None, NOWHERE)] } else { [send_post, recv_post] };
                for p in posts {
                    if let Some(p) = waited_for(p, done, rank) {
                        add(&mut count, &mut pairs, done, p)?;
                    }
                }
            }
        }
    }
    let mut instance_of: FastMap<(i64, i64), u32> = FastMap::default();
    let mut instance_posts: Vec<(u32, u32)> = Vec::new();
    let mut members: Vec<u32> = Vec::new();
    let mut posts_flag = Bits::new(n);
    let mut batch = Vec::new();
    while collectives.next_rows(&mut batch, LINK_BATCH)? > 0 {
        commdb_catalog::interrupt::check(what)?;
        sides.clear();
        for c in &batch {
            let [_, _, rank, begin, end] = c.map(value);
            let begin = begin.or(end);
            // Members without a communicator or instance are not placed (nor counted).
            let known = value(c[0]).is_some() && value(c[1]).is_some();
            sides.push(if known { side(store, rank, begin) } else { (NOWHERE, 0) });
            sides.push(if known { side(store, rank, end.or(begin)) } else { (NOWHERE, 0) });
        }
        store.locate_all(&sides, &mut found, &mut unplaced)?;
        for (c, f) in batch.iter().zip(found.chunks_exact(2)) {
            let (Some(comm), Some(instance)) = (value(c[0]), value(c[1])) else { continue };
            if let (Some(p), Some(d)) = (placed(f[0]), placed(f[1])) {
                let next = members.len() as u32;
                let i = *instance_of.entry((comm, instance)).or_insert(next);
                if i == next {
                    members.push(0);
                }
                members[i as usize] += 1;
                instance_posts.push((p, i));
                posts_flag.set(p);
                completes.set(d);
                add(&mut count, &mut pairs, d, INSTANCE | i)?;
            }
        }
    }
    drop(instance_of);
    instance_posts.sort_unstable();
    // The lists: counted, then filled from the scratch file, then each sorted without repeats.
    let total = pairs.rows() as usize;
    grow(links_bytes(n, total) - links_bytes(n, 0) + instance_posts.len() * 8 + members.len() * 4)?;
    let mut start = count;
    let mut sum = 0u32;
    for s in start.iter_mut() {
        let c = *s;
        *s = sum;
        sum += c;
    }
    let mut waits = vec![0u32; total];
    let mut rows = pairs.into_rows()?;
    // start[d] moves on as d's list fills, ending where d + 1's begins; shifted back after.
    let mut batch = Vec::new();
    while rows.next_rows(&mut batch, LINK_BATCH)? > 0 {
        for &[packed] in &batch {
            let (d, dep) = ((packed >> 32) as usize, packed as u32);
            waits[start[d] as usize] = dep;
            start[d] += 1;
        }
    }
    for d in (1..=n).rev() {
        start[d] = start[d - 1];
    }
    start[0] = 0;
    let mut kept = 0usize;
    for d in 0..n {
        let (a, b) = (start[d] as usize, start[d + 1] as usize);
        waits[a..b].sort_unstable();
        start[d] = kept as u32;
        let mut last = None;
        for k in a..b {
            if last != Some(waits[k]) {
                last = Some(waits[k]);
                waits[kept] = waits[k];
                kept += 1;
            }
        }
    }
    start[n] = kept as u32;
    waits.truncate(kept);
    waits.shrink_to_fit();
    Ok(Links { start, waits, completes, posts_flag, instance_posts, members, unplaced })
}

/// The ideal start of every call and the ideal end of every rank's last one.
pub(super) struct Simulated {
    pub ideal_start: Vec<i64>,
    pub last_ideal_end: Vec<i64>,
}

/// Ideal start and end of every call, in dependency order: each rank goes as far as what its
/// calls wait for has started, then waits to be woken by it.
pub(super) fn simulate(what: &'static str, store: &mut CallStore, links: &Links) -> Result<Simulated> {
    let n = store.ranks.len();
    let mut ideal_start = vec![UNSET; store.len()];
    let mut remaining: Vec<u32> = links.members.clone();
    let mut latest: Vec<i64> = vec![UNSET; links.members.len()];
    let mut pos: Vec<u32> = store.ranks.iter().map(|r| r.first).collect();
    let mut clock: Vec<i64> = store.ranks.iter().map(|r| r.origin).collect();
    // Per rank, where its next call's posts lie in instance_posts (sorted by call, and a rank's
    // calls are numbered on and visited in order).
    let mut next_post: Vec<usize> =
        store.ranks.iter().map(|r| links.instance_posts.partition_point(|p| p.0 < r.first)).collect();
    let mut waiting: FastMap<Dep, Vec<usize>> = FastMap::default();
    let mut ready: VecDeque<usize> = (0..n).collect();
    let mut queued = vec![true; n];
    let wake = |dep: Dep, waiting: &mut FastMap<Dep, Vec<usize>>, ready: &mut VecDeque<usize>, queued: &mut [bool]| {
        if let Some(ws) = waiting.remove(&dep) {
            for w in ws {
                if !queued[w] {
                    queued[w] = true;
                    ready.push_back(w);
                }
            }
        }
    };
    let mut visits = 0usize;
    while let Some(r) = ready.pop_front() {
        queued[r] = false;
        let last = store.ranks[r].first + store.ranks[r].count;
        while pos[r] < last {
            commdb_catalog::interrupt::check_every(visits, what)?;
            visits += 1;
            let k = pos[r];
            let call = store.call(r, k)?;
            if ideal_start[k as usize] == UNSET {
                let s = clock[r] + call.compute;
                ideal_start[k as usize] = s;
                wake(k, &mut waiting, &mut ready, &mut queued);
                if links.posts_flag.get(k) {
                    let posts = &links.instance_posts;
                    while posts.get(next_post[r]).is_some_and(|p| p.0 < k) {
                        next_post[r] += 1;
                    }
                    for &(_, i) in posts[next_post[r]..].iter().take_while(|p| p.0 == k) {
                        let i = i as usize;
                        remaining[i] -= 1;
                        latest[i] = latest[i].max(s);
                        if remaining[i] == 0 {
                            wake(INSTANCE | i as u32, &mut waiting, &mut ready, &mut queued);
                        }
                    }
                }
            }
            let mut end = ideal_start[k as usize];
            let mut blocked = None;
            let (a, b) = (links.start[k as usize] as usize, links.start[k as usize + 1] as usize);
            for &dep in &links.waits[a..b] {
                let s = if dep & INSTANCE != 0 {
                    let i = (dep & !INSTANCE) as usize;
                    if remaining[i] > 0 { UNSET } else { latest[i] }
                } else {
                    ideal_start[dep as usize]
                };
                if s == UNSET {
                    blocked = Some(dep);
                    break;
                }
                end = end.max(s);
            }
            if let Some(dep) = blocked {
                waiting.entry(dep).or_default().push(r);
                break;
            }
            if !links.completes.get(k) {
                end = ideal_start[k as usize] + (call.end - call.start);
            }
            clock[r] = end;
            pos[r] += 1;
        }
    }
    let stuck = (0..n).find(|&r| pos[r] < store.ranks[r].first + store.ranks[r].count);
    if let Some(r) = stuck {
        let (number, rank_id) = (pos[r], store.ranks[r].rank);
        let c = store.call(r, number)?;
        return Err(DataFusionError::Execution(format!(
            "{what}: rank {rank_id}'s MPI call at {}..{} waits for operations posted after it on other ranks: the recorded times contradict the messages; open the trace with clock correction clc or narrow the relation",
            c.start, c.end
        )));
    }
    Ok(Simulated { ideal_start, last_ideal_end: clock })
}

#[cfg(test)]
mod tests {
    use super::*;

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
