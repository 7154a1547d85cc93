//! commdb-udfs: commdb's SQL functions for MPI trace analysis, in folders by family as the
//! sources group them: `clock` (Intel Trace Collector's clock correction, wall-clock time),
//! `latency` (PCLVis' latency criteria, process regions and latency trends), `causality`
//! (vector clocks, the dependency DAG), `lod` (Intel Trace Analyzer's level of detail),
//! `attribution` (PCLVis' attribution, remapping and the rank diagnosis), `replay` (ideal-network
//! replay), `deltas` (ScalaTrace's delta histograms), `waits` (Scalasca's wait states, MPI and
//! OpenMP), `critical` (Scalasca's critical path and delay costs), `runs` (iterations, runs
//! compared), `jobs` (scheduler logs and data files), `profiles` (summaries, profiles, call
//! tree, metrics), `threads` (OpenMP regions, locks, tasks) and `accelerators` (CASITA's offload
//! rules); `sweeps` holds the sweep of a rank's time that several of them share, `values` the
//! scalar functions. Each module declares its functions next to their code (commdb-analysis'
//! `Function`: parameters with types, defaults and meanings, output columns, how it is made);
//! `FUNCTIONS` is the one list that `register_all` registers and the shell's `\df`,
//! information_schema and docs/reference.md describe. Analysis table functions take the
//! relation to read as their first argument (default the trace's base table): a table or view
//! by name, a CTE or a parenthesised query, so users narrow time, ranks or regions with the SQL
//! they would write anyway.

pub mod accelerators;
pub mod attribution;
pub mod causality;
pub mod clock;
pub mod critical;
pub mod deltas;
pub(crate) mod external_sort;
pub mod jobs;
pub mod latency;
pub mod lod;
pub(crate) mod packed;
pub mod profiles;
pub mod reference;
pub mod replay;
pub mod runs;
pub(crate) mod spill;
pub mod sweeps;
pub mod threads;
pub mod values;
pub(crate) mod varint;
pub mod waits;

use std::sync::Arc;

use commdb_catalog::Session;
use datafusion::catalog::TableFunctionImpl;

use commdb_analysis::{declare, derived, plan, relation};

pub use commdb_analysis::declare::{Function, Kind};

/// Every function commdb registers, in the order the reference lists them.
const FUNCTIONS: &[&Function] = &[
    &clock::CLOCK_MODEL,
    &clock::CLOCK_VIOLATIONS,
    &latency::LATENCY_CRITERIA,
    &latency::MESSAGE_LATENCY,
    &latency::regions::PROCESS_DISTANCE,
    &latency::regions::PROCESS_REGIONS,
    &latency::regions::PROCESS_DENDROGRAM,
    &latency::regions::REGION_GRAPH,
    &causality::vector_clock::VECTOR_CLOCKS,
    &causality::vector_clock::HAPPENS_BEFORE,
    &causality::vector_clock::CONCURRENT,
    &causality::dag::DAG_NODES,
    &causality::dag::DAG_EDGES,
    &causality::balance::LOAD_BALANCE,
    &latency::trend::LATENCY_TREND,
    &attribution::ATTRIBUTION,
    &attribution::remap::REMAP_SUGGESTION,
    &profiles::summaries::COMM_MATRIX,
    &profiles::partners::COMM_PARTNERS,
    &profiles::summaries::MESSAGE_HISTOGRAM,
    &profiles::summaries::LOAD_IMBALANCE,
    &attribution::diagnosis::RANK_DIAGNOSIS,
    &profiles::TIME_PROFILE,
    &profiles::CALL_TREE,
    &profiles::counters::CALL_METRICS,
    &attribution::remap::REMAP_SUMMARY,
    &replay::IDEAL_REPLAY,
    &replay::TRANSFER_EFFICIENCY,
    &deltas::COMPUTE_DELTAS,
    &deltas::DELTA_HISTOGRAM,
    &waits::WAIT_STATES,
    &critical::CRITICAL_PATH,
    &critical::CRITICAL_PATH_PROFILE,
    &critical::delays::DELAY_COSTS,
    &runs::iterations::ITERATIONS,
    &runs::iterations::regions::ITERATION_REGIONS,
    &runs::iterations::profile::ITERATION_PROFILE,
    &threads::PARALLEL_REGIONS,
    &threads::LOCK_ACQUISITIONS,
    &threads::THREAD_TASKS,
    &accelerators::GPU_KERNELS,
    &accelerators::GPU_TRANSFERS,
    &accelerators::OFFLOAD_WAITS,
    &accelerators::OFFLOAD_BLAME,
    &accelerators::DEVICE_IDLE,
    &accelerators::GPU_UTILISATION,
    &runs::compare::COMPARE_RUNS,
    &runs::compare::scaling::SCALING,
    &lod::LOD_RESOLUTION,
    &lod::LOD_CALLS,
    &lod::LOD_MESSAGES,
    &lod::LOD_COLLECTIVES,
    &jobs::READ_SACCT,
    &jobs::READ_SWF,
    &jobs::SWF_HEADER,
    &jobs::files::READ_PARQUET,
    &jobs::files::READ_CSV,
    &jobs::EXPAND_HOSTLIST,
    &values::units::FORMAT_DURATION,
    &values::units::FORMAT_BYTES,
    &clock::wallclock::WALLCLOCK,
];

