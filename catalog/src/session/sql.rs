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

/// One piece of a script: a statement (without its semicolon) or, where `commands` are
/// recognised, a line that begins with a backslash outside any statement; each with the
/// 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    Statement(Statement),
    Command(Statement),
}

/// Where the scanner is: in plain SQL, or inside something a semicolon does not end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lex {
    Sql,
    /// A single-quoted string; `backslash`: an E'...' string, where a backslash escapes.
    Quoted {
        backslash: bool,
    },
    /// A quoted identifier, "..." or `...`.
    Identifier(u8),
    LineComment,
    /// A block comment, /* ... */, nested to this depth.
    Block(u32),
    /// A dollar-quoted string, ending with this tag ($$ or $tag$).
    Dollar(String),
    /// A triple-quoted raw string (R'''...''' or R"""..."""), ending with three of this quote.
    Triple(u8),
}

/// Whether `b` continues an identifier or a keyword (GenericDialect: letters, digits, _, $, #, @).
fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'#' | b'@') || b >= 0x80
}

/// The length of the number `b` begins with, as sqlparser reads one: digits, a point and
/// digits, an exponent (e, a sign, digits); or 0x and hex digits. What follows (a word, E'...',
/// $$) is a token of its own.
fn number_len(b: &[u8]) -> usize {
    let digits = |from: usize| from + b[from..].iter().take_while(|x| x.is_ascii_digit()).count();
    let mut j = digits(0);
    if j == 1 && b[0] == b'0' && b.get(1) == Some(&b'x') {
        return 2 + b[2..].iter().take_while(|x| x.is_ascii_hexdigit()).count();
    }
    if b.get(j) == Some(&b'.') {
        j = digits(j + 1);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let k = if matches!(b.get(j + 1), Some(b'+' | b'-')) { j + 2 } else { j + 1 };
        if b.get(k).is_some_and(u8::is_ascii_digit) {
            j = digits(k);
        }
    }
    j
}

/// Split `text` into statements at its top-level semicolons, in one pass over the text: quotes
/// ('...' with '' inside, E'...' with backslash escapes, "..." and `...` identifiers),
/// comments (-- to the end of the line, nested /* */; `//` is an operator) and dollar-quoted strings ($$...$$,
/// $tag$...$tag$) are read as sqlparser's GenericDialect reads them, so a semicolon inside
/// them ends nothing. Each statement is the text as written (its quotes and escapes intact),
/// from its first character that is no space or comment to before its semicolon. With
/// `commands`, a line that begins (after spaces) with a backslash where no statement has begun
/// is a command of the shell. Statements of comments alone are dropped; the last statement
/// needs no semicolon. Time and memory are linear in the text.
pub fn chunks(text: &str, commands: bool) -> Result<Vec<Chunk>> {
    Ok(spans(text, commands)?
        .into_iter()
        .map(|(from, to, line, command)| {
            let s = Statement { sql: text[from..to].to_string(), line };
            if command { Chunk::Command(s) } else { Chunk::Statement(s) }
        })
        .collect())
}

