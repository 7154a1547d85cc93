//! `offload_waits` and `device_idle` against CASITA (rdietric/casita), the oracle for the
//! offload rules as Scalasca's analyzer is for the MPI and OpenMP ones. What CASITA found on the
//! archives of tests/data/casita/traces.txt is in tests/data/casita/NAME.tsv, written by
//! tests/casita/oracle.sh; this test needs only those files (and the archives: the casita ones of
//! ../shared/data, skipped with a printed reason when it is absent, tests/data/otf2/gpu,
//! which CASITA read written in µs, and the `generate --gpu` archives, generated again here).
//!
//! Compared: the early blocking waits (their number and time), their time on compute kernels
//! (the sum of `offload_blame`, as CASITA sums each kernel's part),
//! each kernel's time on the critical path (within a ms, their sum within 0.1%),
//! each kernel's blame for host waits (CASITA's blame of reason "host wait", commdb's
//! `offload_blame` per kernel), and the idle and compute idle device time. Where CASITA ends the
//! offload interval at the device's last task rather than at the last call to the API (Score-P's
//! API regions not marked as wrappers: docs/departures.md), commdb's last idle stretch is cut
//! there for the comparison. CASITA prints seconds to six places: values agree within a µs (or the
//! rounding of a percentage, for the blame).
//!
//! Cloverleaf's idle device time is compared within 0.5% (below). Left out, with the reason
//! printed: `2_jacobi_blame_cpu_015`'s early blocking waits. Its device
//! clock runs up to 40 µs ahead of the host's, so that kernels seem to start before their launch;
//! CASITA then pairs launches and kernels differently (its KernelExecutionRule finds no launch
//! for such a kernel and gives the launch to the next), where commdb keeps the k-th launch for the
//! k-th kernel and lets a synchronisation wait only for kernels launched before it ended.

use std::collections::BTreeMap;

use commdb_catalog::OpenOptions;

struct Expected {
    totals: BTreeMap<String, (f64, Option<u64>)>,
    blame: BTreeMap<String, f64>,
    path: BTreeMap<String, f64>,
}

fn expected(name: &str) -> Expected {
    let path = commdb_tests::test_data().join(format!("casita/{name}.tsv"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut e = Expected { totals: BTreeMap::new(), blame: BTreeMap::new(), path: BTreeMap::new() };
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "{}: expected 4 tab-separated fields, found '{line}'", path.display());
        let seconds: f64 = f[2].parse().unwrap();
        if f[0] == "kernel_blame" {
            e.blame.insert(f[1].to_string(), seconds);
        } else if f[0] == "critical_path" {
            e.path.insert(f[1].to_string(), seconds);
        } else {
            e.totals.insert(f[0].to_string(), (seconds, f[3].parse().ok()));
        }
    }
    e
}

async fn query(s: &mut commdb_catalog::Session, sql: &str) -> Vec<Vec<String>> {
    commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap()
}

async fn one(s: &mut commdb_catalog::Session, sql: &str) -> f64 {
    query(s, sql).await[0][0].parse().unwrap_or(0.0)
}

