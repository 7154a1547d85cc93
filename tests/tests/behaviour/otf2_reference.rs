//! Cross-checks of the OTF2 reader and writer against the reference OTF2 library: its
//! `otf2-print` (event counts per location and record type) on the Score-P traces in
//! ../shared/data, on an archive written by its Python writer (python3-otf2) and on archives
//! written by commdb. `.ci/run` installs the tools; without them these tests print why they
//! skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};
use commdb_tests::{project_root, shared_data};

fn otf2_print_available() -> bool {
    let ok = Command::new("otf2-print").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        println!("skip: otf2-print (Debian package otf2-tools) is not installed");
    }
    ok
}

fn kind_of(record: &str) -> Option<&'static str> {
    Some(match record {
        "ENTER" => "enter",
        "LEAVE" => "leave",
        "MPI_SEND" => "send",
        "MPI_ISEND" => "isend",
        "MPI_ISEND_COMPLETE" => "isend_complete",
        "MPI_IRECV_REQUEST" => "irecv_request",
        "MPI_RECV" => "recv",
        "MPI_IRECV" => "irecv",
        "MPI_REQUEST_TEST" => "request_test",
        "MPI_REQUEST_CANCELLED" => "request_cancelled",
        "MPI_COLLECTIVE_BEGIN" => "coll_begin",
        "MPI_COLLECTIVE_END" => "coll_end",
        "PROGRAM_BEGIN" => "program_begin",
        "PROGRAM_END" => "program_end",
        "BUFFER_FLUSH" => "buffer_flush",
        "METRIC" => "metric values",
        "THREAD_FORK" | "OMP_FORK" => "thread_fork",
        "THREAD_JOIN" | "OMP_JOIN" => "thread_join",
        "THREAD_TEAM_BEGIN" => "thread_team_begin",
        "THREAD_TEAM_END" => "thread_team_end",
        "THREAD_ACQUIRE_LOCK" | "OMP_ACQUIRE_LOCK" => "thread_acquire_lock",
        "THREAD_RELEASE_LOCK" | "OMP_RELEASE_LOCK" => "thread_release_lock",
        "THREAD_TASK_CREATE" | "OMP_TASK_CREATE" => "thread_task_create",
        "THREAD_TASK_SWITCH" | "OMP_TASK_SWITCH" => "thread_task_switch",
        "THREAD_TASK_COMPLETE" | "OMP_TASK_COMPLETE" => "thread_task_complete",
        "THREAD_CREATE" => "thread_create",
        "THREAD_BEGIN" => "thread_begin",
        "THREAD_WAIT" => "thread_wait",
        "THREAD_END" => "thread_end",
        "RMA_WIN_CREATE" => "rma_win_create",
        "RMA_WIN_DESTROY" => "rma_win_destroy",
        "RMA_PUT" => "rma_put",
        "RMA_GET" => "rma_get",
        "RMA_OP_COMPLETE_BLOCKING" => "rma_op_complete_blocking",
        "RMA_OP_COMPLETE_NON_BLOCKING" => "rma_op_complete_non_blocking",
        "RMA_OP_TEST" => "rma_op_test",
        "RMA_OP_COMPLETE_REMOTE" => "rma_op_complete_remote",
        // Records commdb keeps without their fields (counted in a warning).
        r if r.starts_with("RMA_") => "other",
        _ => return None,
    })
}

/// (location, kind) -> count as otf2-print reports it; metric events count their values.
fn reference_counts(anchor: &Path) -> BTreeMap<(i64, String), i64> {
    let out = Command::new("otf2-print").arg(anchor).output().expect("run otf2-print");
    assert!(out.status.success(), "otf2-print rejected {}: {}", anchor.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with(' ')) {
        let mut words = line.split_whitespace();
        let (Some(record), Some(location)) = (words.next(), words.next()) else { continue };
        let (Some(kind), Ok(location)) = (kind_of(record), location.parse::<i64>()) else { continue };
        let n = if kind == "metric values" {
            line.split(" Values:")
                .next()
                .and_then(|h| h.rsplit(", ").next())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1)
        } else {
            1
        };
        *counts.entry((location, kind.to_string())).or_insert(0) += n;
    }
    counts
}

