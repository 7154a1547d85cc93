//! Writes a trace as a Paraver trace (`NAME.prv`, `NAME.pcf`, `NAME.row`) that Paraver's layout
//! rules accept: a header with the nodes (CPUs = ranks placed there), one application whose
//! tasks are the ranks (and, when asked, a second application sampling a node counter, one
//! task per node, as Extrae's node-level samplers add one), and the communicators; every record
//! in time order (a communication by
//! its logical send), ids 1-based. Calls become Extrae-style event pairs (MPI calls under types
//! 50000001-50000003 by kind, other regions under 60000019 "User function", value 0 on leaving),
//! each collective's sizes, root and communicator the MPI global-operation types
//! 50100001-50100004, each matched message one communication record (logical send = physical
//! send = send_ts, logical receive = recv_post_ts, physical receive = recv_ts, on the threads
//! that sent and received it), and each thread one Running state over the trace. OpenMP is
//! written as Extrae writes it (see `crate::reading::paraver::openmp`): forks and joins as type 60000001, the
//! members' parallel regions as 60000018 (named in the .pcf), barriers as 60000005, implicit
//! barriers as the worksharing join 60000016, critical sections and locks as the named lock
//! 60000006 with the lock's id + 1 as its address (60000032); a critical section's structured
//! block and the team begin and end records are not written, the reader derives them. Times are written in ns (`_ns`); Paraver has no times
//! before 0, so a trace whose clock correction moved events before 0 is shifted to start at 0.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int32Type, Int64Type};

use crate::error::{Error, Result};
use crate::events::collective_op_code;
use crate::reading::paraver::openmp::{
    BARRIER, FUNCTION, HELD, IN_ACQUIRE, IN_RELEASE, JOIN, JOIN_WAIT, LOCK_ADDRESS, NAMED_LOCK, PARALLEL, RELEASED,
};
use crate::reading::paraver::sorted::{Rec, RecKind, Sorter};
use crate::trace::Trace;

const P2P: &[&str] = &[
    "send",
    "recv",
    "isend",
    "irecv",
    "ssend",
    "bsend",
    "rsend",
    "issend",
    "ibsend",
    "irsend",
    "sendrecv",
    "sendrecv_replace",
    "wait",
    "waitall",
    "waitany",
    "waitsome",
    "test",
    "testall",
    "testany",
    "testsome",
    "probe",
    "iprobe",
    "mprobe",
    "improbe",
    "mrecv",
    "imrecv",
    "start",
    "startall",
    "send_init",
    "recv_init",
];

/// The Extrae event type of a region.
fn region_type(name: &str, paradigm_mpi: bool) -> i64 {
    let lower = name.to_ascii_lowercase();
    match lower.strip_prefix("mpi_") {
        Some(call) if paradigm_mpi || name.starts_with("MPI_") => {
            if usize::from(collective_op_code(name)) < crate::events::COLLECTIVE_OPS.len() {
                50_000_002
            } else if P2P.contains(&call) {
                50_000_001
            } else {
                50_000_003
            }
        }
        _ => 60_000_019,
    }
}

fn type_description(ty: i64) -> &'static str {
    match ty {
        50_000_001 => "MPI Point-to-point",
        50_000_002 => "MPI Collective Comm",
        50_000_003 => "MPI Other",
        _ => "User function",
    }
}

/// The OpenMP roles of regions that Extrae writes with types of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OmpRole {
    Parallel,
    Barrier,
    ImplicitBarrier,
    Critical,
    /// A critical section's structured block: not written (the reader derives it).
    Block,
}

impl OmpRole {
    fn of(role: &str) -> Option<OmpRole> {
        Some(match role {
            "parallel" => OmpRole::Parallel,
            "barrier" => OmpRole::Barrier,
            "implicit_barrier" => OmpRole::ImplicitBarrier,
            "critical" => OmpRole::Critical,
            "critical_sblock" => OmpRole::Block,
            _ => return None,
        })
    }
}

