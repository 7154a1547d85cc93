//! A progress line for long loads, drawn on stderr only when it is a terminal and the load
//! takes longer than half a second: what is loading and for how long.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running progress line; `stop` clears it.
pub struct Progress {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    pub fn start(what: &str) -> Self {
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
                        eprint!("\r{} {what} {:.1} s ", frames[k % 4], started.elapsed().as_secs_f64());
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
