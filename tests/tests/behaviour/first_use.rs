//! Tables built on first use: opening an OTF2 archive reads its definitions only, the events
//! are decoded by the first query that reads them, calls, messages and collectives are derived
//! by the first that needs them, once, and every order of first use gives the same tables as
//! building everything at once.

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use commdb_catalog::generate::{GeneratorConfig, generate};
use commdb_catalog::{OpenOptions, model};

fn count(session: &mut commdb_catalog::Session, runtime: &tokio::runtime::Runtime, sql: &str) -> Result<i64, String> {
    let rows = runtime.block_on(session.collect(sql)).map_err(|e| e.to_string())?;
    Ok(rows[0].column(0).as_primitive::<Int64Type>().value(0))
}

fn archive(ranks: i32, clock_skew: bool) -> (tempfile::TempDir, String) {
    let cfg = GeneratorConfig { ranks, ranks_per_node: 4, iterations: 6, clock_skew, ..GeneratorConfig::default() };
    let raw = generate(&cfg).unwrap().trace;
    let dir = tempfile::tempdir().unwrap();
    commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
    let anchor = dir.path().join("traces.otf2").display().to_string();
    (dir, anchor)
}

#[test]
fn opening_reads_the_definitions_and_each_step_runs_when_first_needed() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (dir, anchor) = archive(16, false);
    let mut session = commdb_tests::session();
    let name = session.open(&anchor, Some("run"), &OpenOptions::default()).unwrap();
    let trace = session.trace(&name).unwrap().clone();
    assert_eq!(trace.built_rows("ranks"), Some(16));
    assert_eq!(trace.built_rows("events"), None);

    // The event files are not read yet: damaging one now is seen by the first query that
    // needs the events, not by the definitions.
    let evt = dir.path().join("traces").join("5.evt");
    let saved = std::fs::read(&evt).unwrap();
    std::fs::write(&evt, vec![0xff; saved.len()]).unwrap();
    assert_eq!(count(&mut session, &runtime, "SELECT count(*) FROM ranks"), Ok(16));
    assert_eq!(
        count(&mut session, &runtime, "SELECT count(*) FROM regions r JOIN communicators c ON true").map(|n| n > 0),
        Ok(true)
    );
    // Planning builds nothing; the plan says where the table will be built.
    let plan = runtime.block_on(session.collect("EXPLAIN SELECT * FROM messages")).unwrap();
    let text: String =
        plan.iter().flat_map(|b| b.column(1).as_string::<i32>().iter().flatten().map(str::to_string)).collect();
    assert!(text.contains("BuildOnFirstScan: table=run.messages"), "{text}");
    assert_eq!(trace.built_rows("events"), None);
    let err = count(&mut session, &runtime, "SELECT count(*) FROM events").unwrap_err();
    assert!(err.contains("5.evt"), "the error names the file: {err}");
    // The failed step fails again, with the same message, for a table it would have made.
    let again = count(&mut session, &runtime, "SELECT count(*) FROM messages").unwrap_err();
    assert_eq!(again, err);
    std::fs::write(&evt, saved).unwrap();

    // A trace opened anew: the events, then (only when asked) the derived tables.
    let mut session = commdb_tests::session();
    let name = session.open(&anchor, Some("run"), &OpenOptions::default()).unwrap();
    let trace = session.trace(&name).unwrap().clone();
    let events = count(&mut session, &runtime, "SELECT count(*) FROM events").unwrap();
    assert!(events > 0);
    assert_eq!(trace.built_rows("events"), None, "counting events builds no column of them");
    assert_eq!(trace.built_rows("messages"), None, "counting events derives nothing");
    let decoded =
        |t: &commdb_catalog::trace::Trace| t.phases().iter().filter(|p| p.name.starts_with("decoding")).count();
    assert_eq!(decoded(&trace), 1);
    let messages = count(&mut session, &runtime, "SELECT count(*) FROM run.messages").unwrap();
    assert!(messages > 0);
    assert_eq!(
        trace.built_rows("calls").map(|n| n > 0),
        Some(true),
        "one derivation makes calls, messages and collectives"
    );
    assert_eq!(trace.built_rows("events"), None, "the derivation keeps no events table");
    let derivations = trace.phases().iter().filter(|p| p.name == "stream walk").count();
    count(
        &mut session,
        &runtime,
        "SELECT count(*) FROM calls c JOIN messages m ON c.rank = m.src AND c.start_ts = m.send_call_start",
    )
    .unwrap();
    assert_eq!(trace.phases().iter().filter(|p| p.name == "stream walk").count(), derivations, "derived once");
}

