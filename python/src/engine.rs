//! Running commdb's work from Python: every statement runs as a task of the session's own
//! multi-threaded runtime while the calling thread waits without the GIL, so other Python
//! threads go on. Every 100 ms the waiting thread takes the GIL back to let Python see a
//! Ctrl-C; on one, it raises commdb's interrupt (readers and analyses stop at their next check),
//! aborts the task, gives the session a new runtime (an operator computing without yielding
//! keeps its threads until it stops), and raises KeyboardInterrupt. The session itself is only
//! locked while a statement is planned, so it stays usable, and queries of several threads
//! execute side by side.

use std::future::Future;
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::{Class, Failure};

/// How often a waiting call looks for Ctrl-C.
const POLL: Duration = Duration::from_millis(100);

/// The threads statements run on.
#[derive(Debug)]
pub struct Engine {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("commdb-query")
        .thread_stack_size(16 << 20)
        .enable_all()
        .build()
        .map_err(|e| Failure::new(Class::Query, format!("cannot start the query threads: {e}")))
}

impl Engine {
    pub fn new() -> Result<Self, Failure> {
        Ok(Engine { runtime: Mutex::new(Some(runtime()?)) })
    }

    /// Run `work` to its end, or until Ctrl-C (KeyboardInterrupt), with the GIL released.
    pub fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl Future<Output = Result<T, Failure>> + Send + 'static,
    ) -> PyResult<T> {
        commdb_catalog::interrupt::lower();
        let (tx, rx) = mpsc::channel();
        let task = {
            let runtime = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(runtime) = runtime.as_ref() else {
                return Err(Failure::new(Class::Query, "the trace is closed").into_py(py));
            };
            runtime.spawn(async move {
                let _ = tx.send(work.await);
            })
        };
        // The waiting happens without the GIL, on another borrow of the receiver each time.
        let rx = Mutex::new(rx);
        loop {
            match py.detach(|| rx.lock().unwrap_or_else(PoisonError::into_inner).recv_timeout(POLL)) {
                Ok(done) => return done.map_err(|f| f.into_py(py)),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Failure::new(
                        Class::Query,
                        "the statement stopped on a fault inside the query engine (its message is on standard error)",
                    )
                    .into_py(py));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Err(interrupt) = py.check_signals() {
                commdb_catalog::interrupt::raise();
                task.abort();
                self.renew().map_err(|f| f.into_py(py))?;
                return Err(interrupt);
            }
        }
    }

    /// A new runtime in place of one whose work was cancelled.
    fn renew(&self) -> Result<(), Failure> {
        let fresh = runtime()?;
        let mut slot = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = slot.replace(fresh) {
            commdb_catalog::runtimes::stop_in_background(old);
        }
        Ok(())
    }

    /// Stop the threads, waiting for them ([`commdb_catalog::runtimes`]). Later calls fail
    /// saying the trace is closed.
    pub fn close(&self) {
        if let Some(old) = self.runtime.lock().unwrap_or_else(PoisonError::into_inner).take() {
            commdb_catalog::runtimes::stop(old);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}
