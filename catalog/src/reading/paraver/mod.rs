//! Paraver traces (`NAME.prv` with `NAME.pcf` and `NAME.row`, as BSC's Extrae writes them and
//! Paraver and Dimemas read them), read into the same tables as every other format. The header
//! gives the applications, tasks (ranks), threads and their nodes; state records become the
//! `states` table; event records become calls where the .pcf says a type marks entering (value
//! != 0) and leaving (value 0) a code region — Extrae's MPI call types 50000001-50000099 and
//! user-function types — with names from the .pcf VALUES, collectives where the MPI call is
//! one (sizes, root and communicator from Extrae's MPI global-operation types 50100001-
//! 50100004, or a global-operation record of type 4 as MPItrace wrote them), and metrics for
//! every other (type, value) pair (hardware counters above all);
//! communication records become a send on the sender at the physical send time and a receive
//! posted at the logical receive time and completed at the physical receive time, matched by
//! MPI's rules into `messages`. Extrae's OpenMP records become thread records and OpenMP
//! regions (`openmp`), its CUDA and HIP records accelerator streams, kernels and transfers,
//! with the communication records that tie a host thread to its streams read as those ties
//! rather than as messages (`cuda`). Layouts: BSC's Paraver trace format, summarised in
//! PARAVER-NOTES.md.

mod cuda;
pub mod header;
pub(crate) mod openmp;
pub mod pcf;
pub mod pieces;
pub mod records;
pub mod row;
pub(crate) mod sorted;

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::events::{COLLECTIVE_OPS, Event, EventKind, EventParts, NONE_I32, NONE_I64, RawEvents, collective_op_code};
use crate::fast_hash::FastMap;
use crate::trace::{
    CommInfo, LocationInfo, MetricDefinition, RankInfo, RawMetrics, RawStates, RawTrace, RegionInfo, TraceMeta,
    Warnings,
};
use records::{CommRec, EventRec, HalfKind, NO_STREAM};

/// Extrae's MPI call event types (point-to-point, collective, other, and the one-sided and
/// I/O types some versions add).
const MPI_TYPES: std::ops::RangeInclusive<i64> = 50_000_001..=50_000_099;
/// Extrae's MPI global-operation types: bytes sent, bytes received, whether the task is the
/// root (value 1 on the root's record only, as Extrae writes it and Dimemas's prv2dim reads
/// it), communicator; then the root's rank in the communicator, which a global-operation record
/// (type 4) gives and `records` puts under the type `records::ROOT_IN_COMM`.
const COLLECTIVE_INFO: [i64; 5] = [50_100_001, 50_100_002, 50_100_003, 50_100_004, records::ROOT_IN_COMM as i64];
/// Extrae's event types of MPI calls (point-to-point, collective, other, one-sided, I/O):
/// calls whatever the .pcf says of their values.
const MPI_CALL_TYPES: std::ops::RangeInclusive<i64> = 50_000_001..=50_000_005;

/// The .prv file of `path`: the file itself (`.prv` or `.prv.gz`) or the one in a directory.
pub fn find_prv(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    crate::reading::paths::only_file_in(path, is_prv, ("Paraver trace (*.prv)", "Paraver traces"))
}

/// A path named like a Paraver trace: `*.prv` or `*.prv.gz`.
pub fn is_prv(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    name.ends_with(".prv") || name.ends_with(".prv.gz")
}

/// `NAME.pcf` or `NAME.row` beside `NAME.prv[.gz]`.
pub(crate) fn companion(prv: &Path, ext: &str) -> PathBuf {
    let name = prv.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let stem_len = if lower.ends_with(".prv.gz") { name.len() - 7 } else { name.len().saturating_sub(4) };
    prv.with_file_name(format!("{}.{ext}", &name[..stem_len]))
}

/// A reader of `path`, decompressing a `.gz` file.
fn open_text(path: &Path) -> Result<Box<dyn Read + Send>> {
    Error::regular_file(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    Ok(if path.to_string_lossy().to_ascii_lowercase().ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, file)))
    } else {
        Box::new(file)
    })
}

fn read_text(path: &Path) -> Result<String> {
    let mut data = Vec::new();
    open_text(path)?.read_to_end(&mut data).map_err(|e| Error::in_file(path, format!("cannot read: {e}")))?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

pub fn read(path: &Path) -> Result<RawTrace> {
    read_with_progress(path, None)
}

/// What a (type, value) pair of an event record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Entering (value != 0) or leaving (0) an MPI call.
    Mpi,
    /// Entering or leaving a user function.
    Function,
    /// One of the MPI global-operation details (index into COLLECTIVE_INFO).
    CollectiveInfo(usize),
    /// A sampled value, as metric `names[i]`.
    Metric(i32),
    /// One of Extrae's OpenMP records (`openmp`).
    OpenMp(openmp::Omp),
    /// One of Extrae's CUDA or HIP records (`cuda`), but the size (`TransferSize`).
    Gpu(cuda::Gpu),
    /// The size of a CUDA or HIP transfer or call: the bytes of the transfer open on a stream,
    /// else a sample of metric `names[i]`.
    TransferSize(i32),
}

/// A Paraver trace opened: its .pcf and .row read, its header parsed, and its reader at the
/// first record.
pub(crate) struct Opened {
    pub prv: PathBuf,
    pub header: header::Header,
    pub pcf: pcf::Pcf,
    pub row: row::Row,
    pub layout: records::Layout,
    /// Nanoseconds per unit of the trace's times.
    pub scale: i64,
    pub reader: std::io::BufReader<Box<dyn Read + Send>>,
    /// The bytes of the first record, read with the header.
    pub first_record: Vec<u8>,
    /// The line number of the first record.
    pub first_line: u64,
    pub warnings: Warnings,
}

/// Open the Paraver trace at `path`: read its companions and its header, up to the first
/// record; `progress` is given the file's size as its total.
pub(crate) fn open(path: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<Opened> {
    let prv = find_prv(path)?;
    let mut warnings = Warnings::default();
    let pcf_path = companion(&prv, "pcf");
    if !pcf_path.exists() {
        return Err(Error::in_file(
            &prv,
            format!("{} is missing: a Paraver trace needs its .pcf to name its events and states", pcf_path.display()),
        ));
    }
    let pcf = pcf::parse(&pcf_path, &read_text(&pcf_path)?)?;
    for problem in &pcf.problems {
        warnings.add("paraver_pcf_skipped", || problem.clone());
    }
    let row_path = companion(&prv, "row");
    let row = if row_path.exists() {
        row::parse(&row_path, &read_text(&row_path)?)?
    } else {
        warnings.add("paraver_missing_row", || {
            format!("{} is missing: nodes and threads are named by number", row_path.display())
        });
        row::Row::default()
    };
    if let Some(p) = progress {
        p.set_total(std::fs::metadata(&prv).map(|m| m.len()).unwrap_or(0));
    }
    // The header and the communicator and comment lines after it, up to the first record.
    let mut reader = std::io::BufReader::with_capacity(1 << 16, open_text(&prv)?);
    let mut head: Vec<String> = Vec::new();
    let mut first_record = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = std::io::BufRead::read_until(&mut reader, b'\n', &mut line)
            .map_err(|e| Error::in_file(&prv, format!("cannot read: {e}")))?;
        if n == 0 {
            break;
        }
        if !head.is_empty() && line.first().is_some_and(u8::is_ascii_digit) {
            first_record = line;
            break;
        }
        head.push(String::from_utf8_lossy(&line).trim_end().to_string());
    }
    let header = header::parse(&prv, head.iter().map(String::as_str))?;
    for problem in &header.problems {
        warnings.add("paraver_communicator_task_outside", || problem.clone());
    }
    let layout = records::Layout::new(&header.apps);
    let scale = if header.nanoseconds { 1 } else { 1000 };
    let first_line = head.len() as u64 + 1;
    Ok(Opened { prv, header, pcf, row, layout, scale, reader, first_record, first_line, warnings })
}

/// Read a Paraver trace, reporting the bytes read in `progress`.
pub fn read_with_progress(path: &Path, progress: Option<&crate::progress::LoadProgress>) -> Result<RawTrace> {
    let mut o = open(path, progress)?;
    let report = |n: u64| {
        if let Some(p) = progress {
            p.add(n);
        }
    };
    let start = std::mem::take(&mut o.first_record);
    let recs = records::parse(&o.prv, &mut o.reader, start, o.first_line, &o.layout, o.scale, &report)?;
    report_other_types(&o.prv, recs.other_types, &mut o.warnings);
    assemble(o, recs)
}

