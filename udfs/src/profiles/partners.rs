//! Who each rank talks to: `comm_partners` gives per rank the number of ranks it sends to and
//! receives from, its messages and bytes each way, and the partner it exchanges the most bytes
//! with and that partner's share. The number of partners is the communication degree by which
//! a pattern is told apart (four for a 2-D halo exchange without wrap-around at an inner rank,
//! two for a ring, all the others for an all-to-all, a hub for master-worker), and a rank whose
//! degree stands out is one to look at. The function is a view: a query over the messages,
//! each message counted once at each end (a cross join with the two sides, so the relation is
//! read once); a message whose sender or receiver is unknown counts at the end that is known.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use crate::latency::MESSAGES;
use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, col, float64, int64};
use commdb_analysis::relation::Relation;

pub const COMM_PARTNERS: Function = Function {
    name: "comm_partners",
    params: &[MESSAGES],
    output: Output::Columns(&[
        col("rank", int64, "the rank"),
        col("partners", int64, "ranks it sends to or receives from").never_null(),
        col("sent_to", int64, "ranks it sends to").never_null(),
        col("received_from", int64, "ranks it receives from").never_null(),
        col("messages_sent", int64, "messages it sent"),
        col("messages_received", int64, "messages it received"),
        col("bytes_sent", int64, "bytes it sent"),
        col("bytes_received", int64, "bytes it received"),
        col("top_partner", int64, "the partner it exchanges the most bytes with (the lowest rank on ties)"),
        col("top_partner_share", float64, "that partner's share of the bytes it sends and receives (NULL: no bytes)"),
    ]),
    description: "per rank, its communication partners: how many ranks it sends to and receives from, its messages and bytes each way, and the partner it exchanges the most bytes with (the communication degree tells a pattern apart: 4 neighbours of a 2-D stencil, 2 of a ring, all of an all-to-all)",
    make: Make::Table(comm_partners),
};

arguments! {
    struct PartnersArgs(COMM_PARTNERS) {
        rel: Relation,
    }
}

fn comm_partners(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let PartnersArgs { rel } = PartnersArgs::read(a)?;
    rel.columns(a.function, &["src", "dst", "bytes"])?;
    let view = commdb_analysis::views::sql_view(a.session, a.function, query(&rel.reference.to_quoted_string()))?;
    Ok(Arc::new(commdb_analysis::ordered::OrderedView::new(view, &["rank"])))
}

/// The query behind the view, reading the messages of relation `m` (quoted as SQL names it).
fn query(m: &str) -> String {
    format!(
        "WITH sides AS (
  SELECT CASE WHEN x.sent = 1 THEN m.src ELSE m.dst END AS rank,
         CASE WHEN x.sent = 1 THEN m.dst ELSE m.src END AS partner,
         x.sent, CAST(m.bytes AS BIGINT) AS bytes
  FROM (VALUES (1), (0)) x(sent) CROSS JOIN (SELECT src, dst, bytes FROM {m}) m),
pairs AS (
  SELECT CAST(rank AS BIGINT) AS rank, CAST(partner AS BIGINT) AS partner,
         sum(sent) AS sent, count(*) - sum(sent) AS received,
         sum(CASE WHEN sent = 1 THEN bytes ELSE 0 END) AS bytes_sent,
         sum(CASE WHEN sent = 0 THEN bytes ELSE 0 END) AS bytes_received
  FROM sides WHERE rank IS NOT NULL GROUP BY 1, 2)
SELECT rank,
       count(partner) AS partners,
       count(partner) FILTER (WHERE sent > 0) AS sent_to,
       count(partner) FILTER (WHERE received > 0) AS received_from,
       CAST(sum(sent) AS BIGINT) AS messages_sent,
       CAST(sum(received) AS BIGINT) AS messages_received,
       CAST(sum(bytes_sent) AS BIGINT) AS bytes_sent,
       CAST(sum(bytes_received) AS BIGINT) AS bytes_received,
       first_value(partner ORDER BY bytes_sent + bytes_received DESC, partner ASC) FILTER (WHERE partner IS NOT NULL)
         AS top_partner,
       CAST(max(CASE WHEN partner IS NOT NULL THEN bytes_sent + bytes_received END) AS DOUBLE)
         / nullif(sum(bytes_sent + bytes_received), 0) AS top_partner_share
FROM pairs GROUP BY rank ORDER BY rank"
    )
}
