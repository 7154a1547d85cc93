//! The report's sections over time: latency per time bin with `latency_trend()`'s periods and
//! `attribution()`'s causes (PCLVis 5.1 and 6), the level-of-detail timeline (Intel Trace
//! Analyzer) and the communication-dependency DAG of the slowest period (PCLVis 5.3).

use commdb_catalog::Session;

use super::drawings::{self, DagEdge, DagNode, Flow, Line, Row, Slot};
use super::figures::{self, Band};
use super::{MAX_DAG_MESSAGES, MAX_LINES, TIME_BINS, TIMELINE_PIXELS, figure, ms, query};
use crate::chart::short;
use commdb_analysis::shown::duration;

/// The messages' span: first send to last receive.
pub async fn span(session: &mut Session) -> Result<(f64, f64), String> {
    let s = query(session, "SELECT min(send_ts), max(coalesce(recv_ts, send_ts)) FROM messages").await?;
    match (s.one(0), s.one(1)) {
        (Some(a), Some(b)) if b > a => Ok((a, b)),
        _ => Err("no timed messages".into()),
    }
}

/// Section 4: latency L per time bin, with trend periods and attributed causes.
pub async fn latency(session: &mut Session) -> Result<String, String> {
    let (t0, t1) = span(session).await?;
    let bin = query(session, &format!("SELECT lod_resolution({}, {}, {TIME_BINS})", t0 as i64, t1 as i64 + 1))
        .await?
        .one(0)
        .unwrap_or(1.0)
        .max(1.0);
    let b = query(
        session,
        &format!(
            "SELECT floor(send_ts / {bin}) * {bin} + {half} AS t, avg(latency), approx_percentile_cont(latency, 0.95) \
             FROM message_latency() WHERE latency IS NOT NULL AND send_ts IS NOT NULL GROUP BY 1 ORDER BY 1",
            half = bin / 2.0
        ),
    )
    .await?;
    let (t, mean, p95) = (b.f64s(0), b.f64s(1), b.f64s(2));
    let points = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        t.iter().zip(v).filter_map(|(t, v)| Some((ms((*t)?), (*v)?))).collect()
    };
    let mut bands = Vec::new();
    let trend = query(session, "SELECT kind, t_start, t_end FROM latency_trend() WHERE kind <> 'compressed'").await?;
    let (kind, from, to) = (trend.texts(0), trend.f64s(1), trend.f64s(2));
    for i in 0..trend.len() {
        let growth = kind[i].as_deref() == Some("growth");
        bands.push(Band {
            from: ms(from[i].unwrap_or(0.0)),
            to: ms(to[i].unwrap_or(0.0)),
            colour: if growth { "#F0E442" } else { "#D55E00" },
            name: if growth { "growth period".into() } else { "steady-high period".into() },
        });
    }
    let mut s = figure(
        "Latency L over time: mean and 95th percentile per time bin",
        &figures::time_series(
            "latency over time",
            "send time (ms)",
            "latency L (1 = normal)",
            &[("mean L".into(), "#0072B2", points(&mean)), ("95th percentile L".into(), "#E69F00", points(&p95))],
            &bands,
            Some((1.0, "L = 1: normal for the size")),
        ),
        &format!(
            "L is a message's transmission time over the median time of messages of its size and locality (PCLVis 4.1), averaged over bins of {}. Shaded: the periods latency_trend() finds where latency grows (yellow) or stays high (vermilion).",
            duration(bin)
        ),
    );
    let causes = query(
        session,
        "SELECT window_start, window_end, cause FROM attribution() WHERE cause <> 'none' ORDER BY window_start",
    )
    .await?;
    let (from, to, cause) = (causes.f64s(0), causes.f64s(1), causes.texts(2));
    let colour = |c: &str| match c {
        "mapping" => "#56B4E9",
        "pattern" => "#009E73",
        "background_traffic" => "#CC79A7",
        _ => "#999999",
    };
    let mut cause_bands = Vec::new();
    for i in 0..causes.len() {
        for c in cause[i].as_deref().unwrap_or("").split(',') {
            cause_bands.push(Band {
                from: ms(from[i].unwrap_or(0.0)),
                to: ms(to[i].unwrap_or(0.0)),
                colour: colour(c),
                name: c.replace('_', " "),
            });
        }
    }
    s.push_str(&figure(
        "Causes of latency by time window",
        &figures::time_series("causes of latency", "send time (ms)", "mean latency L", &[("mean L".into(), "#000000", points(&mean))], &cause_bands, Some((1.0, "L = 1"))),
        if cause_bands.is_empty() {
            "attribution() found no window whose slow messages it can attribute to a cause: no band is shaded."
        } else {
            "Shaded: the windows where attribution() (PCLVis 6) blames bad mapping (light blue), an unbalanced communication pattern (green) or background traffic on the network (purple); the line is the mean L for reference."
        },
    ));
    Ok(s)
}

