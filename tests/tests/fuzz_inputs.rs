//! Mutation fuzzing of every reader a user's files reach: CSV traces (both shapes), clock sync
//! CSVs, Slurm sacct and SWF logs, commdb stores, OTF2 archives and Paraver traces. Each case takes a valid seed
//! file, damages it (a flipped or replaced byte, a cut, a doubled or dropped line, an inserted
//! byte) with a deterministic generator, and reads it: the reader must return a trace or an
//! error that names the file, never panic and never hang.
//!
//! The default is a short run (`CASES` per format, a few seconds, as CI runs it); set
//! `COMMDB_FUZZ_CASES=100000` for a long one. A failing case prints its format, case number
//! and mutation, so it can be replayed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use commdb_catalog::OpenOptions;
use commdb_catalog::generate::rng::uniform;
use commdb_catalog::generate::{GeneratorConfig, generate};
use commdb_catalog::jobs::LogKind;
use commdb_tests::test_data;

/// Cases per format in the short run.
const CASES: u64 = 150;
/// Longest a single read may take before the case counts as a hang.
const HANG: Duration = Duration::from_secs(20);

fn cases() -> u64 {
    std::env::var("COMMDB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES)
}

/// A damaged copy of `seed` for case `k`, and what was done.
fn mutate(seed: &[u8], stream: u64, k: u64) -> (Vec<u8>, String) {
    let r = |i: u64| uniform(0xF022, stream, k, i);
    let mut b = seed.to_vec();
    let at = ((r(1) * b.len() as f64) as usize).min(b.len().saturating_sub(1));
    let what = match (r(0) * 6.0) as u32 {
        0 => {
            b[at] ^= 1 << ((r(2) * 8.0) as u32);
            format!("bit flip at byte {at}")
        }
        1 => {
            let v = (r(2) * 256.0) as u8;
            b[at] = v;
            format!("byte {at} set to {v}")
        }
        2 => {
            b.truncate(at);
            format!("cut at byte {at}")
        }
        3 => {
            let v = [b'|', b',', b'-', b'9', b'\n', 0, 0xFF][(r(2) * 7.0) as usize];
            b.insert(at, v);
            format!("byte {v} inserted at {at}")
        }
        4 => {
            let lines: Vec<&[u8]> = seed.split(|c| *c == b'\n').collect();
            let i = (r(2) * lines.len() as f64) as usize;
            let mut out = Vec::new();
            for (j, l) in lines.iter().enumerate() {
                out.extend_from_slice(l);
                out.push(b'\n');
                if j == i {
                    out.extend_from_slice(l);
                    out.push(b'\n');
                }
            }
            b = out;
            format!("line {} doubled", i + 1)
        }
        _ => {
            let lines: Vec<&[u8]> = seed.split(|c| *c == b'\n').collect();
            let i = (r(2) * lines.len() as f64) as usize;
            b = lines.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, l)| [*l, b"\n"].concat()).collect();
            format!("line {} dropped", i + 1)
        }
    };
    (b, what)
}

/// Fuzz one file of a format: `file` is rewritten with each damaged copy of `seed` and read
/// with `read`; every error must contain `names` (the file's name, or the directory of a
/// several-file input).
fn fuzz_file(
    format: &str,
    stream: u64,
    file: &Path,
    names: &str,
    read: impl Fn() -> Result<(), String> + Clone + Send + 'static,
) {
    let seed = std::fs::read(file).unwrap();
    let (mut errors, mut read_ok) = (0u64, 0u64);
    for k in 0..cases() {
        let (bytes, what) = mutate(&seed, stream, k);
        std::fs::write(file, &bytes).unwrap();
        match commdb_tests::survive(2 << 20, HANG, read.clone()) {
            Ok(None) => read_ok += 1,
            Ok(Some(message)) => {
                errors += 1;
                assert!(
                    message.contains(names),
                    "{format} case {k} ({what}): the error does not name the file {names}: {message}"
                );
            }
            Err(why) => panic!("{format} case {k} ({what}): {why}"),
        }
    }
    std::fs::write(file, &seed).unwrap();
    eprintln!("{format}: {} cases, {errors} errors, {read_ok} read", cases());
}

fn copy_into(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(test_data().join(name), &to).unwrap();
    to
}

