//! `commdb convert TRACE DIR`: a trace into a commdb store, a group of whole ranks at a time
//! when the trace's reader can (commdb_catalog::convert), else read whole and written;
//! `commdb convert --demo DIR` writes the generated demo trace as a store.

use std::path::Path;
use std::time::Instant;

use commdb_catalog::{OpenOptions, store};

use crate::cli::{Cli, open_options};
use crate::error::Result;
use crate::print::human_duration;

pub fn run(cli: &Cli, input: &str, output: &Path, part_rows: Option<u64>) -> Result<()> {
    let started = Instant::now();
    let part_rows = part_rows.map_or(store::PART_ROWS, |n| n as usize);
    store::refuse_source(Path::new(input), output)?;
    let options = open_options(&cli.open);
    let (events, messages, how) = if commdb_catalog::formats::in_groups(input, &options) {
        let share = std::sync::Arc::new(commdb_catalog::progress::LoadProgress::default());
        let shown = crate::progress::Progress::start(&format!("converting {input}"), Some(share.clone()));
        let options = OpenOptions { progress: Some(share), ..options };
        let limits = commdb_catalog::convert::Limits { part_rows, ..Default::default() };
        let converted = commdb_catalog::formats::convert(Path::new(input), output, &options, &limits);
        shown.stop();
        let c = converted?;
        (c.events as usize, c.messages as usize, format!(" ({} groups of ranks)", c.groups))
    } else {
        let trace = commdb_catalog::open(input, &options)?;
        store::write_in_parts(&trace, output, part_rows)?;
        let rows = |t: &str| trace.built_rows(t).unwrap_or(0);
        (rows("events"), rows("messages"), String::new())
    };
    if !cli.quiet {
        eprintln!(
            "converted {input} ({events} events, {messages} messages) to {}{how} in {}",
            output.display(),
            human_duration(started.elapsed())
        );
    }
    Ok(())
}

/// The demo trace (`--demo`), generated and written as a store at `output`.
pub fn demo(cli: &Cli, output: &Path, part_rows: Option<u64>) -> Result<()> {
    let started = Instant::now();
    let part_rows = part_rows.map_or(store::PART_ROWS, |n| n as usize);
    let trace = super::demo_trace(cli.open.clock_correction)?;
    store::write_in_parts(&trace, output, part_rows)?;
    if !cli.quiet {
        let rows = |t: &str| trace.built_rows(t).unwrap_or(0);
        eprintln!(
            "converted the demo trace ({} events, {} messages) to {} in {}",
            rows("events"),
            rows("messages"),
            output.display(),
            human_duration(started.elapsed())
        );
    }
    Ok(())
}
