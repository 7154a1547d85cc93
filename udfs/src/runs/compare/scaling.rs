//! `scaling(runs => 'r64,r128,r256', mode => 'strong' | 'weak')`: runs of one code at several
//! rank counts, region by region, as Pipit's multi-run analysis compares them: per region and
//! run its time over the ranks and per rank, its share of the run, its parallel efficiency
//! against the run with the fewest ranks (strong scaling, a fixed problem: the smallest run's
//! time times its ranks over this run's; weak scaling, fixed work per rank: the smallest run's
//! time per rank over this run's), its growth (time per rank over the smallest run's), and
//! whether it is communication that grows faster than the computation (an MPI region whose
//! time per rank grows, and more than all non-MPI time per rank does in the same run). A region's time is the
//! exclusive time of its calls. The function is a view over the runs' calls and ranks.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::plan_err;
use datafusion::error::Result;

use commdb_analysis::args::{Args, arguments};
use commdb_analysis::declare::{Function, Make, Output, boolean, col, float64, int64, text, text_view};
use commdb_analysis::params::{ParamDefault, Type, param};
use commdb_analysis::relation::{quote, resolve};

pub const SCALING: Function = Function {
    name: "scaling",
    params: &[
        param("runs", Type::Text, ParamDefault::Required, "the schemas of the runs, comma-separated ('r64,r128,r256')"),
        param(
            "mode",
            Type::Choice(&["strong", "weak"]),
            ParamDefault::Text("strong"),
            "strong: the same problem on more ranks; weak: the same work per rank",
        ),
    ],
    output: Output::Columns(&[
        col("region", text_view, "the region").never_null(),
        col("run", text, "the run's schema").never_null(),
        col("ranks", int64, "its ranks").never_null(),
        col("time_ns", float64, "exclusive time in the region over the ranks"),
        col("time_per_rank_ns", float64, "time_ns / ranks"),
        col("share", float64, "its share of the run's exclusive time"),
        col("efficiency", float64, "parallel efficiency against the run with the fewest ranks (1: perfect scaling)"),
        col("growth", float64, "time per rank over the smallest run's"),
        col(
            "grows_faster_than_compute",
            boolean,
            "an MPI region whose time per rank grows, and more than the run's non-MPI time per rank",
        ),
    ]),
    description: "runs of one code at several rank counts, region by region: time, share, parallel efficiency (strong or weak scaling) against the smallest run, growth, and the communication that grows faster than the computation",
    make: Make::Table(scaling),
};

arguments! {
    struct ScalingArgs(SCALING) {
        runs: String,
        mode: String,
    }
}

fn scaling(a: &Args) -> Result<Arc<dyn TableProvider>> {
    let ScalingArgs { runs, mode } = ScalingArgs::read(a)?;
    let runs: Vec<&str> = runs.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
    if runs.len() < 2 {
        return plan_err!(
            "scaling: runs must name at least two attached runs, comma-separated ('r64,r128'), got {}",
            runs.len()
        );
    }
    for run in &runs {
        if resolve(a.session, a.function, &format!("{}.calls", quote(run))).is_err() {
            return plan_err!("scaling: no trace is attached as '{run}' (ATTACH 'trace' AS {run})");
        }
    }
    Ok(Arc::new(commdb_analysis::views::sql_view(a.session, a.function, query(&runs, mode == "weak"))?))
}

/// The query behind the view over `runs`.
fn query(runs: &[&str], weak: bool) -> String {
    let per: Vec<String> = runs
        .iter()
        .map(|run| {
            let (q, name) = (quote(run), run.replace('\'', "''"));
            format!(
                "SELECT '{name}' AS run, k.ranks, CAST(c.region AS VARCHAR) AS region, CAST(sum(c.exclusive) AS DOUBLE) AS t
                 FROM {q}.calls c CROSS JOIN (SELECT count(*) AS ranks FROM {q}.ranks) k GROUP BY c.region, k.ranks"
            )
        })
        .collect();
    let efficiency = if weak { "b.t1 / (per.t / per.ranks)" } else { "(b.t1 * b.p1) / per.t" };
    format!(
        "WITH per AS ({}),
smallest AS (SELECT run FROM per ORDER BY ranks, run LIMIT 1),
b AS (SELECT region, t / ranks AS t1, ranks AS p1 FROM per WHERE run = (SELECT run FROM smallest)),
total AS (SELECT run, sum(t) AS total FROM per GROUP BY run),
compute AS (SELECT run, sum(CASE WHEN region IS NULL OR NOT starts_with(region, 'MPI_') THEN t ELSE 0 END) / max(ranks) AS c
            FROM per GROUP BY run),
compute1 AS (SELECT c AS c1 FROM compute WHERE run = (SELECT run FROM smallest))
SELECT per.region, per.run, per.ranks, per.t AS time_ns, per.t / per.ranks AS time_per_rank_ns,
       per.t / nullif(total.total, 0) AS share, {efficiency} AS efficiency, (per.t / per.ranks) / nullif(b.t1, 0) AS growth,
       coalesce(starts_with(per.region, 'MPI_'), false) AND (per.t / per.ranks) / nullif(b.t1, 0) > 1
         AND (per.t / per.ranks) / nullif(b.t1, 0) > compute.c / nullif(compute1.c1, 0) AS grows_faster_than_compute
FROM per JOIN total ON total.run = per.run LEFT JOIN b ON b.region IS NOT DISTINCT FROM per.region
JOIN compute ON compute.run = per.run CROSS JOIN compute1
ORDER BY per.region, per.ranks, per.run",
        per.join("\nUNION ALL\n")
    )
}
