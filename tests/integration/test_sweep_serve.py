"""A sweep's traces served together: the sweep file ``trnprof sweep --trace-dir`` writes, serving a folder of
traces (``trnprof serve DIR``), and the Sweep page's content (its links by trace id, the fastest point, a sweep
file that cannot be read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dash import html

from dashboard.command import expand_folders
from dashboard.pages import default_pages
from dashboard.registry import TraceRegistry
from dashboard.sweep_view import point_rows, served_sweeps, sweep_page
from profiler.cli import main
from profiler.sweep_table import SWEEP_FILE, read_sweep_file
from profiler.trace_folders import is_trace_folder, traces_in_folder
from tracer.errors import TraceFormatError

ARGS = ["sweep", "matmul_rowload", "-p", "M=512", "-p", "N=1024", "-p", "K=256", "-p", "block_m=1,4",
        "-p", "row_n=1024,2048", "-q"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "dir"
    assert main([*ARGS, "--trace-dir", str(out)]) == 0
    return out


def _texts(component) -> list[str]:
    out = []

    def walk(c):
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list | tuple):
            for x in c:
                walk(x)
        elif hasattr(c, "children"):
            walk(c.children)

    walk(component)
    return out


def test_the_sweep_file_holds_the_table_with_trace_names(sweep_dir):
    sweep = read_sweep_file(sweep_dir)
    assert sweep.kernel == "matmul_rowload" and sweep.names == ["block_m", "row_n"] and sweep.points == 4
    rows = sweep.table.to_pylist()
    assert [(r["block_m"], r["row_n"]) for r in rows] == [("1", "1024"), ("1", "2048"), ("4", "1024"), ("4", "2048")]
    assert [sweep.trace_path(i) is not None for i in range(4)] == [True, False, True, False]
    assert sweep.trace_path(0) == sweep_dir / "000-block_m=1-row_n=1024.trace"
    assert rows[1]["error"] and rows[1]["simulated_us"] is None
    assert rows[2]["simulated_us"] < rows[0]["simulated_us"]


def test_a_folder_of_traces_lists_them_in_the_sweeps_order(sweep_dir, tmp_path):
    assert is_trace_folder(sweep_dir) and not is_trace_folder(traces_in_folder(sweep_dir)[0])
    assert traces_in_folder(sweep_dir) == [read_sweep_file(sweep_dir).trace_path(i) for i in (0, 2)]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a trace")
    with pytest.raises(TraceFormatError, match="holds no trace"):
        traces_in_folder(empty)
    assert expand_folders([sweep_dir, Path("/no/such/thing")]) == [*traces_in_folder(sweep_dir),
                                                                   Path("/no/such/thing")]


@pytest.mark.parametrize(("content", "needle"), [
    ("{", "Expecting"),
    ('{"format": "other"}', "not a trnprof sweep file"),
    ('{"format": "trnprof-sweep", "version": 99}', "version 99"),
    ('{"format": "trnprof-sweep", "version": 1, "kernel": "k", "names": [], "columns": ["trace"], '
     '"rows": [{"trace": "../../etc"}]}', "not a name inside"),
    ('{"format": "trnprof-sweep", "version": 1, "kernel": "k", "names": [], "columns": ["simulated_us"], '
     '"rows": [{"simulated_us": "fast"}]}', "not a readable sweep file"),
])
def test_a_bad_sweep_file_is_one_line_naming_it(tmp_path, content, needle):
    (tmp_path / SWEEP_FILE).write_text(content)
    with pytest.raises(TraceFormatError, match=needle) as info:
        read_sweep_file(tmp_path)
    assert str(tmp_path / SWEEP_FILE) in str(info.value) and "\n" not in str(info.value)


def test_the_sweep_page_links_each_point_by_trace_id(sweep_dir):
    paths = traces_in_folder(sweep_dir)
    registry = TraceRegistry(paths)
    assert [p.title for p in default_pages(registry) if p.in_nav].count("Sweep") == 1
    assert "Sweep" not in [p.title for p in default_pages(TraceRegistry([])) if p.in_nav]
    [served] = served_sweeps(registry)
    assert served.trace_ids == ["t0", None, "t1", None]
    assert served.fastest == 2   # block_m=4 row_n=1024
    rows = point_rows(served, "t0")
    assert rows[2]["fastest"] and rows[0]["current"] and not rows[2]["current"]
    assert dict(rows[0]["links"]) == {"timeline": "/?trace=t0", "summary": "/summary?trace=t0",
                                      "compare with the fastest": "/compare?trace=t1&b=t0"}
    assert dict(rows[2]["links"]) == {"timeline": "/?trace=t1", "summary": "/summary?trace=t1"}
    assert rows[1]["links"] == [] and "multiple of row_n" in rows[1]["error"]
    text = " ".join(_texts(sweep_page(registry, "t0")))
    assert "matmul_rowload: 2 of 4 points ran; fastest block_m=4 row_n=1024" in text
    assert "★ block_m=4 row_n=1024" in text
    assert "busiest" in text and "memory bound" not in text   # no bounds in this sweep


def test_the_sweep_page_says_why_a_sweep_file_cannot_be_read(sweep_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(sweep_dir, copy)
    registry = TraceRegistry(traces_in_folder(copy))
    (copy / SWEEP_FILE).write_text(json.dumps({"format": "trnprof-sweep", "version": 7}))
    [served] = served_sweeps(registry)
    assert served.sweep is None and "version 7" in served.error
    page = sweep_page(registry, "t0")
    assert any("version 7" in t for t in _texts(page))


def test_no_sweep_served_says_how_to_make_one(small_trace):
    page = sweep_page(TraceRegistry([small_trace]), "t0")
    assert isinstance(page, html.Div) and "trnprof sweep KERNEL" in " ".join(_texts(page))


def test_an_interrupted_sweep_file_keeps_the_points_done(tmp_path, monkeypatch, capsys):
    from tests.unit.test_sweep import interrupt_after

    interrupt_after(monkeypatch, 1)
    out = tmp_path / "cut"
    assert main([*ARGS, "--trace-dir", str(out)]) == 130
    sweep = read_sweep_file(out)
    assert sweep.points == 4 and sweep.table.num_rows == 1
    text = " ".join(_texts(sweep_page(TraceRegistry(traces_in_folder(out)), "t0")))
    assert "1 of 4 points ran (interrupted after 1)" in text


@pytest.mark.parametrize("search", [None, "", "?trace=t1", "?trace=t99", "?trace=../../etc/passwd",
                                    "?trace=" + "x" * 5000, "?b=t0&trace=t0", "?trace=%00"])
def test_the_sweep_page_answers_any_url_with_a_page_or_one_line(sweep_dir, search):
    from dashboard.app import render_page

    registry = TraceRegistry(traces_in_folder(sweep_dir))
    page = render_page(default_pages(registry), registry, "/sweep", search)
    text = " ".join(_texts(page))
    if search in (None, "", "?trace=t1", "?b=t0&trace=t0"):
        assert "Sweep of matmul_rowload" in text
    else:
        assert "Sweep of" not in text and "no served trace has id" in text


def test_a_click_on_a_bar_goes_only_to_a_served_trace(sweep_dir):
    from dashboard.sweep_view import clicked_point_href
    from profiler.figures.sweep import sweep_figure

    registry = TraceRegistry(traces_in_folder(sweep_dir))
    sweep = read_sweep_file(sweep_dir)
    fig = sweep_figure(sweep.table, sweep.names, keys=served_sweeps(registry)[0].trace_ids)
    bars = [(y, c) for t in fig.data for y, c in zip(t.y, t.customdata, strict=True)]
    assert {y: c[3] for y, c in bars} == {"block_m=1 row_n=1024": "t0", "block_m=4 row_n=1024": "t1"}
    assert clicked_point_href(registry, {"points": [{"customdata": bars[0][1]}]}).startswith("/?trace=t")
    for hostile in (None, {}, {"points": []}, {"points": [{"customdata": [1, 2, 3, "t9"]}]},
                    {"points": [{"customdata": [1, 2, 3, "../x"]}]}, {"points": [{"customdata": [1, 2, 3, 7]}]},
                    {"points": [{"customdata": "abc"}]}, "garbage", {"points": [None]}):
        assert clicked_point_href(registry, hostile) is None


def test_a_sweep_file_that_cannot_be_written_is_one_line_and_keeps_the_traces(tmp_path, monkeypatch, capsys):
    from pathlib import Path as P

    real = P.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith(".sweep.json.tmp"):
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(P, "write_text", full)
    out = tmp_path / "full"
    assert main([*ARGS, "--trace-dir", str(out)]) == 2
    cap = capsys.readouterr()
    assert "sweep of matmul_rowload: 2 of 4 points ran" in cap.out   # the table is still printed
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "sweep.json: cannot write the sweep file (No space left on device)" in err[0]
    assert not (out / SWEEP_FILE).exists() and not list(out.glob(".sweep.json.tmp*"))
    assert len(traces_in_folder(out)) == 2   # the points' traces are kept


def test_the_traces_page_points_to_the_sweep_page(sweep_dir, small_trace):
    from dashboard.pages import PageContext, traces

    registry = TraceRegistry(traces_in_folder(sweep_dir))
    text = "".join(_texts(traces.layout(PageContext(registry, "t1", {}))))
    assert "Served from a sweep (dir): the Sweep page charts the points" in text
    assert "Sweep page" not in " ".join(_texts(traces.layout(PageContext(TraceRegistry([small_trace]), "t0", {}))))
