//! One step's computation of a rank offloaded to a GPU (`generate --gpu`), recorded as Score-P
//! records CUDA into OTF2: the host thread's calls to the CUDA runtime (each copy and launch
//! naming its stream, as Score-P's CUDA_STREAM_REF attribute does), and on the rank's stream
//! (a location of kind gpu, `CUDA[0:7]`) the kernel as a call and each copy as an RMA get (host
//! to device) or put (device to host) from the host thread, completed on the stream under its
//! matching id. A step is: a blocking copy of the input to the device (cuMemcpyHtoD), the host's
//! own work before the launch (a tenth of the step's work, the `compute` region; longer by the
//! planted delay on the late-launch ranks), cuLaunchKernel, the kernel (the rest of the work),
//! cuCtxSynchronize waiting for it, and a blocking copy of the result back (cuMemcpyDtoH). The
//! host's calls are the CUDA driver API's, as Score-P records them.
//!
//! What CASITA's offload rules find in it is known from the times (`Tally`): every
//! cuCtxSynchronize is an early synchronisation of the whole call (the kernel was queued
//! when it began), its time on the kernel the kernel's whole run (which starts 2 µs into it); both copies are
//! late synchronisations (nothing runs on the stream when they begin); the stream idles from the
//! input copy's completion to the kernel's start, and since the launch began after that
//! completion, each kernel is a late launch whose host part is the time from the completion to
//! the launch; and the device idles, within the offload interval (from the rank's first copy to
//! the end of its last), whenever no copy or kernel runs.

use crate::events::{Event, EventKind};

/// The CUDA regions a GPU trace adds to the generator's: (name, paradigm, role). The host's
/// calls are the driver API's, as Score-P records them and CASITA's function table knows them.
pub(super) const REGIONS: [(&str, &str, &str); 5] = [
    ("cuMemcpyHtoD_v2", "cuda", "function"),
    ("cuMemcpyDtoH_v2", "cuda", "function"),
    ("cuLaunchKernel", "cuda", "function"),
    ("cuCtxSynchronize", "cuda", "function"),
    ("step_kernel", "cuda", "function"),
];

/// The stream's location name, as Score-P names a CUDA stream (device 0, stream 7).
pub(super) const STREAM_NAME: &str = "CUDA[0:7]";

/// Region ids of the CUDA regions, after the generator's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Regions {
    /// The communicator of the rank's RMA window, over its host thread and stream (as Score-P
    /// defines one per CUDA context).
    pub window: i32,
    pub copy_in: i32,
    pub copy_out: i32,
    pub launch: i32,
    pub sync: i32,
    pub kernel: i32,
    pub compute: i32,
}

/// From a copy call's enter to the transfer's start on the stream, and from its end to the
/// call's leave.
const COPY_EDGE_NS: i64 = 500;
/// Bytes a copy moves per ns (10 GB/s).
const COPY_BYTES_PER_NS: i64 = 10;
/// A launch call's length.
const LAUNCH_NS: i64 = 2_000;
/// From a launch call's enter to its kernel's start on the device.
const QUEUE_NS: i64 = 4_000;
/// From a kernel's end to the end of the synchronisation that waited for it.
const SYNC_TAIL_NS: i64 = 500;
/// The host's time between the call before a step and its first copy, and between its last
/// copy and the call after it (no two calls meet at one instant, which CASITA's graph needs).
const HOST_GAP_NS: i64 = 100;

/// What a rank's offloaded steps plant, in true ns.
#[derive(Debug, Clone, Default)]
pub(super) struct Tally {
    /// The start of the rank's first call that acts on the stream, the end of its last.
    pub first_call: Option<i64>,
    pub last_call: i64,
    /// Time the stream ran copies and kernels.
    pub busy_ns: i64,
    pub early_sync_ns: i64,
    pub on_kernel_ns: i64,
    pub host_late_ns: i64,
    pub kernels: u64,
    pub transfers: u64,
    /// The last matching id given to a copy.
    matching: i64,
}

impl Tally {
    /// The device's idle time within the offload interval.
    pub fn idle_ns(&self) -> i64 {
        self.first_call.map_or(0, |first| self.last_call - first - self.busy_ns)
    }
}

/// Where a step's events go: (thread, ts, kind, what fills the event's other fields); thread
/// 0 is the host thread, 1 the stream.
pub(super) type Push<'a> = dyn FnMut(u32, i64, EventKind, &dyn Fn(&mut Event)) + 'a;

