//! `iterations()` against the generator's iteration boundaries, at 16, 256 and 1,024 ranks,
//! with and without an enclosing region and with the computation left uninstrumented: every
//! rank's every iteration must start and end where the generator began and ended it (from the
//! end of the collective before to the end of the iteration's MPI_Allreduce).
//! `iteration_profile` is checked against its definition in SQL over `iterations` and the calls.

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};

fn check(cfg: GeneratorConfig) {
    check_ended_by(cfg, "MPI_Allreduce");
}

/// As `check`, the iterations ended by `marker`.
fn check_ended_by(cfg: GeneratorConfig, marker: &str) {
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
            assert_eq!(b.column(5).as_string::<i32>().value(row), marker);
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

#[test]
fn iterations_are_the_generators_with_a_collective_every_k_steps() {
    // The halo exchanges are the iterations, whichever k; the allreduce every k-th step is part
    // of the iteration after it. With rendezvous messages and a slow rank, and without an
    // enclosing region or instrumented computation.
    for k in [2, 3, 10, 20] {
        check_ended_by(GeneratorConfig { collective_every: k, ..config(16, 40) }, "MPI_Waitall");
    }
    let slow = commdb_catalog::generate::SlowRanks { ranks: vec![5], factor: 3.0, from_iteration: 10 };
    check_ended_by(
        GeneratorConfig {
            collective_every: 10,
            eager_limit: Some(1024),
            bytes: 8192,
            slow_ranks: Some(slow),
            no_enclosing_region: true,
            uninstrumented_compute: true,
            ..config(256, 30)
        },
        "MPI_Waitall",
    );
    check_ended_by(GeneratorConfig { collective_every: 7, pattern: Pattern::Ring, ..config(64, 28) }, "MPI_Waitall");
    // Every step: the allreduce stays the marker, rendezvous or not.
    check(GeneratorConfig { collective_every: 1, eager_limit: Some(0), ..config(16, 20) });
}

/// A run of two coupled applications as another tool exports it (an event CSV), whose ranks
/// share no region called alike: ranks 0-159 take 60 steps of receives, sends, a wait,
/// computation left uninstrumented and an MPI_Allreduce, with no enclosing region; ranks
/// 160-255 take 45 steps of `solve`, one or two MPI_Sendrecv and two MPI_Allreduce (a
/// conjugate gradient's pair) inside `main`; rank 256 only serves input. Each application's
/// allreduces end when its last rank arrives. Rank 5 computes `slow` times as long from step 40
/// on. Returns the CSV and each rank's true (start, end) per iteration.
fn coupled_run(slow: i64) -> (String, Vec<Vec<(i64, i64)>>) {
    /// An event: time, kind, name, attributes.
    type Row = (i64, &'static str, &'static str, &'static str);
    const BARRIER_END: &str = "\"{'collective_op': 'CollectiveOp.BARRIER', 'communicator': 'Comm 1', 'root': -1, 'size_sent': 0, 'size_received': 0}\"";
    const ALLREDUCE_END: [&str; 2] = [
        "\"{'collective_op': 'CollectiveOp.ALLREDUCE', 'communicator': 'Comm 1', 'root': -1, 'size_sent': 8, 'size_received': 8}\"",
        "\"{'collective_op': 'CollectiveOp.ALLREDUCE', 'communicator': 'Comm 2', 'root': -1, 'size_sent': 8, 'size_received': 8}\"",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = move |scale: i64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        scale + (seed % (scale as u64 / 2 + 1)) as i64
    };
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); 257];
    let mut truth: Vec<Vec<(i64, i64)>> = vec![Vec::new(); 257];
    let call = |rows: &mut Vec<Row>, name: &'static str, t: i64, d: i64| {
        rows.push((t, "Enter", name, ""));
        rows.push((t + d, "Leave", name, ""));
        t + d
    };
    // A collective with its records (`end`: the op on the application's communicator).
    let collective = |rows: &mut Vec<Row>, name: &'static str, end: &'static str, t: i64, d: i64| {
        rows.push((t, "Enter", name, ""));
        rows.push((t, "Instant", "MpiCollectiveBegin", "{}"));
        rows.push((t + d, "Instant", "MpiCollectiveEnd", end));
        rows.push((t + d, "Leave", name, ""));
        t + d
    };
    let mut t: Vec<i64> = (0..257).map(|r| call(&mut rows[r], "MPI_Init", 0, 50_000 + 10 * r as i64)).collect();
    // The first application: a setup barrier, then its steps.
    let ocean = 0..160usize;
    let exit = ocean.clone().map(|r| t[r]).max().unwrap() + 2_000;
    for r in ocean.clone() {
        t[r] = collective(&mut rows[r], "MPI_Barrier", BARRIER_END, t[r], exit - t[r]);
    }
    for step in 0..60 {
        for r in ocean.clone() {
            for _ in 0..2 + r % 3 {
                t[r] = call(&mut rows[r], "MPI_Irecv", t[r], jitter(300));
            }
            for _ in 0..2 + r % 3 {
                t[r] = call(&mut rows[r], "MPI_Isend", t[r], jitter(400));
            }
            t[r] = call(&mut rows[r], "MPI_Waitall", t[r], jitter(3_000));
            t[r] += jitter(40_000) * if r == 5 && step >= 40 { slow } else { 1 };
        }
        let exit = ocean.clone().map(|r| t[r]).max().unwrap() + 5_000;
        for r in ocean.clone() {
            // The first step begins with the first receive, after Init and the barrier.
            let start = truth[r].last().map_or_else(|| rows[r].iter().find(|e| e.2 == "MPI_Irecv").unwrap().0, |b| b.1);
            t[r] = collective(&mut rows[r], "MPI_Allreduce", ALLREDUCE_END[0], t[r], exit + jitter(200) - t[r]);
            truth[r].push((start, t[r]));
        }
    }
    // The second: its steps inside main.
    let atmosphere = 160..256usize;
    for r in atmosphere.clone() {
        rows[r].push((0, "Enter", "main", ""));
    }
    for _ in 0..45 {
        let starts: Vec<i64> = atmosphere.clone().map(|r| t[r]).collect();
        for r in atmosphere.clone() {
            t[r] = call(&mut rows[r], "solve", t[r], jitter(30_000));
            for _ in 0..1 + r % 2 {
                t[r] = call(&mut rows[r], "MPI_Sendrecv", t[r], jitter(2_000));
            }
        }
        let exit = atmosphere.clone().map(|r| t[r]).max().unwrap() + 4_000;
        for r in atmosphere.clone() {
            t[r] = collective(&mut rows[r], "MPI_Allreduce", ALLREDUCE_END[1], t[r], exit - t[r]) + jitter(20_000);
        }
        let exit = atmosphere.clone().map(|r| t[r]).max().unwrap() + 4_000;
        for (k, r) in atmosphere.clone().enumerate() {
            t[r] = collective(&mut rows[r], "MPI_Allreduce", ALLREDUCE_END[1], t[r], exit + jitter(200) - t[r]);
            truth[r].push((starts[k], t[r]));
        }
    }
    // The input server.
    t[256] = call(&mut rows[256], "read_input", t[256], 2_000_000);
    let mut csv = String::from("Timestamp (ns),Event Type,Name,Thread,Process,Attributes\n");
    for (rank, events) in rows.iter_mut().enumerate() {
        t[rank] = call(events, "MPI_Finalize", t[rank], 10_000);
        if atmosphere.contains(&rank) {
            events.push((t[rank], "Leave", "main", ""));
        }
        if rank == 256 {
            truth[rank].push((0, t[rank]));
        }
        for (ts, kind, name, attributes) in events.iter() {
            csv.push_str(&format!("{ts},{kind},{name},0,{rank},{attributes}\n"));
        }
    }
    (csv, truth)
}

