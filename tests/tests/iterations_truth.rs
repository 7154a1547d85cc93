//! `iterations()` against the generator's iteration boundaries, at 16, 256 and 1,024 ranks,
//! with and without an enclosing region and with the computation left uninstrumented: every
//! rank's every iteration must start and end where the generator began and ended it (from the
//! end of the collective before to the end of the iteration's MPI_Allreduce).

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};

fn check(cfg: GeneratorConfig) {
    let g = generate(&cfg).unwrap();
    let truth = g.truth.iterations.clone();
    let trace = g.trace.build().unwrap();
    let mut s = commdb_tests::session();
    s.attach(trace, Some("t")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sql = "SELECT rank, iteration, start_ts, end_ts, compute_ns + mpi_ns + waiting_ns - duration_ns, marker \
               FROM iterations('t.calls') ORDER BY rank, iteration";
    let batches = rt.block_on(s.collect(sql)).unwrap();
    let mut got: Vec<Vec<(i64, i64)>> = vec![Vec::new(); cfg.ranks as usize];
    for b in &batches {
        let col = |i: usize| b.column(i).as_primitive::<Int64Type>();
        for row in 0..b.num_rows() {
            let rank = col(0).value(row) as usize;
            assert_eq!(col(1).value(row) as usize, got[rank].len(), "iterations are numbered from 0");
            assert_eq!(col(4).value(row), 0, "computation, MPI and waiting add up to the duration");
            assert_eq!(b.column(5).as_string::<i32>().value(row), "MPI_Allreduce");
            got[rank].push((col(2).value(row), col(3).value(row)));
        }
    }
    for (rank, (found, expected)) in got.iter().zip(&truth).enumerate() {
        assert_eq!(found.len(), cfg.iterations as usize, "rank {rank}: iterations");
        for (k, (f, e)) in found.iter().zip(expected).enumerate() {
            assert_eq!(f, e, "{} ranks, rank {rank}, iteration {k}", cfg.ranks);
        }
    }
}

fn config(ranks: i32, iterations: u32) -> GeneratorConfig {
    GeneratorConfig { ranks, ranks_per_node: 16, iterations, pattern: Pattern::Stencil2d, ..GeneratorConfig::default() }
}

#[test]
fn iterations_are_the_generators_at_16_ranks() {
    check(config(16, 50));
}

#[test]
fn iterations_are_the_generators_at_256_ranks_without_an_enclosing_region() {
    check(GeneratorConfig { no_enclosing_region: true, ..config(256, 20) });
}

#[test]
fn iterations_are_the_generators_at_1024_ranks_with_uninstrumented_compute() {
    check(GeneratorConfig { uninstrumented_compute: true, pattern: Pattern::Ring, ..config(1024, 8) });
}

#[test]
fn iterations_of_a_master_worker_run_and_of_a_rank_that_slows_down() {
    check(GeneratorConfig { pattern: Pattern::MasterWorker, ..config(16, 12) });
    let slow = commdb_catalog::generate::SlowRanks { ranks: vec![3], factor: 3.0, from_iteration: 6 };
    check(GeneratorConfig { slow_ranks: Some(slow), ..config(16, 12) });
}

/// A run of two coupled applications as another tool exports it (an event CSV), whose ranks
/// share no region called alike: ranks 0-159 take 60 steps of receives, sends, a wait and an
/// MPI_Allreduce with no enclosing region and their computation uninstrumented; ranks 160-255
/// take 45 steps of `solve`, one or two MPI_Sendrecv and two MPI_Allreduce (a conjugate
/// gradient's pair) inside `main`; rank 256 only serves input. Returns the CSV and each rank's
/// true (start, end) per iteration.
fn coupled_run() -> (String, Vec<Vec<(i64, i64)>>) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = |scale: i64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        scale + (seed % (scale as u64 / 2 + 1)) as i64
    };
    let mut csv = String::from("Timestamp (ns),Event Type,Name,Thread,Process,Attributes\n");
    let mut truth = Vec::new();
    for rank in 0..257i64 {
        let mut rows: Vec<(i64, &str, &str)> = Vec::new();
        let call = |rows: &mut Vec<(i64, &str, &str)>, name: &'static str, t: i64, d: i64| {
            rows.push((t, "Enter", name));
            rows.push((t + d, "Leave", name));
            t + d
        };
        let mut bounds = Vec::new();
        let mut t = call(&mut rows, "MPI_Init", 0, 50_000);
        if rank < 160 {
            t = call(&mut rows, "MPI_Barrier", t, 2_000);
            let mut start = t;
            for _ in 0..60 {
                for _ in 0..2 + rank % 3 {
                    t = call(&mut rows, "MPI_Irecv", t, jitter(300));
                }
                for _ in 0..2 + rank % 3 {
                    t = call(&mut rows, "MPI_Isend", t, jitter(400));
                }
                t = call(&mut rows, "MPI_Waitall", t, jitter(3_000));
                t += jitter(40_000);
                t = call(&mut rows, "MPI_Allreduce", t, jitter(5_000));
                bounds.push((start, t));
                start = t;
            }
        } else if rank < 256 {
            rows.push((0, "Enter", "main"));
            let mut start = t;
            for _ in 0..45 {
                t = call(&mut rows, "solve", t, jitter(30_000));
                for _ in 0..1 + rank % 2 {
                    t = call(&mut rows, "MPI_Sendrecv", t, jitter(2_000));
                }
                t = call(&mut rows, "MPI_Allreduce", t, jitter(4_000));
                t += jitter(20_000);
                t = call(&mut rows, "MPI_Allreduce", t, jitter(4_000));
                bounds.push((start, t));
                start = t;
            }
        } else {
            t = call(&mut rows, "read_input", t, 2_000_000);
            bounds.push((0, t + 10_000));
        }
        t = call(&mut rows, "MPI_Finalize", t, 10_000);
        if (160..256).contains(&rank) {
            rows.push((t, "Leave", "main"));
        }
        if rank == 256 {
            bounds[0].1 = t;
        }
        for (ts, kind, name) in rows {
            csv.push_str(&format!("{ts},{kind},{name},0,{rank},\n"));
        }
        truth.push(bounds);
    }
    (csv, truth)
}

