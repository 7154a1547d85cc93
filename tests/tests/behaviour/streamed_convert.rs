//! Converting an OTF2 archive, a Paraver or a CSV trace a group of ranks at a time
//! (commdb_catalog::convert) gives the store that the trace in memory gives, on traces whose messages, channels and collectives
//! cross the groups' boundaries: every table has the same rows in the same order, warnings
//! included; a conversion that fails half-way leaves nothing at the target.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use commdb_catalog::convert::{self, Limits};
use commdb_catalog::events::EventKind;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};
use commdb_catalog::trace::RawTrace;
use commdb_catalog::{OpenOptions, model};

/// Groups of about two ranks, buckets of a few hundred halves, parts of 700 rows.
const SMALL: Limits = Limits { group_events: 300, part_rows: 700, bucket_events: 1500 };

fn archive(raw: &RawTrace) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    commdb_catalog::export::otf2::write(raw, &dir.path().join("trace")).unwrap();
    let anchor = dir.path().join("trace").join("traces.otf2").display().to_string();
    (dir, anchor)
}

fn plain(c: &ArrayRef) -> ArrayRef {
    match c.data_type() {
        DataType::Dictionary(_, v) => arrow::compute::cast(c, v).unwrap(),
        _ => c.clone(),
    }
}

fn table(trace: &commdb_catalog::Trace, t: &model::TableDoc) -> RecordBatch {
    arrow::compute::concat_batches(&t.schema(), &trace.table(t.name).unwrap()).unwrap()
}

/// Convert in groups and compare every table with the trace opened in memory.
fn same_as_in_memory(anchor: &str, options: &OpenOptions, limits: &Limits) -> convert::Converted {
    let in_memory = commdb_catalog::open(anchor, options).unwrap();
    let out = tempfile::tempdir().unwrap();
    let store = out.path().join("store");
    assert!(commdb_catalog::formats::in_groups(anchor, options));
    let converted = commdb_catalog::formats::convert(std::path::Path::new(anchor), &store, options, limits).unwrap();
    let back = commdb_catalog::store::read(&store).unwrap();
    for t in model::TABLES {
        let (a, b) = (table(&in_memory, t), table(&back, t));
        assert_eq!(a.num_rows(), b.num_rows(), "{}: rows", t.name);
        for (k, (x, y)) in a.columns().iter().zip(b.columns()).enumerate() {
            assert_eq!(plain(x).as_ref(), plain(y).as_ref(), "{}: column {}", t.name, t.schema().field(k).name());
        }
    }
    assert_eq!(converted.events as usize, in_memory.row_count("events").unwrap());
    assert_eq!(converted.messages as usize, in_memory.row_count("messages").unwrap());
    converted
}

#[test]
fn non_blocking_exchange_with_skewed_clocks_and_several_messages_per_channel() {
    let cfg = GeneratorConfig {
        ranks: 24,
        ranks_per_node: 4,
        iterations: 8,
        clock_skew: true,
        imbalance: commdb_catalog::generate::parse_imbalance("3,17:3").ok(),
        ..GeneratorConfig::default()
    };
    let (_dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &SMALL);
    assert!(converted.groups >= 10, "the ranks are read in many groups: {}", converted.groups);
    // Parts are cut within and across groups.
    let store = tempfile::tempdir().unwrap();
    let target = store.path().join("s");
    let limits = Limits { part_rows: 200, ..SMALL };
    convert::otf2(std::path::Path::new(&anchor), &target, &OpenOptions::default(), &limits).unwrap();
    let opened = commdb_catalog::store::read(&target).unwrap();
    for t in ["events", "calls", "messages"] {
        assert!(opened.stored_file(t).unwrap().files.len() > 2, "{t} in parts");
    }
}

