//! `commdb._native.Session`: a commdb session (the shell's engine, with every commdb function
//! registered) over the traces a Python program opens, its statements run by `engine`. The
//! package's `commdb.Trace` wraps it; the methods here are the ones that need the engine:
//! statements, attaching, the report, charts, export and writing files safely.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use commdb_catalog::Outcome;
use commdb_catalog::clock::Correction;
use commdb_catalog::reading::csv::TimeUnit;
use commdb_catalog::session::parse_size;
use commdb_catalog::{OpenOptions, Session as CatalogSession};
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::Mutex;

use crate::engine::Engine;
use crate::errors::{Class, Failure, from_engine};
use crate::result::Result as Rows;

type Shared = Arc<Mutex<CatalogSession>>;

#[pyclass(module = "commdb._native", name = "Session", frozen)]
#[derive(Debug)]
pub struct Session {
    session: Shared,
    engine: Engine,
    /// The memory budget for queries, in bytes.
    budget: usize,
}

/// A memory limit given as a size (`"8GiB"`, `"512M"`) or a number of bytes.
fn memory_limit(value: Option<&Bound<'_, PyAny>>) -> std::result::Result<usize, Failure> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(commdb_catalog::memory::default_memory_limit());
    };
    if let Ok(bytes) = value.extract::<u64>() {
        return if bytes == 0 {
            Err(Failure::argument("memory_limit: expected a positive size, got 0"))
        } else {
            Ok(bytes as usize)
        };
    }
    let text: String = value
        .extract()
        .map_err(|_| Failure::argument("memory_limit: expected a size such as '8GiB' or a number of bytes"))?;
    parse_size(&text).map_err(|e| Failure::argument(format!("memory_limit: {e}")))
}

fn path_option(name: &str, value: Option<&Bound<'_, PyAny>>) -> std::result::Result<Option<PathBuf>, Failure> {
    match value.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) => {
            let os = v
                .py()
                .import("os")
                .and_then(|os| os.call_method1("fspath", (v,)))
                .and_then(|p| p.extract::<String>())
                .map_err(|_| Failure::argument(format!("{name}: expected a path (str or os.PathLike)")))?;
            Ok(Some(PathBuf::from(os)))
        }
    }
}

impl Session {
    /// Plan and run `sql`, collecting its rows; the session is locked only while it plans.
    async fn statement(
        session: Shared,
        sql: String,
        budget: usize,
    ) -> std::result::Result<(Rows, Vec<String>), Failure> {
        let (outcome, notices) = {
            let mut s = session.lock().await;
            let notices = s.notices();
            let outcome = s.statement(&sql).await.map_err(Failure::from);
            (outcome, notices)
        };
        let rows = match outcome? {
            Outcome::Done(message) => Rows::done(message),
            Outcome::Query(df) => {
                let schema = Arc::new(df.schema().as_arrow().clone());
                let config = df.task_ctx().session_config().clone();
                let mut stream = match df.execute_stream().await {
                    Ok(stream) => stream,
                    Err(e) => return Err(from_engine(e, Some(budget), &config).await),
                };
                let mut batches = Vec::new();
                while let Some(batch) = stream.next().await {
                    match batch {
                        Ok(batch) => batches.push(batch),
                        Err(e) => return Err(from_engine(e, Some(budget), &config).await),
                    }
                }
                let schema = batches.first().map_or(schema, RecordBatch::schema);
                Rows::rows(schema, batches)
            }
        };
        Ok((rows, notices.take()))
    }

    /// Run `work` on the locked session.
    fn with_session<T: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut CatalogSession) -> std::result::Result<T, Failure> + Send + 'static,
    ) -> PyResult<T> {
        let session = self.session.clone();
        self.engine.run(py, async move {
            let mut s = session.lock().await;
            work(&mut s)
        })
    }
}

/// The trace attached as `name`, or the default one.
fn trace_named<'s>(
    s: &'s CatalogSession,
    name: Option<&str>,
) -> std::result::Result<&'s commdb_catalog::Trace, Failure> {
    match name {
        Some(n) => s.trace(n).ok_or_else(|| Failure::argument(format!("no trace is attached as '{n}'"))),
        None => s.default_trace().ok_or_else(|| Failure::argument("no trace is open")),
    }
}

