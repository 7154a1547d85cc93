//! `generate --gpu` against its own ground truth: every step offloaded to a stream per rank (a
//! copy in, the host's work, the launch, the kernel, cuCtxSynchronize, a copy out), with
//! planted late launches. What CASITA's offload rules must find is known from the times
//! (crate's generate::offload): per rank, the early synchronisations' time and their time on
//! the kernel, the late launches' host part, the device's idle time; the late-launch ranks are
//! those with the largest host part. Checked at several sizes and shapes (no enclosing region,
//! uninstrumented host work, master-worker), in memory and read back from the OTF2 archive the
//! generator writes as Score-P writes CUDA.

use commdb_catalog::OpenOptions;
use commdb_catalog::generate::{GeneratorConfig, GpuTruth, generate};

async fn per_rank(s: &mut commdb_catalog::Session, sql: &str) -> Vec<i64> {
    let rows = commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap();
    rows.iter().map(|r| r[1].parse().unwrap()).collect()
}

async fn one(s: &mut commdb_catalog::Session, sql: &str) -> i64 {
    commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap()[0][0].parse().unwrap()
}

/// The figures of trace `t` in `s` against `truth`.
async fn check(s: &mut commdb_catalog::Session, truth: &GpuTruth, ranks: i32, what: &str) {
    let sum = |pattern: &str, column: &str| {
        format!(
            "SELECT r.rank, coalesce(sum({column}), 0) FROM t.ranks r LEFT JOIN offload_waits('t.events') w ON w.rank = r.rank AND w.pattern = '{pattern}' GROUP BY r.rank ORDER BY r.rank"
        )
    };
    assert_eq!(per_rank(s, &sum("early_sync", "wait_ns")).await, truth.early_sync_ns, "{what}: early_sync wait_ns");
    assert_eq!(per_rank(s, &sum("early_sync", "on_kernel_ns")).await, truth.on_kernel_ns, "{what}: on_kernel_ns");
    assert_eq!(per_rank(s, &sum("late_launch", "host_late_ns")).await, truth.host_late_ns, "{what}: host_late_ns");
    let idle = "SELECT r.rank, coalesce(sum(idle_ns), 0) FROM t.ranks r LEFT JOIN device_idle('t.events') d ON d.rank = r.rank GROUP BY r.rank ORDER BY r.rank";
    assert_eq!(per_rank(s, idle).await, truth.device_idle_ns, "{what}: device_idle");
    assert_eq!(one(s, "SELECT count(*) FROM gpu_kernels('t.calls')").await as u64, truth.kernels, "{what}: kernels");
    assert_eq!(
        one(s, "SELECT count(*) FROM gpu_transfers('t.events') WHERE end_ts IS NOT NULL").await as u64,
        truth.transfers,
        "{what}: transfers"
    );
    // Every copy is a late synchronisation; every kernel is launched late.
    let late_syncs = one(s, "SELECT count(*) FROM offload_waits('t.events') WHERE pattern = 'late_sync'").await;
    assert_eq!(late_syncs as u64, truth.transfers, "{what}: late_sync");
    // The planted ranks are the ones whose device waited longest for its host.
    let planted = truth.late_launch.ranks.len();
    let sql = format!(
        "SELECT rank, sum(host_late_ns) AS late FROM offload_waits('t.events') WHERE pattern = 'late_launch' GROUP BY rank ORDER BY late DESC, rank LIMIT {planted}"
    );
    let mut found = per_rank_ranks(s, &sql).await;
    found.sort_unstable();
    let mut want = truth.late_launch.ranks.clone();
    want.sort_unstable();
    want.dedup();
    assert_eq!(found, want, "{what}: the late-launch ranks of {ranks}");
}

async fn per_rank_ranks(s: &mut commdb_catalog::Session, sql: &str) -> Vec<i32> {
    let rows = commdb_tests::rows(&s.collect(sql).await.unwrap()).unwrap();
    rows.iter().map(|r| r[0].parse().unwrap()).collect()
}

#[tokio::test]
async fn offload_waits_and_idle_devices_are_the_planted_ones() {
    let shapes = [
        "ranks=8,iterations=12,gpu",
        "ranks=64,iterations=3,pattern=ring,gpu,late-launch=5,40-42:30us,no-enclosing-region,uninstrumented-compute",
        "ranks=16,iterations=4,pattern=master-worker,gpu,late-launch=3:1ms,compute=50us,bytes=1000000",
        "ranks=32,iterations=2,pattern=alltoall,gpu,late-launch=0-31:0ns",
    ];
    for spec in shapes {
        let cfg = GeneratorConfig::parse_spec(spec).unwrap();
        let truth = generate(&cfg).unwrap().truth.gpu.unwrap();
        let mut s = commdb_tests::session();
        s.open(&format!("generate:{spec}"), Some("t"), &OpenOptions::default()).unwrap();
        check(&mut s, &truth, cfg.ranks, spec).await;

        let dir = std::env::temp_dir().join(format!("commdb-gpu-generated-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = commdb_catalog::export::otf2::write_generated(
            &cfg,
            &dir,
            1 << 16,
            commdb_catalog::export::otf2::Version::CURRENT,
        )
        .unwrap();
        assert_eq!(written.gpu.as_ref(), Some(&truth), "{spec}: the streamed generation plants the same");
        let mut s = commdb_tests::session();
        s.open(&dir.join("traces.otf2").display().to_string(), Some("t"), &OpenOptions::default()).unwrap();
        assert_eq!(one(&mut s, "SELECT count(*) FROM t.warnings").await, 0, "{spec}: OTF2 read back without warnings");
        check(&mut s, &truth, cfg.ranks, &format!("{spec}, as OTF2")).await;
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn options_that_do_not_apply_are_refused() {
    let e = GeneratorConfig::parse_spec("late-launch=1:5us").unwrap_err().to_string();
    assert!(e.contains("late-launch applies to GPU traces"), "{e}");
    let e = GeneratorConfig::parse_spec("gpu,threads=4").unwrap_err().to_string();
    assert!(e.contains("gpu and threads are not generated together"), "{e}");
    let e = GeneratorConfig::parse_spec("ranks=4,gpu,late-launch=9:5us").unwrap_err().to_string();
    assert!(e.contains("late-launch names rank 9"), "{e}");
}
