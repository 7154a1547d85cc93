//! A commdb session: a DataFusion `SessionContext` in which every open trace is a schema
//! (`run2.messages`), the first one also the default schema (plain `messages`). It runs
//! commdb's own statements (ATTACH of traces and scheduler logs, DETACH, SET clock_correction)
//! and hands everything else to DataFusion.
//! Tables are registered as in-memory tables cut into 64 Ki-row slices spread over the
//! configured partitions, so scans run on every core without copying data.

pub mod checked;
pub mod checked_sum;
pub mod durations;
pub mod file_checks;
pub mod files;
pub mod information_schema;
pub mod joins_yield;
pub mod parts;
pub mod plan_node;
pub mod sql;
pub mod summarize;
pub mod trace_table;
pub mod unknown_names;

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};

use arrow::array::RecordBatch;
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::datasource::MemTable;
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};

use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use sqlparser::dialect::GenericDialect;

use crate::error::{Error, Result};
use crate::formats::open;
use crate::memory::default_memory_limit;
use crate::model::{self, CATALOG, DEFAULT_SCHEMA};
use crate::reading::csv::TimeUnit;
use crate::reading::{OpenOptions, default_name};
use crate::trace::Trace;
use crate::wallclock::{Notices, SharedStarts};
use sql::{Command, parse_command};
use trace_table::TraceTable;

/// What a statement produced.
#[derive(Debug)]
pub enum Outcome {
    /// A query (or DDL) to execute; DataFusion plans it lazily.
    Query(DataFrame),
    /// A commdb statement that has been carried out, with a message for the user.
    Done(String),
}

