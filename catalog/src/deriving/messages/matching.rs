//! Point-to-point message matching, following MPI's non-overtaking rule: for each channel
//! (src, dst, comm, tag) the k-th send posted matches the k-th receive posted. A rank's sends
//! are ordered by their send event, its receives by the time they were posted.
//!
//! Rather than sorting all halves by channel, each rank numbers the halves of its own channels
//! (`channels`, in parallel over ranks); a global index of the channels then gives, for the
//! k-th send of a channel, the k-th receive of the same channel through the receives counted
//! and placed by channel. The halves stay where the stream walk put them. O(n) in the number
//! of halves in the common case.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use super::channels::{self, ChannelCount, Place, recv_channel, send_channel};
use super::halves::Half;
use crate::deriving::split_lengths;
use crate::events::PartStream;
use crate::fast_hash::FastMap;

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
/// order with `per_stream` counts. Returns the messages in the order of their sends (which is
/// global event order), then the receives without a send.
pub fn pair(sends: &[Half], recvs: &[Half], streams: &[PartStream], per_stream: &[(usize, usize)]) -> Vec<Pair> {
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
    // Ranks place their receives in parallel, each at slots of its own.
    let recv_at: Vec<AtomicU32> = (0..recvs.len()).into_par_iter().map(|_| AtomicU32::new(Pair::NONE)).collect();
    ranks.par_iter().enumerate().for_each(|(r, rank)| {
        for j in rank.recvs.clone() {
            let p = recv_places[j];
            let at = recv_base[index.recv_ids[r][p.channel as usize] as usize] + p.seq;
            recv_at[at as usize].store(j as u32, Ordering::Relaxed);
        }
    });

    let matched = |g: u32, seq: u32| {
        if seq < index.recvs[g as usize] {
            recv_at[(recv_base[g as usize] + seq) as usize].load(Ordering::Relaxed)
        } else {
            Pair::NONE
        }
    };
    let unset = Pair { ts: 0, event: 0, send: Pair::NONE, recv: Pair::NONE };
    let mut pairs = vec![unset; sends.len()];
    let lone: Vec<Vec<Pair>> = split_lengths(&mut pairs, ranks.iter().map(|r| r.sends.len()))
        .into_par_iter()
        .zip(&ranks)
        .enumerate()
        .map(|(r, (out, rank))| {
            for (slot, i) in out.iter_mut().zip(rank.sends.clone()) {
                let p = send_places[i];
                let recv = matched(index.send_ids[r][p.channel as usize], p.seq);
                *slot = Pair { ts: sends[i].ts, event: sends[i].event(), send: i as u32, recv };
            }
            rank.recvs
                .clone()
                .filter(|&j| {
                    let p = recv_places[j];
                    p.seq >= index.sends[index.recv_ids[r][p.channel as usize] as usize]
                })
                .map(|j| Pair { ts: recvs[j].ts, event: recvs[j].event(), send: Pair::NONE, recv: j as u32 })
                .collect()
        })
        .collect();
    pairs.extend(lone.into_iter().flatten());
    pairs
}

/// The halves of one rank: index ranges into the sends and the receives. A rank's streams are
/// consecutive, so are their halves.
#[derive(Debug, Clone)]
pub(crate) struct RankHalves {
    pub rank: i32,
    pub sends: std::ops::Range<usize>,
    pub recvs: std::ops::Range<usize>,
}

pub(crate) fn rank_ranges(streams: &[PartStream], per_stream: &[(usize, usize)]) -> Vec<RankHalves> {
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

/// Number the halves of each rank's channels in matching order, ranks in parallel. Returns
/// the places of sends and receives and, per rank, its send and receive channels.
#[allow(clippy::type_complexity)]
pub(crate) fn number_channels(
    sends: &[Half],
    recvs: &[Half],
    ranks: &[RankHalves],
) -> (Vec<Place>, Vec<Place>, Vec<(Vec<ChannelCount>, Vec<ChannelCount>)>) {
    let mut send_places = vec![Place::default(); sends.len()];
    let mut recv_places = vec![Place::default(); recvs.len()];
    let jobs: Vec<_> = split_lengths(&mut send_places, ranks.iter().map(|r| r.sends.len()))
        .into_iter()
        .zip(split_lengths(&mut recv_places, ranks.iter().map(|r| r.recvs.len())))
        .zip(ranks)
        .collect();
    let channels = jobs
        .into_par_iter()
        .map(|((sp, rp), rank)| {
            let send_channels = channels::number(&sends[rank.sends.clone()], sp, send_channel, Half::send_order);
            let recv_channels = channels::number(&recvs[rank.recvs.clone()], rp, recv_channel, Half::recv_order);
            (send_channels, recv_channels)
        })
        .collect();
    (send_places, recv_places, channels)
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
