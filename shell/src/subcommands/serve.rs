//! `commdb serve TRACE... [--port P] [--bind ADDRESS]`: the traces opened (the first drawn, all
//! queryable by the name they are attached as) and the timeline served (`crate::serve`) on the
//! shell's query runtime until Ctrl-C.

use std::net::{IpAddr, SocketAddr};

use crate::cli::Cli;
use crate::error::{Result, ShellError};
use crate::print::PrintOptions;

pub async fn run(cli: &Cli, traces: &[String], bind: IpAddr, port: u16, print: PrintOptions) -> Result<()> {
    let (first, rest) = match traces.split_first() {
        Some((first, rest)) => (Some(first.as_str()), rest),
        None => (None, &[][..]),
    };
    let mut shell = super::shell_with_trace(cli, "serve", first, PrintOptions { quiet: true, ..print })?;
    for path in rest {
        let name = shell.open_trace(path, None)?;
        eprintln!("serve: {path} attached as {name}");
    }
    if !bind.is_loopback() {
        eprintln!(
            "serve: listening on {bind}: anyone who reaches it can run read-only SQL over these traces and read files this user can read"
        );
    }
    let session = std::mem::replace(&mut shell.session, crate::cli::sql_session(cli));
    let served = shell.query_handle().spawn(crate::serve::serve(session, SocketAddr::new(bind, port)));
    served.await.map_err(|e| ShellError::Runtime(format!("serve: {e}")))?
}
