//! Integers in as few bytes as they need, for the analyses' scratch files: seven bits a byte,
//! the high bit set on every byte but the last (LEB128), and signed values zigzagged first
//! (0, -1, 1, -2, ... as 0, 1, 2, 3, ...) so that a small difference of either sign is short.
//! The scratch rows are written as differences from the row before, which in time order are
//! a few bytes where the values take eight.

/// The most bytes a value takes.
pub(crate) const MAX_BYTES: usize = 10;

/// Append `v` to `out`.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Append signed `v` to `out`.
pub(crate) fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// The value at `bytes[*at..]`, moving `at` past it (None: the bytes end inside it, or it runs
/// past ten bytes).
pub(crate) fn get(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The signed value at `bytes[*at..]` (see `get`).
pub(crate) fn get_signed(bytes: &[u8], at: &mut usize) -> Option<i64> {
    get(bytes, at).map(|z| (z >> 1) as i64 ^ -((z & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_and_small_ones_are_short() {
        let values = [0i64, 1, -1, 63, -64, 64, 1 << 40, -(1 << 40), i64::MAX, i64::MIN, 12345, -7];
        let mut out = Vec::new();
        for v in values {
            put_signed(&mut out, v);
            put(&mut out, v as u64);
        }
        let mut at = 0;
        for v in values {
            assert_eq!(get_signed(&out, &mut at), Some(v));
            assert_eq!(get(&out, &mut at), Some(v as u64));
        }
        assert_eq!(at, out.len());
        let mut short = Vec::new();
        put_signed(&mut short, -64);
        put_signed(&mut short, 63);
        assert_eq!(short.len(), 2, "one byte each");
        let mut long = Vec::new();
        put(&mut long, u64::MAX);
        assert_eq!(long.len(), MAX_BYTES);
        // Cut short: no value.
        assert_eq!(get(&long[..9], &mut 0), None);
    }
}
