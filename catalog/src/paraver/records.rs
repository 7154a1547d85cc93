//! The record lines of a `.prv` file, parsed in parallel: the text is cut at line ends into
//! pieces that rayon parses independently (every record is one line and carries its full
//! object ids), and the pieces are joined in file order. State records (type 1), event records
//! (type 2, each (type, value) pair becomes one `EventRec`) and communication records (type 3)
//! are kept as numbers; what they mean is decided by `paraver::assemble` with the .pcf.

use std::path::Path;

use rayon::prelude::*;

use crate::error::{Error, Result};

/// The objects of the header: stream index of every (application, task, thread), 1-based.
#[derive(Debug, Clone)]
pub struct Layout {
    /// First stream of each task, per application.
    first: Vec<Vec<u32>>,
    /// Threads of each task, per application.
    threads: Vec<Vec<u32>>,
    pub streams: usize,
}

impl Layout {
    pub fn new(apps: &[Vec<super::header::Task>]) -> Self {
        let (mut first, mut threads, mut next) = (Vec::new(), Vec::new(), 0u32);
        for tasks in apps {
            first.push(
                tasks
                    .iter()
                    .map(|t| {
                        let f = next;
                        next += t.threads;
                        f
                    })
                    .collect(),
            );
            threads.push(tasks.iter().map(|t| t.threads).collect());
        }
        Layout { first, threads, streams: next as usize }
    }

    /// The stream of a 1-based (application, task, thread), or which of them is out of range.
    #[inline]
    fn stream(&self, app: i64, task: i64, thread: i64) -> std::result::Result<u32, &'static str> {
        let a = usize::try_from(app - 1).ok().filter(|a| *a < self.first.len()).ok_or("application")?;
        let t = usize::try_from(task - 1).ok().filter(|t| *t < self.first[a].len()).ok_or("task")?;
        let th = u32::try_from(thread - 1).ok().filter(|th| *th < self.threads[a][t]).ok_or("thread")?;
        Ok(self.first[a][t] + th)
    }
}

/// A state interval of a stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateRec {
    pub stream: u32,
    pub begin: i64,
    pub end: i64,
    pub state: i32,
}

/// One (type, value) pair of an event record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRec {
    pub stream: u32,
    pub ts: i64,
    pub ty: i64,
    pub value: i64,
}

/// A communication record; a side outside the trace (cut away) is `NO_STREAM`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommRec {
    pub send: u32,
    pub recv: u32,
    pub logical_send: i64,
    pub physical_send: i64,
    pub logical_recv: i64,
    pub physical_recv: i64,
    pub size: i64,
    pub tag: i64,
    /// 1-based line of the record, for warnings.
    pub line: u64,
}

pub const NO_STREAM: u32 = u32::MAX;

#[derive(Debug, Default)]
pub struct Records {
    pub states: Vec<StateRec>,
    pub events: Vec<EventRec>,
    pub comms: Vec<CommRec>,
    /// Records of a type other than 1, 2 and 3: how many, and the first one's line (within the
    /// piece until the pieces are joined).
    pub other_types: (u64, u64),
    /// Lines in the piece.
    lines: u64,
}

/// A failure within a piece: its line within the piece, the field and the message.
struct PieceError {
    line: u64,
    field: &'static str,
    message: String,
}

/// Parse the records of `body`, whose first line is line `first_line` of `path`; times are
/// multiplied by `scale` to become ns.
pub fn parse(path: &Path, body: &[u8], first_line: u64, layout: &Layout, scale: i64) -> Result<Records> {
    let pieces = pieces(body, PIECE_BYTES);
    let parsed: Vec<std::result::Result<Records, PieceError>> =
        pieces.par_iter().map(|p| parse_piece(p, layout, scale)).collect();
    let mut out = Records::default();
    let mut line = first_line;
    for (k, piece) in parsed.into_iter().enumerate() {
        match piece {
            Ok(mut r) => {
                if r.other_types.0 > 0 && out.other_types.0 == 0 {
                    out.other_types.1 = line + r.other_types.1 - 1;
                }
                out.other_types.0 += r.other_types.0;
                for c in &mut r.comms {
                    c.line += line - 1;
                }
                line += r.lines;
                out.states.append(&mut r.states);
                out.events.append(&mut r.events);
                out.comms.append(&mut r.comms);
            }
            Err(e) => {
                let before: u64 = pieces[..k].iter().map(|p| p.iter().filter(|&&b| b == b'\n').count() as u64).sum();
                return Err(Error::at_line(path, first_line + before + e.line - 1, Some(e.field), e.message));
            }
        }
    }
    Ok(out)
}