#[test]
fn blocking_master_worker_receives_posted_before_the_sends_group_is_read() {
    // Rank 0 receives from every worker: its receives are read in the first group, their
    // sends in every later one.
    let cfg = GeneratorConfig {
        ranks: 20,
        ranks_per_node: 3,
        iterations: 5,
        pattern: Pattern::MasterWorker,
        ..GeneratorConfig::default()
    };
    let (_dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    same_as_in_memory(&anchor, &OpenOptions::default(), &SMALL);
    // One group and one bucket give the same store too.
    let whole = Limits { group_events: u64::MAX, part_rows: 1 << 20, bucket_events: u64::MAX };
    assert_eq!(same_as_in_memory(&anchor, &OpenOptions::default(), &whole).groups, 1);
    // So does any correction but the controlled logical clock, which reads the whole trace.
    let off = OpenOptions { clock_correction: commdb_catalog::clock::Correction::Off, ..OpenOptions::default() };
    same_as_in_memory(&anchor, &off, &SMALL);
    let clc = OpenOptions { clock_correction: commdb_catalog::clock::Correction::Clc, ..OpenOptions::default() };
    assert!(!commdb_catalog::formats::in_groups(&anchor, &clc));
}

#[test]
fn unmatched_halves_in_different_groups_are_kept_and_counted_alike() {
    let cfg = GeneratorConfig { ranks: 16, ranks_per_node: 4, iterations: 4, ..GeneratorConfig::default() };
    let mut raw = generate(&cfg).unwrap().trace;
    // A receive on rank 13 and one on rank 2 get a tag no send has: two sends and two receives
    // lose their partner, in groups far apart.
    let mut changed = 0;
    for part in &mut raw.events.parts {
        for i in 0..part.len() {
            let recv = matches!(part.kind(i), EventKind::Irecv | EventKind::Recv);
            if recv && (part.rank[i] == 13 || part.rank[i] == 2) && part.tag[i] != 77 {
                part.tag[i] = 77;
                changed += 1;
                break;
            }
        }
    }
    assert_eq!(changed, 2);
    // Rank 9 reports another operation for its third collective.
    let part = raw.events.parts.iter_mut().find(|p| p.rank.contains(&9)).unwrap();
    let third = (0..part.len()).filter(|&i| part.rank[i] == 9 && part.kind(i) == EventKind::CollEnd).nth(2).unwrap();
    part.op[third] = part.op[third] % 3 + 2;
    let (_dir, anchor) = archive(&raw);
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &SMALL);
    assert_eq!(converted.warnings.count("unmatched_send"), 2);
    assert_eq!(converted.warnings.count("unmatched_recv"), 2);
    assert_eq!(converted.warnings.count("collective_op_mismatch"), 1);
}

#[test]
fn a_conversion_that_fails_half_way_leaves_nothing_at_the_target() {
    let cfg = GeneratorConfig { ranks: 12, ranks_per_node: 4, iterations: 4, ..GeneratorConfig::default() };
    let (dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    // The event file of the last rank is cut short: its group fails after earlier groups
    // were written.
    let evt = dir.path().join("trace").join("traces").join("11.evt");
    let data = std::fs::read(&evt).unwrap();
    std::fs::write(&evt, &data[..data.len() / 2]).unwrap();
    let out = tempfile::tempdir().unwrap();
    let store = out.path().join("store");
    let err = convert::otf2(std::path::Path::new(&anchor), &store, &OpenOptions::default(), &SMALL).unwrap_err();
    assert!(err.to_string().contains("11.evt"), "the damaged file is named: {err}");
    assert!(!store.exists(), "no store at the target");
    let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "nothing left beside it: {left:?}");
}

#[test]
fn an_archive_generated_as_the_run_goes_is_the_one_written_from_memory() {
    let small = GeneratorConfig {
        ranks: 12,
        ranks_per_node: 4,
        iterations: 30,
        clock_skew: true,
        sync_sessions: 2,
        ..GeneratorConfig::default()
    };
    // Event files of several 1 MiB chunks, written a few iterations at a time.
    let long = GeneratorConfig { ranks: 4, ranks_per_node: 2, iterations: 12000, ..GeneratorConfig::default() };
    for cfg in [small, long] {
        same_archive(&cfg);
    }
}

