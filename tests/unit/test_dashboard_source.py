"""The source page's content (``dashboard.source_view``, ``dashboard.pages.source``) and the links into and out of
it, without a browser."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from dash import dcc

from dashboard import details as det
from dashboard.links import source_href, timeline_search_href
from dashboard.pages.source import page_outputs
from dashboard.registry import TraceRegistry
from dashboard.source_view import build_view
from tracer import TraceWriter
from tracer import schema as ts
from tracer.sim import run_kernel


def _find(component, pred):
    """Every component of a Dash tree satisfying ``pred``, in document order."""
    out = []
    stack = [component]
    while stack:
        c = stack.pop()
        if isinstance(c, (list, tuple)):
            stack.extend(reversed(c))
            continue
        if c is None or isinstance(c, (str, int, float)):
            continue
        if pred(c):
            out.append(c)
        stack.append(getattr(c, "children", None))
    return out


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    root = tmp_path_factory.mktemp("srcpage")
    run_kernel("softmax", {"rows": 512, "cols": 512}, arch="trn1", trace_path=root / "softmax.trace")
    n = 6
    with TraceWriter(root / "nosrc.trace", metadata={"arch": "trn2", "is_simulation": False}) as w:  # no SourceFile
        start = np.arange(n, dtype=np.int64) * 10
        w.append(ts.INSTRUCTION.name, {
            ts.ID: np.arange(n, dtype=np.int64), ts.START_TS: start, ts.END_TS: start + 5,
            ts.DURATION_NS: np.full(n, 5, np.int64), ts.ENGINE: ["Vector"] * n, ts.OPCODE: ["ADD"] * n,
            ts.OPERANDS: [""] * n, ts.PC: np.arange(n, dtype=np.int64), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.NKI_SOURCE_LOCATION: ["/src/k.py:12"] * 3 + ["/src/k.py:30"] * 2 + ["/src/helper.py:3"]})
    host = root / "alexnet.json.gz"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "alexnet_flows.json.gz", host)
    reg = TraceRegistry([root / "softmax.trace", root / "nosrc.trace", host])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for tid in ("t0", "t1", "t2"):
            reg.open(tid)
    yield reg
    reg.close()


def test_the_page_lists_every_line_with_its_instructions_and_links_them_to_the_timeline(registry):
    options, chosen, status, table = page_outputs(registry, "?trace=t0&file=softmax.py&line=35", None, [])
    assert chosen == "softmax.py"
    assert [o["value"] for o in options] == ["softmax.py"]
    assert status.startswith("softmax.py: 24 instructions on 6 lines")
    rows = _find(table, lambda c: getattr(c, "id", "") and str(c.id).startswith("src-line-"))
    text = Path(__file__).resolve().parents[2] / "tracer" / "kernels" / "softmax.py"
    assert len(rows) == len(text.read_text().splitlines())
    target = [r for r in rows if "src-target" in r.className]
    assert [r.id for r in target] == ["src-line-35"] and "src-busy" in target[0].className
    hottest = [r.id for r in rows if "src-hottest" in r.className]
    assert hottest == ["src-line-35"]   # TENSOR_REDUCE ties TENSOR_SCALAR (line 42): the first line wins
    links = _find(table, lambda c: isinstance(c, dcc.Link))
    assert len(links) == 6   # one per line with instructions
    href = next(ln.href for ln in links if ln.children == "35")
    assert href == timeline_search_href("t0", "softmax.py:35")
    assert parse_qs(urlparse(href).query) == {"trace": ["t0"], "search": ['"softmax.py:35"']}
    # only the lines with instructions (and the marked one)
    _o, _c, _s, busy = page_outputs(registry, "?trace=t0&file=softmax.py&line=3", None, ["busy"])
    ids = [r.id for r in _find(busy, lambda c: str(getattr(c, "id", "")).startswith("src-line-"))]
    assert sorted(ids) == sorted(["src-line-3", *(f"src-line-{n}" for n in (33, 35, 38, 40, 42, 44))])


def test_a_file_picked_in_the_page_replaces_the_urls_and_drops_its_line_mark(registry):
    _o, chosen, status, table = page_outputs(registry, "?trace=t1&file=/src/k.py&line=12", "/src/helper.py", [])
    assert chosen == "/src/helper.py"
    assert status.startswith("/src/helper.py: 1 instructions on 1 lines")
    assert not _find(table, lambda c: "src-target" in str(getattr(c, "className", "")))
    _o, chosen, _s, table = page_outputs(registry, "?trace=t1&file=/src/k.py&line=12", None, [])
    assert chosen == "/src/k.py"
    assert [r.id for r in _find(table, lambda c: "src-target" in str(getattr(c, "className", "")))] == [
        "src-line-12"]


def test_without_the_text_lines_are_listed_by_number(registry):
    view = build_view(registry.open("t1"), "t1", None, None)
    assert view.file == "/src/k.py" and view.error is None
    assert "holds no text of this file" in view.status
    rows = _find(view.table, lambda c: str(getattr(c, "id", "")).startswith("src-line-"))
    assert sorted(r.id for r in rows) == ["src-line-12", "src-line-30"]
    assert [o["label"] for o in view.options] == ["/src/k.py — 5 instructions, text not recorded",
                                                  "/src/helper.py — 1 instructions, text not recorded"]


def test_errors_are_one_line_on_the_page(registry):
    _o, _c, status, table = page_outputs(registry, "?trace=t0&file=nope.py", None, [])
    assert table is None and status.id == "src-error"
    assert "no source file 'nope.py'" in status.children and "\n" not in status.children
    _o, _c, status, _t = page_outputs(registry, "?trace=t2", None, [])   # a host trace: nothing to show
    assert status.id == "src-error" and "no instruction has a source location" in status.children
    assert "/" not in status.children.split(":")[0] or "alexnet" in status.children  # no server path leaks
    _o, _c, status, _t = page_outputs(registry, "?trace=t9", None, [])
    assert status.id == "src-error" and "t9" in status.children
    # a hostile line value is ignored, not an error
    _o, chosen, _s, table = page_outputs(registry, "?trace=t0&file=softmax.py&line=-1e309", None, [])
    assert chosen == "softmax.py" and not _find(table, lambda c: "src-target" in str(getattr(c, "className", "")))


def test_the_details_panel_links_its_source_location_to_the_source_page(registry):
    trace = registry.open("t0")
    ident = trace.sql("SELECT id FROM Instruction WHERE nki_source_location = 'softmax.py:35' LIMIT 1").fetchall()[0][0]
    panel = det.event_details(trace, "Instruction", ident, trace_id="t0")
    link = _find(panel, lambda c: getattr(c, "id", None) == "details-source-link")
    assert len(link) == 1 and link[0].href == source_href("t0", "softmax.py", 35)
    assert link[0].href == "/source?trace=t0&file=softmax.py&line=35"
    plain = det.event_details(trace, "Instruction", ident)   # no served trace (a notebook): no link
    assert not _find(plain, lambda c: getattr(c, "id", None) == "details-source-link")


def test_a_files_listing_is_computed_once_per_trace(registry, monkeypatch):
    from dashboard import source_view
    from dashboard.computed import ComputedCache

    calls = []
    real = source_view.source_listing
    monkeypatch.setattr(source_view, "source_listing", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    cache = ComputedCache()
    for line, busy in ((35, []), (42, []), (None, ["busy"])):
        _o, chosen, _s, table = page_outputs(registry, f"?trace=t0&file=softmax.py&line={line}", None, busy, cache)
        assert chosen == "softmax.py" and table is not None
    assert calls == ["softmax.py"]      # marking another line or hiding idle lines reuses the listing
    page_outputs(registry, "?trace=t1", "/src/helper.py", [], cache)
    assert calls == ["softmax.py", "/src/helper.py"]


def test_names_of_files_not_in_the_trace_leave_nothing_behind(registry):
    """A file the trace lacks kept a lock per name for ever (300 requests of 2 MB names: +550 MB of server)."""
    from dashboard.computed import ComputedCache
    from dashboard.source_view import MAX_FILE_CHARS, build_view

    cache = ComputedCache()
    trace = registry.open("t0")
    for i in range(50):
        assert "no source file" in build_view(trace, "t0", f"missing{i}.py", None, cache=cache).error
    assert not cache._locks and not cache._values
    huge = build_view(trace, "t0", "x" * (MAX_FILE_CHARS + 1), None, cache=cache)
    assert huge.error.startswith("no source file of 2,001 characters") and not cache._locks
    assert build_view(trace, "t0", "softmax.py", None, cache=cache).error is None
    assert len(cache._locks) == len(cache._values) == 1


def test_the_compare_pages_source_lines_link_to_the_source_and_show_their_text(tmp_path):
    from dashboard import compare_logic as cl

    for arch in ("trn1", "trn2"):   # a what-if: the same kernel on both architectures
        run_kernel("softmax", {"rows": 512, "cols": 512}, arch=arch, trace_path=tmp_path / f"{arch}.trace")
    reg = TraceRegistry([tmp_path / "trn1.trace", tmp_path / "trn2.trace"])
    try:
        *_x, deltas, _ta, _tb = cl.compare_outputs(reg, cl.DiffCache(), "t0", "t1", by="source")
        links = {c.children: c.href for c in _find(deltas, lambda c: isinstance(c, dcc.Link))}
        assert links["softmax.py:35"] == "/source?trace=t0&file=softmax.py&line=35"
        texts = [c.children for c in _find(deltas, lambda c: getattr(c, "className", "") == "cmp-line-text")]
        assert 'nc.tensor_reduce(neg_max, xt, "max", negate=True)' in texts and len(texts) == len(links) == 6
        # a location neither trace holds text for still links (to A), one without a line number is left plain
        got = cl.source_lines(reg, "t0", "t1", ["softmax.py:35", "other.py:3", "no-line", None])
        assert got == {"softmax.py:35": ("/source?trace=t0&file=softmax.py&line=35",
                                         'nc.tensor_reduce(neg_max, xt, "max", negate=True)'),
                       "other.py:3": ("/source?trace=t0&file=other.py&line=3", "")}
        *_x, by_opcode, _ta, _tb = cl.compare_outputs(reg, cl.DiffCache(), "t0", "t1", by="opcode")
        assert not _find(by_opcode, lambda c: isinstance(c, dcc.Link))
    finally:
        reg.close()


def test_the_critical_path_column_is_computed_on_request_and_kept(registry):
    cache_calls = []
    from dashboard.computed import ComputedCache

    class Counting(ComputedCache):
        def get(self, trace_id, key, compute, *, trace=None):
            cache_calls.append(key)
            return super().get(trace_id, key, compute, trace=trace)

    cache = Counting()
    _o, _c, _s, plain = page_outputs(registry, "?trace=t0&file=softmax.py", None, [], cache)
    heads = [c.children for c in _find(plain, lambda c: type(c).__name__ == "Th")]
    assert "critical" not in heads
    _o, _c, _s, table = page_outputs(registry, "?trace=t0&file=softmax.py", None, ["critical"], cache)
    heads = [c.children for c in _find(table, lambda c: type(c).__name__ == "Th")]
    assert "critical" in heads
    cells = _find(table, lambda c: "src-critical" in str(getattr(c, "className", "")))
    assert len(cells) == 6 and any(c.children for c in cells)     # one per line with instructions
    assert cache_calls == [("source", "softmax.py", False), ("source", "softmax.py", True)]


def test_the_summary_lists_the_hottest_source_lines(registry):
    from dashboard.source_view import hottest_lines_section

    section = hottest_lines_section(registry.open("t0"), "t0")
    links = _find(section, lambda c: isinstance(c, dcc.Link))
    assert [ln.children for ln in links][:2] == ["softmax.py:35", "softmax.py:42"]   # the Vector lines, busiest
    assert links[0].href == "/source?trace=t0&file=softmax.py&line=35" and len(links) == 5
    codes = [c.children for c in _find(section, lambda c: type(c).__name__ == "Code")]
    assert codes[0] == 'nc.tensor_reduce(neg_max, xt, "max", negate=True)'
    nosrc = hottest_lines_section(registry.open("t1"), "t1")     # locations without text: links, no text
    assert [c.children for c in _find(nosrc, lambda c: type(c).__name__ == "Code")] == ["", "", ""]
    assert not _find(hottest_lines_section(registry.open("t2"), "t2"), lambda c: isinstance(c, dcc.Link))


def test_with_the_critical_path_shown_the_page_scrolls_to_the_line_holding_most_of_it(tmp_path):
    from tracer.samples import SAMPLES

    reg = TraceRegistry([next(s for s in SAMPLES if s.name == "matmul_naive-trn2").path])
    try:
        for checked, line in (([], 44), (["critical"], 43)):   # the matmul; the loads of B
            _o, _c, _s, table = page_outputs(reg, "?trace=t0", None, checked)
            hot = _find(table, lambda c: "src-hottest" in str(getattr(c, "className", "")))
            assert [h.id for h in hot] == [f"src-line-{line}"]
    finally:
        reg.close()


def test_the_summary_and_the_source_page_agree_on_the_hottest_line(tmp_path):
    # mlp's pipelined matmuls overlap: by busy time (the summary's ranking before) line 73 came first, while the
    # source page, by instruction time, flagged line 71
    from dashboard.source_view import build_view, hottest_lines_section

    shutil.copytree(Path(__file__).resolve().parents[2] / "sample_traces" / "mlp-trn2.trace", tmp_path / "m.trace")
    reg = TraceRegistry([tmp_path / "m.trace"])
    trace = reg.open("t0")
    links = _find(hottest_lines_section(trace, "t0"), lambda c: isinstance(c, dcc.Link))
    view = build_view(trace, "t0", "mlp.py", None)
    flagged = _find(view.table,
                    lambda c: "src-hottest" in (getattr(c, "className", "") or ""))
    assert links[0].children == "mlp.py:71"
    assert flagged and flagged[0].id == "src-line-71"
