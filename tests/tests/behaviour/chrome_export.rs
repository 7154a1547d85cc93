//! `commdb export --format chrome`: the JSON Perfetto's UI opens, checked against the tables it
//! comes from: a complete event per call with its region, rank, thread and times; a flow start
//! and end per matched message, on its sender and receiver at its send and receive times; an
//! instant event per rank's part in a collective; a counter per metric sample.

use std::collections::HashMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};
use commdb_catalog::OpenOptions;
use serde_json::Value;

fn concat(trace: &commdb_catalog::Trace, table: &str) -> RecordBatch {
    let schema = commdb_catalog::model::schema(table).unwrap();
    arrow::compute::concat_batches(&schema, &trace.table(table).unwrap()).unwrap()
}

fn export(path: &str) -> (commdb_catalog::Trace, Vec<Value>) {
    let trace = commdb_catalog::open(path, &OpenOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.json");
    let written = commdb_catalog::export::chrome::write(&trace, &out).unwrap();
    let json: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap().clone();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((written.calls + written.transfers, written.flows + written.launches), (count("X"), count("s")));
    assert_eq!((written.collectives, written.counters), (count("i"), count("C")));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["trace.json"], "no temporary file is left");
    (trace, events)
}

/// Microseconds with three decimals back to nanoseconds.
fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

#[test]
fn calls_messages_and_collectives_are_the_tables() {
    let (trace, events) = export("generate:ranks=12,ranks-per-node=4,iterations=5");
    // One complete event per call, keyed by call_id.
    let calls = concat(&trace, "calls");
    let by_id: HashMap<i64, &Value> =
        events.iter().filter(|e| e["ph"] == "X").map(|e| (e["args"]["call_id"].as_i64().unwrap(), e)).collect();
    assert_eq!(by_id.len(), calls.num_rows());
    let region =
        arrow::compute::cast(calls.column_by_name("region").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let region = region.as_string::<i32>();
    for i in 0..calls.num_rows() {
        let id = calls.column(0).as_primitive::<Int64Type>().value(i);
        let e = by_id[&id];
        let start = calls.column_by_name("start_ts").unwrap().as_primitive::<Int64Type>().value(i);
        let end = calls.column_by_name("end_ts").unwrap().as_primitive::<Int64Type>().value(i);
        assert_eq!(e["name"], region.value(i));
        assert_eq!(
            e["pid"].as_i64(),
            Some(i64::from(calls.column_by_name("rank").unwrap().as_primitive::<Int32Type>().value(i)))
        );
        assert_eq!(e["args"]["start_ns"].as_i64(), Some(start));
        assert_eq!((ns(&e["ts"]), ns(&e["dur"])), (start, end - start));
    }
    // A flow pair per matched message, the same id at both ends.
    let messages = concat(&trace, "messages");
    let col = |name: &str| messages.column_by_name(name).unwrap().clone();
    let (src, dst, send, recv) = (col("src"), col("dst"), col("send_ts"), col("recv_ts"));
    let matched: Vec<usize> = (0..messages.num_rows())
        .filter(|&i| src.is_valid(i) && dst.is_valid(i) && send.is_valid(i) && recv.is_valid(i))
        .collect();
    assert!(!matched.is_empty());
    let starts: HashMap<i64, &Value> =
        events.iter().filter(|e| e["ph"] == "s").map(|e| (e["id"].as_i64().unwrap(), e)).collect();
    let ends: HashMap<i64, &Value> =
        events.iter().filter(|e| e["ph"] == "f").map(|e| (e["id"].as_i64().unwrap(), e)).collect();
    assert_eq!((starts.len(), ends.len()), (matched.len(), matched.len()));
    for &i in &matched {
        let id = messages.column(0).as_primitive::<Int64Type>().value(i);
        let (s, f) = (starts[&id], ends[&id]);
        assert_eq!(s["pid"].as_i64(), Some(i64::from(src.as_primitive::<Int32Type>().value(i))));
        assert_eq!(f["pid"].as_i64(), Some(i64::from(dst.as_primitive::<Int32Type>().value(i))));
        assert_eq!(ns(&s["ts"]), send.as_primitive::<Int64Type>().value(i));
        assert_eq!(ns(&f["ts"]), recv.as_primitive::<Int64Type>().value(i));
        assert_eq!(f["bp"], "e", "the end binds to the receiving call");
    }
    // An instant event per rank's part in a collective, at the time it left it.
    let collectives = concat(&trace, "collectives");
    let instants: Vec<&Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), collectives.num_rows());
    let mut got: Vec<(i64, i64)> = instants.iter().map(|e| (e["pid"].as_i64().unwrap(), ns(&e["ts"]))).collect();
    let end = collectives.column_by_name("end_ts").unwrap().as_primitive::<Int64Type>();
    let rank = collectives.column_by_name("rank").unwrap().as_primitive::<Int32Type>();
    let mut want: Vec<(i64, i64)> =
        (0..collectives.num_rows()).map(|i| (i64::from(rank.value(i)), end.value(i))).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    // Every rank is a named process.
    let named = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name").count();
    assert_eq!(named, 12);
}

