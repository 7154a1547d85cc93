//! The relations a table function reads: a name (`messages`, `run2.messages`, a view)
//! resolved in the session's catalogs while the query is planned, the one trace a relation was
//! cut from (looking through views), the span of a relation as a one-row input, and the
//! record of what planning looked up (`Lookups`, an extension of the session a call is planned
//! in), from which [`crate::recipe`] plans a call again on a cluster's executor.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{TableReference, plan_err};
use datafusion::datasource::provider_as_source;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};

/// A relation and the columns of it to read (None: all).
pub type Projected = (Relation, Option<Vec<usize>>);

/// A relation named in a function call, resolved in the session's catalogs.
#[derive(Debug, Clone)]
pub struct Relation {
    pub reference: TableReference,
    pub provider: Arc<dyn TableProvider>,
}

impl Relation {
    pub fn schema(&self) -> SchemaRef {
        self.provider.schema()
    }

    /// Indices of `columns` in the relation, or a planning error naming the missing one.
    pub fn columns(&self, function: &str, columns: &[&str]) -> Result<Vec<usize>> {
        let schema = self.schema();
        columns
            .iter()
            .map(|c| match schema.index_of(c) {
                Ok(i) => Ok(i),
                Err(_) => {
                    plan_err!("{function}: {} has no column '{c}' (it needs {})", self.described(), columns.join(", "))
                }
            })
            .collect()
    }

    /// The relation as a message names it: `relation 'messages'`, `the query for rel`,
    /// `CTE 'm'`.
    pub fn described(&self) -> String {
        match (self.reference.schema(), self.reference.table()) {
            (Some(ARGUMENTS), t) if t.starts_with(QUERY_FOR) => format!("the {t}"),
            (Some(ARGUMENTS), t) => format!("CTE '{t}'"),
            _ => format!("relation '{}'", self.reference),
        }
    }
}

/// The output of a future that planning needs at once (a table looked up in a schema, a
/// query planned for a view), or None when it is not ready. commdb's catalogs answer at once;
/// one that must wait (a file opened by DataFusion's URL tables, a remote catalog) is not
/// waited for inside the synchronous planning of a call: the caller says how to read it
/// instead (the statement's own FROM resolves it before planning starts).
pub fn ready<F: std::future::Future>(future: F) -> Option<F::Output> {
    futures::FutureExt::now_or_never(future)
}

/// The schema under which a call's planned relation arguments (a parenthesised query, a CTE)
/// are known by name while the call is planned (`with_arguments`): one no catalog has, so that
/// they shadow no table of the session.
pub const ARGUMENTS: &str = "argument";

/// A view and the name it is known by.
pub type NamedView = (String, Arc<dyn TableProvider>);

/// How the name of a query given as a relation argument starts (`query for rel`).
const QUERY_FOR: &str = "query for ";

/// The arguments of a call with each relation planned by the SQL planner (a parenthesised query
/// or a CTE, carried as a scalar subquery by [`crate::function_calls`]) replaced by a name in
/// `ARGUMENTS`, and the views those names stand for: a CTE's under its name, a query's as
/// `query for` its parameter.
pub fn named_arguments(params: &[crate::params::Param], exprs: &[Expr]) -> (Vec<Expr>, Vec<NamedView>) {
    let mut named: Vec<NamedView> = Vec::new();
    let exprs = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let relation = params.get(i).is_some_and(|p| p.ty == crate::params::Type::Relation);
            let Expr::ScalarSubquery(sq) = e else { return e.clone() };
            if !relation {
                return e.clone();
            }
            let plan = sq.subquery.as_ref().clone();
            let name = match &plan {
                LogicalPlan::SubqueryAlias(a) => a.alias.table().to_string(),
                _ => format!("{QUERY_FOR}{}", params[i].name),
            };
            if !named.iter().any(|(n, _)| *n == name) {
                named.push((name.clone(), Arc::new(datafusion::datasource::ViewTable::new(plan, None))));
            }
            Expr::Literal(
                datafusion::common::ScalarValue::Utf8(Some(format!("{}.{}", quote(ARGUMENTS), quote(&name)))),
                None,
            )
        })
        .collect();
    (exprs, named)
}

/// `session` (a commdb session's state) whose catalog also knows `views` by name in schema
/// `ARGUMENTS` of the default catalog: the session a call with planned relation arguments is
/// planned in, so that everything that finds a relation by its name (the call's own
/// arguments, the queries an analysis writes over them) finds them.
pub fn with_arguments(
    session: &dyn Session,
    function: &str,
    views: Vec<NamedView>,
) -> Result<datafusion::execution::SessionState> {
    use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
    use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
    let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
        return plan_err!("{function}: needs a commdb session to read a query or a CTE");
    };
    let arguments = Arc::new(MemorySchemaProvider::new());
    for (name, view) in views {
        arguments.register_table(name, view)?;
    }
    let catalog = state.config().options().catalog.default_catalog.clone();
    let catalogs = Arc::new(overlay::WithArguments { inner: state.catalog_list().clone(), catalog, arguments });
    Ok(SessionStateBuilder::new_from_existing(state.clone()).with_catalog_list(catalogs).build())
}

