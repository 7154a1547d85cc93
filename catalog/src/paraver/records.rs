//! The record lines of a `.prv` file, parsed in parallel: the text is read a batch of pieces
//! at a time into reused buffers, cut at line ends, and rayon parses the pieces independently
//! (every record is one line and carries its full object ids); the pieces are joined in file
//! order, each with its event pairs grouped by stream. State records (type 1), event records
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

/// One (type, value) pair of an event record (24 bytes: there are tens of millions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRec {
    pub stream: u32,
    pub ty: u32,
    pub ts: i64,
    pub value: i64,
}

impl EventRec {
    #[inline]
    pub fn ty(&self) -> i64 {
        i64::from(self.ty)
    }
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

/// The event pairs of one piece of the file, grouped by stream (file order within a stream):
/// stream `s` has `events[starts[s]..starts[s + 1]]`.
#[derive(Debug, Default)]
pub struct Piece {
    pub events: Vec<EventRec>,
    pub starts: Vec<u32>,
}

impl Piece {
    #[inline]
    pub fn of_stream(&self, s: usize) -> &[EventRec] {
        &self.events[self.starts[s] as usize..self.starts[s + 1] as usize]
    }

    /// Group the piece's events by stream, keeping their order within each (a counting sort).
    fn group(events: &[EventRec], streams: usize) -> Piece {
        let mut starts = vec![0u32; streams + 1];
        for e in events {
            starts[e.stream as usize + 1] += 1;
        }
        for i in 0..streams {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut out = vec![EventRec { stream: 0, ts: 0, ty: 0, value: 0 }; events.len()];
        for e in events {
            out[next[e.stream as usize] as usize] = *e;
            next[e.stream as usize] += 1;
        }
        Piece { events: out, starts }
    }
}

#[derive(Debug, Default)]
pub struct Records {
    pub states: Vec<StateRec>,
    /// Event pairs of each piece of the file, in file order.
    pub pieces: Vec<Piece>,
    pub comms: Vec<CommRec>,
    /// Records of a type other than 1, 2 and 3: how many, and the first one's line (within the
    /// piece until the pieces are joined).
    pub other_types: (u64, u64),
    /// Lines in the piece.
    lines: u64,
}

impl Records {
    /// Every event pair, in file order within each stream.
    pub fn events(&self) -> impl Iterator<Item = &EventRec> {
        self.pieces.iter().flat_map(|p| p.events.iter())
    }
}

/// A failure within a piece: its line within the piece, the field and the message.
struct PieceError {
    line: u64,
    field: &'static str,
    message: String,
}

/// Parse the records read from `reader`, whose first line is line `first_line` of `path`
/// (`start` holds bytes of it already read); times are multiplied by `scale` to become ns.
/// The text is read a batch of pieces at a time into buffers that are reused, and each batch
/// is parsed in parallel, so the file is never held whole. `progress` is told the bytes read.
pub fn parse(
    path: &Path,
    reader: &mut dyn std::io::Read,
    start: Vec<u8>,
    first_line: u64,
    layout: &Layout,
    scale: i64,
    progress: &dyn Fn(u64),
) -> Result<Records> {
    parse_in_pieces(path, reader, start, first_line, layout, scale, progress, PIECE_BYTES)
}

#[allow(clippy::too_many_arguments)]
fn parse_in_pieces(
    path: &Path,
    reader: &mut dyn std::io::Read,
    start: Vec<u8>,
    first_line: u64,
    layout: &Layout,
    scale: i64,
    progress: &dyn Fn(u64),
    piece_bytes: usize,
) -> Result<Records> {
    let batch = 2 * rayon::current_num_threads().max(1);
    let mut buffers: Vec<Vec<u8>> = (0..batch).map(|_| Vec::with_capacity(piece_bytes + (64 << 10))).collect();
    let mut carry = start;
    let mut out = Records::default();
    let mut line = first_line;
    let mut eof = false;
    while !eof {
        let mut filled = 0;
        for buf in &mut buffers {
            buf.clear();
            buf.append(&mut carry);
            eof = fill(buf, reader, piece_bytes).map_err(|e| Error::io(path, e))?;
            progress(buf.len() as u64);
            if !eof {
                // Keep the piece to whole lines; the partial last one starts the next piece.
                let cut = memchr::memrchr(b'\n', buf).map_or(0, |p| p + 1);
                carry.extend_from_slice(&buf[cut..]);
                buf.truncate(cut);
            }
            filled += 1;
            if eof {
                break;
            }
        }
        let parsed: Vec<std::result::Result<Records, PieceError>> =
            buffers[..filled].par_iter().map(|p| parse_piece(p, layout, scale)).collect();
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
                    out.pieces.append(&mut r.pieces);
                    out.comms.append(&mut r.comms);
                }
                Err(e) => {
                    let before: u64 = buffers[..k].iter().map(|p| memchr::memchr_iter(b'\n', p).count() as u64).sum();
                    return Err(Error::at_line(path, line + before + e.line - 1, Some(e.field), e.message));
                }
            }
        }
    }
    Ok(out)
}

