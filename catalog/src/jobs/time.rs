//! Times as batch systems print them: Slurm's `YYYY-MM-DDTHH:MM:SS` time stamps (local time of
//! the cluster, without a zone; read as UTC) and its `[D-]HH:MM:SS` durations. Days since the
//! epoch come from the proleptic Gregorian calendar (the civil-from-days arithmetic of Howard
//! Hinnant's "chrono-compatible low-level date algorithms").

/// Days from 1970-01-01 to a civil date.
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (inverse of `days_from_civil`).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// ns since the epoch as Slurm prints a time: `YYYY-MM-DDTHH:MM:SS` (fractions dropped).
pub fn format_timestamp(ns: i64) -> String {
    let s = ns.div_euclid(1_000_000_000);
    let (y, m, d) = civil_from_days(s.div_euclid(86_400));
    let t = s.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
}

fn digits(s: &str) -> Option<i64> {
    (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// `YYYY-MM-DDTHH:MM:SS` (or with a space, or a date alone) as ns since the epoch, UTC.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let t = text.trim();
    let (date, time) = match t.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (t, None),
    };
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (digits(d.next()?)?, digits(d.next()?)?, digits(d.next()?)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let seconds = match time {
        None => 0,
        Some(time) => {
            let mut p = time.splitn(3, ':');
            let (h, mi) = (digits(p.next()?)?, digits(p.next()?)?);
            let s = match p.next() {
                Some(s) => digits(s)?,
                None => 0,
            };
            if h > 23 || mi > 59 || s > 60 {
                return None;
            }
            h * 3600 + mi * 60 + s
        }
    };
    (days_from_civil(y, m, day) * 86_400 + seconds).checked_mul(1_000_000_000)
}

/// `[D-]HH:MM:SS`, `MM:SS` or `MM` (Slurm's Elapsed and Timelimit) in seconds; fractions of a
/// second are dropped.
pub fn parse_duration_s(text: &str) -> Option<i64> {
    let t = text.trim();
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (digits(d)?, r),
        None => (0, t),
    };
    let rest = rest.split_once('.').map_or(rest, |(whole, _)| whole);
    let parts: Vec<i64> = rest.split(':').map(digits).collect::<Option<_>>()?;
    let seconds = match (parts.as_slice(), days > 0 || t.contains('-')) {
        ([h, m, s], _) => h * 3600 + m * 60 + s,
        ([h, m], true) => h * 3600 + m * 60,
        ([m, s], false) => m * 60 + s,
        ([h], true) => h * 3600,
        ([m], false) => m * 60,
        _ => return None,
    };
    Some(days * 86_400 + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_timestamp("2024-02-29T12:30:15"), Some(1_709_209_815_000_000_000));
        assert_eq!(parse_timestamp("2000-03-01"), Some(951_868_800_000_000_000));
        assert_eq!(parse_timestamp("Unknown"), None);
        assert_eq!(parse_timestamp("2024-13-01T00:00:00"), None);
        for t in ["1970-01-01T00:00:00", "2024-02-29T12:30:15", "1999-12-31T23:59:59", "2026-03-02T08:00:00"] {
            assert_eq!(format_timestamp(parse_timestamp(t).unwrap()), t);
        }
        assert_eq!(format_timestamp(-1_000_000_000), "1969-12-31T23:59:59");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_s("00:01:05"), Some(65));
        assert_eq!(parse_duration_s("2-03:00:00"), Some(2 * 86_400 + 3 * 3600));
        assert_eq!(parse_duration_s("30:00"), Some(1800));
        assert_eq!(parse_duration_s("1-12"), Some(86_400 + 12 * 3600));
        assert_eq!(parse_duration_s("45"), Some(2700));
        assert_eq!(parse_duration_s("UNLIMITED"), None);
    }
}
