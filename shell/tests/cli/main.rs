//! The `commdb` binary run as a user runs it, in one test binary: its subcommands, scripts and
//! saved reports, the interactive shell in a terminal, the HTML pages and the served timeline in a browser, and nothing
//! lost on bad input. The cluster's tests (`cluster.rs`, the `cluster` feature) are their own.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod cli_browser;
mod cli_reports;
mod cli_scripts;
mod cli_serve;
mod cli_subcommands;
mod nothing_lost;
mod report_figures;
