#!/usr/bin/env python3
"""Write a two-rank MPI + CUDA export in the shape `nsys export --type sqlite` gives it (schema
3.x: nsys's own MPI tables with peers, tags, sizes and requests), one file per rank, with every
time chosen so that what commdb must derive is known:

  rank 0: cudaMemcpy host to device (4096 bytes), a kernel `stencil` that the following
          cudaDeviceSynchronize waits for (an early synchronisation of 5,900 ns, 5,800 of them
          on the kernel), MPI_Isend of 1,024 bytes to rank 1 with tag 5 and its MPI_Wait,
          MPI_Recv of 2,048 bytes from rank 1 with tag 6, MPI_Allreduce of 8 bytes, and a
          cudaMemcpy device to host of 8,192 bytes; an NVTX range `step` around it all and an
          NVTX start/end range that crosses the synchronisation's end (it cannot nest);
  rank 1: MPI_Irecv and MPI_Wait of rank 0's message, MPI_Send of the reply, MPI_Allreduce.

Rank 1's capture began 1,000 ns after rank 0's (UTC), so its times move by 1,000 ns. Rank 0
says its rank in MPI_RANKS, rank 1 in the NVTX name of its thread. Rank 0's file also holds a
table and a kernel column that no reader knows, and the versioned duplicate nsys writes inside
a runtime call (cudaLaunchKernel_v7000), which is folded into the call.

Usage: make_export.py DIR
"""
import os
import sqlite3
import sys

SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "EXPORT_META_DATA": "name TEXT NOT NULL, value TEXT",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
    "TARGET_INFO_SYSTEM_ENV": "globalVid INTEGER NOT NULL, devStateName TEXT NOT NULL, name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, futureColumn INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER",
    "MPI_RANKS": "rank INTEGER NOT NULL, globalTid INTEGER NOT NULL",
    "MPI_P2P_EVENTS": "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, textId INTEGER NOT NULL, commHandle INTEGER, tag INTEGER, remoteRank INTEGER, size INTEGER, requestHandle INTEGER",
    "MPI_COLLECTIVES_EVENTS": "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, textId INTEGER NOT NULL, commHandle INTEGER, rootRank INTEGER, size INTEGER, recvSize INTEGER",
    "MPI_START_WAIT_EVENTS": "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, textId INTEGER NOT NULL, requestHandle INTEGER",
    "MPI_OTHER_EVENTS": "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, textId INTEGER NOT NULL",
}

START_UTC = 1_700_000_000_000_000_000
ALL_STREAMS = 0xFFFFFFFF  # CUPTI's stream id of a context-wide synchronisation


class Export:
    def __init__(self, path, pid, utc, host):
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(path)
        for table, columns in SCHEMA.items():
            body = columns.replace(", ", ",\n    ")
            self.db.execute(f"CREATE TABLE {table} (\n    {body}\n)")
        self.strings = {}
        self.pid = pid
        self.gpid = pid << 24
        self.tid = (pid << 24) | pid
        self.insert("EXPORT_META_DATA", ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"))
        self.insert("EXPORT_META_DATA", ("EXPORT_PRODUCT_VERSION", "2024.1.1"))
        self.insert("EXPORT_META_DATA", ("EXPORT_SCHEMA_VERSION", "3.11.0"))
        self.insert("TARGET_INFO_SESSION_START_TIME", (utc, "", ""))
        self.insert("TARGET_INFO_SYSTEM_ENV", (0, "Local (CLI)", "Hostname", 619, host))

    def string(self, s):
        if s not in self.strings:
            self.strings[s] = len(self.strings) + 1
            self.insert("StringIds", (self.strings[s], s))
        return self.strings[s]

    def insert(self, table, row):
        marks = ", ".join("?" * len(row))
        self.db.execute(f"INSERT INTO {table} VALUES ({marks})", row)

    def api(self, name, start, end, correlation):
        self.insert("CUPTI_ACTIVITY_KIND_RUNTIME", (start, end, 67, self.tid, correlation, self.string(name), 0, None))

    def p2p(self, name, start, end, peer, tag, size, request=None, comm=0xC0):
        self.insert("MPI_P2P_EVENTS", (start, end, self.tid, self.string(name), comm, tag, peer, size, request))

    def wait(self, start, end, request):
        self.insert("MPI_START_WAIT_EVENTS", (start, end, self.tid, self.string("MPI_Wait"), request))

    def allreduce(self, start, end, comm):
        self.insert("MPI_COLLECTIVES_EVENTS", (start, end, self.tid, self.string("MPI_Allreduce"), comm, -1, 8, 8))

    def other(self, name, start, end):
        self.insert("MPI_OTHER_EVENTS", (start, end, self.tid, self.string(name)))

    def close(self):
        self.db.commit()
        self.db.close()


def rank0(path):
    x = Export(path, 100, START_UTC, "gpu-node-1")
    x.insert("MPI_RANKS", (0, x.tid))
    x.other("MPI_Init", 0, 1000)
    x.insert("NVTX_EVENTS", (1000, 16500, 59, None, None, None, "step", x.tid, None, None, 0))
    x.insert("NVTX_EVENTS", (8000, 9250, 60, None, None, None, "crossing", x.tid, None, None, 0))
    x.api("cudaMemcpy", 1000, 3000, 1)
    x.insert("CUPTI_ACTIVITY_KIND_MEMCPY", (1500, 2800, 0, 1, 7, 1, x.gpid, 4096, 1, 0, 2))
    x.api("cudaLaunchKernel", 3000, 3100, 2)
    x.api("cudaLaunchKernel_v7000", 3010, 3090, 2)
    x.insert("CUPTI_ACTIVITY_KIND_KERNEL", (3200, 9000, 0, 1, 7, 2, x.gpid, x.string("stencil(double*)"), x.string("stencil"), 64, 1))
    x.api("cudaDeviceSynchronize", 3200, 9100, 3)
    x.insert("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", (3200, 9100, 0, 1, ALL_STREAMS, 3, x.gpid, 3, ALL_STREAMS))
    x.p2p("MPI_Isend", 9200, 9300, 1, 5, 1024, request=0xA)
    x.wait(9300, 9400, 0xA)
    x.p2p("MPI_Recv", 9500, 12000, 1, 6, 2048)
    x.allreduce(12000, 15000, 0xC0)
    x.api("cudaMemcpy", 15000, 16000, 4)
    x.insert("CUPTI_ACTIVITY_KIND_MEMCPY", (15100, 15900, 0, 1, 7, 4, x.gpid, 8192, 2, 2, 0))
    x.other("MPI_Finalize", 17000, 17500)
    x.db.execute("CREATE TABLE FUTURE_EVENTS (start INTEGER, end INTEGER)")
    x.insert("FUTURE_EVENTS", (1, 2))
    x.close()


def rank1(path):
    x = Export(path, 200, START_UTC + 1000, "gpu-node-2")
    x.insert("ThreadNames", (x.string("MPI Rank 1"), 10, x.tid))
    x.other("MPI_Init", 0, 800)
    x.p2p("MPI_Irecv", 8000, 8100, 0, 5, 1024, request=0xB, comm=0xD0)
    x.wait(8100, 8500, 0xB)
    x.p2p("MPI_Send", 8600, 8700, 0, 6, 2048, comm=0xD0)
    x.allreduce(9000, 14000, 0xD0)
    x.other("MPI_Finalize", 16000, 16500)
    x.close()


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rank0(os.path.join(out, "report.0.sqlite"))
    rank1(os.path.join(out, "report.1.sqlite"))
