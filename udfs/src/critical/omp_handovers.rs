//! Where the critical path crosses from one thread of a rank to another, after the hybrid
//! critical-path analysis of Scalasca's scout.hyb (its CriticalPath.pattern: the OMP_BARRIER
//! and OMP_MGMT_FORK steps of the backward replay, with the fork and join times that its time
//! maps give to the parallel region). Walking back in time:
//!
//! - at an OpenMP barrier (explicit or implicit) a thread that waited there hands the path to
//!   the thread that entered last, at that enter: the waiting thread keeps the barrier from
//!   the last enter to its leave (the barrier's own time once all had come), the last thread
//!   none of its barrier; on the path through the last thread's barrier it stays there;
//! - at the start of a parallel region every member hands the path to the master at the fork:
//!   the time from the fork to the member's enter is the member's, in the parallel region's
//!   call path;
//! - the master's time from its leave of a parallel region to the join is in the parallel
//!   region's call path too.
//!
//! The threads' waits for each other are given with them (`OmpWait`), for the delay costs.
//!
//! Each is marked as a stretch of the thread whose `hand` is the thread the path goes on with
//! at the stretch's start ([`crate::critical`] walks them); it takes the place of the stretches it
//! covers (the master's enclosing region before the fork and after the join, a worker's idle
//! time, the barrier after the last enter). Of several threads entering a barrier last at the
//! same instant, the highest takes the path (Scalasca hands it to each of them).

use crate::sweeps::stretches::Stretch;
use std::collections::HashMap;

use crate::waits::openmp::{Constructs, Idleness, Instances, MemberBarrier, ThreadCalls, team_barriers};

/// A wait of one thread for another of its rank, as the delay costs trace it back: a member
/// waiting at a barrier for the last to enter (`barrier`), or a team thread idle while the
/// master runs serially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OmpWait {
    /// The thread that waited (with the `threads` - 1 threads after it, which waited alike:
    /// the idle threads of a serial run), and the thread it waited for.
    pub thread: i64,
    pub threads: u32,
    pub delayer: i64,
    /// The waiting: from `start` (the waiter's barrier enter, after the tasks it ran there) to
    /// `end` (the last enter).
    pub start: i64,
    pub end: i64,
    /// When the waiter and the thread waited for last synchronised (Scalasca's previous OpenMP
    /// synchronisation point): the leave of their previous barrier in the parallel region, else
    /// the fork; for idleness the start of the serial run.
    pub since: (i64, i64),
    /// The waiter's call path there.
    pub path: u32,
    pub barrier: bool,
}

/// Mark the hand-overs of a rank's `threads` (their stretches swept, each thread's calls'
/// paths known) in its parallel regions' `team`; gives the threads' waits for each other
/// (`OmpWait`): at barriers, less the tasks run inside, as `wait_states` counts them, and
/// idleness while the master runs serially.
pub(crate) fn mark_handovers(threads: &mut [ThreadCalls], team: &Instances, constructs: &Constructs) -> Vec<OmpWait> {
    let mut waited = Vec::new();
    // Each member's previous synchronisation in its parallel region: the fork, then each
    // barrier's leave.
    let mut previous: HashMap<(usize, i64), i64> = HashMap::new();
    let mut marks: Vec<Vec<Stretch>> = vec![Vec::new(); threads.len()];
    for (&k, list) in &team.members {
        let (fork, master) = team.forks[k];
        let Ok(hand) = u32::try_from(master) else { continue };
        for &(ti, ci) in list {
            let (c, path) = (threads[ti].calls[ci], threads[ti].call_paths[ci]);
            let mark = |from, to| Stretch { from, to, region: c.region, path, call_start: None, hand: Some(hand) };
            if c.start > fork {
                marks[ti].push(mark(fork, c.start));
            }
            if threads[ti].thread == master
                && let Some(join) = team.join_after(c.end)
            {
                marks[ti].push(mark(c.end, join));
            }
        }
    }
    team_barriers(threads, &team.members, &|c| constructs.of(c), |k, barrier| {
        let Some(last) = MemberBarrier::last(barrier).copied() else { return };
        let fork = team.forks[k].0;
        let since = |previous: &HashMap<(usize, i64), i64>, thread| previous.get(&(k, thread)).copied().unwrap_or(fork);
        for m in barrier.iter().filter(|m| last.enter - m.enter - m.tasks > 0) {
            waited.push(OmpWait {
                thread: m.thread,
                threads: 1,
                delayer: last.thread,
                start: m.enter + m.tasks,
                end: last.enter,
                since: (since(&previous, m.thread), since(&previous, last.thread)),
                path: m.path,
                barrier: true,
            });
        }
        for m in barrier {
            previous.insert((k, m.thread), m.leave);
        }
        let Ok(hand) = u32::try_from(last.thread) else { return };
        // Each member's barrier once the last had come: the last's own, unless it ran tasks
        // there (they are walked as they are), goes on with itself.
        for m in barrier.iter().filter(|m| m.leave > last.enter && (m.thread != last.thread || m.tasks == 0)) {
            let from = last.enter.max(m.enter);
            marks[m.at].push(Stretch {
                from,
                to: m.leave,
                region: m.region,
                path: m.path,
                call_start: None,
                hand: Some(hand),
            });
        }
    });
    if let Some(idle) = Idleness::of(threads, team) {
        // The idle threads of a serial run wait alike: one wait for each run of consecutive
        // threads (a run has millions of them at thousands of ranks).
        let mut runs: Vec<(i64, u32)> = Vec::new();
        for &t in &idle.team {
            match runs.last_mut() {
                Some((first, n)) if *first + i64::from(*n) == t => *n += 1,
                _ => runs.push((t, 1)),
            }
        }
        for &(a, b, path) in &idle.serial {
            for &(thread, threads) in &runs {
                let (start, end, since, delayer) = (a, b, (a, a), idle.master);
                waited.push(OmpWait { thread, threads, delayer, start, end, since, path, barrier: false });
            }
        }
    }
    for (th, mut list) in threads.iter_mut().zip(marks) {
        if !list.is_empty() {
            list.sort_unstable_by_key(|s| (s.from, s.to));
            th.stretches = overlaid(&th.stretches, &list);
        }
    }
    waited
}

