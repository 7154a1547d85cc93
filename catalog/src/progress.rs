//! Progress of a long load, for callers that show it (the shell draws a bar on a terminal):
//! units done out of a total — bytes for CSV files, locations for OTF2 archives, tables for a
//! commdb store — updated from any thread without locking. `Building` does the same for the
//! step of building a trace's tables that a query is waiting on ([`crate::deriving::steps`]), and
//! keeps what the finished steps took, for the caller to say once the query is done.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Units done and the total expected (0 while unknown), in the current of a number of equal
/// stages (a conversion that splits its trace first: the split, then the groups).
#[derive(Debug, Default)]
pub struct LoadProgress {
    done: AtomicU64,
    total: AtomicU64,
    /// Stages finished, and how many there are (0: one).
    stage: AtomicU64,
    stages: AtomicU64,
}

impl LoadProgress {
    pub fn set_total(&self, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    pub fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// The work has `n` stages of equal share, the first now running.
    pub fn set_stages(&self, n: u64) {
        self.stage.store(0, Ordering::Relaxed);
        self.stages.store(n, Ordering::Relaxed);
    }

    /// The next stage starts (its total is set by `set_total`).
    pub fn next_stage(&self) {
        self.stage.fetch_add(1, Ordering::Relaxed);
        self.set_total(0);
    }

    /// Share done in [0, 1], when a total is known.
    pub fn fraction(&self) -> Option<f64> {
        let total = self.total.load(Ordering::Relaxed);
        let stages = self.stages.load(Ordering::Relaxed).max(1);
        let stage = self.stage.load(Ordering::Relaxed).min(stages - 1);
        (total > 0).then(|| {
            let within = (self.done.load(Ordering::Relaxed) as f64 / total as f64).min(1.0);
            (stage as f64 + within) / stages as f64
        })
    }
}

/// A step that is running: what it is and how far it is.
type Running = Option<(String, Arc<LoadProgress>)>;

/// The step running now and the steps finished since last taken.
static BUILDING: Mutex<(Running, Vec<String>)> = Mutex::new((None, Vec::new()));

/// A step of building a trace's tables, shown while it runs.
#[derive(Debug)]
pub struct Building {
    what: String,
    progress: Arc<LoadProgress>,
}

impl Building {
    /// The step `what` ("reading the events of demo") starts.
    pub fn start(what: &str) -> Building {
        let progress = Arc::new(LoadProgress::default());
        BUILDING.lock().unwrap_or_else(PoisonError::into_inner).0 = Some((what.to_string(), progress.clone()));
        Building { what: what.to_string(), progress }
    }

    pub fn progress(&self) -> &LoadProgress {
        &self.progress
    }

    /// The step's progress, for a reader that takes it shared.
    pub fn share(&self) -> Arc<LoadProgress> {
        self.progress.clone()
    }

    /// The step is over. When it succeeded and took long enough for a user to wonder (half a
    /// second, as the progress line), or `found` problems to tell (the trace's warnings it
    /// added, in words), a line saying so is kept for `take_finished`.
    pub fn finish(self, took: Duration, ok: bool, found: Option<String>) {
        let mut state = BUILDING.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = None;
        if ok && (took >= Duration::from_millis(500) || found.is_some()) {
            let mut line =
                format!("{} took {:.1} s (done once; later queries reuse it)", self.what, took.as_secs_f64());
            if let Some(found) = found {
                line = format!("{line}; {found}");
            }
            state.1.push(line);
        }
    }

    /// The step is over and is told however long it took, with `after` saying what it leaves
    /// (a cache store's conversion: "later openings reuse it").
    pub fn finish_told(self, took: Duration, ok: bool, after: &str) {
        let mut state = BUILDING.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = None;
        if ok {
            state.1.push(format!("{} took {:.1} s ({after})", self.what, took.as_secs_f64()));
        }
    }

    /// The step running now, if any: what it is and how far it is.
    pub fn now() -> Option<(String, Arc<LoadProgress>)> {
        BUILDING.lock().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    /// The steps finished since the last call, in words.
    pub fn take_finished() -> Vec<String> {
        std::mem::take(&mut BUILDING.lock().unwrap_or_else(PoisonError::into_inner).1)
    }
}

/// Reports the bytes read through it.
#[derive(Debug)]
pub struct ProgressReader<R> {
    inner: R,
    progress: Option<Arc<LoadProgress>>,
}

impl<R> ProgressReader<R> {
    pub fn new(inner: R, progress: Option<Arc<LoadProgress>>) -> Self {
        ProgressReader { inner, progress }
    }
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(p) = &self.progress {
            p.add(n as u64);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_read() {
        let p = Arc::new(LoadProgress::default());
        assert_eq!(p.fraction(), None);
        p.set_total(10);
        let mut r = ProgressReader::new(&b"hello"[..], Some(p.clone()));
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(p.fraction(), Some(0.5));
    }

    #[test]
    fn stages_share_the_bar() {
        let p = super::LoadProgress::default();
        p.set_total(10);
        p.add(5);
        assert_eq!(p.fraction(), Some(0.5));
        p.set_stages(2);
        assert_eq!(p.fraction(), Some(0.25));
        p.add(5);
        assert_eq!(p.fraction(), Some(0.5));
        p.next_stage();
        assert_eq!(p.fraction(), None, "the next stage's total is not known yet");
        p.set_total(4);
        p.add(2);
        assert_eq!(p.fraction(), Some(0.75));
    }
}
