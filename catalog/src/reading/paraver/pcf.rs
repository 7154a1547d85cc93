//! The `.pcf` file: names of states (`STATES` block of `VALUE NAME` lines) and of event types
//! (`EVENT_TYPE` blocks of `GRADIENT TYPE DESCRIPTION` lines, each optionally followed by a
//! `VALUES` block of `VALUE NAME` lines that names the values of every type of the block).
//! The other sections Paraver writes (`DEFAULT_OPTIONS`, `DEFAULT_SEMANTIC`, `STATES_COLOR`,
//! `GRADIENT_COLOR`, `GRADIENT_NAMES`) are skipped. A section of any other name (a misspelt
//! `VALWES`) and a line outside every section are skipped too, but listed in `problems` with
//! their line, which the reader reports as warnings: a misspelt keyword must not silently drop
//! the names of a block.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventType {
    pub description: String,
    /// Names of the values, when the .pcf lists them.
    pub values: Option<HashMap<i64, String>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pcf {
    pub states: HashMap<i32, String>,
    pub types: HashMap<i64, EventType>,
    /// Lines skipped because they belong to no known section, as `path:line: why`.
    pub problems: Vec<String>,
}

/// The settings of DEFAULT_OPTIONS that Paraver and Extrae write; DEFAULT_SEMANTIC's end in
/// `_FUNC` (THREAD_FUNC, TASK_FUNC, ...).
const SETTINGS: [&str; 7] = ["LEVEL", "UNITS", "LOOK_BACK", "SPEED", "FLAG_ICONS", "NUM_OF_STATE_COLORS", "YMAX_SCALE"];

/// The sections of a .pcf that Paraver and Extrae write.
const SECTIONS: [&str; 8] = [
    "DEFAULT_OPTIONS",
    "DEFAULT_SEMANTIC",
    "STATES",
    "STATES_COLOR",
    "EVENT_TYPE",
    "VALUES",
    "GRADIENT_COLOR",
    "GRADIENT_NAMES",
];

#[derive(PartialEq)]
enum Block {
    None,
    States,
    Types,
    Values,
    /// A known section commdb does not read.
    Other,
    /// The settings of DEFAULT_OPTIONS or DEFAULT_SEMANTIC (`LEVEL THREAD`, `UNITS NANOSEC`).
    Settings,
    /// A section of an unknown name: its lines are skipped (reported once, with the keyword).
    Unknown,
}

pub fn parse(path: &Path, text: &str) -> Result<Pcf> {
    let mut pcf = Pcf::default();
    let mut block = Block::None;
    let mut block_types: Vec<i64> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.trim();
        if line.is_empty() {
            // Blank lines separate an EVENT_TYPE's lines from its VALUES and the settings of
            // DEFAULT_OPTIONS from each other; they end every other section.
            if !matches!(block, Block::Types | Block::Settings) {
                block = Block::None;
            }
            continue;
        }
        let keyword = line.split_whitespace().next().unwrap_or("");
        let is_keyword = keyword.chars().all(|c| c.is_ascii_uppercase() || c == '_') && keyword.len() > 2;
        if is_keyword && block == Block::Settings && (SETTINGS.contains(&keyword) || keyword.ends_with("_FUNC")) {
            continue;
        }
        if is_keyword {
            block = match keyword {
                "STATES" => Block::States,
                "EVENT_TYPE" => {
                    block_types.clear();
                    Block::Types
                }
                "VALUES" => Block::Values,
                "DEFAULT_OPTIONS" | "DEFAULT_SEMANTIC" => Block::Settings,
                _ if SECTIONS.contains(&keyword) => Block::Other,
                _ => {
                    pcf.problems.push(format!(
                        "{}:{line_no}: unknown section '{keyword}' (expected one of {}); its lines are skipped",
                        path.display(),
                        SECTIONS.join(", ")
                    ));
                    Block::Unknown
                }
            };
            if block == Block::Values {
                for t in &block_types {
                    pcf.types.entry(*t).or_default().values.get_or_insert_with(HashMap::new);
                }
            }
            continue;
        }
        let bad = |what: &str| Error::at_line(path, line_no, None, format!("expected {what}, found '{line}'"));
        match block {
            Block::States => {
                let (value, name) = split_value(line).ok_or_else(|| bad("a state line 'VALUE NAME'"))?;
                pcf.states.insert(i32::try_from(value).map_err(|_| bad("a state number"))?, name.to_string());
            }
            Block::Types => {
                let mut words = line.split_whitespace();
                let (_gradient, ty) = (words.next(), words.next());
                let rest = line.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
                let ty: i64 = ty
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| bad("an event type line 'GRADIENT TYPE DESCRIPTION'"))?;
                pcf.types.insert(ty, EventType { description: rest, values: None });
                block_types.push(ty);
            }
            Block::Values => {
                let (value, name) = split_value(line).ok_or_else(|| bad("a value line 'VALUE NAME'"))?;
                for t in &block_types {
                    if let Some(values) = pcf.types.get_mut(t).and_then(|t| t.values.as_mut()) {
                        values.insert(value, name.to_string());
                    }
                }
            }
            Block::None => pcf.problems.push(format!(
                "{}:{line_no}: '{line}' is outside every section (a section starts with its keyword, such as EVENT_TYPE or VALUES); skipped",
                path.display()
            )),
            Block::Other | Block::Settings | Block::Unknown => {}
        }
    }
    Ok(pcf)
}

