//! A progress line for long loads, drawn on stderr only when it is a terminal and the load
//! takes longer than half a second: a bar with the share done when the reader reports it
//! (bytes of a CSV file, locations of an OTF2 archive, tables of a store), what is loading and
//! for how long.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use commdb_catalog::progress::LoadProgress;

/// A running progress line; `stop` clears it.
pub struct Progress {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    pub fn start(what: &str, share: Option<Arc<LoadProgress>>) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let handle = std::io::stderr().is_terminal().then(|| {
            let done = done.clone();
            let what = what.to_string();
            std::thread::spawn(move || {
                let started = Instant::now();
                let frames = ["|", "/", "-", "\\"];
                let mut drawn = false;
                let mut k = 0;
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if started.elapsed() > Duration::from_millis(500) && !done.load(Ordering::Relaxed) {
                        let elapsed = started.elapsed().as_secs_f64();
                        match share.as_ref().and_then(|s| s.fraction()) {
                            Some(f) if f >= 1.0 => {
                                eprint!("\r\x1b[2K{} {what}: building tables {elapsed:.1} s ", frames[k % 4]);
                            }
                            Some(f) => {
                                let filled = (f * 30.0).round() as usize;
                                eprint!(
                                    "\r[{}{}] {:>3.0}% {what} {elapsed:.1} s ",
                                    "#".repeat(filled),
                                    "-".repeat(30 - filled),
                                    f * 100.0
                                );
                            }
                            None => eprint!("\r{} {what} {elapsed:.1} s ", frames[k % 4]),
                        }
                        let _ = std::io::stderr().flush();
                        drawn = true;
                        k += 1;
                    }
                }
                if drawn {
                    eprint!("\r\x1b[2K");
                }
            })
        });
        Progress { done, handle }
    }

    pub fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
