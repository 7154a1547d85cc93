#!/usr/bin/python3
"""Write tests/data/otf2/omp_waits with the reference writer (python3-otf2): two MPI ranks of
two OpenMP threads each, shaped as Score-P records an OpenMP program (a critical section's
region, its lock and its structured block; omp_set_lock and omp_unset_lock regions around the
lock API's records; explicit and implicit barriers; a parallel region run with one thread),
so that every OpenMP wait state of Scalasca's hybrid analyzer (scout.hyb) occurs with a
number written out here. Both ranks have the same OpenMP times; the MPI ones differ. Times in
ns. Usage: make_omp_waits.py OUT_DIR [scout]; with scout, the run is one that scout.hyb can
analyse: no parallel region of one thread (instance 1; scout stops with "Varying numbers of
threads in OpenMP parallel regions not supported"), so the master's serial run from 2100 to
4000 is 1900 of the worker's idleness, and the message between the masters (scout stops with
"MPI calls on threads other than the master thread not supported"), the same times.

The waits (each once per rank):
  omp_fork                 master 1020 - 1000 = 20; worker 1100 - 1000 = 100; master 10 (instance 1)
  omp_join                 master 2100 - 2080 = 20; worker 2100 - 2060 = 40; master 10 (instance 1)
  omp_critical_contention  worker: the master released at 1400, the worker entered at 1250: 150
  wait_at_omp_barrier      master: entered 1600, the worker 1700: 100
  omp_lock_contention      master: entered omp_set_lock at 1800, the worker released at 1850: 50
  wait_at_omp_implicit_barrier  master: entered 1950, the worker 2000: 50
  omp_limited_parallelism  worker: instance 1 (3000 to 3200) runs the master alone: 200
  omp_idle_threads         worker: the master runs serially 0-1000, 2100-3000, 3200-4000: 2700
  wait_at_barrier (MPI)    rank 0's master entered MPI_Barrier at 2500, rank 1's at 2600: 100
  late_sender (MPI)        rank 1's worker entered MPI_Recv at 1722, rank 0's worker sent at 1730: 8
"""
import sys

import otf2
from otf2.enums import Paradigm, RegionRole, GroupType, CollectiveOp

