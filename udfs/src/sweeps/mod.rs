//! A rank's time swept by its calls, the ground that profiles, waits and the critical path
//! stand on: the innermost call open over every stretch of a stream's time (`call_sweep`), the
//! call paths those calls make (`call_paths`), the row of a call by its id (`call_rows`), every rank's time cut into stretches of its
//! innermost region (`stretches`, after Scalasca's attribution of time to call paths); the
//! critical path keeps them out of memory for its walk across ranks.

pub mod call_paths;
pub mod call_rows;
pub mod call_sweep;
pub mod stretches;
