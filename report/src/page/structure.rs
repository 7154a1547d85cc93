//! The report's sections on the trace and its structure: the overview (trace_info, warnings),
//! who communicates with whom (rank and node matrices, ranks in `process_regions()` order) and
//! the region graph of PCLVis section 4.2.

use commdb_catalog::Session;

use super::drawings::{self, Region, RegionEdge};
use super::figures;
use super::{MAX_GROUPS, Rows, figure, query, table};
use commdb_analysis::shown::duration;

/// Section 1: the trace's facts and the problems found reading it.
pub async fn overview(session: &mut Session, info: &Rows) -> Result<String, String> {
    let nodes = query(session, "SELECT count(DISTINCT node) FROM ranks").await?.one(0).unwrap_or(0.0);
    let messages = query(session, "SELECT count(*), sum(bytes) FROM messages").await?;
    let warnings = query(session, "SELECT code, count, message FROM warnings ORDER BY count DESC LIMIT 8").await?;
    let text = |c: usize| info.texts(c)[0].clone().unwrap_or_else(|| "-".into());
    let num = |c: usize| info.one(c).unwrap_or(0.0);
    let mut rows = vec![vec!["fact".to_string(), "value".to_string()]];
    rows.push(vec!["trace".into(), format!("{} ({}, written by {})", text(1), text(2), text(3))]);
    rows.push(vec!["ranks and nodes".into(), format!("{} ranks on {} nodes, {} locations", num(4), nodes, num(5))]);
    rows.push(vec!["duration".into(), duration(num(6))]);
    rows.push(vec!["events".into(), format!("{}", num(7))]);
    rows.push(vec![
        "messages".into(),
        format!(
            "{} matched, {}",
            messages.one(0).unwrap_or(0.0),
            commdb_analysis::shown::bytes(messages.one(1).unwrap_or(0.0))
        ),
    ]);
    rows.push(vec!["clock correction".into(), format!("{}; {} messages still received before sent", text(8), num(9))]);
    let mut s = table(&rows);
    if warnings.len() == 0 {
        s.push_str("<p>No problem was found while reading the trace.</p>\n");
    } else {
        s.push_str("<p>Problems found while reading the trace (see the <code>warnings</code> table):</p>\n");
        let mut rows = vec![vec!["problem".into(), "count".into(), "what it means".into()]];
        let (code, count, message) = (warnings.texts(0), warnings.f64s(1), warnings.texts(2));
        for i in 0..warnings.len() {
            rows.push(vec![
                code[i].clone().unwrap_or_default(),
                format!("{}", count[i].unwrap_or(0.0)),
                message[i].clone().unwrap_or_default(),
            ]);
        }
        s.push_str(&table(&rows));
    }
    Ok(s)
}

/// Ranks in region order with their region, from process_regions().
pub async fn regions(session: &mut Session) -> Result<Vec<(i64, i64)>, String> {
    let r = query(session, "SELECT rank, region FROM process_regions() ORDER BY region, rank").await?;
    Ok(r.ints(0).into_iter().zip(r.ints(1)).collect())
}

/// Section 2: messages between ranks in region order, bytes between nodes.
pub async fn matrix(session: &mut Session) -> Result<String, String> {
    let order = regions(session).await?;
    if order.is_empty() {
        return Err("no matched messages".into());
    }
    let groups = order.len().div_ceil(MAX_GROUPS).max(1);
    let group_of: std::collections::HashMap<i64, usize> =
        order.iter().enumerate().map(|(i, (r, _))| (*r, i / groups)).collect();
    let labels: Vec<String> = order
        .chunks(groups)
        .map(|c| if groups == 1 { format!("{} R{}", c[0].0, c[0].1) } else { format!("{}+ R{}", c[0].0, c[0].1) })
        .collect();
    let m = query(session, "SELECT src, dst, messages FROM comm_matrix()").await?;
    let mut cells: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
    let (src, dst, n) = (m.ints(0), m.ints(1), m.f64s(2));
    for i in 0..m.len() {
        if let (Some(a), Some(b)) = (group_of.get(&src[i]), group_of.get(&dst[i])) {
            *cells.entry((*b, *a)).or_default() += n[i].unwrap_or(0.0);
        }
    }
    let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
    let axis = if groups == 1 { "rank (and its region)" } else { "rank group, in region order" };
    let mut s = figure(
        "Messages between ranks, ordered by communication region",
        &figures::heatmap("messages between ranks", &labels, &cells, axis, "messages"),
        &format!(
            "Each cell is the number of messages the row's rank sent to the column's rank{}; ranks are sorted by the communication region process_regions() puts them in, so regions appear as blocks on the diagonal and traffic between regions off it.",
            if groups == 1 {
                String::new()
            } else {
                format!(
                    " (groups of {groups} ranks consecutive in region order, labelled by their first rank and its region)"
                )
            }
        ),
    );
    let nodes = query(
        session,
        "SELECT src, dst, bytes FROM comm_matrix(by => 'node') WHERE src IS NOT NULL AND dst IS NOT NULL",
    )
    .await?;
    if nodes.len() > 0 {
        let (src, dst, bytes) = (nodes.texts(0), nodes.texts(1), nodes.f64s(2));
        let mut names: Vec<String> = src.iter().chain(&dst).flatten().cloned().collect();
        names.sort();
        names.dedup();
        let groups = names.len().div_ceil(MAX_GROUPS).max(1);
        let at = |n: &Option<String>| n.as_ref().and_then(|n| names.binary_search(n).ok()).map(|i| i / groups);
        let labels: Vec<String> = names.chunks(groups).map(|c| c[0].clone()).collect();
        let mut cells: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
        for i in 0..nodes.len() {
            if let (Some(a), Some(b)) = (at(&src[i]), at(&dst[i])) {
                *cells.entry((b, a)).or_default() += bytes[i].unwrap_or(0.0);
            }
        }
        let cells: Vec<(usize, usize, f64)> = cells.into_iter().map(|((c, r), v)| (c, r, v)).collect();
        s.push_str(&figure(
            "Bytes between nodes",
            &figures::heatmap("bytes between nodes", &labels, &cells, "node", "bytes"),
            "Each cell is the bytes the row's node sent to the column's node; the diagonal is traffic that stayed on a node, everything off it crossed the network.",
        ));
    }
    Ok(s)
}

/// Section 3: the region graph (PCLVis 4.2).
pub async fn region_graph(session: &mut Session) -> Result<String, String> {
    let sizes =
        query(session, "SELECT region, count(*) FROM process_regions() GROUP BY region ORDER BY region").await?;
    let regions: Vec<Region> =
        sizes.ints(0).into_iter().zip(sizes.ints(1)).map(|(id, n)| Region { id, ranks: n as usize }).collect();
    if regions.is_empty() {
        return Err("no matched messages".into());
    }
    let g = query(session, "SELECT region_a, region_b, messages, mean_latency FROM region_graph()").await?;
    let (a, b, m, l) = (g.ints(0), g.ints(1), g.f64s(2), g.f64s(3));
    let edges: Vec<RegionEdge> = (0..g.len())
        .map(|i| RegionEdge { a: a[i], b: b[i], messages: m[i].unwrap_or(0.0), mean_latency: l[i] })
        .collect();
    Ok(figure(
        &format!("{} communication regions and the messages between them", regions.len()),
        &drawings::region_graph("region graph", &regions, &edges),
        "Each circle is a region of ranks that mostly talk among themselves (its area follows its ranks, its fill the mean latency L of the messages inside it); a line joins regions that exchange messages, thicker for more messages, coloured by their mean L (1 is the normal time for the message's size; higher is slower).",
    ))
}
