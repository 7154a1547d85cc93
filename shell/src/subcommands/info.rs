//! `commdb info TRACE`: a trace's facts and table row counts, as `\info` prints them.

use crate::cli::Cli;
use crate::error::Result;
use crate::print::PrintOptions;

pub async fn run(cli: &Cli, trace: Option<&str>, print: PrintOptions) -> Result<()> {
    let mut shell = super::shell_with_trace(cli, "info", trace, PrintOptions { quiet: true, ..print })?;
    shell.run("\\info").await?;
    Ok(())
}
