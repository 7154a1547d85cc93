//! Writing a file the user named without losing anything at that path: results (`-o`, `\o`),
//! reports, exports, charts and stores all go through here.
//!
//! - A regular file (or a path where nothing is yet) is written beside its target under a
//!   temporary name (`.NAME.commdb-PID.tmp`) and renamed over it only when the write is
//!   committed, so a failed or interrupted write leaves the old file as it was.
//! - A character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe) is written in
//!   place: a rename would replace the device by a regular file.
//! - A symbolic link is followed to its target, which is then written as above; the link stays.
//! - Directories, block devices and sockets are refused, naming the path.
//!
//! Leftovers of processes that were killed mid-write (temporary files, partial and previous
//! stores, a generator's scratch) carry the writer's process id in their names; the next write
//! into the same directory removes those of processes that no longer run (`clean_stale`). A
//! process id is known to be dead when `/proc/PID` does not exist; without `/proc` nothing is
//! removed.
//!
//! What must never be written over is listed here too: the files a trace is read from
//! (`files_read`), and whether a path falls on one of them (`overwrites`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How a target is written.
#[derive(Debug)]
enum Mode {
    /// Into a temporary file beside `target`, renamed over it on commit.
    Replace { target: PathBuf, temp: PathBuf },
    /// Into the device or FIFO itself.
    InPlace,
}

/// A file being written to a user's path; `commit` puts it in place. Dropped uncommitted, it
/// leaves the target as it was (a device or FIFO has received what was written so far).
#[derive(Debug)]
pub struct Output {
    shown: PathBuf,
    mode: Mode,
    file: std::io::BufWriter<File>,
    committed: bool,
}

