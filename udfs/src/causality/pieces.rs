//! The pieces of `dag_edges`' edges on a distributed engine, and how they meet. A message's
//! edge needs three pieces that three tasks find: the node of its send (where the sender's
//! halves lie), the node of its receive (where the receiver's lie) and its size, duration and
//! latency (where the message's row lies). Each piece crosses one exchange to the task of its
//! message's id range (`RANGE_BITS` low bits of msg_id cleared), packed as bytes a row per
//! range: Ballista holds a partition fetched from another executor whole in memory, and as
//! Arrow columns a piece took about 50 bytes where packed it takes about 10. The task writes
//! each packed row to a scratch file as it comes and, once every piece has come, reads one
//! range at a time back, puts its pieces in order of msg_id and pairs them: memory holds the
//! index of the packed rows and one range's pieces, never the task's messages.
//!
//! A packed piece: its msg_id as the difference from the piece before (zigzag varint), a byte
//! of its kind (and, for a size, which of its values are present), then for a send or a
//! receive its node as the difference from the node before, for a size its bytes and
//! duration as differences from the size before, and its latency as the eight bytes of the
//! float.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};

use crate::varint;

/// The low bits of msg_id a range of ids spans: the pieces of 16,384 ids meet as one range.
pub(super) const RANGE_BITS: u32 = 14;

/// A piece of a message's edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Piece {
    /// The node of the message's send.
    Send(i64),
    /// The node of its receive.
    Recv(i64),
    /// Its size, duration and latency.
    Size { bytes: Option<i64>, duration: Option<i64>, latency: Option<f64> },
}

impl Piece {
    /// Its kind byte: 0 a send, 1 a receive, 2 a size, with bits 2, 3 and 4 set for the
    /// size's bytes, duration and latency present.
    fn kind(&self) -> u8 {
        match self {
            Piece::Send(_) => 0,
            Piece::Recv(_) => 1,
            Piece::Size { bytes, duration, latency } => {
                2 | u8::from(bytes.is_some()) << 2
                    | u8::from(duration.is_some()) << 3
                    | u8::from(latency.is_some()) << 4
            }
        }
    }

    /// Its place among a message's pieces: the send, the receive, the size.
    fn order(&self) -> u8 {
        self.kind() & 3
    }
}

/// The rows the pieces cross their exchange as: a range of ids (msg_id >> `RANGE_BITS`), its
/// pieces in this row, and the pieces packed ([`crate::packed`]).
pub(super) fn packed_schema() -> SchemaRef {
    crate::packed::schema("id_range", "pieces")
}

/// The values of the pieces written before the next, which it is written against.
#[derive(Default)]
struct Last {
    id: i64,
    node: i64,
    bytes: i64,
    duration: i64,
}

