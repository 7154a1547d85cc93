//! Workload logs in the Standard Workload Format of the Parallel Workloads Archive (Feitelson et
//! al., "Experience with using the Parallel Workloads Archive", JPDC 2014): one job per line,
//! 18 whitespace-separated numeric fields, -1 for unknown; header comments `; Key: Value`. The
//! file is streamed line by line (gzip-compressed files, `.gz` or by their magic bytes, are
//! decompressed on the fly). When the header gives `UnixStartTime`, the submit, start and end of
//! each job are also given as UTC timestamps. A malformed line is an error naming the file, line
//! and field. Cost: one pass, O(jobs) memory for the columns only.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::{Error, Result};

/// The 18 SWF fields, in file order, and whether each is fractional.
pub const FIELDS: [(&str, bool); 18] = [
    ("job_number", false),
    ("submit_time", false),
    ("wait_time", false),
    ("run_time", false),
    ("procs", false),
    ("avg_cpu_time", true),
    ("used_memory", true),
    ("req_procs", false),
    ("req_time", false),
    ("req_memory", true),
    ("status", false),
    ("user_id", false),
    ("group_id", false),
    ("executable", false),
    ("queue", false),
    ("partition", false),
    ("preceding_job", false),
    ("think_time", false),
];

/// A workload log: the jobs and the header comments.
#[derive(Debug, Clone)]
pub struct Log {
    pub jobs: RecordBatch,
    /// `; Key: Value` header comments in file order.
    pub header: Vec<(String, String)>,
}

/// Open a file, decompressing gzip when the name ends in .gz or the content starts with its magic.
fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let magic = reader.fill_buf().map_err(|e| Error::io(path, e))?.starts_with(&[0x1f, 0x8b]);
    let gz = magic || path.extension().is_some_and(|e| e == "gz");
    Ok(if gz {
        Box::new(BufReader::with_capacity(1 << 16, flate2::read::MultiGzDecoder::new(reader)))
    } else {
        Box::new(reader)
    })
}

/// The table every SWF log reads as: the 18 fields and the absolute times.
pub fn schema() -> SchemaRef {
    let mut fields: Vec<Field> = FIELDS
        .iter()
        .map(|(name, fractional)| {
            Field::new(*name, if *fractional { DataType::Float64 } else { DataType::Int64 }, true)
        })
        .collect();
    for name in ["submit_ts", "start_ts", "end_ts"] {
        fields.push(Field::new(name, DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), true));
    }
    Arc::new(Schema::new(fields))
}

/// The table of a log's header comments.
pub fn header_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, false)]))
}

/// Read an SWF log.
pub fn read(path: &Path) -> Result<Log> {
    let mut reader = open(path)?;
    let mut ints: Vec<Int64Builder> = (0..18).map(|_| Int64Builder::new()).collect();
    let mut floats: Vec<Float64Builder> = (0..18).map(|_| Float64Builder::new()).collect();
    let mut header = Vec::new();
    // UnixStartTime and the line that gave it: a value that is not a whole number of seconds
    // is an error naming that line (every absolute time would be NULL otherwise).
    let mut start: Option<i64> = None;
    let mut line = String::new();
    let mut line_no = 0u64;
    // File line of every job, for errors found after reading.
    let mut line_of_row: Vec<u64> = Vec::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line_no.is_multiple_of(4096) {
            crate::interrupt::check("read_swf")?;
        }
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(comment) = t.strip_prefix(';') {
            if let Some((k, v)) = comment.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if k.eq_ignore_ascii_case("UnixStartTime") {
                    start = Some(v.parse().map_err(|_| {
                        Error::at_line(
                            path,
                            line_no,
                            Some("UnixStartTime"),
                            format!("expected whole seconds since 1970-01-01 UTC, found '{v}'"),
                        )
                    })?);
                }
                header.push((k.to_string(), v.to_string()));
            }
            continue;
        }
        let mut count = 0;
        for (i, field) in t.split_ascii_whitespace().enumerate() {
            if i >= 18 {
                count = i + 1;
                continue;
            }
            count = i + 1;
            let (name, fractional) = FIELDS[i];
            let bad = || {
                Error::at_line(
                    path,
                    line_no,
                    Some(name),
                    format!("expected a number (-1 for unknown), found '{field}'"),
                )
            };
            if fractional {
                let v: f64 = field.parse().map_err(|_| bad())?;
                floats[i].append_option((v != -1.0).then_some(v));
            } else {
                let v: i64 = match field.parse() {
                    Ok(v) => v,
                    Err(_) => {
                        let f: f64 = field.parse().map_err(|_| bad())?;
                        if !f.is_finite() || f.abs() >= 9.2e18 {
                            return Err(Error::at_line(
                                path,
                                line_no,
                                Some(name),
                                format!("'{field}' is out of range for a whole number"),
                            ));
                        }
                        f.round() as i64
                    }
                };
                ints[i].append_option((v != -1).then_some(v));
            }
        }
        if count != 18 {
            return Err(Error::at_line(
                path,
                line_no,
                None,
                format!("expected the 18 fields of the Standard Workload Format, found {count}"),
            ));
        }
        line_of_row.push(line_no);
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    let mut int_arrays = Vec::new();
    for (i, (name, fractional)) in FIELDS.iter().enumerate() {
        if *fractional {
            fields.push(Field::new(*name, DataType::Float64, true));
            columns.push(Arc::new(floats[i].finish()));
            int_arrays.push(None);
        } else {
            let a = ints[i].finish();
            fields.push(Field::new(*name, DataType::Int64, true));
            columns.push(Arc::new(a.clone()));
            int_arrays.push(Some(a));
        }
    }
    // Absolute times when the log says when its second 0 was.
    let get = |i: usize| int_arrays[i].as_ref();
    let (submit, wait, run) = (get(1), get(2), get(3));
    let n = submit.map_or(0, |a| a.len());
    // Seconds since UnixStartTime to ns since the epoch; a time that does not fit is an error
    // naming the job's line (no silent wrap-around).
    let at = |name: &str, f: &dyn Fn(usize) -> Option<Option<i64>>| -> Result<ArrayRef> {
        let mut v: Vec<Option<i64>> = Vec::with_capacity(n);
        for (i, line) in line_of_row.iter().enumerate().take(n) {
            let Some(s) = start else {
                v.push(None);
                continue;
            };
            let ns = match f(i) {
                None => None,
                Some(Some(x)) => Some(s.checked_add(x).and_then(|t| t.checked_mul(1_000_000_000))),
                Some(None) => Some(None),
            };
            match ns {
                None => v.push(None),
                Some(Some(t)) => v.push(Some(t)),
                Some(None) => {
                    return Err(Error::at_line(
                        path,
                        *line,
                        Some(name),
                        format!("the time is out of range (UnixStartTime {s} plus the job's seconds)"),
                    ));
                }
            }
        }
        Ok(Arc::new(TimestampNanosecondArray::from(v).with_timezone("UTC")))
    };
    let value = |a: Option<&arrow::array::Int64Array>, i: usize| {
        a.and_then(|a| (!arrow::array::Array::is_null(a, i)).then(|| a.value(i)))
    };
    // Seconds from the log's start: None when unknown, Some(None) when they overflow.
    let submit_at = |i: usize| value(submit, i).map(Some);
    let start_at = |i: usize| Some(value(submit, i)?.checked_add(value(wait, i)?));
    let end_at = |i: usize| match start_at(i)? {
        Some(t) => Some(t.checked_add(value(run, i)?)),
        None => Some(None),
    };
    for (name, f) in [
        ("submit_ts", &submit_at as &dyn Fn(usize) -> Option<Option<i64>>),
        ("start_ts", &start_at),
        ("end_ts", &end_at),
    ] {
        fields.push(Field::new(name, DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), true));
        columns.push(at(name, f)?);
    }
    debug_assert_eq!(Schema::new(fields).fields(), schema().fields());
    let jobs = RecordBatch::try_new(schema(), columns)?;
    Ok(Log { jobs, header })
}

