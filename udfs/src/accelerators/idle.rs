//! How busy the devices were: `device_idle` gives the stretches in which a rank's device ran
//! nothing, after CASITA's device idle statistics (rdietric/casita: the "Idle device" and
//! "Compute idle device" of its summary, counted over the offload interval, from the rank's
//! first call that acts on the device's streams, a launch, a copy, a synchronisation or an event
//! record, to its last): with `busy => 'any'` a kernel or a transfer on any of the
//! device's streams keeps it busy, with `busy => 'kernels'` only a kernel does. Each stretch
//! names the task that ended it and, for a kernel, the launch that queued it: when the launch
//! came after the device fell idle, the host was late (`host_late_ns`; CASITA blames such idle
//! time on the host's work before the launch). `gpu_utilisation` gives each stream's kernel and
//! transfer time per slot of the run, for `\chart` and the report.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use datafusion::error::Result;

use super::activity::{Rank, Task};

/// One idle stretch of a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Idle {
    pub rank: i64,
    pub device: Option<i64>,
    pub start: i64,
    pub end: i64,
    /// The task that ended it (None: the offload interval ended), its stream, and its launch.
    pub ended_by: Option<String>,
    pub stream: Option<i64>,
    pub launch: Option<(i64, i64)>,
}

/// The idle stretches of every device of rank `rank`, by device and start; `kernels_only`: a
/// transfer does not keep the device busy.
pub fn idle(rank: i64, r: &Rank, kernels_only: bool) -> Vec<Idle> {
    let Some((from, to)) = r.interval() else { return Vec::new() };
    let mut devices: BTreeMap<Option<i64>, Vec<&Task>> = BTreeMap::new();
    for t in r.streams.values().flatten().filter(|t| !(kernels_only && t.transfer)) {
        devices.entry(t.device).or_default().push(t);
    }
    if devices.is_empty() {
        // Calls to the API but no task: the device idled throughout.
        return vec![Idle { rank, device: None, start: from, end: to, ended_by: None, stream: None, launch: None }];
    }
    let mut out = Vec::new();
    for (device, mut tasks) in devices {
        tasks.sort_by_key(|t| (t.start, t.end));
        let mut busy_until = from;
        for t in tasks {
            if t.start > busy_until && busy_until < to {
                out.push(Idle {
                    rank,
                    device,
                    start: busy_until,
                    end: t.start.min(to),
                    ended_by: Some(t.name.clone()),
                    stream: Some(t.stream),
                    launch: t.launch.as_ref().map(|l| (l.thread, l.start)),
                });
            }
            busy_until = busy_until.max(t.end);
        }
        if busy_until < to {
            out.push(Idle { rank, device, start: busy_until, end: to, ended_by: None, stream: None, launch: None });
        }
    }
    out
}

/// The rows as a batch of `schema` (device_idle's columns).
pub fn idle_batch(schema: &SchemaRef, rows: &[Idle]) -> Result<RecordBatch> {
    let late = |i: &Idle| i.launch.map(|(_, ts)| (ts.min(i.end) - i.start).max(0));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|i| i.rank))),
        Arc::new(rows.iter().map(|i| i.device).collect::<Int64Array>()),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|i| i.start))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|i| i.end))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|i| i.end - i.start))),
        Arc::new(rows.iter().map(|i| i.ended_by.as_deref()).collect::<StringArray>()),
        Arc::new(rows.iter().map(|i| i.stream).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|i| i.launch.map(|l| l.0)).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|i| i.launch.map(|l| l.1)).collect::<Int64Array>()),
        Arc::new(rows.iter().map(late).collect::<Int64Array>()),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// gpu_utilisation's columns as they are filled.
#[derive(Default)]
struct UtilisationRows {
    rank: Vec<i64>,
    thread: Vec<i64>,
    device: Vec<Option<i64>>,
    slot: Vec<i64>,
    start: Vec<i64>,
    end: Vec<i64>,
    kernel: Vec<i64>,
    transfer: Vec<i64>,
    busy: Vec<f64>,
}

