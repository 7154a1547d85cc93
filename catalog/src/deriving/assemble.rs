//! The tables of the model made from a reader's `RawTrace`: ranks, regions, communicators,
//! locations, clock sync samples, metrics and their definitions, states, trace_info and
//! warnings. [`crate::deriving::steps`] decides when each is made.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow::datatypes::Int32Type;

use crate::error::Result;
use crate::events::{NONE_I32, PartStream, region_dictionary};
use crate::model;
use crate::trace::{ClockSample, MetricDefinition, RankInfo, RawMetrics, RawStates, RawTrace, TraceMeta, Warnings};

impl RawTrace {
    pub(crate) fn ranks_batch(&self) -> Result<RecordBatch> {
        let mut node_index: Vec<Option<i32>> = Vec::with_capacity(self.ranks.len());
        let mut seen: Vec<&str> = Vec::new();
        for r in &self.ranks {
            node_index.push(r.node.as_deref().map(|n| match seen.iter().position(|s| *s == n) {
                Some(i) => i as i32,
                None => {
                    seen.push(n);
                    seen.len() as i32 - 1
                }
            }));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from_iter_values(self.ranks.iter().map(|r| r.rank))),
            Arc::new(StringArray::from_iter(self.ranks.iter().map(|r| r.node.as_deref()))),
            Arc::new(Int32Array::from(node_index)),
            Arc::new(StringArray::from_iter_values(self.ranks.iter().map(|r| r.name.as_str()))),
            Arc::new(Int32Array::from_iter(self.ranks.iter().map(|r| r.application))),
        ];
        Ok(RecordBatch::try_new(model::RANKS.schema(), columns)?)
    }

    pub(crate) fn locations_batch(&self, streams: &[PartStream]) -> Result<RecordBatch> {
        let mut counts: BTreeMap<(i32, i32), i64> = BTreeMap::new();
        for ps in streams {
            let s = ps.stream;
            counts.insert((s.rank, s.thread), (s.end - s.start) as i64);
        }
        self.locations_batch_counted(&counts)
    }

    /// The `locations` rows, the events of each (rank, thread) stream counted in `counts`.
    pub(crate) fn locations_batch_counted(&self, counts: &BTreeMap<(i32, i32), i64>) -> Result<RecordBatch> {
        let l = &self.locations;
        let rank_node: std::collections::HashMap<i32, &str> =
            self.ranks.iter().filter_map(|r| Some((r.rank, r.node.as_deref()?))).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(l.iter().map(|x| x.location_id))),
            Arc::new(Int32Array::from_iter_values(l.iter().map(|x| x.rank))),
            Arc::new(Int32Array::from_iter_values(l.iter().map(|x| x.thread))),
            Arc::new(StringArray::from_iter_values(l.iter().map(|x| x.kind.as_str()))),
            Arc::new(StringArray::from_iter_values(l.iter().map(|x| x.name.as_str()))),
            Arc::new(Int64Array::from_iter_values(
                l.iter().map(|x| counts.get(&(x.rank, x.thread)).copied().unwrap_or(0)),
            )),
            Arc::new(StringArray::from_iter(
                l.iter().map(|x| x.node.as_deref().or_else(|| rank_node.get(&x.rank).copied())),
            )),
        ];
        Ok(RecordBatch::try_new(model::LOCATIONS.schema(), columns)?)
    }

    pub(crate) fn regions_batch(&self) -> Result<RecordBatch> {
        let r = &self.regions;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.region_id))),
            Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.name.as_str()))),
            Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.paradigm.as_str()))),
            Arc::new(StringArray::from_iter(r.iter().map(|x| x.role.as_deref()))),
            Arc::new(StringArray::from_iter(r.iter().map(|x| x.file.as_deref()))),
            Arc::new(Int64Array::from(r.iter().map(|x| x.line).collect::<Vec<_>>())),
        ];
        Ok(RecordBatch::try_new(model::REGIONS.schema(), columns)?)
    }

    pub(crate) fn communicators_batch(&self) -> Result<RecordBatch> {
        let c = &self.communicators;
        let members = ListArray::from_iter_primitive::<Int32Type, _, _>(c.iter().map(|x| {
            (!x.per_rank).then(|| x.members.iter().map(|&m| (m != NONE_I32).then_some(m)).collect::<Vec<_>>())
        }));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from_iter_values(c.iter().map(|x| x.comm))),
            Arc::new(StringArray::from_iter_values(c.iter().map(|x| x.name.as_str()))),
            Arc::new(Int32Array::from_iter_values(
                c.iter().map(|x| if x.per_rank { 1 } else { x.members.len() as i32 }),
            )),
            Arc::new(members),
        ];
        let schema = model::COMMUNICATORS.schema();
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    pub(crate) fn clock_sync_batch(&self) -> Result<RecordBatch> {
        clock_sync_batch(&self.clock_sync)
    }

    pub(crate) fn states_batch(&self) -> Result<RecordBatch> {
        states_batch(&self.states)
    }

    /// One row per metric name, with the first definition the writer gave it.
    pub(crate) fn metric_definitions_batch(&self) -> Result<RecordBatch> {
        let m = &self.metrics;
        let mut seen = std::collections::HashSet::new();
        let rows: Vec<(&str, Option<&MetricDefinition>)> = m
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| seen.insert(n.as_str()))
            .map(|(i, n)| (n.as_str(), m.definitions.get(i)))
            .collect();
        let text = |f: &dyn Fn(&MetricDefinition) -> Option<&str>| -> ArrayRef {
            Arc::new(StringArray::from(rows.iter().map(|(_, d)| d.and_then(f)).collect::<Vec<_>>()))
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|(n, _)| *n))),
            text(&|d| d.mode.as_deref()),
            text(&|d| d.unit.as_deref()),
            text(&|d| d.description.as_deref()),
        ];
        Ok(RecordBatch::try_new(model::METRIC_DEFINITIONS.schema(), columns)?)
    }

    pub(crate) fn metrics_batch(&self) -> Result<RecordBatch> {
        metrics_batch(&self.metrics, &self.metrics.names)
    }
}

