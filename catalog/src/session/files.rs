//! Data files named by their path where a table's name goes (`SELECT * FROM 'jobs.parquet'`,
//! CSV, JSON, Parquet, Avro and Arrow, as duckdb reads them), through DataFusion's URL tables.
//! Only a name that reads as a path (it has a `/`, a scheme, or a data file's extension) is
//! looked for on disk: any other name the session does not have (a CTE's, a function's, a
//! typo) is answered at once as unknown. Looking a file up must wait for the file system, and a
//! table function planned inside a statement cannot wait (commdb_analysis::relation); with this
//! rule, the names commdb's own planning resolves never wait.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{DynamicFileCatalog, TableProvider, UrlTableFactory};
use datafusion::datasource::dynamic_file::DynamicListTableFactory;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionContext;

/// The extensions of the data files a path may name (before a compression's).
const DATA_FILES: &[&str] = &["csv", "tsv", "json", "ndjson", "jsonl", "parquet", "avro", "arrow"];

/// The extensions of compressed files DataFusion reads.
const COMPRESSED: &[&str] = &["gz", "bz2", "xz", "zst"];

/// `ctx` whose statements may name data files by their path.
pub fn by_path(ctx: SessionContext) -> SessionContext {
    let files = Arc::new(DynamicListTableFactory::new(Default::default()));
    let catalogs = Arc::new(DynamicFileCatalog::new(
        ctx.state().catalog_list().clone(),
        Arc::new(PathsOnly(files.clone())) as Arc<dyn UrlTableFactory>,
    ));
    let session_id = ctx.session_id();
    let ctx: SessionContext = SessionStateBuilder::new_from_existing(ctx.state())
        .with_session_id(session_id)
        .with_catalog_list(catalogs)
        .build()
        .into();
    files.session_store().with_state(ctx.state_weak_ref());
    ctx
}

/// DataFusion's URL tables, asked only for names that read as paths.
#[derive(Debug)]
struct PathsOnly(Arc<DynamicListTableFactory>);

#[async_trait]
impl UrlTableFactory for PathsOnly {
    async fn try_new(&self, url: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if !is_path(url) {
            return Ok(None);
        }
        self.0.try_new(url).await
    }
}

/// Whether a table's name reads as a file's or directory's path.
pub fn is_path(name: &str) -> bool {
    if name.contains('/') || name.contains('\\') || name.contains("://") {
        return true;
    }
    let mut parts = name.rsplit('.');
    let last = parts.next().unwrap_or_default().to_ascii_lowercase();
    let data = |ext: &str| DATA_FILES.contains(&ext);
    match parts.next() {
        None => false,
        Some(before) if COMPRESSED.contains(&last.as_str()) => {
            name.matches('.').count() >= 2 && data(&before.to_ascii_lowercase())
        }
        Some(_) => data(&last),
    }
}

#[cfg(test)]
mod tests {
    use super::is_path;

    #[test]
    fn paths_by_slash_scheme_or_data_extension() {
        for path in ["jobs.parquet", "a/b", "./runs", "s3://bucket/x", "log.CSV", "x.csv.gz", "C:\\t\\j.json"] {
            assert!(is_path(path), "{path}");
        }
        for name in ["messages", "m", "message_latency", "1ms", "nothing", "run2", "notes.txt", "x.gz", "gz"] {
            assert!(!is_path(name), "{name}");
        }
    }
}
