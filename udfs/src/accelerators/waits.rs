//! Where the host waits for the device and the device for the host: `offload_waits`, after
//! CASITA's offload rules (rdietric/casita: `SyncRule`, `EventSyncRule`, `KernelExecutionRule`;
//! "Scalable critical-path analysis and optimization guidance for hybrid MPI-CUDA
//! applications").
//!
//! - **early_sync** (CASITA's early blocking wait): a synchronisation began before work it waits
//!   for had ended, so the host sat in it until the device was done. What it waits for: every
//!   stream of the rank for a context-wide synchronisation or a blocking copy, the stream it
//!   names for a stream synchronisation, and for an event synchronisation the stream its event
//!   was last recorded on (the last record of the event that ended before the synchronisation
//!   did), where only kernels launched before that record count. A kernel it waited for is one
//!   of those that ran while it did (ended after it began, began before it ended) and was
//!   launched before it ended: a kernel launched later cannot be what it waited for, whatever
//!   the device's clock says (Score-P's device timestamps can run tens of microseconds ahead of
//!   the host's, so that a kernel seems to start before its launch). As CASITA
//!   counts it, the whole call is waiting time (`wait_ns`), and the part spent while any of the
//!   kernels ran is `on_kernel_ns`; each kernel is blamed for the part of the wait while it ran
//!   (`offload_blame`, CASITA's blame of reason "host wait", whose sum is CASITA's "on compute
//!   kernels": kernels of several streams that ran at once are each blamed for the same time).
//! - **late_sync** (CASITA's late synchronisation): nothing it waits for was still running when
//!   it began; the call's time is spent for nothing.
//! - **late_launch** (the device waiting for the host): a stream sat idle from the end of its
//!   previous task until a kernel whose launch came after that end; the host queued the work
//!   late. `wait_ns` is the stream's idle time, `host_late_ns` the part before the launch.
//!
//! Kernels on one stream run one after another (the stream's order), which the search for the
//! kernels a synchronisation waited for relies on.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::error::Result;

#[cfg(test)]
use super::activity::Launch;
use super::activity::{Class, HostCall, Rank, Task};

/// One row of `offload_waits`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Wait {
    pub rank: i64,
    pub thread: i64,
    pub pattern: &'static str,
    pub region: String,
    pub start: i64,
    pub end: i64,
    pub waits_for: &'static str,
    pub stream: Option<i64>,
    pub kernels: i64,
    pub on_kernel_ns: i64,
    pub kernel: Option<String>,
    pub kernel_end: Option<i64>,
    pub launch_thread: Option<i64>,
    pub launch_ts: Option<i64>,
    pub host_late_ns: Option<i64>,
    /// The kernels an early synchronisation waited for, each with the part of the wait while it
    /// ran (`offload_blame`).
    pub blamed: Vec<Blamed>,
}

/// A kernel a synchronisation waited for.
#[derive(Debug, Clone, PartialEq)]
pub struct Blamed {
    pub stream: i64,
    pub kernel: String,
    pub start: i64,
    pub end: i64,
    pub blame_ns: i64,
}

/// The waits of one rank, by start.
pub fn waits(rank: i64, r: &Rank) -> Vec<Wait> {
    let records = records_by_event(&r.calls);
    // Each stream's kernels by start, gathered once for all the rank's synchronisations.
    let kernels: Kernels = r.streams.keys().map(|&s| (s, r.kernels(s).collect())).collect();
    let mut out: Vec<Wait> = r.calls.iter().filter_map(|c| sync_wait(rank, &kernels, &records, c)).collect();
    out.extend(late_launches(rank, r));
    out.sort_by_key(|w| (w.start, w.thread, w.end));
    out
}

/// Each event's records: (leave, enter, stream), by leave.
fn records_by_event(calls: &[HostCall]) -> HashMap<i64, Vec<(i64, i64, Option<i64>)>> {
    let mut records: HashMap<i64, Vec<(i64, i64, Option<i64>)>> = HashMap::new();
    for c in calls.iter().filter(|c| c.class == Class::Record) {
        if let Some(event) = c.event {
            records.entry(event).or_default().push((c.end, c.start, c.stream));
        }
    }
    records.values_mut().for_each(|v| v.sort_unstable());
    records
}

type Records = HashMap<i64, Vec<(i64, i64, Option<i64>)>>;

/// Each stream's kernels, by start.
type Kernels<'a> = std::collections::BTreeMap<i64, Vec<&'a Task>>;