const PIECE_BYTES: usize = 4 << 20;

/// `body` cut after line ends into pieces of about `size` bytes.
fn pieces(body: &[u8], size: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    while rest.len() > size {
        let cut = rest[size..].iter().position(|&b| b == b'\n').map_or(rest.len(), |p| size + p + 1);
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// A cursor over the ':'-separated fields of one line.
struct Fields<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Fields<'_> {
    #[inline]
    fn more(&self) -> bool {
        self.pos < self.b.len()
    }

    /// The next field as an integer.
    #[inline]
    fn int(&mut self, field: &'static str) -> std::result::Result<i64, PieceError> {
        let b = self.b;
        let start = self.pos;
        let mut i = start;
        let negative = b.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let digits = i;
        let mut v: i64 = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            v = match v.checked_mul(10).and_then(|v| v.checked_add(i64::from(b[i] - b'0'))) {
                Some(v) => v,
                None => return Err(self.bad(field, start, "a number that fits in 64 bits")),
            };
            i += 1;
        }
        if i == digits || (i < b.len() && b[i] != b':') {
            return Err(self.bad(field, start, "an integer"));
        }
        self.pos = i + 1;
        Ok(if negative { -v } else { v })
    }

    #[cold]
    fn bad(&self, field: &'static str, start: usize, what: &str) -> PieceError {
        let found = if start >= self.b.len() {
            "the end of the record".to_string()
        } else {
            let end = self.b[start..].iter().position(|&c| c == b':').map_or(self.b.len(), |p| start + p);
            format!("'{}'", String::from_utf8_lossy(&self.b[start..end]))
        };
        PieceError { line: 0, field, message: format!("expected {what}, found {found}") }
    }
}

