//! Slurm host lists: `node[001-004,010]`, `a[1-2],b3`, `rack[1-2]-n[01-02]`. A list is a
//! comma-separated sequence of names (commas inside brackets belong to the brackets); each
//! bracket group holds comma-separated numbers or ranges `lo-hi`, and a name with several groups
//! expands to their cartesian product, left to right. A range keeps the zero padding of its
//! lower bound (`008-010`: 008, 009, 010). Output order is the order written. A malformed list
//! is an error naming the 1-based column and what was expected; a list may expand to at most
//! `MAX_HOSTS` names. Cost: linear in the output. `compress` writes names back in this form.

/// The most names one host list may expand to.
pub const MAX_HOSTS: usize = 1 << 20;

/// What is wrong with a host list, and where (1-based character column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostlistError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for HostlistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

fn error(column: usize, message: impl Into<String>) -> HostlistError {
    HostlistError { column: column + 1, message: message.into() }
}

/// Expand a host list into host names. An empty (or blank) list gives no names.
pub fn expand(text: &str) -> Result<Vec<String>, HostlistError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut depth = 0;
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '[' if depth > 0 => return Err(error(i, "'[' inside brackets: nested brackets are not allowed")),
            '[' => depth += 1,
            ']' if depth == 0 => return Err(error(i, "']' without a matching '['")),
            ']' => depth -= 1,
            ',' if depth == 0 => {
                expand_name(&chars, start, i, &mut out)?;
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        let open = chars.iter().rposition(|&c| c == '[').unwrap_or(0);
        return Err(error(open, "'[' is never closed: expected ']'"));
    }
    expand_name(&chars, start, chars.len(), &mut out)?;
    Ok(out)
}

/// One element of the list: literal parts and bracket groups, chars[from..to].
fn expand_name(chars: &[char], from: usize, to: usize, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let item: String = chars[from..to].iter().collect();
    if item.trim().is_empty() {
        if chars.iter().all(|c| c.is_whitespace()) {
            return Ok(());
        }
        return Err(error(from, "empty host name: expected a name between commas"));
    }
    let mut names = vec![String::new()];
    let mut i = from;
    while i < to {
        if chars[i] == '[' {
            let close = (i..to).find(|&k| chars[k] == ']').ok_or_else(|| error(i, "expected ']'"))?;
            let values = bracket(chars, i + 1, close)?;
            if names.len().saturating_mul(values.len()) > MAX_HOSTS {
                return Err(error(i, format!("host list expands to more than {MAX_HOSTS} names")));
            }
            names = names.iter().flat_map(|n| values.iter().map(move |v| format!("{n}{v}"))).collect();
            i = close + 1;
        } else {
            let c = chars[i];
            if c.is_whitespace() {
                return Err(error(i, "white space inside a host name"));
            }
            names.iter_mut().for_each(|n| n.push(c));
            i += 1;
        }
    }
    if out.len() + names.len() > MAX_HOSTS {
        return Err(error(from, format!("host list expands to more than {MAX_HOSTS} names")));
    }
    out.extend(names);
    Ok(())
}

/// The values of one bracket group, chars[from..to] (between '[' and ']').
fn bracket(chars: &[char], from: usize, to: usize) -> Result<Vec<String>, HostlistError> {
    let mut values = Vec::new();
    let mut start = from;
    for i in from..=to {
        if i < to && chars[i] != ',' {
            continue;
        }
        let part: String = chars[start..i].iter().collect();
        if part.is_empty() {
            return Err(error(start, "empty element in brackets: expected a number or a range lo-hi"));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part.as_str(), part.as_str()),
        };
        let number = |s: &str, at: usize| -> Result<u64, HostlistError> {
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
                return Err(error(at, format!("expected a number in brackets, found '{s}'")));
            }
            s.parse::<u64>().map_err(|_| error(at, format!("number '{s}' is too large")))
        };
        let a = number(lo, start)?;
        let b = number(hi, start + lo.chars().count() + 1)?;
        if b < a {
            return Err(error(start, format!("range {lo}-{hi} runs backwards")));
        }
        if (b - a) as usize >= MAX_HOSTS || values.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(error(start, format!("range {lo}-{hi} has more than {MAX_HOSTS} values")));
        }
        let width = if lo.len() > 1 && lo.starts_with('0') { lo.len() } else { 0 };
        values.extend((a..=b).map(|v| format!("{v:0width$}")));
        start = i + 1;
    }
    Ok(values)
}

