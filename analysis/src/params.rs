//! The parameters of commdb's SQL functions as their declarations give them: a name, a type
//! (what a literal given for it must be), a default (what an omitted or NULL argument means)
//! and a one-line meaning; and the parameters several functions share.

/// The type of a parameter: what a literal given for it must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Type {
    /// A relation: a table or view by name (as text, `'messages'`, `'run2.messages'`, or as an
    /// identifier), a CTE of the statement, or a parenthesised query ([`crate::function_calls`]).
    Relation,
    /// A whole number (`1e6` is accepted, `1.5` is not), at least `min`.
    Integer { min: i64 },
    /// A finite number, at least `min`.
    Number { min: f64 },
    /// Nanoseconds, or a duration as text (`'2ms'`, `'1.5 s'`; units ns, us, ms, s, min), at
    /// least `min` ns.
    Duration { min: i64 },
    /// Text, one of the given words.
    Choice(&'static [&'static str]),
    /// Text.
    Text,
    /// A column or expression of the type the description gives (scalar and aggregate
    /// functions).
    Value(&'static str),
}

impl Type {
    /// The type as SQL's catalog shows it (information_schema.parameters.data_type).
    pub fn sql_name(&self) -> String {
        match self {
            Type::Relation => "relation (name, CTE or query)".into(),
            Type::Integer { .. } => "Int64".into(),
            Type::Number { .. } => "Float64".into(),
            Type::Duration { .. } => "duration (Int64 ns or Utf8 '2ms')".into(),
            Type::Choice(_) | Type::Text => "Utf8".into(),
            Type::Value(t) => t.to_string(),
        }
    }

    /// The type in words, with its constraint, for the reference.
    pub fn described(&self) -> String {
        match self {
            Type::Relation => "table, view, CTE or (query)".into(),
            Type::Integer { min } if *min > i64::MIN => format!("integer >= {min}"),
            Type::Integer { .. } => "integer".into(),
            Type::Number { min } if min.is_finite() => format!("number >= {min}"),
            Type::Number { .. } => "number".into(),
            Type::Duration { min } if *min > i64::MIN => format!("ns >= {min} or duration text ('2ms')"),
            Type::Duration { .. } => "ns or duration text ('2ms')".into(),
            Type::Choice(words) => words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" \\| "),
            Type::Text => "text".into(),
            Type::Value(t) => t.to_string(),
        }
    }
}

/// What an omitted (or NULL) argument means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamDefault {
    /// The argument must be given.
    Required,
    Integer(i64),
    Number(f64),
    Text(&'static str),
    /// Chosen when the query is planned, as the parameter's meaning says (a hundredth of the
    /// run, the trace's span, not used).
    Chosen(&'static str),
}

impl ParamDefault {
    /// The default of an integer parameter (0 when it has none): for code that needs the
    /// declared value outside a call.
    pub const fn integer(&self) -> i64 {
        match self {
            ParamDefault::Integer(v) => *v,
            _ => 0,
        }
    }

    /// The default as the reference and the signature show it.
    pub fn shown(&self) -> String {
        match self {
            ParamDefault::Required => String::new(),
            ParamDefault::Integer(v) => v.to_string(),
            ParamDefault::Number(v) => v.to_string(),
            ParamDefault::Text(t) => format!("'{t}'"),
            ParamDefault::Chosen(how) => how.to_string(),
        }
    }

    /// The default as SQL text (information_schema.parameters.parameter_default): NULL for
    /// a default chosen when planned, none for a required parameter.
    pub fn sql(&self) -> Option<String> {
        match self {
            ParamDefault::Required => None,
            ParamDefault::Chosen(_) => Some("NULL".into()),
            other => Some(other.shown()),
        }
    }
}

/// One parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Param {
    pub name: &'static str,
    pub ty: Type,
    pub default: ParamDefault,
    pub meaning: &'static str,
}

/// A parameter, briefly.
pub const fn param(name: &'static str, ty: Type, default: ParamDefault, meaning: &'static str) -> Param {
    Param { name, ty, default, meaning }
}
