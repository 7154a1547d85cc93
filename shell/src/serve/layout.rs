//! The rows of the timeline. A trace's ranks are grouped by node (as `ranks.node_index` says);
//! a folded node is one row, whose slots show the region where its ranks together spent the
//! most time (Intel Trace Analyzer's aggregated process groups); an opened node shows a row per
//! rank, and a rank whose threads (or accelerator streams) are opened a row per location.
//! A run of more than `FOLDED_ROWS` nodes starts with blocks of consecutive nodes, one row
//! each, that open into their nodes. A view's rows are given by what is opened, so the rows
//! drawn are as many as the screen shows, never as many as the trace has.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// Rows of a run whose nodes are all folded, at most: past it, consecutive nodes are
/// grouped into blocks.
pub const FOLDED_ROWS: usize = 64;

/// One location of a rank: a thread or an accelerator stream.
#[derive(Debug, Clone, Serialize)]
pub struct Location {
    pub thread: i64,
    pub kind: String,
    pub name: String,
}

/// A node and its ranks.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub name: String,
    pub ranks: Vec<i64>,
}

/// How the trace's ranks and locations are grouped.
#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    pub nodes: Vec<Node>,
    /// The locations of each rank with more than one.
    pub locations: BTreeMap<i64, Vec<Location>>,
}

/// One row of a view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub label: String,
    /// "block", "node", "rank" or "location".
    pub kind: &'static str,
    /// The block of nodes the row is in.
    pub block: usize,
    /// The node (the first node, for a block).
    pub node: usize,
    /// The rank (first rank, for a node or block).
    pub rank: i64,
    /// Ranks in the row.
    pub ranks: usize,
    /// The thread, for a location row.
    pub thread: Option<i64>,
    /// Whether the rank has locations to open (a rank row).
    pub has_locations: bool,
}

/// What a view opens: blocks and nodes by index, ranks by number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Opened {
    pub blocks: BTreeSet<usize>,
    pub nodes: BTreeSet<usize>,
    pub ranks: BTreeSet<i64>,
}

impl Opened {
    /// Parse `blocks=0`, `open=1,2` and `threads=5,6` (comma-separated, empty for none).
    pub fn parse(blocks: Option<&str>, nodes: Option<&str>, ranks: Option<&str>) -> Result<Opened, String> {
        fn list<T: std::str::FromStr + Ord>(what: &str, text: Option<&str>) -> Result<BTreeSet<T>, String> {
            text.unwrap_or("")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.trim()
                        .parse()
                        .map_err(|_| format!("{what}: expected a comma-separated list of numbers, got '{s}'"))
                })
                .collect()
        }
        Ok(Opened { blocks: list("blocks", blocks)?, nodes: list("open", nodes)?, ranks: list("threads", ranks)? })
    }
}

/// The key that sends a location to its row: (rank, thread), thread -1 for every thread of a
/// rank whose locations are not opened.
pub type RowKey = (i64, i64);

impl Layout {
    /// Nodes per block: 1 unless the run has more than `FOLDED_ROWS` nodes.
    pub fn nodes_per_block(&self) -> usize {
        self.nodes.len().div_ceil(FOLDED_ROWS).max(1)
    }

    /// The rows of a view, and for each row the keys that map to it.
    pub fn rows(&self, opened: &Opened) -> (Vec<Row>, Vec<(RowKey, usize)>) {
        let mut rows = Vec::new();
        let mut keys = Vec::new();
        let per_block = self.nodes_per_block();
        for (b, block) in self.nodes.chunks(per_block).enumerate() {
            let first = b * per_block;
            if per_block > 1 && !opened.blocks.contains(&b) {
                let row = rows.len();
                let ranks: Vec<i64> = block.iter().flat_map(|n| n.ranks.iter().copied()).collect();
                let last = &block[block.len() - 1].name;
                rows.push(Row {
                    label: format!("{}–{last} ({} ranks)", block[0].name, ranks.len()),
                    kind: "block",
                    block: b,
                    node: first,
                    rank: ranks.first().copied().unwrap_or(0),
                    ranks: ranks.len(),
                    thread: None,
                    has_locations: false,
                });
                keys.extend(ranks.iter().map(|&r| ((r, -1), row)));
                continue;
            }
            for (k, node) in block.iter().enumerate() {
                self.node_rows(first + k, b, node, opened, &mut rows, &mut keys);
            }
        }
        (rows, keys)
    }

