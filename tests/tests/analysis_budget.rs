//! Analyses answer to the session's memory budget: what an analysis reads and the working
//! memory it reserves before computing come from the memory pool, and past the budget the
//! query fails with an error saying how much it needs and what to narrow (never a process
//! killed by the operating system); a narrower relation then fits.

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use commdb_catalog::{OpenOptions, Session};

fn session(budget: usize) -> Session {
    let mut session = Session::with_limits(2, Some(budget));
    commdb_udfs::register_all(&mut session);
    session.open("generate:ranks=64,ranks-per-node=8,iterations=200", None, &OpenOptions::default()).unwrap();
    session
}

#[test]
fn an_analysis_over_the_budget_says_what_it_needs_and_what_to_narrow() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // 51,200 messages: about 1.7 MB of the columns latency_criteria reads, twice that to compute.
    let mut small = session(1 << 20);
    let e = runtime.block_on(small.collect("SELECT count(*) FROM latency_criteria()")).unwrap_err().to_string();
    assert!(e.contains("latency_criteria:") && e.contains("memory budget for queries"), "{e}");
    assert!(e.contains("narrow the relation") && e.contains("--memory-limit"), "{e}");
    assert!(e.contains("needs about ") && e.contains("MiB"), "{e}");
    println!("{e}");

    // A view over a short time window fits the same budget.
    runtime.block_on(small.collect("CREATE VIEW early AS SELECT * FROM messages WHERE send_ts < 2000000")).unwrap();
    let rows = runtime.block_on(small.collect("SELECT count(*) FROM latency_criteria(rel => 'early')")).unwrap();
    assert!(rows[0].column(0).as_primitive::<Int64Type>().value(0) > 0);

    // With room, the whole relation is analysed, and the reservation is given back after.
    let mut roomy = session(1 << 30);
    for _ in 0..2 {
        let rows = runtime.block_on(roomy.collect("SELECT count(*) FROM wait_states()")).unwrap();
        assert!(rows[0].column(0).as_primitive::<Int64Type>().value(0) > 0);
    }
    assert_eq!(roomy.context().runtime_env().memory_pool.reserved(), 0);
}

#[test]
fn message_latency_streams_the_messages_and_holds_only_what_the_criteria_need() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let query =
        "SELECT count(*), count(latency), sum(CAST(delayed AS INT)), round(sum(latency), 6) FROM message_latency()";
    let answer = |s: &mut Session| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        Ok::<_, String>(arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string())
    };
    let expected = answer(&mut session(1 << 30)).unwrap();
    // The 51,200 messages flow through in batches; only the five columns the criteria need are
    // held (about 1.7 MB, twice that reserved).
    let mut tight = session(8 << 20);
    assert_eq!(answer(&mut tight).unwrap(), expected);
    let plan = runtime.block_on(tight.collect(&format!("EXPLAIN {query}"))).unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&plan).unwrap().to_string();
    assert!(plan.contains("message_latency: analysis, streamed"), "{plan}");
    assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
    // What it holds still answers to the budget.
    let e = answer(&mut session(1 << 20)).unwrap_err();
    assert!(e.contains("message_latency:") && e.contains("memory budget for queries"), "{e}");
}

#[test]
fn lod_messages_sums_the_messages_as_they_come_and_holds_only_its_groups() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answer = |s: &mut Session, query: &str| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        Ok::<_, String>(arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string())
    };
    // The trace's span is known before the messages are read: they stream through.
    let query = "SELECT count(*), sum(messages), round(sum(bytes_avg * messages), 3), min(first_send_ts), max(last_recv_ts), round(sum(duration_avg), 3) FROM lod_messages(pixels => 40)";
    let expected = answer(&mut session(1 << 30), query).unwrap();
    // 51,200 messages: holding the six columns it reads would take about 2.5 MB, twice that
    // reserved; the sums of 64 x 4 pairs over 40 x 40 slots take less than 1 MB.
    let mut tight = session(2 << 20);
    assert_eq!(answer(&mut tight, query).unwrap(), expected);
    let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
    assert!(plan.contains("lod_messages: analysis, streamed"), "{plan}");
    assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
    // A table of no trace, cut on its own span (no t0 and t1 given), is read whole first, and
    // answers to the budget as a whole analysis does; with t0 and t1 it streams.
    let own = "SELECT count(*) FROM lod_messages(rel => 'early', pixels => 40)";
    let mut s = session(1 << 30);
    runtime.block_on(s.collect("CREATE TABLE early AS SELECT src, dst, bytes, send_ts, recv_ts, duration FROM messages WHERE send_ts < 2000000")).unwrap();
    let given = "SELECT count(*) FROM lod_messages(rel => 'early', t0 => 0, t1 => 2000000, pixels => 40)";
    assert!(answer(&mut s, &format!("EXPLAIN {given}")).unwrap().contains("lod_messages: analysis, streamed"));
    let plan = answer(&mut s, &format!("EXPLAIN {own}")).unwrap();
    assert!(plan.contains("lod_messages: analysis") && !plan.contains("streamed"), "{plan}");
    assert!(answer(&mut s, own).unwrap().contains('|'));
}

#[test]
fn comm_matrix_load_imbalance_and_message_histogram_tally_their_input_as_it_comes() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answer = |s: &mut Session, query: &str| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        Ok::<_, String>(arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string())
    };
    // 51,200 messages over 64 x 4 rank pairs and 8 x 8 node pairs, and the calls of 64 ranks,
    // in a budget of 1 MiB that would not hold their columns.
    for (function, query) in [
        ("comm_matrix", "SELECT * FROM comm_matrix() ORDER BY src, dst LIMIT 20"),
        (
            "comm_matrix",
            "SELECT count(*), sum(messages), sum(bytes), round(sum(share), 9) FROM comm_matrix(by => 'node', value => 'duration')",
        ),
        ("load_imbalance", "SELECT * FROM load_imbalance()"),
        ("load_imbalance", "SELECT * FROM load_imbalance(metric => 'duration')"),
        ("message_histogram", "SELECT * FROM message_histogram()"),
    ] {
        let expected = answer(&mut session(1 << 30), query).unwrap();
        let mut tight = session(1 << 20);
        assert_eq!(answer(&mut tight, query).unwrap(), expected, "{query}");
        let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis, streamed")), "{plan}");
    }
}
