//! Analyses answer to the session's memory budget: what an analysis reads and the working
//! memory it reserves before computing come from the memory pool, and past the budget the
//! query fails with an error saying how much it needs and what to narrow (never a process
//! killed by the operating system); a narrower relation then fits.

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use commdb_catalog::{OpenOptions, Session};

/// The trace the tests read: 64 ranks on 8 nodes, 44,800 messages.
const SPEC: &str = "generate:ranks=64,ranks-per-node=8,iterations=200";

fn session(budget: usize) -> Session {
    let mut session = Session::with_limits(2, Some(budget));
    commdb_udfs::register_all(&mut session);
    session.open(SPEC, None, &OpenOptions::default()).unwrap();
    session
}

#[test]
fn an_analysis_over_the_budget_says_what_it_needs_and_what_to_narrow() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // 44,800 messages in two groups: latency_criteria keeps at most twice max_samples of a
    // group's messages, 16 bytes each; with max_samples above the group's 22,400 messages it
    // keeps them all (about 0.7 MB), more than 512 KiB.
    let mut small = session(1 << 19);
    let all = "SELECT count(*) FROM latency_criteria(max_samples => 100000)";
    let e = runtime.block_on(small.collect(all)).unwrap_err().to_string();
    assert!(e.contains("latency_criteria: folding its input") && e.contains("memory budget for queries"), "{e}");
    assert!(e.contains("narrow the relation") && e.contains("--memory-limit"), "{e}");
    assert!(e.contains("needs about ") && e.contains("KiB"), "{e}");
    println!("{e}");

    // A view over a short time window fits the same budget, and so does a sample of 1,000
    // messages a group over the whole run.
    runtime.block_on(small.collect("CREATE VIEW early AS SELECT * FROM messages WHERE send_ts < 2000000")).unwrap();
    let narrow = "SELECT count(*) FROM latency_criteria(rel => 'early', max_samples => 100000)";
    let rows = runtime.block_on(small.collect(narrow)).unwrap();
    assert!(rows[0].column(0).as_primitive::<Int64Type>().value(0) > 0);
    let sampled = "SELECT sum(samples) FROM latency_criteria(max_samples => 1000)";
    let rows = runtime.block_on(small.collect(sampled)).unwrap();
    assert_eq!(rows[0].column(0).as_primitive::<Int64Type>().value(0), 2000);

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
    // The 44,800 messages flow through in batches; the criteria are folded first from the
    // messages' five columns (about 0.7 MB held), then only their rows (a few dozen) are held.
    let mut tight = session(8 << 20);
    assert_eq!(answer(&mut tight).unwrap(), expected);
    let plan = runtime.block_on(tight.collect(&format!("EXPLAIN {query}"))).unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&plan).unwrap().to_string();
    assert!(plan.contains("message_latency: analysis, streamed"), "{plan}");
    assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
    assert!(plan.contains("latency_criteria: analysis, streamed"), "{plan}");
    // What the criteria fold holds still answers to the budget: all the messages when the
    // sample may hold them all.
    let all = query.replace("message_latency()", "message_latency(max_samples => 100000)");
    let rows = runtime.block_on(session(1 << 19).collect(&all)).map_err(|e| e.to_string());
    let e = rows.unwrap_err();
    assert!(e.contains("latency_criteria: folding its input") && e.contains("memory budget for queries"), "{e}");
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
    // 44,800 messages: holding the six columns it reads would take about 2.5 MB, twice that
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
fn comm_matrix_and_message_histogram_tally_their_input_as_it_comes() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answer = |s: &mut Session, query: &str| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        Ok::<_, String>(arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string())
    };
    // 44,800 messages over 64 x 4 rank pairs and 8 x 8 node pairs in a budget of 1 MiB that
    // would not hold their columns.
    for (function, query) in [
        ("comm_matrix", "SELECT * FROM comm_matrix() ORDER BY src, dst LIMIT 20"),
        (
            "comm_matrix",
            "SELECT count(*), sum(messages), sum(bytes), round(sum(share), 9) FROM comm_matrix(by => 'node', value => 'duration')",
        ),
        ("message_histogram", "SELECT * FROM message_histogram()"),
    ] {
        let expected = answer(&mut session(1 << 30), query).unwrap();
        let mut tight = session(1 << 20);
        assert_eq!(answer(&mut tight, query).unwrap(), expected, "{query}");
        let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis, streamed")), "{plan}");
    }
}