/// Each stream's kernel and transfer time in `slots` equal slots of [from, to).
pub fn utilisation(schema: &SchemaRef, ranks: &BTreeMap<i64, Rank>, slots: usize) -> Result<RecordBatch> {
    let span = ranks
        .values()
        .filter_map(Rank::interval)
        .fold(None, |acc: Option<(i64, i64)>, (s, e)| Some(acc.map_or((s, e), |(a, b)| (a.min(s), b.max(e)))));
    let mut cols = UtilisationRows::default();
    if let Some((from, to)) = span {
        let width = ((to - from).max(1) + slots as i64 - 1) / slots as i64;
        for (&rank, r) in ranks {
            for (&stream, tasks) in &r.streams {
                let mut kernel = vec![0i64; slots];
                let mut transfer = vec![0i64; slots];
                for t in tasks {
                    let into = if t.transfer { &mut transfer } else { &mut kernel };
                    let (s, e) = (t.start.max(from), t.end.min(to));
                    if e <= s {
                        continue;
                    }
                    let first = ((s - from) / width) as usize;
                    let last = (((e - from - 1) / width) as usize).min(slots - 1);
                    for (k, slot) in into.iter_mut().enumerate().take(last + 1).skip(first) {
                        let (a, b) = (from + k as i64 * width, from + (k as i64 + 1) * width);
                        *slot += e.min(b) - s.max(a);
                    }
                }
                let device = tasks.first().and_then(|t| t.device);
                for k in 0..slots {
                    cols.rank.push(rank);
                    cols.thread.push(stream);
                    cols.device.push(device);
                    cols.slot.push(k as i64);
                    cols.start.push(from + k as i64 * width);
                    cols.end.push(from + (k as i64 + 1) * width);
                    cols.kernel.push(kernel[k]);
                    cols.transfer.push(transfer[k]);
                    cols.busy.push(((kernel[k] + transfer[k]) as f64 / width as f64).min(1.0));
                }
            }
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(cols.rank)),
        Arc::new(Int64Array::from(cols.thread)),
        Arc::new(Int64Array::from(cols.device)),
        Arc::new(Int64Array::from(cols.slot)),
        Arc::new(Int64Array::from(cols.start)),
        Arc::new(Int64Array::from(cols.end)),
        Arc::new(Int64Array::from(cols.kernel)),
        Arc::new(Int64Array::from(cols.transfer)),
        Arc::new(Float64Array::from(cols.busy)),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::super::activity::{Class, HostCall, Launch};
    use super::*;

    fn task(stream: i64, start: i64, end: i64, transfer: bool, launch: Option<i64>) -> Task {
        Task {
            stream,
            device: Some(0),
            name: if transfer { "host_to_device".into() } else { format!("k{start}") },
            start,
            end,
            transfer,
            launch: launch.map(|ts| Launch { thread: 0, region: "cuLaunchKernel".into(), start: ts, end: ts + 5 }),
        }
    }

    fn api(start: i64, end: i64) -> HostCall {
        HostCall {
            thread: 0,
            region: "cuCtxSynchronize".into(),
            start,
            end,
            class: Class::Device,
            stream: None,
            event: None,
        }
    }

    #[test]
    fn the_device_idles_between_its_tasks_within_the_offload_interval() {
        let mut r = Rank { calls: vec![api(0, 10), api(990, 1000)], ..Rank::default() };
        r.streams.insert(1, vec![task(1, 100, 200, true, None), task(1, 300, 400, false, Some(250))]);
        r.streams.insert(2, vec![task(2, 350, 600, false, Some(50))]);
        let any = idle(0, &r, false);
        let spans: Vec<(i64, i64)> = any.iter().map(|i| (i.start, i.end)).collect();
        assert_eq!(spans, vec![(0, 100), (200, 300), (600, 1000)]);
        assert_eq!(any[1].launch, Some((0, 250)));
        let kernels: Vec<(i64, i64)> = idle(0, &r, true).iter().map(|i| (i.start, i.end)).collect();
        assert_eq!(kernels, vec![(0, 300), (600, 1000)]);
    }

    #[test]
    fn utilisation_splits_a_task_over_the_slots_it_spans() {
        let mut r = Rank { calls: vec![api(0, 1), api(399, 400)], ..Rank::default() };
        r.streams.insert(1, vec![task(1, 50, 250, false, None)]);
        let ranks = BTreeMap::from([(0, r)]);
        let schema = super::super::GPU_UTILISATION.schema();
        let b = utilisation(&schema, &ranks, 4).unwrap();
        let kernel = b.column(6).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(kernel.values().to_vec(), vec![50, 100, 50, 0]);
    }
}
