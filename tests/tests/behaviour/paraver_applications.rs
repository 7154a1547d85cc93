//! Paraver traces with several applications, as Extrae and node-counter samplers write them:
//! a generated trace written with a second application that samples a node counter on every
//! node (`export::paraver::Extras`), read back in memory and converted a group of ranks at a time. The
//! ranks are the MPI application's; every sample of the second application is a metric of its
//! own location, named with its node, with the value that was written. Two applications that
//! both call MPI (tests/data/paraver/mpmd) give ranks numbered across them, whole or converted
//! a group of ranks at a time.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, Int32Type};
use commdb_catalog::OpenOptions;
use commdb_catalog::export::paraver::{self, Extras, NODE_COUNTER_NAME, node_counter_value};
use commdb_catalog::generate::{GeneratorConfig, generate};

/// (location name, sample value) of every sample of the node counter, in file order per location.
fn node_samples(trace: &commdb_catalog::Trace) -> Vec<(String, f64)> {
    let mut names = std::collections::HashMap::new();
    for b in trace.table("locations").unwrap() {
        let (rank, name) = (b.column(1).as_primitive::<Int32Type>(), b.column(4).as_string::<i32>());
        for i in 0..b.num_rows() {
            names.insert(rank.value(i), name.value(i).to_string());
        }
    }
    let mut out = Vec::new();
    for b in trace.table("metrics").unwrap() {
        let rank = b.column_by_name("rank").unwrap().as_primitive::<Int32Type>();
        let metric =
            arrow::compute::cast(b.column_by_name("metric").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let metric = metric.as_string::<i32>();
        let value = b.column_by_name("value").unwrap().as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            if metric.is_valid(i) && metric.value(i) == NODE_COUNTER_NAME {
                out.push((names[&rank.value(i)].clone(), value.value(i)));
            }
        }
    }
    out
}

#[test]
fn a_second_application_of_node_counters_becomes_metrics_of_its_nodes() {
    let cfg = GeneratorConfig { ranks: 12, ranks_per_node: 4, iterations: 8, ..GeneratorConfig::default() };
    let trace = generate(&cfg).unwrap().trace.build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let every = 50_000;
    paraver::write_with(&trace, dir.path(), "run", &Extras { node_counters_every_ns: Some(every) }).unwrap();
    let prv = dir.path().join("run.prv");
    let header = std::fs::read_to_string(&prv).unwrap().lines().next().unwrap().to_string();
    assert!(header.contains(":2:12(") && header.contains("),3(1:1,1:2,1:3),"), "{header}");
    // What was written: from 0 to the end the header gives, a sample per interval and node.
    let end: i64 = header.split("):").nth(1).unwrap().split("_ns").next().unwrap().parse().unwrap();
    let per_node = (end / every + 1) as usize;
    let mut expected = Vec::new();
    for n in 0..3 {
        for k in 0..per_node as i64 {
            expected
                .push((format!("THREAD 2.{}.1 (application 2 on node{n:03})", n + 1), node_counter_value(n, k) as f64));
        }
    }
    let check = |t: &commdb_catalog::Trace, how: &str| {
        assert_eq!(t.row_count("ranks").unwrap(), 12, "{how}");
        assert_eq!(t.row_count("messages").unwrap(), trace.row_count("messages").unwrap(), "{how}");
        let mut got = node_samples(t);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, expected, "{how}");
        let warnings = t.warnings().unwrap();
        assert_eq!(warnings.count("paraver_other_application_events"), 0, "{how}: counters only");
        // The samplers' locations say which node they ran on, so their metrics join to it.
        let mut nodes: Vec<(String, String)> = Vec::new();
        for b in t.table("locations").unwrap() {
            let (kind, name) = (b.column(3).as_string::<i32>(), b.column(4).as_string::<i32>());
            let node = b.column_by_name("node").unwrap().as_string::<i32>();
            for i in 0..b.num_rows() {
                if kind.value(i) == "metric" {
                    nodes.push((name.value(i).to_string(), node.value(i).to_string()));
                }
            }
        }
        nodes.sort();
        let expected_nodes: Vec<(String, String)> = (0..3)
            .map(|n| (format!("THREAD 2.{}.1 (application 2 on node{n:03})", n + 1), format!("node{n:03}")))
            .collect();
        assert_eq!(nodes, expected_nodes, "{how}");
    };
    let read = commdb_catalog::open(&prv.display().to_string(), &OpenOptions::default()).unwrap();
    check(&read, "in memory");
    // Converted a group of ranks at a time, the samples stay with their nodes.
    let store = dir.path().join("store");
    let limits = commdb_catalog::convert::Limits { group_events: 200, ..Default::default() };
    commdb_catalog::formats::convert(&prv, &store, &OpenOptions::default(), &limits).unwrap();
    let stored = commdb_catalog::open(&store.display().to_string(), &OpenOptions::default()).unwrap();
    check(&stored, "converted in groups");
}

/// (src, dst, bytes) of every message, and (comm, rank) of every collective, sorted.
type Exchanges = (Vec<(i32, i32, i64)>, Vec<(i32, i32)>);

fn messages_and_collectives(t: &commdb_catalog::Trace) -> Exchanges {
    let mut m = Vec::new();
    for b in t.table("messages").unwrap() {
        let (src, dst) = (b.column_by_name("src").unwrap(), b.column_by_name("dst").unwrap());
        let (src, dst) = (src.as_primitive::<Int32Type>(), dst.as_primitive::<Int32Type>());
        let bytes = b.column_by_name("bytes").unwrap().as_primitive::<arrow::datatypes::Int64Type>();
        m.extend((0..b.num_rows()).map(|i| (src.value(i), dst.value(i), bytes.value(i))));
    }
    let mut c = Vec::new();
    for b in t.table("collectives").unwrap() {
        let comm = b.column_by_name("comm").unwrap().as_primitive::<Int32Type>();
        let rank = b.column_by_name("rank").unwrap().as_primitive::<Int32Type>();
        c.extend((0..b.num_rows()).map(|i| (comm.value(i), rank.value(i))));
    }
    m.sort_unstable();
    c.sort_unstable();
    (m, c)
}

#[test]
fn two_communicating_applications_are_ranked_across_in_memory_and_converted_in_groups() {
    let prv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/paraver/mpmd/mpmd.prv");
    let read = commdb_catalog::open(&prv.display().to_string(), &OpenOptions::default()).unwrap();
    let expected = (vec![(0, 1, 64), (1, 2, 32), (2, 3, 128)], vec![(0, 2), (0, 3), (1, 0), (1, 1)]);
    assert_eq!(messages_and_collectives(&read), expected);
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let limits = commdb_catalog::convert::Limits { group_events: 4, ..Default::default() };
    commdb_catalog::formats::convert(&prv, &store, &OpenOptions::default(), &limits).unwrap();
    let stored = commdb_catalog::open(&store.display().to_string(), &OpenOptions::default()).unwrap();
    assert_eq!(messages_and_collectives(&stored), expected);
    let apps: Vec<Option<i32>> = stored
        .table("ranks")
        .unwrap()
        .iter()
        .flat_map(|b| b.column_by_name("application").unwrap().as_primitive::<Int32Type>().iter().collect::<Vec<_>>())
        .collect();
    assert_eq!(apps, [Some(1), Some(1), Some(2), Some(2)]);
}
