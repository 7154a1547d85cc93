//! Rank placement from a separate CSV with columns rank,node (header optional). A rank listed
//! twice with different nodes, or a rank the trace does not have, is an error with its line.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::trace::RankInfo;

/// Read a rank,node file into a map.
pub fn read(path: &Path) -> Result<HashMap<i32, String>> {
    crate::error::Error::regular_file(path)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| csv_error(path, e))?;
    let mut out: HashMap<i32, String> = HashMap::new();
    for (i, row) in reader.records().enumerate() {
        let row = row.map_err(|e| csv_error(path, e))?;
        let line = row.position().map_or(i as u64 + 1, |p| p.line());
        if row.len() != 2 {
            return Err(Error::at_line(
                path,
                line,
                None,
                format!("expected 2 fields (rank,node), found {}", row.len()),
            ));
        }
        let rank_text = &row[0];
        let Ok(rank) = rank_text.parse::<i32>() else {
            if i == 0 && rank_text.eq_ignore_ascii_case("rank") {
                continue;
            }
            return Err(Error::at_line(
                path,
                line,
                Some("rank"),
                format!("expected a rank number, found '{rank_text}'"),
            ));
        };
        let node = row[1].to_string();
        if node.is_empty() {
            return Err(Error::at_line(path, line, Some("node"), "expected a node name, found an empty field"));
        }
        if let Some(prev) = out.insert(rank, node.clone())
            && prev != node
        {
            return Err(Error::at_line(
                path,
                line,
                Some("node"),
                format!("rank {rank} placed on '{node}' but earlier on '{prev}'"),
            ));
        }
    }
    Ok(out)
}

/// Set the node of every rank from a rank,node file. Ranks missing from the file keep theirs.
pub fn apply(path: &Path, ranks: &mut [RankInfo]) -> Result<()> {
    let map = read(path)?;
    let mut unknown: Vec<i32> = map.keys().copied().filter(|r| !ranks.iter().any(|x| x.rank == *r)).collect();
    unknown.sort_unstable();
    if let Some(rank) = unknown.first() {
        return Err(Error::in_file(path, format!("rank {rank} is not a rank of the trace")));
    }
    for r in ranks.iter_mut() {
        if let Some(node) = map.get(&r.rank) {
            r.node = Some(node.clone());
        }
    }
    Ok(())
}

pub(crate) fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(csv::Position::line);
    match (e.kind(), line) {
        (csv::ErrorKind::Io(_), _) => match e.into_kind() {
            csv::ErrorKind::Io(io) => Error::io(path, io),
            _ => Error::in_file(path, "read error"),
        },
        (csv::ErrorKind::UnequalLengths { .. }, Some(line)) if opens_a_quote(path, line) => Error::at_line(
            path,
            line,
            None,
            "a quoted field on this line is never closed: its '\"' has no closing '\"', so the reader took the rest of the file into that field",
        ),
        (_, Some(line)) => Error::at_line(path, line, None, e.to_string()),
        (_, None) => Error::in_file(path, e.to_string()),
    }
}

/// Whether line `line` (1-based) of the file leaves a quote open: an odd number of '"' (a
/// quote written inside a quoted field is doubled, so it keeps the count even).
fn opens_a_quote(path: &Path, line: u64) -> bool {
    use std::io::BufRead;
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz")) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut lines = std::io::BufReader::new(file).split(b'\n');
    match lines.nth(line.saturating_sub(1) as usize) {
        Some(Ok(text)) => text.iter().filter(|&&b| b == b'"').count() % 2 == 1,
        _ => false,
    }
}
