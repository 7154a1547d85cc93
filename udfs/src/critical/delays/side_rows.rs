//! The sides of the waits as they cross from the tasks that measure them to the one that hands
//! the costs on ([`super::sides`] to [`super::handing`]): a row per side with its end (the order
//! of the merge), its wait's id and its kind as columns, and everything else packed as bytes.
//!
//! As eighteen Arrow columns (four of them lists) a side took about 190 bytes at the generated
//! stencil's three call paths and two waits handed on to a side, most of them zeros and nulls
//! that the shuffle's compression squeezed and the task reading them expanded again. Packed,
//! the numbers are LEB128 varints ([`crate::varint`]): the start as its distance from the end, a
//! wait handed on to as its id's distance from this wait's; a call path's key is a hash and
//! keeps its eight bytes. A row that names a call path (`PATH`) packs its text and region.

use crate::varint::{get, get_signed, put, put_signed};

/// What a side carries besides its end, its wait's id and its kind: its location, the wait's
/// start, the side's synchronisation of a threads' wait, the threads it stands for, whether the
/// location has stretches, its waiting, its time per call path (key, ns), the waits it hands
/// on to (id, ns) and, for both sides in one row, the delayer's location and synchronisation.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct SideRow {
    pub loc: i64,
    pub start: i64,
    pub since: Option<i64>,
    pub waiters: u32,
    pub present: bool,
    pub waiting: i64,
    pub delayer: Option<(i64, Option<i64>)>,
}

const SINCE: u8 = 1;
const PRESENT: u8 = 2;
const DELAYER: u8 = 4;
const DELAYER_SINCE: u8 = 8;

/// Append `row` (of the wait `id` ending at `end`) with its lists to `out`.
pub(super) fn put_side(
    out: &mut Vec<u8>,
    id: i64,
    end: i64,
    row: &SideRow,
    paths: &[(i64, i64)],
    theirs: &[(i64, i64)],
) {
    let mut flags = 0;
    if row.since.is_some() {
        flags |= SINCE;
    }
    if row.present {
        flags |= PRESENT;
    }
    if let Some((_, since)) = row.delayer {
        flags |= DELAYER;
        if since.is_some() {
            flags |= DELAYER_SINCE;
        }
    }
    out.push(flags);
    put_signed(out, row.loc);
    put_signed(out, end.wrapping_sub(row.start));
    if let Some(since) = row.since {
        put_signed(out, end.wrapping_sub(since));
    }
    put(out, u64::from(row.waiters));
    put_signed(out, row.waiting);
    if let Some((loc, since)) = row.delayer {
        put_signed(out, loc);
        if let Some(since) = since {
            put_signed(out, end.wrapping_sub(since));
        }
    }
    put(out, paths.len() as u64);
    for &(key, ns) in paths {
        out.extend_from_slice(&key.to_le_bytes());
        put_signed(out, ns);
    }
    put(out, theirs.len() as u64);
    for &(their, ns) in theirs {
        put_signed(out, their.wrapping_sub(id));
        put_signed(out, ns);
    }
}

/// The side packed in `bytes` (of the wait `id` ending at `end`), its lists appended to `paths`
/// and `theirs`; None where the bytes do not hold a whole side and nothing after it.
pub(super) fn get_side(
    bytes: &[u8],
    id: i64,
    end: i64,
    paths: &mut Vec<(i64, i64)>,
    theirs: &mut Vec<(i64, i64)>,
) -> Option<SideRow> {
    let flags = *bytes.first()?;
    if flags & !(SINCE | PRESENT | DELAYER | DELAYER_SINCE) != 0 {
        return None;
    }
    let at = &mut 1;
    let loc = get_signed(bytes, at)?;
    let start = end.wrapping_sub(get_signed(bytes, at)?);
    let since = if flags & SINCE != 0 { Some(end.wrapping_sub(get_signed(bytes, at)?)) } else { None };
    let waiters = u32::try_from(get(bytes, at)?).ok()?;
    let waiting = get_signed(bytes, at)?;
    let delayer = if flags & DELAYER != 0 {
        let loc = get_signed(bytes, at)?;
        let since = if flags & DELAYER_SINCE != 0 { Some(end.wrapping_sub(get_signed(bytes, at)?)) } else { None };
        Some((loc, since))
    } else {
        None
    };
    let n = usize::try_from(get(bytes, at)?).ok()?;
    // Each path takes at least nine bytes: a count beyond the bytes is damage, not a reserve.
    if n > bytes.len() / 9 {
        return None;
    }
    paths.reserve(n);
    for _ in 0..n {
        let key = i64::from_le_bytes(bytes.get(*at..*at + 8)?.try_into().ok()?);
        *at += 8;
        paths.push((key, get_signed(bytes, at)?));
    }
    let m = usize::try_from(get(bytes, at)?).ok()?;
    if m > bytes.len() / 2 {
        return None;
    }
    theirs.reserve(m);
    for _ in 0..m {
        let their = id.wrapping_add(get_signed(bytes, at)?);
        theirs.push((their, get_signed(bytes, at)?));
    }
    let present = flags & PRESENT != 0;
    (*at == bytes.len()).then_some(SideRow { loc, start, since, waiters, present, waiting, delayer })
}

