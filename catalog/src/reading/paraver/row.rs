//! The `.row` file: blocks of `LEVEL NAME SIZE N` followed by N names (CPU, NODE, THREAD, and
//! others a tracer writes), giving display names to the trace's objects.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

/// Names per level (upper-case level name -> names in order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub levels: HashMap<String, Vec<String>>,
}

impl Row {
    pub fn names(&self, level: &str) -> &[String] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }
}

pub fn parse(path: &Path, text: &str) -> Result<Row> {
    let mut row = Row::default();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (level, size) = match words.as_slice() {
            ["LEVEL", level, "SIZE", n] => (level.to_ascii_uppercase(), n.parse::<usize>().ok()),
            _ => (String::new(), None),
        };
        let size = size.ok_or_else(|| {
            Error::at_line(path, i as u64 + 1, None, format!("expected 'LEVEL NAME SIZE N', found '{line}'"))
        })?;
        let mut names = Vec::with_capacity(size.min(1 << 20));
        for _ in 0..size {
            match lines.next() {
                Some((_, name)) => names.push(name.trim().to_string()),
                None => {
                    return Err(Error::at_line(
                        path,
                        i as u64 + 1,
                        None,
                        format!("level {level} announces {size} names but the file ends after {}", names.len()),
                    ));
                }
            }
        }
        row.levels.insert(level, names);
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_names() {
        let r = parse(Path::new("a.row"), "LEVEL CPU SIZE 2\n1.n1\n2.n1\n\nLEVEL NODE SIZE 1\nn1\n\nLEVEL THREAD SIZE 2\nTHREAD 1.1.1\nTHREAD 1.2.1\n").unwrap();
        assert_eq!(r.names("NODE"), ["n1"]);
        assert_eq!(r.names("THREAD")[1], "THREAD 1.2.1");
        let e = parse(Path::new("b.row"), "LEVEL NODE SIZE 3\nn1\n").unwrap_err().to_string();
        assert!(e.contains("b.row:1") && e.contains("announces 3 names"), "{e}");
    }
}
