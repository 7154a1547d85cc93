//! An analysis planned again from its recipe (commdb_udfs::recipe), as a cluster's scheduler
//! and executors plan it: the function, its arguments and the relations it looked up give the
//! same rows as the first planning, for analyses that resolve a view, look through it for the
//! trace, and make another analysis their input; and the recipe of an analysis made as an
//! input names its place among the inputs.

use std::sync::Arc;

use commdb_catalog::{OpenOptions, Session};
use commdb_udfs::common::Derived;
use commdb_udfs::recipe::{Lookup, plan_again};
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{ExecutionPlan, collect};

/// The table of the one table function call a query's plan scans.
fn analysis_of(session: &Session, runtime: &tokio::runtime::Runtime, sql: &str) -> Derived {
    let plan = runtime.block_on(session.context().state().create_logical_plan(sql)).unwrap();
    let mut found = None;
    plan.apply(|p| {
        if let LogicalPlan::TableScan(scan) = p
            && let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source)
            && let Some(d) = provider.downcast_ref::<Derived>()
        {
            found = Some(d.clone());
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
        "SELECT * FROM attribution('1ms')",
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
    assert_eq!(call.function, "message_latency");
    assert_eq!(call.path.len(), 1);
    let again = plan_again(call, &base, inner.call_id()).unwrap();
    assert_eq!(rows(&session, &runtime, &again), rows(&session, &runtime, inner));
}
