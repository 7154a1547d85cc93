//! The report's closing sections: waiting (Scalasca's wait states) and transfer efficiency
//! (the ideal-network replay), then what to do: `attribution()`'s causes with the paper's
//! recommendations, `rank_diagnosis()`, and the remapping with the placement before and after.

use std::fmt::Write;

use commdb_catalog::Session;

use super::drawings;
use super::figures;
use super::structure::regions;
use super::time::span;
use super::{TIME_BINS, figure, ms, query, table};
use crate::chart::{esc, short};

/// Section 7: wait states per rank and transfer efficiency over time.
pub async fn waiting(session: &mut Session) -> Result<String, String> {
    let w = query(session, "SELECT rank, pattern, sum(wait_ns) FROM wait_states() GROUP BY rank, pattern").await?;
    let mut s = String::new();
    if w.len() > 0 {
        let (rank, pattern, ns) = (w.ints(0), w.texts(1), w.f64s(2));
        let mut ranks: Vec<i64> = rank.clone();
        ranks.sort_unstable();
        ranks.dedup();
        let mut patterns: Vec<(String, f64)> = Vec::new();
        for i in 0..w.len() {
            let p = pattern[i].clone().unwrap_or_default();
            match patterns.iter_mut().find(|x| x.0 == p) {
                Some(x) => x.1 += ns[i].unwrap_or(0.0),
                None => patterns.push((p, ns[i].unwrap_or(0.0))),
            }
        }
        patterns.sort_by(|a, b| b.1.total_cmp(&a.1));
        let series: Vec<(String, Vec<f64>)> = patterns
            .iter()
            .take(7)
            .map(|(p, _)| {
                let mut v = vec![0.0; ranks.len()];
                for i in 0..w.len() {
                    if pattern[i].as_deref() == Some(p.as_str()) {
                        v[ranks.binary_search(&rank[i]).unwrap_or(0)] += ms(ns[i].unwrap_or(0.0));
                    }
                }
                (p.replace('_', " "), v)
            })
            .collect();
        let labels: Vec<String> = ranks.iter().map(ToString::to_string).collect();
        s.push_str(&figure(
            "Time each rank waited, by wait state",
            &figures::stacked_bars("waiting per rank", "rank", "waiting (ms)", &labels, &series),
            "Scalasca's wait states: a bar is a rank's time blocked waiting for others, split by why (a late sender, a late receiver, a collective whose last participant came late). A rank with a short bar while its partners have long ones is the one they wait for.",
        ));
    } else {
        s.push_str("<p>No wait state was found: no rank waited for another.</p>\n");
    }
    let (t0, t1) = span(session).await?;
    let bin = ((t1 - t0) / TIME_BINS as f64).max(1.0);
    let e = query(session, &efficiency_over_time(bin)).await?;
    let per = query(session, "SELECT rank, efficiency FROM transfer_efficiency() ORDER BY rank NULLS FIRST").await?;
    let (who, eff) = (per.f64s(0), per.f64s(1));
    let total = (per.len() > 0 && who[0].is_none()).then(|| eff[0]).flatten();
    let worst = (0..per.len())
        .filter(|&i| who[i].is_some())
        .min_by(|&a, &b| eff[a].unwrap_or(1.0).total_cmp(&eff[b].unwrap_or(1.0)));
    let (t, mean) = (e.f64s(0), e.f64s(1));
    let points = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        t.iter().zip(v).filter_map(|(t, v)| Some((ms((*t)?), (*v)?))).collect()
    };
    if let Some(i) = worst {
        let _ = writeln!(
            s,
            "<p>Least efficient rank over the whole run: {} ({:.1}% of its time would remain on an ideal network).</p>",
            who[i].unwrap_or(0.0),
            eff[i].unwrap_or(0.0) * 100.0
        );
    }
    s.push_str(&figure(
        &format!("Transfer efficiency over time{}", total.map_or(String::new(), |e| format!(" (whole run: {:.1}%)", e * 100.0))),
        &figures::time_series("transfer efficiency", "time (ms)", "efficiency (1 = ideal network)", &[("all ranks".into(), "#0072B2", points(&mean))], &[], Some((1.0, "ideal network"))),
        "The run replayed on an ideal network (zero latency, infinite bandwidth; ideal_replay()): per time bin, (compute + ideal MPI time) / (compute + observed MPI time) of the compute and MPI pairs ending in it, over all ranks. 1 means the network cost nothing; 0.5 means that work took twice as long as on an ideal network.",
    ));
    Ok(s)
}

