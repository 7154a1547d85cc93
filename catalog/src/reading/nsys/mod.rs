//! A reader of Nsight Systems' SQLite exports (`nsys export --type sqlite`), pure Rust: the
//! SQLite file format (`sqlite`), the export's tables (`export`) and their intervals and tasks
//! as commdb's events (`timeline`). A trace is one export or a directory of them (nsys writes a
//! report per rank under MPI); each process that made CUDA, NVTX or MPI calls is a rank, its
//! number from nsys's MPI_RANKS table or the NVTX thread name `MPI Rank N` nsys gives a rank's
//! thread, else the next number free (counted in `warnings`). Under a rank, its host threads
//! (the main thread first) and then its CUDA streams, named `CUDA[device:stream]` as Score-P names
//! them, are its locations. Exports of several files are put on one time line by the UTC start
//! of each capture. nsys names a communicator by its handle only, so the k-th handle a rank
//! uses is its k-th communicator and a communicator's members are the ranks that used one in
//! world-rank order (the first is MPI_COMM_WORLD when every rank used it); peers and roots are
//! translated through that.

pub mod export;
pub mod sqlite;
mod timeline;

use std::collections::{BTreeMap, BTreeSet};

use crate::fast_hash::FastMap;
use std::path::{Path, PathBuf};

use export::{Export, What, process_of, tid_of};
use timeline::{Context, Place};

use crate::error::{Error, Result};
use crate::events::{EventParts, RawEvents};
use crate::trace::{CommInfo, LocationInfo, RankInfo, RawTrace, RegionInfo, TraceMeta, Warnings};

/// The regions met so far, by name and paradigm.
#[derive(Debug, Default)]
pub struct Regions {
    /// By paradigm, then name.
    index: FastMap<&'static str, FastMap<String, i32>>,
    list: Vec<RegionInfo>,
}

impl Regions {
    /// The index of the region `name` of `paradigm`, added with `role` when new.
    pub fn index(&mut self, name: &str, paradigm: &'static str, role: &str) -> i32 {
        let names = self.index.entry(paradigm).or_default();
        if let Some(&i) = names.get(name) {
            return i;
        }
        let i = self.list.len() as i32;
        self.list.push(RegionInfo {
            region_id: i64::from(i),
            name: name.to_string(),
            paradigm: paradigm.into(),
            role: Some(role.into()),
            file: None,
            line: None,
        });
        names.insert(name.to_string(), i);
        i
    }
}

/// Whether `path` is an export (an SQLite file named *.sqlite) or a directory holding one.
pub fn recognises(path: &Path) -> bool {
    let one = |p: &Path| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("sqlite")) && sqlite::is_sqlite(p);
    one(path)
        || (path.is_dir() && std::fs::read_dir(path).map(|d| d.flatten().any(|e| one(&e.path()))).unwrap_or(false))
}

/// The exports of a trace: the file, or a directory's *.sqlite files in name order.
pub fn files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("sqlite")))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::in_file(path, "the directory holds no *.sqlite export of Nsight Systems"));
    }
    Ok(files)
}

/// A process of an export that became a rank.
struct Process {
    file: usize,
    process: i64,
    rank: i32,
}

