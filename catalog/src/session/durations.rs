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
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic() || c == 'µ')?;
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        _ => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    let ns = (v * scale).round();
    (ns.is_finite() && (-9.0e18..=9.0e18).contains(&ns)).then_some(ns as i64)
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
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => duration_ns(s),
        _ => None,
    }
}

fn nanoseconds(ns: i64) -> Expr {
    Expr::Literal(ScalarValue::Int64(Some(ns)), None)
}

/// `e` with its duration literals next to a time column as nanoseconds.
fn rewrite(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match &e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if applies(*op) => {
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

/// Durations added to or subtracted from a time column, rewritten in the statement before it is
/// planned (the planner types `start_ts + '1us'` before any analyzer rule runs, and refuses
/// Int64 + Utf8): the string literal next to an identifier whose name is a time column's
/// becomes its nanoseconds.
pub fn rewrite_arithmetic<S: sqlparser::ast::VisitMut>(statement: &mut S) {
    use sqlparser::ast::{BinaryOperator, Expr as SqlExpr, Value, VisitorMut};
    struct Rewriter;
    fn time_name(e: &SqlExpr) -> bool {
        match e {
            SqlExpr::Identifier(i) => is_time_column(&i.value),
            SqlExpr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| is_time_column(&i.value)),
            SqlExpr::Nested(inner) => time_name(inner),
            _ => false,
        }
    }
    fn literal_ns(e: &SqlExpr) -> Option<i64> {
        match e {
            SqlExpr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) => duration_ns(s),
                _ => None,
            },
            _ => None,
        }
    }
    impl VisitorMut for Rewriter {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> std::ops::ControlFlow<()> {
            if let SqlExpr::BinaryOp { left, op: BinaryOperator::Plus | BinaryOperator::Minus, right } = expr {
                let number = |ns: i64| SqlExpr::value(Value::Number(ns.to_string(), false));
                if let Some(ns) = literal_ns(right)
                    && time_name(left)
                {
                    **right = number(ns);
                } else if let Some(ns) = literal_ns(left)
                    && time_name(right)
                {
                    **left = number(ns);
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Rewriter);
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
        assert_eq!(duration_ns("8"), None);
        assert_eq!(duration_ns("8 parsecs"), None);
    }
}