/// Show the warnings commdb's functions raised as Python warnings (`commdb.Warning`).
fn warn(py: Python<'_>, notices: Vec<String>) -> PyResult<()> {
    if notices.is_empty() {
        return Ok(());
    }
    let category = py.import("commdb.errors")?.getattr("Warning")?;
    let warnings = py.import("warnings")?;
    for text in notices {
        warnings.call_method1("warn", (text, &category, 3))?;
    }
    Ok(())
}

#[pymethods]
impl Session {
    /// A session with commdb's functions and, when `path` is given, that trace open as the
    /// default schema. The options are the shell's: `clock_correction` ('model', 'off' or
    /// 'clc'), `nodes` (a rank,node CSV), `memory_limit` (for what queries hold), `time_unit`
    /// of CSV traces and `clock_sync` (a CSV of sync samples).
    #[new]
    #[pyo3(signature = (path = None, *, name = None, clock_correction = "model", nodes = None, memory_limit = None, time_unit = None, clock_sync = None, demo = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
        clock_correction: &str,
        nodes: Option<&Bound<'_, PyAny>>,
        memory_limit: Option<&Bound<'_, PyAny>>,
        time_unit: Option<&str>,
        clock_sync: Option<&Bound<'_, PyAny>>,
        demo: bool,
    ) -> PyResult<Self> {
        let fail = |f: Failure| f.into_py(py);
        let budget = self::memory_limit(memory_limit).map_err(fail)?;
        let correction: Correction = clock_correction
            .parse()
            .map_err(|e: commdb_catalog::Error| fail(Failure::argument(format!("clock_correction: {e}"))))?;
        let time_unit: Option<TimeUnit> = match time_unit {
            None => None,
            Some(t) => {
                Some(t.parse().map_err(|e: commdb_catalog::Error| fail(Failure::argument(format!("time_unit: {e}"))))?)
            }
        };
        let options = OpenOptions {
            nodes: path_option("nodes", nodes).map_err(fail)?,
            time_unit,
            clock_correction: correction,
            clock_sync: path_option("clock_sync", clock_sync).map_err(fail)?,
            memory_budget: Some(budget as u64),
            ..OpenOptions::default()
        };
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let mut session = CatalogSession::with_limits(cores, Some(budget));
        commdb_udfs::register_all(&mut session);
        session.open_options = options;
        let this = Session { session: Arc::new(Mutex::new(session)), engine: Engine::new().map_err(fail)?, budget };
        let path = path_option("path", path).map_err(fail)?;
        match (path, demo) {
            (Some(_), true) => return Err(fail(Failure::argument("give a trace path or demo=True, not both"))),
            (Some(p), false) => {
                let p = p.display().to_string();
                this.with_session(py, move |s| {
                    let options = s.open_options.clone();
                    s.open(&p, name.as_deref(), &options).map(drop).map_err(Failure::from)
                })?;
            }
            (None, true) => {
                this.with_session(py, move |s| {
                    let trace = commdb_catalog::generate::demo(s.open_options.clock_correction)?;
                    s.attach(trace, Some(name.as_deref().unwrap_or("demo"))).map(drop).map_err(Failure::from)
                })?;
            }
            (None, false) => {}
        }
        Ok(this)
    }

    /// Run one SQL statement (or commdb's ATTACH, DETACH, SET, SUMMARIZE) and return its rows.
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<Rows> {
        let (rows, notices) = self.engine.run(py, Self::statement(self.session.clone(), query, self.budget))?;
        warn(py, notices)?;
        Ok(rows)
    }

    /// Open the trace at `path` as schema `name` (default: from its file name), with the
    /// session's options; returns the name.
    #[pyo3(signature = (path, name = None))]
    fn attach(&self, py: Python<'_>, path: &Bound<'_, PyAny>, name: Option<String>) -> PyResult<String> {
        let path = path_option("path", Some(path)).map_err(|f| f.into_py(py))?.expect("a path").display().to_string();
        self.with_session(py, move |s| {
            let options = s.open_options.clone();
            s.open(&path, name.as_deref(), &options).map_err(Failure::from)
        })
    }

    /// Let the trace attached as `name` go (the name as given, not parsed as SQL).
    fn detach(&self, py: Python<'_>, name: String) -> PyResult<()> {
        self.with_session(py, move |s| Ok(s.detach(&name)?))
    }

    /// The names of the attached traces; the default one first.
    fn traces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with_session(py, |s| {
            let default = s.default_trace().map(|t| t.meta.name.clone());
            let mut names: Vec<String> = s.traces().map(|(n, _)| n.to_string()).collect();
            names.sort_by_key(|n| Some(n) != default.as_ref());
            Ok(names)
        })
    }

    /// What opening trace `name` (default: the default trace) gave, without building anything:
    /// its name, the shell's one-line summary, and the warnings so far as (code, count,
    /// message).
    #[pyo3(signature = (name = None))]
    #[allow(clippy::type_complexity)]
    fn opened(&self, py: Python<'_>, name: Option<String>) -> PyResult<(String, String, Vec<(String, u64, String)>)> {
        self.with_session(py, move |s| {
            let trace = trace_named(s, name.as_deref())?;
            let warnings = trace
                .warnings_so_far()
                .iter()
                .map(|(code, count, m)| (code.to_string(), count as u64, m.to_string()))
                .collect();
            Ok((trace.meta.name.clone(), commdb_catalog::session::opened_summary(trace), warnings))
        })
    }

    /// The facts of trace `name` (default: the default trace): its trace_info row as (key,
    /// value) text pairs, its tables' row counts and its warnings as (code, count, message).
    #[pyo3(signature = (name = None))]
    #[allow(clippy::type_complexity)]
    fn facts(
        &self,
        py: Python<'_>,
        name: Option<String>,
    ) -> PyResult<(Vec<(String, String)>, Vec<(String, usize)>, Vec<(String, u64, String)>)> {
        self.with_session(py, move |s| {
            let trace = trace_named(s, name.as_deref())?;
            let mut info = Vec::new();
            let options = arrow::util::display::FormatOptions::default().with_null("NULL");
            if let Some(b) = trace.table("trace_info")?.first() {
                for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                    let v = arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options)
                        .map_err(|e| Failure::new(Class::Query, e.to_string()))?
                        .value(0)
                        .to_string();
                    info.push((f.name().clone(), v));
                }
            }
            let mut rows = Vec::new();
            for t in commdb_catalog::model::TABLES.iter().filter(|t| t.name != "trace_info") {
                rows.push((t.name.to_string(), trace.row_count(t.name)?));
            }
            let warnings = trace
                .warnings()?
                .iter()
                .map(|(code, count, m)| (code.to_string(), count as u64, m.to_string()))
                .collect();
            Ok((info, rows, warnings))
        })
    }

    /// The HTML report of the default trace (the page `commdb report` writes).
    fn report(&self, py: Python<'_>) -> PyResult<String> {
        let session = self.session.clone();
        self.engine.run(py, async move {
            let mut s = session.lock().await;
            if s.default_trace().is_none() {
                return Err(Failure::argument("report: no trace is open"));
            }
            commdb_report::html(&mut s).await.map(|(page, _)| page).map_err(|m| Failure::new(Class::Query, m))
        })
    }

    /// An SVG chart of a query's result: the first column is x; `kind` is auto, line, bar or
    /// heatmap. Results of more rows than a chart draws are sampled evenly, with a warning.
    #[pyo3(signature = (query, kind = "auto", title = None))]
    fn chart(&self, py: Python<'_>, query: String, kind: &str, title: Option<String>) -> PyResult<String> {
        let kind: commdb_report::chart::Kind =
            kind.parse().map_err(|e: String| Failure::argument(format!("kind: {e}")).into_py(py))?;
        let title = title.unwrap_or_else(|| query.split_whitespace().collect::<Vec<_>>().join(" "));
        let (rows, notices) = self.engine.run(py, Self::statement(self.session.clone(), query, self.budget))?;
        warn(py, notices)?;
        if rows.schema().fields().is_empty() {
            return Err(Failure::argument("chart: the statement gives no rows to draw").into_py(py));
        }
        let mut sample = commdb_report::chart::Sample::new(commdb_report::chart::MAX_ROWS);
        for b in rows.record_batches() {
            sample.push(b).map_err(|m| Failure::new(Class::Query, m).into_py(py))?;
        }
        let (kept, seen, stride) = sample.finish().map_err(|m| Failure::new(Class::Query, m).into_py(py))?;
        if kept.iter().all(|b| b.num_rows() == 0) {
            return Err(Failure::argument("chart: the query returned no rows: nothing to draw").into_py(py));
        }
        if stride > 1 {
            let drawn: usize = kept.iter().map(RecordBatch::num_rows).sum();
            warn(
                py,
                vec![format!(
                    "chart drew {drawn} of the query's {seen} rows (one in every {stride}, in the query's order); aggregate the rows in the query to draw them all"
                )],
            )?;
        }
        commdb_report::chart::svg_as(rows.schema(), &kept, &title, kind)
            .map_err(|m| Failure::argument(m.trim_start_matches("\\chart: ").to_string()).into_py(py))
    }

    /// Write the default trace for another tool (`format`: chrome, Chrome trace-event JSON that
    /// Perfetto's UI opens); returns what was written.
    #[pyo3(signature = (path, format = "chrome"))]
    fn export<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>, format: &str) -> PyResult<Bound<'py, PyDict>> {
        if !format.eq_ignore_ascii_case("chrome") {
            return Err(Failure::argument(format!("export: unknown format '{format}': expected chrome")).into_py(py));
        }
        let path = path_option("path", Some(path)).map_err(|f| f.into_py(py))?.expect("a path");
        let written = self.with_session(py, move |s| {
            s.refuse_overwrite(&path, "export")?;
            let trace = s.default_trace().ok_or_else(|| Failure::argument("export: no trace is open"))?;
            Ok(commdb_catalog::export::chrome::write(trace, &path)?)
        })?;
        let out = PyDict::new(py);
        out.set_item("calls", written.calls)?;
        out.set_item("flows", written.flows)?;
        out.set_item("collectives", written.collectives)?;
        out.set_item("counters", written.counters)?;
        out.set_item("transfers", written.transfers)?;
        out.set_item("launches", written.launches)?;
        Ok(out)
    }

    /// Write `text` to `path` whole (beside it first, then renamed), refusing the open traces'
    /// own files; `what` names the caller in errors.
    fn write_text(&self, py: Python<'_>, path: &Bound<'_, PyAny>, text: String, what: String) -> PyResult<()> {
        let path = path_option("path", Some(path)).map_err(|f| f.into_py(py))?.expect("a path");
        self.with_session(py, move |s| {
            s.refuse_overwrite(Path::new(&path), &what)?;
            commdb_catalog::writing::write_all(&path, text.as_bytes())?;
            Ok(())
        })
    }

    /// Run this session's queries on the cluster whose scheduler is at `url` (df://HOST:PORT)
    /// from now on, and open the store at `path` as `name`; the traces it has open must be
    /// commdb stores. The cluster's secret comes from `secret_file`, else the environment
    /// variable COMMDB_CLUSTER_SECRET, when the cluster has one.
    #[pyo3(signature = (url, path = None, *, name = None, secret_file = None))]
    fn connect(
        &self,
        py: Python<'_>,
        url: String,
        path: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
        secret_file: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let path = path_option("path", path).map_err(|f| f.into_py(py))?.map(|p| p.display().to_string());
        let secret_file = path_option("secret_file", secret_file).map_err(|f| f.into_py(py))?;
        let session = self.session.clone();
        self.engine.run(py, async move {
            let mut s = session.lock().await;
            crate::cluster::connect(&mut s, &url, path.as_deref(), name.as_deref(), secret_file.as_deref()).await
        })
    }

    /// Stop the session's threads and let its traces go.
    fn close(&self) {
        self.engine.close();
    }
}
