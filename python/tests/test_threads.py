"""The GIL is released while a query runs: other Python threads go on."""

import threading
import time

import commdb


def test_other_threads_run_while_a_query_runs():
    with commdb.open("generate:ranks=256,iterations=200") as t:
        query = "SELECT count(*) FROM critical_path()"
        started = time.monotonic()
        t.sql(query)
        alone = time.monotonic() - started

        counted = 0
        done = threading.Event()

        def query_thread():
            t.sql(query)
            done.set()

        worker = threading.Thread(target=query_thread)
        started = time.monotonic()
        worker.start()
        while not done.is_set():
            counted += 1
        worker.join()
        took = time.monotonic() - started
        # The main thread counted all along: at least a hundred thousand a second (pure Python
        # counts tens of millions a second; with the GIL held by the query it would count none).
        assert counted > 100_000 * min(alone, took), (counted, alone, took)


def test_two_threads_query_one_trace_side_by_side(demo):
    results = {}

    def run(name, sql):
        results[name] = demo.sql(sql).to_arrow().column(0)[0].as_py()

    threads = [
        threading.Thread(target=run, args=("messages", "SELECT count(*) FROM messages")),
        threading.Thread(target=run, args=("waits", "SELECT count(*) FROM wait_states()")),
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {"messages": 44_800, "waits": 15_051}