fn open_trace(path: PathBuf) -> impl Fn() -> Result<(), String> + Clone + Send + 'static {
    move || {
        commdb_catalog::open(&path.display().to_string(), &OpenOptions::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[test]
fn csv_traces_survive_damage() {
    let dir = tempfile::tempdir().unwrap();
    for (k, name) in ["latency.csv", "nonblocking_events.csv", "three_ranks.csv"].iter().enumerate() {
        let file = copy_into(dir.path(), name);
        fuzz_file(name, k as u64, &file, name, open_trace(file.clone()));
    }
}

#[test]
fn clock_sync_files_survive_damage() {
    let dir = tempfile::tempdir().unwrap();
    let trace = copy_into(dir.path(), "clock_two_ranks.csv");
    let sync = copy_into(dir.path(), "clock_sync_two_sessions.csv");
    let options = OpenOptions { clock_sync: Some(sync.clone()), ..OpenOptions::default() };
    let read =
        move || commdb_catalog::open(&trace.display().to_string(), &options).map(|_| ()).map_err(|e| e.to_string());
    fuzz_file("clock sync", 10, &sync, "clock_sync_two_sessions.csv", read);
}

#[test]
fn scheduler_logs_survive_damage() {
    let dir = tempfile::tempdir().unwrap();
    for (k, (name, kind)) in
        [("sacct_jobs.txt", LogKind::Sacct), ("sacct_quartz.txt", LogKind::Sacct), ("small.swf", LogKind::Swf)]
            .into_iter()
            .enumerate()
    {
        let file = copy_into(dir.path(), name);
        let path = file.clone();
        let read = move || commdb_catalog::jobs::read(&path, kind).map(|_| ()).map_err(|e| e.to_string());
        fuzz_file(name, 20 + k as u64, &file, name, read);
    }
}

#[test]
fn stores_survive_damage() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = generate(&GeneratorConfig { ranks: 4, iterations: 3, ..GeneratorConfig::default() })
        .unwrap()
        .trace
        .build()
        .unwrap();
    commdb_catalog::store::write(&trace, &store).unwrap();
    // Damage in one file may surface in another (a manifest naming a table file wrongly):
    // the error names a file of the store.
    let names = store.display().to_string();
    for (k, name) in ["manifest.json", "messages.parquet", "trace_info.parquet"].iter().enumerate() {
        fuzz_file(name, 30 + k as u64, &store.join(name), &names, open_trace(store.clone()));
    }
}

#[test]
fn otf2_archives_survive_damage() {
    let dir = tempfile::tempdir().unwrap();
    let raw = generate(&GeneratorConfig { ranks: 4, iterations: 3, ..GeneratorConfig::default() }).unwrap().trace;
    commdb_catalog::reading::otf2::writer::write(&raw, dir.path()).unwrap();
    let anchor = dir.path().join("traces.otf2");
    // Damaged definitions may surface in an event file (an event naming a region that is no
    // longer defined): the error names a file of the archive.
    let names = dir.path().display().to_string();
    for (k, name) in ["traces.otf2", "traces.def", "traces/1.evt", "traces/1.def"].iter().enumerate() {
        fuzz_file(name, 40 + k as u64, &dir.path().join(name), &names, open_trace(anchor.clone()));
    }
}

#[test]
fn paraver_traces_survive_damage() {
    // The hand-written Extrae-shaped trace (two applications, a cut, every record type) and a
    // generated one, each of its three files damaged in turn.
    let dir = tempfile::tempdir().unwrap();
    let extrae = dir.path().join("extrae");
    std::fs::create_dir_all(&extrae).unwrap();
    for name in ["extrae.prv", "extrae.pcf", "extrae.row"] {
        std::fs::copy(test_data().join("paraver").join(name), extrae.join(name)).unwrap();
    }
    let generated = dir.path().join("generated");
    let trace = generate(&GeneratorConfig { ranks: 4, iterations: 2, ..GeneratorConfig::default() })
        .unwrap()
        .trace
        .build()
        .unwrap();
    commdb_catalog::reading::paraver::writer::write(&trace, &generated, "run").unwrap();
    let mut stream = 50;
    for (dir, base) in [(&extrae, "extrae"), (&generated, "run")] {
        let prv = dir.join(format!("{base}.prv"));
        for ext in ["prv", "pcf", "row"] {
            let name = format!("{base}.{ext}");
            fuzz_file(&name, stream, &dir.join(&name), &dir.display().to_string(), open_trace(prv.clone()));
            stream += 1;
        }
    }
}
