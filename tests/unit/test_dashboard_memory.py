"""The memory page's content (``dashboard.memory_view``, ``dashboard.pages.memory``), the ``trnprof memory`` command
and ``Trace.memory_figure``, without a browser."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import plotly.graph_objects as go
import pytest

import profiler
from dashboard import memory_view as mv
from dashboard.compare_logic import memory_lines
from dashboard.pages.memory import page_outputs
from dashboard.registry import TraceRegistry
from dashboard.selection_view import selection_panel
from profiler.analyses import memory_map as mmap
from profiler.analyses import schema as rs
from profiler.analyses.diff import diff
from profiler.analyses.memory_cell import IN_CELL, READ, WROTE, cell_accesses
from profiler.cli import main
from profiler.errors import QueryError
from profiler.figures.timefmt import ns_to_axis
from tests.dash_components import walk
from tests.golden.handmade import write_handmade
from tracer.sim import run_kernel


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("mempage")
    run_kernel("matmul_blocked", {"M": 512, "N": 512, "K": 256}, trace_path=root / "mm.trace")
    old = write_handmade(root / "old.trace")
    host = root / "alexnet.json.gz"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz", host)
    return root / "mm.trace", old, host


@pytest.fixture(scope="module")
def registry(traces):
    reg = TraceRegistry(list(traces))
    for tid in ("t0", "t1"):
        reg.open(tid)
    return reg


def query(href: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}


def test_the_page_shows_the_whole_trace_with_its_headline_and_links(registry):
    fig, status, tl_href, view_href, window, top = page_outputs(registry, "?trace=t0", "SBUF", None, None)
    trace = registry.open("t0")
    mm = mmap.memory_map(trace, "SBUF", width=mv.WIDTH, height=mv.HEIGHT)
    assert status.startswith("SBUF peak live ") and f"{mm.accesses:,} operand accesses" in status
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heat) == 1 and heat[0].z.shape == (mv.HEIGHT, mv.WIDTH)
    assert (heat[0].z == mm.state).all()
    assert window == mv.WHOLE and query(view_href) == {"trace": "t0", "mem": "SBUF"}
    # the rows cover the addresses the kernel uses, rounded up to a power of two, not all of SBUF
    used = int(mmap.accesses(trace, "SBUF", *trace.time_range).hi.max())
    assert top == mm.top and used <= top < 2 * used and top < mm.capacity
    assert query(tl_href) == {"trace": "t0", "start": str(trace.time_range[0]), "end": str(trace.time_range[1])}


def test_a_zoom_asks_for_its_window_and_a_double_click_for_the_whole_trace(registry):
    trace = registry.open("t0")
    t0, t1 = trace.time_range
    a, b = t0 + (t1 - t0) // 4, t0 + (t1 - t0) // 2
    relayout = {"xaxis.range[0]": ns_to_axis(a, t0), "xaxis.range[1]": ns_to_axis(b, t0)}
    fig, status, tl_href, view_href, window, _top = page_outputs(registry, "?trace=t0", "PSUM", relayout, None)
    assert window == [a, b]
    assert query(view_href) == {"trace": "t0", "mem": "PSUM", "start": str(a), "end": str(b)}
    assert query(tl_href)["start"] == str(a) and status.startswith("PSUM ")
    heat = next(t for t in fig.data if isinstance(t, go.Heatmap))
    assert (heat.z == mmap.memory_map(trace, "PSUM", a, b, width=mv.WIDTH, height=mv.HEIGHT).state).all()
    # another memory keeps the window (no relayout), a reset forgets it
    *_, kept, _top = page_outputs(registry, "?trace=t0", "SBUF", None, window)
    assert kept == [a, b]
    *_, reset, _top = page_outputs(registry, "?trace=t0", "SBUF", {"xaxis.autorange": True}, window)
    assert reset == mv.WHOLE
    # after a reset, another memory stays on the whole trace even when the page was opened on a window
    *_, view_href, still, _top = page_outputs(registry, f"?trace=t0&start={a}&end={b}", "PSUM", None, reset)
    assert still == mv.WHOLE and "start" not in query(view_href)


def test_a_link_opens_its_memory_and_window(registry):
    trace = registry.open("t0")
    t0 = trace.time_range[0]
    search = f"?trace=t0&mem=psum&start={t0 + 100}&end={t0 + 900}"
    _fig, _status, _tl, view_href, window, _top = page_outputs(registry, search, None, None, None)
    assert window == [t0 + 100, t0 + 900] and query(view_href)["mem"] == "PSUM"
    assert mv.url_mem({"mem": "nonsense"}) == "SBUF" and mv.url_window({"start": "9", "end": "3"}) is None


@pytest.mark.parametrize("relayout", [
    {"xaxis.range[0]": "nan", "xaxis.range[1]": 3}, {"xaxis.range[0]": [1], "xaxis.range[1]": {}},
    {"yaxis.range[0]": 1, "yaxis.range[1]": 2}, {"dragmode": "pan"}, "junk", 7, {"xaxis.range": [1e300, -1e300]},
])
def test_hostile_or_irrelevant_relayouts_keep_the_window(registry, relayout):
    trace = registry.open("t0")
    current = (trace.time_range[0] + 10, trace.time_range[0] + 500)
    got = mv.zoomed_window(relayout, trace.time_range[0], trace.time_range, current)
    assert got == current or (got is not None and trace.time_range[0] <= got[0] < got[1] <= trace.time_range[1])


def test_a_zoom_narrower_than_the_minimum_widens_and_stays_in_the_trace():
    got = mv.zoomed_window({"xaxis.range[0]": 1e-9, "xaxis.range[1]": 1.5e-9}, 0, (0, 1000), None)
    assert got is not None and got[1] - got[0] == mv.MIN_SPAN_NS and got[0] >= 0


def test_traces_without_a_memory_map_say_why(registry):
    fig, status, *_ = page_outputs(registry, "?trace=t1", "SBUF", None, None)
    assert fig == {} and "no instruction names an on-chip operand" in status.children
    fig, status, *_ = page_outputs(registry, "?trace=t9", "SBUF", None, None)
    assert fig == {} and status.id == "mem-error"


def test_a_window_too_big_to_map_is_an_empty_graph_to_zoom_in_on(registry, monkeypatch):
    trace = registry.open("t0")
    t0, t1 = trace.time_range
    n = trace.overview()["events"]["Instruction"]
    monkeypatch.setattr(mmap, "MAX_INSTRUCTIONS", n - 1)
    monkeypatch.setattr(mmap, "WHOLE_TRACE_INSTRUCTIONS", 0)  # live ranges from the window and its neighbours
    fig, status, *_, window, _top = page_outputs(registry, "?trace=t0", "SBUF", None, None)
    assert "too many to map at once" in status.children and "zoom in" in status.children
    assert window == mv.WHOLE and list(fig.layout.xaxis.range) == [0.0, ns_to_axis(t1, t0)]
    a, b = t0 + (t1 - t0) // 2, t0 + (t1 - t0) // 2 + (t1 - t0) // 20
    small = {"xaxis.range[0]": ns_to_axis(a, t0), "xaxis.range[1]": ns_to_axis(b, t0)}
    fig, status, *_, window, _top = page_outputs(registry, "?trace=t0", "SBUF", small, None)
    assert window == [a, b] and status.startswith("SBUF peak live ")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_trnprof_memory_prints_the_peaks(traces, capsys):
    code, out, err = run(capsys, "memory", str(traces[0]))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("SBUF peak live ") and lines[1].startswith("PSUM peak live ")
    code, out, _ = run(capsys, "memory", str(traces[0]), "--json")
    data = json.loads(out)
    with profiler.open(traces[0]) as t:
        mm = mmap.memory_map(t, "PSUM", width=1, height=1)
    assert data["PSUM"][rs.PEAK_LIVE_BYTES] == mm.peak_live_bytes and data["PSUM"][rs.CAPACITY_BYTES] == 16384
    code, out, _ = run(capsys, "memory", str(traces[0]), "--mem", "SBUF", "--over-time", "4", "--format", "csv")
    rows = out.splitlines()
    assert code == 0 and rows[0] == f"{rs.START_NS},{rs.END_NS},{rs.LIVE_BYTES}" and len(rows) == 5


def test_trnprof_memory_errors_are_one_line(traces, capsys):
    code, out, err = run(capsys, "memory", str(traces[0]), "--over-time", "4")
    assert code == 2 and out == "" and err.strip() == "trnprof: error: --over-time needs --mem SBUF or --mem PSUM"
    code, _out, err = run(capsys, "memory", str(traces[1]))
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "hardware profiles do not record" in err and "record it again" in err
    code, _out, err = run(capsys, "memory", str(traces[0]), "--over-time", "0", "--mem", "SBUF")
    assert code == 2 and "1 to 10000" in err


def test_the_notebook_figure_is_the_pages(traces):
    with profiler.open(traces[0]) as t:
        fig = t.memory_figure("PSUM", width=40, height=8)
        mm = mmap.memory_map(t, "PSUM", width=40, height=8)
    heat = next(d for d in fig.data if isinstance(d, go.Heatmap))
    assert (heat.z == mm.state).all() and fig.layout.title.text.startswith("PSUM peak live")


def test_the_timelines_link_is_the_memory_of_its_view():
    href = mv.view_memory_href("?trace=t3&colour=engine", {"view": [100, 900], "trace": "t3"})
    assert urlparse(href).path == mv.MEMORY_PATH
    assert query(href) == {"trace": "t3", "mem": "SBUF", "start": "100", "end": "900"}
    assert mv.view_memory_href("?trace=t3", {"view": None}) is None
    assert mv.view_memory_href("?trace=t3", "junk") is None
    assert mv.view_memory_href("", {"view": [5, 5], "trace": "t0"}) is None


def test_the_summary_pages_memory_section(registry):
    trace = registry.open("t0")
    section = mv.memory_section(trace, "t0")
    items = section.children[1].children
    assert [i.children.children.split(" ")[0] for i in items] == ["SBUF", "PSUM"]
    sbuf = mmap.memory_map(trace, "SBUF", width=1, height=1)
    assert f"{sbuf.peak_live_bytes / 1024:,.1f} KiB" in items[0].children.children
    assert query(items[1].children.href) == {"trace": "t0", "mem": "PSUM"}
    assert mv.memory_section(registry.open("t1"), "t1").children is None  # no on-chip operands: nothing


def test_the_summary_pages_memory_section_when_too_long_to_map(registry, monkeypatch):
    monkeypatch.setattr(mmap, "MAX_INSTRUCTIONS", 1)
    items = mv.memory_section(registry.open("t0"), "t0").children[1].children
    assert "too many to map at once" in items[0].children[0]


def test_a_click_maps_to_its_cell_and_back():
    window, cap = (1000, 1000 + 900 * 7), 229376
    # the centre of column 3, row 10 (KiB)
    x = (window[0] + 3.5 * 7 - 1000) / 1e9
    y = (10.5 * cap / mv.HEIGHT) / 1024
    cell = mv.clicked_cell({"points": [{"x": x, "y": y}]}, 1000, window, cap)
    assert cell == ((window[0] + 21, window[0] + 28), (10 * cap // mv.HEIGHT, 11 * cap // mv.HEIGHT))
    for bad in (None, {}, {"points": []}, {"points": ["x"]}, {"points": [{"x": "nan", "y": 1}]},
                {"points": [{"x": -1.0, "y": 1}]}, {"points": [{"x": x, "y": 1e9}]},
                # the live-bytes line (its y is a byte count; it was read as an address)
                {"points": [{"x": x, "y": y, "curveNumber": 5}]}):
        assert mv.clicked_cell(bad, 1000, window, cap) is None
    assert mv.clicked_cell({"points": [{"x": x, "y": y, "curveNumber": mv.MAP_CURVE}]}, 1000, window, cap) == cell


def test_the_map_is_the_figures_first_curve_and_hover_times_read_plainly(registry):
    from profiler.figures.memory_map import memory_map_figure

    with_trace = registry.open("t0")
    from profiler.analyses.memory_map import memory_map

    fig = memory_map_figure(memory_map(with_trace, "SBUF"))
    assert fig.data[mv.MAP_CURVE].type == "heatmap"
    for tr in fig.data:  # `%{x}` carries the axis suffix: it read "56.4412833333µss"
        assert "%{x}s" not in (tr.hovertemplate or "")


def test_a_clicked_cell_names_who_wrote_and_read_its_bytes(registry):
    trace = registry.open("t0")
    acc = mmap.accesses(trace, "SBUF", *trace.time_range)
    # a read of a DMA-loaded tile: the cell at its start, on its first byte
    i = int(np.flatnonzero(~acc.write)[0])
    cell = ((int(acc.start[i]), int(acc.start[i]) + 1), (int(acc.lo[i]), int(acc.lo[i]) + 1))
    table = cell_accesses(trace, "SBUF", *cell)
    rows = table.to_pylist()
    assert any(r[rs.ROLE] == IN_CELL and r[rs.ID] == int(acc.instruction[i]) and r[rs.ACCESS] == "read" for r in rows)
    wrote = [r for r in rows if r[rs.ROLE] == WROTE]
    assert len(wrote) == 1 and wrote[0][rs.ACCESS] == "write" and wrote[0][rs.START_NS] <= cell[0][0]
    # brute force: the last write to that byte starting before the cell ends
    on = np.flatnonzero((acc.lo <= cell[1][0]) & (acc.hi > cell[1][0]) & acc.write & (acc.start < cell[0][1]))
    last = on[np.argmax(acc.start[on])]
    assert wrote[0][rs.ID] == int(acc.instruction[last]) and wrote[0][rs.OPCODE]
    readers = [r for r in rows if r[rs.ROLE] == READ]
    byte = (acc.lo <= cell[1][0]) & (acc.hi > cell[1][0])
    nxt = np.flatnonzero(byte & acc.write & (acc.start > acc.start[last]))
    until = acc.start[nxt].min() if len(nxt) else np.inf
    want = np.flatnonzero(byte & ~acc.write & (acc.start >= acc.start[last]) & (acc.start < until))
    assert readers and sorted(r[rs.ID] for r in readers) == sorted(acc.instruction[want].tolist())
    panel = mv.cell_panel(trace, "t0", "SBUF", cell)
    links = [c for c in walk(panel) if getattr(c, "href", None)]
    assert any("select=Instruction%3A" in link.href for link in links)
    with pytest.raises(QueryError, match="byte range"):
        cell_accesses(trace, "SBUF", cell[0], (5, 5))


def test_diff_compares_the_memory_peaks(traces, tmp_path, capsys):
    b_path = tmp_path / "rowload.trace"
    run_kernel("matmul_rowload", {"M": 512, "N": 1024, "K": 512}, trace_path=b_path)
    with profiler.open(traces[0]) as a, profiler.open(b_path) as b:
        result = diff(a, b)
        rows = {r[rs.METRIC]: r for r in result[rs.DIFF_MEMORY].to_pylist()}
        for mem, name in (("SBUF", rs.SBUF_PEAK_LIVE_BYTES), ("PSUM", rs.PSUM_PEAK_LIVE_BYTES)):
            pa_, pb = (mmap.memory_map(t, mem, width=1, height=1).peak_live_bytes for t in (a, b))
            assert (rows[name][rs.A], rows[name][rs.B], rows[name][rs.DELTA]) == (pa_, pb, pb - pa_)
        with profiler.open(traces[1]) as old:  # no memory map on one side: no rows
            assert diff(a, old)[rs.DIFF_MEMORY].num_rows == 0
    lines = memory_lines(result)
    assert [line.children[0].children for line in lines] == ["SBUF peak live: ", "PSUM peak live: "]
    assert lines[0].children[1].children.endswith(" per partition") and " KiB → " in lines[0].children[1].children
    code, out, _ = run(capsys, "diff", str(traces[0]), str(b_path))
    assert code == 0 and "peak live bytes per partition:" in out and rs.SBUF_PEAK_LIVE_BYTES in out


def test_the_selection_panel_gives_the_ranges_memory_peaks(registry, monkeypatch):
    trace = registry.open("t0")
    t0, t1 = trace.time_range
    a, b = t0 + (t1 - t0) // 3, t0 + 2 * (t1 - t0) // 3
    panel = selection_panel(trace, a, b)
    section = next(c for c in walk(panel) if getattr(c, "id", None) == "selection-memory")
    lines = [li.children for li in section.children[1].children]
    for line, mm in zip(lines, mmap.memory_maps(trace, a, b, width=1, height=1), strict=True):
        assert line.startswith(f"{mm.mem} ") and (mm.peak_at_ns is None or f"{mm.peak_live_bytes / 1024:,.1f} KiB"
                                                 in line)
    assert mv.selection_section(registry.open("t1"), 0, 100).children is None  # no on-chip operands: nothing
    monkeypatch.setattr(mv, "SELECTION_MAX_INSTRUCTIONS", 5)
    assert "too many to map here" in mv.selection_section(trace, a, b).children[1].children
    monkeypatch.setattr(mv, "SELECTION_MAX_INSTRUCTIONS", 10**9)
    monkeypatch.setattr(mmap, "MAX_INSTRUCTIONS", 1)
    assert "too many to map at once" in mv.selection_section(trace, a, b).children[1].children


def test_the_maps_of_both_memories_read_once_are_the_maps_of_each(registry):
    trace = registry.open("t0")
    both = mmap.memory_maps(trace, width=60, height=16)
    for mm in both:
        one = mmap.memory_map(trace, mm.mem, width=60, height=16)
        assert (mm.state == one.state).all() and mm.peak_live_bytes == one.peak_live_bytes and mm.top == one.top


def test_the_psum_map_marks_its_banks(traces):
    with profiler.open(traces[0]) as t:
        psum = mmap.memory_map(t, "PSUM", width=40, height=32)
        sbuf = mmap.memory_map(t, "SBUF", width=40, height=32)
        assert psum.bank_bytes == 16384 // 8 and sbuf.bank_bytes is None
        fig = t.memory_figure("PSUM", width=40, height=32)
    banks = psum.top // psum.bank_bytes
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.yref == "y2"]
    assert sorted(s.y0 for s in lines) == [k * 2.0 for k in range(banks)]  # KiB
    assert [a.text for a in fig.layout.annotations if a.text.startswith("bank")] == [f"bank {k}" for k in range(banks)]
    with profiler.open(traces[0]) as t:
        assert not [s for s in t.memory_figure("SBUF", width=40, height=32).layout.shapes if s.yref == "y2"]


def test_the_address_axis_names_a_top_under_one_kib():
    import dataclasses

    from profiler.figures.memory_map import address_title

    mm = mmap.MemoryMap("SBUF", 196_608, 512, 0, 10, np.zeros((1, 1), np.uint8), np.zeros(1, np.int64), 0, None,
                        0, 0, (0, 10), True)
    assert address_title(mm) == "SBUF address (KiB, lowest 0.5 of 192)"      # it read "lowest 0 of 192"
    assert address_title(dataclasses.replace(mm, top=16_384)) == "SBUF address (KiB, lowest 16 of 192)"
    assert address_title(dataclasses.replace(mm, top=196_608)) == "SBUF address (KiB per partition)"


def test_a_trace_without_a_memory_map_says_so_before_zoom_in(two_core_trace, monkeypatch):
    """A synthetic trace names no on-chip operand: "too many instructions ... zoom in" sent the user zooming for a
    map that no window has."""
    monkeypatch.setattr(mmap, "MAX_INSTRUCTIONS", 1)
    with profiler.open(two_core_trace) as t, pytest.raises(QueryError, match="so the trace has no memory map"):
        mmap.memory_maps(t, width=1, height=1)
