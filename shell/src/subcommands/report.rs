//! `commdb report TRACE -o FILE.html`: the one-page HTML report of a trace (commdb_report).

use std::path::Path;

use crate::cli::Cli;
use crate::error::Result;
use crate::print::PrintOptions;

pub async fn run(cli: &Cli, trace: Option<&str>, file: &Path, print: PrintOptions) -> Result<()> {
    let mut shell = super::shell_with_trace(cli, "report", trace, PrintOptions { quiet: cli.quiet, ..print })?;
    shell.report(file).await
}
