//! Hybrid runs through Paraver: a generated MPI + OpenMP run (a parallel region per step with a
//! critical section and the implicit barrier, forked and joined by the master) written as
//! Extrae writes OpenMP (`export::paraver`: forks and joins as type 60000001, the
//! members' parallel functions as 60000018, the implicit barrier as the worksharing join, the
//! critical section as a lock's states) and read back answers every threads' question as the
//! run in memory does: each OpenMP wait state with its time, thread, instance and partner, the
//! parallel regions, the lock acquisitions in their order, the critical path and the call
//! tree's totals (the MPI waits and the delay costs they feed differ where Paraver records
//! less than OTF2: no completion of an MPI_Isend, so no late receiver); at two sizes and thread counts, read whole and converted a group
//! of ranks at a time.

use commdb_catalog::convert::Limits;
use commdb_catalog::generate::{GeneratorConfig, generate};
use commdb_catalog::{OpenOptions, Session};

/// The questions, each a query whose rows must agree.
const QUESTIONS: [&str; 7] = [
    // The OpenMP waits: the MPI ones need what Paraver does not record (an MPI_Isend's
    // completion for late_receiver).
    "SELECT pattern, count(*), sum(wait_ns) FROM wait_states() WHERE pattern LIKE '%omp%' GROUP BY 1 ORDER BY 1",
    "SELECT rank, thread, pattern, wait_ns, ts, instance, partner_thread FROM wait_states() \
     WHERE pattern LIKE '%omp%' ORDER BY rank, thread, ts, pattern, wait_ns",
    "SELECT rank, instance, master_thread, thread, team_size, fork_ts, join_ts, begin_ts, end_ts \
     FROM parallel_regions() ORDER BY rank, instance, thread",
    "SELECT rank, thread, acquisition_order, acquire_ts, release_ts FROM lock_acquisitions() \
     ORDER BY rank, acquisition_order",
    "SELECT count(*), sum(duration), count(DISTINCT thread) FROM critical_path()",
    "SELECT rank, sum(calls), sum(inclusive_ns), sum(exclusive_ns) FROM call_tree() GROUP BY rank ORDER BY rank",
    "SELECT src_thread, dst_thread, count(*), sum(bytes) FROM messages GROUP BY 1, 2 ORDER BY 1, 2",
];

fn answers(s: &mut Session) -> Vec<Vec<Vec<String>>> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    QUESTIONS
        .iter()
        .map(|q| commdb_tests::rows(&rt.block_on(s.collect(q)).unwrap_or_else(|e| panic!("{q}: {e}"))).unwrap())
        .collect()
}

fn check(spec: &str) {
    let cfg = GeneratorConfig::parse_spec(spec).unwrap();
    let trace = generate(&cfg).unwrap().trace.build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    commdb_catalog::export::paraver::write(&trace, dir.path(), "run").unwrap();
    let mut memory = commdb_tests::session();
    memory.attach(trace, Some("t")).unwrap();
    let expected = answers(&mut memory);
    assert!(expected[0].iter().any(|r| r[0] == "omp_critical_contention"), "{spec}: {:?}", expected[0]);
    assert!(expected[3].len() > 1, "{spec}: locks taken");
    let prv = dir.path().join("run.prv");
    // Converted one rank per group: the acquisitions of a rank's lock are numbered within it.
    let store = dir.path().join("store");
    let one_rank = Limits { group_events: 1, part_rows: 500, bucket_events: 400 };
    let converted = commdb_catalog::formats::convert(&prv, &store, &OpenOptions::default(), &one_rank).unwrap();
    assert_eq!(converted.groups, cfg.ranks as usize, "{spec}: {converted:?}");
    for (how, path) in [("whole", &prv), ("converted", &store)] {
        let mut s = commdb_tests::session();
        s.open(&path.display().to_string(), Some("t"), &OpenOptions::default())
            .unwrap_or_else(|e| panic!("{spec} {how}: {e}"));
        let got = answers(&mut s);
        for ((q, e), g) in QUESTIONS.iter().zip(&expected).zip(&got) {
            assert_eq!(g, e, "{spec}, read {how}: {q}");
        }
    }
}

#[test]
fn a_hybrid_run_written_as_extrae_writes_openmp_reads_back_with_the_same_waits_paths_and_locks() {
    check("ranks=8,ranks-per-node=4,iterations=6,threads=4");
    check("ranks=48,ranks-per-node=16,iterations=3,threads=8");
}
