"""The methods with Pipit's names agree with the SQL they stand for."""

import numpy as np
import pytest

import commdb
from conftest import value


def test_comm_matrix(demo):
    size = demo.comm_matrix()
    count = demo.comm_matrix(output="count")
    assert size.shape == count.shape == (64, 64)
    assert size.sum() == value(demo, "SELECT sum(bytes) FROM messages")
    assert count.sum() == value(demo, "SELECT count(*) FROM messages")
    assert count[0, 1] == value(demo, "SELECT count(*) FROM messages WHERE src = 0 AND dst = 1")
    assert count[0, 63] == 0


def test_message_histogram(demo):
    counts, edges = demo.message_histogram(bins=5)
    assert counts.sum() == 44_800 and len(counts) == 5 and len(edges) == 6
    assert edges[0] == value(demo, "SELECT min(bytes) FROM messages")
    assert np.all(np.diff(edges) > 0)
    # numpy's histogram of the same sizes gives the same counts.
    sizes = demo.sql("SELECT bytes FROM messages").to_arrow().column(0).to_numpy()
    assert counts.tolist() == np.histogram(sizes, bins=5)[0].tolist()


def test_flat_profile(demo):
    exclusive = demo.flat_profile()
    inclusive = demo.flat_profile(metric="time.inc")
    assert exclusive.index[0] == "compute"
    assert exclusive["time_ns"].sum() == value(
        demo, "SELECT sum(total_ns) FROM load_imbalance(metric => 'exclusive')"
    )
    assert inclusive.loc["main", "time_ns"] >= exclusive["time_ns"].drop(commdb.NO_CALL, errors="ignore").sum() * 0.99
    assert list(exclusive["time_ns"]) == sorted(exclusive["time_ns"], reverse=True)


def test_load_imbalance(demo):
    imbalance = demo.load_imbalance()
    assert {"load_balance", "imbalance_pct", "max_rank"} <= set(imbalance.columns)
    assert (imbalance["load_balance"] <= 1).all()


def test_time_profile(demo):
    profile = demo.time_profile(bins=10)
    assert len(profile) == 10
    assert {"bin_start", "bin_end", "compute", "MPI_Waitall"} <= set(profile.columns)
    regions = profile.drop(columns=["bin_start", "bin_end"])
    assert regions.to_numpy().sum() == value(demo, "SELECT sum(time_ns) FROM time_profile(bins => 10)")


def test_attach_and_query_two_traces(tmp_path):
    with commdb.open("generate:ranks=16,iterations=10", name="a") as t:
        name = t.attach("generate:ranks=32,iterations=10", name="b")
        assert name == "b" and t.traces == ["a", "b"]
        assert value(t, "SELECT count(*) FROM b.ranks") == 32
        assert value(t, "SELECT count(*) FROM ranks") == 16
        t.detach("b")
        assert t.traces == ["a"]
        # A name is a name, not SQL: an odd one attaches and detaches as given.
        t.attach("generate:ranks=4,iterations=2", name='odd" name')
        t.detach('odd" name')
        assert t.traces == ["a"]
        with pytest.raises(commdb.ArgumentError, match="no trace is attached as 'b'"):
            t.detach("b")


def test_export(demo, tmp_path):
    written = demo.export(tmp_path / "trace.json")
    assert written["flows"] == 44_800
    assert (written["transfers"], written["launches"]) == (0, 0)  # the demo has no accelerator
    import json

    events = json.loads((tmp_path / "trace.json").read_text())
    assert len(events["traceEvents"] if isinstance(events, dict) else events) > 44_800


def test_context_manager_and_options(repo):
    with pytest.warns(commdb.Warning, match="ranks_without_node"):
        t = commdb.open(repo / "tests" / "data" / "micros.csv", time_unit="us", clock_correction="off")
    with t:
        assert t.info()["clock_correction"] == "off"
    assert "closed" in repr(t)


def test_an_analysis_over_a_cte_or_a_query(demo):
    late = "SELECT * FROM messages WHERE send_ts > 1500000"
    over_query = value(demo, f"SELECT sum(wait_ns) FROM wait_states(({late}))")
    over_cte = value(demo, f"WITH late AS ({late}) SELECT sum(wait_ns) FROM wait_states(late)")
    whole = value(demo, "SELECT sum(wait_ns) FROM wait_states()")
    assert over_query == over_cte and 0 < over_query < whole
