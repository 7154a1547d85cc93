//! A call of one of commdb's table functions in a FROM clause, as the SQL planner meets it.
//! DataFusion's own table-function planning takes only positional arguments that are
//! expressions over no columns; commdb plugs a `RelationPlanner` (DataFusion's hook for table
//! factors, consulted before that planning) in front of it that reads the call as its
//! declaration ([`crate::declare`]) says:
//! - named arguments (`bucket_bytes => 100`) go to their declared places, skipped places are
//!   NULL (each function's default);
//! - an argument given for a relation parameter may be a parenthesised query
//!   (`rel => (SELECT * FROM messages WHERE bytes > 0)`), the name of a CTE of the statement,
//!   or a table or view by name, as text (`'messages'`) or as an identifier (`messages`). A
//!   query and a CTE are planned here with the full SQL planner, in the statement's scope,
//!   and travel to the function as the plan they are (an `Expr::ScalarSubquery` carrying it,
//!   the one expression that holds a plan), where the call reads them as relations of their
//!   own ([`crate::relation::with_arguments`]); a table or view goes by its name, as before.
//!
//! The call then goes to the function as DataFusion calls any table function, with the
//! session it is planned in; an analysis it returns joins the plan as a node of its own, its
//! inputs as child plans ([`crate::node`]).

use std::sync::Arc;

use datafusion::common::{DFSchema, TableReference, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::planner::{PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Subquery, lit};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, Ident, ObjectName, TableFactor, TableFunctionArgs, Value,
};

use crate::declare::Function;
use crate::node::AnalysisCall;
use crate::params::Type;

/// The relation planner for calls of the table functions `functions` declares (commdb's,
/// registered with them); any other table factor goes on to DataFusion's planning.
#[derive(Debug)]
pub struct FunctionCalls {
    pub functions: &'static [&'static Function],
}

impl RelationPlanner for FunctionCalls {
    fn plan_relation(
        &self,
        relation: TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let Some(function) = self.declared(&relation, context) else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let TableFactor::Table { alias, args: Some(TableFunctionArgs { args, settings }), .. } = relation else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        if settings.is_some() {
            return plan_err!("{}: takes no SETTINGS", function.name);
        }
        let placed = in_declared_places(function, args)?;
        let mut exprs = Vec::with_capacity(placed.len());
        for (i, arg) in placed.into_iter().enumerate() {
            let relation = function.params.get(i).is_some_and(|p| p.ty == Type::Relation);
            exprs.push(match arg {
                None => lit(datafusion::common::ScalarValue::Null),
                Some(sql) if relation => relation_argument(sql, context)?,
                Some(sql) => context.sql_expr_to_logical_expr(sql, &DFSchema::empty())?,
            });
        }
        let source = context.context_provider().get_table_function_source(function.name, exprs)?;
        let table = datafusion::datasource::source_as_provider(&source)?;
        let plan = if table.downcast_ref::<crate::derived::Derived>().is_some() {
            AnalysisCall::plan(table, None)?
        } else {
            LogicalPlanBuilder::scan(TableReference::bare(format!("{}()", function.name)), source, None)?.build()?
        };
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(plan, alias))))
    }
}

impl FunctionCalls {
    /// The declaration of the table function `relation` calls, if it is one of `functions`.
    fn declared(&self, relation: &TableFactor, context: &dyn RelationPlannerContext) -> Option<&'static Function> {
        let TableFactor::Table {
            name,
            args: Some(_),
            with_hints,
            version,
            with_ordinality,
            partitions,
            json_path,
            sample,
            index_hints,
            ..
        } = relation
        else {
            return None;
        };
        let plain = with_hints.is_empty()
            && version.is_none()
            && !with_ordinality
            && partitions.is_empty()
            && json_path.is_none()
            && sample.is_none()
            && index_hints.is_empty();
        let [part] = name.0.as_slice() else { return None };
        let ident = part.as_ident()?.clone();
        let name = context.normalize_ident(ident);
        let function = self.functions.iter().copied().find(|f| f.name.eq_ignore_ascii_case(&name))?;
        (plain && function.kind() == crate::declare::Kind::Table).then_some(function)
    }
}

