//! Fuzzing of SQL statements, as a user's typos and a hostile script would write them: every
//! commdb table function called with arguments drawn from a pool of hostile values (negative,
//! zero, huge, NaN, NULL, wrong types, durations, unknown names, named and positional), and
//! valid statements damaged token by token (words and symbols, not spaces: a token dropped, doubled, swapped with the next,
//! or replaced by a hostile literal or another table or function name). Each statement runs on
//! a small generated trace in a thread of its own: it must answer or fail with an error, never
//! panic, never hang, and never show DataFusion's internal "bug" plea.
//!
//! The default is a short run (`CASES` statements of each kind, as CI runs it); set
//! `COMMDB_FUZZ_CASES=5000` for a long one. A failing case prints its statement.

use std::time::Duration;

use commdb_catalog::generate::rng::uniform;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// Statements of each kind in the short run.
const CASES: u64 = 150;
/// Longest a statement may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(30);
/// The trace every statement runs on.
const TRACE: &str = "generate:ranks=6,iterations=4";

fn cases() -> u64 {
    std::env::var("COMMDB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES)
}

/// Values a careless or hostile argument takes.
const HOSTILE: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    "0.5",
    "1.5",
    "'NaN'",
    "'inf'",
    "NULL",
    "true",
    "''",
    "'2ms'",
    "'-3 s'",
    "'1e9 min'",
    "'messages'",
    "'calls'",
    "'collectives'",
    "'no_such_table'",
    "'ranks'",
    "'node'",
    "'rank'",
    "'bytes'",
    "[1, 2]",
    "'\u{0}'",
];

/// Valid statements the damage starts from.
const SEEDS: &[&str] = &[
    "SELECT src, dst, count(*) AS n FROM messages WHERE bytes > 100 GROUP BY src, dst ORDER BY n DESC LIMIT 5",
    "SELECT * FROM latency_criteria(bucket_bytes => 1000, min_messages => 2)",
    "SELECT rank, avg(latency) FROM message_latency('messages', min_messages => 2) GROUP BY rank",
    "SELECT * FROM attribution('messages', window_ns => '1ms', min_messages => 2)",
    "SELECT * FROM lod_calls(resolution_ns => 1000000, t0 => 0, t1 => 5000000, per => 'rank')",
    "SELECT * FROM lod_messages(pixels => 200)",
    "SELECT region, sum(duration) FROM calls GROUP BY region HAVING sum(duration) > 0",
    "SELECT * FROM process_regions(threshold => 0.5) r JOIN ranks USING (rank)",
    "SELECT happens_before(a.vc, b.vc) FROM vector_clocks() a, vector_clocks() b WHERE a.seq = 1 AND b.seq = 2 LIMIT 10",
    "SELECT * FROM ideal_replay(eager_limit => 1024) WHERE rank = 0",
    "SELECT delta_histogram(compute_delta_ns, 5, rank) FROM compute_deltas() GROUP BY region",
    "SELECT format_duration(wait_ns), format_bytes(1024 * rank) FROM wait_states() ORDER BY wait_ns DESC",
    "SELECT * FROM remap_suggestion(ranks_per_node => 2, weight => 'bytes')",
    "SELECT * FROM latency_trend(bin_ns => '500us', window => 3, growth_rise => 0.1)",
    "SELECT * FROM comm_matrix(by => 'node', value => 'bytes')",
    "SELECT * FROM call_tree() WHERE depth < 3",
    "SELECT lod_resolution(0, 1000000000, 800), wallclock(ts) FROM events LIMIT 3",
    "SELECT expand_hostlist('node[01-04]'), lpad('x', 10), array_repeat(1, 3)",
    "WITH w AS (SELECT rank, sum(wait_ns) s FROM wait_states() GROUP BY rank) SELECT * FROM w ORDER BY s",
    "SELECT * FROM rank_diagnosis(by => 'node') WHERE cause <> 'none'",
    "CREATE VIEW late AS SELECT * FROM messages WHERE send_ts > 1000",
    "SELECT * FROM time_profile(bins => 10)",
    "SELECT count(*) FROM events e JOIN calls c ON e.rank = c.rank AND e.ts BETWEEN c.start_ts AND c.end_ts",
];

