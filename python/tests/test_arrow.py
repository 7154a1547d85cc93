"""Results leave the engine as Arrow: pyarrow, pandas and polars read the engine's buffers
through the Arrow PyCapsule interface, without a copy."""

import pyarrow as pa
import pytest

from conftest import value

QUERY = "SELECT src, dst, sum(bytes) AS bytes, count(*) AS messages FROM messages GROUP BY 1, 2 ORDER BY 1, 2"


def test_arrow_without_a_copy(demo):
    r = demo.sql("SELECT * FROM messages")
    before = pa.total_allocated_bytes()
    table = pa.table(r)
    # pyarrow allocates nothing of its own: the columns are the engine's buffers.
    assert pa.total_allocated_bytes() == before
    assert table.num_rows == 44_800
    assert table.nbytes > 1_000_000
    assert r.to_arrow().equals(table)


def test_stream_and_schema_capsules(demo):
    r = demo.sql(QUERY)
    reader = pa.RecordBatchReader.from_stream(r)
    assert reader.schema.names == ["src", "dst", "bytes", "messages"]
    assert sum(b.num_rows for b in reader) == len(r) == r.num_rows == 224
    assert pa.schema(r).names == r.columns


def test_pandas_polars_and_batches(demo):
    r = demo.sql(QUERY)
    frame = r.to_pandas()
    assert list(frame.columns) == ["src", "dst", "bytes", "messages"]
    assert int(frame["messages"].sum()) == value(demo, "SELECT count(*) FROM messages")
    polars = pytest.importorskip("polars")
    pl_frame = r.to_polars()
    assert isinstance(pl_frame, polars.DataFrame)
    assert pl_frame["bytes"].sum() == int(frame["bytes"].sum())
    batches = list(r.batches())
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert sum(b.num_rows for b in batches) == 224


def test_types_survive(demo):
    table = demo.sql(
        "SELECT CAST(1 AS TINYINT) AS i8, 2.5 AS f, 'x' AS s, true AS b, NULL AS n, "
        "arrow_cast(0, 'Timestamp(Nanosecond, None)') AS t"
    ).to_arrow()
    assert [str(f.type) for f in table.schema] == ["int8", "double", "string", "bool", "null", "timestamp[ns]"]


def test_a_statement_without_rows(demo):
    r = demo.sql("CREATE OR REPLACE VIEW inter AS SELECT * FROM messages WHERE NOT intra_node")
    assert r.columns == [] and len(r) == 0
    assert pa.table(r).num_columns == 0
