//! The `.prv` header: `#Paraver (DATE):DURATION[_ns]:NODES:NAPPL:APPL_1:...`, where NODES is
//! `N(c1,...,cN)` (CPUs per node) and each application is `NTASKS(T1:N1,...)[,NCOMMS]` (threads
//! and 1-based node of each task, then how many communicator lines follow), and the lines after
//! it: communicators `c:APPL:ID:NTASKS:TASK...` (tasks 1-based; `c:APPL:ID:1:-1`, MPItrace's
//! MPI_COMM_SELF, is each task's own) and `#` comments, among them the
//! note Paraver's cutter leaves. Layout from BSC's Paraver trace format description, summarised
//! in PARAVER-NOTES.md.

use std::path::Path;

use crate::error::{Error, Result};

/// One task of an application: its threads and the (1-based) node it ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub threads: u32,
    pub node: u32,
}

/// A communicator line: its application, id and (1-based) member tasks in communicator order.
/// `per_rank`: the line lists one task, -1, as MPItrace wrote MPI_COMM_SELF (each task's own
/// communicator; `tasks` is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommLine {
    pub app: u32,
    pub id: i64,
    pub tasks: Vec<u32>,
    pub per_rank: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// The date as written (`DD/MM/YYYY at HH:MM`), when given.
    pub date: Option<String>,
    /// The trace's end time in ns.
    pub duration_ns: i64,
    /// Times are in ns (`_ns` suffix), else in us.
    pub nanoseconds: bool,
    /// CPUs of each node.
    pub node_cpus: Vec<u32>,
    /// Tasks of each application.
    pub apps: Vec<Vec<Task>>,
    pub comms: Vec<CommLine>,
    /// The trace was cut from a longer one (a comment naming the cutter).
    pub cut: bool,
    /// The 1-based line number of the first record.
    pub first_record_line: u64,
    /// What was left out of the header's lines, as `path:line: what` (the reader reports them
    /// as warnings).
    pub problems: Vec<String>,
}

/// Split `text` at the `sep` characters outside parentheses.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// `N(a,b,...)` as (N, [a, b, ...]); a bare `N` has no list.
fn counted_list(text: &str) -> Option<(u32, Vec<&str>)> {
    let text = text.trim();
    match text.find('(') {
        Some(open) => {
            let n = text[..open].trim().parse().ok()?;
            let inner = text[open + 1..].strip_suffix(')')?;
            let items = if inner.trim().is_empty() { Vec::new() } else { inner.split(',').collect() };
            Some((n, items))
        }
        None => Some((text.parse().ok()?, Vec::new())),
    }
}

