//! Every message's two halves (its send on the sender, its receive on the receiver), kept out
//! of memory for the DAG functions: as the messages stream, each half goes to an anonymous
//! scratch file (32 bytes) and its rank's count is kept; when they end, the halves are
//! distributed into files of runs of whole ranks (about `GROUP_HALVES` halves each, at most
//! `MAX_GROUPS` files), which are read back one at a time in rank order, each put in its ranks'
//! time order (time, then msg_id, a send before the receive of the same message).
//! This is the shuffle by rank that a distributed engine would do, on one machine; DataFusion's
//! own sorts spill the same way.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use datafusion::error::{DataFusionError, Result};

use super::Kind;

/// Halves a run of whole ranks holds at least before the next rank starts a new run.
pub(crate) const GROUP_HALVES: u64 = 1 << 22;

/// Files of runs at most (all open while the halves are distributed).
const MAX_GROUPS: u64 = 256;

/// Bytes of a half on disk: its rank (as an i32), its row with whether it is the receive in
/// the top bit, its time, bytes and message id.
const HALF_BYTES: usize = 32;

/// Message rows a scratch file of halves holds at most: the top bit of a row on disk says
/// whether the half is the receive.
pub(crate) const MAX_ROWS: u32 = 1 << 31;

/// A message half: its rank, time, message (its msg_id, or its position where it has none;
/// and its row in the order the halves' messages came), whether it is the send, and the
/// message's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Half {
    pub rank: i64,
    pub ts: i64,
    pub id: i64,
    pub row: u32,
    pub kind: Kind,
    pub bytes: i64,
}

impl Half {
    /// Its place in its rank's time order: time, then message, a send before a receive.
    pub fn order(&self) -> (i64, i64, i64, Kind) {
        (self.rank, self.ts, self.id, self.kind)
    }
}

fn encode(h: &Half, out: &mut [u8]) {
    // The rank and row were checked to fit (`Halves::push`).
    out[0..4].copy_from_slice(&(h.rank as i32).to_le_bytes());
    let row = h.row | if h.kind == Kind::Recv { MAX_ROWS } else { 0 };
    out[4..8].copy_from_slice(&row.to_le_bytes());
    out[8..16].copy_from_slice(&h.ts.to_le_bytes());
    out[16..24].copy_from_slice(&h.bytes.to_le_bytes());
    out[24..32].copy_from_slice(&h.id.to_le_bytes());
}

fn decode(b: &[u8]) -> Half {
    let i64_at = |at: usize| i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let row = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    Half {
        rank: i64::from(i32::from_le_bytes(b[0..4].try_into().expect("4 bytes"))),
        ts: i64_at(8),
        bytes: i64_at(16),
        id: i64_at(24),
        row: row & !MAX_ROWS,
        kind: if row & MAX_ROWS != 0 { Kind::Recv } else { Kind::Send },
    }
}

fn io_error(what: &str, doing: &str, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{what}: {doing} the scratch file of its message halves failed: {e} (it is written in the temporary directory, TMPDIR)"
    ))
}

/// The halves written so far, and each rank's count.
pub(crate) struct Halves {
    what: &'static str,
    file: BufWriter<File>,
    /// Halves per rank: each rank's messages sent plus received (PCLVis's mc).
    pub counts: BTreeMap<i64, i64>,
    written: u64,
    buffer: [u8; HALF_BYTES],
}

impl std::fmt::Debug for Halves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Halves").field("ranks", &self.counts.len()).field("halves", &self.written).finish()
    }
}

impl Halves {
    pub fn new(what: &'static str) -> Result<Halves> {
        let file = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
        Ok(Halves {
            what,
            file: BufWriter::with_capacity(1 << 20, file),
            counts: BTreeMap::new(),
            written: 0,
            buffer: [0; HALF_BYTES],
        })
    }

    pub fn push(&mut self, h: Half) -> Result<()> {
        if i32::try_from(h.rank).is_err() || h.row >= MAX_ROWS {
            return Err(DataFusionError::Execution(format!(
                "{}: rank {} or message row {} is beyond what its scratch file of halves holds (ranks of 32 bits, {MAX_ROWS} messages); narrow the relation",
                self.what, h.rank, h.row
            )));
        }
        encode(&h, &mut self.buffer);
        self.file.write_all(&self.buffer).map_err(|e| io_error(self.what, "writing", e))?;
        *self.counts.entry(h.rank).or_default() += 1;
        self.written += 1;
        Ok(())
    }

