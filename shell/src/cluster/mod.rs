//! commdb on a cluster: queries over stores planned and run by Apache Ballista (the
//! distributed engine of DataFusion), with commdb's tables and analyses carried by its codecs
//! (`codec`) to a scheduler and executors that run inside the commdb binary (`processes`).
//! The client (`connect`) keeps its session, its views and its attached stores, and hands
//! each query's plan to the scheduler instead of running it: the scheduler cuts it into
//! stages at its exchanges, the executors run each stage's tasks on the store's parts and
//! exchange rows through shuffle files, and the client reads the last stage's output.
//! docs/scale.md says how to run one and which analyses spread.

pub mod codec;
pub mod processes;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Result, ShellError};
use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use commdb_catalog::Session;
use datafusion::execution::SessionStateBuilder;

/// The scheduler a `df://HOST:PORT` address names.
pub fn scheduler_address(url: &str) -> Result<SocketAddr> {
    let Some(rest) = url.strip_prefix("df://") else {
        return Err(ShellError::usage(format!("{url}: expected a scheduler's address df://HOST:PORT")));
    };
    let rest = rest.trim_end_matches('/');
    if !rest.contains(':') {
        return Err(ShellError::usage(format!(
            "{url}: expected a scheduler's address df://HOST:PORT (the port is required)"
        )));
    }
    rest.to_socket_addrs()
        .map_err(|e| ShellError::Cluster(format!("{url}: {e}")))?
        .next()
        .ok_or_else(|| ShellError::Cluster(format!("{url}: the host has no address")))
}

/// Whether something answers at `address` within 10 s.
pub async fn reachable(address: SocketAddr, what: &str) -> Result<()> {
    match tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ShellError::Cluster(format!("cannot reach {what} at {address}: {e}"))),
        Err(_) => Err(ShellError::Cluster(format!("{what} at {address} did not answer within 10 s"))),
    }
}

/// Send the session's queries to the scheduler at `url` from now on. The session keeps its
/// traces, views and functions; its queries run on the cluster.
pub async fn connect(session: &mut Session, url: &str) -> Result<SocketAddr> {
    let address = scheduler_address(url)?;
    reachable(address, "the scheduler").await?;
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
        .with_ballista_adaptive_query_planner(false);
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
    Ok(address)
}
