//! Assembling a trace: a reader's `RawTrace` becomes the Arrow tables of the model. Clock
//! correction first (crate::clock), then the derivation of calls, messages and collectives
//! (this folder's walk and matching), then every table to Arrow, with the time of each phase
//! recorded (crate::phases) and the problems found counted in `warnings`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow::datatypes::Int32Type;

use crate::clock::{self, Correction};
use crate::deriving;
use crate::error::{Error, Result};
use crate::events::{NONE_I32, PartStream, region_dictionary};
use crate::model;
use crate::phases::LoadPhases;
use crate::trace::{MetricDefinition, NodeMap, RankInfo, RawTrace, Trace, Warnings};

impl RawTrace {
    /// Correct clocks with the default (`Correction::Model`), derive, convert to Arrow.
    pub fn build(self) -> Result<Trace> {
        self.build_with(Correction::default())
    }

    /// Correct clocks as asked, derive calls, messages and collectives and convert every table
    /// to Arrow.
    pub fn build_with(mut self, correction: Correction) -> Result<Trace> {
        let region_names: Vec<String> = self.regions.iter().map(|r| r.name.clone()).collect();
        let mut warnings = std::mem::take(&mut self.warnings);
        let nodes = NodeMap::new(&self.ranks);
        report_unplaced(&self.ranks, &mut warnings);

        let mut phases = LoadPhases::default();
        let models = phases.time("clock correction", || {
            clock::correct(
                &mut self.events,
                &mut self.metrics,
                &self.clock_sync,
                &self.ranks,
                correction,
                &mut warnings,
            )
        });
        let streams = self.events.streams();
        let keep_matched = correction == Correction::Clc;
        let comms = &self.communicators;
        let mut derived = deriving::derive(&self.events, &streams, &nodes, comms, keep_matched, &mut warnings)?;
        if correction == Correction::Clc && derived.messages.violations() > 0 {
            phases.extend(std::mem::take(&mut derived.phases));
            phases.time("controlled logical clock", || {
                for p in self.events.parts.iter_mut().filter(|p| p.ts_local.is_none()) {
                    p.ts_local = Some(p.ts.clone());
                }
                clock::clc::apply(&mut self.events, &streams, &derived.messages.matched_events, &mut warnings);
            });
            // Times moved, the matching (per-stream order) did not: derive again, quietly.
            let mut again = Warnings::default();
            derived = deriving::derive(&self.events, &streams, &nodes, comms, false, &mut again)?;
        }
        let deriving::Derived { calls, messages, collectives, span: (first, last), phases: derive_phases } = derived;
        phases.extend(derive_phases);
        let start = Instant::now();
        let clock_label = match correction {
            Correction::Off => "off",
            Correction::Model if models.is_empty() => "none",
            other => other.name(),
        };
        self.meta.clock_correction = clock_label.to_string();
        self.meta.clock_violations = messages.violations();
        if self.meta.clock_violations > 0 {
            let n = self.meta.clock_violations;
            warnings.add_many("clock_violation", n, || {
                format!("{n} matched messages are received before they are sent (see clock_violations())")
            });
        }
        let mut tables: BTreeMap<&'static str, Vec<RecordBatch>> = BTreeMap::new();
        let locations = self.locations_batch(&streams)?;
        tables.insert("ranks", vec![self.ranks_batch()?]);
        tables.insert("locations", vec![locations]);
        tables.insert("regions", vec![self.regions_batch()?]);
        tables.insert("calls", calls.into_batches(&region_names)?);
        tables.insert("messages", messages.into_batches()?);
        tables.insert("collectives", vec![collectives]);
        tables.insert("communicators", vec![self.communicators_batch()?]);
        tables.insert("clock_sync", vec![self.clock_sync_batch()?]);
        tables.insert("metrics", vec![self.metrics_batch()?]);
        tables.insert("metric_definitions", vec![self.metric_definitions_batch()?]);
        tables.insert("states", vec![self.states_batch()?]);
        tables.insert("warnings", vec![warnings_batch(&warnings)?]);
        // Times so far apart that their difference overflows come from a damaged timestamp.
        let span = last.checked_sub(first).ok_or_else(|| {
            Error::in_file(
                std::path::Path::new(&self.meta.path),
                format!("event times from {first} to {last} ns span more than 292 years: a timestamp is damaged"),
            )
        })?;
        let info = self.info_batch(span, warnings.total())?;
        tables.insert("trace_info", vec![info]);
        phases.since("other tables to Arrow", start);
        let events = phases.time("events to Arrow", || std::mem::take(&mut self.events).into_batches(&region_names))?;
        tables.insert("events", events);
        Ok(Trace::assembled(self.meta, tables, warnings, phases))
    }

    fn info_batch(&self, duration: i64, warnings: i64) -> Result<RecordBatch> {
        let m = &self.meta;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![m.name.clone()])),
            Arc::new(StringArray::from(vec![m.path.clone()])),
            Arc::new(StringArray::from(vec![m.format.clone()])),
            Arc::new(StringArray::from(vec![m.format_version.clone()])),
            Arc::new(StringArray::from(vec![m.creator.clone()])),
            Arc::new(Int64Array::from(vec![self.ranks.len() as i64])),
            Arc::new(Int64Array::from(vec![self.locations.len() as i64])),
            Arc::new(Int64Array::from(vec![m.timer_resolution_hz])),
            Arc::new(TimestampNanosecondArray::from(vec![m.start_wallclock_ns]).with_timezone("UTC")),
            Arc::new(Int64Array::from(vec![duration])),
            Arc::new(Int64Array::from(vec![self.events.len() as i64])),
            Arc::new(Int64Array::from(vec![warnings])),
            Arc::new(StringArray::from(vec![m.clock_correction.clone()])),
            Arc::new(Int64Array::from(vec![m.clock_violations])),
        ];
        Ok(RecordBatch::try_new(model::TRACE_INFO.schema(), columns)?)
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

    fn locations_batch(&self, streams: &[PartStream]) -> Result<RecordBatch> {
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

    fn clock_sync_batch(&self) -> Result<RecordBatch> {
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

    fn states_batch(&self) -> Result<RecordBatch> {
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

    fn metrics_batch(&self) -> Result<RecordBatch> {
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

fn warnings_batch(w: &Warnings) -> Result<RecordBatch> {
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

    #[test]
    fn build_records_its_phases_in_order() {
        let cfg = GeneratorConfig { ranks: 8, ranks_per_node: 4, iterations: 4, ..GeneratorConfig::default() };
        let start = std::time::Instant::now();
        let trace = generate(&cfg).unwrap().trace.build().unwrap();
        let elapsed = start.elapsed().as_secs_f64();
        let names: Vec<&str> = trace.phases.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "clock correction",
                "stream walk",
                "message matching",
                "msg_id order",
                "messages gather",
                "collectives",
                "other tables to Arrow",
                "events to Arrow"
            ]
        );
        let beside: Vec<&str> = trace.phases.iter().filter(|p| p.beside).map(|p| p.name).collect();
        assert_eq!(beside, ["collectives"]);
        assert!(trace.phases.iter().all(|p| p.seconds >= 0.0));
        assert!(trace.phases.total() > 0.0 && trace.phases.total() <= elapsed, "{}", trace.phases);
    }
}
