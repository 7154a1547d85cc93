#!/usr/bin/env python3
"""Write a large one-rank export in the shape tests/nsys/make_export.py gives, for timing the
Nsight Systems reader: STEPS steps of cudaLaunchKernel, cudaMemcpyAsync and
cudaStreamSynchronize on the host, a kernel and a device-to-host copy on the stream (5 rows a
step, 10 events). Compare with SQLite reading the same rows (docs/performance.md).

Usage: make_big.py FILE STEPS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_export as m  # noqa: E402

path, n = sys.argv[1], int(sys.argv[2])
if os.path.exists(path):
    os.remove(path)
x = m.Export(path, 100, m.START_UTC, "node")
x.insert("MPI_RANKS", (0, x.tid))
names = [x.string(s) for s in ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize")]
kern = x.string("kernel_a(float*)"); short = x.string("kernel_a")
rt, kk, mc, p2p = [], [], [], []
t = 1000
for i in range(n):
    c = 3 * i + 1
    rt.append((t, t + 2000, 67, x.tid, c, names[0], 0, None))
    kk.append((t + 3000, t + 8000, 0, 1, 7, c, x.gpid, kern, short, 64, None))
    rt.append((t + 2100, t + 2600, 67, x.tid, c + 1, names[1], 0, None))
    mc.append((t + 8100, t + 9000, 0, 1, 7, c + 1, x.gpid, 4096, 2, 2, 0))
    rt.append((t + 2700, t + 9100, 67, x.tid, c + 2, names[2], 0, None))
    t += 10000
x.db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", rt)
x.db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?)", kk)
x.db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?)", mc)
x.close()
