#!/usr/bin/python3
"""Write a small OTF2 archive with the reference writer (python3-otf2), covering what commdb
reads: system tree with two nodes, three MPI ranks (rank 0 with two threads), user and MPI
regions, blocking and non-blocking messages, a collective, metrics, a communicator that is not
MPI_COMM_WORLD, and clock offsets. Usage: make_fixture.py OUT_DIR"""
import sys

import otf2
from otf2.enums import (Type, Paradigm, RegionRole, GroupType, LocationType, CollectiveOp,
                        MetricType, MetricMode, Base, MetricOccurrence, RecorderKind)
import _otf2

out = sys.argv[1]
with otf2.writer.open(out, timer_resolution=1_000_000_000) as trace:
    d = trace.definitions
    root = d.system_tree_node("cluster", class_name="machine")
    nodes = [d.system_tree_node(f"node{i}", class_name="node", parent=root) for i in range(2)]
    groups = [d.location_group(f"MPI Rank {r}", system_tree_parent=nodes[0 if r < 2 else 1]) for r in range(3)]
    threads = [d.location("Master thread", group=groups[0]), d.location("Master thread", group=groups[1]),
               d.location("Master thread", group=groups[2]), d.location("Worker thread", group=groups[0])]
    main = d.region("main", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION,
                    source_file="app.c", begin_line_number=10, end_line_number=90)
    r_send = d.region("MPI_Send", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_recv = d.region("MPI_Recv", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_isend = d.region("MPI_Isend", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_irecv = d.region("MPI_Irecv", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_wait = d.region("MPI_Wait", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_bcast = d.region("MPI_Bcast", paradigm=Paradigm.MPI, region_role=RegionRole.COLL_ONE2ALL)
    work = d.region("work", paradigm=Paradigm.USER)
    world_locs = d.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS,
                         paradigm=Paradigm.MPI, members=threads[:3])
    world_group = d.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[0, 1, 2])
    world = d.comm("MPI_COMM_WORLD", group=world_group)
    # ranks 2 and 1, in that order: comm rank 0 is world rank 2
    sub_group = d.group("sub", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[2, 1])
    sub = d.comm("sub comm", group=sub_group, parent=world)
    flops = d.metric_member("PAPI_FP_OPS", metric_type=MetricType.PAPI, metric_mode=MetricMode.ACCUMULATED_START,
                            value_type=Type.UINT64, base=Base.DECIMAL, exponent=0, unit="#")
    temp = d.metric_member("temperature", value_type=Type.DOUBLE, unit="C")
    mclass = d.metric_class([flops, temp], MetricOccurrence.SYNCHRONOUS, RecorderKind.CPU)

    w0, w1, w2, w3 = (trace.event_writer_from_location(l) for l in threads)
    for w in (w0, w1, w2, w3):
        w.enter(1000, main)
    # blocking 0 -> 1 on world
    w0.enter(2000, r_send); w0.mpi_send(2100, 1, world, 7, 4096); w0.leave(2200, r_send)
    w1.enter(1500, r_recv); w1.mpi_recv(2600, 0, world, 7, 4096); w1.leave(2700, r_recv)
    # non-blocking 2 -> 1 on the sub communicator: sender comm rank 0 (world 2), receiver comm rank 1 (world 1)
    w1.enter(3000, r_irecv); w1.mpi_irecv_request(3050, 42); w1.leave(3100, r_irecv)
    w2.enter(3200, r_isend); w2.mpi_isend(3250, 1, sub, 3, 800, 9); w2.leave(3300, r_isend)
    w2.enter(3400, r_wait); w2.mpi_isend_complete(3450, 9); w2.leave(3500, r_wait)
    w1.enter(3600, r_wait); w1.mpi_irecv(3900, 0, sub, 3, 800, 42); w1.leave(4000, r_wait)
    # a bcast rooted at world rank 0
    for w, t in ((w0, 5000), (w1, 5100), (w2, 5200)):
        w.enter(t, r_bcast); w.mpi_collective_begin(t + 10)
        w.mpi_collective_end(5600 + (t - 5000), CollectiveOp.BCAST, world, 0, 64, 64 if w is w0 else 0)
        w.leave(5700 + (t - 5000), r_bcast)
    # worker thread of rank 0 computes and samples metrics
    w3.enter(1200, work)
    w3.metric(1300, mclass, [1000, 36.5])
    w3.metric(1900, mclass, [5000, 37.25])
    w3.leave(2000, work)
    for w in (w0, w1, w2, w3):
        w.leave(9000, main)

    # clock offsets on rank 1 through the low-level API
    def_writer = _otf2.Archive_GetDefWriter(trace._handle, threads[1]._ref)
    _otf2.DefWriter_WriteClockOffset(def_writer, 1000, 250, 12.5)
    _otf2.DefWriter_WriteClockOffset(def_writer, 9000, -150, 3.0)