/// Every table of `trace` as one batch each.
fn all_tables(trace: &commdb_catalog::Trace) -> Vec<(&'static str, RecordBatch)> {
    model::TABLES
        .iter()
        .map(|t| (t.name, arrow::compute::concat_batches(&t.schema(), &trace.table(t.name).unwrap()).unwrap()))
        .collect()
}

/// Every table of `got` equals that of `expected` (said with `label`): `trace_info` but for the
/// path and name, which say where it was opened from.
fn assert_same_tables(expected: &[(&'static str, RecordBatch)], got: &[(&'static str, RecordBatch)], label: &str) {
    for ((name, a), (_, b)) in expected.iter().zip(got) {
        if *name == "trace_info" {
            assert_eq!(a.columns()[2..], b.columns()[2..], "{label}: trace_info");
        } else {
            assert_eq!(a, b, "{label}: table {name}");
        }
    }
}

#[test]
fn any_order_of_first_use_gives_the_tables_built_at_once() {
    // Skewed clocks: the events opened from the archive are corrected as each location is
    // decoded, those read whole by the step after; both give the same times.
    let (_dir, anchor) = archive(12, true);
    let at_once = commdb_catalog::reading::otf2::read(std::path::Path::new(&anchor)).unwrap().build().unwrap();
    at_once.build_all().unwrap();
    let expected = all_tables(&at_once);
    let events = &expected.iter().find(|(n, _)| *n == "events").unwrap().1;
    let (ts, local) = (events.column(3).as_primitive::<Int64Type>(), events.column(13).as_primitive::<Int64Type>());
    let moved = (0..events.num_rows()).filter(|&i| ts.value(i) != local.value(i)).count();
    assert!(moved * 2 > events.num_rows(), "most times are corrected ({moved} of {})", events.num_rows());
    for first in ["trace_info", "messages", "events", "warnings", "clock_sync", "locations"] {
        let trace = commdb_catalog::open(&anchor, &OpenOptions::default()).unwrap();
        trace.table(first).unwrap();
        assert_same_tables(&expected, &all_tables(&trace), &format!("{first} first"));
    }
}

