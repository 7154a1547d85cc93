//! Which region ends a run's iterations, and how many of its calls make one iteration.
//!
//! The marker is a region that every rank calls the same number of times, at least twice: a
//! collective first (the synchronisation that closes a time step in most codes), else any
//! other region; among several, the one called most often (a setup barrier called three
//! times does not beat the step's allreduce), then by name. A marker called several times a
//! step (a conjugate-gradient step has two or three allreduces) is folded into steps by the
//! period of the calls between its calls: with each stretch between two marker calls summed up
//! as a signature (its regions in order), the smallest period q with which the signatures
//! repeat (at least 90 % of the stretches equal the one q later) groups q stretches into one
//! iteration. A collective called every k steps (a convergence check) is part of every k-th
//! step, not its end: when a region every rank calls alike more often than the collective
//! closes every step by itself (the calls between two of its calls, collectives called less
//! often left out, equal the next at least 99 % of the time), its calls end the iterations,
//! the fewest-called such region, a waiting MPI call first. Collectives called less often than
//! the marker are left out of the signatures that fold its calls, wherever the marker comes
//! from. Other regions called every k steps (a checkpoint) still fold k steps into one: a
//! conjugate gradient's matrix-vector product between its two allreduces has the same shape.
//! Pipit's `detect_pattern` looks for the repeating motif of a time series with a
//! matrix profile instead; docs/guide.md compares the two.

/// A region and how often the ranks call it: by how many ranks, and the least and most calls
/// of a rank.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionCount {
    pub region: String,
    pub ranks: i64,
    pub min_calls: i64,
    pub max_calls: i64,
}

/// The collectives of MPI, blocking and non-blocking, by name.
const COLLECTIVES: &[&str] = &[
    "Allreduce",
    "Barrier",
    "Reduce",
    "Bcast",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
    "Alltoallw",
    "Gather",
    "Gatherv",
    "Scatter",
    "Scatterv",
    "Reduce_scatter",
    "Reduce_scatter_block",
    "Scan",
    "Exscan",
];

/// How strongly a region marks the end of a step, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Closing {
    Collective,
    Waiting,
    Mpi,
    Other,
}

impl Closing {
    /// The class of the region named `name`.
    pub fn of(name: &str) -> Closing {
        const WAITING: &[&str] = &[
            "MPI_Wait",
            "MPI_Waitall",
            "MPI_Waitany",
            "MPI_Waitsome",
            "MPI_Recv",
            "MPI_Mrecv",
            "MPI_Sendrecv",
            "MPI_Sendrecv_replace",
            "MPI_Probe",
            "MPI_Mprobe",
        ];
        if is_collective(name) {
            Closing::Collective
        } else if WAITING.contains(&name) {
            Closing::Waiting
        } else if name.starts_with("MPI_") {
            Closing::Mpi
        } else {
            Closing::Other
        }
    }
}

/// Whether `region` is an MPI collective (`MPI_Allreduce`, `MPI_Iallreduce`, ...).
pub fn is_collective(region: &str) -> bool {
    let Some(op) = region.strip_prefix("MPI_") else { return false };
    // The non-blocking collectives are the blocking ones' names after an I: MPI_Iallreduce.
    let blocking = op.strip_prefix('I').map(|rest| {
        let mut name = rest.to_string();
        if let Some(first) = name.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        name
    });
    COLLECTIVES.contains(&op) || blocking.is_some_and(|b| COLLECTIVES.contains(&b.as_str()))
}

/// The region that ends an iteration, of `counts` over `ranks` ranks (None: no region repeats
/// on every rank alike).
pub fn choose(counts: &[RegionCount], ranks: i64) -> Option<&RegionCount> {
    let repeated =
        |c: &&RegionCount| c.ranks == ranks && c.min_calls == c.max_calls && c.min_calls >= 2 && c.region != "NULL";
    let best = |collective: bool| {
        counts
            .iter()
            .filter(repeated)
            .filter(|c| is_collective(&c.region) == collective)
            .max_by(|a, b| a.min_calls.cmp(&b.min_calls).then_with(|| b.region.cmp(&a.region)))
    };
    best(true).or_else(|| best(false))
}

/// The regions every rank calls alike (the same number of times) more often than `than`, the
/// candidates to close every step when `than` comes only every k steps: fewest calls first,
/// then a waiting MPI call before another MPI call before any other region, then by name.
pub fn more_often(counts: &[RegionCount], ranks: i64, than: &RegionCount) -> Vec<RegionCount> {
    if !is_collective(&than.region) {
        return Vec::new();
    }
    let mut found: Vec<RegionCount> = counts
        .iter()
        .filter(|c| {
            c.ranks == ranks && c.min_calls == c.max_calls && c.min_calls > than.max_calls && c.region != "NULL"
        })
        .cloned()
        .collect();
    found.sort_by(|a, b| {
        a.min_calls
            .cmp(&b.min_calls)
            .then_with(|| Closing::of(&a.region).cmp(&Closing::of(&b.region)))
            .then_with(|| a.region.cmp(&b.region))
    });
    found
}

/// The smallest period with which `signatures` repeat (1 when none does): at least 90 % of
/// them (the first, which holds the run's setup, left out) equal the one `q` later.
pub fn period(signatures: &[u64]) -> usize {
    let n = signatures.len();
    for q in 1..=(n / 3).min(16) {
        let pairs = n.saturating_sub(1 + q);
        if pairs == 0 {
            break;
        }
        let equal = (1..n - q).filter(|&i| signatures[i] == signatures[i + q]).count();
        if equal * 10 >= pairs * 9 {
            return q;
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(region: &str, ranks: i64, min_calls: i64, max_calls: i64) -> RegionCount {
        RegionCount { region: region.into(), ranks, min_calls, max_calls }
    }

    #[test]
    fn the_step_collective_is_the_marker() {
        let counts = [
            count("main", 4, 1, 1),
            count("compute", 4, 100, 100),
            count("MPI_Barrier", 4, 3, 3),
            count("MPI_Allreduce", 4, 100, 100),
            count("MPI_Isend", 4, 200, 400),
        ];
        assert_eq!(choose(&counts, 4).map(|c| c.region.as_str()), Some("MPI_Allreduce"));
        // Without collectives, a region every rank calls alike.
        assert_eq!(choose(&counts[..2], 4).map(|c| c.region.as_str()), Some("compute"));
        // A region not every rank calls is no marker.
        assert_eq!(choose(&[count("compute", 3, 100, 100)], 4), None);
        assert!(is_collective("MPI_Iallreduce") && is_collective("MPI_Bcast") && !is_collective("MPI_Isend"));
    }

    #[test]
    fn a_marker_called_twice_a_step_folds_in_pairs() {
        let setup = [7u64];
        let cg: Vec<u64> = setup.iter().copied().chain((0..50).flat_map(|_| [1u64, 2])).collect();
        assert_eq!(period(&cg), 2);
        let plain: Vec<u64> = setup.iter().copied().chain(std::iter::repeat_n(1u64, 99)).collect();
        assert_eq!(period(&plain), 1);
        // A change of the calls from step 40 on is no other period.
        let changed: Vec<u64> = (0..100).map(|i| if i < 40 { 1 } else { 3 }).collect();
        assert_eq!(period(&changed), 1);
        assert_eq!(period(&[5, 6]), 1);
    }
}