#[test]
fn the_per_rank_sweeps_read_the_calls_a_chunk_of_whole_ranks_at_a_time() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answer = |s: &mut Session, query: &str| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        Ok::<_, String>(arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string())
    };
    // The rows in some order (an ORDER BY would sort under the tight budget too).
    let rows = |s: &mut Session, query: &str| {
        let mut lines: Vec<String> = answer(s, query)?.lines().map(str::to_string).collect();
        lines.sort();
        Ok::<_, String>(lines)
    };
    let calls = |s: &mut Session| {
        let rows = runtime.block_on(s.collect("SELECT count(*) FROM calls")).unwrap();
        rows[0].column(0).as_primitive::<Int64Type>().value(0)
    };
    // The chunks and the whole relation give the same rows.
    let queries = [
        ("lod_calls", "SELECT * FROM lod_calls(pixels => 50)"),
        ("lod_calls", "SELECT * FROM lod_calls(pixels => 50, per => 'rank')"),
        ("time_profile", "SELECT * FROM time_profile(bins => 30)"),
        ("call_tree", "SELECT * FROM call_tree()"),
        ("load_imbalance", "SELECT * FROM load_imbalance()"),
        ("load_imbalance", "SELECT * FROM load_imbalance(metric => 'exclusive')"),
        (
            "compute_deltas",
            "SELECT rank, call_seq, region, compute_delta_ns, comm_delta_ns, CAST(path AS VARCHAR) FROM compute_deltas()",
        ),
    ];
    // The trace as a store of parts of 20,000 rows, whose scans keep the rank order.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::open(SPEC, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 20_000).unwrap();
    let stored = |budget: usize| {
        let mut session = Session::with_limits(2, Some(budget));
        commdb_udfs::register_all(&mut session);
        session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
        session
    };
    let mut roomy = session(1 << 30);
    let n = calls(&mut roomy);
    // The calls of 64 ranks (over a hundred thousand, some MB): a budget of 3 MiB holds chunks
    // of 192 KiB, a few ranks each, beside the scan's batches; never all of them.
    let mut tight = stored(3 << 20);
    // A copy of the calls in time order, not rank order: read whole and swept as one chunk.
    let mut copied = stored(1 << 30);
    runtime.block_on(copied.collect("CREATE TABLE by_time AS SELECT * FROM calls ORDER BY start_ts DESC")).unwrap();
    assert!(n > 100_000, "{n} calls");
    for (function, query) in queries {
        // In memory, the calls are held already: read whole, swept as one chunk.
        let expected = rows(&mut roomy, query).unwrap();
        assert!(expected.len() > 10, "{query}: {expected:?}");
        let plan = answer(&mut roomy, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis")) && !plan.contains("streamed"), "{plan}");
        assert_eq!(rows(&mut tight, query).unwrap(), expected, "{query}");
        let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis, streamed by rank")), "{plan}");
        assert!(plan.contains("SortPreservingMergeExec") && !plan.contains("SortExec: "), "{plan}");
        assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);

        let from_copy =
            query.replacen("()", "(rel => 'by_time')", 1).replacen("(pixels", "(rel => 'by_time', pixels", 1);
        let from_copy = from_copy.replacen("(bins", "(rel => 'by_time', bins", 1);
        let from_copy = from_copy.replacen("(metric", "(rel => 'by_time', metric", 1);
        assert_ne!(from_copy, query);
        let plan = answer(&mut copied, &format!("EXPLAIN {from_copy}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis")) && !plan.contains("streamed"), "{plan}");
        assert_eq!(rows(&mut copied, &from_copy).unwrap(), expected, "{from_copy}");
    }
    // A view that filters the calls keeps their order and streams too.
    // (Its batches of 8,192 rows span several ranks: 4 MiB holds two.)
    let mut mid = stored(4 << 20);
    runtime.block_on(mid.collect("CREATE VIEW some AS SELECT * FROM calls WHERE rank % 3 = 1")).unwrap();
    let plan = answer(&mut mid, "EXPLAIN SELECT count(*) FROM call_tree(rel => 'some')").unwrap();
    assert!(plan.contains("call_tree: analysis, streamed by rank"), "{plan}");
    let some = answer(&mut mid, "SELECT count(DISTINCT rank) AS r, sum(calls) AS n FROM call_tree(rel => 'some')");
    let direct = answer(&mut roomy, "SELECT count(DISTINCT rank) AS r, count(*) AS n FROM calls WHERE rank % 3 = 1");
    assert_eq!(some.unwrap(), direct.unwrap());
}

