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

/// A generated 4-rank trace of 3 iterations, built.
fn small_trace() -> commdb_catalog::Trace {
    generate(&GeneratorConfig { ranks: 4, iterations: 3, ..GeneratorConfig::default() }).unwrap().trace.build().unwrap()
}

fn copy_into(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(test_data().join(name), &to).unwrap();
    to
}

/// Open the trace and build every table: files read when a query first needs them (an OTF2
/// archive's event files, a store's large tables) are read too.
fn open_trace(path: PathBuf) -> impl Fn() -> Result<(), String> + Clone + Send + 'static {
    move || {
        commdb_catalog::open(&path.display().to_string(), &OpenOptions::default())
            .and_then(|t| t.build_all())
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
    let trace = small_trace();
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
    commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
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
    commdb_catalog::export::paraver::write(&trace, &generated, "run").unwrap();
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

/// Whether a trace read without error reported its damage: an error, or one of `codes` among
/// its warnings.
fn reported(path: &Path, codes: &[&str]) -> Result<Option<String>, String> {
    let trace = match commdb_catalog::open(&path.display().to_string(), &OpenOptions::default()) {
        Ok(t) => t,
        Err(e) => return Ok(Some(e.to_string())),
    };
    if let Err(e) = trace.build_all() {
        return Ok(Some(e.to_string()));
    }
    let warnings = trace.warnings().map_err(|e| e.to_string())?;
    match codes.iter().find(|c| warnings.count(c) > 0) {
        Some(code) => Ok(Some(format!("warning {code}"))),
        None => Ok(None),
    }
}

/// The time records of an OTF2 event file written by commdb's generator: the record type of a
/// timestamp (5) followed by the 8 bytes of a time the trace has (its ticks are its ns).
fn time_records(data: &[u8], times: &std::collections::HashSet<u64>) -> Vec<usize> {
    (0..data.len().saturating_sub(9))
        .filter(|&p| data[p] == 5 && times.contains(&u64::from_le_bytes(data[p + 1..p + 9].try_into().unwrap())))
        .map(|p| p + 1)
        .collect()
}

/// A generated 4-rank archive in `dir`: its anchor, the event file of location 1, that file's
/// bytes and the places of its time records.
fn archive_with_times(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>, Vec<usize>) {
    let raw = generate(&GeneratorConfig { ranks: 4, iterations: 3, ..GeneratorConfig::default() }).unwrap().trace;
    commdb_catalog::export::otf2::write(&raw, dir).unwrap();
    let anchor = dir.join("traces.otf2");
    let built = commdb_catalog::open(&anchor.display().to_string(), &OpenOptions::default()).unwrap();
    let times: std::collections::HashSet<u64> = built
        .table("events")
        .unwrap()
        .iter()
        .flat_map(|b| {
            let ts = b.column_by_name("ts").unwrap();
            ts.as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().values().to_vec()
        })
        .map(|t| t as u64)
        .collect();
    let evt = dir.join("traces/1.evt");
    let seed = std::fs::read(&evt).unwrap();
    let places = time_records(&seed, &times);
    (anchor, evt, seed, places)
}

#[test]
fn otf2_damaged_times_are_reported() {
    // A bit flip in an event's time (above the bits a clock's jitter moves) must never load
    // silently: the time goes backwards or past the archive's announced end, and either is a
    // warning (or the archive is refused).
    let dir = tempfile::tempdir().unwrap();
    let (anchor, evt, seed, places) = archive_with_times(dir.path());
    assert!(places.len() > 20, "{} time records found", places.len());
    let codes = ["otf2_time_backwards", "otf2_time_outside_range"];
    let mut found = 0;
    for k in 0..cases() {
        let at = places[(uniform(0xF023, 60, k, 0) * places.len() as f64) as usize];
        let bit = 24 + (uniform(0xF023, 60, k, 1) * 40.0) as usize;
        let mut bytes = seed.clone();
        bytes[at + bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&evt, &bytes).unwrap();
        let path = anchor.clone();
        match commdb_tests::survive(2 << 20, HANG, move || match reported(&path, &codes) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("loaded silently".to_string()),
            Err(e) => Err(e),
        }) {
            Ok(None) => found += 1,
            Ok(Some(why)) => panic!("OTF2 time case {k} (bit {bit} of the time at byte {at}): {why}"),
            Err(why) => panic!("OTF2 time case {k} (bit {bit} of the time at byte {at}): {why}"),
        }
    }
    std::fs::write(&evt, &seed).unwrap();
    eprintln!("OTF2 event times: {} cases, {found} reported", cases());
}

