//! Line-editing help for the REPL: Tab completes table, column, schema and function names
//! and SQL keywords from the current session; after a qualifier it completes that table's
//! columns, resolving aliases from the statement's FROM and JOIN clauses (`m.sen` gives
//! `m.send_ts` in `... FROM messages m`), and it completes file paths after `\i`, `\o`,
//! `\open` and inside the quotes of `ATTACH '`. Lines are gathered into statements by the
//! REPL itself (`exec::Shell::repl`), which shows a continuation prompt for each line after
//! the first.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

/// What Tab can complete: every name, and the columns of each table (keyed by its name in
/// lower case, plain and schema-qualified).
#[derive(Debug, Default)]
pub struct Completions {
    pub words: Vec<String>,
    pub columns: HashMap<String, Vec<String>>,
}

/// Completions shared with the shell, which refreshes them after every statement.
pub type Words = Arc<RwLock<Completions>>;

/// The REPL's rustyline helper.
#[derive(Default)]
pub struct ShellHelper {
    pub words: Words,
    files: FilenameCompleter,
}

impl ShellHelper {
    pub fn new(words: Words) -> Self {
        ShellHelper { words, files: FilenameCompleter::new() }
    }
}

/// Whether the text before the cursor is where a file path goes: the argument of `\i`, `\o`
/// or `\open`, or inside the quotes after ATTACH.
fn wants_path(head: &str) -> bool {
    let trimmed = head.trim_start();
    if ["\\i ", "\\o ", "\\open "].iter().any(|c| trimmed.starts_with(c)) {
        return true;
    }
    let upper = head.to_ascii_uppercase();
    upper.rfind("ATTACH").is_some_and(|at| head[at..].matches('\'').count() % 2 == 1)
}

/// Aliases the statement defines: `FROM t a`, `JOIN s.t AS b` (alias and table, lower case).
fn aliases(line: &str) -> HashMap<String, String> {
    let words: Vec<String> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut out = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        if w != "from" && w != "join" {
            continue;
        }
        let Some(table) = words.get(i + 1) else { continue };
        let alias = match words.get(i + 2).map(String::as_str) {
            Some("as") => words.get(i + 3),
            Some(a) if !is_clause_word(a) => words.get(i + 2),
            _ => None,
        };
        if let Some(alias) = alias {
            out.insert(alias.clone(), table.clone());
        }
    }
    out
}

/// Words that follow a table in a FROM clause and are not its alias.
fn is_clause_word(w: &str) -> bool {
    matches!(
        w,
        "where"
            | "join"
            | "inner"
            | "left"
            | "right"
            | "full"
            | "cross"
            | "on"
            | "using"
            | "group"
            | "order"
            | "limit"
            | "union"
            | "having"
            | "natural"
            | "window"
            | "offset"
    )
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        if wants_path(head) {
            return self.files.complete(line, pos, ctx);
        }
        let start = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| i + head[i..].chars().next().map_or(1, char::len_utf8));
        let prefix = &head[start..];
        if prefix.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let completions = self.words.read().map_err(|_| rustyline::error::ReadlineError::Interrupted)?;
        // A qualified name: the columns of the table the qualifier names (or is an alias of).
        if let Some((qualifier, partial)) = prefix.rsplit_once('.') {
            let q = qualifier.to_ascii_lowercase();
            let table = aliases(line).get(&q).cloned().unwrap_or(q);
            if let Some(columns) = completions.columns.get(&table) {
                let partial = partial.to_ascii_lowercase();
                let out: Vec<Pair> = columns
                    .iter()
                    .filter(|c| c.to_ascii_lowercase().starts_with(&partial))
                    .map(|c| Pair { display: c.clone(), replacement: format!("{qualifier}.{c}") })
                    .collect();
                if !out.is_empty() {
                    return Ok((start, out));
                }
            }
        }
        let lower = prefix.to_ascii_lowercase();
        let upper_case =
            prefix.chars().all(|c| !c.is_ascii_lowercase()) && prefix.chars().any(|c| c.is_ascii_uppercase());
        let lower_case = prefix.chars().all(|c| !c.is_ascii_uppercase());
        let mut out: Vec<Pair> = completions
            .words
            .iter()
            .filter(|w| w.to_ascii_lowercase().starts_with(&lower))
            .map(|w| {
                let is_keyword = w.chars().all(|c| !c.is_ascii_lowercase());
                let text = if upper_case {
                    w.to_ascii_uppercase()
                } else if lower_case && is_keyword {
                    w.to_ascii_lowercase()
                } else {
                    w.clone()
                };
                Pair { display: text.clone(), replacement: text }
            })
            .collect();
        out.sort_by(|a, b| a.replacement.cmp(&b.replacement));
        out.dedup_by(|a, b| a.replacement == b.replacement);
        Ok((start, out))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;
    use rustyline::history::DefaultHistory;

    fn helper() -> ShellHelper {
        let h = ShellHelper::new(Words::default());
        let mut c = h.words.write().unwrap();
        c.words = vec!["messages".into(), "message_latency".into(), "SELECT".into(), "run2.messages".into()];
        let columns: Vec<String> = ["msg_id", "send_ts", "send_call_start", "src"].map(String::from).to_vec();
        c.columns.insert("messages".into(), columns.clone());
        c.columns.insert("run2.messages".into(), columns);
        drop(c);
        h
    }

    fn complete(h: &ShellHelper, line: &str, pos: usize) -> (usize, Vec<String>) {
        let hist = DefaultHistory::new();
        let (start, c) = h.complete(line, pos, &Context::new(&hist)).unwrap();
        (start, c.into_iter().map(|p| p.replacement).collect())
    }

    #[test]
    fn completes_words_by_prefix() {
        let h = helper();
        assert_eq!(complete(&h, "select * from mess", 18), (14, vec!["message_latency".into(), "messages".into()]));
        assert_eq!(complete(&h, "SEL", 3).1, vec!["SELECT".to_string()]);
        assert_eq!(complete(&h, "select * from run2.mes", 22).1, vec!["run2.messages".to_string()]);
    }

    #[test]
    fn completes_columns_of_aliases_and_qualified_tables() {
        let h = helper();
        let line = "SELECT m.sen FROM messages m WHERE m.src = 0";
        assert_eq!(complete(&h, line, 12), (7, vec!["m.send_ts".into(), "m.send_call_start".into()]));
        let line = "SELECT x.ms FROM run2.messages AS x";
        assert_eq!(complete(&h, line, 11).1, vec!["x.msg_id".to_string()]);
        assert_eq!(complete(&h, "SELECT messages.sr", 18).1, vec!["messages.src".to_string()]);
        assert_eq!(aliases("FROM messages WHERE 1 = 1").len(), 0, "WHERE is not an alias");
    }

    #[test]
    fn completes_paths_where_a_file_goes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report_one.sql"), "").unwrap();
        let d = dir.path().display().to_string();
        let h = helper();
        for line in [format!("\\i {d}/rep"), format!("ATTACH '{d}/rep")] {
            let (_, c) = complete(&h, &line, line.len());
            assert_eq!(c.len(), 1, "{line}: {c:?}");
            assert!(c[0].ends_with("report_one.sql"), "{line}: {c:?}");
        }
        assert!(!wants_path("ATTACH 'a.csv' AS a; SELECT "));
    }
}