/// A SQL session over zero or more traces.
pub struct Session {
    ctx: SessionContext,
    /// The default catalog, where each trace is a schema.
    catalog: Arc<dyn datafusion::catalog::CatalogProvider>,
    /// The catalogs, without the wrapper that resolves data files' paths as tables (which
    /// holds the context it was made for).
    catalogs: Arc<dyn datafusion::catalog::CatalogProviderList>,
    traces: BTreeMap<String, Arc<Trace>>,
    default_trace: Option<String>,
    /// Scheduler logs and CSV files attached as plain tables, with the file each was read from.
    tables: BTreeMap<String, std::path::PathBuf>,
    /// Absolute start of every trace, read by `wallclock()`.
    starts: SharedStarts,
    /// Warnings raised by SQL functions while a statement runs.
    notices: Notices,
    /// Options used by ATTACH when the statement gives none.
    pub open_options: OpenOptions,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("traces", &self.traces.keys().collect::<Vec<_>>())
            .field("default_trace", &self.default_trace)
            .finish_non_exhaustive()
    }
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Session {
    /// A session with as many partitions as cores and the default memory budget.
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Self::with_limits(cores, Some(default_memory_limit()))
    }

    /// A session with a fixed number of partitions (tests use this for determinism) and no
    /// memory budget.
    pub fn with_partitions(partitions: usize) -> Self {
        Self::with_limits(partitions, None)
    }

    /// A session with `partitions` and, when given, a memory budget in bytes for what queries
    /// hold while they run (sorts, joins, aggregations, repartitions): past it a query fails
    /// with an error naming the budget instead of the process being killed. The trace tables
    /// themselves are not counted.
    pub fn with_limits(partitions: usize, memory_limit: Option<usize>) -> Self {
        let mut config = SessionConfig::new()
            // The session registers its own information_schema (see `describe_table_functions`).
            .with_information_schema(false)
            .with_target_partitions(partitions.max(1))
            .with_default_catalog_and_schema(CATALOG, DEFAULT_SCHEMA);
        // Planning errors name their place in the statement (shown with a caret by the shell).
        config.options_mut().sql_parser.collect_spans = true;
        // DataFusion 55's dynamic filter for MIN and MAX is built from the aggregates it
        // supports and applied to the scan they share, so it prunes row groups that another
        // aggregate of the same query still needs: over a store, `SELECT min(send_ts),
        // max(coalesce(recv_ts, send_ts)) FROM messages` gave a different wrong maximum from run
        // to run (apache/datafusion#24816, fixed after 55). Off until a fixed release.
        config.options_mut().optimizer.enable_aggregate_dynamic_filter_pushdown = false;
        // Each call of a table function carries its own identity in its schema's metadata
        // (commdb_udfs::plan::CALL_ID). A join of two calls merges the two identities under
        // one key, the logical plan keeping one and the physical plan the other, and DataFusion
        // 55 refuses an aggregation over such a join as a planner bug ("schema metadata
        // differs"): `SELECT count(*) FROM wait_states() a, wait_states() b` failed. The check
        // compares what the two plans say about the same columns; only the identity differs.
        config.options_mut().execution.skip_physical_aggregate_schema_check = true;
        // Table functions find the notices through the session's configuration.
        let notices = Notices::default();
        let config = config.with_extension(Arc::new(notices.clone()));
        use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
        use datafusion::execution::runtime_env::RuntimeEnvBuilder;
        let runtime = |spill: bool| {
            let mut b = RuntimeEnvBuilder::new();
            if let Some(limit) = memory_limit {
                b = b.with_memory_limit(limit, 1.0);
            }
            if !spill {
                b = b.with_disk_manager_builder(DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled));
            }
            b.build_arc()
        };
        // Without a usable temporary directory queries cannot spill, but the budget still holds.
        let ctx = match runtime(true).or_else(|_| runtime(false)) {
            Ok(rt) => SessionContext::new_with_config_rt(config, rt),
            Err(_) => SessionContext::new_with_config(config),
        };
        // Durations as text next to a time column are nanoseconds (see `durations`), read before
        // type coercion; integer +, - and * fail on overflow instead of wrapping (see
        // `checked`), after it.
        let ctx = {
            let mut builder = datafusion::execution::SessionStateBuilder::new_from_existing(ctx.state());
            if let Some(analyzer) = builder.analyzer().as_mut() {
                durations::install_first(analyzer);
                analyzer.rules.push(Arc::new(checked::CheckedArithmetic));
            }
            // Joins yield between batches, so that a cancelled query stops (see `joins_yield`).
            if let Some(physical) = builder.physical_optimizers().as_mut() {
                physical.rules.push(Arc::new(joins_yield::JoinsYield));
            }
            SessionContext::new_with_state(builder.build())
        };
        // A data file's path may stand for a table: `SELECT * FROM 'jobs.parquet'` (CSV, JSON
        // and Parquet, by extension), as in duckdb. The wrapper that resolves such paths cannot
        // remove schemas, so the session keeps the catalog itself for ATTACH and DETACH.
        let catalog = ctx.catalog(CATALOG).expect("the default catalog");
        let catalogs = ctx.state().catalog_list().clone();
        let ctx = files::by_path(ctx);
        let mut session = Session {
            ctx,
            catalog,
            catalogs,
            traces: BTreeMap::new(),
            default_trace: None,
            tables: BTreeMap::new(),
            starts: SharedStarts::default(),
            notices,
            open_options: OpenOptions::default(),
        };
        session.describe_table_functions(Vec::new());
        session
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Plan and run the session's statements in `state` from now on (a cluster's client state,
    /// made from this session's own: same catalog, functions and options).
    pub fn set_state(&mut self, state: datafusion::execution::SessionState) {
        let state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
            .with_catalog_list(self.catalogs.clone())
            .build();
        self.ctx = files::by_path(SessionContext::new_with_state(state));
    }

    /// The traces' absolute start times, shared with SQL functions.
    pub fn starts(&self) -> SharedStarts {
        self.starts.clone()
    }

    /// Where SQL functions leave warnings for the user.
    pub fn notices(&self) -> Notices {
        self.notices.clone()
    }

    /// The warnings raised since the last call (the shell prints them after each statement).
    pub fn take_notices(&self) -> Vec<String> {
        self.notices.take()
    }

    /// Open traces by schema name.
    pub fn traces(&self) -> impl Iterator<Item = (&str, &Trace)> {
        self.traces.iter().map(|(n, t)| (n.as_str(), t.as_ref()))
    }

    pub fn trace(&self, name: &str) -> Option<&Trace> {
        self.traces.get(name).map(Arc::as_ref)
    }

    /// The trace whose tables are in the default schema.
    pub fn default_trace(&self) -> Option<&Trace> {
        self.default_trace.as_deref().and_then(|n| self.trace(n))
    }

    /// Refuse writing `target` (by `what`: `-o`, `COPY`, ...) when it is, or is inside, a file
    /// or directory an attached trace or table is read from: an OTF2 archive's anchor,
    /// definitions and event files, a Paraver trace's .prv, .pcf and .row, a CSV file, a store's
    /// directory (also a cache store a trace is read through), a scheduler log.
    pub fn refuse_overwrite(&self, target: &std::path::Path, what: &str) -> Result<()> {
        let traces =
            self.traces.iter().flat_map(|(name, t)| crate::writing::files_read(t).into_iter().map(move |p| (name, p)));
        let tables = self.tables.iter().map(|(name, p)| (name, p.clone()));
        for (name, input) in traces.chain(tables) {
            if crate::writing::overwrites(target, &input) {
                return Err(Error::argument(format!(
                    "{what}: {} is {} {name} is read from; write elsewhere",
                    target.display(),
                    if input.is_dir() { "inside the directory" } else { "the file" },
                )));
            }
        }
        Ok(())
    }

    /// Open the trace at `path` and register it; returns its schema name.
    pub fn open(&mut self, path: &str, name: Option<&str>, options: &OpenOptions) -> Result<String> {
        let name = name.map_or_else(|| default_name(path), str::to_string);
        self.check_free(&name)?;
        let trace = open(path, options)?;
        self.attach(trace, Some(&name))
    }

    /// Register a trace as schema `name` (default: its own name); the first trace also fills
    /// the default schema.
    pub fn attach(&mut self, mut trace: Trace, name: Option<&str>) -> Result<String> {
        let name = name.map_or_else(|| trace.meta.name.clone(), str::to_string);
        let name = if name.is_empty() { "trace".to_string() } else { name };
        self.check_free(&name)?;
        trace.rename(&name)?;
        let schema = Arc::new(MemorySchemaProvider::new());
        let partitions = self.ctx.copied_config().target_partitions();
        let trace = Arc::new(trace);
        let provider = |t: &model::TableDoc| Arc::new(TraceTable::new(trace.clone(), t.name, t.schema(), partitions));
        for t in model::TABLES {
            schema.register_table(t.name.to_string(), provider(t))?;
        }
        self.catalog.register_schema(&name, schema)?;
        if self.default_trace.is_none() {
            for t in model::TABLES {
                self.ctx.register_table(t.name, provider(t))?;
            }
            self.default_trace = Some(name.clone());
        }
        let is_default = self.default_trace.as_deref() == Some(name.as_str());
        self.starts.write().unwrap_or_else(PoisonError::into_inner).insert(
            &name,
            trace.meta.start_wallclock_ns,
            is_default,
        );
        self.traces.insert(name.clone(), trace);
        Ok(name)
    }

    /// Remove a trace's schema (and its tables from the default schema if it was the default).
    pub fn detach(&mut self, name: &str) -> Result<()> {
        if self.traces.remove(name).is_none() {
            let open: Vec<&str> = self.traces.keys().map(String::as_str).collect();
            return Err(Error::argument(format!(
                "DETACH: no trace is attached as '{name}' (attached: {})",
                if open.is_empty() { "none".to_string() } else { open.join(", ") }
            )));
        }
        self.catalog.deregister_schema(name, true)?;
        self.starts.write().unwrap_or_else(PoisonError::into_inner).remove(name);
        if self.default_trace.as_deref() == Some(name) {
            for t in model::TABLES {
                self.ctx.deregister_table(t.name)?;
            }
            self.default_trace = None;
        }
        Ok(())
    }

    fn check_free(&self, name: &str) -> Result<()> {
        if name.eq_ignore_ascii_case(DEFAULT_SCHEMA) || name.eq_ignore_ascii_case("information_schema") {
            return Err(Error::argument(format!("'{name}' is reserved; choose another name with AS")));
        }
        if self.traces.contains_key(name) {
            return Err(Error::argument(format!(
                "a trace is already attached as '{name}'; DETACH it first or choose another name with AS"
            )));
        }
        Ok(())
    }

    /// Run one statement: commdb's own, or SQL planned by DataFusion.
    pub async fn statement(&mut self, sql: &str) -> Result<Outcome> {
        match parse_command(sql)? {
            Some(Command::Attach { path, name, options }) => {
                let log = options
                    .iter()
                    .find(|(k, _)| k == "TYPE" || k == "FORMAT")
                    .and_then(|(_, v)| crate::jobs::LogKind::from_type(v));
                if let Some(kind) = log {
                    return self.attach_log(&path, name.as_deref(), kind, &options);
                }
                if options.iter().any(|(k, v)| (k == "TYPE" || k == "FORMAT") && v.eq_ignore_ascii_case("table")) {
                    return self.attach_table(&path, name.as_deref(), &options);
                }
                let opts = self.attach_options(&options)?;
                let name = self.open(&path, name.as_deref(), &opts)?;
                let trace = self.trace(&name).expect("just attached");
                Ok(Outcome::Done(format!(
                    "attached {path} as {name}: {}{}",
                    opened_summary(trace),
                    warning_summary(trace)
                )))
            }
            Some(Command::SetClockCorrection { value }) => {
                self.open_options.clock_correction = value.parse()?;
                Ok(Outcome::Done(format!(
                    "clock correction for traces attached from now on: {}",
                    self.open_options.clock_correction.name()
                )))
            }
            Some(Command::Detach { name }) if self.tables.contains_key(&name) => {
                self.ctx.deregister_table(name.as_str())?;
                self.tables.remove(&name);
                Ok(Outcome::Done(format!("detached {name}")))
            }
            Some(Command::Detach { name }) => {
                self.detach(&name)?;
                Ok(Outcome::Done(format!("detached {name}")))
            }
            Some(Command::Summarize { query, shift }) => {
                let input = self.plan(&query).await.map_err(|e| e.shifted(shift))?;
                Ok(Outcome::Query(summarize::summarize(&self.ctx, input).await?))
            }
            None => Ok(Outcome::Query(self.plan(sql).await?)),
        }
    }

    /// Describe table functions in information_schema.routines and .parameters (and so in
    /// `SHOW FUNCTIONS`), once they are registered.
    pub fn describe_table_functions(&mut self, routines: Vec<information_schema::RoutineDoc>) {
        let state = self.ctx.state();
        let schema = information_schema::InformationSchema::new(
            state.catalog_list().clone(),
            state.table_functions().clone(),
            CATALOG,
            DEFAULT_SCHEMA,
            routines,
        );
        let _ = self.catalog.register_schema(information_schema::NAME, Arc::new(schema));
    }

    /// Plan a SQL statement; one the engine refuses because it names a table, table function or
    /// data file that does not exist says which (`unknown_names`).
    async fn plan(&self, sql: &str) -> Result<DataFrame> {
        match self.plan_statement(sql).await {
            Err(e @ (Error::Plan(_) | Error::Sql { .. })) => {
                Err(unknown_names::first_unknown(&self.ctx, sql).unwrap_or(e))
            }
            planned => planned,
        }
    }

    /// Plan a SQL statement, rewriting named arguments of commdb's table functions and
    /// durations added to time columns.
    async fn plan_statement(&self, sql: &str) -> Result<DataFrame> {
        let copies = sql.to_ascii_lowercase().contains("copy");
        // A string added to or subtracted from something may be a duration (`durations`).
        let arithmetic = sql.contains('\'') && (sql.contains('+') || sql.contains('-'));
        if !copies && !arithmetic {
            return Ok(self.ctx.sql(sql).await?);
        }
        let mut statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
        if statements.len() != 1 {
            return Ok(self.ctx.sql(sql).await?);
        }
        let mut statement = statements.pop_front().expect("one statement");
        let mut copy_to = None;
        if let DFStatement::CopyTo(copy) = &statement {
            check_copy_target(&copy.target)?;
            check_copy_format(copy.stored_as.as_deref())?;
            let target = copy.target.strip_prefix("file://").unwrap_or(&copy.target).to_string();
            self.refuse_overwrite(std::path::Path::new(&target), "COPY")?;
            copy_to = Some(target);
        }
        match &mut statement {
            DFStatement::Statement(s) => {
                durations::rewrite_arithmetic(s.as_mut())?;
            }
            DFStatement::Explain(e) => {
                if let DFStatement::Statement(s) = e.statement.as_mut() {
                    durations::rewrite_arithmetic(s.as_mut())?;
                }
            }
            DFStatement::CopyTo(copy) => {
                if let datafusion::sql::parser::CopyToSource::Query(query) = &mut copy.source {
                    durations::rewrite_arithmetic(query.as_mut())?;
                }
            }
            _ => {}
        }
        let plan = self.ctx.state().statement_to_plan(statement).await?;
        if let Some(target) = copy_to {
            refuse_copy_over_its_input(&plan, std::path::Path::new(&target))?;
        }
        Ok(self.ctx.execute_logical_plan(plan).await?)
    }

    /// Run a statement and collect its result (convenience for tests and scripts).
    pub async fn collect(&mut self, sql: &str) -> Result<Vec<RecordBatch>> {
        match self.statement(sql).await? {
            Outcome::Query(df) => Ok(df.collect().await?),
            Outcome::Done(_) => Ok(Vec::new()),
        }
    }

    /// `ATTACH 'file' AS name (TYPE sacct|swf)`: a scheduler log as table `name`.
    fn attach_log(
        &mut self,
        path: &str,
        name: Option<&str>,
        kind: crate::jobs::LogKind,
        options: &[(String, String)],
    ) -> Result<Outcome> {
        let name = self.table_name(path, name, options, "a scheduler log")?;
        let batch = crate::jobs::read(std::path::Path::new(path), kind)?;
        self.register_plain_table(path, name, batch)
    }

    /// `ATTACH 'file.csv' AS name (TYPE table)`: any CSV with a header as table `name`.
    fn attach_table(&mut self, path: &str, name: Option<&str>, options: &[(String, String)]) -> Result<Outcome> {
        let name = self.table_name(path, name, options, "a CSV table")?;
        let batch = crate::reading::csv::table::read(std::path::Path::new(path))?;
        self.register_plain_table(path, name, batch)
    }

    /// The name a plain table gets, checked to be free; only TYPE applies to plain tables.
    fn table_name(&self, path: &str, name: Option<&str>, options: &[(String, String)], what: &str) -> Result<String> {
        if let Some((key, _)) = options.iter().find(|(k, _)| k != "TYPE" && k != "FORMAT") {
            return Err(Error::argument(format!("ATTACH: option {key} does not apply to {what}")));
        }
        let name = name.map_or_else(|| default_name(path), str::to_string);
        if self.ctx.table_exist(name.as_str())? {
            return Err(Error::argument(format!(
                "a table named '{name}' already exists; DETACH it or choose another name with AS"
            )));
        }
        Ok(name)
    }

    fn register_plain_table(&mut self, path: &str, name: String, batch: RecordBatch) -> Result<Outcome> {
        let rows = batch.num_rows();
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        self.ctx.register_table(name.as_str(), Arc::new(table))?;
        self.tables.insert(name.clone(), path.into());
        Ok(Outcome::Done(format!("attached {path} as table {name}: {rows} records")))
    }

    fn attach_options(&self, options: &[(String, String)]) -> Result<OpenOptions> {
        let mut o = self.open_options.clone();
        for (key, value) in options {
            match key.as_str() {
                "TYPE" | "FORMAT" => o.format = Some(value.to_ascii_lowercase()),
                "NODES" => o.nodes = Some(value.into()),
                "TIME_UNIT" => o.time_unit = Some(value.parse::<TimeUnit>()?),
                "CLOCK_CORRECTION" => o.clock_correction = value.parse()?,
                "CLOCK_SYNC" => o.clock_sync = Some(value.into()),
                other => {
                    return Err(Error::argument(format!(
                        "ATTACH: unknown option {other}; expected TYPE, NODES, TIME_UNIT, CLOCK_CORRECTION or CLOCK_SYNC"
                    )));
                }
            }
        }
        Ok(o)
    }
}