/// The wait of a synchronisation call (None: the call is not one); a synchronisation whose
/// stream or event the trace does not give has no pattern ("unknown").
fn sync_wait(rank: i64, kernels: &Kernels, records: &Records, c: &HostCall) -> Option<Wait> {
    let waits_for = c.class.waits_for()?;
    let mut w = Wait {
        rank,
        thread: c.thread,
        pattern: "unknown",
        region: c.region.clone(),
        start: c.start,
        end: c.end,
        waits_for,
        ..Wait::default()
    };
    // The streams it waits for, and the launch before which a kernel must have been queued.
    let (streams, launched_before): (Vec<i64>, Option<i64>) = match c.class {
        Class::Stream => match c.stream {
            Some(s) => (vec![s], None),
            None => return Some(w),
        },
        Class::Event => {
            let record = c.event.and_then(|e| records.get(&e)).and_then(|v| {
                let before = v.partition_point(|(leave, _, _)| *leave <= c.end);
                before.checked_sub(1).map(|i| v[i])
            });
            match record {
                Some((_, enter, Some(s))) => (vec![s], Some(enter)),
                _ => return Some(w),
            }
        }
        _ => (kernels.keys().copied().collect(), None),
    };
    if streams.len() == 1 {
        w.stream = Some(streams[0]);
    }
    let mut last: Option<&Task> = None;
    // The parts of the call while a kernel ran, whose union is `on_kernel_ns`: kernels of
    // several streams may run at once.
    let mut during: Vec<(i64, i64)> = Vec::new();
    for s in streams {
        let Some(kernels) = kernels.get(&s) else { continue };
        let running = kernels.partition_point(|k| k.start < c.end);
        for k in kernels[..running].iter().rev() {
            if k.end <= c.start {
                break;
            }
            let limit = launched_before.unwrap_or(c.end);
            let queued_in_time = k.launch.as_ref().is_none_or(|l| l.start < limit);
            if !queued_in_time {
                continue;
            }
            let (from, to) = (c.start.max(k.start), c.end.min(k.end));
            let blame_ns = (to - from).max(0);
            w.kernels += 1;
            during.push((from, to));
            w.blamed.push(Blamed { stream: k.stream, kernel: k.name.clone(), start: k.start, end: k.end, blame_ns });
            if last.is_none_or(|l| k.end > l.end) {
                last = Some(k);
            }
        }
    }
    w.on_kernel_ns = union_ns(&mut during);
    w.pattern = if w.kernels > 0 { "early_sync" } else { "late_sync" };
    w.kernel = last.map(|k| k.name.clone());
    w.kernel_end = last.map(|k| k.end);
    Some(w)
}

/// The length of the union of `spans` (sorted here).
fn union_ns(spans: &mut [(i64, i64)]) -> i64 {
    spans.sort_unstable();
    let (mut total, mut reached) = (0, i64::MIN);
    for &(from, to) in spans.iter() {
        let from = from.max(reached);
        if to > from {
            total += to - from;
            reached = to;
        }
    }
    total
}

/// The idle times of each stream before a kernel launched after the stream's previous task
/// ended.
fn late_launches(rank: i64, r: &Rank) -> Vec<Wait> {
    let mut out = Vec::new();
    for (&stream, tasks) in &r.streams {
        let mut previous_end: Option<i64> = None;
        for t in tasks {
            if let (false, Some(prev), Some(l)) = (t.transfer, previous_end, &t.launch)
                && l.start > prev
                && t.start > prev
            {
                out.push(Wait {
                    rank,
                    thread: stream,
                    pattern: "late_launch",
                    region: t.name.clone(),
                    start: prev,
                    end: t.start,
                    waits_for: "host",
                    stream: Some(stream),
                    kernel: Some(t.name.clone()),
                    kernel_end: Some(t.end),
                    launch_thread: Some(l.thread),
                    launch_ts: Some(l.start),
                    host_late_ns: Some(l.start.min(t.start) - prev),
                    ..Wait::default()
                });
            }
            previous_end = Some(previous_end.map_or(t.end, |p| p.max(t.end)));
        }
    }
    out
}

