"""Fixtures of the Python package's tests: the demo trace (the shell's --demo) opened once."""

from __future__ import annotations

import pathlib

import pytest

import commdb

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def demo():
    t = commdb.demo()
    yield t
    t.close()


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


def value(trace, sql):
    """The one value of a one-row, one-column query."""
    table = trace.sql(sql).to_arrow()
    assert table.num_rows == 1 and table.num_columns == 1, sql
    return table.column(0)[0].as_py()
