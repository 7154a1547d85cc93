#!/usr/bin/python3
"""Write tests/data/otf2/gpu with the reference writer (python3-otf2): one MPI rank whose host
thread drives two CUDA streams, as Score-P records CUDA into OTF2: the streams are locations of
type ACCELERATOR_STREAM in the rank's group; a window over the group of the host thread and the
streams (paradigm CUDA); each kernel a region entered and left on its stream; each transfer an
RMA record on the stream (RmaGet: the device reads from the host, RmaPut: it writes to it; the
remote end is the host thread, or the other stream for a copy between devices) completed by
RmaOpCompleteBlocking with the same matching id (Score-P 1.x gives every one 42); a launch
names its stream by the attribute CUDA_STREAM_REF (a location), a stream synchronisation too,
an event record its event by CUDA_EVENT_REF (a number); attributes of other types (a double, a
16-bit and an 8-bit number, a string) stand beside them. Times in ns, each listed in
tests/slt/gpu.slt:

  stream CUDA[0:7]:   host to device  1,000 bytes  100 - 150
                      kernel jacobi   200 - 700
                      kernel copy     750 - 800
                      device to host  4 bytes      900 - 920
                      device to device 64 bytes from CUDA[0:8]  950 - 990
  stream CUDA[0:8]:   kernel jacobi   300 - 500
                      kernel reduce   1,100 - 1,400
                      kernel copy     1,400 - 1,500
  host: main 0 - 2,000; cuMemcpyHtoD 90 - 160; cuLaunchKernel 180 - 190 (CUDA[0:7]),
        290 - 295 (CUDA[0:8]) and 700 - 710 (CUDA[0:7]); cuEventRecord 720 - 725 (event 77 on
        CUDA[0:7]); cuStreamSynchronize 730 - 805 (CUDA[0:7]); cuMemcpyDtoH 880 - 930;
        cuLaunchKernel 1,000 - 1,005 (CUDA[0:8]); cuEventRecord 1,010 - 1,015 (event 78 on
        CUDA[0:8]); cuLaunchKernel 1,020 - 1,025 (CUDA[0:8]); cuEventSynchronize 1,050 - 1,405
        (event 78); cuCtxSynchronize 1,450 - 1,510; cuStreamSynchronize 1,600 - 1,610 naming no
        stream.
Usage: make_gpu.py OUT_DIR [TICKS_PER_SECOND]
(default 1,000,000,000: the times are ns; tests/casita/oracle.sh writes it with 1,000,000, the
times in µs, as CASITA prints seconds to six places)"""
import sys

import otf2
from otf2.enums import GroupType, LocationType, Paradigm, RegionRole, Type

out = sys.argv[1]
ticks_per_second = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000_000
with otf2.writer.open(out, timer_resolution=ticks_per_second) as trace:
    d = trace.definitions
    node = d.system_tree_node("node0", class_name="node")
    rank = d.location_group("MPI Rank 0", system_tree_parent=node)
    host = d.location("Master thread", group=rank)
    s7 = d.location("CUDA[0:7]", group=rank, type=LocationType.ACCELERATOR_STREAM)
    s8 = d.location("CUDA[0:8]", group=rank, type=LocationType.ACCELERATOR_STREAM)

    def region(name, paradigm):
        return d.region(name, paradigm=paradigm, region_role=RegionRole.FUNCTION)

    main = region("main", Paradigm.USER)
    h2d, d2h = region("cuMemcpyHtoD_v2", Paradigm.CUDA), region("cuMemcpyDtoH_v2", Paradigm.CUDA)
    launch, sync = region("cuLaunchKernel", Paradigm.CUDA), region("cuStreamSynchronize", Paradigm.CUDA)
    record = region("cuEventRecord", Paradigm.CUDA)
    event_sync, ctx_sync = region("cuEventSynchronize", Paradigm.CUDA), region("cuCtxSynchronize", Paradigm.CUDA)
    stream_ref = d.attribute("CUDA_STREAM_REF", "Referenced CUDA stream", Type.LOCATION)
    event_ref = d.attribute("CUDA_EVENT_REF", "ID (address) of referenced CUDA event", Type.UINT64)
    others = {d.attribute("ratio", "a double", Type.DOUBLE): 1.5, d.attribute("small", "16 bits", Type.INT16): -3,
              d.attribute("acc_implicit", "8 bits", Type.INT8): 1, d.attribute("note", "a string", Type.STRING): "x"}
    jacobi, copy = region("jacobi_kernel", Paradigm.CUDA), region("copy_kernel", Paradigm.CUDA)
    reduce = region("reduce_kernel", Paradigm.CUDA)
    init = d.region("MPI_Init", paradigm=Paradigm.MPI, region_role=RegionRole.FUNCTION, source_file="MPI")
    d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=[host])
    d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                           members=[0]))
    d.group("CUDA", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.CUDA, members=[host, s7, s8])
    cuda = d.comm("CUDA", group=d.group("CUDA_GROUP", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.CUDA,
                                        members=[0, 1, 2]))
    win = d.rma_win("CUDA_WINDOW", cuda)

    h = trace.event_writer_from_location(host)
    h.enter(0, main, attributes=others)
    h.enter(10, init); h.leave(50, init)
    h.rma_win_create(60, win)
    h.enter(90, h2d); h.leave(160, h2d)
    h.enter(180, launch, attributes={stream_ref: s7}); h.leave(190, launch)
    h.enter(290, launch, attributes={stream_ref: s8}); h.leave(295, launch)
    h.enter(700, launch, attributes={stream_ref: s7, **others}); h.leave(710, launch)
    h.enter(720, record); h.leave(725, record, attributes={event_ref: 77, stream_ref: s7})
    h.enter(730, sync); h.leave(805, sync, attributes={stream_ref: s7})
    h.enter(880, d2h); h.leave(930, d2h)
    h.enter(1000, launch, attributes={stream_ref: s8}); h.leave(1005, launch)
    h.enter(1010, record); h.leave(1015, record, attributes={event_ref: 78, stream_ref: s8})
    h.enter(1020, launch, attributes={stream_ref: s8}); h.leave(1025, launch)
    h.enter(1050, event_sync); h.leave(1405, event_sync, attributes={event_ref: 78})
    h.enter(1450, ctx_sync); h.leave(1510, ctx_sync)
    h.enter(1600, sync); h.leave(1610, sync)
    h.rma_win_destroy(1990, win)
    h.leave(2000, main)

    a = trace.event_writer_from_location(s7)
    a.rma_win_create(70, win)
    a.rma_get(100, win, 0, 1000, 42); a.rma_op_complete_blocking(150, win, 42)
    a.enter(200, jacobi); a.leave(700, jacobi)
    a.enter(750, copy); a.leave(800, copy)
    a.rma_put(900, win, 0, 4, 42); a.rma_op_complete_blocking(920, win, 42)
    a.rma_get(950, win, 2, 64, 42); a.rma_op_complete_blocking(990, win, 42)
    a.rma_win_destroy(1980, win)

    b = trace.event_writer_from_location(s8)
    b.rma_win_create(75, win)
    b.enter(300, jacobi); b.leave(500, jacobi)
    b.enter(1100, reduce); b.leave(1400, reduce)
    b.enter(1400, copy); b.leave(1500, copy)
    b.rma_win_destroy(1985, win)
