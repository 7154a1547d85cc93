//! Slurm accounting records as `sacct --parsable2` (`-P`) prints them, or `--parsable` (`-p`,
//! every line ending in `|`): a header line naming the columns, then one job or step per line,
//! fields separated by `|`. Any subset of columns in any order; lines starting with `#` and
//! blank lines are skipped, and a repeated header (several outputs in one file) switches to
//! its columns (the table has the union; missing values are NULL).
//!
//! Known columns are typed (names in snake case): JobID becomes `jobid` (as printed), `job_id`,
//! `array_task`, `het_component` and `step` (`1853+0.batch`: job 1853, component 0, step
//! 'batch'); ExitCode becomes `exit_code` and `signal`; Submit/Eligible/Start/End become
//! `submit_time`/`eligible_time`/`start_time`/`end_time` (UTC timestamps; 'Unknown' and 'None'
//! are NULL); Elapsed/Timelimit/CPUTime become `elapsed_s`/`timelimit_s`/`cpu_time_s` (seconds;
//! 'UNLIMITED' and 'Partition_Limit' are NULL); NNodes, NCPUS, AllocCPUS, NTasks, ReqCPUS are
//! integers; ReqMem is kept (`req_mem`) and read as `req_mem_bytes`; NodeList is kept
//! (`node_list`) and expanded into `nodes`. Other columns are kept as text under their name in
//! lower case. A bad value is an error naming the file, line and column. Cost: one pass.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, Int32Builder, Int64Builder, ListBuilder, RecordBatch, StringBuilder,
    TimestampNanosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::{Error, Result};
use crate::jobs::hostlist;
use crate::jobs::time::{parse_duration_s, parse_timestamp};

/// How one source column is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    JobId,
    ExitCode,
    Time,
    Duration,
    Int,
    ReqMem,
    NodeList,
}

/// The kind and output name of a source column.
fn classify(header: &str) -> (Kind, String) {
    let lower = header.trim().to_ascii_lowercase();
    let named = |k: Kind, n: &str| (k, n.to_string());
    match lower.as_str() {
        "jobid" => named(Kind::JobId, "jobid"),
        "jobname" => named(Kind::Text, "job_name"),
        "exitcode" => named(Kind::ExitCode, "exit_code"),
        "submit" => named(Kind::Time, "submit_time"),
        "eligible" => named(Kind::Time, "eligible_time"),
        "start" => named(Kind::Time, "start_time"),
        "end" => named(Kind::Time, "end_time"),
        "elapsed" => named(Kind::Duration, "elapsed_s"),
        "timelimit" => named(Kind::Duration, "timelimit_s"),
        "cputime" => named(Kind::Duration, "cpu_time_s"),
        "nnodes" => named(Kind::Int, "nnodes"),
        "ncpus" => named(Kind::Int, "ncpus"),
        "alloccpus" => named(Kind::Int, "alloc_cpus"),
        "ntasks" => named(Kind::Int, "ntasks"),
        "reqcpus" => named(Kind::Int, "req_cpus"),
        "reqmem" => named(Kind::ReqMem, "req_mem"),
        "nodelist" => named(Kind::NodeList, "node_list"),
        _ => {
            let name: String = lower.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            (Kind::Text, if name.is_empty() { "column".to_string() } else { name })
        }
    }
}

/// The Arrow builders of one source column.
struct Column {
    source: String,
    kind: Kind,
    builders: Vec<Box<dyn ArrayBuilder>>,
    fields: Vec<Field>,
    /// Host names this column's node lists expanded to so far (capped per log).
    hosts: usize,
}

fn text() -> Box<dyn ArrayBuilder> {
    Box::new(StringBuilder::new())
}
fn int64() -> Box<dyn ArrayBuilder> {
    Box::new(Int64Builder::new())
}
fn int32() -> Box<dyn ArrayBuilder> {
    Box::new(Int32Builder::new())
}

