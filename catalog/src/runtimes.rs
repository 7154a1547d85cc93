//! Stopping a query runtime without letting go of its threads. Tokio's `shutdown_background`
//! drops the handles of a runtime's threads as they are told to exit, which detaches them; a
//! thread detached while it exits is a race in glibc's `pthread_detach` (it reads the exiting
//! thread's descriptor after the thread may have freed it), which once ended a process that
//! had given its answer with SIGSEGV. Here every thread is joined: a runtime is stopped from a
//! thread of its own (a runtime may not block to stop inside an asynchronous context, where the
//! shell drops its runtime), at once, or in the background for a cancelled query's runtime,
//! whose stopping thread is joined by the next `stop`.

use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a runtime being stopped waits for its threads (a thread still computing: a query
/// cancelled in its last moments).
const WAIT: Duration = Duration::from_secs(5);

/// The threads stopping runtimes in the background, joined by the next `stop`.
static STOPPING: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Stop `runtime`, waiting for its threads (at most `WAIT`), and the runtimes stopping in the
/// background.
pub fn stop(runtime: tokio::runtime::Runtime) {
    let _ = std::thread::spawn(move || runtime.shutdown_timeout(WAIT)).join();
    let stopping = std::mem::take(&mut *STOPPING.lock().unwrap_or_else(PoisonError::into_inner));
    for thread in stopping {
        let _ = thread.join();
    }
}

/// Stop `runtime` without waiting: its threads stop as their work sees the interrupt.
pub fn stop_in_background(runtime: tokio::runtime::Runtime) {
    let thread = std::thread::spawn(move || runtime.shutdown_timeout(WAIT));
    STOPPING.lock().unwrap_or_else(PoisonError::into_inner).push(thread);
}
