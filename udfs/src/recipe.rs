//! An analysis as a recipe that another process can plan again: the function, its arguments
//! and every relation it looked up by name while it was planned. A table function's work is a
//! set of closures made from its arguments and its inputs' schemas; closures cannot cross the
//! network, so a distributed engine (a cluster's scheduler and executors) carries the call
//! instead and makes the closures again by calling the function once more, in a session whose
//! catalog answers each lookup with the relation the first planning found. This is how
//! DataFusion's own plans travel (datafusion-proto serialises an expression, never the code it
//! runs), applied to commdb's analyses.

use std::cell::RefCell;
use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider};
use datafusion::catalog::{MemoryCatalogProviderList, TableFunctionArgs};
use datafusion::common::plan_err;
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::Expr;

use crate::common::{Derived, Relation};

/// What planning a table function looked up in the session.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// A relation resolved by the name the call gave (or a trace table it derived a name for).
    Relation(Relation),
    /// A (catalog, schema) found to hold a trace, by its `trace_info` table.
    TraceSchema(String, String),
}

/// A call of a table function: its name, its arguments (literals, in their declared places)
/// and what it looked up; for an analysis that another one made as its input (the criteria
/// `message_latency` reads), the path of input numbers from the call down to it.
#[derive(Clone, Debug)]
pub struct Call {
    pub function: &'static str,
    pub args: Vec<Expr>,
    pub lookups: Vec<Lookup>,
    pub path: Vec<usize>,
}

impl Call {
    /// The call of this one's input `input`.
    pub fn nested(&self, input: usize) -> Call {
        let mut path = self.path.clone();
        path.push(input);
        Call { path, ..self.clone() }
    }
}

thread_local! {
    /// The lookups of the calls being planned on this thread, innermost last.
    static RECORDING: RefCell<Vec<Vec<Lookup>>> = const { RefCell::new(Vec::new()) };
}

/// Run `plan` (a table function's planning, which runs on one thread) and return what it
/// looked up, each lookup once.
pub fn recording<T>(plan: impl FnOnce() -> T) -> (T, Vec<Lookup>) {
    RECORDING.with(|r| r.borrow_mut().push(Vec::new()));
    let out = plan();
    let lookups = RECORDING.with(|r| r.borrow_mut().pop()).unwrap_or_default();
    (out, lookups)
}

/// Note a lookup for the call being planned, if one is recorded.
pub fn note(lookup: Lookup) {
    RECORDING.with(|r| {
        if let Some(current) = r.borrow_mut().last_mut() {
            let seen = current.iter().any(|l| match (l, &lookup) {
                (Lookup::Relation(a), Lookup::Relation(b)) => a.reference == b.reference,
                (Lookup::TraceSchema(a, b), Lookup::TraceSchema(c, d)) => a == c && b == d,
                _ => false,
            });
            if !seen {
                current.push(lookup);
            }
        }
    });
}

/// Plan `call` again in a session made from `base` (commdb's functions registered) whose
/// catalog holds exactly what the call looked up, and return its table with the call
/// identity `call_id` (crate::common::CALL_ID) the first planning gave it, its node asking
/// for each input whole (a distributed engine's task gets only its slice of the partitions
/// of an input otherwise).
pub fn plan_again(call: &Call, base: &SessionState, call_id: Option<&str>) -> Result<Derived> {
    let Some(declaration) = crate::function(call.function) else {
        return plan_err!("{}: not a commdb function", call.function);
    };
    let crate::declare::Make::Table(make) = declaration.make else {
        return plan_err!("{}: not a table function", call.function);
    };
    let session = session_for(base, &call.lookups)?;
    let provider = make().call_with_args(TableFunctionArgs::new(&call.args, &session))?;
    let Some(derived) = provider.downcast_ref::<Derived>() else {
        return plan_err!("{}: planned again, it is not an analysis", call.function);
    };
    let mut derived =
        derived.named(declaration.name).with_call(Call { path: Vec::new(), ..call.clone() }).distributed();
    for &input in &call.path {
        derived = match derived.input_analysis(input) {
            Some(inner) => inner.clone(),
            None => return plan_err!("{}: planned again, its input {input} is not an analysis", call.function),
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
