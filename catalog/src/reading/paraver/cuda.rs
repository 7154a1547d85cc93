//! Extrae's CUDA and HIP records in a Paraver trace, read into the accelerator model that
//! Score-P's OTF2 gives (crate's `events`: a stream is a location of kind `gpu` under its rank,
//! a kernel a call on it, a transfer a one-sided operation on it; an API call names the stream
//! it acts on in `peer`/`tag` and the device event in `request`), so that `gpu_kernels`,
//! `gpu_transfers`, `offload_waits` and the critical path read an Extrae run as they read a
//! Score-P one. Extrae (4.0 and later; HIP's types are CUDA's plus 500000) writes:
//!
//! - on the host thread, type 63000000 (CUDA library call): the API call entered (1 launch, 3
//!   memcpy, 4 device synchronise, 5 stream synchronise, 7 memcpy async, 36 event record, 37
//!   event synchronise, ...; names in the .pcf), 0 when it returns; with it 63000008, the
//!   stream's thread in the task (1-based) of a stream synchronisation or event record, and
//!   63000014, the CUDA event of an event record or synchronisation;
//! - on a stream's thread (named `GPU-D<device>.S<stream>` in the .row; `CUDA-D<d>.S<s>-host`
//!   in Extrae 3.5 to 4, `GPU <device UUID>.<stream>` in 5.0.5 to 5.1.0): 63000006, the kernel run (its name in the .pcf; 0 at its end), and 63000001,
//!   a memory transfer (the memcpy's value; 0 at its end) with its size as 63000004;
//! - communication records between the two threads, of one tag per operation: a launch sends
//!   (size 0) from the host at the launch to the stream at the kernel's start; a copy from host
//!   to device sends from the host at the call's start to the stream at the copy's end; a copy
//!   from device to host sends from the stream at the copy's start to the host at the call's
//!   end. They tie a call to its stream and give a copy its direction: a copy without one is
//!   between devices. They are not messages.
//!
//! Facts from Extrae's `src/common/events.h`, its GPU probes and tracer (`gpu_probe.c`,
//! `gpu_common.c`) and its merger (`cuda_prv_semantics.c`, `cuda_prv_events.c`, `addr2info.c`).
//! Extrae 3.x numbered these records otherwise (the call as 63000001 on both threads, the
//! kernel's name as 63000019): such a trace is reported, not read (`layout_before_4`).

use crate::events::{Event, EventKind, NONE_I32, NONE_I64, RawEvents};

/// The first event type of Extrae's CUDA records, and of its HIP records.
const CUDA_BASE: i64 = 63_000_000;
const HIP_BASE: i64 = 63_500_000;
/// Every CUDA and HIP record type of every Extrae version.
pub(super) const ALL: std::ops::Range<i64> = 63_000_000..64_000_000;

/// What one of Extrae's CUDA or HIP event types records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpu {
    /// An API call on the host (type +0): entered (value != 0) or returned (0).
    Call,
    /// A memory transfer on a stream (+1): begun (the memcpy's value) or ended (0).
    Transfer,
    /// A kernel on a stream (+6): begun (the kernel's number in the .pcf) or ended (0).
    Kernel,
    /// The stream a synchronisation or event record acts on, as its thread in the task, 1-based (+8).
    Stream,
    /// The CUDA event an event record or synchronisation names (+14).
    DeviceEvent,
}

/// The API of a type (`CUDA`, `HIP`) and its offset from the API's first type.
fn api_of(ty: i64) -> Option<(&'static str, i64)> {
    if (CUDA_BASE..CUDA_BASE + 100).contains(&ty) {
        Some(("CUDA", ty - CUDA_BASE))
    } else if (HIP_BASE..HIP_BASE + 100).contains(&ty) {
        Some(("HIP", ty - HIP_BASE))
    } else {
        None
    }
}

/// The bytes of the transfer or call just begun (type +4): the open transfer's on a stream, a
/// metric's sample elsewhere.
pub(super) fn is_size(ty: i64) -> bool {
    api_of(ty).is_some_and(|(_, offset)| offset == 4)
}

/// The API of a type (`CUDA`, `HIP`) and the record it is, for Extrae's 4.0 layout; None for
/// the other types (kept as metrics; the size is `is_size`).
pub(super) fn class_of(ty: i64) -> Option<(&'static str, Gpu)> {
    let (api, offset) = api_of(ty)?;
    let gpu = match offset {
        0 => Gpu::Call,
        1 => Gpu::Transfer,
        6 => Gpu::Kernel,
        8 => Gpu::Stream,
        14 => Gpu::DeviceEvent,
        _ => return None,
    };
    Some((api, gpu))
}

