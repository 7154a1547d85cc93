//! commdb's errors as Python exceptions: the classes are the package's (`commdb/errors.py`,
//! all subclasses of `commdb.Error`); here each of the catalog's errors picks its class and
//! carries the file and position, or the place in the statement, that it names.

use commdb_catalog::error::{Error as CatalogError, Position};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Which exception class of `commdb.errors` a failure raises.
#[derive(Debug, Clone, Copy)]
pub enum Class {
    /// A trace or other input file could not be read, or is not what it should be.
    File,
    /// An option, keyword or function argument is invalid.
    Argument,
    /// A statement is wrong where it stands.
    Sql,
    /// A statement failed while it ran (the memory budget, a fault in an analysis).
    Query,
    /// A cluster's scheduler cannot be reached or does not answer.
    Cluster,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::File => "FileError",
            Class::Argument => "ArgumentError",
            Class::Sql => "SqlError",
            Class::Query => "QueryError",
            Class::Cluster => "ClusterError",
        }
    }
}

/// A failure on its way to Python: its class, message and details.
#[derive(Debug)]
pub struct Failure {
    pub class: Class,
    pub message: String,
    /// Keyword attributes of the exception: path, line, column, offset.
    pub details: Vec<(&'static str, Detail)>,
}

#[derive(Debug, Clone)]
pub enum Detail {
    Text(String),
    Number(u64),
}

impl Failure {
    pub fn new(class: Class, message: impl Into<String>) -> Self {
        Failure { class, message: message.into(), details: Vec::new() }
    }

    pub fn argument(message: impl Into<String>) -> Self {
        Failure::new(Class::Argument, message)
    }

    /// The exception, raised from Python's side.
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self.raise(py) {
            Ok(e) | Err(e) => e,
        }
    }

    fn raise(self, py: Python<'_>) -> PyResult<PyErr> {
        let errors = py.import("commdb.errors")?;
        let class = errors.getattr(self.class.name())?;
        let kwargs = PyDict::new(py);
        for (key, value) in self.details {
            match value {
                Detail::Text(t) => kwargs.set_item(key, t)?,
                Detail::Number(n) => kwargs.set_item(key, n)?,
            }
        }
        let error = class.call((self.message,), Some(&kwargs))?;
        Ok(PyErr::from_value(error))
    }
}

impl From<CatalogError> for Failure {
    fn from(e: CatalogError) -> Self {
        let message = e.to_string();
        match e {
            CatalogError::Io { path, .. } => Failure {
                class: Class::File,
                message,
                details: vec![("path", Detail::Text(path.display().to_string()))],
            },
            CatalogError::Format { path, position, .. } => {
                let mut details = vec![("path", Detail::Text(path.display().to_string()))];
                match position {
                    Position::Line { line, .. } => details.push(("line", Detail::Number(line))),
                    Position::Offset(offset) => details.push(("offset", Detail::Number(offset))),
                    Position::File => {}
                }
                Failure { class: Class::File, message, details }
            }
            CatalogError::Argument(_) => Failure::new(Class::Argument, message),
            CatalogError::Sql { line, column, .. } => Failure {
                class: Class::Sql,
                message,
                details: vec![("line", Detail::Number(line)), ("column", Detail::Number(column))],
            },
            // What the engine refuses while planning is a statement to correct, not a failure
            // while running.
            CatalogError::Plan(_) => Failure::new(Class::Sql, message),
            CatalogError::OutOfMemory { .. } | CatalogError::Fault(_) | CatalogError::Engine(_) => {
                Failure::new(Class::Query, message)
            }
        }
    }
}

/// An error of the query engine while a statement ran: commdb's own message when it carries
/// one (a cluster's task's too, and its scheduler named when it stopped), and what to do when
/// the memory budget ran out.
pub async fn from_engine(
    e: datafusion::error::DataFusionError,
    budget: Option<usize>,
    config: &datafusion::prelude::SessionConfig,
) -> Failure {
    let error = match CatalogError::from(e) {
        // A cluster's failure comes as the text of its report (commdb_cluster::told).
        CatalogError::Engine(message) => CatalogError::Engine(commdb_cluster::told(message, config).await),
        typed => typed,
    };
    let error =
        error.with_budget(budget, "narrow it with a view or a filter, or open the trace with a larger memory_limit");
    let message = error.to_string();
    match error {
        // A statement the engine refused as it began to run is still a failure while running.
        CatalogError::Plan(_) | CatalogError::Sql { .. } => Failure::new(Class::Query, message),
        other => Failure::from(other),
    }
}