/// The header comments as a (key, value) table.
pub fn header_batch(log: &Log) -> Result<RecordBatch> {
    let keys = StringArray::from_iter_values(log.header.iter().map(|h| h.0.as_str()));
    let values = StringArray::from_iter_values(log.header.iter().map(|h| h.1.as_str()));
    Ok(RecordBatch::try_new(header_schema(), vec![Arc::new(keys), Arc::new(values)])?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_that_do_not_fit_are_errors_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.swf");
        let job = |submit: &str| format!("1 {submit} 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n");
        std::fs::write(&p, format!("; UnixStartTime: 1000\n{}{}", job("5"), job("9223372036854775807"))).unwrap();
        let e = super::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("big.swf") && e.contains(":3") && e.contains("submit_ts") && e.contains("out of range"),
            "{e}"
        );
        std::fs::write(&p, job("1e30")).unwrap();
        let e = super::read(&p).unwrap_err().to_string();
        assert!(e.contains(":1") && e.contains("submit_time") && e.contains("out of range"), "{e}");
    }

    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, Int64Type, TimestampNanosecondType};
    use std::io::Write;

    const LOG: &str = "; Version: 2\n; UnixStartTime: 1000\n\
        1 10 5 100 4 -1 2.5 4 200 -1 1 7 -1 -1 0 -1 -1 -1\n\
        2 20 -1 50 1 -1 -1 1 60 -1 0 7 -1 -1 0 -1 1 3\n";

    #[test]
    fn reads_fields_nulls_header_and_absolute_times() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.swf");
        std::fs::write(&p, LOG).unwrap();
        let log = read(&p).unwrap();
        let j = &log.jobs;
        assert_eq!(j.num_rows(), 2);
        assert_eq!(j.num_columns(), 21);
        assert_eq!(j.column_by_name("run_time").unwrap().as_primitive::<Int64Type>().value(0), 100);
        assert!(j.column_by_name("wait_time").unwrap().is_null(1));
        assert_eq!(j.column_by_name("used_memory").unwrap().as_primitive::<Float64Type>().value(0), 2.5);
        let end = j.column_by_name("end_ts").unwrap().as_primitive::<TimestampNanosecondType>();
        assert_eq!(end.value(0), (1000 + 10 + 5 + 100) * 1_000_000_000);
        assert!(end.is_null(1), "unknown wait time: unknown start and end");
        assert_eq!(log.header[1], ("UnixStartTime".to_string(), "1000".to_string()));

        let gz = dir.path().join("log.swf.gz");
        let mut e = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
        e.write_all(LOG.as_bytes()).unwrap();
        e.finish().unwrap();
        assert_eq!(read(&gz).unwrap().jobs, log.jobs);
    }

    #[test]
    fn a_malformed_start_time_is_an_error_naming_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.swf");
        std::fs::write(
            &p,
            format!("; Version: 2\n; UnixStartTime: 1772445600x\n{}", "1 0 5 60 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1\n"),
        )
        .unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.swf:2: column 'UnixStartTime'") && e.contains("'1772445600x'"), "{e}");
    }

    #[test]
    fn malformed_lines_name_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.swf");
        std::fs::write(&p, "; x: y\n1 2 3\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.swf:2") && e.contains("found 3"), "{e}");
        std::fs::write(&p, "1 2 x 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.swf:1") && e.contains("wait_time") && e.contains("'x'"), "{e}");
    }
}
