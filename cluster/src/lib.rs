//! commdb on a cluster: queries over stores planned and run by Apache Ballista (the
//! distributed engine of DataFusion), with commdb's tables and analyses carried by its codecs
//! (`codec`) to a scheduler and executors that run inside the commdb binary (`processes`).
//! A client (the shell's `--cluster` and `\connect`, Python's `commdb.connect`) keeps its
//! session, its views and its attached stores, and hands each query's plan to the scheduler
//! instead of running it (`connect`): the scheduler cuts it into stages at its exchanges, the
//! executors run each stage's tasks on the store's parts and exchange rows through shuffle
//! files, and the client reads the last stage's output. A failed query names the executors
//! it lost (`losses`). docs/scale.md says how to run one and which analyses spread.

pub mod codec;
pub mod guard;
pub mod losses;
pub mod one_reader;
pub mod order_kept;
pub mod processes;
pub mod retried;
pub mod secret;

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use commdb_catalog::Session;
use datafusion::execution::SessionStateBuilder;

/// What goes wrong in reaching or running a cluster.
#[derive(Debug)]
pub enum Error {
    /// What was asked cannot be: an address without a port, a port past the last.
    Usage(String),
    /// A scheduler or executor that cannot be reached, cannot listen, or stopped.
    Cluster(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Cluster(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        Error::Cluster(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The scheduler a `df://HOST:PORT` address names.
pub fn scheduler_address(url: &str) -> Result<SocketAddr> {
    let Some(rest) = url.strip_prefix("df://") else {
        return Err(Error::Usage(format!("{url}: expected a scheduler's address df://HOST:PORT")));
    };
    let rest = rest.trim_end_matches('/');
    if !rest.contains(':') {
        return Err(Error::Usage(format!(
            "{url}: expected a scheduler's address df://HOST:PORT (the port is required)"
        )));
    }
    rest.to_socket_addrs()
        .map_err(|e| Error::Cluster(format!("{url}: {e}")))?
        .next()
        .ok_or_else(|| Error::Cluster(format!("{url}: the host has no address")))
}

/// A trace opened on a cluster must be a commdb store, which every process reads in place.
pub fn require_store(path: &str, url: &str) -> Result<()> {
    if commdb_catalog::store::is_store(std::path::Path::new(path)) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{path}: not a commdb store; the cluster at {url} reads stores only: convert it first with `commdb convert {path} DIR`, then open DIR"
    )))
}

/// Whether something answers at `address` within 10 s.
pub async fn reachable(address: SocketAddr, what: &str) -> Result<()> {
    match tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Cluster(format!("cannot reach {what} at {address}: {e}"))),
        Err(_) => Err(Error::Cluster(format!("{what} at {address} did not answer within 10 s"))),
    }
}

/// Send the session's queries to the scheduler at `url` from now on, presenting the cluster's
/// `secret` (`secret::Secret::find`) when it has one. The session keeps its traces, views and
/// functions; its queries run on the cluster.
pub async fn connect(session: &mut Session, url: &str, secret: Option<secret::Secret>) -> Result<SocketAddr> {
    let address = scheduler_address(url)?;
    reachable(address, "the scheduler").await?;
    secret::admitted(address, secret.as_ref()).await?;
    let state = session.context().state();
    // Ballista's upgrade puts its own list of functions in place; commdb's are kept.
    let scalars: Vec<_> = state.scalar_functions().values().cloned().collect();
    let aggregates: Vec<_> = state.aggregate_functions().values().cloned().collect();
    // Ballista's settings for a distributed plan first (its codecs' settings would mark the
    // configuration as set up, and these be left out).
    let mut config = state.config().clone();
    // Scans read whole files, each partition its own: a partition of a store's calls holds
    // whole ranks (processes.rs).
    config.options_mut().optimizer.repartition_file_scans = false;
    config.options_mut().execution.enable_file_stream_work_stealing = false;
    let config = config
        .upgrade_for_ballista()
        .with_ballista_logical_extension_codec(Arc::new(codec::LogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(codec::PhysicalCodec::default()))
        .with_ballista_job_name("commdb")
        .with_ballista_adaptive_query_planner(false)
        .with_extension(Arc::new(Scheduler(address)));
    let config = match &secret {
        Some(secret) => config.with_ballista_override_create_grpc_client_endpoint(secret.endpoint()),
        None => config,
    };
    let state = SessionStateBuilder::new_from_existing(state).with_config(config).build();
    let upgraded = state.upgrade_for_ballista(format!("http://{address}"))?;
    let mut builder = SessionStateBuilder::new_from_existing(upgraded);
    let mut all_scalars: Vec<_> = builder.scalar_functions().clone().unwrap_or_default();
    let mut all_aggregates: Vec<_> = builder.aggregate_functions().clone().unwrap_or_default();
    for f in scalars {
        if !all_scalars.iter().any(|g| g.name() == f.name()) {
            all_scalars.push(f);
        }
    }
    for f in aggregates {
        if !all_aggregates.iter().any(|g| g.name() == f.name()) {
            all_aggregates.push(f);
        }
    }
    builder = builder.with_scalar_functions(all_scalars).with_aggregate_functions(all_aggregates);
    session.set_state(builder.build());
    partitions_for_stores(session);
    Ok(address)
}

/// Give a session on a cluster a partition per part of the calls of the largest store it has
/// open, at least: what a task of an analysis holds (its ranks' calls and waits, the share of
/// an exchange that Ballista fetches whole) then stays a part's share as traces grow, where a
/// partition per core of the client gave each task of a 1 B-event store half of it
/// (docs/performance.md, "On a cluster": `wait_states` on 4 executors of 273 MiB took 110.7 s
/// and 2.3 GB an executor in 2 partitions, 59.1 s and 559 MB in 64). Called on connecting
/// and after a store is opened on a cluster; a larger setting of the user's is kept.
pub fn partitions_for_stores(session: &mut Session) {
    let parts = session.traces().filter_map(|(_, t)| t.stored_file("calls")).map(|f| f.files.len()).max().unwrap_or(0);
    let state = session.context().state();
    if parts <= state.config().target_partitions() {
        return;
    }
    let mut config = state.config().clone();
    config.options_mut().execution.target_partitions = parts;
    session.set_state(SessionStateBuilder::new_from_existing(state).with_config(config).build());
}

/// The scheduler a session's queries go to: an extension of the session's configuration that
/// `connect` sets, so that a failed query can say whether the scheduler went away.
#[derive(Debug, Clone, Copy)]
pub struct Scheduler(pub SocketAddr);

/// How long a failed query's scheduler is given to answer before it is said to have stopped.
const STILL_THERE: Duration = Duration::from_secs(2);

/// A query's failure as the user is told it: in plain words (`plain_error`), and, on a
/// session connected to a cluster whose scheduler no longer answers, naming the scheduler (a
/// scheduler that stops mid-query cuts its connection, which the client reports only as a
/// broken HTTP/2 stream).
pub async fn told(message: String, config: &datafusion::prelude::SessionConfig) -> String {
    let message = plain_error(message);
    let Some(scheduler) = config.get_extension::<Scheduler>() else { return message };
    match answers(scheduler.0, config).await {
        Ok(()) => message,
        Err(e) => format!(
            "the scheduler at {} stopped answering while the query ran ({e}); the query is lost: {message}",
            scheduler.0
        ),
    }
}

/// Whether the scheduler at `address` answers a request within `STILL_THERE`, presenting
/// what the session's connections present: a process being killed may still accept a
/// connection, but answers none.
async fn answers(address: SocketAddr, config: &datafusion::prelude::SessionConfig) -> std::result::Result<(), String> {
    let custom = config.ballista_override_create_grpc_client_endpoint();
    let present = |endpoint: tonic::transport::Endpoint| match &custom {
        Some(custom) => custom.configure_endpoint(endpoint).map_err(|e| format!("{e:?}")),
        None => Ok(endpoint),
    };
    match ask_scheduler(address, STILL_THERE, present).await {
        Err(e) => Err(e),
        Ok(Err(status))
            if matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
            ) =>
        {
            Err(status.message().to_string())
        }
        // An answer, even a refusal, is the scheduler's.
        Ok(_) => Ok(()),
    }
}

