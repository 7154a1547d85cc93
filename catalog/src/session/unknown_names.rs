//! A statement that names a table, a table function or a data file that does not exist gets an
//! error saying which, with the closest known name ("did you mean") and its place in the
//! statement. The names come from the statement's syntax tree (the relations of its FROM
//! clauses, its CTEs) and the session's catalog, not from the engine's error text: asked only
//! once planning has failed, so a statement that plans pays nothing for it.

use std::ops::ControlFlow;

use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::planner::object_name_to_table_reference;
use sqlparser::ast::{ObjectName, Query, Spanned, TableFactor, Visit, Visitor};
use sqlparser::dialect::GenericDialect;

use crate::error::Error;
use crate::model;

/// Extensions of the data files a query can name as a table (`SELECT * FROM 'x.parquet'`).
pub const DATA_FILE_EXTENSIONS: [&str; 3] = [".csv", ".json", ".parquet"];

/// A relation of a FROM clause: its name, and whether it is called (a table function).
struct Relation {
    name: ObjectName,
    called: bool,
}

/// The relations and CTE names of a statement, in the order they appear.
#[derive(Default)]
struct Names {
    relations: Vec<Relation>,
    ctes: Vec<String>,
}

impl Visitor for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            self.ctes.extend(with.cte_tables.iter().map(|c| c.alias.name.value.to_ascii_lowercase()));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            self.relations.push(Relation { name: name.clone(), called: args.is_some() });
        }
        ControlFlow::Continue(())
    }
}

/// The error of the first name of `sql` that the session does not know, if any.
pub fn first_unknown(ctx: &SessionContext, sql: &str) -> Option<Error> {
    let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {}).ok()?;
    let mut names = Names::default();
    for statement in &statements {
        let inner = match statement {
            DFStatement::Statement(s) => s.as_ref(),
            DFStatement::Explain(e) => match e.statement.as_ref() {
                DFStatement::Statement(s) => s.as_ref(),
                _ => continue,
            },
            _ => continue,
        };
        let _ = inner.visit(&mut names);
    }
    names.relations.iter().find_map(|r| unknown(ctx, r, &names.ctes))
}

/// The error for relation `r` when the session does not know it.
fn unknown(ctx: &SessionContext, r: &Relation, ctes: &[String]) -> Option<Error> {
    let state = ctx.state();
    let words: Vec<String> = r.name.0.iter().filter_map(|p| p.as_ident().map(|i| i.value.clone())).collect();
    let written = words.join(".");
    if r.called {
        let name = object_name_to_table_reference(r.name.clone(), true).ok()?.table().to_string();
        if state.table_functions().contains_key(&name) {
            return None;
        }
        let names: Vec<&str> = state.table_functions().keys().map(String::as_str).collect();
        let message = crate::suggest::did_you_mean(format!("table function '{name}' not found"), &name, names);
        return Some(at(message, &r.name));
    }
    if words.len() == 1 && ctes.contains(&words[0].to_ascii_lowercase()) {
        return None;
    }
    // A path in FROM: a data file read by its extension.
    let lower = written.to_ascii_lowercase();
    if words.len() == 1 && (written.contains('/') || DATA_FILE_EXTENSIONS.iter().any(|e| lower.ends_with(e))) {
        let path = std::path::Path::new(&written);
        return match path.exists() {
            false => Some(Error::in_file(path, "no such file")),
            true if !DATA_FILE_EXTENSIONS.iter().any(|e| lower.ends_with(e)) => Some(Error::in_file(
                path,
                "not a file a query reads: a path in FROM reads a .csv, .json or .parquet file, by its extension",
            )),
            true => None,
        };
    }
    let reference = object_name_to_table_reference(r.name.clone(), true).ok()?;
    if ctx.table_exist(reference.clone()).unwrap_or(true) {
        return None;
    }
    let table = reference.table().to_string();
    let mut known: Vec<String> = model::TABLES.iter().map(|t| t.name.to_string()).collect();
    if let Some(public) = ctx.catalog(model::CATALOG).and_then(|c| c.schema(model::DEFAULT_SCHEMA)) {
        known.extend(public.table_names());
    }
    let message =
        crate::suggest::did_you_mean(format!("table '{written}' not found"), &table, known.iter().map(String::as_str));
    Some(at(message, &r.name))
}

/// A statement's error at the place of `name` (none when the parser gave it no place).
fn at(message: String, name: &ObjectName) -> Error {
    let start = name.span().start;
    if start.line > 0 && start.column > 0 {
        Error::Sql { message, line: start.line, column: start.column }
    } else {
        Error::Plan(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(sql: &str) -> Option<String> {
        let session = crate::session::Session::new();
        first_unknown(session.context(), sql).map(|e| format!("{:?} {e}", e.position()))
    }

    #[test]
    fn unknown_names_are_named_with_the_closest_known_one_and_their_place() {
        // DataFusion's own table function, called as a word before `(` on the second line.
        assert_eq!(
            error("SELECT generate_series_x\nFROM  Generate_Seris (1, 3)").as_deref(),
            Some("Some((2, 7)) table function 'generate_seris' not found; did you mean 'generate_series'?")
        );
        assert_eq!(
            error("SELECT * FROM mesages").as_deref(),
            Some("Some((1, 15)) table 'mesages' not found; did you mean 'messages'?")
        );
        assert_eq!(error("SELECT * FROM zzzzzzzz").as_deref(), Some("Some((1, 15)) table 'zzzzzzzz' not found"));
        // A CTE, a known function, a statement that names nothing unknown: nothing to say.
        assert_eq!(error("WITH m AS (SELECT 1 AS x) SELECT * FROM m"), None);
        assert_eq!(error("SELECT * FROM generate_series(1, 3)"), None);
        assert_eq!(error("SELECT nonsense FROM information_schema.tables"), None);
        // A path in FROM is a file.
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("out.parquet").display().to_string();
        assert_eq!(error(&format!("SELECT * FROM '{missing}'")), Some(format!("None {missing}: no such file")));
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "x").unwrap();
        let e = error(&format!("SELECT * FROM '{}'", notes.display())).unwrap();
        assert!(e.contains("not a file a query reads"), "{e}");
    }
}
