"""The SQL page's logic: results bounded by bytes as well as rows, long cells cut, columns keyed so any name shows,
messages without server paths."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dashboard import sql_logic
from dashboard.errors import public_message
from dashboard.pages import sql as sql_page
from tests.browser.trace_factory import write_kernel_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    import profiler

    t = profiler.open(write_kernel_trace(tmp_path_factory.mktemp("sqlpage") / "k.trace", iterations=20))
    yield t
    t.close()


def test_huge_values_are_cut_to_the_byte_budget_and_marked(trace):
    t0 = time.perf_counter()
    # 20 values of 10 MB: beyond the 32 MiB budget after 4 rows (a generous timeout: the machine may be busy)
    res = sql_logic.run_query(trace, "SELECT repeat('x', 10000000) AS s FROM range(20)", row_limit=200, timeout_s=60)
    assert time.perf_counter() - t0 < 60
    assert res.error is None and res.truncated and 1 <= len(res.rows) <= 4
    assert "larger than the 32.0 MiB" in res.note and "left(col, 1000)" in res.note
    cell = res.rows[0][res.fields[0]]
    assert cell == "x" * sql_logic.MAX_CELL_CHARS + "… (10,000,000 characters)"


def test_a_first_row_beyond_the_budget_is_a_one_line_error(trace):
    res = sql_logic.run_query(trace, "SELECT list(range) AS l FROM range(10000000)", timeout_s=30)
    assert res.error and "\n" not in res.error and not res.rows
    assert res.error.startswith("The first row alone holds 7") and "list_slice(col, 1, 1000)" in res.error


def test_long_values_of_every_kind_are_cut_saying_how_long(trace):
    res = sql_logic.run_query(trace, "SELECT repeat('ab', 6000) AS s, repeat('x', 9000)::BLOB AS b, "
                                     "range(20000) AS l, 'short' AS t")
    s, b, lst, t = (res.rows[0][f] for f in res.fields)
    assert s.endswith("… (12,000 characters)") and len(s) == sql_logic.MAX_CELL_CHARS + len("… (12,000 characters)")
    assert b.startswith("7878") and b.endswith("… (9,000 bytes)")
    assert lst.startswith("[0, 1, 2") and lst.endswith(" characters)") and t == "short"


@pytest.mark.parametrize("query", [12345, ["SELECT 1"], {}, True])
def test_a_query_that_is_not_text_is_refused(trace, query):
    assert sql_logic.run_query(trace, query).error.startswith("The query must be text")


@pytest.mark.parametrize("query, needle", [(";", "empty SQL query"), ("-- only comment", "empty SQL query"),
                                           ("SELECT 1; SELECT 2", "one statement at a time")])
def test_empty_and_multiple_statements_are_clear(trace, query, needle):
    res = sql_logic.run_query(trace, query)
    assert res.error.startswith(needle) and "InvalidInput" not in res.error


def test_columns_with_dots_get_safe_fields_and_their_names_as_headers(trace):
    """AG Grid reads a field with a dot as a path into nested data: ``a.b`` would show blank cells."""
    res = sql_logic.run_query(trace, 'SELECT 1.5 * 2 AS plain, 1.5 * 2, 42 AS "a.b", 7 AS "x[0]", 1 AS plain')
    defs = sql_page.column_defs(res)
    assert [d["headerName"] for d in defs] == ["plain", "(1.5 * 2)", "a.b", "x[0]", "plain_2"]
    assert all(d["field"].isalnum() and "." not in d["field"] for d in defs)
    assert [res.rows[0][d["field"]] for d in defs] == ["3.0", "3.0", 42, 7, 1]
    assert sql_page.GRID_OPTIONS["suppressFieldDotNotation"] is True


def test_every_column_says_its_grid_data_type(trace):
    """The grid keys columns c0, c1, ... in every result; without a type per run it keeps the type it guessed for
    c0 from the last result and shows the next result's text there as "Invalid Number"."""
    res = sql_logic.run_query(trace, "SELECT 1 AS n, 2.5 AS d, 'x' AS s, true AS b, NULL AS z, "
                                     "(2::HUGEINT << 70) AS h, 'nan'::DOUBLE AS f")
    assert res.kinds == ["number", "text", "text", "boolean", "text", "text", "text"]  # decimal, huge, NaN: strings
    assert [d["cellDataType"] for d in sql_page.column_defs(res)] == res.kinds
    mixed = sql_logic.run_query(trace, "SELECT * FROM (VALUES (1), (NULL), (3)) t(v)")
    assert mixed.kinds == ["number"]
    assert sql_logic.cell_kind([1, 2.5, None]) == "number" and sql_logic.cell_kind([True, 1]) == "text"
    # a column whose type changes between results gets another key: the grid makes it a new column
    text = sql_logic.run_query(trace, "SELECT 'x' AS v")
    assert mixed.fields != text.fields and set(text.rows[0]) == set(text.fields)


