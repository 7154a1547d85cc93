//! Line-editing help for the REPL: Tab completes table, column, schema and function names
//! and SQL keywords from the current session. Lines are gathered into statements by the
//! REPL itself (`exec::Shell::repl`), which shows a continuation prompt for each line after
//! the first.

use std::sync::{Arc, RwLock};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

/// Shared list of completion words, refreshed by the shell after every statement.
pub type Words = Arc<RwLock<Vec<String>>>;

/// The REPL's rustyline helper.
#[derive(Debug, Default)]
pub struct ShellHelper {
    pub words: Words,
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        let start = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| i + head[i..].chars().next().map_or(1, char::len_utf8));
        let prefix = &head[start..];
        if prefix.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let lower = prefix.to_ascii_lowercase();
        let upper_case =
            prefix.chars().all(|c| !c.is_ascii_lowercase()) && prefix.chars().any(|c| c.is_ascii_uppercase());
        let lower_case = prefix.chars().all(|c| !c.is_ascii_uppercase());
        let words = self.words.read().map_err(|_| rustyline::error::ReadlineError::Interrupted)?;
        let mut out: Vec<Pair> = words
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

    #[test]
    fn completes_words_by_prefix() {
        let h = ShellHelper::default();
        *h.words.write().unwrap() = vec!["messages".into(), "message_latency".into(), "SELECT".into()];
        let hist = DefaultHistory::new();
        let ctx = Context::new(&hist);
        let (start, c) = h.complete("select * from mess", 18, &ctx).unwrap();
        assert_eq!(start, 14);
        assert_eq!(c.len(), 2);
        let (_, c) = h.complete("SEL", 3, &ctx).unwrap();
        assert_eq!(c[0].replacement, "SELECT");
    }
}
