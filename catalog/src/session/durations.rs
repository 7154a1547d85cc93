//! Durations written as text in SQL expressions, as the analyses' arguments take them:
//! `WHERE send_ts > '8ms'`, `start_ts BETWEEN '1 s' AND '1.5 s'`, `end_ts - '250us'`. An
//! analyzer rule, run before DataFusion's type coercion (which would cast '8ms' to an integer
//! and fail), turns a string literal that is a number with a unit (ns, us, ms, s, min) into
//! its nanoseconds where the other operand is a time column of the model: a column whose name
//! says it holds nanoseconds (`model::is_time_column`: ts, duration, exclusive, *_ts, *_ns,
//! *_start, *_end). Comparisons, BETWEEN and IN lists are rewritten in the plan; + and - in
//! the statement before it is planned (`rewrite_arithmetic`: the planner types a projection's
//! `start_ts + '1us'` before any analyzer rule runs). A literal without a unit, or next to
//! another column, keeps DataFusion's meaning.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ExprSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Between, InList};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

use crate::model::is_time_column;

/// A duration literal in nanoseconds: a number with a unit, `'2ms'`, `'1.5 s'`, `'250us'`,
/// `'40ns'` (units ns, us, ms, s, min). None when the text is not one.
pub fn duration_ns(text: &str) -> Option<i64> {
    read_duration(text).ok()
}

/// The largest duration a literal may give: 9e18 ns (285 years), below the 2^63 of a time.
const MAX_NS: f64 = 9.0e18;

/// A duration literal read: its nanoseconds, or why the text is none. `Err(None)`: the text
/// does not look like a duration at all (no unit: `'8'`, `'abc'`); `Err(Some(why))`: it does
/// (a unit, or a number followed by letters) but cannot be one.
pub fn read_duration(text: &str) -> std::result::Result<i64, Option<String>> {
    let t = text.trim();
    if !t.chars().any(char::is_alphabetic) {
        return Err(None);
    }
    // The unit is the letters the text ends with (the number may hold an exponent: 1e3 ms).
    let split = t.char_indices().rev().take_while(|(_, c)| c.is_alphabetic()).last().map_or(t.len(), |(i, _)| i);
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        _ => {
            // A number followed by other letters, or a unit followed by more text.
            let leading_number = t.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'));
            let unit_first =
                ["ns", "us", "µs", "ms", "s", "min"].iter().any(|u| unit.starts_with(u) || t.starts_with(u));
            return Err((leading_number || unit_first).then(|| {
                format!("'{t}' is not a duration: expected a number and one unit (ns, us, ms, s or min), such as '2ms' or '1.5 s'")
            }));
        }
    };
    let Ok(v) = num.trim().parse::<f64>() else {
        return Err(Some(format!(
            "'{t}' is not a duration: {} before the unit {unit}, such as '2{unit}'",
            if num.trim().is_empty() { "expected a number" } else { "expected one number" }
        )));
    };
    let ns = (v * scale).round();
    if !ns.is_finite() || !(-MAX_NS..=MAX_NS).contains(&ns) {
        return Err(Some(format!("'{t}' is out of range: a duration is at most 9e18 ns (about 285 years)")));
    }
    Ok(ns as i64)
}

/// The analyzer rule.
#[derive(Debug, Default)]
pub struct DurationLiterals;

impl AnalyzerRule for DurationLiterals {
    fn name(&self) -> &str {
        "commdb_duration_literals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| super::checked::rewrite_expressions(p, &rewrite)).map(|t| t.data)
    }
}

/// Whether `e` is a time column of the model (under casts and aliases).
fn is_time(e: &Expr, schema: &DFSchema) -> bool {
    match e {
        Expr::Column(c) => {
            is_time_column(&c.name)
                && schema.field_from_column(c).is_ok_and(|f| f.data_type().is_integer() || f.data_type().is_null())
        }
        Expr::Cast(c) => is_time(&c.expr, schema),
        Expr::TryCast(c) => is_time(&c.expr, schema),
        Expr::Alias(a) => is_time(&a.expr, schema),
        _ => false,
    }
}

/// The nanoseconds of `e` when it is a string literal with a unit.
fn duration(e: &Expr) -> Option<i64> {
    text(e).and_then(duration_ns)
}

