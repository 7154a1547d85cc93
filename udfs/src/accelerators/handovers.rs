//! Where the critical path crosses between a rank's host threads and its accelerator streams,
//! after the dependency graph CASITA builds ("Scalable critical-path analysis and optimization
//! guidance for hybrid MPI-CUDA applications"; rdietric/casita: KernelExecutionRule's edge from
//! a launch to its kernel, SyncRule's edge from the kernel a synchronisation waited for to the
//! synchronisation's end). Walking back in time (as `critical_path` does):
//!
//! - in an early synchronisation (`offload_waits`' early_sync) the host waited for the device:
//!   the path keeps the call from the end of the last kernel it waited for, and goes on with
//!   that kernel's stream at the kernel's end;
//! - on a stream a kernel is the device's compute (`kind` device); at its start the path goes
//!   on with the host thread that launched it, at the launch's enter (CASITA's edge runs from the
//!   launch's enter to the kernel), when the launch began after the stream's previous task ended:
//!   the kernel waited for its launch. Otherwise (a tie included, as in CASITA's path) it waited
//!   for the stream, and the path stays there; a stream's time no kernel covers on the path (a
//!   copy ahead of the kernel, the queue from the launch to the start) is `kind` queue.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use datafusion::error::Result;

use super::activity;

/// An early synchronisation as the walk takes it: the call, and the end of the kernel whose
/// end released it, on its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SyncHand {
    pub start: i64,
    pub end: i64,
    pub stream: i64,
    pub kernel_end: i64,
}

/// A kernel's start as the walk takes it: when the stream's previous task ended, and the
/// launch (host thread, enter of the launch call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KernelStart {
    start: i64,
    busy_until: Option<i64>,
    launch: Option<(i64, i64)>,
}

/// The hand-overs between the host threads and streams of every rank.
#[derive(Debug, Default)]
pub(crate) struct Handovers {
    /// Per (rank, host thread), the early synchronisations by their end.
    syncs: HashMap<(i64, i64), Vec<SyncHand>>,
    /// Per (rank, stream), the kernels by their start.
    kernels: HashMap<(i64, i64), Vec<KernelStart>>,
}

impl Handovers {
    /// The hand-overs of the offload activity `batches` ([`crate::accelerators::activity`]'s view;
    /// none for a trace without streams).
    pub(crate) fn from_batches(batches: &[RecordBatch]) -> Result<Handovers> {
        let mut h = Handovers::default();
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(h);
        }
        for (&rank, r) in &activity::read(batches)? {
            for w in super::waits::waits(rank, r).iter().filter(|w| w.pattern == "early_sync") {
                if let Some(last) = w.blamed.iter().max_by_key(|b| b.end) {
                    h.syncs.entry((rank, w.thread)).or_default().push(SyncHand {
                        start: w.start,
                        end: w.end,
                        stream: last.stream,
                        kernel_end: last.end,
                    });
                }
            }
            for (&stream, tasks) in &r.streams {
                let mut busy_until: Option<i64> = None;
                let list = h.kernels.entry((rank, stream)).or_default();
                for t in tasks {
                    if !t.transfer {
                        list.push(KernelStart {
                            start: t.start,
                            busy_until,
                            launch: t.launch.as_ref().map(|l| (l.thread, l.start)),
                        });
                    }
                    busy_until = Some(busy_until.map_or(t.end, |b| b.max(t.end)));
                }
            }
        }
        for list in h.syncs.values_mut() {
            list.sort_by_key(|s| (s.end, s.start));
        }
        Ok(h)
    }

    /// Hand-overs the walk may take (its bound on steps grows by them).
    pub(crate) fn len(&self) -> usize {
        self.syncs.values().map(Vec::len).sum::<usize>() + self.kernels.values().map(Vec::len).sum::<usize>()
    }

    /// Whether thread `thread` of rank `rank` is an accelerator stream.
    pub(crate) fn is_stream(&self, rank: i64, thread: i64) -> bool {
        self.kernels.contains_key(&(rank, thread))
    }

    /// The early synchronisation of a host thread under way at the instant before `t` whose
    /// kernel ended at or after `from` and before `t`.
    pub(crate) fn sync_at(&self, rank: i64, thread: i64, t: i64, from: i64) -> Option<SyncHand> {
        let list = self.syncs.get(&(rank, thread))?;
        let k = list.partition_point(|s| s.end < t);
        list.get(k).copied().filter(|s| s.start < t && s.kernel_end >= from.max(s.start) && s.kernel_end < t)
    }

    /// Whether the walk may take an early synchronisation of a host thread within a stretch
    /// from `from` to `to` (`sync_at` of an instant in it): one under way then whose kernel
    /// ended within it.
    pub(crate) fn sync_within(&self, rank: i64, thread: i64, from: i64, to: i64) -> bool {
        let Some(list) = self.syncs.get(&(rank, thread)) else { return false };
        let k = list.partition_point(|s| s.end <= from);
        list[k..].iter().take_while(|s| s.start < to).any(|s| s.kernel_end >= from && s.kernel_end < to)
    }

    /// The host thread and instant the path goes on with at the start of the kernel that
    /// starts at `start` on a stream, when the kernel waited for its launch.
    pub(crate) fn launch_before(&self, rank: i64, stream: i64, start: i64) -> Option<(i64, i64)> {
        let list = self.kernels.get(&(rank, stream))?;
        let k = list.partition_point(|s| s.start < start);
        let kernel = list.get(k).filter(|s| s.start == start)?;
        let (thread, enter) = kernel.launch?;
        kernel.busy_until.is_none_or(|b| enter > b).then_some((thread, enter.min(start)))
    }
}