/// The same counts from commdb's tables.
async fn commdb_counts(path: &Path) -> BTreeMap<(i64, String), i64> {
    let mut s = commdb_tests::session();
    s.open(&path.display().to_string(), Some("t"), &commdb_catalog::OpenOptions::default()).expect("open");
    let sql = "SELECT l.location_id, CAST(e.kind AS VARCHAR), count(*) FROM t.events e JOIN t.locations l \
               ON e.rank = l.rank AND e.thread = l.thread GROUP BY 1, 2 \
               UNION ALL SELECT l.location_id, 'metric values', count(*) FROM t.metrics m JOIN t.locations l \
               ON m.rank = l.rank AND m.thread = l.thread GROUP BY 1";
    let mut counts = BTreeMap::new();
    for b in s.collect(sql).await.expect("query") {
        let loc = b.column(0).as_primitive::<Int64Type>();
        let kind = arrow::compute::cast(b.column(1), &arrow::datatypes::DataType::Utf8).expect("cast");
        let kind = kind.as_string::<i32>();
        let n = b.column(2).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            if kind.is_valid(i) {
                counts.insert((loc.value(i), kind.value(i).to_string()), n.value(i));
            }
        }
    }
    counts
}

#[tokio::test]
async fn score_p_traces_match_otf2_print() {
    let Some(shared) = shared_data() else {
        println!("skip: ../shared/data is absent");
        return;
    };
    if !otf2_print_available() {
        return;
    }
    // OTF2 2.3 (ping-pong), 1.4 (the first three of casita/) and 2.0 (cloverleaf); MPI only,
    // MPI with OpenMP threads and CUDA streams, OpenACC with CUDA.
    let names = [
        "ping-pong",
        "ping-pong-papi",
        "casita/4_mpi_ls_barr",
        "casita/2_cuda_simple",
        "casita/2_jacobi_blame_cpu_015",
        "casita/2_cloverleaf_oaccregions_cudafull",
    ];
    for name in names {
        let anchor = shared.join("otf2").join(name).join("traces.otf2");
        let reference = reference_counts(&anchor);
        assert!(!reference.is_empty());
        assert_eq!(commdb_counts(&anchor).await, reference, "{name}");
        // Written back by commdb (OTF2 2.3, its thread records among them), the reference
        // reader reads the same records, except those commdb keeps without fields and the
        // metric samples (its writer writes none).
        let dir = tempfile::tempdir().unwrap();
        let raw = commdb_catalog::reading::otf2::read(&anchor).unwrap();
        commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
        let again = dir.path().join("traces.otf2");
        let kept: BTreeMap<_, _> =
            reference.into_iter().filter(|(k, _)| k.1 != "other" && k.1 != "metric values").collect();
        assert_eq!(reference_counts(&again), kept, "{name} written by commdb");
        // Opened, then exported from its tables (`commdb export --format otf2`): the same.
        let trace = commdb_catalog::formats::read(&anchor.display().to_string(), &Default::default()).unwrap();
        let exported = tempfile::tempdir().unwrap();
        commdb_catalog::export::named("otf2").unwrap().write(&trace, exported.path()).unwrap();
        assert_eq!(reference_counts(&exported.path().join("traces.otf2")), kept, "{name} exported by commdb");
    }
}

