//! Clock correction checked against generated traces whose clocks are known: every non-master
//! rank's clock reads true + offset + drift_ppm * 1e-6 * true, sync sessions of 20 ping-pongs
//! with exactly two delayed samples each. The recovered models, the dropped samples, the spline
//! through several sessions and the violations before and after correction are compared with
//! that truth.

use std::collections::BTreeMap;

use arrow::array::AsArray;
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};
use commdb_catalog::clock::Correction;
use commdb_catalog::clock::model::{Fit, condense, fit_all, fit_rank};
use commdb_catalog::generate::{GeneratorConfig, Pattern, generate};
use commdb_catalog::trace::{ClockSample, Warnings};

fn skewed(sync_sessions: u32) -> commdb_catalog::generate::Generated {
    let cfg = GeneratorConfig {
        ranks: 16,
        ranks_per_node: 4,
        pattern: Pattern::Stencil2d,
        iterations: 10,
        compute_ns: 1_000_000_000,
        clock_skew: true,
        sync_sessions,
        ..GeneratorConfig::default()
    };
    generate(&cfg).unwrap()
}

#[test]
fn recovers_injected_offsets_and_drifts() {
    let g = skewed(0);
    let mut w = Warnings::default();
    let models = fit_all(&g.trace.clock_sync, &mut w);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(models.len(), 15, "every rank but the master has samples");
    for m in &models {
        let truth = g.truth.clocks[m.rank as usize];
        let Fit::Linear { slope, offset } = m.fit else { panic!("rank {}: {:?}", m.rank, m.fit) };
        // master = (local - off) / (1 + d): slope = 1 / (1 + d), offset = -off / (1 + d).
        let drift_ppm = (1.0 / slope - 1.0) * 1e6;
        let offset_ns = -offset / slope;
        let drift_error = (drift_ppm - truth.drift_ppm).abs();
        assert!(
            drift_error <= 0.01 * truth.drift_ppm.abs().max(1.0),
            "rank {}: drift {drift_ppm:.4} ppm vs injected {:.4} ppm",
            m.rank,
            truth.drift_ppm
        );
        // The offset is known to the path asymmetry of a round trip: +-100 ns per sample.
        assert!(
            (offset_ns - truth.offset_ns).abs() < 50.0,
            "rank {}: offset {offset_ns:.1} ns vs injected {:.1} ns",
            m.rank,
            truth.offset_ns
        );
        assert!(m.rms_residual_ns < 100.0, "rank {}: rms {}", m.rank, m.rms_residual_ns);
        assert_eq!((m.samples_used, m.samples_dropped), (36, 4));
    }
}

#[test]
fn the_dropped_tenth_are_exactly_the_delayed_samples() {
    let g = skewed(2);
    let mut sessions: BTreeMap<(i32, i32), Vec<ClockSample>> = BTreeMap::new();
    for s in &g.trace.clock_sync {
        sessions.entry((s.rank, s.session)).or_default().push(*s);
    }
    assert_eq!(sessions.len(), 15 * 4);
    let mut w = Warnings::default();
    for ((rank, session), samples) in &sessions {
        let c = condense(*session, samples, &mut w).unwrap();
        let delayed: Vec<usize> = (0..samples.len()).filter(|&i| samples[i].round_trip.unwrap() >= 7_000).collect();
        assert_eq!(delayed.len(), 2);
        assert_eq!(c.dropped, delayed, "rank {rank} session {session}");
    }
}

