//! Which parts of a table stored in parts ([`crate::store`]) a scan needs: each part records the
//! range of the column the table is ordered by (`rank`, or `send_ts` for messages), and a
//! part whose range a filter on that column rules out is neither checked nor read. Filters of
//! the forms `col op literal` (=, <, <=, >, >=, either side), `col BETWEEN a AND b`,
//! `col IN (...)` and conjunctions of them narrow the column to an interval; any other filter
//! keeps every part, and DataFusion's own pruning by row-group statistics works inside the
//! parts kept. This is the partition pruning of a store partitioned by rank range and time.
//!
//! A part of `events` also lists the values of its `kind` ([`crate::part_values`]): a filter
//! `kind = 'x'`, `kind IN (...)`, their disjunctions and conjunctions allow a set of values,
//! and a part that lists none of them is skipped as well (the forks and joins that the
//! analyses of threads read, on a trace that has none).

use std::collections::BTreeSet;

use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, expr::InList};
use datafusion::scalar::ScalarValue;

use crate::part_values::PartValues;
use crate::trace::{KeyRange, PartBounds};

/// The interval [lo, hi] a filter allows the column, None when it does not narrow it.
fn allowed(filter: &Expr, column: &str) -> Option<(i64, i64)> {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            match (allowed(left, column), allowed(right, column)) {
                (Some(a), Some(b)) => Some((a.0.max(b.0), a.1.min(b.1))),
                (a, b) => a.or(b),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, value) = if is_column(left, column) {
                (*op, literal(right)?)
            } else if is_column(right, column) {
                (op.swap()?, literal(left)?)
            } else {
                return None;
            };
            match op {
                Operator::Eq => Some((value, value)),
                Operator::Lt => Some((i64::MIN, value.checked_sub(1)?)),
                Operator::LtEq => Some((i64::MIN, value)),
                Operator::Gt => Some((value.checked_add(1)?, i64::MAX)),
                Operator::GtEq => Some((value, i64::MAX)),
                _ => None,
            }
        }
        Expr::Between(Between { expr, negated: false, low, high }) if is_column(expr, column) => {
            Some((literal(low)?, literal(high)?))
        }
        Expr::InList(InList { expr, list, negated: false }) if is_column(expr, column) => {
            let values: Option<Vec<i64>> = list.iter().map(literal).collect();
            let values = values?;
            Some((*values.iter().min()?, *values.iter().max()?))
        }
        _ => None,
    }
}

fn is_column(e: &Expr, column: &str) -> bool {
    match e {
        Expr::Column(c) => c.name == column,
        Expr::Cast(c) => is_column(&c.expr, column),
        Expr::TryCast(c) => is_column(&c.expr, column),
        _ => false,
    }
}

/// An integer literal (of any integer type) as i64.
fn literal(e: &Expr) -> Option<i64> {
    let value = match e {
        Expr::Literal(v, _) => v,
        Expr::Cast(c) => return literal(&c.expr),
        _ => return None,
    };
    match value.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
        ScalarValue::Int64(v) => v,
        _ => None,
    }
}

/// The text values a filter allows the column, None when it does not narrow it.
fn allowed_values(filter: &Expr, column: &str) -> Option<BTreeSet<String>> {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            match (allowed_values(left, column), allowed_values(right, column)) {
                (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
                (a, b) => a.or(b),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            let (mut a, b) = (allowed_values(left, column)?, allowed_values(right, column)?);
            a.extend(b);
            Some(a)
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => {
            let value = if is_column(left, column) {
                text(right)?
            } else if is_column(right, column) {
                text(left)?
            } else {
                return None;
            };
            Some(BTreeSet::from([value]))
        }
        Expr::InList(InList { expr, list, negated: false }) if is_column(expr, column) => {
            list.iter().map(text).collect()
        }
        _ => None,
    }
}

/// A text literal (plain, or of a dictionary).
fn text(e: &Expr) -> Option<String> {
    fn of(v: &ScalarValue) -> Option<String> {
        match v {
            ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
                Some(s.clone())
            }
            ScalarValue::Dictionary(_, inner) => of(inner),
            _ => None,
        }
    }
    match e {
        Expr::Literal(v, _) => of(v),
        Expr::Cast(c) => text(&c.expr),
        _ => None,
    }
}

/// Whether a part of which the manifest says `bounds` may hold rows that pass every one of
/// `filters`.
pub fn may_match(bounds: &PartBounds, filters: &[Expr]) -> bool {
    bounds.key.as_ref().is_none_or(|k| in_range(k, filters))
        && bounds.values.as_ref().is_none_or(|v| listed(v, filters))
}

