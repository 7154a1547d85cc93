//! Fitting results to the terminal, as analysts know it from psql's wrapped format: a table
//! wider than the screen has its text columns narrowed and their cells wrapped onto more
//! lines (numbers are never cut; long headers wrap at their underscores), choosing at each
//! step the column whose narrowing adds the fewest lines and splits the fewest words. When even that cannot show every
//! column, the expanded display (psql's `\x`) prints each row as a block of `column | value`
//! lines (`auto`, the default), or, with `\x off`, the widest columns are cut with an
//! ellipsis and the last ones hidden and named below the table.

use crate::error::{Result, ShellError};
use std::borrow::Cow;
use std::io::IsTerminal;
use std::str::FromStr;

/// How wide the table format may print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// The terminal's width when writing to one, else no limit.
    Terminal,
    Columns(usize),
    Unlimited,
}

impl Width {
    /// The limit in characters, if any.
    pub fn columns(self) -> Option<usize> {
        match self {
            Width::Terminal => terminal_columns(),
            Width::Columns(n) => Some(n),
            Width::Unlimited => None,
        }
    }
}

/// Columns of the terminal standard output writes to (None when it is not a terminal).
fn terminal_columns() -> Option<usize> {
    columns_of(std::io::stdout())
}

/// Columns of the terminal standard error writes to (None when it is not a terminal).
pub fn error_terminal_columns() -> Option<usize> {
    columns_of(std::io::stderr())
}

fn columns_of(out: impl IsTerminal + rustix::fd::AsFd) -> Option<usize> {
    if !out.is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(&out).ok().map(|w| usize::from(w.ws_col)).filter(|c| *c > 0)
}

/// psql's expanded display: off, on, or whenever a table would not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expanded {
    Off,
    On,
    Auto,
}

impl FromStr for Expanded {
    type Err = ShellError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "on" => Ok(Expanded::On),
            "off" => Ok(Expanded::Off),
            "auto" => Ok(Expanded::Auto),
            other => Err(ShellError::usage(format!("unknown expanded display '{other}': expected on, off or auto"))),
        }
    }
}

impl std::fmt::Display for Expanded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expanded::Off => "off",
            Expanded::On => "on",
            Expanded::Auto => "auto",
        })
    }
}

/// A column is narrowed down to this many characters (or its own width, if less) before
/// columns are hidden.
pub const MIN_WIDTH: usize = 8;

/// Characters a table line takes for columns of widths `widths`: " v " each, '|' between.
pub fn line_width(widths: &[usize]) -> usize {
    (widths.iter().sum::<usize>() + 3 * widths.len()).saturating_sub(1)
}

/// The widths of the columns a table shows within `limit` characters, given each column's
/// natural width: all of them unchanged when they fit; else as many leading columns as fit
/// at their narrowest (MIN_WIDTH), widened again as far as the limit allows, the widest cut
/// first. At least one column is shown.
pub fn fit(natural: &[usize], limit: usize) -> Vec<usize> {
    if line_width(natural) <= limit {
        return natural.to_vec();
    }
    let floor: Vec<usize> = natural.iter().map(|w| (*w).min(MIN_WIDTH)).collect();
    let shown = (1..=natural.len()).rev().find(|k| line_width(&floor[..*k]) <= limit).unwrap_or(1);
    if line_width(&floor[..shown]) > limit {
        return vec![limit.saturating_sub(2).max(1)];
    }
    let capped = |cap: usize| -> Vec<usize> {
        natural[..shown].iter().zip(&floor).map(|(n, f)| (*n).min(cap.max(*f))).collect()
    };
    // The largest cap on the widest columns that fits, then what is left to the first of the
    // columns still cut.
    let (mut lo, mut hi) = (0, natural.iter().copied().max().unwrap_or(0));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if line_width(&capped(mid)) <= limit { lo = mid } else { hi = mid - 1 }
    }
    let mut widths = capped(lo);
    let mut spare = limit - line_width(&widths);
    for (w, n) in widths.iter_mut().zip(natural) {
        let more = (n - *w).min(spare);
        *w += more;
        spare -= more;
    }
    widths
}

