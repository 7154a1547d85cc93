//! What a task may touch on a process started with data directories
//! (commdb_catalog::data_dirs): before an executor runs a task, every file the task's plan
//! scans (CSV, JSON, Parquet, Arrow, a store's parts) and every place it writes (`COPY ... TO`)
//! is checked, and a task naming a path outside them is refused before it reads or writes
//! anything; a write whose place cannot be told (an Arrow IPC file, a stream table) is refused. A file read by commdb's own functions (a store opened by its directory,
//! `read_sacct`) is checked where it is opened.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::common::plan_err;
use datafusion::datasource::file_format::csv::CsvSink;
use datafusion::datasource::file_format::json::JsonSink;
use datafusion::datasource::file_format::parquet::ParquetSink;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSink};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;

/// Refuse `plan` if it reads or writes a file outside this process's data directories.
pub fn check_plan(plan: &Arc<dyn ExecutionPlan>) -> Result<()> {
    if !commdb_catalog::data_dirs::restricted() {
        return Ok(());
    }
    for path in files(plan)? {
        if let Err(refused) = commdb_catalog::data_dirs::check(&path) {
            return plan_err!("{refused}");
        }
    }
    Ok(())
}

/// Every local path `plan` scans or writes; a place that is not a local path is refused.
fn files(plan: &Arc<dyn ExecutionPlan>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![plan.clone()];
    while let Some(node) = stack.pop() {
        if let Some(source) = node.downcast_ref::<DataSourceExec>()
            && let Some(scan) = source.data_source().downcast_ref::<FileScanConfig>()
        {
            let local = scan.object_store_url.as_str().starts_with("file://");
            for group in &scan.file_groups {
                for file in group.files() {
                    let location = file.object_meta.location.as_ref();
                    if !local {
                        return plan_err!("{}{location}: not a local file", scan.object_store_url.as_str());
                    }
                    out.push(PathBuf::from(format!("/{location}")));
                }
            }
        }
        if let Some(sink) = node.downcast_ref::<DataSinkExec>() {
            let written = sink.sink();
            let config = written
                .downcast_ref::<ParquetSink>()
                .map(|s| s.config())
                .or_else(|| written.downcast_ref::<CsvSink>().map(|s| s.config()))
                .or_else(|| written.downcast_ref::<JsonSink>().map(|s| s.config()));
            match config {
                Some(config) => {
                    for url in &config.table_paths {
                        match url.get_url().to_file_path() {
                            Ok(path) => out.push(path),
                            Err(()) => return plan_err!("{}: not a local path", url.as_str()),
                        }
                    }
                }
                // A table in memory is written where it is held.
                None if written.downcast_ref::<datafusion_datasource::memory::MemSink>().is_some() => {}
                // Any other sink writes a file it does not tell (Arrow IPC files, stream tables).
                None => {
                    return plan_err!(
                        "a query of this cluster may write only CSV, JSON and Parquet files under its data directories, whose places are checked; this one writes through {written:?}"
                    );
                }
            }
        }
        stack.extend(node.children().into_iter().cloned());
    }
    Ok(out)
}

/// The scheduler's last physical rule on a process with data directories: a query whose plan
/// reads or writes a file outside them is refused before any task runs.
#[derive(Debug)]
pub struct KeepToDataDirs;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for KeepToDataDirs {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        check_plan(&plan)?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "keep_to_data_dirs"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