/// A session's catalogs with one more schema in the default catalog (`with_arguments`).
mod overlay {
    use std::sync::Arc;

    use datafusion::catalog::{CatalogProvider, CatalogProviderList, SchemaProvider};
    use datafusion::error::Result;

    #[derive(Debug)]
    pub struct WithArguments {
        pub inner: Arc<dyn CatalogProviderList>,
        pub catalog: String,
        pub arguments: Arc<dyn SchemaProvider>,
    }

    impl CatalogProviderList for WithArguments {
        fn register_catalog(
            &self,
            name: String,
            catalog: Arc<dyn CatalogProvider>,
        ) -> Option<Arc<dyn CatalogProvider>> {
            self.inner.register_catalog(name, catalog)
        }

        fn catalog_names(&self) -> Vec<String> {
            self.inner.catalog_names()
        }

        fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
            let inner = self.inner.catalog(name);
            if name != self.catalog {
                return inner;
            }
            Some(Arc::new(CatalogWithArguments { inner, arguments: self.arguments.clone() }))
        }
    }

    #[derive(Debug)]
    struct CatalogWithArguments {
        inner: Option<Arc<dyn CatalogProvider>>,
        arguments: Arc<dyn SchemaProvider>,
    }

    impl CatalogProvider for CatalogWithArguments {
        fn schema_names(&self) -> Vec<String> {
            let mut names = self.inner.as_ref().map(|c| c.schema_names()).unwrap_or_default();
            names.push(super::ARGUMENTS.to_string());
            names
        }

        fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
            if name == super::ARGUMENTS {
                return Some(self.arguments.clone());
            }
            self.inner.as_ref()?.schema(name)
        }

        fn register_schema(
            &self,
            name: &str,
            schema: Arc<dyn SchemaProvider>,
        ) -> Result<Option<Arc<dyn SchemaProvider>>> {
            match &self.inner {
                Some(inner) => inner.register_schema(name, schema),
                None => datafusion::common::plan_err!("no catalog to register schema '{name}' in"),
            }
        }
    }
}

/// Resolve a relation name (`messages`, `run2.messages`, a view) in the session.
pub fn resolve(session: &dyn Session, function: &str, name: &str) -> Result<Relation> {
    // A path is refused whatever its parts parse as (a directory named `.tmpAbC` splits it into
    // a catalog and a schema, other names leave it whole, which the engine's tables by URL
    // would read).
    if name.contains(['/', '\\']) && std::path::Path::new(name).exists() {
        return plan_err!(
            "{function}: '{name}' names a file, which a function reads through a query: give (SELECT * FROM '{name}') in its place"
        );
    }
    let reference = TableReference::from(name);
    let options = &session.config().options().catalog;
    let resolved = reference.clone().resolve(&options.default_catalog, &options.default_schema);
    let provider = session
        .catalog_list()
        .catalog(&resolved.catalog)
        .and_then(|c| c.schema(&resolved.schema))
        .map(|schema| ready(schema.table(&resolved.table)));
    let provider = match provider {
        None => None,
        Some(Some(found)) => found?,
        Some(None) => {
            return plan_err!(
                "{function}: '{name}' names a file, which a function reads through a query: give (SELECT * FROM '{name}') in its place"
            );
        }
    };
    match provider {
        Some(provider) => {
            let relation = Relation { reference, provider };
            note(session, Lookup::Relation(relation.clone()));
            Ok(relation)
        }
        None => plan_err!("{function}: no table or view named '{name}'"),
    }
}

/// The schema of the one trace whose tables a relation reads, looking through views (and
/// their subqueries): `Some("public")` for `messages` or a view over it, `Some("run2")` for
/// `run2.messages` or a view over that. None when the rows come from no trace (a table made
/// with CREATE TABLE AS, a CSV file) or from several. Analyses use it to measure a narrowed
/// relation against the whole trace it was cut from.
pub fn trace_schema(session: &dyn Session, relation: &Relation) -> Option<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    base_tables(session, &relation.reference, &relation.provider, &mut found, 0);
    found.sort();
    found.dedup();
    match found.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Views nest at most this deep before lineage gives up.
const MAX_VIEW_DEPTH: usize = 32;