/// Rows whose cells decide how a table wraps: enough to see its shape, few enough that a
/// long `-f` result is fitted at once.
const SAMPLE_ROWS: usize = 200;

/// What narrowing a column below its longest word costs, in lines: more than any table of
/// SAMPLE_ROWS could gain by it.
const UNCOMFORTABLE: isize = 1 << 20;

/// The widths at which a table shows every column within `limit` characters by wrapping:
/// `columns` holds each column's cells (header first), `numeric` says which columns hold
/// numbers, whose values are never cut (only their header wraps). Starting from each
/// column's natural width, one character at a time is taken from the column where that adds
/// the fewest lines to the table plus words split inside (`send_call_` / `start`, a name
/// broken anywhere but at a space), the widest on a tie, down to MIN_WIDTH for text. None
/// when the table cannot fit even so.
pub fn wrap_widths(columns: &[Vec<&str>], numeric: &[bool], limit: usize) -> Option<Vec<usize>> {
    let count = |s: &str| s.chars().count();
    let natural: Vec<usize> = columns.iter().map(|col| col.iter().map(|s| count(s)).max().unwrap_or(0)).collect();
    if line_width(&natural) <= limit {
        return Some(natural);
    }
    // A column is narrowed below its longest word (a header's longest part between
    // underscores; at most a third of the width) only when no other column can give, the
    // first column (usually what a row is about) last; text goes down to MIN_WIDTH at most,
    // and numbers to their widest value.
    let longest = |s: &str, at: &[char]| s.split(at).map(count).max().unwrap_or(0);
    let least: Vec<usize> =
        columns
            .iter()
            .zip(numeric)
            .zip(&natural)
            .map(|((col, num), n)| {
                if *num { col.iter().skip(1).map(|s| count(s)).max().unwrap_or(0).max(1) } else { (*n).min(MIN_WIDTH) }
            })
            .collect();
    let comfortable: Vec<usize> = columns
        .iter()
        .zip(&least)
        .zip(&natural)
        .map(|((col, l), n)| {
            let words = col.iter().skip(1).map(|s| longest(s, &[' ', '\n'])).max().unwrap_or(0);
            words.max(longest(col[0], &['_', ' '])).min(limit / 3).max(*l).min(*n)
        })
        .collect();
    let floor = least;
    if line_width(&floor) > limit {
        return None;
    }
    // No column can be wider than what the others leave it at their narrowest.
    let spare = limit - line_width(&floor);
    let mut widths: Vec<usize> = natural.iter().zip(&floor).map(|(n, f)| (*n).min(f + spare)).collect();
    let sample: Vec<&[&str]> = columns.iter().map(|col| &col[..col.len().min(SAMPLE_ROWS + 1)]).collect();
    let rows = sample.first().map_or(0, |c| c.len());
    let costs = |c: usize, w: usize| -> Vec<Cost> { sample[c].iter().map(|s| wrap_cost(s, w)).collect() };
    let mut lines: Vec<Vec<Cost>> = (0..widths.len()).map(|c| costs(c, widths[c])).collect();
    while line_width(&widths) > limit {
        let mut best: Option<(usize, isize, Vec<Cost>)> = None;
        for c in (0..widths.len()).filter(|&c| widths[c] > floor[c]) {
            let narrower = costs(c, widths[c] - 1);
            let added: isize = (0..rows)
                .map(|r| {
                    let others = (0..widths.len()).filter(|&o| o != c).map(|o| lines[o][r].0).max().unwrap_or(0);
                    let (before, after) = (lines[c][r], narrower[r]);
                    (after.0.max(others) + after.1) as isize - (before.0.max(others) + before.1) as isize
                })
                .sum::<isize>()
                + if widths[c] <= comfortable[c] { UNCOMFORTABLE * if c == 0 { 2 } else { 1 } } else { 0 };
            let better = match &best {
                None => true,
                Some((b, b_added, _)) => added < *b_added || (added == *b_added && widths[c] > widths[*b]),
            };
            if better {
                best = Some((c, added, narrower));
            }
        }
        let (c, _, narrower) = best?;
        widths[c] -= 1;
        lines[c] = narrower;
    }
    Some(widths)
}