fn parse_piece(piece: &[u8], layout: &Layout, scale: i64) -> std::result::Result<Records, PieceError> {
    let mut out = Records::default();
    let mut line_in_piece = 0u64;
    let at = |mut e: PieceError, line: u64| {
        e.line = line;
        e
    };
    for raw in piece.split(|&b| b == b'\n') {
        line_in_piece += 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let mut f = Fields { b: line, pos: 0 };
        let kind = f.int("record type").map_err(|e| at(e, line_in_piece))?;
        let scaled = |v: i64, field: &'static str| -> std::result::Result<i64, PieceError> {
            v.checked_mul(scale).filter(|t| *t >= 0).ok_or_else(|| PieceError {
                line: line_in_piece,
                field,
                message: format!("expected a time of 0 or more, found {v}"),
            })
        };
        // A communication's partner given as task 0 lies outside the trace (cut away).
        let object_or_outside =
            |f: &mut Fields, line: u64, may_be_outside: bool| -> std::result::Result<u32, PieceError> {
                let _cpu = f.int("cpu").map_err(|e| at(e, line))?;
                let (a, t, th) = (
                    f.int("application").map_err(|e| at(e, line))?,
                    f.int("task").map_err(|e| at(e, line))?,
                    f.int("thread").map_err(|e| at(e, line))?,
                );
                if may_be_outside && t == 0 {
                    return Ok(NO_STREAM);
                }
                layout.stream(a, t, th).map_err(|which| PieceError {
                    line,
                    field: which,
                    message: format!("{a}.{t}.{th} (application.task.thread) is not an object the header defines"),
                })
            };
        let object = |f: &mut Fields, line: u64| object_or_outside(f, line, false);
        match kind {
            1 => {
                let stream = object(&mut f, line_in_piece)?;
                let begin = scaled(f.int("begin").map_err(|e| at(e, line_in_piece))?, "begin")?;
                let end = scaled(f.int("end").map_err(|e| at(e, line_in_piece))?, "end")?;
                let state = f.int("state").map_err(|e| at(e, line_in_piece))?;
                let state = i32::try_from(state).map_err(|_| PieceError {
                    line: line_in_piece,
                    field: "state",
                    message: format!("expected a state number, found {state}"),
                })?;
                out.states.push(StateRec { stream, begin, end, state });
            }
            2 => {
                let stream = object(&mut f, line_in_piece)?;
                let ts = scaled(f.int("time").map_err(|e| at(e, line_in_piece))?, "time")?;
                if !f.more() {
                    return Err(PieceError {
                        line: line_in_piece,
                        field: "type",
                        message: "expected at least one TYPE:VALUE pair, found the end of the record".into(),
                    });
                }
                while f.more() {
                    let ty = f.int("type").map_err(|e| at(e, line_in_piece))?;
                    let value = f.int("value").map_err(|e| at(e, line_in_piece))?;
                    out.events.push(EventRec { stream, ts, ty, value });
                }
            }
            3 => {
                let send = object_or_outside(&mut f, line_in_piece, true)?;
                let logical_send = scaled(f.int("logical send").map_err(|e| at(e, line_in_piece))?, "logical send")?;
                let physical_send = scaled(f.int("physical send").map_err(|e| at(e, line_in_piece))?, "physical send")?;
                let recv = object_or_outside(&mut f, line_in_piece, true)?;
                let logical_recv =
                    scaled(f.int("logical receive").map_err(|e| at(e, line_in_piece))?, "logical receive")?;
                let physical_recv =
                    scaled(f.int("physical receive").map_err(|e| at(e, line_in_piece))?, "physical receive")?;
                let size = f.int("size").map_err(|e| at(e, line_in_piece))?;
                let tag = f.int("tag").map_err(|e| at(e, line_in_piece))?;
                if send == NO_STREAM && recv == NO_STREAM {
                    return Err(PieceError {
                        line: line_in_piece,
                        field: "task",
                        message: "neither the sender nor the receiver is an object of the trace".into(),
                    });
                }
                out.comms.push(CommRec {
                    send,
                    recv,
                    logical_send,
                    physical_send,
                    logical_recv,
                    physical_recv,
                    size,
                    tag,
                    line: line_in_piece,
                });
            }
            _ => {
                if out.other_types.0 == 0 {
                    out.other_types.1 = line_in_piece;
                }
                out.other_types.0 += 1;
            }
        }
        if f.more() && kind != 2 && (1..=3).contains(&kind) {
            return Err(PieceError {
                line: line_in_piece,
                field: "record",
                message: format!("a type {kind} record has more fields than its layout"),
            });
        }
    }
    // A piece ends with its last line's '\n': the empty tail after it is not a line.
    out.lines = piece.iter().filter(|&&b| b == b'\n').count() as u64;
    if !piece.ends_with(b"\n") {
        out.lines += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paraver::header::Task;

    fn layout() -> Layout {
        Layout::new(&[vec![Task { threads: 1, node: 1 }, Task { threads: 2, node: 1 }]])
    }

    #[test]
    fn records_of_every_type() {
        let body =
            b"1:1:1:1:1:0:100:1\n2:1:1:2:2:50:50000001:3:42000050:1234\n3:1:1:1:1:10:11:2:1:2:1:20:30:64:7\n9:x\n";
        let r = parse(Path::new("a.prv"), body, 2, &layout(), 1000).unwrap();
        assert_eq!(r.states, vec![StateRec { stream: 0, begin: 0, end: 100_000, state: 1 }]);
        assert_eq!(r.events.len(), 2);
        assert_eq!(r.events[1], EventRec { stream: 2, ts: 50_000, ty: 42000050, value: 1234 });
        assert_eq!((r.comms[0].send, r.comms[0].recv, r.comms[0].physical_recv, r.comms[0].line), (0, 1, 30_000, 4));
        assert_eq!(r.other_types, (1, 5));
    }

    #[test]
    fn bad_records_name_line_and_field() {
        for (body, want) in [
            (&b"1:1:1:1:1:0:100:1\n2:1:1:3:1:5:1:1\n"[..], "a.prv:3: column 'task'"),
            (b"2:1:1:2:3:5:1:1\n", "a.prv:2: column 'thread'"),
            (b"2:1:1:1:1:5:1\n", "a.prv:2: column 'value': expected an integer, found the end of the record"),
            (b"3:1:1:1:1:10:11:2:1:2:1:20\n", "column 'physical receive'"),
            (b"1:1:1:1:1:0:1x:1\n", "column 'end': expected an integer, found '1x'"),
            (b"2:1:1:1:1:5\n", "at least one TYPE:VALUE pair"),
            (b"1:1:1:1:1:0:100:1:9\n", "more fields than its layout"),
        ] {
            let e = parse(Path::new("a.prv"), body, 2, &layout(), 1).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{}: {e}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn pieces_end_at_line_ends_and_lines_are_counted_across_them() {
        let mut body = Vec::new();
        for i in 0..1000 {
            body.extend_from_slice(format!("2:1:1:1:1:{i}:1:{i}\n").as_bytes());
        }
        body.extend_from_slice(b"2:1:1:7:1:5:1:1\n");
        let ps = pieces(&body, 100);
        assert!(ps.len() > 10 && ps.iter().all(|p| p.ends_with(b"\n")));
        assert_eq!(ps.concat(), body);
        let e = parse(Path::new("a.prv"), &body, 2, &layout(), 1).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("a.prv:1002: column 'task'"), "{e}");
    }
}