/// Run `sql` on a fresh session over the trace (on a large stack, as the shell plans): Ok(error
/// text or None) when it answered, Err(why) for a panic or a hang.
fn survive(sql: String) -> Result<Option<String>, String> {
    commdb_tests::survive(256 << 20, HANG, move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut session = commdb_tests::session();
        session.open(TRACE, None, &Default::default()).map_err(|e| e.to_string())?;
        runtime.block_on(session.collect(&sql)).map(|_| ()).map_err(|e| e.to_string())
    })
}

/// Run every statement; each must answer (rows or a clean error).
fn check(kind: &str, statements: impl Iterator<Item = String>) {
    let (mut errors, mut answered) = (0u64, 0u64);
    for (k, sql) in statements.enumerate() {
        match survive(sql.clone()) {
            Ok(None) => answered += 1,
            Ok(Some(message)) => {
                errors += 1;
                assert!(!message.contains("likely caused by a bug"), "{kind} case {k}: {sql}\n{message}");
                assert!(!message.contains("panicked"), "{kind} case {k}: {sql}\n{message}");
                assert!(!message.trim().is_empty(), "{kind} case {k}: {sql}: an empty error");
            }
            Err(why) => panic!("{kind} case {k}: {sql}\n{why}"),
        }
    }
    eprintln!("{kind}: {} statements, {errors} errors, {answered} answered", errors + answered);
}

fn pick<'a>(items: &[&'a str], u: f64) -> &'a str {
    items[((u * items.len() as f64) as usize).min(items.len() - 1)]
}

#[test]
fn table_functions_survive_hostile_arguments() {
    let functions: Vec<&commdb_udfs::Function> = commdb_udfs::functions()
        .iter()
        .copied()
        .filter(|f| f.kind() == commdb_udfs::Kind::Table && !f.name.starts_with("read_") && f.name != "swf_header")
        .collect();
    let statements = (0..cases()).map(|k| {
        let r = |i: u64| uniform(0x5C1, 1, k, i);
        let f = functions[((r(0) * functions.len() as f64) as usize).min(functions.len() - 1)];
        let n = (r(1) * (f.params.len() + 2) as f64) as usize;
        let names = f.names();
        let args: Vec<String> = (0..n)
            .map(|i| {
                let value = pick(HOSTILE, r(10 + i as u64));
                // Half the arguments by name: a declared one, or one that does not exist.
                match (r(30 + i as u64) * 4.0) as u32 {
                    0 | 1 => value.to_string(),
                    2 => format!("{} => {value}", pick(&names, r(50 + i as u64))),
                    _ => format!("no_such_argument => {value}"),
                }
            })
            .collect();
        format!("SELECT * FROM {}({}) LIMIT 20", f.name, args.join(", "))
    });
    check("table function calls", statements);
}

#[test]
fn damaged_statements_survive() {
    let names: Vec<&str> =
        ["messages", "calls", "events", "ranks", "collectives", "warnings", "trace_info", "*", "(", ")"]
            .into_iter()
            .chain(commdb_udfs::functions().iter().map(|f| f.name))
            .collect();
    let statements = (0..cases()).map(|k| {
        let r = |i: u64| uniform(0x5C1, 2, k, i);
        let seed = pick(SEEDS, r(0));
        let tokens: Vec<String> = Tokenizer::new(&GenericDialect {}, seed)
            .tokenize()
            .map(|t| t.iter().filter(|t| !matches!(t, Token::Whitespace(_))).map(ToString::to_string).collect())
            .unwrap_or_default();
        let mut tokens = tokens;
        for m in 0..1 + (r(1) * 3.0) as u64 {
            if tokens.is_empty() {
                break;
            }
            let at = ((r(10 + m) * tokens.len() as f64) as usize).min(tokens.len() - 1);
            match (r(20 + m) * 5.0) as u32 {
                0 => {
                    tokens.remove(at);
                }
                1 => {
                    let t = tokens[at].clone();
                    tokens.insert(at, t);
                }
                2 if at + 1 < tokens.len() => tokens.swap(at, at + 1),
                3 => tokens[at] = pick(HOSTILE, r(30 + m)).to_string(),
                _ => tokens[at] = pick(&names, r(40 + m)).to_string(),
            }
        }
        tokens.join(" ")
    });
    check("damaged statements", statements);
}

