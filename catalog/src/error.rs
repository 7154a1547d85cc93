//! Errors of the catalog: every failure names where it happened (file and line, column or
//! byte offset) and what was expected there, so a user can fix the input without a debugger.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in an input a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// A text file: 1-based line, and the column name when one applies.
    Line { line: u64, column: Option<String> },
    /// A binary file: byte offset from the start of the file.
    Offset(u64),
    /// The whole file.
    File,
}

/// The catalog's error type.
#[derive(Debug)]
pub enum Error {
    /// The input could not be read at all (missing file, permission, ...).
    Io { path: PathBuf, source: std::io::Error },
    /// The input was read but its content is not what was expected.
    Format { path: PathBuf, position: Position, message: String },
    /// A user-supplied option or argument is invalid.
    Argument(String),
    /// An Arrow, Parquet or DataFusion operation failed.
    Engine(String),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source }
    }

    /// A content error at a line (and optionally a named column) of a text file.
    pub fn at_line(path: &Path, line: u64, column: Option<&str>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.to_path_buf(),
            position: Position::Line { line, column: column.map(str::to_string) },
            message: message.into(),
        }
    }

    /// A content error at a byte offset of a binary file.
    pub fn at_offset(path: &Path, offset: u64, message: impl Into<String>) -> Self {
        Error::Format { path: path.to_path_buf(), position: Position::Offset(offset), message: message.into() }
    }

    /// A content error concerning a whole file.
    pub fn in_file(path: &Path, message: impl Into<String>) -> Self {
        Error::Format { path: path.to_path_buf(), position: Position::File, message: message.into() }
    }

    /// Ok when `path` is a regular file: devices, pipes and sockets have no end to read to
    /// (`/dev/zero` as a CSV would fill the memory), directories are not files.
    pub fn regular_file(path: &Path) -> Result<(), Error> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(()),
            Ok(_) => Err(Error::in_file(
                path,
                "not a regular file: expected a file with an end (not a device, pipe or directory)",
            )),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    pub fn argument(message: impl Into<String>) -> Self {
        Error::Argument(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Format { path, position, message } => match position {
                Position::Line { line, column: Some(c) } => {
                    write!(f, "{}:{line}: column '{c}': {message}", path.display())
                }
                Position::Line { line, column: None } => write!(f, "{}:{line}: {message}", path.display()),
                Position::Offset(o) => write!(f, "{} at byte {o}: {message}", path.display()),
                Position::File => write!(f, "{}: {message}", path.display()),
            },
            Error::Argument(m) | Error::Engine(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error::Engine(e.to_string())
    }
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        Error::Engine(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
