#!/usr/bin/python3
"""Write an OTF2 archive of the shapes commdb's generator does not make, with the reference
writer (python3-otf2), for the Scalasca oracle (tests/scalasca/oracle.sh): four ranks on two
nodes, regions named as Score-P names them (MPI calls with source file "MPI"), and

  - blocking sends of 1 MiB whose receive is posted late (late receivers), and blocking
    receives posted before their send (late senders);
  - MPI_Isend / MPI_Irecv completed by MPI_Waitall, some receives posted after the Waitall
    began (late receivers in a completion call);
  - every rooted and N x N collective kind on MPI_COMM_WORLD: MPI_Barrier, MPI_Bcast (root
    late), MPI_Reduce and MPI_Gather (root early), MPI_Scan (a high rank early),
    MPI_Allreduce, MPI_Alltoall;
  - MPI_Allreduce and point-to-point messages on a sub-communicator of world ranks 2 and 0.

Times are in ns; each round's delays vary with the round so that waits differ.
Usage: make_shapes.py OUT_DIR [ROUNDS [noscan]] (noscan: without the MPI_Scan, whose waits
Scalasca's critical path does not follow: docs/departures.md)
"""
import sys

import otf2
from otf2.enums import CollectiveOp, GroupType, Paradigm, RegionRole

out = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 120
with_scan = (sys.argv[3] if len(sys.argv) > 3 else "") != "noscan"
RANKS = 4
UNDEFINED = 0xFFFFFFFF

