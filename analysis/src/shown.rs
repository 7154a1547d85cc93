//! Quantities as people read them: a time in nanoseconds with the largest unit that keeps it
//! at least 1 (ns, us, ms, s), a size in binary units (B, KiB, MiB, GiB, TiB, PiB), both with
//! four significant digits and trailing zeros dropped (`38.3 us`, `1.204 s`, `64 KiB`). The
//! SQL functions `format_duration` and `format_bytes` write them, and so do the messages of
//! the budget.

/// `value` with four significant digits, trailing zeros (and a trailing point) dropped.
fn significant(value: f64) -> String {
    let digits = if value.abs() >= 1000.0 {
        0
    } else if value.abs() >= 100.0 {
        1
    } else if value.abs() >= 10.0 {
        2
    } else {
        3
    };
    let text = format!("{value:.digits$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// A duration in nanoseconds as text.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 1e9 {
        (ns / 1e9, "s")
    } else if a >= 1e6 {
        (ns / 1e6, "ms")
    } else if a >= 1e3 {
        (ns / 1e3, "us")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", significant(v))
}

/// A size in bytes as text, in binary units.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", significant(v), UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_units() {
        assert_eq!(duration(38_300.0), "38.3 us");
        assert_eq!(duration(1_204_000_000.0), "1.204 s");
        assert_eq!(duration(999.0), "999 ns");
        assert_eq!(duration(2_000_000.0), "2 ms");
        assert_eq!(duration(123_456_789_000.0), "123.5 s");
        assert_eq!(bytes(65_536.0), "64 KiB");
        assert_eq!(bytes(1000.0), "1000 B");
        assert_eq!(bytes(1_572_864.0), "1.5 MiB");
    }
}