#[test]
fn scalar_functions_survive_hostile_arguments() {
    let mut functions: Vec<(&str, usize)> = commdb_udfs::functions()
        .iter()
        .filter(|f| f.kind() != commdb_udfs::Kind::Table)
        .map(|f| (f.name, f.params.len()))
        .collect();
    functions.extend([("lpad", 3), ("rpad", 3), ("repeat", 2), ("array_repeat", 2), ("array_resize", 3), ("range", 3)]);
    let columns = ["rank", "ts", "bytes", "NULL", "region"];
    let statements = (0..cases()).map(|k| {
        let r = |i: u64| uniform(0x5C1, 3, k, i);
        let (name, arity) = functions[((r(0) * functions.len() as f64) as usize).min(functions.len() - 1)];
        let n = (r(1) * (arity + 2) as f64) as usize;
        let args: Vec<&str> = (0..n)
            .map(|i| {
                if r(20 + i as u64) < 0.3 { pick(&columns, r(40 + i as u64)) } else { pick(HOSTILE, r(10 + i as u64)) }
            })
            .collect();
        let from = if r(2) < 0.5 { "events" } else { "(SELECT 1 AS rank, 2 AS ts, 3 AS bytes, 'x' AS region)" };
        format!("SELECT {name}({}) FROM {from} LIMIT 20", args.join(", "))
    });
    check("scalar function calls", statements);
}

