"""Trace.sql(max_rows=...): only the first rows of a result are produced and fetched; the sandbox still holds."""

from __future__ import annotations

import pytest

import profiler
from profiler.synth import synth_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = synth_trace(tmp_path_factory.mktemp("rows") / "r.trace", events=800, tracks=3, seed=5)
    with profiler.open(path) as t:
        yield t


def test_the_first_rows_in_result_order(trace):
    query = "SELECT id, start_ts FROM Instruction ORDER BY start_ts DESC, id"
    full = trace.sql(query).fetchall()
    assert len(full) > 20
    for n in (0, 1, 7, len(full), len(full) + 5):
        assert trace.sql(query, max_rows=n).fetchall() == full[:n]
    capped = trace.sql(query, max_rows=3).to_arrow_table()
    assert capped.column_names == ["id", "start_ts"] and capped.num_rows == 3


def test_a_huge_result_is_not_materialised(trace):
    # Materialised, this is 1.6 GB of rows; streamed, only the first batch is ever produced.
    rows = trace.sql("SELECT * FROM range(200000000)", timeout_s=20, max_rows=4).fetchall()
    assert rows == [(0,), (1,), (2,), (3,)]


def test_the_cap_keeps_the_timeout_and_the_sandbox(trace):
    with pytest.raises(profiler.QueryError, match="timed out"):
        trace.sql("SELECT sum(a.range * b.range) FROM range(100000000) a, range(1000) b", timeout_s=0.3, max_rows=1)
    for query in ("SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access = true"):
        with pytest.raises(profiler.QueryError, match="not allowed|locked"):
            trace.sql(query, max_rows=10)
    assert trace.sql("SELECT 1", max_rows=10).fetchall() == [(1,)]   # the cursor is usable afterwards


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_bad_caps_are_one_line_errors(trace, bad):
    with pytest.raises(profiler.QueryError, match="max_rows") as info:
        trace.sql("SELECT 1", max_rows=bad)
    assert "\n" not in str(info.value)


def test_an_error_while_streaming_is_a_one_line_query_error(trace):
    # The failing row comes long after the first batch, so the error arrives through the stream, not the start.
    query = "SELECT CASE WHEN range > 100000 THEN CAST('x' AS INTEGER) ELSE range END FROM range(1000000)"
    with pytest.raises(profiler.QueryError, match="Conversion Error") as info:
        trace.sql(query, max_rows=10**6)
    assert "\n" not in str(info.value)
    assert trace.sql("SELECT 2", max_rows=1).fetchall() == [(2,)]
