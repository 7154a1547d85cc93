//! A progress line for long loads, drawn on stderr only when it is a terminal and the load
//! takes longer than half a second: a bar with the share done when the reader reports it
//! (bytes of a CSV file, locations of an OTF2 archive, tables of a store), what is loading and
//! for how long. While a query runs, the same line shows the step building a trace's tables
//! that it waits on (reading the events, deriving messages), if any.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use commdb_catalog::progress::{Building, LoadProgress};

/// A running progress line; `stop` clears it.
pub struct Progress {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Draw one frame of the line: a bar when the share done is known, a spinner otherwise. The
/// line is cut to the terminal's width, so that it never wraps and leaves a fragment above
/// what is printed next.
fn draw(what: &str, share: Option<&LoadProgress>, elapsed: f64, k: usize) {
    let frames = ["|", "/", "-", "\\"];
    let line = match share.and_then(LoadProgress::fraction) {
        Some(f) if f >= 1.0 => format!("{} {what}: building tables {elapsed:.1} s ", frames[k % 4]),
        Some(f) => {
            let filled = (f * 30.0).round() as usize;
            format!("[{}{}] {:>3.0}% {what} {elapsed:.1} s ", "#".repeat(filled), "-".repeat(30 - filled), f * 100.0)
        }
        None => format!("{} {what} {elapsed:.1} s ", frames[k % 4]),
    };
    eprint!("\r\x1b[2K{}", fitted(&line, crate::fit::error_terminal_columns()));
    let _ = std::io::stderr().flush();
}

/// `line` cut to one character less than `columns` (a terminal wraps a line that fills it).
fn fitted(line: &str, columns: Option<usize>) -> std::borrow::Cow<'_, str> {
    match columns {
        Some(c) => crate::fit::cut(line, c.saturating_sub(1).max(1)),
        None => std::borrow::Cow::Borrowed(line),
    }
}

impl Progress {
    pub fn start(what: &str, share: Option<Arc<LoadProgress>>) -> Self {
        let what = what.to_string();
        Progress::watch(move || Some((what.clone(), share.clone())))
    }

    /// The line of a load: the step building a trace's tables while one runs (a big archive
    /// converted into its cache store), else `what` with `share`.
    pub fn loading(what: &str, share: Arc<LoadProgress>) -> Self {
        let what = what.to_string();
        Progress::watch(move || {
            Building::now().map(|(step, s)| (step, Some(s))).or_else(|| Some((what.clone(), Some(share.clone()))))
        })
    }

    /// The line of the step building a trace's tables that a running query waits on, if any
    /// (`commdb_catalog::progress::Building`).
    pub fn building() -> Self {
        Progress::watch(|| Building::now().map(|(what, share)| (what, Some(share))))
    }

    /// Draw what `now` says is running, each thing from half a second after it started.
    fn watch(now: impl Fn() -> Option<(String, Option<Arc<LoadProgress>>)> + Send + 'static) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let handle = std::io::stderr().is_terminal().then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut drawn = false;
                let mut k = 0;
                let mut current: Option<(String, Instant)> = None;
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let running = now();
                    match (&running, &current) {
                        (Some((what, _)), Some((was, _))) if what == was => {}
                        (Some((what, _)), _) => current = Some((what.clone(), Instant::now())),
                        (None, _) => current = None,
                    }
                    let late = current.as_ref().is_some_and(|(_, t)| t.elapsed() > Duration::from_millis(500));
                    match (running, &current) {
                        (Some((what, share)), Some((_, started))) if late && !done.load(Ordering::Relaxed) => {
                            draw(&what, share.as_deref(), started.elapsed().as_secs_f64(), k);
                            drawn = true;
                            k += 1;
                        }
                        _ if drawn && current.is_none() => {
                            eprint!("\r\x1b[2K");
                            drawn = false;
                        }
                        _ => {}
                    }
                }
                if drawn {
                    eprint!("\r\x1b[2K");
                }
            })
        });
        Progress { done, handle }
    }

    /// Clear the line now (dropping it does the same).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_never_fills_the_terminal() {
        let line = "[##############################] 100% reading the events and deriving calls, messages and collectives of run 12.3 s ";
        let cut = super::fitted(line, Some(80));
        assert_eq!(cut.chars().count(), 79, "{cut}");
        assert_eq!(super::fitted("short", Some(80)), "short");
        assert_eq!(super::fitted(line, None), line);
    }
}
