#!/usr/bin/python3
"""Write tests/data/paraver/omp/omp.{prv,pcf,row}: two MPI tasks of two OpenMP threads as
Extrae records an OpenMP program built with GCC (libgomp's wrappers): on the master, type
60000001 opens (3) and closes (0) each parallel region around its fork and join; every member
runs the outlined function between 60000018 records (with its line event 60000118); the
unnamed critical section is type 60000007 (3 acquiring, 6 held, 5 releasing, 0 released);
omp_set_lock / omp_unset_lock are the named lock 60000006 with the lock's address as
60000032 after the 6 (and 0 after the 0, as Extrae's merger writes it); an explicit barrier is
60000005; a loop is 60000002 (4) with its implicit barrier as the worksharing join 60000016
(1 with wait). Times in ns, the same OpenMP times on both tasks. Usage: make_omp.py OUT_DIR.

The waits (each once per rank but the MPI ones), as tests/slt/paraver_omp.slt checks them:
  omp_fork                 master 1020 - 1000 = 20; worker 1100 - 1000 = 100; master 10 (instance 1)
  omp_join                 master 2100 - 2080 = 20; worker 2100 - 2060 = 40; master 10 (instance 1)
  omp_critical_contention  worker: the master released at 1400, the worker began acquiring at 1250: 150;
                           master: the worker released the named lock at 1850, the master began at 1800: 50
  wait_at_omp_barrier      master: entered 1600, the worker 1700: 100
  wait_at_omp_implicit_barrier  master: joined the loop at 1950, the worker at 2000: 50
  omp_limited_parallelism  worker: instance 1 (3000 to 3200) runs the master alone: 200
  omp_idle_threads         worker: the master runs serially 0-1000, 2100-3000, 3200-4000: 2700
  wait_at_barrier (MPI)    task 1's master entered MPI_Barrier at 2500, task 2's at 2600: 100
  late_sender (MPI)        task 2's worker entered MPI_Recv at 1722, task 1's worker sent at 1730: 8
"""
import os
import sys

out = sys.argv[1]
FUNC, LINE = 3, 3          # the outlined function's id in the .pcf
ADDRESS = 6295616          # the omp_lock_t's address (0x601040)
records = []               # (time, order, text)


def rec(t, text):
    records.append((t, len(records), text))


def ev(task, thread, t, *pairs):
    cpu = 2 * (task - 1) + thread
    rec(t, f"2:{cpu}:1:{task}:{thread}:{t}:" + ":".join(f"{a}:{b}" for a, b in pairs))


for task in (1, 2):
    m = lambda t, *p: ev(task, 1, t, *p)
    w = lambda t, *p: ev(task, 2, t, *p)
    m(0, (60000019, 1))                                   # main
    m(10, (50000003, 31)); m(500, (50000003, 0))          # MPI_Init
    # Instance 0: both threads.
    m(1000, (60000001, 3))
    m(1020, (60000018, FUNC), (60000118, LINE))
    w(1100, (60000018, FUNC), (60000118, LINE))
    # The unnamed critical section: the master first, the worker waits for it.
    m(1200, (60000007, 3)); m(1210, (60000007, 6)); m(1400, (60000007, 5)); m(1410, (60000007, 0))
    w(1250, (60000007, 3)); w(1410, (60000007, 6)); w(1450, (60000007, 5)); w(1460, (60000007, 0))
    # The explicit barrier: the master waits for the worker.
    m(1600, (60000005, 1)); w(1700, (60000005, 1)); m(1710, (60000005, 0)); w(1710, (60000005, 0))
    # The lock API: the worker first, the master waits for it.
    w(1750, (60000006, 3)); w(1760, (60000006, 6), (60000032, ADDRESS))
    w(1850, (60000006, 5)); w(1860, (60000006, 0), (60000032, 0))
    m(1800, (60000006, 3)); m(1860, (60000006, 6), (60000032, ADDRESS))
    m(1900, (60000006, 5)); m(1910, (60000006, 0), (60000032, 0))
    # A loop and its implicit barrier: the master waits for the worker.
    m(1920, (60000002, 4)); w(1920, (60000002, 4))
    m(1950, (60000016, 1)); w(2000, (60000016, 1))
    m(2010, (60000016, 0), (60000002, 0)); w(2010, (60000016, 0), (60000002, 0))
    w(2060, (60000018, 0), (60000118, 0)); m(2080, (60000018, 0), (60000118, 0))
    m(2100, (60000001, 0))
    # MPI_Barrier on the masters.
    m(2500 if task == 1 else 2600, (50000002, 8)); m(2610, (50000002, 0), (50100004, 1))
    # Instance 1: the master alone.
    m(3000, (60000001, 3)); m(3010, (60000018, FUNC), (60000118, LINE))
    m(3190, (60000018, 0), (60000118, 0)); m(3200, (60000001, 0))
    m(3900, (50000003, 32)); m(3990, (50000003, 0))
    m(4000, (60000019, 0))

