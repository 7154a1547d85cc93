//! Running statements: one SQL statement or backslash command at a time, scripts (stop at
//! the first error, reporting its line), and the interactive loop (errors are printed and
//! the loop goes on; Ctrl-C cancels the running query, Ctrl-D leaves).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use commdb_catalog::progress::LoadProgress;
use commdb_catalog::writing::Output;
use commdb_catalog::{OpenOptions, Outcome, Session};
use datafusion::prelude::DataFrame;
use futures::StreamExt;
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config, Editor};

use crate::command::{Command, help, list_tables_sql};
use crate::describe;
use crate::error::{Result, ShellError};
use crate::fit::{Expanded, Width};
use crate::helper::{ShellHelper, Words};
use crate::print::{Format, PrintOptions, ResultWriter, human_duration};
use crate::progress::Progress;

/// Execute a plan, handing each batch to `each` as it comes; Ctrl-C cancels.
///
/// Execution runs as a task of the query runtime, so that Ctrl-C is seen even while an operator
/// computes for a long time without yielding, or while `each` writes rows; cancelling aborts
/// the task, raises the interrupt for work on blocking threads, and gives the next query a new
/// runtime (an operator computing without yielding keeps its threads after the abort).
async fn run_plan(
    queries: &mut Option<tokio::runtime::Runtime>,
    df: DataFrame,
    mut each: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    let config = df.task_ctx().session_config().clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(2);
    let runtime = queries.as_ref().ok_or_else(|| ShellError::Runtime("the query runtime has stopped".into()))?;
    let mut task = runtime.spawn(async move {
        let mut stream = match df.execute_stream().await {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        while let Some(batch) = stream.next().await {
            if tx.send(batch).await.is_err() {
                break;
            }
        }
    });
    // Presses come through the watcher (crate::ctrl_c), which never misses one.
    let mut presses = crate::ctrl_c::subscribe();
    loop {
        tokio::select! {
            next = rx.recv() => match next {
                Some(Ok(batch)) => each(batch)?,
                Some(Err(e)) => {
                    // Work that checks the interrupt can stop on a press before the press is
                    // told here (the watcher raises the interrupt, then tells): a cancel too.
                    if commdb_catalog::interrupt::check("the query").is_err() {
                        let told = pressed(&mut presses);
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), told).await;
                        return cancel(queries, &task);
                    }
                    return Err(match commdb_catalog::Error::from(e) {
                        // A cluster's failure comes as the text of its report.
                        commdb_catalog::Error::Engine(message) => {
                            ShellError::Trace(commdb_catalog::Error::Engine(crate::connect::told(message, &config).await))
                        }
                        typed => ShellError::Trace(typed),
                    });
                }
                // The stream ended: because it was done, or because the task stopped on a fault.
                None => {
                    return match (&mut task).await {
                        Err(stopped) if stopped.is_panic() => Err(ShellError::Trace(commdb_catalog::Error::Fault(
                            crate::last_fault().unwrap_or_else(|| "an unknown fault".to_string()),
                        ))),
                        _ => Ok(()),
                    };
                }
            },
            _ = pressed(&mut presses) => return cancel(queries, &task),
        }
    }
}

/// Cancel the query run by `task` on a press: stop its work, answer the press, and give the
/// next query a new runtime.
fn cancel(queries: &mut Option<tokio::runtime::Runtime>, task: &tokio::task::JoinHandle<()>) -> Result<()> {
    commdb_catalog::interrupt::raise();
    crate::ctrl_c::answered();
    task.abort();
    if let Some(old) = queries.take() {
        commdb_catalog::runtimes::stop_in_background(old);
    }
    *queries = Some(query_runtime()?);
    Err(ShellError::Cancelled("query cancelled"))
}