/// Views of the default trace's calls on host threads and on accelerator streams, for the
/// timeline of a trace with streams.
const HOST_CALLS: &str = "commdb_report_host_calls";
const DEVICE_CALLS: &str = "commdb_report_device_calls";
/// Most transfers drawn on the streams' rows.
const MAX_TRANSFERS: usize = 20_000;

/// Section 5: the level-of-detail timeline with message lines; a trace with accelerator
/// streams gets a row per stream below its rank, with its kernels' representatives, its
/// transfers and arrows from each launch to its kernel.
pub async fn timeline(session: &mut Session) -> Result<String, String> {
    let streams =
        query(session, "SELECT rank, thread, name FROM locations WHERE kind = 'gpu' ORDER BY rank, thread").await?;
    let with_streams = streams.len() > 0;
    let host = if with_streams {
        for (view, op) in [(HOST_CALLS, "<>"), (DEVICE_CALLS, "=")] {
            query(
                session,
                &format!(
                    "CREATE OR REPLACE VIEW {view} AS SELECT c.* FROM calls c JOIN locations l ON l.rank = c.rank AND l.thread = c.thread WHERE l.kind {op} 'gpu'"
                ),
            )
            .await?;
        }
        format!("rel => '{HOST_CALLS}', ")
    } else {
        String::new()
    };
    let calls = query(
        session,
        &format!(
            "SELECT slot_start, slot_end, rank, region FROM lod_calls({host}pixels => {TIMELINE_PIXELS}, per => 'rank')"
        ),
    )
    .await?;
    if calls.len() == 0 {
        return Err("no calls".into());
    }
    let (from, to, rank, region) = (calls.f64s(0), calls.f64s(1), calls.ints(2), calls.texts(3));
    let mut slots = Vec::with_capacity(calls.len());
    let mut time: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    let mut add = |slots: &mut Vec<Slot>, a: f64, b: f64, rank: i64, lane: Option<i64>, name: String| {
        *time.entry(name.clone()).or_default() += b - a;
        // Consecutive slots of one region on a row are one rectangle.
        match slots.last_mut() {
            Some(Slot { to, rank: r, lane: l, region: g, .. })
                if *r == rank && *l == lane && *g == name && (*to - ms(a)).abs() < 1e-9 =>
            {
                *to = ms(b)
            }
            _ => slots.push(Slot { from: ms(a), to: ms(b), rank, lane, region: name }),
        }
    };
    for i in 0..calls.len() {
        let (a, b) = (from[i].unwrap_or(0.0), to[i].unwrap_or(0.0));
        add(&mut slots, a, b, rank[i], None, region[i].clone().unwrap_or_default());
    }
    let mut ranks: Vec<i64> = rank.clone();
    let mut flows = Vec::new();
    let mut transfers = 0;
    if with_streams {
        let device = query(
            session,
            &format!(
                "SELECT slot_start, slot_end, rank, thread, region FROM lod_calls(rel => '{DEVICE_CALLS}', pixels => {TIMELINE_PIXELS}, per => 'thread') ORDER BY rank, thread, slot_start"
            ),
        )
        .await?;
        let (from, to, rank, thread, region) =
            (device.f64s(0), device.f64s(1), device.ints(2), device.ints(3), device.texts(4));
        for i in 0..device.len() {
            let (a, b) = (from[i].unwrap_or(0.0), to[i].unwrap_or(0.0));
            add(&mut slots, a, b, rank[i], Some(thread[i]), region[i].clone().unwrap_or_default());
        }
        let t = query(
            session,
            "SELECT start_ts, end_ts, rank, thread, direction FROM gpu_transfers() WHERE end_ts IS NOT NULL ORDER BY rank, thread, start_ts",
        )
        .await?;
        transfers = t.len();
        let (from, to, rank, thread, direction) = (t.f64s(0), t.f64s(1), t.ints(2), t.ints(3), t.texts(4));
        for i in (0..t.len()).step_by(t.len().div_ceil(MAX_TRANSFERS).max(1)) {
            let name = format!("copy {}", direction[i].clone().unwrap_or_default().replace('_', " "));
            add(&mut slots, from[i].unwrap_or(0.0), to[i].unwrap_or(0.0), rank[i], Some(thread[i]), name);
        }
        let k = query(
            session,
            "SELECT launch_ts, rank, start_ts, thread FROM gpu_kernels() WHERE launch_ts IS NOT NULL ORDER BY start_ts, rank",
        )
        .await?;
        let (launch, rank, start, thread) = (k.f64s(0), k.ints(1), k.f64s(2), k.ints(3));
        for i in (0..k.len()).step_by(k.len().div_ceil(MAX_LINES / 2).max(1)) {
            flows.push(Flow {
                launch: ms(launch[i].unwrap_or(0.0)),
                rank: rank[i],
                start: ms(start[i].unwrap_or(0.0)),
                lane: thread[i],
            });
        }
        ranks.extend(streams.ints(0));
    }
    let mut named: Vec<(String, f64)> = time.into_iter().collect();
    named.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: Vec<String> = named.into_iter().take(6).map(|n| n.0).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let (stream_rank, stream_thread, stream_name) = (streams.ints(0), streams.ints(1), streams.texts(2));
    let mut rows = Vec::with_capacity(ranks.len() + streams.len());
    for &r in &ranks {
        rows.push(Row { rank: r, lane: None, label: r.to_string() });
        for i in (0..streams.len()).filter(|&i| stream_rank[i] == r) {
            // `CUDA[0:7]` as `[0:7]` (device and stream), which fits the margin.
            let name = stream_name[i].clone().unwrap_or_default();
            let label = name.find('[').map_or(name.clone(), |at| name[at..].to_string());
            rows.push(Row { rank: r, lane: Some(stream_thread[i]), label });
        }
    }
    let m = query(
        session,
        &format!("SELECT send_slot, src, recv_slot, dst FROM lod_messages(pixels => {TIMELINE_PIXELS}) WHERE send_slot IS NOT NULL AND recv_slot IS NOT NULL ORDER BY send_slot, src, dst"),
    )
    .await?;
    let (send, src, recv, dst) = (m.f64s(0), m.ints(1), m.f64s(2), m.ints(3));
    // Every k-th line in time order, so the drawn ones spread over the run and the ranks.
    let stride = m.len().div_ceil(MAX_LINES).max(1);
    let res = (0..calls.len())
        .map(|i| to[i].unwrap_or(0.0) - from[i].unwrap_or(0.0))
        .filter(|w| *w > 0.0)
        .fold(f64::INFINITY, f64::min);
    let half = if res.is_finite() { res / 2.0 } else { 0.0 };
    let lines: Vec<Line> = (0..m.len())
        .step_by(stride)
        .map(|i| Line {
            send: ms(send[i].unwrap_or(0.0) + half),
            src: src[i],
            recv: ms(recv[i].unwrap_or(0.0) + half),
            dst: dst[i],
        })
        .collect();
    let device_words = if with_streams {
        format!(
            " Below each rank, a row per GPU stream: the kernel that ran most in each slot, its transfers between host and device ({transfers}{}), and an arrow from each launch to its kernel's start{}.",
            if transfers > MAX_TRANSFERS {
                format!(", one in {} drawn", transfers.div_ceil(MAX_TRANSFERS))
            } else {
                String::new()
            },
            if flows.is_empty() {
                " (the trace ties no launch to a kernel)".to_string()
            } else {
                format!(" ({} drawn)", flows.len())
            }
        )
    } else {
        String::new()
    };
    Ok(figure(
        "Timeline: what each rank does, slot by slot",
        &drawings::timeline("timeline", &slots, &lines, &flows, &named, &rows),
        &format!(
            "One row per rank, time to the right in slots of {} (Intel Trace Analyzer's level of detail: each slot shows the region where the rank spent most of its time). Grey lines join the slots of a send and of its receive{}.{device_words}",
            duration(if res.is_finite() { res } else { 0.0 }),
            if stride > 1 {
                format!(" (one in {stride} of the {} slot pairs, evenly over the run)", m.len())
            } else {
                String::new()
            }
        ),
    ))
}