/// Records of types other than 1 to 4: how many, and the first one's line.
fn report_other_types(prv: &Path, (n, line): (u64, u64), warnings: &mut Warnings) {
    warnings.add_many("paraver_record_type", n as i64, || {
        format!(
            "{}:{line}: records of types other than 1 (state), 2 (event), 3 (communication) and 4 (global operation) are skipped",
            prv.display()
        )
    });
}

/// Where each stream of the layout goes: application, rank and thread.
struct Streams {
    app: Vec<u32>,
    rank: Vec<i32>,
    thread: Vec<i32>,
    /// (application, task, thread), 1-based, for names.
    ids: Vec<(u32, u32, u32)>,
}

/// The first rank of each application that communicates (numbered across them in header
/// order), None for the others.
fn rank_bases(header: &header::Header, communicating: &[bool]) -> Vec<Option<i32>> {
    let mut next = 0i32;
    header
        .apps
        .iter()
        .zip(communicating)
        .map(|(tasks, &c)| {
            c.then(|| {
                next += tasks.len() as i32;
                next - tasks.len() as i32
            })
        })
        .collect()
}

fn streams(header: &header::Header, communicating: &[bool]) -> Streams {
    let mut s = Streams { app: Vec::new(), rank: Vec::new(), thread: Vec::new(), ids: Vec::new() };
    let bases = rank_bases(header, communicating);
    let mut next_other: i32 =
        header.apps.iter().zip(communicating).filter(|(_, c)| **c).map(|(t, _)| t.len() as i32).sum();
    for (a, tasks) in header.apps.iter().enumerate() {
        for (t, task) in tasks.iter().enumerate() {
            let rank = if let Some(base) = bases[a] {
                base + t as i32
            } else {
                next_other += 1;
                next_other - 1
            };
            for th in 0..task.threads {
                s.app.push(a as u32);
                s.rank.push(rank);
                s.thread.push(th as i32);
                s.ids.push((a as u32 + 1, t as u32 + 1, th + 1));
            }
        }
    }
    s
}

/// An MPI call whose send does not complete in it: the non-blocking sends and the start of a
/// persistent request.
fn is_nonblocking_send(name: &str) -> bool {
    ["mpi_isend", "mpi_issend", "mpi_ibsend", "mpi_irsend", "mpi_start", "mpi_startall"]
        .contains(&name.to_ascii_lowercase().as_str())
}

/// Extrae's hardware-counter event types (PAPI and native counters): each value is what the
/// counter counted since the thread's previous reading.
const COUNTER_TYPES: std::ops::Range<i64> = 42_000_000..43_000_000;

fn classify(ty: i64, pcf: &pcf::Pcf, metric_names: &mut Vec<String>, definitions: &mut Vec<MetricDefinition>) -> Class {
    if let Some(k) = COLLECTIVE_INFO.iter().position(|t| *t == ty) {
        return Class::CollectiveInfo(k);
    }
    if let Some(omp) = openmp::class_of(ty) {
        return Class::OpenMp(omp);
    }
    let cuda_4 = cuda::ALL.contains(&ty) && !cuda::layout_before_4(pcf);
    if let Some((_, gpu)) = cuda::class_of(ty).filter(|_| cuda_4) {
        return Class::Gpu(gpu);
    }
    let described = pcf.types.get(&ty);
    if MPI_CALL_TYPES.contains(&ty) || (MPI_TYPES.contains(&ty) && described.is_none_or(|d| d.values.is_some())) {
        return Class::Mpi;
    }
    if let Some(d) = described {
        let lower = d.description.to_ascii_lowercase();
        if d.values.is_some() && lower.contains("function") && !lower.contains("caller") && !lower.contains("line") {
            return Class::Function;
        }
    }
    let name = match described {
        Some(d) => d.description.split(" [").next().unwrap_or(&d.description).trim().to_string(),
        None => format!("type {ty}"),
    };
    let name = if name.is_empty() { format!("type {ty}") } else { name };
    let index = metric_names.iter().position(|n| *n == name).unwrap_or_else(|| {
        metric_names.push(name);
        definitions.push(MetricDefinition {
            mode: COUNTER_TYPES.contains(&ty).then(|| "relative_last".to_string()),
            unit: None,
            description: described.map(|d| d.description.clone()),
        });
        metric_names.len() - 1
    });
    if cuda_4 && cuda::is_size(ty) { Class::TransferSize(index as i32) } else { Class::Metric(index as i32) }
}

/// A message half placed on a stream: a send, or a receive's post and completion.
#[derive(Debug, Clone, Copy)]
struct MessageEvent {
    ts: i64,
    kind: EventKind,
    peer: i32,
    /// The partner's stream (`NO_STREAM`: outside the trace).
    peer_stream: u32,
    tag: i32,
    bytes: i64,
    request: i64,
}

/// What the records of a trace tell before any stream can be walked, gathered piece by piece
/// in file order: what each event type means, which stream calls MPI first, the code regions
/// entered, and the communications whose partner lies outside the trace.
#[derive(Default)]
struct Summary {
    classes: FastMap<i64, Class>,
    metric_names: Vec<String>,
    metric_definitions: Vec<MetricDefinition>,
    not_in_pcf: Vec<i64>,
    /// The streams with MPI events.
    mpi_streams: HashSet<u32>,
    /// The streams with kernels or transfers of an accelerator, and those with calls to its API.
    device_streams: HashSet<u32>,
    api_streams: HashSet<u32>,
    /// Every (type, value) entered.
    region_keys: HashSet<(i64, i64)>,
    /// The addresses of the named OpenMP locks.
    lock_addresses: HashSet<i64>,
    /// Communications with a partner outside the trace: how many, and the first one's line.
    outside: (i64, u64),
}

impl Summary {
    /// Classify the event types of `piece` (in `Records::events` order) and count its
    /// communications with a partner outside the trace.
    fn see(&mut self, piece: &records::Piece, pcf: &pcf::Pcf) {
        // A run of one type is classified once; a stream is noted once per run of its MPI events.
        let (mut last, mut last_mpi_stream): (Option<(i64, Class)>, Option<u32>) = (None, None);
        for e in &piece.events {
            let class = match last {
                Some((ty, class)) if ty == e.ty() => class,
                _ => {
                    let (metric_names, metric_definitions, not_in_pcf) =
                        (&mut self.metric_names, &mut self.metric_definitions, &mut self.not_in_pcf);
                    *self.classes.entry(e.ty()).or_insert_with(|| {
                        if !pcf.types.contains_key(&e.ty()) && !COLLECTIVE_INFO.contains(&e.ty()) {
                            not_in_pcf.push(e.ty());
                        }
                        classify(e.ty(), pcf, metric_names, metric_definitions)
                    })
                }
            };
            // The address written after a release is 0 (Extrae's merger writes the record's
            // empty parameter there): no lock.
            if e.ty() == openmp::LOCK_ADDRESS && e.value != 0 {
                self.lock_addresses.insert(e.value);
            }
            if class == Class::Mpi && last_mpi_stream != Some(e.stream) {
                self.mpi_streams.insert(e.stream);
                last_mpi_stream = Some(e.stream);
            }
            match class {
                Class::Gpu(cuda::Gpu::Kernel | cuda::Gpu::Transfer) => {
                    self.device_streams.insert(e.stream);
                }
                Class::Gpu(cuda::Gpu::Call) => {
                    self.api_streams.insert(e.stream);
                }
                _ => {}
            }
            last = Some((e.ty(), class));
        }
        let (n, line) = outside_records(piece.comms.iter());
        if n > 0 && self.outside.0 == 0 {
            self.outside.1 = line;
        }
        self.outside.0 += n;
    }
}

/// The (type, value) pairs entered in `piece` (types classified already).
fn region_keys(piece: &records::Piece, classes: &FastMap<i64, Class>) -> HashSet<(i64, i64)> {
    let mut keys: HashSet<(i64, i64)> = HashSet::new();
    let mut last = (i64::MIN, i64::MIN);
    for e in &piece.events {
        let enters = match classes.get(&e.ty()) {
            Some(Class::Mpi | Class::Function | Class::Gpu(cuda::Gpu::Call | cuda::Gpu::Kernel)) => true,
            Some(Class::OpenMp(omp)) => openmp::enters(*omp, e.value),
            _ => false,
        };
        if e.value != 0 && (e.ty(), e.value) != last && enters {
            keys.insert((e.ty(), e.value));
            last = (e.ty(), e.value);
        }
    }
    keys
}