#[test]
fn iterations_of_two_coupled_applications_follow_each_ranks_own_calls() {
    let (csv, truth) = coupled_run();
    let dir = std::env::temp_dir().join(format!("commdb-coupled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("coupled.csv");
    std::fs::write(&path, csv).unwrap();
    let mut s = commdb_tests::session();
    s.open(path.to_str().unwrap(), Some("t"), &commdb_catalog::OpenOptions::default()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sql = "SELECT rank, iteration, start_ts, end_ts, coalesce(marker, '') FROM iterations('t.calls') \
               ORDER BY rank, iteration";
    let batches = rt.block_on(s.collect(sql)).unwrap();
    let mut got: Vec<Vec<(i64, i64)>> = vec![Vec::new(); truth.len()];
    for b in &batches {
        let col = |i: usize| b.column(i).as_primitive::<Int64Type>();
        for row in 0..b.num_rows() {
            let rank = col(0).value(row) as usize;
            assert_eq!(col(1).value(row) as usize, got[rank].len());
            let marker = b.column(4).as_string::<i32>().value(row);
            assert_eq!(marker, if rank == 256 { "" } else { "MPI_Allreduce" }, "rank {rank}");
            got[rank].push((col(2).value(row), col(3).value(row)));
        }
    }
    for (rank, (found, expected)) in got.iter().zip(&truth).enumerate() {
        assert_eq!(found, expected, "rank {rank}");
    }
    let notices = s.take_notices().join("\n");
    assert!(notices.contains("no region is called alike"), "{notices}");
    assert!(notices.contains("160 rank(s) end theirs with MPI_Allreduce, 60 iteration(s) each"), "{notices}");
    assert!(notices.contains("96 rank(s) end theirs with MPI_Allreduce, 45 iteration(s) each"), "{notices}");
    assert!(notices.contains("1 rank(s) repeat no sequence of calls, one iteration each"), "{notices}");
    let _ = std::fs::remove_dir_all(&dir);
}