fn same_archive(cfg: &GeneratorConfig) {
    let cfg = cfg.clone();
    let generated = generate(&cfg).unwrap();
    let (whole, _) = archive(&generated.trace);
    let streamed = tempfile::tempdir().unwrap();
    // Hand-overs every few iterations, each rank's file written in pieces.
    let truth = commdb_catalog::export::otf2::write_generated(
        &cfg,
        streamed.path(),
        500,
        commdb_catalog::export::otf2::Version::CURRENT,
    )
    .unwrap();
    assert_eq!(truth, generated.truth);
    let files = |root: &std::path::Path| {
        let mut out = Vec::new();
        for sub in [root.to_path_buf(), root.join("traces")] {
            for e in std::fs::read_dir(&sub).unwrap().flatten().filter(|e| e.path().is_file()) {
                out.push((e.path().strip_prefix(root).unwrap().to_path_buf(), std::fs::read(e.path()).unwrap()));
            }
        }
        out.sort();
        out
    };
    let (a, b) = (files(&whole.path().join("trace")), files(streamed.path()));
    assert_eq!(a.len(), b.len());
    assert!(a.len() > cfg.ranks as usize * 2, "event and definition files of every location");
    let largest = a.iter().map(|f| f.1.len()).max().unwrap();
    assert!(cfg.iterations < 1000 || largest > 2 << 20, "files of several chunks: {largest} bytes");
    for ((pa, da), (pb, db)) in a.iter().zip(&b) {
        assert_eq!(pa, pb);
        assert!(da == db, "{} differs", pa.display());
    }
}

#[test]
fn score_p_archives_convert_in_groups_as_in_memory() {
    let Some(shared) = commdb_tests::shared_data() else {
        println!("skipped: ../shared/data is absent (the Score-P archives)");
        return;
    };
    // One rank per group: the metric samples of the PAPI run are written group by group.
    let one_rank = Limits { group_events: 1, part_rows: 50, bucket_events: 10 };
    for name in ["ping-pong", "ping-pong-papi"] {
        let anchor = shared.join("otf2").join(name).join("traces.otf2");
        let converted = same_as_in_memory(&anchor.display().to_string(), &OpenOptions::default(), &one_rank);
        assert!(converted.groups >= 2 && converted.messages > 0, "{name}: {converted:?}");
    }
}

#[test]
fn a_thousand_ranks_on_many_nodes_convert_in_groups_as_in_memory() {
    // 1,024 ranks, 32 per node, with bad mapping and background traffic: about 25 groups of
    // ranks and 8 buckets of halves.
    let cfg = GeneratorConfig::parse_spec(
        "ranks=1024,ranks-per-node=32,iterations=4,bad-mapping,background-traffic=0ms:10ms:3,clock-skew",
    )
    .unwrap();
    let (_dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    let limits = Limits { group_events: 8_000, part_rows: 40_000, bucket_events: 30_000 };
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &limits);
    assert!(converted.groups >= 20, "{converted:?}");
}

#[test]
fn messages_of_more_than_one_batch_keep_their_ids_across_the_merge() {
    // 1,024 ranks x 4 neighbours x 70 iterations: 286,720 messages, more than one batch of the
    // merge (262,144).
    let cfg = GeneratorConfig::parse_spec("ranks=1024,ranks-per-node=32,iterations=70").unwrap();
    let (_dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &Limits::default());
    assert!(converted.messages > 1 << 18, "{converted:?}");
}

/// A generated trace written as a Paraver trace: the directory and the .prv.
fn paraver(cfg: &GeneratorConfig) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let trace = generate(cfg).unwrap().trace.build().unwrap();
    commdb_catalog::export::paraver::write(&trace, dir.path(), "run").unwrap();
    let prv = dir.path().join("run.prv").display().to_string();
    (dir, prv)
}

#[test]
fn paraver_traces_convert_in_groups_as_in_memory() {
    // Extrae's shapes: two applications (the second one's counter kept as a metric), a cut,
    // a partner outside the trace, a record of another type, a type not in the .pcf,
    // collectives, counters, a compressed file, OpenMP threads whose locks' acquisitions
    // are numbered across them, and CUDA streams tied to their host threads. One task per group.
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join("paraver");
    let one_task = Limits { group_events: 1, part_rows: 5, bucket_events: 4 };
    for name in ["extrae.prv", "counters/counters.prv", "gz/extrae.prv.gz", "omp/omp.prv", "cuda/cuda.prv"] {
        let prv = data.join(name).display().to_string();
        let converted = same_as_in_memory(&prv, &OpenOptions::default(), &one_task);
        let tasks = if name.starts_with("counters") { 1 } else { 2 };
        assert!(converted.groups >= tasks, "{name}: {converted:?}");
    }
    let prv = data.join("extrae.prv").display().to_string();
    let converted = same_as_in_memory(&prv, &OpenOptions::default(), &SMALL);
    for code in ["paraver_cut", "paraver_partner_outside", "paraver_record_type", "paraver_type_not_in_pcf"] {
        assert_eq!(converted.warnings.count(code), 1, "{code}");
    }
}