/// Every file and directory of `dir`, and `dir` itself.
fn everything_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(everything_in(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The bytes of every file under `dir`, by path.
fn contents(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut all: Vec<_> = everything_in(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    all.sort();
    all
}

#[test]
fn copy_never_writes_over_what_the_session_reads() {
    // COPY statements aimed at the files of the attached traces and tables, spelt as a user
    // might (absolute, relative through `..`, a directory with its slash, through a link), with
    // each format: every one is refused, and no byte of those files changes.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let trace = commdb_catalog::generate::generate(&commdb_catalog::generate::GeneratorConfig {
        ranks: 4,
        iterations: 2,
        ..Default::default()
    })
    .unwrap()
    .trace
    .build()
    .unwrap();
    commdb_catalog::store::write_in_parts(&trace, &store, 300).unwrap();
    let csv = dir.path().join("trace.csv");
    std::fs::copy(commdb_tests::test_data().join("latency.csv"), &csv).unwrap();
    let log = dir.path().join("jobs.txt");
    std::fs::copy(commdb_tests::test_data().join("sacct_jobs.txt"), &log).unwrap();
    let link = dir.path().join("link");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&store, &link).unwrap();
    let before = contents(dir.path());
    let mut targets: Vec<String> = Vec::new();
    for p in everything_in(&store).into_iter().chain([csv.clone(), log.clone()]) {
        let shown = p.display().to_string();
        targets.push(shown.clone());
        if p.is_dir() {
            targets.push(format!("{shown}/"));
        }
        if let Ok(inside) = p.strip_prefix(&store) {
            targets.push(format!("{}/../store/{}", store.display(), inside.display()));
            if cfg!(unix) {
                targets.push(format!("{}/{}", link.display(), inside.display()));
            }
        }
    }
    targets.push(store.join("new.parquet").display().to_string());
    let formats = ["", " STORED AS PARQUET", " STORED AS CSV", " STORED AS JSON", " STORED AS ARROW"];
    let queries = ["SELECT 1 AS a", "SELECT * FROM run.ranks", "SELECT * FROM messages LIMIT 3"];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut session = commdb_tests::session();
    session.open(&csv.display().to_string(), None, &Default::default()).unwrap();
    session.open(&store.display().to_string(), Some("run"), &Default::default()).unwrap();
    let attach = format!("ATTACH '{}' AS jobs (TYPE sacct)", log.display());
    runtime.block_on(session.collect(&attach)).unwrap();
    let mut refused = 0;
    for (k, target) in targets.iter().enumerate() {
        let format = pick(&formats, uniform(0xF026, 70, k as u64, 0));
        let query = pick(&queries, uniform(0xF026, 70, k as u64, 1));
        let sql = format!("COPY ({query}) TO '{target}'{format}");
        let e = runtime
            .block_on(session.collect(&sql))
            .err()
            .unwrap_or_else(|| panic!("COPY case {k} was written: {sql}"))
            .to_string();
        assert!(e.contains("COPY") && e.contains("read from"), "COPY case {k}: {sql}\n{e}");
        refused += 1;
    }
    // A query that reads a file cannot COPY over it either.
    let own = dir.path().join("own.csv");
    std::fs::write(&own, "a\n1\n").unwrap();
    let sql = format!("COPY (SELECT * FROM '{0}') TO '{0}'", own.display());
    let e = runtime.block_on(session.collect(&sql)).unwrap_err().to_string();
    assert!(e.contains("the file the query reads"), "{e}");
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "a\n1\n");
    assert_eq!(contents(dir.path()).into_iter().filter(|(p, _)| p != &own).collect::<Vec<_>>(), before);
    // Beside them, COPY writes.
    let out = dir.path().join("out.csv");
    runtime.block_on(session.collect(&format!("COPY (SELECT 1 AS a) TO '{}'", out.display()))).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n1\n");
    eprintln!("COPY targets: {refused} statements, all refused, no byte changed");
}

/// Text of `n` characters drawn from those that quoting, splitting and escaping trip on.
fn tricky_text(stream: u64, k: u64, n: usize) -> String {
    const CHARS: &[char] = &['a', '\'', ';', '\n', '\\', '"', '$', '-', '/', '*', ' ', 'é', '`', 'E'];
    (0..n)
        .map(|i| CHARS[((uniform(0x5C1, stream, k, i as u64) * CHARS.len() as f64) as usize).min(CHARS.len() - 1)])
        .collect()
}

#[test]
fn quoted_text_reaches_the_planner_as_written() {
    // A script of statements whose literals and aliases hold quotes, semicolons, comment marks
    // and dollar signs: split, each statement gives back exactly the text it quoted.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut session = commdb_tests::session();
    let mut checked = 0;
    for k in 0..cases() {
        let (value, name) = (tricky_text(4, k, 1 + (k % 17) as usize), tricky_text(5, k, 1 + (k % 5) as usize));
        let literal = format!("'{}'", value.replace('\'', "''"));
        let alias = format!("\"{}\"", name.replace('"', "\"\""));
        let script = format!("-- a; note\nSELECT {literal} AS {alias};\n/* ; */ SELECT 2 AS n ;\n");
        let statements = commdb_catalog::session::sql::split_statements(&script)
            .unwrap_or_else(|e| panic!("quoting case {k}: {script:?}\n{e}"));
        assert_eq!(statements.len(), 2, "quoting case {k}: {script:?}");
        let batches = runtime
            .block_on(session.collect(&statements[0].sql))
            .unwrap_or_else(|e| panic!("quoting case {k}: {:?}\n{e}", statements[0].sql));
        let rows = commdb_tests::rows(&batches).unwrap();
        assert_eq!(rows, vec![vec![value.clone()]], "quoting case {k}: {:?}", statements[0].sql);
        assert_eq!(batches[0].schema().field(0).name(), &name, "quoting case {k}");
        checked += 1;
    }
    eprintln!("quoted text: {checked} statements, every literal and alias as written");
}

