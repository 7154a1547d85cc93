//! SQL text handling that DataFusion does not do for us: splitting a script into statements
//! (with the line each starts on, for error messages) and parsing commdb's own statements
//! `ATTACH 'path' [AS name] [(TYPE csv, NODES 'file', TIME_UNIT 'us', CLOCK_CORRECTION off,
//! CLOCK_SYNC 'sync.csv')]`, `DETACH name` and `SET clock_correction = off|model|clc`.
//! Both work on sqlparser's tokens, so quotes, comments and dollar strings are respected.

use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{Error, Result};

/// One statement of a script and the 1-based line where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub sql: String,
    pub line: u64,
}

fn tokenize(sql: &str) -> std::result::Result<Vec<TokenWithSpan>, String> {
    Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location().map_err(|e| e.to_string())
}

fn is_blank(t: &Token) -> bool {
    matches!(t, Token::Whitespace(_))
}

/// Split a script at top-level semicolons. Statements holding only comments are dropped.
/// A trailing statement without a semicolon is kept.
pub fn split_statements(script: &str) -> Result<Vec<Statement>> {
    let tokens = tokenize(script).map_err(|m| Error::argument(format!("cannot read SQL: {m}")))?;
    let mut out = Vec::new();
    let mut text = String::new();
    let mut line = None;
    for t in tokens {
        match &t.token {
            Token::SemiColon => {
                if let Some(l) = line.take() {
                    out.push(Statement { sql: text.trim().to_string(), line: l });
                }
                text.clear();
            }
            Token::EOF => {}
            tok => {
                if line.is_none() {
                    if is_blank(tok) {
                        continue;
                    }
                    line = Some(t.span.start.line);
                }
                text.push_str(&tok.to_string());
            }
        }
    }
    if let Some(l) = line {
        out.push(Statement { sql: text.trim().to_string(), line: l });
    }
    Ok(out)
}

/// Whether `text` is one or more complete statements (ends with a semicolon outside quotes
/// and comments). Used by the shell to decide when a multi-line entry is finished.
pub fn is_complete(text: &str) -> bool {
    let Ok(tokens) = tokenize(text) else { return false };
    tokens
        .iter()
        .rev()
        .find(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .is_some_and(|t| t.token == Token::SemiColon)
}

/// Whether `text` holds anything but whitespace and comments (an unterminated quote counts).
pub fn has_statement(text: &str) -> bool {
    match tokenize(text) {
        Ok(tokens) => tokens.iter().any(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF)),
        Err(_) => true,
    }
}

/// commdb's own statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Attach {
        path: String,
        name: Option<String>,
        options: Vec<(String, String)>,
    },
    Detach {
        name: String,
    },
    /// `SET clock_correction = off|model|clc`: the correction later ATTACHes apply.
    SetClockCorrection {
        value: String,
    },
    /// `SUMMARIZE name` or `SUMMARIZE SELECT ...`: the query whose columns to summarise, and
    /// how far its first line's columns lie from the statement's.
    Summarize {
        query: String,
        shift: i64,
    },
}

