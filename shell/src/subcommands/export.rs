//! `commdb export TRACE --format chrome -o FILE`: a trace for another tool (Chrome trace-event
//! JSON, which Perfetto's UI and chrome://tracing open).

use std::path::Path;
use std::time::Instant;

use crate::cli::{Cli, open_options};
use crate::error::{Result, ShellError};
use crate::print::human_duration;

pub fn run(cli: &Cli, trace: Option<&str>, to: &str, file: &Path) -> Result<()> {
    if !to.eq_ignore_ascii_case("chrome") {
        return Err(ShellError::usage(format!("export: unknown format '{to}': expected chrome")));
    }
    let started = Instant::now();
    let (trace_path, trace) = match super::one_trace("export", trace, cli.demo)? {
        Some(path) => (path.to_string(), commdb_catalog::open(path, &open_options(&cli.open))?),
        None => ("the demo trace".to_string(), super::demo_trace(cli.open.clock_correction)?),
    };
    let n = commdb_catalog::export::chrome::write(&trace, file)?;
    if !cli.quiet {
        eprintln!(
            "exported {trace_path} to {} in {}: {} calls, {} messages as flows, {} collective parts, {} metric samples{}; open it in ui.perfetto.dev or chrome://tracing",
            file.display(),
            human_duration(started.elapsed()),
            n.calls,
            n.flows,
            n.collectives,
            n.counters,
            if n.transfers + n.launches > 0 {
                format!(", {} accelerator transfers, {} launches as flows to their kernels", n.transfers, n.launches)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