#[test]
fn scripts_of_many_statements_split_whole() {
    // Scripts of up to 50,000 statements, empty ones and comments among them: every statement
    // is found once, in one pass (a quadratic split took 38.8 s for 8,000 lines).
    for k in 0..cases().min(40) {
        let n = 1 + (uniform(0x5C1, 6, k, 0) * 50_000.0) as usize;
        let mut script = String::with_capacity(n * 16);
        let mut expected = 0;
        for i in 0..n {
            match (uniform(0x5C1, 6, k, 1 + i as u64) * 5.0) as u32 {
                0 => script.push(';'),
                1 => script.push_str("-- ;\n"),
                2 => script.push_str("/* ; */"),
                _ => {
                    script.push_str(&format!("SELECT {i};\n"));
                    expected += 1;
                }
            }
        }
        let script_len = script.len();
        let got = commdb_tests::survive(64 << 20, HANG, move || {
            let found = commdb_catalog::session::sql::split_statements(&script).map_err(|e| e.to_string())?;
            if found.len() == expected {
                Ok(())
            } else {
                Err(format!("{} statements, expected {expected}", found.len()))
            }
        });
        assert_eq!(got, Ok(None), "script case {k} ({script_len} bytes)");
    }
    eprintln!("scripts: {} cases of up to 50,000 statements split whole", cases().min(40));
}

/// Make a FIFO at `path` (None where mkfifo cannot).
fn fifo(path: &std::path::Path) -> Option<()> {
    std::process::Command::new("mkfifo").arg(path).status().ok().filter(|s| s.success()).map(|_| ())
}

#[test]
fn file_readers_survive_directories_of_mixed_files_and_special_paths() {
    // Directories of CSV files with headers in other orders and other columns, Parquet files
    // of other schemas, empty and binary files, a FIFO and a subdirectory; and devices and
    // FIFOs as paths. Each call answers or fails naming a path; none hangs or reads forever.
    let dir = tempfile::tempdir().unwrap();
    let fifo_path = dir.path().join("pipe.csv");
    let have_fifo = fifo(&fifo_path).is_some();
    let headers = ["a,b\n1,2\n", "b,a\n3,4\n", "a,b,c\n1,2,3\n", "", "\0\0\0\0", "a\n\"x\n"];
    let mut statements = Vec::new();
    for k in 0..cases().min(60) {
        let sub = dir.path().join(format!("d{k}"));
        std::fs::create_dir(&sub).unwrap();
        let files = 1 + (uniform(0x5C1, 7, k, 0) * 4.0) as usize;
        for f in 0..files {
            let pick_header = (uniform(0x5C1, 7, k, 1 + f as u64) * headers.len() as f64) as usize;
            std::fs::write(sub.join(format!("f{f}.csv")), headers[pick_header.min(headers.len() - 1)]).unwrap();
            let parquet = format!(
                "COPY (SELECT {f} AS {}) TO '{}'",
                if f % 2 == 0 { "a" } else { "b" },
                sub.join(format!("p{f}.parquet")).display()
            );
            statements.push(parquet);
        }
        if uniform(0x5C1, 7, k, 9) < 0.3 {
            std::fs::write(sub.join("junk.parquet"), b"PAR1 not really").unwrap();
        }
        statements.push(format!("SELECT * FROM read_csv('{}')", sub.display()));
        statements.push(format!("SELECT * FROM read_parquet('{}')", sub.display()));
    }
    for special in ["/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/status", "/"] {
        statements.push(format!("SELECT * FROM read_csv('{special}')"));
        statements.push(format!("SELECT * FROM read_parquet('{special}')"));
    }
    if have_fifo {
        statements.push(format!("SELECT * FROM read_csv('{}')", fifo_path.display()));
        statements.push(format!("SELECT * FROM read_parquet('{}')", fifo_path.display()));
    }
    let (mut answered, mut refused) = (0, 0);
    for (k, sql) in statements.into_iter().enumerate() {
        let shown = sql.clone();
        let got = commdb_tests::survive(64 << 20, HANG, move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let mut session = commdb_tests::session();
            runtime.block_on(session.collect(&sql)).map(|_| ()).map_err(|e| e.to_string())
        });
        match got {
            Ok(None) => answered += 1,
            Ok(Some(e)) => {
                refused += 1;
                assert!(
                    !e.contains("likely caused by a bug") && !e.contains("panicked"),
                    "file case {k}: {shown}\n{e}"
                );
                if shown.starts_with("SELECT") {
                    assert!(
                        e.contains('/') || e.contains("read_"),
                        "file case {k}: {shown}: the error names no path: {e}"
                    );
                }
            }
            Err(why) => panic!("file case {k}: {shown}\n{why}"),
        }
    }
    eprintln!("file readers: {} statements, {refused} refused, {answered} answered", answered + refused);
}

