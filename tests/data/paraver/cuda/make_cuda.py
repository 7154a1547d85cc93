#!/usr/bin/python3
"""Write tests/data/paraver/cuda/cuda.{prv,pcf,row}: two MPI tasks, each a host thread and two
CUDA streams, as Extrae 4.0 and later record a CUDA program in Paraver (its GPU probes and
merger): on the host, type 63000000 enters (the call's value) and leaves (0) each CUDA call,
with 63000004 (bytes) on a copy, 63000009 (the kernel) on a launch, 63000008 (the stream's
thread in the task, 1-based) on a stream synchronisation or event record and 63000014 (the
CUDA event) on an event record or synchronisation; on the stream, 63000006 runs a
kernel (0 at its end) with its line, grid and block sizes, and 63000001 a memory transfer
(0 at its end) with 63000004 (bytes). Communication records of one tag per operation tie
them: a launch sends from the host at the launch to the stream at the kernel's start; a copy
to the device sends from the host at the call's start to the stream at the transfer's end; a
copy from it sends from the stream at the transfer's start to the host at the call's end.
Task 1's streams are named as Extrae 5 names them (GPU-D1.S1), task 2's as Extrae 3.5 to 4
did (CUDA-D1.S1-host). Times in ns; task 2 differs from task 1 only in its first kernel's end
(2500, not 3500) and the device synchronisation that waits for it. Usage: make_cuda.py OUT_DIR.

What commdb reads, as tests/slt/paraver_cuda.slt checks it (rank 0; rank 1 where it differs):
  gpu_kernels     saxpy_kernel 1500-3500 (rank 1: 1500-2500), launched by cudaLaunch at 1400:
                  queued 100; scale_kernel 4100-4600 launched at 4000: queued 100
  gpu_transfers   stream 1: host_to_device 4096 bytes 1100-1300 (200 ns), device_to_host 4096
                  bytes 3650-3850 (200 ns), the host thread (thread 0) as the remote end;
                  stream 2: host_to_device 1024 bytes 4850-5050 (cudaMemcpyAsync), and
                  device_to_device 2048 bytes 5100-5200 (no tie: the stream its own remote end)
  messages        one: MPI_Send of task 1 (4700) to MPI_Recv of task 2 (posted 4650), 800 bytes;
                  the ties are no messages
  offload_waits   early_sync cudaDeviceSynchronize 1450-3510 (rank 1: 1450-2510) on saxpy_kernel
                  for 2000 ns (rank 1: 1000); early_sync cudaStreamSynchronize 4020-4610 on
                  scale_kernel for 500 ns; late_sync: the two blocking cudaMemcpy (1000-1310,
                  3600-3860), during which no kernel ran; late_launch: the stream idle from the
                  copy's end at 1300 to saxpy_kernel at 1500 (launched at 1400: host late 100),
                  and from 3850 to scale_kernel at 4100 (launched at 4000: host late 150);
                  late_sync: cudaEventSynchronize 4830-5060 (230 ns) on the event recorded on
                  stream 2, which ran a copy and no kernel, and the cudaMemcpy between devices
                  5090-5210 (120 ns)
"""
import os
import sys

out = sys.argv[1]
records = []  # (time, order, text)
CALL, TRANSFER, SIZE, KERNEL, KLINE, STREAM, KINST, BLOCKS, THREADS = (
    63000000, 63000001, 63000004, 63000006, 63000007, 63000008, 63000009, 63000011, 63000012)
EVENT = 63000014
LAUNCH, MEMCPY, DEVICE_SYNC, STREAM_SYNC, MEMCPY_ASYNC, EVENT_RECORD, EVENT_SYNC = 1, 3, 4, 5, 7, 36, 37
SAXPY, SCALE = 1, 2


def rec(t, text):
    records.append((t, len(records), text))


def cpu(task, thread):
    return 3 * (task - 1) + thread


def ev(task, thread, t, *pairs):
    rec(t, f"2:{cpu(task, thread)}:1:{task}:{thread}:{t}:" + ":".join(f"{a}:{b}" for a, b in pairs))


def comm(task, send_thread, send_t, recv_thread, recv_t, size, tag):
    rec(send_t, f"3:{cpu(task, send_thread)}:1:{task}:{send_thread}:{send_t}:{send_t}:"
                f"{cpu(task, recv_thread)}:1:{task}:{recv_thread}:{recv_t}:{recv_t}:{size}:{tag}")


