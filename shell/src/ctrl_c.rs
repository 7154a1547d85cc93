//! Ctrl-C for the whole run. A thread of its own waits for SIGINT from start to end, so a
//! press is never lost, whatever the shell is doing when it comes: planning, reading a trace or
//! a scheduler log, running a query or writing its rows. A press raises the interrupt
//! (commdb_catalog::interrupt), which readers and analyses check between steps, and wakes the
//! query being printed (`subscribe`), which then stops its plan and keeps the output file as it
//! was. A second press before the first was answered (`answered`) quits at once with exit
//! status 130, as a shell's SIGINT would.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The presses so far, for whoever waits on them.
static PRESSES: OnceLock<tokio::sync::watch::Sender<u64>> = OnceLock::new();
/// The presses the shell has answered (a statement ended by one, or a new one started).
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// Whether a first press says what a second would do (runs without the interactive shell,
/// where no prompt answers it).
static HINT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Say on the first press that a second one quits at once.
pub fn hint_on_first_press() {
    HINT.store(true, Ordering::SeqCst);
}

/// Start watching for Ctrl-C (once; later calls do nothing). Without a signal handler (it
/// cannot be installed) Ctrl-C keeps its default: the process ends. The line editor replaces
/// the SIGINT handler when it is created; the watcher's handler, installed after it, keeps
/// calling the editor's, so the editor still sees Ctrl-C at its prompt.
pub fn watch() {
    if PRESSES.get().is_some() {
        return;
    }
    let (tx, _) = tokio::sync::watch::channel(0u64);
    if PRESSES.set(tx).is_err() {
        return;
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<bool>();
    let spawned = std::thread::Builder::new().name("commdb-ctrl-c".into()).stack_size(256 << 10).spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            let _ = ready_tx.send(false);
            return;
        };
        runtime.block_on(async move {
            let Ok(mut sigint) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) else {
                let _ = ready_tx.send(false);
                return;
            };
            let _ = ready_tx.send(true);
            while sigint.recv().await.is_some() {
                let Some(presses) = PRESSES.get() else { return };
                let n = *presses.borrow() + 1;
                if n > ANSWERED.load(Ordering::SeqCst) + 1 {
                    eprintln!("\ninterrupted again: quitting");
                    std::process::exit(130);
                }
                commdb_catalog::interrupt::raise();
                if HINT.load(Ordering::SeqCst) {
                    eprintln!("\ninterrupting: the work stops at its next step (Ctrl-C again quits at once)");
                }
                presses.send_replace(n);
            }
        });
    });
    // The handler is in place before the work it guards starts.
    if spawned.is_ok() {
        let _ = ready_rx.recv();
    }
}

/// A receiver that wakes on the next press (`changed`).
pub fn subscribe() -> Option<tokio::sync::watch::Receiver<u64>> {
    PRESSES.get().map(tokio::sync::watch::Sender::subscribe)
}

/// The presses so far have been answered: the next one interrupts again, not quits.
pub fn answered() {
    if let Some(p) = PRESSES.get() {
        ANSWERED.store(*p.borrow(), Ordering::SeqCst);
    }
}

/// Whether Ctrl-C was pressed since the last `answered`.
pub fn pending() -> bool {
    PRESSES.get().is_some_and(|p| *p.borrow() > ANSWERED.load(Ordering::SeqCst))
}