#[test]
fn generator_specs_at_the_integer_limits_are_refused_or_made() {
    // Specs with sizes at and beyond the integer limits, under a 200 MB budget: each is refused
    // with a message or generated within the budget; none panics, wraps or runs for ever.
    const KEYS: &[&str] =
        &["ranks", "iterations", "bytes", "seed", "ranks-per-node", "eager-limit", "collective-every"];
    const VALUES: &[&str] = &[
        "0",
        "1",
        "2",
        "-1",
        "2147483647",
        "2147483648",
        "4294967295",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999",
        "1e3",
        "x",
    ];
    const OTHERS: &[&str] = &[
        "compute=9000000000s",
        "compute=1ns",
        "compute=-1ms",
        "imbalance=0:1000",
        "slow-rank=0:1000:0",
        "background-traffic=0ms:1ms:1e300",
        "pattern=alltoall",
        "pattern=master-worker",
        "pattern=ring",
        "",
    ];
    let (mut made, mut refused) = (0, 0);
    for k in 0..cases() {
        let r = |i: u64| uniform(0x5C1, 8, k, i);
        let mut parts = vec![format!("ranks={}", pick(&["4", "65536", "1048576", "2147483647"], r(0)))];
        for i in 0..1 + (r(1) * 3.0) as u64 {
            parts.push(format!("{}={}", pick(KEYS, r(10 + i)), pick(VALUES, r(20 + i))));
        }
        parts.push(pick(OTHERS, r(30)).to_string());
        let spec =
            format!("generate:{}", parts.iter().filter(|p| !p.is_empty()).cloned().collect::<Vec<_>>().join(","));
        let shown = spec.clone();
        let got = commdb_tests::survive(64 << 20, HANG, move || {
            let mut session = commdb_tests::session();
            let options = commdb_catalog::OpenOptions { memory_budget: Some(200 << 20), ..Default::default() };
            session.open(&spec, None, &options).map(|_| ()).map_err(|e| e.to_string())?;
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let b = runtime
                .block_on(session.collect("SELECT min(bytes), min(send_ts) FROM messages"))
                .map_err(|e| e.to_string())?;
            let rows = commdb_tests::rows(&b).map_err(|e| e.to_string())?;
            match rows.first().map(|r| r.iter().any(|v| v.starts_with('-'))) {
                Some(true) => Err(format!("negative bytes or times: {rows:?} (wrapped)")),
                _ => Ok(()),
            }
        });
        match got {
            Ok(None) => made += 1,
            Ok(Some(e)) => {
                assert!(!e.contains("wrapped") && !e.contains("panicked"), "spec case {k}: {shown}\n{e}");
                refused += 1;
            }
            Err(why) => panic!("spec case {k}: {shown}\n{why}"),
        }
    }
    eprintln!("generator specs: {} cases, {refused} refused, {made} made", made + refused);
}