/// What a trace's records mean, from its `Summary`: the regions, the MPI application and its
/// streams' ranks, the communicators, the metrics.
struct Meaning {
    classes: FastMap<i64, Class>,
    regions: Vec<RegionInfo>,
    region_of: FastMap<(i64, i64), i32>,
    collective_op: Vec<u8>,
    nonblocking_send: Vec<bool>,
    /// Per application, its communicators' ids (None when it does not communicate).
    app_comms: Vec<Option<AppComms>>,
    communicators: Vec<CommInfo>,
    /// Per application, whether its tasks are ranks (it has MPI events).
    communicating: Vec<bool>,
    streams: Streams,
    metric_names: Vec<String>,
    metric_definitions: Vec<MetricDefinition>,
    /// The named OpenMP locks' numbers by address.
    locks: FastMap<i64, i64>,
    /// The communicator of rank 0's OpenMP team (rank r's is this + r), when threads run
    /// OpenMP's parallel functions.
    team_base: Option<i32>,
    /// Per stream, the API (`CUDA`, `HIP`) of the accelerator stream it is, None for a thread.
    gpu: Vec<Option<&'static str>>,
}

impl Meaning {
    fn of(
        prv: &Path,
        header: &header::Header,
        pcf: &pcf::Pcf,
        row: &row::Row,
        summary: Summary,
        warnings: &mut Warnings,
    ) -> Meaning {
        let Summary {
            classes,
            metric_names,
            metric_definitions,
            mut not_in_pcf,
            mpi_streams,
            device_streams,
            api_streams,
            region_keys,
            lock_addresses,
            outside,
        } = summary;
        if !not_in_pcf.is_empty() {
            not_in_pcf.sort_unstable();
            let n = not_in_pcf.len();
            warnings.add_many("paraver_type_not_in_pcf", n as i64, || {
                format!(
                    "{}: event type(s) {} are not in the .pcf; their values are kept as metrics named 'type N'",
                    prv.display(),
                    not_in_pcf.iter().take(5).map(i64::to_string).collect::<Vec<_>>().join(", ")
                )
            });
        }
        // Extrae 3.x numbered its CUDA records otherwise; they are kept as metrics, and the
        // communication records that tie a launch or a copy to a stream's thread would be taken
        // for messages between the task's threads. Say so rather than let them pass.
        if cuda::layout_before_4(pcf) {
            let mut types: Vec<i64> = classes.keys().copied().filter(|t| cuda::ALL.contains(t)).collect();
            types.sort_unstable();
            warnings.add_many("paraver_cuda_not_read", types.len() as i64, || {
                format!(
                    "{}: event type(s) {} are CUDA records as Extrae 3.x wrote them (the library call as type 63000001), which commdb does not read as accelerator activity: they are kept as metrics, and communication records between a task's host thread and its CUDA streams are read as messages",
                    prv.display(),
                    types.iter().take(5).map(i64::to_string).collect::<Vec<_>>().join(", ")
                )
            });
        }
        // The applications whose tasks are ranks: those with MPI calls (else the first).
        let app_of_stream: Vec<usize> = header
            .apps
            .iter()
            .enumerate()
            .flat_map(|(a, tasks)| tasks.iter().flat_map(move |t| std::iter::repeat_n(a, t.threads as usize)))
            .collect();
        let mut communicating = vec![false; header.apps.len()];
        for s in &mpi_streams {
            if let Some(&a) = app_of_stream.get(*s as usize) {
                communicating[a] = true;
            }
        }
        if !communicating.contains(&true) {
            communicating[0] = true;
        }
        let st = streams(header, &communicating);
        let gpu = accelerator_streams(&classes, row, st.rank.len(), &device_streams, &api_streams);

        // Regions: every (type, value) entered.
        let mut region_keys: Vec<(i64, i64)> = region_keys.into_iter().collect();
        region_keys.sort_unstable();
        let mut regions: Vec<RegionInfo> = Vec::with_capacity(region_keys.len());
        let mut region_of: FastMap<(i64, i64), i32> = FastMap::default();
        let mut unnamed: Vec<(i64, i64)> = Vec::new();
        for (ty, value) in &region_keys {
            let class = classes[ty];
            let value_name = pcf.types.get(ty).and_then(|t| t.values.as_ref()).and_then(|v| v.get(value));
            let what = pcf.types.get(ty).map_or_else(|| format!("type {ty}"), |t| t.description.clone());
            let (name, role) = match class {
                Class::OpenMp(_) => {
                    if value_name.is_none() && [openmp::FUNCTION, openmp::TASK_FUNCTION].contains(ty) {
                        unnamed.push((*ty, *value));
                    }
                    openmp::region(*ty, *value, &what, value_name.map(String::as_str))
                }
                _ => {
                    let name = value_name.cloned().unwrap_or_else(|| {
                        unnamed.push((*ty, *value));
                        format!("{what} {value}")
                    });
                    (name, None)
                }
            };
            let paradigm = match class {
                Class::Mpi => "mpi",
                Class::OpenMp(_) => "openmp",
                Class::Gpu(_) => cuda::paradigm(cuda::class_of(*ty).map_or("CUDA", |c| c.0)),
                _ => "user",
            };
            let role = match class {
                Class::Gpu(cuda::Gpu::Call) => Some("wrapper"),
                Class::Gpu(_) => Some("function"),
                _ => role,
            };
            region_of.insert((*ty, *value), regions.len() as i32);
            regions.push(RegionInfo {
                region_id: *value,
                name,
                paradigm: paradigm.into(),
                role: role.map(str::to_string),
                file: None,
                line: None,
            });
        }
        if let Some((ty, value)) = unnamed.first() {
            let n = unnamed.len();
            warnings.add_many("paraver_unnamed_value", n as i64, || {
                format!("{}: value {value} of type {ty} (and {} more) has no name in the .pcf VALUES; the region is named by number", prv.display(), n - 1)
            });
        }
        let (n, line) = outside;
        warnings.add_many("paraver_partner_outside", n, || {
            format!("{}:{line}: communications whose partner lies outside the trace (cut away) are kept as unmatched halves", prv.display())
        });
        let (mut communicators, app_comms) = communicators(header, &communicating);
        // A thread team per rank when threads run OpenMP's parallel functions, after the MPI
        // communicators.
        let team_base = classes.values().any(|c| *c == Class::OpenMp(openmp::Omp::Function)).then(|| {
            let base = communicators.iter().map(|c| c.comm + 1).max().unwrap_or(0);
            let mut threads: BTreeMap<i32, u32> = BTreeMap::new();
            for s in 0..st.rank.len() {
                if communicating[st.app[s] as usize] && gpu[s].is_none() {
                    *threads.entry(st.rank[s]).or_default() += 1;
                }
            }
            for (rank, n) in threads {
                communicators.push(CommInfo {
                    comm: base + rank,
                    name: format!("OpenMP team of rank {rank}"),
                    members: vec![rank; n as usize],
                    per_rank: false,
                });
            }
            base
        });
        let locks = openmp::number_locks(lock_addresses);
        let collective_op: Vec<u8> =
            regions.iter().map(|r| if r.paradigm == "mpi" { collective_op_code(&r.name) } else { 0 }).collect();
        let nonblocking_send: Vec<bool> =
            regions.iter().map(|r| r.paradigm == "mpi" && is_nonblocking_send(&r.name)).collect();
        Meaning {
            classes,
            regions,
            region_of,
            collective_op,
            nonblocking_send,
            app_comms,
            communicators,
            communicating,
            streams: st,
            metric_names,
            metric_definitions,
            locks,
            team_base,
            gpu,
        }
    }