/// Whether the .pcf describes Extrae 3.x's CUDA records: the library call as type 63000001
/// (4.0 and later call that type the memory transfer), or its host and device call types
/// 63100001 to 63399999.
pub(super) fn layout_before_4(pcf: &super::pcf::Pcf) -> bool {
    pcf.types.get(&(CUDA_BASE + 1)).is_some_and(|d| d.description.to_ascii_lowercase().contains("library call"))
        || pcf.types.keys().any(|t| (63_100_001..63_400_000).contains(t))
}

/// The paradigm of the regions of an API (`regions.paradigm`).
pub(super) fn paradigm(api: &str) -> &'static str {
    if api == "HIP" { "hip" } else { "cuda" }
}

/// A stream's device and number, as its thread name in the .row gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StreamName {
    /// `GPU-D1.S2` (Extrae 5.1.1 on, with the device's UUID after it when asked), `CUDA-D1.S2-host`
    /// (Extrae 3.5 to 4), `HIP-D1.S2`: device and stream numbers, from 1.
    Numbered(u32, u32),
    /// `GPU <uuid>.2` or `GPU_<uuid>.2` (Extrae 5.0.5 to 5.1.0): the device by its UUID.
    ByUuid(String, u32),
}

/// What a stream's thread name says of it; None when the name is not a stream's.
pub(super) fn stream_of_name(name: &str) -> Option<StreamName> {
    let number = |s: &str| -> Option<u32> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        s[..digits].parse().ok()
    };
    if let Some(rest) = ["GPU-D", "CUDA-D", "HIP-D"].iter().find_map(|p| name.strip_prefix(p)) {
        let (device, rest) = rest.split_once(".S")?;
        return Some(StreamName::Numbered(device.parse().ok()?, number(rest)?));
    }
    let rest = name.strip_prefix("GPU ").or_else(|| name.strip_prefix("GPU_"))?;
    let (uuid, stream) = rest.rsplit_once('.')?;
    let uuid = uuid.trim_start_matches('-');
    (!uuid.is_empty() && uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| Some(StreamName::ByUuid(uuid.to_string(), stream.parse().ok()?)))?
}

/// The location names of the streams, as Score-P names them (`CUDA[device:stream]`): with the
/// .row's numbers, a device named by its UUID numbered from 1 in the order of the .row, and a
/// stream the .row does not name by its thread's name.
pub(super) struct Names {
    uuids: Vec<String>,
}

impl Names {
    pub fn new() -> Names {
        Names { uuids: Vec::new() }
    }

    pub fn name(&mut self, api: &str, row_name: Option<&str>, fallback: &str) -> String {
        match row_name.and_then(stream_of_name) {
            Some(StreamName::Numbered(device, stream)) => format!("{api}[{device}:{stream}]"),
            Some(StreamName::ByUuid(uuid, stream)) => {
                let device = match self.uuids.iter().position(|u| *u == uuid) {
                    Some(k) => k + 1,
                    None => {
                        self.uuids.push(uuid);
                        self.uuids.len()
                    }
                };
                format!("{api}[{device}:{stream}]")
            }
            None => format!("{api} stream ({})", row_name.unwrap_or(fallback)),
        }
    }
}

/// The state of one thread's CUDA records while it is walked.
#[derive(Debug, Default)]
pub(super) struct Device {
    /// The events of the API calls open on a host thread, innermost last.
    calls: Vec<usize>,
    /// The event that began the transfer running on a stream.
    transfer: Option<usize>,
    /// The matching id of the transfer running on the stream.
    matching: i64,
    /// Transfers begun on the stream so far: the next one's matching id.
    transfers: i64,
    /// Ties, stream numbers and device events with no call or transfer to go to.
    pub unattached: i64,
}

/// A communication between a host thread and a stream of its task, as the thread walked sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tie {
    /// The other thread (the stream, on the host; the host thread, on the stream).
    pub other: i32,
    pub kind: EventKind,
    pub bytes: i64,
}

impl Device {
    /// An API call entered: an enter whose stream and event later records may fill in.
    pub fn enter_call(&mut self, ev: &mut RawEvents, (rank, thread): (i32, i32), ts: i64, region: i32) {
        let mut e = Event::new(rank, thread, ts, EventKind::Enter);
        e.region = region;
        self.calls.push(ev.len());
        ev.push_detailed(&e);
    }

    /// The innermost API call returned.
    pub fn leave_call(&mut self) {
        self.calls.pop();
    }