#[test]
fn metric_samples_are_counters() {
    let path = commdb_tests::test_data().join("paraver").join("counters");
    let (trace, events) = export(&path.display().to_string());
    let metrics = concat(&trace, "metrics");
    assert!(metrics.num_rows() > 0);
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(counters.len(), metrics.num_rows());
    let name =
        arrow::compute::cast(metrics.column_by_name("metric").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let (name, value) =
        (name.as_string::<i32>(), metrics.column_by_name("value").unwrap().as_primitive::<Float64Type>());
    let mut want: Vec<(String, i64, f64)> = (0..metrics.num_rows())
        .map(|i| (name.value(i).to_string(), metrics.column(2).as_primitive::<Int64Type>().value(i), value.value(i)))
        .collect();
    let mut got: Vec<(String, i64, f64)> = counters
        .iter()
        .map(|e| {
            let n = e["name"].as_str().unwrap().to_string();
            (n.clone(), e["args"]["ts_ns"].as_i64().unwrap(), e["args"][&n].as_f64().unwrap())
        })
        .collect();
    let key = |a: &(String, i64, f64), b: &(String, i64, f64)| (&a.0, a.1).cmp(&(&b.0, b.1)).then(a.2.total_cmp(&b.2));
    want.sort_by(key);
    got.sort_by(key);
    assert_eq!(got, want);
}

#[test]
fn a_store_is_exported_a_batch_at_a_time_as_from_memory() {
    // Calls, messages and collectives of 16 ranks, written as a store of parts of 500 rows: its
    // tables are read a file and a batch at a time, and the JSON is the one written from memory.
    let spec = "generate:ranks=16,ranks-per-node=4,iterations=40";
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    commdb_catalog::store::write_in_parts(&trace, &store, 500).unwrap();
    let stored = commdb_catalog::open(&store.display().to_string(), &OpenOptions::default()).unwrap();
    for table in ["calls", "messages", "collectives"] {
        assert!(stored.stored_file(table).is_some_and(|f| f.files.len() > 1), "{table} in parts");
    }
    let (a, b) = (dir.path().join("memory.json"), dir.path().join("store.json"));
    let written = commdb_catalog::export::chrome::write(&trace, &a).unwrap();
    assert_eq!(commdb_catalog::export::chrome::write(&stored, &b).unwrap(), written);
    assert!(written.calls > 1000 && written.flows > 1000 && written.collectives > 0);
    // The trace's name is the store's own; everything else is byte for byte the same.
    let text = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    let strip = |t: String| t.lines().filter(|l| !l.contains("\"trace\"")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(text(&b)), strip(text(&a)));
    // Tables kept in the store were never read into memory.
    for table in ["calls", "messages", "collectives"] {
        assert_eq!(stored.built_rows(table), None, "{table}");
    }
}

#[test]
fn accelerator_streams_have_their_transfers_and_a_flow_from_each_launch_to_its_kernel() {
    // tests/otf2/make_gpu.py lists every time of this archive.
    let path = commdb_tests::test_data().join("otf2").join("gpu");
    let (_, events) = export(&path.display().to_string());
    let transfers: Vec<(String, i64, i64, i64)> = events
        .iter()
        .filter(|e| e["cat"] == "transfer")
        .map(|e| {
            let args = &e["args"];
            (
                e["name"].as_str().unwrap().to_string(),
                e["tid"].as_i64().unwrap(),
                ns(&e["ts"]),
                args["duration_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    let want = [("host_to_device", 1, 100, 50), ("device_to_host", 1, 900, 20), ("device_to_device", 1, 950, 40)];
    assert_eq!(transfers, want.map(|(d, t, s, n)| (d.to_string(), t, s, n)));
    // Each launch (on the host thread) flows to the kernel it queued (on the stream it names).
    // id -> ((thread, ns) of the launch, (thread, ns) of the kernel)
    type Ends = ((i64, i64), (i64, i64));
    let mut flows: HashMap<i64, Ends> = HashMap::new();
    for e in events.iter().filter(|e| e["cat"] == "launch") {
        let at = (e["tid"].as_i64().unwrap(), ns(&e["ts"]));
        let flow = flows.entry(e["id"].as_i64().unwrap()).or_default();
        if e["ph"] == "s" { flow.0 = at } else { flow.1 = at }
    }
    let mut got: Vec<_> = flows.into_values().collect();
    got.sort();
    assert_eq!(
        got,
        [
            ((0, 180), (1, 200)),
            ((0, 290), (2, 300)),
            ((0, 700), (1, 750)),
            ((0, 1000), (2, 1100)),
            ((0, 1020), (2, 1400))
        ]
    );
}
