//! `commdb._native`, the extension module under the Python package `commdb`: a commdb
//! session (the same engine and functions as the shell's) in the Python process, results
//! handed to Python as Arrow through the Arrow PyCapsule interface, and the report, charts and
//! export of the shell. The package's Python code (`commdb/`) gives it Pipit's method names and
//! pandas and numpy shapes.
//!
//! A session may send its queries to a cluster instead (`cluster`, `commdb.connect`).
//!
//! Queries run on the session's own threads while the calling thread waits without the GIL
//! (`engine`), looking for Ctrl-C every 100 ms.

mod cluster;
mod engine;
mod errors;
mod result;
mod session;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<session::Session>()?;
    m.add_class::<result::Result>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
