"""The call-tree page's logic without a browser: the URL's window, rows and root, the status, the per-name table
and its links, the links to the view, and errors as one line in the page."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from dash import html

from dashboard import calltree_view as cv
from dashboard.app import create_app
from dashboard.pages.calltree import page_outputs
from tests.dash_components import texts, walk

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
THREAD = "pyper:trainer:0:0 (CPU) / thread 4037 (python3.8)"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    src = tmp_path_factory.mktemp("ctpage") / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    softmax = Path(__file__).resolve().parents[2] / "sample_traces" / "softmax-trn1.trace"
    app = create_app([src, softmax])
    yield app
    app.trnprof_registry.close()


def test_whole_trace_view(app):
    reg = app.trnprof_registry
    fig, status, table, tl_href, view_href, options, root, of, rows_style, steps_style, levels_style = page_outputs(
        reg, "?trace=t0", None)
    assert of == cv.OF_SPANS and rows_style == steps_style == {}   # a trace with spans: them, with their options
    assert levels_style == {"display": "none"}
    assert "4,811 spans in the whole trace" in status and "summed over rows" in status
    assert fig.data[0].type == "icicle" and root == cv.ALL_ROOTS
    assert options[0]["value"] == cv.ALL_ROOTS and any(o["value"] == THREAD for o in options[1:])
    assert tl_href == "/?trace=t0" and view_href == "/calltree?trace=t0"
    names = texts(table)
    assert "Time per name, by self time" in names and "PyTorch Profiler (0)" in names


def test_root_window_and_rows_come_from_the_url_and_make_the_link(app):
    reg = app.trnprof_registry
    t = reg.open("t0")
    lo, hi = t.time_range
    mid = (lo + hi) // 2
    search = "?" + "&".join(["trace=t0", f"start={lo}", f"end={mid}", f"root={THREAD}"])
    fig, status, _table, tl_href, view_href, _opts, root, *_ = page_outputs(reg, search, None)
    assert root == THREAD and "summed over rows" not in status
    assert fig.layout.title.text == THREAD
    assert parse_qs(urlsplit(tl_href).query) == {"trace": ["t0"], "start": [str(lo)], "end": [str(mid)]}
    q = parse_qs(urlsplit(view_href).query)
    assert q["root"] == [THREAD] and q["start"] == [str(lo)] and "rows" not in q
    # the root's subtree only: every drawn box lies under the thread's box
    assert fig.data[0].parents[0] == "" and all(p != "" for p in fig.data[0].parents[1:])
    merged = page_outputs(reg, "?trace=t0&rows=merged", None)
    assert "rows=merged" in merged[4] and "summed over rows" not in merged[1]
    assert all(o["value"] != THREAD for o in merged[5])  # merged rows: the roots are spans


def test_a_root_the_window_lacks_shows_every_root(app):
    out = page_outputs(app.trnprof_registry, "?trace=t0", None, "no such root")
    assert out[6] == cv.ALL_ROOTS and "root=" not in out[4]


def test_names_link_to_the_timeline_search(app):
    _fig, _status, table, *_ = page_outputs(app.trnprof_registry, "?trace=t0", None)
    links = [c for c in walk(table) if getattr(c, "href", None)]
    first = next(link for link in links if link.children == "PyTorch Profiler (0)")
    assert parse_qs(urlsplit(first.href).query) == {"trace": ["t0"], "search": ['"PyTorch Profiler (0)"']}
    assert len(links) == cv.TOP_NAMES


def test_errors_are_one_line_in_the_page(app):
    reg = app.trnprof_registry
    out = page_outputs(reg, "?trace=t1&of=spans", None)
    assert out[0] == {} and isinstance(out[1], html.Span) and "no spans" in out[1].children
    assert str(Path(__file__).resolve().parents[2]) not in out[1].children  # no server path in the page
    out = page_outputs(reg, "?trace=t7", None)
    assert "no served trace has id" in out[1].children and out[5] == []


def test_view_link_from_the_timeline_state():
    assert cv.view_calltree_href("?trace=t3", {"view": [10, 90]}) == "/calltree?trace=t3&start=10&end=90"
    assert cv.view_calltree_href(None, {"view": [10, 90], "trace": "t1"}).startswith("/calltree?trace=t1")
    for state in (None, {}, {"view": [5, 5]}, {"view": "x"}, {"view": [1, 2]}):
        if state == {"view": [1, 2]}:
            assert cv.view_calltree_href(None, state) is None  # no trace id anywhere
        else:
            assert cv.view_calltree_href("?trace=t0", state) is None
    assert cv.url_rows({"rows": "MERGED"}) == cv.ROWS_MERGED and cv.url_rows({"rows": "x"}) == cv.ROWS_SPLIT


def test_the_summary_of_a_host_trace_lists_its_rows_and_names(app):
    from dashboard.analysis_views import analysis_section, has_device_events
    from profiler.figures.summary import headline_numbers

    reg = app.trnprof_registry
    torch, softmax = reg.open("t0"), reg.open("t1")
    assert not has_device_events(torch) and has_device_events(softmax)
    section = cv.spans_section(torch, "t0")
    table = next(c for c in walk(section) if getattr(c, "id", None) == "summary-span-rows")
    rows = table.children[1].children   # the body's rows, in order
    assert len(rows) == 8
    cells = [[texts(td)[0] for td in r.children] for r in rows]
    assert cells[0][:2] == ["Spans / PyTorch Profiler", "1"] and cells[0][3] == "100.0%"
    assert sum(int(c[1].replace(",", "")) for c in cells) == 4811
    assert any(c[0] == THREAD and c[1] == "1,828" for c in cells)
    link = next(c for c in walk(section) if getattr(c, "id", None) == "summary-calltree-link")
    assert link.href == "/calltree?trace=t0"
    kernels = next(c for c in walk(section) if getattr(c, "id", None) == "summary-kernels-link")
    assert kernels.href == "/calltree?trace=t0&of=kernels"
    assert any(getattr(c, "id", None) == "ct-top-table" for c in walk(section))
    # the device analyses say once why they are not there; the cards leave DMA out
    note = analysis_section(torch)
    assert any(getattr(c, "id", None) == "summary-no-device" for c in walk(note))
    assert [label for label, _v, _u in headline_numbers(torch.summary())] == ["total time"]
    assert "DMA bytes" in [label for label, _v, _u in headline_numbers(softmax.summary())]
    # a recording without layer names has no spans part
    assert cv.spans_section(softmax, "t1").children is None


def test_numbered_steps_merge_from_the_box_or_the_url(app):
    reg = app.trnprof_registry
    merged = page_outputs(reg, "?trace=t0", None, steps=[cv.STEPS_MERGED])
    assert "steps=merged" in merged[4]
    labels = set(merged[0].data[0].labels)
    assert "ProfilerStep#N" in labels and "ProfilerStep#552" not in labels
    by_url = page_outputs(reg, "?trace=t0&steps=merged", None)
    assert "ProfilerStep#N" in set(by_url[0].data[0].labels)
    unmerged = page_outputs(reg, "?trace=t0&steps=merged", None, steps=[])   # the box unticked wins
    assert "ProfilerStep#552" in set(unmerged[0].data[0].labels) and "steps=" not in unmerged[4]


def test_a_recording_without_spans_shows_its_instructions(app):
    reg = app.trnprof_registry
    fig, status, table, _tl, view_href, options, root, of, rows_style, steps_style, levels_style = page_outputs(
        reg, "?trace=t1", None)
    assert of == cv.OF_INSTRUCTIONS and view_href == "/calltree?trace=t1"
    assert rows_style == steps_style == {"display": "none"} and levels_style == {}
    assert status.startswith("48 instructions in the whole trace") and "of engine time" in status
    labels = list(fig.data[0].labels)
    assert labels[0] == "NeuronCore 0" and "softmax.py:35" in labels and "TENSOR_REDUCE" in labels
    assert [o["value"] for o in options] == [cv.ALL_ROOTS, "NeuronCore 0"] and root == cv.ALL_ROOTS
    # the per-name table: source lines link to the timeline searching for exactly that line
    links = [c for c in walk(table) if getattr(c, "href", None)]
    line = next(link for link in links if link.children == "softmax.py:35")
    assert parse_qs(urlsplit(line.href).query)["search"] == ['"softmax.py:35"']
    # a trace with spans shows its instructions when asked (the mlp recording has both)
    spans = page_outputs(reg, "?trace=t1&of=spans", None)
    assert spans[7] == cv.OF_SPANS and "of=spans" in spans[4] and "no spans" in spans[1].children


def test_the_selection_panel_lists_the_ranges_names_by_self_time(app):
    from dashboard.selection_view import selection_outputs

    reg = app.trnprof_registry
    torch = reg.open("t0")
    (s, e), = torch.sql("SELECT start_ts, end_ts FROM slice WHERE name = 'ProfilerStep#552'").fetchall()
    panel = selection_outputs(torch, None, {"trace": "t0", "view": [s, e]})
    section = next(c for c in walk(panel) if getattr(c, "id", None) == "selection-spans")
    link = next(c for c in walk(section) if getattr(c, "id", None) == "sel-calltree-link")
    assert parse_qs(urlsplit(link.href).query) == {"trace": ["t0"], "start": [str(s)], "end": [str(e)]}
    table = next(c for c in walk(section) if getattr(c, "id", None) == "sel-span-names")
    names = [texts(r.children[0])[0] for r in table.children[1].children]
    assert len(names) == cv.SELECTION_NAMES and "PyTorch Profiler (0)" in names   # (it spans the range too)
    assert any(t.endswith("of span time in the range") for t in texts(section))
    # a recording without spans: no such part
    softmax = reg.open("t1")
    lo, hi = softmax.time_range
    panel = selection_outputs(softmax, None, {"trace": "t1", "view": [lo, hi]})
    section = next(c for c in walk(panel) if getattr(c, "id", None) == "selection-spans")
    assert section.children is None


def test_the_root_picker_offers_the_widest_roots_and_the_picked_one(monkeypatch, app):
    from profiler.analyses.call_tree import call_tree

    tree = call_tree(app.trnprof_registry.open("t0"), by_thread=False)
    every = cv.root_options(tree)
    assert len(every) > 10 and every[0]["value"] == cv.ALL_ROOTS
    monkeypatch.setattr(cv, "MAX_ROOT_OPTIONS", 3)
    few = cv.root_options(tree)
    assert [o["value"] for o in few] == [o["value"] for o in every[:4]]
    last = every[-1]["value"]
    assert [o["value"] for o in cv.root_options(tree, last)] == [*(o["value"] for o in every[:4]), last]


def test_gpu_kernels_under_their_launching_stacks(app):
    reg = app.trnprof_registry
    fig, status, _table, _tl, view_href, options, _root, of, rows_style, steps_style, levels_style = page_outputs(
        reg, "?trace=t0&of=kernels", None)
    assert of == cv.OF_KERNELS and "of=kernels" in view_href
    assert rows_style == levels_style == {"display": "none"} and steps_style == {}
    assert status.startswith("1,204 kernels in the whole trace") and "of GPU time" in status
    assert THREAD in [o["value"] for o in options]
    assert "cudaLaunchKernel" in set(fig.data[0].labels)
    # a recording has no GPU kernels: one line
    out = page_outputs(reg, "?trace=t1&of=kernels", None)
    assert "no GPU kernels" in out[1].children


def test_a_recordings_spans_part_has_no_gpu_link():
    import profiler

    with profiler.open(Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace") as mlp:
        section = cv.spans_section(mlp, "t5")
    ids = {getattr(c, "id", None) for c in walk(section)}
    assert "summary-calltree-link" in ids and "summary-kernels-link" not in ids


def test_a_click_on_a_box_shows_its_stack_and_numbers(app):
    from dashboard.pages.calltree import frame_outputs

    reg = app.trnprof_registry
    fig = page_outputs(reg, "?trace=t0", None)[0]
    d = fig.data[0]
    i = next(k for k, p in enumerate(d.customdata) if p[0] == "## backward ##")
    point = {"points": [{"id": d.ids[i], "customdata": list(d.customdata[i])}]}
    panel = frame_outputs(reg, "?trace=t0", point, cv.OF_SPANS)
    stack = next(c for c in walk(panel) if getattr(c, "id", None) == "ct-frame-stack")
    assert texts(stack) == [THREAD, " › ", "ProfilerStep#552", " › ", "## backward ##"]
    numbers = next(c for c in walk(panel) if getattr(c, "id", None) == "ct-frame-numbers")
    assert texts(numbers)[0] == "1 spans, total 229.2 ms, self 229.1 ms"
    search = next(c for c in walk(panel) if getattr(c, "id", None) == "ct-frame-search")
    assert parse_qs(urlsplit(search.href).query)["search"] == ['"## backward ##"']
    # the box over the roots and a row's box: no search link
    for name in ("all rows", THREAD):
        k = next(k for k, p in enumerate(d.customdata) if p[0] == name)
        panel = frame_outputs(reg, "?trace=t0", {"points": [{"customdata": list(d.customdata[k])}]}, cv.OF_SPANS)
        assert "ct-frame-search" not in {getattr(c, "id", None) for c in walk(panel)}
    # malformed clicks: the prompt
    for click in (None, [], {"points": []}, {"points": [{"customdata": ["a", "b", -1, 0, 0]}]},
                  {"points": [{"customdata": ["a", "b", True, 0, 0]}]}, {"points": [{"customdata": "x"}]}):
        assert texts(frame_outputs(reg, "?trace=t0", click, "spans")) == [cv.FRAME_PROMPT]
    assert "no served trace" in frame_outputs(reg, "?trace=t9", point, "spans").children


def test_the_instructions_levels_come_from_the_picker_or_the_url(app):
    reg = app.trnprof_registry
    fig, _status, _table, _tl, view_href, *_ = page_outputs(reg, "?trace=t1", None, levels=["engine", "opcode"])
    assert "levels=engine%2Copcode" in view_href and fig.layout.title.text == "every core: engine › opcode"
    depth1 = {label for label, parent in zip(fig.data[0].labels, fig.data[0].parents, strict=True)
              if parent == fig.data[0].ids[0]}
    engines = {e for (e,) in reg.open("t1").sql(
        "SELECT DISTINCT engine FROM Instruction WHERE opcode NOT IN ('EVENT_SEMAPHORE', 'WAIT')").fetchall()}
    assert depth1 == engines
    by_url = page_outputs(reg, "?trace=t1&levels=source,opcode", None)
    assert by_url[0].layout.title.text == "every core: source line › opcode"
    for bad in ("bogus", "engine,engine", ""):
        out = page_outputs(reg, f"?trace=t1&levels={bad}", None)   # the default levels
        assert "levels=" not in out[4] and "layer › operator" in out[0].layout.title.text
    assert cv.as_levels(["opcode"]) == ("opcode",) and cv.as_levels([1]) is None and cv.as_levels({}) is None