    /// The rows of node `n` (in block `b`): one when folded, else a row per rank or location.
    fn node_rows(
        &self,
        n: usize,
        b: usize,
        node: &Node,
        opened: &Opened,
        rows: &mut Vec<Row>,
        keys: &mut Vec<(RowKey, usize)>,
    ) {
        if node.ranks.len() > 1 && !opened.nodes.contains(&n) {
            let row = rows.len();
            rows.push(Row {
                label: format!("{} ({} ranks)", node.name, node.ranks.len()),
                kind: "node",
                block: b,
                node: n,
                rank: node.ranks[0],
                ranks: node.ranks.len(),
                thread: None,
                has_locations: false,
            });
            keys.extend(node.ranks.iter().map(|&r| ((r, -1), row)));
            return;
        }
        for &rank in &node.ranks {
            match self.locations.get(&rank) {
                Some(locs) if opened.ranks.contains(&rank) => {
                    for loc in locs {
                        keys.push(((rank, loc.thread), rows.len()));
                        rows.push(Row {
                            label: format!("rank {rank} {}", loc.name),
                            kind: "location",
                            block: b,
                            node: n,
                            rank,
                            ranks: 1,
                            thread: Some(loc.thread),
                            has_locations: false,
                        });
                    }
                }
                locations => {
                    keys.push(((rank, -1), rows.len()));
                    rows.push(Row {
                        label: format!("rank {rank}"),
                        kind: "rank",
                        block: b,
                        node: n,
                        rank,
                        ranks: 1,
                        thread: None,
                        has_locations: locations.is_some(),
                    });
                }
            }
        }
    }

    /// The ranks whose locations have rows of their own in a view.
    pub fn split_ranks(&self, opened: &Opened) -> Vec<i64> {
        opened.ranks.iter().copied().filter(|r| self.locations.contains_key(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let loc = |t: i64| Location { thread: t, kind: "cpu".into(), name: format!("thread {t}") };
        Layout {
            nodes: vec![Node { name: "a".into(), ranks: vec![0, 1] }, Node { name: "b".into(), ranks: vec![2] }],
            locations: BTreeMap::from([(2, vec![loc(0), loc(1)])]),
        }
    }

    #[test]
    fn folded_nodes_are_one_row_and_opened_ones_a_row_per_rank_or_location() {
        let l = layout();
        let (rows, keys) = l.rows(&Opened::default());
        assert_eq!(rows.iter().map(|r| r.kind).collect::<Vec<_>>(), ["node", "rank"]);
        assert_eq!(keys, [((0, -1), 0), ((1, -1), 0), ((2, -1), 1)]);
        assert!(rows[1].has_locations);
        let opened = Opened::parse(None, Some("0"), Some("2")).unwrap();
        let (rows, keys) = l.rows(&opened);
        assert_eq!(rows.len(), 4);
        assert_eq!(keys, [((0, -1), 0), ((1, -1), 1), ((2, 0), 2), ((2, 1), 3)]);
        assert_eq!(l.split_ranks(&opened), [2]);
        assert!(Opened::parse(None, Some("x"), None).unwrap_err().contains("open: expected"));
    }

    #[test]
    fn many_nodes_start_as_blocks_that_open_into_their_nodes() {
        let nodes: Vec<Node> =
            (0..200).map(|n| Node { name: format!("n{n:03}"), ranks: vec![2 * n, 2 * n + 1] }).collect();
        let l = Layout { nodes, locations: BTreeMap::new() };
        assert_eq!(l.nodes_per_block(), 4);
        let (rows, keys) = l.rows(&Opened::default());
        assert_eq!(rows.len(), 50);
        assert!(rows.len() <= FOLDED_ROWS);
        assert_eq!((rows[0].label.as_str(), rows[49].ranks), ("n000–n003 (8 ranks)", 8));
        assert_eq!(keys.len(), 400, "every rank has its row");
        let (rows, _) = l.rows(&Opened::parse(Some("1"), Some("5"), None).unwrap());
        // Block 1 opened into 4 nodes, node 5 of them into its 2 ranks.
        assert_eq!(rows.len(), 49 + 3 + 2);
        assert_eq!(rows[2].kind, "rank");
        assert_eq!((rows[1].kind, rows[1].node), ("node", 4));
    }
}
