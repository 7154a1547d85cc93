"""commdb.connect: a Python session whose queries run on an Apache Ballista cluster, a
scheduler and two executors started here as processes of the commdb binary on 127.0.0.1.
The answers over a store equal the embedded engine's (every table function's), both executors
run tasks, and a wrong address or a trace that is not a store is refused with a message that
names it.

It needs a commdb binary built with the cluster (``cargo build --features cluster``), given
as COMMDB_CLUSTER_BIN (.ci/run gives the one its cluster test built); without it the tests
skip, saying so."""

from __future__ import annotations

import math
import os
import pathlib
import socket
import subprocess
import time

import pytest

import commdb

from conftest import value

BINARY = os.environ.get("COMMDB_CLUSTER_BIN")

pytestmark = pytest.mark.skipif(
    not BINARY or not pathlib.Path(BINARY).is_file(),
    reason="no commdb built with the cluster: set COMMDB_CLUSTER_BIN to one (cargo build --features cluster)",
)


def free_ports() -> int:
    """A port nothing listens on, with the next one free too (an executor takes two)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue


def wait_for(log: pathlib.Path, text: str, seconds: float = 30) -> None:
    until = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < until, f"no '{text}' within {seconds} s:\n{log.read_text()}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A store, and a scheduler with two executors (one task each) over it."""
    work = tmp_path_factory.mktemp("cluster")
    store = work / "store"
    run = subprocess.run(
        [BINARY, "generate", str(store), "--ranks", "16", "--iterations", "20", "--imbalance", "3:2"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    processes = []
    logs = []

    def start(name, args):
        log = work / f"{name}.log"
        with open(log, "w") as out:
            processes.append(subprocess.Popen([BINARY, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out))
        logs.append(log)
        return log

    address = f"127.0.0.1:{free_ports()}"
    try:
        wait_for(start("scheduler", ["scheduler", "--bind", address]), "listening")
        for i in range(2):
            bind = f"127.0.0.1:{free_ports()}"
            log = start(f"executor{i}", ["executor", "--scheduler", address, "--bind", bind, "--vcores", "1"])
            wait_for(log, "asking the scheduler for tasks")
        yield {"url": f"df://{address}", "store": store, "executors": logs[1:]}
    finally:
        for p in processes:
            p.kill()
            p.wait()


QUERIES = [
    "SELECT count(*) AS n, sum(bytes) AS bytes FROM messages",
    "SELECT rank, sum(wait_ns) AS wait FROM wait_states() GROUP BY rank ORDER BY rank",
    "SELECT count(*) AS n, sum(duration) AS ns FROM critical_path()",
    "SELECT src, dst, sum(bytes) AS bytes FROM comm_matrix() GROUP BY 1, 2 ORDER BY 1, 2",
]


def test_a_cluster_gives_the_embedded_rows(cluster):
    embedded = commdb.open(cluster["store"])
    remote = commdb.connect(cluster["url"], cluster["store"])
    try:
        for sql in QUERIES:
            assert remote.sql(sql).to_arrow() == embedded.sql(sql).to_arrow(), sql
        # Over a CTE too: the analysis's input travels as its child plan.
        sql = "WITH m AS (SELECT * FROM messages WHERE src < 8) SELECT count(*) FROM wait_states(m)"
        assert value(remote, sql) == value(embedded, sql)
    finally:
        remote.close()
        embedded.close()
    # The executors ran the queries' tasks, both of them.
    for log in cluster["executors"]:
        assert " job " in log.read_text(), log.read_text()


def table_call(name: str, files: dict) -> str:
    """A call of table function `name` as it must be made on the fixture's store."""
    if name in files:
        return f"{name}('{files[name]}')"
    if name in ("lod_calls", "lod_messages", "lod_collectives"):
        return f"{name}(pixels => 100)"
    if name == "compare_runs":
        return "compare_runs(a => 'public', b => 'public', by => 'rank')"
    if name == "scaling":
        return "scaling(runs => 'public,public')"
    return f"{name}()"


def close(a, b) -> bool:
    """Equal values, floats to 1e-9 relative (sums taken in another order on a cluster)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    return a == b


def rows(table) -> list:
    """A table's rows in an order no float's last digits decide."""
    def key(row):
        return repr([round(v, 6) if isinstance(v, float) else v for v in row.values()])
    return sorted(table.to_pylist(), key=key)


def test_every_table_function_gives_the_embedded_rows(cluster, repo, tmp_path):
    data = repo / "tests" / "data"
    embedded = commdb.open(cluster["store"])
    remote = commdb.connect(cluster["url"], cluster["store"])
    try:
        ranks = tmp_path / "ranks.parquet"
        embedded.sql(f"COPY (SELECT rank FROM ranks) TO '{ranks}'").to_arrow()
        files = {
            "read_sacct": data / "sacct_jobs.txt",
            "read_csv": data / "three_ranks.csv",
            "read_parquet": ranks,
            "read_swf": data / "small.swf",
            "swf_header": data / "small.swf",
        }
        # commdb's table functions: those with a description (DataFusion's own have none).
        names = embedded.sql(
            "SELECT routine_name FROM information_schema.routines "
            "WHERE function_type = 'TABLE' AND description <> '' ORDER BY 1"
        ).to_arrow().column(0).to_pylist()
        assert len(names) > 40, names
        for name in names:
            sql = f"SELECT * FROM {table_call(name, files)}"
            here, there = rows(embedded.sql(sql).to_arrow()), rows(remote.sql(sql).to_arrow())
            assert len(here) == len(there), sql
            for a, b in zip(here, there):
                assert close(a, b), f"{sql}: {a} / {b}"
    finally:
        remote.close()
        embedded.close()


def test_an_address_that_is_not_a_schedulers_is_refused(cluster):
    with pytest.raises(commdb.ArgumentError, match="df://HOST:PORT"):
        commdb.connect("http://127.0.0.1:50050", cluster["store"])
    started = time.monotonic()
    with pytest.raises(commdb.ClusterError, match="scheduler"):
        commdb.connect(f"df://127.0.0.1:{free_ports()}", cluster["store"])
    assert time.monotonic() - started < 15


def test_a_trace_that_is_not_a_store_is_refused(cluster):
    with pytest.raises(commdb.ArgumentError, match="not a commdb store"):
        commdb.connect(cluster["url"], "generate:ranks=4")


def test_a_cluster_with_a_secret_lets_in_only_who_has_it(tmp_path):
    store = tmp_path / "store"
    run = subprocess.run([BINARY, "generate", str(store), "--ranks", "8", "--iterations", "5"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    secret, wrong = tmp_path / "secret", tmp_path / "wrong"
    secret.write_text("a1b2c3d4e5f60718293a4b5c6d7e8f90\n")
    wrong.write_text("a1b2c3d4e5f60718293a4b5c6d7e8f91\n")
    for f in (secret, wrong):
        f.chmod(0o600)
    address = f"127.0.0.1:{free_ports()}"
    processes = []
    try:
        for name, args in [
            ("scheduler", ["scheduler", "--bind", address]),
            ("executor", ["executor", "--scheduler", address, "--bind", f"127.0.0.1:{free_ports()}"]),
        ]:
            log = tmp_path / f"{name}.log"
            with open(log, "w") as out:
                p = subprocess.Popen([BINARY, *args, "--secret-file", str(secret)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
            processes.append(p)
            wait_for(log, "listening" if name == "scheduler" else "asking the scheduler for tasks")
        with pytest.raises(commdb.ClusterError, match="needs the cluster's secret"):
            commdb.connect(f"df://{address}", store)
        with pytest.raises(commdb.ClusterError, match="differs"):
            commdb.connect(f"df://{address}", store, secret_file=wrong)
        remote = commdb.connect(f"df://{address}", store, secret_file=secret)
        try:
            assert value(remote, "SELECT count(*) FROM messages") == value(commdb.open(store), "SELECT count(*) FROM messages")
        finally:
            remote.close()
    finally:
        for p in processes:
            p.kill()
            p.wait()
