//! Level-of-detail results do not depend on how the session partitions its tables nor on how
//! many threads compute them.

use commdb_catalog::Session;

async fn lod(partitions: usize) -> Vec<Vec<String>> {
    let mut s = Session::with_partitions(partitions);
    commdb_udfs::register_all(&mut s);
    s.open(
        "generate:ranks=12,iterations=15,imbalance=2:3,background-traffic=500us:1ms:3",
        Some("g"),
        &Default::default(),
    )
    .unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT * FROM lod_calls(pixels => 300, rel => 'g.calls') ORDER BY rank, thread, slot_start",
        "SELECT * FROM lod_messages('g.messages', resolution_ns => 2000) ORDER BY src, dst, send_slot, recv_slot",
        "SELECT * FROM lod_collectives('g.collectives', resolution_ns => 5000) ORDER BY comm, first_slot",
    ] {
        let batches = s.collect(sql).await.unwrap();
        out.extend(commdb_tests::rows(&batches).unwrap());
    }
    out
}

#[tokio::test]
async fn same_output_for_any_partitioning_and_thread_count() {
    let reference = lod(1).await;
    assert!(reference.len() > 100);
    assert_eq!(lod(7).await, reference);
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let single = one_thread.install(|| tokio::runtime::Runtime::new().unwrap().block_on(lod(3)));
    assert_eq!(single, reference);
}
