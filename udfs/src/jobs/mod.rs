//! Job-scheduler logs in SQL: `read_sacct(path)` and `read_swf(path)` read a Slurm `sacct -P`
//! output or a Standard Workload Format log into a table (commdb_catalog::jobs), `swf_header`
//! shows a log's header comments, and `expand_hostlist(text)` expands a Slurm host list into its
//! host names, so scheduler records join with `ranks.node`. Planning reads only what fixes the
//! table's columns (a sacct file's header lines); the records are read when the query runs, as
//! an analysis plan node (commdb_analysis::plan) that Ctrl-C stops. A bad record is an error naming the
//! file, line and column.

pub mod files;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, SchemaRef};
use commdb_catalog::jobs::{self, LogKind, hostlist};
use datafusion::catalog::TableProvider;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int32, int64, text, timestamp_utc};
use commdb_analysis::derived::Derived;
use commdb_analysis::params::{Param, ParamDefault, Type, param};
use commdb_analysis::plan::ComputeMany;

const PATH: Param = param("path", Type::Text, ParamDefault::Required, "the file to read");

pub const READ_SACCT: Function = Function {
    name: "read_sacct",
    params: &[PATH],
    output: Output::ColumnsThen(
        &[
            col("jobid", text, "the JobID as written: 1234, 1234_7, 1234+1, 1234.batch"),
            col("job_id", int64, "the job's number"),
            col("array_task", text, "the array task (after _), when one"),
            col("het_component", int32, "the heterogeneous component (after +), when one"),
            col("step", text, "the step (after .): batch, extern, 0, ..."),
        ],
        "then the file's columns typed: times as UTC timestamps, durations as elapsed_s and the like in seconds, node lists as node_list and nodes (expanded), exit codes as exit_code and signal, others as text",
    ),
    description: "a Slurm sacct -P / -p output with its header; known columns typed, node lists expanded, others kept as text",
    make: Make::Table(read_sacct),
};

pub const READ_SWF: Function = Function {
    name: "read_swf",
    params: &[PATH],
    output: Output::Columns(&[
        col("job_number", int64, "1: the job's number in the log"),
        col("submit_time", int64, "2: seconds since the log's start"),
        col("wait_time", int64, "3: seconds in the queue"),
        col("run_time", int64, "4: seconds of running"),
        col("procs", int64, "5: processors allocated"),
        col("avg_cpu_time", float64, "6: mean CPU seconds per processor"),
        col("used_memory", float64, "7: kilobytes per processor"),
        col("req_procs", int64, "8: processors requested"),
        col("req_time", int64, "9: seconds requested"),
        col("req_memory", float64, "10: kilobytes per processor requested"),
        col("status", int64, "11: 1 completed, 0 failed, 5 cancelled, ..."),
        col("user_id", int64, "12"),
        col("group_id", int64, "13"),
        col("executable", int64, "14: application number"),
        col("queue", int64, "15"),
        col("partition", int64, "16"),
        col("preceding_job", int64, "17: the job this one waited for"),
        col("think_time", int64, "18: seconds after the preceding job"),
        col("submit_ts", timestamp_utc, "absolute submit time (NULL without UnixStartTime in the header)"),
        col("start_ts", timestamp_utc, "absolute start time"),
        col("end_ts", timestamp_utc, "absolute end time"),
    ]),
    description: "a Standard Workload Format log (plain or gzip), -1 as NULL; absolute times when the header gives UnixStartTime",
    make: Make::Table(read_swf),
};

pub const SWF_HEADER: Function = Function {
    name: "swf_header",
    params: &[PATH],
    output: Output::Columns(&[
        col("key", text, "the comment's key (UnixStartTime, MaxNodes, ...)").never_null(),
        col("value", text, "its value").never_null(),
    ]),
    description: "the '; Key: Value' header comments of a Standard Workload Format log",
    make: Make::Table(swf_header),
};

pub const EXPAND_HOSTLIST: Function = Function {
    name: "expand_hostlist",
    params: &[param("text", Type::Value("Utf8"), ParamDefault::Required, "a Slurm host list")],
    output: Output::Value("list of host names"),
    description: "a Slurm host list such as node[001-004,010] or rack[1-2]-n[01-02] expanded, zero padding kept",
    make: Make::Scalar(|f, _| datafusion::logical_expr::ScalarUDF::from(ExpandHostlist::new(f))),
};

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

/// The path a reader of scheduler logs was given, if this process may read it
/// (commdb_catalog::data_dirs).
fn readable(function: &str, path: &str) -> Result<()> {
    match commdb_catalog::data_dirs::check(Path::new(path)) {
        Ok(()) => Ok(()),
        Err(refused) => plan_err!("{function}: {refused}"),
    }
}

arguments! {
    /// The one argument of the readers of scheduler logs.
    struct PathArgs(READ_SACCT, READ_SWF, SWF_HEADER) {
        path: String,
    }
}

fn read_sacct(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    readable(a.function, &path)?;
    let schema = jobs::sacct::schema(Path::new(&path));
    lazy_file(schema, a.function, move || jobs::read(Path::new(&path), LogKind::Sacct))
}

fn read_swf(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    readable(a.function, &path)?;
    lazy_file(Ok(jobs::swf::schema()), a.function, move || jobs::read(Path::new(&path), LogKind::Swf))
}

fn swf_header(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PathArgs { path } = PathArgs::read(a)?;
    readable(a.function, &path)?;
    lazy_file(Ok(jobs::swf::header_schema()), a.function, move || {
        jobs::swf::read(Path::new(&path)).and_then(|log| jobs::swf::header_batch(&log))
    })
}

/// The scalar function: a host list in, the list of host names out.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ExpandHostlist {
    declaration: &'static Function,
    signature: Signature,
}

impl ExpandHostlist {
    pub fn new(declaration: &'static Function) -> Self {
        let strings = [DataType::Utf8, DataType::Utf8View, DataType::LargeUtf8];
        let one = strings.iter().map(|t| TypeSignature::Exact(vec![t.clone()])).collect();
        ExpandHostlist { declaration, signature: Signature::one_of(one, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ExpandHostlist {
    commdb_analysis::declare::declared_function!();

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