/// "between A and B ms", with as many digits as keep A and B apart (µs for spans under a
/// millisecond).
fn between(from_ns: f64, to_ns: f64) -> String {
    if to_ns - from_ns >= 1e6 || short(ms(from_ns)) != short(ms(to_ns)) && to_ns - from_ns >= 1e5 {
        return format!("between {} and {} ms", short(ms(from_ns)), short(ms(to_ns)));
    }
    let us = |ns: f64| ns / 1e3;
    let digits = if to_ns - from_ns >= 100.0 { 1 } else { 3 };
    format!("between {:.digits$} and {:.digits$} µs", us(from_ns), us(to_ns))
}

/// Section 6: the dependency DAG of the slowest period (at most MAX_DAG_MESSAGES messages).
pub async fn dag(session: &mut Session) -> Result<String, String> {
    let (t0, t1) = span(session).await?;
    let slow = query(session, "SELECT t_start, t_end, kind FROM latency_trend() WHERE kind <> 'compressed' ORDER BY mean_latency DESC LIMIT 1").await?;
    let (from, what) = match slow.one(0) {
        Some(a) => (
            a,
            format!(
                "the {} period from {} ms",
                slow.texts(2)[0].clone().unwrap_or_default().replace('_', "-"),
                short(ms(a))
            ),
        ),
        None => (t0, "the run's start".to_string()),
    };
    let slow_found = slow.len() > 0;
    let end = slow.one(1).unwrap_or(t1);
    let cut = query(
        session,
        &format!(
            "SELECT send_ts FROM messages WHERE send_ts >= {from} ORDER BY send_ts LIMIT 1 OFFSET {MAX_DAG_MESSAGES}"
        ),
    )
    .await?;
    let to = cut.one(0).map_or(end, |c| c.min(end)).max(from + 1.0);
    let view = "__commdb_report_period";
    query(
        session,
        &format!(
            "CREATE OR REPLACE VIEW {view} AS SELECT * FROM messages WHERE send_ts >= {} AND send_ts < {}",
            from as i64, to as i64
        ),
    )
    .await?;
    let nodes = query(
        session,
        &format!("SELECT node_id, rank, first_ts, last_ts, load_balance FROM dag_nodes(rel => '{view}')"),
    )
    .await;
    let edges = query(session, &format!("SELECT from_node, to_node, latency FROM dag_edges(rel => '{view}')")).await;
    let _ = query(session, &format!("DROP VIEW IF EXISTS {view}")).await;
    let (nodes, edges) = (nodes?, edges?);
    if nodes.len() == 0 {
        return Err("no messages in the slowest period".into());
    }
    let (id, rank, first, last, lb) = (nodes.ints(0), nodes.ints(1), nodes.f64s(2), nodes.f64s(3), nodes.f64s(4));
    let nodes: Vec<DagNode> = (0..nodes.len())
        .map(|i| DagNode {
            id: id[i],
            rank: rank[i],
            first: ms(first[i].unwrap_or(0.0)),
            last: ms(last[i].unwrap_or(0.0)),
            load_balance: lb[i].unwrap_or(0.0),
        })
        .collect();
    let (a, b, l) = (edges.ints(0), edges.ints(1), edges.f64s(2));
    let edges: Vec<DagEdge> = (0..edges.len()).map(|i| DagEdge { from: a[i], to: b[i], latency: l[i] }).collect();
    Ok(figure(
        &format!("Communication dependencies from {what}"),
        &drawings::dag("dependency DAG", &nodes, &edges),
        &format!(
            "{}The messages sent {} (at most {MAX_DAG_MESSAGES}) as PCLVis's dependency DAG: a node is what a rank received and then sent on that basis, placed on its rank's row at its time and coloured by the rank's load balance LB (dark: balanced, bright: far from the mean); an edge is a message, coloured by its latency L (bright: slow). Slow edges into a node delay everything after it.",
            if slow_found {
                ""
            } else {
                "latency_trend() found no slow period in this run, so there is none to show: this is how the run's first messages depend on each other, for comparison with a run that has one. "
            },
            between(from, to)
        ),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_two_ends_of_a_span_never_read_alike() {
        assert_eq!(super::between(2e6, 3.5e6), "between 2 and 3.5 ms");
        assert_eq!(super::between(254_100.0, 254_900.0), "between 254.1 and 254.9 µs");
        assert_eq!(super::between(254_100.0, 254_150.0), "between 254.100 and 254.150 µs");
        assert_eq!(super::between(1_000_000.0, 1_400_000.0), "between 1 and 1.4 ms");
    }
}
