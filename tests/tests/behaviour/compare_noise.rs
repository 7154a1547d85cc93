//! `compare_runs` raises no false alarm: pairs of generated runs that differ only in their
//! noise seed, over several shapes and sizes, compared by region, rank and iteration. The
//! function tests each quantity at 1 % divided by the number it tests (Bonferroni): the share
//! of the tested keys it names between runs that differ by noise alone must stay below 1 %.
//! The share of comparisons that name anything is printed beside it: 1 % where iterations'
//! noise is independent, more where ranks drift for several steps between collectives (the
//! noise of successive iterations is then correlated; docs/departures.md). A planted change
//! (one rank computing twice as long from an iteration on) is still the first row.

use commdb_tests::rows;

/// The shapes: (spec without seed, ranks).
const SHAPES: &[&str] = &[
    "ranks=16,ranks-per-node=4,iterations=60",
    "ranks=32,ranks-per-node=8,iterations=60",
    "ranks=32,ranks-per-node=8,iterations=60,collective-every=10,bytes=8192,eager-limit=1024",
    "ranks=16,ranks-per-node=4,iterations=40,pattern=ring,uninstrumented-compute,no-enclosing-region",
    "ranks=12,ranks-per-node=4,iterations=40,pattern=master-worker",
];

/// Seeds of the pairs: each shape is compared between seeds (1, 2), (3, 4), ...
const PAIRS: u64 = 4;

#[test]
fn runs_that_differ_only_in_noise_name_nothing_beyond_the_stated_level() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (mut tested, mut named, mut comparisons, mut naming) = (0usize, 0usize, 0usize, 0usize);
    let mut named_rows = Vec::new();
    for shape in SHAPES {
        for pair in 0..PAIRS {
            let mut s = commdb_tests::session();
            let (sa, sb) = (2 * pair + 1, 2 * pair + 2);
            runtime.block_on(s.collect(&format!("ATTACH 'generate:{shape},seed={sa}' AS a"))).unwrap();
            runtime.block_on(s.collect(&format!("ATTACH 'generate:{shape},seed={sb}' AS b"))).unwrap();
            for by in ["region", "rank", "iteration"] {
                let sql = format!(
                    "SELECT key, metric, z, significant FROM compare_runs(a => 'a', b => 'b', by => '{by}') WHERE z IS NOT NULL"
                );
                let got = rows(&runtime.block_on(s.collect(&sql)).unwrap()).unwrap();
                let flagged: Vec<&Vec<String>> = got.iter().filter(|r| r[3] == "true").collect();
                tested += got.len();
                named += flagged.len();
                comparisons += 1;
                if !flagged.is_empty() {
                    naming += 1;
                    named_rows.push(format!("{shape} seeds {sa},{sb} by {by}: {flagged:?}"));
                }
            }
        }
    }
    eprintln!(
        "compare_runs on noise: {comparisons} comparisons of {} pairs, {tested} rows tested, {named} named, {naming} comparisons naming any",
        SHAPES.len() as u64 * PAIRS
    );
    for r in &named_rows {
        eprintln!("  named: {r}");
    }
    assert!(SHAPES.len() as u64 * PAIRS >= 20, "at least 20 pairs");
    // The stated level, 1 %, over the keys tested; and at most one comparison in 20 naming any.
    assert!(named as f64 <= 0.01 * tested as f64, "{named} of {tested} rows named");
    assert!(naming * 20 <= comparisons, "{naming} of {comparisons} comparisons named something");
}

#[test]
fn a_planted_change_is_still_the_first_row() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut s = commdb_tests::session();
    let shape = "ranks=32,ranks-per-node=8,iterations=60,collective-every=10,bytes=8192,eager-limit=1024";
    runtime.block_on(s.collect(&format!("ATTACH 'generate:{shape},seed=1' AS a"))).unwrap();
    runtime.block_on(s.collect(&format!("ATTACH 'generate:{shape},seed=1,slow-rank=5:2:40' AS b"))).unwrap();
    let mut first = |by: &str| {
        let sql =
            format!("SELECT key, metric, significant FROM compare_runs(a => 'a', b => 'b', by => '{by}') LIMIT 1");
        rows(&runtime.block_on(s.collect(&sql)).unwrap()).unwrap().remove(0)
    };
    assert_eq!(first("rank"), ["5", "compute_ns", "true"]);
    assert_eq!(first("region"), ["compute", "exclusive_ns", "true"]);
    // Without a collective every step the slowed rank's delay grows step by step (0.07 ms in
    // iteration 40, 0.16 ms in 41): the first iteration named is 40 or the next.
    let sql = "SELECT min(CAST(key AS BIGINT)) FROM compare_runs(a => 'a', b => 'b', by => 'iteration') WHERE significant AND metric = 'duration_ns'";
    let got = rows(&runtime.block_on(s.collect(sql)).unwrap()).unwrap();
    assert!(got == vec![vec!["40".to_string()]] || got == vec![vec!["41".to_string()]], "{got:?}");
}
