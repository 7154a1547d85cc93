//! Counter-based random numbers: every draw is a hash of (seed, stream, a, b), so any rank can
//! recompute the noise of any message without shared state, and the output does not depend on
//! the order or the thread in which ranks are generated. SplitMix64 finaliser.

/// A uniform draw in [0, 1) for the given coordinates.
#[inline]
pub fn uniform(seed: u64, stream: u64, a: u64, b: u64) -> f64 {
    let mut z = seed
        .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(a.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(b.wrapping_mul(0x94D0_49BB_1331_11EB));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A draw in [-1, 1).
#[inline]
pub fn symmetric(seed: u64, stream: u64, a: u64, b: u64) -> f64 {
    2.0 * uniform(seed, stream, a, b) - 1.0
}

/// Independent purposes of random draws.
pub mod streams {
    pub const COMPUTE: u64 = 1;
    pub const NETWORK: u64 = 2;
    pub const BACKGROUND: u64 = 3;
    pub const CLOCK: u64 = 4;
    pub const SYNC: u64 = 5;
    pub const JITTER: u64 = 6;
    pub const THREADS: u64 = 7;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_deterministic_and_spread() {
        assert_eq!(uniform(1, 2, 3, 4), uniform(1, 2, 3, 4));
        let mean = (0..10_000).map(|i| uniform(7, 1, i, 0)).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02);
        assert!((0..1000).all(|i| (0.0..1.0).contains(&uniform(3, 3, i, i))));
    }
}