/// The (catalog, schema) of every trace table `provider` reads, recursing into views.
fn base_tables(
    session: &dyn Session,
    reference: &TableReference,
    provider: &Arc<dyn TableProvider>,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::logical_expr::LogicalPlan;
    if depth > MAX_VIEW_DEPTH {
        return;
    }
    if let Some(view) = provider.downcast_ref::<datafusion::datasource::ViewTable>() {
        let _ = view.logical_plan().apply_with_subqueries(|plan| {
            if let LogicalPlan::TableScan(scan) = plan
                && let Ok(inner) = datafusion::datasource::source_as_provider(&scan.source)
            {
                base_tables(session, &scan.table_name, &inner, out, depth + 1);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        return;
    }
    let options = &session.config().options().catalog;
    let resolved = reference.clone().resolve(&options.default_catalog, &options.default_schema);
    let is_trace_table = commdb_catalog::model::TABLES.iter().any(|t| t.name == &*resolved.table);
    let schema = session.catalog_list().catalog(&resolved.catalog).and_then(|c| c.schema(&resolved.schema));
    if is_trace_table && schema.is_some_and(|s| s.table_exist("trace_info")) {
        note(session, Lookup::TraceSchema(resolved.catalog.to_string(), resolved.schema.to_string()));
        out.push((resolved.catalog.to_string(), resolved.schema.to_string()));
    }
}

/// The least of `lo` and the greatest of `hi` (expressions over the relation's columns, e.g.
/// `col("ts")`) over a relation, as an input of one row (lo, hi) aggregated as the relation
/// streams by: what an analysis must know before it reads the relation's rows (the span its
/// bins or slots cut).
pub fn bounds_of(relation: &Relation, lo: Expr, hi: Expr) -> Result<Projected> {
    use datafusion::functions_aggregate::expr_fn::{max, min};
    let plan =
        LogicalPlanBuilder::scan(relation.reference.clone(), provider_as_source(relation.provider.clone()), None)?
            .aggregate(Vec::<Expr>::new(), vec![min(lo).alias("lo"), max(hi).alias("hi")])?
            .build()?;
    let bounds = Relation {
        reference: TableReference::bare(format!("span of {}", relation.reference)),
        provider: Arc::new(datafusion::datasource::ViewTable::new(plan, None)),
    };
    Ok((bounds, None))
}

/// (lo, hi) as `bounds_of`'s input read them (None where the relation has no values).
pub fn bounds_read(batches: &[RecordBatch]) -> Result<(Option<i64>, Option<i64>)> {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for b in batches {
        let first = cast(b.column(0), &DataType::Int64)?;
        let last = cast(b.column(1), &DataType::Int64)?;
        if let Some(m) = arrow::compute::min(first.as_primitive::<Int64Type>()) {
            lo = Some(lo.map_or(m, |l| l.min(m)));
        }
        if let Some(m) = arrow::compute::max(last.as_primitive::<Int64Type>()) {
            hi = Some(hi.map_or(m, |h| h.max(m)));
        }
    }
    Ok((lo, hi))
}

/// A table of the trace in `schema` (as `trace_schema` returns it), resolved.
pub fn trace_table(session: &dyn Session, function: &str, schema: &(String, String), table: &str) -> Result<Relation> {
    resolve(session, function, &format!("{}.{}.{table}", quote(&schema.0), quote(&schema.1)))
}

/// An identifier quoted for a table reference.
pub fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// What planning a table function looked up in the session.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// A relation resolved by the name the call gave (or a trace table it derived a name for).
    Relation(Relation),
    /// A (catalog, schema) found to hold a trace, by its `trace_info` table.
    TraceSchema(String, String),
}

/// What planning one call looked up, each once: an extension of the session the call is
/// planned in (`recording`), so that the calls planned while it is (the analyses of a view of
/// SQL it writes) record their own in theirs.
#[derive(Debug, Default)]
pub struct Lookups(std::sync::Mutex<Vec<Lookup>>);

/// Run `plan` (a table function's planning) in a session of its own made from `session`, and
/// return what it looked up, each lookup once.
pub fn recording<T>(
    session: &dyn Session,
    function: &str,
    plan: impl FnOnce(&dyn Session) -> T,
) -> Result<(T, Vec<Lookup>)> {
    use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
    let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
        return plan_err!("{function}: needs a commdb session to be planned in");
    };
    let lookups = Arc::new(Lookups::default());
    let mut config = state.config().clone();
    config.set_extension(lookups.clone());
    let recorded = SessionStateBuilder::new_from_existing(state.clone()).with_config(config).build();
    let out = plan(&recorded);
    let found = std::mem::take(&mut *lookups.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    Ok((out, found))
}

/// Note a lookup for the call being planned in `session`, if it records them.
pub fn note(session: &dyn Session, lookup: Lookup) {
    let Some(lookups) = session.config().get_extension::<Lookups>() else { return };
    let mut current = lookups.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let seen = current.iter().any(|l| match (l, &lookup) {
        (Lookup::Relation(a), Lookup::Relation(b)) => a.reference == b.reference,
        (Lookup::TraceSchema(a, b), Lookup::TraceSchema(c, d)) => a == c && b == d,
        _ => false,
    });
    if !seen {
        current.push(lookup);
    }
}
