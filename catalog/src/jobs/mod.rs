//! Job-scheduler logs, to join with traces: which job a trace belongs to, which nodes it got,
//! what else ran on them. `sacct` reads Slurm's `sacct -P`/`-p` output, `swf` the Standard
//! Workload Format of the Parallel Workloads Archive, `hostlist` expands Slurm host lists
//! (`node[001-004]`), `time` reads Slurm's time stamps and durations. Each log becomes one Arrow
//! table; `ATTACH 'file' AS name (TYPE sacct)` registers it as a table of the session.

pub mod hostlist;
pub mod sacct;
pub mod swf;
pub mod time;

use std::path::Path;

use arrow::array::RecordBatch;

use crate::error::Result;

/// The kinds of scheduler log commdb reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    Sacct,
    Swf,
}

impl LogKind {
    /// The kind a TYPE name asks for, if it is a scheduler log.
    pub fn from_type(name: &str) -> Option<LogKind> {
        match name.to_ascii_lowercase().as_str() {
            "sacct" | "slurm" => Some(LogKind::Sacct),
            "swf" => Some(LogKind::Swf),
            _ => None,
        }
    }
}

/// Read a scheduler log into one table.
pub fn read(path: &Path, kind: LogKind) -> Result<RecordBatch> {
    crate::error::Error::regular_file(path)?;
    match kind {
        LogKind::Sacct => sacct::read(path),
        LogKind::Swf => Ok(swf::read(path)?.jobs),
    }
}
