//! What the shell shows about the session itself: the columns of a table with their meaning
//! (`\d NAME`), the functions with signature and description (`\df`), and the facts and row
//! counts of a trace (`\info`, `commdb info`). Each is built as a small Arrow table and
//! printed like any query result.

use std::sync::Arc;

use crate::error::{Result, ShellError};
use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use commdb_catalog::{Session, model};
use datafusion::common::TableReference;
use datafusion::prelude::DataFrame;
use futures::StreamExt;

fn text_frame(session: &Session, names: &[&str], rows: Vec<Vec<String>>) -> Result<DataFrame> {
    let schema = Arc::new(Schema::new(names.iter().map(|n| Field::new(*n, DataType::Utf8, false)).collect::<Vec<_>>()));
    let columns: Vec<ArrayRef> = (0..names.len())
        .map(|c| Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r[c].as_str()))) as ArrayRef)
        .collect();
    let batch = RecordBatch::try_new(schema, columns)?;
    Ok(session.context().read_batch(batch)?)
}

/// `\d NAME`: column, type, nullable, meaning.
pub async fn columns(session: &Session, name: &str) -> Result<DataFrame> {
    let reference = TableReference::from(name);
    let provider = session.context().table_provider(reference.clone()).await.map_err(|_| {
        // Offer the closest of the model's tables and those of the default schema.
        let mut known: Vec<String> = model::TABLES.iter().map(|t| t.name.to_string()).collect();
        if let Some(schema) = session
            .context()
            .catalog(commdb_catalog::model::CATALOG)
            .and_then(|c| c.schema(commdb_catalog::model::DEFAULT_SCHEMA))
        {
            known.extend(schema.table_names());
        }
        let message = format!("no table or view named '{name}' (\\d lists them)");
        ShellError::usage(commdb_catalog::suggest::did_you_mean(
            message,
            reference.table(),
            known.iter().map(String::as_str),
        ))
    })?;
    let table = reference.table();
    let is_trace_schema = match reference.schema() {
        None | Some(commdb_catalog::model::DEFAULT_SCHEMA) => session.default_trace().is_some(),
        Some(s) => session.trace(s).is_some(),
    };
    let doc = model::table_doc(table).filter(|_| is_trace_schema);
    let rows = provider
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let meaning = doc.and_then(|d| d.columns.iter().find(|c| c.name == f.name())).map_or("", |c| c.meaning);
            vec![
                f.name().clone(),
                f.data_type().to_string(),
                if f.is_nullable() { "yes" } else { "no" }.to_string(),
                meaning.to_string(),
            ]
        })
        .collect();
    text_frame(session, &["column", "type", "nullable", "meaning"], rows)
}

fn matches(pattern: Option<&str>, name: &str) -> bool {
    let Some(p) = pattern else { return true };
    let p = p.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    if p.contains('*') || p.contains('%') {
        let parts: Vec<&str> = p.split(['*', '%']).collect();
        let mut rest = name.as_str();
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                continue;
            }
            match rest.find(part) {
                Some(at) if i > 0 || at == 0 => rest = &rest[at + part.len()..],
                _ => return false,
            }
        }
        parts.last().is_none_or(|l| l.is_empty() || name.ends_with(l))
    } else {
        name.contains(&p)
    }
}

/// `\df NAME` for one of commdb's functions: its declared parameters in order (type, default,
/// meaning), then its output columns.
fn one_function(session: &Session, f: &commdb_udfs::Function) -> Result<DataFrame> {
    use commdb_analysis::declare::{Output, meaning};
    use commdb_analysis::params::ParamDefault;
    let mut rows: Vec<Vec<String>> = f
        .params
        .iter()
        .map(|p| {
            let default = match p.default {
                ParamDefault::Required => "required".to_string(),
                d => d.shown(),
            };
            vec!["parameter".into(), p.name.into(), p.ty.described().replace("\\|", "|"), default, p.meaning.into()]
        })
        .collect();
    match f.output {
        Output::Value(v) => {
            rows.push(vec!["returns".into(), String::new(), v.into(), String::new(), f.description.into()])
        }
        _ => {
            if let Output::InputThen(_) = f.output {
                rows.push(vec![
                    "column".into(),
                    "...".into(),
                    String::new(),
                    String::new(),
                    "the input relation's columns".into(),
                ]);
            }
            for c in f.columns() {
                rows.push(vec![
                    "column".into(),
                    c.name.into(),
                    (c.data_type)().to_string(),
                    String::new(),
                    meaning(c).into(),
                ]);
            }
            if let Output::ColumnsThen(_, rest) = f.output {
                rows.push(vec!["column".into(), "...".into(), String::new(), String::new(), rest.into()]);
            }
        }
    }
    text_frame(session, &["part", "name", "type", "default", "meaning"], rows)
}