for task in (1, 2):
    h = lambda t, *p: ev(task, 1, t, *p)
    g = lambda t, *p: ev(task, 2, t, *p)
    tag = iter(range(0xC0DA, 0xC0DA + 100))
    saxpy_end = 3500 if task == 1 else 2500
    h(0, (60000019, 1))                                   # main
    h(10, (50000003, 31)); h(100, (50000003, 0))          # MPI_Init
    # cudaMemcpy host to device: the stream receives at the transfer's end.
    h(1000, (CALL, MEMCPY), (SIZE, 4096))
    g(1100, (TRANSFER, MEMCPY), (SIZE, 4096)); g(1300, (TRANSFER, 0))
    comm(task, 1, 1000, 2, 1300, 4096, next(tag))
    h(1310, (CALL, 0))
    # cudaLaunch of saxpy_kernel: the stream receives at the kernel's start.
    h(1400, (CALL, LAUNCH), (KINST, SAXPY)); h(1420, (CALL, 0), (KINST, 0))
    comm(task, 1, 1400, 2, 1500, 0, next(tag))
    g(1500, (KERNEL, SAXPY), (KLINE, SAXPY), (BLOCKS, 64), (THREADS, 256))
    g(saxpy_end, (KERNEL, 0), (KLINE, 0))
    # cudaDeviceSynchronize waits for it.
    h(1450, (CALL, DEVICE_SYNC)); h(saxpy_end + 10, (CALL, 0))
    # cudaMemcpy device to host: the stream sends at the transfer's start.
    h(3600, (CALL, MEMCPY), (SIZE, 4096))
    g(3650, (TRANSFER, MEMCPY), (SIZE, 4096)); g(3850, (TRANSFER, 0))
    comm(task, 2, 3650, 1, 3860, 4096, next(tag))
    h(3860, (CALL, 0))
    # cudaLaunch of scale_kernel, then cudaStreamSynchronize on the stream (thread 2).
    h(4000, (CALL, LAUNCH), (KINST, SCALE)); h(4010, (CALL, 0), (KINST, 0))
    comm(task, 1, 4000, 2, 4100, 0, next(tag))
    g(4100, (KERNEL, SCALE), (KLINE, SCALE), (BLOCKS, 32), (THREADS, 128)); g(4600, (KERNEL, 0), (KLINE, 0))
    h(4020, (CALL, STREAM_SYNC), (STREAM, 2)); h(4610, (CALL, 0))
    # A second stream (thread 3): an asynchronous copy to it, an event recorded on it and
    # waited for, and a copy between devices (no tie).
    s2 = lambda t, *p: ev(task, 3, t, *p)
    h(4800, (CALL, MEMCPY_ASYNC), (SIZE, 1024)); h(4810, (CALL, 0))
    s2(4850, (TRANSFER, MEMCPY_ASYNC), (SIZE, 1024)); s2(5050, (TRANSFER, 0))
    comm(task, 1, 4800, 3, 5050, 1024, next(tag))
    h(4820, (CALL, EVENT_RECORD), (EVENT, 77), (STREAM, 3)); h(4825, (CALL, 0))
    h(4830, (CALL, EVENT_SYNC), (EVENT, 77)); h(5060, (CALL, 0))
    h(5090, (CALL, MEMCPY), (SIZE, 2048)); h(5210, (CALL, 0))
    s2(5100, (TRANSFER, MEMCPY), (SIZE, 2048)); s2(5200, (TRANSFER, 0))
    h(6000, (60000019, 0))
    for thread in (1, 2, 3):
        rec(0, f"1:{cpu(task, thread)}:1:{task}:{thread}:0:5000:1")

# MPI: task 1 sends to task 2.
ev(1, 1, 4700, (50000001, 1)); ev(1, 1, 4720, (50000001, 0))
ev(2, 1, 4650, (50000001, 2)); ev(2, 1, 4730, (50000001, 0))
rec(4700, "3:1:1:1:1:4700:4700:4:1:2:1:4650:4725:800:5")

records.sort()
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "cuda.prv"), "w") as f:
    f.write("#Paraver (29/11/2026 at 10:00):6000_ns:2(3,3):1:2(3:1,3:2),1\n")
    f.write("c:1:1:2:1:2\n")
    for _, _, text in records:
        f.write(text + "\n")
with open(os.path.join(out, "cuda.pcf"), "w") as f:
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
9    50000003    MPI Other
VALUES
0   Outside MPI
31   MPI_Init

EVENT_TYPE
0    60000019    User function
VALUES
0      End
1      main

EVENT_TYPE
0    63000000    CUDA library call
VALUES
0 End
1 cudaLaunch
3 cudaMemcpy
4 cudaDeviceSynchronize
5 cudaStreamSynchronize
7 cudaMemcpyAsync
36 cudaEventRecord
37 cudaEventSynchronize

EVENT_TYPE
0    63000001    CUDA memory transfer
VALUES
0 End
3 cudaMemcpy
7 cudaMemcpyAsync

EVENT_TYPE
0    63000004    CUDA Dynamic memory size

EVENT_TYPE
0    63000008    Stream ID destination

EVENT_TYPE
0    63000014    cudaEvent ID

EVENT_TYPE
0    63000011    CUDA Kernel blocks per grid

EVENT_TYPE
0    63000012    CUDA Kernel threads per block

EVENT_TYPE
0    63000006    CUDA kernel execution
0    63000009    CUDA kernel instantiation
VALUES
0 End
1 saxpy_kernel [saxpy.cu:12]
2 scale_kernel [saxpy.cu:30]

EVENT_TYPE
0    63000007    CUDA kernel execution source code line
0    63000010    CUDA kernel instantiation source code line
VALUES
0 End
1 12 (saxpy.cu)
2 30 (saxpy.cu)
""")
with open(os.path.join(out, "cuda.row"), "w") as f:
    f.write("LEVEL CPU SIZE 6\n1.node1\n2.node1\n3.node1\n4.node2\n5.node2\n6.node2\n\n"
            "LEVEL NODE SIZE 2\nnode1\nnode2\n\n"
            "LEVEL THREAD SIZE 6\nTHREAD 1.1.1\nGPU-D1.S1\nGPU-D1.S2\n"
            "THREAD 1.2.1\nCUDA-D1.S1-node2\nCUDA-D1.S2-node2\n")
