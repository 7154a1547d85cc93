//! Ctrl-C reaches work that computes for long inside one plan node: the interrupt
//! (commdb_catalog::interrupt) stops a scheduler-log reader in the middle of its file and an
//! analysis between its steps, with an error that says so. Its own test binary: the flag is
//! the process's.

use std::io::Write;
use std::time::Duration;

use commdb_catalog::interrupt;

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