/// The stream's thread under its rank.
const STREAM: i32 = 1;

/// One offloaded step of rank `rank` starting at `start` (true ns) with `work` ns of
/// computation, the host's part before the launch longer by `late_ns`; `compute` says whether
/// the host's part is recorded as the `compute` region. Returns the step's end.
#[allow(clippy::too_many_arguments)]
pub(super) fn step(
    rank: i32,
    start: i64,
    work: i64,
    late_ns: i64,
    bytes: i64,
    compute: bool,
    r: Regions,
    tally: &mut Tally,
    push: &mut Push<'_>,
) -> i64 {
    let names_stream = |e: &mut Event| (e.peer, e.tag) = (rank, STREAM);
    let start = start + HOST_GAP_NS;
    // The input to the device.
    let input = (4 * bytes).max(1);
    let copy_in = (input + COPY_BYTES_PER_NS - 1) / COPY_BYTES_PER_NS;
    let got = copy(rank, start, input, copy_in, true, r, tally, push);
    // The host's own work, then the launch; the stream idles from the copy's completion.
    let host = work / 10 + late_ns;
    if compute && host > 0 {
        push(0, got, EventKind::Enter, &|e| e.region = r.compute);
        push(0, got + host, EventKind::Leave, &|e| e.region = r.compute);
    }
    let launch = got + host;
    let idle_from = start + COPY_EDGE_NS + copy_in;
    push(0, launch, EventKind::Enter, &|e| {
        e.region = r.launch;
        names_stream(e);
    });
    push(0, launch + LAUNCH_NS, EventKind::Leave, &|e| e.region = r.launch);
    let kernel_start = launch + QUEUE_NS;
    let kernel_end = kernel_start + (work - work / 10).max(1);
    push(1, kernel_start, EventKind::Enter, &|e| e.region = r.kernel);
    push(1, kernel_end, EventKind::Leave, &|e| e.region = r.kernel);
    tally.kernels += 1;
    tally.busy_ns += kernel_end - kernel_start;
    tally.host_late_ns += launch - idle_from;
    // The synchronisation waits for the kernel from the launch's end.
    let sync_start = launch + LAUNCH_NS;
    let sync_end = kernel_end + SYNC_TAIL_NS;
    push(0, sync_start, EventKind::Enter, &|e| e.region = r.sync);
    push(0, sync_end, EventKind::Leave, &|e| e.region = r.sync);
    tally.early_sync_ns += sync_end - sync_start;
    tally.on_kernel_ns += kernel_end - kernel_start.max(sync_start);
    // The result back to the host.
    let output = bytes.max(1);
    copy(rank, sync_end, output, (output + COPY_BYTES_PER_NS - 1) / COPY_BYTES_PER_NS, false, r, tally, push)
        + HOST_GAP_NS
}

/// A blocking copy (cuMemcpyHtoD or cuMemcpyDtoH) from `start` moving `bytes` in `ns` on the stream, to the device
/// (`to_device`) or back; returns the call's end.
#[allow(clippy::too_many_arguments)]
fn copy(
    rank: i32,
    start: i64,
    bytes: i64,
    ns: i64,
    to_device: bool,
    r: Regions,
    tally: &mut Tally,
    push: &mut Push<'_>,
) -> i64 {
    let end = start + 2 * COPY_EDGE_NS + ns;
    tally.matching += 1;
    let id = tally.matching;
    let region = if to_device { r.copy_in } else { r.copy_out };
    push(0, start, EventKind::Enter, &|e| {
        e.region = region;
        (e.peer, e.tag) = (rank, STREAM);
    });
    let kind = if to_device { EventKind::RmaGet } else { EventKind::RmaPut };
    push(1, start + COPY_EDGE_NS, kind, &|e| {
        // The remote end is the host thread.
        (e.peer, e.tag, e.bytes, e.request, e.comm) = (rank, 0, bytes, id, r.window);
    });
    push(1, start + COPY_EDGE_NS + ns, EventKind::RmaOpCompleteBlocking, &|e| (e.request, e.comm) = (id, r.window));
    push(0, end, EventKind::Leave, &|e| e.region = region);
    tally.first_call.get_or_insert(start);
    tally.last_call = end;
    tally.busy_ns += ns;
    tally.transfers += 1;
    end
}