/// The scheduler at `address` asked a request that runs nothing (the status of a job that does
/// not exist) within `wait`, through an endpoint `prepared` as the asker's connections are
/// (the cluster's secret): its answer, a refusal included; Err, why none came.
pub(crate) async fn ask_scheduler(
    address: SocketAddr,
    wait: Duration,
    prepared: impl FnOnce(tonic::transport::Endpoint) -> std::result::Result<tonic::transport::Endpoint, String>,
) -> std::result::Result<std::result::Result<(), tonic::Status>, String> {
    use ballista_core::serde::protobuf::GetJobStatusParams;
    use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
    // The error and its causes, each said once.
    let chain = |e: &dyn std::error::Error| {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            let said = s.to_string();
            if !text.ends_with(&said) {
                text = format!("{text}: {said}");
            }
            source = s.source();
        }
        text
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| chain(&e))?
        .connect_timeout(wait)
        .timeout(wait);
    let channel = prepared(endpoint)?.connect().await.map_err(|e| chain(&e))?;
    let asked = SchedulerGrpcClient::new(channel)
        .get_job_status(GetJobStatusParams { job_id: "commdb-asks".to_string() })
        .await;
    Ok(asked.map(drop))
}

/// A cluster's error in plain words: Ballista reports a failed task as the debug form of the
/// error it carried (`Job J failed: ... DataFusionError(Shared(External(DataFusionError(
/// Execution("latency_criteria: ...")))))`); the words inside are the error, named with the
/// job. Any other message is kept as it is.
pub fn plain_error(message: String) -> String {
    // A query the scheduler refused comes as the debug form of a gRPC status.
    if let Some(at) = message.find("Status { code: ")
        && let Some(open) = message[at..].find("message: \"")
        && let Some(said) = quoted(&message[at + open + "message: \"".len()..])
    {
        let said = said.trim_start_matches("Could not parse plan: ").trim_start_matches("DataFusion error: ");
        return said.to_string();
    }
    // Otherwise only Ballista's reports: a job named, and an error in its debug form.
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
    match quoted(&message[start..]) {
        Some(said) => format!("{said} (cluster job {job})"),
        None => message,
    }
}

/// The text of a Rust string literal's debug form that `text` starts inside of, up to its
/// closing quote, unescaped; None when it has none.
fn quoted(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
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
        let refused = r#"Execution error: Status { code: InvalidArgument, message: "Could not parse plan: DataFusion error: Error during planning: scheduler 127.0.0.1:1 reads and writes only under its data directories (/d): '/s' is outside them", metadata: MetadataMap { headers: {} }, source: None }"#;
        assert_eq!(
            plain_error(refused.to_string()),
            "Error during planning: scheduler 127.0.0.1:1 reads and writes only under its data directories (/d): '/s' is outside them"
        );
        let other = "Schema error: No field named x".to_string();
        assert_eq!(plain_error(other.clone()), other);
    }
}