/// The text of a string literal.
fn text(e: &Expr) -> Option<&str> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => Some(s),
        _ => None,
    }
}

/// An error when `e` is a string literal that looks like a duration but is none (beside a time
/// column, where DataFusion would only say that it cannot cast it).
fn refuse_bad_duration(e: &Expr) -> Result<()> {
    match text(e).map(read_duration) {
        Some(Err(Some(why))) => datafusion::common::plan_err!("{why}"),
        _ => Ok(()),
    }
}

fn nanoseconds(ns: i64) -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(ns)), None)
}

/// `e` with its duration literals next to a time column as nanoseconds.
fn rewrite(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match &e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if applies(*op) => {
            if is_time(left, schema) {
                refuse_bad_duration(right)?;
            }
            if is_time(right, schema) {
                refuse_bad_duration(left)?;
            }
            if let Some(ns) = duration(right)
                && is_time(left, schema)
            {
                return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    left.clone(),
                    *op,
                    Box::new(nanoseconds(ns)),
                ))));
            }
            if let Some(ns) = duration(left)
                && is_time(right, schema)
            {
                return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(nanoseconds(ns)),
                    *op,
                    right.clone(),
                ))));
            }
            // A duration next to a number that is not a time: say so, rather than fail a cast.
            for (literal, other) in [(right, left), (left, right)] {
                if let (Some(_), Expr::Column(c)) = (duration(literal), other.as_ref())
                    && schema.field_from_column(c).is_ok_and(|f| f.data_type().is_numeric())
                {
                    let text = match literal.as_ref() {
                        Expr::Literal(v, _) => v.to_string(),
                        other => other.to_string(),
                    };
                    return datafusion::common::plan_err!(
                        "'{text}' is a duration, but column '{}' does not hold nanoseconds (time columns are ts, duration, exclusive and those ending in _ts, _ns, _start or _end)",
                        c.name
                    );
                }
            }
            Ok(Transformed::no(e))
        }
        Expr::Between(Between { expr, negated, low, high }) if is_time(expr, schema) => {
            refuse_bad_duration(low)?;
            refuse_bad_duration(high)?;
            let (lo, hi) = (duration(low), duration(high));
            if lo.is_none() && hi.is_none() {
                return Ok(Transformed::no(e));
            }
            Ok(Transformed::yes(Expr::Between(Between::new(
                expr.clone(),
                *negated,
                Box::new(lo.map_or_else(|| low.as_ref().clone(), nanoseconds)),
                Box::new(hi.map_or_else(|| high.as_ref().clone(), nanoseconds)),
            ))))
        }
        Expr::InList(InList { expr, list, negated })
            if is_time(expr, schema) && list.iter().any(|x| duration(x).is_some()) =>
        {
            for x in list {
                refuse_bad_duration(x)?;
            }
            let list = list.iter().map(|x| duration(x).map_or_else(|| x.clone(), nanoseconds)).collect();
            Ok(Transformed::yes(Expr::InList(InList::new(expr.clone(), list, *negated))))
        }
        _ => Ok(Transformed::no(e)),
    }
}

