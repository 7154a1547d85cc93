//! Clock synchronisation samples from a CSV file, for traces whose format carries none (the
//! CSV shapes) or to replace a trace's own. A header line names the columns, in any order:
//!
//! - raw ping-pong samples, as Intel Trace Collector takes them: `rank, session, local_send,
//!   master_ts, local_recv` (the master's time stamp between the local send and receive);
//! - condensed offset points: `rank, session, local_ts, master_ts` (optional `std_dev_ns`).
//!
//! Times are in the trace's time unit (`--time-unit`). Every bad row is an error naming the
//! file, line, column and value; other columns are ignored.

use std::path::Path;

use crate::error::{Error, Result};
use crate::reading::csv::{TimeUnit, next_record, parse_time};
use crate::trace::ClockSample;

/// Which columns carry the local time.
#[derive(Debug, Clone, Copy)]
enum Shape {
    PingPong { send: usize, recv: usize },
    Points { local: usize },
}

/// Read the samples of a sync CSV.
pub fn read(path: &Path, unit: TimeUnit) -> Result<Vec<ClockSample>> {
    crate::error::Error::regular_file(path)?;
    let mut reader = ::csv::ReaderBuilder::new()
        .trim(::csv::Trim::All)
        .from_path(path)
        .map_err(|e| crate::reading::csv::nodes::csv_error(path, e))?;
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| crate::reading::csv::nodes::csv_error(path, e))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_ascii_lowercase())
        .collect();
    crate::reading::csv::check_unique_header(path, header.iter().map(String::as_str))?;
    let find = |name: &str| header.iter().position(|h| h == name);
    let need = |name: &str| {
        find(name).ok_or_else(|| {
            Error::at_line(
                path,
                1,
                None,
                format!(
                    "sync CSV header has no '{name}' column: expected rank,session,local_send,master_ts,local_recv (ping-pong samples) or rank,session,local_ts,master_ts (offset points)"
                ),
            )
        })
    };
    let rank = need("rank")?;
    let session = need("session")?;
    let master = need("master_ts")?;
    let shape = match (find("local_send"), find("local_recv")) {
        (Some(s), Some(r)) => Shape::PingPong { send: s, recv: r },
        _ => Shape::Points { local: need("local_ts")? },
    };
    let std_dev = find("std_dev_ns");

    let mut out = Vec::new();
    let mut record = ::csv::StringRecord::new();
    while let Some(line) = next_record(&mut reader, &mut record, path)? {
        let field = |i: usize| record.get(i).unwrap_or("");
        let int = |i: usize| -> Result<i32> {
            field(i).parse().map_err(|_| {
                Error::at_line(path, line, Some(&header[i]), format!("expected an integer, found '{}'", field(i)))
            })
        };
        let time = |i: usize| -> Result<i64> {
            parse_time(field(i), unit).ok_or_else(|| {
                Error::at_line(path, line, Some(&header[i]), format!("expected a time, found '{}'", field(i)))
            })
        };
        let (local_ts, round_trip) = match shape {
            Shape::PingPong { send, recv } => {
                let (send, recv) = (time(send)?, time(recv)?);
                if recv < send {
                    return Err(Error::at_line(
                        path,
                        line,
                        Some("local_recv"),
                        format!("local_recv {recv} precedes local_send {send}"),
                    ));
                }
                (send + (recv - send) / 2, Some(recv - send))
            }
            Shape::Points { local } => (time(local)?, None),
        };
        let std_dev_ns = match std_dev {
            Some(i) if !field(i).is_empty() => Some(parse_time(field(i), TimeUnit::Nanoseconds).ok_or_else(|| {
                Error::at_line(path, line, Some("std_dev_ns"), format!("expected nanoseconds, found '{}'", field(i)))
            })?),
            _ => None,
        };
        out.push(ClockSample {
            rank: int(rank)?,
            session: int(session)?,
            local_ts,
            master_ts: time(master)?,
            round_trip,
            std_dev_ns,
            exact: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_points_and_names_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sync.csv");
        std::fs::write(&p, "rank,session,local_send,master_ts,local_recv\n1,0,100,160,200\n").unwrap();
        let s = read(&p, TimeUnit::Nanoseconds).unwrap();
        assert_eq!((s[0].local_ts, s[0].master_ts, s[0].round_trip), (150, 160, Some(100)));
        std::fs::write(&p, "Rank,Session,local_ts,master_ts\n1,0,1.5,2\n").unwrap();
        let s = read(&p, TimeUnit::Microseconds).unwrap();
        assert_eq!((s[0].local_ts, s[0].master_ts, s[0].round_trip), (1500, 2000, None));
        std::fs::write(&p, "rank,session,local_ts,master_ts\n1,0,x,2\n").unwrap();
        let e = read(&p, TimeUnit::Nanoseconds).unwrap_err().to_string();
        assert!(e.contains("sync.csv") && e.contains(":2:") && e.contains("local_ts") && e.contains("'x'"), "{e}");
        std::fs::write(&p, "rank,session,when\n").unwrap();
        let e = read(&p, TimeUnit::Nanoseconds).unwrap_err().to_string();
        assert!(e.contains("no 'master_ts' column"), "{e}");
    }
}
