//! The Slurm host-list forms collected in ../shared/data/scheduler/hostlist_samples.txt expand to
//! the names they stand for (counted by hand from each expression).

use commdb_catalog::jobs::hostlist::expand;
use commdb_tests::shared_data;

#[test]
fn shared_hostlist_samples_expand() {
    let Some(shared) = shared_data() else {
        println!("skip: ../shared/data is absent");
        return;
    };
    let text = std::fs::read_to_string(shared.join("scheduler/hostlist_samples.txt")).unwrap();
    let expected = [
        ("node[001-002]", 2, "node002"),
        ("node[3302-3303]", 2, "node3303"),
        ("node[205,207]", 2, "node207"),
        ("node[1,5-6]", 3, "node6"),
        ("node[008-020]", 13, "node020"),
        ("node[8,9,10]", 3, "node10"),
        ("node[205]", 1, "node205"),
        ("node[01-04]", 4, "node04"),
    ];
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let Some(expr) = line.split_whitespace().next() else { continue };
        let hosts = expand(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        if let Some((_, n, last)) = expected.iter().find(|x| x.0 == expr) {
            assert_eq!((hosts.len(), hosts.last().map(String::as_str)), (*n, Some(*last)), "{expr}");
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len(), "every sample was found in the file");
}
