//! An analysis written as SQL over others and over tables (rank_diagnosis, comm_partners,
//! iteration_profile, scaling): its query is planned in the call's session as a view, and
//! every relation it reads is noted for the call ([`crate::relation`]'s record), an analysis by
//! what it looked up itself, so that a cluster's executor can plan the call again from its
//! recipe and find the view's tables there.

use crate::derived::Derived;
use crate::plans::for_each_scan;
use crate::relation::{Lookup, Relation, note, ready};
use datafusion::catalog::Session;
use datafusion::error::Result;
use datafusion::logical_expr::LogicalPlan;

/// A view of `sql`, planned in the call's session: what a function that is a query over other
/// analyses and tables returns (rank_diagnosis, comm_partners, iteration_profile, scaling).
pub fn sql_view(session: &dyn Session, function: &str, sql: String) -> Result<datafusion::catalog::view::ViewTable> {
    let Some(state) = session.as_any().downcast_ref::<datafusion::execution::session_state::SessionState>() else {
        return datafusion::common::plan_err!("{function}: needs a commdb session to plan its query");
    };
    let Some(plan) = ready(state.create_logical_plan(&sql)) else {
        return datafusion::common::plan_err!(
            "{function}: a file its query reads must be named in a parenthesised query: {function}(... => (SELECT * FROM 'file'))"
        );
    };
    let plan = plan?;
    note_scans(session, &plan);
    Ok(datafusion::catalog::view::ViewTable::new(plan, Some(sql)))
}

/// Note, for the call being planned, every relation `plan` reads: a table or view by its name,
/// an analysis by what it looked up (it is planned again from its own call). A cluster plans an
/// analysis that reads a view of SQL again from its recipe, and the SQL finds its tables there.
fn note_scans(session: &dyn Session, plan: &LogicalPlan) {
    for_each_scan(plan, |reference, provider| match provider.downcast_ref::<Derived>().and_then(|d| d.call()) {
        Some(call) => call.lookups.iter().cloned().for_each(|l| note(session, l)),
        None => note(session, Lookup::Relation(Relation { reference: reference.clone(), provider: provider.clone() })),
    });
}
