//! Delta times, after ScalaTrace's time-preserving compression: instead of time stamps, each
//! MPI call is described by its compute delta (time since the end of the rank's previous MPI
//! call) and its communication delta (its own duration), keyed by its path, and summarised per
//! (region, path) by statistics and the dynamically balanced histograms of `histogram`, which
//! expose imbalance between ranks without storing every time stamp.
//!
//! The path follows ScalaTrace's path-sensitive histograms (section 4.3): a call site is known
//! by its stack signature, and a delta is kept apart by the signature of the previous
//! operation as well as its own. ScalaTrace's signature is an XOR of the return addresses of
//! the call stack; a trace has no addresses, so commdb's signature is the chain of enclosing
//! regions, outermost first (`main/solve/MPI_Send`), found by nesting the calls of the same
//! rank and thread by time. `path` = `<previous MPI call's signature> -> <this call's
//! signature>` (`(start)` for a rank's first MPI call), so two sends after the same receive
//! but from different call sites, or one call site reached from a loop's entry and from its
//! iteration, are different paths.
//!
//! `compute_deltas([rel => 'calls'])` lists every outermost MPI call of every rank (as
//! `ideal_replay` sees them); `delta_histogram(value [, bins [, rank]])` aggregates values into
//! a histogram of `bins` bins (default 5) and keeps the ranks holding the minimum and maximum.

pub mod histogram;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Float64Type, Int64Type};
use datafusion::catalog::TableProvider;
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, TypeSignature, Volatility};
use histogram::{Histogram, Scheme};

use crate::profiles::CALLS;
use crate::replay::MpiCalls;
use crate::sweeps::call_rows::RowOf;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::columns::int64_column;
use commdb_analysis::declare::{Function, Make, Output, col, int64, text};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Mapper, Prepare};
use commdb_catalog::fast_hash::FastMap;
use datafusion::logical_expr::AggregateUDF;

/// Default number of bins.
pub const BINS: i64 = 5;

pub const COMPUTE_DELTAS: Function = Function {
    name: "compute_deltas",
    params: &[CALLS],
    output: Output::Columns(&[
        col("rank", int64, "").never_null(),
        col("call_seq", int64, "the MPI call's number on its rank, from 0").never_null(),
        col("region", text, "the MPI call").never_null(),
        col("compute_delta_ns", int64, "time since the end of the rank's previous MPI call").never_null(),
        col("comm_delta_ns", int64, "the call's duration").never_null(),
        col("path", dict_int32_text, "previous MPI call's signature -> this call's signature (regions joined by '/')")
            .never_null(),
    ]),
    description: "every MPI call with the compute time before it, its duration and its path (the stack signatures of the previous MPI call and of this one), as ScalaTrace records delta times",
    make: Make::Table(compute_deltas),
};

pub const DELTA_HISTOGRAM: Function = Function {
    name: "delta_histogram",
    params: &[
        param("value", Type::Value("Float64"), ParamDefault::Required, "the values to summarise (a delta time)"),
        param("bins", Type::Integer { min: 1 }, ParamDefault::Integer(BINS), "number of bins, from 1 to 1024"),
        param(
            "rank",
            Type::Value("Int64"),
            ParamDefault::Chosen("none"),
            "the rank of each value, to name the ranks holding the minimum and maximum",
        ),
        param(
            "scheme",
            Type::Choice(&["source", "balanced"]),
            ParamDefault::Text("source"),
            "'source': ScalaTrace's Algorithm 2; 'balanced': commdb's refinement",
        ),
    ],
    output: Output::Value("{count, total, min, max, min_rank, max_rank, bins: [{lo, hi, count, mean, variance}]}"),
    description: "ScalaTrace's dynamically balanced histogram (default 5 bins; scheme 'source' = Algorithm 2, 'balanced' = commdb's refinement), exact count, total, min and max and the ranks holding them",
    make: Make::Aggregate(|f| AggregateUDF::from(DeltaHistogram::new(f))),
};

/// Region paths as compute_deltas gives them: a dictionary of text.
fn dict_int32_text() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}
const CALL_COLUMNS: [&str; 4] = ["rank", "region", "start_ts", "end_ts"];

/// Stack signatures, interned: signature k is `parent[k]` (another signature, or none) with
/// the region `region[k]` appended.
#[derive(Debug, Default)]
struct Signatures {
    parent: Vec<u32>,
    region: Vec<u32>,
    index: FastMap<(u32, u32), u32>,
}

