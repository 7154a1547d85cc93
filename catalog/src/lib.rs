//! commdb-catalog: the trace model of commdb and everything that gets data into it.
//!
//! The folders follow what happens to a trace:
//! - `reading/`: one folder per format (`otf2/`, `paraver/`, `csv/`, each with the options it
//!   takes); `formats/` is the one list of formats (a store, CSV, OTF2, Paraver) that opening,
//!   converting, the cache and the help read, and picks the one for a path (`formats::open`);
//!   `store` reads and writes commdb's own Parquet stores, `generate/` makes synthetic traces
//!   with known ground truth;
//! - `clock/`: clock models from sync samples and the correction applied when a trace is read;
//! - `deriving/`: calls, messages and collectives derived from raw events, and `assemble`, which
//!   turns a reader's `RawTrace` into the Arrow tables of a `Trace`;
//! - `session/`: a DataFusion session holding traces as schemas, with ATTACH/DETACH and named
//!   arguments;
//! - `jobs/`: job-scheduler logs (Slurm sacct, Standard Workload Format) and host lists.
//!
//! Beneath them, the basic types every stage shares: `model` (the schema of every table, with
//! the meaning of every column), `events` and `trace` (raw events as columns, a trace in
//! memory), `error`, `phases` (where the time of a build goes), `progress`, `interrupt` (Ctrl-C
//! reaching long work), `wallclock` (traces' absolute starts, notices of SQL functions),
//! `suggest` ("did you mean"), `fast_hash`, `data_dirs` (the directories a cluster's process
//! keeps to), and `writing` (files the user names, written
//! without losing what was there).
//!
//! This crate knows nothing of commdb's SQL functions (crate commdb-udfs) and never panics
//! on input: every error names the file and position and what was expected.

pub mod clock;
pub mod column_sums;
pub mod convert;
pub mod data_dirs;
pub mod deriving;
pub mod error;
pub mod events;
pub mod export;
pub mod fast_hash;
pub mod formats;
pub mod generate;
pub mod interrupt;
pub mod jobs;
pub mod memory;
pub mod model;
pub mod part_values;
pub mod phases;
pub mod progress;
pub mod reading;
pub mod runtimes;
pub mod session;
pub mod stamp;
pub mod store;
pub mod suggest;
pub mod trace;
pub mod wallclock;
pub mod writing;

pub use error::{Error, Result};
pub use formats::open;
pub use reading::OpenOptions;
pub use session::{Outcome, Session};
pub use trace::{RawTrace, Trace};
