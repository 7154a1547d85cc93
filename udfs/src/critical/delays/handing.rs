//! The costs handed on from wait to wait (the last step of [`super::steps`]), in one task over
//! every side of every wait merged by the waits' end, the latest first.
//!
//! The waits that end at one instant come together with both their sides: they are joined
//! there, put in the order one process takes them (`super::handing_order_within_ties`), and
//! each wait's cost is given to the delayer's call paths and handed on to the delayer's waits
//! by the rule of `super::delay_costs`, the same arithmetic in the same order. What the task
//! holds is what has been handed on to waits not yet reached, and the costs per call path.

use arrow::array::{BinaryArray, Int8Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::exec_err;
use datafusion::error::Result;

use super::side_rows::{get_name, get_side};
use super::sides::{BOTH, NO_PATH_KEY, PATH};
use super::steps::{DELAYER, WAITER};
use super::{Ledger, NO_SYNC, W, excess_of, handing_order_within_ties};
use crate::critical::stretch_store::rank_thread;
use commdb_analysis::columns::int64_column;
use commdb_analysis::stream::Mapper;
use commdb_catalog::fast_hash::FastMap;

/// One side of a wait as it came.
#[derive(Debug, Default)]
struct Side {
    loc: i64,
    start: i64,
    end: i64,
    since: Option<i64>,
    waiters: u32,
    present: bool,
    waiting: i64,
    /// Its time per call path (key, ns) and the waits it hands on to (id, ns), ranges of the
    /// lists of the waits gathered.
    paths: std::ops::Range<usize>,
    theirs: std::ops::Range<usize>,
    /// Both sides in one row (`BOTH`): the delayer's location and synchronisation; `paths` and
    /// `waiting` are then the delayer's excess.
    joined: Option<(i64, Option<i64>)>,
}

/// A wait with both its sides: whether its waiter has stretches, the delayer's excess per call
/// path (key, ns) and excess waiting, and its waits to hand on to.
struct Joined {
    id: i64,
    present: bool,
    paths: Vec<(i64, f64)>,
    waiting: f64,
    theirs: std::ops::Range<usize>,
}

/// Hands the costs on, the waits of one end at a time.
pub(super) struct Handing {
    schema: SchemaRef,
    /// Each call path's key: its text and region.
    names: FastMap<i64, (String, Option<String>)>,
    /// The end of the waits being gathered, and their sides by id: [waiter's, delayer's].
    end: Option<i64>,
    group: FastMap<i64, [Option<Side>; 2]>,
    /// The sides' times per call path and waits to hand on to, of the waits gathered.
    paths: Vec<(i64, i64)>,
    theirs: Vec<(i64, i64)>,
    /// What was handed on to waits not reached yet.
    incoming: FastMap<i64, f64>,
    /// The costs per (location, call path key), and the waiting nothing explains.
    ledger: Ledger<i64>,
    /// Bytes of the sides gathered.
    gathered: usize,
}

impl Handing {
    pub(super) fn new(schema: SchemaRef) -> Handing {
        Handing {
            schema,
            names: FastMap::default(),
            end: None,
            group: FastMap::default(),
            paths: Vec::new(),
            theirs: Vec::new(),
            incoming: FastMap::default(),
            ledger: Ledger::default(),
            gathered: 0,
        }
    }

    /// Every side of the waits ending at `self.end` has come: hand their costs on.
    fn hand_on(&mut self) -> Result<()> {
        let group = std::mem::take(&mut self.group);
        let (all_paths, all_theirs) = (std::mem::take(&mut self.paths), std::mem::take(&mut self.theirs));
        self.gathered = 0;
        let mut waits: Vec<(W, usize)> = Vec::with_capacity(group.len());
        let mut joined: Vec<Joined> = Vec::with_capacity(group.len());
        for (id, pair) in group {
            let (key, wait) = match pair {
                [Some(w @ Side { joined: Some((delayer, delayer_since)), .. }), None] => {
                    let since = synchronised(w.since, delayer_since);
                    let key = W { waiter: w.loc, delayer, start: w.start, end: w.end, since, waiters: w.waiters };
                    let paths = all_paths[w.paths.clone()].iter().map(|&(k, e)| (k, e as f64)).collect();
                    let waiting = w.waiting as f64;
                    (key, Joined { id, present: w.present, paths, waiting, theirs: w.theirs })
                }
                [Some(w), Some(d)] if w.joined.is_none() && d.joined.is_none() => {
                    // As one process keeps them: not a location's wait for itself, nor one for
                    // a location without stretches.
                    if d.loc == w.loc || !d.present {
                        self.incoming.remove(&id);
                        continue;
                    }
                    let since = synchronised(w.since, d.since);
                    let key =
                        W { waiter: w.loc, delayer: d.loc, start: w.start, end: w.end, since, waiters: w.waiters };
                    let (paths, waiting) =
                        excess_of(&all_paths[d.paths.clone()], &all_paths[w.paths.clone()], d.waiting, w.waiting);
                    let paths = paths.into_iter().map(|(k, e)| (k, e as f64)).collect();
                    (key, Joined { id, present: w.present, paths, waiting: waiting as f64, theirs: d.theirs })
                }
                [w, d] => {
                    let what = match (w, d) {
                        (None, _) => "the waiter's side of a wait",
                        (_, None) => "the delayer's side of a wait",
                        _ => "a wait whose sides were joined, with a side apart,",
                    };
                    return exec_err!(
                        "delay_costs: {what} ending at {} did not come from the task of its rank",
                        self.end.unwrap_or(0)
                    );
                }
            };
            waits.push((key, joined.len()));
            joined.push(wait);
        }
        waits.sort_unstable_by_key(|(w, _)| w.handing_order());
        handing_order_within_ties(&mut waits, |(w, _)| w);
        let position: FastMap<i64, usize> = waits.iter().enumerate().map(|(k, (_, j))| (joined[*j].id, k)).collect();
        for (at, (w, j)) in waits.iter().enumerate() {
            let Joined { id, present, paths, waiting, theirs } = &joined[*j];
            let incoming = self.incoming.remove(id).unwrap_or(0.0);
            let excess = present.then_some((paths.as_slice(), *waiting));
            // The delayer's waits in its interval that come later.
            let later = || {
                all_theirs[theirs.clone()]
                    .iter()
                    .filter(|(j, _)| position.get(j).is_none_or(|&p| p > at))
                    .map(|&(j, o)| (j, o as f64))
                    .collect()
            };
            let pending = &mut self.incoming;
            self.ledger.give(w, incoming, excess, later, |j, x| *pending.entry(j).or_default() += x);
        }
        // Their lists' room is kept for the next waits.
        self.paths = all_paths;
        self.paths.clear();
        self.theirs = all_theirs;
        self.theirs.clear();
        Ok(())
    }
}

/// The synchronisation of a threads' wait from its two sides (NO_SYNC: a wait between ranks,
/// whose interval is searched).
fn synchronised(waiter: Option<i64>, delayer: Option<i64>) -> [i64; 2] {
    match (waiter, delayer) {
        (Some(a), Some(b)) => [a, b],
        _ => NO_SYNC,
    }
}

impl Mapper for Handing {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let b = std::slice::from_ref(batch);
        let (end_desc, id) = (int64_column(b, 0)?, int64_column(b, 1)?);
        let Some(side) = batch.column(2).as_any().downcast_ref::<Int8Array>() else {
            return exec_err!("delay_costs: the sides' column side is not int8");
        };
        let Some(packed) = batch.column(3).as_any().downcast_ref::<BinaryArray>() else {
            return exec_err!("delay_costs: the sides' column packed is not binary");
        };
        for r in 0..batch.num_rows() {
            let id = id.value(r);
            match side.value(r) {
                PATH => {
                    let Some((name, region)) = get_name(packed.value(r)) else {
                        return exec_err!("delay_costs: the name of the call path of key {id} does not read back");
                    };
                    if id == NO_PATH_KEY {
                        return exec_err!("delay_costs: the call path '{name}' came with the key of no path");
                    }
                    match self.names.get(&id) {
                        Some((known, _)) if *known != name => {
                            return exec_err!(
                                "delay_costs: the call paths '{known}' and '{name}' have one key; they cannot be told apart across tasks"
                            );
                        }
                        Some(_) => {}
                        None => {
                            self.names.insert(id, (name, region));
                        }
                    }
                    continue;
                }
                WAITER | DELAYER | BOTH => {}
                other => return exec_err!("delay_costs: a side of unknown kind {other}"),
            }
            let at = -end_desc.value(r);
            if self.end.is_some_and(|e| e != at) {
                if self.end.is_some_and(|e| e < at) {
                    return exec_err!("delay_costs: the sides did not come in order of their end");
                }
                self.hand_on()?;
            }
            self.end = Some(at);
            let (paths_from, theirs_from) = (self.paths.len(), self.theirs.len());
            let Some(row) = get_side(packed.value(r), id, at, &mut self.paths, &mut self.theirs) else {
                return exec_err!("delay_costs: a side of the wait ending at {at} does not read back from its bytes");
            };
            let joined = match (side.value(r) == BOTH, row.delayer) {
                (true, Some(d)) => Some(d),
                (false, None) => None,
                _ => {
                    return exec_err!(
                        "delay_costs: a side of the wait ending at {at} has its delayer where it should not, or lacks it"
                    );
                }
            };
            let paths = paths_from..self.paths.len();
            let theirs = theirs_from..self.theirs.len();
            self.gathered += 96 + 16 * (paths.len() + theirs.len());
            let s = Side {
                loc: row.loc,
                start: row.start,
                end: at,
                since: row.since,
                waiters: row.waiters,
                present: row.present,
                waiting: row.waiting,
                paths,
                theirs,
                joined,
            };
            let which = usize::from(side.value(r) == DELAYER);
            let slot = &mut self.group.entry(id).or_default()[which];
            if slot.is_some() {
                return exec_err!("delay_costs: a side of a wait ending at {at} came twice");
            }
            *slot = Some(s);
        }
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.gathered + 24 * self.incoming.capacity() + 48 * self.ledger.costs.capacity() + 64 * self.names.len()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        if !self.group.is_empty() {
            self.hand_on()?;
        }
        let name = |key: i64| -> Result<(Option<&str>, Option<&str>)> {
            if key == NO_PATH_KEY {
                return Ok((None, None));
            }
            match self.names.get(&key) {
                Some((text, region)) => Ok((region.as_deref(), Some(text.as_str()))),
                None => exec_err!("delay_costs: a call path of key {key} came without its name"),
            }
        };
        let mut rows: Vec<super::Row> = Vec::with_capacity(self.ledger.costs.len() + 1);
        for (&(at, key), &(direct, propagated)) in &self.ledger.costs {
            let (region, text) = name(key)?;
            rows.push((Some(rank_thread(at)), region, text, direct + propagated, direct, propagated));
        }
        if self.ledger.unexplained > 0.0 {
            rows.push((None, None, None, self.ledger.unexplained, 0.0, 0.0));
        }
        Ok(vec![super::rows_batch(rows, &self.schema)?])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array};
    use arrow::datatypes::SchemaRef;

    use super::super::side_rows::{SideRow, put_side};
    use super::super::sides::sides_schema;
    use super::*;

    /// A side row: (id, side, loc, start, end, present, waiting, paths, theirs).
    type R = (i64, i8, i64, i64, i64, bool, i64, Vec<(i64, i64)>, Vec<(i64, i64)>);

    fn batch(rows: &[R]) -> RecordBatch {
        let mut packed = arrow::array::BinaryBuilder::new();
        for r in rows {
            let row = SideRow { loc: r.2, start: r.3, waiters: 1, present: r.5, waiting: r.6, ..SideRow::default() };
            let mut bytes = Vec::new();
            put_side(&mut bytes, r.0, r.4, &row, &r.7, &r.8);
            packed.append_value(&bytes);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| -r.4))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(packed.finish()),
        ];
        RecordBatch::try_new(sides_schema(), columns).unwrap()
    }

    fn schema() -> SchemaRef {
        crate::critical::delays::DELAY_COSTS.schema()
    }

    #[test]
    fn a_wait_s_cost_goes_to_the_delayer_s_excess_and_on_to_its_waits() {
        let (l0, l1, l2) = (0, 1 << 20, 2 << 20);
        let mut h = Handing::new(schema());
        // Wait 0: l0 waits for l1 from 90 to 100; l1 spent 30 ns more in time no region covers
        // and 10 ns more waiting (its wait 1 for l2, 60..80, 20 ns in the interval): the 10 ns
        // of wait 0 go 3/4 to l1's excess and 1/4 handed on to wait 1.
        let rows = [
            (0, WAITER, l0, 90, 100, true, 10, vec![(NO_PATH_KEY, 50)], vec![]),
            (0, DELAYER, l1, 90, 100, true, 20, vec![(NO_PATH_KEY, 80)], vec![(1, 20)]),
        ];
        h.map(&batch(&rows)).unwrap();
        let rows = [
            (1, WAITER, l1, 60, 80, true, 0, vec![], vec![]),
            (1, DELAYER, l2, 60, 80, true, 0, vec![(NO_PATH_KEY, 20)], vec![]),
        ];
        h.map(&batch(&rows)).unwrap();
        let out = h.finish().unwrap();
        let costs = out[0].column(4).as_any().downcast_ref::<Float64Array>().unwrap();
        let ranks = out[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        // l2 takes wait 1's own 20 ns and the 2.5 ns handed to it; l1 7.5 ns.
        assert_eq!((ranks.value(0), costs.value(0)), (2, 22.5));
        assert_eq!((ranks.value(1), costs.value(1)), (1, 7.5));
        assert_eq!(out[0].num_rows(), 2);
    }

    #[test]
    fn a_side_that_does_not_come_or_comes_out_of_order_fails() {
        let l1 = 1 << 20;
        let mut h = Handing::new(schema());
        h.map(&batch(&[(0, WAITER, 0, 90, 100, true, 0, vec![], vec![])])).unwrap();
        let e = h.map(&batch(&[(1, DELAYER, l1, 60, 80, true, 0, vec![], vec![])])).unwrap_err().to_string();
        assert!(e.contains("delayer's side of a wait ending at 100 did not come"), "{e}");
        let mut h = Handing::new(schema());
        h.map(&batch(&[(0, WAITER, 0, 60, 80, true, 0, vec![], vec![])])).unwrap();
        let e = h.map(&batch(&[(1, WAITER, 0, 90, 100, true, 0, vec![], vec![])])).unwrap_err().to_string();
        assert!(e.contains("not come in order"), "{e}");
    }
}