/// Whether a part whose order column spans `range` may pass every one of `filters`.
fn in_range(range: &KeyRange, filters: &[Expr]) -> bool {
    filters
        .iter()
        .filter_map(|f| allowed(f, &range.column))
        .all(|(lo, hi)| lo <= hi && lo <= range.max && hi >= range.min)
}

/// Whether a part holding the values `listed` of its kind column may pass every one of `filters`.
fn listed(listed: &PartValues, filters: &[Expr]) -> bool {
    filters
        .iter()
        .filter_map(|f| allowed_values(f, &listed.column))
        .all(|allowed| listed.values.iter().any(|v| allowed.contains(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn ranged(column: &str, min: i64, max: i64) -> PartBounds {
        PartBounds { key: Some(KeyRange { column: column.into(), min, max }), values: None }
    }

    #[test]
    fn filters_on_the_order_column_rule_out_parts() {
        let part = ranged("send_ts", 100, 200);
        let keeps = |f: Expr| may_match(&part, &[f]);
        assert!(keeps(col("send_ts").gt_eq(lit(150i64))));
        assert!(!keeps(col("send_ts").gt(lit(200i64))));
        assert!(!keeps(lit(99i64).gt_eq(col("send_ts"))));
        assert!(keeps(col("send_ts").between(lit(0i64), lit(100i64))));
        assert!(!keeps(col("send_ts").gt_eq(lit(300i64)).and(col("send_ts").lt(lit(400i64)))));
        assert!(!keeps(col("send_ts").in_list(vec![lit(1i64), lit(99i64)], false)));
        assert!(keeps(col("send_ts").in_list(vec![lit(1i64), lit(150i64)], false)));
        // Other columns and forms keep the part.
        assert!(keeps(col("recv_ts").gt(lit(1000i64))));
        assert!(keeps(col("send_ts").gt(lit(1000i64)).or(col("src").eq(lit(1)))));
        let ranks = ranged("rank", 32, 63);
        assert!(!may_match(&ranks, &[col("rank").between(lit(100), lit(131))]));
        assert!(may_match(&ranks, &[col("rank").eq(lit(40))]));
    }

    #[test]
    fn filters_on_the_kind_rule_out_parts_that_list_none_of_the_kinds_they_allow() {
        let listed = |values: &[&str]| PartValues {
            column: "kind".into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let part = PartBounds {
            key: Some(KeyRange { column: "rank".into(), min: 0, max: 31 }),
            values: Some(listed(&["enter", "leave", "recv", "send"])),
        };
        let keeps = |f: Expr| may_match(&part, &[f]);
        let kinds = |k: &[&str]| k.iter().map(|k| lit(*k)).collect::<Vec<_>>();
        assert!(!keeps(col("kind").in_list(kinds(&["fork", "join"]), false)));
        assert!(keeps(col("kind").in_list(kinds(&["fork", "send"]), false)));
        assert!(!keeps(col("kind").eq(lit("fork")).or(col("kind").eq(lit("join")))));
        assert!(keeps(lit("recv").eq(col("kind"))));
        // A dictionary literal, as the planner makes for the column's type.
        let dict = ScalarValue::Dictionary(
            Box::new(arrow::datatypes::DataType::Int8),
            Box::new(ScalarValue::Utf8(Some("lock_acquire".into()))),
        );
        assert!(!keeps(col("kind").eq(Expr::Literal(dict, None))));
        // With another condition: the kinds allowed on both sides of AND, either side of OR.
        assert!(!keeps(col("kind").eq(lit("fork")).and(col("rank").gt(lit(3)))));
        assert!(!keeps(col("kind").eq(lit("send")).and(col("kind").eq(lit("fork")))));
        assert!(keeps(col("kind").eq(lit("fork")).or(col("rank").gt(lit(3)))));
        // Forms that allow no set of kinds keep the part: NOT IN, other columns, functions.
        assert!(keeps(col("kind").in_list(kinds(&["enter", "leave", "recv", "send"]), true)));
        assert!(keeps(col("region").eq(lit("fork"))));
        // The range still rules out, and a part listing no kinds keeps what the range keeps.
        assert!(!may_match(&part, &[col("kind").eq(lit("send")), col("rank").gt(lit(40))]));
        assert!(may_match(&ranged("rank", 0, 31), &[col("kind").eq(lit("fork"))]));
    }
}