with otf2.writer.open(out, timer_resolution=1_000_000_000) as trace:
    d = trace.definitions
    root = d.system_tree_node("cluster", class_name="machine")
    nodes = [d.system_tree_node(f"node{i}", class_name="node", parent=root) for i in range(2)]
    groups = [d.location_group(f"rank {r}", system_tree_parent=nodes[r // 2]) for r in range(RANKS)]
    threads = [d.location("Master thread", group=g) for g in groups]

    def mpi(name, role):
        return d.region(name, paradigm=Paradigm.MPI, region_role=role, source_file="MPI")

    main = d.region("main", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION, source_file="shapes.c")
    compute = d.region("compute", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION, source_file="shapes.c")
    r_init = mpi("MPI_Init", RegionRole.FUNCTION)
    r_finalize = mpi("MPI_Finalize", RegionRole.FUNCTION)
    r_send = mpi("MPI_Send", RegionRole.POINT2POINT)
    r_recv = mpi("MPI_Recv", RegionRole.POINT2POINT)
    r_isend = mpi("MPI_Isend", RegionRole.POINT2POINT)
    r_irecv = mpi("MPI_Irecv", RegionRole.POINT2POINT)
    r_waitall = mpi("MPI_Waitall", RegionRole.POINT2POINT)
    r_barrier = mpi("MPI_Barrier", RegionRole.BARRIER)
    r_bcast = mpi("MPI_Bcast", RegionRole.COLL_ONE2ALL)
    r_reduce = mpi("MPI_Reduce", RegionRole.COLL_ALL2ONE)
    r_gather = mpi("MPI_Gather", RegionRole.COLL_ALL2ONE)
    r_scan = mpi("MPI_Scan", RegionRole.COLL_OTHER)
    r_allreduce = mpi("MPI_Allreduce", RegionRole.COLL_ALL2ALL)
    r_alltoall = mpi("MPI_Alltoall", RegionRole.COLL_ALL2ALL)
    d.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
            members=threads)
    world_group = d.group("MPI_COMM_WORLD group", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                          members=list(range(RANKS)))
    world = d.comm("MPI_COMM_WORLD", group=world_group)
    # communicator rank 0 is world rank 2, rank 1 is world rank 0
    sub_group = d.group("sub group", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[2, 0])
    sub = d.comm("sub", group=sub_group, parent=world)

    w = [trace.event_writer_from_location(t) for t in threads]
    request = [0] * RANKS

    def call(r, region, start, end, *events):
        """Rank r calls `region` from start to end; events are (time, method, args) inside."""
        w[r].enter(start, region)
        for t, method, args in events:
            getattr(w[r], method)(t, *args)
        w[r].leave(end, region)

    def work(r, start, end):
        if end > start:
            call(r, compute, start, end)

    def collective(op, region, comm, members, enters, root, sent, received, duration=400):
        """Every member enters at enters[i]; all leave `duration` after the last enter."""
        last = max(enters)
        for r, t in zip(members, enters):
            work(r, clock[r], t)
            call(r, region, t, last + duration,
                 (t + 5, "mpi_collective_begin", ()),
                 (last + duration - 5, "mpi_collective_end", (op, comm, root, sent, received)))
            clock[r] = last + duration
        return last + duration

    for r in range(RANKS):
        w[r].enter(0, main)
        call(r, r_init, 0, 1000)
    clock = [1000] * RANKS

    def sync_to(t):
        for r in range(RANKS):
            work(r, clock[r], t)
            clock[r] = t

    for k in range(rounds):
        base = max(clock) + 1000
        sync_to(base)
        late = 300 + 37 * (k % 11)
        big = 1 << 20
        # Rank 0 sends 1 MiB to rank 1, which posts its receive `late` ns after: a late
        # receiver on rank 0 (rendezvous: the send completes after the post).
        post = base + late
        call(0, r_send, base, post + 250, (base + 10, "mpi_send", (1, world, 1, big)))
        work(1, base, post)
        call(1, r_recv, post, post + 240, (post + 230, "mpi_recv", (0, world, 1, big)))
        # Rank 3 posts its receive at base; rank 2 sends `late` ns after: a late sender.
        work(2, base, post)
        call(2, r_send, post, post + 120, (post + 10, "mpi_send", (3, world, 2, 64)))
        call(3, r_recv, base, post + 110, (post + 100, "mpi_recv", (2, world, 2, 64)))
        clock[0], clock[1], clock[2], clock[3] = post + 250, post + 240, post + 120, post + 110
        t = post + 300
        sync_to(t)
        # Rank 1 Isends 1 MiB to rank 0 and waits in MPI_Waitall; rank 0 posts its Irecv late:
        # a late receiver in the completion call. Rank 3 Irecvs from rank 2 early and waits.
        request[1] += 1
        call(1, r_isend, t, t + 50, (t + 20, "mpi_isend", (0, world, 3, big, request[1])))
        wait_start = t + 60
        post = t + 60 + late
        request[0] += 1
        work(0, t, post)
        call(0, r_irecv, post, post + 40, (post + 20, "mpi_irecv_request", (request[0],)))
        call(0, r_waitall, post + 40, post + 400, (post + 390, "mpi_irecv", (1, world, 3, big, request[0])))
        work(1, t + 50, wait_start)
        call(1, r_waitall, wait_start, post + 380, (post + 370, "mpi_isend_complete", (request[1],)))
        request[3] += 1
        call(3, r_irecv, t, t + 40, (t + 20, "mpi_irecv_request", (request[3],)))
        request[2] += 1
        work(2, t, t + late)
        call(2, r_isend, t + late, t + late + 50,
             (t + late + 20, "mpi_isend", (3, world, 4, 64, request[2])))
        call(2, r_waitall, t + late + 50, t + late + 90, (t + late + 80, "mpi_isend_complete", (request[2],)))
        call(3, r_waitall, t + 40, t + late + 200, (t + late + 190, "mpi_irecv", (2, world, 4, 64, request[3])))
        clock[0], clock[1], clock[2], clock[3] = post + 400, post + 380, t + late + 90, t + late + 200
        t = max(clock) + 100
        sync_to(t)
        # Collectives on MPI_COMM_WORLD, each with one rank late (or early).
        d1 = 200 + 13 * (k % 7)
        t = collective(CollectiveOp.BARRIER, r_barrier, world, range(4), [t, t, t + d1, t], UNDEFINED, 0, 0)
        sync_to(t)
        t = collective(CollectiveOp.BCAST, r_bcast, world, range(4), [t, t + 20, t, t + d1], 3, 1024, 1024)
        sync_to(t)
        t = collective(CollectiveOp.REDUCE, r_reduce, world, range(4), [t + d1, t, t + d1 // 2, t + 10], 1, 8, 8)
        sync_to(t)
        t = collective(CollectiveOp.GATHER, r_gather, world, range(4), [t, t + d1, t + 30, t + d1 // 3], 0, 64, 256)
        sync_to(t)
        if with_scan:
            t = collective(CollectiveOp.SCAN, r_scan, world, range(4), [t + d1, t + 50, t, t], UNDEFINED, 8, 8)
            sync_to(t)
        t = collective(CollectiveOp.ALLREDUCE, r_allreduce, world, range(4), [t, t + d1, t, t + 40], UNDEFINED, 8, 8)
        sync_to(t)
        t = collective(CollectiveOp.ALLTOALL, r_alltoall, world, range(4), [t + 15, t, t + d1, t], UNDEFINED, 64, 64)
        sync_to(t)
        # The sub-communicator: world rank 2 (sub rank 0) sends to world rank 0 (sub rank 1),
        # which waits for it, then both reduce; ranks 1 and 3 compute.
        call(0, r_recv, t, t + d1 + 100, (t + d1 + 90, "mpi_recv", (0, sub, 9, 64)))
        work(2, t, t + d1)
        call(2, r_send, t + d1, t + d1 + 50, (t + d1 + 10, "mpi_send", (1, sub, 9, 64)))
        t2 = t + d1 + 100
        clock[0], clock[2] = t2, t + d1 + 50
        work(2, clock[2], t2)
        clock[2] = t2
        collective(CollectiveOp.ALLREDUCE, r_allreduce, sub, [2, 0], [t2 + 30, t2], UNDEFINED, 8, 8)
        sync_to(max(clock))

    t = max(clock) + 1000
    sync_to(t)
    for r in range(RANKS):
        call(r, r_finalize, t + 10 * r, t + 2000)
        w[r].leave(t + 3000, main)