/// Parse the header line and the communicator and comment lines that follow it. `lines`
/// yields the file's lines from the first; parsing stops at the first record line.
pub fn parse<'a>(path: &Path, mut lines: impl Iterator<Item = &'a str>) -> Result<Header> {
    let err = |line: u64, field: &str, msg: String| Error::at_line(path, line, Some(field), msg);
    let first = lines.next().ok_or_else(|| Error::at_line(path, 1, None, "empty file: expected a #Paraver header"))?;
    let first = first.trim_start_matches('\u{feff}').trim_end();
    let rest = first.strip_prefix("#Paraver").ok_or_else(|| {
        Error::at_line(path, 1, None, format!("expected a header starting '#Paraver', found '{}'", clip(first)))
    })?;
    let rest = rest.trim_start();
    let (date, rest) = match rest.strip_prefix('(') {
        Some(r) => {
            let close = r.find(')').ok_or_else(|| err(1, "date", "the date's ')' is missing".into()))?;
            (Some(r[..close].to_string()), r[close + 1..].strip_prefix(':').unwrap_or(&r[close + 1..]))
        }
        None => (None, rest.strip_prefix(':').unwrap_or(rest)),
    };
    let fields = split_top(rest, ':');
    if fields.len() < 3 {
        return Err(err(1, "header", format!("expected DURATION:NODES:NAPPL:APPL..., found '{}'", clip(rest))));
    }
    let (digits, nanoseconds) = match fields[0].trim().strip_suffix("_ns") {
        Some(d) => (d, true),
        None => (fields[0].trim(), false),
    };
    let duration: i64 = digits.parse().map_err(|_| {
        err(1, "duration", format!("expected a whole number of us, or of ns with _ns, found '{}'", fields[0]))
    })?;
    let duration_ns = if nanoseconds { duration } else { duration.saturating_mul(1000) };
    let (nodes, cpus) = counted_list(fields[1])
        .ok_or_else(|| err(1, "nodes", format!("expected N(c1,...,cN), found '{}'", fields[1])))?;
    let node_cpus: Vec<u32> = if cpus.is_empty() {
        vec![1; nodes as usize]
    } else {
        cpus.iter()
            .map(|c| c.trim().parse().map_err(|_| err(1, "nodes", format!("expected a CPU count, found '{c}'"))))
            .collect::<Result<_>>()?
    };
    if node_cpus.len() != nodes as usize {
        return Err(err(1, "nodes", format!("{nodes} nodes announced but {} CPU counts given", node_cpus.len())));
    }
    let napps: usize = fields[2]
        .trim()
        .parse()
        .map_err(|_| err(1, "applications", format!("expected a number, found '{}'", fields[2])))?;
    // The applications follow, separated by ':' (Paraver's description) or by ',' (as Extrae
    // and the tools that add an application of their own write them), each optionally followed
    // by ',' and its number of communicator lines, which are checked for form; the lines
    // themselves follow the header.
    let mut lists: Vec<&str> = Vec::with_capacity(napps);
    for token in fields[3..].iter().flat_map(|f| split_top(f, ',')) {
        let token = token.trim();
        if token.contains('(') {
            lists.push(token);
        } else if lists.is_empty() || token.parse::<u32>().is_err() {
            return Err(err(
                1,
                "applications",
                format!(
                    "application {}: expected NTASKS(T:N,...) or, after one, its communicator count, found '{token}'",
                    lists.len() + 1
                ),
            ));
        }
    }
    if lists.len() != napps {
        return Err(err(1, "applications", format!("{napps} applications announced but {} described", lists.len())));
    }
    let mut apps = Vec::with_capacity(napps);
    for (a, list) in lists.into_iter().enumerate() {
        let (ntasks, items) = counted_list(list).ok_or_else(|| {
            err(1, "applications", format!("application {}: expected NTASKS(T:N,...), found '{list}'", a + 1))
        })?;
        let tasks: Vec<Task> = items
            .iter()
            .map(|t| {
                let (threads, node) = t.split_once(':').unwrap_or((t, "0"));
                match (threads.trim().parse(), node.trim().parse()) {
                    (Ok(threads), Ok(node)) if threads > 0 && (node as usize) <= node_cpus.len() => {
                        Ok(Task { threads, node })
                    }
                    _ => Err(err(
                        1,
                        "applications",
                        format!(
                            "application {}: expected THREADS:NODE with a node of the {} announced, found '{t}'",
                            a + 1,
                            node_cpus.len()
                        ),
                    )),
                }
            })
            .collect::<Result<_>>()?;
        if tasks.len() != ntasks as usize {
            return Err(err(
                1,
                "applications",
                format!("application {}: {ntasks} tasks announced but {} described", a + 1, tasks.len()),
            ));
        }
        apps.push(tasks);
    }
    let mut header =
        Header { date, duration_ns, nanoseconds, node_cpus, apps, first_record_line: 2, ..Header::default() };
    let mut line_no = 1u64;
    for line in lines {
        line_no += 1;
        let line = line.trim_end();
        if let Some(c) = line.strip_prefix("c:") {
            let parts: Vec<&str> = c.split(':').collect();
            let num = |i: usize, what: &str| -> Result<i64> {
                parts.get(i).and_then(|p| p.trim().parse().ok()).ok_or_else(|| {
                    err(
                        line_no,
                        what,
                        format!("communicator line: expected c:APPL:ID:NTASKS:TASK..., found '{}'", clip(line)),
                    )
                })
            };
            let (app, id, n) = (num(0, "application")?, num(1, "communicator")?, num(2, "tasks")?);
            if app < 1 || app as usize > header.apps.len() {
                return Err(err(
                    line_no,
                    "application",
                    format!("communicator {id} names application {app}; the header has {}", header.apps.len()),
                ));
            }
            let ntasks = header.apps[app as usize - 1].len() as i64;
            let listed: Vec<i64> = (0..n.max(0) as usize).map(|k| num(3 + k, "tasks")).collect::<Result<_>>()?;
            // One task given as -1: the task that uses it, MPI_COMM_SELF (MPItrace, 2004).
            if listed == [-1] && parts.len() == 4 {
                header.comms.push(CommLine { app: app as u32, id, tasks: Vec::new(), per_rank: true });
                header.first_record_line = line_no + 1;
                continue;
            }
            if let Some(t) = listed.iter().find(|t| **t < 1) {
                return Err(err(
                    line_no,
                    "tasks",
                    format!("communicator {id}: task {t} is not a task number (1-based)"),
                ));
            }
            // Tools that add an application of their own copy communicators that list more
            // tasks than the application has: those tasks are left out, and counted.
            let beyond: Vec<i64> = listed.iter().copied().filter(|t| *t > ntasks).collect();
            if let Some(first) = beyond.first() {
                header.problems.push(format!(
                    "{}:{line_no}: communicator {id} of application {app} lists {} task(s) beyond the application's {ntasks} (task {first}); they are left out of it",
                    path.display(),
                    beyond.len()
                ));
            }
            let tasks: Vec<u32> = listed.iter().filter(|t| **t <= ntasks).map(|t| *t as u32).collect();
            if parts.len() != 3 + n.max(0) as usize {
                return Err(err(
                    line_no,
                    "tasks",
                    format!("communicator {id}: {n} tasks announced but {} listed", parts.len().saturating_sub(3)),
                ));
            }
            header.comms.push(CommLine { app: app as u32, id, tasks, per_rank: false });
        } else if line.starts_with('#') {
            header.cut |= line.to_ascii_uppercase().contains("CUTTER");
        } else if line.is_empty() {
            continue;
        } else {
            break;
        }
        header.first_record_line = line_no + 1;
    }
    Ok(header)
}

