//! The `commdb` binary: SQL over MPI communication traces. Arguments and subcommands are
//! parsed here; statements run in `exec`, backslash commands are in `command`, output formats
//! in `print`, line editing in `helper`.

#[cfg(feature = "cluster")]
mod cluster;
mod command;
mod connect;
mod ctrl_c;
mod demo;
mod describe;
mod exec;
mod fit;
mod helper;
mod print;
mod progress;

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use commdb_catalog::clock::Correction;
use commdb_catalog::generate::{self, GeneratorConfig, Pattern};
use commdb_catalog::reading::csv::TimeUnit;
use commdb_catalog::{OpenOptions, Session, store};

use crate::exec::{Flow, Shell};
use crate::fit::{Expanded, Width};
use crate::print::{Format, PrintOptions, human_duration};

/// Large tables are built and dropped in quick succession; mimalloc reuses the memory instead of
/// returning it to the kernel and faulting it in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// SQL over MPI communication traces.
#[derive(Debug, Parser)]
#[command(name = "commdb", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    /// Traces to open: an OTF2 archive (its *.otf2 anchor or directory), a Paraver trace
    /// (*.prv or *.prv.gz with its .pcf and .row, or their directory), a CSV trace (PCLVis events
    /// or an event export), a commdb store directory, or generate:KEY=VALUE,... The first is
    /// also the default schema.
    traces: Vec<String>,
    /// Run SQL (may be given several times; runs in order with -f).
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,
    /// Run the statements of a file (may be given several times).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output format: table, csv, tsv, json, ndjson or markdown.
    #[arg(long, default_value = "table", value_parser = parse_format)]
    format: Format,
    /// Write results to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Draw the result of the one -c query as an SVG chart in FILE instead of printing it (as
    /// \chart does).
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// No row counts, timings or load messages.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Rows shown by the table format: 0 for all [default: 40 in the interactive shell and for
    /// -c, all for -f scripts and standard input]
    #[arg(long, value_name = "N")]
    max_rows: Option<usize>,
    /// Characters the table format fits its lines into, wrapping text columns (or, when every
    /// column cannot be shown so, printing rows expanded): 0 for no limit [default: the
    /// terminal's width when writing to one, else no limit]
    #[arg(long, value_name = "N")]
    width: Option<usize>,
    /// Print each row of the table format as a block of column | value lines: on, off (cut
    /// and hide columns that do not fit), or auto (when the table cannot show every column
    /// even with its text wrapped)
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = parse_expanded)]
    expanded: Expanded,
    /// Open a generated 64-rank trace with known latency problems (also in place of the trace
    /// of report, export and info).
    #[arg(long, global = true)]
    demo: bool,
    /// Memory queries may hold while they run (sorts, joins, aggregations), e.g. 8G or 512M;
    /// past it a query fails with an error saying so [default: 3/4 of the machine's memory]
    #[arg(long, value_name = "SIZE", value_parser = commdb_catalog::session::parse_size)]
    memory_limit: Option<usize>,
    /// Attach a scheduler log as table `jobs` (sacct -P output; SWF when named *.swf or *.swf.gz).
    #[arg(long, value_name = "FILE")]
    jobs: Option<PathBuf>,
    /// Attach a node-to-switch map (CSV node,switch) as table `switches`.
    #[arg(long, value_name = "FILE")]
    switches: Option<PathBuf>,
    /// Run the queries on the cluster whose scheduler is at df://HOST:PORT (`commdb scheduler`);
    /// the traces must be commdb stores (`commdb convert`) at a path every executor sees.
    #[arg(long, value_name = "df://HOST:PORT")]
    cluster: Option<String>,
    #[command(flatten)]
    open: OpenArgs,
    #[command(subcommand)]
    subcommand: Option<Sub>,
}

#[derive(Debug, Args)]
struct OpenArgs {
    /// CSV with rank,node giving where each rank ran.
    #[arg(long, value_name = "FILE", global = true)]
    nodes: Option<PathBuf>,

    /// Unit of CSV timestamps: s, ms, us or ns.
    #[arg(long, value_parser = parse_time_unit, global = true)]
    time_unit: Option<TimeUnit>,
    /// Clock correction when a trace is read: off, model (fit each rank's clock to the
    /// master's from the sync samples) or clc (model, then no message runs backwards).
    #[arg(long, default_value = "model", value_parser = parse_correction, global = true)]
    clock_correction: Correction,
    /// CSV of clock sync samples (rank,session,local_send,master_ts,local_recv or
    /// rank,session,local_ts,master_ts) replacing the trace's own.
    #[arg(long, value_name = "FILE", global = true)]
    clock_sync: Option<PathBuf>,
}

