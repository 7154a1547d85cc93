//! The record lines of a `.prv` file, parsed in parallel: the text is read a batch of pieces
//! at a time into reused buffers, cut at line ends, and rayon parses the pieces independently
//! (every record is one line and carries its full object ids); the pieces are joined in file
//! order, each with its event pairs grouped by stream. State records (type 1), event records
//! (type 2, each (type, value) pair becomes one `EventRec`) and communication records (type 3)
//! are kept as numbers, and each communication's halves (send, receive posted, receive
//! completed) are placed on their streams in the piece that holds it; what they mean is
//! decided by `paraver::assemble` with the .pcf.

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

/// The event type under which a global-operation record's root (its rank in the
/// communicator) is kept among the event pairs; no tracer's type (Paraver's are below it).
pub const ROOT_IN_COMM: u32 = u32::MAX - 1;

/// Which half of a communication a `Half` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfKind {
    /// The send, at the physical send time.
    Send,
    /// The receive posted, at the logical receive time.
    Post,
    /// The receive completed, at the physical receive time.
    Receive,
}

/// One half of a communication record, placed on the stream it happens on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Half {
    pub ts: i64,
    pub bytes: i64,
    /// The partner's stream (`NO_STREAM`: outside the trace).
    pub peer: u32,
    /// The tag, or NONE_I32 when it does not fit in 32 bits.
    pub tag: i32,
    /// Index of the communication record among its piece's.
    pub record: u32,
    pub kind: HalfKind,
}

/// The event pairs and message halves of one piece of the file, grouped by stream (file order
/// within a stream): stream `s` has `events[starts[s]..starts[s + 1]]` and
/// `halves[half_starts[s]..half_starts[s + 1]]`.
#[derive(Debug, Default)]
pub struct Piece {
    pub events: Vec<EventRec>,
    pub starts: Vec<u32>,
    pub halves: Vec<Half>,
    pub half_starts: Vec<u32>,
    /// The communication records of the piece, in file order.
    pub comms: Vec<CommRec>,
}

/// Offsets of each stream's items in a grouped list, from how many each has (a counting sort's
/// first step): `starts[s]..starts[s + 1]`.
fn starts_of(counts: impl Iterator<Item = (usize, u32)>, streams: usize) -> Vec<u32> {
    let mut starts = vec![0u32; streams + 1];
    for (s, n) in counts {
        starts[s + 1] += n;
    }
    for i in 0..streams {
        starts[i + 1] += starts[i];
    }
    starts
}

impl Piece {
    #[inline]
    pub fn of_stream(&self, s: usize) -> &[EventRec] {
        &self.events[self.starts[s] as usize..self.starts[s + 1] as usize]
    }

    #[inline]
    pub fn halves_of_stream(&self, s: usize) -> &[Half] {
        &self.halves[self.half_starts[s] as usize..self.half_starts[s + 1] as usize]
    }

    /// Group the piece's events and the halves of its communications by stream, keeping their
    /// order within each (a counting sort).
    fn group(events: &[EventRec], comms: Vec<CommRec>, streams: usize) -> Piece {
        let starts = starts_of(events.iter().map(|e| (e.stream as usize, 1)), streams);
        let mut next = starts.clone();
        let mut out = vec![EventRec { stream: 0, ts: 0, ty: 0, value: 0 }; events.len()];
        for e in events {
            out[next[e.stream as usize] as usize] = *e;
            next[e.stream as usize] += 1;
        }
        let sides = |c: &CommRec| [(c.send, 1), (c.recv, 2)].into_iter().filter(|(s, _)| *s != NO_STREAM);
        let half_starts = starts_of(comms.iter().flat_map(sides).map(|(s, n)| (s as usize, n)), streams);
        let mut next = half_starts.clone();
        let blank = Half { ts: 0, bytes: 0, peer: 0, tag: 0, record: 0, kind: HalfKind::Send };
        let mut halves = vec![blank; half_starts[streams] as usize];
        let mut put = |s: u32, h: Half| {
            halves[next[s as usize] as usize] = h;
            next[s as usize] += 1;
        };
        for (k, c) in comms.iter().enumerate() {
            let tag = i32::try_from(c.tag).unwrap_or(crate::events::NONE_I32);
            let half = Half { ts: 0, bytes: c.size, peer: NO_STREAM, tag, record: k as u32, kind: HalfKind::Send };
            if c.send != NO_STREAM {
                put(c.send, Half { ts: c.physical_send, peer: c.recv, ..half });
            }
            if c.recv != NO_STREAM {
                put(c.recv, Half { ts: c.logical_recv, peer: c.send, kind: HalfKind::Post, ..half });
                put(c.recv, Half { ts: c.physical_recv, peer: c.send, kind: HalfKind::Receive, ..half });
            }
        }
        Piece { events: out, starts, halves, half_starts, comms }
    }
}

