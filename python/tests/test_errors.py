"""Errors are commdb.Error subclasses raised at open or at sql, naming the file, position,
table or argument as the shell's do."""

import pytest

import commdb


def test_a_missing_file(tmp_path):
    with pytest.raises(commdb.FileError) as e:
        commdb.open(tmp_path / "nowhere.otf2")
    assert e.value.path == str(tmp_path / "nowhere.otf2")
    assert "no such file" in str(e.value)
    assert isinstance(e.value, commdb.Error)


def test_a_malformed_csv_names_its_line(repo):
    with pytest.raises(commdb.FileError) as e:
        commdb.open(repo / "tests" / "data" / "bad_timestamp.csv")
    assert e.value.path.endswith("bad_timestamp.csv")
    assert e.value.line is not None and e.value.line > 1
    assert f"line {e.value.line}" in str(e.value) or f":{e.value.line}" in str(e.value)


def test_a_malformed_otf2_anchor_names_its_file(tmp_path):
    archive = tmp_path / "run"
    anchor = archive / "traces.otf2"
    archive.mkdir()
    anchor.write_bytes(b"not an otf2 anchor file")
    with pytest.raises(commdb.Error) as e:
        commdb.open(anchor)
    assert "traces.otf2" in str(e.value)


def test_sql_errors_have_a_place(demo):
    with pytest.raises(commdb.SqlError) as e:
        demo.sql("SELECT src,\n  nope FROM messages")
    assert (e.value.line, e.value.column) == (2, 3)
    assert "nope" in str(e.value)


def test_unknown_table_function(demo):
    with pytest.raises(commdb.SqlError) as e:
        demo.sql("SELECT * FROM comm_matrx()")
    assert "did you mean 'comm_matrix'" in str(e.value)
    with pytest.raises(commdb.SqlError, match="did you mean 'messages'"):
        demo.sql("SELECT * FROM mesages")


def test_bad_arguments(demo):
    with pytest.raises(commdb.ArgumentError) as e:
        commdb.open("generate:ranks=4", clock_correction="sometimes")
    assert "clock_correction" in str(e.value)
    with pytest.raises(commdb.ArgumentError, match="memory_limit"):
        commdb.open("generate:ranks=4", memory_limit="lots")
    with pytest.raises(ValueError, match="output"):
        demo.comm_matrix(output="volume")
    with pytest.raises(commdb.ArgumentError, match="metric"):
        demo.flat_profile(metric="time.wall")
    with pytest.raises(commdb.ArgumentError, match="bins"):
        demo.message_histogram(bins=0)
    with pytest.raises(commdb.Error, match="bins"):
        demo.sql("SELECT * FROM time_profile(bins => 0)")
    with pytest.raises(commdb.ArgumentError, match="kind"):
        demo.chart("SELECT 1 AS x, 2 AS y", kind="pie")
    with pytest.raises(commdb.ArgumentError, match="line"):
        demo.chart("SELECT 'a' AS x, 2 AS y", kind="line")
    with pytest.raises(commdb.ArgumentError, match="chrome"):
        demo.export("x.json", format="otf2")


def test_memory_budget():
    with commdb.open("generate:ranks=4,iterations=2", memory_limit="4MiB") as small:
        with pytest.raises(commdb.QueryError) as e:
            # array_agg holds its values and cannot spill them.
            small.sql("SELECT cardinality(array_agg(value)) FROM generate_series(1, 3000000)")
        assert "memory budget for queries (4 MiB)" in str(e.value)
        assert "memory_limit" in str(e.value)
        # The trace stays usable.
        assert len(small.sql("SELECT * FROM ranks")) == 4


def test_failures_while_running_are_query_errors(demo):
    with pytest.raises(commdb.QueryError, match="overflow"):
        demo.sql("SELECT max(send_ts * 9223372036854775807) FROM messages")


def test_closed_trace():
    t = commdb.open("generate:ranks=4,iterations=2")
    t.close()
    with pytest.raises(commdb.Error, match="closed"):
        t.sql("SELECT 1")
    assert "closed" in repr(t)


def test_writes_never_replace_a_trace(tmp_path, repo):
    trace_file = tmp_path / "three_ranks.csv"
    original = (repo / "tests" / "data" / "three_ranks.csv").read_bytes()
    trace_file.write_bytes(original)
    with commdb.open(trace_file) as t:
        # The unmatched send is found when the first query matches the messages.
        with pytest.warns(commdb.Warning, match="unmatched_send"):
            chart = t.chart("SELECT src, count(*) AS messages FROM messages GROUP BY 1 ORDER BY 1", kind="bar")
        with pytest.raises(commdb.Error, match="three_ranks.csv"):
            chart.save(trace_file)
        with pytest.raises(commdb.Error):
            t.report().save(trace_file)
        with pytest.raises(commdb.Error):
            t.export(trace_file)
        assert trace_file.read_bytes() == original
        chart.save(tmp_path / "sent.svg")
        assert (tmp_path / "sent.svg").read_text().startswith("<svg")