#[test]
fn the_tables_beside_the_events_are_made_without_them() {
    // `locations`, `clock_sync`, `metrics` and `states` first: an archive whose locations each
    // have their own stream decodes its events once for them and keeps none (the events table
    // and its columns stay unbuilt); any archive gives the tables a whole build gives.
    let (_dir, generated) = archive(12, true);
    let mut anchors = vec![(generated, true)];
    match commdb_tests::shared_data() {
        Some(shared) => {
            for name in ["ping-pong", "ping-pong-papi", "casita/4_mpi_ls_barr", "casita/2_jacobi_blame_cpu_015"] {
                anchors.push((shared.join("otf2").join(name).join("traces.otf2").display().to_string(), false));
            }
        }
        None => println!("skip the Score-P archives: ../shared/data is absent"),
    }
    for (anchor, own_streams) in anchors {
        let whole = commdb_catalog::open(&anchor, &OpenOptions::default()).unwrap();
        whole.build_all().unwrap();
        let expected = all_tables(&whole);
        for first in ["locations", "clock_sync", "metrics", "states"] {
            let trace = commdb_catalog::open(&anchor, &OpenOptions::default()).unwrap();
            trace.table(first).unwrap();
            let beside = trace.phases().iter().any(|p| p.name == "decoding events for the tables beside them");
            if beside {
                for table in ["events", "calls", "messages"] {
                    assert_eq!(trace.built_rows(table), None, "{anchor}, {first} first: {table} is not built");
                }
                for table in ["locations", "clock_sync", "metrics", "states"] {
                    assert!(trace.built_rows(table).is_some(), "{anchor}, {first} first: {table} is built");
                }
            }
            // Samples to carry: the skewed clocks' sync samples, the PAPI counters.
            if own_streams {
                assert!(trace.built_rows("clock_sync") > Some(0), "{anchor}: clock sync samples");
            }
            if anchor.contains("ping-pong-papi") {
                assert!(trace.built_rows("metrics") > Some(0), "{anchor}: PAPI counter samples");
            }
            if own_streams {
                assert!(beside, "{anchor}: its locations have their own streams");
            }
            assert_same_tables(&expected, &all_tables(&trace), &format!("{anchor}, {first} first"));
        }
    }
}

/// The rows of each query on the trace at `path`, as text (a dictionary's keys may differ where
/// its values do not), and the trace.
fn answers(runtime: &tokio::runtime::Runtime, path: &str, queries: &[&str]) -> (Vec<String>, commdb_catalog::Trace) {
    let mut session = commdb_tests::session();
    let name = session.open(path, Some("t"), &OpenOptions::default()).unwrap();
    let out = queries
        .iter()
        .map(|q| {
            let rows = runtime.block_on(session.collect(q)).unwrap();
            let options = arrow::util::display::FormatOptions::default();
            let mut text = Vec::new();
            for b in &rows {
                for i in 0..b.num_rows() {
                    let row: Vec<String> = b
                        .columns()
                        .iter()
                        .map(|c| {
                            arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options)
                                .unwrap()
                                .value(i)
                                .to_string()
                        })
                        .collect();
                    text.push(row.join("|"));
                }
            }
            text.join("\n")
        })
        .collect();
    (out, session.trace(&name).unwrap().clone())
}

/// Flip a bit in the middle of a file.
fn damage(file: &std::path::Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(file, &bytes).unwrap();
}

/// The generated trace the tests of stores in parts read.
const IN_PARTS: &str = "generate:ranks=16,ranks-per-node=4,iterations=40";

/// `spec` written as a store of parts of 500 rows: the directory that holds it (removed when
/// dropped), the store's path and the trace in memory.
fn in_parts(spec: &str) -> (tempfile::TempDir, std::path::PathBuf, commdb_catalog::Trace) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 500).unwrap();
    (dir, store, trace)
}

