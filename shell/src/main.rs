//! The `commdb` binary: SQL over MPI communication traces. The command line is defined in
//! `cli` and the subcommands run in `subcommands`; here the shell itself starts: statements
//! run in `exec`, backslash commands are in `command`, output formats in `print`, line
//! editing in `helper`, and errors are `error::ShellError`.

mod cli;
mod command;
mod connect;
mod ctrl_c;
mod demo;
mod describe;
mod error;
mod exec;
mod fit;
mod helper;
mod print;
mod progress;
mod serve;
mod subcommands;

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::FromArgMatches;

use crate::cli::{Cli, Sub, sql_session};
use crate::error::{Result, ShellError};
use crate::exec::{Flow, Shell};
use crate::fit::Width;
use crate::print::{PrintOptions, human_duration};
use crate::subcommands::attach_demo;

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What one -c or -f asks.
enum Action {
    /// -c SQL (with --chart, the query drawn).
    Sql(String),
    /// -f FILE.
    File(PathBuf),
}

/// The -c and -f actions in command-line order (with --chart, the one -c query drawn).
fn actions(matches: &clap::ArgMatches, cli: &Cli) -> Vec<(usize, Action)> {
    let mut out: Vec<(usize, Action)> = Vec::new();
    let command = |sql: &String| match &cli.chart {
        Some(file) => Action::Sql(format!("\\chart {} {sql}", file.display())),
        None => Action::Sql(sql.clone()),
    };
    if let Some(idx) = matches.indices_of("commands") {
        out.extend(idx.zip(cli.commands.iter().map(command)));
    }
    if let Some(idx) = matches.indices_of("files") {
        out.extend(idx.zip(cli.files.iter().cloned().map(Action::File)));
    }
    out.sort_by_key(|a| a.0);
    out
}

async fn run(matches: &clap::ArgMatches, cli: Cli) -> Result<()> {
    // 0 means every row; without --max-rows, scripts print every row and the rest 40.
    let rows = |default: usize| match cli.max_rows {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => default,
    };
    let width = match cli.width {
        None => Width::Terminal,
        Some(0) => Width::Unlimited,
        Some(n) => Width::Columns(n),
    };
    let print = PrintOptions {
        format: cli.format,
        max_rows: rows(40),
        quiet: cli.quiet,
        timing: true,
        width,
        expanded: cli.expanded,
    };
    // Ctrl-C stops the work and keeps what was there: everything but generating a trace and
    // the cache listing, which end at the first press as any program does. The interactive
    // shell starts watching once its line editor is set up (`Shell::repl`): the editor puts
    // its own handler in place, which the watcher's must follow.
    let interactive =
        cli.subcommand.is_none() && cli.commands.is_empty() && cli.files.is_empty() && std::io::stdin().is_terminal();
    // A scheduler or an executor stops at Ctrl-C or SIGTERM itself (commdb_cluster::processes).
    let server = matches!(cli.subcommand, Some(Sub::Scheduler { .. } | Sub::Executor { .. }));
    if !interactive && !server && !matches!(cli.subcommand, Some(Sub::Generate(_) | Sub::Cache { .. })) {
        ctrl_c::hint_on_first_press();
        ctrl_c::watch();
    }
    if cli.demo && matches!(cli.subcommand, Some(Sub::Generate(_) | Sub::Cache { .. })) {
        return Err(ShellError::usage(
            "--demo opens the generated demo trace in the shell, report, export and info, and convert writes it as a store; it does not apply to generate or cache",
        ));
    }
    if cli.cluster.is_some() && cli.subcommand.is_some() {
        return Err(ShellError::usage(
            "--cluster runs the shell's queries on a cluster; it does not apply to subcommands",
        ));
    }
    if cli.secret_file.is_some()
        && cli.subcommand.as_ref().is_some_and(|s| !matches!(s, Sub::Scheduler { .. } | Sub::Executor { .. }))
    {
        return Err(ShellError::usage(
            "--secret-file is the cluster's secret, for --cluster, \\connect, scheduler and executor; it does not apply to other subcommands",
        ));
    }
    if let Some(sub) = &cli.subcommand {
        return subcommands::run(&cli, sub, print).await;
    }

    let mut shell = Shell::new(sql_session(&cli), print)?;
    shell.secret_file = cli.secret_file.clone();
    if let Some(url) = &cli.cluster {
        if cli.demo {
            return Err(ShellError::usage(format!(
                "--demo is generated in memory and cannot run on the cluster at {url}: write it as a store with `commdb generate DIR`, then open DIR"
            )));
        }
        for t in &cli.traces {
            connect::require_store(t, url)?;
        }
        shell.connect(url).await?;
    }
    if cli.demo {
        let started = Instant::now();
        attach_demo(&mut shell)?;
        if !cli.quiet {
            eprintln!("generated the demo trace in {}", human_duration(started.elapsed()));
            eprintln!("{}", demo::EXAMPLES);
        }
    }
    for t in &cli.traces {
        shell.open_trace(t, None)?;
    }
    if let Some(path) = &cli.jobs {
        let name = path.to_string_lossy();
        let kind = if name.ends_with(".swf") || name.ends_with(".swf.gz") { "swf" } else { "sacct" };
        shell.run(&format!("ATTACH '{}' AS jobs (TYPE {kind})", name.replace('\'', "''"))).await?;
    }
    if let Some(path) = &cli.switches {
        shell.run(&format!("ATTACH '{}' AS switches (TYPE table)", path.to_string_lossy().replace('\'', "''"))).await?;
    }
    shell.set_format_named(matches.value_source("format") == Some(clap::parser::ValueSource::CommandLine));
    shell.set_output(cli.output.clone())?;
    if let Some(file) = &cli.chart
        && (cli.commands.len() != 1 || !cli.files.is_empty())
    {
        return Err(ShellError::usage(format!(
            "--chart {} draws the result of one query: give exactly one -c SQL and no -f (in a script, \\chart FILE.svg SQL draws any of its queries)",
            file.display()
        )));
    }
    let actions = actions(matches, &cli);
    if !actions.is_empty() {
        let mut commands = 0;
        for (_, action) in actions {
            let flow = match action {
                Action::Sql(sql) => {
                    // Each -c is named by its place among the -c options: `-c#3:1`.
                    commands += 1;
                    shell.script(&sql, &format!("-c#{commands}")).await?
                }
                Action::File(path) => {
                    shell.set_max_rows(rows(usize::MAX));
                    let flow = shell.include(&path).await?;
                    shell.set_max_rows(rows(40));
                    flow
                }
            };
            if flow == Flow::Quit {
                break;
            }
        }
        return shell.close_output();
    }
    if std::io::stdin().is_terminal() {
        shell.repl().await?;
    } else {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| ShellError::file("stdin", e))?;
        shell.set_max_rows(rows(usize::MAX));
        shell.script(&text, "stdin").await?;
    }
    shell.close_output()
}

