//! Point-to-point message matching, following MPI's non-overtaking rule: for each channel
//! (src, dst, comm, tag) the k-th send posted matches the k-th receive posted. A rank's sends
//! are ordered by their send event, its receives by the time they were posted.
//!
//! Rather than sorting all halves by channel, each rank numbers the halves of its own channels
//! (a hash map of the few channels a rank uses, in parallel over ranks); a global index of the
//! channels then gives, for the k-th send of a channel, the k-th receive of the same channel
//! through the receives counted and placed by channel. O(n) in the number of halves, plus a
//! sort of each rank's receives when they complete in another order than they were posted.

use rayon::prelude::*;

use super::halves::Half;
use crate::build::split_lengths;
use crate::events::PartStream;
use crate::fast_hash::FastMap;

/// A half's channel within its rank (an index into the rank's list of channels) and its
/// position among that channel's halves.
#[derive(Debug, Clone, Copy, Default)]
struct Place {
    channel: u32,
    seq: u32,
}

/// A channel as seen from one rank: (peer, comm, tag) and how many halves it carries.
type ChannelCount = ((i32, i32, i32), u32);

/// A message as indices of its halves (`NONE` for a missing half), keyed by its msg_id order:
/// the send event, or the completion event of a receive without a send.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    pub ts: i64,
    pub event: usize,
    pub send: u32,
    pub recv: u32,
}

impl Pair {
    pub const NONE: u32 = u32::MAX;

    /// The half at index `k` of `halves`, if any.
    pub fn half(halves: &[Half], k: u32) -> Option<&Half> {
        (k != Pair::NONE).then(|| &halves[k as usize])
    }
}

/// Pair every send with the receive of the same rank in its channel, if any; every receive
/// beyond its channel's sends is a message of its own. Sends and receives must be in stream
/// order with `per_stream` counts; each rank's halves are put in matching order. Returns the
/// messages in rank order of their sends, then the receives without a send.
pub fn pair(
    sends: &mut [Half],
    recvs: &mut [Half],
    streams: &[PartStream],
    per_stream: &[(usize, usize)],
) -> Vec<Pair> {
    let ranks = rank_ranges(streams, per_stream);
    let (send_places, recv_places, channels) = number_channels(sends, recvs, &ranks);
    let index = ChannelIndex::new(&ranks, &channels);

    // Receives in channel order: the k-th receive of channel g sits at recv_base[g] + k.
    let mut recv_base = Vec::with_capacity(index.recvs.len());
    let mut total = 0u32;
    for &n in &index.recvs {
        recv_base.push(total);
        total += n;
    }
    let mut recv_at = vec![Pair::NONE; recvs.len()];
    for (r, rank) in ranks.iter().enumerate() {
        for j in rank.recvs.clone() {
            let p = recv_places[j];
            recv_at[(recv_base[index.recv_ids[r][p.channel as usize] as usize] + p.seq) as usize] = j as u32;
        }
    }

    let (sends, recvs) = (&*sends, &*recvs);
    let matched = |g: u32, seq: u32| {
        if seq < index.recvs[g as usize] { recv_at[(recv_base[g as usize] + seq) as usize] } else { Pair::NONE }
    };
    let per_rank: Vec<(Vec<Pair>, Vec<Pair>)> = ranks
        .par_iter()
        .enumerate()
        .map(|(r, rank)| {
            let sent = rank
                .sends
                .clone()
                .map(|i| {
                    let p = send_places[i];
                    let recv = matched(index.send_ids[r][p.channel as usize], p.seq);
                    Pair { ts: sends[i].ts, event: sends[i].event, send: i as u32, recv }
                })
                .collect();
            let lone = rank
                .recvs
                .clone()
                .filter(|&j| {
                    let p = recv_places[j];
                    p.seq >= index.sends[index.recv_ids[r][p.channel as usize] as usize]
                })
                .map(|j| Pair { ts: recvs[j].ts, event: recvs[j].event, send: Pair::NONE, recv: j as u32 })
                .collect();
            (sent, lone)
        })
        .collect();
    let mut pairs: Vec<Pair> = Vec::with_capacity(sends.len() + per_rank.iter().map(|p| p.1.len()).sum::<usize>());
    let mut lone_recvs = Vec::new();
    for (mut sent, mut lone) in per_rank {
        pairs.append(&mut sent);
        lone_recvs.append(&mut lone);
    }
    pairs.append(&mut lone_recvs);
    pairs
}

/// The halves of one rank: index ranges into the sends and the receives. A rank's streams are
/// consecutive, so are their halves.
#[derive(Debug, Clone)]
struct RankHalves {
    rank: i32,
    sends: std::ops::Range<usize>,
    recvs: std::ops::Range<usize>,
}

