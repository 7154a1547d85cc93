//! Who talks to whom in a generated trace, and where ranks run. Patterns: `stencil2d` (a
//! near-square px x py grid, halo exchange with the 4 neighbours, no wrap-around), `ring`
//! (each rank sends to the next), `alltoall` (every ordered pair), `master-worker` (rank 0
//! sends work to every other rank and receives a result). Placement is block-wise (ranks
//! 0..K-1 on node 0, ...). `--bad-mapping` puts neighbours on different nodes: stencil rank
//! (x, y) goes to node (x + y) mod nodes (a diagonal colouring: every grid neighbour is on
//! another node), other patterns go round-robin (rank r to node r mod nodes).

use serde::{Deserialize, Serialize};

/// Communication pattern of a generated trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    Stencil2d,
    Ring,
    Alltoall,
    MasterWorker,
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stencil2d" => Ok(Pattern::Stencil2d),
            "ring" => Ok(Pattern::Ring),
            "alltoall" => Ok(Pattern::Alltoall),
            "master-worker" => Ok(Pattern::MasterWorker),
            _ => Err(crate::suggest::did_you_mean(
                format!("pattern must be stencil2d, ring, alltoall or master-worker; got '{s}'"),
                s,
                ["stencil2d", "ring", "alltoall", "master-worker"],
            )),
        }
    }
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Stencil2d => "stencil2d",
            Pattern::Ring => "ring",
            Pattern::Alltoall => "alltoall",
            Pattern::MasterWorker => "master-worker",
        }
    }
}

/// A directed channel of the pattern: `src` sends `size_factor` x the base size to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub src: i32,
    pub dst: i32,
    pub size_factor: i64,
}

/// The pattern's channels, with per-rank lists of outgoing and incoming edge indices.
#[derive(Debug, Clone)]
pub struct Topology {
    pub edges: Vec<Edge>,
    pub outgoing: Vec<Vec<usize>>,
    pub incoming: Vec<Vec<usize>>,
}

/// The px x py grid closest to square with px * py = ranks.
pub fn grid(ranks: i32) -> (i32, i32) {
    let mut px = (f64::from(ranks).sqrt()) as i32;
    while px > 1 && ranks % px != 0 {
        px -= 1;
    }
    (px.max(1), ranks / px.max(1))
}

/// How many channels `pattern` has on `ranks` ranks, counted without building them (an
/// all-to-all on 65,536 ranks has 4.3 billion).
pub fn edge_count(pattern: Pattern, ranks: i32) -> u64 {
    let n = u64::from(ranks.max(0) as u32);
    match pattern {
        Pattern::Stencil2d => {
            let (px, py) = grid(ranks.max(1));
            let (px, py) = (u64::from(px as u32), u64::from(py as u32));
            // Each of the py rows has px - 1 links, each of the px columns py - 1; both ways.
            2 * (py * px.saturating_sub(1) + px * py.saturating_sub(1))
        }
        Pattern::Ring if n > 1 => n,
        Pattern::Ring => 0,
        Pattern::Alltoall => n * n.saturating_sub(1),
        Pattern::MasterWorker => 2 * n.saturating_sub(1),
    }
}

impl Topology {
    pub fn new(pattern: Pattern, ranks: i32) -> Self {
        let mut edges = Vec::new();
        match pattern {
            Pattern::Stencil2d => {
                let (px, py) = grid(ranks);
                for r in 0..ranks {
                    let (x, y) = (r % px, r / px);
                    let mut add = |nx: i32, ny: i32, f: i64| {
                        if (0..px).contains(&nx) && (0..py).contains(&ny) {
                            edges.push(Edge { src: r, dst: ny * px + nx, size_factor: f });
                        }
                    };
                    add(x - 1, y, 1);
                    add(x + 1, y, 1);
                    add(x, y - 1, 2);
                    add(x, y + 1, 2);
                }
            }
            Pattern::Ring => {
                if ranks > 1 {
                    edges.extend((0..ranks).map(|r| Edge { src: r, dst: (r + 1) % ranks, size_factor: 1 }));
                }
            }
            Pattern::Alltoall => {
                for s in 0..ranks {
                    edges.extend((0..ranks).filter(|d| *d != s).map(|d| Edge { src: s, dst: d, size_factor: 1 }));
                }
            }
            Pattern::MasterWorker => {
                edges.extend((1..ranks).map(|w| Edge { src: 0, dst: w, size_factor: 4 }));
                edges.extend((1..ranks).map(|w| Edge { src: w, dst: 0, size_factor: 1 }));
            }
        }
        let n = ranks as usize;
        let mut outgoing = vec![Vec::new(); n];
        let mut incoming = vec![Vec::new(); n];
        for (i, e) in edges.iter().enumerate() {
            outgoing[e.src as usize].push(i);
            incoming[e.dst as usize].push(i);
        }
        Topology { edges, outgoing, incoming }
    }
}

/// Node index of every rank: block placement, or neighbours apart when `bad_mapping`.
pub fn placement(pattern: Pattern, ranks: i32, ranks_per_node: i32, bad_mapping: bool) -> Vec<i32> {
    let nodes = ((i64::from(ranks) + i64::from(ranks_per_node) - 1) / i64::from(ranks_per_node).max(1)) as i32;
    let (px, _) = grid(ranks);
    (0..ranks)
        .map(|r| match (bad_mapping, pattern) {
            (false, _) => r / ranks_per_node,
            (true, Pattern::Stencil2d) => (r % px + r / px) % nodes,
            (true, _) => r % nodes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_larger_than_the_run() {
        assert_eq!(placement(Pattern::Ring, 4, i32::MAX, false), [0, 0, 0, 0]);
        assert_eq!(placement(Pattern::Stencil2d, 4, i32::MAX, true), [0, 0, 0, 0]);
    }

    #[test]
    fn edges_are_counted_as_built() {
        for pattern in [Pattern::Stencil2d, Pattern::Ring, Pattern::Alltoall, Pattern::MasterWorker] {
            for ranks in [1, 2, 7, 12, 16, 64, 100] {
                assert_eq!(
                    edge_count(pattern, ranks),
                    Topology::new(pattern, ranks).edges.len() as u64,
                    "{pattern:?} {ranks}"
                );
            }
        }
        assert_eq!(edge_count(Pattern::Alltoall, 65536), 65536 * 65535);
    }

    #[test]
    fn stencil_grid_and_degrees() {
        assert_eq!(grid(64), (8, 8));
        assert_eq!(grid(12), (3, 4));
        assert_eq!(grid(7), (1, 7));
        let t = Topology::new(Pattern::Stencil2d, 16);
        assert_eq!(t.outgoing[5].len(), 4);
        assert_eq!(t.outgoing[0].len(), 2);
        assert_eq!(t.edges.len(), 48);
    }

    #[test]
    fn bad_mapping_separates_neighbours() {
        let block = placement(Pattern::Ring, 8, 4, false);
        let bad = placement(Pattern::Ring, 8, 4, true);
        assert_eq!(block, vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(bad, vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert!((0..7).all(|r| bad[r] != bad[r + 1]));
        let t = Topology::new(Pattern::Stencil2d, 16);
        let bad = placement(Pattern::Stencil2d, 16, 4, true);
        assert!(t.edges.iter().all(|e| bad[e.src as usize] != bad[e.dst as usize]));
        for node in 0..4 {
            assert_eq!(bad.iter().filter(|n| **n == node).count(), 4);
        }
    }
}
