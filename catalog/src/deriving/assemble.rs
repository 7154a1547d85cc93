//! Assembling a trace: a reader's `RawTrace` becomes the Arrow tables of the model. The
//! definitions become tables at once; clock correction (crate::clock), the events and the
//! derivation of calls, messages and collectives (this folder's walk and matching) follow when a
//! query first needs them (crate::deriving::steps), with the time of each phase recorded
//! (crate::phases) and the problems found counted in `warnings`. This file makes the tables.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow::datatypes::Int32Type;

use crate::clock::Correction;
use crate::deriving::steps::{self, EventSource};
use crate::error::Result;
use crate::events::{NONE_I32, PartStream, region_dictionary};
use crate::model;
use crate::trace::{ClockSample, MetricDefinition, RankInfo, RawTrace, Trace, TraceMeta, Warnings};

impl RawTrace {
    /// Correct clocks with the default (`Correction::Model`), derive, convert to Arrow.
    pub fn build(self) -> Result<Trace> {
        self.build_with(Correction::default())
    }

    /// The trace with its definition tables built; correcting clocks as asked, converting the
    /// events and deriving calls, messages and collectives wait for the first query that needs
    /// them (crate::deriving::steps).
    pub fn build_with(self, correction: Correction) -> Result<Trace> {
        self.build_later(None, None, correction)
    }

    /// `build_with` for a reader that left the events to `source` (decoded when first needed);
    /// `clock_sync` replaces the trace's own samples.
    pub fn build_later(
        mut self,
        source: Option<EventSource>,
        clock_sync: Option<Vec<ClockSample>>,
        correction: Correction,
    ) -> Result<Trace> {
        let mut warnings = std::mem::take(&mut self.warnings);
        report_unplaced(&self.ranks, &mut warnings);
        let mut tables: BTreeMap<&'static str, Vec<RecordBatch>> = BTreeMap::new();
        tables.insert("ranks", vec![self.ranks_batch()?]);
        tables.insert("regions", vec![self.regions_batch()?]);
        tables.insert("communicators", vec![self.communicators_batch()?]);
        tables.insert("metric_definitions", vec![self.metric_definitions_batch()?]);
        let meta = self.meta.clone();
        let built = steps::staged(self, source, clock_sync, correction, tables, warnings);
        Ok(Trace::staged(meta, built))
    }

    fn ranks_batch(&self) -> Result<RecordBatch> {
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
        ];
        Ok(RecordBatch::try_new(model::RANKS.schema(), columns)?)
    }

    pub(crate) fn locations_batch(&self, streams: &[PartStream]) -> Result<RecordBatch> {
        let mut counts: BTreeMap<(i32, i32), i64> = BTreeMap::new();
        for ps in streams {
            let s = ps.stream;
            counts.insert((s.rank, s.thread), (s.end - s.start) as i64);
        }
        let l = &self.locations;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(l.iter().map(|x| x.location_id))),
            Arc::new(Int32Array::from_iter_values(l.iter().map(|x| x.rank))),
            Arc::new(Int32Array::from_iter_values(l.iter().map(|x| x.thread))),
            Arc::new(StringArray::from_iter_values(l.iter().map(|x| x.kind.as_str()))),
            Arc::new(StringArray::from_iter_values(l.iter().map(|x| x.name.as_str()))),
            Arc::new(Int64Array::from_iter_values(
                l.iter().map(|x| counts.get(&(x.rank, x.thread)).copied().unwrap_or(0)),
            )),
        ];
        Ok(RecordBatch::try_new(model::LOCATIONS.schema(), columns)?)
    }

    fn regions_batch(&self) -> Result<RecordBatch> {
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

    fn communicators_batch(&self) -> Result<RecordBatch> {
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
        let c = &self.clock_sync;
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

    pub(crate) fn states_batch(&self) -> Result<RecordBatch> {
        let s = &self.states;
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

    /// One row per metric name, with the first definition the writer gave it.
    fn metric_definitions_batch(&self) -> Result<RecordBatch> {
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
        let m = &self.metrics;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(m.rank.clone())),
            Arc::new(Int32Array::from(m.thread.clone())),
            Arc::new(Int64Array::from(m.ts.clone())),
            region_dictionary(&m.metric, &m.names)?,
            Arc::new(Float64Array::from(m.value.clone())),
        ];
        Ok(RecordBatch::try_new(model::METRICS.schema(), columns)?)
    }
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
fn report_unplaced(ranks: &[RankInfo], warnings: &mut Warnings) {
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

#[cfg(test)]
mod tests {
    use crate::generate::{GeneratorConfig, generate};
    use crate::trace::Trace;

    #[test]
    fn each_step_runs_when_a_table_it_makes_is_first_used_and_records_its_phases() {
        let cfg = GeneratorConfig { ranks: 8, ranks_per_node: 4, iterations: 4, ..GeneratorConfig::default() };
        let trace = generate(&cfg).unwrap().trace.build().unwrap();
        assert_eq!(trace.built_rows("ranks"), Some(8));
        assert_eq!(trace.built_rows("events"), None);
        assert_eq!(trace.built_rows("messages"), None);
        assert_eq!(trace.phases().iter().count(), 0, "opening builds the definitions only");

        let start = std::time::Instant::now();
        let events = trace.row_count("events").unwrap();
        assert!(events > 0 && trace.built_rows("events") == Some(events));
        assert_eq!(trace.built_rows("calls"), None, "the events do not derive calls");
        let names = |t: &Trace| t.phases().iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(&trace), ["clock correction", "event tables to Arrow", "events to Arrow"]);

        // A clone shares the built tables: the derivation runs once, for both.
        let clone = trace.clone();
        assert!(clone.row_count("messages").unwrap() > 0);
        let elapsed = start.elapsed().as_secs_f64();
        assert!(trace.built_rows("calls").is_some() && trace.built_rows("trace_info") == Some(1));
        assert_eq!(
            names(&trace),
            [
                "clock correction",
                "event tables to Arrow",
                "events to Arrow",
                "stream walk",
                "message matching",
                "msg_id order",
                "messages gather",
                "collectives",
                "other tables to Arrow",
            ]
        );
        let phases = trace.phases();
        let beside: Vec<&str> = phases.iter().filter(|p| p.beside).map(|p| p.name).collect();
        assert_eq!(beside, ["collectives"]);
        assert!(phases.iter().all(|p| p.seconds >= 0.0));
        assert!(phases.total() > 0.0 && phases.total() <= elapsed, "{phases}");
    }
}