fn split_value(line: &str) -> Option<(i64, &str)> {
    let line = line.trim();
    let end = line.find(char::is_whitespace).unwrap_or(line.len());
    let value = line[..end].parse().ok()?;
    Some((value, line[end..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_types_and_values() {
        let text = "DEFAULT_OPTIONS\n\nLEVEL               THREAD\nUNITS               NANOSEC\n\nSTATES\n0    Idle\n1    Running\n3    Waiting a message\n\nSTATES_COLOR\n0    {117,195,255}\n\nEVENT_TYPE\n9    50000001    MPI Point-to-point\nVALUES\n0   Outside MPI\n3   MPI_Isend\n\nEVENT_TYPE\n7  42000050 PAPI_TOT_INS [Instr completed]\n7  42000059 PAPI_TOT_CYC [Total cycles]\n\n";
        let p = parse(Path::new("a.pcf"), text).unwrap();
        assert_eq!(p.states[&3], "Waiting a message");
        assert_eq!(p.types[&50000001].values.as_ref().unwrap()[&3], "MPI_Isend");
        assert_eq!(p.types[&42000059].description, "PAPI_TOT_CYC [Total cycles]");
        assert!(p.types[&42000050].values.is_none());
        let e = parse(Path::new("b.pcf"), "STATES\nx Idle\n").unwrap_err().to_string();
        assert!(e.contains("b.pcf:2") && e.contains("state line"), "{e}");
        assert!(p.problems.is_empty(), "{:?}", p.problems);
    }

    #[test]
    fn unknown_sections_and_stray_lines_are_reported_with_their_line() {
        let text = "DEFAULT_OPTIONS\n\nLEVEL THREAD\n\nDEFAULT_SEMANTIC\n\nTHREAD_FUNC State As Is\n\nEVENT_TYPE\n0 50000003 MPI Other\nVALWES\n0 Outside MPI\n31 MPI_Init\n\n7 stray\n";
        let p = parse(Path::new("c.pcf"), text).unwrap();
        assert_eq!(p.problems.len(), 2, "{:?}", p.problems);
        assert!(p.problems[0].starts_with("c.pcf:11: unknown section 'VALWES'"), "{}", p.problems[0]);
        assert!(p.problems[1].starts_with("c.pcf:15: '7 stray' is outside every section"), "{}", p.problems[1]);
        assert!(p.types[&50000003].values.is_none(), "the misspelt block names nothing");
    }
}
