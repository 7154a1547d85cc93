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
    /// The engine refused a statement while planning it (a name it does not know, types that
    /// do not fit, a feature it lacks), with no place in the statement to show.
    Plan(String),
    /// A query needed more memory than the budget for queries. `advised`: the message says
    /// already which budget and what to do (commdb's own analyses say so); else the one who
    /// shows it adds that.
    OutOfMemory { message: String, advised: bool },
    /// A fault (panic) inside the query engine or an analysis stopped the query.
    Fault(String),
    /// An Arrow, Parquet or DataFusion operation failed while a statement ran.
    Engine(String),
    /// A SQL statement is wrong at a place in its text (1-based line and column).
    Sql { message: String, line: u64, column: u64 },
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

    /// The same error, its position moved by `columns` when it lies on the first line: the error
    /// of a statement rewritten from the user's with a prefix of another length.
    pub fn shifted(self, columns: i64) -> Error {
        match self {
            Error::Sql { message, line: 1, column } => {
                Error::Sql { message, line: 1, column: (column as i64 + columns).max(1) as u64 }
            }
            other => other,
        }
    }

    /// Where in the statement's text a SQL error lies: 1-based line and column.
    pub fn position(&self) -> Option<(u64, u64)> {
        match self {
            Error::Sql { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
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
            Error::Argument(m)
            | Error::Plan(m)
            | Error::OutOfMemory { message: m, .. }
            | Error::Engine(m)
            | Error::Sql { message: m, .. } => f.write_str(m),
            Error::Fault(m) => write!(f, "the query stopped on a fault inside the query engine: {m}"),
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
    /// An error of the engine by its kind: commdb's own error raised inside it as it was
    /// raised, the SQL parser's and the planner's as a statement to correct (with their place
    /// in it where they carry a span, `datafusion.sql_parser.collect_spans`, in plain words),
    /// the memory pool's refusal as out of memory, a panic in one of its tasks as a fault, and
    /// any other as a failure while the statement ran.
    fn from(e: datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError as E;
        if let Some(own) = own_error(&e) {
            return own;
        }
        let span = e.diagnostic().and_then(|d| d.span).map(|s| (s.start.line, s.start.column));
        // A planning error is told in its own words, without the engine's "Error during
        // planning: " before them (the kind is this error's variant).
        let text = match &e {
            E::Plan(own) => own.clone(),
            other => other.to_string(),
        };
        let (message, parsed) = sql_message(&text);
        // DataFusion's plea to report its internal errors upstream is not the user's business.
        let message = match message.find("\nThis issue was likely caused by a bug in DataFusion") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        let message = as_the_user_names(&message);
        let place = span.or(parsed).filter(|(line, column)| *line > 0 && *column > 0);
        // What stopped a query is told as such wherever the statement points.
        match (e.find_root(), place) {
            (E::ResourcesExhausted(_), _) => Error::OutOfMemory { message, advised: false },
            (E::ExecutionJoin(join), _) if join.is_panic() => Error::Fault(FAULT.to_string()),
            (E::External(inner), _) if panicked(inner.as_ref()) => Error::Fault(FAULT.to_string()),
            (_, Some((line, column))) => Error::Sql { message, line, column },
            (E::Plan(_) | E::SchemaError(..) | E::SQL(..) | E::NotImplemented(_), None) => Error::Plan(message),
            _ => Error::Engine(message),
        }
    }
}

/// Whether an engine's external error is the join of a task that panicked (DataFusion passes
/// it on as the join error, or shared among the partitions it stopped).
fn panicked(inner: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    use tokio::task::JoinError;
    let join = inner
        .downcast_ref::<JoinError>()
        .or_else(|| inner.downcast_ref::<std::sync::Arc<JoinError>>().map(AsRef::as_ref));
    join.is_some_and(JoinError::is_panic)
}

/// What a fault (panic) in one of the engine's tasks is told as; its own message went to the
/// process's panic hook (the shell shows it in its place).
const FAULT: &str = "a task of the query engine panicked (its message is on standard error)";

/// Table names as the user writes them: DataFusion names `mesages` in its errors as
/// `'datafusion.public.mesages'`; the default schema (the default trace's tables and the
/// user's own) is left out, and another schema is said without the catalog (`'run2.mesages'`).
fn as_the_user_names(message: &str) -> String {
    let catalog = crate::model::CATALOG;
    let default = crate::model::DEFAULT_SCHEMA;
    message.replace(&format!("'{catalog}.{default}."), "'").replace(&format!("'{catalog}."), "'")
}

/// commdb's own error raised while a query ran (a trace's events that cannot be decoded, an
/// interruption, an analysis over its budget), as it was raised, without the engine's wrapping.
pub fn own_error(e: &datafusion::error::DataFusionError) -> Option<Error> {
    let datafusion::error::DataFusionError::External(inner) = e.find_root() else { return None };
    inner.downcast_ref::<Error>().map(Error::again)
}

impl Error {
    /// The same error once more (an I/O error's source by its kind and words): what a query
    /// that raised it inside the engine reports.
    pub fn again(&self) -> Error {
        match self {
            Error::Io { path, source } => {
                Error::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
            }
            Error::Format { path, position, message } => {
                Error::Format { path: path.clone(), position: position.clone(), message: message.clone() }
            }
            Error::Argument(m) => Error::Argument(m.clone()),
            Error::Plan(m) => Error::Plan(m.clone()),
            Error::OutOfMemory { message, advised } => {
                Error::OutOfMemory { message: message.clone(), advised: *advised }
            }
            Error::Fault(m) => Error::Fault(m.clone()),
            Error::Engine(m) => Error::Engine(m.clone()),
            Error::Sql { message, line, column } => {
                Error::Sql { message: message.clone(), line: *line, column: *column }
            }
        }
    }

    /// The error a query over the memory budget of `budget` bytes (None: unlimited or unknown)
    /// is shown with: which budget, and `what_to_do`, unless its message says so already.
    pub fn with_budget(self, budget: Option<usize>, what_to_do: &str) -> Error {
        match (self, budget) {
            (Error::OutOfMemory { message, advised: false }, Some(bytes)) => Error::OutOfMemory {
                message: format!(
                    "{message}\nthe query needs more than the memory budget for queries ({} MiB): {what_to_do}",
                    bytes >> 20
                ),
                advised: true,
            },
            (other, _) => other,
        }
    }
}

/// A DataFusion error's text with the SQL parser's wrapping taken off (`SQL error:
/// ParserError("Expected: ), found: x at Line: 1, Column: 9")` becomes `syntax error:
/// expected ), found: x`), and the place the parser named.
fn sql_message(text: &str) -> (String, Option<(u64, u64)>) {
    let inner = ["SQL error: ParserError(", "SQL error: TokenizerError(", "SQL error: SpannedParserError("]
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .map(|rest| rest.strip_suffix(')').unwrap_or(rest));
    let Some(inner) = inner else { return (text.to_string(), None) };
    // The message is a Debug-quoted string, perhaps followed by a span.
    let inner = inner.split("\", Span").next().unwrap_or(inner);
    let inner = inner.trim_matches('"').replace("\\\"", "\"");
    let (words, position) = match inner.rsplit_once(" at Line: ") {
        Some((words, place)) => {
            let mut numbers = place.split(", Column: ").map(|n| n.trim().parse::<u64>().ok());
            let position = match (numbers.next().flatten(), numbers.next().flatten()) {
                (Some(line), Some(column)) => Some((line, column)),
                _ => None,
            };
            (words.to_string(), position)
        }
        None => (inner, None),
    };
    let words = match words.strip_prefix("Expected: ") {
        Some(rest) => format!("expected {}", rest.replacen(", found: ", ", found ", 1)),
        None => words,
    };
    (format!("syntax error: {words}"), position)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_keep_their_kind() {
        use datafusion::error::DataFusionError as E;
        let of = |e: E| Error::from(e);
        assert!(matches!(of(E::ResourcesExhausted("pool".into())), Error::OutOfMemory { advised: false, .. }));
        assert!(matches!(of(E::Plan("no".into())), Error::Plan(_)));
        // In its own words.
        assert_eq!(of(E::Plan("f: no table named 'x'".into())).to_string(), "f: no table named 'x'");
        assert!(matches!(of(E::Execution("overflow".into())), Error::Engine(_)));
        // commdb's own error raised inside the engine comes back as it was raised.
        let own = E::Context("x".into(), Box::new(E::External(Box::new(Error::argument("bad")))));
        assert!(matches!(of(own), Error::Argument(m) if m == "bad"));
        let over = E::External(Box::new(Error::OutOfMemory { message: "f: over".into(), advised: true }));
        assert!(matches!(of(over), Error::OutOfMemory { advised: true, .. }));
        // A panic in one of the engine's tasks, as DataFusion wraps it.
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let join = runtime.block_on(async { tokio::spawn(async { panic!("a test's fault") }).await }).unwrap_err();
        let fault = of(E::Context("Join Error".into(), Box::new(E::External(Box::new(std::sync::Arc::new(join))))));
        assert!(matches!(&fault, Error::Fault(_)), "{fault:?}");
        assert!(!fault.to_string().contains("Join Error"), "{fault}");
        // The budget is named once, where the message does not say it already.
        let told = of(E::ResourcesExhausted("pool".into())).with_budget(Some(4 << 20), "narrow it");
        assert!(told.to_string().ends_with("memory budget for queries (4 MiB): narrow it"), "{told}");
        let own = Error::OutOfMemory { message: "f: over the memory budget".into(), advised: true };
        assert_eq!(own.with_budget(Some(4 << 20), "narrow it").to_string(), "f: over the memory budget");
    }

    #[test]
    fn parser_errors_in_plain_words_with_their_place() {
        let (m, at) = sql_message(r#"SQL error: ParserError("Expected: ), found: messages at Line: 2, Column: 20")"#);
        assert_eq!((m.as_str(), at), ("syntax error: expected ), found messages", Some((2, 20))));
        let (m, at) = sql_message(r#"SQL error: ParserError("Expected: (, found: EOF")"#);
        assert_eq!((m.as_str(), at), ("syntax error: expected (, found EOF", None));
        let (m, at) = sql_message("Schema error: No field named nonsense.");
        assert_eq!((m.as_str(), at), ("Schema error: No field named nonsense.", None));
    }
}
