//! A controlled logical clock, in the spirit of Scalasca's (Becker, Rabenseifner, Wolf:
//! "Timestamp synchronization for event traces of large-scale message-passing applications",
//! EuroPVM/MPI 2007). After the clock model, a receive may still precede its send (model error
//! larger than the latency). Each rank's events are visited in recording order, a rank waiting
//! at a receive until its send has been placed, and every event gets
//!
//!   c(e_i) = max( t(e_i),  c(e_{i-1}) + GAMMA * (t(e_i) - t(e_{i-1})),  c(send) + l_min )
//!
//! where t is the model-corrected time, the second term applies only while the rank runs ahead
//! of its own clock (c(e_{i-1}) > t(e_{i-1})), and the third only to a receive matched to a
//! send. A jump forward at a receive thus carries over to the rank's following events, shrinking
//! by (1 - GAMMA) of the elapsed time until the rank is back on its own clock: local intervals
//! keep at least GAMMA of their length and event order never changes. `l_min` is the smallest
//! positive transmission time among the matched messages (1 ns when there is none). Only
//! point-to-point messages are constrained (collectives are not), and there is no backward
//! amortization of the events before a jump. A cycle of receives waiting on each other (which a
//! consistent trace cannot hold) is broken at the lowest waiting event, counted as a warning.
//! Cost: O(events + messages).

use std::collections::VecDeque;

use crate::events::{EventParts, PartStream};
use crate::trace::Warnings;

/// Share of a local interval kept while a rank runs ahead of its clock.
pub const GAMMA: f64 = 0.99;

/// Shift receives forward so that every matched message runs forwards. `pairs` holds the global
/// event indices (send event, receive event) of matched messages; returns how many events moved.
pub fn apply(
    events: &mut EventParts,
    streams: &[PartStream],
    pairs: &[(usize, usize)],
    warnings: &mut Warnings,
) -> usize {
    let total = events.len();
    if total == 0 {
        return 0;
    }
    let ts_of = |events: &EventParts, g: usize, streams: &[PartStream]| {
        let s = &streams[stream_of(streams, g)];
        events.parts[s.part].ts[g - s.offset]
    };
    let l_min = pairs
        .iter()
        .map(|&(s, r)| ts_of(events, r, streams) - ts_of(events, s, streams))
        .filter(|&d| d > 0)
        .min()
        .unwrap_or(1);
    // Send of each receive event, by global receive index.
    let mut send_of: Vec<(usize, usize)> = pairs.iter().map(|&(s, r)| (r, s)).collect();
    send_of.sort_unstable();

    let n = streams.len();
    let mut next: Vec<usize> = streams.iter().map(|s| s.stream.start).collect();
    let mut last: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut waiters: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut blocked: Vec<Option<usize>> = vec![None; n];
    let mut ready: VecDeque<usize> = (0..n).collect();
    let mut new_ts: Vec<Vec<i64>> = events.parts.iter().map(|p| p.ts.clone()).collect();
    let placed = |next: &[usize], g: usize| {
        let t = stream_of(streams, g);
        g - streams[t].offset < next[t]
    };
    let mut moved = 0usize;
    let mut forced = 0i64;
    loop {
        while let Some(si) = ready.pop_front() {
            let forced_receive = forced_at(&blocked, si);
            blocked[si] = None;
            let ps = streams[si];
            let part = &events.parts[ps.part];
            while next[si] < ps.stream.end {
                let i = next[si];
                let g = ps.offset + i;
                let send = send_of.binary_search_by_key(&g, |p| p.0).ok().map(|k| send_of[k].1);
                if let Some(sg) = send
                    && !placed(&next, sg)
                    && forced_receive != Some(g)
                {
                    let t = stream_of(streams, sg);
                    waiters[t].push((sg, si));
                    blocked[si] = Some(g);
                    break;
                }
                let t = part.ts[i];
                let mut c = t;
                if let Some((t_prev, c_prev)) = last[si]
                    && c_prev > t_prev
                {
                    c = c.max(c_prev + (GAMMA * (t - t_prev) as f64).round() as i64);
                }
                if let Some(sg) = send
                    && placed(&next, sg)
                {
                    let st = stream_of(streams, sg);
                    c = c.max(new_ts[streams[st].part][sg - streams[st].offset] + l_min);
                }
                if c != t {
                    moved += 1;
                }
                new_ts[ps.part][i] = c;
                last[si] = Some((t, c));
                next[si] += 1;
            }
            let done: Vec<usize> = waiters[si].iter().filter(|w| placed(&next, w.0)).map(|w| w.1).collect();
            waiters[si].retain(|w| !placed(&next, w.0));
            ready.extend(done);
        }
        // Everything placed, or a cycle: let the lowest waiting receive go without its send.
        let Some((si, g)) = blocked.iter().enumerate().filter_map(|(s, b)| b.map(|g| (s, g))).min_by_key(|x| x.1)
        else {
            break;
        };
        forced += 1;
        for w in &mut waiters {
            w.retain(|x| x.1 != si);
        }
        blocked[si] = Some(usize::MAX - g);
        ready.push_back(si);
    }
    warnings.add_many("clc_cycle", forced, || {
        "receives waiting on each other's sends in a cycle; the controlled logical clock placed them without their send".to_string()
    });
    for (p, ts) in events.parts.iter_mut().zip(new_ts) {
        p.ts = ts;
    }
    moved
}