#[test]
fn generated_paraver_traces_of_hundreds_of_ranks_convert_in_groups_as_in_memory() {
    // 256 ranks over several 4 MiB pieces of the file, nodes of 16, an imbalanced rank and
    // messages between every group; and master-worker, whose receives on rank 0 are split
    // from sends in every other group.
    for spec in [
        "ranks=256,ranks-per-node=16,iterations=40,imbalance=3:2,bad-mapping",
        "ranks=96,ranks-per-node=8,iterations=10,pattern=master-worker",
        "ranks=64,ranks-per-node=8,iterations=6,pattern=alltoall",
    ] {
        let cfg = GeneratorConfig::parse_spec(spec).unwrap();
        let (_dir, prv) = paraver(&cfg);
        if spec.starts_with("ranks=256") {
            let bytes = std::fs::metadata(&prv).unwrap().len();
            assert!(bytes > 8 << 20, "{spec}: {bytes} bytes, more than two pieces of 4 MiB");
        }
        let limits = Limits { group_events: 4_000, part_rows: 30_000, bucket_events: 40_000 };
        let converted = same_as_in_memory(&prv, &OpenOptions::default(), &limits);
        assert!(converted.groups >= 4 && converted.messages > 0, "{spec}: {converted:?}");
    }
}

#[test]
fn a_paraver_conversion_that_fails_half_way_leaves_nothing_beside_the_target() {
    let cfg = GeneratorConfig::parse_spec("ranks=16,ranks-per-node=4,iterations=4").unwrap();
    let (dir, prv) = paraver(&cfg);
    let text = std::fs::read_to_string(&prv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let bad = lines.len() - 3;
    let damaged: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| if i == bad { "2:1:1:1:1:x:1:1".to_string() } else { l.to_string() })
        .collect();
    std::fs::write(&prv, damaged.join("\n") + "\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("store");
    let e = commdb_catalog::formats::convert(std::path::Path::new(&prv), &target, &OpenOptions::default(), &SMALL)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("run.prv:{}", bad + 1)), "{e}");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing left beside the target");
    drop(dir);
}

#[test]
fn csv_traces_of_both_shapes_convert_in_groups_as_in_memory() {
    // The PCLVis shape (nodes from a column or a nodes file) and the event export shape
    // (calls, non-blocking messages, collectives, threads). One rank per group.
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let one_rank = Limits { group_events: 1, part_rows: 5, bucket_events: 4 };
    for name in ["latency.csv", "three_ranks.csv", "nonblocking_events.csv", "lod_events.csv", "collective_waits.csv"] {
        let csv = data.join(name).display().to_string();
        let converted = same_as_in_memory(&csv, &OpenOptions::default(), &one_rank);
        assert!(converted.groups >= 2 && converted.events > 0, "{name}: {converted:?}");
    }
    let options = OpenOptions { nodes: Some(data.join("three_ranks_nodes.csv")), ..OpenOptions::default() };
    same_as_in_memory(&data.join("three_ranks.csv").display().to_string(), &options, &one_rank);
}

