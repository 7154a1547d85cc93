//! Stopping long work from outside. The shell raises the interrupt when the user presses
//! Ctrl-C and lowers it before the next statement; readers and analyses that compute for long
//! without returning to the query engine call `check` between steps (every few thousand
//! records, every rank) and stop with an error when it is raised. One flag serves the process:
//! a program that embeds commdb and never raises it never sees an interruption.

use std::sync::atomic::{AtomicBool, Ordering};

/// A flag that work checks; `PROCESS` is the one the shell raises.
#[derive(Debug, Default)]
pub struct Flag(AtomicBool);

impl Flag {
    pub const fn new() -> Self {
        Flag(AtomicBool::new(false))
    }

    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn lower(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    /// Err when raised: the work named `what` should stop.
    pub fn check(&self, what: &str) -> Result<(), Interrupted> {
        if self.0.load(Ordering::Relaxed) { Err(Interrupted(what.to_string())) } else { Ok(()) }
    }
}

static PROCESS: Flag = Flag::new();

/// Ask every running reader and analysis to stop.
pub fn raise() {
    PROCESS.raise();
}

/// Let work run again (before the next statement starts).
pub fn lower() {
    PROCESS.lower();
}

/// Err when the interrupt is raised: the work named `what` should stop.
pub fn check(what: &str) -> Result<(), Interrupted> {
    PROCESS.check(what)
}

/// The work named `what` was interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: interrupted", self.0)
    }
}

impl std::error::Error for Interrupted {}

impl From<Interrupted> for crate::error::Error {
    fn from(e: Interrupted) -> Self {
        crate::error::Error::Argument(e.to_string())
    }
}

impl From<Interrupted> for datafusion::error::DataFusionError {
    /// As the catalog's own error, which reads the same wherever the engine wraps it.
    fn from(e: Interrupted) -> Self {
        datafusion::error::DataFusionError::External(Box::new(crate::error::Error::from(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_until_lowered() {
        let flag = Flag::new();
        assert!(flag.check("x").is_ok());
        flag.raise();
        assert_eq!(flag.check("read_sacct").unwrap_err().to_string(), "read_sacct: interrupted");
        flag.lower();
        assert!(flag.check("x").is_ok());
    }
}