/// The pieces of `chunks` as byte ranges of `text`, with their first line and whether each is
/// a command.
fn spans(text: &str, commands: bool) -> Result<Vec<(usize, usize, u64, bool)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut lex = Lex::Sql;
    // Where the statement being read began (its first byte that is no space or comment).
    let mut start: Option<(usize, u64)> = None;
    let mut line = 1u64;
    let mut at_line_start = true;
    let mut i = 0;
    let push = |out: &mut Vec<(usize, usize, u64, bool)>, start: &mut Option<(usize, u64)>, end: usize| {
        if let Some((from, l)) = start.take() {
            out.push((from, from + text[from..end].trim_end().len(), l, false));
        }
    };
    while i < b.len() {
        let c = b[i];
        if at_line_start && commands && lex == Lex::Sql && start.is_none() {
            let indent = b[i..].iter().take_while(|&&x| x == b' ' || x == b'\t').count();
            if b.get(i + indent) == Some(&b'\\') {
                let end = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |n| i + n);
                let from = i + indent;
                out.push((from, from + text[from..end].trim_end().len(), line, true));
                i = end;
                continue;
            }
        }
        at_line_start = false;
        let next = b.get(i + 1).copied();
        let mut step = 1;
        match &mut lex {
            Lex::Sql => match c {
                b';' => push(&mut out, &mut start, i),
                b'-' if next == Some(b'-') => {
                    lex = Lex::LineComment;
                    step = 2;
                }
                b'/' if next == Some(b'*') => {
                    lex = Lex::Block(1);
                    step = 2;
                }
                // `//` is an operator (DuckDB's integer division), so `//*` opens no comment.
                b'/' if next == Some(b'/') => step = 2,
                c if c.is_ascii_whitespace() => {}
                _ => {
                    if start.is_none() {
                        start = Some((i, line));
                    }
                    // Words and numbers are read whole, so an E or a $ here begins a token.
                    match c {
                        b'\'' => lex = Lex::Quoted { backslash: false },
                        b'"' | b'`' => lex = Lex::Identifier(c),
                        // E'...' and X'...': a backslash escapes (sqlparser's escape and hex
                        // strings).
                        b'E' | b'e' | b'X' | b'x' if next == Some(b'\'') => {
                            lex = Lex::Quoted { backslash: true };
                            step = 2;
                        }
                        // R'...', R"...": raw strings, three quotes opening a triple-quoted one
                        // and two an empty one.
                        b'R' | b'r' if matches!(next, Some(b'\'' | b'"')) => {
                            let q = b[i + 1];
                            let quotes = b[i + 1..].iter().take(3).take_while(|&&x| x == q).count();
                            step = 1 + quotes;
                            match quotes {
                                3 => lex = Lex::Triple(q),
                                2 => {}
                                _ if q == b'\'' => lex = Lex::Quoted { backslash: false },
                                _ => lex = Lex::Identifier(q),
                            }
                        }
                        b'$' => {
                            // $$ or $tag$ opens a dollar-quoted string (a tag of letters, digits
                            // and _, as sqlparser reads it); $1 or $name is a placeholder.
                            let tag_len = b[i + 1..]
                                .iter()
                                .take_while(|&&x| x.is_ascii_alphanumeric() || x == b'_' || x >= 0x80)
                                .count();
                            if b.get(i + 1 + tag_len) == Some(&b'$') {
                                lex = Lex::Dollar(text[i..i + tag_len + 2].to_string());
                                step = tag_len + 2;
                            } else {
                                step = 1 + tag_len;
                            }
                        }
                        c if c.is_ascii_digit() => step = number_len(&b[i..]),
                        b'.' if next.is_some_and(|x| x.is_ascii_digit()) => step = number_len(&b[i..]),
                        c if word_byte(c) => {
                            // A whole word at once, so that $ and E inside it open nothing.
                            step = b[i..].iter().take_while(|&&x| word_byte(x)).count();
                        }
                        _ => {}
                    }
                }
            },
            Lex::Quoted { backslash } => match c {
                b'\\' if *backslash => step = 2,
                b'\'' if next == Some(b'\'') => step = 2,
                b'\'' => lex = Lex::Sql,
                _ => {}
            },
            Lex::Identifier(q) => {
                if c == *q {
                    if next == Some(*q) {
                        step = 2;
                    } else {
                        lex = Lex::Sql;
                    }
                }
            }
            Lex::LineComment => {
                if c == b'\n' {
                    lex = Lex::Sql;
                }
            }
            Lex::Block(depth) => {
                if c == b'/' && next == Some(b'*') {
                    *depth += 1;
                    step = 2;
                } else if c == b'*' && next == Some(b'/') {
                    *depth -= 1;
                    step = 2;
                    if *depth == 0 {
                        lex = Lex::Sql;
                    }
                }
            }
            Lex::Dollar(tag) => {
                if b[i..].starts_with(tag.as_bytes()) {
                    step = tag.len();
                    lex = Lex::Sql;
                }
            }
            Lex::Triple(q) => {
                if b[i..].starts_with(&[*q; 3]) {
                    step = 3;
                    lex = Lex::Sql;
                }
            }
        }
        for &x in &b[i..(i + step).min(b.len())] {
            if x == b'\n' {
                line += 1;
                at_line_start = true;
            }
        }
        i += step;
    }
    let unterminated = match lex {
        Lex::Quoted { .. } => Some("a string ('...') that is not closed"),
        Lex::Identifier(_) => Some("a quoted identifier that is not closed"),
        Lex::Block(_) => Some("a comment (/* ... */) that is not closed"),
        Lex::Dollar(_) => Some("a dollar-quoted string that is not closed"),
        Lex::Triple(_) => Some("a triple-quoted string that is not closed"),
        Lex::Sql | Lex::LineComment => None,
    };
    if let (Some(what), Some((_, l))) = (unterminated, start) {
        return Err(Error::argument(format!(
            "cannot read SQL: the statement that begins on line {l} ends inside {what}"
        )));
    }
    if let Some(what) = unterminated.filter(|_| start.is_none()) {
        return Err(Error::argument(format!("cannot read SQL: the script ends inside {what}")));
    }
    push(&mut out, &mut start, b.len());
    Ok(out)
}