/// Transfer efficiency per time bin of `bin` ns (the bin's middle, the efficiency): of the
/// compute and MPI pairs ending in the bin, (compute + ideal MPI time) over (compute +
/// observed MPI time), summed over the ranks. The sums are integers: the division is done in
/// floating point (integer division gave 0 or 1).
fn efficiency_over_time(bin: f64) -> String {
    format!(
        "WITH per AS (SELECT floor(observed_end / {bin}) * {bin} + {} AS t, rank, sum(compute_ns + mpi_ideal_ns) AS ideal, \
         sum(compute_ns + mpi_observed_ns) AS observed FROM ideal_replay() GROUP BY 1, 2) \
         SELECT t, CAST(sum(ideal) AS DOUBLE) / sum(observed) FROM per WHERE observed > 0 GROUP BY t ORDER BY t",
        bin / 2.0
    )
}

/// Section 8: the diagnosis, what to do, and the remapping.
pub async fn advice(session: &mut Session) -> Result<String, String> {
    let mut s = String::new();
    let causes = query(
        session,
        "SELECT cause, recommendation, count(*), min(window_start), max(window_end) FROM attribution() WHERE cause <> 'none' GROUP BY cause, recommendation ORDER BY 3 DESC",
    )
    .await?;
    if causes.len() == 0 {
        s.push_str("<p class=\"key\">attribution() found no window where latency has a cause it recognises: communication looks healthy.</p>\n");
    } else {
        let mut rows = vec![vec!["cause".into(), "windows".into(), "from".into(), "to".into(), "what to do".into()]];
        let (c, r, n, a, b) = (causes.texts(0), causes.texts(1), causes.f64s(2), causes.f64s(3), causes.f64s(4));
        for i in 0..causes.len() {
            rows.push(vec![
                c[i].clone().unwrap_or_default().replace('_', " ").replace(',', ", "),
                format!("{}", n[i].unwrap_or(0.0)),
                format!("{} ms", short(ms(a[i].unwrap_or(0.0)))),
                format!("{} ms", short(ms(b[i].unwrap_or(0.0)))),
                r[i].clone().unwrap_or_default(),
            ]);
        }
        let mut found: Vec<&str> = Vec::new();
        for cause in c.iter().flatten().flat_map(|c| c.split(',')) {
            let phrase = match cause {
                "mapping" => "bad mapping of ranks to nodes",
                "pattern" => "an unbalanced communication pattern",
                "background_traffic" => "background traffic on the network",
                other => other,
            };
            if !found.contains(&phrase) {
                found.push(phrase);
            }
        }
        let _ = writeln!(s, "<p class=\"key\">Diagnosis: latency is caused by {}.</p>", esc(&found.join(" and ")));
        s.push_str(&table(&rows));
    }
    let ranks = query(session, "SELECT cause, count(*), min(rank), max(rank) FROM rank_diagnosis() WHERE cause <> 'none' GROUP BY cause ORDER BY 2 DESC").await;
    if let Ok(ranks) = ranks
        && ranks.len() > 0
    {
        let mut rows = vec![vec!["ranks diagnosed".into(), "ranks".into(), "lowest".into(), "highest".into()]];
        let (c, n, lo, hi) = (ranks.texts(0), ranks.f64s(1), ranks.ints(2), ranks.ints(3));
        for i in 0..ranks.len() {
            rows.push(vec![
                c[i].clone().unwrap_or_default().replace('_', " "),
                format!("{}", n[i].unwrap_or(0.0)),
                lo[i].to_string(),
                hi[i].to_string(),
            ]);
        }
        s.push_str("<p>Which ranks, by rank_diagnosis():</p>\n");
        s.push_str(&table(&rows));
    }
    match placement(session, causes.len() == 0).await {
        Ok(p) => s.push_str(&p),
        Err(why) => {
            let _ = writeln!(s, "<p class=\"missing\">No remapping suggestion: {}</p>", esc(&why));
        }
    }
    Ok(s)
}

