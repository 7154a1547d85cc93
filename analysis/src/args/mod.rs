//! A call's arguments, read by their declared names. When a call is planned, each literal is
//! checked against its parameter's declared type ([`crate::params`]); an omitted or NULL one is
//! its declared default; a text given where a relation-reading function declares a number
//! gets an error that names the fix (`rel => '...'`). Relations are resolved in the call's
//! session ([`crate::relation`]). A function reads its arguments once, into the struct that
//! `arguments!` declares with its parameters' names (`typed`).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use commdb_catalog::model::ColumnDoc;
use commdb_catalog::session::durations::duration_ns;
use datafusion::catalog::Session;
use datafusion::common::{ScalarValue, internal_err, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;

use crate::params::{Param, ParamDefault, Type};
use crate::relation::{Relation, resolve};

mod typed;
pub use crate::arguments;
pub use typed::{FromArg, Group, check_fields};

/// The arguments of a call, read by their declared names: each given literal has been
/// checked against its parameter's declared type when the call was planned, and an omitted
/// (or NULL) one is its declared default.
pub struct Args<'a> {
    /// The function's name, for messages.
    pub function: &'static str,
    params: &'static [Param],
    columns: &'static [ColumnDoc],
    exprs: &'a [Expr],
    /// The session the call is planned in.
    pub session: &'a dyn Session,
}

impl fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Args").field("function", &self.function).field("exprs", &self.exprs).finish_non_exhaustive()
    }
}

impl<'a> Args<'a> {
    /// The arguments of function `function`, declared `params` and returning `columns`, in
    /// `exprs` (named ones already in their places), each checked against its declared type
    /// ([`crate::declare::Function::args`]).
    pub fn new(
        function: &'static str,
        params: &'static [Param],
        columns: &'static [ColumnDoc],
        exprs: &'a [Expr],
        session: &'a dyn Session,
    ) -> Result<Self> {
        if exprs.len() > params.len() {
            let names: Vec<&str> = params.iter().map(|p| p.name).collect();
            return plan_err!(
                "{function}: takes at most {} arguments ({}), got {}",
                params.len(),
                names.join(", "),
                exprs.len()
            );
        }
        let args = Args { function, params, columns, exprs, session };
        for (i, p) in params.iter().enumerate() {
            match args.literal_at(i)? {
                Some(v) => check(function, p, &v).map_err(|e| with_hint(e, params, p, &v))?,
                None if p.default == ParamDefault::Required => {
                    return plan_err!("{function}: argument {} is required ({})", p.name, p.meaning);
                }
                None => {}
            }
        }
        Ok(args)
    }

    fn literal_at(&self, i: usize) -> Result<Option<ScalarValue>> {
        match self.exprs.get(i) {
            None => Ok(None),
            Some(Expr::Literal(v, _)) if v.is_null() => Ok(None),
            Some(Expr::Literal(v, _)) => Ok(Some(v.clone())),
            Some(Expr::ScalarSubquery(_)) => {
                plan_err!("{}: argument {} must be a literal, not a query", self.function, self.params[i].name)
            }
            Some(other) => {
                plan_err!("{}: argument {} must be a literal, got {other}", self.function, self.params[i].name)
            }
        }
    }

    /// The declared parameter `name` and the literal given for it (None: omitted or NULL).
    fn get(&self, name: &str) -> Result<(&'static Param, Option<ScalarValue>)> {
        match self.param(name) {
            Some((i, p)) => Ok((p, self.literal_at(i)?)),
            None => internal_err!("{}: no parameter named {name} is declared", self.function),
        }
    }

