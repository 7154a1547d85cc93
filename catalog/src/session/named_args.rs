//! Named arguments for table functions: `latency_criteria(bucket_bytes => 100)`. DataFusion's
//! planner takes only positional arguments in FROM clauses, so commdb rewrites a call to a
//! function whose parameter names are registered into positional form before planning:
//! positional arguments keep their places, named ones move to their parameter's position, and
//! skipped positions are filled with NULL, which every commdb function reads as "default".

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, TableFactor, Value, VisitMut, VisitorMut};

use crate::error::{Error, Result};

/// Parameter names of table functions, by lower-case function name.
pub type Parameters = HashMap<String, Vec<&'static str>>;

struct Rewriter<'a> {
    parameters: &'a Parameters,
    error: Option<String>,
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, args: Some(args), .. } = factor else { return ControlFlow::Continue(()) };
        let function = name.to_string().to_ascii_lowercase();
        let Some(params) = self.parameters.get(&function) else { return ControlFlow::Continue(()) };
        match reorder(&function, params, std::mem::take(&mut args.args)) {
            Ok(new) => {
                args.args = new;
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

fn null_arg() -> FunctionArg {
    FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::value(Value::Null)))
}

fn reorder(function: &str, params: &[&str], args: Vec<FunctionArg>) -> Result<Vec<FunctionArg>, String> {
    let mut slots: Vec<Option<FunctionArg>> = Vec::new();
    let mut seen_named = false;
    for arg in args {
        let (name, value) = match arg {
            FunctionArg::Unnamed(v) => {
                if seen_named {
                    return Err(format!("{function}: positional arguments must come before named ones"));
                }
                slots.push(Some(FunctionArg::Unnamed(v)));
                continue;
            }
            FunctionArg::Named { name, arg, .. } => (name.value, arg),
            FunctionArg::ExprNamed { name, arg, .. } => (name.to_string(), arg),
        };
        seen_named = true;
        let lower = name.to_ascii_lowercase();
        let Some(pos) = params.iter().position(|p| *p == lower) else {
            let message = format!("{function}: unknown argument '{name}' (expected {})", params.join(", "));
            return Err(crate::suggest::did_you_mean(message, &name, params.iter().copied()));
        };
        if slots.len() <= pos {
            slots.resize(pos + 1, None);
        }
        if slots[pos].is_some() {
            return Err(format!("{function}: argument '{lower}' is given twice"));
        }
        slots[pos] = Some(FunctionArg::Unnamed(value));
    }
    Ok(slots.into_iter().map(|s| s.unwrap_or_else(null_arg)).collect())
}

/// Rewrite named arguments of registered table functions in a parsed statement.
pub fn rewrite<S: VisitMut>(statement: &mut S, parameters: &Parameters) -> Result<()> {
    let mut r = Rewriter { parameters, error: None };
    let _ = statement.visit(&mut r);
    match r.error {
        Some(e) => Err(Error::argument(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    fn run(sql: &str) -> std::result::Result<String, String> {
        let mut params = Parameters::new();
        params.insert("latency_criteria".into(), vec!["rel", "bucket_bytes", "max_samples"]);
        let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).unwrap();
        rewrite(&mut stmts[0], &params).map_err(|e| e.to_string())?;
        Ok(stmts[0].to_string())
    }

    #[test]
    fn named_arguments_become_positional() {
        assert_eq!(
            run("SELECT * FROM latency_criteria(max_samples => 10)").unwrap(),
            "SELECT * FROM latency_criteria(NULL, NULL, 10)"
        );
        assert_eq!(
            run("SELECT * FROM latency_criteria('v', BUCKET_BYTES => 8)").unwrap(),
            "SELECT * FROM latency_criteria('v', 8)"
        );
        assert_eq!(run("SELECT * FROM other(x => 1)").unwrap(), "SELECT * FROM other(x => 1)");
        assert!(run("SELECT * FROM latency_criteria(colour => 1)").unwrap_err().contains("unknown argument 'colour'"));
        assert!(run("SELECT * FROM latency_criteria('v', rel => 'w')").unwrap_err().contains("given twice"));
    }
}
