//! Which parts of a table stored in parts ([`crate::store`]) a scan needs: each part records the
//! range of the column the table is ordered by (`rank`, or `send_ts` for messages), and a
//! part whose range a filter on that column rules out is neither checked nor read. Filters of
//! the forms `col op literal` (=, <, <=, >, >=, either side), `col BETWEEN a AND b`,
//! `col IN (...)` and conjunctions of them narrow the column to an interval; any other filter
//! keeps every part, and DataFusion's own pruning by row-group statistics works inside the
//! parts kept. This is the partition pruning of a store partitioned by rank range and time.

use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, expr::InList};
use datafusion::scalar::ScalarValue;

use crate::trace::KeyRange;

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

/// Whether a part holding `range` may hold rows that pass every one of `filters`.
pub fn may_match(range: &KeyRange, filters: &[Expr]) -> bool {
    filters
        .iter()
        .filter_map(|f| allowed(f, &range.column))
        .all(|(lo, hi)| lo <= hi && lo <= range.max && hi >= range.min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    #[test]
    fn filters_on_the_order_column_rule_out_parts() {
        let part = KeyRange { column: "send_ts".into(), min: 100, max: 200 };
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
        let ranks = KeyRange { column: "rank".into(), min: 32, max: 63 };
        assert!(!may_match(&ranks, &[col("rank").between(lit(100), lit(131))]));
        assert!(may_match(&ranks, &[col("rank").eq(lit(40))]));
    }
}
