//! The shell's side of a cluster: `--cluster`, `\connect`, `commdb scheduler` and `commdb
//! executor`. With the `cluster` feature they run Apache Ballista (`crate::cluster`); without it
//! they say how to build a commdb that has it.

use std::path::Path;

use crate::error::{Result, ShellError};
use commdb_catalog::Session;

/// What a commdb built without the cluster says when asked for one.
#[cfg(not(feature = "cluster"))]
const NOT_BUILT: &str =
    "this commdb was built without the cluster: build it with `cargo build --release --features cluster`";

/// A trace opened on a cluster must be a commdb store, which every process reads in place.
pub fn require_store(path: &str, url: &str) -> Result<()> {
    if commdb_catalog::store::is_store(Path::new(path)) {
        Ok(())
    } else {
        Err(ShellError::usage(format!(
            "{path}: not a commdb store; the cluster at {url} reads stores only: convert it first with `commdb convert {path} DIR`, then open DIR"
        )))
    }
}

/// A cluster's error in plain words: Ballista reports a failed task as the debug form of the
/// error it carried (`Job J failed: ... DataFusionError(Shared(External(DataFusionError(
/// Execution("latency_criteria: ...")))))`); the words inside are the error, named with the
/// job. Any other message is kept as it is.
pub fn plain_error(message: String) -> String {
    // Only Ballista's reports: a job named, and an error in its debug form.
    if !message.contains("DataFusionError(") {
        return message;
    }
    let Some(job) = message.find("Job ").map(|at| &message[at..]) else { return message };
    let job = job.split_whitespace().nth(1).unwrap_or_default().to_string();
    let inner = ["Execution(\"", "Plan(\"", "External(\"", "ResourcesExhausted(\""]
        .iter()
        .filter_map(|open| message.rfind(open).map(|at| at + open.len()))
        .max();
    let Some(start) = inner else { return message };
    let mut out = String::new();
    let mut chars = message[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => break,
            },
            '"' => return format!("{out} (cluster job {job})"),
            c => out.push(c),
        }
    }
    message
}

/// Run the session's queries on the cluster at `url`.
#[cfg(feature = "cluster")]
pub async fn connect(session: &mut Session, url: &str) -> Result<()> {
    crate::cluster::connect(session, url).await.map(drop)
}

#[cfg(not(feature = "cluster"))]
pub async fn connect(_session: &mut Session, url: &str) -> Result<()> {
    Err(ShellError::Cluster(format!("{url}: {NOT_BUILT}")))
}

/// `commdb scheduler --bind HOST:PORT`.
#[cfg(feature = "cluster")]
pub async fn scheduler(bind: std::net::SocketAddr) -> Result<()> {
    crate::cluster::processes::run_scheduler(bind).await
}

#[cfg(not(feature = "cluster"))]
pub async fn scheduler(_bind: std::net::SocketAddr) -> Result<()> {
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
}

/// `commdb executor --scheduler HOST:PORT --bind HOST:PORT ...`.
#[cfg(feature = "cluster")]
pub async fn executor(args: ExecutorArgs) -> Result<()> {
    crate::cluster::processes::run_executor(crate::cluster::processes::ExecutorOptions {
        scheduler: args.scheduler,
        bind: args.bind,
        grpc_port: args.grpc_port,
        work_dir: args.work_dir,
        vcores: args.vcores,
        memory_limit: args.memory_limit,
    })
    .await
}

#[cfg(not(feature = "cluster"))]
pub async fn executor(_args: ExecutorArgs) -> Result<()> {
    Err(ShellError::Cluster(format!("executor: {NOT_BUILT}")))
}

#[cfg(test)]
mod tests {
    use super::plain_error;

    #[test]
    fn a_failed_task_is_told_in_its_own_words() {
        let ballista = r#"Execution error: Job 038GVR1JJE000 failed: Job failed due to stage 2 failed: Task failed due to runtime execution error: DataFusionError(Shared(External(DataFusionError(Execution("latency_criteria: needs about 64.13 MiB, more than the \"budget\""))))"#;
        assert_eq!(
            plain_error(ballista.to_string()),
            "latency_criteria: needs about 64.13 MiB, more than the \"budget\" (cluster job 038GVR1JJE000)"
        );
        let other = "Schema error: No field named x".to_string();
        assert_eq!(plain_error(other.clone()), other);
    }
}
