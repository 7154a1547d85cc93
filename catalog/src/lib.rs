//! commdb-catalog: the trace model of commdb and everything that gets data into it.
//!
//! - `model`: the Arrow schema of every table, with the meaning of every column;
//! - `events`, `trace`: raw events as columns, and a trace as Arrow tables;
//! - `build`: calls, messages and collectives derived from raw events;
//! - `fast_hash`: the hasher of integer-keyed maps in per-row loops;
//! - `clock`: clock models from sync samples and the correction applied at load;
//! - `otf2`, `csv`, `store`, `generate`: readers (OTF2, CSV shapes, commdb's Parquet store) and the
//!   synthetic trace generator; `open` picks the reader for a path;
//! - `jobs`: job-scheduler logs (Slurm sacct, Standard Workload Format) and host lists;
//! - `session`, `sql`: a DataFusion session holding traces as schemas, ATTACH/DETACH;
//! - `wallclock`: the traces' absolute start times and the notices SQL functions raise;
//! - `interrupt`: Ctrl-C reaching readers and analyses that compute for long;
//! - `phases`: where the time of a build goes, phase by phase.
//!
//! This crate knows nothing of commdb's SQL functions (crate commdb-udfs) and never panics
//! on input: every error names the file and position and what was expected.

pub mod build;
pub mod clock;
pub mod csv;
pub mod error;
pub mod events;
pub mod fast_hash;
pub mod generate;
pub mod interrupt;
pub mod jobs;
pub mod model;
pub mod named_args;
pub mod open;
pub mod otf2;
pub mod paraver;
pub mod phases;
pub mod progress;
pub mod session;
pub mod sql;
pub mod store;
pub mod suggest;
pub mod trace;
pub mod wallclock;

pub use error::{Error, Result};
pub use open::{OpenOptions, open};
pub use session::{Outcome, Session};
pub use trace::{RawTrace, Trace};
