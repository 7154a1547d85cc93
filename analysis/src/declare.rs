//! One declaration per SQL function: what it is called, its parameters (name, type, default,
//! one-line meaning), what it returns (a table's columns with their types and meanings, or a
//! value) and how it is made. Everything else is derived from it: registration
//! (`register_all`), named arguments, the checking and defaults of arguments (`args::Args`
//! reads them from here, into each function's `arguments!` struct), the shell's `\df`,
//! `information_schema.routines` and `.parameters` (so `SHOW FUNCTIONS`), and
//! docs/reference.md. A test plans every table function and
//! compares its real output schema with the declared columns, so the two cannot drift.
//! The shape follows SQL's own catalogs: a routine with IN parameters (ordinal, name, type,
//! default) and, for a table function, the columns of its result.

use std::fmt::Write;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use commdb_catalog::Session;
use commdb_catalog::model::ColumnDoc;
use datafusion::catalog::TableProvider;
use datafusion::error::Result;
use datafusion::logical_expr::Expr;

use crate::args::Args;
use crate::params::{Param, ParamDefault};
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// How every table function takes its arguments: what `\df` and the reference state.
pub const ARGUMENT_RULE: &str = "Table functions take the relation they read first (a table or view by name, a CTE or a parenthesised query, through which a data file is read: `comm_matrix((SELECT * FROM 'm.parquet'))`; default the trace's), then their other arguments in the declared order or by name (name => value); an omitted or NULL argument is its default.";

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
    /// Plans a call from its arguments (checked against the declaration).
    Table(fn(&Args) -> Result<Arc<dyn TableProvider>>),
    /// Builds the function for a session, from its declaration (its name and documentation).
    Scalar(fn(&'static Function, &Session) -> ScalarUDF),
    Aggregate(fn(&'static Function) -> AggregateUDF),
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

/// A function is known by its name (so that functions built from a declaration can be
/// compared and hashed, as DataFusion's function objects are).
impl PartialEq for Function {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Function {}

impl std::hash::Hash for Function {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
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

    /// The arguments of a call of this function, checked against the declaration.
    pub fn args<'a>(
        &'static self,
        exprs: &'a [Expr],
        session: &'a dyn datafusion::catalog::Session,
    ) -> Result<Args<'a>> {
        Args::new(self.name, self.params, self.columns(), exprs, session)
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

    /// The schema of what a table function returns, built from its declared columns (names,
    /// types, nullability).
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.columns().iter().map(ColumnDoc::field).collect::<Vec<_>>()))
    }

    /// The declared schema with the types of some columns decided by the call (`comm_matrix`
    /// by node has text ends): each `(name, type)` replaces the declared type of that column.
    pub fn schema_with(&self, types: &[(&str, DataType)]) -> SchemaRef {
        let fields = self.columns().iter().map(|c| match types.iter().find(|(n, _)| *n == c.name) {
            Some((_, t)) => Field::new(c.name, t.clone(), c.nullable),
            None => c.field(),
        });
        Arc::new(Schema::new(fields.collect::<Vec<_>>()))
    }

    /// The schema of an `Output::InputThen` function: the input's fields, then the declared
    /// columns.
    pub fn schema_after(&self, input: &Schema) -> SchemaRef {
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(self.columns().iter().map(ColumnDoc::field));
        Arc::new(Schema::new(fields))
    }

    /// The declared fields followed by others the call decides (`Output::ColumnsThen`).
    pub fn schema_then(&self, more: impl IntoIterator<Item = Field>) -> SchemaRef {
        let mut fields: Vec<Field> = self.columns().iter().map(ColumnDoc::field).collect();
        fields.extend(more);
        Arc::new(Schema::new(fields))
    }

    /// DataFusion's documentation of this scalar or aggregate function (what `SHOW
    /// FUNCTIONS` and information_schema show), built once from the declaration.
    pub fn doc(&'static self) -> Option<&'static datafusion::logical_expr::Documentation> {
        use datafusion::logical_expr::Documentation;
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        static BUILT: OnceLock<Mutex<HashMap<&'static str, &'static Documentation>>> = OnceLock::new();
        if self.kind() == Kind::Table {
            return None;
        }
        let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        Some(*built.entry(self.name).or_insert_with(|| Box::leak(Box::new(self.documentation()))))
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

/// The methods of a scalar or aggregate function that its declaration (a field `declaration`)
/// and its `signature` field answer: its name, its documentation and its signature.
#[macro_export]
macro_rules! declared_function {
    () => {
        fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
            self.declaration.doc()
        }

        fn name(&self) -> &str {
            self.declaration.name
        }

        fn signature(&self) -> &datafusion::logical_expr::Signature {
            &self.signature
        }
    };
}
pub use crate::declared_function;

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