    /// What walking stream `s` needs.
    fn context(&self, s: usize) -> StreamContext<'_> {
        let app = self.streams.app[s] as usize;
        StreamContext {
            gpu: &self.gpu,
            threads: &self.streams.thread,
            ranks: &self.streams.rank,
            on_device: self.gpu[s].is_some(),
            classes: &self.classes,
            region_of: &self.region_of,
            collective_op: &self.collective_op,
            nonblocking_send: &self.nonblocking_send,
            comms: self.app_comms[app].as_ref(),
            locks: &self.locks,
            team_base: self.team_base,
        }
    }

    /// Walk stream `s` (its event records in file order, its halves by time).
    fn walk<'a>(
        &self,
        s: usize,
        events: impl Iterator<Item = &'a [EventRec]> + Clone,
        halves: &[MessageEvent],
    ) -> StreamOut {
        let st = &self.streams;
        walk_stream(&self.context(s), events, halves, st.rank[s], st.thread[s])
    }

    /// Append a walked stream's events (when it has any) to `parts` and its samples to
    /// `metrics`; returns what of it was not kept as events.
    fn gather(&self, s: usize, out: StreamOut, parts: &mut Vec<RawEvents>, metrics: &mut RawMetrics) -> Unkept {
        if !out.events.is_empty() {
            parts.push(out.events);
        }
        let n = out.metric_ts.len();
        metrics.rank.extend(std::iter::repeat_n(self.streams.rank[s], n));
        metrics.thread.extend(std::iter::repeat_n(self.streams.thread[s], n));
        metrics.ts.extend(out.metric_ts);
        metrics.metric.extend(out.metric);
        metrics.value.extend(out.metric_value);
        Unkept {
            other_applications: out.dropped,
            locks_unknown: out.locks_unknown,
            device_unattached: out.device_unattached,
        }
    }

    /// The metrics table's names and definitions, without samples.
    fn metrics(&self) -> RawMetrics {
        RawMetrics {
            names: self.metric_names.clone(),
            definitions: self.metric_definitions.clone(),
            ..RawMetrics::default()
        }
    }

    /// Report the calls and communications of other applications, which are not kept, and the
    /// OpenMP lock records whose lock is not known.
    fn report_unkept(&self, prv: &Path, unkept: Unkept, warnings: &mut Warnings) {
        let mpi: Vec<String> =
            self.communicating.iter().enumerate().filter(|(_, c)| **c).map(|(a, _)| (a + 1).to_string()).collect();
        warnings.add_many("paraver_other_application_events", unkept.other_applications, || {
            format!(
                "{}: calls and communications of applications other than those that call MPI ({}) are not kept; their counters are in metrics",
                prv.display(),
                mpi.join(", ")
            )
        });
        let (no_address, states) = unkept.locks_unknown;
        warnings.add_many("paraver_lock_without_address", no_address, || {
            format!(
                "{}: acquisitions of a named OpenMP lock (type {}) without the lock's address (type {}) after them: their lock is NULL and no lock contention is found for them",
                prv.display(),
                openmp::NAMED_LOCK,
                openmp::LOCK_ADDRESS
            )
        });
        warnings.add_many("paraver_device_record_unattached", unkept.device_unattached, || {
            format!(
                "{}: CUDA or HIP records that tie a call to its stream or a transfer to the host (communications between a host thread and a stream, stream and event numbers) came with no call or transfer open to take them; they are left out",
                prv.display()
            )
        });
        warnings.add_many("paraver_lock_state", states, || {
            format!(
                "{}: OpenMP lock records (types {} and {}) of a value other than 0, 3, 5 and 6 (released, acquiring, releasing, held) are skipped",
                prv.display(),
                openmp::NAMED_LOCK,
                openmp::UNNAMED_LOCK
            )
        });
    }

    /// Whether the trace has OpenMP lock records (whose acquisitions `openmp` numbers).
    fn has_locks(&self) -> bool {
        self.classes.values().any(|c| matches!(c, Class::OpenMp(openmp::Omp::Lock { .. })))
    }
}

/// What walks did not keep as events: calls and communications of applications that do not
/// communicate, and OpenMP lock records of no known lock (acquisitions without their address,
/// records of no known state).
#[derive(Debug, Default, Clone, Copy)]
struct Unkept {
    other_applications: i64,
    locks_unknown: (i64, i64),
    /// Extrae's CUDA records that tie a call to a stream or a transfer to the host, with no call
    /// or transfer open to take them.
    device_unattached: i64,
}

impl std::ops::AddAssign for Unkept {
    fn add_assign(&mut self, o: Unkept) {
        self.other_applications += o.other_applications;
        self.locks_unknown.0 += o.locks_unknown.0;
        self.locks_unknown.1 += o.locks_unknown.1;
        self.device_unattached += o.device_unattached;
    }
}

/// Per stream, the accelerator API of the streams that are an accelerator's (None for the
/// others): a thread the .row names as Extrae names a stream (`GPU-D1.S1`), or one with kernels or
/// transfers and no calls to the API. The API is the one of the trace's records (HIP when it has
/// only HIP's).
fn accelerator_streams(
    classes: &FastMap<i64, Class>,
    row: &row::Row,
    streams: usize,
    device: &HashSet<u32>,
    api: &HashSet<u32>,
) -> Vec<Option<&'static str>> {
    let apis: HashSet<&str> = classes
        .iter()
        .filter(|(_, c)| matches!(c, Class::Gpu(_)))
        .filter_map(|(t, _)| cuda::class_of(*t))
        .map(|c| c.0)
        .collect();
    let which = if apis.len() == 1 && apis.contains("HIP") { "HIP" } else { "CUDA" };
    let names = row.names("THREAD");
    (0..streams)
        .map(|s| {
            let named = names.get(s).is_some_and(|n| cuda::stream_of_name(n).is_some());
            let by_records = device.contains(&(s as u32)) && !api.contains(&(s as u32));
            (named || by_records).then_some(which)
        })
        .collect()
}

/// Number the OpenMP lock acquisitions of walked streams of whole ranks (`openmp`).
fn number_acquisitions(m: &Meaning, walked: &mut [StreamOut]) {
    if m.has_locks() {
        openmp::number_acquisitions(&mut walked.iter_mut().map(|o| &mut o.events).collect::<Vec<_>>());
    }
}

/// The rows of the `states` table, named by the .pcf's STATES as they first appear.
#[derive(Default)]
struct StateNames {
    index: FastMap<i32, i32>,
}

impl StateNames {
    /// Append `recs` (file order) to `states`, whose `names` grow with the states first seen.
    fn append(&mut self, recs: &[records::StateRec], st: &Streams, pcf: &pcf::Pcf, states: &mut RawStates) {
        for r in recs {
            states.rank.push(st.rank[r.stream as usize]);
            states.thread.push(st.thread[r.stream as usize]);
            states.begin.push(r.begin);
            states.end.push(r.end);
            states.state.push(r.state);
            let name = *self.index.entry(r.state).or_insert_with(|| match pcf.states.get(&r.state) {
                Some(n) => {
                    states.names.push(n.clone());
                    states.names.len() as i32 - 1
                }
                None => NONE_I32,
            });
            states.name.push(name);
        }
    }
}

fn assemble(o: Opened, recs: records::Records) -> Result<RawTrace> {
    let mut summary = Summary::default();
    for p in &recs.pieces {
        summary.see(p, &o.pcf);
    }
    summary.region_keys =
        recs.pieces.par_iter().map(|p| region_keys(p, &summary.classes)).reduce(HashSet::new, |mut a, b| {
            a.extend(b);
            a
        });
    let mut warnings = o.warnings;
    let m = Meaning::of(&o.prv, &o.header, &o.pcf, &o.row, summary, &mut warnings);
    // The request id tying a receive's post to its completion: the record's index in the file.
    let first_record = recs.first_comm_of_pieces();
    let rank = &m.streams.rank;
    // Every stream walked on one thread, the check for overtaking messages on the other.
    let (mut walked, overtaking): (Vec<StreamOut>, _) = rayon::join(
        || {
            (0..o.layout.streams)
                .into_par_iter()
                .map(|s| {
                    m.walk(
                        s,
                        recs.pieces.iter().map(|p| p.of_stream(s)),
                        &stream_halves(&recs.pieces, &first_record, s, rank),
                    )
                })
                .collect()
        },
        || overtaking(recs.comms()),
    );
    report_overtaking(&o.prv, overtaking, &mut warnings);
    number_acquisitions(&m, &mut walked);
    let mut parts = Vec::new();
    let mut metrics = m.metrics();
    let mut unkept = Unkept::default();
    for (s, out) in walked.into_iter().enumerate() {
        unkept += m.gather(s, out, &mut parts, &mut metrics);
    }
    m.report_unkept(&o.prv, unkept, &mut warnings);
    let mut states = RawStates::default();
    StateNames::default().append(&recs.states, &m.streams, &o.pcf, &mut states);
    let mut raw = trace(&o.prv, &o.header, &o.row, &m, warnings);
    raw.events = EventParts::new(parts);
    raw.metrics = metrics;
    raw.states = states;
    Ok(raw)
}