/// Resolves at the next Ctrl-C (never, when there is no watcher).
async fn pressed(presses: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    match presses {
        Some(rx) => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Whether the REPL goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// The runtime queries execute on: threads with large stacks (deep expressions recurse).
fn query_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("commdb-query")
        .thread_stack_size(crate::stack_bytes())
        .max_blocking_threads(crate::BLOCKING_THREADS)
        .enable_all()
        .build()
        .map_err(|e| ShellError::Runtime(format!("cannot start the query runtime: {e}")))
}

/// The shell's state: the session, output settings and completion words.
///
/// Queries execute on their own multi-threaded runtime; the shell itself runs on a
/// single-threaded one, which keeps watching for Ctrl-C while every query thread computes.
pub struct Shell {
    pub session: Session,
    pub print: PrintOptions,
    output: Option<Output>,
    /// Where in its text the last failed statement went wrong (line, column), when known.
    error_at: Option<(u64, u64)>,
    /// Whether a result or a title has been written, so that a title gets a blank line above.
    wrote_output: bool,
    words: Words,
    queries: Option<tokio::runtime::Runtime>,
    /// The scripts being run by `\\i`, outermost first (to refuse an include cycle).
    including: Vec<PathBuf>,
    /// The cluster the session's queries run on (`--cluster`, `\\connect`), if any.
    pub cluster: Option<String>,
    /// The file of the cluster's secret (`--secret-file`), for `\connect`.
    pub secret_file: Option<PathBuf>,
    /// Whether the format was named (`--format`, `\\format`): then no file's extension
    /// chooses it.
    format_named: bool,
    /// The format of results printed to the terminal.
    terminal_format: Format,
    /// Results written to the output file since it was opened.
    results_written: usize,
}

impl Drop for Shell {
    /// The query runtime's threads are waited for, not let go of ([`commdb_catalog::runtimes`]).
    fn drop(&mut self) {
        if let Some(rt) = self.queries.take() {
            commdb_catalog::runtimes::stop(rt);
        }
    }
}

impl Shell {
    pub fn new(session: Session, print: PrintOptions) -> Result<Self> {
        let shell = Shell {
            session,
            print,
            output: None,
            error_at: None,
            wrote_output: false,
            words: Words::default(),
            queries: Some(query_runtime()?),
            including: Vec::new(),
            cluster: None,
            secret_file: None,
            format_named: false,
            terminal_format: print.format,
            results_written: 0,
        };
        shell.refresh_words();
        Ok(shell)
    }

    /// The runtime the session's queries run on (the server of `commdb serve` runs there too).
    pub fn query_handle(&self) -> tokio::runtime::Handle {
        self.queries.as_ref().expect("the query runtime lives as long as the shell").handle().clone()
    }

    /// Run the session's queries on the cluster at `url` from now on: every trace open must be
    /// a store.
    pub async fn connect(&mut self, url: &str) -> Result<()> {
        for (_, trace) in self.session.traces() {
            crate::connect::require_store(&trace.meta.path, url)?;
        }
        crate::connect::connect(&mut self.session, url, self.secret_file.as_deref()).await?;
        self.cluster = Some(url.to_string());
        self.note(&format!("connected to the cluster at {url}: queries run there"));
        Ok(())
    }

    /// Send results to a file instead of stdout.
    /// Send results to `path` (None: back to standard output). The file is written beside
    /// the target under a temporary name and takes the target's place when the output is
    /// closed after success (`close_output`, `\o`, another `-o`), so a failing run leaves
    /// the target as it was. A path that is one of the open traces (or inside one) is refused.
    /// Unless a format was named (`--format`, `\\format`), a file's extension says its
    /// format (`out.csv` is CSV, `out.parquet` Parquet) and the terminal gets the table again.
    pub fn set_output(&mut self, path: Option<PathBuf>) -> Result<()> {
        self.close_output()?;
        if !self.format_named {
            self.print.format = path.as_deref().and_then(Format::of_file).unwrap_or(self.terminal_format);
        }
        if let Some(p) = path {
            self.session.refuse_overwrite(&p, "-o")?;
            self.output = Some(Output::create(&p)?);
            self.results_written = 0;
        }
        Ok(())
    }

    /// Whether the format was named on the command line (then a file's extension does not
    /// choose it).
    pub fn set_format_named(&mut self, named: bool) {
        self.format_named = named;
    }

    /// A failed statement in the shell's words: a query over the memory budget says which
    /// budget and how to change it, and a fault the fault the process saw.
    fn explain(&self, error: ShellError) -> ShellError {
        let error = match error {
            ShellError::Trace(e) => e,
            ShellError::Query(e) => commdb_catalog::Error::from(e),
            other => return other,
        };
        let budget = match self.session.context().runtime_env().memory_pool.memory_limit() {
            datafusion::execution::memory_pool::MemoryLimit::Finite(bytes) => Some(bytes),
            _ => None,
        };
        let error = match error.with_budget(budget, "narrow it with a view or a filter, or raise --memory-limit") {
            commdb_catalog::Error::Fault(seen) => commdb_catalog::Error::Fault(crate::last_fault().unwrap_or(seen)),
            other => other,
        };
        ShellError::Statement(error.to_string())
    }

    /// Rows the table format shows from now on (usize::MAX: all).
    pub fn set_max_rows(&mut self, rows: usize) {
        self.print.max_rows = rows;
    }

    /// Finish the output file: it replaces its target.
    pub fn close_output(&mut self) -> Result<()> {
        match self.output.take() {
            Some(o) => Ok(o.commit()?),
            None => Ok(()),
        }
    }

    /// A line of text in the output where the tables go (table and markdown formats), so a
    /// report's titles stand above its tables; with the machine-readable formats it goes to
    /// stderr, unless quiet, and the output stays parseable.
    fn echo(&mut self, text: &str) -> Result<()> {
        if !self.print.format.footer_in_output() {
            self.note(text);
            return Ok(());
        }
        let gap = if std::mem::replace(&mut self.wrote_output, true) { "\n" } else { "" };
        match &mut self.output {
            Some(o) => writeln!(o, "{gap}{text}"),
            None => writeln!(std::io::stdout(), "{gap}{text}"),
        }
        .map_err(|e| ShellError::file("the output", e))
    }

    fn note(&self, text: &str) {
        if !self.print.quiet {
            eprintln!("{text}");
        }
    }

    /// Open a trace, with a progress line on a terminal.
    pub fn open_trace(&mut self, path: &str, name: Option<&str>) -> Result<String> {
        if let Some(url) = &self.cluster {
            crate::connect::require_store(path, url)?;
        }
        let share = Arc::new(LoadProgress::default());
        let progress = Progress::loading(&format!("loading {path}"), share.clone());
        let started = Instant::now();
        let options = OpenOptions { progress: Some(share), ..self.session.open_options.clone() };
        let result = self.session.open(path, name, &options);
        progress.stop();
        for step in commdb_catalog::progress::Building::take_finished() {
            self.note(&step);
        }
        let name = result?;
        #[cfg(feature = "cluster")]
        if self.cluster.is_some() {
            commdb_cluster::partitions_for_stores(&mut self.session);
        }
        let trace = self.session.trace(&name).expect("just opened");
        self.note(&format!(
            "opened {path} as {name}: {} ({}){}",
            commdb_catalog::session::opened_summary(trace),
            human_duration(started.elapsed()),
            commdb_catalog::session::warning_summary(trace)
        ));
        self.refresh_words();
        Ok(name)
    }

    /// Rows of a query, for commands that post-process them.
    async fn collect(&mut self, sql: &str) -> Result<Vec<RecordBatch>> {
        let result = self.session.collect(sql).await.map_err(ShellError::from);
        self.print_notices();
        result
    }

    /// Rows of a query for a picture: at most about `max_rows`, evenly spaced in the query's
    /// order when it gives more (`chart::Sample`), read a batch at a time. Returns the rows
    /// kept, the rows the query gave and the spacing of those kept.
    async fn collect_sampled(&mut self, sql: &str, max_rows: usize) -> Result<(Vec<RecordBatch>, usize, usize)> {
        commdb_catalog::interrupt::lower();
        let outcome = self.session.statement(sql).await.map_err(ShellError::from);
        self.print_notices();
        let Outcome::Query(df) = outcome? else {
            return Err(ShellError::usage("\\chart: the statement gives no rows to draw"));
        };
        let mut sample = commdb_report::chart::Sample::new(max_rows);
        let done = run_plan(&mut self.queries, df, |batch| sample.push(&batch).map_err(ShellError::Drawing)).await;
        self.print_notices();
        done?;
        sample.finish().map_err(ShellError::Drawing)
    }

    /// Show the steps building a trace's tables that the last statement waited on, and the
    /// warnings SQL functions raised while it ran.
    fn print_notices(&self) {
        for step in commdb_catalog::progress::Building::take_finished() {
            self.note(&step);
        }
        for notice in self.session.take_notices() {
            eprintln!("warning: {notice}");
        }
    }

    /// Run one SQL statement or backslash command.
    /// Write the report of the default trace to `path` (beside it first, then renamed, so a
    /// failed report leaves no half page).
    pub async fn report(&mut self, path: &std::path::Path) -> Result<()> {
        if self.session.default_trace().is_none() {
            return Err(ShellError::usage("\\report: no trace is open; \\open PATH opens one"));
        }
        self.session.refuse_overwrite(path, "\\report")?;
        let started = std::time::Instant::now();
        let (page, written) = commdb_report::html(&mut self.session).await.map_err(ShellError::Drawing)?;
        commdb_catalog::writing::write_all(path, page.as_bytes())?;
        self.note_written("a report", &written, path, started, "this trace");
        Ok(())
    }

    /// Say what a page holds and where it went.
    fn note_written(
        &self,
        what: &str,
        written: &commdb_report::Written,
        path: &std::path::Path,
        started: std::time::Instant,
        of: &str,
    ) {
        self.note(&format!(
            "wrote {what} of {} figures ({:.1} MB) to {} in {:.1} s{}",
            written.figures,
            written.bytes as f64 / 1e6,
            path.display(),
            started.elapsed().as_secs_f64(),
            match written.sections_missing {
                0 => String::new(),
                n => format!("; {n} section(s) could not be made for {of} (the page says why)"),
            }
        ));
    }

    /// Write the page comparing the default trace with the trace at `other` (attached beside
    /// it) to `path`.
    pub async fn report_vs(&mut self, other: &str, path: &std::path::Path) -> Result<()> {
        self.session.refuse_overwrite(path, "report --vs")?;
        let names: Vec<String> = self.session.traces().map(|(n, _)| n.to_string()).collect();
        let name = ["b", "run_b", "compared_run"]
            .into_iter()
            .find(|n| !names.iter().any(|t| t == n))
            .unwrap_or("compared_run")
            .to_string();
        self.open_trace(other, Some(&name))?;
        let started = std::time::Instant::now();
        let (page, written) = commdb_report::diff_html(&mut self.session, &name).await.map_err(ShellError::Drawing)?;
        self.print_notices();
        commdb_catalog::writing::write_all(path, page.as_bytes())?;
        self.note_written("a comparison", &written, path, started, "these runs");
        Ok(())
    }

    pub async fn run(&mut self, text: &str) -> Result<Flow> {
        self.error_at = None;
        let text = text.trim();
        match shell_word(text) {
            Some(ShellWord::Help) => return self.command(Command::Help).await,
            Some(ShellWord::Quit) => return Ok(Flow::Quit),
            None => {}
        }
        if text.starts_with('\\') {
            let cmd: Command = text.parse()?;
            return self.command(cmd).await;
        }
        self.sql(text).await?;
        Ok(Flow::Continue)
    }

    /// Run a statement, then show the warnings SQL functions raised while it ran.
    async fn sql(&mut self, sql: &str) -> Result<()> {
        let result = self.statement(sql).await.map_err(|e| self.explain(e));
        self.print_notices();
        result
    }

    async fn statement(&mut self, sql: &str) -> Result<()> {
        let started = Instant::now();
        // A Ctrl-C that came between statements (while a trace was read, say) stops the script
        // here rather than being forgotten.
        if crate::ctrl_c::pending() {
            crate::ctrl_c::answered();
            return Err(ShellError::Cancelled("interrupted (Ctrl-C)"));
        }
        commdb_catalog::interrupt::lower();
        let is_attach = sql.trim_start().get(..6).is_some_and(|w| w.eq_ignore_ascii_case("attach"));
        let progress = is_attach.then(|| {
            let share = Arc::new(LoadProgress::default());
            self.session.open_options.progress = Some(share.clone());
            Progress::start("attaching", Some(share))
        });
        let outcome = self.session.statement(sql).await;
        if let Some(p) = progress {
            p.stop();
            self.session.open_options.progress = None;
        }
        if let Err(e) = &outcome {
            self.error_at = e.position();
        }
        match outcome? {
            Outcome::Done(message) => {
                self.note(&message);
                self.refresh_words();
                Ok(())
            }
            Outcome::Query(df) => {
                let is_ddl = df.schema().fields().is_empty();
                self.print_frame(df, started).await?;
                if is_ddl {
                    self.refresh_words();
                }
                Ok(())
            }
        }
    }

    /// Execute a plan and print its rows as they come; Ctrl-C cancels.
    pub async fn print_frame(&mut self, df: DataFrame, started: Instant) -> Result<()> {
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let no_columns = schema.fields().is_empty();
        let mut opts = self.print;
        let mut stdout = std::io::stdout().lock();
        let to_file = self.output.is_some();
        if to_file && opts.width == Width::Terminal {
            opts.width = Width::Unlimited;
        }
        // A file gets every row, whatever the terminal shows.
        if to_file {
            opts.max_rows = usize::MAX;
        }
        if opts.format == Format::Parquet && !no_columns {
            if !to_file {
                return Err(ShellError::usage(
                    "the parquet format writes a file: give -o FILE.parquet (or \\o FILE.parquet)",
                ));
            }
            if self.results_written > 0 {
                return Err(ShellError::usage(
                    "a Parquet file holds one result, and this output has one already: write each query to a file of its own (\\o FILE.parquet before it)",
                ));
            }
        }
        if !no_columns {
            self.results_written += 1;
        }
        let out: &mut dyn Write = match &mut self.output {
            Some(o) => o,
            None => &mut stdout,
        };
        let mut writer = if no_columns { None } else { Some(ResultWriter::new(out, schema, opts)?) };
        let _building = Progress::building();
        run_plan(&mut self.queries, df, |batch| match writer.as_mut() {
            Some(w) => w.write(&batch),
            None => Ok(()),
        })
        .await?;
        let Some(writer) = writer else { return Ok(()) };
        self.wrote_output = true;
        let (mut footer, cut) = writer.finish(started.elapsed())?;
        if !opts.timing
            && let Some(i) = footer.rfind(" (")
        {
            footer.truncate(i);
        }
        if opts.quiet && cut {
            // Quiet output still says that rows were left out, on stderr.
            eprintln!("{footer}");
        } else if !opts.quiet {
            if opts.format.footer_in_output() && !to_file {
                writeln!(stdout, "{footer}")?;
            } else {
                eprintln!("{footer}");
            }
        }
        Ok(())
    }

    async fn command(&mut self, cmd: Command) -> Result<Flow> {
        match cmd {
            Command::Quit => return Ok(Flow::Quit),
            Command::Help => println!("{}", help()),
            Command::Echo(text) => self.echo(&text)?,
            Command::ListTables(pattern) => {
                let default = self.session.default_trace().map(|t| t.meta.name.clone());
                self.sql(&list_tables_sql(default.as_deref(), pattern.as_deref())).await?
            }
            Command::Describe(name) => {
                let df = describe::columns(&self.session, &name).await?;
                self.print_frame(df, Instant::now()).await?;
            }
            Command::ListFunctions(pattern) => {
                let df = describe::functions(&self.session, pattern.as_deref()).await?;
                self.print_frame(df, Instant::now()).await?;
                self.note(commdb_analysis::declare::ARGUMENT_RULE);
            }
            Command::Info(name) => {
                let df = describe::info(&self.session, name.as_deref())?;
                self.print_frame(df, Instant::now()).await?;
            }
            Command::Open { path, name } => {
                self.open_trace(&path, name.as_deref())?;
            }
            Command::Connect(url) => self.connect(&url).await?,
            Command::Include(path) => return self.include(&path).await,
            Command::Output(path) => self.set_output(path)?,
            Command::Dot { path, edges, nodes } => {
                let edges = self.collect(&edges).await?;
                let nodes = match nodes {
                    Some(q) => Some(self.collect(&q).await?),
                    None => None,
                };
                let (text, n, e) = commdb_report::dot::render(&edges, nodes.as_deref()).map_err(ShellError::Drawing)?;
                self.session.refuse_overwrite(&path, "\\dot")?;
                commdb_catalog::writing::write_all(&path, text.as_bytes())?;
                self.note(&format!("wrote {n} nodes and {e} edges to {}", path.display()));
            }
            Command::Chart { path, sql } => {
                let (batches, rows, stride) = self.collect_sampled(&sql, commdb_report::chart::MAX_ROWS).await?;
                let schema = batches
                    .first()
                    .map(RecordBatch::schema)
                    .ok_or_else(|| ShellError::usage("\\chart: the query returned no rows: nothing to draw"))?;
                let one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
                let title = if one_line.chars().count() > 100 {
                    format!("{}…", one_line.chars().take(99).collect::<String>())
                } else {
                    one_line
                };
                let text = commdb_report::chart::svg(&schema, &batches, &title).map_err(ShellError::Drawing)?;
                self.session.refuse_overwrite(&path, "\\chart")?;
                commdb_catalog::writing::write_all(&path, text.as_bytes())?;
                let drawn: usize = batches.iter().map(RecordBatch::num_rows).sum();
                if stride > 1 {
                    eprintln!(
                        "notice: \\chart drew {drawn} of the query's {rows} rows (one in every {stride}, in the query's order); aggregate the rows in the query (GROUP BY a bin) to draw them all"
                    );
                }
                self.note(&format!("wrote a chart of {drawn} rows to {}", path.display()));
            }
            Command::Report(path) => self.report(&path).await?,
            Command::Format(f) => {
                self.print.format = f;
                self.terminal_format = f;
                self.format_named = true;
            }
            Command::Expanded(mode) => {
                self.print.expanded = mode.unwrap_or(match self.print.expanded {
                    Expanded::On => Expanded::Off,
                    Expanded::Off | Expanded::Auto => Expanded::On,
                });
                self.note(&format!("expanded display is {}", self.print.expanded));
            }
            Command::Timing(on) => {
                self.print.timing = on.unwrap_or(!self.print.timing);
                self.note(&format!("timing is {}", if self.print.timing { "on" } else { "off" }));
            }
        }
        Ok(Flow::Continue)
    }

    /// `\\i FILE`: run a script's statements. Only regular files are read (a device such as
    /// /dev/zero has no end), and a script that includes itself, directly or through others,
    /// is refused with the chain of includes.
    pub async fn include(&mut self, path: &Path) -> Result<Flow> {
        commdb_catalog::Error::regular_file(path)?;
        let canonical = std::fs::canonicalize(path).map_err(|e| ShellError::file(path, e))?;
        if self.including.contains(&canonical) {
            let chain: Vec<String> =
                self.including.iter().chain(std::iter::once(&canonical)).map(|p| p.display().to_string()).collect();
            return Err(ShellError::usage(format!(
                "\\i {}: the script includes itself ({})",
                path.display(),
                chain.join(" -> ")
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ShellError::file(path, e))?;
        self.including.push(canonical);
        let flow = Box::pin(self.script(&text, &path.display().to_string())).await;
        self.including.pop();
        flow
    }

    /// Run every statement of a script; stop at the first error with `source:line: message`.
    pub async fn script(&mut self, text: &str, source: &str) -> Result<Flow> {
        for (line_no, chunk) in script_chunks(text).map_err(|e| e.within(source))? {
            match self.run(&chunk).await {
                Ok(Flow::Quit) => return Ok(Flow::Quit),
                Ok(Flow::Continue) => {}
                Err(e) => {
                    return Err(ShellError::Statement(located(
                        source,
                        line_no,
                        &chunk,
                        self.error_at.take(),
                        &e.to_string(),
                    )));
                }
            }
        }
        Ok(Flow::Continue)
    }

    /// The interactive loop.
    pub async fn repl(&mut self) -> Result<()> {
        let config = Config::builder().auto_add_history(false).max_history_size(10_000)?.build();
        let mut editor: Editor<ShellHelper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(ShellHelper::new(self.words.clone())));
        // After the editor's own SIGINT handler (see crate::ctrl_c).
        crate::ctrl_c::watch();
        let history = history_path();
        if let Some(h) = &history {
            let _ = editor.load_history(h);
        }
        let interactive = std::io::stdin().is_terminal();
        // A statement typed over several lines: each line after the first gets the
        // continuation prompt, and the statement goes into the history whole.
        let mut pending = String::new();
        loop {
            let prompt = if pending.is_empty() { PROMPT } else { CONTINUATION_PROMPT };
            // A press that came as the last statement ended is answered: the next one runs.
            crate::ctrl_c::answered();
            match editor.readline(prompt) {
                Ok(line) => {
                    if pending.is_empty() && line.trim().is_empty() {
                        continue;
                    }
                    if !pending.is_empty() {
                        pending.push('\n');
                    }
                    pending.push_str(&line);
                    if !statement_is_complete(&pending) {
                        continue;
                    }
                    let text = std::mem::take(&mut pending);
                    let _ = editor.add_history_entry(text.as_str());
                    match script_chunks(&text) {
                        Err(e) => eprintln!("error: {e}"),
                        Ok(chunks) => {
                            for (_, chunk) in chunks {
                                match self.run(&chunk).await {
                                    Ok(Flow::Quit) => return save(&mut editor, history.as_deref()),
                                    Ok(Flow::Continue) => {}
                                    Err(e) => {
                                        match self.error_at.take() {
                                            Some(at) => {
                                                eprintln!(
                                                    "error at {}",
                                                    located("", 1, &chunk, Some(at), &e.to_string())
                                                )
                                            }
                                            None => eprintln!("error: {e}"),
                                        }
                                        break;
                                    }
                                }
                            }
                        }
                    }
                }
                // Ctrl-C drops a statement being typed, as psql does.
                Err(ReadlineError::Interrupted) if !pending.is_empty() => pending.clear(),
                Err(ReadlineError::Interrupted) => {
                    if !interactive {
                        break;
                    }
                }
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(ShellError::Runtime(format!("reading a line: {e}"))),
            }
        }
        save(&mut editor, history.as_deref())
    }

    /// Refresh the completion words and the columns of each trace table from the session.
    pub fn refresh_words(&self) {
        let mut words: Vec<String> = Vec::new();
        let mut columns: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
        for t in commdb_catalog::model::TABLES {
            words.push(t.name.to_string());
            words.extend(t.columns.iter().map(|c| c.name.to_string()));
            columns.insert(t.name.to_string(), t.columns.iter().map(|c| c.name.to_string()).collect());
        }
        for (schema, _) in self.session.traces() {
            words.push(schema.to_string());
            for t in commdb_catalog::model::TABLES {
                words.push(format!("{schema}.{}", t.name));
                columns.insert(
                    format!("{schema}.{}", t.name).to_ascii_lowercase(),
                    t.columns.iter().map(|c| c.name.to_string()).collect(),
                );
            }
        }
        let state = self.session.context().state();
        words.extend(state.scalar_functions().keys().cloned());
        words.extend(state.aggregate_functions().keys().cloned());
        words.extend(state.window_functions().keys().cloned());
        words.extend(state.table_functions().keys().cloned());
        if let Some(catalog) = self.session.context().catalog(commdb_catalog::model::CATALOG)
            && let Some(public) = catalog.schema(commdb_catalog::model::DEFAULT_SCHEMA)
        {
            words.extend(public.table_names());
        }
        words.extend(sqlparser::keywords::ALL_KEYWORDS.iter().map(|k| (*k).to_string()));
        words.sort_unstable_by_key(|w| w.to_ascii_lowercase());
        words.dedup();
        if let Ok(mut w) = self.words.write() {
            *w = crate::helper::Completions { words, columns };
        }
    }
}

/// A failed statement's error as `SOURCE:LINE: message`, or, when the place in the statement
/// is known, `SOURCE:LINE:COLUMN: message` with that line of the file under it and a caret
/// at the column. `first_line` is the statement's first line in its source.
fn located(source: &str, first_line: u64, statement: &str, at: Option<(u64, u64)>, message: &str) -> String {
    match at {
        None => format!("{source}:{first_line}: {message}"),
        Some((line, column)) => {
            let file_line = first_line + line - 1;
            // The excerpt goes under the message's first line, before any list that follows.
            let text = excerpt(statement, (line, column), file_line);
            let (first, rest) = message.split_once('\n').map_or((message, None), |(a, b)| (a, Some(b)));
            // Typed statements have no file: their place is said in words.
            let place = if source.is_empty() {
                format!("line {file_line}, column {column}")
            } else {
                format!("{source}:{file_line}:{column}")
            };
            let mut out = format!("{place}: {first}\n{}", text.trim_end());
            if let Some(rest) = rest {
                out.push('\n');
                out.push_str(rest);
            }
            out
        }
    }
}

/// Characters of a line an error shows around its column; a longer line is cut to them.
const EXCERPT_CHARS: usize = 120;

/// Line `at.0` of `statement`, numbered `shown_line`, and a caret under column `at.1` (tabs
/// kept, so that the caret lines up). A line longer than EXCERPT_CHARS is shown as the
/// EXCERPT_CHARS around the column, with `…` where it was cut.
fn excerpt(statement: &str, at: (u64, u64), shown_line: u64) -> String {
    let Some(text) = statement.lines().nth(at.0.saturating_sub(1) as usize) else { return String::new() };
    let number = shown_line.to_string();
    let column = at.1.saturating_sub(1) as usize;
    let chars = text.chars().count();
    let (from, to) = if chars <= EXCERPT_CHARS {
        (0, chars)
    } else {
        let from = column.saturating_sub(EXCERPT_CHARS / 2).min(chars - EXCERPT_CHARS);
        (from, from + EXCERPT_CHARS)
    };
    let shown: String = text.chars().skip(from).take(to - from).collect();
    let (before, after) = (if from > 0 { "…" } else { "" }, if to < chars { "…" } else { "" });
    let lead: String = before
        .chars()
        .map(|_| ' ')
        .chain(text.chars().skip(from).take(column.saturating_sub(from)).map(|c| if c == '\t' { '\t' } else { ' ' }))
        .collect();
    format!("{number} | {before}{shown}{after}\n{} | {lead}^\n", " ".repeat(number.len()))
}

/// The words people type first in a shell they do not know yet, taken as psql takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShellWord {
    Help,
    Quit,
}

/// `help`, `quit` or `exit` typed alone (a trailing ';' allowed), in any case.
fn shell_word(text: &str) -> Option<ShellWord> {
    match text.trim().trim_end_matches(';').trim().to_ascii_lowercase().as_str() {
        "help" => Some(ShellWord::Help),
        "quit" | "exit" => Some(ShellWord::Quit),
        _ => None,
    }
}

const PROMPT: &str = "commdb> ";
/// The prompt of the second and later lines of a statement, as wide as `PROMPT`.
const CONTINUATION_PROMPT: &str = "   ...> ";

/// Whether typed text is ready to run: a backslash command or one of the words `run` takes
/// alone (help, quit, exit) at once, SQL when it ends with ';' outside quotes and comments.
fn statement_is_complete(text: &str) -> bool {
    let t = text.trim();
    t.starts_with('\\') || shell_word(t).is_some() || commdb_catalog::session::sql::is_complete(t)
}

fn save(editor: &mut Editor<ShellHelper, FileHistory>, history: Option<&Path>) -> Result<()> {
    if let Some(h) = history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

fn history_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".commdb_history"))
}

