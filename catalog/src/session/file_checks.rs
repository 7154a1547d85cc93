//! A store's Parquet files checked against the manifest's checksums when the scan opens them,
//! not when the query starts: the scan's file reader (`CheckedReaders`, DataFusion's
//! `ParquetFileReaderFactory`) runs a file's checks before its first read, and DataFusion asks
//! for that read only after its file statistics have kept the file, so a part that a filter
//! rules out by its min and max (a time window, a rank range, a kind the part does not hold)
//! is neither checked nor read. What is checked of a file is what the scan reads of it (the
//! footer and the columns it projects or filters on, each by its own checksum, or the whole
//! file where the manifest has only the file's), each once per open store whatever the number
//! of queries and partitions that read it (`Check::verdict`).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileScanConfigBuilder, ParquetFileReaderFactory, ParquetSource, parquet::DefaultParquetFileReaderFactory,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

use crate::column_sums::{FileSums, Piece};
use crate::session::plan_node::off_the_workers;

/// Whether a store file, or a piece of it, matched its manifest's checksum, found once for
/// every query.
pub type CheckOnce = tokio::sync::OnceCell<std::result::Result<(), String>>;

/// A file and what of it is checked (None: the whole file).
pub type CheckKey = (std::path::PathBuf, Option<Piece>);

/// The checks of a store's pieces run or running in a process, shared by every scan of the
/// store's tables ([`crate::Trace::checked`]).
pub type Checked = Arc<std::sync::Mutex<HashMap<CheckKey, Arc<CheckOnce>>>>;

/// One check of what a scan reads of a file: the file, its checksums, what of it, and the
/// check's outcome shared with every scan of the table.
#[derive(Debug, Clone)]
pub struct Check {
    pub path: std::path::PathBuf,
    pub sums: FileSums,
    pub piece: Option<Piece>,
    pub once: Arc<CheckOnce>,
}

impl Check {
    /// Reads what the check covers and compares its checksum with the manifest's.
    fn run(&self) -> crate::error::Result<()> {
        match (&self.piece, &self.sums.columns) {
            (Some(piece), Some(sums)) => crate::column_sums::check_piece(&self.path, sums, piece),
            _ => crate::store::check_file(&self.path, self.sums.file),
        }
    }

    /// The check's outcome: run on a blocking thread by the first scan that needs it, waited
    /// for by the others.
    pub async fn verdict(&self) -> std::result::Result<(), String> {
        self.once
            .get_or_init(|| async {
                let what = format!("checking {}", self.path.display());
                let check = self.clone();
                off_the_workers(&what, move || check.run().map_err(|e| e.to_string()))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
            })
            .await
            .clone()
    }
}

/// The checks of each file a scan may read, by the location DataFusion gives the file.
pub type ChecksByFile = HashMap<datafusion::object_store::path::Path, Arc<[Check]>>;

/// `plan` (a scan of Parquet files in `store`) with every file checked when it is opened
/// (`checks`).
pub fn check_on_open(
    plan: Arc<dyn ExecutionPlan>,
    store: Arc<dyn datafusion::object_store::ObjectStore>,
    checks: ChecksByFile,
) -> Result<Arc<dyn ExecutionPlan>> {
    let checks = Arc::new(checks);
    let plan = plan
        .transform_down(|node| {
            let Some(exec) = node.downcast_ref::<DataSourceExec>() else { return Ok(Transformed::no(node)) };
            let Some((config, source)) = exec.downcast_to_file_source::<ParquetSource>() else {
                return Ok(Transformed::no(node));
            };
            let inner = source
                .parquet_file_reader_factory()
                .cloned()
                .unwrap_or_else(|| Arc::new(DefaultParquetFileReaderFactory::new(store.clone())));
            let factory = Arc::new(CheckedReaders { inner, checks: checks.clone() });
            let source = source.clone().with_parquet_file_reader_factory(factory);
            let config = FileScanConfigBuilder::from(config.clone()).with_source(Arc::new(source)).build();
            Ok(Transformed::yes(Arc::new(exec.clone().with_data_source(Arc::new(config))) as Arc<dyn ExecutionPlan>))
        })?
        .data;
    // A scan planned without a Parquet source reads no file, and has nothing to check.
    Ok(plan)
}

/// A failed check as the check found it: the Parquet reader carries it through as an error of
/// its own ("Parquet error: External: ..."), which says nothing more.
pub fn as_found(e: DataFusionError) -> DataFusionError {
    match e {
        DataFusionError::ParquetError(p) => match *p {
            ParquetError::External(inner) if inner.is::<crate::error::Error>() => DataFusionError::External(inner),
            other => DataFusionError::ParquetError(Box::new(other)),
        },
        other => other,
    }
}

/// Gives the scan readers that check their file first.
struct CheckedReaders {
    /// The readers the scan would have had.
    inner: Arc<dyn ParquetFileReaderFactory>,
    checks: Arc<ChecksByFile>,
}

impl fmt::Debug for CheckedReaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedReaders").field("files", &self.checks.len()).finish_non_exhaustive()
    }
}

impl ParquetFileReaderFactory for CheckedReaders {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let location = file.object_meta.location.clone();
        let checks =
            self.checks.get(&location).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!("{location}: a store file read without its checksums"))
            })?;
        let inner = self.inner.create_reader(partition_index, file, metadata_size_hint, metrics)?;
        Ok(Box::new(CheckedReader { inner, checks, checked: false }))
    }
}

/// A file's reader that runs the file's checks before its first read.
struct CheckedReader {
    inner: Box<dyn AsyncFileReader + Send>,
    checks: Arc<[Check]>,
    checked: bool,
}

impl CheckedReader {
    async fn check(&mut self) -> parquet::errors::Result<()> {
        if self.checked {
            return Ok(());
        }
        for check in self.checks.iter() {
            check.verdict().await.map_err(|e| ParquetError::External(Box::new(crate::error::Error::Engine(e))))?;
        }
        self.checked = true;
        Ok(())
    }
}

impl AsyncFileReader for CheckedReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        async move {
            self.check().await?;
            self.inner.get_bytes(range).await
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<bytes::Bytes>>> {
        async move {
            self.check().await?;
            self.inner.get_byte_ranges(ranges).await
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            self.check().await?;
            self.inner.get_metadata(options).await
        }
        .boxed()
    }
}
