//! A fast hasher for the small integer keys of per-row lookups (rank pairs, request ids, size
//! buckets): the multiply-rotate mixing of rustc's FxHasher. Not resistant to adversarial keys,
//! which trace analysis does not face; std's SipHash costs several times more per lookup.
//!
//! A multiply carries entropy only upwards: the product's low bits depend only on the key's
//! low bits, and a hash table picks its bucket from the low bits. Keys that differ only
//! above their low bits (a location, rank x 2^20 + thread; a rank paired with a block) all
//! landed in one bucket, and a look-up among a thousand locations probed hundreds of slots.
//! The hash is therefore rotated when finished, bringing the product's well-mixed high bits
//! down to where the table reads them.

/// FxHasher-style hasher for integer keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// How far the finished hash is rotated: the product's bits 38 and up become the low bits.
const ROTATE: u32 = 26;

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(ROTATE)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_i32(&mut self, v: i32) {
        self.write_u64(u64::from(v as u32));
    }

    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(SEED);
    }
}

/// `HashMap` with `FastHasher`.
pub type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// A set keyed by the fast hash.
pub type FastSet<K> = std::collections::HashSet<K, std::hash::BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    /// Distinct buckets of a table of `buckets` (a power of two) that the keys fall in.
    fn buckets_used<K: std::hash::Hash>(keys: impl Iterator<Item = K>, buckets: u64) -> usize {
        let build = BuildHasherDefault::<FastHasher>::default();
        let used: std::collections::HashSet<u64> = keys.map(|k| build.hash_one(k) & (buckets - 1)).collect();
        used.len()
    }

    #[test]
    fn keys_that_differ_only_in_their_high_bits_spread_over_the_buckets() {
        // 1,024 locations (rank x 2^20, thread 0) in a table of 2,048 buckets: well spread, as
        // consecutive ranks are; before the rotation they all fell in bucket 0.
        let locations = buckets_used((0..1024i64).map(|r| r << 20), 2048);
        let ranks = buckets_used(0..1024i64, 2048);
        assert!(locations > 600, "{locations} buckets for 1,024 locations");
        assert!(ranks > 600, "{ranks} buckets for 1,024 ranks");
        // A location with a small number (a block of its stretches).
        let pairs = buckets_used((0..1024i64).flat_map(|r| (0..4usize).map(move |b| (r << 20, b))), 8192);
        assert!(pairs > 2000, "{pairs} buckets for 4,096 pairs (32 before)");
        // Multiples of 2^32 and of 2^40 (each in one bucket before).
        assert!(buckets_used((0..1024i64).map(|r| r << 32), 2048) > 600);
        assert!(buckets_used((0..1024u64).map(|r| r << 40), 2048) > 400);
    }
}