/// The session over the coupled run's CSV, written to a directory of its own (returned; `test`
/// names it, so that tests running at once each have theirs).
fn open_coupled(slow: i64, test: &str) -> (commdb_catalog::Session, Vec<Vec<(i64, i64)>>, std::path::PathBuf) {
    let (csv, truth) = coupled_run(slow);
    let dir = std::env::temp_dir().join(format!("commdb-coupled-{}-{slow}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("coupled.csv");
    std::fs::write(&path, csv).unwrap();
    let mut s = commdb_tests::session();
    s.open(path.to_str().unwrap(), Some("t"), &commdb_catalog::OpenOptions::default()).unwrap();
    (s, truth, dir)
}

#[test]
fn iterations_of_two_coupled_applications_follow_each_ranks_own_calls() {
    let (mut s, truth, dir) = open_coupled(1, "iterations");
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

#[test]
fn the_profile_of_two_coupled_applications_takes_each_apart() {
    // Rank 5 of the first application computes three times as long from step 40 on; its
    // computation is uninstrumented, so the time no call covers made those steps long.
    let (mut s, _, dir) = open_coupled(3, "profile");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sql = "SELECT step_group, count(*), sum(CASE WHEN outlier THEN 1 ELSE 0 END), \
                      min(CASE WHEN outlier THEN iteration END), max(CASE WHEN outlier THEN iteration END), \
                      min(slow_rank), max(slow_rank), min(slow_region), max(slow_region), min(ranks), max(ranks) \
               FROM iteration_profile('t.calls') GROUP BY step_group ORDER BY step_group";
    let batches = rt.block_on(s.collect(sql)).unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
    let expected = [
        "| (no marker) x1    | 1  | 0  |    |    |   |   |           |           | 1   | 1   |",
        "| MPI_Allreduce x45 | 45 | 0  |    |    |   |   |           |           | 96  | 96  |",
        "| MPI_Allreduce x60 | 60 | 20 | 40 | 59 | 5 | 5 | (no call) | (no call) | 160 | 160 |",
    ];
    let bare = |t: &str| t.replace(' ', "");
    for line in expected {
        assert!(bare(&text).contains(&bare(line)), "{line}\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `iteration_profile`'s rules written as SQL over `iterations` and the calls (what the
/// function was before it folded `iterations` as it streams): the definition the function is
/// checked against. `{calls}` is the calls' relation, `{args}` the arguments after it.
const PROFILE_DEFINITION: &str = "WITH it AS (
  SELECT iteration, rank, start_ts, end_ts, duration_ns, compute_ns, mpi_ns, waiting_ns,
         CAST(step_group AS VARCHAR) AS grp,
         CAST(compute_ns + mpi_ns AS DOUBLE) - median(compute_ns + mpi_ns) OVER (PARTITION BY rank) AS x,
         count(*) OVER (PARTITION BY rank) AS n, min(start_ts) OVER (PARTITION BY rank) AS rs,
         max(end_ts) OVER (PARTITION BY rank) AS re
  FROM iterations('{calls}'{marker})),
per AS (
  SELECT grp, iteration, min(start_ts) AS start_ts, max(end_ts) AS end_ts, max(end_ts) - min(start_ts) AS dur,
         count(*) AS ranks, avg(duration_ns) AS mean_rank_ns, max(compute_ns) - min(compute_ns) AS compute_spread_ns,
         CAST(sum(waiting_ns) AS BIGINT) AS waiting_ns
  FROM it GROUP BY grp, iteration),
typical AS (SELECT per.*, median(dur) OVER (PARTITION BY grp) AS m FROM per),
flagged AS (
  SELECT typical.*, dur > m + {k} * 1.4826 * median(abs(dur - m)) OVER (PARTITION BY grp) AS outlier FROM typical),
worst AS (
  SELECT it.grp, it.iteration, first_value(it.rank ORDER BY it.x DESC, it.rank) AS rank, max(it.x) AS x,
         first_value(it.start_ts ORDER BY it.x DESC, it.rank) AS s, first_value(it.end_ts ORDER BY it.x DESC, it.rank) AS e,
         first_value(it.n ORDER BY it.x DESC, it.rank) AS n, first_value(it.rs ORDER BY it.x DESC, it.rank) AS rs,
         first_value(it.re ORDER BY it.x DESC, it.rank) AS re
  FROM it JOIN flagged f ON f.grp = it.grp AND f.iteration = it.iteration AND f.outlier
  GROUP BY it.grp, it.iteration),
per_region AS (
  SELECT c.rank, c.region, CAST(sum(c.exclusive) AS DOUBLE) / max(wr.n) AS mean_ns
  FROM {calls} c JOIN (SELECT DISTINCT rank, n FROM worst) wr ON wr.rank = c.rank
  GROUP BY c.rank, c.region),
uncovered AS (
  SELECT sp.rank, (CAST(sp.re - sp.rs AS DOUBLE) - CAST(coalesce(sum(c.exclusive), 0) AS DOUBLE)) / sp.n AS mean_ns
  FROM (SELECT DISTINCT rank, n, rs, re FROM worst) sp
  LEFT JOIN {calls} c ON c.rank = sp.rank AND c.start_ts >= sp.rs AND c.end_ts <= sp.re
  GROUP BY sp.rank, sp.rs, sp.re, sp.n),
in_outlier AS (
  SELECT w.grp, w.iteration, c.region, CAST(sum(c.exclusive) AS DOUBLE) - max(coalesce(p.mean_ns, 0)) AS x
  FROM worst w JOIN {calls} c ON c.rank = w.rank AND c.start_ts >= w.s AND c.end_ts <= w.e
  LEFT JOIN per_region p ON p.rank = c.rank AND p.region IS NOT DISTINCT FROM c.region
  GROUP BY w.grp, w.iteration, c.region
  UNION ALL
  SELECT w.grp, w.iteration, '(no call)',
         CAST(w.e - w.s AS DOUBLE) - CAST(coalesce(sum(c.exclusive), 0) AS DOUBLE) - max(u.mean_ns)
  FROM worst w JOIN uncovered u ON u.rank = w.rank
  LEFT JOIN {calls} c ON c.rank = w.rank AND c.start_ts >= w.s AND c.end_ts <= w.e
  GROUP BY w.grp, w.iteration, w.s, w.e),
region AS (
  SELECT grp, iteration, first_value(region ORDER BY x DESC, region) AS region FROM in_outlier GROUP BY grp, iteration)
SELECT f.iteration, f.grp AS step_group, f.start_ts, f.end_ts, f.dur AS duration_ns, f.ranks,
       f.mean_rank_ns, f.compute_spread_ns, f.waiting_ns, f.outlier, w.rank AS slow_rank,
       CAST(r.region AS VARCHAR) AS slow_region, w.x AS excess_ns
FROM flagged f LEFT JOIN worst w ON w.grp = f.grp AND w.iteration = f.iteration
LEFT JOIN region r ON r.grp = f.grp AND r.iteration = f.iteration
ORDER BY f.iteration, f.grp";

/// The rows of `sql`, every value as text (floats rounded to 9 significant digits).
fn rows_as_text(s: &mut commdb_catalog::Session, rt: &tokio::runtime::Runtime, sql: &str) -> Vec<String> {
    use arrow::datatypes::DataType;
    let batches = rt.block_on(s.collect(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows = Vec::new();
    for b in &batches {
        for row in 0..b.num_rows() {
            let cells: Vec<String> = (0..b.num_columns())
                .map(|c| {
                    let col = b.column(c);
                    if col.is_null(row) {
                        return "NULL".to_string();
                    }
                    match col.data_type() {
                        DataType::Float64 => {
                            format!("{:.9e}", col.as_primitive::<arrow::datatypes::Float64Type>().value(row))
                        }
                        _ => arrow::util::display::array_value_to_string(col, row).unwrap(),
                    }
                })
                .collect();
            rows.push(cells.join(" | "));
        }
    }
    rows
}

/// `iteration_profile(calls, args)` gives the rows of its definition in SQL, in their order.
fn profile_is_its_definition(
    s: &mut commdb_catalog::Session,
    calls: &str,
    k: &str,
    marker: Option<&str>,
) -> Vec<String> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let marker_arg = marker.map_or(String::new(), |m| format!(", marker => '{m}'"));
    let definition = PROFILE_DEFINITION.replace("{calls}", calls).replace("{marker}", &marker_arg).replace("{k}", k);
    let expected = rows_as_text(s, &rt, &definition);
    let got = rows_as_text(s, &rt, &format!("SELECT * FROM iteration_profile('{calls}', k => {k}{marker_arg})"));
    assert_eq!(got.len(), expected.len(), "{calls}, k {k}: rows");
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e, "{calls}, k {k}");
    }
    got
}

fn outliers(rows: &[String]) -> usize {
    rows.iter().filter(|r| r.contains("| true |")).count()
}

#[test]
fn the_profile_is_its_definition_on_slow_ranks_of_every_shape() {
    let slow = |ranks: Vec<i32>| commdb_catalog::generate::SlowRanks { ranks, factor: 2.0, from_iteration: 30 };
    let runs = [
        ("a", GeneratorConfig { slow_ranks: Some(slow(vec![5])), ..config(16, 50) }),
        (
            "b",
            GeneratorConfig {
                slow_ranks: Some(slow(vec![3, 200])),
                uninstrumented_compute: true,
                no_enclosing_region: true,
                ..config(256, 40)
            },
        ),
        ("c", GeneratorConfig { seed: 7, ..config(64, 30) }),
    ];
    let mut s = commdb_tests::session();
    for (name, cfg) in &runs {
        let trace = generate(cfg).unwrap().trace.build().unwrap();
        s.attach(trace, Some(name)).unwrap();
    }
    let a = profile_is_its_definition(&mut s, "a.calls", "3.5", None);
    assert_eq!(outliers(&a), 20, "{a:?}");
    // A small k makes outliers of ordinary noise, each with its own slow rank and region.
    let a = profile_is_its_definition(&mut s, "a.calls", "0.01", None);
    assert!(outliers(&a) > 20, "{a:?}");
    profile_is_its_definition(&mut s, "a.calls", "3", Some("compute"));
    let b = profile_is_its_definition(&mut s, "b.calls", "3.5", None);
    assert_eq!(outliers(&b), 10, "{b:?}");
    assert!(b.iter().filter(|r| r.contains("| true |")).all(|r| r.contains("(no call)")), "{b:?}");
    profile_is_its_definition(&mut s, "b.calls", "0.01", None);
    let c = profile_is_its_definition(&mut s, "c.calls", "0.01", None);
    assert!(outliers(&c) > 5, "{c:?}");
}

#[test]
fn the_profile_of_two_coupled_applications_is_its_definition() {
    let (mut s, _, dir) = open_coupled(3, "definition");
    let rows = profile_is_its_definition(&mut s, "t.calls", "3.5", None);
    assert_eq!(outliers(&rows), 20);
    profile_is_its_definition(&mut s, "t.calls", "0.01", None);
    let _ = std::fs::remove_dir_all(&dir);
}
