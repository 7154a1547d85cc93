//! Backslash commands of the shell. Parsed with `FromStr` into an enum; the ones that are
//! plain queries are rewritten to SQL over information_schema (as `\d` is SHOW TABLES in
//! other shells), the rest act on the session or the output settings.

use std::path::PathBuf;
use std::str::FromStr;

use crate::error::ShellError;
use crate::fit::Expanded;
use crate::print::Format;

/// A backslash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `\d`: every table and view.
    /// `\d`, `\dt [PATTERN]`: tables and views, those whose name matches PATTERN (`*`, `?`).
    ListTables(Option<String>),
    /// `\d NAME`: the columns of a table, with their meaning for trace tables.
    Describe(String),
    /// `\df [PATTERN]`: functions with signature and description.
    ListFunctions(Option<String>),
    /// `\open PATH [AS NAME]`.
    Open {
        path: String,
        name: Option<String>,
    },
    /// `\connect df://HOST:PORT`: run the session's queries on a cluster from now on.
    Connect(String),
    /// `\i FILE`: run a script.
    Include(PathBuf),
    /// `\o [FILE]`: send results to a file, or back to stdout.
    Output(Option<PathBuf>),
    /// `\format X`.
    Format(Format),
    /// `\timing [on|off]`.
    Timing(Option<bool>),
    /// `\x [on|off|auto]`: expanded display (no argument: on, or off when it is on).
    Expanded(Option<Expanded>),
    /// `\info [NAME]`: trace_info and row counts of a trace.
    Info(Option<String>),
    /// `\dot FILE EDGES_SQL [; NODES_SQL]`: a graph as Graphviz DOT.
    Dot {
        path: PathBuf,
        edges: String,
        nodes: Option<String>,
    },
    /// `\chart FILE.svg SQL`: a chart of the query's result (`crate::chart`).
    Chart {
        path: PathBuf,
        sql: String,
    },
    /// `\report FILE.html`: the one-page report of the default trace (`crate::report`).
    Report(PathBuf),
    /// `\echo TEXT`: a line of text, such as a report's title for the table that follows.
    Echo(String),
    Help,
    Quit,
}

/// A backslash command as `\\?` lists it: its names (the first is shown), how its arguments
/// are written, and what it does (further lines of the text are indented under the first).
pub struct Spec {
    pub names: &'static [&'static str],
    pub args: &'static str,
    pub does: &'static str,
}

const fn spec(names: &'static [&'static str], args: &'static str, does: &'static str) -> Spec {
    Spec { names, args, does }
}

/// Every backslash command, in the order `\\?` lists them. The parser accepts only these
/// names, so the help cannot leave one out.
pub const COMMANDS: &[Spec] = &[
    spec(&["\\d"], "", "list tables and views"),
    spec(&["\\dt"], "[PATTERN]", "the same, those whose name matches PATTERN (* any text, ? one character)"),
    spec(&["\\d"], "NAME", "columns of a table (type and meaning)"),
    spec(&["\\df"], "[PATTERN]", "functions: signature and description (\\df NAME: its parameters, columns)"),
    spec(&["\\open"], "PATH [AS N]", "open a trace (CSV, commdb store, generate:...) as schema N"),
    spec(&["\\info"], "[NAME]", "trace facts and row counts (default trace if no NAME)"),
    spec(&["\\connect"], "df://H:P", "run queries over stores on the cluster whose scheduler is at H:P"),
    spec(&["\\i"], "FILE", "run the SQL statements of a file"),
    spec(&["\\o"], "[FILE]", "write results to FILE (no FILE: back to the terminal)"),
    spec(
        &["\\dot"],
        "FILE E [; N]",
        "write edge query E (from, to, [latency], [label]) and node query N\n(id, [label], [load_balance]) as a Graphviz DOT graph",
    ),
    spec(
        &["\\chart"],
        "FILE.svg Q",
        "draw query Q as an SVG chart: x = first column; bars for text x, lines\nfor numeric or time x, a heatmap for (x, y, value) rows whose x repeats",
    ),
    spec(&["\\report"], "FILE.html", "write a one-page HTML report of the default trace (figures and diagnosis)"),
    spec(&["\\format"], "X", "table, csv, tsv, json, ndjson or markdown"),
    spec(&["\\echo"], "TEXT", "print TEXT (a title in reports; on stderr for csv, tsv and json)"),
    spec(&["\\timing"], "[on|off]", "show how long each statement took"),
    spec(
        &["\\x"],
        "[on|off|auto]",
        "print each row as a block of column | value lines (auto, the default:\nwhen a table cannot show every column even with its text wrapped);\nno argument turns it on, or off when it is on",
    ),
    spec(&["\\?", "\\h", "\\help"], "", "this help"),
    spec(&["\\q", "\\quit"], "", "quit (or Ctrl-D)"),
];

