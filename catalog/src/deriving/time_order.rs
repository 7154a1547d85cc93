//! Putting millions of records in time order, as msg_id needs: a distribution sort on the time
//! relative to the earliest record. A first pass spreads the records over buckets by the high
//! bits of that time, in parallel over pieces of the input; each bucket, small enough to stay
//! in cache, is then sorted on the remaining bits by a least-significant-digit radix sort, a
//! byte at a time (Knuth, TAOCP vol. 3, 5.2.5), the buckets in parallel. Both passes are
//! stable, so records with equal times keep their input order; runs of equal times are then
//! put in tie-break order. O(n · bits / 8) instead of a comparison sort's O(n log n).

use rayon::prelude::*;

use crate::deriving::split_lengths;

/// Records per bucket aimed at by the first pass: a bucket and its scratch copy fit in L2.
const BUCKET_RECORDS: usize = 2048;

/// At most 2^16 buckets, so that the first pass's counters stay in L1 and L2.
const MAX_BUCKET_BITS: u32 = 16;

/// Buckets smaller than this are sorted by comparison.
const SMALL_BUCKET: usize = 64;

/// Sort `items` by `(time, tie)`, where `tie` breaks equal times (it only needs to be
/// consulted where times are equal: input already in tie order costs nothing more).
pub fn sort_by_time<T, F, G>(items: &mut [T], time: F, tie: G)
where
    T: Copy + Send + Sync,
    F: Fn(&T) -> i64 + Sync,
    G: Fn(&T) -> usize + Sync,
{
    let n = items.len();
    if n < 2 {
        return;
    }
    let (lo, hi) = items
        .par_iter()
        .fold(|| (i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(time(t)), hi.max(time(t))))
        .reduce(|| (i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)));
    let relative = |t: &T| time(t).wrapping_sub(lo) as u64;
    let bits = u64::BITS - (hi.wrapping_sub(lo) as u64).leading_zeros();
    let bucket_bits = (n / BUCKET_RECORDS).max(1).next_power_of_two().trailing_zeros().min(MAX_BUCKET_BITS).min(bits);
    let low_bits = bits - bucket_bits;
    let bucket = |t: &T| relative(t).checked_shr(low_bits).unwrap_or(0) as usize;
    let buckets = 1usize << bucket_bits;

    // Each piece of the input spread over the buckets, in a copy of its own.
    let piece = n.div_ceil(2 * rayon::current_num_threads()).max(1);
    let spread: Vec<(Vec<T>, Vec<usize>)> = items
        .par_chunks(piece)
        .map(|records| {
            let mut counts = vec![0usize; buckets];
            for t in records {
                counts[bucket(t)] += 1;
            }
            let mut at = starts(&counts);
            let mut out = records.to_vec();
            for t in records {
                let b = bucket(t);
                out[at[b]] = *t;
                at[b] += 1;
            }
            (out, counts)
        })
        .collect();
    let piece_starts: Vec<Vec<usize>> = spread.iter().map(|(_, counts)| starts(counts)).collect();
    let sizes: Vec<usize> = (0..buckets).map(|b| spread.iter().map(|(_, counts)| counts[b]).sum()).collect();

    // Each bucket gathered from the pieces back into `items`, then sorted on the low bits.
    split_lengths(items, sizes).into_par_iter().enumerate().for_each(|(b, out)| {
        let mut k = 0;
        for ((records, counts), s) in spread.iter().zip(&piece_starts) {
            out[k..k + counts[b]].copy_from_slice(&records[s[b]..s[b] + counts[b]]);
            k += counts[b];
        }
        sort_bucket(out, low_bits, &relative, &tie);
    });
}

/// Where each bucket starts, given the bucket sizes.
fn starts(counts: &[usize]) -> Vec<usize> {
    let mut at = 0;
    counts
        .iter()
        .map(|&c| {
            at += c;
            at - c
        })
        .collect()
}

/// Sort one bucket, whose records differ only in the `low_bits` lowest bits of their relative
/// time, then order each run of equal times by `tie`.
fn sort_bucket<T: Copy>(out: &mut [T], low_bits: u32, relative: &impl Fn(&T) -> u64, tie: &impl Fn(&T) -> usize) {
    if out.len() < 2 {
        return;
    }
    if out.len() < SMALL_BUCKET {
        out.sort_by_key(relative);
    } else if low_bits > 0 {
        radix_sort(out, low_bits, relative);
    }
    let mut start = 0;
    while start < out.len() {
        let t = relative(&out[start]);
        let end = start + out[start..].iter().position(|r| relative(r) != t).unwrap_or(out.len() - start);
        let run = &mut out[start..end];
        if !run.is_sorted_by_key(tie) {
            run.sort_by_key(tie);
        }
        start = end;
    }
}

/// Stable LSD radix sort of `out` on the `low_bits` lowest bits of `relative`, a byte per
/// pass; a pass where every record has the same byte is skipped.
fn radix_sort<T: Copy>(out: &mut [T], low_bits: u32, relative: &impl Fn(&T) -> u64) {
    let mut scratch = out.to_vec();
    let mut in_scratch = false;
    for shift in (0..low_bits).step_by(8) {
        let digit = |t: &T| ((relative(t) >> shift) & 0xff) as usize;
        let (src, dst): (&[T], &mut [T]) = if in_scratch { (&scratch, &mut *out) } else { (&*out, &mut scratch) };
        let mut counts = [0usize; 256];
        for t in src {
            counts[digit(t)] += 1;
        }
        if counts.contains(&src.len()) {
            continue;
        }
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, c) in at.iter_mut().zip(counts) {
            *a = sum;
            sum += c;
        }
        for t in src {
            let d = digit(t);
            dst[at[d]] = *t;
            at[d] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        out.copy_from_slice(&scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small xorshift generator for reproducible inputs.
    fn draws(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect()
    }

    fn check(times: Vec<i64>) {
        let mut items: Vec<(i64, usize)> = times.into_iter().enumerate().map(|(i, t)| (t, i)).collect();
        // Tie order is the reverse of input order, so that ties need the fix-up.
        let mut expected = items.clone();
        expected.sort_by_key(|&(t, i)| (t, std::cmp::Reverse(i)));
        sort_by_time(&mut items, |r| r.0, |r| usize::MAX - r.1);
        assert_eq!(items, expected);
    }

    #[test]
    fn agrees_with_a_comparison_sort() {
        for (seed, n) in [(1u64, 0usize), (2, 1), (3, 63), (4, 1000), (5, 100_000)] {
            let d = draws(seed, n);
            check(d.iter().map(|&x| (x % 1_000_000) as i64).collect());
            check(d.iter().map(|&x| x as i64).collect());
            check(d.iter().map(|&x| (x % 7) as i64 - 3).collect());
            check(d.iter().map(|&x| if x % 10 == 0 { i64::MIN } else { i64::MAX - (x % 5) as i64 }).collect());
        }
    }

    #[test]
    fn skewed_and_constant_times() {
        let d = draws(9, 50_000);
        // Almost all records in one narrow range, a few far away: one huge bucket.
        check(d.iter().map(|&x| if x % 1000 == 0 { (x >> 4) as i64 } else { (x % 300) as i64 }).collect());
        check(vec![42; 10_000]);
    }
}