/// Refuse a COPY whose query reads the file it writes (`COPY (SELECT * FROM 'a.csv') TO
/// 'a.csv'`, or through a table over files): the file would be replaced while it is read.
fn refuse_copy_over_its_input(plan: &datafusion::logical_expr::LogicalPlan, target: &std::path::Path) -> Result<()> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::datasource::listing::ListingTable;
    use datafusion::logical_expr::LogicalPlan;
    let mut read: Vec<std::path::PathBuf> = Vec::new();
    plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source)
            && let Some(listing) = provider.downcast_ref::<ListingTable>()
        {
            for url in listing.table_paths() {
                read.push(std::path::PathBuf::from(format!("/{}", url.prefix().as_ref())));
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    match read.iter().find(|input| crate::writing::overwrites(target, input)) {
        Some(input) => Err(Error::argument(format!(
            "COPY: {} is {} the query reads; write elsewhere",
            target.display(),
            if input.is_dir() { "inside the directory" } else { "the file" }
        ))),
        None => Ok(()),
    }
}

/// The formats COPY writes (`STORED AS`); anything else is an error, not a silent CSV.
fn check_copy_format(stored_as: Option<&str>) -> Result<()> {
    const WRITES: [&str; 4] = ["csv", "parquet", "json", "arrow"];
    match stored_as {
        Some(f) if !WRITES.contains(&f.to_ascii_lowercase().as_str()) => Err(Error::argument(format!(
            "COPY: STORED AS {f} is not a format COPY writes; expected CSV, PARQUET, JSON or ARROW"
        ))),
        _ => Ok(()),
    }
}

/// A COPY target must be a file (or, ending in '/', a directory) in a directory that exists and
/// can be written: COPY creates no parent directories, and fails at once where it could not
/// write instead of leaving the engine to try.
fn check_copy_target(target: &str) -> Result<()> {
    let target = target.strip_prefix("file://").unwrap_or(target);
    if let Some((scheme, _)) = target.split_once("://") {
        return Err(Error::argument(format!(
            "COPY: {target} is in an object store ({scheme}://), and commdb writes local files only"
        )));
    }
    let path = std::path::Path::new(target.trim_end_matches('/'));
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
        && !meta.is_dir()
    {
        return Err(Error::argument(format!(
            "COPY: {} is not a regular file (a device, pipe or socket); COPY writes files",
            path.display()
        )));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if parent.exists() && !parent.is_dir() {
        return Err(Error::argument(format!("COPY: {} is not a directory", parent.display())));
    }
    if !parent.is_dir() {
        return Err(Error::argument(format!(
            "COPY: {} does not exist (COPY writes into an existing directory; create it first)",
            parent.display()
        )));
    }
    let probe = parent.join(format!(".commdb-copy-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Error::argument(format!("COPY: cannot write in {}: {e}", parent.display()))),
    }
}

/// A size in bytes: a number with an optional unit K, M, G, T (powers of 1024; `KiB`, `GB`
/// and the like are read the same).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("'{t}': expected a size such as 8G, 512M or 1000000 (bytes)")),
    };
    let v: f64 =
        num.trim().parse().map_err(|_| format!("'{t}': expected a number with an optional unit K, M, G, T"))?;
    let bytes = v * scale;
    if !(1.0..9.0e18).contains(&bytes) {
        return Err(format!("'{t}': out of range"));
    }
    Ok(bytes as usize)
}

/// What opening a trace found: its ranks, and its events and messages when they are built
/// (a trace read from a source builds them when a query first uses them).
pub fn opened_summary(trace: &Trace) -> String {
    let ranks = trace.built_rows("ranks").unwrap_or(0);
    if let (Some(events), Some(messages)) = (trace.stored_file("events"), trace.stored_file("messages")) {
        return format!(
            "{ranks} ranks, {} events, {} messages (scanned in the store's files)",
            events.rows, messages.rows
        );
    }
    match (trace.built_rows("events"), trace.built_rows("messages")) {
        (Some(events), Some(messages)) => format!("{ranks} ranks, {events} events, {messages} messages"),
        (Some(events), None) => format!("{ranks} ranks, {events} events"),
        (None, Some(messages)) => format!("{ranks} ranks, {messages} messages"),
        _ => format!("{ranks} ranks (events and messages are built when a query first uses them)"),
    }
}

/// `", N warnings (see <name>.warnings)"` or nothing: the problems found so far.
pub fn warning_summary(trace: &Trace) -> String {
    let n = trace.warnings_so_far().total();
    if n == 0 { String::new() } else { format!("; {n} warning(s), see {}.warnings", trace.meta.name) }
}