/// The width of the command column of the help.
const USAGE_WIDTH: usize = 18;

/// The help `\\?` prints, one entry per command of `COMMANDS`.
pub fn help() -> String {
    let mut out = String::new();
    for c in COMMANDS {
        let usage = if c.args.is_empty() { c.names[0].to_string() } else { format!("{} {}", c.names[0], c.args) };
        for (i, line) in c.does.lines().enumerate() {
            let left = if i == 0 { usage.as_str() } else { "" };
            out.push_str(&format!("{left:<USAGE_WIDTH$} {line}\n"));
        }
    }
    out.push_str("SQL statements end with ';' and may span lines. Ctrl-C cancels a running query.");
    out
}

impl FromStr for Command {
    type Err = ShellError;

    fn from_str(line: &str) -> Result<Self, ShellError> {
        let line = line.trim().trim_end_matches(';').trim();
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let arg = (!rest.is_empty()).then(|| unquote(rest));
        if !COMMANDS.iter().any(|c| c.names.contains(&cmd)) {
            return Err(ShellError::usage(format!("unknown command '{cmd}'; \\? lists the commands")));
        }
        match cmd {
            "\\d" => Ok(arg.map_or(Command::ListTables(None), Command::Describe)),
            "\\dt" => Ok(Command::ListTables(arg)),
            "\\df" => Ok(Command::ListFunctions(arg)),
            "\\open" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                match words.as_slice() {
                    [path] => Ok(Command::Open { path: unquote(path), name: None }),
                    [path, kw, name] if kw.eq_ignore_ascii_case("as") => {
                        Ok(Command::Open { path: unquote(path), name: Some((*name).to_string()) })
                    }
                    _ => Err(ShellError::usage("usage: \\open PATH [AS NAME]")),
                }
            }
            "\\info" => Ok(Command::Info(arg)),
            "\\connect" => {
                arg.map(Command::Connect).ok_or_else(|| ShellError::usage("usage: \\connect df://HOST:PORT"))
            }
            "\\i" => arg.map(|a| Command::Include(a.into())).ok_or_else(|| ShellError::usage("usage: \\i FILE")),
            "\\o" => Ok(Command::Output(arg.map(PathBuf::from))),
            "\\dot" => {
                let usage = "usage: \\dot FILE EDGES_SQL [; NODES_SQL], e.g. \\dot dag.dot SELECT * FROM dag_edges(); SELECT * FROM dag_nodes()";
                let (file, sql) = rest.split_once(char::is_whitespace).ok_or_else(|| ShellError::usage(usage))?;
                let (edges, nodes) = commdb_report::dot::split_queries(sql);
                if edges.is_empty() {
                    return Err(ShellError::usage(usage));
                }
                Ok(Command::Dot { path: unquote(file).into(), edges, nodes })
            }
            "\\chart" => {
                let usage = "usage: \\chart FILE.svg SQL, e.g. \\chart regions.svg SELECT region, sum(duration) FROM calls GROUP BY 1";
                let (file, sql) = rest.split_once(char::is_whitespace).ok_or_else(|| ShellError::usage(usage))?;
                let path = PathBuf::from(unquote(file));
                if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
                    return Err(ShellError::usage(format!(
                        "\\chart writes SVG: give a file named *.svg, not '{}'",
                        path.display()
                    )));
                }
                let sql = sql.trim().trim_end_matches(';').trim().to_string();
                if sql.is_empty() {
                    return Err(ShellError::usage(usage));
                }
                Ok(Command::Chart { path, sql })
            }
            "\\report" => {
                let path = PathBuf::from(unquote(rest.trim()));
                if rest.trim().is_empty() || !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("html")) {
                    return Err(ShellError::usage("usage: \\report FILE.html, e.g. \\report report.html"));
                }
                Ok(Command::Report(path))
            }
            "\\format" => match arg {
                Some(f) => f.parse().map(Command::Format),
                None => Err(ShellError::usage("usage: \\format table|csv|tsv|json|ndjson|markdown")),
            },
            "\\timing" => match arg.as_deref() {
                None => Ok(Command::Timing(None)),
                Some("on") => Ok(Command::Timing(Some(true))),
                Some("off") => Ok(Command::Timing(Some(false))),
                Some(other) => Err(ShellError::usage(format!("usage: \\timing [on|off], got '{other}'"))),
            },
            "\\echo" => Ok(Command::Echo(arg.unwrap_or_default())),
            "\\x" => match arg {
                None => Ok(Command::Expanded(None)),
                Some(mode) => mode.parse().map(|m| Command::Expanded(Some(m))).map_err(|e| e.within("\\x")),
            },
            "\\?" | "\\h" | "\\help" => Ok(Command::Help),
            "\\q" | "\\quit" => Ok(Command::Quit),
            other => Err(ShellError::Runtime(format!("{other}: listed in COMMANDS but not parsed"))),
        }
    }
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    for q in ['\'', '"'] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return s[1..s.len() - 1].to_string();
        }
    }
    s.to_string()
}