#[tokio::test]
async fn offload_waits_and_device_idle_agree_with_casita() {
    let list = std::fs::read_to_string(commdb_tests::test_data().join("casita/traces.txt")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for line in list.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (name, source) = line.split_once(' ').unwrap();
        // (the archive, seconds per unit of commdb's ns as CASITA read it)
        let (archive, scale) = match source.split_once(':') {
            Some(("shared", path)) => match commdb_tests::shared_data() {
                Some(d) => (d.join(path), 1e-9),
                None => {
                    println!("{name}: skipped, ../shared/data is absent");
                    continue;
                }
            },
            Some(("make", _)) => (commdb_tests::test_data().join("otf2/gpu"), 1e-6),
            Some(("generate", spec)) => {
                let cfg = commdb_catalog::generate::GeneratorConfig::parse_spec(spec).unwrap();
                let dir = scratch.path().join(name);
                commdb_catalog::export::otf2::write_generated(
                    &cfg,
                    &dir,
                    1 << 20,
                    commdb_catalog::export::otf2::Version::CURRENT,
                )
                .unwrap();
                (dir.join("traces.otf2"), 1e-9)
            }
            _ => panic!("traces.txt: {name}: expected shared:PATH, make:SCRIPT or generate:OPTIONS, found '{source}'"),
        };
        let want = expected(name);
        let mut s = commdb_tests::session();
        s.open(&archive.display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
        let near = |what: &str, casita: f64, commdb_ns: f64, slack: f64| {
            let commdb = commdb_ns * scale;
            assert!(
                (casita - commdb).abs() <= 1e-6 + slack,
                "{name}: {what}: CASITA {casita:.6} s, commdb {commdb:.9} s"
            );
        };

        if name == "jacobi_blame_cpu" {
            println!("{name}: early blocking waits not compared (the device's clock runs ahead of the host's)");
        } else {
            let early = query(
                &mut s,
                "SELECT count(*), coalesce(sum(wait_ns), 0), (SELECT coalesce(sum(blame_ns), 0) FROM offload_blame('t.events')) FROM offload_waits('t.events') WHERE pattern = 'early_sync'",
            )
            .await;
            let (wait, count) = want.totals["early_blocking_wait"];
            assert_eq!(Some(early[0][0].parse::<u64>().unwrap()), count, "{name}: early blocking waits");
            near("early blocking wait", wait, early[0][1].parse().unwrap(), 0.0);
            near("on compute kernels", want.totals["on_compute_kernels"].0, early[0][2].parse().unwrap(), 0.0);
            let blamed = query(&mut s, "SELECT kernel, sum(blame_ns) FROM offload_blame('t.events') GROUP BY 1").await;
            let commdb: BTreeMap<String, f64> = blamed.iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
            for kernel in want.blame.keys().chain(commdb.keys()) {
                let casita = want.blame.get(kernel).copied().unwrap_or(0.0);
                let ours = commdb.get(kernel).copied().unwrap_or(0.0);
                near(&format!("blame of {kernel}"), casita, ours, casita * 1e-6);
            }
        }

        // Each kernel's time on the critical path (CASITA's "Time on CP" of the kernel's
        // region; a host region of the same name, as Score-P's compiler instrumentation gives
        // a kernel's host stub, holds at most a few µs of it).
        if name == "jacobi_blame_cpu" {
            println!("{name}: the critical path is not compared (the device's clock runs ahead of the host's)");
        } else {
            let kernels = query(
                &mut s,
                "SELECT region, sum(duration) FROM critical_path('t.calls', 't.messages', 't.collectives') WHERE kind = 'device' GROUP BY 1",
            )
            .await;
            let commdb: BTreeMap<String, f64> = kernels.iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
            let all = query(&mut s, "SELECT DISTINCT kernel FROM gpu_kernels('t.calls')").await;
            let (mut theirs, mut ours) = (0.0, 0.0);
            let mut off = Vec::new();
            for kernel in all.iter().map(|r| &r[0]) {
                let casita = want.path.get(kernel).copied().unwrap_or(0.0);
                let mine = commdb.get(kernel).copied().unwrap_or(0.0);
                if (casita - mine * scale).abs() > 1e-5 + casita * 0.01 {
                    off.push(format!("{kernel}: CASITA {casita:.6} s, commdb {:.6} s", mine * scale));
                }
                (theirs, ours) = (theirs + casita, ours + mine * scale);
            }
            // Where the path crosses between ranks it follows commdb's MPI rules (Scalasca's),
            // not CASITA's: a few kernels next to the halo exchange differ by up to 0.6 ms.
            println!(
                "{name}: {} kernels differ by more than 1% on the critical path:\n  {}",
                off.len(),
                off.join("\n  ")
            );
            for kernel in all.iter().map(|r| &r[0]) {
                let casita = want.path.get(kernel).copied().unwrap_or(0.0);
                near(
                    &format!("{kernel} on the critical path"),
                    casita,
                    commdb.get(kernel).copied().unwrap_or(0.0),
                    1e-3,
                );
            }
            println!("{name}: kernels on the critical path: CASITA {theirs:.6} s, commdb {ours:.6} s");
            assert!((theirs - ours).abs() <= 1e-5 + theirs * 1e-3, "{name}: kernels on the critical path");
        }

        // CASITA ends the offload interval at the last API call only for wrapper regions; else
        // at the device's last task (a kernel or a transfer), where commdb's last stretch is cut.
        let wrappers =
            one(&mut s, "SELECT count(*) FROM t.regions WHERE paradigm = 'cuda' AND role = 'wrapper'").await > 0.0;
        let end = if wrappers { "d.end_ts" } else { "least(d.end_ts, l.last_task)" };
        for (metric, busy) in [("idle_device", "any"), ("compute_idle_device", "kernels")] {
            let sql = format!(
                "WITH l AS (SELECT rank, max(end_ts) AS last_task FROM (SELECT rank, end_ts FROM gpu_kernels('t.calls') UNION ALL SELECT rank, end_ts FROM gpu_transfers('t.events')) GROUP BY rank)
                 SELECT sum(CASE WHEN d.ended_by IS NOT NULL THEN d.idle_ns ELSE greatest({end} - d.start_ts, 0) END)
                 FROM device_idle('t.events', busy => '{busy}') d JOIN l ON l.rank = d.rank"
            );
            let idle = one(&mut s, &sql).await;
            let casita = want.totals[metric].0;
            if name == "cloverleaf" {
                // commdb gives 3.3 ms (0.4%) more idle time and 7.4 ms more compute idle time
                // than CASITA here, where the two agree to the µs on the other archives. Unlike
                // them, a copy (cuMemcpyHtoDAsync, which CASITA does not take as an offload call)
                // runs on each rank before the first call that opens the interval, and CASITA's
                // count of running tasks (OTF2ParallelTraceWriter::handleDeviceTaskEnter) starts
                // at -1 until that call; that this accounts for the difference is not confirmed.
                println!("{name}: {metric}: CASITA {casita:.6} s, commdb {:.6} s", idle * scale);
                near(metric, casita, idle, casita * 0.005);
            } else {
                near(metric, casita, idle, 0.0);
            }
        }
        compared += 1;
    }
    println!("compared {compared} archives with CASITA");
}