/// The trace's definitions (ranks, locations, regions, communicators, metric names), without
/// events, samples or states.
fn trace(prv: &Path, header: &header::Header, row: &row::Row, m: &Meaning, mut warnings: Warnings) -> RawTrace {
    if header.cut {
        warnings.add("paraver_cut", || {
            format!("{}: the trace was cut from a longer one; calls begun before the cut and messages whose partner was cut away are reported separately", prv.display())
        });
    }
    let node_names = row.names("NODE");
    let node_name = |n: u32| -> Option<String> {
        (n > 0).then(|| node_names.get(n as usize - 1).cloned().unwrap_or_else(|| format!("node{n}")))
    };
    let bases = rank_bases(header, &m.communicating);
    let several = m.communicating.iter().filter(|c| **c).count() > 1;
    let ranks: Vec<RankInfo> = header
        .apps
        .iter()
        .zip(&bases)
        .enumerate()
        .filter_map(|(a, (tasks, base))| base.map(|b| (a, tasks, b)))
        .flat_map(|(a, tasks, base)| {
            tasks.iter().enumerate().map(move |(t, task)| RankInfo {
                rank: base + t as i32,
                node: node_name(task.node),
                name: if several { format!("task {}.{}", a + 1, t + 1) } else { format!("task {}", t + 1) },
                application: Some(a as i32 + 1),
            })
        })
        .collect();
    let thread_names = row.names("THREAD");
    let st = &m.streams;
    let mut stream_names = cuda::Names::new();
    let locations: Vec<LocationInfo> = (0..st.rank.len())
        .map(|s| {
            let (a, t, th) = st.ids[s];
            let task = header.apps.get(a as usize - 1).and_then(|tasks| tasks.get(t as usize - 1));
            let other = !m.communicating[st.app[s] as usize];
            LocationInfo {
                node: task.filter(|_| other).and_then(|task| node_name(task.node)),
                location_id: s as i64,
                rank: st.rank[s],
                thread: st.thread[s],
                kind: match m.gpu[s] {
                    Some(_) => "gpu",
                    None if m.communicating[st.app[s] as usize] => "cpu",
                    None => "metric",
                }
                .into(),
                name: if let Some(api) = m.gpu[s] {
                    stream_names.name(api, thread_names.get(s).map(String::as_str), &format!("THREAD {a}.{t}.{th}"))
                } else {
                    let name = thread_names.get(s).cloned().unwrap_or_else(|| format!("THREAD {a}.{t}.{th}"));
                    // Another application's thread (a sampler of node counters): say where it ran.
                    match task {
                        Some(task) if other => match node_name(task.node) {
                            Some(node) => format!("{name} (application {a} on {node})"),
                            None => format!("{name} (application {a})"),
                        },
                        _ => name,
                    }
                },
            }
        })
        .collect();
    let meta = TraceMeta {
        name: crate::reading::paths::default_name(&prv.display().to_string()),
        path: prv.display().to_string(),
        format: "paraver".into(),
        timer_resolution_hz: Some(if header.nanoseconds { 1_000_000_000 } else { 1_000_000 }),
        start_wallclock_ns: header.date.as_deref().and_then(date_ns),
        ..TraceMeta::default()
    };
    let metrics = m.metrics();
    RawTrace {
        meta,
        ranks,
        locations,
        regions: m.regions.clone(),
        communicators: m.communicators.clone(),
        metrics,
        warnings,
        ..RawTrace::default()
    }
}

/// The message halves of stream `s` from every piece, by time (file order among equal times):
/// a send with its receiver, a receive's post and its completion tied by the record's index in
/// the file as request id (`first_record`: the index of each piece's first record).
fn stream_halves(pieces: &[records::Piece], first_record: &[i64], s: usize, rank: &[i32]) -> Vec<MessageEvent> {
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.halves_of_stream(s).len()).sum());
    for (p, first) in pieces.iter().zip(first_record) {
        out.extend(p.halves_of_stream(s).iter().map(|h| message_event(h, first + i64::from(h.record), rank)));
    }
    out.sort_by_key(|m| m.ts);
    out
}

/// The event of half `h`, whose communication record is the file's `record`th, with its
/// partner's stream as a rank.
fn message_event(h: &records::Half, record: i64, rank: &[i32]) -> MessageEvent {
    let rank_of = |s: u32| if s == NO_STREAM { NONE_I32 } else { rank[s as usize] };
    let (kind, peer, tag, bytes, request) = match h.kind {
        HalfKind::Send => (EventKind::Send, rank_of(h.peer), h.tag, h.bytes, NONE_I64),
        HalfKind::Post => (EventKind::IrecvRequest, NONE_I32, NONE_I32, NONE_I64, record),
        HalfKind::Receive => (EventKind::Irecv, rank_of(h.peer), h.tag, h.bytes, record),
    };
    MessageEvent { ts: h.ts, kind, peer, peer_stream: h.peer, tag, bytes, request }
}

/// How many communication records have a partner outside the trace, and the first one's line.
fn outside_records<'a>(comms: impl Iterator<Item = &'a CommRec>) -> (i64, u64) {
    let mut outside = comms.filter(|c| c.send == NO_STREAM || c.recv == NO_STREAM);
    match outside.next() {
        Some(first) => (1 + outside.count() as i64, first.line),
        None => (0, 0),
    }
}

/// Messages of one channel (sender, receiver, tag) whose receives were posted in another order
/// than the sends: MPI's matching rule, by which commdb pairs halves, may pair them otherwise
/// than the records do. Counted, never silent.
#[derive(Default)]
struct Overtaking {
    last: FastMap<(u32, u32, i64), (i64, i64)>,
    n: i64,
    first: u64,
}

impl Overtaking {
    /// The next communication record, in file order.
    fn add(&mut self, c: &CommRec) {
        if c.send == NO_STREAM || c.recv == NO_STREAM {
            return;
        }
        let prev = self.last.insert((c.send, c.recv, c.tag), (c.physical_send, c.logical_recv));
        if let Some((ps, lr)) = prev
            && (c.physical_send < ps || c.logical_recv < lr)
        {
            if self.n == 0 {
                self.first = c.line;
            }
            self.n += 1;
        }
    }

    /// How many overtake an earlier one, and the first one's line.
    fn found(&self) -> Option<(i64, u64)> {
        (self.n > 0).then_some((self.n, self.first))
    }
}

/// `Overtaking` over `comms`.
fn overtaking<'a>(comms: impl Iterator<Item = &'a CommRec>) -> Option<(i64, u64)> {
    let mut o = Overtaking::default();
    comms.for_each(|c| o.add(c));
    o.found()
}

fn report_overtaking(prv: &Path, found: Option<(i64, u64)>, warnings: &mut Warnings) {
    if let Some((n, first)) = found {
        warnings.add_many("paraver_overtaking", n, || {
            format!("{}:{first}: a message overtakes an earlier one of the same sender, receiver and tag; messages are paired by MPI's order, which may differ from the records", prv.display())
        });
    }
}

/// An application's communicators: the id each of its `c:` lines has in the trace, and its
/// MPI_COMM_WORLD's.
struct AppComms {
    world: i32,
    ids: FastMap<i64, i32>,
    /// The members (ranks, in communicator order) of each communicator a `c:` line declares,
    /// by the id the events name it with.
    members: FastMap<i64, Vec<i32>>,
    /// The application's ranks, MPI_COMM_WORLD's members.
    all: Vec<i32>,
}

impl AppComms {
    /// The rank of the member of communicator `comm` (the events' id; NONE_I64: the world)
    /// whose rank in it is `in_comm` (None when it has no such member).
    fn world_rank(&self, comm: i64, in_comm: i64) -> Option<i32> {
        let members = if comm == NONE_I64 { &self.all } else { self.members.get(&comm)? };
        usize::try_from(in_comm).ok().and_then(|k| members.get(k)).copied()
    }

    /// The trace's id of the application's communicator `id` as its events name it (the id
    /// itself when no `c:` line declares it).
    fn id(&self, id: i64) -> i32 {
        self.ids.get(&id).copied().unwrap_or_else(|| i32::try_from(id).unwrap_or(NONE_I32))
    }
}

