//! One declaration per SQL function: what it is called, its parameters (name, type, default,
//! one-line meaning), what it returns (a table's columns with their types and meanings, or a
//! value) and how it is made. Everything else is derived from it: registration
//! (`register_all`), named arguments, the checking and defaults of arguments (`common::Args`
//! reads them from here), the shell's `\df`, `information_schema.routines` and `.parameters`
//! (so `SHOW FUNCTIONS`), and docs/reference.md. A test plans every table function and
//! compares its real output schema with the declared columns, so the two cannot drift.
//! The shape follows SQL's own catalogs: a routine with IN parameters (ordinal, name, type,
//! default) and, for a table function, the columns of its result.

use std::fmt::Write;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, TimeUnit};
use commdb_catalog::Session;
use commdb_catalog::model::ColumnDoc;
use datafusion::catalog::TableFunctionImpl;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// What kind of function SQL sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Scalar,
    Aggregate,
    Table,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Scalar => "scalar",
            Kind::Aggregate => "aggregate",
            Kind::Table => "table",
        }
    }
}

/// The type of a parameter: what a literal given for it must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Type {
    /// The name of a table or view, as text: `'messages'`, `'run2.messages'`, a view.
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
            Type::Relation => "relation name (Utf8)".into(),
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
            Type::Relation => "table or view name".into(),
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

/// What a function returns.
#[derive(Debug, Clone, Copy)]
pub enum Output {
    /// A table of these columns.
    Columns(&'static [ColumnDoc]),
    /// A table of the input relation's columns followed by these.
    InputThen(&'static [ColumnDoc]),
    /// A table of these columns followed by others that the input decides (described).
    ColumnsThen(&'static [ColumnDoc], &'static str),
    /// One value of this type (described).
    Value(&'static str),
}

/// How the function is made for a session.
#[derive(Clone, Copy)]
pub enum Make {
    Table(fn() -> Arc<dyn TableFunctionImpl>),
    Scalar(fn(&Session) -> ScalarUDF),
    Aggregate(fn() -> AggregateUDF),
}

impl std::fmt::Debug for Make {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Make::Table(_) => "Table",
            Make::Scalar(_) => "Scalar",
            Make::Aggregate(_) => "Aggregate",
        })
    }
}

/// One SQL function.
#[derive(Clone, Copy)]
pub struct Function {
    pub name: &'static str,
    pub params: &'static [Param],
    pub output: Output,
    /// One paragraph: what it computes, and from which source.
    pub description: &'static str,
    pub make: Make,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Function {
    pub fn kind(&self) -> Kind {
        match self.make {
            Make::Table(_) => Kind::Table,
            Make::Scalar(_) => Kind::Scalar,
            Make::Aggregate(_) => Kind::Aggregate,
        }
    }

    /// The parameter called `name`, with its position.
    pub fn param(&self, name: &str) -> Option<(usize, &'static Param)> {
        self.params.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// Parameter names in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.params.iter().map(|p| p.name).collect()
    }

    /// The declared output columns (for a table function).
    pub fn columns(&self) -> &'static [ColumnDoc] {
        match self.output {
            Output::Columns(c) | Output::InputThen(c) | Output::ColumnsThen(c, _) => c,
            Output::Value(_) => &[],
        }
    }

    /// The call with its parameters and defaults, and what it returns:
    /// `latency_criteria(rel => 'messages', bucket_bytes => 50, ...) -> locality, ...`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match p.default {
                ParamDefault::Required => p.name.to_string(),
                ParamDefault::Chosen(_) => format!("[{}]", p.name),
                d => format!("{} => {}", p.name, d.shown()),
            })
            .collect();
        let mut out = format!("{}({})", self.name, params.join(", "));
        let names = |c: &[ColumnDoc]| c.iter().map(|c| c.name).collect::<Vec<_>>().join(", ");
        let _ = match self.output {
            Output::Columns(c) => write!(out, " -> {}", names(c)),
            Output::InputThen(c) => write!(out, " -> the input's columns, {}", names(c)),
            Output::ColumnsThen(c, rest) => write!(out, " -> {}, {rest}", names(c)),
            Output::Value(v) => write!(out, " -> {v}"),
        };
        out
    }

    /// How a table function describes itself in information_schema.routines and .parameters.
    pub fn routine(&self) -> commdb_catalog::session::information_schema::RoutineDoc {
        use commdb_catalog::session::information_schema::{ParameterDoc, RoutineDoc};
        RoutineDoc {
            name: self.name.to_string(),
            description: self.description.to_string(),
            syntax: self.signature(),
            parameters: self
                .params
                .iter()
                .map(|p| ParameterDoc {
                    name: p.name.to_string(),
                    data_type: p.ty.sql_name(),
                    default: p.default.sql(),
                })
                .collect(),
        }
    }

    /// DataFusion's documentation of a scalar or aggregate function: description, syntax and
    /// argument meanings, shown by `SHOW FUNCTIONS` and information_schema.
    pub fn documentation(&self) -> datafusion::logical_expr::Documentation {
        use datafusion::logical_expr::{DocSection, Documentation};
        let section = DocSection { include: true, label: "commdb", description: None };
        let mut b = Documentation::builder(section, self.description, self.signature());
        for p in self.params {
            b = b.with_argument(p.name, p.meaning);
        }
        b.build()
    }
}

/// The meaning of an output column: its declared one, or the trace model's column of the
/// same name when the declaration leaves it empty.
pub fn meaning(column: &ColumnDoc) -> &'static str {
    if !column.meaning.is_empty() {
        return column.meaning;
    }
    commdb_catalog::model::TABLES
        .iter()
        .flat_map(|t| t.columns.iter())
        .find(|c| c.name == column.name)
        .map_or("", |c| c.meaning)
}

/// An output column; an empty meaning is the trace model's column of that name.
pub const fn col(name: &'static str, data_type: fn() -> DataType, meaning: &'static str) -> ColumnDoc {
    ColumnDoc { name, data_type, nullable: true, meaning }
}

pub fn int64() -> DataType {
    DataType::Int64
}
pub fn int32() -> DataType {
    DataType::Int32
}
pub fn float64() -> DataType {
    DataType::Float64
}
pub fn text() -> DataType {
    DataType::Utf8
}
pub fn text_view() -> DataType {
    DataType::Utf8View
}
pub fn boolean() -> DataType {
    DataType::Boolean
}
pub fn timestamp_utc() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}
pub fn list_int64() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int64, true)))
}
pub fn list_float64() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
}

/// The four parameters of every function that measures latency L against criteria
/// (PCLVis 4.1): how `latency_criteria` learns them, or a table of them.
pub const BUCKET_BYTES: Param = param(
    "bucket_bytes",
    Type::Integer { min: 1 },
    ParamDefault::Integer(50),
    "width of the message-size buckets of the criteria, in bytes",
);
pub const MAX_SAMPLES: Param = param(
    "max_samples",
    Type::Integer { min: 1 },
    ParamDefault::Integer(10000),
    "at most this many messages per bucket are sampled for its median",
);
pub const MIN_MESSAGES: Param = param(
    "min_messages",
    Type::Integer { min: 1 },
    ParamDefault::Integer(5),
    "a bucket with fewer messages gets no criterion (status 'too_few_messages'), so its messages no latency",
);
pub const CRITERIA: Param = param(
    "criteria",
    Type::Relation,
    ParamDefault::Chosen("the whole trace's"),
    "a latency_criteria-shaped relation to measure against instead of the trace's own criteria",
);