impl Column {
    fn new(source: &str) -> Column {
        let (kind, name) = classify(source);
        let utc = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
        let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
        let f = |n: &str, t: DataType| Field::new(n, t, true);
        let (builders, fields): (Vec<Box<dyn ArrayBuilder>>, Vec<Field>) = match kind {
            Kind::Text => (vec![text()], vec![f(&name, DataType::Utf8)]),
            Kind::JobId => (
                vec![text(), int64(), text(), int32(), text()],
                vec![
                    f("jobid", DataType::Utf8),
                    f("job_id", DataType::Int64),
                    f("array_task", DataType::Utf8),
                    f("het_component", DataType::Int32),
                    f("step", DataType::Utf8),
                ],
            ),
            Kind::ExitCode => {
                (vec![int32(), int32()], vec![f("exit_code", DataType::Int32), f("signal", DataType::Int32)])
            }
            Kind::Time => (vec![Box::new(TimestampNanosecondBuilder::new().with_timezone("UTC"))], vec![f(&name, utc)]),
            Kind::Duration | Kind::Int => (vec![int64()], vec![f(&name, DataType::Int64)]),
            Kind::ReqMem => {
                (vec![text(), int64()], vec![f("req_mem", DataType::Utf8), f("req_mem_bytes", DataType::Int64)])
            }
            Kind::NodeList => (
                vec![text(), Box::new(ListBuilder::new(StringBuilder::new()))],
                vec![f("node_list", DataType::Utf8), f("nodes", list)],
            ),
        };
        Column { source: source.trim().to_string(), kind, builders, fields, hosts: 0 }
    }

    fn append_null(&mut self) {
        for b in &mut self.builders {
            append_null(b.as_mut());
        }
    }

    /// Append one value; Err(message) when it is not what the column holds.
    fn append(&mut self, value: &str) -> std::result::Result<(), String> {
        let v = value.trim();
        let b = &mut self.builders;
        match self.kind {
            Kind::Text => string(b[0].as_mut(), (!v.is_empty()).then_some(v)),
            Kind::JobId => {
                let id = parse_job_id(v).ok_or_else(|| {
                    format!("expected a job id such as 1234, 1234.batch, 1234_7 or 1853+0.0, found '{v}'")
                })?;
                string(b[0].as_mut(), Some(v));
                int64_value(b[1].as_mut(), Some(id.job));
                string(b[2].as_mut(), id.array_task);
                int32_value(b[3].as_mut(), id.het);
                string(b[4].as_mut(), id.step);
            }
            Kind::ExitCode => {
                let (code, signal) = match v.split_once(':') {
                    Some((c, s)) => (c.parse().ok(), s.parse().ok()),
                    None => (v.parse().ok(), Some(0)),
                };
                match (code, signal) {
                    _ if v.is_empty() => {
                        int32_value(b[0].as_mut(), None);
                        int32_value(b[1].as_mut(), None);
                    }
                    (Some(c), Some(s)) => {
                        int32_value(b[0].as_mut(), Some(c));
                        int32_value(b[1].as_mut(), Some(s));
                    }
                    _ => return Err(format!("expected an exit code CODE:SIGNAL such as 0:0, found '{v}'")),
                }
            }
            Kind::Time => {
                let t = match v {
                    "" | "Unknown" | "None" => None,
                    _ => Some(parse_timestamp(v).ok_or_else(|| {
                        format!("expected a time YYYY-MM-DDTHH:MM:SS, 'Unknown' or 'None', found '{v}'")
                    })?),
                };
                let tb = b[0].as_any_mut().downcast_mut::<TimestampNanosecondBuilder>().ok_or("builder")?;
                tb.append_option(t);
            }
            Kind::Duration => {
                let d = match v {
                    "" | "UNLIMITED" | "Partition_Limit" | "INVALID" => None,
                    _ => Some(parse_duration_s(v).ok_or_else(|| {
                        format!("expected a duration [D-]HH:MM:SS, 'UNLIMITED' or 'Partition_Limit', found '{v}'")
                    })?),
                };
                int64_value(b[0].as_mut(), d);
            }
            Kind::Int => {
                let n = match v {
                    "" => None,
                    _ => Some(v.parse::<i64>().map_err(|_| format!("expected an integer, found '{v}'"))?),
                };
                int64_value(b[0].as_mut(), n);
            }
            Kind::ReqMem => {
                let bytes = match v {
                    "" => None,
                    _ => Some(
                        parse_memory(v)
                            .ok_or_else(|| format!("expected a memory size such as 4000M, 4Gn or 2Gc, found '{v}'"))?,
                    ),
                };
                string(b[0].as_mut(), (!v.is_empty()).then_some(v));
                int64_value(b[1].as_mut(), bytes);
            }
            Kind::NodeList => {
                let hosts = match v {
                    "" | "None assigned" | "(null)" => None,
                    _ => Some(hostlist::expand(v).map_err(|e| format!("bad host list '{v}': {e}"))?),
                };
                self.hosts += hosts.as_ref().map_or(0, Vec::len);
                if self.hosts > hostlist::MAX_HOSTS {
                    return Err(format!(
                        "the host lists of this log expand to more than {} names in total (this one to {})",
                        hostlist::MAX_HOSTS,
                        hosts.as_ref().map_or(0, Vec::len)
                    ));
                }
                string(b[0].as_mut(), (!v.is_empty()).then_some(v));
                let lb = b[1].as_any_mut().downcast_mut::<ListBuilder<StringBuilder>>().ok_or("builder")?;
                match hosts {
                    Some(h) => {
                        for host in h {
                            lb.values().append_value(host);
                        }
                        lb.append(true);
                    }
                    None => lb.append(false),
                }
            }
        }
        Ok(())
    }
}

