//! Writing a trace for other tools to open, one module per format: `chrome` (Chrome
//! trace-event JSON for Perfetto's UI and chrome://tracing, with `streams` for accelerator
//! streams), `otf2` (an OTF2 archive as Score-P writes it, for otf2-print, Scalasca, Vampir and
//! CASITA; `tables_to_otf2` writes any opened trace with it) and `paraver` (a Paraver trace as Extrae writes it, for Paraver and Dimemas). The OTF2
//! and Paraver writers write the formats commdb also reads, with the constants of their readers
//! (crate's `reading`). `FORMATS` lists the formats a trace opened from any reader can be
//! exported in, as `formats::FORMATS` lists the readers; `commdb export --format` takes their
//! names.

pub mod chrome;
pub mod otf2;
pub mod paraver;
pub mod streams;
pub mod tables_to_otf2;

use std::path::Path;

use crate::error::{Error, Result};
use crate::trace::Trace;

/// A format a trace is exported in.
#[derive(Debug)]
pub struct Format {
    /// The name `--format` takes.
    pub name: &'static str,
    /// What it writes at the path it is given, and for which tools.
    pub writes: &'static str,
    write: fn(&Trace, &Path) -> Result<String>,
}

impl Format {
    /// Write `trace` at `out`; what was written, in a sentence for the user.
    pub fn write(&self, trace: &Trace, out: &Path) -> Result<String> {
        (self.write)(trace, out)
    }
}

/// Every format a trace opened from any reader is exported in.
pub static FORMATS: &[Format] = &[
    Format {
        name: "chrome",
        writes: "a file of Chrome trace-event JSON, for Perfetto's UI (ui.perfetto.dev) and chrome://tracing",
        write: write_chrome,
    },
    Format {
        name: "otf2",
        writes: "a directory with traces.otf2, traces.def and traces/ (an OTF2 archive as Score-P writes it), for Vampir, Scalasca, CASITA and otf2-print",
        write: write_otf2,
    },
    Format {
        name: "paraver",
        writes: "a directory with NAME.prv, .pcf and .row (NAME the trace's), as Extrae writes them, for Paraver and Dimemas",
        write: write_paraver,
    },
];

/// The export format `--format` names.
pub fn named(name: &str) -> Result<&'static Format> {
    FORMATS.iter().find(|f| f.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
        let mut names: Vec<String> = FORMATS.iter().map(|f| format!("'{}'", f.name)).collect();
        let last = names.pop().unwrap_or_default();
        Error::argument(format!("unknown export format '{name}': expected {} or {last}", names.join(", ")))
    })
}

fn write_chrome(trace: &Trace, out: &Path) -> Result<String> {
    let n = chrome::write(trace, out)?;
    let accelerators = if n.transfers + n.launches > 0 {
        format!(", {} accelerator transfers, {} launches as flows to their kernels", n.transfers, n.launches)
    } else {
        String::new()
    };
    Ok(format!(
        "{} calls, {} messages as flows, {} collective parts, {} metric samples{accelerators}; open it in ui.perfetto.dev or chrome://tracing",
        n.calls, n.flows, n.collectives, n.counters
    ))
}

fn write_paraver(trace: &Trace, out: &Path) -> Result<String> {
    let name = paraver_name(&trace.meta.name);
    // The trace's own files are not written over (an export of a Paraver trace into its own
    // directory under its own name).
    let targets: Vec<_> = ["prv", "pcf", "row"].iter().map(|ext| out.join(format!("{name}.{ext}"))).collect();
    crate::writing::refuse_trace_files(trace, &targets)?;
    let not_written = paraver::write(trace, out, &name)?;
    let mut said = format!("{name}.prv, {name}.pcf and {name}.row; open {name}.prv in Paraver");
    said.push_str(&unwritten("Paraver", &not_written));
    Ok(said)
}

fn write_otf2(trace: &Trace, out: &Path) -> Result<String> {
    let not_written = tables_to_otf2::write(trace, out)?;
    let anchor = out.join("traces.otf2");
    let mut said = format!("{}; open it with Vampir, Scalasca, CASITA or otf2-print", anchor.display());
    said.push_str(&unwritten("OTF2", &not_written));
    Ok(said)
}

/// What an export did not write, by kind, as its sentence ends (nothing when it wrote all).
fn unwritten(format: &str, not_written: &std::collections::BTreeMap<String, u64>) -> String {
    if not_written.is_empty() {
        return String::new();
    }
    let what: Vec<String> = not_written.iter().map(|(what, n)| format!("{n} {what}")).collect();
    format!("; not written (no {format} record for them here): {}", what.join(", "))
}

