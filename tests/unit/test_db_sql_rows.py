"""Trace.sql and Trace.sql_arrow: only the first rows (max_rows) or bytes (max_bytes) of a result are fetched, or it
is streamed to a sink; one statement at a time; the sandbox still holds; cursors of ended threads are closed."""

from __future__ import annotations

import pytest

import profiler
from profiler.db.user_sql import rows_within
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


def test_numpy_and_huge_caps_are_caps(trace):
    import numpy as np

    assert trace.sql("SELECT * FROM range(5)", max_rows=np.int64(2)).fetchall() == [(0,), (1,)]
    assert len(trace.sql("SELECT * FROM range(5)", max_rows=2**70).fetchall()) == 5  # raw OverflowError before


@pytest.mark.parametrize("bad", ["2", -5, float("nan"), float("inf"), 2**70, [1], True])
def test_bad_timeouts_are_one_line_errors_before_anything_runs(trace, bad):
    # "2" raised a raw ValueError after the query was interrupted; -5 said it had timed out; nan, inf and 2**70
    # meant no timeout (inf with a thread's traceback)
    with pytest.raises(profiler.QueryError, match=r"^timeout_s must be a number of seconds from 0 \(no limit\)"):
        trace.sql("SELECT 1", bad)
    assert trace.sql("SELECT 1", 0).fetchall() == [(1,)]


def test_a_query_that_is_not_text_says_so(trace):
    with pytest.raises(profiler.QueryError, match=r"a SQL query is text \(a str\), not int"):
        trace.sql(5)


def test_an_error_while_streaming_is_a_one_line_query_error(trace):
    # The failing row comes long after the first batch, so the error arrives through the stream, not the start.
    query = "SELECT CASE WHEN range > 100000 THEN CAST('x' AS INTEGER) ELSE range END FROM range(1000000)"
    with pytest.raises(profiler.QueryError, match="Conversion Error") as info:
        trace.sql(query, max_rows=10**6)
    assert "\n" not in str(info.value)
    assert trace.sql("SELECT 2", max_rows=1).fetchall() == [(2,)]


# -- bytes ------------------------------------------------------------------------------------------------------
def test_max_bytes_stops_fetching_past_the_budget(trace):
    """10 MB values: only the rows within the budget and the first one past it are fetched and converted."""
    budget = 25 << 20
    table = trace.sql_arrow("SELECT range AS i, repeat('x', 10000000) AS s FROM range(200)", timeout_s=30,
                            max_rows=201, max_bytes=budget)
    assert table.column("i").to_pylist() == [0, 1, 2]          # two fit, the third is past the budget
    assert table.nbytes > budget and rows_within(table, budget) == 2
    small = trace.sql_arrow("SELECT range AS i FROM range(1000)", max_bytes=budget)
    assert small.num_rows == 1000 and small.nbytes <= budget  # nothing cut: within the budget
    tiny = trace.sql("SELECT range FROM range(100)", max_bytes=80).fetchall()
    assert 5 <= len(tiny) <= 11 and tiny == [(i,) for i in range(len(tiny))]
    with pytest.raises(profiler.QueryError, match="max_bytes"):
        trace.sql("SELECT 1", max_bytes=-1)


def test_a_sink_gets_every_batch_and_nothing_is_kept(trace):
    seen = []
    empty = trace.sql_arrow("SELECT range AS i FROM range(100000)", sink=lambda b: seen.append(b.num_rows))
    assert empty.num_rows == 0 and empty.column_names == ["i"]
    assert sum(seen) == 100_000 and max(seen) <= 2048
    seen.clear()
    trace.sql_arrow("SELECT range AS i FROM range(100000)", max_rows=5000, sink=lambda b: seen.append(b.num_rows))
    assert sum(seen) == 5000


def test_the_timeout_counts_the_query_not_the_sink(trace):
    import time

    trace.sql_arrow("SELECT range FROM range(20000)", timeout_s=0.5, sink=lambda b: time.sleep(0.05))  # ~0.5 s
    with pytest.raises(profiler.QueryError, match="timed out"):
        trace.sql_arrow("SELECT sum(a.range * b.range) FROM range(100000000) a, range(1000) b", timeout_s=0.3,
                        sink=lambda b: None)


# -- statements -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", [";", "-- only a comment", "/* c */ ;;", " ; -- x\n"])
def test_nothing_but_comments_is_an_empty_query(trace, query):
    with pytest.raises(profiler.QueryError, match="^empty SQL query"):
        trace.sql(query)


@pytest.mark.parametrize("query", ["SELECT 1 AS a; SELECT 2 AS b", "SELECT 1; SELECT 2;", "SHOW TABLES; SELECT 1"])
def test_one_statement_at_a_time(trace, query):
    with pytest.raises(profiler.QueryError, match="one statement at a time: the query has 2 statements"):
        trace.sql(query)
    assert trace.sql("SELECT 1 AS a;").fetchall() == [(1,)]   # one statement with its ';' is fine


def test_a_data_driven_pivot_runs_and_leaves_nothing_behind(trace):
    engines = {r[0] for r in trace.sql("SELECT DISTINCT engine FROM Instruction").fetchall()}
    for query in ("PIVOT Instruction ON engine USING count(*) GROUP BY opcode",
                  "SELECT * FROM (PIVOT Instruction ON engine USING count(*) GROUP BY opcode)",
                  "/* comment */ WITH p AS (PIVOT Instruction ON engine USING count(*)) SELECT * FROM p"):
        table = trace.sql_arrow(query)
        assert engines <= set(table.column_names), query
    pivoted = trace.sql("PIVOT (SELECT engine FROM Instruction) ON engine USING count(*)").fetchall()
    assert sum(pivoted[0]) == trace.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]
    left = trace.sql("SELECT count(*) FROM duckdb_types() WHERE database_name = 'temp' AND NOT internal").fetchall()
    assert left == [(0,)]
    for query in ("PIVOT Instruction ON engine; CREATE TEMP TABLE t AS SELECT 1",
                  "CREATE TEMP TABLE t AS SELECT * FROM (PIVOT Instruction ON engine)",
                  "INSERT INTO Instruction SELECT * FROM (PIVOT Instruction ON engine)"):
        with pytest.raises(profiler.QueryError, match="not allowed: (CREATE|INSERT) statement"):
            trace.sql(query)


# -- cursors ----------------------------------------------------------------------------------------------------
def test_cursors_of_ended_threads_are_closed(trace):
    """A server running each request on a new thread keeps as many cursors as it has live threads."""
    import threading

    def query():
        assert trace.sql("SELECT 1").fetchall() == [(1,)]

    for _ in range(300):
        t = threading.Thread(target=query)
        t.start()
        t.join()
    assert trace._pool.cursor_count() <= 2
    # a live thread keeps its cursor while others come and go
    ready, done = threading.Event(), threading.Event()
    results = []

    def long_lived():
        trace.sql("SELECT 1")
        ready.set()
        done.wait(10)
        results.append(trace.sql("SELECT 2").fetchall())

    keeper = threading.Thread(target=long_lived)
    keeper.start()
    ready.wait(10)
    for _ in range(20):
        t = threading.Thread(target=query)
        t.start()
        t.join()
    done.set()
    keeper.join()
    assert results == [[(2,)]] and trace._pool.cursor_count() <= 3