/// The .pcf's OpenMP types other than the parallel functions, with Extrae's labels.
const OPENMP_PCF: &str = "EVENT_TYPE\n0    60000001    Parallel (OMP)\nVALUES\n0 close\n1 DO (open)\n2 SECTIONS (open)\n3 REGION (open)\n\n\
EVENT_TYPE\n0    60000005    OpenMP barrier\nVALUES\n0 End\n1 Begin\n\n\
EVENT_TYPE\n0    60000016    OpenMP Worksharing join\nVALUES\n0 End\n1 Join (w wait)\n2 Join (w/o wait)\n\n\
EVENT_TYPE\n0    60000006    OpenMP named-Lock\nVALUES\n0 Unlocked status\n3 Lock\n5 Unlock\n6 Locked status\n\n\
EVENT_TYPE\n0    60000032    OpenMP named-Lock address name\n\n";

fn col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    b.column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| Error::argument(format!("paraver writer: the trace has no column '{name}'")))
}

/// Records of the .prv put in order in memory at a time; more go through run files.
const RECORDS_IN_MEMORY: usize = 1 << 22;

/// Write `trace` as `dir/NAME.prv`, `.pcf` and `.row` (NAME = `name`). The tables are read a
/// batch at a time (a store's files one at a time) and the records put in time order in
/// bounded memory, so a trace of any size is written.
pub fn write(trace: &Trace, dir: &Path, name: &str) -> Result<NotWritten> {
    write_sorting(trace, dir, name, RECORDS_IN_MEMORY, &Extras::default())
}

/// `write`, adding `extras`.
pub fn write_with(trace: &Trace, dir: &Path, name: &str, extras: &Extras) -> Result<NotWritten> {
    write_sorting(trace, dir, name, RECORDS_IN_MEMORY, extras)
}

/// What the trace holds that the Paraver trace has no record for here, by kind (an event kind
/// of the trace's `events`, `metric sample`, `unmatched message`): counted, never dropped
/// unsaid.
pub type NotWritten = BTreeMap<String, u64>;

/// What a written trace holds besides the trace's own tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// A second application, as a sampler of node counters adds one (Extrae's node-level
    /// sampling, PROFET): one task per node reading `NODE_COUNTER` every this many ns from
    /// 0 to the trace's end.
    pub node_counters_every_ns: Option<i64>,
}

/// The event type of the node counter `Extras::node_counters_every_ns` writes.
pub const NODE_COUNTER: i64 = 90_000_001;
/// Its name in the .pcf.
pub const NODE_COUNTER_NAME: &str = "Node memory reads";

/// The node counter's reading on node `n` (0-based) at sample `k`: bytes read in the interval,
/// a deterministic sawtooth, so a reader's values can be checked.
pub fn node_counter_value(n: usize, k: i64) -> i64 {
    1_000_000 * (n as i64 + 1) + 1_000 * (k % 17)
}