/// `\df [PATTERN]`: commdb's functions first, then DataFusion's built-in ones; `\df NAME` of one
/// of commdb's functions shows its parameters and columns.
pub async fn functions(session: &Session, pattern: Option<&str>) -> Result<DataFrame> {
    if let Some(f) = pattern.and_then(commdb_udfs::function) {
        return one_function(session, f);
    }
    let mut rows: Vec<Vec<String>> = commdb_udfs::functions()
        .iter()
        .filter(|f| matches(pattern, f.name))
        .map(|f| {
            vec![
                f.name.to_string(),
                f.kind().as_str().to_string(),
                f.signature(),
                f.description.to_string(),
                "commdb".to_string(),
            ]
        })
        .collect();
    let sql = "SELECT routine_name, function_type, min(syntax_example), min(description) \
               FROM information_schema.routines GROUP BY routine_name, function_type ORDER BY routine_name";
    let df = session.context().sql(sql).await?;
    let mut stream = df.execute_stream().await?;
    let opts = FormatOptions::default().with_null("");
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let fmt: Vec<ArrayFormatter> =
            batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &opts)).collect::<Result<_, _>>()?;
        for i in 0..batch.num_rows() {
            let name = fmt[0].value(i).to_string();
            if matches(pattern, &name) && !commdb_udfs::functions().iter().any(|f| f.name == name) {
                let description = fmt[3].value(i).to_string().lines().next().unwrap_or("").to_string();
                rows.push(vec![
                    name,
                    fmt[1].value(i).to_string().to_lowercase(),
                    fmt[2].value(i).to_string(),
                    description,
                    "datafusion".into(),
                ]);
            }
        }
    }
    if rows.is_empty()
        && let Some(pattern) = pattern
    {
        let known: Vec<&str> = commdb_udfs::functions().iter().map(|f| f.name).collect();
        let message = format!("no function matches '{pattern}' (\\df lists them)");
        return Err(ShellError::usage(commdb_catalog::suggest::did_you_mean(message, pattern, known)));
    }
    text_frame(session, &["name", "kind", "signature", "description", "from"], rows)
}

/// `\info [NAME]`: the trace_info row as key/value pairs, then row counts and warnings.
pub fn info(session: &Session, name: Option<&str>) -> Result<DataFrame> {
    let trace = match name {
        Some(n) => session.trace(n).ok_or_else(|| ShellError::usage(format!("no trace attached as '{n}'")))?,
        None => session.default_trace().ok_or_else(|| ShellError::usage("no trace is open; \\open PATH opens one"))?,
    };
    let mut rows = Vec::new();
    let info = trace.table("trace_info")?;
    if let Some(b) = info.first() {
        let opts = FormatOptions::default().with_null("NULL");
        for (f, c) in b.schema().fields().iter().zip(b.columns()) {
            let v = ArrayFormatter::try_new(c.as_ref(), &opts)?.value(0).to_string();
            rows.push(vec![f.name().clone(), v]);
        }
    }
    for t in model::TABLES.iter().filter(|t| t.name != "trace_info") {
        rows.push(vec![format!("rows in {}", t.name), trace.row_count(t.name)?.to_string()]);
    }
    for (code, count, message) in trace.warnings()?.iter() {
        rows.push(vec![format!("warning {code}"), format!("{count}: {message}")]);
    }
    text_frame(session, &["key", "value"], rows)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns() {
        assert!(matches(Some("lat"), "latency_criteria"));
        assert!(matches(Some("lat*"), "latency_criteria"));
        assert!(!matches(Some("lat*"), "flat"));
        assert!(matches(Some("*_criteria"), "latency_criteria"));
        assert!(matches(None, "x"));
    }
}