/// Split a script into statements and backslash commands, each with its first line. A line
/// whose first character is a backslash, outside a statement, is a command
/// (`commdb_catalog::session::sql::chunks`: one pass, the statements as written).
pub fn script_chunks(text: &str) -> Result<Vec<(u64, String)>> {
    use commdb_catalog::session::sql::{Chunk, chunks};
    let pieces = chunks(text, true).map_err(|e| ShellError::usage(e.to_string()))?;
    Ok(pieces
        .into_iter()
        .map(|c| match c {
            Chunk::Statement(s) | Chunk::Command(s) => (s.line, s.sql),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_name_the_file_line_and_column_with_a_caret() {
        let sql = "SELECT\n\tcount( FROM messages";
        assert_eq!(
            super::located("r.sql", 6, sql, Some((2, 9)), "syntax error"),
            "r.sql:7:9: syntax error\n7 | \tcount( FROM messages\n  | \t       ^"
        );
        assert_eq!(super::located("r.sql", 6, sql, None, "bad"), "r.sql:6: bad");
        // A long line is shown around the column only.
        let long = format!("SELECT {}x", "1 + ".repeat(100_000));
        let shown = super::located("r.sql", 1, &long, Some((1, 400_008)), "syntax error");
        assert!(shown.len() < 400, "{}", shown.len());
        assert!(shown.contains("1 | … + 1 + 1") && shown.contains("+ x\n") && shown.ends_with('^'), "{shown}");
    }

    use super::*;

    #[test]
    fn chunks_keep_line_numbers() {
        let text = "-- report\nSELECT 1;\n\\timing off\nSELECT\n  2;\nSELECT 3";
        let c = script_chunks(text).unwrap();
        let lines: Vec<u64> = c.iter().map(|x| x.0).collect();
        assert_eq!(lines, vec![2, 3, 4, 6]);
        assert_eq!(c[1].1, "\\timing off");
        // A command right after a header of comments is a command, not part of a statement.
        let c = script_chunks("-- a report\n--   with a header\n\n\\echo Title\nSELECT 1;").unwrap();
        assert_eq!(c, vec![(4, "\\echo Title".to_string()), (5, "SELECT 1".to_string())]);
        // Statements reach the planner as written: quotes and their escapes intact.
        let c = script_chunks("SELECT 'a''''b';\nSELECT 'it''s' AS \"a\"\"b\";").unwrap();
        assert_eq!(c, vec![(1, "SELECT 'a''''b'".to_string()), (2, "SELECT 'it''s' AS \"a\"\"b\"".to_string())]);
        // A backslash line inside a statement belongs to it.
        let c = script_chunks("SELECT\n\\x\n;").unwrap();
        assert_eq!(c, vec![(1, "SELECT\n\\x".to_string())]);
    }
}
