//! The rows of the timeline. A trace's ranks are grouped by node (as `ranks.node_index` says);
//! a folded node is one row, whose slots show the region where its ranks together spent the
//! most time (Intel Trace Analyzer's aggregated process groups); an opened node shows a row per
//! rank, and a rank whose threads (or accelerator streams) are opened a row per location.
//! A view's rows are given by what is opened, so the rows drawn are as many as the screen
//! shows, never as many as the trace has.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

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
    /// "node", "rank" or "location".
    pub kind: &'static str,
    pub node: usize,
    /// The rank (first rank, for a node).
    pub rank: i64,
    /// Ranks in the row.
    pub ranks: usize,
    /// The thread, for a location row.
    pub thread: Option<i64>,
    /// Whether the rank has locations to open (a rank row).
    pub has_locations: bool,
}

/// What a view opens: nodes by index, ranks by number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Opened {
    pub nodes: BTreeSet<usize>,
    pub ranks: BTreeSet<i64>,
}

impl Opened {
    /// Parse `open=1,2` and `threads=5,6` (comma-separated, empty for none).
    pub fn parse(nodes: Option<&str>, ranks: Option<&str>) -> Result<Opened, String> {
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
        Ok(Opened { nodes: list("open", nodes)?, ranks: list("threads", ranks)? })
    }
}

/// The key that sends a location to its row: (rank, thread), thread -1 for every thread of a
/// rank whose locations are not opened.
pub type RowKey = (i64, i64);

impl Layout {
    /// The rows of a view, and for each row the keys that map to it.
    pub fn rows(&self, opened: &Opened) -> (Vec<Row>, Vec<(RowKey, usize)>) {
        let mut rows = Vec::new();
        let mut keys = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if node.ranks.len() > 1 && !opened.nodes.contains(&n) {
                let row = rows.len();
                rows.push(Row {
                    label: format!("{} ({} ranks)", node.name, node.ranks.len()),
                    kind: "node",
                    node: n,
                    rank: node.ranks[0],
                    ranks: node.ranks.len(),
                    thread: None,
                    has_locations: false,
                });
                keys.extend(node.ranks.iter().map(|&r| ((r, -1), row)));
                continue;
            }
            for &rank in &node.ranks {
                let locations = self.locations.get(&rank);
                match locations {
                    Some(locs) if opened.ranks.contains(&rank) => {
                        for loc in locs {
                            keys.push(((rank, loc.thread), rows.len()));
                            rows.push(Row {
                                label: format!("rank {rank} {}", loc.name),
                                kind: "location",
                                node: n,
                                rank,
                                ranks: 1,
                                thread: Some(loc.thread),
                                has_locations: false,
                            });
                        }
                    }
                    _ => {
                        keys.push(((rank, -1), rows.len()));
                        rows.push(Row {
                            label: format!("rank {rank}"),
                            kind: "rank",
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
        (rows, keys)
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
        let opened = Opened::parse(Some("0"), Some("2")).unwrap();
        let (rows, keys) = l.rows(&opened);
        assert_eq!(rows.len(), 4);
        assert_eq!(keys, [((0, -1), 0), ((1, -1), 1), ((2, 0), 2), ((2, 1), 3)]);
        assert_eq!(l.split_ranks(&opened), [2]);
        assert!(Opened::parse(Some("x"), None).unwrap_err().contains("open: expected"));
    }
}
