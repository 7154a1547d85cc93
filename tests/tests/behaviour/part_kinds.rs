//! A store's events parts list the kinds they hold, and a scan whose filter on `kind` allows
//! none of a part's kinds neither checks nor reads it: on a trace without OpenMP the analyses
//! that follow forks and joins read nothing of `events` but the one part a plan keeps, and on a
//! hybrid one they find every fork and join as in memory.

use std::path::{Path, PathBuf};

use commdb_catalog::OpenOptions;

use crate::store_checks::damage_column;

fn store(spec: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 500).unwrap();
    (dir, store)
}

fn query(path: &str, sql: &str) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut session = commdb_tests::session();
    session.open(path, None, &OpenOptions::default()).map_err(|e| e.to_string())?;
    let batches = runtime.block_on(session.collect(sql)).map_err(|e| e.to_string())?;
    Ok(arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string())
}

/// Each events part's listed kinds, by file name.
fn listed_kinds(store: &Path) -> Vec<(String, Vec<String>)> {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap()).unwrap();
    let parts = manifest["tables"]["events"]["parts"].as_array().unwrap();
    parts
        .iter()
        .map(|p| {
            assert_eq!(p["values"]["column"], "kind", "{p}");
            let kinds = p["values"]["values"].as_array().unwrap();
            let kinds = kinds.iter().map(|k| k.as_str().unwrap().to_string()).collect();
            (p["file"].as_str().unwrap().to_string(), kinds)
        })
        .collect()
}

const FORKS: &str = "SELECT count(*), sum(ts) FROM events WHERE kind IN ('thread_fork', 'thread_join')";
const DELAYS: &str = "SELECT count(*), round(sum(cost_ns), 3) FROM delay_costs()";

#[test]
fn parts_without_the_kinds_a_filter_allows_are_not_read() {
    let spec = "generate:ranks=16,ranks-per-node=4,iterations=40";
    let (_dir, store) = store(spec);
    let path = store.display().to_string();
    let listed = listed_kinds(&store);
    assert!(listed.len() > 3, "{listed:?}");
    for (file, kinds) in &listed {
        assert!(kinds.iter().any(|k| k == "isend") && kinds.iter().any(|k| k == "enter"), "{file}: {kinds:?}");
        assert!(!kinds.iter().any(|k| k.starts_with("thread_")), "{file}: {kinds:?}");
    }
    let delays = query(spec, DELAYS).unwrap();
    assert_eq!(query(&path, DELAYS).unwrap(), delays);
    // Every part but the first (which a plan keeps) damaged where the forks' query reads.
    for (file, _) in &listed[1..] {
        damage_column(&store.join("events").join(file), "ts");
    }
    assert!(query(&path, FORKS).unwrap().contains("| 0 "), "no forks or joins, none read");
    assert_eq!(query(&path, DELAYS).unwrap(), delays);
    // A kind the parts list is read, and the damage found (in whichever damaged part a
    // partition of the scan opens first).
    let err = query(&path, "SELECT count(*), sum(ts) FROM events WHERE kind = 'isend'").unwrap_err();
    let named = listed[1..].iter().any(|(file, _)| err.contains(&format!("{file}:")));
    assert!(named && err.contains("column ts") && err.contains("damaged"), "{err}");
    assert!(!err.contains("Parquet error"), "the check's own words: {err}");
}

#[test]
fn a_hybrid_run_s_parts_list_its_forks_and_give_what_memory_gives() {
    let spec = "generate:ranks=4,ranks-per-node=2,iterations=12,threads=3";
    let (_dir, store) = store(spec);
    let path = store.display().to_string();
    let listed = listed_kinds(&store);
    assert!(listed.iter().any(|(_, kinds)| kinds.iter().any(|k| k == "thread_fork")), "{listed:?}");
    for sql in [
        FORKS,
        "SELECT kind, count(*) FROM events WHERE kind = 'thread_join' OR kind = 'isend' GROUP BY 1 ORDER BY 1",
        DELAYS,
    ] {
        assert_eq!(query(&path, sql).unwrap(), query(spec, sql).unwrap(), "{sql}");
    }
}