/// Where `s` breaks into lines of at most `width` characters, as (start, end) byte ranges:
/// at a newline always; else after the last space, comma, slash, semicolon, underscore,
/// hyphen before a letter or digit, or closing parenthesis (or before an opening one) that leaves the line at least a
/// third full; else after
/// `width` characters. Spaces at a break are dropped.
fn wrap_spans(s: &str, width: usize, mut emit: impl FnMut(usize, usize)) {
    let width = width.max(1);
    let mut rest = s;
    let mut offset = 0;
    loop {
        let mut end = rest.len();
        let mut next = rest.len();
        let mut last_break: Option<(usize, usize)> = None;
        for (n, (i, ch)) in rest.char_indices().enumerate() {
            if ch == '\n' {
                (end, next) = (i, i + 1);
                break;
            }
            if n == width {
                (end, next) = last_break.unwrap_or((i, i));
                break;
            }
            let after = i + ch.len_utf8();
            if n + 1 >= width.div_ceil(3) {
                if ch == ' ' {
                    last_break = Some((i, after));
                } else if matches!(ch, ',' | '/' | ';' | '_' | ')')
                    || (ch == '-' && rest[after..].starts_with(char::is_alphanumeric))
                {
                    last_break = Some((after, after));
                } else if ch == '(' && n > 0 {
                    last_break = Some((i, i));
                }
            }
        }
        let line = &rest[..end];
        let trimmed = line.trim_end_matches(' ');
        emit(offset, offset + trimmed.len());
        if next >= rest.len() && end == rest.len() {
            return;
        }
        let skipped = rest[next..].len() - rest[next..].trim_start_matches(' ').len();
        offset += next + skipped;
        rest = &rest[next + skipped..];
        if rest.is_empty() {
            return;
        }
    }
}

/// `s` broken into lines of at most `width` characters (`wrap_spans`).
pub fn wrap(s: &str, width: usize) -> Vec<&str> {
    let mut out = Vec::new();
    wrap_spans(s, width, |a, b| out.push(&s[a..b]));
    out
}

/// What wrapping a cell costs: its lines, and the words split at its breaks.
type Cost = (usize, usize);

/// How many lines `wrap` gives, and at how many of its breaks a word is split (the line
/// ends neither at a space nor at a newline), without building them.
fn wrap_cost(s: &str, width: usize) -> Cost {
    if !s.contains('\n') && s.len() <= width {
        return (1, 0);
    }
    let (mut lines, mut splits) = (0, 0);
    wrap_spans(s, width, |_, end| {
        lines += 1;
        if end < s.len() && !s[end..].starts_with([' ', '\n']) {
            splits += 1;
        }
    });
    (lines, splits)
}

/// `s` cut to `width` characters, the last one an ellipsis.
pub fn cut(s: &str, width: usize) -> Cow<'_, str> {
    match s.char_indices().nth(width) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let end = s.char_indices().nth(width.saturating_sub(1)).map_or(s.len(), |(i, _)| i);
            Cow::Owned(format!("{}…", &s[..end]))
        }
    }
}

/// Headers `names` cut to `widths` and still told apart: where cutting the end makes two of
/// them alike (`inter_messages_before` and `inter_bytes_before` both `inter_m…`), those are
/// abbreviated word by word instead (`in_me_be`, `in_by_be`), or, when that does not tell
/// them apart either, cut in the middle, keeping their ends.
pub fn cut_headers(names: &[&str], widths: &[usize]) -> Vec<String> {
    let mut out: Vec<String> = names.iter().zip(widths).map(|(n, w)| cut(n, *w).into_owned()).collect();
    let alike = |out: &[String], i: usize| -> Vec<usize> {
        (0..out.len()).filter(|&j| j != i && out[j] == out[i] && names[j] != names[i]).chain([i]).collect()
    };
    for shorten in [abbreviate as fn(&str, usize) -> String, cut_middle] {
        for i in 0..out.len() {
            let group = alike(&out, i);
            if group.len() > 1 {
                for &j in &group {
                    out[j] = shorten(names[j], widths[j]);
                }
            }
        }
    }
    out
}

