//! Which ranks (or nodes) communicate slowly, and why: `rank_diagnosis` puts side by side,
//! per rank, what the window-by-window analyses spread over time — the latency of its
//! messages (PCLVis 4.1, sent and received), its share of inter-node messages, the waiting it
//! suffers and the waiting it causes (Scalasca's wait states: it is the partner the others
//! wait for) — and names the cause that fits:
//!
//! - `late`: others wait for it while it hardly waits itself (it causes at least as much
//!   waiting as a typical rank suffers, and suffers at most a quarter of that): look at what
//!   it does before the calls they wait in, its computation above all (load imbalance);
//! - `mapping`: most of its messages cross nodes (inter_share above `max_inter_share`, 0.75
//!   as in `attribution`) and the fitted placement (`remap_suggestion`) moves it: a better
//!   placement keeps its partners on its node;
//! - `waits_for_others`: it waits at least twice as long as a typical rank: see the ranks it
//!   waits for;
//! - `none`.
//!
//! "Typical" is the median over the ranks of the relation, so no rule depends on the number of
//! ranks. The rules are commdb's (PCLVis attributes per time window, not per rank);
//! docs/departures.md says so. The function is a view: a query over `message_latency`,
//! `wait_states` and `remap_suggestion`, planned when it is called and run with the query.

use std::sync::Arc;

use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::plan_err;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;

use crate::common::Args;
use crate::declare::{
    Function, Make, Output, ParamDefault, Type, boolean, col, float64, int32, int64, param, text, text_view,
};
use crate::latency::MESSAGES;

pub const RANK_DIAGNOSIS: Function = Function {
    name: "rank_diagnosis",
    params: &[
        MESSAGES,
        param(
            "by",
            Type::Choice(&["rank", "node"]),
            ParamDefault::Text("rank"),
            "one row per rank, or per node (node, ranks, then the same sums and shares, and cause)",
        ),
        param(
            "collectives",
            Type::Relation,
            ParamDefault::Text("collectives"),
            "the collective operations, for waiting",
        ),
        param(
            "max_inter_share",
            Type::Number { min: 0.0 },
            ParamDefault::Number(0.75),
            "mapping: a rank whose inter-node share is above this (a share from 0 to 1) and that remapping moves",
        ),
    ],
    output: Output::Columns(&[
        col("rank", int32, ""),
        col("node", text_view, ""),
        col("sent", int64, "messages it sent"),
        col("received", int64, "messages it received"),
        col("mean_latency", float64, "mean latency L of its messages"),
        col("delayed_share", float64, "share of its messages with L > 1"),
        col("inter_share", float64, "share of its messages between nodes"),
        col("waits_suffered_ns", int64, "time it waited (wait_states)"),
        col("waits_caused_ns", int64, "time others waited for it"),
        col("moved_by_remap", boolean, "remap_suggestion places it on another node"),
        col("cause", text, "late, mapping, waits_for_others or none"),
    ]),
    description: "which ranks (or nodes, by => 'node') communicate slowly and why: latency and inter-node share of their messages, waiting suffered and caused, and the cause that fits (late, mapping, waits_for_others, none)",
    make: Make::Table(|| Arc::new(RankDiagnosis)),
};

/// `rank_diagnosis([rel => 'messages'], by => 'rank', collectives => 'collectives',
/// max_inter_share => 0.75)`.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct RankDiagnosis;

