//! Progress of a long load, for callers that show it (the shell draws a bar on a terminal):
//! units done out of a total — bytes for CSV files, locations for OTF2 archives, tables for a
//! commdb store — updated from any thread without locking.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Units done and the total expected (0 while unknown).
#[derive(Debug, Default)]
pub struct LoadProgress {
    done: AtomicU64,
    total: AtomicU64,
}

impl LoadProgress {
    pub fn set_total(&self, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    pub fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Share done in [0, 1], when a total is known.
    pub fn fraction(&self) -> Option<f64> {
        let total = self.total.load(Ordering::Relaxed);
        (total > 0).then(|| (self.done.load(Ordering::Relaxed) as f64 / total as f64).min(1.0))
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
}