    /// The stream (`Gpu::Stream`: its thread in the task, 1-based) or device event
    /// (`Gpu::DeviceEvent`) of the innermost open call.
    pub fn attribute(&mut self, ev: &mut RawEvents, gpu: Gpu, value: i64, rank: i32) {
        let Some(&i) = self.calls.last() else {
            self.unattached += 1;
            return;
        };
        match (gpu, i32::try_from(value - 1)) {
            (Gpu::Stream, Ok(thread)) if thread >= 0 => (ev.peer[i], ev.tag[i]) = (rank, thread),
            (Gpu::DeviceEvent, _) => ev.request[i] = value,
            _ => self.unattached += 1,
        }
    }

    /// A transfer begun on a stream: a put to the stream itself (a copy between devices) until
    /// a tie to the host says otherwise. One begun while another had not ended leaves that one
    /// without an end (counted), under a matching id of its own.
    pub fn begin_transfer(&mut self, ev: &mut RawEvents, (rank, thread): (i32, i32), ts: i64) {
        if self.transfer.is_some() {
            self.unattached += 1;
        }
        self.matching = self.transfers;
        self.transfers += 1;
        let mut e = Event::new(rank, thread, ts, EventKind::RmaPut);
        (e.peer, e.tag, e.request) = (rank, thread, self.matching);
        self.transfer = Some(ev.len());
        ev.push_detailed(&e);
    }

    /// The transfer's bytes; false when no transfer is open (the size is then a call's: a metric).
    pub fn size(&mut self, ev: &mut RawEvents, bytes: i64) -> bool {
        match self.transfer {
            Some(i) => {
                ev.bytes[i] = bytes;
                true
            }
            None => false,
        }
    }

    /// The transfer running on the stream ended.
    pub fn end_transfer(&mut self, ev: &mut RawEvents, (rank, thread): (i32, i32), ts: i64) {
        if self.transfer.take().is_none() {
            self.unattached += 1;
            return;
        }
        let mut e = Event::new(rank, thread, ts, EventKind::RmaOpCompleteBlocking);
        e.request = self.matching;
        ev.push_detailed(&e);
    }