/// A SQL string literal.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The query behind the view, reading `messages` and `collectives` (relation names).
fn query(messages: &str, collectives: &str, by_node: bool, max_inter: f64) -> String {
    let (m, c) = (quoted(messages), quoted(collectives));
    let ranks = format!(
        "WITH m AS (SELECT src, dst, src_node, dst_node, intra_node, latency, delayed FROM message_latency({m})),
sides AS (
  SELECT src AS rank, src_node AS node, latency, delayed, intra_node, 1 AS sent FROM m WHERE src IS NOT NULL
  UNION ALL SELECT dst, dst_node, latency, delayed, intra_node, 0 FROM m WHERE dst IS NOT NULL),
per AS (
  SELECT rank, min(CAST(node AS VARCHAR)) AS node, CAST(sum(sent) AS BIGINT) AS sent,
         CAST(count(*) - sum(sent) AS BIGINT) AS received, avg(latency) AS mean_latency,
         avg(CASE WHEN delayed THEN 1.0 WHEN NOT delayed THEN 0.0 END) AS delayed_share,
         avg(CASE WHEN intra_node THEN 0.0 WHEN NOT intra_node THEN 1.0 END) AS inter_share
  FROM sides GROUP BY rank),
ws AS (SELECT rank, partner, wait_ns FROM wait_states({m}, {c})),
w AS (SELECT rank, sum(wait_ns) AS suffered FROM ws GROUP BY rank),
k AS (SELECT partner AS rank, sum(wait_ns) AS caused FROM ws WHERE partner IS NOT NULL GROUP BY partner),
mv AS (SELECT rank, current_node IS DISTINCT FROM suggested_node AS moved FROM remap_suggestion(NULL, {m})),
r AS (
  SELECT per.rank, per.node, per.sent, per.received, per.mean_latency, per.delayed_share, per.inter_share,
         CAST(coalesce(w.suffered, 0) AS BIGINT) AS waits_suffered_ns,
         CAST(coalesce(k.caused, 0) AS BIGINT) AS waits_caused_ns,
         coalesce(mv.moved, false) AS moved_by_remap
  FROM per LEFT JOIN w ON w.rank = per.rank LEFT JOIN k ON k.rank = per.rank LEFT JOIN mv ON mv.rank = per.rank),
typical AS (SELECT coalesce(median(waits_suffered_ns), 0) AS s FROM r),
diagnosed AS (
  SELECT r.*, CASE
    WHEN r.waits_caused_ns > 0 AND r.waits_caused_ns >= t.s AND r.waits_suffered_ns <= 0.25 * t.s THEN 'late'
    WHEN r.inter_share > {max_inter} AND r.moved_by_remap THEN 'mapping'
    WHEN r.waits_suffered_ns > 0 AND r.waits_suffered_ns >= 2 * t.s THEN 'waits_for_others'
    ELSE 'none' END AS cause
  FROM r CROSS JOIN typical t)"
    );
    if !by_node {
        return format!("{ranks}\nSELECT * FROM diagnosed ORDER BY rank");
    }
    format!(
        "{ranks}
SELECT node, count(*) AS ranks, CAST(sum(sent) AS BIGINT) AS sent, CAST(sum(received) AS BIGINT) AS received,
       sum(mean_latency * (sent + received)) / sum(sent + received) AS mean_latency,
       sum(delayed_share * (sent + received)) / sum(sent + received) AS delayed_share,
       sum(inter_share * (sent + received)) / sum(sent + received) AS inter_share,
       CAST(sum(waits_suffered_ns) AS BIGINT) AS waits_suffered_ns,
       CAST(sum(waits_caused_ns) AS BIGINT) AS waits_caused_ns,
       CASE WHEN bool_or(cause = 'late') THEN 'late'
            WHEN avg(CASE WHEN cause = 'mapping' THEN 1.0 ELSE 0.0 END) > 0.5 THEN 'mapping'
            WHEN bool_or(cause = 'waits_for_others') THEN 'waits_for_others'
            ELSE 'none' END AS cause
FROM diagnosed GROUP BY node ORDER BY node"
    )
}

impl TableFunctionImpl for RankDiagnosis {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let a = Args::new(&RANK_DIAGNOSIS, args.exprs())?;
        let session = args.session();
        // The relations are resolved here, so that a wrong name fails with this function's.
        let messages = a.relation(session, "rel")?;
        messages.columns(a.function, &["src", "dst", "src_node", "dst_node", "intra_node"])?;
        let by_node = a.text("by")? == "node";
        let collectives = a.relation(session, "collectives")?;
        let max_inter = a.float("max_inter_share")?;
        if max_inter > 1.0 {
            return plan_err!("rank_diagnosis: max_inter_share must be a share from 0 to 1, got {max_inter}");
        }
        let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("rank_diagnosis: needs a commdb session to plan its query");
        };
        let sql = query(&messages.reference.to_string(), &collectives.reference.to_string(), by_node, max_inter);
        let plan = crate::common::wait_for(state.create_logical_plan(&sql))??;
        Ok(Arc::new(ViewTable::new(plan, Some(sql))))
    }
}
