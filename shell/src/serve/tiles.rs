//! The calls and message lines a view reads (the rows the overview does not have) are computed
//! in tiles: `TILE_SLOTS` slots of the view's slot width, aligned on that width's grid (a view's
//! window is already whole slots of it, `ViewRequest::snapped`), and kept here. A pan at one
//! zoom then computes only the tiles it uncovers, and a zoom back finds its tiles. Slots are
//! independent in `lod_calls` (a slot's representative is the region with the most time in it)
//! and a message line belongs to the slot of its send, so a window's cells and lines are the
//! union of its tiles' cut to the window, exactly what one query over the window gives. The
//! tiles are kept up to `TILE_BYTES`, the least recently used dropped first.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::summary::{Cell, ViewLine};

/// Slots of a tile: a 1,600-pixel view spans 26 of them, so a view computes at most 2 x 63
/// slots more than it shows (8%).
pub const TILE_SLOTS: i64 = 64;

/// Bytes of tiles kept at most.
pub const TILE_BYTES: usize = 128 << 20;

/// A tile's cells (each a row's slot) and message lines (by the slot of their send).
#[derive(Debug, Default)]
pub struct Tile {
    pub cells: Vec<Cell>,
    pub lines: Vec<ViewLine>,
}

impl Tile {
    /// Bytes it holds, about.
    fn bytes(&self) -> usize {
        let cells: usize = self.cells.iter().map(|c| std::mem::size_of::<Cell>() + c.3.len()).sum();
        cells + self.lines.len() * std::mem::size_of::<ViewLine>() + std::mem::size_of::<Tile>()
    }
}

/// What a tile is kept under: the view's rows and what is read of them, its slot width, and the
/// tile's index on that width's grid of tiles.
type Key = (Arc<str>, i64);

/// The tiles computed, by key, with the order they were last used in.
#[derive(Debug, Default)]
pub struct Tiles {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    tiles: HashMap<Key, (Arc<Tile>, u64)>,
    /// (key, use stamp) oldest first; an entry whose stamp is not the tile's is stale.
    order: VecDeque<(Key, u64)>,
    stamp: u64,
    bytes: usize,
}

/// The tiles of width `TILE_SLOTS * res` that cover [t0, t1).
pub fn covering(t0: i64, t1: i64, res: i64) -> Range<i64> {
    let span = TILE_SLOTS * res;
    t0.div_euclid(span)..(t1 + span - 1).div_euclid(span)
}

/// The window of tiles `ks` at slot width `res`.
pub fn window(ks: &Range<i64>, res: i64) -> (i64, i64) {
    (ks.start * TILE_SLOTS * res, ks.end * TILE_SLOTS * res)
}

impl Tiles {
    /// Tiles `ks` of `scope`, each if kept.
    pub fn get(&self, scope: &Arc<str>, ks: Range<i64>) -> Vec<Option<Arc<Tile>>> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let kept = &mut *kept;
        ks.map(|k| {
            let key = (scope.clone(), k);
            let (tile, used) = kept.tiles.get_mut(&key)?;
            kept.stamp += 1;
            *used = kept.stamp;
            kept.order.push_back((key, kept.stamp));
            Some(tile.clone())
        })
        .collect()
    }

    /// Keep `tile` as tile `k` of `scope`, dropping the least recently used over `TILE_BYTES`.
    pub fn keep(&self, scope: &Arc<str>, k: i64, tile: Arc<Tile>) {
        let bytes = tile.bytes();
        if bytes > TILE_BYTES / 4 {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let kept = &mut *kept;
        kept.stamp += 1;
        let key = (scope.clone(), k);
        if let Some((old, _)) = kept.tiles.insert(key.clone(), (tile, kept.stamp)) {
            kept.bytes -= old.bytes();
        }
        kept.bytes += bytes;
        kept.order.push_back((key, kept.stamp));
        while kept.bytes > TILE_BYTES {
            let Some((key, stamp)) = kept.order.pop_front() else { break };
            if kept.tiles.get(&key).is_some_and(|(_, used)| *used == stamp)
                && let Some((tile, _)) = kept.tiles.remove(&key)
            {
                kept.bytes -= tile.bytes();
            }
        }
        // Stale entries of tiles used again are dropped when they would outnumber the tiles.
        if kept.order.len() > 4 * kept.tiles.len() + 64 {
            let tiles = &kept.tiles;
            kept.order.retain(|(key, stamp)| tiles.get(key).is_some_and(|(_, used)| used == stamp));
        }
    }

    /// Tiles kept and their bytes.
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (kept.tiles.len(), kept.bytes)
    }
}

/// Cells and lines computed over the tiles `ks` at slot width `res`, cut into those tiles.
pub fn split(cells: Vec<Cell>, lines: Vec<ViewLine>, ks: &Range<i64>, res: i64) -> Vec<Tile> {
    let span = TILE_SLOTS * res;
    let mut tiles: Vec<Tile> = ks.clone().map(|_| Tile::default()).collect();
    let index = |slot: i64| -> Option<usize> {
        let k = slot.div_euclid(span);
        ks.contains(&k).then(|| (k - ks.start) as usize)
    };
    for c in cells {
        if let Some(i) = index(c.1) {
            tiles[i].cells.push(c);
        }
    }
    for l in lines {
        if let Some(i) = index(l.2) {
            tiles[i].lines.push(l);
        }
    }
    tiles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(slot: i64) -> Cell {
        (0, slot, slot + 10, "MPI_Send".to_string(), 1.0)
    }

    #[test]
    fn tiles_cover_the_window_on_the_grid_and_split_by_slot() {
        // Slots of 10 ns: tiles of 640 ns.
        assert_eq!(covering(0, 640, 10), 0..1);
        assert_eq!(covering(630, 650, 10), 0..2);
        assert_eq!(covering(-10, 0, 10), -1..0);
        assert_eq!(window(&(2..4), 10), (1280, 2560));
        let tiles = split(vec![cell(630), cell(640), cell(5000)], Vec::new(), &(0..2), 10);
        assert_eq!(tiles.iter().map(|t| t.cells.len()).collect::<Vec<_>>(), vec![1, 1]);
        assert_eq!(tiles[1].cells[0].1, 640);
    }

    #[test]
    fn tiles_are_kept_within_their_bytes_the_least_recently_used_dropped() {
        let tiles = Tiles::default();
        let scope: Arc<str> = "rows".into();
        let big =
            || Arc::new(Tile { cells: (0..TILE_BYTES / 320).map(|i| cell(i as i64)).collect(), lines: Vec::new() });
        for k in 0..8 {
            tiles.keep(&scope, k, big());
            // Tile 0 is used after each other, so it stays.
            assert!(tiles.get(&scope, 0..1)[0].is_some(), "tile 0 dropped after {k}");
        }
        let (n, bytes) = tiles.held();
        assert!(bytes <= TILE_BYTES, "{bytes}");
        assert!(n < 8, "{n} tiles kept");
        let present: Vec<bool> = tiles.get(&scope, 0..8).iter().map(Option::is_some).collect();
        assert!(present[0] && present[7] && !present[1], "{present:?}");
        // Another scope is another tile.
        assert!(tiles.get(&"other rows".into(), 0..1)[0].is_none());
    }
}
