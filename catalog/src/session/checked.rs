//! Integer arithmetic that fails on overflow, as in PostgreSQL and duckdb: DataFusion 55 adds,
//! subtracts and multiplies integers with wrapping kernels (`SELECT 9223372036854775807 + 1`
//! gives -9223372036854775808) and has no setting to check them. An analyzer rule, run after
//! type coercion, turns every `+`, `-` and `*` whose operands have the same integer type into
//! a call of Arrow's checked kernel of that operator, which fails with `Arithmetic overflow`;
//! each expression keeps the name it had, so result columns are named as before. Integers only:
//! floats, decimals, times and intervals keep DataFusion's own operators. `sum()` of 64-bit
//! integers becomes `checked_sum` (`checked_sum`), which fails on overflow as well.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ExprSchema, Result, ScalarValue};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule: integer `+`, `-`, `*` to their checked kernels.
#[derive(Debug, Default)]
pub struct CheckedArithmetic;

impl AnalyzerRule for CheckedArithmetic {
    fn name(&self) -> &str {
        "commdb_checked_integer_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| rewrite_expressions(p, &checked)).map(|t| t.data)
    }
}

/// `plan` with `rewrite` applied bottom-up to every expression of its node, each expression
/// keeping its name; `rewrite` sees the schema of the node's inputs (or of its scanned table).
/// The analyzer rules of this session (`checked`, `durations`) are written with it.
pub(crate) fn rewrite_expressions(
    plan: LogicalPlan,
    rewrite: &dyn Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<Transformed<LogicalPlan>> {
    let mut schema = DFSchema::empty();
    for input in plan.inputs() {
        schema.merge(input.schema());
    }
    if let LogicalPlan::TableScan(scan) = &plan {
        schema.merge(&DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?);
    }
    let names = NamePreserver::new(&plan);
    plan.map_expressions(|expr| {
        let name = names.save(&expr);
        expr.transform_up(|e| rewrite(e, &schema)).map(|t| t.update_data(|e| name.restore(e)))
    })
}

/// `e` as a checked call when it is `+`, `-` or `*` of two operands of one integer type, or
/// `sum()` of a 64-bit integer (`checked_sum`), as an aggregate or in a window.
fn checked(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction, WindowFunctionDefinition};
    let sum_of = |args: &[Expr], distinct: bool| {
        !distinct && args.len() == 1 && type_of(&args[0], schema).is_some_and(|t| super::checked_sum::applies_to(&t))
    };
    match e {
        Expr::AggregateFunction(AggregateFunction { func, params })
            if func.name() == "sum" && sum_of(&params.args, params.distinct) =>
        {
            return Ok(Transformed::yes(Expr::AggregateFunction(AggregateFunction {
                func: Arc::new(super::checked_sum::udaf()),
                params,
            })));
        }
        Expr::WindowFunction(w)
            if matches!(&w.fun, WindowFunctionDefinition::AggregateUDF(f) if f.name() == "sum")
                && sum_of(&w.params.args, w.params.distinct) =>
        {
            let WindowFunction { params, .. } = *w;
            return Ok(Transformed::yes(Expr::WindowFunction(Box::new(WindowFunction {
                fun: WindowFunctionDefinition::AggregateUDF(Arc::new(super::checked_sum::udaf())),
                params,
            }))));
        }
        _ => {}
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else { return Ok(Transformed::no(e)) };
    let Some(kind) = Kind::of(*op) else { return Ok(Transformed::no(e)) };
    let (Some(l), Some(r)) = (type_of(left, schema), type_of(right, schema)) else { return Ok(Transformed::no(e)) };
    if l != r || !l.is_integer() {
        return Ok(Transformed::no(e));
    }
    let udf = Arc::new(ScalarUDF::new_from_impl(Checked { kind, signature: Signature::any(2, Volatility::Immutable) }));
    Ok(Transformed::yes(Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        udf,
        vec![left.as_ref().clone(), right.as_ref().clone()],
    ))))
}

/// The type of an operand, found without DataFusion's `get_type` on chains this rule has
/// rewritten: that builds the display name of every call below, so a sum of thousands of
/// terms would take cubic time.
fn type_of(e: &Expr, schema: &DFSchema) -> Option<DataType> {
    match e {
        Expr::Literal(v, _) => Some(v.data_type()),
        Expr::Column(c) => schema.field_from_column(c).ok().map(|f| f.data_type().clone()),
        Expr::Cast(c) => Some(c.field.data_type().clone()),
        Expr::TryCast(c) => Some(c.field.data_type().clone()),
        Expr::Alias(a) => type_of(&a.expr, schema),
        Expr::ScalarFunction(f) if CHECKED.contains(&f.func.name()) => type_of(f.args.first()?, schema),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if Kind::of(*op).is_some() => {
            let (l, r) = (type_of(left, schema)?, type_of(right, schema)?);
            (l == r).then_some(l)
        }
        _ => e.get_type(schema).ok(),
    }
}

/// The checked operator named `name` (as the rule writes it into plans), for a process that
/// reads such a plan (a cluster's scheduler and executors).
pub fn operator(name: &str) -> Option<ScalarUDF> {
    let kind = match CHECKED.iter().position(|c| *c == name)? {
        0 => Kind::Add,
        1 => Kind::Subtract,
        _ => Kind::Multiply,
    };
    Some(ScalarUDF::new_from_impl(Checked { kind, signature: Signature::any(2, Volatility::Immutable) }))
}

/// The names of the checked operators.
const CHECKED: [&str; 3] = ["checked_add", "checked_subtract", "checked_multiply"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Add,
    Subtract,
    Multiply,
}

impl Kind {
    fn of(op: Operator) -> Option<Kind> {
        match op {
            Operator::Plus => Some(Kind::Add),
            Operator::Minus => Some(Kind::Subtract),
            Operator::Multiply => Some(Kind::Multiply),
            _ => None,
        }
    }
}

/// A checked integer operator.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    kind: Kind,
    signature: Signature,
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Add => CHECKED[0],
            Kind::Subtract => CHECKED[1],
            Kind::Multiply => CHECKED[2],
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    /// NULL only where an operand may be, as the operator's result.
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        let nullable = args.arg_fields.iter().any(|f| f.is_nullable());
        let data_type = args.arg_fields.first().map_or(DataType::Null, |f| f.data_type().clone());
        Ok(Arc::new(arrow::datatypes::Field::new(self.name(), data_type, nullable)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::compute::kernels::numeric::{add, mul, sub};
        let scalars = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let datum = |a: &ColumnarValue| -> Result<Box<dyn arrow::array::Datum>> {
            Ok(match a {
                ColumnarValue::Array(array) => Box::new(array.clone()),
                ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
            })
        };
        let (l, r) = (datum(&args.args[0])?, datum(&args.args[1])?);
        let out = match self.kind {
            Kind::Add => add(l.as_ref(), r.as_ref()),
            Kind::Subtract => sub(l.as_ref(), r.as_ref()),
            Kind::Multiply => mul(l.as_ref(), r.as_ref()),
        }
        .map_err(|e| {
            let what = e.to_string();
            let what = what.rsplit("Overflow happened on: ").next().unwrap_or(&what).to_string();
            datafusion::error::DataFusionError::Execution(format!(
                "integer overflow: {what} does not fit {}; cast an operand to DOUBLE or DECIMAL(38, 0) for a wider result",
                args.return_field.data_type()
            ))
        })?;
        if scalars {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}