const NO_SIGNATURE: u32 = u32::MAX;

impl Signatures {
    fn intern(&mut self, parent: u32, region: u32) -> u32 {
        let next = self.parent.len() as u32;
        *self.index.entry((parent, region)).or_insert_with(|| {
            self.parent.push(parent);
            self.region.push(region);
            next
        })
    }

    /// The text of signature `k`: its regions, outermost first, joined by '/'.
    fn text(&self, k: u32, names: &[String]) -> String {
        let mut chain = Vec::new();
        let mut at = k;
        while at != NO_SIGNATURE {
            chain.push(names[self.region[at as usize] as usize].as_str());
            at = self.parent[at as usize];
        }
        chain.reverse();
        chain.join("/")
    }
}

/// Where the nesting of calls comes from: the call_id and parent_id columns (the calls table
/// has them), or the calls' times on each rank and thread.
#[derive(Debug, Clone, Copy)]
enum Nesting {
    Parents { call_id: usize, parent_id: usize },
    Times { thread: Option<usize> },
}

/// Stack signature of every input row (columns rank, region, start_ts, end_ts first): the
/// regions of the calls enclosing it, outermost first, then its own.
fn stack_signatures(batches: &[RecordBatch], nesting: Nesting) -> Result<(Vec<u32>, Signatures, Vec<String>)> {
    let mut names = Vec::new();
    let region = commdb_analysis::columns::region_ids(batches, 1, |_| true, &mut names)?;
    let n = region.len();
    let mut sig = Signatures::default();
    let mut out = vec![NO_SIGNATURE; n];
    match nesting {
        Nesting::Parents { call_id, parent_id } => {
            let (id, parent) = (int64_column(batches, call_id)?, int64_column(batches, parent_id)?);
            let row_of = RowOf::new(&id);
            let mut chain: Vec<usize> = Vec::new();
            for start in 0..n {
                // Walk up to the first call whose signature is known, then fill back down.
                let mut at = start;
                while out[at] == NO_SIGNATURE && region[at].is_some() {
                    chain.push(at);
                    match parent.is_valid(at).then(|| row_of.get(parent.value(at))).flatten() {
                        Some(p) if !chain.contains(&(p as usize)) => at = p as usize,
                        _ => break,
                    }
                }
                let mut above = if out[at] != NO_SIGNATURE && !chain.contains(&at) { out[at] } else { NO_SIGNATURE };
                while let Some(row) = chain.pop() {
                    if let Some(r) = region[row] {
                        above = sig.intern(above, r);
                        out[row] = above;
                    }
                }
            }
        }
        Nesting::Times { thread } => {
            let rank = int64_column(batches, 0)?;
            let (start, end) = (int64_column(batches, 2)?, int64_column(batches, 3)?);
            let thread = thread.map(|t| int64_column(batches, t)).transpose()?;
            let valid = |i: usize| rank.is_valid(i) && region[i].is_some() && start.is_valid(i) && end.is_valid(i);
            let key = |i: usize| {
                let t = thread.as_ref().map_or(0, |t| if t.is_valid(i) { t.value(i) } else { 0 });
                (rank.value(i), t, start.value(i), std::cmp::Reverse(end.value(i)))
            };
            let mut order: Vec<usize> = (0..n).filter(|&i| valid(i)).collect();
            order.sort_unstable_by_key(|&i| key(i));
            // (end, signature) of the calls open at the current position.
            let mut stack: Vec<(i64, u32)> = Vec::new();
            let mut owner: Option<(i64, i64)> = None;
            for i in order {
                let (r, t, s, _) = key(i);
                if owner != Some((r, t)) {
                    stack.clear();
                    owner = Some((r, t));
                }
                while stack.last().is_some_and(|(e, _)| *e <= s) {
                    stack.pop();
                }
                let above = stack.last().map_or(NO_SIGNATURE, |x| x.1);
                let k = sig.intern(above, region[i].expect("valid rows have a region"));
                stack.push((end.value(i), k));
                out[i] = k;
            }
        }
    }
    Ok((out, sig, names))
}

/// compute_deltas over a chunk of whole ranks (commdb_analysis::by_rank); each output batch has the
/// dictionary of the paths its chunk has.
struct Deltas(ChunkDeltas);