/// Append a call path's text and region to `out`: whether it has a region, then each text's
/// length and bytes.
pub(super) fn put_name(out: &mut Vec<u8>, text: &str, region: Option<&str>) {
    out.push(u8::from(region.is_some()));
    for t in std::iter::once(text).chain(region) {
        put(out, t.len() as u64);
        out.extend_from_slice(t.as_bytes());
    }
}

/// The call path's text and region packed in `bytes`; None where they are not whole UTF-8
/// texts filling the bytes.
pub(super) fn get_name(bytes: &[u8]) -> Option<(String, Option<String>)> {
    let has_region = match bytes.first()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let at = &mut 1;
    let mut text = || -> Option<String> {
        let n = usize::try_from(get(bytes, at)?).ok()?;
        let s = std::str::from_utf8(bytes.get(*at..at.checked_add(n)?)?).ok()?;
        *at += n;
        Some(s.to_string())
    };
    let name = text()?;
    let region = if has_region { Some(text()?) } else { None };
    (*at == bytes.len()).then_some((name, region))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small generator of test values (xorshift).
    struct Values(u64);

    impl Values {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn int(&mut self) -> i64 {
            match self.next() % 4 {
                0 => self.next() as i64,
                1 => (self.next() % 1000) as i64 - 500,
                2 => (self.next() % (1 << 40)) as i64,
                _ => [0, i64::MIN, i64::MAX, -1][(self.next() % 4) as usize],
            }
        }

        fn maybe(&mut self) -> Option<i64> {
            self.next().is_multiple_of(2).then(|| self.int())
        }

        fn list(&mut self) -> Vec<(i64, i64)> {
            (0..self.next() % 6).map(|_| (self.int(), self.int())).collect()
        }
    }

    #[test]
    fn sides_come_back_whole_and_in_fewer_bytes() {
        let mut v = Values(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2_000 {
            let (id, end) = (v.int(), v.int());
            let row = SideRow {
                loc: v.int(),
                start: v.int(),
                since: v.maybe(),
                waiters: v.next() as u32,
                present: v.next().is_multiple_of(2),
                waiting: v.int(),
                delayer: v.next().is_multiple_of(2).then(|| (v.int(), v.maybe())),
            };
            let (paths, theirs) = (v.list(), v.list());
            let mut bytes = Vec::new();
            put_side(&mut bytes, id, end, &row, &paths, &theirs);
            let (mut p, mut t) = (vec![(7, 7)], Vec::new());
            assert_eq!(get_side(&bytes, id, end, &mut p, &mut t), Some(row.clone()));
            assert_eq!((&p[1..], t.as_slice()), (paths.as_slice(), theirs.as_slice()));
            // Cut short or lengthened, the bytes are no side.
            for cut in 0..bytes.len() {
                assert_eq!(get_side(&bytes[..cut], id, end, &mut Vec::new(), &mut Vec::new()), None);
            }
            bytes.push(0);
            assert_eq!(get_side(&bytes, id, end, &mut Vec::new(), &mut Vec::new()), None);
        }
        // The generated run's side: a rank's location, a wait of 40 µs, three call paths and
        // two waits handed on to, at 1e11 ns into the run.
        let row = SideRow {
            loc: 517 << 20,
            start: 100_000_000_000,
            waiters: 1,
            present: true,
            waiting: 12_345,
            ..SideRow::default()
        };
        let paths = [(-3_012_345_678_901_234_567, 81_234), (1_234_567_890_123, 2_345), (42, 77)];
        let theirs = [(5_000_100, 9_876), (4_999_980, 123)];
        let mut bytes = Vec::new();
        put_side(&mut bytes, 5_000_000, 100_000_040_000, &row, &paths, &theirs);
        assert!(bytes.len() <= 60, "{} bytes", bytes.len());
    }

    #[test]
    fn names_come_back_and_damage_is_seen() {
        for (text, region) in [("main/MPI_Send", Some("MPI_Send")), ("", None), ("a/ü", Some(""))] {
            let mut bytes = Vec::new();
            put_name(&mut bytes, text, region);
            assert_eq!(get_name(&bytes), Some((text.to_string(), region.map(str::to_string))));
            for cut in 0..bytes.len() {
                assert_eq!(get_name(&bytes[..cut]), None, "{cut}");
            }
        }
        assert_eq!(get_name(&[0, 2, 0xff, 0xfe]), None);
        assert_eq!(get_name(&[2, 0]), None);
        assert_eq!(get_side(&[0x10], 0, 0, &mut Vec::new(), &mut Vec::new()), None);
    }
}