fn append_null(b: &mut dyn ArrayBuilder) {
    let any = b.as_any_mut();
    if let Some(x) = any.downcast_mut::<StringBuilder>() {
        x.append_null();
    } else if let Some(x) = any.downcast_mut::<Int64Builder>() {
        x.append_null();
    } else if let Some(x) = any.downcast_mut::<Int32Builder>() {
        x.append_null();
    } else if let Some(x) = any.downcast_mut::<TimestampNanosecondBuilder>() {
        x.append_null();
    } else if let Some(x) = any.downcast_mut::<ListBuilder<StringBuilder>>() {
        x.append(false);
    }
}

fn string(b: &mut dyn ArrayBuilder, v: Option<&str>) {
    if let Some(x) = b.as_any_mut().downcast_mut::<StringBuilder>() {
        x.append_option(v);
    }
}

fn int64_value(b: &mut dyn ArrayBuilder, v: Option<i64>) {
    if let Some(x) = b.as_any_mut().downcast_mut::<Int64Builder>() {
        x.append_option(v);
    }
}

fn int32_value(b: &mut dyn ArrayBuilder, v: Option<i32>) {
    if let Some(x) = b.as_any_mut().downcast_mut::<Int32Builder>() {
        x.append_option(v);
    }
}

/// The parts of a Slurm job id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JobId<'a> {
    job: i64,
    array_task: Option<&'a str>,
    het: Option<i32>,
    step: Option<&'a str>,
}

fn parse_job_id(text: &str) -> Option<JobId<'_>> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let job = text[..digits].parse().ok()?;
    let mut rest = &text[digits..];
    let mut id = JobId { job, array_task: None, het: None, step: None };
    if let Some(r) = rest.strip_prefix('_') {
        let end = r.find(['+', '.']).unwrap_or(r.len());
        id.array_task = Some(&r[..end]).filter(|t| !t.is_empty());
        id.array_task?;
        rest = &r[end..];
    }
    if let Some(r) = rest.strip_prefix('+') {
        let end = r.find('.').unwrap_or(r.len());
        id.het = Some(r[..end].parse().ok()?);
        rest = &r[end..];
    }
    if let Some(r) = rest.strip_prefix('.') {
        id.step = Some(r).filter(|s| !s.is_empty());
        id.step?;
        rest = "";
    }
    rest.is_empty().then_some(id)
}

/// `4000M`, `4Gn`, `2Gc`, `512K`, `1T`, a bare number of MiB: bytes (binary units).
fn parse_memory(text: &str) -> Option<i64> {
    let t = text.trim_end_matches(['n', 'c']);
    let (number, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t, "M"),
    };
    let scale: f64 = match unit {
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0f64.powi(4),
        _ => return None,
    };
    let v: f64 = number.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * scale).round() as i64)
}

/// Read a sacct output file.
pub fn read(path: &Path) -> Result<RecordBatch> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    parse(std::io::BufReader::new(file), path)
}

/// Split a line at `|`; with `trailing` (sacct -p, whose header ends in `|`), drop the empty
/// field after the last `|`. (With -P a line ending in `|` has an empty last field.)
fn fields(line: &str, trailing: bool) -> Vec<&str> {
    let line = if trailing { line.strip_suffix('|').unwrap_or(line) } else { line };
    line.split('|').collect()
}

