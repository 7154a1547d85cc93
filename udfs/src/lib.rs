//! commdb-udfs: commdb's SQL functions for MPI trace analysis, one module per family. Each
//! module declares its functions (`declare::Function`: parameters with types, defaults and
//! meanings, output columns, how it is made) next to their code; `functions()` is the one list
//! that `register_all` registers and the shell's `\df`, information_schema and
//! docs/reference.md describe. Analysis table functions
//! take the relation to read as their first argument (a table or view name, default the
//! trace's base table), so users narrow time, ranks or regions with an ordinary view.

pub mod attribution;
pub mod bounded;
pub mod budget;
pub mod by_rank;
pub mod call_paths;
pub mod causality;
pub mod clock;
pub mod common;
pub mod counters;
pub mod critical;
pub mod declare;
pub mod delays;
pub mod deltas;
pub mod diagnosis;
pub mod files;
pub mod jobs;
pub mod latency;
pub mod lod;
pub mod ordered;
pub mod plan;
pub mod profile;
pub mod recipe;
pub mod reference;
pub mod regions;
pub mod remap;
pub mod replay;
pub mod stream;
pub mod stretch_store;
pub mod stretches;
pub mod summaries;
pub mod trend;
pub mod units;
pub mod waits;
pub mod wallclock;

use std::sync::Arc;

use commdb_catalog::Session;
use datafusion::catalog::TableFunctionImpl;

pub use declare::{Function, Kind};

/// Every function commdb registers, in the order the reference lists them.
const FUNCTIONS: &[&Function] = &[
    &clock::CLOCK_MODEL,
    &clock::CLOCK_VIOLATIONS,
    &latency::LATENCY_CRITERIA,
    &latency::MESSAGE_LATENCY,
    &regions::PROCESS_DISTANCE,
    &regions::PROCESS_REGIONS,
    &regions::PROCESS_DENDROGRAM,
    &regions::REGION_GRAPH,
    &causality::vector_clock::VECTOR_CLOCKS,
    &causality::vector_clock::HAPPENS_BEFORE,
    &causality::vector_clock::CONCURRENT,
    &causality::dag::DAG_NODES,
    &causality::dag::DAG_EDGES,
    &causality::balance::LOAD_BALANCE,
    &trend::LATENCY_TREND,
    &attribution::ATTRIBUTION,
    &remap::REMAP_SUGGESTION,
    &summaries::COMM_MATRIX,
    &summaries::MESSAGE_HISTOGRAM,
    &summaries::LOAD_IMBALANCE,
    &diagnosis::RANK_DIAGNOSIS,
    &profile::TIME_PROFILE,
    &profile::CALL_TREE,
    &counters::CALL_METRICS,
    &remap::REMAP_SUMMARY,
    &replay::IDEAL_REPLAY,
    &replay::TRANSFER_EFFICIENCY,
    &deltas::COMPUTE_DELTAS,
    &deltas::DELTA_HISTOGRAM,
    &waits::WAIT_STATES,
    &critical::CRITICAL_PATH,
    &critical::CRITICAL_PATH_PROFILE,
    &delays::DELAY_COSTS,
    &lod::LOD_RESOLUTION,
    &lod::LOD_CALLS,
    &lod::LOD_MESSAGES,
    &lod::LOD_COLLECTIVES,
    &jobs::READ_SACCT,
    &jobs::READ_SWF,
    &jobs::SWF_HEADER,
    &files::READ_PARQUET,
    &files::READ_CSV,
    &jobs::EXPAND_HOSTLIST,
    &units::FORMAT_DURATION,
    &units::FORMAT_BYTES,
    &wallclock::WALLCLOCK,
];

/// Every function commdb registers.
pub fn functions() -> &'static [&'static Function] {
    FUNCTIONS
}

/// The declaration of commdb's function `name`.
pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().copied().find(|f| f.name.eq_ignore_ascii_case(name))
}

/// DataFusion's documentation of a commdb scalar or aggregate function, built once from its
/// declaration: what `SHOW FUNCTIONS` and `information_schema.routines` show.
pub fn documentation(declaration: &'static Function) -> Option<&'static datafusion::logical_expr::Documentation> {
    use datafusion::logical_expr::Documentation;
    static BUILT: std::sync::OnceLock<std::collections::HashMap<&'static str, Documentation>> =
        std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            FUNCTIONS.iter().filter(|f| f.kind() != Kind::Table).map(|f| (f.name, f.documentation())).collect()
        })
        .get(declaration.name)
}

/// A table function whose analyses' plan nodes carry its name.
#[derive(Debug)]
struct Named {
    name: &'static str,
    inner: Arc<dyn TableFunctionImpl>,
}

impl TableFunctionImpl for Named {
    fn call_with_args(
        &self,
        args: datafusion::catalog::TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn datafusion::catalog::TableProvider>> {
        let exprs = args.exprs().to_vec();
        let (provider, lookups) = recipe::recording(|| self.inner.call_with_args(args));
        let provider = provider?;
        Ok(match provider.downcast_ref::<common::Derived>() {
            Some(derived) => {
                let call = recipe::Call { function: self.name, args: exprs, lookups, path: Vec::new() };
                Arc::new(derived.named(self.name).with_call(call))
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
        _ => commdb_catalog::session::default_memory_limit(),
    };
    bounded::register(session.context(), budget);
    for f in FUNCTIONS {
        match f.make {
            declare::Make::Table(make) => {
                session.context().register_udtf(f.name, Arc::new(Named { name: f.name, inner: make() }));
                session.register_parameter_names(f.name, f.names());
            }
            declare::Make::Scalar(make) => session.context().register_udf(make(session)),
            declare::Make::Aggregate(make) => session.context().register_udaf(make()),
        }
    }
    session
        .describe_table_functions(FUNCTIONS.iter().filter(|f| f.kind() == Kind::Table).map(|f| f.routine()).collect());
}