/// Read into `buf` until it holds a piece's worth of bytes and at least one line end, or the
/// input ends (true).
fn fill(buf: &mut Vec<u8>, reader: &mut dyn std::io::Read, piece_bytes: usize) -> std::io::Result<bool> {
    loop {
        let len = buf.len();
        if len >= piece_bytes && memchr::memrchr(b'\n', buf).is_some() {
            return Ok(false);
        }
        let want = piece_bytes.max(len) + (64 << 10);
        buf.resize(want, 0);
        match reader.read(&mut buf[len..]) {
            Ok(0) => {
                buf.truncate(len);
                return Ok(true);
            }
            Ok(n) => buf.truncate(len + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(len),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

const PIECE_BYTES: usize = 4 << 20;

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
        let mut v: u64 = 0;
        while let Some(d) = b.get(i).map(|c| c.wrapping_sub(b'0')).filter(|d| *d < 10) {
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
            i += 1;
        }
        // 18 digits cannot overflow; longer numbers are checked again.
        if i - digits > 18 && (i - digits > 19 || v > i64::MAX as u64) {
            return Err(self.bad(field, start, "a number that fits in 64 bits"));
        }
        if i == digits || (i < b.len() && b[i] != b':') {
            return Err(self.bad(field, start, "an integer"));
        }
        self.pos = i + 1;
        let v = v as i64;
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

thread_local! {
    /// The event pairs of the piece being parsed, before grouping: reused, so that only the
    /// grouped copy takes fresh memory.
    static SCRATCH: std::cell::RefCell<Vec<EventRec>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn parse_piece(piece: &[u8], layout: &Layout, scale: i64) -> std::result::Result<Records, PieceError> {
    SCRATCH.with(|scratch| {
        let mut events = scratch.borrow_mut();
        events.clear();
        let mut out = parse_lines(piece, layout, scale, &mut events)?;
        out.pieces.push(Piece::group(&events, layout.streams));
        Ok(out)
    })
}

fn parse_lines(
    piece: &[u8],
    layout: &Layout,
    scale: i64,
    events: &mut Vec<EventRec>,
) -> std::result::Result<Records, PieceError> {
    let mut out = Records::default();
    let mut line_in_piece = 0u64;
    let at = |mut e: PieceError, line: u64| {
        e.line = line;
        e
    };
    let mut rest = piece;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let raw = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or(&[]);
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
                    let ty = u32::try_from(ty).map_err(|_| PieceError {
                        line: line_in_piece,
                        field: "type",
                        message: format!("expected an event type from 0 to {}, found {ty}", u32::MAX),
                    })?;
                    let value = f.int("value").map_err(|e| at(e, line_in_piece))?;
                    events.push(EventRec { stream, ts, ty, value });
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
    out.lines = line_in_piece;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paraver::header::Task;

    fn layout() -> Layout {
        Layout::new(&[vec![Task { threads: 1, node: 1 }, Task { threads: 2, node: 1 }]])
    }

    /// Parse `body` as the records from line 2 of a.prv, in pieces of `piece` bytes.
    fn parse_text(body: &[u8], scale: i64, piece: usize) -> Result<Records> {
        parse_in_pieces(Path::new("a.prv"), &mut &body[..], Vec::new(), 2, &layout(), scale, &|_| {}, piece)
    }

    #[test]
    fn records_of_every_type() {
        let body =
            b"1:1:1:1:1:0:100:1\n2:1:1:2:2:50:50000001:3:42000050:1234\n3:1:1:1:1:10:11:2:1:2:1:20:30:64:7\n9:x\n";
        let r = parse_text(body, 1000, PIECE_BYTES).unwrap();
        assert_eq!(r.states, vec![StateRec { stream: 0, begin: 0, end: 100_000, state: 1 }]);
        let events: Vec<&EventRec> = r.events().collect();
        assert_eq!(events.len(), 2);
        assert_eq!(*events[1], EventRec { stream: 2, ts: 50_000, ty: 42000050, value: 1234 });
        assert_eq!(r.pieces[0].of_stream(2).len(), 2);
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
            (b"2:1:1:1:1:5:1:99999999999999999999\n", "a number that fits in 64 bits"),
            (b"2:1:1:1:1:5:1:9300000000000000000\n", "a number that fits in 64 bits"),
            (b"2:1:1:1:1:5:4294967296:1\n", "column 'type': expected an event type from 0 to 4294967295"),
        ] {
            let e = parse_text(body, 1, PIECE_BYTES).map(|_| ()).unwrap_err().to_string();
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
        for piece in [100, 1000, PIECE_BYTES] {
            let e = parse_text(&body, 1, piece).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("a.prv:1002: column 'task'"), "pieces of {piece}: {e}");
            let ok = parse_text(&body[..body.len() - 16], 1, piece).unwrap();
            assert_eq!(ok.events().count(), 1000, "pieces of {piece}");
            assert!(ok.events().zip(0..).all(|(e, i)| e.ts == i), "pieces of {piece}: file order");
        }
    }
}