/// Split a script at top-level semicolons (`chunks` without commands).
pub fn split_statements(script: &str) -> Result<Vec<Statement>> {
    Ok(chunks(script, false)?
        .into_iter()
        .map(|c| match c {
            Chunk::Statement(s) | Chunk::Command(s) => s,
        })
        .collect())
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
    fn statements_are_kept_as_written() {
        let s = split_statements("SELECT 'a''''b'; SELECT 'it''s' AS \"a\"\"b\"; SELECT E'x\\';y'; SELECT $t$ ; $t$")
            .unwrap();
        let sql: Vec<&str> = s.iter().map(|x| x.sql.as_str()).collect();
        assert_eq!(sql, ["SELECT 'a''''b'", "SELECT 'it''s' AS \"a\"\"b\"", "SELECT E'x\\';y'", "SELECT $t$ ; $t$"]);
        let s = split_statements("/* a /* nested */ ; */ SELECT 1; -- ; \n SELECT `x;y`").unwrap();
        assert_eq!(s.iter().map(|x| x.sql.as_str()).collect::<Vec<_>>(), ["SELECT 1", "SELECT `x;y`"]);
        let e = split_statements("SELECT 1;\nSELECT 'open").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not closed"), "{e}");
        // Many statements in linear time: 200,000 of them, and a line of 1,000,000 semicolons.
        let many = "SELECT 1;\n".repeat(200_000);
        assert_eq!(split_statements(&many).unwrap().len(), 200_000);
        assert!(split_statements(&";".repeat(1_000_000)).unwrap().is_empty());
    }

    /// The top-level semicolons sqlparser's tokenizer finds, as byte offsets.
    fn semicolons_of_sqlparser(text: &str) -> Option<Vec<usize>> {
        let tokens = tokenize(text).ok()?;
        let line_starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let offset = |l: u64, c: u64| {
            let from = line_starts[l as usize - 1];
            from + text[from..].char_indices().nth(c as usize - 1).map_or(0, |(i, _)| i)
        };
        Some(
            tokens
                .iter()
                .filter(|t| t.token == Token::SemiColon)
                .map(|t| offset(t.span.start.line, t.span.start.column))
                .collect(),
        )
    }

    #[test]
    fn splits_where_sqlparser_does() {
        // Random texts of the pieces that hide or show a semicolon; wherever sqlparser reads a
        // text, our statements end at its top-level semicolons and hold none of them.
        const PIECES: &[&str] = &[
            "'", "''", "\"", "`", ";", "--", "\n", "/*", "*/", "$$", "$a$", "$1", "E'", "e'", "\\", "x", " ", "a$",
            "N'", "U&'", "1", "é", "*", "/", "-", "$", "R'", "r\"", "B'", "X'", "1e", "0x", ".", "'''",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut compared = 0;
        for _ in 0..std::env::var("COMMDB_SPLIT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(60_000) {
            let n = (next() % 14) as usize;
            let text: String = (0..n).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
            let Some(semicolons) = semicolons_of_sqlparser(&text) else { continue };
            let ours = spans(&text, false).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            for &(from, to, _, _) in &ours {
                let sql = &text[from..to];
                assert!(semicolons.iter().all(|&p| p < from || p >= to), "{text:?}: {sql:?} holds a semicolon");
                // It ends at one of sqlparser's semicolons, after spaces and comments, or at the end.
                let next = semicolons.iter().find(|&&p| p >= to).copied().unwrap_or(text.len());
                assert!(
                    chunks(&text[to..next], false).is_ok_and(|c| c.is_empty()),
                    "{text:?}: {sql:?} ends where sqlparser has no semicolon"
                );
            }
            compared += 1;
        }
        assert!(compared > 20_000, "{compared}");
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
