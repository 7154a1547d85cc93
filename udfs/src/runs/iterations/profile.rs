//! `iteration_profile([rel => 'calls'], k => 3.5, marker => ...)`: per iteration of the run
//! (`iterations`), its duration from the first rank's start to the last rank's end, the spread
//! of its computation over the ranks, its waiting, and whether it is an outlier: longer than the
//! median iteration by more than k robust standard deviations (1.4826 times the median absolute
//! deviation over the iterations; with k = 3.5 this is Iglewicz and Hoaglin's modified z-score
//! rule). An outlier gets the rank that made it long, the one whose time in computation and MPI
//! (waiting left out) exceeds its own median over the iterations the most, and that rank's
//! region whose exclusive time in the iteration exceeds its mean per iteration the most (the
//! time no call inside the iteration covers counts as a region, `(no call)`: computation left
//! uninstrumented grows there). Ranks
//! that do not step together (two coupled applications, whose iterations `iterations` finds
//! from each rank's own calls) are profiled apart: a step group is the ranks whose iterations
//! end with the same region as many times, and each iteration, median and outlier is of one
//! group (most runs have one). The function is a view: a query over `iterations` and the calls.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int64, text_view};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::Relation;

pub const ITERATION_PROFILE: Function = Function {
    name: "iteration_profile",
    params: &[
        param("rel", Type::Relation, ParamDefault::Text("calls"), "the calls of the run"),
        param(
            "k",
            Type::Number { min: 0.0 },
            ParamDefault::Number(3.5),
            "an outlier is longer than the median iteration by more than k robust standard deviations",
        ),
        param(
            "marker",
            Type::Text,
            ParamDefault::Chosen("as iterations finds it"),
            "the region whose calls end an iteration",
        ),
    ],
    output: Output::Columns(&[
        col("iteration", int64, "the iteration, from 0").never_null(),
        col(
            "step_group",
            text_view,
            "the ranks that step together: whose iterations end with the same region as many times ('MPI_Allreduce x60'); most runs have one",
        )
        .never_null(),
        col("start_ts", int64, "when the first rank began it"),
        col("end_ts", int64, "when the last rank ended it"),
        col("duration_ns", int64, "end_ts - start_ts"),
        col("ranks", int64, "ranks that have the iteration").never_null(),
        col("mean_rank_ns", float64, "mean duration of a rank's iteration"),
        col("compute_spread_ns", int64, "most minus least computation of a rank in it (its imbalance)"),
        col("waiting_ns", int64, "waiting over its ranks"),
        col("outlier", boolean, "longer than the median iteration by more than k robust standard deviations"),
        col("slow_rank", int64, "an outlier's rank whose computation and MPI time exceeds its own median the most"),
        col(
            "slow_region",
            text_view,
            "that rank's region whose exclusive time exceeds its mean per iteration the most ('(no call)': the time no call in the iteration covers, uninstrumented computation)",
        ),
        col("excess_ns", float64, "that rank's computation and MPI time beyond its median"),
    ]),
    description: "per iteration: duration, spread of the computation over the ranks, waiting, and whether it is an outlier (longer than the median by more than k robust standard deviations); an outlier gets the rank and the region that made it long",
    make: Make::Table(iteration_profile),
};

arguments! {
    struct ProfileArgs(ITERATION_PROFILE) {
        rel: Relation,
        k: f64,
        marker: Option<String>,
    }
}

fn iteration_profile(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let ProfileArgs { rel, k, marker } = ProfileArgs::read(a)?;
    let marker = super::named_marker(a.function, marker)?;
    rel.columns(a.function, &["rank", "region", "start_ts", "end_ts", "exclusive"])?;
    let sql = query(&rel.reference.to_quoted_string(), k, marker.as_deref());
    let view = commdb_analysis::views::sql_view(a.session, a.function, sql)?;
    // Its CTEs read `iterations` in many places: computed once.
    let view = commdb_analysis::shared::share_analyses(&view)?;
    Ok(Arc::new(commdb_analysis::ordered::OrderedView::new(view, &["iteration", "step_group"])))
}

/// What `slow_region` names when the time no call inside the iteration covers grew the most
/// (computation left uninstrumented, or an enclosing region's own time).
pub const UNCOVERED: &str = "(no call)";

