//! Names and places of trace files: the one file of a kind in a directory, and the schema name
//! a path gives a trace. Shared by the readers and the dispatcher.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Prefix of a generator spec used as a path, e.g. `generate:ranks=16,pattern=ring`.
pub const GENERATE_PREFIX: &str = "generate:";

/// The one file of `dir` that `matches` (files only): `what` names such a file and such files
/// for the errors when there is none or several.
pub fn only_file_in(dir: &Path, matches: impl Fn(&Path) -> bool, what: (&str, &str)) -> Result<PathBuf> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut found: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file() && matches(p)).collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Error::in_file(dir, format!("no {} in this directory", what.0))),
        _ => Err(Error::in_file(
            dir,
            format!(
                "several {} in this directory ({}); name one",
                what.1,
                found.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// A schema name derived from a path: the file stem, lower case, non-alphanumerics as '_'.
pub fn default_name(path: &str) -> String {
    if path.starts_with(GENERATE_PREFIX) {
        return "generated".to_string();
    }
    if Path::new(path).is_file() && path.ends_with("traces.otf2") {
        return default_name(&otf2_name_source(Path::new(path)));
    }
    let p = Path::new(path.trim_end_matches(['/', '\\']));
    let stem = p.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let mut name: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "t_");
    }
    name
}

/// The path whose name an OTF2 archive takes: Score-P names every anchor `traces.otf2`, so such
/// an archive is named after its directory.
pub fn otf2_name_source(p: &Path) -> String {
    let is_generic_anchor = p.file_stem().is_some_and(|s| s == "traces") && p.is_file();
    match (is_generic_anchor, p.canonicalize().ok().and_then(|c| c.parent().map(Path::to_path_buf))) {
        (true, Some(dir)) => dir.to_string_lossy().to_string(),
        _ => p.to_string_lossy().to_string(),
    }
}
