//! `commdb export TRACE --format FORMAT -o PATH`: a trace for another tool, in one of the
//! formats of commdb_catalog::export::FORMATS (Chrome trace-event JSON for Perfetto's UI and
//! chrome://tracing; a Paraver trace for Paraver and Dimemas).

use std::path::Path;
use std::time::Instant;

use crate::cli::{Cli, open_options};
use crate::error::Result;
use crate::print::human_duration;

pub fn run(cli: &Cli, trace: Option<&str>, to: &str, file: &Path) -> Result<()> {
    let format = commdb_catalog::export::named(to)?;
    let started = Instant::now();
    let (trace_path, trace) = match super::one_trace("export", trace, cli.demo)? {
        Some(path) => (path.to_string(), commdb_catalog::open(path, &open_options(&cli.open))?),
        None => ("the demo trace".to_string(), super::demo_trace(cli.open.clock_correction)?),
    };
    let written = format.write(&trace, file)?;
    if !cli.quiet {
        eprintln!(
            "exported {trace_path} as {} to {} in {}: {written}",
            format.name,
            file.display(),
            human_duration(started.elapsed())
        );
    }
    Ok(())
}
