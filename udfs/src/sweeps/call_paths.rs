//! Call paths: the chain of regions from a rank's outermost call down to a call
//! (`main/solve/MPI_Waitall`), as Scalasca and Cube report every metric, interned once per
//! distinct path. `call_tree` builds them from each call's parent; the analyses that sweep a
//! rank's time (`critical_path`, `delay_costs`, and `wait_states` for the call a wait is in)
//! build them from the nesting of the calls in time, which gives the same paths for the calls
//! of one thread.

use std::collections::HashMap;

use crate::sweeps::call_sweep::{Call, Names, sweep_tagged};

/// What a call path continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Up {
    /// Nothing: an outermost call.
    Root,
    /// A call outside the relation.
    Outside,
    Path(u32),
}

/// The distinct call paths: text, depth and leaf region of each, by id.
#[derive(Debug, Default)]
pub(crate) struct Paths {
    pub text: Vec<String>,
    pub depth: Vec<i32>,
    /// The leaf region's name id.
    pub leaf: Vec<u32>,
    /// The paths that continue the root (slot 0) and each path (slot id + 1), as (region, id):
    /// a rank's sweep looks up every call's path, and a parent has few children, so a short
    /// list is searched faster than a hash map is hashed.
    children: Vec<Vec<(u32, u32)>>,
    /// The paths that start outside the relation, by region.
    outside: HashMap<u32, u32>,
    /// Bytes of the paths' text.
    pub text_bytes: usize,
}

impl Paths {
    /// Bytes held: the paths' text and a slot of each.
    pub fn held_bytes(&self) -> usize {
        self.text_bytes + 64 * self.text.len()
    }

    /// The id of the path that continues `up` with region `region` (a name id of `names`).
    pub fn id(&mut self, up: Up, region: u32, names: &Names) -> u32 {
        let slot = match up {
            Up::Root => Some(0),
            Up::Path(p) => Some(p as usize + 1),
            Up::Outside => None,
        };
        let known = match slot {
            Some(k) => self.children.get(k).and_then(|c| c.iter().find(|(r, _)| *r == region).map(|(_, id)| *id)),
            None => self.outside.get(&region).copied(),
        };
        if let Some(id) = known {
            return id;
        }
        let name = &names.names[region as usize];
        let (text, depth) = match up {
            Up::Root => (name.clone(), 0),
            Up::Outside => (format!(".../{name}"), 1),
            Up::Path(p) => (format!("{}/{name}", self.text[p as usize]), self.depth[p as usize] + 1),
        };
        let id = self.text.len() as u32;
        self.text_bytes += text.len();
        self.text.push(text);
        self.depth.push(depth);
        self.leaf.push(region);
        match slot {
            Some(k) => {
                if self.children.len() <= k {
                    self.children.resize_with(k + 1, Vec::new);
                }
                self.children[k].push((region, id));
            }
            None => {
                self.outside.insert(region, id);
            }
        }
        id
    }
}

/// `call_sweep::sweep` with each stretch's call path: `emit(region, path, from, to)` for every
/// stretch of a stream's time that one call is the innermost open call of, the path an id of
/// `paths` (the calls' regions are name ids of `names`). A stream's outermost calls continue
/// the path `root(call)` gives (a worker thread's continue its master's where the team was
/// forked; `Up::Root` otherwise); `each(path)` hears every call's path in the order of `calls`.
pub(crate) fn sweep_paths_under(
    calls: &[Call],
    names: &Names,
    paths: &mut Paths,
    mut root: impl FnMut(&Call) -> Up,
    mut each: impl FnMut(u32),
    mut emit: impl FnMut(u32, u32, i64, i64),
) {
    sweep_tagged(
        calls,
        |up, call| {
            let id = paths.id(up.map_or_else(|| root(call), Up::Path), call.region, names);
            each(id);
            id
        },
        |call, path, from, to| emit(call.region, path, from, to),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_give_their_paths_and_siblings_share_one() {
        let mut names = Names::default();
        let (main, solve, wait) = (names.id("main"), names.id("solve"), names.id("MPI_Wait"));
        let call = |start, end, region| Call { start, end, region };
        let calls = [call(0, 100, main), call(10, 50, solve), call(20, 30, wait), call(60, 70, wait)];
        let mut paths = Paths::default();
        let mut seen = Vec::new();
        sweep_paths_under(&calls, &names, &mut paths, |_| Up::Root, |_| {}, |_, p, from, to| seen.push((p, from, to)));
        let text: Vec<(&str, i64, i64)> =
            seen.iter().map(|&(p, a, b)| (paths.text[p as usize].as_str(), a, b)).collect();
        assert_eq!(
            text,
            [
                ("main", 0, 10),
                ("main/solve", 10, 20),
                ("main/solve/MPI_Wait", 20, 30),
                ("main/solve", 30, 50),
                ("main", 50, 60),
                ("main/MPI_Wait", 60, 70),
                ("main", 70, 100),
            ]
        );
        assert_eq!(paths.text.len(), 4);
        assert_eq!(paths.depth, [0, 1, 2, 1]);
    }
}