out = sys.argv[1]
for_scout = sys.argv[2:] == ["scout"]
with otf2.writer.open(out, timer_resolution=1_000_000_000) as trace:
    d = trace.definitions
    node = d.system_tree_node("node0", class_name="node")
    ranks = [d.location_group(f"MPI Rank {r}", system_tree_parent=node) for r in range(2)]
    master = [d.location("Master thread", group=g) for g in ranks]
    worker = [d.location("OMP thread 1", group=g) for g in ranks]

    def omp(name, role):
        return d.region(name, paradigm=Paradigm.OPENMP, region_role=role, source_file="solver.c")

    def mpi(name, role):
        return d.region(name, paradigm=Paradigm.MPI, region_role=role, source_file="MPI")

    main = d.region("main", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION)
    parallel = omp("!$omp parallel @solver.c:10", RegionRole.PARALLEL)
    critical = omp("!$omp critical @solver.c:12", RegionRole.CRITICAL)
    sblock = omp("!$omp critical sblock @solver.c:12", RegionRole.CRITICAL_SBLOCK)
    ebarrier = omp("!$omp barrier @solver.c:16", RegionRole.BARRIER)
    set_lock = omp("omp_set_lock", RegionRole.FUNCTION)
    unset_lock = omp("omp_unset_lock", RegionRole.FUNCTION)
    ibarrier = omp("!$omp implicit barrier @solver.c:20", RegionRole.IMPLICIT_BARRIER)
    init, finalize = mpi("MPI_Init", RegionRole.FUNCTION), mpi("MPI_Finalize", RegionRole.FUNCTION)
    barrier = mpi("MPI_Barrier", RegionRole.BARRIER)
    send, recv = mpi("MPI_Send", RegionRole.POINT2POINT), mpi("MPI_Recv", RegionRole.POINT2POINT)
    d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=master)
    world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                                  paradigm=Paradigm.MPI, members=[0, 1]))
    d.group("OpenMP", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.OPENMP,
            members=[master[0], worker[0], master[1], worker[1]])
    teams = [d.comm(f"team {r}", group=d.group(f"team {r}", group_type=GroupType.COMM_GROUP,
                                                 paradigm=Paradigm.OPENMP, members=[2 * r, 2 * r + 1]))
             for r in range(2)]
    solo = [d.comm(f"solo team {r}", group=d.group(f"solo team {r}", group_type=GroupType.COMM_GROUP,
                                                     paradigm=Paradigm.OPENMP, members=[2 * r]))
            for r in range(2)]

    for r in range(2):
        m = trace.event_writer_from_location(master[r])
        w = trace.event_writer_from_location(worker[r])
        critical_lock, api_lock = 100 + r, 200 + r
        m.enter(0, main)
        m.enter(10, init); m.leave(500, init)
        # Instance 0: both threads.
        m.thread_fork(1000, Paradigm.OPENMP, 2)
        m.thread_team_begin(1020, teams[r]); m.enter(1020, parallel)
        w.thread_team_begin(1100, teams[r]); w.enter(1100, parallel)
        # The critical section: the master first, the worker waits for it.
        m.enter(1200, critical); m.thread_acquire_lock(1210, Paradigm.OPENMP, critical_lock, 1)
        m.enter(1210, sblock); m.leave(1400, sblock)
        m.thread_release_lock(1400, Paradigm.OPENMP, critical_lock, 1); m.leave(1410, critical)
        w.enter(1250, critical); w.thread_acquire_lock(1420, Paradigm.OPENMP, critical_lock, 2)
        w.enter(1420, sblock); w.leave(1500, sblock)
        w.thread_release_lock(1500, Paradigm.OPENMP, critical_lock, 2); w.leave(1510, critical)
        # An explicit barrier: the master waits for the worker.
        m.enter(1600, ebarrier); m.leave(1720, ebarrier)
        w.enter(1700, ebarrier); w.leave(1720, ebarrier)
        # MPI from the worker threads: rank 1's receive waits for rank 0's send.
        p = m if for_scout else w
        if r == 0:
            p.enter(1730, send); p.mpi_send(1730, 1, world, 7, 64); p.leave(1740, send)
        else:
            p.enter(1722, recv); p.mpi_recv(1745, 0, world, 7, 64); p.leave(1746, recv)
        # The lock API: the worker takes the lock first, the master waits for it.
        w.enter(1750, set_lock); w.thread_acquire_lock(1760, Paradigm.OPENMP, api_lock, 1); w.leave(1770, set_lock)
        w.enter(1840, unset_lock); w.thread_release_lock(1850, Paradigm.OPENMP, api_lock, 1)
        w.leave(1855, unset_lock)
        m.enter(1800, set_lock); m.thread_acquire_lock(1860, Paradigm.OPENMP, api_lock, 2); m.leave(1870, set_lock)
        m.enter(1900, unset_lock); m.thread_release_lock(1905, Paradigm.OPENMP, api_lock, 2)
        m.leave(1910, unset_lock)
        # The implicit barrier at the region's end.
        m.enter(1950, ibarrier); m.leave(2050, ibarrier)
        w.enter(2000, ibarrier); w.leave(2050, ibarrier)
        w.leave(2060, parallel); w.thread_team_end(2060, teams[r])
        m.leave(2080, parallel); m.thread_team_end(2080, teams[r])
        m.thread_join(2100, Paradigm.OPENMP)
        # MPI on the master between the regions.
        enter = 2500 if r == 0 else 2600
        m.enter(enter, barrier); m.mpi_collective_begin(enter + 1)
        m.mpi_collective_end(2799, CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0); m.leave(2800, barrier)
        # Instance 1: a team of one thread.
        if for_scout:
            m.enter(3500, finalize); m.leave(3900, finalize)
            m.leave(4000, main)
            continue
        m.thread_fork(3000, Paradigm.OPENMP, 1)
        m.thread_team_begin(3010, solo[r]); m.enter(3010, parallel)
        m.leave(3190, parallel); m.thread_team_end(3190, solo[r])
        m.thread_join(3200, Paradigm.OPENMP)
        m.enter(3500, finalize); m.leave(3900, finalize)
        m.leave(4000, main)