#[test]
fn misspelt_pcf_keywords_are_reported() {
    // A section keyword of the .pcf with one letter changed: the reader warns naming the line
    // (or refuses the file), never drops the section's names silently.
    let dir = tempfile::tempdir().unwrap();
    for name in ["extrae.prv", "extrae.pcf", "extrae.row"] {
        std::fs::copy(test_data().join("paraver").join(name), dir.path().join(name)).unwrap();
    }
    let pcf = dir.path().join("extrae.pcf");
    let seed = std::fs::read_to_string(&pcf).unwrap();
    let keywords: Vec<usize> = seed
        .lines()
        .enumerate()
        .filter(|(_, l)| ["STATES", "EVENT_TYPE", "VALUES"].contains(&l.trim()))
        .map(|(i, _)| i)
        .collect();
    assert!(keywords.len() >= 4, "{keywords:?}");
    for k in 0..cases() {
        let line = keywords[(uniform(0xF024, 61, k, 0) * keywords.len() as f64) as usize];
        let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
        let word = lines[line].trim().to_string();
        let at = (uniform(0xF024, 61, k, 1) * word.len() as f64) as usize;
        let letter = (b'A' + (uniform(0xF024, 61, k, 2) * 26.0) as u8) as char;
        let mut changed: Vec<char> = word.chars().collect();
        if changed[at] == letter {
            continue;
        }
        changed[at] = letter;
        lines[line] = changed.into_iter().collect();
        std::fs::write(&pcf, lines.join("\n") + "\n").unwrap();
        let prv = dir.path().join("extrae.prv");
        let outcome = reported(&prv, &["paraver_pcf_skipped"]).unwrap();
        assert!(outcome.is_some(), "pcf case {k}: '{}' on line {} loaded without a warning", lines[line], line + 1);
    }
    std::fs::write(&pcf, &seed).unwrap();
    eprintln!("misspelt .pcf keywords: {} cases, all reported", cases());
}

#[test]
fn edited_store_manifests_are_refused() {
    // The row counts and part lists of a store in parts, edited: a count changed, a part
    // listed twice or dropped. Opening must fail naming the manifest or a part, never count
    // or read rows that are not there.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = small_trace();
    commdb_catalog::store::write_in_parts(&trace, &store, 50).unwrap();
    let manifest = store.join("manifest.json");
    let seed: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let tables: Vec<String> = seed["tables"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["parts"].as_array().is_some_and(|p| p.len() >= 2))
        .map(|(n, _)| n.clone())
        .collect();
    assert!(tables.len() >= 2, "{tables:?}");
    for k in 0..cases() {
        let table = &tables[(uniform(0xF025, 62, k, 0) * tables.len() as f64) as usize];
        let mut m = seed.clone();
        let entry = &mut m["tables"][table];
        let parts = entry["parts"].as_array().unwrap().len();
        let part = (uniform(0xF025, 62, k, 1) * parts as f64) as usize;
        let delta = 1 + (uniform(0xF025, 62, k, 2) * 50.0) as i64;
        let what = match k % 4 {
            0 => {
                let rows = entry["rows"].as_i64().unwrap();
                entry["rows"] = (rows + delta).into();
                format!("{table} rows +{delta}")
            }
            1 => {
                let rows = entry["parts"][part]["rows"].as_i64().unwrap();
                entry["parts"][part]["rows"] = (rows + delta).into();
                entry["rows"] = (entry["rows"].as_i64().unwrap() + delta).into();
                format!("{table} part {part} rows +{delta}, the table's too")
            }
            2 => {
                let copy = entry["parts"][part].clone();
                entry["parts"].as_array_mut().unwrap().push(copy);
                format!("{table} part {part} listed twice")
            }
            _ => {
                let dropped = entry["parts"].as_array_mut().unwrap().remove(part);
                entry["rows"] = (entry["rows"].as_i64().unwrap() - dropped["rows"].as_i64().unwrap()).into();
                format!("{table} part {part} dropped, the table's rows too")
            }
        };
        std::fs::write(&manifest, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        let opened = commdb_catalog::open(&store.display().to_string(), &OpenOptions::default());
        if k % 4 == 3 {
            // A part dropped consistently leaves a smaller but whole store of the other
            // parts: it opens, and counts what it holds.
            let t = opened.unwrap_or_else(|e| panic!("manifest case {k} ({what}): {e}"));
            let n: usize = t.table(table).unwrap().iter().map(|b| b.num_rows()).sum();
            assert_eq!(n as i64, m["tables"][table]["rows"].as_i64().unwrap(), "manifest case {k} ({what})");
            continue;
        }
        let e = opened.err().unwrap_or_else(|| panic!("manifest case {k} ({what}): opened")).to_string();
        assert!(e.contains(&store.display().to_string()), "manifest case {k} ({what}): {e}");
    }
    std::fs::write(&manifest, serde_json::to_vec_pretty(&seed).unwrap()).unwrap();
    eprintln!("edited store manifests: {} cases, all refused or whole", cases());
}

#[test]
fn otf2_records_written_twice_are_reported() {
    // An event record (with its time) written a second time right after itself, at several
    // places of an event file: the archive loads, and `otf2_repeated_record` says so.
    let dir = tempfile::tempdir().unwrap();
    let (anchor, evt, seed, places) = archive_with_times(dir.path());
    let mut reported_cases = 0;
    for pair in places.windows(2).step_by(7).take(12) {
        // The time record's type byte up to the next time record's: the time and its event.
        let (from, to) = (pair[0] - 1, pair[1] - 1);
        let mut bytes = seed[..to].to_vec();
        bytes.extend_from_slice(&seed[from..to]);
        bytes.extend_from_slice(&seed[to..]);
        std::fs::write(&evt, &bytes).unwrap();
        let outcome = reported(&anchor, &["otf2_repeated_record"]).unwrap();
        assert_eq!(outcome.as_deref(), Some("warning otf2_repeated_record"), "the record at byte {from} written twice");
        reported_cases += 1;
    }
    std::fs::write(&evt, &seed).unwrap();
    assert!(reported_cases >= 5, "{reported_cases}");
}