/// A count with thousands separators: 59,520.
fn count(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// The remapping: what it saves, and the placement before and after; `healthy` when
/// attribution found nothing wrong, so the saving is an option rather than the remedy.
async fn placement(session: &mut Session, healthy: bool) -> Result<String, String> {
    let summary = query(
        session,
        "SELECT inter_messages_before, inter_messages_after, reduction, kept_current FROM remap_summary()",
    )
    .await?;
    let order = regions(session).await?;
    let region_of: std::collections::HashMap<i64, i64> = order.into_iter().collect();
    let r = query(session, "SELECT rank, current_node, suggested_node FROM remap_suggestion() ORDER BY rank").await?;
    let (rank, current, suggested) = (r.ints(0), r.texts(1), r.texts(2));
    let layout = |nodes: &[Option<String>]| {
        let mut by: std::collections::BTreeMap<String, Vec<(i64, i64)>> = std::collections::BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            by.entry(n.clone().unwrap_or_else(|| "?".into()))
                .or_default()
                .push((rank[i], region_of.get(&rank[i]).copied().unwrap_or(-1)));
        }
        by.into_iter().collect::<Vec<_>>()
    };
    let before = summary.one(0);
    let after = summary.one(1).unwrap_or(0.0);
    let kept = summary.f64s(3).first().copied().flatten().unwrap_or(0.0) > 0.0;
    let text = match (before, kept) {
        (_, true) => {
            "The current placement already cuts the least traffic between nodes: remapping would not help.".to_string()
        }
        (Some(b), false) => {
            let saving = format!(
                "cut inter-node messages from {} to {} ({:.0}% fewer)",
                count(b),
                count(after),
                summary.one(2).unwrap_or(0.0) * 100.0
            );
            if healthy {
                format!(
                    "Latency shows no problem now, so nothing needs remapping; a placement that keeps more traffic on nodes is still there if the network becomes the bottleneck (more ranks, busier links): remapping ranks as below would {saving}."
                )
            } else {
                format!("Remapping ranks as below would {saving}.")
            }
        }
        (None, false) => format!("The suggested placement sends {} messages between nodes.", count(after)),
    };
    let mut s = format!("<p class=\"key\">{}</p>\n", esc(&text));
    s.push_str(&figure(
        "Ranks on nodes before and after remapping",
        &drawings::placement("placement", &layout(&current), &layout(&suggested)),
        "Each block is a node and each square a rank on it, coloured by its communication region (process_regions()): a node of one colour keeps a region's traffic on the node. remap_suggestion() (METIS) groups ranks that exchange most messages.",
    ));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_alike_at_every_size() {
        assert_eq!(count(6400.0), "6,400");
        assert_eq!(count(44_800.0), "44,800");
        assert_eq!(count(1_234_567.0), "1,234,567");
        assert_eq!(count(12.0), "12");
    }

    #[test]
    fn efficiency_over_time_is_a_fraction_per_bin() {
        // The bins of the demo's run: the efficiency lies between 0 and 1 and varies, as the
        // transfer efficiency of the whole run (89 to 93%) says; integer division gave 0 in
        // every bin but the last.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mut session = commdb_catalog::Session::with_partitions(2);
        commdb_udfs::register_all(&mut session);
        session.open("generate:ranks=16,iterations=40", None, &Default::default()).unwrap();
        let rows = runtime.block_on(session.collect(&efficiency_over_time(50_000.0))).unwrap();
        let values: Vec<f64> = rows
            .iter()
            .flat_map(|b| {
                let c = b.column(1).as_any().downcast_ref::<arrow::array::Float64Array>().unwrap();
                c.iter().flatten().collect::<Vec<_>>()
            })
            .collect();
        assert!(values.len() > 10, "{values:?}");
        assert!(values.iter().all(|v| (0.0..=1.0).contains(v)), "{values:?}");
        let fractional = values.iter().filter(|v| **v > 0.05 && **v < 0.999).count();
        assert!(fractional * 2 > values.len(), "most bins are fractions: {values:?}");
    }
}