/// The rows as a batch of `schema` (offload_waits' columns).
pub fn batch(schema: &SchemaRef, rows: &[Wait]) -> Result<RecordBatch> {
    let int = |f: &dyn Fn(&Wait) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
    let opt = |f: &dyn Fn(&Wait) -> Option<i64>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<Int64Array>()) };
    let text =
        |f: &dyn Fn(&Wait) -> Option<&str>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<StringArray>()) };
    let columns: Vec<ArrayRef> = vec![
        int(&|w| w.rank),
        int(&|w| w.thread),
        text(&|w| Some(w.pattern)),
        text(&|w| Some(w.region.as_str())),
        int(&|w| w.start),
        int(&|w| w.end),
        int(&|w| w.end - w.start),
        text(&|w| Some(w.waits_for)),
        opt(&|w| w.stream),
        opt(&|w| (w.pattern != "unknown").then_some(w.kernels)),
        opt(&|w| (w.pattern != "unknown").then_some(w.on_kernel_ns)),
        text(&|w| w.kernel.as_deref()),
        opt(&|w| w.kernel_end),
        opt(&|w| w.launch_thread),
        opt(&|w| w.launch_ts),
        opt(&|w| w.host_late_ns),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// One row per kernel an early synchronisation waited for, as a batch of `schema`
/// (offload_blame's columns).
pub fn blame_batch(schema: &SchemaRef, rows: &[Wait]) -> Result<RecordBatch> {
    let pairs: Vec<(&Wait, &Blamed)> = rows.iter().flat_map(|w| w.blamed.iter().map(move |b| (w, b))).collect();
    let int = |f: &dyn Fn(&Wait, &Blamed) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(pairs.iter().map(|(w, b)| f(w, b))))
    };
    let text = |f: &dyn for<'a> Fn(&'a Wait, &'a Blamed) -> &'a str| -> ArrayRef {
        Arc::new(pairs.iter().map(|(w, b)| Some(f(w, b))).collect::<StringArray>())
    };
    let columns: Vec<ArrayRef> = vec![
        int(&|w, _| w.rank),
        int(&|_, b| b.stream),
        text(&|_, b| &b.kernel),
        int(&|_, b| b.start),
        int(&|_, b| b.end),
        int(&|w, _| w.thread),
        text(&|w, _| &w.region),
        int(&|w, _| w.start),
        int(&|w, _| w.end),
        int(&|_, b| b.blame_ns),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(stream: i64, start: i64, end: i64, launch: i64) -> Task {
        Task {
            stream,
            device: Some(0),
            name: format!("k{start}"),
            start,
            end,
            transfer: false,
            launch: Some(Launch { thread: 0, region: "cuLaunchKernel".into(), start: launch, end: launch + 5 }),
        }
    }

    fn call(region: &str, start: i64, end: i64, stream: Option<i64>, event: Option<i64>) -> HostCall {
        HostCall {
            thread: 0,
            region: region.into(),
            start,
            end,
            class: super::super::activity::classify(region, stream.is_some()),
            stream,
            event,
        }
    }

    #[test]
    fn a_sync_before_the_kernel_ends_waits_for_it_and_one_after_waits_for_nothing() {
        let mut r = Rank::default();
        r.streams.insert(1, vec![kernel(1, 100, 300, 10), kernel(1, 500, 600, 400)]);
        r.calls =
            vec![call("cuStreamSynchronize", 200, 310, Some(1), None), call("cuCtxSynchronize", 700, 720, None, None)];
        let w = waits(0, &r);
        assert_eq!(w[0].pattern, "early_sync");
        assert_eq!((w[0].kernels, w[0].on_kernel_ns, w[0].kernel_end), (1, 100, Some(300)));
        assert_eq!(w[0].blamed[0].blame_ns, 100);
        // the stream idled from 300 until the kernel launched at 400 began at 500
        assert_eq!(w[1].pattern, "late_launch");
        assert_eq!((w[1].start, w[1].end, w[1].host_late_ns), (300, 500, Some(100)));
        assert_eq!(w[2].pattern, "late_sync");
        assert_eq!(w[2].kernels, 0);
    }

    #[test]
    fn an_event_sync_waits_only_for_kernels_launched_before_its_record() {
        let mut r = Rank::default();
        r.streams.insert(1, vec![kernel(1, 100, 300, 10), kernel(1, 300, 900, 60)]);
        r.calls =
            vec![call("cuEventRecord", 50, 55, Some(1), Some(7)), call("cuEventSynchronize", 200, 320, None, Some(7))];
        let w: Vec<Wait> = waits(0, &r).into_iter().filter(|w| w.waits_for == "event").collect();
        assert_eq!((w[0].pattern, w[0].kernels, w[0].on_kernel_ns), ("early_sync", 1, 100));
        assert_eq!(w[0].kernel.as_deref(), Some("k100"));
    }

    #[test]
    fn a_context_wide_sync_over_kernels_running_at_once_waits_at_most_its_own_time() {
        // Two streams run kernels side by side during the whole synchronisation: each kernel is
        // blamed for the 100 ns, the host waited 100 ns while kernels ran, not 200.
        let mut r = Rank::default();
        r.streams.insert(1, vec![kernel(1, 0, 300, 0)]);
        r.streams.insert(2, vec![kernel(2, 0, 300, 0)]);
        r.calls = vec![call("cuCtxSynchronize", 100, 200, None, None)];
        let w = waits(0, &r);
        assert_eq!((w[0].kernels, w[0].on_kernel_ns, w[0].end - w[0].start), (2, 100, 100));
        assert_eq!(w[0].blamed.iter().map(|b| b.blame_ns).sum::<i64>(), 200);
    }

    #[test]
    fn a_kernel_launched_after_a_sync_ended_is_not_what_it_waited_for() {
        // The device's clock runs ahead: the kernel seems to start at 100, during the copy,
        // but was launched at 400, after it.
        let mut r = Rank::default();
        r.streams.insert(1, vec![kernel(1, 100, 900, 400)]);
        r.calls = vec![call("cuMemcpyDtoH_v2", 150, 300, None, None)];
        let w = waits(0, &r);
        assert_eq!((w[0].pattern, w[0].kernels), ("late_sync", 0));
    }

    #[test]
    fn a_sync_whose_stream_is_unknown_is_kept_without_a_pattern() {
        let r = Rank { calls: vec![call("cuStreamSynchronize", 200, 310, None, None)], ..Rank::default() };
        assert_eq!(waits(0, &r)[0].pattern, "unknown");
    }
}