fn clip(text: &str) -> String {
    if text.chars().count() > 80 {
        format!("{}...", text.chars().take(80).collect::<String>())
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extrae_headers_parse() {
        let text = "#Paraver (03/04/2024 at 12:15):1234567_ns:2(4,4):1:4(1:1,2:1,1:2,1:2),2\nc:1:1:4:1:2:3:4\nc:1:2:2:3:1\n1:1:1:1:1:0:100:1\n";
        let h = parse(Path::new("a.prv"), text.lines()).unwrap();
        assert_eq!(h.date.as_deref(), Some("03/04/2024 at 12:15"));
        assert_eq!((h.duration_ns, h.nanoseconds), (1_234_567, true));
        assert_eq!(h.node_cpus, vec![4, 4]);
        assert_eq!(h.apps[0][1], Task { threads: 2, node: 1 });
        assert_eq!(h.comms[1], CommLine { app: 1, id: 2, tasks: vec![3, 1], per_rank: false });
        assert_eq!(h.first_record_line, 4);
        let us =
            parse(Path::new("b.prv"), "#Paraver (01/01/2020 at 00:00):500:1(2):2:2(1:1,1:1):1(1:1)\n".lines()).unwrap();
        assert_eq!((us.duration_ns, us.apps.len()), (500_000, 2));
    }

    #[test]
    fn applications_separated_by_commas_and_communicators_beyond_their_tasks() {
        // As Extrae writes several applications (and a counter sampler adds one): separated by
        // ',', the last followed by the communicator count.
        let text = "#Paraver (21/01/2022 at 16:37):16_ns:1(20):2:2(1:1,1:1),3(1:1,1:1,1:1),2\nc:1:1:3:1:2:3\nc:1:2:2:1:2\n1:1:1:1:1:0:1:1\n";
        let h = parse(Path::new("two.prv"), text.lines()).unwrap();
        assert_eq!(h.apps.iter().map(Vec::len).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(h.comms[0], CommLine { app: 1, id: 1, tasks: vec![1, 2], per_rank: false });
        assert_eq!(h.problems.len(), 1, "{:?}", h.problems);
        assert!(
            h.problems[0].starts_with("two.prv:2: communicator 1 of application 1 lists 1 task(s) beyond"),
            "{}",
            h.problems[0]
        );
        // The same with ':' between the applications.
        let colon = "#Paraver (x):16_ns:1(20):2:2(1:1,1:1),1:3(1:1,1:1,1:1),1\n";
        assert_eq!(parse(Path::new("c.prv"), colon.lines()).unwrap().apps.len(), 2);
    }

    #[test]
    fn mpitrace_headers_with_a_self_communicator() {
        // MPItrace (2004): NODES without CPU counts, and MPI_COMM_SELF as one task -1.
        let text = "#Paraver (26/01/04 at 16:35):260199:4:1:4(1:1,1:2,1:3,1:4),3\nc:1:91:4:1:2:3:4\nc:1:92:1:-1\nc:1:94:3:2:3:4\n1:1:1:1:1:0:10:1\n";
        let h = parse(Path::new("q.prv"), text.lines()).unwrap();
        assert_eq!(h.comms[1], CommLine { app: 1, id: 92, tasks: vec![], per_rank: true });
        assert_eq!(h.comms[2].tasks, [2, 3, 4]);
        assert_eq!(h.first_record_line, 5);
        // -1 among other tasks is no task.
        let e = parse(Path::new("q.prv"), "#Paraver (x):10:1(2):1:2(1:1,1:1)\nc:1:1:2:1:-1".lines()).unwrap_err();
        assert!(e.to_string().contains("task -1 is not a task number"), "{e}");
    }

    #[test]
    fn bad_headers_name_the_field() {
        for (text, want) in [
            ("#Paraver (x):12:1(2):1:3(1:1,1:1)", "3 tasks announced but 2 described"),
            ("#Paraver (x):12:1(2):1:1(1:4)", "expected THREADS:NODE with a node of the 1 announced"),
            ("#Paraver (x):1.5:1(2):1:1(1:1)", "column 'duration'"),
            ("Paraver:1:1(1):1:1(1:1)", "expected a header starting '#Paraver'"),
            ("#Paraver (x):10:1(2):1:2(1:1,1:1)\nc:1:1:2:1:0", "task 0 is not a task number"),
            ("#Paraver (x):10:1(2):2:2(1:1,1:1),3", "2 applications announced but 1 described"),
            ("#Paraver (x):10:1(2):1:2,2(1:1,1:1)", "application 1: expected NTASKS(T:N,...) or, after one"),
        ] {
            let e = parse(Path::new("h.prv"), text.lines()).unwrap_err().to_string();
            assert!(e.contains("h.prv:") && e.contains(want), "{text}: {e}");
        }
    }
}