/// `list` with `marks` (in time order) in place of what they cover; a mark that overlaps an
/// earlier one is cut to begin after it.
fn overlaid(list: &[Stretch], marks: &[Stretch]) -> Vec<Stretch> {
    let mut out = Vec::with_capacity(list.len() + 2 * marks.len());
    let mut marks = marks.iter().copied().peekable();
    let mut at = i64::MIN;
    let put = |out: &mut Vec<Stretch>, s: Stretch, at: &mut i64| {
        let from = s.from.max(*at);
        if s.to > from {
            out.push(Stretch { from, ..s });
            *at = s.to;
        }
    };
    for s in list {
        let mut from = s.from.max(at);
        while from < s.to {
            match marks.peek().copied() {
                Some(m) if m.from < s.to => {
                    if m.from > from {
                        put(&mut out, Stretch { from, to: m.from, ..*s }, &mut at);
                    }
                    put(&mut out, m, &mut at);
                    marks.next();
                    from = from.max(at);
                }
                _ => {
                    put(&mut out, Stretch { from, ..*s }, &mut at);
                    from = s.to;
                }
            }
        }
    }
    for m in marks {
        put(&mut out, m, &mut at);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(from: i64, to: i64, region: u32, hand: Option<u32>) -> Stretch {
        Stretch { from, to, region, path: region, call_start: None, hand }
    }

    fn spans(list: &[Stretch]) -> Vec<(i64, i64, u32, Option<u32>)> {
        list.iter().map(|s| (s.from, s.to, s.region, s.hand)).collect()
    }

    #[test]
    fn marks_take_the_place_of_what_they_cover_and_fill_gaps() {
        // main 0-100, parallel 100-200 (barrier 150-200), main 200-300; a fork mark 80-100, a
        // barrier mark 170-200, a join mark 200-220, and a mark after the last stretch.
        let list = [s(0, 100, 1, None), s(100, 150, 2, None), s(150, 200, 3, None), s(200, 300, 1, None)];
        let marks = [s(80, 100, 2, Some(0)), s(170, 200, 3, Some(1)), s(200, 220, 2, Some(0)), s(350, 360, 2, Some(0))];
        assert_eq!(
            spans(&overlaid(&list, &marks)),
            [
                (0, 80, 1, None),
                (80, 100, 2, Some(0)),
                (100, 150, 2, None),
                (150, 170, 3, None),
                (170, 200, 3, Some(1)),
                (200, 220, 2, Some(0)),
                (220, 300, 1, None),
                (350, 360, 2, Some(0))
            ]
        );
        // A worker with no stretch before its first parallel region: the fork mark stands alone;
        // a mark over several stretches replaces them all.
        let list = [s(50, 60, 2, None), s(60, 70, 4, None), s(70, 90, 2, None)];
        let marks = [s(10, 50, 2, Some(0)), s(55, 75, 9, Some(1))];
        assert_eq!(
            spans(&overlaid(&list, &marks)),
            [(10, 50, 2, Some(0)), (50, 55, 2, None), (55, 75, 9, Some(1)), (75, 90, 2, None)]
        );
        assert_eq!(spans(&overlaid(&list, &[])), spans(&list));
    }
}
