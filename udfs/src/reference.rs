//! The reference of commdb's tables and SQL functions as Markdown, generated from their
//! declarations: the trace model's table and column docs (commdb_catalog::model) and the
//! functions' declarations (`functions()`: parameters, output columns, description). docs/reference.md is this text; a test fails when the two
//! drift (`UPDATE_DOCS=1 cargo test -p commdb-tests --test behaviour docs::` rewrites it).

use std::fmt::Write;

use commdb_catalog::model::TABLES;

use crate::functions;
use commdb_analysis::declare::{Output, meaning};
use commdb_analysis::params::ParamDefault;

/// docs/reference.md.
pub fn markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Reference: tables and functions\n\nGenerated from the code's declarations (`catalog/src/model.rs`, each function's `Function` in udfs/src) by\n`UPDATE_DOCS=1 cargo test -p commdb-tests --test behaviour docs::`: change those, not this file. Times\nare Int64 nanoseconds, sizes bytes; see [the guide](guide.md) for how the tables are derived\nand what the analyses do.\n"
    );
    let _ = writeln!(out, "## Tables\n");
    for t in TABLES {
        let _ = writeln!(out, "- [{}](#{})", t.name, anchor(t.name));
    }
    for t in TABLES {
        let _ = writeln!(out, "\n### {}\n\nOne row per {}.", t.name, t.one_row_per);
        if !t.about.is_empty() {
            let _ = writeln!(out, "{}", t.about);
        }
        let _ = writeln!(out, "\n| column | type | meaning |\n| --- | --- | --- |");
        for c in t.columns {
            let _ = writeln!(out, "| {} | {} | {} |", c.name, (c.data_type)(), c.meaning);
        }
    }
    let _ = writeln!(out, "\n## Functions\n\n{}\n", commdb_analysis::declare::ARGUMENT_RULE);
    for f in functions() {
        let _ = writeln!(out, "- [{}](#{}) ({}): {}", f.name, anchor(f.name), f.kind().as_str(), f.description);
    }
    for f in functions() {
        let kind = capitalised(f.kind().as_str());
        let _ = writeln!(out, "\n### {}\n\n{kind} function.\n\n```\n{}\n```\n", f.name, f.signature());
        let _ = writeln!(out, "{}\n", capitalised(f.description));
        if !f.params.is_empty() {
            let by_name = if f.kind() == crate::Kind::Table { " (also by name, `name => value`)" } else { "" };
            let _ = writeln!(out, "Parameters, in order{by_name}:\n");
            let _ = writeln!(out, "| parameter | type | default | meaning |\n| --- | --- | --- | --- |");
            for p in f.params {
                let default = match p.default {
                    ParamDefault::Required => "required".to_string(),
                    d => d.shown(),
                };
                let _ = writeln!(out, "| {} | {} | {} | {} |", p.name, p.ty.described(), default, p.meaning);
            }
            let _ = writeln!(out);
        }
        match f.output {
            Output::Value(v) => {
                let _ = writeln!(out, "Returns {v}.");
            }
            Output::Columns(c) | Output::InputThen(c) | Output::ColumnsThen(c, _) => {
                let lead = match f.output {
                    Output::InputThen(_) => "Columns: the input relation's, then",
                    _ => "Columns",
                };
                let _ = writeln!(out, "{lead}:\n\n| column | type | meaning |\n| --- | --- | --- |");
                for c in c {
                    let _ = writeln!(out, "| {} | {} | {} |", c.name, (c.data_type)(), meaning(c));
                }
                if let Output::ColumnsThen(_, rest) = f.output {
                    let _ = writeln!(out, "\nThen {rest}.");
                }
            }
        }
    }
    out
}

/// GitHub's anchor of a heading made of one identifier.
fn anchor(name: &str) -> String {
    name.to_ascii_lowercase()
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