fn rank_ranges(streams: &[PartStream], per_stream: &[(usize, usize)]) -> Vec<RankHalves> {
    let mut out: Vec<RankHalves> = Vec::new();
    let (mut s, mut r) = (0, 0);
    for (ps, &(ns, nr)) in streams.iter().zip(per_stream) {
        match out.last_mut() {
            Some(last) if last.rank == ps.stream.rank => {
                last.sends.end += ns;
                last.recvs.end += nr;
            }
            _ => out.push(RankHalves { rank: ps.stream.rank, sends: s..s + ns, recvs: r..r + nr }),
        }
        s += ns;
        r += nr;
    }
    out
}

/// Put each rank's sends in send order and its receives in post order (already so unless a
/// rank has several streams or receives complete out of order), then number the halves of
/// each of the rank's channels. Returns the places of sends and receives and, per rank, its
/// send and receive channels.
#[allow(clippy::type_complexity)]
fn number_channels(
    sends: &mut [Half],
    recvs: &mut [Half],
    ranks: &[RankHalves],
) -> (Vec<Place>, Vec<Place>, Vec<(Vec<ChannelCount>, Vec<ChannelCount>)>) {
    let mut send_places = vec![Place::default(); sends.len()];
    let mut recv_places = vec![Place::default(); recvs.len()];
    let send_lengths = || ranks.iter().map(|r| r.sends.len());
    let recv_lengths = || ranks.iter().map(|r| r.recvs.len());
    let jobs: Vec<_> = split_lengths(sends, send_lengths())
        .into_iter()
        .zip(split_lengths(recvs, recv_lengths()))
        .zip(split_lengths(&mut send_places, send_lengths()))
        .zip(split_lengths(&mut recv_places, recv_lengths()))
        .map(|(((s, r), sp), rp)| (s, r, sp, rp))
        .collect();
    let channels = jobs
        .into_par_iter()
        .map(|(s, r, sp, rp)| {
            if !s.is_sorted_by_key(Half::send_order) {
                s.sort_unstable_by_key(Half::send_order);
            }
            if !r.is_sorted_by_key(Half::recv_order) {
                r.sort_unstable_by_key(Half::recv_order);
            }
            (number(s, sp, |h| h.dst), number(r, rp, |h| h.src))
        })
        .collect();
    (send_places, recv_places, channels)
}

/// Number the halves of each channel (peer, comm, tag) in order; the rank's channels in order
/// of first use, with their counts.
fn number(halves: &[Half], places: &mut [Place], peer: fn(&Half) -> i32) -> Vec<ChannelCount> {
    let mut ids: FastMap<(i32, i32, i32), u32> = FastMap::default();
    let mut channels: Vec<ChannelCount> = Vec::new();
    let mut last: Option<((i32, i32, i32), u32)> = None;
    for (h, place) in halves.iter().zip(places) {
        let key = (peer(h), h.comm, h.tag);
        let channel = match last {
            Some((k, c)) if k == key => c,
            _ => *ids.entry(key).or_insert_with(|| {
                channels.push((key, 0));
                (channels.len() - 1) as u32
            }),
        };
        last = Some((key, channel));
        let count = &mut channels[channel as usize].1;
        *place = Place { channel, seq: *count };
        *count += 1;
    }
    channels
}

/// Global ids of the channels (src, dst, comm, tag) seen by the ranks, with the number of sends
/// and of receives on each.
struct ChannelIndex {
    /// Per rank: global id of each of its send channels.
    send_ids: Vec<Vec<u32>>,
    /// Per rank: global id of each of its receive channels.
    recv_ids: Vec<Vec<u32>>,
    sends: Vec<u32>,
    recvs: Vec<u32>,
}

impl ChannelIndex {
    fn new(ranks: &[RankHalves], channels: &[(Vec<ChannelCount>, Vec<ChannelCount>)]) -> Self {
        let mut ids: FastMap<(i32, i32, i32, i32), u32> = FastMap::default();
        let mut index =
            ChannelIndex { send_ids: Vec::new(), recv_ids: Vec::new(), sends: Vec::new(), recvs: Vec::new() };
        let mut id = |key, index: &mut ChannelIndex| {
            *ids.entry(key).or_insert_with(|| {
                index.sends.push(0);
                index.recvs.push(0);
                (index.sends.len() - 1) as u32
            })
        };
        for (rank, (send_channels, recv_channels)) in ranks.iter().zip(channels) {
            let mut send_ids = Vec::with_capacity(send_channels.len());
            for &((dst, comm, tag), n) in send_channels {
                let g = id((rank.rank, dst, comm, tag), &mut index);
                index.sends[g as usize] += n;
                send_ids.push(g);
            }
            let mut recv_ids = Vec::with_capacity(recv_channels.len());
            for &((src, comm, tag), n) in recv_channels {
                let g = id((src, rank.rank, comm, tag), &mut index);
                index.recvs[g as usize] += n;
                recv_ids.push(g);
            }
            index.send_ids.push(send_ids);
            index.recv_ids.push(recv_ids);
        }
        index
    }
}