/// The communicators of the applications that communicate (their `c:` lines, members as
/// ranks), and per application the ids its events' communicators take. The first such
/// application keeps its ids; another's that are taken already get the next free ones. An
/// application without a `c:` line holding all its tasks gets an MPI_COMM_WORLD of its own.
/// With several applications, the names say which application a communicator is of.
fn communicators(header: &header::Header, communicating: &[bool]) -> (Vec<CommInfo>, Vec<Option<AppComms>>) {
    let bases = rank_bases(header, communicating);
    let several = communicating.iter().filter(|c| **c).count() > 1;
    let mut out: Vec<CommInfo> = Vec::new();
    let mut apps: Vec<Option<AppComms>> = Vec::new();
    let mut taken: HashSet<i32> = HashSet::new();
    let next_free = |taken: &mut HashSet<i32>| {
        let id = (0..).find(|id| !taken.contains(id)).unwrap_or(0);
        taken.insert(id);
        id
    };
    for (a, (tasks, base)) in header.apps.iter().zip(&bases).enumerate() {
        let Some(base) = *base else {
            apps.push(None);
            continue;
        };
        let of_app = if several && out.iter().any(|c| c.name.starts_with("MPI_COMM_WORLD")) {
            format!(" of application {}", a + 1)
        } else {
            String::new()
        };
        let all: Vec<i32> = (base..base + tasks.len() as i32).collect();
        let mut ids: FastMap<i64, i32> = FastMap::default();
        let mut members_of: FastMap<i64, Vec<i32>> = FastMap::default();
        let mut world = None;
        let first = out.len();
        for c in header.comms.iter().filter(|c| c.app as usize == a + 1) {
            let members: Vec<i32> = c.tasks.iter().map(|t| base + *t as i32 - 1).collect();
            members_of.insert(c.id, members.clone());
            let id = match i32::try_from(c.id) {
                Ok(id) if !taken.contains(&id) => {
                    taken.insert(id);
                    id
                }
                _ => next_free(&mut taken),
            };
            ids.insert(c.id, id);
            if c.per_rank {
                out.push(CommInfo {
                    comm: id,
                    name: format!("MPI_COMM_SELF (comm {}){of_app}", c.id),
                    members,
                    per_rank: true,
                });
                continue;
            }
            let is_world = world.is_none() && members == all;
            if is_world {
                world = Some(id);
            }
            let name = if is_world { format!("MPI_COMM_WORLD{of_app}") } else { format!("comm {}{of_app}", c.id) };
            out.push(CommInfo { comm: id, name, members, per_rank: false });
        }
        let world = match world {
            Some(w) => w,
            None => {
                let id = next_free(&mut taken);
                let name = format!("MPI_COMM_WORLD{of_app}");
                out.insert(first, CommInfo { comm: id, name, members: all.clone(), per_rank: false });
                id
            }
        };
        apps.push(Some(AppComms { world, ids, members: members_of, all }));
    }
    (out, apps)
}

struct StreamContext<'a> {
    /// Per stream, whether it is an accelerator's (`Meaning::gpu`), and its thread.
    gpu: &'a [Option<&'static str>],
    threads: &'a [i32],
    ranks: &'a [i32],
    /// Whether the stream walked is an accelerator's.
    on_device: bool,
    classes: &'a FastMap<i64, Class>,
    region_of: &'a FastMap<(i64, i64), i32>,
    /// Collective operation code of each MPI region (`COLLECTIVE_OPS.len()`: none of the
    /// known collectives; 0: not an MPI region).
    collective_op: &'a [u8],
    /// Whether each region is a non-blocking send call.
    nonblocking_send: &'a [bool],
    /// The communicators of the stream's application; None when it does not communicate (its
    /// calls and communications are not kept).
    comms: Option<&'a AppComms>,
    locks: &'a FastMap<i64, i64>,
    team_base: Option<i32>,
}

#[derive(Default)]
struct StreamOut {
    events: RawEvents,
    metric_ts: Vec<i64>,
    metric: Vec<i32>,
    metric_value: Vec<f64>,
    /// Calls and communications of a stream outside the MPI application.
    dropped: i64,
    /// Named OpenMP lock acquisitions without their address, and lock records of no known state.
    locks_unknown: (i64, i64),
    /// CUDA records with no call or transfer open to take them (`cuda::Device::unattached`).
    device_unattached: i64,
}

/// A collective being called: its operation and the details gathered for it.
struct OpenCollective {
    region: i32,
    op: u8,
    info: [i64; 5],
}

/// The events of one stream, in order: its event records (file order) with its message halves
/// (by time) placed among them: after the enters and before the leaves of the same time, as a
/// communication happens inside the MPI call that makes it.
fn walk_stream<'a>(
    ctx: &StreamContext,
    pieces: impl Iterator<Item = &'a [EventRec]> + Clone,
    halves: &[MessageEvent],
    rank: i32,
    thread: i32,
) -> StreamOut {
    let mut out = StreamOut::default();
    let records = pieces.clone().flatten();
    let Some(comms) = ctx.comms else {
        for r in records {
            match ctx.classes[&r.ty()] {
                Class::Metric(m) | Class::TransferSize(m) => {
                    out.metric_ts.push(r.ts);
                    out.metric.push(m);
                    out.metric_value.push(r.value as f64);
                }
                _ => out.dropped += 1,
            }
        }
        out.dropped += halves.len() as i64;
        return out;
    };
    let ev = &mut out.events;
    *ev = RawEvents::with_capacity(pieces.map(<[EventRec]>::len).sum::<usize>() + halves.len());
    let mut next_half = 0;
    // The calls entered and not yet left: (type, value, region).
    let mut open: Vec<(i64, i64, i32)> = Vec::new();
    // The collectives being called, innermost last (an MPI library whose MPI_Allreduce calls
    // MPI_Reduce and MPI_Bcast through the traced entry points nests them).
    let mut collectives: Vec<OpenCollective> = Vec::new();
    let mut info = [NONE_I64; 5];
    // A send made in a non-blocking send call (MPI_Isend and its kin, MPI_Start) is an isend
    // that Paraver records no completion of (request NULL: no completion is looked for).
    let nonblocking = |open: &[(i64, i64, i32)]| {
        open.iter().rev().find(|o| ctx.classes.get(&o.0) == Some(&Class::Mpi)).is_some_and(|o| {
            usize::try_from(o.2).ok().and_then(|r| ctx.nonblocking_send.get(r)).copied().unwrap_or(false)
        })
    };
    // A communication between a host thread and a stream of its task is one of Extrae's CUDA
    // ties (`cuda`), not a message.
    let tie = |h: &MessageEvent| {
        let other = h.peer_stream as usize;
        (h.peer_stream != NO_STREAM && ctx.ranks[other] == rank && ctx.gpu[other].is_some() != ctx.on_device)
            .then(|| cuda::Tie { other: ctx.threads[other], kind: h.kind, bytes: h.bytes })
    };
    let mut device = cuda::Device::default();
    let here = (rank, thread);
    let flush = |ev: &mut RawEvents,
                 next_half: &mut usize,
                 open: &[(i64, i64, i32)],
                 device: &mut cuda::Device,
                 until: &dyn Fn(&MessageEvent) -> bool| {
        // A tie's receive post is no event: it never holds back the halves after it.
        let due = |h: &&MessageEvent| until(h) || (h.kind == EventKind::IrecvRequest && tie(h).is_some());
        while let Some(h) = halves.get(*next_half).filter(due) {
            *next_half += 1;
            if let Some(t) = tie(h) {
                device.tie(ev, t, rank, ctx.on_device);
                continue;
            }
            let kind = if h.kind == EventKind::Send && nonblocking(open) { EventKind::Isend } else { h.kind };
            let mut e = Event::new(rank, thread, h.ts, kind);
            e.peer = h.peer;
            e.tag = h.tag;
            e.bytes = h.bytes;
            e.request = h.request;
            if h.kind != EventKind::IrecvRequest {
                e.comm = NONE_I32;
            }
            ev.push_detailed(&e);
        }
    };
    let mut last_type = (i64::MIN, Class::Mpi);
    let mut threads = openmp::Threads::default();
    let omp = openmp::Context {
        region_of: ctx.region_of,
        locks: ctx.locks,
        team: ctx.team_base.map_or(NONE_I32, |b| b + rank),
    };
    for r in records {
        if r.ty() != last_type.0 {
            last_type = (r.ty(), ctx.classes[&r.ty()]);
        }
        let class = last_type.1;
        if class != Class::OpenMp(openmp::Omp::LockAddress) {
            threads.no_more_address();
        }
        // An MPI call's value repeated while that call is the innermost open one of its type
        // ends it: MPItrace (2004) wrote an MPI_Reduce's end so. MPI calls do not call
        // themselves; user functions may, so theirs is an enter.
        let repeats = class == Class::Mpi
            && r.value != 0
            && open.iter().rev().find(|o| o.0 == r.ty()).is_some_and(|o| o.1 == r.value);
        let leaving = match class {
            Class::Mpi | Class::Function => r.value == 0 || repeats,
            Class::Gpu(cuda::Gpu::Call | cuda::Gpu::Kernel | cuda::Gpu::Transfer) => r.value == 0,
            Class::OpenMp(o) => openmp::leaves(o, r.value),
            _ => false,
        };
        // A half of the same time goes before a leave (a communication happens inside the call
        // that makes it), except a receive's post, which is the start of the call that posts
        // it: it goes after the calls that end and begin then.
        flush(ev, &mut next_half, &open, &mut device, &|h| {
            h.ts < r.ts || (h.ts == r.ts && leaving && h.kind != EventKind::IrecvRequest)
        });
        match class {
            Class::Mpi | Class::Function if !leaving => {
                let region = ctx.region_of[&(r.ty(), r.value)];
                ev.push_plain(r.ts, EventKind::Enter, region);
                open.push((r.ty(), r.value, region));
                if class == Class::Mpi {
                    let op = ctx.collective_op[region as usize];
                    if r.ty() == 50_000_002 || (op != 0 && usize::from(op) < COLLECTIVE_OPS.len()) {
                        ev.push_plain(r.ts, EventKind::CollBegin, NONE_I32);
                        collectives.push(OpenCollective { region, op, info: [NONE_I64; 5] });
                        info = [NONE_I64; 5];
                    }
                }
            }
            Class::Mpi | Class::Function => {
                let region = close_call(&mut open, r.ty());
                if let Some(at) = collectives.iter().rposition(|c| c.region == region) {
                    let c = collectives.remove(at);
                    let merged: Vec<i64> =
                        c.info.iter().zip(&info).map(|(a, b)| if *b != NONE_I64 { *b } else { *a }).collect();
                    let mut e = Event::new(rank, thread, r.ts, EventKind::CollEnd);
                    e.op = c.op;
                    e.bytes = merged[0];
                    e.bytes_recv = merged[1];
                    // The root: by its rank in the communicator (a global-operation record), else
                    // this rank when its record says it is the root (Extrae), else unknown here
                    // (the other members' parts say it).
                    let rooted = matches!(
                        COLLECTIVE_OPS.get(usize::from(c.op).wrapping_sub(1)).copied(),
                        Some("bcast" | "gather" | "gatherv" | "scatter" | "scatterv" | "reduce")
                    );
                    e.peer = if merged[4] != NONE_I64 {
                        // A global-operation record gives every operation a root (0 where it
                        // has none): kept for the rooted ones only.
                        if rooted { comms.world_rank(merged[3], merged[4]).unwrap_or(NONE_I32) } else { NONE_I32 }
                    } else if merged[2] == 1 {
                        rank
                    } else {
                        NONE_I32
                    };
                    e.comm = if merged[3] == NONE_I64 { comms.world } else { comms.id(merged[3]) };
                    ev.push_detailed(&e);
                    info = [NONE_I64; 5];
                }
                ev.push_plain(r.ts, EventKind::Leave, region);
            }
            Class::CollectiveInfo(k) => {
                info[k] = r.value;
                if let Some(c) = collectives.last_mut() {
                    c.info[k] = r.value;
                }
            }
            Class::Metric(m) => {
                out.metric_ts.push(r.ts);
                out.metric.push(m);
                out.metric_value.push(r.value as f64);
            }
            Class::OpenMp(o) => threads.record(ev, &omp, o, r.ty(), r.value, r.ts, (rank, thread), &mut open),
            Class::TransferSize(m) => {
                if !(ctx.on_device && device.size(ev, r.value)) {
                    out.metric_ts.push(r.ts);
                    out.metric.push(m);
                    out.metric_value.push(r.value as f64);
                }
            }
            Class::Gpu(g) => match g {
                cuda::Gpu::Call | cuda::Gpu::Kernel if !leaving => {
                    let region = ctx.region_of[&(r.ty(), r.value)];
                    if g == cuda::Gpu::Call {
                        device.enter_call(ev, here, r.ts, region);
                    } else {
                        ev.push_plain(r.ts, EventKind::Enter, region);
                    }
                    open.push((r.ty(), r.value, region));
                }
                cuda::Gpu::Call | cuda::Gpu::Kernel => {
                    let region = close_call(&mut open, r.ty());
                    if g == cuda::Gpu::Call {
                        device.leave_call();
                    }
                    ev.push_plain(r.ts, EventKind::Leave, region);
                }
                cuda::Gpu::Transfer if !leaving => device.begin_transfer(ev, here, r.ts),
                cuda::Gpu::Transfer => device.end_transfer(ev, here, r.ts),
                cuda::Gpu::Stream | cuda::Gpu::DeviceEvent => device.attribute(ev, g, r.value, rank),
            },
        }
    }
    threads.no_more_address();
    out.locks_unknown = (threads.no_address, threads.unknown_lock_states);
    flush(ev, &mut next_half, &open, &mut device, &|_| true);
    out.device_unattached = device.unattached;
    ev.finish_stream(rank, thread);
    out
}

