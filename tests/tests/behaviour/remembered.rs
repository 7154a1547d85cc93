//! What analyses learn from a trace's tables is learnt once per session: the latency criteria
//! of a trace's messages, which a narrowed `message_latency` measures against, and the span of
//! its events, which the lod functions cut their slots from. The second call's plan reads no
//! extra input for them; a session of its own learns them again.

use commdb_catalog::Outcome;

/// The leaf scans of the physical plan of `sql`.
async fn scans(session: &mut commdb_catalog::Session, sql: &str) -> usize {
    let Outcome::Query(df) = session.statement(&format!("EXPLAIN {sql}")).await.unwrap() else { panic!("{sql}") };
    let batches = df.collect().await.unwrap();
    let rows = commdb_tests::rows(&batches).unwrap();
    let physical: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "physical_plan").collect();
    assert_eq!(physical.len(), 1, "{sql}");
    physical[0][1].lines().filter(|l| l.contains("BuildOnFirstScan") || l.contains("DataSourceExec")).count()
}

async fn run(session: &mut commdb_catalog::Session, sql: &str) {
    session.collect(sql).await.unwrap();
}

#[tokio::test]
async fn criteria_and_spans_are_learnt_once_per_session() {
    for (view, call) in [
        ("CREATE VIEW v AS SELECT * FROM g.messages WHERE src < 4", "SELECT count(*) FROM message_latency('v')"),
        ("CREATE VIEW v AS SELECT * FROM g.calls WHERE rank < 4", "SELECT count(*) FROM lod_calls('v', pixels => 50)"),
    ] {
        let mut first = Vec::new();
        for _session in 0..2 {
            let mut session = commdb_tests::session();
            run(&mut session, "ATTACH 'generate:ranks=8,iterations=5' AS g").await;
            run(&mut session, view).await;
            let before = scans(&mut session, call).await;
            run(&mut session, call).await;
            let after = scans(&mut session, call).await;
            assert_eq!(after + 1, before, "{call}: the second plan reads one input fewer");
            first.push(before);
        }
        assert_eq!(first[0], first[1], "{call}: another session learns it again");
    }
}