/// Name and numeric suffix: `node007` -> ("node", "007").
fn split_number(name: &str) -> (&str, &str) {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    name.split_at(name.len() - digits)
}

/// The shortest host list of this form that `expand` turns back into `hosts`, in order: runs of
/// names with the same prefix share a bracket group, consecutive numbers become ranges
/// (`node001`, `node002`, `node003`, `node007` -> `node[001-003,007]`).
pub fn compress(hosts: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < hosts.len() {
        let (prefix, digits) = split_number(&hosts[i]);
        let mut group: Vec<&str> = vec![digits];
        let mut j = i + 1;
        while !digits.is_empty() && j < hosts.len() {
            let (p, d) = split_number(&hosts[j]);
            if p != prefix || d.is_empty() {
                break;
            }
            group.push(d);
            j += 1;
        }
        if group.len() == 1 {
            out.push(hosts[i].clone());
        } else {
            out.push(format!("{prefix}[{}]", ranges(&group)));
        }
        i = j;
    }
    out.join(",")
}

/// `001`, `002`, `003`, `007` -> `001-003,007`: a range goes on while the next number is one
/// more and prints with the lower bound's padding.
fn ranges(numbers: &[&str]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut k = 0;
    while k < numbers.len() {
        let lo = numbers[k];
        let width = lo.len();
        let mut hi = k;
        while let (Some(next), Ok(cur)) = (numbers.get(hi + 1), numbers[hi].parse::<u64>()) {
            let expected = format!("{:0width$}", cur + 1);
            if *next != expected.as_str() {
                break;
            }
            hi += 1;
        }
        parts.push(if hi == k { lo.to_string() } else { format!("{lo}-{}", numbers[hi]) });
        k = hi + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Vec<String> {
        expand(s).unwrap()
    }

    #[test]
    fn expands_the_slurm_forms() {
        assert_eq!(ok("node[001-004,010]"), ["node001", "node002", "node003", "node004", "node010"]);
        assert_eq!(ok("a[1-2],b3"), ["a1", "a2", "b3"]);
        assert_eq!(ok("rack[1-2]-n[01-02]"), ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]);
        assert_eq!(ok("node[8,9,10]"), ["node8", "node9", "node10"]);
        assert_eq!(ok("node[1,5-6]"), ["node1", "node5", "node6"]);
        assert_eq!(ok("node[205]"), ["node205"]);
        assert_eq!(ok("node[008-010]"), ["node008", "node009", "node010"]);
        assert_eq!(ok("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ok("single"), ["single"]);
        assert!(ok("").is_empty());
    }

    #[test]
    fn compress_inverts_expand() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(compress(&names(&["node001", "node002", "node003", "node007"])), "node[001-003,007]");
        assert_eq!(compress(&names(&["node8", "node9", "node10"])), "node[8-10]");
        assert_eq!(compress(&names(&["a1", "a2", "b3", "login"])), "a[1-2],b3,login");
        assert_eq!(compress(&names(&["n1"])), "n1");
        assert_eq!(compress(&[]), "");
        for list in ["node[001-003,007]", "rack1-n[01-02],rack2-n01", "x[9-12],y,z[005-006]"] {
            assert_eq!(ok(&compress(&ok(list))), ok(list), "{list}");
        }
    }

    #[test]
    fn errors_name_the_column() {
        let e = |s: &str| expand(s).unwrap_err().to_string();
        assert_eq!(e("node[1-3"), "column 5: '[' is never closed: expected ']'");
        assert_eq!(e("node1-3]"), "column 8: ']' without a matching '['");
        assert_eq!(e("node[3-1]"), "column 6: range 3-1 runs backwards");
        assert_eq!(e("node[1-x]"), "column 8: expected a number in brackets, found 'x'");
        assert_eq!(e("a,,b"), "column 3: empty host name: expected a name between commas");
        assert_eq!(e("node[1,,2]"), "column 8: empty element in brackets: expected a number or a range lo-hi");
        assert_eq!(e("n[[1]]"), "column 3: '[' inside brackets: nested brackets are not allowed");
        assert!(e("n[0-99999999]").contains("more than"));
    }
}
