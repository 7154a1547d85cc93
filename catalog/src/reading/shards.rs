//! What the formats that are split before a conversion in groups share (a Paraver trace,
//! `paraver::pieces`; a CSV trace, `csv::pieces`): the scratch directory the shards are kept
//! in, removed with the reader or when the split fails, the cutting of the shards (runs of
//! whole ranks, in rank order) into groups of about a given number of events, and the reading
//! of the little-endian fields the scratch files (and the Paraver writer's runs) are made of.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The shards of a trace split before a conversion in groups: the events of each, and the
/// clock models the events are corrected with. A reader that keeps them gives them to
/// `InGroups::shards`, and its `prepare`, `corrects`, `events` and `groups` come from the trait.
#[derive(Debug, Default)]
pub struct Shards {
    pub sizes: Vec<u64>,
    pub models: Vec<crate::clock::model::RankModel>,
}

/// A scratch directory, made here and removed when dropped.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn create(dir: &Path) -> Result<Scratch> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Scratch(dir.to_path_buf()))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The file of shard `k`.
    pub fn shard(&self, k: usize) -> PathBuf {
        self.0.join(format!("shard-{k}"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Consecutive shards (of `sizes` events each) gathered into groups of about `events` events:
/// a group takes shards until it holds at least that many.
pub fn groups(sizes: &[u64], events: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut filled = 0u64;
    for (k, size) in sizes.iter().enumerate() {
        if groups.is_empty() || filled >= events {
            groups.push(Vec::new());
            filled = 0;
        }
        groups.last_mut().expect("a group").push(k);
        filled += size;
    }
    groups
}

/// Little-endian fields read from the front of a slice (which must hold them).
#[derive(Debug)]
pub struct Fields<'a>(pub &'a [u8]);

impl Fields<'_> {
    pub fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().expect("N bytes")
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.take())
    }
    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shards_gather_into_groups_of_at_least_the_events_asked() {
        assert_eq!(super::groups(&[5, 5, 1, 20, 1], 6), vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(super::groups(&[5, 5], 1), vec![vec![0], vec![1]]);
        assert!(super::groups(&[], 6).is_empty());
    }
}