/// Read the export(s) at `path`.
pub fn read(path: &Path) -> Result<RawTrace> {
    let paths = files(path)?;
    let mut exports = Vec::with_capacity(paths.len());
    for p in &paths {
        let db = sqlite::Database::open(p)?;
        exports.push(export::read(p, &db)?);
    }
    let mut warnings = Warnings::default();
    let processes = ranks_of(&paths, &exports, &mut warnings)?;
    shift_to_one_timeline(&paths, &mut exports, &mut warnings);
    report(&paths, &exports, &mut warnings);

    let mut regions = Regions::default();
    let (comms, handles) = communicators(&exports, &processes, &mut warnings);
    let mut ranks = Vec::new();
    let mut locations = Vec::new();
    // Two events a call or task, and a few inside MPI calls.
    let spans: usize = exports.iter().map(|x| x.threads.values().map(Vec::len).sum::<usize>()).sum();
    let tasks: usize = exports.iter().map(|x| x.streams.values().map(Vec::len).sum::<usize>()).sum();
    let mut events = RawEvents::with_capacity(2 * (spans + tasks) + spans / 4);
    for p in &processes {
        let x = &mut exports[p.file];
        let file = paths[p.file].display().to_string();
        let node = x.host.clone();
        ranks.push(RankInfo {
            rank: p.rank,
            node: node.clone(),
            name: format!("MPI Rank {}", p.rank),
            application: None,
        });
        let mut threads: Vec<i64> = x.threads.keys().copied().filter(|&g| process_of(g) == p.process).collect();
        threads.sort_by_key(|&g| (tid_of(g) != (p.process & 0xff_ffff), tid_of(g)));
        let streams: Vec<export::StreamKey> = x.streams.keys().copied().filter(|k| k.0 == p.process).collect();
        let mut place_of_thread: FastMap<i64, i32> = FastMap::default();
        for (i, &g) in threads.iter().enumerate() {
            place_of_thread.insert(g, i as i32);
            let name = x.thread_names.get(&g).cloned().unwrap_or_else(|| format!("thread {}", tid_of(g)));
            locations.push(LocationInfo {
                location_id: g,
                rank: p.rank,
                thread: i as i32,
                kind: "cpu".into(),
                name: format!("{name} ({})", tid_of(g)),
                node: node.clone(),
            });
        }
        let mut place_of_stream: FastMap<(i64, i64), i32> = FastMap::default();
        for (j, &(_, device, stream)) in streams.iter().enumerate() {
            let thread = (threads.len() + j) as i32;
            place_of_stream.insert((device, stream), thread);
            locations.push(LocationInfo {
                location_id: (1 << 62)
                    | ((p.process & 0xff_ffff) << 32)
                    | ((device & 0xffff) << 16)
                    | (stream & 0xffff),
                rank: p.rank,
                thread,
                kind: "gpu".into(),
                name: format!("CUDA[{device}:{stream}]"),
                node: node.clone(),
            });
        }
        let ties: FastMap<i64, (Place, Option<i64>)> = x
            .ties
            .iter()
            .filter(|(_, t)| t.process == p.process)
            .filter_map(|(&c, t)| place_of_stream.get(&(t.device, t.stream)).map(|&s| (c, ((p.rank, s), t.event))))
            .collect();
        let mut callers: FastMap<i64, Place> = FastMap::default();
        for &g in &threads {
            for s in &x.threads[&g] {
                if let What::Api { correlation } = s.what {
                    callers.insert(correlation, (p.rank, place_of_thread[&g]));
                }
            }
        }
        let mine = handles.get(&p.rank).cloned().unwrap_or_default();
        let comms_of = |handle: Option<i64>| -> (i32, Option<&[i32]>) {
            let k = handle.and_then(|h| mine.iter().position(|&m| m == h)).unwrap_or(0);
            match comms.get(k) {
                Some(c) => (c.comm, Some(c.members.as_slice())),
                None => (0, None),
            }
        };
        let mut cx = Context {
            rank: p.rank,
            regions: &mut regions,
            ties: &ties,
            callers: &callers,
            comms: &comms_of,
            pending: FastMap::default(),
            warnings: &mut warnings,
            file: &file,
        };
        for (i, g) in threads.iter().enumerate() {
            let spans = x.threads.remove(g).unwrap_or_default();
            timeline::host(&mut events, i as i32, spans, &mut cx);
        }
        for (j, key) in streams.iter().enumerate() {
            let tasks = x.streams.remove(key).unwrap_or_default();
            timeline::stream(&mut events, (threads.len() + j) as i32, tasks, &mut cx);
        }
        let left = cx.pending.len() as i64;
        let rank = p.rank;
        warnings.add_many("nsys_request_not_completed", left, || {
            format!(
                "{file}: rank {rank} has {left} MPI_Isend or MPI_Irecv whose request no wait of the export completes"
            )
        });
    }
    let first = exports.iter().filter_map(|x| x.utc_start_ns).min();
    let meta = TraceMeta {
        name: crate::reading::default_name(&path.display().to_string()),
        path: path.display().to_string(),
        format: "nsys".into(),
        format_version: exports.iter().find_map(|x| x.schema_version.clone()),
        creator: exports.iter().find_map(|x| x.product.clone()),
        timer_resolution_hz: Some(1_000_000_000),
        start_wallclock_ns: first,
        clock_correction: String::new(),
        clock_violations: 0,
    };
    Ok(RawTrace {
        meta,
        ranks,
        locations,
        regions: regions.list,
        events: EventParts::single(events),
        communicators: comms,
        clock_sync: Vec::new(),
        metrics: Default::default(),
        states: Default::default(),
        warnings,
    })
}

/// Every process that made a call or ran a task, with its rank, in rank order.
fn ranks_of(paths: &[PathBuf], exports: &[Export], warnings: &mut Warnings) -> Result<Vec<Process>> {
    let mut found: Vec<(usize, i64)> = Vec::new();
    for (f, x) in exports.iter().enumerate() {
        let mut ps: BTreeSet<i64> = x.threads.keys().map(|&g| process_of(g)).collect();
        ps.extend(x.streams.keys().map(|k| k.0));
        found.extend(ps.into_iter().map(|p| (f, p)));
    }
    let mut taken: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for (f, p) in found {
        match exports[f].ranks.get(&p) {
            Some(&rank) => {
                if let Some(&(g, q)) = taken.get(&rank) {
                    return Err(Error::in_file(
                        &paths[f],
                        format!(
                            "process {} is MPI rank {rank}, as is process {} of {}: expected each rank once",
                            p & 0xff_ffff,
                            q & 0xff_ffff,
                            paths[g].display()
                        ),
                    ));
                }
                taken.insert(rank, (f, p));
                out.push(Process { file: f, process: p, rank });
            }
            None => unknown.push((f, p)),
        }
    }
    let mut next = 0;
    for &(f, p) in &unknown {
        while taken.contains_key(&next) {
            next += 1;
        }
        taken.insert(next, (f, p));
        out.push(Process { file: f, process: p, rank: next });
    }
    if let Some(&(f, p)) = unknown.first() {
        let n = unknown.len();
        warnings.add_many("nsys_rank_assumed", n as i64, || {
            format!("{}: process {} (and {} more) is named as no MPI rank (no MPI_RANKS row, no NVTX thread named MPI Rank N); it is given the next free rank", paths[f].display(), p & 0xff_ffff, n - 1)
        });
    }
    out.sort_by_key(|p| p.rank);
    Ok(out)
}