#[test]
fn a_store_in_parts_is_queried_like_one_file_and_filters_skip_parts() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let spec = IN_PARTS;
    let (_dir, store, trace) = in_parts(spec);
    let queries = [
        "SELECT count(*), sum(duration), min(send_ts), max(recv_ts) FROM messages WHERE send_ts BETWEEN 1000000 AND 1500000",
        "SELECT rank, kind, count(*), sum(ts) FROM events WHERE rank IN (3, 11) GROUP BY 1, 2 ORDER BY 1, 2",
        "SELECT region, count(*), sum(exclusive) FROM calls GROUP BY region ORDER BY region",
        "SELECT size_bucket, locality, criterion_ns FROM latency_criteria() ORDER BY 1, 2",
        "SELECT count(*), round(sum(latency), 6) FROM message_latency()",
        // MIN and MAX of different expressions over the parts (DataFusion 55's dynamic filter
        // for them pruned parts the other still needed).
        "SELECT min(send_ts), max(coalesce(recv_ts, send_ts)), max(recv_ts) FROM messages",
        "SELECT min(rank), max(ts + 1), min(ts) FROM events",
        // The per-rank sweeps read the calls' parts in rank order as they stream.
        "SELECT rank, thread, slot_start, region, time_in_slot_ns FROM lod_calls(pixels => 30) ORDER BY 1, 2, 3",
        "SELECT path, rank, calls, inclusive_ns, exclusive_ns FROM call_tree() ORDER BY 1, 2",
        "SELECT bin, region, time_ns FROM time_profile(bins => 20) ORDER BY 1, 2",
        "SELECT rank, call_seq, compute_delta_ns, comm_delta_ns, CAST(path AS VARCHAR) FROM compute_deltas() ORDER BY 1, 2",
    ];
    let (in_memory, _) = answers(&runtime, spec, &queries);
    let (in_parts, opened) = answers(&runtime, &store.display().to_string(), &queries);
    assert_eq!(in_parts, in_memory);
    for t in ["events", "calls", "messages"] {
        let file = opened.stored_file(t).unwrap();
        assert!(file.files.len() > 2, "{t} is written in parts: {:?}", file.files);
        assert!(file.files[0].0.ends_with(format!("{t}/part-00000.parquet")));
        assert_eq!(opened.built_rows(t), None);
    }
    // Read whole, the parts give the table back in its order.
    let back = commdb_catalog::store::read(&store).unwrap();
    for t in commdb_catalog::model::TABLES {
        let a = arrow::compute::concat_batches(&t.schema(), &trace.table(t.name).unwrap()).unwrap();
        let b = arrow::compute::concat_batches(&t.schema(), &back.table(t.name).unwrap()).unwrap();
        assert_eq!(a.num_rows(), b.num_rows(), "{}", t.name);
        if !matches!(t.name, "events" | "calls" | "messages" | "collectives" | "metrics" | "states") {
            continue;
        }
        // Values compared, not dictionary keys (a Parquet file encodes its own dictionaries).
        let plain = |c: &arrow::array::ArrayRef| match c.data_type() {
            arrow::datatypes::DataType::Dictionary(_, v) => arrow::compute::cast(c, v).unwrap(),
            _ => c.clone(),
        };
        for (x, y) in a.columns().iter().zip(b.columns()) {
            assert_eq!(plain(x).as_ref(), plain(y).as_ref(), "{}", t.name);
        }
    }
    // A window of send time reads only the parts whose range of send_ts overlaps it.
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    let window = "SELECT count(*), sum(duration) FROM messages WHERE send_ts BETWEEN 1000000 AND 1500000";
    let plan = runtime.block_on(session.collect(&format!("EXPLAIN {window}"))).unwrap();
    let text = format!("{:?}", plan);
    let parts = opened.stored_file("messages").unwrap().files;
    let read: Vec<&str> = parts
        .iter()
        .filter_map(|(p, _, _)| p.file_name()?.to_str())
        .filter(|name| text.contains(&format!("messages/{name}")))
        .collect();
    assert!(!read.is_empty() && read.len() < parts.len(), "{} of {} parts read: {read:?}", read.len(), parts.len());
    let expected = runtime.block_on(session.collect(window)).unwrap();
    // The calls' parts are merged in rank order as they stream, never sorted.
    let plan = runtime.block_on(session.collect("EXPLAIN SELECT count(*) FROM call_tree()")).unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&plan).unwrap().to_string();
    assert!(
        text.contains("call_tree: analysis, streamed by rank") && text.contains("SortPreservingMergeExec"),
        "{text}"
    );
    assert!(text.contains("output_ordering=[rank@") && !text.contains("SortExec: "), "{text}");
    // A damaged part is named by the first query that reads the damaged column of it; one the
    // window does not read is not checked.
    let far = parts.iter().map(|(p, _, _)| p).find(|p| !read.iter().any(|r| p.ends_with(r))).unwrap();
    crate::store_checks::damage_column(far, "duration");
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    assert_eq!(runtime.block_on(session.collect(window)).unwrap(), expected);
    let err = runtime.block_on(session.collect("SELECT sum(duration) FROM messages")).unwrap_err().to_string();
    let name = far.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name) && err.contains("damaged"), "{err}");
}