    /// Bytes held in memory: the counts.
    pub fn held_bytes(&self) -> usize {
        self.counts.len() * 48
    }

    /// Every half has been written: distribute them into runs of whole ranks, read back in
    /// rank order by `Groups::next`.
    pub fn into_groups(self) -> Result<Groups> {
        self.into_groups_of(GROUP_HALVES)
    }

    /// `into_groups`, with runs of at least `min_halves` halves.
    fn into_groups_of(self, min_halves: u64) -> Result<Groups> {
        let what = self.what;
        let mut file = self.file.into_inner().map_err(|e| io_error(what, "writing", e.into_error()))?;
        let per_group = min_halves.max(self.written.div_ceil(MAX_GROUPS)).max(1);
        // The first rank of each run.
        let mut firsts: Vec<i64> = Vec::new();
        let mut filled = u64::MAX;
        for (&rank, &n) in &self.counts {
            if filled >= per_group {
                firsts.push(rank);
                filled = 0;
            }
            filled += n as u64;
        }
        let mut runs: Vec<BufWriter<File>> = Vec::with_capacity(firsts.len());
        for _ in &firsts {
            let f = tempfile::tempfile().map_err(|e| io_error(what, "creating", e))?;
            runs.push(BufWriter::with_capacity(1 << 16, f));
        }
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error(what, "reading", e))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut b = [0u8; HALF_BYTES];
        for k in 0..self.written {
            if k % (1 << 20) == 0 {
                commdb_catalog::interrupt::check(what)?;
            }
            reader.read_exact(&mut b).map_err(|e| io_error(what, "reading", e))?;
            let rank = i64::from(i32::from_le_bytes(b[0..4].try_into().expect("4 bytes")));
            let run = firsts.partition_point(|&f| f <= rank).saturating_sub(1);
            runs[run].write_all(&b).map_err(|e| io_error(what, "writing", e))?;
        }
        let mut files = Vec::with_capacity(runs.len());
        for run in runs {
            files.push(run.into_inner().map_err(|e| io_error(what, "writing", e.into_error()))?);
        }
        Ok(Groups { what, files: files.into_iter() })
    }
}

/// Runs of whole ranks of halves, in rank order.
pub(crate) struct Groups {
    what: &'static str,
    files: std::vec::IntoIter<File>,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").field("left", &self.files.len()).finish()
    }
}

impl Groups {
    /// The next run's halves in their ranks' time order (None: no more).
    pub fn next_group(&mut self) -> Result<Option<Vec<Half>>> {
        let Some(mut file) = self.files.next() else { return Ok(None) };
        let what = self.what;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error(what, "reading", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io_error(what, "reading", e))?;
        let mut halves: Vec<Half> = bytes.chunks_exact(HALF_BYTES).map(decode).collect();
        drop(bytes);
        halves.sort_unstable_by_key(Half::order);
        Ok(Some(halves))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_come_back_by_rank_in_time_order_whatever_order_they_went_in() {
        let mut halves = Halves::new("test").unwrap();
        let mut all = Vec::new();
        for k in 0..5000u32 {
            let rank = i64::from((k * 7919) % 37) - 3;
            let h = Half {
                rank,
                ts: i64::from((k * 31) % 101),
                id: i64::from(k % 1000),
                row: k,
                kind: if k % 2 == 0 { Kind::Send } else { Kind::Recv },
                bytes: i64::from(k),
            };
            halves.push(h).unwrap();
            all.push(h);
        }
        assert_eq!(halves.counts.values().sum::<i64>(), 5000);
        // A rank of more than 32 bits is refused, naming it.
        let far = Half { rank: 1 << 40, ts: 0, id: 0, row: 0, kind: Kind::Send, bytes: 0 };
        let e = halves.push(far).unwrap_err().to_string();
        assert!(e.contains("rank 1099511627776"), "{e}");
        // Runs of at least 600 halves: 135 a rank, so several ranks a run, never cut.
        let mut groups = halves.into_groups_of(600).unwrap();
        let mut back = Vec::new();
        let mut runs = 0;
        while let Some(g) = groups.next_group().unwrap() {
            assert!(back.last().is_none_or(|l: &Half| l.rank < g[0].rank), "a rank cut between runs");
            back.extend(g);
            runs += 1;
        }
        assert!(runs > 4, "{runs} runs");
        all.sort_unstable_by_key(Half::order);
        let order = |v: &[Half]| v.iter().map(Half::order).collect::<Vec<_>>();
        assert_eq!(order(&back), order(&all));
    }
}