    /// The declaration of parameter `name`.
    pub fn declared(&self, name: &str) -> Result<&'static Param> {
        Ok(self.get(name)?.0)
    }

    /// The declared parameter `name`, with its position.
    fn param(&self, name: &str) -> Option<(usize, &'static Param)> {
        self.params.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// The schema of what the function returns, as declared (names, types, nullability).
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.columns.iter().map(ColumnDoc::field).collect::<Vec<_>>()))
    }

    /// The relation named by argument `name`, or its declared default.
    fn relation(&self, name: &str) -> Result<Relation> {
        match self.opt_relation(name)? {
            Some(r) => Ok(r),
            None => match self.get(name)?.0.default {
                ParamDefault::Text(table) => resolve(self.session, self.function, table),
                _ => internal_err!("{}: {name} has no default relation", self.function),
            },
        }
    }

    /// The relation named by argument `name`: None when omitted or NULL.
    fn opt_relation(&self, name: &str) -> Result<Option<Relation>> {
        match self.get(name)?.1 {
            None => Ok(None),
            Some(v) => {
                let text = text_of(&v).unwrap_or_default();
                match resolve(self.session, self.function, &text) {
                    Ok(r) => Ok(Some(r)),
                    Err(e) => match duration_hint(self.params, &text) {
                        Some(hint) => plan_err!("{}{hint}", own_message(&e)),
                        None => Err(e),
                    },
                }
            }
        }
    }

    /// Text argument `name` (a choice comes back as the declared word), or its default.
    fn text(&self, name: &str) -> Result<String> {
        match (self.opt_text(name)?, self.get(name)?.0.default) {
            (Some(t), _) => Ok(t),
            (None, ParamDefault::Text(t)) => Ok(t.to_string()),
            _ => internal_err!("{}: {name} has no default text", self.function),
        }
    }

    /// Text argument `name`: None when omitted or NULL.
    fn opt_text(&self, name: &str) -> Result<Option<String>> {
        let (p, v) = self.get(name)?;
        let Some(t) = v.as_ref().and_then(text_of) else { return Ok(None) };
        Ok(Some(match p.ty {
            Type::Choice(words) => words.iter().find(|w| w.eq_ignore_ascii_case(&t)).map_or(t, |w| w.to_string()),
            _ => t,
        }))
    }

    /// Time argument `name` in nanoseconds (an integer or a duration such as '2ms'): None
    /// when omitted or NULL.
    fn opt_ns(&self, name: &str) -> Result<Option<i64>> {
        let (_, v) = self.get(name)?;
        Ok(v.map(|v| match text_of(&v) {
            Some(t) => duration_ns(&t).unwrap_or_default(),
            None => whole(&v).unwrap_or_default(),
        }))
    }

    /// Integer argument `name`: None when omitted or NULL.
    fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.get(name)?.1.as_ref().and_then(whole))
    }

    /// Number argument `name`, or its declared default.
    fn float(&self, name: &str) -> Result<f64> {
        match (self.opt_float(name)?, self.get(name)?.0.default) {
            (Some(x), _) => Ok(x),
            (None, ParamDefault::Number(d)) => Ok(d),
            _ => internal_err!("{}: {name} has no default number", self.function),
        }
    }

    /// Number argument `name`: None when omitted or NULL.
    fn opt_float(&self, name: &str) -> Result<Option<f64>> {
        Ok(self.get(name)?.1.as_ref().and_then(number))
    }
}

/// An argument in the wrong place gets an error that names the fix. A text given where a
/// number is declared, in a function that reads a relation, is most likely the relation
/// written later than first: say how to name it. A number (or a duration text) given where
/// the relation is declared is most likely one of the function's numbers written first: say
/// which parameter takes it by name.
fn with_hint(e: DataFusionError, params: &[Param], p: &Param, v: &ScalarValue) -> DataFusionError {
    let number = |p: &Param| matches!(p.ty, Type::Integer { .. } | Type::Number { .. } | Type::Duration { .. });
    let hint = match (&p.ty, text_of(v)) {
        (Type::Relation, None) => {
            params.iter().find(|q| number(q)).map(|q| format!("to give {}, write {} => {v}", q.name, q.name))
        }
        (_, Some(t)) if number(p) && duration_ns(&t).is_none() => params
            .iter()
            .find(|q| q.ty == Type::Relation && q.name != p.name)
            .map(|r| format!("to name the relation, write {} => '{t}'", r.name)),
        _ => None,
    };
    match hint {
        Some(hint) => DataFusionError::Plan(format!("{}; {hint}", own_message(&e))),
        None => e,
    }
}