#[tokio::test]
async fn paraver_traces_exported_as_otf2_match_otf2_print() {
    // Extrae's traces (MPI; MPI with CUDA) written as OTF2 archives: the reference reader reads
    // as many records of each kind as commdb's events of the Paraver trace hold.
    if !otf2_print_available() {
        return;
    }
    for name in ["tests/data/paraver/extrae.prv", "tests/data/paraver/cuda"] {
        let path = project_root().join(name);
        let trace = commdb_catalog::formats::read(&path.display().to_string(), &Default::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        commdb_catalog::export::named("otf2").unwrap().write(&trace, dir.path()).unwrap();
        let anchor = dir.path().join("traces.otf2");
        let mut read: BTreeMap<String, i64> = BTreeMap::new();
        for ((_, kind), n) in reference_counts(&anchor) {
            *read.entry(kind).or_default() += n;
        }
        let mut held: BTreeMap<String, i64> = BTreeMap::new();
        for b in trace.table("events").unwrap() {
            let kind =
                arrow::compute::cast(b.column_by_name("kind").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
            for k in kind.as_string::<i32>().iter().flatten().filter(|k| *k != "other") {
                *held.entry(k.to_string()).or_default() += 1;
            }
        }
        assert!(!held.is_empty(), "{name}");
        assert_eq!(read, held, "{name}");
    }
}

#[tokio::test]
async fn the_threads_archive_matches_otf2_print() {
    // tests/data/otf2/threads (the reference writer's OpenMP records: teams, locks, tasks).
    if !otf2_print_available() {
        return;
    }
    let anchor = project_root().join("tests/data/otf2/threads/traces.otf2");
    let reference = reference_counts(&anchor);
    assert_eq!(reference.get(&(0, "thread_task_switch".to_string())), Some(&2));
    assert_eq!(commdb_counts(&anchor).await, reference);
}

#[tokio::test]
async fn locks_of_another_threading_model_are_kept_and_said() {
    // The same archive with its locks recorded as Pthreads mutexes: the events keep them
    // (without their model), and a warning counts each record of a model other than OpenMP.
    let dir = tempfile::tempdir().unwrap();
    let Some(anchor) = reference_archive("make_threads.py", &dir.path().join("p"), &["pthread"]) else { return };
    let mut s = commdb_tests::session();
    s.open(&anchor.display().to_string(), Some("p"), &Default::default()).unwrap();
    let locks = q(&mut s, "SELECT count(*), sum(held_ns) FROM lock_acquisitions('p.events')").await;
    assert_eq!(locks[0], ["4", "700"]);
    let warned = q(&mut s, "SELECT count FROM p.warnings WHERE code = 'otf2_thread_model'").await;
    assert_eq!(warned, [["8"]], "two acquisitions and two releases on each rank");
}

#[tokio::test]
async fn ping_pong_has_sixteen_matched_messages() {
    let Some(shared) = shared_data() else {
        println!("skip: ../shared/data is absent");
        return;
    };
    let mut s = commdb_tests::session();
    s.open(&shared.join("otf2/ping-pong").display().to_string(), Some("pp"), &Default::default()).unwrap();
    let b = s
        .collect("SELECT count(*), count(DISTINCT bytes), min(bytes), max(bytes), count(duration) FROM pp.messages")
        .await
        .unwrap();
    let v: Vec<i64> = (0..5).map(|c| b[0].column(c).as_primitive::<Int64Type>().value(0)).collect();
    assert_eq!(v, vec![16, 8, 16384, 2097152, 16]);
}

/// An archive written into `dir` by one of the reference-writer scripts in tests/otf2 with
/// `args` after the directory; None (and a printed reason) without the reference writer.
fn reference_archive(script: &str, dir: &Path, args: &[&str]) -> Option<PathBuf> {
    let script = project_root().join("tests/otf2").join(script);
    let out = Command::new("/usr/bin/python3").arg(&script).arg(dir).args(args).output();
    match out {
        Ok(o) if o.status.success() => Some(dir.join("traces.otf2")),
        Ok(o) => {
            println!(
                "skip: the reference Python writer failed (python3-otf2 not installed?): {}",
                String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
            );
            None
        }
        Err(e) => {
            println!("skip: /usr/bin/python3 cannot run: {e}");
            None
        }
    }
}

fn python_fixture(dir: &Path) -> Option<PathBuf> {
    reference_archive("make_fixture.py", dir, &[])
}

#[tokio::test]
async fn reference_writer_fixture_reads_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let Some(anchor) = python_fixture(&dir.path().join("fx")) else { return };
    if otf2_print_available() {
        assert_eq!(commdb_counts(&anchor).await, reference_counts(&anchor));
    }
    let mut s = commdb_tests::session();
    s.open(&anchor.display().to_string(), Some("fx"), &Default::default()).unwrap();
    let messages = commdb_tests::rows(
        &s.collect("SELECT src, dst, comm, tag, bytes, send_ts, recv_ts, recv_post_ts, send_complete_ts FROM fx.messages ORDER BY msg_id")
            .await
            .unwrap(),
    )
    .unwrap();
    let messages: Vec<String> = messages.into_iter().map(|r| r.join(" ")).collect();
    // Rank 1's ClockOffset points (ticks 1000: +250, ticks 9000: -150; the trace's zero is at
    // tick 1000) give the line master = 0.95 * local + 250: its recorded 1600, 500 and 2900
    // become 1770, 725 and 3005; the Irecv is posted when its call starts, local 2000: 2150.
    assert_eq!(messages, vec!["0 1 0 7 4096 1100 1770 725 1200", "2 1 1 3 800 2250 3005 2150 2450"]);
    let raw = commdb_tests::rows(
        &s.collect("SELECT string_agg(CAST(ts_local AS VARCHAR), ',' ORDER BY seq) FROM fx.events WHERE rank = 1 AND kind IN ('irecv_request', 'recv', 'irecv')")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(raw[0][0], "1600,2050,2900", "ts_local keeps the recorded times");
    let rows = commdb_tests::rows(
        &s.collect(
            "SELECT (SELECT string_agg(node, ',' ORDER BY rank) FROM fx.ranks), \
                    (SELECT count(*) FROM fx.locations WHERE rank = 0), \
                    (SELECT string_agg(CAST(root AS VARCHAR) || ':' || CAST(bytes_recv AS VARCHAR), ',' ORDER BY rank) FROM fx.collectives), \
                    (SELECT sum(value) FROM fx.metrics WHERE metric = 'temperature'), \
                    (SELECT string_agg(CAST(master_ts - local_ts AS VARCHAR), ',' ORDER BY session) FROM fx.clock_sync), \
                    (SELECT file || ':' || CAST(line AS VARCHAR) FROM fx.regions WHERE name = 'main')",
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(rows[0], vec!["node0,node0,node1", "2", "0:64,0:0,0:0", "73.75", "250,-150", "app.c:10"]);
}

#[tokio::test]
async fn commdb_archives_are_accepted_by_otf2_print() {
    if !otf2_print_available() {
        return;
    }
    for (pattern, skew) in [(Pattern::Stencil2d, true), (Pattern::MasterWorker, false), (Pattern::Alltoall, false)] {
        let cfg = GeneratorConfig { ranks: 8, iterations: 4, pattern, clock_skew: skew, ..GeneratorConfig::default() };
        let raw = generate(&cfg).unwrap().trace;
        let dir = tempfile::tempdir().unwrap();
        commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
        let anchor = dir.path().join("traces.otf2");
        let defs = Command::new("otf2-print").arg("-G").arg(&anchor).output().unwrap();
        assert!(defs.status.success(), "{}", String::from_utf8_lossy(&defs.stderr));
        // The run's absolute start (2026-03-02T08:00:00Z by default) is the archive's date.
        let defs = String::from_utf8_lossy(&defs.stdout);
        assert!(defs.contains("Date: 2026-03-02 08:00:00.000000000 +0000"), "{defs}");
        assert_eq!(commdb_counts(&anchor).await, reference_counts(&anchor), "{pattern:?}");
    }
}

/// A generated hybrid run (generate --threads) is written as Score-P writes OpenMP: the
/// reference reader finds OpenMP's locations and a team per rank over them, with no warning,
/// the regions' OpenMP roles, and every event.
#[tokio::test]
async fn commdb_hybrid_archives_define_openmp_as_score_p_does() {
    if !otf2_print_available() {
        return;
    }
    let cfg = GeneratorConfig { ranks: 4, iterations: 3, threads: 3, ..GeneratorConfig::default() };
    let raw = generate(&cfg).unwrap().trace;
    let dir = tempfile::tempdir().unwrap();
    commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
    let anchor = dir.path().join("traces.otf2");
    let defs = Command::new("otf2-print").arg("-G").arg(&anchor).output().unwrap();
    assert!(defs.status.success() && defs.stderr.is_empty(), "{}", String::from_utf8_lossy(&defs.stderr));
    let defs = String::from_utf8_lossy(&defs.stdout);
    assert!(
        defs.contains(
            "Name: \"OpenMP locations\" <43>, Type: COMM_LOCATIONS, Paradigm: OPENMP, Flags: NONE, 12 Members"
        ),
        "{defs}"
    );
    let team = "Name: \"OpenMP team of rank 1\" <39>, Type: COMM_GROUP, Paradigm: OPENMP, Flags: NONE, 3 Members: 3 (\"rank 1 master thread\" <3>), 4 (\"rank 1 OMP thread 1\" <4>), 5 (\"rank 1 OMP thread 2\" <5>)";
    assert!(defs.contains(team), "{defs}");
    assert!(defs.contains("Role: IMPLICIT_BARRIER, Paradigm: OPENMP"), "{defs}");
    let events = Command::new("otf2-print").arg(&anchor).output().unwrap();
    assert!(events.stderr.is_empty(), "{}", String::from_utf8_lossy(&events.stderr));
    assert_eq!(commdb_counts(&anchor).await, reference_counts(&anchor));
}

/// Every point-to-point event's peer as otf2-print resolves it: per location, in order, the
/// record and the peer's location id (None where otf2-print says INVALID).
fn reference_peers(anchor: &Path) -> BTreeMap<i64, Vec<(String, Option<i64>)>> {
    let out = Command::new("otf2-print").arg(anchor).output().expect("run otf2-print");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut peers: BTreeMap<i64, Vec<(String, Option<i64>)>> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(record), Some(location)) = (words.next(), words.next()) else { continue };
        if record != "MPI_SEND" && record != "MPI_RECV" {
            continue;
        }
        let field = if record == "MPI_SEND" { "Receiver: " } else { "Sender: " };
        let peer = line.split(field).nth(1).unwrap_or("");
        let peer = peer.split(')').next().unwrap_or("");
        let location_of_peer = peer.rsplit('<').next().and_then(|l| l.trim_end_matches('>').parse().ok());
        let location_of_peer = if peer.contains("INVALID") { None } else { location_of_peer };
        peers.entry(location.parse().unwrap()).or_default().push((record.to_string(), location_of_peer));
    }
    peers
}

/// The same from commdb's events: the peer rank's first location.
async fn commdb_peers(s: &mut commdb_catalog::Session, schema: &str) -> BTreeMap<i64, Vec<(String, Option<i64>)>> {
    let sql = format!(
        "SELECT l.location_id, CASE WHEN e.kind = 'send' THEN 'MPI_SEND' ELSE 'MPI_RECV' END, p.location_id \
         FROM {schema}.events e JOIN {schema}.locations l ON e.rank = l.rank AND e.thread = l.thread \
         LEFT JOIN {schema}.locations p ON p.rank = e.peer AND p.thread = 0 \
         WHERE e.kind IN ('send', 'recv') ORDER BY l.location_id, e.seq"
    );
    let mut peers: BTreeMap<i64, Vec<(String, Option<i64>)>> = BTreeMap::new();
    for row in commdb_tests::rows(&s.collect(&sql).await.unwrap()).unwrap() {
        let peer = (row[2] != "NULL").then(|| row[2].parse().unwrap());
        peers.entry(row[0].parse().unwrap()).or_default().push((row[1].clone(), peer));
    }
    peers
}

fn other_writer_fixture(dir: &Path, variant: &str) -> Option<PathBuf> {
    reference_archive("make_other_writers.py", dir, &[variant])
}

#[tokio::test]
async fn communicators_of_every_group_type_resolve_as_otf2_print_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some(anchor) = other_writer_fixture(&dir.path().join("self"), "self") else { return };
    let mut s = commdb_tests::session();
    s.open(&anchor.display().to_string(), Some("x"), &Default::default()).unwrap();
    if otf2_print_available() {
        assert_eq!(commdb_counts(&anchor).await, reference_counts(&anchor));
        assert_eq!(commdb_peers(&mut s, "x").await, reference_peers(&anchor));
    }
    // Self-sends on MPI_COMM_SELF, the sub-communicator's message and the one on the
    // GLOBAL_MEMBERS communicator match; the send to a rank the sub-communicator lacks keeps
    // a NULL receiver.
    let messages = q(&mut s, "SELECT src, dst, comm, recv_ts IS NOT NULL FROM x.messages ORDER BY msg_id").await;
    let messages: Vec<String> = messages.into_iter().map(|r| r.join(" ")).collect();
    assert_eq!(
        messages,
        ["0 0 1 true", "1 1 1 true", "2 2 1 true", "3 3 1 true", "3 1 2 true", "0 NULL 2 false", "2 3 3 true"]
    );
    assert_eq!(q(&mut s, "SELECT count(*) FROM x.messages WHERE dst IS NULL").await[0][0], "1");
    // Each barrier on MPI_COMM_SELF is an operation with one participant, so nobody waits.
    let coll = q(&mut s, "SELECT comm, instance, count(*) FROM x.collectives GROUP BY 1, 2 ORDER BY 1, 2").await;
    let coll: Vec<String> = coll.into_iter().map(|r| r.join(" ")).collect();
    assert_eq!(coll, ["1 0 1", "1 1 1", "1 2 1", "1 3 1", "2 0 2"]);
    let comms = q(&mut s, "SELECT name, size, CAST(members AS VARCHAR) FROM x.communicators ORDER BY comm").await;
    let comms: Vec<String> = comms.into_iter().map(|r| r.join(" ")).collect();
    assert_eq!(
        comms,
        ["MPI_COMM_WORLD 4 [0, 1, 2, 3]", "MPI_COMM_SELF 1 NULL", "sub 2 [3, 1]", "everyone 4 [0, 1, 2, 3]"]
    );
    let warnings = q(&mut s, "SELECT code, count FROM x.warnings ORDER BY code").await;
    let warnings: Vec<String> = warnings.into_iter().map(|r| r.join(" ")).collect();
    assert_eq!(warnings, ["otf2_rank_outside_communicator 1", "unmatched_send 1"]);
    let waits =
        q(&mut s, "SELECT count(*) FROM wait_states('x.messages', collectives => 'x.collectives') WHERE comm = 1")
            .await;
    assert_eq!(waits[0][0], "0", "one-member operations cannot wait");

    // commdb's own archive of the trace keeps MPI_COMM_SELF a COMM_SELF group.
    let out = dir.path().join("again");
    let raw = commdb_catalog::reading::otf2::read(&anchor).unwrap();
    commdb_catalog::export::otf2::write(&raw, &out).unwrap();
    s.open(&out.join("traces.otf2").display().to_string(), Some("y"), &Default::default()).unwrap();
    for t in ["messages", "collectives", "communicators"] {
        let (a, b) = (format!("SELECT * FROM x.{t}"), format!("SELECT * FROM y.{t}"));
        let (x, y) = (q(&mut s, &a).await, q(&mut s, &b).await);
        assert_eq!(x, y, "{t} after commdb's OTF2 writer");
    }
    if otf2_print_available() {
        let defs = Command::new("otf2-print").arg("-G").arg(out.join("traces.otf2")).output().unwrap();
        assert!(String::from_utf8_lossy(&defs.stdout).contains("Type: COMM_SELF"));
        assert_eq!(commdb_peers(&mut s, "y").await, reference_peers(&out.join("traces.otf2")));
    }
}

#[tokio::test]
async fn archives_written_as_otf2_1_x_read_as_otf2_print_reads_them() {
    // The reference writer's communicators of every group type (COMM_SELF, a sub-communicator,
    // GLOBAL_MEMBERS), written back by commdb as OTF2 1.0 (group types before 1.2, region
    // types, no anchor properties) and 1.4: both tools read the same events and peers, and
    // commdb the same messages, collectives and communicators.
    use commdb_catalog::export::otf2::{Version, write_as};
    let dir = tempfile::tempdir().unwrap();
    let Some(anchor) = other_writer_fixture(&dir.path().join("self"), "self") else { return };
    let mut s = commdb_tests::session();
    s.open(&anchor.display().to_string(), Some("x"), &Default::default()).unwrap();
    let raw = commdb_catalog::reading::otf2::read(&anchor).unwrap();
    for (i, version) in [Version(1, 0), Version(1, 4)].into_iter().enumerate() {
        let out = dir.path().join(format!("v{i}"));
        write_as(&raw, &out, version).unwrap();
        let old = out.join("traces.otf2");
        let schema = format!("v{i}");
        s.open(&old.display().to_string(), Some(&schema), &Default::default()).unwrap();
        for t in ["messages", "collectives", "communicators"] {
            let (a, b) = (format!("SELECT * FROM x.{t}"), format!("SELECT * FROM {schema}.{t}"));
            assert_eq!(q(&mut s, &a).await, q(&mut s, &b).await, "{t} of OTF2 {version}");
        }
        let info = q(&mut s, &format!("SELECT format_version FROM {schema}.trace_info")).await;
        assert_eq!(info[0][0], format!("{version}.0"));
        if otf2_print_available() {
            let anchor_text = Command::new("otf2-print").arg("-A").arg(&old).output().unwrap();
            let anchor_text = String::from_utf8_lossy(&anchor_text.stdout);
            assert!(anchor_text.contains(&format!("Version                        {version}.0")), "{anchor_text}");
            assert_eq!(commdb_counts(&old).await, reference_counts(&old), "OTF2 {version}");
            assert_eq!(commdb_peers(&mut s, &schema).await, reference_peers(&old), "OTF2 {version}");
        }
    }
}

#[tokio::test]
async fn ranks_without_a_node_class_are_placed_on_their_parent() {
    for (variant, class) in [("noclass", "(empty)"), ("custom", "'host'")] {
        let dir = tempfile::tempdir().unwrap();
        let Some(anchor) = other_writer_fixture(&dir.path().join(variant), variant) else { return };
        let mut s = commdb_tests::session();
        s.open(&anchor.display().to_string(), Some("x"), &Default::default()).unwrap();
        let rows = commdb_tests::rows(
            &s.collect(
                "SELECT (SELECT string_agg(node, ',' ORDER BY rank) FROM x.ranks), \
                        (SELECT message FROM x.warnings WHERE code = 'otf2_node_from_parent'), \
                        (SELECT count(*) FROM x.messages WHERE intra_node IS NULL AND dst IS NOT NULL)",
            )
            .await
            .unwrap(),
        )
        .unwrap();
        assert_eq!(rows[0][0], "n0,n0,n1,n1", "{variant}");
        assert!(rows[0][1].starts_with("4 of 4 ranks") && rows[0][1].contains(class), "{variant}: {}", rows[0][1]);
        assert_eq!(rows[0][2], "0", "{variant}: every matched message has a locality");
        let status =
            commdb_tests::rows(&s.collect("SELECT DISTINCT status FROM latency_criteria('x.messages')").await.unwrap())
                .unwrap();
        assert!(status.iter().all(|r| r[0] != "unknown_locality"), "{variant}: {status:?}");
    }
}

async fn q(s: &mut commdb_catalog::Session, sql: &str) -> Vec<Vec<String>> {
    commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap()
}

/// (location, region, metric) -> (calls, inclusive, exclusive) summed, computed from
/// otf2-print's events alone: the counters' values at each ENTER and LEAVE of a location (the
/// METRIC record at the same time stamp just before it), a stack of open calls, and each
/// call's inclusive value subtracted from its parent's exclusive one.
type CounterTotals = BTreeMap<(i64, String, String), (i64, f64, f64)>;

fn reference_counters(anchor: &Path) -> CounterTotals {
    let out = Command::new("otf2-print").arg(anchor).output().expect("run otf2-print");
    let text = String::from_utf8_lossy(&out.stdout);
    // Per location: the last metric values seen and the open calls (region, values at enter,
    // inclusive values of the calls nested in it).
    type Open = (String, BTreeMap<String, f64>, BTreeMap<String, f64>);
    let mut last: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
    let mut stacks: BTreeMap<i64, Vec<Open>> = BTreeMap::new();
    let mut totals = CounterTotals::new();
    for line in text.lines().filter(|l| !l.starts_with(' ')) {
        let mut words = line.split_whitespace();
        let (Some(record), Some(Ok(location))) = (words.next(), words.next().map(str::parse::<i64>)) else { continue };
        match record {
            "METRIC" => {
                let values = last.entry(location).or_default();
                // ("PAPI_TOT_CYC" <0>; UINT64; 98850), ...
                for part in line.split("(\"").skip(1) {
                    let name = part.split('"').next().unwrap_or("").to_string();
                    let value = part.split("; ").nth(2).and_then(|v| v.trim_end_matches([')', ',', ' ']).parse().ok());
                    if let Some(v) = value {
                        values.insert(name, v);
                    }
                }
            }
            "ENTER" | "LEAVE" => {
                let region =
                    line.split("Region: \"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string();
                let now = last.get(&location).cloned().unwrap_or_default();
                let stack = stacks.entry(location).or_default();
                if record == "ENTER" {
                    stack.push((region, now, BTreeMap::new()));
                    continue;
                }
                let (region, at_enter, nested) = stack.pop().expect("a LEAVE after its ENTER");
                for (metric, start) in &at_enter {
                    let inclusive = now[metric] - start;
                    let exclusive = inclusive - nested.get(metric).copied().unwrap_or(0.0);
                    let t = totals.entry((location, region.clone(), metric.clone())).or_insert((0, 0.0, 0.0));
                    *t = (t.0 + 1, t.1 + inclusive, t.2 + exclusive);
                    if let Some(parent) = stack.last_mut() {
                        *parent.2.entry(metric.clone()).or_insert(0.0) += inclusive;
                    }
                }
            }
            _ => {}
        }
    }
    totals
}

#[tokio::test]
async fn counters_per_call_match_otf2_print() {
    let Some(shared) = shared_data() else {
        println!("skip: ../shared/data is absent");
        return;
    };
    if !otf2_print_available() {
        return;
    }
    let anchor = shared.join("otf2").join("ping-pong-papi").join("traces.otf2");
    let reference = reference_counters(&anchor);
    assert!(reference.len() >= 10, "{reference:?}");
    let mut s = commdb_tests::session();
    s.open(&anchor.display().to_string(), None, &commdb_catalog::OpenOptions::default()).expect("open");
    let sql = "SELECT l.location_id, c.region, c.metric, count(*), sum(c.inclusive), sum(c.exclusive) \
               FROM call_metrics() c JOIN locations l ON c.rank = l.rank AND c.thread = l.thread GROUP BY 1, 2, 3";
    let mut ours = CounterTotals::new();
    for b in s.collect(sql).await.expect("query") {
        let text = |i: usize| arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Utf8).expect("cast");
        let (loc, region, metric) = (b.column(0).as_primitive::<Int64Type>(), text(1), text(2));
        let (n, inc, exc) = (
            b.column(3).as_primitive::<Int64Type>(),
            b.column(4).as_primitive::<arrow::datatypes::Float64Type>(),
            b.column(5).as_primitive::<arrow::datatypes::Float64Type>(),
        );
        for i in 0..b.num_rows() {
            let key = (
                loc.value(i),
                region.as_string::<i32>().value(i).to_string(),
                metric.as_string::<i32>().value(i).to_string(),
            );
            ours.insert(key, (n.value(i), inc.value(i), exc.value(i)));
        }
    }
    assert_eq!(ours, reference);
}

/// Every RMA put and get as otf2-print shows it: per location, in order, the record, its bytes
/// and the location of its remote end.
fn reference_rma(anchor: &Path) -> BTreeMap<i64, Vec<(String, i64, Option<i64>)>> {
    let out = Command::new("otf2-print").arg(anchor).output().expect("run otf2-print");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ops: BTreeMap<i64, Vec<(String, i64, Option<i64>)>> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(record), Some(location)) = (words.next(), words.next()) else { continue };
        if record != "RMA_PUT" && record != "RMA_GET" {
            continue;
        }
        let field = |name: &str| line.split(name).nth(1).unwrap_or("").to_string();
        let bytes = field("Bytes: ").split(',').next().unwrap_or("").trim().parse().unwrap();
        let remote = field("Remote: ");
        let remote = remote.split(')').next().unwrap_or("");
        let remote = remote.rsplit('<').next().and_then(|l| l.trim_end_matches('>').parse().ok());
        let kind = if record == "RMA_PUT" { "rma_put" } else { "rma_get" };
        ops.entry(location.parse().unwrap()).or_default().push((kind.to_string(), bytes, remote));
    }
    ops
}