/// Put several exports on one time line: each is moved by how much later its capture began
/// than the first's.
fn shift_to_one_timeline(paths: &[PathBuf], exports: &mut [Export], warnings: &mut Warnings) {
    if exports.len() < 2 {
        return;
    }
    let Some(first) = exports.iter().filter_map(|x| x.utc_start_ns).min() else { return };
    for (f, x) in exports.iter_mut().enumerate() {
        let Some(start) = x.utc_start_ns else {
            warnings.add("nsys_no_start_time", || {
                format!("{}: the export says no UTC start of its capture (TARGET_INFO_SESSION_START_TIME); its times are taken as they are", paths[f].display())
            });
            continue;
        };
        let shift = start - first;
        for spans in x.threads.values_mut() {
            for s in spans {
                (s.start, s.end) = (s.start + shift, s.end + shift);
            }
        }
        for tasks in x.streams.values_mut() {
            for t in tasks {
                (t.start, t.end) = (t.start + shift, t.end + shift);
            }
        }
    }
}

/// Count what the exports hold that commdb does not read, and what it folded.
fn report(paths: &[PathBuf], exports: &[Export], warnings: &mut Warnings) {
    for (f, x) in exports.iter().enumerate() {
        let file = paths[f].display();
        let (columns, tables): (Vec<_>, Vec<_>) = x.unread.iter().partition(|(what, _)| what.contains('.'));
        if !columns.is_empty() {
            let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
            warnings.add_many("nsys_unknown_column", names.len() as i64, || {
                format!("{file}: columns not known to commdb's reader, not read: {}", names.join(", "))
            });
        }
        if !tables.is_empty() {
            let names: Vec<String> = tables.iter().map(|(t, n)| format!("{t} ({n} rows)")).collect();
            warnings.add_many("nsys_unread_table", names.len() as i64, || {
                format!("{file}: tables that hold nothing commdb's tables hold, not read: {}", names.join(", "))
            });
        }
        let nvtx_mpi =
            x.threads.values().flatten().filter(|s| matches!(&s.what, What::Mpi(m) if m.table == "nvtx")).count();
        warnings.add_many("nsys_mpi_without_peers", nvtx_mpi as i64, || {
            format!("{file}: {nvtx_mpi} MPI calls are NVTX ranges of the MPI domain, which name the call only: no messages or collectives derive from them (nsys 2023 and later trace MPI with peers, tags and sizes)")
        });
        warnings.add_many("nsys_mpi_ranges_superseded", x.superseded as i64, || {
            format!("{file}: NVTX ranges of the MPI domain are left out because the export's MPI tables record the same calls")
        });
    }
}

/// The communicators: the k-th handle each rank used (in time order) is communicator k, its
/// members the ranks that used a k-th handle; and each rank's handles in that order.
fn communicators(
    exports: &[Export],
    processes: &[Process],
    warnings: &mut Warnings,
) -> (Vec<CommInfo>, FastMap<i32, Vec<i64>>) {
    let mut handles: FastMap<i32, Vec<i64>> = FastMap::default();
    for p in processes {
        let mut used: Vec<(i64, i64)> = exports[p.file]
            .threads
            .iter()
            .filter(|(g, _)| process_of(**g) == p.process)
            .flat_map(|(_, spans)| spans)
            .filter_map(|s| match &s.what {
                What::Mpi(m) => m.comm.map(|c| (s.start, c)),
                _ => None,
            })
            .collect();
        used.sort_unstable();
        let mut mine: Vec<i64> = Vec::new();
        for (_, h) in used {
            if !mine.contains(&h) {
                mine.push(h);
            }
        }
        handles.insert(p.rank, mine);
    }
    let all: Vec<i32> = processes.iter().map(|p| p.rank).collect();
    let most = handles.values().map(Vec::len).max().unwrap_or(0).max(1);
    let mut comms = Vec::new();
    for k in 0..most {
        let mut members: Vec<i32> = handles.iter().filter(|(_, h)| h.len() > k).map(|(&r, _)| r).collect();
        members.sort_unstable();
        if k == 0 && members.is_empty() {
            members = all.clone();
        }
        let name = if k == 0 && members == all { "MPI_COMM_WORLD".to_string() } else { format!("communicator {k}") };
        comms.push(CommInfo { comm: k as i32, name, members, per_rank: false });
    }
    let others = comms.len().saturating_sub(1);
    warnings.add_many("nsys_communicator_members_assumed", others as i64, || {
        "nsys names a communicator by its handle only: a rank's k-th handle is taken as communicator k, its members the ranks that used a k-th handle in world-rank order".to_string()
    });
    (comms, handles)
}