/// The hint for a relation argument that names no table or view but reads as a duration: the
/// function's duration parameter, by name.
fn duration_hint(params: &[Param], text: &str) -> Option<String> {
    duration_ns(text)?;
    let p = params.iter().find(|p| matches!(p.ty, Type::Duration { .. }))?;
    Some(format!("; a duration goes by name: {} => '{text}'", p.name))
}

/// The message of a planning error without DataFusion's prefix.
fn own_message(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Plan(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Check a literal against its parameter's declared type, with an error naming the function,
/// the parameter and what it takes.
fn check(function: &str, p: &Param, v: &ScalarValue) -> Result<()> {
    let name = p.name;
    match p.ty {
        Type::Relation => {
            if text_of(v).is_none() {
                return plan_err!(
                    "{function}: {name} must be a table or view (its name), a CTE or a parenthesised query, e.g. '{}', got {v}",
                    match p.default {
                        ParamDefault::Text(t) => t,
                        _ => "messages",
                    }
                );
            }
        }
        Type::Text => {
            if text_of(v).is_none() {
                return plan_err!("{function}: {name} must be text, got {v}");
            }
        }
        Type::Choice(words) => {
            let ok = text_of(v).is_some_and(|t| words.iter().any(|w| w.eq_ignore_ascii_case(&t)));
            if !ok {
                let shown = match text_of(v) {
                    Some(t) => format!("'{t}'"),
                    None => v.to_string(),
                };
                return plan_err!("{function}: {name} must be {}, got {shown}", one_of(words));
            }
        }
        Type::Integer { min } => {
            // Only whole numbers: 1.5 is not silently 1, true is not 1, '7' is not 7.
            let Some(x) = whole(v) else {
                return plan_err!("{function}: {name} must be an integer, got {v} ({})", v.data_type());
            };
            if x < min {
                return plan_err!("{function}: {name} must be at least {min}, got {x}");
            }
        }
        Type::Number { min } => {
            let Some(x) = number(v) else {
                return plan_err!("{function}: {name} must be a number, got {v} ({})", v.data_type());
            };
            if !x.is_finite() || x < min {
                return plan_err!("{function}: {name} must be a number of at least {min}, got {x}");
            }
        }
        Type::Duration { min } => {
            let x = match text_of(v) {
                Some(t) => match duration_ns(&t) {
                    Some(x) => x,
                    None => {
                        return plan_err!(
                            "{function}: {name} must be nanoseconds or a duration such as '2ms' (units ns, us, ms, s, min), got '{t}'"
                        );
                    }
                },
                None => match whole(v) {
                    Some(x) => x,
                    None => return plan_err!("{function}: {name} must be an integer, got {v} ({})", v.data_type()),
                },
            };
            if x < min {
                return plan_err!("{function}: {name} must be at least {min}, got {x}");
            }
        }
        Type::Value(_) => {}
    }
    Ok(())
}

/// Words as a choice reads: `'a' or 'b'`, `'a', 'b' or 'c'`.
pub fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// The text of a string literal.
fn text_of(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
            Some(s.clone())
        }
        _ => None,
    }
}

/// An integer literal, or a floating-point one holding a whole number (`1e6`, `2.0`).
fn whole(v: &ScalarValue) -> Option<i64> {
    if !v.data_type().is_integer() && !is_whole_float(v) {
        return None;
    }
    match v.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(x))) => Some(x),
        _ => None,
    }
}

/// A numeric literal as f64.
fn number(v: &ScalarValue) -> Option<f64> {
    if !v.data_type().is_numeric() {
        return None;
    }
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(Some(x))) => Some(x),
        _ => None,
    }
}

/// A floating-point literal holding a whole number (`1e6`, `2.0`): accepted where an integer is
/// asked for.
fn is_whole_float(v: &ScalarValue) -> bool {
    match v {
        ScalarValue::Float64(Some(x)) => x.fract() == 0.0 && x.is_finite(),
        ScalarValue::Float32(Some(x)) => x.fract() == 0.0 && x.is_finite(),
        _ => false,
    }
}