/// SQL listing tables and views of every schema, each trace's tables once: under the trace's
/// schema (the default trace marked), not again as the plain names in `public`, which then
/// lists only the user's own tables and views.
pub fn list_tables_sql(default_trace: Option<&str>, pattern: Option<&str>) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    // psql's pattern: * any text, ? one character; LIKE's own wildcards are taken literally.
    let matching = pattern.map_or(String::new(), |p| {
        let like: String = p
            .chars()
            .map(|c| match c {
                '*' => "%".to_string(),
                '?' => "_".to_string(),
                '%' | '_' | '\\' => format!("\\{c}"),
                c => c.to_string(),
            })
            .collect();
        format!(" AND table_name LIKE {} ESCAPE '\\'", quote(&like))
    });
    let Some(default) = default_trace else {
        return format!(
            "SELECT table_schema AS schema, table_name AS name, table_type AS type \
             FROM information_schema.tables WHERE table_schema <> 'information_schema'{matching} \
             ORDER BY table_schema = 'public' DESC, table_schema, table_name"
        );
    };
    let trace_tables: Vec<String> = commdb_catalog::model::TABLES.iter().map(|t| quote(t.name)).collect();
    format!(
        "SELECT CASE WHEN table_schema = {d} THEN table_schema || ' (default)' ELSE table_schema END AS schema, \
                table_name AS name, table_type AS type \
         FROM information_schema.tables \
         WHERE table_schema <> 'information_schema'{matching} \
           AND NOT (table_schema = 'public' AND table_name IN ({names}) AND table_type = 'BASE TABLE') \
         ORDER BY table_schema = {d} DESC, table_schema = 'public' DESC, table_schema, table_name",
        d = quote(default),
        names = trace_tables.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Command {
        line.parse().unwrap_or_else(|e: ShellError| panic!("{line}: {e}"))
    }

    #[test]
    fn parses_commands() {
        assert_eq!(parsed("\\d"), Command::ListTables(None));
        assert_eq!(parsed("\\dt"), Command::ListTables(None));
        assert_eq!(parsed("\\dt mess*"), Command::ListTables(Some("mess*".into())));
        assert_eq!(parsed("\\d messages"), Command::Describe("messages".into()));
        assert_eq!(parsed("\\df lat*"), Command::ListFunctions(Some("lat*".into())));
        assert_eq!(
            "\\open 'a b.csv' AS r2".parse::<Command>().unwrap_err().to_string(),
            "usage: \\open PATH [AS NAME]"
        );
        assert_eq!(parsed("\\open run.csv as r2"), Command::Open { path: "run.csv".into(), name: Some("r2".into()) });
        assert_eq!(parsed("\\format csv"), Command::Format(Format::Csv));
        assert!("\\format xml".parse::<Command>().is_err());
        assert_eq!(parsed("\\timing on"), Command::Timing(Some(true)));
        assert_eq!(parsed("\\echo 'Waits per rank'"), Command::Echo("Waits per rank".into()));
        assert_eq!(parsed("\\x"), Command::Expanded(None));
        assert_eq!(parsed("\\x auto"), Command::Expanded(Some(Expanded::Auto)));
        assert_eq!(
            "\\x wide".parse::<Command>().unwrap_err().to_string(),
            "\\x: unknown expanded display 'wide': expected on, off or auto"
        );
        assert!("\\zz".parse::<Command>().is_err());
        assert_eq!(parsed("\\q"), Command::Quit);
    }

    #[test]
    fn the_help_lists_every_command_and_every_listed_command_parses() {
        let help = help();
        for c in COMMANDS {
            assert!(help.contains(c.names[0]), "{} is not in the help", c.names[0]);
            for name in c.names {
                // With the arguments the help shows (placeholders are fine for parsing), a
                // listed command is never unknown.
                let line = match c.args {
                    "" => name.to_string(),
                    "FILE.svg Q" => format!("{name} a.svg SELECT 1"),
                    "FILE E [; N]" => format!("{name} a.dot SELECT 1"),
                    "FILE.html" => format!("{name} a.html"),
                    "X" => format!("{name} csv"),
                    "[on|off]" | "[on|off|auto]" => format!("{name} on"),
                    args => format!("{name} {}", args.replace(['[', ']'], "")),
                };
                let got = line.parse::<Command>();
                assert!(got.is_ok(), "{line}: {}", got.err().map(|e| e.to_string()).unwrap_or_default());
            }
        }
        assert!("\\zz".parse::<Command>().unwrap_err().to_string().contains("unknown command '\\zz'"));
    }
}
