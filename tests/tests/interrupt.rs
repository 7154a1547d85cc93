//! Ctrl-C reaches work that computes for long inside one plan node: the interrupt
//! (commdb_catalog::interrupt) stops a scheduler-log reader in the middle of its file and an
//! analysis between its steps, with an error that says so. Its own test binary: the flag is
//! the process's.

use std::io::Write;
use std::time::Duration;

use commdb_catalog::interrupt;

/// The interrupt is the process's: the tests that raise it run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A sacct log of `jobs` jobs on two nodes each.
fn big_sacct(jobs: usize) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let mut w = std::io::BufWriter::new(&mut f);
    writeln!(w, "JobID|JobName|State|Start|End|NodeList").unwrap();
    for j in 0..jobs {
        writeln!(
            w,
            "{j}|solver|COMPLETED|2024-03-01T10:00:00|2024-03-01T11:00:00|node[{:04}-{:04}]",
            j % 900,
            j % 900 + 1
        )
        .unwrap();
    }
    drop(w);
    f
}

#[test]
fn an_interrupt_stops_a_reader_in_the_middle_and_an_analysis_between_steps() {
    let _one = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let log = big_sacct(400_000);
    let sql = format!("SELECT count(*) FROM read_sacct('{}')", log.path().display());

    // Raised while the file is being read: the query ends with the reader's interruption.
    interrupt::lower();
    let mut session = commdb_tests::session();
    let raiser = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(300));
        interrupt::raise();
    });
    let result = runtime.block_on(session.collect(&sql));
    raiser.join().unwrap();
    let err = result.expect_err("the read should have been interrupted").to_string();
    assert!(err.contains("read_sacct: interrupted"), "{err}");

    // Lowered again, the same query runs to its end.
    interrupt::lower();
    let rows = runtime.block_on(session.collect(&sql)).unwrap();
    let n = rows[0].column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().value(0);
    assert_eq!(n, 400_000);

    // A step building a trace's tables does not start; the next query runs it.
    session.open("generate:ranks=16", None, &Default::default()).unwrap();
    interrupt::raise();
    let err = runtime.block_on(session.collect("SELECT count(*) FROM messages")).unwrap_err().to_string();
    assert!(
        err.contains("building the events and deriving calls, messages and collectives of generated: interrupted"),
        "{err}"
    );
    interrupt::lower();
    let rows = runtime.block_on(session.collect("SELECT count(*) FROM messages")).unwrap();
    assert_eq!(rows[0].num_rows(), 1);

    // An analysis stops at its next step.
    interrupt::raise();
    let err = runtime.block_on(session.collect("SELECT count(*) FROM ideal_replay()")).unwrap_err().to_string();
    interrupt::lower();
    assert!(err.contains("ideal_replay: interrupted"), "{err}");
    let rows = runtime.block_on(session.collect("SELECT count(*) FROM ideal_replay()")).unwrap();
    assert_eq!(rows[0].num_rows(), 1);
}

/// Every table of `trace` as (name, rows concatenated).
fn tables(trace: &commdb_catalog::Trace) -> Vec<(&'static str, arrow::array::RecordBatch)> {
    trace.build_all().unwrap();
    commdb_catalog::model::TABLES
        .iter()
        .filter(|t| t.name != "trace_info")
        .map(|t| (t.name, arrow::compute::concat_batches(&t.schema(), &trace.table(t.name).unwrap()).unwrap()))
        .collect()
}

/// Interrupts at several moments of building the tables of the trace `open` opens (named `path`): whatever
/// was under way when it came (decoding an archive's events, which stops between its
/// locations, or deriving, which stops within its walk or between the matching's phases), the
/// step is left to the next query, which builds the same tables as a trace never interrupted,
/// with the same warnings. Answers how many interrupts came while decoding and while deriving.
fn interrupted_at_several_moments(path: &str, open: impl Fn() -> commdb_catalog::Trace) -> (usize, usize) {
    let whole = open();
    let expected = tables(&whole);
    let expected_warnings: Vec<_> = whole.warnings().unwrap().iter().map(|w| (w.0.to_string(), w.1)).collect();
    let (mut decoding, mut deriving) = (0, 0);
    for delay_ms in [0u64, 5, 20, 60, 150, 400] {
        interrupt::lower();
        let trace = open();
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay_ms));
            interrupt::raise();
        });
        let first = trace.table("messages");
        raiser.join().unwrap();
        if let Err(e) = &first {
            let e = e.to_string();
            assert!(e.ends_with(": interrupted"), "after {delay_ms} ms: {e}");
            decoding += usize::from(e.starts_with("reading the events of "));
            deriving += usize::from(e.starts_with("deriving calls, messages and collectives"));
        }
        interrupt::lower();
        assert_eq!(tables(&trace), expected, "{path}, after an interrupt at {delay_ms} ms");
        let warnings: Vec<_> = trace.warnings().unwrap().iter().map(|w| (w.0.to_string(), w.1)).collect();
        assert_eq!(warnings, expected_warnings, "{path}, after an interrupt at {delay_ms} ms");
    }
    (decoding, deriving)
}

#[test]
fn a_step_interrupted_within_runs_again_to_the_same_tables() {
    let _one = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    use commdb_catalog::generate::{GeneratorConfig, generate};
    // A generated trace: its events are made at open, the step derives.
    let spec = "generate:ranks=128,iterations=60,bad-mapping";
    let (_, deriving) =
        interrupted_at_several_moments(spec, || commdb_catalog::open(spec, &Default::default()).unwrap());
    eprintln!("generated: {deriving} of 6 interrupts came while deriving");

    // An OTF2 archive: the step decodes its locations first.
    let dir = tempfile::tempdir().unwrap();
    let raw = generate(&GeneratorConfig::parse_spec("ranks=128,iterations=60,bad-mapping").unwrap()).unwrap().trace;
    commdb_catalog::export::otf2::write(&raw, dir.path()).unwrap();
    let anchor = dir.path().join("traces.otf2").display().to_string();
    let (decoding, deriving) =
        interrupted_at_several_moments(&anchor, || commdb_catalog::open(&anchor, &Default::default()).unwrap());
    eprintln!("OTF2: {decoding} of 6 interrupts came while decoding, {deriving} while deriving");

    // The controlled logical clock derives, moves the receives, derives again: clocks that
    // drift, fitted by an offset from one sync session, leave receives to move.
    let cfg = GeneratorConfig {
        ranks: 128,
        iterations: 60,
        compute_ns: 1_000_000_000,
        clock_skew: true,
        ..Default::default()
    };
    let mut raw = generate(&cfg).unwrap().trace;
    raw.clock_sync.retain(|s| s.session == 0);
    let clc = || raw.clone().build_with(commdb_catalog::clock::Correction::Clc).unwrap();
    let moved = clc();
    moved.table("messages").unwrap();
    assert!(moved.phases().to_string().contains("controlled logical clock"), "receives to move: {}", moved.phases());
    let (_, deriving) = interrupted_at_several_moments("clc", clc);
    eprintln!("controlled logical clock: {deriving} of 6 interrupts came while deriving");
}