#[test]
fn latency_trend_attribution_and_region_graph_stream_the_messages_once_the_criteria_are_held() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // Background traffic in the middle of the run, and a bad mapping: periods and causes to find.
    let session = |budget: usize| {
        let mut session = Session::with_limits(2, Some(budget));
        commdb_udfs::register_all(&mut session);
        let spec = "generate:ranks=64,ranks-per-node=8,iterations=200,bad-mapping,background-traffic=8ms:16ms:4";
        session.open(spec, None, &OpenOptions::default()).unwrap();
        session
    };
    let answer = |s: &mut Session, query: &str| {
        let rows = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        let text = arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string();
        // In some order (an ORDER BY would sort under the tight budget too).
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        Ok::<_, String>(lines.join("\n"))
    };
    // Sums of floating-point latencies are rounded: the batches' order may vary between runs.
    let attribution = "SELECT window_start, window_end, messages, round(delayed_share, 9), round(slow_share, 9), inter_node, intra_node, \
        round(inter_share, 9), round(avoidable_share, 9), round(offnode_cost, 6), round(load_balance_mean, 9), round(load_ratio, 9), \
        round(traffic_fluctuation, 6), cause FROM attribution(WINDOW)";
    for (function, query) in [
        ("latency_trend", "SELECT segment, kind, t_start, t_end, messages, round(mean_latency, 9), delayed_messages FROM latency_trend()".to_string()),
        ("latency_trend", "SELECT kind, count(*), sum(messages) FROM latency_trend(bin_ns => 500000) GROUP BY kind".to_string()),
        ("attribution", attribution.replace("WINDOW", "")),
        ("attribution", attribution.replace("WINDOW", "window_ns => 200000")),
        (
            "region_graph",
            "SELECT region_a, region_b, messages, bytes, round(mean_latency, 9) FROM region_graph()".to_string(),
        ),
    ] {
        let expected = answer(&mut session(1 << 30), &query).unwrap();
        assert!(expected.lines().count() > 5, "{query}: {expected}");
        if function == "attribution" {
            assert!(expected.contains("mapping") && expected.contains("background_traffic"), "{expected}");
        }
        // 44,800 messages: the criteria are folded first (about 1.1 MB), then the messages'
        // columns stream; held whole, with twice as much reserved, they would not fit.
        let mut tight = session(6 << 20);
        assert_eq!(answer(&mut tight, &query).unwrap(), expected, "{query}");
        let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains(&format!("{function}: analysis, streamed")), "{plan}");
        assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
    }
    // The trend holds its bins, not the messages' latencies (16 bytes each, 0.7 MB): under
    // 1 MiB the criteria's samples (at most 2 x 10,000 a group, 16 bytes each) and the bins fit.
    let trend = "SELECT segment, kind, t_start, t_end, messages FROM latency_trend()";
    let expected = answer(&mut session(1 << 30), trend).unwrap();
    assert_eq!(answer(&mut session(1 << 20), trend).unwrap(), expected);
    // The graph analyses read the communication graph as a row per (src, dst) pair, aggregated
    // as the messages stream by.
    for query in ["SELECT * FROM process_regions()", "SELECT * FROM process_dendrogram()"] {
        let expected = answer(&mut session(1 << 30), query).unwrap();
        let mut tight = session(1 << 20);
        assert_eq!(answer(&mut tight, query).unwrap(), expected, "{query}");
        let plan = answer(&mut tight, &format!("EXPLAIN {query}")).unwrap();
        assert!(plan.contains("gby=[src@0 as src, dst@1 as dst], aggr=[count(1) as messages]"), "{plan}");
    }
}