/// The query behind the view, over the calls `calls` (quoted as SQL names them).
fn query(calls: &str, k: f64, marker: Option<&str>) -> String {
    let text = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let marker = marker.map_or(String::new(), |m| format!(", marker => {}", text(m)));
    let rel = text(calls);
    format!(
        "WITH it AS (
  SELECT iteration, rank, start_ts, end_ts, duration_ns, compute_ns, mpi_ns, waiting_ns,
         CAST(step_group AS VARCHAR) AS grp,
         CAST(compute_ns + mpi_ns AS DOUBLE) - median(compute_ns + mpi_ns) OVER (PARTITION BY rank) AS x,
         count(*) OVER (PARTITION BY rank) AS n, min(start_ts) OVER (PARTITION BY rank) AS rs,
         max(end_ts) OVER (PARTITION BY rank) AS re
  FROM iterations({rel}{marker})),
per AS (
  SELECT grp, iteration, min(start_ts) AS start_ts, max(end_ts) AS end_ts, max(end_ts) - min(start_ts) AS dur,
         count(*) AS ranks, avg(duration_ns) AS mean_rank_ns, max(compute_ns) - min(compute_ns) AS compute_spread_ns,
         CAST(sum(waiting_ns) AS BIGINT) AS waiting_ns
  FROM it GROUP BY grp, iteration),
typical AS (SELECT per.*, median(dur) OVER (PARTITION BY grp) AS m FROM per),
flagged AS (
  SELECT typical.*, dur > m + {k} * 1.4826 * median(abs(dur - m)) OVER (PARTITION BY grp) AS outlier FROM typical),
worst AS (
  SELECT it.grp, it.iteration, first_value(it.rank ORDER BY it.x DESC, it.rank) AS rank, max(it.x) AS x,
         first_value(it.start_ts ORDER BY it.x DESC, it.rank) AS s, first_value(it.end_ts ORDER BY it.x DESC, it.rank) AS e,
         first_value(it.n ORDER BY it.x DESC, it.rank) AS n, first_value(it.rs ORDER BY it.x DESC, it.rank) AS rs,
         first_value(it.re ORDER BY it.x DESC, it.rank) AS re
  FROM it JOIN flagged f ON f.grp = it.grp AND f.iteration = it.iteration AND f.outlier
  GROUP BY it.grp, it.iteration),
per_region AS (
  SELECT c.rank, c.region, CAST(sum(c.exclusive) AS DOUBLE) / max(wr.n) AS mean_ns
  FROM {calls} c JOIN (SELECT DISTINCT rank, n FROM worst) wr ON wr.rank = c.rank
  GROUP BY c.rank, c.region),
uncovered AS (
  SELECT sp.rank, (CAST(sp.re - sp.rs AS DOUBLE) - CAST(coalesce(sum(c.exclusive), 0) AS DOUBLE)) / sp.n AS mean_ns
  FROM (SELECT DISTINCT rank, n, rs, re FROM worst) sp
  LEFT JOIN {calls} c ON c.rank = sp.rank AND c.start_ts >= sp.rs AND c.end_ts <= sp.re
  GROUP BY sp.rank, sp.rs, sp.re, sp.n),
in_outlier AS (
  SELECT w.grp, w.iteration, c.region, CAST(sum(c.exclusive) AS DOUBLE) - max(coalesce(p.mean_ns, 0)) AS x
  FROM worst w JOIN {calls} c ON c.rank = w.rank AND c.start_ts >= w.s AND c.end_ts <= w.e
  LEFT JOIN per_region p ON p.rank = c.rank AND p.region IS NOT DISTINCT FROM c.region
  GROUP BY w.grp, w.iteration, c.region
  UNION ALL
  SELECT w.grp, w.iteration, '{UNCOVERED}',
         CAST(w.e - w.s AS DOUBLE) - CAST(coalesce(sum(c.exclusive), 0) AS DOUBLE) - max(u.mean_ns)
  FROM worst w JOIN uncovered u ON u.rank = w.rank
  LEFT JOIN {calls} c ON c.rank = w.rank AND c.start_ts >= w.s AND c.end_ts <= w.e
  GROUP BY w.grp, w.iteration, w.s, w.e),
region AS (
  SELECT grp, iteration, first_value(region ORDER BY x DESC, region) AS region FROM in_outlier GROUP BY grp, iteration)
SELECT f.iteration, f.grp AS step_group, f.start_ts, f.end_ts, f.dur AS duration_ns, f.ranks,
       f.mean_rank_ns, f.compute_spread_ns, f.waiting_ns, f.outlier, w.rank AS slow_rank,
       CAST(r.region AS VARCHAR) AS slow_region, w.x AS excess_ns
FROM flagged f LEFT JOIN worst w ON w.grp = f.grp AND w.iteration = f.iteration
LEFT JOIN region r ON r.grp = f.grp AND r.iteration = f.iteration
ORDER BY f.iteration, f.grp"
    )
}
