//! `commdb scheduler` and `commdb executor`: a cluster's processes ([`crate::connect`]), each on a
//! runtime of its own with every core, until Ctrl-C or SIGTERM.

use crate::cli::{Cli, Sub};
use crate::error::{Result, ShellError};

/// What the servers do, for the options that do not apply to them.
const DOES: &str = "which reads the stores its queries name";

pub fn scheduler(cli: &Cli, bind: std::net::SocketAddr, data_dirs: &[std::path::PathBuf]) -> Result<()> {
    super::refuse_reading_options(cli, "scheduler", DOES, &[(cli.demo, "--demo")])?;
    on_server_runtime(crate::connect::scheduler(bind, data_dirs.to_vec(), cli.secret_file.clone()))
}

pub fn executor(cli: &Cli, sub: &Sub) -> Result<()> {
    let Sub::Executor { scheduler, bind, grpc_port, work_dir, vcores, executor_memory, data_dirs } = sub else {
        return Err(ShellError::Runtime("executor: not the executor subcommand".into()));
    };
    super::refuse_reading_options(cli, "executor", DOES, &[(cli.demo, "--demo")])?;
    let args = crate::connect::ExecutorArgs {
        scheduler: *scheduler,
        bind: *bind,
        grpc_port: *grpc_port,
        work_dir: work_dir.clone(),
        vcores: *vcores,
        memory_limit: executor_memory.map(|m| m as u64),
        data_dirs: data_dirs.clone(),
        secret_file: cli.secret_file.clone(),
    };
    on_server_runtime(crate::connect::executor(args))
}

/// Run a scheduler or an executor on a runtime of its own with every core (the shell's
/// runtime has one thread), until it stops.
fn on_server_runtime(work: impl std::future::Future<Output = Result<()>> + Send + 'static) -> Result<()> {
    let server = std::thread::Builder::new().name("commdb-server".into()).spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(crate::stack_bytes())
            .build()
            .map_err(|e| ShellError::Runtime(format!("cannot start the runtime: {e}")))?;
        runtime.block_on(work)
    });
    match server {
        Ok(handle) => {
            handle.join().unwrap_or_else(|_| Err(ShellError::Runtime("the server stopped unexpectedly".into())))
        }
        Err(e) => Err(ShellError::Runtime(format!("cannot start the server's thread: {e}"))),
    }
}
