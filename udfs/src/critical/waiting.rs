//! Each rank's waiting, for the critical-path profile's mean time not waiting per call path
//! (Scalasca leaves the wait states out of it): the intervals of the rank's MPI waits,
//! gathered beyond memory as the waits are found ([`crate::external_sort`]: a run of at most a
//! sixteenth of the budget held, the rest in a scratch file, 24 bytes a wait) and read back
//! rank by rank as the calls are swept in rank order, each rank's merged into disjoint
//! intervals in time order. Held whole, they took 16 bytes a wait and more for the lists'
//! room (27 M waits at 1 B events), all of it while the walk's waits were held too.

use datafusion::common::exec_err;
use datafusion::error::Result;

use crate::external_sort::{ExternalSort, Record, Sorted};

/// One wait's interval on its rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval {
    rank: i64,
    start: i64,
    end: i64,
}

impl Record for Interval {
    const BYTES: usize = 24;
    type Key = (i64, i64, i64);

    fn key(&self) -> Self::Key {
        (self.rank, self.start, self.end)
    }

    fn encode(&self, out: &mut [u8]) -> Result<()> {
        for (i, v) in [self.rank, self.start, self.end].into_iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    fn decode(b: &[u8]) -> Self {
        let at = |i: usize| i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Interval { rank: at(0), start: at(1), end: at(2) }
    }
}

/// The run's waiting, gathered, then read rank by rank.
pub(crate) enum Waiting {
    Gathering(ExternalSort<Interval>),
    Sorted { intervals: Sorted<Interval>, last: Option<i64> },
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Waiting::Gathering(sort) => f.debug_tuple("Gathering").field(sort).finish(),
            Waiting::Sorted { last, .. } => f.debug_struct("Sorted").field("last", last).finish_non_exhaustive(),
        }
    }
}

impl Waiting {
    /// Waiting gathered in runs of at most `run_bytes`.
    pub(crate) fn new(run_bytes: usize) -> Waiting {
        Waiting::Gathering(ExternalSort::new("critical_path_profile", run_bytes))
    }

    /// `rank` waited from `start` to `end`.
    pub(crate) fn push(&mut self, rank: i64, start: i64, end: i64) -> Result<()> {
        match self {
            Waiting::Gathering(sort) => sort.push(Interval { rank, start, end }),
            Waiting::Sorted { .. } => exec_err!("critical_path_profile: a wait was added after the waiting was read"),
        }
    }

    /// Every wait has been added: the waiting is read from now on.
    pub(crate) fn seal(&mut self) -> Result<()> {
        if let Waiting::Gathering(sort) = self {
            let sort = std::mem::replace(sort, ExternalSort::new("critical_path_profile", 1));
            *self = Waiting::Sorted { intervals: sort.sorted()?, last: None };
        }
        Ok(())
    }

    /// `rank`'s waiting as disjoint intervals in time order. Ranks are asked in increasing
    /// order, each once: the waiting of ranks passed over is let go.
    pub(crate) fn of_rank(&mut self, rank: i64) -> Result<Vec<(i64, i64)>> {
        let Waiting::Sorted { intervals, last } = self else {
            return exec_err!("critical_path_profile: the waiting was read before every wait was added");
        };
        if last.is_some_and(|l| l >= rank) {
            return exec_err!(
                "critical_path_profile: the calls of rank {rank} came after those of rank {}",
                last.unwrap_or(rank)
            );
        }
        *last = Some(rank);
        let mut out: Vec<(i64, i64)> = Vec::new();
        while let Some(i) = intervals.peek()? {
            if i.rank > rank {
                break;
            }
            let i = intervals.next()?.expect("peeked");
            if i.rank < rank {
                continue;
            }
            match out.last_mut() {
                Some(prev) if i.start <= prev.1 => prev.1 = prev.1.max(i.end),
                _ => out.push((i.start, i.end)),
            }
        }
        Ok(out)
    }

    pub(crate) fn held_bytes(&self) -> usize {
        match self {
            Waiting::Gathering(sort) => sort.held_bytes(),
            Waiting::Sorted { intervals, .. } => intervals.held_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ranks_waiting_comes_merged_in_rank_order_from_the_runs() {
        // Runs of ten intervals: the waiting goes through the scratch file.
        let mut w = Waiting::new(10 * Interval::BYTES);
        for (rank, start, end) in
            [(3, 50, 60), (1, 10, 20), (3, 5, 8), (1, 15, 30), (2, 0, 1), (1, 40, 45), (3, 55, 70)]
        {
            w.push(rank, start, end).unwrap();
        }
        for k in 0..40 {
            w.push(5, 100 + 10 * k, 105 + 10 * k).unwrap();
        }
        w.seal().unwrap();
        assert_eq!(w.of_rank(1).unwrap(), [(10, 30), (40, 45)]);
        // Rank 2 is passed over; rank 4 has none.
        assert_eq!(w.of_rank(3).unwrap(), [(5, 8), (50, 70)]);
        assert_eq!(w.of_rank(4).unwrap(), []);
        assert_eq!(w.of_rank(5).unwrap().len(), 40);
        assert!(w.of_rank(5).is_err(), "a rank asked twice");
        assert!(w.push(6, 0, 1).is_err());
    }
}