/// The `clock_sync` rows of `samples`.
pub(crate) fn clock_sync_batch(samples: &[ClockSample]) -> Result<RecordBatch> {
    let c = samples;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(c.iter().map(|x| x.rank))),
        Arc::new(Int32Array::from_iter_values(c.iter().map(|x| x.session))),
        Arc::new(Int64Array::from_iter_values(c.iter().map(|x| x.local_ts))),
        Arc::new(Int64Array::from_iter_values(c.iter().map(|x| x.master_ts))),
        Arc::new(Int64Array::from(c.iter().map(|x| x.round_trip).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(c.iter().map(|x| x.std_dev_ns).collect::<Vec<_>>())),
    ];
    Ok(RecordBatch::try_new(model::CLOCK_SYNC.schema(), columns)?)
}

/// The `metrics` rows of `samples`, their metrics named by `names`.
pub(crate) fn metrics_batch(samples: &RawMetrics, names: &[String]) -> Result<RecordBatch> {
    let m = samples;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(m.rank.clone())),
        Arc::new(Int32Array::from(m.thread.clone())),
        Arc::new(Int64Array::from(m.ts.clone())),
        region_dictionary(&m.metric, names)?,
        Arc::new(Float64Array::from(m.value.clone())),
    ];
    Ok(RecordBatch::try_new(model::METRICS.schema(), columns)?)
}

/// The `trace_info` row.
pub(crate) fn info_batch(
    m: &TraceMeta,
    ranks: usize,
    locations: usize,
    events: usize,
    duration: i64,
    warnings: &Warnings,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![m.name.clone()])),
        Arc::new(StringArray::from(vec![m.path.clone()])),
        Arc::new(StringArray::from(vec![m.format.clone()])),
        Arc::new(StringArray::from(vec![m.format_version.clone()])),
        Arc::new(StringArray::from(vec![m.creator.clone()])),
        Arc::new(Int64Array::from(vec![ranks as i64])),
        Arc::new(Int64Array::from(vec![locations as i64])),
        Arc::new(Int64Array::from(vec![m.timer_resolution_hz])),
        Arc::new(TimestampNanosecondArray::from(vec![m.start_wallclock_ns]).with_timezone("UTC")),
        Arc::new(Int64Array::from(vec![duration])),
        Arc::new(Int64Array::from(vec![events as i64])),
        Arc::new(Int64Array::from(vec![warnings.total()])),
        Arc::new(StringArray::from(vec![m.clock_correction.clone()])),
        Arc::new(Int64Array::from(vec![m.clock_violations])),
    ];
    Ok(RecordBatch::try_new(model::TRACE_INFO.schema(), columns)?)
}

/// Ranks that no reader rule placed on a node, named the same way for every format.
pub(crate) fn report_unplaced(ranks: &[RankInfo], warnings: &mut Warnings) {
    let unplaced: Vec<i32> = ranks.iter().filter(|r| r.node.is_none()).map(|r| r.rank).collect();
    if let Some(first) = unplaced.first() {
        let (n, total) = (unplaced.len(), ranks.len());
        warnings.add_many("ranks_without_node", n as i64, || {
            format!(
                "{n} of {total} ranks have no node (first: rank {first}): their messages have intra_node NULL and latency criteria of unknown locality; give --nodes FILE (rank,node) to place them"
            )
        });
    }
}

pub(crate) fn warnings_batch(w: &Warnings) -> Result<RecordBatch> {
    let rows: Vec<_> = w.iter().collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    Ok(RecordBatch::try_new(model::WARNINGS.schema(), columns)?)
}

/// The `states` rows of `s`.
pub(crate) fn states_batch(s: &RawStates) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(s.rank.clone())),
        Arc::new(Int32Array::from(s.thread.clone())),
        Arc::new(Int64Array::from(s.begin.clone())),
        Arc::new(Int64Array::from(s.end.clone())),
        Arc::new(Int32Array::from(s.state.clone())),
        region_dictionary(&s.name, &s.names)?,
    ];
    Ok(RecordBatch::try_new(model::STATES.schema(), columns)?)
}