/// The same from commdb's events.
async fn commdb_rma(s: &mut commdb_catalog::Session, schema: &str) -> BTreeMap<i64, Vec<(String, i64, Option<i64>)>> {
    let sql = format!(
        "SELECT l.location_id, CAST(e.kind AS VARCHAR), e.bytes, r.location_id \
         FROM {schema}.events e JOIN {schema}.locations l ON e.rank = l.rank AND e.thread = l.thread \
         LEFT JOIN {schema}.locations r ON r.rank = e.peer AND r.thread = e.tag \
         WHERE e.kind IN ('rma_put', 'rma_get') ORDER BY l.location_id, e.seq"
    );
    let mut ops: BTreeMap<i64, Vec<(String, i64, Option<i64>)>> = BTreeMap::new();
    for row in commdb_tests::rows(&s.collect(&sql).await.unwrap()).unwrap() {
        let remote = (row[3] != "NULL").then(|| row[3].parse().unwrap());
        ops.entry(row[0].parse().unwrap()).or_default().push((row[1].clone(), row[2].parse().unwrap(), remote));
    }
    ops
}

#[tokio::test]
async fn accelerator_transfers_match_otf2_print_read_and_written_back() {
    // Score-P's CUDA transfers (RMA records on the streams, the host thread their remote end)
    // in OTF2 1.4 and 2.0: every put and get with its bytes and remote location, in order; the
    // transfers pair each with its completion; an archive commdb writes back has the same.
    let Some(shared) = shared_data() else {
        println!("skip: ../shared/data is absent");
        return;
    };
    if !otf2_print_available() {
        return;
    }
    for name in ["2_cuda_simple", "2_jacobi_blame_cpu_015", "2_cloverleaf_oaccregions_cudafull"] {
        let anchor = shared.join("otf2/casita").join(name).join("traces.otf2");
        let reference = reference_rma(&anchor);
        assert!(!reference.is_empty(), "{name}");
        let mut s = commdb_tests::session();
        s.open(&anchor.display().to_string(), Some("t"), &Default::default()).unwrap();
        assert_eq!(commdb_rma(&mut s, "t").await, reference, "{name}");
        let gets: usize = reference.values().flatten().filter(|o| o.0 == "rma_get").count();
        let puts: usize = reference.values().flatten().filter(|o| o.0 == "rma_put").count();
        let rows = commdb_tests::rows(
            &s.collect(
                "SELECT direction, count(*), count(end_ts), min(duration_ns) > 0 FROM gpu_transfers('t.events') \
                 GROUP BY 1 ORDER BY 1",
            )
            .await
            .unwrap(),
        )
        .unwrap();
        let expected = vec![
            vec!["device_to_host".to_string(), puts.to_string(), puts.to_string(), "true".into()],
            vec!["host_to_device".to_string(), gets.to_string(), gets.to_string(), "true".into()],
        ];
        assert_eq!(rows, expected, "{name}");
        let dir = tempfile::tempdir().unwrap();
        let raw = commdb_catalog::reading::otf2::read(&anchor).unwrap();
        commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
        let again = dir.path().join("traces.otf2");
        assert_eq!(reference_rma(&again), reference, "{name} written by commdb");
        // The launches' streams and the device events are written back as attributes: the
        // kernels keep their launches, the API calls their references (times left out: the
        // writer writes corrected times and the clock offsets, which the reading applies again,
        // moving a rank's times by a few ns).
        let printed = Command::new("otf2-print").arg(&again).output().unwrap();
        assert!(printed.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&printed.stderr));
        s.open(&again.display().to_string(), Some("w"), &Default::default()).unwrap();
        for q in [
            "SELECT rank, thread, kernel, launch_thread, launch_region FROM gpu_kernels('{s}.calls') \
             ORDER BY rank, thread, start_ts",
            "SELECT rank, thread, seq, CAST(kind AS VARCHAR), CAST(region AS VARCHAR), peer, tag, request FROM {s}.events \
             WHERE kind IN ('enter', 'leave') AND (peer IS NOT NULL OR request IS NOT NULL) ORDER BY 1, 2, 3",
        ] {
            let read = q.replace("{s}", "t");
            let written = q.replace("{s}", "w");
            let a = commdb_tests::rows(&s.collect(&read).await.unwrap()).unwrap();
            let b = commdb_tests::rows(&s.collect(&written).await.unwrap()).unwrap();
            assert!(!a.is_empty(), "{name}: {read}");
            assert_eq!(a, b, "{name} written by commdb: {written}");
        }
    }
}
