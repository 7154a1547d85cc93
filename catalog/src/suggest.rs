//! "Did you mean": the known name closest to a mistyped one, by edit distance (insertions,
//! deletions, substitutions and swaps of neighbouring letters, compared without case), offered only when the
//! distance is small for the word's length (at most a third of it, and at least one edit).

/// Edit distance between `a` and `b`, case-insensitive, counting a swap of two neighbouring
/// letters as one edit (optimal string alignment), the commonest typing slip.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, when it is close enough to be what was meant.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| !c.eq_ignore_ascii_case(word))
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c)
}

/// `message` with "; did you mean 'X'?" when a candidate is close to `word`.
pub fn did_you_mean<'a>(message: String, word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(word, candidates) {
        Some(c) => format!("{message}; did you mean '{c}'?"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_offered_far_ones_are_not() {
        let names = ["attribution", "latency_criteria", "lod_calls", "lod_messages"];
        assert_eq!(closest("atribution", names), Some("attribution"));
        assert_eq!(closest("ATTRIBUTON", names), Some("attribution"));
        assert_eq!(closest("lod_call", names), Some("lod_calls"));
        assert_eq!(closest("histogram", names), None);
        assert_eq!(closest("rign", ["stencil2d", "ring", "alltoall", "master-worker"]), Some("ring"));
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("rign", "ring"), 1);
    }
}