/// Every function commdb registers.
pub fn functions() -> &'static [&'static Function] {
    FUNCTIONS
}

/// The declaration of commdb's function `name`.
pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().copied().find(|f| f.name.eq_ignore_ascii_case(name))
}

/// A table function as DataFusion calls it: the arguments checked against its declaration,
/// the call planned, and an analysis' plan node named after it, with the call (and what
/// planning looked up) for another process to plan it again (commdb_analysis::recipe).
#[derive(Debug)]
struct Declared(&'static Function);

impl TableFunctionImpl for Declared {
    fn call_with_args(
        &self,
        args: datafusion::catalog::TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn datafusion::catalog::TableProvider>> {
        let declaration = self.0;
        let declare::Make::Table(plan) = declaration.make else {
            return datafusion::common::plan_err!("{}: not a table function", declaration.name);
        };
        // Relations the SQL planner planned (a query, a CTE: commdb_analysis::function_calls) are read by
        // name, in a session that knows them.
        let (exprs, planned) = relation::named_arguments(declaration.params, args.exprs());
        let with_arguments;
        let session: &dyn datafusion::catalog::Session = if planned.is_empty() {
            args.session()
        } else {
            with_arguments = relation::with_arguments(args.session(), declaration.name, planned)?;
            &with_arguments
        };
        let exprs = exprs.as_slice();
        let (provider, lookups) =
            relation::recording(session, declaration.name, |session| plan(&declaration.args(exprs, session)?))?;
        let provider = provider?;
        Ok(match provider.downcast_ref::<derived::Derived>() {
            Some(derived) => {
                let call = plan::Call { function: declaration, args: exprs.to_vec(), lookups, path: Vec::new() };
                Arc::new(derived.named(declaration.name).with_call(call))
            }
            None => provider,
        })
    }
}

/// Register every commdb function in the session from its declaration, with the parameter
/// names that named arguments use, and the catalog rows that describe the table functions.
pub fn register_all(session: &mut Session) {
    let budget = match session.context().runtime_env().memory_pool.memory_limit() {
        datafusion::execution::memory_pool::MemoryLimit::Finite(bytes) => bytes,
        _ => commdb_catalog::memory::default_memory_limit(),
    };
    session.set_state(commdb_analysis::node::planning_analyses(session.context().state()));
    values::bounded::register(session.context(), budget);
    commdb_analysis::remembered::remember_in(session.context());
    let _ = session
        .context()
        .register_relation_planner(Arc::new(commdb_analysis::function_calls::FunctionCalls { functions: FUNCTIONS }));
    for f in FUNCTIONS {
        match f.make {
            declare::Make::Table(_) => {
                session.context().register_udtf(f.name, Arc::new(Declared(f)));
            }
            declare::Make::Scalar(make) => session.context().register_udf(make(f, session)),
            declare::Make::Aggregate(make) => session.context().register_udaf(make(f)),
        }
    }
    session
        .describe_table_functions(FUNCTIONS.iter().filter(|f| f.kind() == Kind::Table).map(|f| f.routine()).collect());
}