/// compute_deltas of one chunk.
type ChunkDeltas = Box<dyn FnMut(&[RecordBatch]) -> Result<RecordBatch> + Send>;

impl Mapper for Deltas {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        (self.0)(std::slice::from_ref(batch))
    }

    fn map_many(&mut self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        (self.0)(batches)
    }
}

arguments! {
    struct DeltasArgs(COMPUTE_DELTAS) {
        rel: Relation,
    }
}

fn compute_deltas(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let DeltasArgs { rel } = DeltasArgs::read(a)?;
    let mut idx = rel.columns("compute_deltas", &CALL_COLUMNS)?;
    let schema = rel.schema();
    let mut extra = |name: &str| {
        schema.index_of(name).ok().map(|c| {
            idx.push(c);
            idx.len() - 1
        })
    };
    let nesting = match (extra("call_id"), extra("parent_id")) {
        (Some(call_id), Some(parent_id)) => Nesting::Parents { call_id, parent_id },
        _ => Nesting::Times { thread: extra("thread") },
    };
    let out = a.schema();
    let s = out.clone();
    // A chunk of whole ranks at a time: a rank's calls (and their nesting) are all in it.
    let compute = move |batches: &[RecordBatch]| -> Result<RecordBatch> {
        let m = MpiCalls::read(batches, "compute_deltas")?;
        let (row_signature, signatures, names) = stack_signatures(batches, nesting)?;
        let n = m.calls.len();
        // Paths interned as (previous signature, this signature) -> dictionary key.
        let mut path_key: FastMap<(u32, u32), i32> = FastMap::default();
        let mut path_text: Vec<String> = Vec::new();
        let (mut rank, mut seq, mut keys) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for r in 0..m.ranks.len() {
            let calls = &m.calls[m.first[r]..m.first[r + 1]];
            for (i, c) in calls.iter().enumerate() {
                rank.push(m.ranks[r]);
                seq.push(i as i64);
                let before = i.checked_sub(1).map_or(NO_SIGNATURE, |p| row_signature[calls[p].row]);
                let this = row_signature[c.row];
                let next = path_text.len() as i32;
                let key = *path_key.entry((before, this)).or_insert_with(|| {
                    let text =
                        |k: u32| if k == NO_SIGNATURE { "(start)".to_string() } else { signatures.text(k, &names) };
                    path_text.push(format!("{} -> {}", text(before), text(this)));
                    next
                });
                keys.push(key);
            }
        }
        let path = arrow::array::DictionaryArray::<arrow::datatypes::Int32Type>::try_new(
            arrow::array::Int32Array::from(keys),
            Arc::new(StringArray::from(path_text)),
        )?;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(rank)),
            Arc::new(Int64Array::from(seq)),
            Arc::new(StringArray::from_iter_values(m.calls.iter().map(|c| m.regions[c.region as usize].as_str()))),
            Arc::new(Int64Array::from_iter_values(m.calls.iter().map(|c| c.compute))),
            Arc::new(Int64Array::from_iter_values(m.calls.iter().map(|c| c.end - c.start))),
            Arc::new(path),
        ];
        Ok(RecordBatch::try_new(s.clone(), columns)?)
    };
    let prepare: Prepare = Arc::new(move |_| Ok(Box::new(Deltas(Box::new(compute.clone()))) as Box<dyn Mapper>));
    // Each rank's deltas are its own: over a cluster's parts of whole ranks, the parts' rows
    // (rank first) merged in rank order are the answer, in the order delta_histogram's bins
    // follow.
    let as_they_come: Prepare = Arc::new(|_| Ok(Box::new(commdb_analysis::stream::AsTheyCome) as Box<dyn Mapper>));
    let work = commdb_analysis::plan::Work::ByRank(prepare.clone(), 0);
    let spread =
        commdb_analysis::derived::Spread::SortedMerge { schema: out.clone(), work, sorted_on: 1, merge: as_they_come };
    Ok(Arc::new(Derived::by_rank(out, vec![(rel, Some(idx))], 0, prepare).spreading(spread)))
}

fn bin_fields() -> Fields {
    Fields::from(vec![
        Field::new("lo", DataType::Float64, false),
        Field::new("hi", DataType::Float64, false),
        Field::new("count", DataType::Int64, false),
        Field::new("mean", DataType::Float64, false),
        Field::new("variance", DataType::Float64, false),
    ])
}

