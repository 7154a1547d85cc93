//! The reference of commdb's tables and SQL functions as Markdown, generated from their
//! declarations: the trace model's table and column docs (commdb_catalog::model) and the
//! functions' docs (`functions()`). docs/reference.md is this text; a test fails when the two
//! drift (`UPDATE_DOCS=1 cargo test -p commdb-tests --test docs` rewrites it).

use std::fmt::Write;

use commdb_catalog::model::TABLES;

use crate::functions;

/// docs/reference.md.
pub fn markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Reference: tables and functions\n\nGenerated from the code's declarations (`catalog/src/model.rs`, `udfs/src/lib.rs`) by\n`UPDATE_DOCS=1 cargo test -p commdb-tests --test docs`: change those, not this file. Times\nare Int64 nanoseconds, sizes bytes; see [the guide](guide.md) for how the tables are derived\nand what the analyses do.\n"
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
    let _ = writeln!(out, "\n## Functions\n");
    for f in functions() {
        let _ = writeln!(out, "- [{}](#{}) ({}): {}", f.name, anchor(f.name), f.kind, f.description);
    }
    for f in functions() {
        let _ = writeln!(out, "\n### {}\n\n{} function.\n\n```\n{}\n```\n", f.name, capitalised(f.kind), f.signature);
        if !f.parameters.is_empty() {
            let _ =
                writeln!(out, "Parameters, in order (also by name, `name => value`): {}.\n", f.parameters.join(", "));
        }
        let _ = writeln!(out, "{}", capitalised(f.description));
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