/// The arguments of a call in their declared places (None: omitted): positional ones keep
/// theirs, named ones move to their parameter's.
fn in_declared_places(function: &Function, args: Vec<FunctionArg>) -> Result<Vec<Option<ast::Expr>>> {
    let name = function.name;
    let mut places: Vec<Option<ast::Expr>> = Vec::new();
    let mut seen_named = false;
    for arg in args {
        let (given, value) = match arg {
            FunctionArg::Unnamed(value) => {
                if seen_named {
                    return plan_err!("{name}: positional arguments must come before named ones");
                }
                places.push(Some(expr_of(name, value)?));
                continue;
            }
            FunctionArg::Named { name, arg, .. } => (name.value, arg),
            FunctionArg::ExprNamed { name, arg, .. } => (name.to_string(), arg),
        };
        seen_named = true;
        let lower = given.to_ascii_lowercase();
        let Some((place, _)) = function.param(&lower) else {
            let message = format!("{name}: unknown argument '{given}' (expected {})", function.names().join(", "));
            return plan_err!("{}", commdb_catalog::suggest::did_you_mean(message, &given, function.names()));
        };
        if places.len() <= place {
            places.resize(place + 1, None);
        }
        if places[place].is_some() {
            return plan_err!("{name}: argument '{lower}' is given twice");
        }
        places[place] = Some(expr_of(name, value)?);
    }
    // More arguments than parameters are refused by the function's own check (crate::args).
    Ok(places)
}

fn expr_of(function: &str, arg: FunctionArgExpr) -> Result<ast::Expr> {
    match arg {
        FunctionArgExpr::Expr(e) => Ok(e),
        other => plan_err!("{function}: an argument must be a value, a name or a query, got {other}"),
    }
}

/// An argument given for a relation parameter, as the function reads it: a parenthesised
/// query or a CTE as the plan it is, a table or view as its name (text), anything else as the
/// expression it is (the function's checks say what was expected).
fn relation_argument(sql: ast::Expr, context: &mut dyn RelationPlannerContext) -> Result<Expr> {
    let named = match &sql {
        ast::Expr::Subquery(query) => {
            let derived = TableFactor::Derived { lateral: false, subquery: query.clone(), alias: None, sample: None };
            return Ok(carried(context.plan(derived)?));
        }
        ast::Expr::Identifier(ident) => Some(ObjectName::from(vec![ident.clone()])),
        ast::Expr::CompoundIdentifier(parts) => Some(ObjectName::from(parts.clone())),
        ast::Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => bare_name(text),
            _ => None,
        },
        _ => None,
    };
    let Some(name) = named else { return context.sql_expr_to_logical_expr(sql, &DFSchema::empty()) };
    let reference = context.object_name_to_table_reference(name.clone())?;
    // A CTE of the statement shadows a table of its name, as in a FROM clause; planning the
    // name finds it (a table DataFusion has not looked up for this statement is an error
    // here, and is found by its name where the function resolves it).
    if let Ok(plan) = context.plan(table(name))
        && !matches!(plan, LogicalPlan::TableScan(_))
    {
        return Ok(carried(plan));
    }
    Ok(match sql {
        ast::Expr::Value(_) => context.sql_expr_to_logical_expr(sql, &DFSchema::empty())?,
        _ => lit(reference.to_quoted_string()),
    })
}

/// A name given as text, as an identifier when it is a bare one (only a bare name can be a
/// CTE's).
fn bare_name(text: &str) -> Option<ObjectName> {
    match TableReference::from(text) {
        TableReference::Bare { table } => Some(ObjectName::from(vec![Ident::with_quote('"', table.as_ref())])),
        _ => None,
    }
}

/// The table factor of a name.
fn table(name: ObjectName) -> TableFactor {
    TableFactor::Table {
        name,
        alias: None,
        args: None,
        with_hints: Vec::new(),
        version: None,
        with_ordinality: false,
        partitions: Vec::new(),
        json_path: None,
        sample: None,
        index_hints: Vec::new(),
    }
}

/// A planned relation as an argument expression.
fn carried(plan: LogicalPlan) -> Expr {
    Expr::ScalarSubquery(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns: Vec::new(),
        spans: Default::default(),
    })
}
