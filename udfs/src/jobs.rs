//! Job-scheduler logs in SQL: `read_sacct(path)` and `read_swf(path)` read a Slurm `sacct -P`
//! output or a Standard Workload Format log into a table (commdb_catalog::jobs), `swf_header`
//! shows a log's header comments, and `expand_hostlist(text)` expands a Slurm host list into its
//! host names, so scheduler records join with `ranks.node`. The files are read when the query
//! is planned; a bad record is a planning error naming the file, line and column.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field};
use commdb_catalog::jobs::{self, LogKind, hostlist};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

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

fn table(
    function: &str,
    batch: std::result::Result<RecordBatch, commdb_catalog::Error>,
) -> Result<Arc<dyn TableProvider>> {
    match batch {
        Ok(b) => Ok(Arc::new(MemTable::try_new(b.schema(), vec![vec![b]])?)),
        Err(e) => plan_err!("{function}: {e}"),
    }
}

/// `read_sacct(path)` -> the typed columns of a sacct -P / -p output.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSacct;

impl TableFunctionImpl for ReadSacct {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("read_sacct", args.exprs())?;
        table("read_sacct", jobs::read(Path::new(&path), LogKind::Sacct))
    }
}

/// `read_swf(path)` -> the 18 SWF fields and absolute submit/start/end times.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSwf;

impl TableFunctionImpl for ReadSwf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("read_swf", args.exprs())?;
        table("read_swf", jobs::read(Path::new(&path), LogKind::Swf))
    }
}

/// `swf_header(path)` -> key, value of the log's `; Key: Value` comments.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct SwfHeader;

impl TableFunctionImpl for SwfHeader {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let path = path_arg("swf_header", args.exprs())?;
        let batch = jobs::swf::read(Path::new(&path)).and_then(|log| jobs::swf::header_batch(&log));
        table("swf_header", batch)
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
