//! Derivation of the analysis tables from raw events: `calls` from enter/leave nesting,
//! `messages` by MPI's matching rules, `collectives` by per-communicator sequence. Each
//! derivation works stream by stream ((rank, thread) event ranges) in parallel with rayon,
//! then merges; problems (unmatched halves, unbalanced enter/leave) are counted as warnings.

pub mod calls;
pub mod collectives;
pub mod messages;
