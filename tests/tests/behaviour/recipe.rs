//! An analysis planned again from its recipe (commdb_analysis::recipe), as a cluster's scheduler
//! and executors plan it: the function, its arguments and the relations it looked up give the
//! same rows as the first planning, for analyses that resolve a view, look through it for the
//! trace, and make another analysis their input; and the recipe of an analysis made as an
//! input names its place among the inputs.

use std::sync::Arc;

use commdb_analysis::derived::Derived;
use commdb_analysis::recipe::plan_again;
use commdb_analysis::relation::Lookup;
use commdb_catalog::{OpenOptions, Session};
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::TreeNode;
use datafusion::physical_plan::{ExecutionPlan, collect};

/// The analysis of the first table function call in a query's plan.
fn analysis_of(session: &Session, runtime: &tokio::runtime::Runtime, sql: &str) -> Derived {
    let plan = runtime.block_on(session.context().state().create_logical_plan(sql)).unwrap();
    let mut found = None;
    plan.apply(|p| {
        if found.is_none()
            && let Some(call) = commdb_analysis::node::AnalysisCall::of(p)
        {
            found = Some(call.derived().clone());
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    })
    .unwrap();
    found.expect("a table function in the plan")
}

/// Every row of a table, sorted, as text.
fn rows(session: &Session, runtime: &tokio::runtime::Runtime, table: &Derived) -> Vec<String> {
    let state = session.context().state();
    let plan: Arc<dyn ExecutionPlan> = runtime.block_on(table.scan(&state, None, &[], None)).unwrap();
    let batches = runtime.block_on(collect(plan, session.context().task_ctx())).unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn an_analysis_planned_again_from_its_recipe_gives_the_same_rows() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut session = Session::with_limits(2, None);
    commdb_udfs::register_all(&mut session);
    session.open("generate:ranks=16,ranks-per-node=4,iterations=20", None, &OpenOptions::default()).unwrap();
    runtime.block_on(session.collect("CREATE VIEW late AS SELECT * FROM messages WHERE send_ts > 1000000")).unwrap();
    let base = session.context().state();
    for sql in [
        "SELECT * FROM wait_states()",
        "SELECT * FROM message_latency('late')",
        "SELECT * FROM attribution('messages', '1ms')",
        "SELECT * FROM comm_matrix()",
        "SELECT * FROM clock_model()",
    ] {
        let first = analysis_of(&session, &runtime, sql);
        let call = first.call().expect("a call of a registered function").clone();
        assert!(call.path.is_empty());
        assert!(call.lookups.iter().any(|l| matches!(l, Lookup::Relation(_))), "{sql}: {call:?}");
        let again = plan_again(&call, &base, first.call_id()).unwrap();
        assert_eq!(again.call_id(), first.call_id(), "{sql}");
        assert_eq!(rows(&session, &runtime, &again), rows(&session, &runtime, &first), "{sql}");
    }

    // message_latency reads the criteria as an analysis it made itself: its recipe is the
    // outer call's, with the input's place.
    let outer = analysis_of(&session, &runtime, "SELECT * FROM message_latency()");
    let inner = (0..4).find_map(|i| outer.input_analysis(i)).expect("the criteria as an input");
    let call = inner.call().expect("the input knows its call");
    assert_eq!(call.function.name, "message_latency");
    assert_eq!(call.path.len(), 1);
    let again = plan_again(call, &base, inner.call_id()).unwrap();
    assert_eq!(rows(&session, &runtime, &again), rows(&session, &runtime, inner));
}

/// The plan of a table and its rows (floats to 9 decimals), sorted, as text, planned and
/// optimised as a query over it is (the scans of a store's calls merged in rank order where a
/// node asks for it).
fn plan_and_rows(session: &Session, runtime: &tokio::runtime::Runtime, table: &Derived) -> (String, Vec<String>) {
    let ctx = session.context();
    let _ = ctx.deregister_table("planned");
    ctx.register_table("planned", Arc::new(table.clone())).unwrap();
    // Floating-point sums taken in another order may differ in their last digits.
    let columns: Vec<String> = table
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            arrow::datatypes::DataType::Float64 => format!("round(\"{0}\", 9) AS \"{0}\"", f.name()),
            _ => format!("\"{}\"", f.name()),
        })
        .collect();
    let frame = runtime.block_on(ctx.sql(&format!("SELECT {} FROM planned", columns.join(", ")))).unwrap();
    let plan = runtime.block_on(frame.create_physical_plan()).unwrap();
    let shown = datafusion::physical_plan::displayable(plan.as_ref()).indent(false).to_string();
    let batches = runtime.block_on(collect(plan, ctx.task_ctx())).unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    (shown, lines)
}