fn result_fields() -> Fields {
    let bins = DataType::List(Arc::new(Field::new("item", DataType::Struct(bin_fields()), false)));
    Fields::from(vec![
        Field::new("count", DataType::Int64, false),
        Field::new("total", DataType::Float64, false),
        Field::new("min", DataType::Float64, true),
        Field::new("max", DataType::Float64, true),
        Field::new("min_rank", DataType::Int64, true),
        Field::new("max_rank", DataType::Int64, true),
        Field::new("bins", bins, false),
    ])
}

/// The aggregate function (declared in DELTA_HISTOGRAM).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DeltaHistogram {
    declaration: &'static Function,
    signature: Signature,
}

impl DeltaHistogram {
    pub fn new(declaration: &'static Function) -> Self {
        let f = DataType::Float64;
        let i = DataType::Int64;
        DeltaHistogram {
            declaration,
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![f.clone()]),
                    TypeSignature::Exact(vec![f.clone(), i.clone()]),
                    TypeSignature::Exact(vec![f.clone(), i.clone(), i.clone()]),
                    TypeSignature::Exact(vec![f, i.clone(), i, DataType::Utf8]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for DeltaHistogram {
    commdb_analysis::declare::declared_function!();

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(result_fields()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(format_state_name(args.name, "histogram"), DataType::Binary, true))])
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let bins = match acc_args.exprs.get(1) {
            None => BINS,
            Some(e) => match e.downcast_ref::<datafusion::physical_expr::expressions::Literal>() {
                Some(lit) => match lit.value().cast_to(&DataType::Int64) {
                    Ok(ScalarValue::Int64(Some(b))) if (1..=1024).contains(&b) => b,
                    Ok(ScalarValue::Int64(None)) => BINS,
                    _ => {
                        return plan_err!(
                            "delta_histogram: bins must be an integer from 1 to 1024, got {}",
                            lit.value()
                        );
                    }
                },
                None => return plan_err!("delta_histogram: bins must be a literal integer"),
            },
        };
        let scheme = match acc_args.exprs.get(3) {
            None => Scheme::Source,
            Some(e) => match e.downcast_ref::<datafusion::physical_expr::expressions::Literal>() {
                Some(lit) => match lit.value() {
                    ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => {
                        match Scheme::parse(s) {
                            Some(scheme) => scheme,
                            None => {
                                return plan_err!(
                                    "delta_histogram: scheme must be 'source' (ScalaTrace's rules) or 'balanced' (commdb's refinement), got '{s}'"
                                );
                            }
                        }
                    }
                    other => return plan_err!("delta_histogram: scheme must be 'source' or 'balanced', got {other}"),
                },
                None => return plan_err!("delta_histogram: scheme must be a literal: 'source' or 'balanced'"),
            },
        };
        Ok(Box::new(HistogramAccumulator(Histogram::with_scheme(bins as usize, scheme))))
    }
}

#[derive(Debug)]
struct HistogramAccumulator(Histogram);