/// `write`, with `records_in_memory` records sorted in memory at a time, and `extras`.
pub fn write_sorting(
    trace: &Trace,
    dir: &Path,
    name: &str,
    records_in_memory: usize,
    extras: &Extras,
) -> Result<NotWritten> {
    if let Some(every) = extras.node_counters_every_ns
        && every <= 0
    {
        return Err(Error::argument(format!(
            "paraver writer: node counters every {every} ns: expected a positive interval"
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    // Ranks and their threads, nodes.
    let mut threads: BTreeMap<i32, i32> = BTreeMap::new();
    for b in &trace.table("locations")? {
        let (rank, thread) =
            (col(b, "rank")?.as_primitive::<Int32Type>(), col(b, "thread")?.as_primitive::<Int32Type>());
        for i in 0..b.num_rows() {
            let t = threads.entry(rank.value(i)).or_insert(0);
            *t = (*t).max(thread.value(i) + 1);
        }
    }
    let mut node_of: BTreeMap<i32, String> = BTreeMap::new();
    for b in &trace.table("ranks")? {
        let rank = col(b, "rank")?.as_primitive::<Int32Type>();
        let node = arrow::compute::cast(col(b, "node")?, &DataType::Utf8)?;
        let node = node.as_string::<i32>();
        for i in 0..b.num_rows() {
            threads.entry(rank.value(i)).or_insert(1);
            let n = if node.is_valid(i) { node.value(i).to_string() } else { "node".to_string() };
            node_of.insert(rank.value(i), n);
        }
    }
    let ranks: Vec<i32> = threads.keys().copied().collect();
    if ranks.iter().enumerate().any(|(i, r)| *r != i as i32) {
        return Err(Error::argument("paraver writer: ranks must be numbered 0..N without gaps"));
    }
    let mut nodes: Vec<String> = Vec::new();
    for r in &ranks {
        let n = node_of.get(r).cloned().unwrap_or_else(|| "node".into());
        if !nodes.contains(&n) {
            nodes.push(n);
        }
    }
    let node_index = |r: i32| nodes.iter().position(|n| Some(n) == node_of.get(&r)).unwrap_or(0);
    let mut cpus = vec![0u32; nodes.len()];
    let mut cpu_of = Vec::with_capacity(ranks.len());
    for &r in &ranks {
        let n = node_index(r);
        cpus[n] += 1;
        cpu_of.push((n, cpus[n]));
    }
    let first_cpu: Vec<u32> = cpus
        .iter()
        .scan(0, |acc, c| {
            let f = *acc;
            *acc += c;
            Some(f)
        })
        .collect();
    let cpu = |r: i32| first_cpu[cpu_of[r as usize].0] + cpu_of[r as usize].1;
    let mut first_stream = Vec::with_capacity(ranks.len());
    let mut streams = 0u32;
    for r in &ranks {
        first_stream.push(streams);
        streams += threads[r] as u32;
    }
    let stream_of = |rank: i32, thread: i32| first_stream[rank as usize] + thread as u32;
    let mut stream_ids: Vec<(i32, i32)> = Vec::new();
    for r in &ranks {
        for t in 0..threads[r] {
            stream_ids.push((*r, t));
        }
    }

    // Regions: (type, value) per name; the OpenMP roles Extrae writes types of.
    let mut paradigm: BTreeMap<String, bool> = BTreeMap::new();
    let mut omp_role: BTreeMap<String, OmpRole> = BTreeMap::new();
    for b in &trace.table("regions")? {
        let (name, p) = (col(b, "name")?.as_string::<i32>(), col(b, "paradigm")?.as_string::<i32>());
        let role = col(b, "role")?.as_string::<i32>();
        for i in 0..b.num_rows() {
            paradigm.insert(name.value(i).to_string(), p.value(i) == "mpi");
            if p.value(i) == "openmp"
                && role.is_valid(i)
                && let Some(r) = OmpRole::of(role.value(i))
            {
                omp_role.insert(name.value(i).to_string(), r);
            }
        }
    }
    let mut parallel_values: Vec<String> = Vec::new();
    // Thread teams (communicators of team begins): not MPI communicators, not written as `c:`.
    let mut teams: std::collections::HashSet<i32> = std::collections::HashSet::new();
    let mut values: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut code: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut region_code = |name: &str| -> (i64, i64) {
        if let Some(c) = code.get(name) {
            return *c;
        }
        let ty = region_type(name, paradigm.get(name).copied().unwrap_or(false));
        let list = values.entry(ty).or_default();
        list.push(name.to_string());
        let c = (ty, list.len() as i64);
        code.insert(name.to_string(), c);
        c
    };

    // Paraver times start at 0: a trace that clock correction moved before it is shifted when
    // the records are written. The records are put in time order in bounded memory.
    let mut earliest = 0i64;
    let mut latest = i64::MIN;
    let mut sorter = Sorter::new(dir.join(format!(".{name}.commdb-sort-{}", std::process::id())), records_in_memory);
    let mut order = 0u64;
    let mut not_written: NotWritten = BTreeMap::new();
    crate::store::each_batch(trace, "events", &mut |b| {
        let rank = col(&b, "rank")?.as_primitive::<Int32Type>();
        let thread = col(&b, "thread")?.as_primitive::<Int32Type>();
        let ts = col(&b, "ts")?.as_primitive::<Int64Type>();
        let kind = arrow::compute::cast(col(&b, "kind")?, &DataType::Utf8)?;
        let kind = kind.as_string::<i32>();
        let region = arrow::compute::cast(col(&b, "region")?, &DataType::Utf8)?;
        let region = region.as_string::<i32>();
        let peer = col(&b, "peer")?.as_primitive::<Int32Type>();
        let comm = col(&b, "comm")?.as_primitive::<Int32Type>();
        let bytes = col(&b, "bytes")?.as_primitive::<Int64Type>();
        let bytes_recv = col(&b, "bytes_recv")?.as_primitive::<Int64Type>();
        let request = col(&b, "request")?.as_primitive::<Int64Type>();
        if let Some(m) = arrow::compute::min(ts) {
            earliest = earliest.min(m);
        }
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            latest = latest.max(t);
            let stream = stream_of(rank.value(i), thread.value(i));
            let event = |ty: i64, value: i64| RecKind::Event { stream, ty, value };
            let enter = kind.value(i) == "enter";
            let k = match kind.value(i) {
                "enter" | "leave" if region.is_valid(i) && omp_role.contains_key(region.value(i)) => {
                    match omp_role[region.value(i)] {
                        OmpRole::Parallel if enter => {
                            let name = region.value(i);
                            let v = match parallel_values.iter().position(|n| n == name) {
                                Some(k) => k,
                                None => {
                                    parallel_values.push(name.to_string());
                                    parallel_values.len() - 1
                                }
                            };
                            event(FUNCTION, v as i64 + 1)
                        }
                        OmpRole::Parallel => event(FUNCTION, 0),
                        OmpRole::Barrier => event(BARRIER, i64::from(enter)),
                        OmpRole::ImplicitBarrier => event(JOIN, if enter { JOIN_WAIT } else { 0 }),
                        OmpRole::Critical => event(NAMED_LOCK, if enter { IN_ACQUIRE } else { RELEASED }),
                        OmpRole::Block => continue,
                    }
                }
                "thread_fork" => event(PARALLEL, 3),
                "thread_join" => event(PARALLEL, 0),
                "thread_team_begin" | "thread_team_end" => {
                    if comm.is_valid(i) {
                        teams.insert(comm.value(i));
                    }
                    continue;
                }
                "thread_acquire_lock" => {
                    sorter.push(Rec { ts: t, order, kind: event(NAMED_LOCK, HELD) })?;
                    order += 1;
                    if request.is_null(i) {
                        continue;
                    }
                    event(LOCK_ADDRESS, request.value(i) + 1)
                }
                "thread_release_lock" => event(NAMED_LOCK, IN_RELEASE),
                "enter" | "leave" if region.is_valid(i) => {
                    let (ty, v) = region_code(region.value(i));
                    RecKind::Event { stream, ty, value: if kind.value(i) == "enter" { v } else { 0 } }
                }
                "coll_end" => {
                    let opt = |a: &arrow::array::Int64Array| if a.is_valid(i) { a.value(i) } else { 0 };
                    RecKind::Collective {
                        stream,
                        sent: opt(bytes),
                        received: opt(bytes_recv),
                        root: if peer.is_valid(i) { i64::from(peer.value(i)) } else { -1 },
                        comm: if comm.is_valid(i) { i64::from(comm.value(i)) } else { 0 },
                    }
                }
                // Message halves are written as the messages' communication records, a
                // collective's begin by its calls and its end.
                "send" | "isend" | "isend_complete" | "irecv_request" | "recv" | "irecv" | "coll_begin" => continue,
                other => {
                    let what = if matches!(other, "enter" | "leave") { "enter/leave without a region" } else { other };
                    *not_written.entry(what.to_string()).or_insert(0) += 1;
                    continue;
                }
            };
            sorter.push(Rec { ts: t, order, kind: k })?;
            order += 1;
        }
        Ok(())
    })?;
    crate::store::each_batch(trace, "messages", &mut |b| {
        let src = col(&b, "src")?.as_primitive::<Int32Type>();
        let dst = col(&b, "dst")?.as_primitive::<Int32Type>();
        let tag = col(&b, "tag")?.as_primitive::<Int32Type>();
        let size = col(&b, "bytes")?.as_primitive::<Int64Type>();
        let send_ts = col(&b, "send_ts")?.as_primitive::<Int64Type>();
        let recv_ts = col(&b, "recv_ts")?.as_primitive::<Int64Type>();
        let post = col(&b, "recv_post_ts")?.as_primitive::<Int64Type>();
        let src_thread = col(&b, "src_thread")?.as_primitive::<Int32Type>();
        let dst_thread = col(&b, "dst_thread")?.as_primitive::<Int32Type>();
        let thread_of = |a: &arrow::array::Int32Array, i: usize| if a.is_valid(i) { a.value(i) } else { 0 };
        for c in [send_ts, recv_ts, post] {
            if let Some(m) = arrow::compute::min(c) {
                earliest = earliest.min(m);
            }
        }
        for i in 0..b.num_rows() {
            if [src.is_null(i), dst.is_null(i), send_ts.is_null(i), recv_ts.is_null(i)].contains(&true) {
                *not_written.entry("unmatched message (a half without its other)".to_string()).or_insert(0) += 1;
                continue;
            }
            let physical_recv = recv_ts.value(i);
            sorter.push(Rec {
                ts: send_ts.value(i),
                order,
                kind: RecKind::Comm {
                    send: stream_of(src.value(i), thread_of(src_thread, i)),
                    recv: stream_of(dst.value(i), thread_of(dst_thread, i)),
                    physical_send: send_ts.value(i),
                    logical_recv: if post.is_valid(i) { post.value(i) } else { physical_recv },
                    physical_recv,
                    size: size.value(i),
                    tag: if tag.is_valid(i) { i64::from(tag.value(i)) } else { 0 },
                },
            })?;
            order += 1;
            latest = latest.max(physical_recv);
        }
        Ok(())
    })?;
    let shift = -earliest;
    let end_ts = if latest == i64::MIN { 0 } else { (latest + shift).max(0) };
    // The node counters' streams follow the ranks': one per node, in the second application.
    let mpi_streams = stream_ids.len() as u32;
    if let Some(every) = extras.node_counters_every_ns {
        for n in 0..nodes.len() {
            for k in 0..=end_ts / every {
                let value = node_counter_value(n, k);
                let kind = RecKind::Event { stream: mpi_streams + n as u32, ty: NODE_COUNTER, value };
                sorter.push(Rec { ts: k * every - shift, order, kind })?;
                order += 1;
            }
        }
    }

    // The .prv.
    let prv_path = dir.join(format!("{name}.prv"));
    let mut out = std::io::BufWriter::with_capacity(1 << 20, crate::writing::Output::create(&prv_path)?);
    let io = |e: std::io::Error| Error::io(&prv_path, e);
    let date = trace.meta.start_wallclock_ns.map_or_else(|| "01/01/1970 at 00:00".to_string(), date_text);
    let comms: Vec<(i32, Vec<i32>)> = communicators(trace)?.into_iter().filter(|c| !teams.contains(&c.0)).collect();
    let tasks: Vec<String> = ranks.iter().map(|r| format!("{}:{}", threads[r], node_index(*r) + 1)).collect();
    // A sampler's application is written as Extrae writes a second one: after a ','.
    let sampler = match extras.node_counters_every_ns {
        Some(_) => {
            format!(",{}({})", nodes.len(), (1..=nodes.len()).map(|n| format!("1:{n}")).collect::<Vec<_>>().join(","))
        }
        None => String::new(),
    };
    writeln!(
        out,
        "#Paraver ({date}):{end_ts}_ns:{}({}):{}:{}({}){sampler},{}",
        nodes.len(),
        cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        if sampler.is_empty() { 1 } else { 2 },
        ranks.len(),
        tasks.join(","),
        comms.len()
    )
    .map_err(io)?;
    for (id, members) in &comms {
        let list: Vec<String> = members.iter().map(|m| (m + 1).to_string()).collect();
        writeln!(out, "c:1:{id}:{}:{}", members.len(), list.join(":")).map_err(io)?;
    }
    // (CPU, application, task, thread) of a stream; a node's sampler reads on its first CPU.
    let ids = |s: u32| match stream_ids.get(s as usize) {
        Some(&(r, t)) => (cpu(r), 1, r + 1, t + 1),
        None => {
            let n = (s - mpi_streams) as usize;
            (first_cpu[n] + 1, 2, n as i32 + 1, 1)
        }
    };
    let mut line = Vec::with_capacity(128);
    // One Running state per thread over the trace, first at time 0.
    for s in 0..stream_ids.len() as u32 {
        let (c, app, task, th) = ids(s);
        line.clear();
        num(&mut line, &[1, i64::from(c), app, i64::from(task), i64::from(th), 0, end_ts, 1]);
        out.write_all(&line).map_err(io)?;
    }
    sorter.finish(&mut |r| {
        line.clear();
        let t = r.ts + shift;
        match r.kind {
            RecKind::Event { stream, ty, value } => {
                let (c, app, task, th) = ids(stream);
                num(&mut line, &[2, i64::from(c), app, i64::from(task), i64::from(th), t, ty, value]);
            }
            RecKind::Collective { stream, sent, received, root, comm } => {
                let (c, app, task, th) = ids(stream);
                let mut f = vec![
                    2,
                    i64::from(c),
                    app,
                    i64::from(task),
                    i64::from(th),
                    t,
                    50_100_001,
                    sent,
                    50_100_002,
                    received,
                ];
                if root >= 0 {
                    f.extend([50_100_003, root]);
                }
                f.extend([50_100_004, comm]);
                num(&mut line, &f);
            }
            RecKind::Comm { send, recv, physical_send, logical_recv, physical_recv, size, tag } => {
                let (cs, _, ts_, ths) = ids(send);
                let (cr, _, tr, thr) = ids(recv);
                num(
                    &mut line,
                    &[
                        3,
                        i64::from(cs),
                        1,
                        i64::from(ts_),
                        i64::from(ths),
                        physical_send + shift,
                        physical_send + shift,
                        i64::from(cr),
                        1,
                        i64::from(tr),
                        i64::from(thr),
                        logical_recv + shift,
                        physical_recv + shift,
                        size,
                        tag,
                    ],
                );
            }
        }
        out.write_all(&line).map_err(io)
    })?;
    out.flush().map_err(io)?;
    let prv = out.into_inner().map_err(|e| io(e.into_error()))?;

    // The .pcf and the .row.
    let mut pcf = String::from(
        "DEFAULT_OPTIONS\n\nLEVEL               THREAD\nUNITS               NANOSEC\n\nSTATES\n0    Idle\n1    Running\n\n",
    );
    for (ty, names) in &values {
        let outside = if *ty == 60_000_019 { "End" } else { "Outside MPI" };
        pcf.push_str(&format!("EVENT_TYPE\n0    {ty}    {}\nVALUES\n0   {outside}\n", type_description(*ty)));
        for (i, n) in names.iter().enumerate() {
            pcf.push_str(&format!("{}   {n}\n", i + 1));
        }
        pcf.push('\n');
    }
    if !parallel_values.is_empty() {
        pcf.push_str(&format!("EVENT_TYPE\n0    {FUNCTION}    Executed OpenMP parallel function\nVALUES\n0   End\n"));
        for (i, n) in parallel_values.iter().enumerate() {
            pcf.push_str(&format!("{}   {n}\n", i + 1));
        }
        pcf.push('\n');
    }
    if !omp_role.is_empty() || !teams.is_empty() {
        pcf.push_str(OPENMP_PCF);
    }
    pcf.push_str("EVENT_TYPE\n1    50100001    Send Size in MPI Global OP\n1    50100002    Recv Size in MPI Global OP\n1    50100003    Root in MPI Global OP\n1    50100004    Communicator in MPI Global OP\n\n");
    if extras.node_counters_every_ns.is_some() {
        pcf.push_str(&format!("EVENT_TYPE\n7    {NODE_COUNTER}    {NODE_COUNTER_NAME} [bytes read from memory since the previous sample]\n\n"));
    }
    let pcf_path = dir.join(format!("{name}.pcf"));
    let pcf_out = (pcf_path, pcf);
    let mut row = format!("LEVEL CPU SIZE {}\n", cpus.iter().sum::<u32>());
    for (n, c) in nodes.iter().zip(&cpus) {
        for k in 1..=*c {
            row.push_str(&format!("{k}.{n}\n"));
        }
    }
    row.push_str(&format!("\nLEVEL NODE SIZE {}\n", nodes.len()));
    for n in &nodes {
        row.push_str(&format!("{n}\n"));
    }
    let samplers = if extras.node_counters_every_ns.is_some() { nodes.len() } else { 0 };
    row.push_str(&format!("\nLEVEL THREAD SIZE {}\n", stream_ids.len() + samplers));
    for (r, t) in &stream_ids {
        row.push_str(&format!("THREAD 1.{}.{}\n", r + 1, t + 1));
    }
    for n in 1..=samplers {
        row.push_str(&format!("THREAD 2.{n}.1\n"));
    }
    // The three files take their places together, once all are written (crate::writing).
    prv.commit()?;
    crate::writing::write_all(&pcf_out.0, pcf_out.1.as_bytes())?;
    crate::writing::write_all(&dir.join(format!("{name}.row")), row.as_bytes())?;
    let mut samples = 0u64;
    crate::store::each_batch(trace, "metrics", &mut |b| {
        samples += b.num_rows() as u64;
        Ok(())
    })?;
    if samples > 0 {
        not_written.insert("metric sample".to_string(), samples);
    }
    Ok(not_written)
}

/// The communicators as (id, member ranks), MPI_COMM_WORLD first.
fn communicators(trace: &Trace) -> Result<Vec<(i32, Vec<i32>)>> {
    let mut out = Vec::new();
    for b in &trace.table("communicators")? {
        let comm = col(b, "comm")?.as_primitive::<Int32Type>();
        let members = col(b, "members")?.as_list::<i32>();
        for i in 0..b.num_rows() {
            if members.is_null(i) {
                continue;
            }
            let m = members.value(i);
            let m = m.as_primitive::<Int32Type>();
            out.push((comm.value(i), m.iter().flatten().collect()));
        }
    }
    Ok(out)
}

/// Append `fields` joined by ':' and a line end.
fn num(line: &mut Vec<u8>, fields: &[i64]) {
    for (k, v) in fields.iter().enumerate() {
        if k > 0 {
            line.push(b':');
        }
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        let mut x = v.unsigned_abs();
        loop {
            i -= 1;
            buf[i] = b'0' + (x % 10) as u8;
            x /= 10;
            if x == 0 {
                break;
            }
        }
        if *v < 0 {
            line.push(b'-');
        }
        line.extend_from_slice(&buf[i..]);
    }
    line.push(b'\n');
}

/// ns since the Unix epoch as `DD/MM/YYYY at HH:MM` (UTC).
fn date_text(ns: i64) -> String {
    let minutes = ns.div_euclid(60_000_000_000);
    let (days, minute_of_day) = (minutes.div_euclid(1440), minutes.rem_euclid(1440));
    let (y, m, d) = crate::jobs::time::civil_from_days(days);
    format!("{d:02}/{m:02}/{y:04} at {:02}:{:02}", minute_of_day / 60, minute_of_day % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_numbers() {
        assert_eq!(date_text(1_772_438_400_000_000_000), "02/03/2026 at 08:00");
        let mut l = Vec::new();
        num(&mut l, &[2, 0, -15, 1234567890123]);
        assert_eq!(l, b"2:0:-15:1234567890123\n");
        assert_eq!(region_type("MPI_Allreduce", true), 50_000_002);
        assert_eq!(region_type("MPI_Waitall", true), 50_000_001);
        assert_eq!(region_type("MPI_Init", true), 50_000_003);
        assert_eq!(region_type("compute", false), 60_000_019);
    }
}