/// Parse ATTACH / DETACH / SET clock_correction / SUMMARIZE; `Ok(None)` for any other
/// statement.
pub fn parse_command(sql: &str) -> Result<Option<Command>> {
    let Ok(tokens) = tokenize(sql) else { return Ok(None) };
    let tokens: Vec<Token> = tokens
        .into_iter()
        .map(|t| t.token)
        .filter(|t| !is_blank(t) && *t != Token::EOF && *t != Token::SemiColon)
        .collect();
    let keyword = |i: usize| match tokens.get(i) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let first = keyword(0);
    let mut i = 1;
    if keyword(1).as_deref() == Some("DATABASE") {
        i = 2;
    }
    let err = |m: &str| Err(Error::argument(m.to_string()));
    match first.as_deref() {
        Some("ATTACH") => {
            let path = match tokens.get(i) {
                Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => s.clone(),
                _ => {
                    return err(
                        "ATTACH expects a quoted path: ATTACH 'trace.csv' AS name [(TYPE csv, NODES 'nodes.csv', TIME_UNIT 'us')]",
                    );
                }
            };
            i += 1;
            let mut name = None;
            if keyword(i).as_deref() == Some("AS") {
                name = match tokens.get(i + 1) {
                    Some(Token::Word(w)) => Some(w.value.clone()),
                    _ => return err("ATTACH ... AS expects a schema name"),
                };
                i += 2;
            }
            let mut options = Vec::new();
            if tokens.get(i) == Some(&Token::LParen) {
                i += 1;
                loop {
                    let key = match tokens.get(i) {
                        Some(Token::Word(w)) => w.value.to_ascii_uppercase(),
                        _ => {
                            return err(
                                "ATTACH options are written (KEY value, ...), e.g. (TYPE csv, NODES 'nodes.csv')",
                            );
                        }
                    };
                    let value = match tokens.get(i + 1) {
                        Some(Token::Word(w)) => w.value.clone(),
                        Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => s.clone(),
                        Some(Token::Number(n, _)) => n.clone(),
                        _ => return Err(Error::argument(format!("ATTACH option {key} needs a value"))),
                    };
                    options.push((key, value));
                    i += 2;
                    match tokens.get(i) {
                        Some(Token::Comma) => i += 1,
                        Some(Token::RParen) => {
                            i += 1;
                            break;
                        }
                        _ => return err("ATTACH options: expected ',' or ')'"),
                    }
                }
            }
            if i != tokens.len() {
                return Err(Error::argument(format!("ATTACH: unexpected '{}' after the statement", tokens[i])));
            }
            Ok(Some(Command::Attach { path, name, options }))
        }
        Some("SET") if keyword(1).as_deref() == Some("CLOCK_CORRECTION") => {
            let is_assign = matches!(tokens.get(2), Some(Token::Eq)) || keyword(2).as_deref() == Some("TO");
            match (is_assign, tokens.get(3), tokens.len()) {
                (true, Some(Token::Word(w)), 4) => Ok(Some(Command::SetClockCorrection { value: w.value.clone() })),
                (true, Some(Token::SingleQuotedString(v)), 4) => {
                    Ok(Some(Command::SetClockCorrection { value: v.clone() }))
                }
                _ => err("SET clock_correction expects one of off, model, clc: SET clock_correction = off"),
            }
        }
        Some("SUMMARIZE") => {
            let text = sql.trim_end().trim_end_matches(';');
            let keyword_end = text.to_ascii_uppercase().find("SUMMARIZE").map_or(0, |i| i + "SUMMARIZE".len());
            let rest = text[keyword_end..].trim_start();
            // The column where the rest begins in the statement's first line.
            let before = &text[..text.len() - rest.len()];
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() as i64;
            let starts_query = matches!(keyword(1).as_deref(), Some("SELECT" | "WITH" | "VALUES"))
                || tokens.get(1) == Some(&Token::LParen);
            match tokens.len() {
                1 => err("SUMMARIZE expects a table or a query: SUMMARIZE messages, SUMMARIZE SELECT ..."),
                _ if starts_query => Ok(Some(Command::Summarize { query: rest.to_string(), shift: column })),
                _ => {
                    let prefix = "SELECT * FROM ";
                    let query = format!("{prefix}{rest}");
                    Ok(Some(Command::Summarize { query, shift: column - prefix.len() as i64 }))
                }
            }
        }
        Some("DETACH") => match (tokens.get(i), tokens.len() == i + 1) {
            (Some(Token::Word(w)), true) if w.keyword != Keyword::DATABASE => {
                Ok(Some(Command::Detach { name: w.value.clone() }))
            }
            _ => err("DETACH expects a schema name: DETACH name"),
        },
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_lines_and_respects_quotes() {
        let s = split_statements("-- header\nSELECT 1;\n\nSELECT ';'\n  FROM t; -- done\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0], Statement { sql: "SELECT 1".into(), line: 2 });
        assert_eq!(s[1].line, 4);
        assert!(s[1].sql.contains("';'"));
        assert_eq!(split_statements("select 2").unwrap()[0].sql, "select 2");
    }

    #[test]
    fn completeness() {
        assert!(is_complete("select 1;"));
        assert!(is_complete("select 1; -- note"));
        assert!(!is_complete("select ';"));
        assert!(!is_complete("select 1"));
    }

    #[test]
    fn attach_and_detach() {
        let c = parse_command("ATTACH 'a.csv' AS run2 (TYPE csv, NODES 'n.csv', TIME_UNIT us);").unwrap().unwrap();
        assert_eq!(
            c,
            Command::Attach {
                path: "a.csv".into(),
                name: Some("run2".into()),
                options: vec![
                    ("TYPE".into(), "csv".into()),
                    ("NODES".into(), "n.csv".into()),
                    ("TIME_UNIT".into(), "us".into())
                ]
            }
        );
        assert_eq!(parse_command("detach run2").unwrap(), Some(Command::Detach { name: "run2".into() }));
        assert_eq!(parse_command("SELECT 1").unwrap(), None);
        assert!(parse_command("ATTACH x").is_err());
        assert!(parse_command("ATTACH 'x' AS y z").is_err());
        assert_eq!(
            parse_command("set CLOCK_CORRECTION to 'clc';").unwrap(),
            Some(Command::SetClockCorrection { value: "clc".into() })
        );
        assert!(parse_command("SET clock_correction off").is_err());
        assert_eq!(parse_command("SET datafusion.execution.batch_size = 10").unwrap(), None);
    }
}