#[test]
fn a_store_is_queried_in_its_files_with_the_same_answers() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let spec = "generate:ranks=16,ranks-per-node=4,iterations=8";
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write(&trace, &store).unwrap();
    let queries = [
        "SELECT count(*), sum(duration), min(send_ts), max(recv_ts) FROM messages WHERE src = 3 AND send_ts > 1000000",
        "SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind",
        "SELECT region, count(*), sum(exclusive) FROM calls GROUP BY region ORDER BY region",
        "SELECT size_bucket, locality, criterion_ns FROM latency_criteria() ORDER BY 1, 2",
        "SELECT count(*) FROM collectives c JOIN messages m ON c.rank = m.src",
    ];
    let answers = |path: &str| answers(&runtime, path, &queries);
    let (in_memory, _) = answers(spec);
    let (in_files, opened) = answers(&store.display().to_string());
    assert_eq!(in_files, in_memory);
    for t in ["events", "calls", "messages", "collectives"] {
        assert_eq!(opened.built_rows(t), None, "{t} was scanned in its file, not read into memory");
        assert!(opened.stored_file(t).is_some());
    }
    // A damaged file is found by the first query that scans it.
    damage(&store.join("messages.parquet"));
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    let err = runtime.block_on(session.collect("SELECT count(*) FROM messages")).unwrap_err().to_string();
    assert!(err.contains("messages.parquet") && err.contains("damaged"), "{err}");
}

#[test]
fn min_and_max_of_different_expressions_over_a_store_are_exact_every_time() {
    // DataFusion 55's dynamic filter for MIN and MAX, built from the aggregates it supports,
    // pruned parts that another aggregate of the same query needed, so the answer changed
    // from run to run (apache/datafusion#24816); the session turns it off.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let spec = IN_PARTS;
    let (_dir, store, _) = in_parts(spec);
    let query =
        "SELECT min(send_ts), max(coalesce(recv_ts, send_ts)), min(bytes), max(recv_ts - send_ts) FROM messages";
    let (expected, _) = answers(&runtime, spec, &[query]);
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    for run in 0..20 {
        let got = runtime.block_on(session.collect(query)).unwrap();
        let got = arrow::util::pretty::pretty_format_batches(&got).unwrap().to_string();
        let want = &expected[0];
        // The four numbers of the one row (the table's header has no digits but its types').
        let numbers = |t: &str| -> Vec<String> {
            let cells = t.split(|c: char| !c.is_ascii_digit()).filter(|x| !x.is_empty()).map(str::to_string);
            let all: Vec<String> = cells.collect();
            all[all.len() - 4..].to_vec()
        };
        assert_eq!(numbers(&got), numbers(want), "run {run}: {got} against {want}");
    }
}

#[test]
fn a_store_converted_again_under_a_reader_is_refused_never_mixed() {
    // A session reads a store in parts; another conversion replaces it at the same path. The
    // session's next scan is refused with an error saying so (never rows of the new store
    // read with the old manifest), and reopening reads the new one.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let write = |ranks: i32| {
        let trace = generate(&GeneratorConfig { ranks, iterations: 4, ..GeneratorConfig::default() })
            .unwrap()
            .trace
            .build()
            .unwrap();
        commdb_catalog::store::write_in_parts(&trace, &store, 200).unwrap();
    };
    write(8);
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), Some("run"), &OpenOptions::default()).unwrap();
    let before = count(&mut session, &runtime, "SELECT count(*) FROM run.events").unwrap();
    write(12);
    for sql in ["SELECT count(*) FROM run.events", "SELECT count(*) FROM run.messages WHERE send_ts > 0"] {
        let e = count(&mut session, &runtime, sql).unwrap_err();
        assert!(e.contains("the store was replaced while this query read it"), "{sql}: {e}");
    }
    let mut fresh = commdb_tests::session();
    fresh.open(&store.display().to_string(), Some("run"), &OpenOptions::default()).unwrap();
    assert!(count(&mut fresh, &runtime, "SELECT count(*) FROM run.events").unwrap() > before);
}

