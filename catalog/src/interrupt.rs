//! Stopping long work from outside. The shell raises the interrupt when the user presses
//! Ctrl-C; readers and analyses that compute for long without returning to the query engine
//! call `check` between steps (every few thousand records, every rank) and stop with an error
//! when it is raised. One interrupt serves the process: a program that embeds commdb and never
//! raises it never sees an interruption.
//!
//! Statements are numbered (`lower` starts the next one); raising the interrupt stops the work
//! of every statement so far. Work that runs off the query engine's threads (building tables,
//! analyses: `session::plan_node::off_the_workers`) carries the number of the statement that
//! started it (`within`), so a cancelled statement's work still stops when the next statement
//! has begun: it never runs on unseen beside the next query.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// A statement number and the highest number whose work is stopped.
#[derive(Debug)]
pub struct Flag {
    current: AtomicU64,
    raised_through: AtomicU64,
}

impl Default for Flag {
    fn default() -> Self {
        Flag::new()
    }
}

impl Flag {
    pub const fn new() -> Self {
        Flag { current: AtomicU64::new(1), raised_through: AtomicU64::new(0) }
    }

    /// Stop the work of every statement so far.
    pub fn raise(&self) {
        self.raised_through.fetch_max(self.current.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Start the next statement: its work runs; the work of stopped ones stays stopped.
    pub fn lower(&self) {
        self.current.fetch_add(1, Ordering::SeqCst);
    }

    /// The statement new work belongs to.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::SeqCst)
    }

    /// Err when the work of statement `statement`, named `what`, should stop.
    pub fn check_for(&self, statement: u64, what: &str) -> Result<(), Interrupted> {
        if statement <= self.raised_through.load(Ordering::SeqCst) {
            Err(Interrupted(what.to_string()))
        } else {
            Ok(())
        }
    }

    /// Err when the work named `what`, of the statement running now, should stop.
    pub fn check(&self, what: &str) -> Result<(), Interrupted> {
        self.check_for(self.current(), what)
    }
}

static PROCESS: Flag = Flag::new();

thread_local! {
    /// The statement the work on this thread belongs to, when it was started by `within`.
    static STATEMENT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Ask every running reader and analysis to stop.
pub fn raise() {
    PROCESS.raise();
}

/// Let new work run (before the next statement starts); work already stopped stays stopped.
pub fn lower() {
    PROCESS.lower();
}

/// The statement work started now belongs to (the one of the work this thread runs, if any).
pub fn current() -> u64 {
    STATEMENT.with(Cell::get).unwrap_or_else(|| PROCESS.current())
}

/// Run `work` as work of `statement`: its checks stop it when that statement is interrupted,
/// even after later statements have begun.
pub fn within<T>(statement: u64, work: impl FnOnce() -> T) -> T {
    let before = STATEMENT.with(|s| s.replace(Some(statement)));
    let out = work();
    STATEMENT.with(|s| s.set(before));
    out
}

/// Err when the interrupt is raised for the work running here: the work named `what` should
/// stop.
pub fn check(what: &str) -> Result<(), Interrupted> {
    PROCESS.check_for(current(), what)
}

/// `check` for work of `statement` (from `current`) that runs on threads `within` did not
/// mark, such as rayon's: it stops when that statement is interrupted.
pub fn check_for(statement: u64, what: &str) -> Result<(), Interrupted> {
    PROCESS.check_for(statement, what)
}

/// `check` once every 65,536 steps of a loop (step `i`): cheap enough for the innermost loops
/// of an analysis, often enough to stop within milliseconds.
#[inline]
pub fn check_every(i: usize, what: &str) -> Result<(), Interrupted> {
    if i & 0xFFFF == 0 { check(what) } else { Ok(()) }
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

    #[test]
    fn a_stopped_statement_stays_stopped_when_the_next_begins() {
        let flag = Flag::new();
        let first = flag.current();
        flag.raise();
        flag.lower();
        assert!(flag.check_for(first, "old analysis").is_err(), "the cancelled work still sees it");
        assert!(flag.check("new query").is_ok());
        // Work started by `within` carries its statement onto its thread.
        let statement = current();
        let seen = std::thread::spawn(move || within(statement, current)).join().unwrap();
        assert_eq!(seen, statement);
    }
}
