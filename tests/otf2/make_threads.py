#!/usr/bin/python3
"""Write tests/data/otf2/threads with the reference writer (python3-otf2): two MPI ranks of two
OpenMP threads each, as Score-P records them (ThreadFork, ThreadTeamBegin/End and the parallel
region on every member, ThreadJoin, a critical section's ThreadAcquireLock/ReleaseLock, tasks'
ThreadTaskCreate/Switch/Complete inside their regions), between MPI_Init and MPI_Finalize, so
that Scalasca's hybrid analyzer (scout.hyb) reads it too. Times in ns; each is listed in
tests/slt/threads.slt. Usage: make_threads.py OUT_DIR [pthread]; with pthread, the locks are
recorded as Pthreads mutexes (their model PTHREAD instead of OPENMP)."""
import sys

import otf2
from otf2.enums import Paradigm, RegionRole, GroupType, CollectiveOp

out = sys.argv[1]
lock_model = Paradigm.PTHREAD if sys.argv[2:] == ["pthread"] else Paradigm.OPENMP
with otf2.writer.open(out, timer_resolution=1_000_000_000) as trace:
    d = trace.definitions
    node = d.system_tree_node("node0", class_name="node")
    ranks = [d.location_group(f"MPI Rank {r}", system_tree_parent=node) for r in range(2)]
    master = [d.location("Master thread", group=g) for g in ranks]
    worker = [d.location("OMP thread 1", group=g) for g in ranks]
    main = d.region("main", paradigm=Paradigm.USER, region_role=RegionRole.FUNCTION)
    parallel = d.region("!$omp parallel @solver.c:10", paradigm=Paradigm.OPENMP, region_role=RegionRole.PARALLEL)
    ibarrier = d.region("!$omp implicit barrier @solver.c:20", paradigm=Paradigm.OPENMP,
                        region_role=RegionRole.IMPLICIT_BARRIER)
    task = d.region("!$omp task @solver.c:30", paradigm=Paradigm.OPENMP, region_role=RegionRole.TASK)
    create = d.region("!$omp create task @solver.c:30", paradigm=Paradigm.OPENMP,
                      region_role=RegionRole.TASK_CREATE)
    barrier = d.region("MPI_Barrier", paradigm=Paradigm.MPI, region_role=RegionRole.BARRIER, source_file="MPI")
    init = d.region("MPI_Init", paradigm=Paradigm.MPI, region_role=RegionRole.FUNCTION, source_file="MPI")
    finalize = d.region("MPI_Finalize", paradigm=Paradigm.MPI, region_role=RegionRole.FUNCTION, source_file="MPI")
    d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=master)
    world = d.comm("MPI_COMM_WORLD", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                                  paradigm=Paradigm.MPI, members=[0, 1]))
    # OpenMP's locations: rank 0's master and worker, then rank 1's.
    d.group("OpenMP", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.OPENMP,
            members=[master[0], worker[0], master[1], worker[1]])
    teams = [d.comm(f"team {r}", group=d.group(f"team {r}", group_type=GroupType.COMM_GROUP,
                                                 paradigm=Paradigm.OPENMP, members=[2 * r, 2 * r + 1]))
             for r in range(2)]

    for r in range(2):
        m = trace.event_writer_from_location(master[r])
        w = trace.event_writer_from_location(worker[r])
        s = 50 * r  # rank 1 runs 50 ns later
        lock = 7 if r == 0 else 9
        m.enter(0 + s, main)
        m.enter(10 + s, init); m.leave(500, init)
        # Instance 0: a parallel region with a critical section on each thread.
        m.thread_fork(1000 + s, Paradigm.OPENMP, 2)
        m.thread_team_begin(1100 + s, teams[r]); m.enter(1100 + s, parallel)
        w.thread_team_begin(1300 + s, teams[r]); w.enter(1300 + s, parallel)
        m.thread_acquire_lock(1500 + s, lock_model, lock, 1)
        m.thread_release_lock(1700 + s, lock_model, lock, 1)
        w.thread_acquire_lock(1800 + s, lock_model, lock, 2)
        w.thread_release_lock(1950 + s, lock_model, lock, 2)
        m.enter(2000 + s, ibarrier); w.enter(2200 + s, ibarrier)
        m.leave(2600 + s, ibarrier); w.leave(2600 + s, ibarrier)
        w.leave(2620 + s, parallel); w.thread_team_end(2640 + s, teams[r])
        m.leave(2650 + s, parallel); m.thread_team_end(2700 + s, teams[r])
        m.thread_join(2900 + s, Paradigm.OPENMP)
        # MPI between the parallel regions, on the master thread.
        m.enter(3000 + s, barrier); m.mpi_collective_begin(3001 + s)
        m.mpi_collective_end(3499, CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0); m.leave(3500, barrier)
        if r == 0:
            # Instance 1 (rank 0 only): a region without locks, where the master creates two
            # tasks: the worker runs the first, the master the second, suspended once.
            m.thread_fork(4000, Paradigm.OPENMP, 2)
            m.thread_team_begin(4050, teams[0]); m.enter(4050, parallel)
            w.thread_team_begin(4200, teams[0]); w.enter(4200, parallel)
            m.enter(4090, create); m.thread_task_create(4100, teams[0], 0, 1); m.leave(4110, create)
            m.enter(4140, create); m.thread_task_create(4150, teams[0], 0, 2); m.leave(4160, create)
            w.thread_task_switch(4300, teams[0], 0, 1); w.enter(4300, task)
            w.leave(4600, task); w.thread_task_complete(4600, teams[0], 0, 1)
            m.thread_task_switch(4400, teams[0], 0, 2); m.enter(4400, task)
            m.thread_task_switch(4500, teams[0], 0, 2)
            m.leave(4800, task); m.thread_task_complete(4800, teams[0], 0, 2)
            w.leave(4900, parallel); w.thread_team_end(4900, teams[0])
            m.leave(5000, parallel); m.thread_team_end(5000, teams[0])
            m.thread_join(5100, Paradigm.OPENMP)
        m.enter(5500, finalize); m.leave(5900, finalize)
        m.leave(6000, main)