/// The columns each scan of the messages' parts reads in `plan` (EXPLAIN's text), by name.
fn messages_scans(plan: &str) -> Vec<Vec<String>> {
    plan.lines()
        .filter(|line| line.contains("messages/part-"))
        .filter_map(|line| {
            let from = line.find("projection=[")? + "projection=[".len();
            let to = from + line[from..].find(']')?;
            Some(line[from..to].split(", ").map(|c| c.split('@').next().unwrap_or(c).to_string()).collect())
        })
        .collect()
}

#[test]
fn an_analysis_that_passes_the_messages_through_reads_only_the_columns_the_query_reads() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (_dir, store, _trace) = in_parts(IN_PARTS);
    let mut session = commdb_tests::session();
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    let explain = |session: &mut commdb_catalog::Session, sql: &str| {
        let plan = runtime.block_on(session.collect(&format!("EXPLAIN {sql}"))).unwrap();
        arrow::util::pretty::pretty_format_batches(&plan).unwrap().to_string()
    };
    let all = model::TABLES.iter().find(|t| t.name == "messages").unwrap().schema().fields().len();
    // The latencies' scan (and the criteria's, unless they are known) each read a few of the
    // messages' 21 columns.
    let narrow = "SELECT src, msg_id, latency, delayed FROM message_latency() ORDER BY msg_id";
    let plan = explain(&mut session, narrow);
    let scans = messages_scans(&plan);
    assert!((1..=2).contains(&scans.len()), "{plan}");
    for scan in &scans {
        assert!(scan.len() < 8 && scan.len() < all, "{scan:?} of {all}\n{plan}");
    }
    assert!(scans.iter().any(|s| s.contains(&"src".to_string()) && s.contains(&"msg_id".to_string())), "{scans:?}");
    assert!(scans.iter().all(|s| !s.contains(&"tag".to_string())), "{scans:?}");
    // A query that reads every column reads them all, and the narrow one's rows are its rows.
    let plan = explain(&mut session, "SELECT * FROM message_latency()");
    assert!(messages_scans(&plan).iter().any(|s| s.len() == all), "{plan}");
    let whole = runtime.block_on(session.collect("SELECT * FROM message_latency() ORDER BY msg_id")).unwrap();
    let whole = arrow::compute::concat_batches(&whole[0].schema(), &whole).unwrap();
    let read = runtime.block_on(session.collect(narrow)).unwrap();
    let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
    assert!(read.num_rows() > 1000, "{} messages", read.num_rows());
    for name in ["src", "msg_id", "latency", "delayed"] {
        let a = read.column_by_name(name).unwrap();
        let b = whole.column_by_name(name).unwrap();
        assert_eq!(a.as_ref(), b.as_ref(), "{name}");
    }
    // Counted, and read by another analysis's SQL (rank_diagnosis reads seven of its columns).
    let counted = count(&mut session, &runtime, "SELECT count(*) FROM message_latency() WHERE delayed").unwrap();
    let expected = count(
        &mut session,
        &runtime,
        "SELECT count(*) FROM (SELECT * FROM message_latency()) m WHERE m.delayed AND m.tag = m.tag",
    )
    .unwrap();
    assert_eq!(counted, expected);
    // Under a union and a filter, which do not narrow the call, it reads every column.
    let all_rows = count(&mut session, &runtime, "SELECT count(*) FROM message_latency()").unwrap();
    let union = "SELECT count(*) FROM (SELECT src FROM message_latency() UNION ALL SELECT dst FROM message_latency() WHERE delayed)";
    assert_eq!(count(&mut session, &runtime, union), Ok(all_rows + counted));
}