class _FakeTrace:
    name = "k"
    db_path = Path("/tmp/pytest-of-x/cache/ab12/k.trace.trnprof.duckdb")
    path = Path("/home/user/traces/k.trace")


def test_messages_name_the_trace_not_its_files():
    text = f"{_FakeTrace.db_path}: no table 'nope' (tables: Instruction)"
    assert public_message(text, _FakeTrace()) == "k: no table 'nope' (tables: Instruction)"
    assert public_message(text, _FakeTrace(), label="my kernel").startswith("my kernel: no table")
    other = public_message(ValueError("cannot read /var/lib/secret/store.bin now\nmore"))
    assert other == "cannot read …/store.bin now"
    assert public_message("SELECT 1/2/3 failed at https://x.example/a/b") == "SELECT 1/2/3 failed at https://x.example/a/b"
    assert public_message(RuntimeError()) == "RuntimeError"
    # an ingest cache of another trace is named by its trace; a directory keeps its slash
    assert public_message("no track 7 in /srv/t/other.trace.trnprof.duckdb") == "no track 7 in …/other.trace"
    assert public_message('Cannot access file "/etc/*"') == 'Cannot access file "…/etc/*"'
    # paths the user typed come back as written
    typed = "SELECT * FROM '/etc/passwd'"
    assert public_message("Table with name /etc/passwd does not exist!", typed=typed) == \
        "Table with name /etc/passwd does not exist!"


def test_the_sql_page_names_the_extensions_it_cannot_load_without_advising_install(trace):
    res = sql_logic.run_query(trace, "SELECT * FROM read_xlsx('x.xlsx')")
    assert res.error.endswith("exists in the excel extension (trace SQL cannot install or load extensions)")
    assert "INSTALL" not in res.error and "SET" not in res.error


def test_limits_past_the_maximum_are_capped_and_said_so(trace):
    res = sql_logic.run_query(trace, f"SELECT * FROM range({sql_logic.MAX_ROW_LIMIT + 5})", row_limit=10**9)
    assert len(res.rows) == sql_logic.MAX_ROW_LIMIT and res.truncated
    assert f"at most {sql_logic.MAX_ROW_LIMIT:,} rows" in res.note and "--format csv" in res.note
    small = sql_logic.run_query(trace, "SELECT * FROM range(20)", row_limit=5)
    assert small.note == "raise the row limit for more"
    slow = sql_logic.run_query(trace, "SELECT sum(a.range * b.range) FROM range(300000) a, range(300000) b",
                               timeout_s=0.2)
    assert "timed out" in slow.error and "page's Timeout" in slow.error and "--timeout" not in slow.error


def test_the_limit_inputs_have_no_maximum_the_browser_would_enforce():
    from dash import dcc

    from dashboard.pages import PageContext

    tree = sql_page.layout(PageContext(registry=None, trace_id="t0", query={}))  # (the toolbar needs neither)
    found = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dcc.Input):
            found[node.id] = node
        children = getattr(node, "children", None)
        stack.extend(children if isinstance(children, list) else [children] if children is not None else [])
    assert {"sql-limit", "sql-timeout"} <= set(found)
    assert all(getattr(found[i], "max", None) is None for i in ("sql-limit", "sql-timeout"))


def test_a_result_with_start_ts_links_to_the_timeline_and_the_page_opens_a_linked_query(trace):
    from urllib.parse import parse_qs, urlparse

    sql = "SELECT start_ts, end_ts, opcode AS name FROM Instruction LIMIT 5"
    result = sql_logic.run_query(trace, sql)
    link = sql_page.timeline_link("t3", sql, result)
    url = urlparse(link.href)
    assert url.path == "/" and parse_qs(url.query) == {"trace": ["t3"], "query": [sql]}
    assert sql_page.timeline_link("t3", "SELECT 1 AS a", sql_logic.run_query(trace, "SELECT 1 AS a")) is None
    assert sql_page.initial_query({"query": sql}) == sql
    assert sql_page.initial_query({"query": "  "}) == sql_page.EXAMPLE_QUERIES[0][1]
    assert sql_page.initial_query({"query": "x" * 9000}) == sql_page.EXAMPLE_QUERIES[0][1]


def test_the_timelines_query_links_open_the_sql_page_with_a_query():
    from urllib.parse import parse_qs, urlparse

    from dashboard.links import query_bar_hrefs, query_example_href
    from profiler.sql_examples import TIMELINE_EXAMPLE

    url = urlparse(query_example_href({"trace": "t2", "start": "5"}))
    assert url.path == "/sql" and parse_qs(url.query) == {"trace": ["t2"], "query": [TIMELINE_EXAMPLE]}
    edit, remove = query_bar_hrefs({"trace": "t2", "query": "SELECT 1 AS start_ts", "tracks": "Tensor"})
    assert parse_qs(urlparse(edit).query) == {"trace": ["t2"], "query": ["SELECT 1 AS start_ts"]}
    assert urlparse(remove).path == "/" and parse_qs(urlparse(remove).query) == {"trace": ["t2"],
                                                                                 "tracks": ["Tensor"]}