#[test]
fn the_wait_analyses_and_the_dag_hold_what_they_fold_and_sweep_the_calls_by_rank() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let rows = |s: &mut Session, query: &str| {
        let batches = runtime.block_on(s.collect(query)).map_err(|e| e.to_string())?;
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        // In some order (an ORDER BY would sort under the tight budget too).
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        Ok::<_, String>(lines)
    };
    // Rank 5 computes three times as long: late senders, waits at collectives, a path that
    // crosses ranks.
    let spec = "generate:ranks=64,ranks-per-node=8,iterations=200,imbalance=5:3";
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 20_000).unwrap();
    let open = |what: &str, budget: usize| {
        let mut session = Session::with_limits(2, Some(budget));
        commdb_udfs::register_all(&mut session);
        session.open(what, None, &OpenOptions::default()).unwrap();
        session
    };
    let mut roomy = open(spec, 1 << 30);
    // 46,000 messages: their ten columns (3.7 MB, twice that reserved) held whole would not
    // fit 4 MiB; their waits and each chunk of ranks' calls do.
    let mut tight = open(&store.display().to_string(), 4 << 20);
    let mut copied = open(&store.display().to_string(), 1 << 30);
    runtime.block_on(copied.collect("CREATE TABLE by_time AS SELECT * FROM calls ORDER BY start_ts DESC")).unwrap();
    let queries = [
        ("wait_states", "SELECT * FROM wait_states()"),
        ("wait_states", "SELECT rank, pattern, wait_ns, ts, partner FROM wait_states()"),
        ("critical_path", "SELECT * FROM critical_path()"),
        (
            "critical_path_profile",
            "SELECT region, path, rank, path_ns, round(path_share, 12), round(mean_ns, 6), round(imbalance_ns, 6) FROM critical_path_profile()",
        ),
        (
            "delay_costs",
            "SELECT rank, region, path, round(cost_ns, 3), round(direct_ns, 3), round(propagated_ns, 3) FROM delay_costs()",
        ),
        // The replay spills the messages and collectives, stores the MPI calls out of memory
        // and holds per call its ideal start and what it waits for.
        ("ideal_replay", "SELECT * FROM ideal_replay()"),
        ("transfer_efficiency", "SELECT * FROM transfer_efficiency()"),
        // The DAG's halves go through scratch files, shuffled by rank.
        ("dag_nodes", "SELECT * FROM dag_nodes()"),
        ("dag_edges", "SELECT from_node, to_node, msg_id, bytes, duration, round(latency, 9) FROM dag_edges()"),
    ];
    // The DAG reads the store's three parts of messages in turn, though the scan has two
    // partitions: its edges come in the messages' order.
    let in_order = |s: &mut Session, query: &str| {
        let batches = runtime.block_on(s.collect(query)).unwrap();
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect::<Vec<i64>>()
    };
    let mut one_partition = open(&store.display().to_string(), 1 << 30);
    runtime.block_on(one_partition.collect("SET datafusion.execution.target_partitions = 1")).unwrap();
    let messages = in_order(&mut one_partition, "SELECT msg_id FROM messages");
    assert_eq!(messages.len(), 46_000);
    assert_eq!(in_order(&mut tight, "SELECT msg_id FROM dag_edges()"), messages);
    for (function, query) in queries {
        let expected = rows(&mut roomy, query).unwrap();
        assert!(expected.len() > 8, "{query}: {expected:?}");
        assert_eq!(rows(&mut tight, query).unwrap(), expected, "{query}");
        let plan = rows(&mut tight, &format!("EXPLAIN {query}")).unwrap().join("\n");
        if function.starts_with("dag") {
            // The messages' parts one after another, so in send-time order.
            assert!(
                plan.contains(&format!("{function}: analysis, streamed, its input's partitions in turn")),
                "{plan}"
            );
            assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
            continue;
        } else {
            assert!(plan.contains(&format!("{function}: analysis, streamed by rank")), "{plan}");
            assert!(plan.contains("SortPreservingMergeExec") && !plan.contains("SortExec: "), "{plan}");
        }
        assert_eq!(tight.context().runtime_env().memory_pool.reserved(), 0);
        // Calls in time order are read whole and swept as one chunk, to the same answer.
        let from_copy = if function == "wait_states" {
            query.replacen("()", "(calls => 'by_time')", 1)
        } else {
            query.replacen("()", "(rel => 'by_time')", 1)
        };
        assert_eq!(rows(&mut copied, &from_copy).unwrap(), expected, "{from_copy}");
    }
    // The replay holds per call a bit, its lists and ideal starts lying in scratch files: it
    // answers where its 16 bytes a call did not fit (1.5 MiB, of which the merge of the scan's
    // two partitions holds about 0.9 MiB of the calls' batches). What it holds per rank still
    // answers to the budget: past it (1,024 ranks in 4 MiB), the error says so.
    let mut tighter = open(&store.display().to_string(), 3 << 19);
    let query = "SELECT * FROM ideal_replay()";
    assert_eq!(rows(&mut tighter, query).unwrap(), rows(&mut roomy, query).unwrap());
    let mut many_ranks = open("generate:ranks=1024,ranks-per-node=32,iterations=2", 4 << 20);
    let e = rows(&mut many_ranks, "SELECT count(*) FROM ideal_replay()").unwrap_err();
    assert!(e.contains("ideal_replay") && e.contains("memory budget"), "{e}");
}

