//! commdb's wait states and critical path against Scalasca's own trace analyzer. The numbers
//! Scalasca 2.6's scout.mpi found on the traces of tests/data/scalasca/traces.txt are in
//! tests/data/scalasca/NAME.csv (metric, call path, rank, seconds), written by
//! tests/scalasca/oracle.sh; this test needs only those files. It writes each generated trace
//! as the OTF2 archive the oracle analysed (the generator is deterministic), writes the shapes
//! archive with tests/scalasca/make_shapes.py (python3-otf2; skipped with a printed reason when
//! absent), reads the shared Score-P archives from ../shared/data (skipped likewise), and
//! compares per pattern, rank and call path, and per rank and call path of the critical path:
//!
//! - `wait_states` against mpi_latesender, mpi_latereceiver, mpi_wait_nxn, mpi_barrier_wait,
//!   mpi_latebroadcast, mpi_earlyreduce and mpi_earlyscan: within 1 ns per wait (commdb's
//!   times are whole nanoseconds, Score-P's timer ticks are not) or 0.1%;
//! - `critical_path` against critical_path, over the part of the run Scalasca's path covers:
//!   from the entry into MPI_Init of the rank the path starts on to the latest entry into
//!   MPI_Finalize (docs/departures.md); time no region covers is commdb's alone (Scalasca
//!   attributes time to call paths only), so region NULL is left out; traces with MPI_Scan
//!   waits are left out, as Scalasca's path does not follow them.
//!
//! On the MPI + OpenMP archives of tests/data/scalasca/hybrid.txt, Scalasca's scout.hyb found
//! tests/data/scalasca/hybrid_NAME.csv (metric, call path, location, seconds); `wait_states`
//! is compared per pattern, location and call path with the same tolerance, its OpenMP
//! patterns against omp_fork, omp_management (omp_fork plus omp_join), omp_ebarrier_wait,
//! omp_ibarrier_wait, omp_lock_contention_critical and omp_lock_contention_api. The one
//! difference docs/departures.md gives (a lock taken inside omp_set_lock) must be the only one.
//! `critical_path` per location and call path against critical_path, but for the explicit tasks
//! Cube roots at TASKS; and the OpenMP delay costs (delay_ompbarrier, delay_ompidle) per location
//! and call path against `delay_costs` without the waits between ranks, on call paths of no MPI
//! call; the total delay costs of both tools are printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use commdb_catalog::OpenOptions;
use commdb_catalog::generate::{GeneratorConfig, generate};

/// One trace the oracle ran on.
struct Oracle {
    name: String,
    source: String,
}

fn oracles() -> Vec<Oracle> {
    let list = std::fs::read_to_string(commdb_tests::test_data().join("scalasca/traces.txt")).unwrap();
    list.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "traces.txt: name, ranks, source: {l}");
            Oracle { name: f[0].to_string(), source: f[2].to_string() }
        })
        .collect()
}

/// The fields of a CSV line whose fields may be quoted (`"a, b"`, `""` for a quote).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

/// Scalasca's values: (metric, rank, call path) -> nanoseconds. A Score-P archive's program
/// (its PROGRAM_BEGIN and PROGRAM_END records) is the root of Scalasca's call paths, named after
/// the executable; commdb's paths start at the outermost region (docs/departures.md), so with
/// `program_root` that root is taken off.
fn expected(name: &str, program_root: bool) -> BTreeMap<(String, i64, String), f64> {
    let text = std::fs::read_to_string(commdb_tests::test_data().join(format!("scalasca/{name}.csv"))).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f = fields(line);
        assert_eq!(f.len(), 4, "{name}.csv: {line}");
        let path = match f[1].split_once('/') {
            Some((_, rest)) if program_root => rest.to_string(),
            _ => f[1].clone(),
        };
        let rank: i64 = f[2].parse().unwrap();
        *out.entry((f[0].clone(), rank, path)).or_insert(0.0) += f[3].parse::<f64>().unwrap() * 1e9;
    }
    out
}