/// The columns a header line names, added to `columns` when new (with `rows` NULLs before
/// them): the index into `columns` of each field.
fn add_header(columns: &mut Vec<Column>, f: Vec<&str>, rows: usize, path: &Path, line_no: u64) -> Result<Vec<usize>> {
    let mut map = Vec::with_capacity(f.len());
    for h in &f {
        let h = h.trim().trim_start_matches('\u{feff}');
        if f.iter().filter(|o| o.trim().trim_start_matches('\u{feff}').eq_ignore_ascii_case(h)).count() > 1 {
            return Err(Error::at_line(
                path,
                line_no,
                Some(h),
                format!("column '{h}' appears more than once in the header"),
            ));
        }
        let idx = match columns.iter().position(|c| c.source.eq_ignore_ascii_case(h)) {
            Some(i) => i,
            None => {
                let mut c = Column::new(h);
                // Output names stay unique: a name taken by an earlier column gets a suffix.
                for f in &mut c.fields {
                    if columns.iter().flat_map(|o| &o.fields).any(|o| o.name() == f.name()) {
                        *f = Field::new(format!("{}_{}", f.name(), columns.len()), f.data_type().clone(), true);
                    }
                }
                for _ in 0..rows {
                    c.append_null();
                }
                columns.push(c);
                columns.len() - 1
            }
        };
        map.push(idx);
    }
    Ok(map)
}

const NO_HEADER: &str =
    "expected a header line naming the columns (JobID|JobName|...), as sacct -P prints without --noheader";

/// Whether a line of a sacct output is a header line (`JobID|...`), and its first field.
fn is_header(line: &str) -> bool {
    let first = line.split('|').next().unwrap_or("").trim().trim_start_matches('\u{feff}');
    first.eq_ignore_ascii_case("jobid")
}