impl Accumulator for HistogramAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        const MAX_VALUE: f64 = 9.2e18;
        let Some(v) = values.first() else { return Ok(()) };
        let v = arrow::compute::cast(v, &DataType::Float64)?;
        let v = v.as_primitive::<Float64Type>();
        let ranks = match values.get(2) {
            Some(r) => Some(arrow::compute::cast(r, &DataType::Int64)?),
            None => None,
        };
        let ranks = ranks.as_ref().map(|r| r.as_primitive::<Int64Type>());
        for i in 0..v.len() {
            if v.is_valid(i) {
                let x = v.value(i);
                // Times in ns fit 64 bits; beyond, the bins' variances overflow to NaN.
                if !x.is_finite() || x.abs() > MAX_VALUE {
                    return exec_err!("delta_histogram: value must be a finite time in ns within ±9.2e18, got {x:e}");
                }
                let rank = ranks.and_then(|r| r.is_valid(i).then(|| r.value(i)));
                self.0.add(x, rank);
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(s) = states.first() else { return Ok(()) };
        let s: &BinaryArray = s.as_binary::<i32>();
        for i in 0..s.len() {
            if s.is_valid(i) {
                match Histogram::decode(s.value(i)) {
                    Some(h) => self.0.merge(&h),
                    None => return exec_err!("delta_histogram: a partial state could not be read"),
                }
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.0.encode()))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let h = &self.0;
        let b = &h.bins;
        let bins = StructArray::try_new(
            bin_fields(),
            vec![
                Arc::new(Float64Array::from_iter_values(b.iter().map(|x| x.lo))),
                Arc::new(Float64Array::from_iter_values(b.iter().map(|x| x.hi))),
                Arc::new(Int64Array::from_iter_values(b.iter().map(|x| x.count as i64))),
                Arc::new(Float64Array::from_iter_values(b.iter().map(|x| x.mean))),
                Arc::new(Float64Array::from_iter_values(b.iter().map(|x| x.variance()))),
            ],
            None,
        )?;
        let list = ListArray::try_new(
            Arc::new(Field::new("item", DataType::Struct(bin_fields()), false)),
            OffsetBuffer::from_lengths([b.len()]),
            Arc::new(bins),
            None,
        )?;
        let known = |v: f64| (h.count > 0).then_some(v);
        let row = StructArray::try_new(
            result_fields(),
            vec![
                Arc::new(Int64Array::from(vec![h.count as i64])),
                Arc::new(Float64Array::from(vec![h.total])),
                Arc::new(Float64Array::from(vec![known(h.min)])),
                Arc::new(Float64Array::from(vec![known(h.max)])),
                Arc::new(Int64Array::from(vec![h.min_rank])),
                Arc::new(Int64Array::from(vec![h.max_rank])),
                Arc::new(list),
            ],
            None,
        )?;
        Ok(ScalarValue::Struct(Arc::new(row)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.0.bins.capacity() * std::mem::size_of::<histogram::Bin>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Schema;

    fn calls(rows: &[(i64, &str, i64, i64)]) -> Vec<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("rank", DataType::Int64, false),
            Field::new("region", DataType::Utf8, false),
            Field::new("start_ts", DataType::Int64, false),
            Field::new("end_ts", DataType::Int64, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ];
        vec![RecordBatch::try_new(schema, columns).unwrap()]
    }

    #[test]
    fn call_sites_after_the_same_call_are_kept_apart() {
        // Rank 0: main { solve { MPI_Recv, MPI_Send }, halo { MPI_Send }, MPI_Recv } and rank 1's
        // calls interleaved in the input: the two sends follow a receive but from different
        // call sites (solve and halo), so their paths differ.
        let b = calls(&[
            (0, "main", 0, 100),
            (1, "main", 0, 100),
            (0, "solve", 10, 40),
            (0, "MPI_Recv", 12, 20),
            (1, "MPI_Send", 5, 6),
            (0, "MPI_Send", 22, 30),
            (0, "halo", 50, 60),
            (0, "MPI_Send", 52, 58),
            (0, "MPI_Recv", 70, 80),
        ]);
        let (sig, table, names) = stack_signatures(&b, Nesting::Times { thread: None }).unwrap();
        let text = |row: usize| table.text(sig[row], &names);
        assert_eq!(text(3), "main/solve/MPI_Recv");
        assert_eq!(text(5), "main/solve/MPI_Send");
        assert_eq!(text(7), "main/halo/MPI_Send");
        assert_eq!(text(8), "main/MPI_Recv");
        assert_eq!(text(4), "main/MPI_Send");
        // The same from call_id and parent_id, listed children first.
        let ids: Vec<i64> = (0..9).collect();
        let parents = [None, None, Some(0), Some(2), Some(1), Some(2), Some(0), Some(6), Some(0)];
        let mut columns = b[0].columns().to_vec();
        columns.push(Arc::new(Int64Array::from(ids)));
        columns.push(Arc::new(Int64Array::from(parents.to_vec())));
        let mut fields: Vec<Field> = b[0].schema().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("call_id", DataType::Int64, false));
        fields.push(Field::new("parent_id", DataType::Int64, true));
        let with_ids = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let mut reversed: Vec<usize> = (0..9).rev().collect();
        reversed.rotate_left(3);
        let shuffled = vec![
            arrow::compute::take_record_batch(
                &with_ids,
                &arrow::array::UInt32Array::from(reversed.iter().map(|&i| i as u32).collect::<Vec<_>>()),
            )
            .unwrap(),
        ];
        let (sig2, table2, names2) =
            stack_signatures(&shuffled, Nesting::Parents { call_id: 4, parent_id: 5 }).unwrap();
        for (at, &row) in reversed.iter().enumerate() {
            assert_eq!(table2.text(sig2[at], &names2), text(row), "row {row}");
        }
    }
}