#[derive(Debug, Default)]
pub struct Records {
    pub states: Vec<StateRec>,
    /// Event pairs of each piece of the file, in file order.
    pub pieces: Vec<Piece>,
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

    /// Every communication record, in file order.
    pub fn comms(&self) -> impl Iterator<Item = &CommRec> {
        self.pieces.iter().flat_map(|p| p.comms.iter())
    }

    /// The index in the file's communication records of each piece's first one.
    pub fn first_comm_of_pieces(&self) -> Vec<i64> {
        let mut next = 0i64;
        self.pieces
            .iter()
            .map(|p| {
                next += p.comms.len() as i64;
                next - p.comms.len() as i64
            })
            .collect()
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
/// is parsed in parallel while the next one is read, so the file is never held whole and the
/// cores do not wait for the reading. `progress` is told the bytes read.
pub fn parse(
    path: &Path,
    reader: &mut (dyn std::io::Read + Send),
    start: Vec<u8>,
    first_line: u64,
    layout: &Layout,
    scale: i64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Records> {
    parse_in_pieces(path, reader, start, first_line, layout, scale, progress, PIECE_BYTES)
}

/// A batch of pieces of the text, each ending at a line end, and the partial line after them.
struct Batch {
    buffers: Vec<Vec<u8>>,
    filled: usize,
    carry: Vec<u8>,
    eof: bool,
}

impl Batch {
    fn new(pieces: usize, piece_bytes: usize) -> Self {
        let buffers = (0..pieces).map(|_| Vec::with_capacity(piece_bytes + slack(piece_bytes))).collect();
        Batch { buffers, filled: 0, carry: Vec::new(), eof: false }
    }

    /// Fill the pieces from `reader`, starting with `carry` (the partial line the previous
    /// batch ended with); the partial line this one ends with is left in `self.carry`.
    fn fill(
        &mut self,
        mut carry: Vec<u8>,
        reader: &mut (dyn std::io::Read + Send),
        piece_bytes: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> std::io::Result<()> {
        self.filled = 0;
        for buf in &mut self.buffers {
            buf.clear();
            buf.append(&mut carry);
            self.eof = fill(buf, reader, piece_bytes)?;
            progress(buf.len() as u64);
            if !self.eof {
                // Keep the piece to whole lines; the partial last one starts the next piece.
                let cut = memchr::memrchr(b'\n', buf).map_or(0, |p| p + 1);
                carry.extend_from_slice(&buf[cut..]);
                buf.truncate(cut);
            }
            self.filled += 1;
            if self.eof {
                break;
            }
        }
        self.carry = carry;
        Ok(())
    }

    fn pieces(&self) -> &[Vec<u8>] {
        &self.buffers[..self.filled]
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn parse_in_pieces(
    path: &Path,
    reader: &mut (dyn std::io::Read + Send),
    start: Vec<u8>,
    first_line: u64,
    layout: &Layout,
    scale: i64,
    progress: &(dyn Fn(u64) + Sync),
    piece_bytes: usize,
) -> Result<Records> {
    let mut out = Records::default();
    parse_each(path, reader, start, first_line, layout, scale, progress, piece_bytes, &mut |mut r| {
        add_other_types(&mut out.other_types, r.other_types);
        out.states.append(&mut r.states);
        out.pieces.append(&mut r.pieces);
        Ok(())
    })?;
    Ok(out)
}

/// Add a piece's records of other types (how many, the first one's line) to the file's so far.
pub(super) fn add_other_types(total: &mut (u64, u64), piece: (u64, u64)) {
    if piece.0 > 0 && total.0 == 0 {
        total.1 = piece.1;
    }
    total.0 += piece.0;
}

/// `parse`, handing each piece's records to `sink` in file order as they are parsed instead
/// of gathering them: communication lines and the first other-type line are lines of the file.
#[allow(clippy::too_many_arguments)]
pub(super) fn parse_each(
    path: &Path,
    reader: &mut (dyn std::io::Read + Send),
    start: Vec<u8>,
    first_line: u64,
    layout: &Layout,
    scale: i64,
    progress: &(dyn Fn(u64) + Sync),
    piece_bytes: usize,
    sink: &mut dyn FnMut(Records) -> Result<()>,
) -> Result<()> {
    let pieces = 2 * rayon::current_num_threads().max(1);
    let (mut current, mut next) = (Batch::new(pieces, piece_bytes), Batch::new(pieces, piece_bytes));
    current.fill(start, reader, piece_bytes, progress).map_err(|e| Error::io(path, e))?;
    let mut line = first_line;
    loop {
        let parse_batch = |batch: &Batch| -> Vec<std::result::Result<Records, PieceError>> {
            batch.pieces().par_iter().map(|p| parse_piece(p, layout, scale)).collect()
        };
        let (parsed, read) = if current.eof {
            (parse_batch(&current), Ok(()))
        } else {
            let carry = std::mem::take(&mut current.carry);
            rayon::join(|| parse_batch(&current), || next.fill(carry, reader, piece_bytes, progress))
        };
        for piece in parsed {
            match piece {
                Ok(mut r) => {
                    if r.other_types.0 > 0 {
                        r.other_types.1 += line - 1;
                    }
                    for c in r.pieces.iter_mut().flat_map(|p| p.comms.iter_mut()) {
                        c.line += line - 1;
                    }
                    line += r.lines;
                    sink(r)?;
                }
                // The pieces before it in the batch are counted in `line` already.
                Err(e) => return Err(Error::at_line(path, line + e.line - 1, Some(e.field), e.message)),
            }
        }
        read.map_err(|e| Error::io(path, e))?;
        if current.eof {
            return Ok(());
        }
        std::mem::swap(&mut current, &mut next);
    }
}

/// Read into `buf` until it holds a piece's worth of bytes and at least one line end, or the
/// input ends (true). The bytes are read into the buffer's spare capacity, which is never
/// cleared first.
fn fill(buf: &mut Vec<u8>, reader: &mut dyn std::io::Read, piece_bytes: usize) -> std::io::Result<bool> {
    use std::io::Read;
    loop {
        let len = buf.len();
        if len >= piece_bytes && memchr::memrchr(b'\n', buf).is_some() {
            return Ok(false);
        }
        let want = piece_bytes.max(len) + slack(piece_bytes) - len;
        if reader.take(want as u64).read_to_end(buf)? == 0 {
            return Ok(true);
        }
    }
}

pub(super) const PIECE_BYTES: usize = 4 << 20;

/// How much more than a piece is read at once, so that a piece usually ends in a line end
/// without another read.
fn slack(piece_bytes: usize) -> usize {
    piece_bytes / 16 + 1
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// How many of the eight bytes of `word` (first byte lowest) are ASCII digits before the
/// first one that is not. A byte is a digit when its high nibble is 3 both as it is and
/// after adding 6 (which carries '0'-'9' no further than 0x3F); carries and borrows between
/// bytes only move upward, past the first non-digit, where nothing is read.
#[inline(always)]
fn leading_digits(word: u64) -> usize {
    let high = 0xF0 * ONES;
    let not_digit = ((word & high) ^ (0x30 * ONES)) | ((word.wrapping_add(0x06 * ONES) & high) ^ (0x30 * ONES));
    (not_digit.trailing_zeros() / 8) as usize
}

/// The value of the first `n` (1 to 8) digits of `word`: the digits are moved to the top
/// bytes (zeros before them), then combined pairwise, in fours and all eight with three
/// multiplications (the SWAR method of simdjson's eight-digit parser).
#[inline(always)]
fn digits_value(word: u64, n: usize) -> u64 {
    debug_assert!((1..=8).contains(&n));
    let d = word.wrapping_sub(0x30 * ONES) << (8 * (8 - n) as u32);
    let pairs = d.wrapping_mul(10).wrapping_add(d >> 8);
    let lo = (pairs & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32));
    let hi = ((pairs >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32));
    lo.wrapping_add(hi) >> 32
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
        self.int_from(field, start, i, 0, negative)
    }

    /// The next field as an integer, eight digits at a time where eight bytes are left: for the
    /// fields that are usually long (times, event types). Anything but plain digits followed
    /// by more digits or a ':' is left to `int`.
    #[inline(always)]
    fn long_int(&mut self, field: &'static str) -> std::result::Result<i64, PieceError> {
        let start = self.pos;
        if let Some(word) = self.b.get(start..start + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
            let word = u64::from_le_bytes(word);
            let n = leading_digits(word);
            if n == 8 {
                return self.int_from(field, start, start + 8, digits_value(word, 8), false);
            }
            if n > 0 && (word >> (8 * n)) as u8 == b':' {
                self.pos = start + n + 1;
                return Ok(digits_value(word, n) as i64);
            }
        }
        self.int(field)
    }

    /// Go on reading the digits of a field begun at `start` from `i`, with the value `v` of
    /// the digits before `i`.
    #[inline(always)]
    fn int_from(
        &mut self,
        field: &'static str,
        start: usize,
        mut i: usize,
        mut v: u64,
        negative: bool,
    ) -> std::result::Result<i64, PieceError> {
        let b = self.b;
        let digits = start + usize::from(negative);
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
        let mut comms = Vec::new();
        let mut out = parse_lines(piece, layout, scale, &mut events, &mut comms)?;
        out.pieces.push(Piece::group(&events, comms, layout.streams));
        Ok(out)
    })
}

fn parse_lines(
    piece: &[u8],
    layout: &Layout,
    scale: i64,
    events: &mut Vec<EventRec>,
    comms: &mut Vec<CommRec>,
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
                let ts = scaled(f.long_int("time").map_err(|e| at(e, line_in_piece))?, "time")?;
                if !f.more() {
                    return Err(PieceError {
                        line: line_in_piece,
                        field: "type",
                        message: "expected at least one TYPE:VALUE pair, found the end of the record".into(),
                    });
                }
                while f.more() {
                    let ty = f.long_int("type").map_err(|e| at(e, line_in_piece))?;
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
                comms.push(CommRec {
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
            4 => {
                // A global operation (MPItrace, Dimemas): one task's part in a collective, at
                // its start: communicator, bytes sent and received, the operation (Dimemas's
                // numbering; the MPI call's event names it too) and the root's rank in the
                // communicator. Kept as the details Extrae gives as events of the same time.
                let stream = object(&mut f, line_in_piece)?;
                let ts = scaled(f.long_int("time").map_err(|e| at(e, line_in_piece))?, "time")?;
                let comm = f.int("communicator").map_err(|e| at(e, line_in_piece))?;
                let sent = f.int("send size").map_err(|e| at(e, line_in_piece))?;
                let received = f.int("receive size").map_err(|e| at(e, line_in_piece))?;
                let _operation = f.int("global operation").map_err(|e| at(e, line_in_piece))?;
                let root = f.int("root").map_err(|e| at(e, line_in_piece))?;
                for (ty, value) in
                    [(50_100_001, sent), (50_100_002, received), (50_100_004, comm), (ROOT_IN_COMM, root)]
                {
                    events.push(EventRec { stream, ts, ty, value });
                }
            }
            _ => {
                if out.other_types.0 == 0 {
                    out.other_types.1 = line_in_piece;
                }
                out.other_types.0 += 1;
            }
        }
        if f.more() && kind != 2 && (1..=4).contains(&kind) {
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
    use crate::reading::paraver::header::Task;

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
        let halves =
            |s: usize| r.pieces[0].halves_of_stream(s).iter().map(|h| (h.ts, h.kind, h.peer)).collect::<Vec<_>>();
        assert_eq!(halves(0), vec![(11_000, HalfKind::Send, 1)]);
        assert_eq!(halves(1), vec![(20_000, HalfKind::Post, 0), (30_000, HalfKind::Receive, 0)]);
        let c = r.comms().next().unwrap();
        assert_eq!((c.send, c.recv, c.physical_recv, c.line), (0, 1, 30_000, 4));
        assert_eq!(r.other_types, (1, 5));
        // A global operation: its details as event pairs of its time.
        let r = parse_text(b"4:1:1:1:1:73107:91:32:0:10:2\n", 1000, PIECE_BYTES).unwrap();
        let got: Vec<(u32, i64)> = r.events().map(|e| (e.ty, e.value)).collect();
        assert_eq!(got, [(50_100_001, 32), (50_100_002, 0), (50_100_004, 91), (ROOT_IN_COMM, 2)]);
        assert!(r.events().all(|e| e.ts == 73_107_000 && e.stream == 0));
        let e = parse_text(b"4:1:1:1:1:73107:91:32:0:10\n", 1, PIECE_BYTES).unwrap_err().to_string();
        assert!(e.contains("root"), "{e}");
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
    fn numbers_of_every_length_parse_as_the_standard_library_does() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut texts: Vec<String> = (0..20).map(|k| "9".repeat(k + 1)).collect();
        texts.extend(["0", "-0", "007", "9223372036854775807", "-9223372036854775807"].map(String::from));
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 19) as u32 + 1;
            texts.push(((x >> 5) % 10u64.pow(digits.min(18))).to_string());
        }
        for t in &texts {
            for tail in ["", ":", ":12345678:9", "x"] {
                let line = format!("{t}{tail}");
                let want = if tail == "x" { None } else { t.parse::<i64>().ok() };
                assert_eq!(Fields { b: line.as_bytes(), pos: 0 }.int("f").ok(), want, "{line}");
                assert_eq!(Fields { b: line.as_bytes(), pos: 0 }.long_int("f").ok(), want, "{line}");
            }
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
            assert!(piece == PIECE_BYTES || ok.pieces.len() > 10, "pieces of {piece}: {}", ok.pieces.len());
            assert!(ok.events().zip(0..).all(|(e, i)| e.ts == i), "pieces of {piece}: file order");
        }
    }
}
