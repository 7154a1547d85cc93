//! commdb-udfs: commdb's SQL functions for MPI trace analysis, one module per family, all
//! registered by `register_all`. `functions()` lists each with its signature and a one-line
//! description (the shell's `\df` and README show them).

use datafusion::prelude::SessionContext;

/// Documentation of one SQL function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionDoc {
    pub name: &'static str,
    /// scalar, aggregate, window or table
    pub kind: &'static str,
    pub signature: &'static str,
    pub description: &'static str,
}

/// Every function commdb registers.
pub fn functions() -> &'static [FunctionDoc] {
    &[]
}

/// Register every commdb function in `ctx`.
pub fn register_all(_ctx: &SessionContext) {}