/// `s` in `width` characters by shortening each of its words (split at '_') alike, the
/// characters left over going to the last words (`inter_messages_before` in 8: `in_me_be`);
/// a name of one word, or too many words for the width, is cut in the middle.
fn abbreviate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let words: Vec<Vec<char>> = s.split('_').map(|w| w.chars().collect()).collect();
    let n = words.len();
    let budget = width.saturating_sub(n.saturating_sub(1));
    if n < 2 || budget < n {
        return cut_middle(s, width);
    }
    let mut take: Vec<usize> = words.iter().map(|w| w.len().min(budget / n)).collect();
    let mut spare = budget - take.iter().sum::<usize>();
    for (t, w) in take.iter_mut().zip(&words).rev() {
        let more = (w.len() - *t).min(spare);
        *t += more;
        spare -= more;
    }
    words.iter().zip(&take).map(|(w, t)| w[..*t].iter().collect::<String>()).collect::<Vec<_>>().join("_")
}

/// `s` cut to `width` characters by an ellipsis in the middle.
fn cut_middle(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width || width < 3 {
        return cut(s, width).into_owned();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// Rows as psql's expanded display prints them: a `-[ RECORD n ]` rule, then one
/// `name | value` line per column; values wider than `limit` leaves them wrap onto lines of
/// their own under the value.
pub fn expanded(names: &[&str], rows: &[Vec<&str>], limit: Option<usize>) -> String {
    let name_width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let widest = rows.iter().flatten().map(|v| v.chars().count()).max().unwrap_or(0);
    let value_room = limit.map_or(usize::MAX, |l| l.saturating_sub(name_width + 3).max(1));
    let rule_width = name_width + 3 + widest.min(value_room);
    let mut text = String::new();
    for (r, row) in rows.iter().enumerate() {
        let title = format!("-[ RECORD {} ]", r + 1);
        let pad = rule_width.saturating_sub(title.chars().count());
        text.push_str(&title);
        text.push_str(&"-".repeat(pad));
        text.push('\n');
        for (name, value) in names.iter().zip(row) {
            for (i, part) in wrap(value, value_room).iter().enumerate() {
                let label = if i == 0 { name } else { "" };
                let line = format!("{label:<name_width$} | {part}");
                text.push_str(line.trim_end());
                text.push('\n');
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_that_fit_are_left_alone() {
        assert_eq!(fit(&[3, 10, 4], 80), vec![3, 10, 4]);
        assert_eq!(line_width(&[3, 10, 4]), 25);
    }

    #[test]
    fn the_widest_columns_are_cut_first_then_the_last_ones_hidden() {
        let w = fit(&[6, 40, 30, 5], 60);
        assert_eq!(line_width(&w), 60);
        assert_eq!((w[0], w[3]), (6, 5), "narrow columns keep their width: {w:?}");
        assert!(w[1] < 40 && w[2] < 30 && w[1].abs_diff(w[2]) <= 1, "{w:?}");
        let many = vec![20; 12];
        let w = fit(&many, 80);
        assert!(w.len() < 12 && line_width(&w) <= 80, "{w:?}");
        assert!(w.iter().all(|x| *x >= MIN_WIDTH), "{w:?}");
        assert_eq!(fit(&[500], 30), vec![28]);
        assert_eq!(fit(&[50, 50], 5), vec![3]);
    }

    #[test]
    fn cells_are_cut_with_an_ellipsis() {
        assert_eq!(cut("send_call_start", 8), "send_ca…");
        assert_eq!(cut("short", 8), "short");
        assert_eq!(cut("ééééé", 3), "éé…");
    }

    #[test]
    fn cut_headers_stay_apart() {
        let names = ["rank", "inter_messages_before", "inter_messages_after", "reduction"];
        assert_eq!(cut_headers(&names, &[4, 8, 8, 8]), ["rank", "in_me_be", "in_me_af", "reducti…"]);
        let names = ["inter_messages_before", "inter_messages_after", "inter_bytes_before", "inter_bytes_after"];
        let cut = cut_headers(&names, &[8, 8, 8, 8]);
        assert_eq!(cut, ["in_me_be", "in_me_af", "in_by_be", "in_by_af"]);
        assert_eq!(cut_headers(&["a_long_name"], &[6]), ["a_lon…"]);
        // Names a word-by-word abbreviation cannot tell apart are cut in the middle.
        assert_eq!(cut_headers(&["samplesA", "samplesB"], &[5, 5]), ["sa…sA", "sa…sB"]);
    }

    #[test]
    fn expanded_rows_are_blocks() {
        let text = expanded(&["msg_id", "src"], &[vec!["0", "1"], vec!["1", "NULL"]], Some(80));
        assert_eq!(text, "-[ RECORD 1 ]\nmsg_id | 0\nsrc    | 1\n-[ RECORD 2 ]\nmsg_id | 1\nsrc    | NULL\n");
        let long = "x".repeat(200);
        let text = expanded(&["s"], &[vec![&long]], Some(40));
        assert!(text.lines().all(|l| l.chars().count() <= 40), "{text}");
        // Nothing is lost: the value wraps onto lines of its own.
        let value: String = text.lines().skip(1).map(|l| l.trim_start_matches(['s', ' ', '|'])).collect();
        assert_eq!(value, long);
    }

    #[test]
    fn text_wraps_at_word_ends_and_keeps_every_character() {
        assert_eq!(wrap("sending rank; NULL when unmatched", 14), ["sending rank;", "NULL when", "unmatched"]);
        assert_eq!(wrap("Dictionary(Int32, Utf8)", 12), ["Dictionary", "(Int32,", "Utf8)"]);
        assert_eq!(wrap_cost("Dictionary(Int32, Utf8)", 12), (3, 1));
        assert_eq!(wrap_cost("send_call_start", 10), (2, 1));
        assert_eq!(wrap_cost("node of the sender", 10), (2, 0));
        assert_eq!(wrap("traffic_fluctuation", 9), ["traffic_", "fluctuati", "on"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("two\nlines", 20), ["two", "lines"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("ééééé", 2), ["éé", "éé", "é"]);
        for (s, w) in [("a b  c d", 3), ("x,y,z/w", 2), ("long_header_name", 5)] {
            assert_eq!(wrap_cost(s, w).0, wrap(s, w).len(), "{s} at {w}");
            assert!(wrap(s, w).iter().all(|l| l.chars().count() <= w), "{s} at {w}: {:?}", wrap(s, w));
        }
    }

    #[test]
    fn wrapping_narrows_the_text_that_costs_fewest_lines_and_never_cuts_numbers() {
        let meaning = "receiving rank; NULL when the message has no matching receive in the trace";
        let columns = vec![
            vec!["column", "msg_id", "dst"],
            vec!["type", "Int64", "Dictionary(Int32, Utf8)"],
            vec!["meaning", "message identifier", meaning],
        ];
        let w = wrap_widths(&columns, &[false, false, false], 60).unwrap();
        assert_eq!(line_width(&w), 60);
        assert_eq!(w[0], 6, "a short column keeps its width: {w:?}");
        assert!(w[2] > w[1], "the long text wraps before the short one is cut: {w:?}");
        let numbers = vec![vec!["traffic_fluctuation", "1.0", "12.5"], vec!["cause", "mapping", "pattern"]];
        let w = wrap_widths(&numbers, &[true, false], 20).unwrap();
        assert!(w[0] >= 4 && line_width(&w) <= 20, "{w:?}");
        // Numbers wider than the screen cannot be wrapped.
        assert_eq!(wrap_widths(&[vec!["n", "123456789012"]], &[true], 8), None);
        assert_eq!(wrap_widths(&vec![vec!["abcdefghijk"]; 12], &[false; 12], 80), None);
    }
}
