//! Every rank's time cut into stretches of its innermost region, the unit the critical path
//! walks and the delay costs compare (after Scalasca's analyses, which attribute time to call
//! paths the same way): the sweep of `call_tree` and `time_profile` (the profiles') over one
//! thread's calls, with each stretch's call path ([`crate::sweeps::call_paths`]), the time no region
//! covers as stretches of their own (the thread's own work), and the MPI stretches that touch
//! marked as one call. `wait_states` cuts every thread of a rank (for its OpenMP waits); the
//! critical path and the delay costs cut every thread, with the OpenMP hand-overs between them
//! marked.

use crate::sweeps::call_paths::{Paths, Up, sweep_paths_under};
use crate::sweeps::call_sweep::Names;

/// One stretch of a rank's time with one innermost region (an index past the region names:
/// time no region covers, the rank's own work).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stretch {
    pub from: i64,
    pub to: i64,
    pub region: u32,
    /// The call path (an id of the run's `Paths`; `NO_PATH` for time no region covers).
    pub path: u32,
    /// Start of the MPI call (run of MPI stretches) this stretch belongs to, if MPI.
    pub call_start: Option<i64>,
    /// The thread of the rank the critical path goes on with at this stretch's start: an
    /// OpenMP hand-over (the critical path's), never on an MPI stretch.
    pub hand: Option<u32>,
}

/// The path of the stretches no region covers.
pub(crate) const NO_PATH: u32 = u32::MAX;

/// The region of the stretches no region covers (`region_name` None).
pub(crate) const UNCOVERED: u32 = u32::MAX;

/// The name of region `region` of `names`; None for the stretches no region covers.
pub(crate) fn region_name(names: &[String], region: u32) -> Option<&str> {
    names.get(region as usize).map(String::as_str)
}

/// The text of path `path` of `paths`; None for the stretches no region covers.
pub(crate) fn path_name(paths: &Paths, path: u32) -> Option<&str> {
    paths.text.get(path as usize).map(String::as_str)
}

/// The stretches of one thread's calls (in start order, enclosing calls first): time no
/// region covers between calls is a stretch of its own (`UNCOVERED`, `NO_PATH`), and the MPI
/// stretches that touch form one call (`call_start`). The outermost calls continue the path
/// `root(call)` gives ([`crate::sweeps::call_paths::sweep_paths_under`]); `each(path)` is told every
/// call's path in order.
pub(crate) fn thread_stretches_under(
    calls: &[crate::sweeps::call_sweep::Call],
    names: &Names,
    paths: &mut Paths,
    root: impl FnMut(&crate::sweeps::call_sweep::Call) -> Up,
    each: impl FnMut(u32),
) -> Vec<Stretch> {
    let mut list: Vec<Stretch> = Vec::new();
    sweep_paths_under(calls, names, paths, root, each, |region, path, from, to| {
        if to > from {
            if let Some(last) = list.last()
                && last.to < from
            {
                list.push(Stretch {
                    from: last.to,
                    to: from,
                    region: UNCOVERED,
                    path: NO_PATH,
                    call_start: None,
                    hand: None,
                });
            }
            list.push(Stretch { from, to, region, path, call_start: None, hand: None });
        }
    });
    let is_mpi = |region: u32| names.names.get(region as usize).is_some_and(|n| n.starts_with("MPI_"));
    let mut start = None;
    let mut prev_end = i64::MIN;
    for s in &mut list {
        if is_mpi(s.region) {
            if start.is_none() || s.from != prev_end {
                start = Some(s.from);
            }
            s.call_start = start;
        } else {
            start = None;
        }
        prev_end = s.to;
    }
    list
}