/// The trace of `source` as an OTF2 archive (generated into `dir`, or the shared one); None
/// with a printed reason when the shared data is absent.
fn archive(source: &str, dir: &Path) -> Option<PathBuf> {
    if let Some(spec) = source.strip_prefix("generate:") {
        let cfg = GeneratorConfig::parse_spec(spec).unwrap();
        let raw = generate(&cfg).unwrap().trace;
        commdb_catalog::export::otf2::write(&raw, dir).unwrap();
        return Some(dir.join("traces.otf2"));
    }
    if let Some(rounds) = source.strip_prefix("shapes:") {
        let script = commdb_tests::project_root().join("tests/scalasca/make_shapes.py");
        return python_archive(source, &script, dir, rounds.split(':'));
    }
    let path = source.strip_prefix("shared:").unwrap_or_else(|| panic!("unknown source {source}"));
    match commdb_tests::shared_data() {
        Some(shared) => Some(shared.join(path).join("traces.otf2")),
        None => {
            println!("skip {source}: ../shared/data is absent");
            None
        }
    }
}

async fn query(s: &mut commdb_catalog::Session, sql: &str) -> Vec<Vec<String>> {
    commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap()
}

const PATTERNS: [(&str, &str); 7] = [
    ("mpi_latesender", "late_sender"),
    ("mpi_latereceiver", "late_receiver"),
    ("mpi_wait_nxn", "wait_at_nxn"),
    ("mpi_barrier_wait", "wait_at_barrier"),
    ("mpi_latebroadcast", "late_broadcast"),
    ("mpi_earlyreduce", "early_reduce"),
    ("mpi_earlyscan", "early_scan"),
];

/// The differences beyond the tolerance between `scalasca` and `commdb` (key -> (ns, waits)).
fn differences<K: Ord + Clone + std::fmt::Debug>(
    scalasca: &BTreeMap<K, f64>,
    commdb: &BTreeMap<K, (f64, f64)>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<K> = scalasca.keys().chain(commdb.keys()).cloned().collect();
    keys.into_iter()
        .filter_map(|k| {
            let a = scalasca.get(&k).copied().unwrap_or(0.0);
            let (b, n) = commdb.get(&k).copied().unwrap_or((0.0, 1.0));
            let d = (a - b).abs();
            (d > n.max(1.0) && d > 1e-3 * a.abs().max(b.abs()))
                .then(|| format!("{k:?}: Scalasca {a:.1}, commdb {b:.1}"))
        })
        .collect()
}

/// The part of the run Scalasca's critical path covers: from the entry into MPI_Init of the
/// rank the path starts on (a) to the latest entry into MPI_Finalize (b).
const WINDOW: &str = "SELECT
    (SELECT min(c.start_ts) FROM t.calls c WHERE c.region = 'MPI_Init'
       AND c.rank = (SELECT rank FROM critical_path('t.calls', 't.messages', 't.collectives') WHERE seq = 0)) AS a,
    (SELECT max(start_ts) FROM t.calls WHERE region = 'MPI_Finalize') AS b";