/// The trace a subcommand reads: the path given, or None for --demo; one of the two.
fn one_trace<'a>(command: &str, trace: Option<&'a str>, demo: bool) -> Result<Option<&'a str>, String> {
    match (trace, demo) {
        (Some(_), true) => Err(format!("{command}: give a trace or --demo, not both")),
        (Some(path), false) => Ok(Some(path)),
        (None, true) => Ok(None),
        (None, false) => Err(format!("{command}: which trace? Give its path, or --demo for the generated one")),
    }
}

/// The demo trace, generated and built.
fn demo_trace(correction: Correction) -> Result<commdb_catalog::Trace, String> {
    generate::demo(correction).map_err(|e| e.to_string())
}

/// Attach the demo trace as schema `demo`, the default.
fn attach_demo(shell: &mut Shell) -> Result<(), String> {
    let trace = demo_trace(shell.session.open_options.clock_correction)?;
    shell.session.attach(trace, Some("demo")).map_err(|e| e.to_string())?;
    shell.refresh_words();
    Ok(())
}

/// A session with every core, the memory budget and commdb's functions, as the shell runs
/// queries.
fn sql_session(cli: &Cli) -> Session {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let budget = cli.memory_limit.unwrap_or_else(commdb_catalog::session::default_memory_limit);
    let mut session = Session::with_limits(cores, Some(budget));
    commdb_udfs::register_all(&mut session);
    session.open_options = OpenOptions { memory_budget: Some(budget as u64), ..open_options(&cli.open) };
    session
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Generate a synthetic trace with known ground truth into a directory (a commdb store, an
    /// OTF2 archive or a Paraver trace).
    Generate(GenerateArgs),
    /// Convert a trace into a commdb store directory (Parquet tables, read back losslessly).
    Convert {
        /// Trace to read (any format commdb opens).
        input: String,
        /// Directory to write.
        output: PathBuf,
        /// Rows of a part of the large tables (messages: a quarter of it): smaller parts spread
        /// a cluster's scans over more tasks [default: 4194304]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        part_rows: Option<u64>,
    },
    /// List the cache stores that traces bigger than the memory budget were converted into
    /// (in $COMMDB_CACHE_DIR, else $XDG_CACHE_HOME/commdb, else ~/.cache/commdb), most recently
    /// opened first; with --clear, remove them (or those whose directory or trace names
    /// contain one of NAMES).
    Cache {
        /// Remove the listed cache stores.
        #[arg(long)]
        clear: bool,
        /// Only the cache stores whose directory or trace contains one of these.
        names: Vec<String>,
    },
    /// Print a trace's facts and table row counts.
    Info {
        /// Trace to read (or --demo).
        trace: Option<String>,
    },
    /// Write a one-page HTML report of a trace (inline SVG, nothing fetched): its facts, the
    /// communication matrix and regions, latency over time, a timeline, the dependency DAG of
    /// the slowest period, waiting, and what to do.
    Report {
        /// Trace to read (any format commdb opens), or --demo.
        trace: Option<String>,
        /// File to write (replaced whole).
        #[arg(short = 'o', long = "output", value_name = "FILE", default_value = "report.html")]
        file: PathBuf,
    },
    /// Run a cluster's scheduler (Apache Ballista, with commdb's functions) until Ctrl-C or
    /// SIGTERM; clients connect with --cluster df://HOST:PORT, executors with --scheduler.
    Scheduler {
        /// Address to listen on.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
        bind: std::net::SocketAddr,
    },
    /// Run a cluster's executor until Ctrl-C or SIGTERM: it registers with the scheduler and
    /// runs the tasks of queries, logging each task with its job and stage.
    Executor {
        /// The scheduler's address.
        #[arg(long, value_name = "HOST:PORT")]
        scheduler: std::net::SocketAddr,
        /// Address to serve shuffle data on (Arrow Flight).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50051")]
        bind: std::net::SocketAddr,
        /// Port to take tasks on (gRPC) [default: --bind's port + 1]
        #[arg(long, value_name = "PORT")]
        grpc_port: Option<u16>,
        /// Directory of the shuffle files [default: a new temporary directory]
        #[arg(long, value_name = "DIR")]
        work_dir: Option<PathBuf>,
        /// Tasks run at once [default: the machine's cores]
        #[arg(long, value_name = "N")]
        vcores: Option<usize>,
        /// Memory the running tasks may hold together, e.g. 2G; past it a task fails saying so.
        #[arg(long = "memory-limit", value_name = "SIZE", value_parser = commdb_catalog::session::parse_size)]
        executor_memory: Option<usize>,
    },
    /// Write a trace for another tool: `--format chrome` writes Chrome trace-event JSON, which
    /// Perfetto's UI (ui.perfetto.dev) and chrome://tracing open.
    Export {
        /// Trace to read (any format commdb opens), or --demo.
        trace: Option<String>,
        /// Format to write: chrome.
        #[arg(long = "format", value_name = "FORMAT")]
        to: String,
        /// File to write (replaced whole).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Directory to write (a commdb store, with ground_truth.json inside).
    output: PathBuf,
    /// MPI ranks of the simulated run (1 to 1048576).
    #[arg(long, default_value_t = 16)]
    ranks: i32,
    /// Ranks placed on each node, in rank order (node000, node001, ...).
    #[arg(long, default_value_t = 4)]
    ranks_per_node: i32,
    /// stencil2d, ring, alltoall or master-worker.
    #[arg(long, default_value = "stencil2d")]
    pattern: Pattern,
    /// Iterations of compute then communication; the run lasts about ITERATIONS x (compute +
    /// communication).
    #[arg(long, default_value_t = 100)]
    iterations: u32,
    /// Seed of the random noise: the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Base message size in bytes.
    #[arg(long, default_value_t = 4096)]
    bytes: i64,
    /// Mean compute time per iteration, with its unit: ns, us, ms or s (e.g. 100us).
    #[arg(long, default_value = "100us")]
    compute: String,
    /// Place neighbouring ranks on different nodes.
    #[arg(long)]
    bad_mapping: bool,
    /// Leave out the `main` region around each rank's run (as Extrae's Paraver traces and
    /// selectively instrumented traces have none).
    #[arg(long)]
    no_enclosing_region: bool,
    /// Leave the compute phases out: uninstrumented code runs between the MPI calls, time no
    /// region covers.
    #[arg(long)]
    uninstrumented_compute: bool,
    /// T0:T1:FACTOR — inter-node transmission times x FACTOR between T0 and T1, times from the
    /// run's start with their unit (e.g. 5ms:9ms:4); T0 must fall within the run.
    #[arg(long, value_name = "T0:T1:FACTOR")]
    background_traffic: Option<String>,
    /// T0:T1:FACTOR — inter-node transmission times x a factor growing from 1 at T0 to FACTOR
    /// at T1, times with their unit as for --background-traffic.
    #[arg(long, value_name = "T0:T1:FACTOR")]
    latency_ramp: Option<String>,
    /// RANKS:FACTOR — more compute and messages on those ranks (e.g. 0-3,7:2).
    #[arg(long, value_name = "RANKS:FACTOR")]
    imbalance: Option<String>,
    /// Skew and drift the ranks' clocks and record sync samples at start and end.
    #[arg(long)]
    clock_skew: bool,
    /// Sync sessions during the run (implies --clock-skew).
    #[arg(long, default_value_t = 0)]
    sync_sessions: u32,
    /// Absolute start of the run, YYYY-MM-DDTHH:MM:SS in UTC, or none.
    #[arg(long, default_value = "2026-03-02T08:00:00")]
    start: String,
    /// What to write: a commdb store (parquet), an OTF2 archive (otf2) or a Paraver trace
    /// (paraver: DIR/trace.prv, .pcf and .row).
    #[arg(long = "format", default_value = "parquet", value_parser = ["parquet", "otf2", "paraver"])]
    output_format: String,
    /// With --format paraver: add a second application that samples a node counter ("Node
    /// memory reads") on every node at this interval, with its unit (e.g. 1ms), as Extrae's
    /// node-level samplers do.
    #[arg(long, value_name = "INTERVAL")]
    node_counters: Option<String>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

fn parse_expanded(s: &str) -> Result<Expanded, String> {
    s.parse()
}

fn parse_correction(s: &str) -> Result<Correction, String> {
    s.parse().map_err(|e: commdb_catalog::Error| e.to_string())
}

fn parse_time_unit(s: &str) -> Result<TimeUnit, String> {
    s.parse().map_err(|e: commdb_catalog::Error| e.to_string())
}

impl GenerateArgs {
    /// What the Paraver writer adds (`--node-counters`, which only a Paraver trace holds).
    fn paraver_extras(&self) -> Result<commdb_catalog::reading::paraver::writer::Extras, String> {
        let Some(every) = &self.node_counters else { return Ok(Default::default()) };
        if self.output_format != "paraver" {
            return Err(format!(
                "--node-counters applies to --format paraver (a second application of the trace), not to --format {}",
                self.output_format
            ));
        }
        let ns = generate::parse_duration(every).map_err(|e| format!("--node-counters: {e}"))?;
        if ns <= 0 {
            return Err(format!("--node-counters: expected a positive interval, got {every}"));
        }
        Ok(commdb_catalog::reading::paraver::writer::Extras { node_counters_every_ns: Some(ns) })
    }

    fn config(&self) -> Result<GeneratorConfig, String> {
        let mut cfg = GeneratorConfig {
            ranks: self.ranks,
            ranks_per_node: self.ranks_per_node,
            pattern: self.pattern,
            iterations: self.iterations,
            seed: self.seed,
            bytes: self.bytes,
            compute_ns: generate::parse_duration(&self.compute).map_err(|e| e.to_string())?,
            bad_mapping: self.bad_mapping,
            no_enclosing_region: self.no_enclosing_region,
            uninstrumented_compute: self.uninstrumented_compute,
            clock_skew: self.clock_skew || self.sync_sessions > 0,
            sync_sessions: self.sync_sessions,
            start_wallclock_ns: generate::parse_start(&self.start).map_err(|e| e.to_string())?,
            ..GeneratorConfig::default()
        };
        if let Some(b) = &self.background_traffic {
            cfg.background_traffic = Some(generate::parse_background(b).map_err(|e| e.to_string())?);
        }
        if let Some(r) = &self.latency_ramp {
            cfg.latency_ramp = Some(generate::parse_background(r).map_err(|e| e.to_string())?);
        }
        if let Some(i) = &self.imbalance {
            cfg.imbalance = Some(generate::parse_imbalance(i).map_err(|e| e.to_string())?);
        }
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// Events the generator hands to the OTF2 writer at a time.
const GENERATE_FLUSH_EVENTS: usize = 1 << 22;

/// Generated traces of more events than this are written to a store through an OTF2 archive
/// converted a group of ranks at a time, not held in memory (about 110 bytes per event).
const GENERATE_IN_MEMORY_EVENTS: u64 = 1 << 24;

fn run_generate(args: &GenerateArgs, correction: Correction, quiet: bool) -> Result<(), String> {
    let cfg = args.config()?;
    args.paraver_extras()?;
    let started = Instant::now();
    let streamed = args.output_format == "otf2"
        || (matches!(args.output_format.as_str(), "parquet" | "paraver")
            && correction != Correction::Clc
            && generate::estimated_events(&cfg) > GENERATE_IN_MEMORY_EVENTS);
    let truth =
        if streamed { generate_streamed(args, &cfg, correction)? } else { generate_in_memory(args, &cfg, correction)? };
    truth.write(&args.output.join("ground_truth.json")).map_err(|e| e.to_string())?;
    if let Some(jobs) = &truth.jobs {
        for (file, text) in [("sacct.txt", jobs.sacct_text()), ("switches.csv", jobs.switch_map_csv())] {
            let path = args.output.join(file);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
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
) -> Result<generate::GroundTruth, String> {
    let generated = generate::generate(cfg).map_err(|e| e.to_string())?;
    let mut raw = generated.trace;
    raw.meta.name = commdb_catalog::reading::default_name(&args.output.to_string_lossy());
    raw.meta.path = args.output.display().to_string();
    let trace = raw.build_with(correction).map_err(|e| e.to_string())?;
    if args.output_format == "paraver" {
        commdb_catalog::reading::paraver::writer::write_with(&trace, &args.output, "trace", &args.paraver_extras()?)
            .map_err(|e| e.to_string())?;
    } else {
        store::write(&trace, &args.output).map_err(|e| e.to_string())?;
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
) -> Result<generate::GroundTruth, String> {
    if args.output_format == "otf2" {
        return commdb_catalog::reading::otf2::writer::write_generated(cfg, &args.output, GENERATE_FLUSH_EVENTS)
            .map_err(|e| e.to_string());
    }
    let name = args.output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    let scratch = args.output.with_file_name(format!(".{name}.commdb-generate-{}", std::process::id()));
    commdb_catalog::writing::clean_stale(&commdb_catalog::writing::parent_of(&scratch));
    if args.output_format == "paraver" {
        let store_dir = scratch.with_extension("store");
        let result = (|| {
            let truth = commdb_catalog::reading::otf2::writer::write_generated(cfg, &scratch, GENERATE_FLUSH_EVENTS)
                .map_err(|e| e.to_string())?;
            let options = OpenOptions { clock_correction: correction, ..OpenOptions::default() };
            let limits = commdb_catalog::convert::Limits::default();
            commdb_catalog::convert::otf2(&scratch.join("traces.otf2"), &store_dir, &options, &limits)
                .map_err(|e| e.to_string())?;
            let _ = std::fs::remove_dir_all(&scratch);
            let trace = store::read(&store_dir).map_err(|e| e.to_string())?;
            commdb_catalog::reading::paraver::writer::write_with(
                &trace,
                &args.output,
                "trace",
                &args.paraver_extras()?,
            )
            .map_err(|e| e.to_string())?;
            Ok(truth)
        })();
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = std::fs::remove_dir_all(&store_dir);
        return result;
    }
    let result = (|| {
        let truth = commdb_catalog::reading::otf2::writer::write_generated(cfg, &scratch, GENERATE_FLUSH_EVENTS)
            .map_err(|e| e.to_string())?;
        let options = OpenOptions { clock_correction: correction, ..OpenOptions::default() };
        let limits = commdb_catalog::convert::Limits::default();
        let anchor = scratch.join("traces.otf2");
        commdb_catalog::convert::otf2_as(&anchor, &args.output, &options, &limits, |meta| {
            meta.name = commdb_catalog::reading::default_name(&args.output.to_string_lossy());
            meta.path = args.output.display().to_string();
            meta.format = "generated".into();
            meta.format_version = None;
        })
        .map_err(|e| e.to_string())?;
        Ok(truth)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// `commdb cache [--clear] [NAMES]`.
fn cache_command(clear: bool, names: &[String], quiet: bool) -> Result<(), String> {
    use commdb_catalog::convert::cache;
    let root = cache::cache_root().ok_or("no cache directory is known: set COMMDB_CACHE_DIR")?;
    let all = cache::entries(&root).map_err(|e| e.to_string())?;
    let chosen: Vec<&cache::Entry> = all
        .iter()
        .filter(|e| {
            names.is_empty()
                || names.iter().any(|n| {
                    e.dir.to_string_lossy().contains(n.as_str())
                        || e.source.as_deref().is_some_and(|s| s.contains(n.as_str()))
                })
        })
        .collect();
    if !names.is_empty() && chosen.is_empty() {
        return Err(format!("no cache store in {} matches {}", root.display(), names.join(", ")));
    }
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    if clear {
        for e in &chosen {
            cache::remove(e).map_err(|e| e.to_string())?;
        }
        if !quiet {
            let freed: u64 = chosen.iter().map(|e| e.bytes).sum();
            eprintln!("removed {} cache store(s) from {}, {:.2} GiB", chosen.len(), root.display(), gib(freed));
        }
        return Ok(());
    }
    if chosen.is_empty() {
        println!("no cache stores in {}", root.display());
        return Ok(());
    }
    for e in &chosen {
        let ago = e
            .last_opened
            .and_then(|t| t.elapsed().ok())
            .map_or_else(|| "never opened".to_string(), |d| format!("opened {} ago", human_duration(d)));
        println!(
            "{}  {:.2} GiB  {ago}  from {}",
            e.dir.display(),
            gib(e.bytes),
            e.source.as_deref().unwrap_or("(unfinished conversion)")
        );
    }
    let total: u64 = chosen.iter().map(|e| e.bytes).sum();
    println!("{} cache store(s), {:.2} GiB; `commdb cache --clear [NAMES]` removes them", chosen.len(), gib(total));
    Ok(())
}

fn open_options(args: &OpenArgs) -> OpenOptions {
    OpenOptions {
        nodes: args.nodes.clone(),
        time_unit: args.time_unit,
        clock_correction: args.clock_correction,
        clock_sync: args.clock_sync.clone(),
        ..OpenOptions::default()
    }
}

/// The -c and -f actions in command-line order (with --chart, the one -c query drawn).
fn actions(matches: &clap::ArgMatches, cli: &Cli) -> Vec<(usize, Result<String, PathBuf>)> {
    let mut out: Vec<(usize, Result<String, PathBuf>)> = Vec::new();
    let command = |sql: &String| match &cli.chart {
        Some(file) => Ok(format!("\\chart {} {sql}", file.display())),
        None => Ok(sql.clone()),
    };
    if let Some(idx) = matches.indices_of("commands") {
        out.extend(idx.zip(cli.commands.iter().map(command)));
    }
    if let Some(idx) = matches.indices_of("files") {
        out.extend(idx.zip(cli.files.iter().cloned().map(Err)));
    }
    out.sort_by_key(|a| a.0);
    out
}

async fn run(matches: &clap::ArgMatches, cli: Cli) -> Result<(), String> {
    // 0 means every row; without --max-rows, scripts print every row and the rest 40.
    let rows = |default: usize| match cli.max_rows {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => default,
    };
    let width = match cli.width {
        None => Width::Terminal,
        Some(0) => Width::Unlimited,
        Some(n) => Width::Columns(n),
    };
    let print = PrintOptions {
        format: cli.format,
        max_rows: rows(40),
        quiet: cli.quiet,
        timing: true,
        width,
        expanded: cli.expanded,
    };
    // Ctrl-C stops the work and keeps what was there: everything but generating a trace and
    // the cache listing, which end at the first press as any program does. The interactive
    // shell starts watching once its line editor is set up (`Shell::repl`): the editor puts
    // its own handler in place, which the watcher's must follow.
    let interactive =
        cli.subcommand.is_none() && cli.commands.is_empty() && cli.files.is_empty() && std::io::stdin().is_terminal();
    // A scheduler or an executor stops at Ctrl-C or SIGTERM itself (crate::cluster).
    let server = matches!(cli.subcommand, Some(Sub::Scheduler { .. } | Sub::Executor { .. }));
    if !interactive && !server && !matches!(cli.subcommand, Some(Sub::Generate(_) | Sub::Cache { .. })) {
        ctrl_c::hint_on_first_press();
        ctrl_c::watch();
    }
    if cli.demo && matches!(cli.subcommand, Some(Sub::Generate(_) | Sub::Convert { .. } | Sub::Cache { .. })) {
        return Err(
            "--demo opens the generated demo trace in the shell, report, export and info; it does not apply to generate, convert or cache"
                .into(),
        );
    }
    if cli.cluster.is_some() && cli.subcommand.is_some() {
        return Err("--cluster runs the shell's queries on a cluster; it does not apply to subcommands".into());
    }
    match &cli.subcommand {
        Some(Sub::Scheduler { bind }) => {
            refuse_trace_options(&cli, "scheduler")?;
            return on_server_runtime(connect::scheduler(*bind));
        }
        Some(Sub::Executor { scheduler, bind, grpc_port, work_dir, vcores, executor_memory }) => {
            refuse_trace_options(&cli, "executor")?;
            let args = connect::ExecutorArgs {
                scheduler: *scheduler,
                bind: *bind,
                grpc_port: *grpc_port,
                work_dir: work_dir.clone(),
                vcores: *vcores,
                memory_limit: executor_memory.map(|m| m as u64),
            };
            return on_server_runtime(connect::executor(args));
        }
        Some(Sub::Generate(args)) => {
            // The generator places ranks by --ranks-per-node and writes its own clocks.
            for (given, option) in [
                (cli.open.nodes.is_some(), "--nodes"),
                (cli.open.time_unit.is_some(), "--time-unit"),
                (cli.open.clock_sync.is_some(), "--clock-sync"),
            ] {
                if given {
                    return Err(format!(
                        "{option} applies to reading a trace, not to generate (which places ranks with --ranks-per-node and records its own clocks)"
                    ));
                }
            }
            return run_generate(args, cli.open.clock_correction, cli.quiet);
        }
        Some(Sub::Convert { input, output, part_rows }) => {
            let started = Instant::now();
            let part_rows = part_rows.map_or(store::PART_ROWS, |n| n as usize);
            store::refuse_source(std::path::Path::new(input), output).map_err(|e| e.to_string())?;
            let options = open_options(&cli.open);
            let (events, messages, how) = if commdb_catalog::convert::in_groups(input, &options) {
                let share = std::sync::Arc::new(commdb_catalog::progress::LoadProgress::default());
                let shown = progress::Progress::start(&format!("converting {input}"), Some(share.clone()));
                let options = OpenOptions { progress: Some(share), ..options };
                let limits = commdb_catalog::convert::Limits { part_rows, ..Default::default() };
                let converted = commdb_catalog::convert::trace(std::path::Path::new(input), output, &options, &limits);
                shown.stop();
                let c = converted.map_err(|e| e.to_string())?;
                (c.events as usize, c.messages as usize, format!(" ({} groups of ranks)", c.groups))
            } else {
                let trace = commdb_catalog::open(input, &options).map_err(|e| e.to_string())?;
                store::write_in_parts(&trace, output, part_rows).map_err(|e| e.to_string())?;
                let rows = |t: &str| trace.built_rows(t).unwrap_or(0);
                (rows("events"), rows("messages"), String::new())
            };
            if !cli.quiet {
                eprintln!(
                    "converted {input} ({events} events, {messages} messages) to {}{how} in {}",
                    output.display(),
                    human_duration(started.elapsed())
                );
            }
            return Ok(());
        }
        Some(Sub::Export { trace, to, file }) => {
            if !to.eq_ignore_ascii_case("chrome") {
                return Err(format!("export: unknown format '{to}': expected chrome"));
            }
            let started = Instant::now();
            let (trace_path, trace) = match one_trace("export", trace.as_deref(), cli.demo)? {
                Some(path) => {
                    (path.to_string(), commdb_catalog::open(path, &open_options(&cli.open)).map_err(|e| e.to_string())?)
                }
                None => ("the demo trace".to_string(), demo_trace(cli.open.clock_correction)?),
            };
            let n = commdb_catalog::export::chrome::write(&trace, file).map_err(|e| e.to_string())?;
            if !cli.quiet {
                eprintln!(
                    "exported {trace_path} to {} in {}: {} calls, {} messages as flows, {} collective parts, {} metric samples; open it in ui.perfetto.dev or chrome://tracing",
                    file.display(),
                    human_duration(started.elapsed()),
                    n.calls,
                    n.flows,
                    n.collectives,
                    n.counters
                );
            }
            return Ok(());
        }
        Some(Sub::Report { trace, file }) => {
            let mut shell = Shell::new(sql_session(&cli), PrintOptions { quiet: cli.quiet, ..print })?;
            match one_trace("report", trace.as_deref(), cli.demo)? {
                Some(path) => drop(shell.open_trace(path, None)?),
                None => attach_demo(&mut shell)?,
            }
            shell.report(file).await?;
            return Ok(());
        }
        Some(Sub::Cache { clear, names }) => {
            for (given, option) in [
                (cli.open.nodes.is_some(), "--nodes"),
                (cli.open.time_unit.is_some(), "--time-unit"),
                (cli.open.clock_sync.is_some(), "--clock-sync"),
                (cli.open.clock_correction != Correction::default(), "--clock-correction"),
                (cli.memory_limit.is_some(), "--memory-limit"),
            ] {
                if given {
                    return Err(format!(
                        "{option} applies to reading a trace, not to cache (which lists and removes cache stores)"
                    ));
                }
            }
            return cache_command(*clear, names, cli.quiet);
        }
        Some(Sub::Info { trace }) => {
            let mut shell = Shell::new(sql_session(&cli), PrintOptions { quiet: true, ..print })?;
            match one_trace("info", trace.as_deref(), cli.demo)? {
                Some(path) => drop(shell.open_trace(path, None)?),
                None => attach_demo(&mut shell)?,
            }
            shell.run("\\info").await?;
            return Ok(());
        }
        None => {}
    }

    let mut shell = Shell::new(sql_session(&cli), print)?;
    if let Some(url) = &cli.cluster {
        if cli.demo {
            return Err(format!(
                "--demo is generated in memory and cannot run on the cluster at {url}: write it as a store with `commdb generate DIR`, then open DIR"
            ));
        }
        for t in &cli.traces {
            connect::require_store(t, url)?;
        }
        shell.connect(url).await?;
    }
    if cli.demo {
        let started = Instant::now();
        attach_demo(&mut shell)?;
        if !cli.quiet {
            eprintln!("generated the demo trace in {}", human_duration(started.elapsed()));
            eprintln!("{}", demo::EXAMPLES);
        }
    }
    for t in &cli.traces {
        shell.open_trace(t, None)?;
    }
    if let Some(path) = &cli.jobs {
        let name = path.to_string_lossy();
        let kind = if name.ends_with(".swf") || name.ends_with(".swf.gz") { "swf" } else { "sacct" };
        shell.run(&format!("ATTACH '{}' AS jobs (TYPE {kind})", name.replace('\'', "''"))).await?;
    }
    if let Some(path) = &cli.switches {
        shell.run(&format!("ATTACH '{}' AS switches (TYPE table)", path.to_string_lossy().replace('\'', "''"))).await?;
    }
    shell.set_output(cli.output.clone())?;
    if let Some(file) = &cli.chart
        && (cli.commands.len() != 1 || !cli.files.is_empty())
    {
        return Err(format!(
            "--chart {} draws the result of one query: give exactly one -c SQL and no -f (in a script, \\chart FILE.svg SQL draws any of its queries)",
            file.display()
        ));
    }
    let actions = actions(matches, &cli);
    if !actions.is_empty() {
        let mut commands = 0;
        for (_, action) in actions {
            let flow = match action {
                Ok(sql) => {
                    // Each -c is named by its place among the -c options: `-c#3:1`.
                    commands += 1;
                    shell.script(&sql, &format!("-c#{commands}")).await?
                }
                Err(path) => {
                    shell.set_max_rows(rows(usize::MAX));
                    let flow = shell.include(&path).await?;
                    shell.set_max_rows(rows(40));
                    flow
                }
            };
            if flow == Flow::Quit {
                break;
            }
        }
        return shell.close_output();
    }
    if std::io::stdin().is_terminal() {
        shell.repl().await?;
    } else {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
        shell.set_max_rows(rows(usize::MAX));
        shell.script(&text, "stdin").await?;
    }
    shell.close_output()
}

/// Options that read a trace, refused by a subcommand that reads none.
fn refuse_trace_options(cli: &Cli, command: &str) -> Result<(), String> {
    let given = [
        (cli.open.nodes.is_some(), "--nodes"),
        (cli.open.time_unit.is_some(), "--time-unit"),
        (cli.open.clock_sync.is_some(), "--clock-sync"),
        (cli.demo, "--demo"),
    ];
    match given.iter().find(|(g, _)| *g) {
        Some((_, option)) => Err(format!(
            "{option} applies to reading a trace, not to {command} (which reads the stores its queries name)"
        )),
        None => Ok(()),
    }
}

/// Run a scheduler or an executor on a runtime of its own with every core (the shell's
/// runtime has one thread), until it stops.
fn on_server_runtime(
    work: impl std::future::Future<Output = Result<(), String>> + Send + 'static,
) -> Result<(), String> {
    let server = std::thread::Builder::new().name("commdb-server".into()).spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(stack_bytes())
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        runtime.block_on(work)
    });
    match server {
        Ok(handle) => handle.join().unwrap_or_else(|_| Err("the server stopped unexpectedly".into())),
        Err(e) => Err(format!("cannot start the server's thread: {e}")),
    }
}

/// Stack of the threads that plan and execute queries. Deep expression trees (a WHERE of
/// thousands of ORs, a sum of thousands of terms) recurse once per operator when planned and
/// evaluated; the pages of a stack are only used when touched, so a large one costs nothing
/// for ordinary queries.
pub const STACK_BYTES: usize = 512 << 20;

/// Blocking threads the query runtime may start (file reads, analyses); more wait their turn.
pub const BLOCKING_THREADS: usize = 64;

/// The stack of the shell's and the queries' threads: STACK_BYTES, or less when the address
/// space is limited (`ulimit -v`), where every thread's stack is reserved whole when the
/// thread starts: then the stacks of the shell, the query workers and the blocking threads
/// take at most a quarter of the limit together, and at least 2 MiB each (DataFusion grows
/// its deepest recursions on the heap, `recursive_protection`).
pub fn stack_bytes() -> usize {
    let Some(limit) = commdb_catalog::session::address_space_limit() else { return STACK_BYTES };
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    (limit / 4 / (1 + cores + BLOCKING_THREADS)).clamp(2 << 20, STACK_BYTES)
}

/// The last fault (panic) seen on a query or worker thread, shown as the error it caused.
static LAST_FAULT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Faults are reported as errors, not as a panic's message and backtrace: on the threads that
/// run queries (named `commdb-query`) and rayon's workers (unnamed) the engine turns the fault
/// into the query's error (see `exec::fault_message`), so it is only remembered here; anywhere
/// else it is printed as one line saying where it happened.
fn report_faults() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an unknown fault".to_string());
        let at = info.location().map(|l| format!(" ({}:{})", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        *LAST_FAULT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!("{message}{at}"));
        if !(name.is_empty() || name.starts_with("commdb-query")) {
            eprintln!("error: internal fault in thread '{name}': {message}{at}");
        }
    }));
}

/// The last fault seen on a query thread, once.
pub fn last_fault() -> Option<String> {
    LAST_FAULT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
}

fn main() -> ExitCode {
    report_faults();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // The shell runs on a thread of its own with a large stack (planning happens there).
    let shell = std::thread::Builder::new().name("commdb".into()).stack_size(stack_bytes()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => return Err(format!("cannot start the runtime: {e}")),
        };
        runtime.block_on(run(&matches, cli))
    });
    let result = match shell {
        Ok(handle) => handle.join().unwrap_or_else(|_| Err("the shell stopped unexpectedly".into())),
        Err(e) => Err(format!("cannot start the shell's thread: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
