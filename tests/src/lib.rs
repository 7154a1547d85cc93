//! commdb-tests: the behaviour of commdb's SQL, tested through sqllogictest files
//! (`tests/slt/*.slt`), each run on a fresh session with commdb's functions registered and a
//! fixed number of partitions. Paths in the files may use `${SHARED}` (../shared/data, the
//! reference data beside the project), `${DATA}` (tests/data, small hand-made traces) and
//! `${TMP}` (an empty directory of the file's own, for what it writes); a file that needs
//! ${SHARED} is skipped, with the reason printed, when that folder is absent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use commdb_catalog::{Outcome, Session};
use sqllogictest::{DBOutput, DefaultColumnType};

/// Partitions of every test session: more than one, so tests see parallel plans.
pub const PARTITIONS: usize = 4;

/// The project root (the workspace directory).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// ../shared/data beside the project, if present.
pub fn shared_data() -> Option<PathBuf> {
    let p = project_root().parent()?.join("shared").join("data");
    p.is_dir().then_some(p)
}

/// tests/data: small hand-made traces.
pub fn test_data() -> PathBuf {
    project_root().join("tests").join("data")
}

/// Run `work` on a thread of its own with a stack of `stack_bytes` (deep plans need more than
/// the default): Ok(None) when it succeeded, Ok(Some(error)) when it failed cleanly, Err(why)
/// when it panicked or gave no answer within `hang`. The fuzz tests judge every case with it.
pub fn survive(
    stack_bytes: usize,
    hang: std::time::Duration,
    work: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<Option<String>, String> {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(stack_bytes)
        .spawn(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(work)));
        })
        .map_err(|e| format!("no thread: {e}"))?;
    match rx.recv_timeout(hang) {
        Ok(Ok(Ok(()))) => Ok(None),
        Ok(Ok(Err(message))) => Ok(Some(message)),
        Ok(Err(panic)) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {text}"))
        }
        Err(_) => Err(format!("no answer within {hang:?}")),
    }
}

/// A fresh session as the tests use it.
pub fn session() -> Session {
    let mut session = Session::with_partitions(PARTITIONS);
    commdb_udfs::register_all(&mut session);
    session
}

/// Error of a test statement.
#[derive(Debug)]
pub struct TestError(pub String);

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TestError {}

/// A sqllogictest database over a commdb session.
#[derive(Debug)]
pub struct Db {
    session: Session,
    shared: String,
    data: String,
    /// `${TMP}`: a directory of the test's own, removed with it.
    tmp: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Self {
        Db {
            session: session(),
            shared: shared_data().map(|p| p.display().to_string()).unwrap_or_default(),
            data: test_data().display().to_string(),
            tmp: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn substitute(&self, sql: &str) -> String {
        sql.replace("${SHARED}", &self.shared)
            .replace("${DATA}", &self.data)
            .replace("${TMP}", &self.tmp.path().display().to_string())
    }
}

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

/// Cell text as the .slt files expect it: NULL, (empty), floats with at most 6 decimals.
pub fn cell(array: &dyn Array, row: usize, formatter: &ArrayFormatter) -> String {
    if array.is_null(row) {
        return "NULL".to_string();
    }
    let float = match array.data_type() {
        DataType::Float64 => Some(array.as_primitive::<Float64Type>().value(row)),
        DataType::Float32 => Some(f64::from(array.as_primitive::<Float32Type>().value(row))),
        _ => None,
    };
    let text = match float {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.6}");
            let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
            if s == "-0" { "0".to_string() } else { s }
        }
        _ => formatter.value(row).to_string(),
    };
    if text.is_empty() { "(empty)".to_string() } else { text }
}

fn column_type(t: &DataType) -> DefaultColumnType {
    match t {
        t if t.is_integer() => DefaultColumnType::Integer,
        t if t.is_floating() || matches!(t, DataType::Decimal128(_, _)) => DefaultColumnType::FloatingPoint,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _) => {
            DefaultColumnType::Text
        }
        _ => DefaultColumnType::Any,
    }
}

/// Turn batches into sqllogictest rows.
pub fn rows(batches: &[RecordBatch]) -> Result<Vec<Vec<String>>, TestError> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let formatters: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
            .collect::<Result<_, _>>()
            .map_err(|e| TestError(e.to_string()))?;
        for r in 0..b.num_rows() {
            out.push(b.columns().iter().zip(&formatters).map(|(c, f)| cell(c.as_ref(), r, f)).collect());
        }
    }
    Ok(out)
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for Db {
    type Error = TestError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let sql = self.substitute(sql);
        match self.session.statement(&sql).await.map_err(|e| TestError(e.to_string()))? {
            Outcome::Done(_) => Ok(DBOutput::StatementComplete(0)),
            Outcome::Query(df) => {
                let schema = Arc::new(df.schema().as_arrow().clone());
                let batches = df.collect().await.map_err(|e| TestError(e.to_string()))?;
                if schema.fields().is_empty() {
                    return Ok(DBOutput::StatementComplete(0));
                }
                let types = schema.fields().iter().map(|f| column_type(f.data_type())).collect();
                Ok(DBOutput::Rows { types, rows: rows(&batches)? })
            }
        }
    }

    fn engine_name(&self) -> &str {
        "commdb"
    }

    async fn shutdown(&mut self) {}
}