/// The name of a Paraver trace written for a trace called `name`: its letters, digits, `-`,
/// `_` and `.`, the rest as `_` (`trace` when nothing is left).
fn paraver_name(name: &str) -> String {
    let kept: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let kept = kept.trim_matches('.').to_string();
    if kept.is_empty() { "trace".to_string() } else { kept }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate's directory where the tests run (cargo says it when it runs them): a test
    /// binary built in another checkout that shares the build cache keeps that checkout's
    /// directory in what `env!` gave at compile time.
    fn manifest_dir() -> std::path::PathBuf {
        let dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
        std::path::PathBuf::from(dir)
    }

    #[test]
    fn formats_are_found_by_name_and_an_unknown_one_is_refused() {
        assert_eq!(named("Paraver").unwrap().name, "paraver");
        let e = named("vampir").unwrap_err().to_string();
        assert!(e.contains("unknown export format 'vampir'") && e.contains("'chrome', 'otf2' or 'paraver'"), "{e}");
        assert_eq!(paraver_name("run 2/a"), "run_2_a");
        assert_eq!(paraver_name(".."), "trace");
    }

    #[test]
    fn a_trace_exported_as_paraver_reads_back_with_its_messages_and_calls() {
        let trace = crate::generate::demo(crate::clock::Correction::Off).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let said = named("paraver").unwrap().write(&trace, dir.path()).unwrap();
        let name = paraver_name(&trace.meta.name);
        assert!(said.contains(&format!("{name}.prv")), "{said}");
        let prv = dir.path().join(format!("{name}.prv"));
        let back = crate::formats::read(&prv.display().to_string(), &crate::OpenOptions::default()).unwrap();
        let rows = |t: &Trace, table: &str| t.table(table).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
        for table in ["ranks", "messages", "collectives"] {
            assert_eq!(rows(&back, table), rows(&trace, table), "{table}");
        }
        // Written again over its own files, it is refused and the files stay.
        let before = std::fs::read(&prv).unwrap();
        let e = named("paraver").unwrap().write(&back, dir.path()).unwrap_err().to_string();
        assert!(e.contains("the trace is read from"), "{e}");
        assert_eq!(std::fs::read(&prv).unwrap(), before);
    }

    /// The events of `trace` as sorted text rows (every column the archive holds).
    fn event_rows(trace: &Trace) -> Vec<String> {
        let columns =
            ["rank", "thread", "ts", "kind", "region", "peer", "comm", "tag", "bytes", "request", "op", "bytes_recv"];
        let mut rows = Vec::new();
        for b in trace.table("events").unwrap() {
            let shown: Vec<_> = columns
                .iter()
                .map(|c| arrow::compute::cast(b.column_by_name(c).unwrap(), &arrow::datatypes::DataType::Utf8).unwrap())
                .collect();
            for i in 0..b.num_rows() {
                let row: Vec<String> = shown
                    .iter()
                    .map(|a| {
                        use arrow::array::{Array, AsArray};
                        if a.is_valid(i) { a.as_string::<i32>().value(i).to_string() } else { "NULL".into() }
                    })
                    .collect();
                rows.push(row.join(","));
            }
        }
        rows.sort();
        rows
    }

    #[test]
    fn a_trace_exported_as_otf2_reads_back_with_the_same_events() {
        // A generated run with skewed clocks and CUDA streams (its local times, read back without
        // correction), and a Score-P archive with CUDA streams and their RMA records (read back
        // with the clock offsets it was written with).
        let skewed = crate::generate::GeneratorConfig {
            clock_skew: true,
            gpu: true,
            ..crate::generate::GeneratorConfig::default()
        };
        let generated = crate::generate::generate(&skewed).unwrap().trace;
        let generated = generated.build_with(crate::clock::Correction::Off).unwrap();
        let archive = manifest_dir().join("../tests/data/otf2/gpu/traces.otf2");
        let gpu = crate::formats::read(&archive.display().to_string(), &crate::OpenOptions::default()).unwrap();
        for (trace, correction) in [(generated, crate::clock::Correction::Off), (gpu, Default::default())] {
            let dir = tempfile::tempdir().unwrap();
            let said = named("otf2").unwrap().write(&trace, dir.path()).unwrap();
            assert!(said.contains("traces.otf2"), "{said}");
            let anchor = dir.path().join("traces.otf2");
            let options = crate::OpenOptions { clock_correction: correction, ..Default::default() };
            let back = crate::formats::read(&anchor.display().to_string(), &options).unwrap();
            let (a, b) = (event_rows(&back), event_rows(&trace));
            let only_back: Vec<&String> = a.iter().filter(|r| b.binary_search(r).is_err()).take(4).collect();
            let only_trace: Vec<&String> = b.iter().filter(|r| a.binary_search(r).is_err()).take(4).collect();
            assert!(
                a.len() == b.len() && only_back.is_empty(),
                "{said}: {} events read back, {} exported; only read back: {only_back:?}; only exported: {only_trace:?}",
                a.len(),
                b.len()
            );
            let count = |t: &Trace, table: &str| t.table(table).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
            for table in ["messages", "collectives", "regions", "locations", "ranks"] {
                assert_eq!(count(&back, table), count(&trace, table), "{table}");
            }
            // Exported over the archive it was read from, it is refused and the archive stays.
            let before = std::fs::read(&anchor).unwrap();
            let e = named("otf2").unwrap().write(&back, dir.path()).unwrap_err().to_string();
            assert!(e.contains("the trace is read from"), "{e}");
            assert_eq!(std::fs::read(&anchor).unwrap(), before);
        }
    }

    #[test]
    fn what_paraver_has_no_record_for_is_counted_and_said() {
        let archive = manifest_dir().join("../tests/data/otf2/gpu/traces.otf2");
        let trace = crate::formats::read(&archive.display().to_string(), &crate::OpenOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let said = named("paraver").unwrap().write(&trace, dir.path()).unwrap();
        assert!(said.contains("not written (no Paraver record for them here)"), "{said}");
        assert!(said.contains("1 rma_put") && said.contains("2 rma_get"), "{said}");
    }
}
