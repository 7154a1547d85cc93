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
