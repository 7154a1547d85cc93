"""Every table function in information_schema.routines runs from Python with its defaults
(the few that read a file get one, and those that need a range or a resolution get it)."""

import pyarrow as pa
import pytest

import commdb

FILES = {
    "read_sacct": "tests/data/sacct_jobs.txt",
    "read_swf": "tests/data/small.swf",
    "swf_header": "tests/data/small.swf",
}
# What a function cannot do without: generate_series its range, the level-of-detail functions
# a resolution (resolution_ns or pixels, which have no default).
REQUIRED = {
    "generate_series": "1, 3",
    "range": "1, 3",
    "lod_calls": "pixels => 200",
    "lod_messages": "pixels => 200",
    "lod_collectives": "pixels => 200",
    "compare_runs": "b => 'demo', by => 'iteration'",
    "scaling": "runs => 'demo,demo'",
}


def table_functions(trace):
    rows = trace.sql(
        "SELECT DISTINCT routine_name FROM information_schema.routines WHERE function_type = 'TABLE' ORDER BY 1"
    ).to_arrow()
    return rows.column(0).to_pylist()


def test_the_catalogue_lists_commdbs_analyses(demo):
    names = table_functions(demo)
    assert len(names) >= 40
    for name in ["comm_matrix", "attribution", "critical_path", "ideal_replay", "wait_states", "lod_calls"]:
        assert name in names


def test_every_table_function_runs_with_its_defaults(demo, repo, tmp_path):
    demo.execute(f"COPY (SELECT src, dst, bytes FROM messages LIMIT 10) TO '{tmp_path / 'm.parquet'}'")
    demo.execute(f"COPY (SELECT src, dst, bytes FROM messages LIMIT 10) TO '{tmp_path / 'm.csv'}'")
    files = {name: str(repo / path) for name, path in FILES.items()}
    files["read_parquet"] = str(tmp_path / "m.parquet")
    files["read_csv"] = str(tmp_path / "m.csv")
    ran = []
    for name in table_functions(demo):
        if name in files:
            args = f"'{files[name]}'"
        else:
            args = REQUIRED.get(name, "")
        result = demo.sql(f"SELECT * FROM {name}({args}) LIMIT 5")
        table = pa.table(result)
        assert table.num_columns > 0, name
        ran.append(name)
    assert len(ran) == len(table_functions(demo))


def test_a_function_without_its_file_names_the_argument(demo):
    with pytest.raises(commdb.Error, match="read_sacct"):
        demo.sql("SELECT * FROM read_sacct()")