#[test]
fn a_thousand_ranks_in_a_shuffled_csv_convert_in_groups_as_in_memory() {
    // Every message of a 1,024-rank run as a send row and a receive row of the PCLVis shape,
    // in a shuffled order: each rank's rows are spread over the file, and a channel's sends
    // and receives sit in different groups.
    let cfg = GeneratorConfig::parse_spec("ranks=1024,ranks-per-node=32,iterations=3,bad-mapping,clock-skew").unwrap();
    let trace = generate(&cfg).unwrap().trace.build().unwrap();
    let m = table(&trace, model::table_doc("messages").unwrap());
    let column = |name: &str| arrow::compute::cast(m.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
    let (src, dst, bytes, send, recv, tag) =
        (column("src"), column("dst"), column("bytes"), column("send_ts"), column("recv_ts"), column("tag"));
    let int = |c: &ArrayRef, i: usize| c.as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().value(i);
    let mut rows = Vec::new();
    for i in 0..m.num_rows() {
        let (s, d, b, t) = (int(&src, i), int(&dst, i), int(&bytes, i), int(&tag, i));
        rows.push(format!("{s},send,{},{s},{d},{b},{t}", int(&send, i)));
        rows.push(format!("{d},recv,{},{s},{d},{b},{t}", int(&recv, i)));
    }
    // A fixed shuffle (multiplicative hashing of the row index).
    let n = rows.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shuffled.csv");
    let text: String = std::iter::once("rank,type,timestamp,source,destination,size,tag".to_string())
        .chain(order.iter().map(|&i| rows[i].clone()))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&path, text + "\n").unwrap();
    let limits = Limits { group_events: 2_000, part_rows: 5_000, bucket_events: 10_000 };
    let converted = same_as_in_memory(&path.display().to_string(), &OpenOptions::default(), &limits);
    assert!(converted.groups >= 10 && converted.messages as usize == m.num_rows(), "{converted:?}");
}

#[test]
fn a_csv_conversion_that_fails_half_way_names_the_line_and_leaves_nothing() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("store");
    let e = commdb_catalog::formats::convert(&data.join("bad_type.csv"), &target, &OpenOptions::default(), &SMALL)
        .unwrap_err()
        .to_string();
    let in_memory = commdb_catalog::open(&data.join("bad_type.csv").display().to_string(), &OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(e, in_memory);
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing left beside the target");
}

#[test]
fn a_paraver_trace_written_from_a_store_through_run_files_is_the_one_written_from_memory() {
    // 64 ranks with skewed clocks (times moved before 0 are shifted), collectives and
    // messages: written from memory with every record sorted at once, and from a store of
    // parts with 1,000 records sorted at a time, the files are the same, byte for byte.
    let cfg =
        GeneratorConfig::parse_spec("ranks=64,ranks-per-node=8,iterations=6,clock-skew,pattern=alltoall").unwrap();
    let trace = generate(&cfg).unwrap().trace.build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    commdb_catalog::export::paraver::write(&trace, &dir.path().join("a"), "run").unwrap();
    let store = dir.path().join("store");
    commdb_catalog::store::write_in_parts(&trace, &store, 3_000).unwrap();
    let stored = commdb_catalog::store::read(&store).unwrap();
    assert!(stored.stored_file("events").unwrap().files.len() > 2, "events in parts");
    commdb_catalog::export::paraver::write_sorting(&stored, &dir.path().join("b"), "run", 1_000, &Default::default())
        .unwrap();
    for file in ["run.prv", "run.pcf", "run.row"] {
        let (a, b) = (dir.path().join("a").join(file), dir.path().join("b").join(file));
        assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{file} differs");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("b")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 3, "no run files left: {leftovers:?}");
}

#[test]
fn threads_of_hybrid_runs_convert_in_groups_as_in_memory() {
    // otf2/omp_waits: a message between worker threads (MPI_THREAD_MULTIPLE), one group a rank;
    // a generated hybrid run of 12 ranks x 3 threads, its messages between masters.
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join("otf2");
    let anchor = data.join("omp_waits").join("traces.otf2").display().to_string();
    let one_rank = Limits { group_events: 1, part_rows: 5, bucket_events: 4 };
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &one_rank);
    assert_eq!(converted.groups, 2, "{converted:?}");
    let cfg = GeneratorConfig::parse_spec("ranks=12,ranks-per-node=4,iterations=4,threads=3").unwrap();
    let (_dir, anchor) = archive(&generate(&cfg).unwrap().trace);
    let converted = same_as_in_memory(&anchor, &OpenOptions::default(), &SMALL);
    assert!(converted.groups >= 4, "{converted:?}");
}