/// Planned again for a distributed engine over a store whose parts hold whole ranks, the
/// analyses that spread read their first input a task per part (the sweeps by rank over the
/// calls, the folds over the messages as partials and their merge), and every task's rows
/// together (merged, for the folds) are the rows of the analysis in one process. A scan that
/// may split its files keeps a sweep by rank in one task; an analysis that does not spread
/// (wait_states) stays one task.
#[test]
fn an_analysis_spread_over_parts_gives_the_rows_of_one_task() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = "generate:ranks=16,ranks-per-node=4,iterations=20,imbalance=3:2";
    let trace = commdb_catalog::open(spec, &OpenOptions::default()).unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 500).unwrap();
    let mut session = Session::with_limits(4, None);
    commdb_udfs::register_all(&mut session);
    session.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    // A cluster's scans read whole files, each partition its own (the scheduler's settings).
    // Here one process runs every part's task over one plan of the inputs each reads whole,
    // which a hash repartition (an aggregate's partial groups, or batches dealt round) can
    // serve only once; a cluster reads such inputs from the shuffle files of a stage before.
    runtime.block_on(session.collect("SET datafusion.optimizer.repartition_file_scans = false")).unwrap();
    runtime.block_on(session.collect("SET datafusion.execution.enable_file_stream_work_stealing = false")).unwrap();
    for setting in ["repartition_aggregations", "enable_round_robin_repartition"] {
        runtime.block_on(session.collect(&format!("SET datafusion.optimizer.{setting} = false"))).unwrap();
    }
    // Counters sampled at every call's start and end, for call_metrics.
    let samples = "CREATE TABLE samples AS \
        SELECT rank, thread, start_ts AS ts, 'cycles' AS metric, CAST(start_ts * 3 AS DOUBLE) AS value FROM calls \
        UNION ALL SELECT rank, thread, end_ts, 'cycles', CAST(end_ts * 3 AS DOUBLE) FROM calls";
    runtime.block_on(session.collect(samples)).unwrap();
    let base = session.context().state();
    for (sql, shape) in [
        ("SELECT * FROM lod_calls('calls', 100000)", "a task per part"),
        ("SELECT * FROM call_metrics('calls', 'samples', 'accumulated_start')", "a task per part"),
        ("SELECT * FROM time_profile('calls', 7)", "partials, a task per part"),
        ("SELECT * FROM call_tree()", "a task per part"),
        ("SELECT * FROM compute_deltas()", "a task per part"),
        ("SELECT * FROM comm_matrix('messages', 'node')", "partials, a task per part"),
        ("SELECT * FROM message_histogram()", "partials, a task per part"),
        ("SELECT * FROM load_imbalance()", "partials, a task per part"),
        ("SELECT * FROM latency_criteria('messages', 50, 40, 3)", "partials, a task per part"),
        ("SELECT * FROM latency_criteria()", "partials, a task per part"),
        (
            "SELECT * FROM message_latency('messages', 60)",
            "latency_criteria: analysis, streamed, partials, a task per part",
        ),
        ("SELECT * FROM message_latency()", "latency_criteria: analysis, streamed, partials, a task per part"),
        ("SELECT * FROM attribution('messages', '1ms')", "attribution: analysis, streamed, partials, a task per part"),
        ("SELECT * FROM attribution()", "attribution: analysis, merge of the partials"),
        ("SELECT * FROM wait_states()", "a task per part of its first input, with the rows of its ranks' part"),
    ] {
        let first = analysis_of(&session, &runtime, sql);
        let again = plan_again(first.call().unwrap(), &base, first.call_id()).unwrap();
        let (plan, spread) = plan_and_rows(&session, &runtime, &again);
        assert!(plan.contains(shape), "{sql}:\n{plan}");
        assert!(!spread.is_empty(), "{sql}");
        assert_eq!(spread, plan_and_rows(&session, &runtime, &first).1, "{sql}");
    }

    // A scan that may split a part into byte ranges may split a rank: the sweep then stays in one
    // task.
    let mut rank_split = Session::with_limits(4, None);
    commdb_udfs::register_all(&mut rank_split);
    rank_split.open(&store.display().to_string(), None, &OpenOptions::default()).unwrap();
    runtime.block_on(rank_split.collect("SET datafusion.optimizer.repartition_file_scans = true")).unwrap();
    let first = analysis_of(&rank_split, &runtime, "SELECT * FROM lod_calls('calls', 100000)");
    let again = plan_again(first.call().unwrap(), &rank_split.context().state(), first.call_id()).unwrap();
    let (plan, _) = plan_and_rows(&rank_split, &runtime, &again);
    assert!(plan.contains("one task reading its inputs whole"), "{plan}");
}
