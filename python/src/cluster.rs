//! `commdb.connect`: a session whose queries run on an Apache Ballista cluster of commdb's
//! scheduler and executors (commdb-cluster, the crate the shell's `--cluster` uses). The
//! session keeps its traces, which must be commdb stores (every process of the cluster reads
//! them in place), its views and its functions; each query's plan goes to the scheduler.

use commdb_catalog::Session as CatalogSession;

use crate::errors::{Class, Failure};

/// Send the queries of `session` to the scheduler at `url` (`df://HOST:PORT`) from now on.
pub async fn connect(session: &mut CatalogSession, url: &str) -> Result<(), Failure> {
    let refused = |e: commdb_cluster::Error| match e {
        commdb_cluster::Error::Usage(m) => Failure::argument(m),
        commdb_cluster::Error::Cluster(m) => Failure::new(Class::Cluster, m),
    };
    commdb_cluster::scheduler_address(url).map_err(refused)?;
    for (_, trace) in session.traces() {
        if trace.store_dir().is_none() {
            let path = &trace.meta.path;
            return Err(Failure::argument(format!(
                "{path}: not a commdb store; the cluster at {url} reads stores only: convert it first with `commdb convert {path} DIR`, then open DIR"
            )));
        }
    }
    commdb_cluster::connect(session, url).await.map(drop).map_err(refused)
}
