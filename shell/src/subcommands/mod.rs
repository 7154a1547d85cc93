//! The subcommands of `commdb`, one module each with its own `run`: `generate`, `convert`,
//! `export`, `report`, `serve`, `info`, `cache`, and the cluster's `scheduler` and `executor`
//! (`servers`). What they share is here: the trace a subcommand reads (a path or --demo), and
//! the refusal of options that apply to reading a trace by a subcommand that reads none.

mod cache;
mod convert;
mod export;
mod generate;
mod info;
mod report;
mod serve;
mod servers;

use std::path::Path;

use commdb_catalog::clock::Correction;

use crate::cli::{Cli, Sub};
use crate::error::{Result, ShellError};
use crate::exec::Shell;
use crate::print::PrintOptions;

/// Run subcommand `sub` of the command line `cli`; `print` is how the shell would print.
pub async fn run(cli: &Cli, sub: &Sub, print: PrintOptions) -> Result<()> {
    match sub {
        Sub::Scheduler { bind, data_dirs } => servers::scheduler(cli, *bind, data_dirs),
        Sub::Executor { .. } => servers::executor(cli, sub),
        Sub::Generate(args) => generate::run(cli, args),
        Sub::Convert { input, output, part_rows } => match (cli.demo, output) {
            (false, Some(output)) => convert::run(cli, input, output, *part_rows),
            (true, None) => convert::demo(cli, Path::new(input), *part_rows),
            (false, None) => Err(ShellError::usage(format!(
                "convert: give the trace to read and the directory to write ({input} is one of the two), or --demo and the directory"
            ))),
            (true, Some(_)) => Err(ShellError::usage(
                "convert --demo writes the generated demo trace: give only the directory to write",
            )),
        },
        Sub::Export { trace, to, file } => export::run(cli, trace.as_deref(), to, file),
        Sub::Report { trace, file, vs } => report::run(cli, trace.as_deref(), vs.as_deref(), file, print).await,
        Sub::Cache { clear, names } => cache::run(cli, *clear, names),
        Sub::Info { trace } => info::run(cli, trace.as_deref(), print).await,
        Sub::Serve { traces, port, bind } => serve::run(cli, traces, *bind, *port, print).await,
    }
}

/// The trace a subcommand reads: the path given, or None for --demo; one of the two.
fn one_trace<'a>(command: &str, trace: Option<&'a str>, demo: bool) -> Result<Option<&'a str>> {
    match (trace, demo) {
        (Some(_), true) => Err(ShellError::usage(format!("{command}: give a trace or --demo, not both"))),
        (Some(path), false) => Ok(Some(path)),
        (None, true) => Ok(None),
        (None, false) => {
            Err(ShellError::usage(format!("{command}: which trace? Give its path, or --demo for the generated one")))
        }
    }
}

/// A shell with the trace a subcommand reads (a path, or the demo trace) open as the default.
fn shell_with_trace(cli: &Cli, command: &str, trace: Option<&str>, print: PrintOptions) -> Result<Shell> {
    let mut shell = Shell::new(crate::cli::sql_session(cli), print)?;
    match one_trace(command, trace, cli.demo)? {
        Some(path) => drop(shell.open_trace(path, None)?),
        None => attach_demo(&mut shell)?,
    }
    Ok(shell)
}

/// The demo trace, generated and built.
pub fn demo_trace(correction: Correction) -> Result<commdb_catalog::Trace> {
    Ok(commdb_catalog::generate::demo(correction)?)
}

/// Attach the demo trace as schema `demo`, the default.
pub fn attach_demo(shell: &mut Shell) -> Result<()> {
    let trace = demo_trace(shell.session.open_options.clock_correction)?;
    shell.session.attach(trace, Some("demo"))?;
    shell.refresh_words();
    Ok(())
}

/// Refuse the options that shape how a trace is read (--nodes, --time-unit, --clock-sync, and
/// those in `also`) in subcommand `command`, which reads no trace and `does` what it says.
fn refuse_reading_options(cli: &Cli, command: &str, does: &str, also: &[(bool, &str)]) -> Result<()> {
    let given = [
        (cli.open.nodes.is_some(), "--nodes"),
        (cli.open.time_unit.is_some(), "--time-unit"),
        (cli.open.clock_sync.is_some(), "--clock-sync"),
    ];
    match given.iter().chain(also).find(|(g, _)| *g) {
        Some((_, option)) => {
            Err(ShellError::usage(format!("{option} applies to reading a trace, not to {command} ({does})")))
        }
        None => Ok(()),
    }
}
