//! Which ranks (or nodes) communicate slowly, and why: `rank_diagnosis` puts side by side,
//! per rank, what the window-by-window analyses spread over time — the latency of its
//! messages (PCLVis 4.1, sent and received), its share of inter-node messages now and under
//! the fitted placement (`remap_suggestion`), the waiting it suffers and the waiting it causes
//! (Scalasca's wait states: it is the partner the others wait for), each also as a ratio to the
//! typical rank — and names the cause that fits, with the evidence in words:
//!
//! - `late`: others wait for it while it hardly waits itself (it causes at least as much
//!   waiting as a typical rank suffers, and suffers at most a quarter of that): look at what
//!   it does before the calls they wait in, its computation above all (load imbalance);
//! - `mapping`: most of its messages cross nodes (inter_share above `max_inter_share`, 0.75
//!   as in `attribution`) and under the fitted placement at most half as many of them would
//!   (`inter_share_remapped`): a better placement keeps its partners on its node. Whether the
//!   rank itself moves does not matter: of two partners one stays and the other comes to it,
//!   and the rank that stays is as badly placed now as the one that moves (on the demo, 16 of
//!   64 ranks stay, and with the old rule, "moved", they were `none` at the same latency and
//!   inter-node share as the 48 others). The evidence also gives the run's share before and
//!   after;
//! - `waits_for_others`: it waits at least twice as long as a typical rank: see the ranks it
//!   waits for;
//! - `none`: none of these holds; its evidence says how it compares.
//!
//! Latency alone names no cause: a slow period (background traffic) slows every rank's
//! messages alike and is a cause of its time window (`attribution`), not of a rank.
//! "Typical" is the median over the ranks of the relation, so no rule depends on the number of
//! ranks. The rules are commdb's (PCLVis attributes per time window, not per rank);
//! docs/departures.md says so. Waits are the MPI ones between ranks (those with a message or a
//! communicator): a thread waiting for another of its rank causes no rank to wait. The function is a view: a query over `message_latency`,
//! `wait_states` and `remap_suggestion`, planned when it is called and run with the query.
//! DataFusion plans a common table expression again wherever it is named, so the query names
//! each analysis once (twice `remap_suggestion`, for the two ends of a message): a message's two
//! sides come from one pass (a cross join with the sides 1 and 0), a wait's sufferer and
//! causer likewise, and the typical rank and the run's shares are window aggregates over the
//! ranks. The placement (a row per rank) and the two sides are joined on the left of the
//! messages and waits, the side a join holds, so that those stream through. Named wherever used, the analyses ran 5, 12 and 3 times over a 200 M-event store.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::error::Result;

use crate::latency::MESSAGES;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int32, int64, text, text_view};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::Relation;

pub const RANK_DIAGNOSIS: Function = Function {
    name: "rank_diagnosis",
    params: &[
        MESSAGES,
        param(
            "by",
            Type::Choice(&["rank", "node"]),
            ParamDefault::Text("rank"),
            "one row per rank, or per node (node, ranks, then the same sums and shares, cause, and as evidence how many of its ranks have each cause)",
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
        col("waits_suffered_ns", int64, "time it waited (wait_states)").never_null(),
        col("waits_caused_ns", int64, "time others waited for it").never_null(),
        col(
            "suffered_ratio",
            float64,
            "waits_suffered_ns over the typical (median) rank's (NULL when the typical rank does not wait)",
        ),
        col("caused_ratio", float64, "waits_caused_ns over the typical rank's waits_suffered_ns (NULL likewise)"),
        col("inter_share_remapped", float64, "share of its messages between nodes under remap_suggestion's placement"),
        col("moved_by_remap", boolean, "remap_suggestion places it on another node"),
        col("cause", text, "late, mapping, waits_for_others or none").never_null(),
        col("evidence", text, "why: the figures the cause rests on, against the typical rank"),
    ]),
    description: "which ranks (or nodes, by => 'node') communicate slowly and why: latency and inter-node share of their messages (now and under the fitted placement), waiting suffered and caused (also against the typical rank), the cause that fits (late, mapping, waits_for_others, none) and its evidence in words",
    make: Make::Table(rank_diagnosis),
};

