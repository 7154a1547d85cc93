//! `iteration_profile([rel => 'calls'], k => 3.5, marker => ...)`: per iteration of the run
//! (`iterations`), its duration from the first rank's start to the last rank's end, the spread
//! of its computation over the ranks, its waiting, and whether it is an outlier: longer than the
//! median iteration by more than k robust standard deviations (1.4826 times the median absolute
//! deviation over the iterations; with k = 3.5 this is Iglewicz and Hoaglin's modified z-score
//! rule). An outlier gets the rank that made it long, the one whose time in computation and MPI
//! (waiting left out) exceeds its own median over the iterations the most, and that rank's
//! region whose exclusive time in the iteration exceeds its mean per iteration the most (the
//! time no call inside the iteration covers counts as a region, `(no call)`: computation left
//! uninstrumented grows there). Ranks
//! that do not step together (two coupled applications, whose iterations `iterations` finds
//! from each rank's own calls) are profiled apart: a step group is the ranks whose iterations
//! end with the same region as many times, and each iteration, median and outlier is of one
//! group (most runs have one).
//!
//! The rows of `iterations` stream through a fold that keeps a number per rank and iteration
//! (`outliers`); the calls are read after, and only those of the outliers' slow ranks are
//! summed (`slow_region`), only when the query reads `slow_region`. It was a view over
//! `iterations` and the calls, whose window functions held every row of `iterations` (4.3 GB
//! at 1 B events).

mod outliers;
mod slow_region;

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringViewArray};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int64, text_view};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::plan::Main;
use commdb_analysis::relation::Relation;
use commdb_analysis::stream::{Folder, Mapper, StartFold};

use outliers::{Found, ITERATION_COLUMNS, StepFold};
use slow_region::{CALL_COLUMNS, SlowRegions};

pub const ITERATION_PROFILE: Function = Function {
    name: "iteration_profile",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
        param(
            "k",
            Type::Number { min: 0.0 },
            ParamDefault::Number(3.5),
            "an outlier is longer than the median iteration by more than k robust standard deviations",
        ),
        param(
            "marker",
            Type::Text,
            ParamDefault::Chosen("as iterations finds it"),
            "the region whose calls end an iteration",
        ),
    ],
    output: Output::Columns(&[
        col("iteration", int64, "the iteration, from 0").never_null(),
        col(
            "step_group",
            text_view,
            "the ranks that step together: whose iterations end with the same region as many times ('MPI_Allreduce x60'); most runs have one",
        )
        .never_null(),
        col("start_ts", int64, "when the first rank began it"),
        col("end_ts", int64, "when the last rank ended it"),
        col("duration_ns", int64, "end_ts - start_ts"),
        col("ranks", int64, "ranks that have the iteration").never_null(),
        col("mean_rank_ns", float64, "mean duration of a rank's iteration"),
        col("compute_spread_ns", int64, "most minus least computation of a rank in it (its imbalance)"),
        col("waiting_ns", int64, "waiting over its ranks"),
        col("outlier", boolean, "longer than the median iteration by more than k robust standard deviations"),
        col("slow_rank", int64, "an outlier's rank whose computation and MPI time exceeds its own median the most"),
        col(
            "slow_region",
            text_view,
            "that rank's region whose exclusive time exceeds its mean per iteration the most ('(no call)': the time no call in the iteration covers, uninstrumented computation)",
        ),
        col("excess_ns", float64, "that rank's computation and MPI time beyond its median"),
    ]),
    description: "per iteration: duration, spread of the computation over the ranks, waiting, and whether it is an outlier (longer than the median by more than k robust standard deviations); an outlier gets the rank and the region that made it long",
    make: Make::Table(iteration_profile),
};

arguments! {
    struct ProfileArgs(ITERATION_PROFILE) {
        rel: Relation,
        k: f64,
        marker: Option<String>,
    }
}

