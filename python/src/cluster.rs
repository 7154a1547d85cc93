//! `commdb.connect`: a session whose queries run on an Apache Ballista cluster of commdb's
//! scheduler and executors (commdb-cluster, the crate the shell's `--cluster` uses). The
//! session keeps its traces, which must be commdb stores (every process of the cluster reads
//! them in place), its views and its functions; each query's plan goes to the scheduler.

use commdb_catalog::Session as CatalogSession;

use crate::errors::{Class, Failure};

/// Send the queries of `session` to the scheduler at `url` (`df://HOST:PORT`) from now on,
/// presenting the cluster's secret (from `secret_file`, else COMMDB_CLUSTER_SECRET) when there
/// is one, then open the store at `path` (if given) as `name`. A path that is not a store is refused
/// before it is opened (a trace bigger than the memory budget would otherwise be converted
/// into a cache store of this machine first).
pub async fn connect(
    session: &mut CatalogSession,
    url: &str,
    path: Option<&str>,
    name: Option<&str>,
    secret_file: Option<&std::path::Path>,
) -> Result<(), Failure> {
    commdb_cluster::scheduler_address(url).map_err(refused)?;
    let secret = commdb_cluster::secret::Secret::find(secret_file).map_err(refused)?;
    if let Some(path) = path {
        commdb_cluster::require_store(path, url).map_err(refused)?;
    }
    for (_, trace) in session.traces() {
        if trace.store_dir().is_none() {
            commdb_cluster::require_store(&trace.meta.path, url).map_err(refused)?;
        }
    }
    commdb_cluster::connect(session, url, secret).await.map_err(refused)?;
    if let Some(path) = path {
        let options = session.open_options.clone();
        session.open(path, name, &options).map_err(Failure::from)?;
        commdb_cluster::partitions_for_stores(session);
    }
    Ok(())
}

/// A cluster's error as the exception it raises.
fn refused(e: commdb_cluster::Error) -> Failure {
    match e {
        commdb_cluster::Error::Usage(m) => Failure::argument(m),
        commdb_cluster::Error::Cluster(m) => Failure::new(Class::Cluster, m),
    }
}
