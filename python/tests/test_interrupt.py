"""Ctrl-C stops a query: KeyboardInterrupt comes within about a second, the work stops, and the
trace stays usable. Each case runs in a child process that sends itself SIGINT, as a terminal's
Ctrl-C does."""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import os, signal, threading, time, commdb
    t = commdb.open("generate:ranks=1024,iterations=300")
    query = {query!r}
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        t.sql(query)
        print("finished", time.monotonic() - started)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic() - started - 1.0)
    time.sleep(3.0)
    cpu = time.process_time()
    time.sleep(1.0)
    print("cpu", time.process_time() - cpu)
    print("after", t.sql("SELECT count(*) AS n FROM ranks").to_arrow().column(0)[0].as_py())
    """
)

QUERIES = {
    # A join DataFusion computes on its own threads.
    "join": "SELECT sum(a.msg_id + b.msg_id) FROM messages a JOIN messages b ON a.src = b.dst AND a.dst = b.src",
    # One of commdb's analyses, computing off the query threads.
    "analysis": "SELECT count(*) FROM delay_costs() a, delay_costs() b WHERE a.rank = b.rank",
}


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_ctrl_c_stops_the_query(case):
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(query=QUERIES[case])], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr
    lines = dict(line.split(" ", 1) for line in child.stdout.splitlines())
    assert "interrupted" in lines, child.stdout
    assert float(lines["interrupted"]) < 1.0, child.stdout
    # Four seconds after the interrupt nothing computes any more.
    assert float(lines["cpu"]) < 0.2, child.stdout
    assert lines["after"] == "1024"
