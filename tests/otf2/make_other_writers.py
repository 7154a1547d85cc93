#!/usr/bin/python3
"""Write OTF2 archives as writers other than Score-P produce them, with the reference writer
(python3-otf2). Usage: make_other_writers.py OUT_DIR VARIANT, VARIANT one of
  self     four ranks; point-to-point messages and collectives on MPI_COMM_SELF (a group of type
           COMM_SELF, no members listed), on a sub-communicator of world ranks 3 and 1 and on one
           whose group is flagged GLOBAL_MEMBERS (no members listed: every rank), and one send to
           a rank outside the sub-communicator;
  noclass  the same ranks under system-tree nodes whose class is empty;
  custom   the same ranks under system-tree nodes of class "host"."""
import sys

import otf2
from otf2.enums import Paradigm, RegionRole, GroupType, GroupFlag, CollectiveOp

out, variant = sys.argv[1], sys.argv[2]
node_class = {"self": "node", "noclass": "", "custom": "host"}[variant]
with otf2.writer.open(out, timer_resolution=1_000_000_000) as trace:
    d = trace.definitions
    root = d.system_tree_node("machine", class_name="")
    nodes = [d.system_tree_node(f"n{i}", class_name=node_class, parent=root) for i in range(2)]
    groups = [d.location_group(f"rank {r}", system_tree_parent=nodes[r // 2]) for r in range(4)]
    threads = [d.location("main", group=g) for g in groups]
    main = d.region("main", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION)
    r_send = d.region("MPI_Send", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_recv = d.region("MPI_Recv", paradigm=Paradigm.MPI, region_role=RegionRole.POINT2POINT)
    r_barrier = d.region("MPI_Barrier", paradigm=Paradigm.MPI, region_role=RegionRole.BARRIER)
    r_allreduce = d.region("MPI_Allreduce", paradigm=Paradigm.MPI, region_role=RegionRole.COLL_ALL2ALL)
    d.group("world locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=threads)
    world_group = d.group("world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[0, 1, 2, 3])
    world = d.comm("MPI_COMM_WORLD", group=world_group)
    self_group = d.group("self", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI, members=[])
    comm_self = d.comm("MPI_COMM_SELF", group=self_group)
    # communicator rank 0 is world rank 3, rank 1 is world rank 1
    sub_group = d.group("sub", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[3, 1])
    sub = d.comm("sub", group=sub_group, parent=world)
    # a group flagged GLOBAL_MEMBERS lists no members: it holds every rank of the world group
    all_group = d.group("all", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                        group_flags=GroupFlag.GLOBAL_MEMBERS, members=[])
    everyone = d.comm("everyone", group=all_group, parent=world)

    w = [trace.event_writer_from_location(t) for t in threads]
    for x in w:
        x.enter(1000, main)
    # every rank sends itself a message on MPI_COMM_SELF (peer: its own rank 0)
    for r, x in enumerate(w):
        t = 2000 + 1000 * r
        x.enter(t, r_send); x.mpi_send(t + 10, 0, comm_self, 5, 100 + r); x.leave(t + 20, r_send)
        x.enter(t + 30, r_recv); x.mpi_recv(t + 40, 0, comm_self, 5, 100 + r); x.leave(t + 50, r_recv)
    # a barrier on MPI_COMM_SELF per rank, at very different times: one participant each
    for r, x in enumerate(w):
        t = 10000 + 100000 * r
        x.enter(t, r_barrier); x.mpi_collective_begin(t + 1)
        x.mpi_collective_end(t + 5, CollectiveOp.BARRIER, comm_self, 0xFFFFFFFF, 0, 0)
        x.leave(t + 6, r_barrier)
    # sub communicator: world 3 (sub rank 0) sends to world 1 (sub rank 1), then both allreduce
    w[3].enter(500000, r_send); w[3].mpi_send(500010, 1, sub, 9, 64); w[3].leave(500020, r_send)
    w[1].enter(499000, r_recv); w[1].mpi_recv(500900, 0, sub, 9, 64); w[1].leave(501000, r_recv)
    for r in (3, 1):
        t = 510000 + r
        w[r].enter(t, r_allreduce); w[r].mpi_collective_begin(t + 1)
        w[r].mpi_collective_end(520000, CollectiveOp.ALLREDUCE, sub, 0xFFFFFFFF, 8, 8)
        w[r].leave(520001, r_allreduce)
    # world rank 0 sends to sub rank 7, which the sub communicator does not have
    w[0].enter(530000, r_send); w[0].mpi_send(530010, 7, sub, 1, 8); w[0].leave(530020, r_send)
    # world rank 2 sends to world rank 3 on the communicator of every rank
    w[2].enter(540000, r_send); w[2].mpi_send(540010, 3, everyone, 2, 16); w[2].leave(540020, r_send)
    w[3].enter(540000, r_recv); w[3].mpi_recv(540500, 2, everyone, 2, 16); w[3].leave(540600, r_recv)
    for x in w:
        x.leave(600000, main)