/// Stack of the threads that plan and execute queries. Deep expression trees (a WHERE of
/// thousands of ORs, a sum of thousands of terms) recurse once per operator when planned and
/// evaluated; the pages of a stack are only used when touched, so a large one costs nothing
/// for ordinary queries.
pub const STACK_BYTES: usize = 512 << 20;

/// Blocking threads the query runtime may start (file reads, analyses); more wait their turn.
pub const BLOCKING_THREADS: usize = 64;

/// The stack of the shell's and the queries' threads: STACK_BYTES, or less when the address
/// space is limited (`ulimit -v`), where every thread's stack is reserved whole when the
/// thread starts: then the stacks of the shell, the query workers and the blocking threads
/// take at most a quarter of the limit together, and at least 2 MiB each (DataFusion grows
/// its deepest recursions on the heap, `recursive_protection`).
pub fn stack_bytes() -> usize {
    let Some(limit) = commdb_catalog::memory::address_space_limit() else { return STACK_BYTES };
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    (limit / 4 / (1 + cores + BLOCKING_THREADS)).clamp(2 << 20, STACK_BYTES)
}

/// The last fault (panic) seen on a query or worker thread, shown as the error it caused.
static LAST_FAULT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP` says otherwise:
/// mimalloc asks for them, and the kernel then clears 2 MB of fresh memory at each first touch
/// of memory that is allocated, freed and allocated again in the sweeps; without them the
/// analyses spend less system time and hold less (measured in docs/performance.md). Where the
/// kernel refuses, nothing changes.
fn without_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        let _ = rustix::thread::disable_transparent_huge_pages(true);
    }
}

/// Faults are reported as errors, not as a panic's message and backtrace: on the threads that
/// run queries (named `commdb-query`) and rayon's workers (unnamed) the engine turns the fault
/// into the query's error (see `exec::fault_message`), so it is only remembered here; anywhere
/// else it is printed as one line saying where it happened.
fn report_faults() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an unknown fault".to_string());
        let at = info.location().map(|l| format!(" ({}:{})", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        *LAST_FAULT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!("{message}{at}"));
        if !(name.is_empty() || name.starts_with("commdb-query")) {
            eprintln!("error: internal fault in thread '{name}': {message}{at}");
        }
    }));
}

/// The last fault seen on a query thread, once.
pub fn last_fault() -> Option<String> {
    LAST_FAULT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
}

fn main() -> ExitCode {
    report_faults();
    without_huge_pages();
    let matches = cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // The shell runs on a thread of its own with a large stack (planning happens there).
    let shell = std::thread::Builder::new().name("commdb".into()).stack_size(stack_bytes()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => return Err(ShellError::Runtime(format!("cannot start the runtime: {e}"))),
        };
        runtime.block_on(run(&matches, cli))
    });
    let result = match shell {
        Ok(handle) => {
            handle.join().unwrap_or_else(|_| Err(ShellError::Runtime("the shell stopped unexpectedly".into())))
        }
        Err(e) => Err(ShellError::Runtime(format!("cannot start the shell's thread: {e}"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
