//! The directories a process of a cluster may read and write files under. A cluster's
//! scheduler and executors run the SQL any client sends, and SQL names files: a store by its
//! path, `read_csv('...')`, `read_sacct('...')`, `COPY ... TO '...'`. A process started with
//! data directories (`--data-dir`, repeatable) refuses every other path with an error naming
//! it; its work directory is always its own. Paths are compared after resolving symbolic
//! links and `..`, so neither leads out. A process started without them (on loopback, the
//! user's own machine) reads and writes what its user may, as the shell does.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// The directories, once set for the process, and how the process is named in errors.
static ROOTS: OnceLock<(Vec<PathBuf>, String)> = OnceLock::new();

/// Keep this process's files under `roots` (each made absolute, links resolved) from now on;
/// `process` names it in refusals ("executor 10.0.0.5:50051"). A directory that does not exist
/// is an error naming it. Set once: a second call is an error.
pub fn restrict(roots: &[PathBuf], process: &str) -> Result<(), String> {
    let mut resolved = Vec::with_capacity(roots.len());
    for root in roots {
        let dir =
            std::fs::canonicalize(root).map_err(|e| format!("{process}: data directory {}: {e}", root.display()))?;
        if !dir.is_dir() {
            return Err(format!("{process}: data directory {} is not a directory", root.display()));
        }
        resolved.push(dir);
    }
    ROOTS.set((resolved, process.to_string())).map_err(|_| format!("{process}: data directories set twice"))
}

/// Whether this process keeps to data directories.
pub fn restricted() -> bool {
    ROOTS.get().is_some()
}

/// `path` (to read, or to write: it need not exist yet) if it lies under a data directory of
/// this process, or under none is set; otherwise a refusal naming it and the directories.
pub fn check(path: &Path) -> Result<(), String> {
    let Some((roots, process)) = ROOTS.get() else { return Ok(()) };
    let refuse = |why: &str| {
        let dirs: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        Err(format!(
            "{process} reads and writes only under its data directories ({}): '{}' {why}",
            dirs.join(", "),
            path.display()
        ))
    };
    let Some(resolved) = resolved(path) else { return refuse("cannot be resolved to a place under them") };
    if roots.iter().any(|r| resolved.starts_with(r)) {
        return Ok(());
    }
    match std::path::absolute(path) {
        Ok(given) if given != resolved => refuse(&format!("(which is {}) is outside them", resolved.display())),
        _ => refuse("is outside them"),
    }
}

/// `path` absolute with its links and `..` resolved; for a path that does not exist yet, its
/// nearest existing ancestor resolved and the rest appended (None if that rest has a `..`).
fn resolved(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    if let Ok(found) = std::fs::canonicalize(&absolute) {
        return Some(found);
    }
    let mut rest = Vec::new();
    let mut at = absolute.as_path();
    loop {
        let name = at.file_name()?;
        rest.push(name.to_os_string());
        at = at.parent()?;
        if let Ok(found) = std::fs::canonicalize(at) {
            let tail: PathBuf = rest.iter().rev().collect();
            if tail.components().any(|c| matches!(c, Component::ParentDir)) {
                return None;
            }
            return Some(found.join(tail));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resolved;

    #[test]
    fn links_and_dots_resolve_before_the_comparison() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let data = root.join("data");
        std::fs::create_dir(&data).unwrap();
        std::os::unix::fs::symlink("/etc", data.join("out")).unwrap();
        let etc = std::fs::canonicalize("/etc").unwrap();
        assert_eq!(resolved(&data.join("out/no such file")).unwrap(), etc.join("no such file"));
        assert_eq!(resolved(&data.join("../data/new.csv")).unwrap(), data.join("new.csv"));
        assert_eq!(resolved(&data.join("new/dir/x.parquet")).unwrap(), data.join("new/dir/x.parquet"));
        assert_eq!(resolved(&data.join("new/../../../etc/passwd")), None);
    }
}
