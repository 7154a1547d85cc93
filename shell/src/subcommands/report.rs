//! `commdb report TRACE -o FILE.html`: the one-page HTML report of a trace, and `commdb report
//! A --vs B -o FILE.html`: the page that compares two runs (commdb_report).

use std::path::Path;

use crate::cli::Cli;
use crate::error::Result;
use crate::print::PrintOptions;

pub async fn run(cli: &Cli, trace: Option<&str>, vs: Option<&str>, file: &Path, print: PrintOptions) -> Result<()> {
    let mut shell = super::shell_with_trace(cli, "report", trace, PrintOptions { quiet: cli.quiet, ..print })?;
    match vs {
        None => shell.report(file).await,
        Some(other) => shell.report_vs(other, file).await,
    }
}