#[test]
fn call_metrics_reads_the_calls_a_chunk_of_whole_ranks_at_a_time() {
    let Some(data) = commdb_tests::shared_data() else {
        println!("skipped: ../shared/data is not beside the project");
        return;
    };
    let trace = data.join("otf2/ping-pong-papi/traces.otf2");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let query = "SELECT * FROM call_metrics()";
    // The rows in some order (the calls in memory come in any order of their partitions).
    let rows = |s: &mut Session, query: &str| {
        let batches = runtime.block_on(s.collect(query)).unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        let mut lines = text.lines().map(str::to_string).collect::<Vec<_>>();
        lines.sort();
        lines
    };
    let mut in_memory = Session::with_limits(2, Some(1 << 30));
    commdb_udfs::register_all(&mut in_memory);
    in_memory.open(&trace.display().to_string(), None, &OpenOptions::default()).unwrap();
    let expected = rows(&mut in_memory, query);
    assert!(expected.len() > 100, "{expected:?}");
    // A store of parts of 50 rows, under a budget whose chunks hold a rank or so at a time: the
    // same rows.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let opened = commdb_catalog::open(&trace.display().to_string(), &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&opened, &store, 50).unwrap();
    let mut tight = Session::with_limits(2, Some(64 << 10));
    commdb_udfs::register_all(&mut tight);
    tight.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    let plan = rows(&mut tight, &format!("EXPLAIN {query}")).concat();
    assert!(plan.contains("call_metrics: analysis, streamed by rank"), "{plan}");
    assert_eq!(rows(&mut tight, query), expected);
}