/// What is at a path the user asked to write.
fn resolve(path: &Path) -> Result<(PathBuf, Option<std::fs::Metadata>)> {
    let link = std::fs::symlink_metadata(path);
    let target = match &link {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            Error::in_file(
                path,
                format!("is a symbolic link whose target cannot be reached ({e}); name the file itself"),
            )
        })?,
        _ => path.to_path_buf(),
    };
    match std::fs::metadata(&target) {
        Ok(m) => Ok((target, Some(m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((target, None)),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Whether the metadata is of a character device or a FIFO, written in place.
#[cfg(unix)]
fn written_in_place(m: &std::fs::Metadata) -> Result<bool, &'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        Ok(false)
    } else if t.is_char_device() || t.is_fifo() {
        Ok(true)
    } else if t.is_dir() {
        Err("is a directory: expected a file to write")
    } else if t.is_block_device() {
        Err("is a block device: commdb writes files, character devices and pipes, never disks")
    } else {
        Err("is a socket or another special file: expected a file, a character device or a pipe")
    }
}

#[cfg(not(unix))]
fn written_in_place(m: &std::fs::Metadata) -> Result<bool, &'static str> {
    if m.is_dir() { Err("is a directory: expected a file to write") } else { Ok(!m.is_file()) }
}

impl Output {
    /// Start writing `path` (see the module's rules).
    pub fn create(path: &Path) -> Result<Output> {
        let (target, meta) = resolve(path)?;
        let in_place = match &meta {
            Some(m) => written_in_place(m).map_err(|why| Error::in_file(path, why))?,
            None => false,
        };
        if in_place {
            let file = std::fs::OpenOptions::new().write(true).open(&target).map_err(|e| Error::io(path, e))?;
            return Ok(Output {
                shown: path.to_path_buf(),
                mode: Mode::InPlace,
                file: std::io::BufWriter::with_capacity(1 << 16, file),
                committed: false,
            });
        }
        let name = target
            .file_name()
            .ok_or_else(|| Error::in_file(path, "is not a file name"))?
            .to_string_lossy()
            .into_owned();
        let dir = parent_of(&target);
        clean_stale(&dir);
        let temp = dir.join(temp_name(&name));
        let file = File::create(&temp).map_err(|e| Error::io(path, e))?;
        Ok(Output {
            shown: path.to_path_buf(),
            mode: Mode::Replace { target, temp },
            file: std::io::BufWriter::with_capacity(1 << 16, file),
            committed: false,
        })
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// Finish: flush, and put the file in the target's place.
    pub fn commit(mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.shown, e))?;
        if let Mode::Replace { target, temp } = &self.mode {
            std::fs::rename(temp, target).map_err(|e| Error::io(&self.shown, e))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.committed
            && let Mode::Replace { temp, .. } = &self.mode
        {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// Write `bytes` to `path` whole (by the module's rules).
pub fn write_all(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut out = Output::create(path)?;
    out.write_all(bytes).map_err(|e| Error::io(path, e))?;
    out.commit()
}

/// The directory a path is in (`.` for a bare name).
pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The name of this process's temporary file for a target named `name`.
pub fn temp_name(name: &str) -> String {
    format!(".{name}.commdb-{}.tmp", std::process::id())
}

/// The kinds of leftovers, as they follow `.commdb-` in a name: `.NAME.commdb-PID.tmp`,
/// `.NAME.commdb-partial-PID` (and its `.scratch-*` directories), `.NAME.commdb-previous-PID`,
/// `.NAME.commdb-generate-PID` (and its `.store`).
const KINDS: [&str; 4] = ["", "partial-", "previous-", "generate-"];

/// The process id in the name of a commdb leftover, if `name` is one.
fn leftover_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let at = name.rfind(".commdb-")?;
    let rest = &name[at + ".commdb-".len()..];
    KINDS.iter().rev().find_map(|kind| {
        let tail = rest.strip_prefix(kind)?;
        let digits = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
        let after = &tail[digits..];
        let suffix_ok = if kind.is_empty() { after == ".tmp" } else { after.is_empty() || after.starts_with('.') };
        (digits > 0 && suffix_ok).then(|| tail[..digits].parse().ok()).flatten()
    })
}

/// Whether process `pid` is known to have ended (false when it cannot be told): it has no
/// `/proc/PID`, or it is a zombie (state Z: it ended and waits for its parent to reap it, as
/// a convert killed by `timeout -s KILL` does until the shell collects it) or dead (X).
fn has_ended(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return false;
    }
    let dir = Path::new("/proc").join(pid.to_string());
    if !dir.exists() {
        return true;
    }
    std::fs::read_to_string(dir.join("stat")).is_ok_and(|stat| matches!(process_state(&stat), Some('Z' | 'X')))
}

/// The state letter of a `/proc/PID/stat` line: `PID (COMMAND) STATE ...`, where the command
/// may hold spaces and parentheses (the last ')' ends it).
fn process_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Remove the leftovers in `dir` of commdb processes that no longer run (files and
/// directories whose names carry their process id, see `KINDS`). Returns how many it removed;
/// what cannot be removed is left for the next time.
pub fn clean_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let own = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = leftover_pid(&name.to_string_lossy()) else { continue };
        if pid == own || !has_ended(pid) {
            continue;
        }
        let path = entry.path();
        let gone = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// `path` made absolute and free of links, also when it does not exist yet (its directory
/// is resolved, its name kept).
pub fn canonical(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let dir = std::fs::canonicalize(parent_of(path)).ok()?;
    Some(dir.join(path.file_name()?))
}

/// Whether writing `target` would write over `input` (the same file, or a file inside the
/// directory `input`). Both are resolved first.
pub fn overwrites(target: &Path, input: &Path) -> bool {
    match (canonical(target), canonical(input)) {
        (Some(t), Some(i)) => t == i || t.starts_with(&i),
        _ => false,
    }
}

/// Ok unless one of `targets` falls on a file or directory `trace` is read from (an export
/// never writes over its own input): the error names both.
pub fn refuse_trace_files(trace: &crate::trace::Trace, targets: &[PathBuf]) -> Result<()> {
    let read = files_read(trace);
    for target in targets {
        if let Some(input) = read.iter().find(|i| overwrites(target, i)) {
            return Err(Error::argument(format!(
                "{}: the trace is read from {}; write the export elsewhere",
                target.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// The files and directories `trace` is read from, which nothing writes over
/// (`session::Session::refuse_overwrite`, the exports).
pub fn files_read(trace: &crate::trace::Trace) -> Vec<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    let mut out: Vec<PathBuf> = Vec::new();
    let path = Path::new(&trace.meta.path);
    if !trace.meta.path.starts_with(crate::reading::paths::GENERATE_PREFIX) && path.exists() {
        out.push(path.to_path_buf());
        if path.is_file() {
            // The files read beside the one named: an OTF2 archive's definitions and its
            // directory of event files, a Paraver trace's .pcf and .row.
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let stem = name.strip_suffix(".gz").unwrap_or(&name);
            let stem = Path::new(stem).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let siblings: &[&str] = match trace.meta.format.as_str() {
                "otf2" => &["def", ""],
                "paraver" => &["pcf", "row"],
                _ => &[],
            };
            for ext in siblings {
                let file = if ext.is_empty() { stem.clone() } else { format!("{stem}.{ext}") };
                out.push(parent_of(path).join(file));
            }
        }
    }
    // A store's directory, also a cache store the trace is read through.
    for t in crate::model::TABLES {
        if let Some(stored) = trace.stored_file(t.name)
            && let Some(dir) = stored.path.parent()
            && !out.iter().any(|p| p == dir)
        {
            out.push(dir.to_path_buf());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names_carry_their_process() {
        assert_eq!(leftover_pid(".out.csv.commdb-4242.tmp"), Some(4242));
        assert_eq!(process_state("4242 (commdb) Z 1 4242 4242 0 -1"), Some('Z'));
        assert_eq!(process_state("17 (a (b) c) S 1 17"), Some('S'));
        assert_eq!(process_state("garbage"), None);
        assert_eq!(leftover_pid(".store.commdb-partial-17"), Some(17));
        assert_eq!(leftover_pid(".store.commdb-partial-17.scratch-events"), Some(17));
        assert_eq!(leftover_pid(".store.commdb-previous-9"), Some(9));
        assert_eq!(leftover_pid(".g.commdb-generate-31.store"), Some(31));
        for other in
            ["out.csv", ".commdb-x.tmp", ".a.commdb-12", ".a.commdb-12.tmpx", ".a.commdb-partial-", "a.commdb-1.tmp"]
        {
            assert_eq!(leftover_pid(other), None, "{other}");
        }
    }

    #[test]
    fn leftovers_of_ended_processes_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        // A process id above the kernel's largest is never running.
        let dead = 4_194_304 + 7;
        let own = std::process::id();
        std::fs::write(dir.path().join(format!(".r.csv.commdb-{dead}.tmp")), "x").unwrap();
        std::fs::create_dir_all(dir.path().join(format!(".s.commdb-partial-{dead}/events"))).unwrap();
        std::fs::write(dir.path().join(format!(".r.csv.commdb-{own}.tmp")), "mine").unwrap();
        std::fs::write(dir.path().join("keep.csv"), "user's").unwrap();
        assert_eq!(clean_stale(dir.path()), 2);
        let mut left: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, [format!(".r.csv.commdb-{own}.tmp"), "keep.csv".to_string()]);
    }

    #[test]
    fn devices_are_written_in_place_links_followed_and_failures_keep_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        // A character device stays one.
        write_all(Path::new("/dev/null"), b"gone").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        }
        // A link is followed: the file it names is replaced, the link stays a link.
        let real = dir.path().join("real.csv");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.csv");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&real, &link).unwrap();
            write_all(&link, b"new").unwrap();
            assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
            assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
            // A dangling link is refused, naming it.
            let dangling = dir.path().join("dangling.csv");
            std::os::unix::fs::symlink(dir.path().join("nowhere/x"), &dangling).unwrap();
            let e = Output::create(&dangling).unwrap_err().to_string();
            assert!(e.contains("dangling.csv") && e.contains("symbolic link"), "{e}");
        }
        // Dropped before commit, the old file stays and no temporary is left.
        let mut out = Output::create(&real).unwrap();
        out.write_all(b"half").unwrap();
        drop(out);
        assert_eq!(std::fs::read_to_string(&real).unwrap(), if cfg!(unix) { "new" } else { "old" });
        assert!(
            std::fs::read_dir(dir.path()).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        );
        // A directory is refused.
        let e = Output::create(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn a_target_inside_an_input_directory_overwrites_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("manifest.json"), "{}").unwrap();
        assert!(overwrites(&store.join("manifest.json"), &store));
        assert!(overwrites(&store.join("new.parquet"), &store));
        assert!(overwrites(&store.join("../store/events.parquet"), &store));
        assert!(!overwrites(&dir.path().join("out.csv"), &store));
    }
}
