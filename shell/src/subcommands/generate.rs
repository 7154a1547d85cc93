//! `commdb generate DIR`: a synthetic trace with known ground truth (commdb_catalog::generate)
//! as a commdb store, an OTF2 archive or a Paraver trace; a large one is written as the run
//! goes, never held in memory.

use std::time::Instant;

use commdb_catalog::clock::Correction;
use commdb_catalog::export::otf2::{Version, write_generated};
use commdb_catalog::generate::{self, GeneratorConfig};
use commdb_catalog::{OpenOptions, store};

use crate::cli::{Cli, GenerateArgs};
use crate::error::{Result, ShellError};
use crate::print::human_duration;

/// What the Paraver writer adds (`--node-counters`, which only a Paraver trace holds).
fn paraver_extras(args: &GenerateArgs) -> Result<commdb_catalog::export::paraver::Extras> {
    let Some(every) = &args.node_counters else { return Ok(Default::default()) };
    if args.output_format != "paraver" {
        return Err(ShellError::usage(format!(
            "--node-counters applies to --format paraver (a second application of the trace), not to --format {}",
            args.output_format
        )));
    }
    let ns = generate::parse_duration(every).map_err(|e| ShellError::usage(format!("--node-counters: {e}")))?;
    if ns <= 0 {
        return Err(ShellError::usage(format!("--node-counters: expected a positive interval, got {every}")));
    }
    Ok(commdb_catalog::export::paraver::Extras { node_counters_every_ns: Some(ns) })
}

/// The OTF2 version `--otf2-version` asks for (only with `--format otf2`).
fn otf2_version(args: &GenerateArgs) -> Result<Version> {
    let Some(text) = &args.otf2_version else { return Ok(Version::CURRENT) };
    if args.output_format != "otf2" {
        return Err(ShellError::usage(format!(
            "--otf2-version applies to --format otf2, not to --format {}",
            args.output_format
        )));
    }
    Version::parse(text)
        .ok_or_else(|| ShellError::usage(format!("--otf2-version: expected 1.0 to 1.5, 2.0 to 2.3 or 3.0, got {text}")))
}