    /// A communication with the host (on a stream) or with a stream (on the host), at its time
    /// in the walk. On the host it names the stream of the innermost open call (a launch or a
    /// copy); on a stream it makes the open transfer a get from the host (the host sent:
    /// host to device) or a put to it (the stream sent: device to host). A launch's receive at a
    /// kernel's start has nothing to do on the stream: the launch names it. A receive's post
    /// is no event.
    pub fn tie(&mut self, ev: &mut RawEvents, tie: Tie, rank: i32, on_device: bool) {
        if tie.kind == EventKind::IrecvRequest {
            return;
        }
        if !on_device {
            match self.calls.last() {
                Some(&i) if ev.peer[i] == NONE_I32 => (ev.peer[i], ev.tag[i]) = (rank, tie.other),
                Some(_) => {}
                None => self.unattached += 1,
            }
            return;
        }
        match (self.transfer, tie.kind) {
            (Some(i), kind) => {
                ev.kind[i] = if kind == EventKind::Send { EventKind::RmaPut } else { EventKind::RmaGet } as u8;
                (ev.peer[i], ev.tag[i]) = (rank, tie.other);
                if ev.bytes[i] == NONE_I64 && tie.bytes > 0 {
                    ev.bytes[i] = tie.bytes;
                }
            }
            (None, EventKind::Send) => self.unattached += 1,
            (None, _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_of_both_apis_are_classified() {
        assert_eq!(class_of(63_000_000), Some(("CUDA", Gpu::Call)));
        assert_eq!(class_of(63_000_006), Some(("CUDA", Gpu::Kernel)));
        assert_eq!(class_of(63_500_001), Some(("HIP", Gpu::Transfer)));
        assert_eq!(class_of(63_500_008), Some(("HIP", Gpu::Stream)));
        // Instantiation, lines, grid sizes: metrics.
        assert_eq!(class_of(63_000_009), None);
        assert_eq!(class_of(63_000_004), None);
        assert!(is_size(63_000_004) && is_size(63_500_004) && !is_size(63_000_014));
        assert_eq!(class_of(63_000_011), None);
        assert_eq!(class_of(63_100_000), None);
    }

    #[test]
    fn stream_names_of_every_version_give_device_and_stream() {
        use StreamName::*;
        assert_eq!(stream_of_name("GPU-D1.S2"), Some(Numbered(1, 2)));
        assert_eq!(stream_of_name("GPU-D2.S13-5f0c1d2e"), Some(Numbered(2, 13)));
        assert_eq!(stream_of_name("CUDA-D1.S1-node17"), Some(Numbered(1, 1)));
        assert_eq!(stream_of_name("HIP-D3.S4"), Some(Numbered(3, 4)));
        assert_eq!(stream_of_name("GPU -a2f80454.3"), Some(ByUuid("a2f80454".into(), 3)));
        assert_eq!(stream_of_name("GPU_a2f80454.1"), Some(ByUuid("a2f80454".into(), 1)));
        assert_eq!(stream_of_name("THREAD 1.1.2"), None);
        assert_eq!(stream_of_name("GPU-Dx.S1"), None);
        assert_eq!(stream_of_name("GPU_node.1"), None);
        let mut names = Names::new();
        assert_eq!(names.name("CUDA", Some("GPU-D1.S2"), "THREAD 1.1.2"), "CUDA[1:2]");
        assert_eq!(names.name("CUDA", Some("GPU_bb01.1"), "THREAD 1.1.2"), "CUDA[1:1]");
        assert_eq!(names.name("CUDA", Some("GPU_a2f8.2"), "THREAD 1.1.3"), "CUDA[2:2]");
        assert_eq!(names.name("CUDA", Some("GPU_bb01.2"), "THREAD 1.2.2"), "CUDA[1:2]");
        assert_eq!(names.name("HIP", None, "THREAD 1.1.2"), "HIP stream (THREAD 1.1.2)");
    }

    #[test]
    fn a_tie_gives_the_open_transfer_its_direction() {
        let mut ev = RawEvents::default();
        let mut d = Device::default();
        d.begin_transfer(&mut ev, (0, 1), 100);
        assert!(d.size(&mut ev, 4096));
        // The host sent: host to device.
        d.tie(&mut ev, Tie { other: 0, kind: EventKind::Irecv, bytes: 4096 }, 0, true);
        d.end_transfer(&mut ev, (0, 1), 300);
        ev.finish_stream(0, 1);
        assert_eq!(ev.kind(0), EventKind::RmaGet);
        assert_eq!((ev.peer[0], ev.tag[0], ev.bytes[0], ev.request[0]), (0, 0, 4096, 0));
        assert_eq!((ev.kind(1), ev.request[1]), (EventKind::RmaOpCompleteBlocking, 0));
        // A transfer with no tie is between devices: a put to the stream itself.
        d.begin_transfer(&mut ev, (0, 1), 400);
        d.end_transfer(&mut ev, (0, 1), 500);
        ev.finish_stream(0, 1);
        assert_eq!((ev.kind(2), ev.peer[2], ev.tag[2], ev.request[2]), (EventKind::RmaPut, 0, 1, 1));
        assert_eq!(d.unattached, 0);
        // A size with no transfer open is not the stream's.
        assert!(!d.size(&mut ev, 8));
    }

    #[test]
    fn a_transfer_begun_before_the_last_one_ended_keeps_an_id_of_its_own() {
        let mut ev = RawEvents::default();
        let mut d = Device::default();
        d.begin_transfer(&mut ev, (0, 1), 100);
        d.begin_transfer(&mut ev, (0, 1), 200);
        d.end_transfer(&mut ev, (0, 1), 300);
        ev.finish_stream(0, 1);
        // The end is the second one's; the first is left without one, and counted.
        assert_eq!((ev.request[0], ev.request[1], ev.request[2]), (0, 1, 1));
        assert_eq!(d.unattached, 1);
        // A stream number that is no thread (0: Extrae numbers from 1) is counted too.
        d.enter_call(&mut ev, (0, 0), 400, 3);
        d.attribute(&mut ev, Gpu::Stream, 0, 0);
        assert_eq!(d.unattached, 2);
    }

    #[test]
    fn the_host_ties_its_innermost_call_to_the_stream() {
        let mut ev = RawEvents::default();
        let mut d = Device::default();
        d.enter_call(&mut ev, (3, 0), 10, 7);
        d.tie(&mut ev, Tie { other: 2, kind: EventKind::Send, bytes: 0 }, 3, false);
        d.attribute(&mut ev, Gpu::DeviceEvent, 99, 3);
        d.leave_call();
        // Nothing open: counted.
        d.tie(&mut ev, Tie { other: 2, kind: EventKind::Irecv, bytes: 0 }, 3, false);
        d.attribute(&mut ev, Gpu::Stream, 2, 3);
        ev.finish_stream(3, 0);
        assert_eq!((ev.peer[0], ev.tag[0], ev.request[0], ev.region[0]), (3, 2, 99, 7));
        assert_eq!(d.unattached, 2);
    }
}