fn put_piece(out: &mut Vec<u8>, id: i64, piece: &Piece, last: &mut Last) {
    varint::put_signed(out, id.wrapping_sub(last.id));
    last.id = id;
    out.push(piece.kind());
    match *piece {
        Piece::Send(node) | Piece::Recv(node) => {
            varint::put_signed(out, node.wrapping_sub(last.node));
            last.node = node;
        }
        Piece::Size { bytes, duration, latency } => {
            for (v, last) in [(bytes, &mut last.bytes), (duration, &mut last.duration)] {
                if let Some(v) = v {
                    varint::put_signed(out, v.wrapping_sub(*last));
                    *last = v;
                }
            }
            if let Some(l) = latency {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
    }
}

fn get_piece(bytes: &[u8], at: &mut usize, last: &mut Last) -> Option<(i64, Piece)> {
    last.id = last.id.wrapping_add(varint::get_signed(bytes, at)?);
    let kind = *bytes.get(*at)?;
    *at += 1;
    let piece = match kind {
        0 | 1 => {
            last.node = last.node.wrapping_add(varint::get_signed(bytes, at)?);
            if kind == 0 { Piece::Send(last.node) } else { Piece::Recv(last.node) }
        }
        k if k & 3 == 2 && k >> 5 == 0 => {
            let mut value = |present: bool, last: &mut i64| -> Option<Option<i64>> {
                if !present {
                    return Some(None);
                }
                *last = last.wrapping_add(varint::get_signed(bytes, at)?);
                Some(Some(*last))
            };
            let b = value(k & 4 != 0, &mut last.bytes)?;
            let duration = value(k & 8 != 0, &mut last.duration)?;
            let latency = if k & 16 != 0 {
                let raw: [u8; 8] = bytes.get(*at..*at + 8)?.try_into().ok()?;
                *at += 8;
                Some(f64::from_le_bytes(raw))
            } else {
                None
            };
            Piece::Size { bytes: b, duration, latency }
        }
        _ => return None,
    };
    Some((last.id, piece))
}

/// `n` pieces (the `i`-th of msg_id `id(i)`, `piece(i)`) as rows of [`packed_schema`], a row per
/// range of ids in order of range, the pieces of a range in the order given (they are put in
/// order of msg_id where they meet).
pub(super) fn pack(n: usize, id: impl Fn(usize) -> i64, piece: impl Fn(usize) -> Piece) -> Result<RecordBatch> {
    if u32::try_from(n).is_err() {
        return Err(DataFusionError::Internal(format!("dag_edges: {n} pieces are too many for one batch")));
    }
    let range = |i: usize| id(i) >> RANGE_BITS;
    let order = by_range(n, &range);
    let mut packed = crate::packed::Rows::default();
    let mut out = Vec::new();
    for group in order.chunk_by(|&a, &b| range(a as usize) == range(b as usize)) {
        out.clear();
        let mut last = Last::default();
        for &i in group {
            put_piece(&mut out, id(i as usize), &piece(i as usize), &mut last);
        }
        packed.push(range(group[0] as usize), group.len(), &out);
    }
    packed.finish(packed_schema())
}

/// The indices 0..n in order of `range(i)`, each range's in the order given: by counting
/// where the ranges are few beside the pieces (a run's ids are dense), else by a stable sort.
fn by_range(n: usize, range: &impl Fn(usize) -> i64) -> Vec<u32> {
    let (lo, hi) = (0..n).map(range).fold((i64::MAX, i64::MIN), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let mut order: Vec<u32> = (0..n as u32).collect();
    if n == 0 {
        return order;
    }
    let span = hi.abs_diff(lo);
    if span > (4 * n as u64).max(1024) {
        order.sort_by_key(|&i| range(i as usize));
        return order;
    }
    let mut starts = vec![0u32; span as usize + 2];
    for i in 0..n {
        starts[(range(i) - lo) as usize + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    for i in 0..n {
        let slot = &mut starts[(range(i) - lo) as usize];
        order[*slot as usize] = i as u32;
        *slot += 1;
    }
    order
}

/// What the packed rows carry, as an error names it.
const PIECES: &str = "the pieces of the edges";

fn damaged(what: &str) -> DataFusionError {
    crate::packed::damaged(what, PIECES)
}

/// The `count` pieces packed in `bytes`, each given to `each` (an error names `what` when
/// they do not read back whole).
fn unpack(what: &str, bytes: &[u8], count: u32, mut each: impl FnMut(i64, Piece) -> Result<()>) -> Result<()> {
    let (mut at, mut last) = (0usize, Last::default());
    for _ in 0..count {
        let (id, piece) = get_piece(bytes, &mut at, &mut last).ok_or_else(|| damaged(what))?;
        each(id, piece)?;
    }
    if at != bytes.len() {
        return Err(damaged(what));
    }
    Ok(())
}

/// A packed row on disk.
#[derive(Debug, Clone, Copy)]
struct Stored {
    at: u64,
    len: u32,
    count: u32,
}

/// The pieces a task has been given, on disk by range of ids, paired a range at a time.
pub(super) struct Pairing {
    what: &'static str,
    file: File,
    at: u64,
    ranges: BTreeMap<i64, Vec<Stored>>,
    stored: usize,
}

impl std::fmt::Debug for Pairing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pairing").field("ranges", &self.ranges.len()).field("rows", &self.stored).finish()
    }
}

/// A message's edge: from the node of its send to that of its receive, with its id, size,
/// duration and latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Edge {
    pub from: i64,
    pub to: i64,
    pub id: i64,
    pub bytes: Option<i64>,
    pub duration: Option<i64>,
    pub latency: Option<f64>,
}

impl Pairing {
    pub fn new(what: &'static str) -> Result<Pairing> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(Pairing { what, file, at: 0, ranges: BTreeMap::new(), stored: 0 })
    }

    /// Keep the packed rows of `batch` (of [`packed_schema`]).
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let what = self.what;
        let (file, at, ranges, stored) = (&mut self.file, &mut self.at, &mut self.ranges, &mut self.stored);
        crate::packed::each_row(what, PIECES, batch, |range, count, bytes| {
            let Ok(len) = u32::try_from(bytes.len()) else {
                return Err(damaged(what));
            };
            file.write_all(bytes).map_err(|e| io_error(what, "writing", e))?;
            ranges.entry(range).or_default().push(Stored { at: *at, len, count });
            *at += u64::from(len);
            *stored += 1;
            Ok(())
        })
    }

    /// Bytes held in memory: where the packed rows lie.
    pub fn held_bytes(&self) -> usize {
        self.stored * std::mem::size_of::<Stored>() + self.ranges.len() * 48
    }

    /// The edges of the next range of ids in order of msg_id, at least `min` of them unless
    /// the ranges end (None: no range left). A message without both nodes and its size (not
    /// matched) makes none; two pieces of one kind for one msg_id are an error.
    pub fn next_edges(&mut self, min: usize) -> Result<Option<Vec<Edge>>> {
        if self.ranges.is_empty() {
            return Ok(None);
        }
        let mut edges = Vec::new();
        let mut pieces: Vec<(i64, Piece)> = Vec::new();
        let mut buffer = Vec::new();
        while edges.len() < min {
            let Some((_, rows)) = self.ranges.pop_first() else { break };
            pieces.clear();
            for row in rows {
                buffer.resize(row.len as usize, 0);
                self.file.read_exact_at(&mut buffer, row.at).map_err(|e| io_error(self.what, "reading", e))?;
                unpack(self.what, &buffer, row.count, |id, piece| {
                    pieces.push((id, piece));
                    Ok(())
                })?;
            }
            pieces.sort_unstable_by_key(|(id, p)| (*id, p.order()));
            pair(self.what, &pieces, &mut edges)?;
        }
        Ok(Some(edges))
    }
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its edges' pieces failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// The edges of `pieces` (in order of msg_id, then piece), appended to `edges`.
fn pair(what: &str, pieces: &[(i64, Piece)], edges: &mut Vec<Edge>) -> Result<()> {
    for message in pieces.chunk_by(|a, b| a.0 == b.0) {
        let id = message[0].0;
        let (mut from, mut to, mut size) = (None, None, None);
        for (_, piece) in message {
            let repeated = match *piece {
                Piece::Send(node) => from.replace(node).is_some(),
                Piece::Recv(node) => to.replace(node).is_some(),
                Piece::Size { bytes, duration, latency } => size.replace((bytes, duration, latency)).is_some(),
            };
            if repeated {
                return Err(DataFusionError::Execution(format!(
                    "{what}: msg_id {id} is not unique; on a cluster the halves of a message are paired by it"
                )));
            }
        }
        if let (Some(from), Some(to), Some((bytes, duration, latency))) = (from, to, size) {
            edges.push(Edge { from, to, id, bytes, duration, latency });
        }
    }
    Ok(())
}

/// `edges` as columns: from_node, to_node, msg_id, bytes, duration, latency.
pub(super) fn edge_columns(edges: &[Edge]) -> Vec<ArrayRef> {
    vec![
        Arc::new(edges.iter().map(|e| e.from).collect::<Int64Array>()),
        Arc::new(edges.iter().map(|e| e.to).collect::<Int64Array>()),
        Arc::new(edges.iter().map(|e| e.id).collect::<Int64Array>()),
        Arc::new(edges.iter().map(|e| e.bytes).collect::<Int64Array>()),
        Arc::new(edges.iter().map(|e| e.duration).collect::<Int64Array>()),
        Arc::new(edges.iter().map(|e| e.latency).collect::<Float64Array>()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use commdb_analysis::columns::int64_column;

    fn packed(pieces: &[(i64, Piece)]) -> RecordBatch {
        pack(pieces.len(), |i| pieces[i].0, |i| pieces[i].1).unwrap()
    }

    fn size(k: i64) -> Piece {
        Piece::Size {
            bytes: (k % 5 != 0).then_some(k * 8),
            duration: (k % 7 != 0).then_some(1000 - k),
            latency: match k % 4 {
                0 => None,
                1 => Some(-0.0),
                2 => Some(f64::NAN),
                _ => Some(k as f64 / 3.0),
            },
        }
    }

    /// Pieces come back from their packed rows as they went, NULLs, negative ids, -0.0 and NaN
    /// included, each range in a row of its own.
    #[test]
    fn pieces_read_back_from_their_packed_rows() {
        let mut pieces: Vec<(i64, Piece)> = Vec::new();
        for k in -40_000i64..40_000 {
            pieces.push((k * 3, Piece::Send(k.rem_euclid(977) * 1_000_003)));
            pieces.push((k * 3, Piece::Recv(-k)));
            pieces.push((k * 3, size(k)));
        }
        // Shuffled, as the halves of a run of ranks come: each range keeps the order given.
        pieces.sort_by_key(|(id, p)| (id.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64), p.order()));
        let mut want = pieces.clone();
        want.sort_by_key(|(id, _)| id >> RANGE_BITS);
        let batch = packed(&pieces);
        let ranges = int64_column(std::slice::from_ref(&batch), 0).unwrap();
        assert_eq!(batch.num_rows() as i64, (119_997 >> RANGE_BITS) - (-120_000i64 >> RANGE_BITS) + 1);
        assert!(ranges.values().windows(2).all(|w| w[0] < w[1]));
        let mut got = Vec::new();
        crate::packed::each_row("test", PIECES, &batch, |_, count, bytes| {
            unpack("test", bytes, count, |id, p| {
                got.push((id, p));
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            let same = match (g.1, w.1) {
                (Piece::Size { latency: Some(a), .. }, Piece::Size { latency: Some(b), .. }) => {
                    a.to_bits() == b.to_bits() && g.0 == w.0
                }
                _ => g == w,
            };
            assert!(same, "{g:?} came back for {w:?}");
        }
        // Ids far apart (beyond counting) come in order of range too.
        let sparse = [(i64::MAX, Piece::Send(1)), (-5, Piece::Recv(2)), (i64::MIN, size(3)), (7, Piece::Send(4))];
        let batch_sparse = packed(&sparse);
        let mut got = Vec::new();
        crate::packed::each_row("test", PIECES, &batch_sparse, |_, c, b| {
            unpack("test", b, c, |id, _| {
                got.push(id);
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(got, [i64::MIN, -5, 7, i64::MAX]);
        // Damaged bytes are an error, not pieces.
        let bytes = batch.column(2).as_binary::<i64>().value(0);
        let count = int64_column(std::slice::from_ref(&batch), 1).unwrap().value(0) as u32;
        assert!(unpack("test", &bytes[..bytes.len() - 1], count, |_, _| Ok(())).is_err());
        assert!(unpack("test", bytes, count - 1, |_, _| Ok(())).is_err());
    }

    /// The pieces of one message meet whatever rows and batches they come in, the edges come
    /// out in order of msg_id, a message missing a piece makes no edge, and a repeated piece
    /// is an error.
    #[test]
    fn pieces_from_many_batches_pair_into_edges_in_order_of_msg_id() {
        let n = 100_000i64;
        // Three producers, as the senders', the receivers' and the messages' tasks, each in
        // batches of its own order.
        let sends: Vec<(i64, Piece)> = (0..n).rev().filter(|k| k % 11 != 3).map(|k| (k, Piece::Send(k / 10))).collect();
        let recvs: Vec<(i64, Piece)> = (0..n).map(|k| (k, Piece::Recv(k / 10 + 7))).collect();
        let sizes: Vec<(i64, Piece)> = (0..n).filter(|k| k % 13 != 5).map(|k| (k, size(k))).collect();
        let mut pairing = Pairing::new("test").unwrap();
        for list in [sends, recvs, sizes] {
            for chunk in list.chunks(7_919) {
                pairing.push(&packed(chunk)).unwrap();
            }
        }
        let mut edges = Vec::new();
        while let Some(mut more) = pairing.next_edges(20_000).unwrap() {
            assert!(more.len() >= 20_000 || pairing.ranges.is_empty());
            edges.append(&mut more);
        }
        let want: Vec<i64> = (0..n).filter(|k| k % 11 != 3 && k % 13 != 5).collect();
        assert_eq!(edges.iter().map(|e| e.id).collect::<Vec<_>>(), want);
        for e in &edges {
            assert_eq!((e.from, e.to), (e.id / 10, e.id / 10 + 7));
            let Piece::Size { bytes, duration, latency } = size(e.id) else { unreachable!() };
            assert_eq!((bytes, duration), (e.bytes, e.duration));
            assert_eq!(latency.map(f64::to_bits), e.latency.map(f64::to_bits));
        }

        let mut twice = Pairing::new("test").unwrap();
        twice.push(&packed(&[(5, Piece::Send(1)), (5, Piece::Recv(2)), (5, size(5))])).unwrap();
        twice.push(&packed(&[(5, Piece::Send(3))])).unwrap();
        let err = twice.next_edges(1).unwrap_err().to_string();
        assert!(err.contains("msg_id 5 is not unique"), "{err}");
    }
}
