"""Pipit's detect_pattern on a trace whose iterations are known, for docs/guide.md's comparison
with commdb's iterations().

Pipit is not on PyPI under its name: take its source from github.com/hpcgroup/pipit and put it
on PYTHONPATH, with pandas, numpy and stumpy installed and Debian's python3-otf2 (a virtual
environment made with --system-site-packages sees it). Then:

    commdb generate run --format otf2 --ranks 16 --ranks-per-node 4 --iterations 60
    commdb run/traces.otf2 -q --format csv \
        -c "SELECT start_ts, end_ts FROM iterations() WHERE rank = 0 ORDER BY iteration" | tail -n +2 > truth.csv
    python3 detect_pattern.py run main 60 truth.csv

prints how many windows detect_pattern returns, how long it took, and how many start within
2 us of a true iteration start on rank 0 (process 0). Give `none` for the iteration count to
let detect_pattern count the start event's entries itself.
"""
import sys
import time

import pipit

trace_dir, start_event = sys.argv[1], sys.argv[2]
iterations = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "none" else None
t = pipit.Trace.from_otf2(trace_dir)
t.calc_exc_metrics(["Timestamp (ns)"])
started = time.time()
try:
    patterns = t.detect_pattern(start_event, iterations=iterations, process=0)
except Exception as e:  # report, as the comparison does, what detect_pattern does with this input
    print("detect_pattern failed:", type(e).__name__, e)
    sys.exit(0)
took = time.time() - started
starts = sorted(int(p["Timestamp (ns)"].min()) for p in patterns)
ends = sorted(int(p["Timestamp (ns)"].max()) for p in patterns)
print(f"{len(patterns)} windows in {took:.2f} s")
print("first starts:", starts[:5])
print("first ends:", ends[:5])
if len(sys.argv) > 4:
    bounds = [tuple(map(int, line.split(","))) for line in open(sys.argv[4]) if line.strip()]
    true_starts = [b[0] for b in bounds]
    aligned = sum(1 for s in starts if any(abs(s - ts) <= 2000 for ts in true_starts))
    print(f"{aligned} of {len(starts)} windows start within 2 us of an iteration's start; the run has {len(bounds)} iterations")