fn config(args: &GenerateArgs) -> Result<GeneratorConfig> {
    let mut cfg = GeneratorConfig {
        ranks: args.ranks,
        ranks_per_node: args.ranks_per_node,
        pattern: args.pattern,
        iterations: args.iterations,
        seed: args.seed,
        bytes: args.bytes,
        compute_ns: generate::parse_duration(&args.compute)?,
        bad_mapping: args.bad_mapping,
        no_enclosing_region: args.no_enclosing_region,
        uninstrumented_compute: args.uninstrumented_compute,
        clock_skew: args.clock_skew || args.sync_sessions > 0,
        sync_sessions: args.sync_sessions,
        start_wallclock_ns: generate::parse_start(&args.start)?,
        eager_limit: args.eager_limit,
        collective_every: args.collective_every,
        threads: args.threads,
        gpu: args.gpu,
        ..GeneratorConfig::default()
    };
    if let Some(l) = &args.late_launch {
        if !args.gpu {
            return Err(ShellError::usage("--late-launch applies to GPU traces: give --gpu with it"));
        }
        cfg.late_launch = Some(generate::parse_late_launch(l)?);
    }
    if args.gpu && args.output_format == "paraver" {
        return Err(ShellError::usage(
            "--gpu applies to --format otf2 or parquet: the Paraver writer does not write Extrae's CUDA records",
        ));
    }
    if let Some(b) = &args.background_traffic {
        cfg.background_traffic = Some(generate::parse_background(b)?);
    }
    if let Some(r) = &args.latency_ramp {
        cfg.latency_ramp = Some(generate::parse_background(r)?);
    }
    if let Some(i) = &args.imbalance {
        cfg.imbalance = Some(generate::parse_imbalance(i)?);
    }
    if let Some(s) = &args.slow_rank {
        cfg.slow_ranks = Some(generate::parse_slow_ranks(s)?);
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Events the generator hands to the OTF2 writer at a time.
const GENERATE_FLUSH_EVENTS: usize = 1 << 22;

/// Generated traces of more events than this are written to a store through an OTF2 archive
/// converted a group of ranks at a time, not held in memory (about 110 bytes per event).
const GENERATE_IN_MEMORY_EVENTS: u64 = 1 << 24;

pub fn run(cli: &Cli, args: &GenerateArgs) -> Result<()> {
    super::refuse_reading_options(
        cli,
        "generate",
        "which places ranks with --ranks-per-node and records its own clocks",
        &[],
    )?;
    let (correction, quiet) = (cli.open.clock_correction, cli.quiet);
    let cfg = config(args)?;
    paraver_extras(args)?;
    otf2_version(args)?;
    let started = Instant::now();
    let streamed = args.output_format == "otf2"
        || (matches!(args.output_format.as_str(), "parquet" | "paraver")
            && correction != Correction::Clc
            && generate::estimated_events(&cfg) > GENERATE_IN_MEMORY_EVENTS);
    let truth =
        if streamed { generate_streamed(args, &cfg, correction)? } else { generate_in_memory(args, &cfg, correction)? };
    truth.write(&args.output.join("ground_truth.json"))?;
    if let Some(jobs) = &truth.jobs {
        for (file, text) in [("sacct.txt", jobs.sacct_text()), ("switches.csv", jobs.switch_map_csv())] {
            let path = args.output.join(file);
            std::fs::write(&path, text).map_err(|e| ShellError::file(&path, e))?;
        }
    }
    if !quiet {
        let took = started.elapsed();
        eprintln!(
            "generated {} events, {} messages on {} ranks and wrote them as {} to {} in {} ({:.1} M events/s)",
            truth.events,
            truth.messages,
            cfg.ranks,
            args.output_format,
            args.output.display(),
            human_duration(took),
            truth.events as f64 / took.as_secs_f64().max(1e-9) / 1e6,
        );
    }
    Ok(())
}

/// Generate in memory, then write.
fn generate_in_memory(
    args: &GenerateArgs,
    cfg: &GeneratorConfig,
    correction: Correction,
) -> Result<generate::GroundTruth> {
    let generated = generate::generate(cfg)?;
    let mut raw = generated.trace;
    raw.meta.name = commdb_catalog::reading::default_name(&args.output.to_string_lossy());
    raw.meta.path = args.output.display().to_string();
    let trace = raw.build_with(correction)?;
    if args.output_format == "paraver" {
        commdb_catalog::export::paraver::write_with(&trace, &args.output, "trace", &paraver_extras(args)?)?;
    } else {
        store::write(&trace, &args.output)?;
    }
    Ok(generated.truth)
}

/// Generate without holding the events: an OTF2 archive written as the run goes; a store
/// converted from such an archive, written beside the store and removed after; a Paraver trace
/// written from such a store (the writer reads its files a batch at a time and sorts the
/// records in bounded memory), both removed after.
fn generate_streamed(
    args: &GenerateArgs,
    cfg: &GeneratorConfig,
    correction: Correction,
) -> Result<generate::GroundTruth> {
    let version = otf2_version(args)?;
    if args.output_format == "otf2" {
        return Ok(write_generated(cfg, &args.output, GENERATE_FLUSH_EVENTS, version)?);
    }
    let name = args.output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    let scratch = args.output.with_file_name(format!(".{name}.commdb-generate-{}", std::process::id()));
    commdb_catalog::writing::clean_stale(&commdb_catalog::writing::parent_of(&scratch));
    if args.output_format == "paraver" {
        let store_dir = scratch.with_extension("store");
        let result = (|| {
            let truth = write_generated(cfg, &scratch, GENERATE_FLUSH_EVENTS, Version::CURRENT)?;
            let options = OpenOptions { clock_correction: correction, ..OpenOptions::default() };
            let limits = commdb_catalog::convert::Limits::default();
            commdb_catalog::convert::otf2(&scratch.join("traces.otf2"), &store_dir, &options, &limits)?;
            let _ = std::fs::remove_dir_all(&scratch);
            let trace = store::read(&store_dir)?;
            commdb_catalog::export::paraver::write_with(&trace, &args.output, "trace", &paraver_extras(args)?)?;
            Ok(truth)
        })();
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = std::fs::remove_dir_all(&store_dir);
        return result;
    }
    let result = (|| {
        let truth = write_generated(cfg, &scratch, GENERATE_FLUSH_EVENTS, Version::CURRENT)?;
        let options = OpenOptions { clock_correction: correction, ..OpenOptions::default() };
        let limits = commdb_catalog::convert::Limits::default();
        let anchor = scratch.join("traces.otf2");
        commdb_catalog::convert::otf2_as(&anchor, &args.output, &options, &limits, |meta| {
            meta.name = commdb_catalog::reading::default_name(&args.output.to_string_lossy());
            meta.path = args.output.display().to_string();
            meta.format = "generated".into();
            meta.format_version = None;
        })?;
        Ok(truth)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