/// Take the innermost open call of type `ty` off `open` (entered calls: type, value, region):
/// its region, NONE_I32 when none is open (a leave without its enter, as a cut trace has).
fn close_call(open: &mut Vec<(i64, i64, i32)>, ty: i64) -> i32 {
    match open.iter().rposition(|o| o.0 == ty) {
        Some(p) => open.remove(p).2,
        None => NONE_I32,
    }
}

/// `DD/MM/YYYY at HH:MM` as ns since the Unix epoch (the header gives no time zone: UTC);
/// the calendar arithmetic is the scheduler logs' (`jobs::time`).
fn date_ns(text: &str) -> Option<i64> {
    let (day, time) = text.split_once(" at ")?;
    let mut d = day.trim().split('/').map(|p| p.parse::<i64>().ok());
    let (dd, mm, yy) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.trim().split(':').map(|p| p.parse::<i64>().ok());
    let (h, m) = (t.next()??, t.next()??);
    let year = if yy < 100 { 2000 + yy } else { yy };
    if !(1..=12).contains(&mm) || !(1..=31).contains(&dd) || h > 23 || m > 59 {
        return None;
    }
    let days = crate::jobs::time::days_from_civil(year, mm, dd);
    Some(((days * 24 + h) * 60 + m) * 60 * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{GeneratorConfig, Pattern, generate};
    use arrow::array::RecordBatch;

    /// Columns of a table as text, dictionaries decoded, for comparing traces.
    fn columns(t: &crate::trace::Trace, table: &str, names: &[&str]) -> Vec<Vec<String>> {
        let schema = crate::model::schema(table).unwrap();
        let all = arrow::compute::concat_batches(&schema, &t.table(table).unwrap()).unwrap();
        names
            .iter()
            .map(|n| {
                let c = all.column(schema.index_of(n).unwrap());
                let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap();
                let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
                c.iter().map(|v| v.unwrap_or("NULL").to_string()).collect()
            })
            .collect()
    }

    #[test]
    fn generated_traces_read_back_to_the_generators_tables() {
        for pattern in [Pattern::Stencil2d, Pattern::MasterWorker, Pattern::Alltoall, Pattern::Ring] {
            let cfg = GeneratorConfig {
                ranks: 12,
                ranks_per_node: 4,
                pattern,
                iterations: 3,
                imbalance: Some(crate::generate::Imbalance { ranks: vec![1], factor: 2.0 }),
                ..GeneratorConfig::default()
            };
            let a = generate(&cfg).unwrap().trace.build().unwrap();
            let dir = tempfile::tempdir().unwrap();
            crate::export::paraver::write(&a, dir.path(), "run").unwrap();
            let raw = read(&dir.path().join("run.prv")).unwrap();
            assert!(raw.warnings.is_empty(), "{pattern:?}: {:?}", raw.warnings);
            let b = raw.build().unwrap();
            let same = |table: &str, cols: &[&str]| {
                assert_eq!(columns(&a, table, cols), columns(&b, table, cols), "{pattern:?}: {table} differs");
            };
            same("ranks", &["rank", "node"]);
            same(
                "calls",
                &["rank", "thread", "region", "start_ts", "end_ts", "duration", "exclusive", "depth", "parent_id"],
            );
            same(
                "messages",
                &[
                    "msg_id",
                    "src",
                    "dst",
                    "tag",
                    "bytes",
                    "send_ts",
                    "recv_ts",
                    "send_call_start",
                    "send_call_end",
                    "recv_call_start",
                    "recv_call_end",
                    "recv_post_ts",
                    "src_node",
                    "dst_node",
                    "intra_node",
                    "duration",
                ],
            );
            // A send made in an MPI_Isend is an isend whose completion Paraver does not record;
            // a blocking send completes at its call's end.
            let kinds = |t: &crate::trace::Trace| {
                let k = columns(t, "events", &["kind"]).remove(0);
                (k.iter().filter(|k| *k == "isend").count(), k.iter().filter(|k| *k == "send").count())
            };
            assert_eq!(kinds(&a), kinds(&b), "{pattern:?}: sends and isends");
            let m = columns(&b, "messages", &["send_complete_ts", "send_call_end"]);
            assert_eq!(m[0].iter().filter(|c| *c == "NULL").count(), kinds(&b).0, "{pattern:?}: isends");
            assert!(m[0].iter().zip(&m[1]).all(|(c, e)| c == "NULL" || c == e), "{pattern:?}: blocking sends");
            // Paraver records the collective's call, not a begin and end inside it: begin_ts and
            // end_ts are the call's start and end.
            same("collectives", &["instance", "comm", "op", "root", "rank", "thread", "bytes_sent", "bytes_recv"]);
            let coll = columns(&b, "collectives", &["rank", "begin_ts", "end_ts"]);
            let calls = columns(&b, "calls", &["rank", "region", "start_ts", "end_ts"]);
            let spans: std::collections::HashSet<(&String, &String, &String)> = (0..calls[0].len())
                .filter(|&j| calls[1][j].starts_with("MPI_"))
                .map(|j| (&calls[0][j], &calls[2][j], &calls[3][j]))
                .collect();
            for (i, ((rank, begin), end)) in coll[0].iter().zip(&coll[1]).zip(&coll[2]).enumerate() {
                assert!(
                    spans.contains(&(rank, begin, end)),
                    "{pattern:?}: collective part {i} is not an MPI call's span"
                );
            }
            assert_eq!(b.meta.start_wallclock_ns, a.meta.start_wallclock_ns);
            let states: usize = b.table("states").unwrap().iter().map(RecordBatch::num_rows).sum();
            assert_eq!(states, 12, "one Running state per thread");
        }
    }

    #[test]
    fn overtaking_messages_are_counted() {
        let c = |ts: i64, post: i64, tag: i64, line: u64| CommRec {
            send: 0,
            recv: 1,
            logical_send: ts,
            physical_send: ts,
            logical_recv: post,
            physical_recv: post + 5,
            size: 8,
            tag,
            line,
        };
        assert_eq!(overtaking([c(10, 20, 1, 2), c(30, 40, 1, 3)].iter()), None);
        assert_eq!(overtaking([c(10, 40, 1, 2), c(30, 20, 1, 3)].iter()), Some((1, 3)));
        assert_eq!(overtaking([c(10, 40, 1, 2), c(30, 20, 2, 3)].iter()), None, "another tag is another channel");
        let cut = CommRec { send: NO_STREAM, ..c(1, 2, 3, 7) };
        assert_eq!(outside_records([c(10, 20, 1, 2), cut, cut].iter()), (2, 7));
        assert_eq!(outside_records([c(10, 20, 1, 2)].iter()), (0, 0));
    }

    /// Time, kind, peer, tag and request of a message half.
    type HalfFields = (i64, u8, i32, i32, i64);

    #[test]
    fn halves_do_not_depend_on_where_pieces_end() {
        let layout = records::Layout::new(&[vec![header::Task { threads: 1, node: 1 }; 3]]);
        let mut body = String::new();
        for i in 0..300i64 {
            let (from, to) = (1 + i % 3, 1 + (i + 1) % 3);
            let t = 10 * i + 10;
            body.push_str(&format!("3:1:1:{from}:1:{t}:{t}:1:1:{to}:1:{}:{}:8:{}\n", t - 5, t + 7, i % 4));
            body.push_str(&format!("2:1:1:{from}:1:{t}:50000001:0\n"));
        }
        let halves = |piece: usize| {
            let r = records::parse_in_pieces(
                Path::new("a.prv"),
                &mut body.as_bytes(),
                Vec::new(),
                1,
                &layout,
                1,
                &|_| {},
                piece,
            )
            .unwrap();
            let first = r.first_comm_of_pieces();
            let lines: Vec<u64> = r.comms().map(|c| c.line).collect();
            let per_stream: Vec<Vec<HalfFields>> = (0..3)
                .map(|s| {
                    stream_halves(&r.pieces, &first, s, &[0, 1, 2])
                        .iter()
                        .map(|h| (h.ts, h.kind as u8, h.peer, h.tag, h.request))
                        .collect()
                })
                .collect();
            (r.pieces.len(), lines, per_stream)
        };
        let (one, lines, whole) = halves(1 << 20);
        assert_eq!(one, 1);
        assert_eq!(lines, (0..300).map(|i| 1 + 2 * i).collect::<Vec<u64>>());
        assert_eq!(whole.iter().map(Vec::len).sum::<usize>(), 900);
        for piece in [60, 200, 1000] {
            let (n, l, h) = halves(piece);
            assert!(n > 3, "pieces of {piece} bytes");
            assert_eq!((&l, &h), (&lines, &whole), "pieces of {piece} bytes");
        }
    }

    #[test]
    fn openmp_lock_records_of_no_known_lock_are_counted_and_kept_without_a_lock() {
        // One task of two threads: thread 1 takes the named lock without the address after the
        // 6 (its acquisition has lock NULL); thread 2 writes a lock state that is none of the
        // four; then both take the unnamed critical section, numbered 1 and 2.
        let dir = tempfile::tempdir().unwrap();
        let prv = dir.path().join("locks.prv");
        std::fs::write(
            &prv,
            "#Paraver (29/11/2026 at 10:00):100_ns:1(2):1:1(2:1),0\n\
             2:1:1:1:1:10:60000006:3\n2:1:1:1:1:12:60000006:6\n2:1:1:1:1:20:60000006:5\n\
             2:1:1:1:1:22:60000006:0:60000032:0\n2:2:1:1:2:25:60000006:4\n\
             2:1:1:1:1:30:60000007:3:60000007:6\n2:2:1:1:2:31:60000007:3\n2:1:1:1:1:40:60000007:5\n\
             2:2:1:1:2:40:60000007:6\n2:1:1:1:1:41:60000007:0\n2:2:1:1:2:50:60000007:5:60000007:0\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("locks.pcf"), "EVENT_TYPE\n0 60000006 OpenMP named-Lock\n\nEVENT_TYPE\n0 60000007 OpenMP unnamed-Lock\n\nEVENT_TYPE\n0 60000032 OpenMP named-Lock address name\n").unwrap();
        std::fs::write(dir.path().join("locks.row"), "").unwrap();
        let raw = read(&prv).unwrap();
        assert_eq!(raw.warnings.count("paraver_lock_without_address"), 1);
        assert_eq!(raw.warnings.count("paraver_lock_state"), 1);
        let t = raw.build().unwrap();
        let events = columns(&t, "events", &["thread", "ts", "kind", "request", "tag"]);
        let locks: Vec<String> = (0..events[0].len())
            .filter(|&i| events[2][i].starts_with("thread_"))
            .map(|i| format!("{} {} {} {} {}", events[0][i], events[1][i], events[2][i], events[3][i], events[4][i]))
            .collect();
        assert_eq!(
            locks,
            [
                "0 12 thread_acquire_lock NULL NULL",
                "0 20 thread_release_lock NULL NULL",
                "0 30 thread_acquire_lock 0 1",
                "0 40 thread_release_lock 0 1",
                "1 40 thread_acquire_lock 0 2",
                "1 50 thread_release_lock 0 2",
            ]
        );
    }

    #[test]
    fn extrae_3_cuda_records_are_reported_as_not_read() {
        // Extrae 3.x: the library call as type 63000001 on the host and the stream, the kernel as
        // 63000019.
        let dir = tempfile::tempdir().unwrap();
        let prv = dir.path().join("cuda.prv");
        std::fs::write(
            &prv,
            "#Paraver (29/11/2026 at 10:00):100_ns:1(2):1:1(2:1),0\n\
             2:1:1:1:1:10:63000001:1\n2:1:1:1:1:20:63000001:0\n2:2:1:1:2:30:63000001:1:63000019:1\n\
             2:2:1:1:2:40:63000001:0:63000019:0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("cuda.pcf"),
            "EVENT_TYPE\n0 63000001 CUDA library call\nVALUES\n0 End\n1 cudaLaunch\n\nEVENT_TYPE\n0 63000019 CUDA function\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("cuda.row"), "").unwrap();
        let raw = read(&prv).unwrap();
        assert_eq!(raw.warnings.count("paraver_cuda_not_read"), 2, "{:?}", raw.warnings);
        let (_, _, message) = raw.warnings.iter().find(|w| w.0 == "paraver_cuda_not_read").unwrap();
        assert!(message.contains("cuda.prv") && message.contains("63000001, 63000019"), "{message}");
        assert!(raw.locations.iter().all(|l| l.kind == "cpu"));
        // A trace without them says nothing of CUDA.
        std::fs::write(&prv, "#Paraver (29/11/2026 at 10:00):100_ns:1(2):1:1(2:1),0\n2:1:1:1:1:10:1234:1\n").unwrap();
        assert_eq!(read(&prv).unwrap().warnings.count("paraver_cuda_not_read"), 0);
    }

    #[test]
    fn dates_and_companions() {
        assert_eq!(date_ns("01/01/1970 at 00:01"), Some(60_000_000_000));
        assert_eq!(date_ns("02/03/2026 at 08:00"), Some(1_772_438_400_000_000_000));
        assert_eq!(date_ns("31/13/2026 at 08:00"), None);
        assert_eq!(companion(Path::new("/a/run.prv.gz"), "pcf"), Path::new("/a/run.pcf"));
        assert_eq!(companion(Path::new("/a/run.prv"), "row"), Path::new("/a/run.row"));
    }
}
