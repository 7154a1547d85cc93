#!/usr/bin/python3
"""Copy an OTF2 archive without its accelerator locations, with the reference reader and writer
(python3-otf2): the locations that are not CPU threads, their events, the groups that list them,
and the communicators and RMA windows over those groups (with the events on them: Score-P 1.x
records CUDA transfers as RMA) are left out; everything else is copied as it is. Scalasca's
hybrid analyzer refuses archives with non-CPU locations ("Locations of non-CPU type not yet
supported"), so tests/scalasca/oracle.sh runs it on such a copy, and commdb's numbers for the
CPU threads of the original are compared with its. Usage: without_gpu.py ARCHIVE/traces.otf2 OUT_DIR
"""
import sys

import otf2
from otf2.enums import LocationType

source, out = sys.argv[1], sys.argv[2]
with otf2.reader.open(source) as reader:
    defs = reader.definitions
    # The reader looks definitions up as it reads: read every event before dropping any.
    events = list(reader.events)
    gpu = [loc for loc in defs.locations if loc.type != LocationType.CPU_THREAD]
    gpu_refs = {loc._ref for loc in gpu}

    def lists_gpu(group):
        return any(isinstance(m, otf2.definitions.Location) and m._ref in gpu_refs for m in group.members)

    groups = [g for g in defs.groups if lists_gpu(g)]
    comms = [c for c in defs.comms if c.group in groups]
    windows = [w for w in defs.rma_wins if w.comm in comms]
    for registry, dropped in ((defs._locations, gpu), (defs._groups, groups), (defs._comms, comms),
                              (defs._rma_wins, windows)):
        for d in dropped:
            registry._elements_by_ref.pop(d._ref, None)
            registry._elements_by_key.pop(d._key, None)
    kept = left = 0
    with otf2.writer.open(out, definitions=defs) as writer:
        for location, event in events:
            if (location._ref in gpu_refs or getattr(event, "win", None) in windows
                    or getattr(event, "communicator", None) in comms):
                left += 1
                continue
            writer.event_writer_from_location(location)(event)
            kept += 1
    print(f"{out}: {kept} events copied, {left} left out with {len(gpu)} accelerator locations")
