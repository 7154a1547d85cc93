//! A statement's result as Python sees it: its record batches, handed to pyarrow, pandas and
//! polars through the Arrow PyCapsule interface (`__arrow_c_stream__`), which moves the
//! batches' buffers across without a copy; and shown in Jupyter as an escaped HTML table of its
//! first rows that says how many it leaves out.

use std::fmt::Write;

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;
use arrow::ffi::FFI_ArrowSchema;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::Failure;

/// Rows shown by `repr` and in Jupyter.
const SHOWN_ROWS: usize = 20;
/// Characters a shown value keeps.
const SHOWN_CHARS: usize = 80;

/// The rows of a statement (none, with a message, for a statement that only did something).
#[pyclass(module = "commdb", name = "Result", frozen)]
#[derive(Debug)]
pub struct Result {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    message: Option<String>,
}

impl Result {
    pub fn rows(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        Result { schema, batches, message: None }
    }

    pub fn done(message: String) -> Self {
        Result {
            schema: SchemaRef::new(arrow::datatypes::Schema::empty()),
            batches: Vec::new(),
            message: Some(message),
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn record_batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    fn row_count(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The first `n` rows as text, value by value (long values cut with an ellipsis).
    fn head(&self, n: usize) -> std::result::Result<Vec<Vec<String>>, Failure> {
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in &self.batches {
            if rows.len() >= n {
                break;
            }
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Failure::new(crate::errors::Class::Query, e.to_string()))?;
            for i in 0..batch.num_rows().min(n - rows.len()) {
                rows.push(formatters.iter().map(|f| shorten(&f.value(i).to_string())).collect());
            }
        }
        Ok(rows)
    }

    fn left_out(&self, shown: usize) -> String {
        let all = self.row_count();
        if all > shown { format!("{} more rows not shown ({all} in all)", all - shown) } else { String::new() }
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() > SHOWN_CHARS {
        format!("{}…", text.chars().take(SHOWN_CHARS - 1).collect::<String>())
    } else {
        text.to_string()
    }
}

/// Text escaped for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

#[pymethods]
impl Result {
    /// The rows as an Arrow C stream (the Arrow PyCapsule interface): pyarrow, pandas, polars
    /// and duckdb read it without copying the buffers. `requested_schema` is not honoured:
    /// the stream has the result's own types.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(self.batches.clone().into_iter().map(Ok), self.schema.clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The result's schema as an Arrow C schema.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| Failure::new(crate::errors::Class::Query, e.to_string()).into_py(py))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    /// The column names.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.schema.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The number of rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.row_count()
    }

    /// What a statement that gives no rows did (ATTACH, CREATE VIEW), else None.
    #[getter]
    fn message(&self) -> Option<String> {
        self.message.clone()
    }

    fn __len__(&self) -> usize {
        self.row_count()
    }

    /// The rows as a pyarrow Table (no copy).
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("pyarrow")?.call_method1("table", (slf,))
    }

    /// The rows as a pandas DataFrame.
    fn to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_arrow(slf)?.call_method0("to_pandas")
    }

    /// The rows as a polars DataFrame.
    fn to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let table = Self::to_arrow(slf)?;
        slf.py().import("polars")?.call_method1("from_arrow", (table,))
    }

    /// The rows as pyarrow RecordBatches, as the engine made them (no copy).
    fn batches<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let list = Self::to_arrow(slf)?.call_method0("to_batches")?;
        list.try_iter().map(Bound::into_any)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        if let Some(m) = &self.message {
            return Ok(format!("<commdb.Result: {m}>"));
        }
        let head = self.head(SHOWN_ROWS).map_err(|f| f.into_py(py))?;
        let names = self.columns();
        let mut widths: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
        for row in &head {
            for (w, v) in widths.iter_mut().zip(row) {
                *w = (*w).max(v.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join(" | ")
        };
        let mut out = line(&names);
        out.push('\n');
        out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"));
        for row in &head {
            out.push('\n');
            out.push_str(line(row).trim_end());
        }
        let rest = self.left_out(head.len());
        let _ = write!(
            out,
            "\n({} rows{})",
            self.row_count(),
            if rest.is_empty() { String::new() } else { format!("; {rest}") }
        );
        Ok(out)
    }

    /// An HTML table of the first rows, every value escaped, and a line saying how many rows
    /// are left out.
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        if let Some(m) = &self.message {
            return Ok(format!("<p>{}</p>", escape(m)));
        }
        let head = self.head(SHOWN_ROWS).map_err(|f| f.into_py(py))?;
        let mut html = String::from("<table class=\"commdb-result\"><thead><tr>");
        for name in self.columns() {
            let _ = write!(html, "<th>{}</th>", escape(&name));
        }
        html.push_str("</tr></thead><tbody>");
        for row in &head {
            html.push_str("<tr>");
            for v in row {
                let _ = write!(html, "<td>{}</td>", escape(v));
            }
            html.push_str("</tr>");
        }
        html.push_str("</tbody></table>");
        let rest = self.left_out(head.len());
        let _ = write!(
            html,
            "<p>{}</p>",
            if rest.is_empty() { format!("{} rows", self.row_count()) } else { escape(&rest) }
        );
        Ok(html)
    }
}
