//! The command line as clap parses it: the shell's options, the options that shape how a
//! trace is read (shared by every subcommand that reads one), and the subcommands with their
//! arguments. What each subcommand does is in [`crate::subcommands`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use commdb_catalog::clock::Correction;
use commdb_catalog::generate::Pattern;
use commdb_catalog::reading::csv::TimeUnit;
use commdb_catalog::{OpenOptions, Session};

use crate::error::Result;
use crate::fit::Expanded;
use crate::print::Format;

/// SQL over MPI communication traces.
#[derive(Debug, Parser)]
#[command(name = "commdb", version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Traces to open (the formats commdb_catalog::formats lists; see `command`). The first is
    /// also the default schema.
    pub traces: Vec<String>,
    /// Run SQL (may be given several times; runs in order with -f).
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    pub commands: Vec<String>,
    /// Run the statements of a file (may be given several times).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format: table, csv, tsv, json, ndjson or markdown.
    #[arg(long, default_value = "table", value_parser = parse_format)]
    pub format: Format,
    /// Write results to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw the result of the one -c query as an SVG chart in FILE instead of printing it (as
    /// \chart does).
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    /// No row counts, timings or load messages.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Rows shown by the table format: 0 for all [default: 40 in the interactive shell and for
    /// -c, all for -f scripts and standard input]
    #[arg(long, value_name = "N")]
    pub max_rows: Option<usize>,
    /// Characters the table format fits its lines into, wrapping text columns (or, when every
    /// column cannot be shown so, printing rows expanded): 0 for no limit [default: the
    /// terminal's width when writing to one, else no limit]
    #[arg(long, value_name = "N")]
    pub width: Option<usize>,
    /// Print each row of the table format as a block of column | value lines: on, off (cut
    /// and hide columns that do not fit), or auto (when the table cannot show every column
    /// even with its text wrapped)
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = parse_expanded)]
    pub expanded: Expanded,
    /// Open a generated 64-rank trace with known latency problems (also in place of the trace
    /// of report, export and info).
    #[arg(long, global = true)]
    pub demo: bool,
    /// Memory queries may hold while they run (sorts, joins, aggregations), e.g. 8G or 512M;
    /// past it a query fails with an error saying so [default: 3/4 of the machine's memory]
    #[arg(long, value_name = "SIZE", value_parser = commdb_catalog::session::parse_size)]
    pub memory_limit: Option<usize>,
    /// Attach a scheduler log as table `jobs` (sacct -P output; SWF when named *.swf or *.swf.gz).
    #[arg(long, value_name = "FILE")]
    pub jobs: Option<PathBuf>,
    /// Attach a node-to-switch map (CSV node,switch) as table `switches`.
    #[arg(long, value_name = "FILE")]
    pub switches: Option<PathBuf>,
    /// Run the queries on the cluster whose scheduler is at df://HOST:PORT (`commdb scheduler`);
    /// the traces must be commdb stores (`commdb convert`) at a path every executor sees.
    #[arg(long, value_name = "df://HOST:PORT")]
    pub cluster: Option<String>,
    /// File holding the cluster's shared secret (its first line, at least 16 characters; the
    /// file readable by its owner only), presented by --cluster and \connect, and required of
    /// clients and executors by `commdb scheduler` and `commdb executor` [default: the
    /// environment variable COMMDB_CLUSTER_SECRET]
    #[arg(long, value_name = "FILE", global = true)]
    pub secret_file: Option<PathBuf>,
    #[command(flatten)]
    pub open: OpenArgs,
    #[command(subcommand)]
    pub subcommand: Option<Sub>,
}

#[derive(Debug, Args)]
pub struct OpenArgs {
    /// CSV with rank,node giving where each rank ran.
    #[arg(long, value_name = "FILE", global = true)]
    pub nodes: Option<PathBuf>,

