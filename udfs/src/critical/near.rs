//! Halving a sorted list from a guess: where `slice::partition_point` would answer, searched
//! outwards from where the last search of the same list answered, in steps that double (an
//! exponential search). The analyses that walk a run backwards look a location's list up at
//! instants that move little from one look-up to the next, among lists too many to stay in the
//! cache: from a good guess a search reads two or three neighbouring entries, where halving the
//! whole list reads a dozen far apart, each a miss of the cache.

/// The first index of `v` at which `before` is false (`v` holds every entry `before` accepts
/// ahead of every other, as `slice::partition_point` requires), searched from `near`.
pub(crate) fn partition_point_near<T>(v: &[T], near: usize, before: impl Fn(&T) -> bool) -> usize {
    let n = v.len();
    let near = near.min(n);
    if near < n && before(&v[near]) {
        // The answer lies after near: double the step until past it.
        let (mut lo, mut step) = (near + 1, 1);
        while lo + step <= n && before(&v[lo + step - 1]) {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step).min(n);
        lo + v[lo..hi].partition_point(before)
    } else {
        // The answer is near or before it.
        let (mut hi, mut step) = (near, 1);
        while hi >= step && !before(&v[hi - step]) {
            hi -= step;
            step *= 2;
        }
        let lo = hi.saturating_sub(step);
        lo + v[lo..hi].partition_point(before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_from_a_guess_finds_what_halving_finds() {
        let v: Vec<i64> = (0..300).map(|k| 10 * k + (k % 7) / 3).collect();
        for t in -5..3020 {
            let expected = v.partition_point(|&x| x <= t);
            for near in [0, 1, 2, 7, 150, 298, 299, 300, 5000] {
                assert_eq!(partition_point_near(&v, near, |&x| x <= t), expected, "t {t} near {near}");
            }
        }
        let repeated = [1, 1, 1, 2, 2, 3];
        for t in 0..4 {
            for near in 0..7 {
                assert_eq!(partition_point_near(&repeated, near, |&x| x < t), repeated.partition_point(|&x| x < t));
            }
        }
        assert_eq!(partition_point_near::<i64>(&[], 5, |_| true), 0);
    }
}