/// The table a sacct output file reads as, from its header lines only (no record is parsed):
/// what a query is planned with before the file is read.
pub fn schema(path: &Path) -> Result<SchemaRef> {
    crate::error::Error::regular_file(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut columns: Vec<Column> = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let line = line.trim_end_matches('\r');
        if n.is_multiple_of(4096) {
            crate::interrupt::check("read_sacct")?;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if is_header(line) {
            add_header(&mut columns, fields(line, line.ends_with('|')), 0, path, n as u64 + 1)?;
        } else if columns.is_empty() {
            return Err(Error::at_line(path, n as u64 + 1, None, NO_HEADER));
        }
    }
    if columns.is_empty() {
        return Err(Error::at_line(path, 1, None, "no sacct header line (JobID|...) found"));
    }
    Ok(Arc::new(Schema::new(columns.iter().flat_map(|c| c.fields.iter().cloned()).collect::<Vec<_>>())))
}

/// Parse sacct output from a reader; `path` names it in errors.
pub fn parse<R: BufRead>(reader: R, path: &Path) -> Result<RecordBatch> {
    let mut columns: Vec<Column> = Vec::new();
    // For the current header: index into `columns` of each field.
    let mut current: Option<Vec<usize>> = None;
    let mut trailing = false;
    let mut rows = 0usize;
    for (n, line) in reader.lines().enumerate() {
        let line_no = n as u64 + 1;
        let line = line.map_err(|e| Error::io(path, e))?;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if n.is_multiple_of(4096) {
            crate::interrupt::check("read_sacct")?;
        }
        if is_header(line) {
            trailing = line.ends_with('|');
            let map = add_header(&mut columns, fields(line, trailing), rows, path, line_no)?;
            current = Some(map);
            continue;
        }
        let f = fields(line, trailing);
        let Some(map) = &current else {
            return Err(Error::at_line(path, line_no, None, NO_HEADER));
        };
        if f.len() != map.len() {
            return Err(Error::at_line(
                path,
                line_no,
                None,
                format!("expected {} fields separated by '|' (as the header), found {}", map.len(), f.len()),
            ));
        }
        let mut seen = vec![false; columns.len()];
        for (value, &idx) in f.iter().zip(map) {
            let c = &mut columns[idx];
            c.append(value).map_err(|m| Error::at_line(path, line_no, Some(&c.source), m))?;
            seen[idx] = true;
        }
        for (c, s) in columns.iter_mut().zip(seen) {
            if !s {
                c.append_null();
            }
        }
        rows += 1;
    }
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for mut c in columns {
        fields.extend(c.fields.iter().cloned());
        arrays.extend(c.builders.iter_mut().map(|b| b.finish()));
    }
    if fields.is_empty() {
        return Err(Error::at_line(path, 1, None, "no sacct header line (JobID|...) found"));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Int32Type, Int64Type};

    fn parse_text(s: &str) -> Result<RecordBatch> {
        parse(std::io::Cursor::new(s), Path::new("sacct.txt"))
    }

    #[test]
    fn job_ids() {
        let id = parse_job_id("1853+0.batch").unwrap();
        assert_eq!(id, JobId { job: 1853, array_task: None, het: Some(0), step: Some("batch") });
        let id = parse_job_id("1234_[1-3]").unwrap();
        assert_eq!((id.job, id.array_task, id.step), (1234, Some("[1-3]"), None));
        assert_eq!(parse_job_id("2355542.extern").unwrap().step, Some("extern"));
        assert!(parse_job_id("batch").is_none());
        assert!(parse_job_id("12.").is_none());
    }

    #[test]
    fn a_duplicated_column_or_too_many_hosts_is_an_error_naming_the_line() {
        let e = parse("JobID|NodeList|nodelist\n1|n1|n1\n".as_bytes(), Path::new("dup.txt")).unwrap_err().to_string();
        assert!(e.contains("dup.txt") && e.contains(":1") && e.contains("appears more than once"), "{e}");
        let line = "1|node[0000000-0524287]\n";
        let text = format!("JobID|NodeList\n{}", line.repeat(3));
        let e = parse(text.as_bytes(), Path::new("hosts.txt")).unwrap_err().to_string();
        assert!(e.contains("hosts.txt") && e.contains(":4") && e.contains("in total"), "{e}");
    }

    #[test]
    fn typed_columns_and_both_parsable_forms() {
        let b = parse_text(
            "JobID|JobName|State|ExitCode|Start|End|Elapsed|NNodes|ReqMem|NodeList|Comment|\n\
             7+1.0|a|COMPLETED|1:9|2024-01-02T03:04:05|Unknown|1-00:00:10|2|4Gn|n[01-02]|x|\n",
        )
        .unwrap();
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "jobid",
                "job_id",
                "array_task",
                "het_component",
                "step",
                "job_name",
                "state",
                "exit_code",
                "signal",
                "start_time",
                "end_time",
                "elapsed_s",
                "nnodes",
                "req_mem",
                "req_mem_bytes",
                "node_list",
                "nodes",
                "comment"
            ]
        );
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        assert_eq!(col("job_id").as_primitive::<Int64Type>().value(0), 7);
        assert_eq!(col("het_component").as_primitive::<Int32Type>().value(0), 1);
        assert_eq!(col("signal").as_primitive::<Int32Type>().value(0), 9);
        assert!(col("end_time").is_null(0));
        assert_eq!(col("elapsed_s").as_primitive::<Int64Type>().value(0), 86_410);
        assert_eq!(col("req_mem_bytes").as_primitive::<Int64Type>().value(0), 4 << 30);
        assert_eq!(col("nodes").as_list::<i32>().value(0).as_string::<i32>().value(1), "n02");
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse_text("JobID|Start\n1|2024-01-01T00:00:00\n2|yesterday\n").unwrap_err().to_string();
        assert!(e.contains("sacct.txt:3") && e.contains("Start") && e.contains("'yesterday'"), "{e}");
        let e = parse_text("JobID|NodeList\n1|n[1-\n").unwrap_err().to_string();
        assert!(e.contains("NodeList") && e.contains("column 2: '[' is never closed"), "{e}");
        let e = parse_text("1|x\n").unwrap_err().to_string();
        assert!(e.contains("expected a header line"), "{e}");
        let e = parse_text("JobID|State\n1|A|B\n").unwrap_err().to_string();
        assert!(e.contains("expected 2 fields"), "{e}");
    }

    #[test]
    fn output_names_stay_unique() {
        let b = parse_text("JobID|Job_ID|JobName|Job Name\n5|x|a|b\n").unwrap();
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            ["jobid", "job_id", "array_task", "het_component", "step", "job_id_1", "job_name", "job_name_3"]
        );
    }

    #[test]
    fn repeated_headers_take_the_union() {
        let b = parse_text("JobID|State\n1|OK\n# another run\nJobID|Partition\n2|p\n").unwrap();
        assert_eq!(b.num_rows(), 2);
        assert!(b.column_by_name("partition").unwrap().is_null(0));
        assert!(b.column_by_name("state").unwrap().is_null(1));
    }
}
