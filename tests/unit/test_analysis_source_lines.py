"""The source view (``profiler.analyses.source_lines``) against a brute force, on random instructions written with
the real TraceWriter (with and without the file's text) and read back through the database."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler.analyses import schema as rs
from profiler.analyses.source_lines import resolve_file, source_files, source_listing, split_location
from profiler.errors import QueryError
from tests.unit.test_analysis_time_by_oracle import _union  # the brute-force union length
from tracer import TraceWriter
from tracer import schema as ts

TEXT = "def k(nc):\n    a = 1\n    b = 2\n    c = 3\n"
LOCATIONS = ["k.py:2", "k.py:3", "k.py:9", "dir/k.py:4", "helper.py:1", "nofile", None]
ROWS = st.lists(st.tuples(st.sampled_from(["Tensor", "Vector", "Scalar"]), st.sampled_from(LOCATIONS),
                          st.sampled_from(["MM", "ADD", "EXP", "MAX"]), st.integers(0, 300), st.integers(0, 90),
                          st.integers(0, 50)),
                min_size=1, max_size=30)


def _write(path, rows, *, text: bool) -> None:
    n = len(rows)
    start = np.array([r[3] for r in rows], np.int64)
    end = start + np.array([r[4] for r in rows], np.int64)
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}) as w:
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: start, ts.END_TS: end, ts.DURATION_NS: end - start,
            ts.ENGINE: [r[0] for r in rows], ts.OPCODE: [r[2] for r in rows], ts.OPERANDS: [""] * n,
            ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.NKI_SOURCE_LOCATION: [r[1] for r in rows],
            ts.EVT_WAIT_TIME_NS: np.array([r[5] for r in rows], np.int64)})
        if text:
            w.append_rows(ts.SOURCE_FILE.name, [{ts.SOURCE_FILE_NAME: "k.py", ts.SOURCE_TEXT: TEXT,
                                                 ts.SOURCE_SIZE_BYTES: len(TEXT)}])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ROWS, st.sampled_from([None, 200]), st.booleans())
def test_listing_matches_a_brute_force(tmp_path_factory, rows, end_ns, text):
    path = tmp_path_factory.mktemp("src") / "t.trace"
    _write(path, rows, text=text)
    starts = [r[3] for r in rows]
    t1 = max(*(s + d for *_x, s, d, _w in rows), max(starts) + 1) if end_ns is None else end_ns
    if not any(s < t1 for s in starts):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    # which file "k.py" names: itself when a location names it, else "dir/k.py" (its base name), else the text
    files_anywhere = {split_location(r[1])[0] for r in rows if r[1]}
    expected = "k.py" if "k.py" in files_anywhere else "dir/k.py" if "dir/k.py" in files_anywhere else \
        "k.py" if text else None
    try:
        if expected is None:
            why = "no source file 'k.py'" if files_anywhere else "no instruction has a source location .* holds no"
            with pytest.raises(QueryError, match=why):
                source_listing(trace, "k.py", 0, t1)
            return
        got = {r[rs.LINE]: r for r in source_listing(trace, "k.py", 0, t1).to_pylist()}
        files = {r[rs.FILE]: r for r in source_files(trace, 0, t1).to_pylist()}
    finally:
        trace.close()
    in_window = [r for r in rows if r[3] < t1]
    located = [r for r in in_window if r[1] and split_location(r[1])[1] is not None]
    total = sum(r[4] for r in in_window)
    per_line: dict[int, list[tuple]] = {}
    for r in located:
        f, line = split_location(r[1])
        if f == expected:
            per_line.setdefault(line, []).append(r)
    expected_lines = set(per_line) | (set(range(1, TEXT.count("\n") + 1)) if text else set())
    assert set(got) == expected_lines
    for line, g in got.items():
        members = per_line.get(line, [])
        assert g[rs.INSTRUCTIONS] == len(members)
        assert g[rs.INSTRUCTION_NS] == sum(m[4] for m in members)
        assert g[rs.WAIT_NS] == sum(m[5] for m in members)
        assert g[rs.BUSY_NS] == _union([(m[3], min(m[3] + m[4], t1)) for m in members])
        if total:
            assert g[rs.INSTRUCTION_SHARE] == pytest.approx(g[rs.INSTRUCTION_NS] / total)
        assert g[rs.TEXT] == (TEXT.splitlines()[line - 1] if text and line <= 4 else None)
        if members:
            by_engine: dict[str, int] = {}
            for m in members:
                by_engine[m[0]] = by_engine.get(m[0], 0) + m[4]
            assert g[rs.ENGINES].split(", ") == sorted(by_engine, key=lambda e: (-by_engine[e], e))
            assert g[rs.START_NS] == min(m[3] for m in members)
        else:
            assert g[rs.ENGINES] is None and g[rs.START_NS] is None
    # the file table: "dir/k.py" is a file of its own; k.py's text is held (or not)
    in_files = sum(len(v) for v in per_line.values())
    if in_files or (expected == "k.py" and text):
        assert files[expected][rs.INSTRUCTIONS] == in_files
        assert files[expected][rs.HAS_TEXT] is text


def test_split_location():
    assert split_location("softmax.py:32") == ("softmax.py", 32)
    assert split_location("C:/x/k.py:7") == ("C:/x/k.py", 7)
    assert split_location("k.py") == ("k.py", None)
    assert split_location("k.py:abc") == ("k.py:abc", None)
    assert split_location("") is None and split_location(None) is None


def test_files_are_resolved_by_name_base_name_or_suffix(tmp_path):
    rows = [("Vector", "/home/u/kern/k.py:2", "ADD", 0, 5, 0), ("Vector", "/home/u/other/k.py:3", "ADD", 5, 5, 0),
            ("Scalar", "/home/u/kern/helper.py:1", "EXP", 10, 50, 0)]
    _write(tmp_path / "t.trace", rows, text=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(tmp_path / "t.trace")
    with trace:
        assert resolve_file(trace, None) == "/home/u/kern/helper.py"   # one instruction each: the most time
        assert resolve_file(trace, "helper.py") == "/home/u/kern/helper.py"
        assert resolve_file(trace, "kern/k.py") == "/home/u/kern/k.py"
        with pytest.raises(QueryError, match="names 2 source files"):
            resolve_file(trace, "k.py")  # the base name of two files
        # the text held under "k.py" is not listed as a file of its own: its locations carry directories
        assert sorted(source_files(trace).column(rs.FILE).to_pylist()) == [
            "/home/u/kern/helper.py", "/home/u/kern/k.py", "/home/u/other/k.py"]
        with pytest.raises(QueryError, match=r"no source file 'nope\.py' in the trace \(files: "):
            resolve_file(trace, "nope.py")
        with pytest.raises(QueryError, match="must be a string"):
            source_listing(trace, 3)  # type: ignore[arg-type]
        # a location with a directory finds the text recorded under its base name
        listing = source_listing(trace, "kern/k.py").to_pylist()
        assert [r[rs.TEXT] for r in listing] == TEXT.splitlines()
        assert listing[1][rs.INSTRUCTIONS] == 1


def test_a_trace_without_locations_or_sources_says_so(tmp_path):
    _write(tmp_path / "t.trace", [("Vector", None, "ADD", 0, 5, 0), ("Vector", "", "ADD", 5, 5, 0)], text=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(tmp_path / "t.trace")
    with trace:
        assert trace.recorded_sources() == {} and trace.source_text("k.py") is None
        assert source_files(trace).num_rows == 0
        with pytest.raises(QueryError, match="no instruction has a source location .* holds no source file"):
            source_listing(trace)


def test_the_notebook_view_escapes_the_text_and_shows_the_hottest_lines(tmp_path):
    from profiler.notebook.source import SourceListing

    rows = [("Vector", "k.py:2", "ADD", 0, 5, 0), ("Scalar", "k.py:3", "EXP", 5, 50, 7)]
    path = tmp_path / "t.trace"
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}) as w:
        n = len(rows)
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: np.array([0, 5]), ts.END_TS: np.array([5, 55]),
            ts.DURATION_NS: np.array([5, 50]), ts.ENGINE: ["Vector", "Scalar"], ts.OPCODE: ["ADD", "EXP"],
            ts.OPERANDS: [""] * n, ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.NKI_SOURCE_LOCATION: ["k.py:2", "k.py:3"]})
        w.append_rows(ts.SOURCE_FILE.name, [{ts.SOURCE_FILE_NAME: "k.py",
                                             ts.SOURCE_TEXT: "x = 1\n<script>alert(1)</script>\ny = '&'\n"}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    with trace:
        view = trace.source()
        assert isinstance(view, SourceListing) and view.file == "k.py" and view.table.num_rows == 3
        page = view._repr_html_()
        assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "y = &#x27;&amp;&#x27;" in page
        hot = trace.source("k.py", hot=1)
        assert hot.shown().column(rs.LINE).to_pylist() == [3]
        assert "the 1 hottest lines" in hot._repr_html_() and "x = 1" not in hot._repr_html_()
        assert repr(hot) == "<SourceListing k.py: 3 lines, 2 instructions>"
        for bad in (0, -1, True, "3", 1.5):
            with pytest.raises(QueryError, match="hot must be a number of lines"):
                trace.source(hot=bad)