/// Marker of a receive let go without its send: `blocked` holds usize::MAX - g.
fn forced_at(blocked: &[Option<usize>], si: usize) -> Option<usize> {
    blocked[si].filter(|&b| b > usize::MAX / 2).map(|b| usize::MAX - b)
}

/// The stream holding global event g.
fn stream_of(streams: &[PartStream], g: usize) -> usize {
    streams.partition_point(|s| s.offset + s.stream.start <= g) - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventKind, RawEvents};

    fn events(times: &[(i32, i64)]) -> EventParts {
        let mut e = RawEvents::default();
        for &(rank, ts) in times {
            e.push(Event::new(rank, 0, ts, EventKind::Other));
        }
        EventParts::single(e)
    }

    #[test]
    fn late_receive_is_pushed_after_its_send_and_the_shift_decays() {
        // rank 0 sends at 1000 and 49_960; rank 1 receives the first at 900 (before its send)
        // and the second at 50_000 (40 ns after its send, which makes l_min 40 ns).
        let mut e = events(&[(0, 500), (0, 1000), (0, 49_960), (1, 900), (1, 1100), (1, 5000), (1, 50_000)]);
        let streams = e.streams();
        let mut w = Warnings::default();
        let moved = apply(&mut e, &streams, &[(1, 3), (2, 6)], &mut w);
        let ts = &e.parts[0].ts;
        assert_eq!(&ts[..3], &[500, 1000, 49_960], "senders keep their times");
        assert_eq!(ts[3], 1040, "receive = send + l_min");
        assert_eq!(ts[4], 1040 + 198, "200 ns later locally: 0.99 of it");
        assert_eq!(ts[5], 1238 + 3861, "the shift shrinks");
        assert_eq!(ts[6], 50_000, "back on its own clock");
        assert_eq!(moved, 3);
        assert!(w.is_empty());
    }

    #[test]
    fn waits_for_sends_of_other_ranks_and_breaks_cycles() {
        // 0 -> 1 and 1 -> 0 each received before the other is sent: a cycle.
        let mut e = events(&[(0, 100), (0, 200), (1, 100), (1, 200)]);
        let streams = e.streams();
        let pairs = [(1, 2), (3, 0)];
        let mut w = Warnings::default();
        apply(&mut e, &streams, &pairs, &mut w);
        assert_eq!(w.count("clc_cycle"), 1);
        assert_eq!(e.parts[0].ts, vec![100, 200, 201, 300]);
    }
}
