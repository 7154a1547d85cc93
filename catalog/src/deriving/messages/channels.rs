//! Numbering a rank's halves per channel in matching order, the first step of message
//! matching (`matching`): each half gets its channel (peer, comm, tag) as an index into the
//! rank's list of channels, and its position among that channel's halves. Sends are ordered by
//! their send event, receives by their post time (MPI's non-overtaking rule).
//!
//! Halves are numbered as they come, in stream order; a channel whose halves arrive out of
//! matching order (receives completing in another order than they were posted, a rank with
//! several threads) is renumbered after a sort of its own members. O(n) in the common case.

use super::halves::Half;
use crate::fast_hash::FastMap;

/// A half's channel within its rank (an index into the rank's list of channels) and its
/// position among that channel's halves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Place {
    pub channel: u32,
    pub seq: u32,
}

/// A channel as seen from one rank: (peer, comm, tag) and how many halves it carries.
pub type ChannelCount = ((i32, i32, i32), u32);

/// The order of a half for matching: (time, global event index).
pub type Order = (i64, usize);

/// The channel of a send seen from its rank: (destination, comm, tag).
pub fn send_channel(h: &Half) -> (i32, i32, i32) {
    (h.dst, h.comm, h.tag)
}

/// The channel of a receive seen from its rank: (source, comm, tag).
pub fn recv_channel(h: &Half) -> (i32, i32, i32) {
    (h.src, h.comm, h.tag)
}

/// Slots of the cache of recent channels in `number`.
const RECENT_SLOTS: usize = 256;

/// The channel of an empty slot of that cache.
const EMPTY: u32 = u32::MAX;

/// Number all `halves` of one side of a rank (`places` has one slot per half): returns the
/// rank's channels in order of first use, with their counts.
pub fn number(
    halves: &[Half],
    places: &mut [Place],
    channel: impl Fn(&Half) -> (i32, i32, i32),
    order: impl Fn(&Half) -> Order,
) -> Vec<ChannelCount> {
    let mut ids: FastMap<(i32, i32, i32), u32> = FastMap::default();
    let mut channels: Vec<ChannelCount> = Vec::new();
    // Per channel: the order of its latest half, and whether the orders ever went down.
    let mut latest: Vec<(Order, bool)> = Vec::new();
    // Channels seen lately, by the low bits of their peer: a rank's channels mostly differ by
    // peer, and a slot compare costs much less than hashing the key.
    let mut recent = [((0, 0, 0), EMPTY); RECENT_SLOTS];
    for (h, place) in halves.iter().zip(places.iter_mut()) {
        let key = channel(h);
        let slot = &mut recent[key.0 as u32 as usize % RECENT_SLOTS];
        let c = if slot.1 != EMPTY && slot.0 == key {
            slot.1
        } else {
            let c = *ids.entry(key).or_insert_with(|| {
                channels.push((key, 0));
                latest.push(((i64::MIN, 0), false));
                (channels.len() - 1) as u32
            });
            *slot = (key, c);
            c
        };
        let (o, i) = (order(h), c as usize);
        latest[i] = (o, latest[i].1 || o < latest[i].0);
        *place = Place { channel: c, seq: channels[i].1 };
        channels[i].1 += 1;
    }
    if latest.iter().any(|l| l.1) {
        let disordered: Vec<bool> = latest.iter().map(|l| l.1).collect();
        let mut members: Vec<(u32, Order, usize)> = places
            .iter()
            .enumerate()
            .filter(|(_, p)| disordered[p.channel as usize])
            .map(|(i, p)| (p.channel, order(&halves[i]), i))
            .collect();
        members.sort_unstable();
        let mut seq = 0;
        for (k, &(channel, _, i)) in members.iter().enumerate() {
            if k > 0 && members[k - 1].0 != channel {
                seq = 0;
            }
            places[i].seq = seq;
            seq += 1;
        }
    }
    channels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(dst: i32, tag: i32, ts: i64, event: usize) -> Half {
        Half { src: 0, dst, comm: 0, tag, ts, place: Half::place(event, 0), ..Half::UNSET }
    }

    #[test]
    fn channels_in_order_of_first_use_and_positions_per_channel() {
        let halves = [send(1, 0, 10, 0), send(2, 0, 11, 1), send(1, 0, 12, 2), send(1, 5, 13, 3), send(2, 0, 14, 4)];
        let mut places = [Place::default(); 5];
        let channels = number(&halves, &mut places, send_channel, Half::send_order);
        assert_eq!(channels, vec![((1, 0, 0), 2), ((2, 0, 0), 2), ((1, 0, 5), 1)]);
        let got: Vec<(u32, u32)> = places.iter().map(|p| (p.channel, p.seq)).collect();
        assert_eq!(got, vec![(0, 0), (1, 0), (0, 1), (2, 0), (1, 1)]);
    }

    #[test]
    fn a_channel_out_of_order_is_renumbered_by_order() {
        // Channel (1, 0, 0) comes as times 30, 10, 20; channel (2, 0, 0) is in order.
        let halves = [send(1, 0, 30, 0), send(2, 0, 5, 1), send(1, 0, 10, 2), send(1, 0, 20, 3), send(2, 0, 6, 4)];
        let mut places = [Place::default(); 5];
        number(&halves, &mut places, send_channel, Half::send_order);
        let seqs: Vec<u32> = places.iter().map(|p| p.seq).collect();
        assert_eq!(seqs, vec![2, 0, 0, 1, 1]);
    }

    #[test]
    fn peers_sharing_a_cache_slot_keep_their_channels() {
        // Peers 1, 1 + RECENT_SLOTS, a negative peer and NONE_I32, interleaved, on two tags.
        let peers = [1, 1 + RECENT_SLOTS as i32, -1, crate::events::NONE_I32];
        let halves: Vec<Half> = (0..64).map(|k| send(peers[k % 4], (k / 4 % 2) as i32, k as i64, k)).collect();
        let mut places = vec![Place::default(); halves.len()];
        let channels = number(&halves, &mut places, send_channel, Half::send_order);
        // The same numbering by brute force: channels by first use, positions by count so far.
        let mut want_channels: Vec<ChannelCount> = Vec::new();
        for (h, p) in halves.iter().zip(&places) {
            let key = send_channel(h);
            let c = match want_channels.iter().position(|(k, _)| *k == key) {
                Some(c) => c,
                None => {
                    want_channels.push((key, 0));
                    want_channels.len() - 1
                }
            };
            assert_eq!((p.channel, p.seq), (c as u32, want_channels[c].1));
            want_channels[c].1 += 1;
        }
        assert_eq!(channels, want_channels);
        assert_eq!(channels.len(), 8);
    }

    #[test]
    fn equal_times_are_ordered_by_event() {
        let halves = [send(1, 0, 10, 7), send(1, 0, 10, 3)];
        let mut places = [Place::default(); 2];
        number(&halves, &mut places, send_channel, Half::send_order);
        assert_eq!((places[0].seq, places[1].seq), (1, 0));
    }
}