fn iteration_profile(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let ProfileArgs { rel, k, marker } = ProfileArgs::read(a)?;
    let marker = super::named_marker(a.function, marker)?;
    let ci = rel.columns(a.function, &CALL_COLUMNS)?;
    let iterations = super::iterations_of(a, rel.clone(), marker, None, None)?;
    let reference = TableReference::bare(format!("iterations of {}", rel.reference));
    let steps = Relation { reference, provider: Arc::new(iterations) };
    let ii = steps.columns(a.function, &ITERATION_COLUMNS)?;
    let out = a.schema();
    let schema = out.clone();
    let start: StartFold =
        Arc::new(move || Box::new(ProfileFold { schema: schema.clone(), steps: StepFold::new(k) }) as Box<dyn Folder>);
    let inputs = vec![(rel, Some(ci)), (steps, Some(ii))];
    // The calls are read only to name the slow regions.
    Ok(Arc::new(Derived::folded(out, inputs, Main::Batches, start).reading_only_for(0, "slow_region")?))
}

/// What `slow_region` names when the time no call inside the iteration covers grew the most
/// (computation left uninstrumented, or an enclosing region's own time).
pub const UNCOVERED: &str = "(no call)";

/// Folds the rows of `iterations` (input 1), then sums the calls (the main input).
struct ProfileFold {
    schema: SchemaRef,
    steps: StepFold,
}

impl Folder for ProfileFold {
    fn fold(&mut self, _input: usize, batch: &RecordBatch) -> Result<()> {
        self.steps.fold(batch)
    }

    fn held_bytes(&self) -> usize {
        self.steps.held_bytes()
    }

    fn into_mapper(self: Box<Self>) -> Result<Box<dyn Mapper>> {
        let ProfileFold { schema, steps } = *self;
        let found = steps.found()?;
        let regions = SlowRegions::new(&found.slow);
        Ok(Box::new(Profile { schema, found, regions }))
    }

    fn mapper_counts_the_fold(&self) -> bool {
        true
    }
}

/// Sums the slow ranks' calls, then gives a row per step.
struct Profile {
    schema: SchemaRef,
    found: Found,
    regions: SlowRegions,
}

impl Mapper for Profile {
    fn map(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.regions.add(batch)?;
        Ok(RecordBatch::new_empty(self.schema.clone()))
    }

    fn held_bytes(&self) -> usize {
        self.regions.held_bytes() + self.found.steps.capacity() * std::mem::size_of::<outliers::Step>()
    }

    fn finish(&mut self) -> Result<Vec<RecordBatch>> {
        let named = self.regions.regions();
        let Found { groups, steps, slow } = &self.found;
        let slow_of = |s: &outliers::Step| slow.get(&(s.group, s.iteration));
        let int = |f: &dyn Fn(&outliers::Step) -> Option<i64>| -> ArrayRef {
            Arc::new(steps.iter().map(f).collect::<Int64Array>())
        };
        let columns: Vec<ArrayRef> = vec![
            int(&|s| Some(s.iteration)),
            Arc::new(steps.iter().map(|s| Some(groups[s.group as usize].as_str())).collect::<StringViewArray>()),
            int(&|s| Some(s.start)),
            int(&|s| Some(s.end)),
            int(&|s| Some(s.duration())),
            int(&|s| Some(s.ranks)),
            Arc::new(steps.iter().map(|s| Some(s.mean_rank_ns())).collect::<Float64Array>()),
            int(&|s| Some(s.compute_max - s.compute_min)),
            int(&|s| Some(s.waiting as i64)),
            Arc::new(steps.iter().map(|s| Some(s.outlier)).collect::<BooleanArray>()),
            int(&|s| slow_of(s).map(|w| w.rank)),
            Arc::new(
                steps
                    .iter()
                    .map(|s| named.get(&(s.group, s.iteration)).and_then(|r| r.as_deref()))
                    .collect::<StringViewArray>(),
            ),
            Arc::new(steps.iter().map(|s| slow_of(s).map(|w| w.excess)).collect::<Float64Array>()),
        ];
        Ok(vec![RecordBatch::try_new(self.schema.clone(), columns)?])
    }
}
