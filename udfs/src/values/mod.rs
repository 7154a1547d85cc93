//! Scalar functions over values rather than traces: numbers in the units people read
//! (`units`: format_duration, format_bytes), and DataFusion's functions whose result a small
//! number can make huge, held to the memory budget (`bounded`).

pub mod bounded;
pub mod units;
