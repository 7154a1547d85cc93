//! An analysis as a recipe that another process can plan again: the function, its arguments
//! and every relation it looked up by name while it was planned. A table function's work is a
//! set of closures made from its arguments and its inputs' schemas; closures cannot cross the
//! network, so a distributed engine (a cluster's scheduler and executors) carries the call
//! instead and makes the closures again by calling the function once more, in a session whose
//! catalog answers each lookup with the relation the first planning found. This is how
//! DataFusion's own plans travel (datafusion-proto serialises an expression, never the code it
//! runs), applied to commdb's analyses.

use std::sync::Arc;

use datafusion::catalog::MemoryCatalogProviderList;
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider};
use datafusion::common::plan_err;
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;

use crate::derived::Derived;
use crate::plan::Call;
use crate::relation::Lookup;

/// Plan `call` again in a session made from `base` (commdb's functions registered) whose
/// catalog holds exactly what the call looked up, and return its table with the call
/// identity `call_id` ([`crate::plan::CALL_ID`]) the first planning gave it, its node asking
/// for each input whole (a distributed engine's task gets only its slice of the partitions
/// of an input otherwise).
pub fn plan_again(call: &Call, base: &SessionState, call_id: Option<&str>) -> Result<Derived> {
    let declaration = call.function;
    let crate::declare::Make::Table(plan) = declaration.make else {
        return plan_err!("{}: not a table function", declaration.name);
    };
    let session = session_for(base, &call.lookups)?;
    let provider = plan(&declaration.args(&call.args, &session)?)?;
    let Some(derived) = provider.downcast_ref::<Derived>() else {
        return plan_err!("{}: planned again, it is not an analysis", declaration.name);
    };
    let mut derived = distributed(derived.named(declaration.name).with_call(Call { path: Vec::new(), ..call.clone() }));
    for &input in &call.path {
        derived = match derived.input_analysis(input) {
            Some(inner) => inner.clone(),
            None => return plan_err!("{}: planned again, its input {input} is not an analysis", declaration.name),
        };
    }
    Ok(match call_id {
        Some(id) => derived.with_call_id(id),
        None => derived,
    })
}

/// `base` with a catalog list holding the relations of `lookups` under their names, and an
/// empty `trace_info` in every schema found to hold a trace.
fn session_for(base: &SessionState, lookups: &[Lookup]) -> Result<SessionState> {
    let options = base.config().options().catalog.clone();
    let catalogs = Arc::new(MemoryCatalogProviderList::new());
    let schema_of = |catalog: &str, schema: &str| -> Result<Arc<dyn SchemaProvider>> {
        use datafusion::catalog::CatalogProviderList;
        let c = match catalogs.catalog(catalog) {
            Some(c) => c,
            None => {
                let c: Arc<dyn CatalogProvider> = Arc::new(MemoryCatalogProvider::new());
                catalogs.register_catalog(catalog.to_string(), c.clone());
                c
            }
        };
        Ok(match c.schema(schema) {
            Some(s) => s,
            None => {
                let s: Arc<dyn SchemaProvider> = Arc::new(MemorySchemaProvider::new());
                c.register_schema(schema, s.clone())?;
                s
            }
        })
    };
    schema_of(&options.default_catalog, &options.default_schema)?;
    for lookup in lookups {
        match lookup {
            Lookup::Relation(r) => {
                let resolved = r.reference.clone().resolve(&options.default_catalog, &options.default_schema);
                let schema = schema_of(&resolved.catalog, &resolved.schema)?;
                if !schema.table_exist(&resolved.table) {
                    schema.register_table(resolved.table.to_string(), r.provider.clone())?;
                }
            }
            Lookup::TraceSchema(catalog, schema) => {
                let schema = schema_of(catalog, schema)?;
                if !schema.table_exist("trace_info") {
                    let info = commdb_catalog::model::TABLES.iter().find(|t| t.name == "trace_info");
                    if let Some(info) = info {
                        schema.register_table("trace_info".into(), Arc::new(EmptyTable::new(info.schema())))?;
                    }
                }
            }
        }
    }
    Ok(SessionStateBuilder::new_from_existing(base.clone()).with_catalog_list(catalogs).build())
}

/// `derived` for a distributed engine: its node asks for each input as one partition, and so do
/// the analyses it made as its inputs, directly or in views of SQL it reads (compare_runs'
/// samples read `iterations`).
pub fn distributed(derived: Derived) -> Derived {
    derived.for_distributed_engine(distributed_table)
}

/// `table` for a distributed engine: an analysis distributed, a view with the analyses it reads
/// distributed, anything else as it is.
fn distributed_table(
    table: &Arc<dyn datafusion::catalog::TableProvider>,
) -> Arc<dyn datafusion::catalog::TableProvider> {
    use datafusion::datasource::ViewTable;
    if let Some(inner) = table.downcast_ref::<Derived>() {
        return Arc::new(distributed(inner.clone()));
    }
    let Some(view) = table.downcast_ref::<ViewTable>() else { return table.clone() };
    let plan = crate::plans::replace_scans(view.logical_plan(), |inner| {
        let replaced = distributed_table(inner);
        (!Arc::ptr_eq(&replaced, inner)).then_some(replaced)
    });
    match plan {
        Ok(Some(plan)) => Arc::new(ViewTable::new(plan, view.definition().cloned())),
        _ => table.clone(),
    }
}
