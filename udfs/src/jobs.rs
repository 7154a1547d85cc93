//! Job-scheduler logs in SQL: `read_sacct(path)` and `read_swf(path)` read a Slurm `sacct -P`
//! output or a Standard Workload Format log into a table (commdb_catalog::jobs), `swf_header`
//! shows a log's header comments, and `expand_hostlist(text)` expands a Slurm host list into its
//! host names, so scheduler records join with `ranks.node`. Planning reads only what fixes the
//! table's columns (a sacct file's header lines); the records are read when the query runs, as
//! an analysis plan node (crate::plan) that Ctrl-C stops. A bad record is an error naming the
//! file, line and column.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, SchemaRef};
use commdb_catalog::jobs::{self, LogKind, hostlist};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use crate::common::{ComputeMany, Derived};

pub const PATH_ARGS: &[&str] = &["path"];

/// The path argument of a reader.
fn path_arg(function: &str, exprs: &[Expr]) -> Result<String> {
    match exprs {
        [
            Expr::Literal(
                ScalarValue::Utf8(Some(p)) | ScalarValue::Utf8View(Some(p)) | ScalarValue::LargeUtf8(Some(p)),
                _,
            ),
        ] => Ok(p.clone()),
        _ => {
            plan_err!("{function}: expects one argument, the path of the file as a string, e.g. {function}('jobs.txt')")
        }
    }
}

/// A table read from the file at `path` when the query runs.
fn lazy_file(
    schema: std::result::Result<SchemaRef, commdb_catalog::Error>,
    function: &'static str,
    read: impl Fn() -> std::result::Result<RecordBatch, commdb_catalog::Error> + Send + Sync + 'static,
) -> Result<Arc<dyn TableProvider>> {
    let schema = match schema {
        Ok(s) => s,
        Err(e) => return plan_err!("{function}: {e}"),
    };
    let expected = schema.clone();
    let compute: ComputeMany = Arc::new(move |_| match read() {
        Ok(batch) if batch.schema().fields() == expected.fields() => Ok(vec![batch]),
        Ok(_) => exec_err!("{function}: the file changed while the query was planned; run it again"),
        Err(e) => exec_err!("{function}: {e}"),
    });
    Ok(Arc::new(Derived::from_many(schema, Vec::new(), compute).named(function)))
}

/// `read_sacct(path)` -> the typed columns of a sacct -P / -p output.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSacct;

impl TableFunctionImpl for ReadSacct {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("read_sacct", args.exprs())?;
        let schema = jobs::sacct::schema(Path::new(&path));
        lazy_file(schema, "read_sacct", move || jobs::read(Path::new(&path), LogKind::Sacct))
    }
}

/// `read_swf(path)` -> the 18 SWF fields and absolute submit/start/end times.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSwf;

impl TableFunctionImpl for ReadSwf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("read_swf", args.exprs())?;
        lazy_file(Ok(jobs::swf::schema()), "read_swf", move || jobs::read(Path::new(&path), LogKind::Swf))
    }
}

/// `swf_header(path)` -> key, value of the log's `; Key: Value` comments.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct SwfHeader;

impl TableFunctionImpl for SwfHeader {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("swf_header", args.exprs())?;
        lazy_file(Ok(jobs::swf::header_schema()), "swf_header", move || {
            jobs::swf::read(Path::new(&path)).and_then(|log| jobs::swf::header_batch(&log))
        })
    }
}

/// `expand_hostlist(text)` scalar function -> list of host names.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ExpandHostlist {
    signature: Signature,
}

impl Default for ExpandHostlist {
    fn default() -> Self {
        let strings = [DataType::Utf8, DataType::Utf8View, DataType::LargeUtf8];
        let one = strings.iter().map(|t| TypeSignature::Exact(vec![t.clone()])).collect();
        ExpandHostlist { signature: Signature::one_of(one, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ExpandHostlist {
    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        crate::documentation(self.name())
    }

    fn name(&self) -> &str {
        "expand_hostlist"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(input) = arrays.first() else { return exec_err!("expand_hostlist: expects one argument") };
        let text = arrow::compute::cast(input, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = ListBuilder::new(StringBuilder::new());
        for i in 0..text.len() {
            if text.is_null(i) {
                out.append(false);
                continue;
            }
            match hostlist::expand(text.value(i)) {
                Ok(hosts) => {
                    for h in hosts {
                        out.values().append_value(h);
                    }
                    out.append(true);
                }
                Err(e) => return exec_err!("expand_hostlist: '{}' (row {}): {e}", text.value(i), i + 1),
            }
        }
        let list: ArrayRef = Arc::new(out.finish());
        Ok(ColumnarValue::Array(list))
    }
}
