//! What can go wrong in the shell, by where it comes from, so that each layer says what
//! failed in its own words and the shell prints one line: `error: MESSAGE`. Errors of the
//! trace catalog and of DataFusion keep their own types (and messages) until printed.

use std::fmt;
use std::path::PathBuf;

/// An error of the `commdb` binary.
#[derive(Debug)]
pub enum ShellError {
    /// A command, option or argument given where it does not apply or in a wrong form; the
    /// message says what to write instead.
    Usage(String),
    /// Reading, converting, generating or writing a trace or a store.
    Trace(commdb_catalog::Error),
    /// Planning or running a query.
    Query(datafusion::error::DataFusionError),
    /// A statement that failed, in the words the shell tells it: the engine's message without
    /// its wrapping, with the names the user may have meant.
    Statement(String),
    /// Drawing a chart, a graph or the report.
    Drawing(String),
    /// Writing results or messages to the terminal or the output.
    Output(std::io::Error),
    /// Formatting a result.
    Arrow(arrow::error::ArrowError),
    /// A file the shell itself reads or writes (a script, an output file, standard input).
    File { path: PathBuf, source: std::io::Error },
    /// A query stopped by Ctrl-C, or a script interrupted.
    Cancelled(&'static str),
    /// Reaching or running a cluster's scheduler or executor.
    Cluster(String),
    /// The process could not start what it runs on (a runtime, a thread), or it stopped.
    Runtime(String),
}

pub type Result<T, E = ShellError> = std::result::Result<T, E>;

impl ShellError {
    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        ShellError::Usage(message.into())
    }

    /// A file error, naming the file.
    pub fn file(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ShellError::File { path: path.into(), source }
    }

    /// The same error with `context` (what was being done) before its message.
    pub fn within(self, context: &str) -> Self {
        ShellError::Usage(format!("{context}: {self}"))
    }
}

impl fmt::Display for ShellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShellError::Usage(m)
            | ShellError::Statement(m)
            | ShellError::Drawing(m)
            | ShellError::Cluster(m)
            | ShellError::Runtime(m) => f.write_str(m),
            ShellError::Trace(e) => write!(f, "{e}"),
            ShellError::Query(e) => write!(f, "{e}"),
            ShellError::Arrow(e) => write!(f, "{e}"),
            ShellError::Output(e) => write!(f, "{e}"),
            ShellError::File { path, source } => write!(f, "{}: {source}", path.display()),
            ShellError::Cancelled(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ShellError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShellError::Trace(e) => Some(e),
            ShellError::Query(e) => Some(e),
            ShellError::Arrow(e) => Some(e),
            ShellError::File { source, .. } => Some(source),
            ShellError::Output(e) => Some(e),
            _ => None,
        }
    }
}

impl From<commdb_catalog::Error> for ShellError {
    fn from(e: commdb_catalog::Error) -> Self {
        ShellError::Trace(e)
    }
}

#[cfg(feature = "cluster")]
impl From<commdb_cluster::Error> for ShellError {
    fn from(e: commdb_cluster::Error) -> Self {
        match e {
            commdb_cluster::Error::Usage(m) => ShellError::Usage(m),
            commdb_cluster::Error::Cluster(m) => ShellError::Cluster(m),
        }
    }
}

impl From<datafusion::error::DataFusionError> for ShellError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        ShellError::Query(e)
    }
}

impl From<std::io::Error> for ShellError {
    fn from(e: std::io::Error) -> Self {
        ShellError::Output(e)
    }
}

impl From<rustyline::error::ReadlineError> for ShellError {
    fn from(e: rustyline::error::ReadlineError) -> Self {
        ShellError::Runtime(e.to_string())
    }
}

impl From<arrow::error::ArrowError> for ShellError {
    fn from(e: arrow::error::ArrowError) -> Self {
        ShellError::Arrow(e)
    }
}
