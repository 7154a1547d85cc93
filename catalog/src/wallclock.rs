//! Wall-clock time of the open traces. Each trace may know the absolute UTC time of its ts = 0
//! (`trace_info.start_wallclock`: OTF2's realtime timestamp of the global offset, a generated
//! trace's configured start); CSV traces and archives written without a date do not. The
//! session keeps the start of every attached trace here, and SQL functions that turn trace
//! times into timestamps (`wallclock`) read it, together with `Notices`, the warnings they raise
//! while a query runs, which the shell prints after the statement.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// The absolute start of every attached trace, by schema name.
#[derive(Debug, Default)]
pub struct TraceStarts {
    default: Option<String>,
    starts: BTreeMap<String, Option<i64>>,
}

/// Shared between the session (which writes) and SQL functions (which read).
pub type SharedStarts = Arc<RwLock<TraceStarts>>;

impl TraceStarts {
    pub fn insert(&mut self, trace: &str, start_ns: Option<i64>, is_default: bool) {
        self.starts.insert(trace.to_string(), start_ns);
        if is_default {
            self.default = Some(trace.to_string());
        }
    }

    pub fn remove(&mut self, trace: &str) {
        self.starts.remove(trace);
        if self.default.as_deref() == Some(trace) {
            self.default = None;
        }
    }

    /// Every trace's name and start, in name order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, Option<i64>)> {
        self.starts.iter().map(|(n, s)| (n.as_str(), *s))
    }

    /// The default trace's name.
    pub fn default_trace(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The name and start (ns since the Unix epoch, UTC) of `trace`, or of the default trace.
    /// An error names the traces that are attached when there is no such trace.
    pub fn start(&self, trace: Option<&str>) -> Result<(String, Option<i64>), String> {
        let name = match trace {
            Some(t) => t,
            None => self.default.as_deref().ok_or_else(|| "no trace is open".to_string())?,
        };
        match self.starts.get(name) {
            Some(start) => Ok((name.to_string(), *start)),
            None => {
                let open: Vec<&str> = self.starts.keys().map(String::as_str).collect();
                Err(format!(
                    "no trace is attached as '{name}' (attached: {})",
                    if open.is_empty() { "none".to_string() } else { open.join(", ") }
                ))
            }
        }
    }
}

/// Warnings raised while a statement runs, each kept once, for the caller to show.
#[derive(Clone, Default)]
pub struct Notices {
    list: Arc<Mutex<Vec<String>>>,
    /// Also written where a person sees it as it is raised (a cluster's process logs it: its
    /// notices reach no shell).
    echo: Option<Echo>,
}

/// Where a notice is also written as it is raised.
pub type Echo = Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices").field("list", &self.list).field("echoed", &self.echo.is_some()).finish()
    }
}

impl Notices {
    /// Notices also handed to `echo` as they are raised, each once.
    pub fn echoed(echo: Echo) -> Self {
        Notices { echo: Some(echo), ..Notices::default() }
    }

    pub fn push(&self, text: String) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if !list.contains(&text) {
            if let Some(echo) = &self.echo {
                echo(&text);
            }
            list.push(text);
        }
    }

    /// The notices raised since the last call, oldest first.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.list.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_named_traces() {
        let mut s = TraceStarts::default();
        assert_eq!(s.start(None).unwrap_err(), "no trace is open");
        s.insert("a", Some(5), true);
        s.insert("b", None, false);
        assert_eq!(s.start(None).unwrap(), ("a".to_string(), Some(5)));
        assert_eq!(s.start(Some("b")).unwrap(), ("b".to_string(), None));
        assert_eq!(s.start(Some("c")).unwrap_err(), "no trace is attached as 'c' (attached: a, b)");
        s.remove("a");
        assert!(s.start(None).is_err());
    }

    #[test]
    fn notices_are_kept_once_and_taken() {
        let n = Notices::default();
        n.push("x".into());
        n.clone().push("x".into());
        n.push("y".into());
        assert_eq!(n.take(), vec!["x", "y"]);
        assert!(n.take().is_empty());
    }
}