/// The operators a duration literal takes part in: comparisons, + and -.
fn applies(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::Plus
            | Operator::Minus
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// Durations added to or subtracted from a time, rewritten in the statement before it is
/// planned (the planner types `start_ts + '1us'` before any analyzer rule runs, and refuses
/// Int64 + Utf8): the string literal next to a time becomes its nanoseconds. A time is an
/// identifier whose name is a time column's, a sum or difference with a time in it (`send_ts +
/// '1ms' + '1ms'`), or a function that gives a value of its argument's kind applied to a time
/// (`max(send_ts) + '1ms'`). A literal next to a time that looks like a duration but is none
/// (`'ms'`, `'1e30s'`) is an error saying why.
pub fn rewrite_arithmetic<S: sqlparser::ast::VisitMut>(statement: &mut S) -> crate::error::Result<()> {
    use sqlparser::ast::{
        BinaryOperator, Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, Value, VisitorMut,
    };
    struct Rewriter;
    /// Functions whose value is of their first argument's kind (a time of times).
    const SAME_KIND: &[&str] = &[
        "min",
        "max",
        "sum",
        "avg",
        "mean",
        "median",
        "first_value",
        "last_value",
        "any_value",
        "nth_value",
        "lag",
        "lead",
        "coalesce",
        "nullif",
        "greatest",
        "least",
        "abs",
        "approx_median",
        "approx_percentile_cont",
    ];
    fn time_name(e: &SqlExpr) -> bool {
        match e {
            SqlExpr::Identifier(i) => is_time_column(&i.value),
            SqlExpr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| is_time_column(&i.value)),
            SqlExpr::Nested(inner) => time_name(inner),
            SqlExpr::BinaryOp { left, op: BinaryOperator::Plus | BinaryOperator::Minus, right } => {
                time_name(left) || time_name(right)
            }
            SqlExpr::Function(f) => {
                let name = f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_ascii_lowercase());
                let first = match &f.args {
                    FunctionArguments::List(list) => list.args.first(),
                    _ => None,
                };
                name.is_some_and(|n| SAME_KIND.contains(&n.as_str()))
                    && matches!(first, Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(a))) if time_name(a))
            }
            _ => false,
        }
    }
    fn literal(e: &SqlExpr) -> Option<&str> {
        match e {
            SqlExpr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }
    impl VisitorMut for Rewriter {
        type Break = String;
        fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> std::ops::ControlFlow<String> {
            if let SqlExpr::BinaryOp { left, op: BinaryOperator::Plus | BinaryOperator::Minus, right } = expr {
                // The nanoseconds of `lit` when it is a duration beside the time `other`.
                let read = |lit: &SqlExpr, other: &SqlExpr| -> std::result::Result<Option<i64>, String> {
                    match literal(lit) {
                        Some(text) if time_name(other) => match read_duration(text) {
                            Ok(ns) => Ok(Some(ns)),
                            Err(Some(why)) => Err(why),
                            Err(None) => Ok(None),
                        },
                        _ => Ok(None),
                    }
                };
                let number = |ns: i64| SqlExpr::value(Value::Number(ns.to_string(), false));
                match read(right, left) {
                    Ok(Some(ns)) => **right = number(ns),
                    Ok(None) => match read(left, right) {
                        Ok(Some(ns)) => **left = number(ns),
                        Ok(None) => {}
                        Err(why) => return std::ops::ControlFlow::Break(why),
                    },
                    Err(why) => return std::ops::ControlFlow::Break(why),
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    match statement.visit(&mut Rewriter) {
        std::ops::ControlFlow::Break(why) => Err(crate::error::Error::argument(why)),
        std::ops::ControlFlow::Continue(()) => Ok(()),
    }
}

/// Install the rule before the analyzer's own (type coercion would turn '8ms' into a failing
/// cast) in the analyzer of `state`.
pub fn install_first(analyzer: &mut datafusion::optimizer::Analyzer) {
    analyzer.rules.insert(0, Arc::new(DurationLiterals));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_nanoseconds() {
        assert_eq!(duration_ns("8ms"), Some(8_000_000));
        assert_eq!(duration_ns(" 1.5 s "), Some(1_500_000_000));
        assert_eq!(duration_ns("250us"), Some(250_000));
        assert_eq!(duration_ns("40ns"), Some(40));
        assert_eq!(duration_ns("2min"), Some(120_000_000_000));
        assert_eq!(duration_ns("1e3 us"), Some(1_000_000));
        assert_eq!(duration_ns("8"), None);
        assert_eq!(duration_ns("8 parsecs"), None);
        // Texts that look like durations but are none say why.
        assert_eq!(read_duration("8"), Err(None));
        assert_eq!(read_duration("abc"), Err(None));
        for (text, why) in [
            ("9223372035s", "out of range"),
            ("1e30s", "out of range"),
            ("ms", "expected a number before the unit ms"),
            ("1 ms 2", "expected a number and one unit"),
            ("8 parsecs", "expected a number and one unit"),
            ("1.2.3ms", "expected one number"),
        ] {
            let got = read_duration(text).unwrap_err().unwrap_or_default();
            assert!(got.contains(why), "{text}: {got}");
        }
    }
}