#[test]
fn spline_passes_through_condensed_points_with_a_continuous_positive_derivative() {
    let g = skewed(3);
    let mut w = Warnings::default();
    for m in fit_all(&g.trace.clock_sync, &mut w) {
        let Fit::Spline(s) = &m.fit else { panic!("rank {}: {:?}", m.rank, m.fit) };
        assert_eq!(s.len(), 5, "start, three during the run, end");
        let rank_samples: Vec<ClockSample> = g.trace.clock_sync.iter().filter(|x| x.rank == m.rank).copied().collect();
        for session in 0..5 {
            let in_session: Vec<ClockSample> = rank_samples.iter().filter(|x| x.session == session).copied().collect();
            let (x, y) = condense(session, &in_session, &mut w).unwrap().point();
            assert!((s.eval(x) - y).abs() <= 1.0, "rank {} session {session}", m.rank);
            let (left, right) = (s.derivative(x - 0.5), s.derivative(x + 0.5));
            assert!((left - right).abs() < 1e-9, "derivative jumps at rank {} session {session}", m.rank);
        }
        let (first, last) = (s.points().next().unwrap().0, s.points().last().unwrap().0);
        for k in 0..=1000 {
            let x = first - 1e6 + (last - first + 2e6) * f64::from(k) / 1000.0;
            assert!(s.derivative(x) > 0.0, "rank {} at {x}", m.rank);
        }
    }
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn spline_beats_the_line_on_a_non_linear_drift() {
    // A clock whose rate wanders: local = t + 30 us + 15 ppm * t + 8 us * sin(t / 0.3 s).
    let local_of = |t: f64| t + 30_000.0 + 15e-6 * t + 8_000.0 * (t / 3e8).sin();
    let sessions = [0.0, 0.5e9, 1.0e9, 1.5e9, 2.0e9];
    let mut samples = Vec::new();
    for (k, &start) in sessions.iter().enumerate() {
        for j in 0..20 {
            let t = start + f64::from(j) * 10_000.0;
            samples.push(ClockSample {
                rank: 1,
                session: k as i32,
                local_ts: local_of(t).round() as i64,
                master_ts: t.round() as i64,
                round_trip: Some(2_000),
                std_dev_ns: None,
                exact: None,
            });
        }
    }
    let mut w = Warnings::default();
    let spline = fit_rank(1, &samples, &mut w);
    let two_ends: Vec<ClockSample> = samples.iter().filter(|s| s.session == 0 || s.session == 4).copied().collect();
    let line = fit_rank(1, &two_ends, &mut w);
    assert_eq!((spline.fit.method(), line.fit.method()), ("spline", "linear"));
    let error = |fit: &Fit| {
        let mut worst: f64 = 0.0;
        for k in 0..=400 {
            let t = 2.0e9 * f64::from(k) / 400.0;
            worst = worst.max((fit.master(local_of(t)) - t).abs());
        }
        worst
    };
    let (e_spline, e_line) = (error(&spline.fit), error(&line.fit));
    assert!(e_spline * 3.0 < e_line, "spline {e_spline:.0} ns, line {e_line:.0} ns");
}

async fn violations(raw: commdb_catalog::RawTrace, correction: Correction) -> (String, i64, i64) {
    let trace = raw.build_with(correction).unwrap();
    let mut s = commdb_tests::session();
    s.attach(trace, Some("t")).unwrap();
    let b = s
        .collect(
            "SELECT clock_correction, clock_violations, (SELECT count(*) FROM clock_violations('t.messages')) FROM t.trace_info",
        )
        .await
        .unwrap();
    (
        b[0].column(0).as_string::<i32>().value(0).to_string(),
        b[0].column(1).as_primitive::<Int64Type>().value(0),
        b[0].column(2).as_primitive::<Int64Type>().value(0),
    )
}

#[tokio::test]
async fn correction_removes_the_violations() {
    let g = skewed(0);
    let (label, before, listed) = violations(g.trace.clone(), Correction::Off).await;
    assert_eq!(label, "off");
    assert_eq!(before, listed);
    assert!(before > 100, "skewed clocks make many messages run backwards: {before}");
    assert_eq!(violations(g.trace, Correction::Model).await, ("model".to_string(), 0, 0));
}

#[tokio::test]
async fn clc_removes_what_the_model_leaves_and_keeps_order() {
    // Only the first session: an offset model that ignores drift (up to 20 ppm over 10 s).
    let mut raw = skewed(0).trace;
    raw.clock_sync.retain(|s| s.session == 0);
    let (_, left, _) = violations(raw.clone(), Correction::Model).await;
    assert!(left > 0, "an offset-only model leaves violations");
    let model = raw.clone().build_with(Correction::Model).unwrap();
    let recorded = raw.clone().build_with(Correction::Off).unwrap();
    let clc = raw.build_with(Correction::Clc).unwrap();
    let column = |t: &commdb_catalog::Trace, name: &str| -> Vec<i64> {
        t.table("events")
            .unwrap()
            .iter()
            .flat_map(|b| b.column_by_name(name).unwrap().as_primitive::<Int64Type>().values().to_vec())
            .collect()
    };
    assert_eq!(column(&clc, "ts_local"), column(&recorded, "ts"), "ts_local keeps every recorded time, master's too");
    let info = &clc.table("trace_info").unwrap()[0];
    let label = info.column_by_name("clock_correction").unwrap().as_string::<i32>().value(0).to_string();
    let left = info.column_by_name("clock_violations").unwrap().as_primitive::<Int64Type>().value(0);
    assert_eq!((label.as_str(), left), ("clc", 0));
    // The phases: a first derivation, the logical clock, then the derivation on corrected times.
    let phases: Vec<&str> = clc.phases().iter().map(|p| p.name).collect();
    let clock = phases.iter().position(|&p| p == "controlled logical clock").expect("the clc phase is recorded");
    let walks: Vec<usize> = (0..phases.len()).filter(|&i| phases[i] == "stream walk").collect();
    assert!(walks.len() == 2 && walks[0] < clock && clock < walks[1], "{phases:?}");
    let warnings = clc.warnings().unwrap();
    assert!(warnings.iter().all(|(code, _, _)| !code.starts_with("clc_")), "{warnings:?}");
    // Per stream: never earlier than the model, order unchanged, intervals at least 0.99 of theirs.
    let events = |t: &commdb_catalog::Trace| {
        let mut out: Vec<(i32, i64)> = Vec::new();
        for b in &t.table("events").unwrap() {
            let rank = b.column(0).as_primitive::<Int32Type>();
            let ts = b.column(3).as_primitive::<Int64Type>();
            out.extend((0..b.num_rows()).map(|i| (rank.value(i), ts.value(i))));
        }
        out
    };
    let (m, c) = (events(&model), events(&clc));
    assert_eq!(m.len(), c.len());
    let mut moved = 0;
    for i in 0..m.len() {
        assert!(c[i].1 >= m[i].1, "event {i} moved backwards");
        moved += usize::from(c[i].1 != m[i].1);
        if i > 0 && m[i].0 == m[i - 1].0 {
            let (dm, dc) = (m[i].1 - m[i - 1].1, c[i].1 - c[i - 1].1);
            assert!(dc as f64 >= 0.99 * dm as f64 - 1.0, "event {i}: interval {dm} became {dc}");
        }
    }
    assert!(moved > 0);
}

#[test]
fn clock_model_sql_gives_the_injected_drifts() {
    // What a user reads from clock_model(): the slope of every rank against the drift the
    // generator injected, and the master (rank 0, no samples) as 'none'.
    let g = skewed(0);
    let trace = g.trace.clone().build().unwrap();
    let mut s = commdb_tests::session();
    s.attach(trace, Some("t")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let b =
        rt.block_on(s.collect("SELECT rank, slope, method FROM clock_model('t.clock_sync') ORDER BY rank")).unwrap();
    let b = &b[0];
    assert_eq!(b.num_rows(), 16, "the master is listed too");
    assert_eq!(b.column(2).as_string::<i32>().value(0), "none");
    for rank in 1..16usize {
        let truth = g.truth.clocks[rank];
        let slope = b.column(1).as_primitive::<Float64Type>().value(rank);
        let drift_ppm = (1.0 / slope - 1.0) * 1e6;
        assert!(
            (drift_ppm - truth.drift_ppm).abs() <= 0.01 * truth.drift_ppm.abs().max(1.0),
            "rank {rank}: {drift_ppm} ppm against {} injected",
            truth.drift_ppm
        );
        assert_eq!(b.column(2).as_string::<i32>().value(rank), "linear");
    }
}
