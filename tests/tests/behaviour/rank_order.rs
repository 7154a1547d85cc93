//! A store's scans of `events` and `calls` declare that their rows come in rank order
//! (DataFusion then skips sorts by rank, and the per-rank sweeps stream, udfs::by_rank), and a
//! store keeps the rows in the order the trace was built in, so every reader must build them
//! so: OTF2 (Score-P's archives in ../shared/data and commdb's own), Paraver, both CSV shapes
//! and the generator, with several threads a rank and ranks listed out of order.

use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use commdb_catalog::OpenOptions;
use commdb_tests::{shared_data, test_data};

/// The first place in `table` of `trace` where the rank goes down, if any.
fn out_of_order(trace: &commdb_catalog::Trace, table: &str) -> Option<String> {
    let mut last = i64::MIN;
    let mut row = 0usize;
    for b in trace.table(table).unwrap() {
        let rank = arrow::compute::cast(b.column_by_name("rank").unwrap(), &arrow::datatypes::DataType::Int64).unwrap();
        for r in rank.as_primitive::<Int64Type>().iter() {
            let r = r.unwrap_or(i64::MIN);
            if r < last {
                return Some(format!("{table}: row {row} has rank {r} after rank {last}"));
            }
            last = r;
            row += 1;
        }
    }
    None
}

fn check(path: &Path, opened: &mut usize) {
    let Ok(trace) = commdb_catalog::open(&path.display().to_string(), &OpenOptions::default()) else { return };
    *opened += 1;
    for table in ["events", "calls"] {
        assert!(commdb_catalog::model::rank_ordered(table));
        assert_eq!(out_of_order(&trace, table), None, "{}", path.display());
    }
}

#[test]
fn every_reader_builds_events_and_calls_in_rank_order() {
    let mut opened = 0;
    let data = test_data();
    let mut files: Vec<_> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().path()).collect();
    files.extend(std::fs::read_dir(data.join("paraver")).unwrap().flat_map(|e| {
        let p = e.unwrap().path();
        if p.is_dir() { std::fs::read_dir(p).unwrap().map(|e| e.unwrap().path()).collect() } else { vec![p] }
    }));
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "csv" || e == "prv" || e == "gz")) {
        check(f, &mut opened);
    }
    assert!(opened >= 15, "{opened} traces opened");
    // Generated, with several threads a rank, and written as an OTF2 archive read back.
    for spec in [
        "generate:ranks=48,ranks-per-node=4,iterations=6",
        "generate:ranks=96,ranks-per-node=8,iterations=3,pattern=master-worker",
    ] {
        let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
        assert_eq!(out_of_order(&trace, "events"), None, "{spec}");
        assert_eq!(out_of_order(&trace, "calls"), None, "{spec}");
    }
    // Rows of ranks and threads interleaved, rank 2 first.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("threads.csv");
    let mut text = String::from("Timestamp (ns),Event Type,Name,Thread,Process,Attributes\n");
    for (t, thread, rank) in [(0, 1, 2), (0, 0, 1), (1, 0, 2), (2, 1, 0), (3, 0, 0), (4, 1, 1)] {
        text.push_str(&format!("{t},Enter,main,{thread},{rank},{{'region': 'main'}}\n"));
    }
    for (t, thread, rank) in [(10, 1, 2), (10, 0, 1), (11, 0, 2), (12, 1, 0), (13, 0, 0), (14, 1, 1)] {
        text.push_str(&format!("{t},Leave,main,{thread},{rank},{{'region': 'main'}}\n"));
    }
    std::fs::write(&csv, text).unwrap();
    let before = opened;
    check(&csv, &mut opened);
    assert_eq!(opened, before + 1, "the CSV of interleaved threads opens");
    match shared_data() {
        Some(shared) => {
            for name in ["ping-pong", "ping-pong-papi"] {
                check(&shared.join("otf2").join(name).join("traces.otf2"), &mut opened);
            }
        }
        None => println!("skip: ../shared/data is absent (its Score-P archives are not checked)"),
    }
}
