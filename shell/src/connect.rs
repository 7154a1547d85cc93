//! The shell's side of a cluster: `--cluster`, `\connect`, `commdb scheduler` and `commdb
//! executor`. With the `cluster` feature they run Apache Ballista (commdb-cluster); without it
//! they say how to build a commdb that has it.

use crate::error::{Result, ShellError};
use commdb_catalog::Session;

/// What a commdb built without the cluster says when asked for one.
#[cfg(not(feature = "cluster"))]
const NOT_BUILT: &str =
    "this commdb was built without the cluster: build it with `cargo build --release --features cluster`";

/// A trace opened on a cluster must be a commdb store (`commdb_cluster::require_store`); a
/// commdb without the cluster refuses the cluster itself.
pub fn require_store(path: &str, url: &str) -> Result<()> {
    #[cfg(feature = "cluster")]
    return commdb_cluster::require_store(path, url).map_err(ShellError::from);
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (path, url);
        Ok(())
    }
}

/// A query's failure on a cluster as the user is told it (`commdb_cluster::told`: plain words,
/// the scheduler named when it stopped); a commdb without the cluster meets none.
pub async fn told(message: String, config: &datafusion::prelude::SessionConfig) -> String {
    #[cfg(feature = "cluster")]
    return commdb_cluster::told(message, config).await;
    #[cfg(not(feature = "cluster"))]
    {
        let _ = config;
        message
    }
}

/// Run the session's queries on the cluster at `url`, presenting the cluster's secret (from
/// `secret_file`, else the environment) when there is one.
#[cfg(feature = "cluster")]
pub async fn connect(session: &mut Session, url: &str, secret_file: Option<&std::path::Path>) -> Result<()> {
    let secret = commdb_cluster::secret::Secret::find(secret_file)?;
    commdb_cluster::connect(session, url, secret).await.map(drop).map_err(ShellError::from)
}

#[cfg(not(feature = "cluster"))]
pub async fn connect(_session: &mut Session, url: &str, _secret_file: Option<&std::path::Path>) -> Result<()> {
    Err(ShellError::Cluster(format!("{url}: {NOT_BUILT}")))
}

/// `commdb scheduler --bind HOST:PORT`.
#[cfg(feature = "cluster")]
pub async fn scheduler(
    bind: std::net::SocketAddr,
    data_dirs: Vec<std::path::PathBuf>,
    secret_file: Option<std::path::PathBuf>,
) -> Result<()> {
    let secret = commdb_cluster::secret::Secret::find(secret_file.as_deref())?;
    let options = commdb_cluster::processes::SchedulerOptions { bind, data_dirs, secret };
    commdb_cluster::processes::run_scheduler(options).await.map_err(ShellError::from)
}

#[cfg(not(feature = "cluster"))]
pub async fn scheduler(
    _bind: std::net::SocketAddr,
    _data_dirs: Vec<std::path::PathBuf>,
    _secret_file: Option<std::path::PathBuf>,
) -> Result<()> {
    Err(ShellError::Cluster(format!("scheduler: {NOT_BUILT}")))
}

/// What `commdb executor` is told (read only by a commdb built with the cluster).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub struct ExecutorArgs {
    pub scheduler: std::net::SocketAddr,
    pub bind: std::net::SocketAddr,
    pub grpc_port: Option<u16>,
    pub work_dir: Option<std::path::PathBuf>,
    pub vcores: Option<usize>,
    pub memory_limit: Option<u64>,
    pub data_dirs: Vec<std::path::PathBuf>,
    pub secret_file: Option<std::path::PathBuf>,
}

/// `commdb executor --scheduler HOST:PORT --bind HOST:PORT ...`.
#[cfg(feature = "cluster")]
pub async fn executor(args: ExecutorArgs) -> Result<()> {
    commdb_cluster::processes::run_executor(commdb_cluster::processes::ExecutorOptions {
        scheduler: args.scheduler,
        bind: args.bind,
        grpc_port: args.grpc_port,
        work_dir: args.work_dir,
        vcores: args.vcores,
        memory_limit: args.memory_limit,
        data_dirs: args.data_dirs,
        secret: commdb_cluster::secret::Secret::find(args.secret_file.as_deref())?,
    })
    .await
    .map_err(ShellError::from)
}

#[cfg(not(feature = "cluster"))]
pub async fn executor(_args: ExecutorArgs) -> Result<()> {
    Err(ShellError::Cluster(format!("executor: {NOT_BUILT}")))
}