    /// Unit of CSV timestamps: s, ms, us or ns.
    #[arg(long, value_parser = parse_time_unit, global = true)]
    pub time_unit: Option<TimeUnit>,
    /// Clock correction when a trace is read: off, model (fit each rank's clock to the
    /// master's from the sync samples) or clc (model, then no message runs backwards).
    #[arg(long, default_value = "model", value_parser = parse_correction, global = true)]
    pub clock_correction: Correction,
    /// CSV of clock sync samples (rank,session,local_send,master_ts,local_recv or
    /// rank,session,local_ts,master_ts) replacing the trace's own.
    #[arg(long, value_name = "FILE", global = true)]
    pub clock_sync: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Generate a synthetic trace with known ground truth into a directory (a commdb store, an
    /// OTF2 archive or a Paraver trace).
    Generate(Box<GenerateArgs>),
    /// Convert a trace into a commdb store directory (Parquet tables, read back losslessly).
    Convert {
        /// Trace to read (any format commdb opens); with --demo, the directory to write.
        input: String,
        /// Directory to write (with --demo, give it as the only path).
        output: Option<PathBuf>,
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
        /// Compare the trace with this one instead: what got slower, where, since which
        /// iteration and through which communication (compare_runs).
        #[arg(long, value_name = "TRACE")]
        vs: Option<String>,
    },
    /// Serve a zoomable timeline of a trace in the browser until Ctrl-C: every view is a
    /// level-of-detail query over the visible window (lod_calls, lod_messages,
    /// lod_collectives), with the critical path and wait states as overlays and a SQL box.
    /// Prints the URL to open.
    Serve {
        /// Traces to read (any format commdb opens; the first is drawn, all can be queried),
        /// or --demo.
        traces: Vec<String>,
        /// Port to listen on (0: any free port).
        #[arg(long, value_name = "PORT", default_value_t = 8080)]
        port: u16,
        /// Address to listen on. Anyone who reaches it can run read-only SQL over the traces
        /// and read files this user can read: keep the default unless the network is yours.
        #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
    },
    /// Run a cluster's scheduler (Apache Ballista, with commdb's functions) until Ctrl-C or
    /// SIGTERM; clients connect with --cluster df://HOST:PORT, executors with --scheduler.
    Scheduler {
        /// Address to listen on.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
        bind: std::net::SocketAddr,
        /// A directory the queries may read and write files under (stores, read_csv, COPY TO);
        /// repeatable. Required when --bind is not a loopback address; without it, any file.
        #[arg(long = "data-dir", value_name = "DIR")]
        data_dirs: Vec<PathBuf>,
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
        /// A directory its tasks may read and write files under (stores, read_csv, COPY TO),
        /// besides --work-dir; repeatable. Required when --bind is not a loopback address;
        /// without it, any file.
        #[arg(long = "data-dir", value_name = "DIR")]
        data_dirs: Vec<PathBuf>,
    },
    /// Write a trace for another tool: `--format chrome` writes Chrome trace-event JSON, which
    /// Perfetto's UI (ui.perfetto.dev) and chrome://tracing open; `--format otf2` an OTF2
    /// archive (traces.otf2, traces.def and traces/ in the directory given), which Vampir,
    /// Scalasca and CASITA open; `--format paraver` a Paraver trace (NAME.prv, .pcf, .row in the
    /// directory given), which Paraver and Dimemas open.
    Export {
        /// Trace to read (any format commdb opens), or --demo.
        trace: Option<String>,
        /// Format to write: chrome, otf2 or paraver.
        #[arg(long = "format", value_name = "FORMAT")]
        to: String,
        /// File (chrome) or directory (otf2, paraver) to write; files are replaced whole.
        #[arg(short = 'o', long = "output", value_name = "PATH")]
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Directory to write (a commdb store, with ground_truth.json inside).
    pub output: PathBuf,
    /// MPI ranks of the simulated run (1 to 1048576).
    #[arg(long, default_value_t = 16)]
    pub ranks: i32,
    /// Ranks placed on each node, in rank order (node000, node001, ...).
    #[arg(long, default_value_t = 4)]
    pub ranks_per_node: i32,
    /// stencil2d, ring, alltoall or master-worker.
    #[arg(long, default_value = "stencil2d")]
    pub pattern: Pattern,
    /// Iterations of compute then communication; the run lasts about ITERATIONS x (compute +
    /// communication).
    #[arg(long, default_value_t = 100)]
    pub iterations: u32,
    /// Seed of the random noise: the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Base message size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub bytes: i64,
    /// Mean compute time per iteration, with its unit: ns, us, ms or s (e.g. 100us).
    #[arg(long, default_value = "100us")]
    pub compute: String,
    /// Place neighbouring ranks on different nodes.
    #[arg(long)]
    pub bad_mapping: bool,
    /// Leave out the `main` region around each rank's run (as Extrae's Paraver traces and
    /// selectively instrumented traces have none).
    #[arg(long)]
    pub no_enclosing_region: bool,
    /// Leave the compute phases out: uninstrumented code runs between the MPI calls, time no
    /// region covers.
    #[arg(long)]
    pub uninstrumented_compute: bool,
    /// T0:T1:FACTOR — inter-node transmission times x FACTOR between T0 and T1, times from the
    /// run's start with their unit (e.g. 5ms:9ms:4); T0 must fall within the run.
    #[arg(long, value_name = "T0:T1:FACTOR")]
    pub background_traffic: Option<String>,
    /// T0:T1:FACTOR — inter-node transmission times x a factor growing from 1 at T0 to FACTOR
    /// at T1, times with their unit as for --background-traffic.
    #[arg(long, value_name = "T0:T1:FACTOR")]
    pub latency_ramp: Option<String>,
    /// RANKS:FACTOR — more compute and messages on those ranks (e.g. 0-3,7:2).
    #[arg(long, value_name = "RANKS:FACTOR")]
    pub imbalance: Option<String>,
    /// RANKS:FACTOR:ITERATION — those ranks compute FACTOR x longer from that iteration
    /// (counted from 0) on (e.g. 5:2:40).
    #[arg(long, value_name = "RANKS:FACTOR:ITERATION")]
    pub slow_rank: Option<String>,
    /// Send messages of more bytes than this by rendezvous: the send completes only once the
    /// receive is posted and the transfer is done (late receivers); smaller ones are eager.
    #[arg(long, value_name = "BYTES")]
    pub eager_limit: Option<i64>,
    /// Close every K-th step with the MPI_Allreduce (a convergence check every K steps); the
    /// steps between run on without synchronising.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub collective_every: u32,
    /// OpenMP threads per rank: each step's computation becomes a parallel region (fork, a
    /// critical section, the implicit barrier, join) after a serial part on the master, as
    /// Score-P records OpenMP; MPI stays on the master thread.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: u32,
    /// Offload each step's computation to a GPU stream per rank, as Score-P records CUDA: a copy
    /// to the device, the host's work, the kernel's launch, the kernel, a synchronisation that
    /// waits for it, a copy back (with --format otf2 or parquet; not with --threads).
    #[arg(long)]
    pub gpu: bool,
    /// RANKS:DURATION — with --gpu, those ranks launch their kernels DURATION later every step,
    /// so that their device waits for the host (default: the middle rank, by --compute).
    #[arg(long, value_name = "RANKS:DURATION")]
    pub late_launch: Option<String>,
    /// Skew and drift the ranks' clocks and record sync samples at start and end.
    #[arg(long)]
    pub clock_skew: bool,
    /// Sync sessions during the run (implies --clock-skew).
    #[arg(long, default_value_t = 0)]
    pub sync_sessions: u32,
    /// Absolute start of the run, YYYY-MM-DDTHH:MM:SS in UTC, or none.
    #[arg(long, default_value = "2026-03-02T08:00:00")]
    pub start: String,
    /// What to write: a commdb store (parquet), an OTF2 archive (otf2) or a Paraver trace
    /// (paraver: DIR/trace.prv, .pcf and .row).
    #[arg(long = "format", default_value = "parquet", value_parser = ["parquet", "otf2", "paraver"])]
    pub output_format: String,
    /// With --format paraver: add a second application that samples a node counter ("Node
    /// memory reads") on every node at this interval, with its unit (e.g. 1ms), as Extrae's
    /// node-level samplers do.
    #[arg(long, value_name = "INTERVAL")]
    pub node_counters: Option<String>,
    /// With --format otf2: the OTF2 version to write, 1.0 to 1.5, 2.0 to 2.3 or 3.0 (default
    /// 2.3), in the forms that version has (as Score-P 1.x wrote them, for example).
    #[arg(long, value_name = "VERSION")]
    pub otf2_version: Option<String>,
}

fn parse_format(s: &str) -> Result<Format> {
    s.parse()
}

fn parse_expanded(s: &str) -> Result<Expanded> {
    s.parse()
}

fn parse_correction(s: &str) -> Result<Correction> {
    Ok(s.parse()?)
}

fn parse_time_unit(s: &str) -> Result<TimeUnit> {
    Ok(s.parse()?)
}

/// The command line, with the help of the traces made from the list of formats, so that it
/// names every format the readers accept.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let traces =
        format!("Traces to open: {}. The first is also the default schema.", commdb_catalog::formats::described());
    Cli::command().mut_arg("traces", |a| a.help(traces))
}

/// How a trace is read, from the command line.
pub fn open_options(args: &OpenArgs) -> OpenOptions {
    OpenOptions {
        nodes: args.nodes.clone(),
        time_unit: args.time_unit,
        clock_correction: args.clock_correction,
        clock_sync: args.clock_sync.clone(),
        ..OpenOptions::default()
    }
}

/// A session with every core, the memory budget and commdb's functions, as the shell runs
/// queries.
pub fn sql_session(cli: &Cli) -> Session {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let budget = cli.memory_limit.unwrap_or_else(commdb_catalog::memory::default_memory_limit);
    let mut session = Session::with_limits(cores, Some(budget));
    commdb_udfs::register_all(&mut session);
    session.open_options = OpenOptions { memory_budget: Some(budget as u64), ..open_options(&cli.open) };
    session
}