# A message between the workers (MPI_THREAD_MULTIPLE): task 1's worker sends, task 2's receives.
ev(1, 2, 1730, (50000001, 1)); ev(1, 2, 1735, (50000001, 0))
ev(2, 2, 1722, (50000001, 2)); ev(2, 2, 1740, (50000001, 0))
rec(1730, "3:2:1:1:2:1730:1730:4:1:2:2:1722:1738:64:7")
# Extrae's states: running, and the waits it knows.
for task in (1, 2):
    for thread in (1, 2):
        cpu = 2 * (task - 1) + thread
        rec(0, f"1:{cpu}:1:{task}:{thread}:0:4000:1")

records.sort()
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "omp.prv"), "w") as f:
    f.write("#Paraver (29/11/2026 at 10:00):4000_ns:1(4):1:2(2:1,2:1),1\n")
    f.write("c:1:1:2:1:2\n")
    for _, _, text in records:
        f.write(text + "\n")
with open(os.path.join(out, "omp.pcf"), "w") as f:
    f.write("""DEFAULT_OPTIONS

LEVEL               THREAD
UNITS               NANOSEC

STATES
0    Idle
1    Running

EVENT_TYPE
9    50000001    MPI Point-to-point
VALUES
0   Outside MPI
1   MPI_Send
2   MPI_Recv

EVENT_TYPE
9    50000002    MPI Collective Comm
VALUES
0   Outside MPI
8   MPI_Barrier

EVENT_TYPE
9    50000003    MPI Other
VALUES
0   Outside MPI
31   MPI_Init
32   MPI_Finalize

EVENT_TYPE
1    50100004    Communicator in MPI Global OP

EVENT_TYPE
0    60000019    User function
VALUES
0      End
1      main

EVENT_TYPE
0   60000001	 Parallel (OMP)
VALUES
0 close
1 DO (open)
2 SECTIONS (open)
3 REGION (open)

EVENT_TYPE
0   60000002	 Worksharing (OMP)
VALUES
0 End
4 DO 
5 SECTIONS
6 SINGLE

EVENT_TYPE
0 60000016   OpenMP Worksharing join
VALUES
0 End
1 Join (w wait)
2 Join (w/o wait)

EVENT_TYPE
0    60000018    Executed OpenMP parallel function
VALUES
0      End
1      Unresolved
2      _NOT_Found
3      solver._omp_fn.0

EVENT_TYPE
0    60000118    Executed OpenMP parallel function line and file
VALUES
0      End
1      0 (Unresolved)
2      0 (_NOT_Found)
3      42 (solver.c)

EVENT_TYPE
0   60000006	 OpenMP named-Lock
VALUES
0 Unlocked status
3 Lock
5 Unlock
6 Locked status

EVENT_TYPE
0   60000032 OpenMP named-Lock address name

EVENT_TYPE
0   60000007	 OpenMP unnamed-Lock
VALUES
0 Unlocked status
3 Lock
5 Unlock
6 Locked status

EVENT_TYPE
0   60000005 OpenMP barrier
VALUES
0 End
1 Begin
""")
with open(os.path.join(out, "omp.row"), "w") as f:
    f.write("LEVEL CPU SIZE 4\n1.node0\n2.node0\n3.node0\n4.node0\n\nLEVEL NODE SIZE 1\nnode0\n\n"
            "LEVEL THREAD SIZE 4\nTHREAD 1.1.1\nTHREAD 1.1.2\nTHREAD 1.2.1\nTHREAD 1.2.2\n")
