//! The relations a logical plan reads, as analyses see them: every table it scans and every
//! analysis call in it ([`crate::node::AnalysisCall`]), its subqueries' included; and the same
//! plan with some of them replaced. How a view of SQL notes what it reads for a cluster
//! ([`crate::views`]), shares an analysis it reads several times ([`crate::shared`]), and has
//! its analyses planned for a distributed engine ([`crate::recipe`]).

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::datasource::provider_as_source;
use datafusion::error::Result;
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};

/// Call `f` with the name and table of every scan in `plan`, its subqueries' included, and of
/// every analysis call in it (named as its scan would be, `f()`; what it reads is the
/// analysis's own business and is not visited).
pub fn for_each_scan(plan: &LogicalPlan, mut f: impl FnMut(&TableReference, &Arc<dyn TableProvider>)) {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let _ = plan.apply_with_subqueries(|node| {
        if let Some(call) = crate::node::AnalysisCall::of(node) {
            f(&call.qualifier(), call.table());
            return Ok(TreeNodeRecursion::Jump);
        }
        if let LogicalPlan::TableScan(scan) = node
            && let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source)
        {
            f(&scan.table_name, &provider);
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// `plan` with the table of each scan and each analysis call replaced by `f(table)` where it
/// gives one (None: nothing changed), its subqueries' included: how a view's analyses are made
/// distributed or shared. An analysis call becomes a call of the analysis `f` gives, or a scan
/// of the table.
pub fn replace_scans(
    plan: &LogicalPlan,
    f: impl Fn(&Arc<dyn TableProvider>) -> Option<Arc<dyn TableProvider>>,
) -> Result<Option<LogicalPlan>> {
    use crate::node::AnalysisCall;
    use datafusion::common::tree_node::Transformed;
    let replaced = plan.clone().transform_up_with_subqueries(|node| {
        if let Some(call) = AnalysisCall::of(&node) {
            let Some(table) = f(call.table()) else { return Ok(Transformed::no(node)) };
            let projection = call.projection().cloned();
            if table.downcast_ref::<crate::derived::Derived>().is_some() {
                return Ok(Transformed::yes(AnalysisCall::plan(table, projection)?));
            }
            let scan = LogicalPlanBuilder::scan(call.qualifier(), provider_as_source(table), projection)?.build()?;
            return Ok(Transformed::yes(scan));
        }
        let LogicalPlan::TableScan(scan) = &node else { return Ok(Transformed::no(node)) };
        let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source) else {
            return Ok(Transformed::no(node));
        };
        let Some(table) = f(&provider) else { return Ok(Transformed::no(node)) };
        let mut scan = scan.clone();
        scan.source = provider_as_source(table);
        Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
    })?;
    Ok(replaced.transformed.then_some(replaced.data))
}