/// A SQL string literal.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The query behind the view, reading `messages` and `collectives` (relation names).
fn query(messages: &str, collectives: &str, by_node: bool, max_inter: f64) -> String {
    let (m, c) = (quoted(messages), quoted(collectives));
    let ranks = format!(
        "WITH m AS (SELECT src, dst, src_node, dst_node, intra_node, latency, delayed FROM message_latency({m})),
mv AS (SELECT rank, current_node, suggested_node FROM remap_suggestion({m})),
ms AS (
  SELECT m.*, s.current_node AS src_current, s.suggested_node AS src_suggested
  FROM mv s RIGHT JOIN m ON s.rank = m.src),
mm AS (
  SELECT ms.*, CASE WHEN src_suggested IS NULL OR d.suggested_node IS NULL THEN NULL
                    WHEN src_suggested = d.suggested_node THEN 0.0 ELSE 1.0 END AS inter_after,
         src_current IS DISTINCT FROM src_suggested AS src_moved,
         d.current_node IS DISTINCT FROM d.suggested_node AS dst_moved
  FROM mv d RIGHT JOIN ms ON d.rank = ms.dst),
sides AS (
  SELECT CASE WHEN x.sent = 1 THEN src ELSE dst END AS rank,
         CASE WHEN x.sent = 1 THEN src_node ELSE dst_node END AS node,
         latency, delayed, intra_node, inter_after, x.sent,
         CASE WHEN x.sent = 1 THEN src_moved ELSE dst_moved END AS moved,
         x.sent = 1 OR src IS NULL AS first_side
  FROM (VALUES (1), (0)) x(sent) CROSS JOIN mm),
per AS (
  SELECT rank, min(CAST(node AS VARCHAR)) AS node, CAST(sum(sent) AS BIGINT) AS sent,
         CAST(count(*) - sum(sent) AS BIGINT) AS received, avg(latency) AS mean_latency,
         avg(CASE WHEN delayed THEN 1.0 WHEN NOT delayed THEN 0.0 END) AS delayed_share,
         avg(CASE WHEN intra_node THEN 0.0 WHEN NOT intra_node THEN 1.0 END) AS inter_share,
         avg(inter_after) AS inter_share_remapped,
         coalesce(bool_or(moved), false) AS moved_by_remap,
         sum(CASE WHEN first_side THEN CASE WHEN intra_node THEN 0.0 WHEN NOT intra_node THEN 1.0 END END) AS inter_sum,
         count(CASE WHEN first_side THEN intra_node END) AS inter_n,
         sum(CASE WHEN first_side THEN inter_after END) AS after_sum,
         count(CASE WHEN first_side THEN inter_after END) AS after_n
  FROM sides WHERE rank IS NOT NULL GROUP BY rank),
ws AS (SELECT rank, partner, wait_ns FROM wait_states({m}, {c}) WHERE msg_id IS NOT NULL OR comm IS NOT NULL),
wk AS (
  SELECT CASE WHEN x.side = 0 THEN ws.rank ELSE ws.partner END AS rank,
         sum(CASE WHEN x.side = 0 THEN wait_ns END) AS suffered,
         sum(CASE WHEN x.side = 1 THEN wait_ns END) AS caused
  FROM (VALUES (0), (1)) x(side) CROSS JOIN ws GROUP BY 1),
r AS (
  SELECT per.rank, per.node, per.sent, per.received, per.mean_latency, per.delayed_share, per.inter_share,
         per.inter_share_remapped,
         CAST(coalesce(wk.suffered, 0) AS BIGINT) AS waits_suffered_ns,
         CAST(coalesce(wk.caused, 0) AS BIGINT) AS waits_caused_ns,
         per.moved_by_remap, per.inter_sum, per.inter_n, per.after_sum, per.after_n
  FROM per LEFT JOIN wk ON wk.rank = per.rank),
whole AS (
  SELECT r.*, coalesce(median(waits_suffered_ns) OVER (), 0) AS typical,
         sum(inter_sum) OVER () / sum(inter_n) OVER () AS run_inter,
         sum(after_sum) OVER () / sum(after_n) OVER () AS run_after
  FROM r),
ratios AS (
  SELECT whole.*,
         CASE WHEN typical > 0 THEN CAST(waits_suffered_ns AS DOUBLE) / typical END AS suffered_ratio,
         CASE WHEN typical > 0 THEN CAST(waits_caused_ns AS DOUBLE) / typical END AS caused_ratio,
         inter_share > {max_inter} AND inter_share_remapped <= 0.5 * inter_share AS badly_placed
  FROM whole),
diagnosed AS (
  SELECT rank, node, sent, received, mean_latency, delayed_share, inter_share, waits_suffered_ns, waits_caused_ns,
    suffered_ratio, caused_ratio, inter_share_remapped, moved_by_remap,
    CASE
    WHEN waits_caused_ns > 0 AND waits_caused_ns >= typical AND waits_suffered_ns <= 0.25 * typical THEN 'late'
    WHEN badly_placed THEN 'mapping'
    WHEN waits_suffered_ns > 0 AND waits_suffered_ns >= 2 * typical THEN 'waits_for_others'
    ELSE 'none' END AS cause,
    concat_ws('; ',
      CASE WHEN typical > 0 THEN concat('causes ', round(caused_ratio, 2), 'x and suffers ', round(suffered_ratio, 2),
                                        'x the typical rank''s waiting')
           WHEN waits_caused_ns > 0 THEN concat('causes ', waits_caused_ns, ' ns of waiting; the typical rank waits 0')
           ELSE 'no waiting' END,
      concat(CAST(round(100 * inter_share) AS BIGINT), '% of its messages cross nodes, ',
             CAST(round(100 * inter_share_remapped) AS BIGINT),
             '% would under the suggested placement (of the run''s: ', CAST(round(100 * run_inter) AS BIGINT),
             '% now, ', CAST(round(100 * run_after) AS BIGINT), '% after)')) AS evidence
  FROM ratios)"
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
       sum(inter_share_remapped * (sent + received)) / sum(sent + received) AS inter_share_remapped,
       CAST(sum(waits_suffered_ns) AS BIGINT) AS waits_suffered_ns,
       CAST(sum(waits_caused_ns) AS BIGINT) AS waits_caused_ns,
       CASE WHEN bool_or(cause = 'late') THEN 'late'
            WHEN avg(CASE WHEN cause = 'mapping' THEN 1.0 ELSE 0.0 END) > 0.5 THEN 'mapping'
            WHEN bool_or(cause = 'waits_for_others') THEN 'waits_for_others'
            ELSE 'none' END AS cause,
       concat_ws(', ',
         CASE WHEN count(*) FILTER (WHERE cause = 'late') > 0 THEN concat(count(*) FILTER (WHERE cause = 'late'), ' late') END,
         CASE WHEN count(*) FILTER (WHERE cause = 'mapping') > 0 THEN concat(count(*) FILTER (WHERE cause = 'mapping'), ' mapping') END,
         CASE WHEN count(*) FILTER (WHERE cause = 'waits_for_others') > 0
              THEN concat(count(*) FILTER (WHERE cause = 'waits_for_others'), ' waits_for_others') END,
         CASE WHEN count(*) FILTER (WHERE cause = 'none') > 0 THEN concat(count(*) FILTER (WHERE cause = 'none'), ' none') END)
       AS evidence
FROM diagnosed GROUP BY node ORDER BY node"
    )
}

arguments! {
    struct DiagnosisArgs(RANK_DIAGNOSIS) {
        rel: Relation,
        by: String,
        collectives: Relation,
        max_inter_share: f64,
    }
}

fn rank_diagnosis(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let session = a.session;
    // The relations are resolved here, so that a wrong name fails with this function's.
    let DiagnosisArgs { rel: messages, by, collectives, max_inter_share: max_inter } = DiagnosisArgs::read(a)?;
    messages.columns(a.function, &["src", "dst", "src_node", "dst_node", "intra_node"])?;
    let by_node = by == "node";
    if max_inter > 1.0 {
        return plan_err!("rank_diagnosis: max_inter_share must be a share from 0 to 1, got {max_inter}");
    }
    let sql =
        query(&messages.reference.to_quoted_string(), &collectives.reference.to_quoted_string(), by_node, max_inter);
    let view = commdb_analysis::views::sql_view(session, a.function, sql)?;
    // Rows by rank (by node), whatever the query around does not order.
    let key = if by_node { "node" } else { "rank" };
    Ok(Arc::new(commdb_analysis::ordered::OrderedView::new(view, &[key])))
}