/// Scalasca's critical-path imbalance per call path, summed over the ranks, derived from its
/// report as its own remapping derives it (the metric critical_path_imbalance of Scalasca's
/// scout.spec): the call path's time on the critical path beyond its mean time per location
/// with the wait states left out, where it is on the path.
fn critical_path_imbalance(want: &BTreeMap<(String, i64, String), f64>, ranks: i64) -> BTreeMap<String, f64> {
    // Scalasca's `time` is an inclusive metric: its value at a call path holds its children's.
    let mut time: BTreeMap<(i64, &str), f64> = BTreeMap::new();
    for ((_, rank, path), v) in want.iter().filter(|((m, _, _), _)| m == "time") {
        *time.entry((*rank, path.as_str())).or_default() += v;
        if let Some((parent, _)) = path.rsplit_once('/') {
            *time.entry((*rank, parent)).or_default() -= v;
        }
    }
    let mut per_path: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for ((_, path), v) in &time {
        per_path.entry(path).or_default().1 += v;
    }
    for ((metric, _, path), v) in want {
        let e = per_path.entry(path.as_str()).or_default();
        match metric.as_str() {
            "critical_path" => e.0 += v,
            m if m.starts_with("mpi_") => e.1 -= v,
            _ => {}
        }
    }
    per_path
        .into_iter()
        .filter(|(_, (on_path, _))| *on_path > 0.0)
        .map(|(path, (on_path, busy))| (path.to_string(), (on_path - busy / ranks as f64).max(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// The traces on which commdb's delay costs and Scalasca's agree per rank (direct_ns against
/// the sum of the short-term delay_* metrics), and those on which they agree in total (direct
/// and propagated against short- and long-term); on the others they differ as
/// docs/departures.md says, and the test prints both.
const DELAYS_AGREE_PER_RANK: [&str; 2] = ["ring32", "alltoall16"];
const DELAYS_AGREE_IN_TOTAL: [&str; 3] = ["stencil16_imbalance", "stencil64_imbalance", "master_worker16"];

/// The delay costs of every trace, commdb's and Scalasca's.
#[derive(Default)]
struct Delays {
    rows: Vec<(String, f64, f64, f64, f64)>,
}

impl Delays {
    async fn compare(
        &mut self,
        name: &str,
        want: &BTreeMap<(String, i64, String), f64>,
        s: &mut commdb_catalog::Session,
        waits: f64,
    ) {
        let (mut short, mut long): (BTreeMap<i64, f64>, f64) = (BTreeMap::new(), 0.0);
        for ((metric, rank, _), v) in want.iter().filter(|((m, _, _), _)| m.starts_with("delay_")) {
            if metric.ends_with("_longterm") {
                long += v;
            } else {
                *short.entry(*rank).or_default() += v;
            }
        }
        let sql = "SELECT rank, sum(direct_ns), sum(propagated_ns)
                   FROM delay_costs('t.calls', 't.messages', 't.collectives') WHERE rank IS NOT NULL GROUP BY 1";
        let (mut direct, mut propagated): (BTreeMap<i64, (f64, f64)>, f64) = (BTreeMap::new(), 0.0);
        for r in query(s, sql).await {
            direct.insert(r[0].parse().unwrap(), (r[1].parse().unwrap(), waits));
            propagated += r[2].parse::<f64>().unwrap();
        }
        let (a, b) = (short.values().sum::<f64>(), direct.values().map(|v| v.0).sum::<f64>());
        if DELAYS_AGREE_PER_RANK.contains(&name) {
            let wrong = differences(&short, &direct);
            assert!(wrong.is_empty(), "{name}: direct delay costs differ from Scalasca's:\n{}", wrong.join("\n"));
        }
        if DELAYS_AGREE_IN_TOTAL.contains(&name) {
            let (x, y) = (a + long, b + propagated);
            let d = (x - y).abs();
            assert!(d <= waits.max(1.0) || d <= 1e-3 * x.max(y), "{name}: delay costs: Scalasca {x:.0}, commdb {y:.0}");
        }
        self.rows.push((name.to_string(), a, b, long, propagated));
    }

    fn report(&self) {
        println!("delay costs (ns): trace, Scalasca short-term, commdb direct, Scalasca long-term, commdb propagated");
        for (name, a, b, c, d) in &self.rows {
            println!("  {name:20} {a:>14.0} {b:>14.0} {c:>14.0} {d:>14.0}");
        }
    }
}

#[tokio::test]
async fn wait_states_and_the_critical_path_agree_with_scalasca() {
    let mut compared = 0;
    let mut totals: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut delays = Delays::default();
    for oracle in oracles() {
        let dir = tempfile::tempdir().unwrap();
        let Some(anchor) = archive(&oracle.source, dir.path()) else { continue };
        let mut s = commdb_tests::session();
        s.open(&anchor.display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
        // The shared archives are Score-P's, with a program root.
        let want = expected(&oracle.name, oracle.source.starts_with("shared:"));

        // Wait states per pattern, rank and call path.
        let mut scalasca: BTreeMap<(String, i64, String), f64> = BTreeMap::new();
        for ((metric, rank, path), v) in &want {
            if let Some((_, pattern)) = PATTERNS.iter().find(|(m, _)| m == metric) {
                *scalasca.entry((pattern.to_string(), *rank, path.clone())).or_insert(0.0) += v;
                totals.entry(pattern).or_default().0 += v;
            }
        }
        let mut commdb: BTreeMap<(String, i64, String), (f64, f64)> = BTreeMap::new();
        for r in query(
            &mut s,
            "SELECT pattern, rank, path, sum(wait_ns), count(*) FROM wait_states('t.messages', 't.collectives') GROUP BY 1, 2, 3",
        )
        .await
        {
            let (ns, n): (f64, f64) = (r[3].parse().unwrap(), r[4].parse().unwrap());
            commdb.insert((r[0].clone(), r[1].parse().unwrap(), r[2].clone()), (ns, n));
            let pattern = PATTERNS.iter().map(|p| p.1).find(|p| *p == r[0]).unwrap_or("other");
            totals.entry(pattern).or_default().1 += ns;
        }
        let wrong = differences(&scalasca, &commdb);
        assert!(wrong.is_empty(), "{}: wait states differ from Scalasca's:\n{}", oracle.name, wrong.join("\n"));
        let waits = commdb.values().map(|v| v.1).sum::<f64>();
        delays.compare(&oracle.name, &want, &mut s, waits).await;

        // The critical path per rank and call path, over Scalasca's part of the run. Scalasca's
        // path does not follow the waits of MPI_Scan (docs/departures.md): not compared where
        // there are some.
        if commdb.keys().any(|(pattern, _, _)| pattern == "early_scan") {
            println!("{}: MPI_Scan waits, the critical path is not compared", oracle.name);
            compared += 1;
            continue;
        }
        let scalasca: BTreeMap<(i64, String), f64> = want
            .iter()
            .filter(|((m, _, _), _)| m == "critical_path")
            .map(|((_, rank, path), v)| ((*rank, path.clone()), *v))
            .collect();
        let sql = format!(
            "WITH w AS ({WINDOW})
             SELECT rank, path, sum(least(end_ts, coalesce(w.b, end_ts)) - greatest(start_ts, coalesce(w.a, start_ts)))
             FROM critical_path('t.calls', 't.messages', 't.collectives') CROSS JOIN w
             WHERE region IS NOT NULL AND start_ts < coalesce(w.b, end_ts) AND end_ts > coalesce(w.a, start_ts)
             GROUP BY 1, 2"
        );
        let commdb: BTreeMap<(i64, String), (f64, f64)> = query(&mut s, &sql)
            .await
            .into_iter()
            .map(|r| ((r[0].parse().unwrap(), r[1].clone()), (r[2].parse().unwrap(), 1.0)))
            .collect();
        let wrong = differences(&scalasca, &commdb);
        assert!(wrong.is_empty(), "{}: the critical path differs from Scalasca's:\n{}", oracle.name, wrong.join("\n"));

        // The critical-path imbalance per call path, as Scalasca's report derives it.
        let ranks = query(&mut s, "SELECT count(*) FROM t.ranks").await[0][0].parse().unwrap();
        let scalasca = critical_path_imbalance(&want, ranks);
        let sql = format!(
            "WITH w AS ({WINDOW}),
             on_path AS (SELECT path, sum(least(end_ts, coalesce(w.b, end_ts)) - greatest(start_ts, coalesce(w.a, start_ts))) AS ns
               FROM critical_path('t.calls', 't.messages', 't.collectives') CROSS JOIN w
               WHERE region IS NOT NULL AND start_ts < coalesce(w.b, end_ts) AND end_ts > coalesce(w.a, start_ts) GROUP BY 1)
             SELECT p.path, greatest(o.ns - p.mean_ns, 0) FROM on_path o
             JOIN critical_path_profile('t.calls', 't.messages', 't.collectives') p ON p.path = o.path AND p.rank IS NULL"
        );
        let commdb: BTreeMap<String, (f64, f64)> = query(&mut s, &sql)
            .await
            .into_iter()
            .map(|r| (r[0].clone(), (r[1].parse().unwrap(), ranks as f64)))
            .filter(|(_, (v, _))| *v > 0.0)
            .collect();
        let wrong = differences(&scalasca, &commdb);
        assert!(
            wrong.is_empty(),
            "{}: the critical-path imbalance differs from Scalasca's:\n{}",
            oracle.name,
            wrong.join("\n")
        );
        compared += 1;
    }
    delays.report();
    println!("compared {compared} traces; per pattern, Scalasca's sum and commdb's (ns):");
    for (pattern, (a, b)) in &totals {
        println!("  {pattern:16} {a:>16.1} {b:>16.1}");
    }
    assert!(compared >= 7, "only {compared} traces compared");
    // Enough waits of every kind were compared (the shapes trace holds hundreds of each).
    for pattern in ["late_sender", "late_receiver", "wait_at_nxn"] {
        assert!(totals.get(pattern).is_some_and(|t| t.0 > 0.0), "no {pattern} compared");
    }
}

#[test]
fn quoted_fields_keep_their_commas() {
    assert_eq!(
        fields(r#"critical_path,"x/int main(int, char**)/MPI_Send",1,0.5"#),
        ["critical_path", "x/int main(int, char**)/MPI_Send", "1", "0.5"]
    );
    assert_eq!(fields(r#"a,"say ""hi""",3"#), ["a", r#"say "hi""#, "3"]);
}

/// scout.hyb's metrics and the `wait_states` patterns that make them up.
const HYBRID_PATTERNS: [(&str, &[&str]); 10] = [
    ("mpi_latesender", &["late_sender"]),
    ("mpi_latereceiver", &["late_receiver"]),
    ("mpi_wait_nxn", &["wait_at_nxn"]),
    ("mpi_barrier_wait", &["wait_at_barrier"]),
    ("omp_fork", &["omp_fork"]),
    ("omp_management", &["omp_fork", "omp_join"]),
    ("omp_ebarrier_wait", &["wait_at_omp_barrier"]),
    ("omp_ibarrier_wait", &["wait_at_omp_implicit_barrier"]),
    ("omp_lock_contention_critical", &["omp_critical_contention"]),
    ("omp_lock_contention_api", &["omp_lock_contention"]),
];

/// The differences from scout.hyb that docs/departures.md gives: (archive, metric, location,
/// call path). scout.hyb counts no lock API contention for an acquisition inside an
/// omp_set_lock region (it does for one directly in the parallel region); its rule (release of
/// the previous acquisition less the enter of the enclosing region) gives commdb's 50 ns.
const HYBRID_DEPARTURES: [(&str, &str, i64, &str); 2] = [
    ("omp_waits", "omp_lock_contention_api", 0, "main/!$omp parallel @solver.c:10/omp_set_lock"),
    ("omp_waits", "omp_lock_contention_api", 2, "main/!$omp parallel @solver.c:10/omp_set_lock"),
];

/// The differences of the critical path from scout.hyb's that docs/departures.md gives:
/// (archive, location, call path). Cube roots the call paths of explicit tasks at TASKS, where
/// commdb keeps a task in the call path it ran in; the location's time on the path is the same.
const HYBRID_PATH_DEPARTURES: [(&str, i64, &str); 4] = [
    ("threads", 0, "TASKS"),
    ("threads", 0, "TASKS/!$omp task @solver.c:30"),
    ("threads", 0, "main/!$omp parallel @solver.c:10"),
    ("threads", 0, "main/!$omp parallel @solver.c:10/!$omp task @solver.c:30"),
];

/// The archive of a hybrid.txt source in `dir`; None with a printed reason when the reference
/// writer is missing.
fn hybrid_archive(source: &str, dir: &Path) -> Option<PathBuf> {
    if let Some(path) = source.strip_prefix("data:") {
        return Some(commdb_tests::test_data().join(path).join("traces.otf2"));
    }
    if source.starts_with("generate:") {
        return archive(source, dir);
    }
    // scout.hyb ran on a copy without the accelerator locations (tests/otf2/without_gpu.py);
    // commdb reads the same copy (on the original its critical path goes through the streams,
    // which scout.hyb does not know).
    if let Some(path) = source.strip_prefix("without-gpu:") {
        let original = archive(&format!("shared:{path}"), dir)?;
        let script = commdb_tests::project_root().join("tests/otf2/without_gpu.py");
        let copy = dir.join("without_gpu");
        let out = std::process::Command::new("/usr/bin/python3").arg(script).arg(&original).arg(&copy).output();
        return match out {
            Ok(o) if o.status.success() => Some(copy.join("traces.otf2")),
            other => {
                println!("skip {source}: the reference Python reader and writer could not copy it: {other:?}");
                None
            }
        };
    }
    let spec = source.strip_prefix("script:").unwrap_or_else(|| panic!("unknown source {source}"));
    let mut parts = spec.split(':');
    let script = commdb_tests::project_root().join("tests/otf2").join(parts.next().unwrap());
    python_archive(source, &script, dir, parts)
}

/// The archive the reference Python writer's `script` writes into `dir` with `args`; None with
/// a printed reason when it cannot (python3-otf2 not installed).
fn python_archive<'a>(source: &str, script: &Path, dir: &Path, args: impl Iterator<Item = &'a str>) -> Option<PathBuf> {
    let out = std::process::Command::new("/usr/bin/python3").arg(script).arg(dir).args(args).output();
    match out {
        Ok(o) if o.status.success() => Some(dir.join("traces.otf2")),
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            println!(
                "skip {source}: the reference Python writer failed (python3-otf2 not installed?): {}",
                why.lines().last().unwrap_or("")
            );
            None
        }
        Err(e) => {
            println!("skip {source}: /usr/bin/python3 cannot run: {e}");
            None
        }
    }
}

#[tokio::test]
async fn hybrid_wait_states_agree_with_scalasca() {
    let list = std::fs::read_to_string(commdb_tests::test_data().join("scalasca/hybrid.txt")).unwrap();
    let mut compared = 0;
    for line in list.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "hybrid.txt: name, ranks, threads, source: {line}");
        let (name, source) = (f[0], f[3]);
        let dir = tempfile::tempdir().unwrap();
        let Some(anchor) = hybrid_archive(source, dir.path()) else { continue };
        let mut s = commdb_tests::session();
        s.open(&anchor.display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
        // Scalasca's locations are numbered rank by rank, thread by thread.
        let locations: BTreeMap<(i64, i64), i64> =
            query(&mut s, "SELECT rank, thread FROM t.locations WHERE kind = 'cpu' ORDER BY 1, 2")
                .await
                .into_iter()
                .enumerate()
                .map(|(i, r)| ((r[0].parse().unwrap(), r[1].parse().unwrap()), i as i64))
                .collect();
        let want = expected(&format!("hybrid_{name}"), false);
        let sql = "SELECT pattern, rank, thread, path, sum(wait_ns), count(*) FROM wait_states('t.messages', 't.collectives') GROUP BY 1, 2, 3, 4";
        let mut commdb: BTreeMap<(String, i64, String), (f64, f64)> = BTreeMap::new();
        for r in query(&mut s, sql).await {
            let Some(&location) = locations.get(&(r[1].parse().unwrap(), r[2].parse().unwrap())) else {
                panic!("{name}: a wait on rank {} thread {}, which is no CPU thread", r[1], r[2]);
            };
            let (ns, n): (f64, f64) = (r[4].parse().unwrap(), r[5].parse().unwrap());
            for (metric, _) in HYBRID_PATTERNS.iter().filter(|(_, patterns)| patterns.contains(&r[0].as_str())) {
                let e = commdb.entry((metric.to_string(), location, r[3].clone())).or_default();
                e.0 += ns;
                e.1 += n;
            }
        }
        let scalasca: BTreeMap<(String, i64, String), f64> = want
            .iter()
            .filter(|((m, _, _), _)| HYBRID_PATTERNS.iter().any(|(h, _)| h == m))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let known: Vec<String> = HYBRID_DEPARTURES
            .iter()
            .filter(|d| d.0 == name)
            .map(|d| (d.1.to_string(), d.2, d.3.to_string()))
            .map(|k| {
                let b = commdb.get(&k).map_or(0.0, |v| v.0);
                format!("{k:?}: Scalasca {:.1}, commdb {b:.1}", scalasca.get(&k).copied().unwrap_or(0.0))
            })
            .collect();
        let wrong = differences(&scalasca, &commdb);
        assert_eq!(wrong, known, "{name}: wait states differ from scout.hyb's other than docs/departures.md says");
        println!("{name}: {} values agree with scout.hyb, {} known departures", scalasca.len(), known.len());

        // The critical path per location and call path, over the part of the run scout.hyb's
        // path covers.
        let scalasca: BTreeMap<(i64, String), f64> = want
            .iter()
            .filter(|((m, _, _), _)| m == "critical_path")
            .map(|((_, location, path), v)| ((*location, path.clone()), *v))
            .collect();
        let sql = format!(
            "WITH w AS ({WINDOW})
             SELECT rank, thread, path, sum(least(end_ts, coalesce(w.b, end_ts)) - greatest(start_ts, coalesce(w.a, start_ts)))
             FROM critical_path('t.calls', 't.messages', 't.collectives') CROSS JOIN w
             WHERE region IS NOT NULL AND start_ts < coalesce(w.b, end_ts) AND end_ts > coalesce(w.a, start_ts)
             GROUP BY 1, 2, 3"
        );
        let mut commdb: BTreeMap<(i64, String), (f64, f64)> = BTreeMap::new();
        for r in query(&mut s, &sql).await {
            let at = (r[0].parse().unwrap(), r[1].parse().unwrap());
            let Some(&location) = locations.get(&at) else {
                panic!("{name}: the critical path is on rank {} thread {}, which is no CPU thread", r[0], r[1]);
            };
            commdb.insert((location, r[2].clone()), (r[3].parse().unwrap(), 1.0));
        }
        let wrong = differences(&scalasca, &commdb);
        let known: Vec<String> = HYBRID_PATH_DEPARTURES
            .iter()
            .filter(|d| d.0 == name)
            .map(|d| (d.1, d.2.to_string()))
            .map(|k| {
                let b = commdb.get(&k).map_or(0.0, |v| v.0);
                format!("{k:?}: Scalasca {:.1}, commdb {b:.1}", scalasca.get(&k).copied().unwrap_or(0.0))
            })
            .collect();
        assert_eq!(
            wrong, known,
            "{name}: the critical path differs from scout.hyb's other than docs/departures.md says"
        );
        // Where they differ, the location's time on the path is the same.
        for location in HYBRID_PATH_DEPARTURES.iter().filter(|d| d.0 == name).map(|d| d.1) {
            let a: f64 = scalasca.iter().filter(|(k, _)| k.0 == location).map(|(_, v)| v).sum();
            let b: f64 = commdb.iter().filter(|(k, _)| k.0 == location).map(|(_, v)| v.0).sum();
            assert!((a - b).abs() <= 1.0, "{name}: location {location} on the path: Scalasca {a}, commdb {b}");
        }
        println!("{name}: the critical path agrees with scout.hyb on {} locations and call paths", scalasca.len());

        // The OpenMP delay costs alone (delay_ompbarrier, delay_ompidle) per location and call
        // path: commdb's with the waits between ranks left out (no messages, no collectives),
        // on the call paths of no MPI call, whose idle time the MPI waits in it would change;
        // time no region covers is commdb's alone (Scalasca attributes time to call paths).
        let mut omp: BTreeMap<(i64, String), f64> = BTreeMap::new();
        for ((metric, location, path), v) in want.iter() {
            let leaf = path.rsplit('/').next().unwrap_or(path);
            if (metric == "delay_ompbarrier" || metric == "delay_ompidle") && !leaf.starts_with("MPI_") {
                *omp.entry((*location, path.clone())).or_default() += v;
            }
        }
        for sql in [
            "CREATE OR REPLACE VIEW no_messages AS SELECT * FROM t.messages WHERE false",
            "CREATE OR REPLACE VIEW no_collectives AS SELECT * FROM t.collectives WHERE false",
        ] {
            query(&mut s, sql).await;
        }
        let sql =
            "SELECT rank, thread, path, sum(direct_ns) FROM delay_costs('t.calls', 'no_messages', 'no_collectives')
                   WHERE rank IS NOT NULL AND path IS NOT NULL GROUP BY 1, 2, 3";
        let mut alone: BTreeMap<(i64, String), (f64, f64)> = BTreeMap::new();
        for r in query(&mut s, sql).await {
            let leaf = r[2].rsplit('/').next().unwrap_or(&r[2]).to_string();
            if !leaf.starts_with("MPI_") {
                let location = locations[&(r[0].parse().unwrap(), r[1].parse().unwrap())];
                alone.insert((location, r[2].clone()), (r[3].parse().unwrap(), 1.0));
            }
        }
        let wrong = differences(&omp, &alone);
        assert!(wrong.is_empty(), "{name}: OpenMP delay costs differ from scout.hyb's:\n{}", wrong.join("\n"));
        println!("{name}: the OpenMP delay costs agree with scout.hyb on {} locations and call paths", omp.len());
        // Delay costs in total: commdb's direct and propagated against scout.hyb's short- and
        // long-term costs (the MPI ones differ as docs/departures.md says; printed).
        let (mut short, mut long) = (0.0, 0.0);
        for ((metric, _, _), v) in want.iter().filter(|((m, _, _), _)| m.starts_with("delay_")) {
            if metric.ends_with("_longterm") {
                long += v;
            } else {
                short += v;
            }
        }
        let sql = "SELECT rank, thread, sum(direct_ns), sum(propagated_ns)
                   FROM delay_costs('t.calls', 't.messages', 't.collectives') WHERE rank IS NOT NULL GROUP BY 1, 2";
        let (mut direct, mut propagated) = (0.0, 0.0);
        for r in query(&mut s, sql).await {
            direct += r[2].parse::<f64>().unwrap();
            propagated += r[3].parse::<f64>().unwrap();
        }
        println!(
            "{name}: delay costs (ns): scout.hyb short-term {short:.0}, long-term {long:.0}; commdb direct {direct:.0}, propagated {propagated:.0}"
        );
        compared += 1;
    }
    println!("{compared} hybrid archives compared");
}
