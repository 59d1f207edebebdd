"""Malformed but valid JSON sent to the real callbacks (POST /_dash-update-component through Flask's test client):
never an HTTP 500; a clear one-line message in the page, or no update.

Each payload is what a hostile or buggy client can send for one callback's inputs and states: wrong types, non-finite
or huge numbers, missing keys, tables without ids.  The callback must answer 200 (with what it shows) or 204 (no
update); an unexpected exception would be answered by the app's safety net — one line in the error banner — and the
tests check that the logic functions catch these cases themselves (no banner), except where noted.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from dashboard.app import create_app
from tests.browser.trace_factory import write_kernel_trace

#: The JSON spellings of values Python's json module writes only when asked (non-finite numbers).
INF, NAN = float("inf"), float("nan")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    trace = write_kernel_trace(tmp_path_factory.mktemp("fuzz") / "k.trace", iterations=30)
    app = create_app([trace])
    app.trnprof_registry.open("t0")
    yield app
    app.trnprof_registry.close()


def _outputs(key: str) -> list[dict[str, str]] | dict[str, str]:
    """The ``outputs`` of a request for the callback whose ``callback_map`` key is ``key``."""
    def one(spec: str) -> dict[str, str]:
        ident, prop = spec.rsplit(".", 1)
        return {"id": json.loads(ident) if ident.startswith("{") else ident, "property": prop}

    if key.startswith(".."):
        return [one(part) for part in key[2:-2].split("...")]
    return one(key)


def post(app: Any, output: str, values: dict[str, Any], changed: str | None = None) -> Any:
    """POST the callback whose outputs start with ``output`` with ``values`` (``"id.prop": value``; others None);
    ``changed``: the input that triggered it (default: the first given)."""
    key = next(k for k in app.callback_map if k.lstrip(".").startswith(output))
    cb = app.callback_map[key]

    def items(specs: list[dict[str, Any]]) -> list[Any]:
        out = []
        for spec in specs:
            name = f"{spec['id']}.{spec['property']}"
            if spec["id"].startswith("{"):  # a pattern-matching input: a list of (id, value)
                out.append([{"id": ident, "property": spec["property"], "value": v}
                            for ident, v in values.get(name, [])])
            else:
                out.append({"id": spec["id"], "property": spec["property"], "value": values.get(name)})
        return out

    payload = {"output": key, "outputs": _outputs(key), "inputs": items(cb["inputs"]),
               "state": items(cb.get("state", [])), "changedPropIds": [changed or next(iter(values))]}
    return app.server.test_client().post("/_dash-update-component", data=json.dumps(payload),
                                         content_type="application/json")


def _view(app: Any) -> dict[str, Any]:
    """A real tl-view store (from a first draw) to start malformed variants from."""
    resp = post(app, "tl-draw.data", {"url.search": "?trace=t0", "tl-size.data": {"width": 800}}, "tl-size.data")
    assert resp.status_code == 200
    return resp.get_json()["response"]["tl-view"]["data"]


STATE = {"trace": "t0", "view": [0, 1000], "width": 800, "origin": 0, "colour_by": "opcode", "expand_dma": False,
         "critical_path": False, "buffer": None, "seq": 1, "lanes": []}
UPDATE = "tl-draw.data"
CLICK = "tl-selected.data"
DETAILS = "tl-details.children"
SELECTION = "tl-selection.children"

CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    # (name, callback outputs, values, changed input)
    *[(f"state view {v!r}", UPDATE, {"url.search": "?trace=t0", "tl-state.data": {**STATE, "view": v},
                                     "colour-by.value": "engine"}, "colour-by.value")
      for v in (["a", "b"], [1], [None, None], [1e300, -1e300], "x", [INF, 0])],
    *[(f"state seq {v!r}", UPDATE, {"url.search": "?trace=t0", "tl-state.data": {**STATE, "seq": v},
                                    "tl-reset.n_clicks": 1}, "tl-reset.n_clicks") for v in ("abc", None, 1e300)],
    ("state lanes 5", UPDATE, {"url.search": "?trace=t0", "tl-state.data": {**STATE, "lanes": 5},
                               "tl-reset.n_clicks": 1}, "tl-reset.n_clicks"),
    ("state lanes unhashable", UPDATE, {"url.search": "?trace=t0", "tl-state.data": {**STATE, "lanes": [[1]]},
                                        "tl-reset.n_clicks": 1}, "tl-reset.n_clicks"),
    *[(f"nav {v!r}", UPDATE, {"url.search": "?trace=t0", "tl-state.data": STATE,
                              "tl-nav.data": {"start_ns": v, "end_ns": 1}}, "tl-nav.data")
      for v in ("abc", None, [1], 1e300, INF)],
    ("nav not a dict", UPDATE, {"url.search": "?trace=t0", "tl-state.data": STATE, "tl-nav.data": [1, 2]},
     "tl-nav.data"),
    ("dma-expand 5", UPDATE, {"url.search": "?trace=t0", "dma-expand.value": 5}, "dma-expand.value"),
    ("cp-toggle 5", UPDATE, {"url.search": "?trace=t0", "cp-toggle.value": 5}, "cp-toggle.value"),
    ("colour-by list", UPDATE, {"url.search": "?trace=t0", "colour-by.value": ["opcode"]}, "colour-by.value"),
    *[(f"query {name}", UPDATE, {"url.search": "?trace=t0&query=" + quote(v), "tl-state.data": {**STATE, "query": v}},
       "url.search")
      for name, v in (("write", "DROP TABLE Instruction"), ("file", "SELECT * FROM read_csv('/etc/passwd')"),
                      ("no start", "SELECT 1"), ("strings", "SELECT 'a' AS start_ts"), ("huge", "x" * 20000),
                      ("many tracks", "SELECT range AS start_ts, range AS track FROM range(500)"),
                      ("nul", "SELECT 1 AS start_ts\x00"), ("two", "SELECT 1 AS start_ts; SELECT 2"))],
    *[(f"query click {name}", CLICK, {"url.search": "?trace=t0&query=" + quote("SELECT 5 AS start_ts, 9 AS end_ts"),
                                      "tl-click.data": {"points": [{"curveNumber": 0, "x": x, "y": 0}]},
                                      "tl-view.data": {"rows": [[-1], [0]], "origin": 0, "res": 1},
                                      "tl-state.data": STATE}, "tl-click.data")
      for name, x in (("inside", 7e-9), ("outside", 1.0), ("garbage", "x"), ("huge", 1e300))],
    *[(f"chain {name}", "details-chain.children", {"url.search": "?trace=t0", "details-chain-go.n_clicks": 1,
                                                    "tl-selected.data": v}, "details-chain-go.n_clicks")
      for name, v in (("span", {"table": "Span", "id": 1}), ("query", {"table": "query", "id": 0}),
                      ("no id", {"table": "Instruction"}), ("huge", {"table": "Instruction", "id": 2**70}),
                      ("missing", {"table": "Instruction", "id": 10**12}), ("list", [1]), ("none", None))],
    ("query details garbage", DETAILS, {"url.search": "?trace=t0", "tl-selected.data": {"table": "query",
                                                                                        "id": 10**12}},
     "tl-selected.data"),
    *[(f"row-filter {name}", UPDATE, {"url.search": "?trace=t0&tracks=%00" + "x" * 300, "row-filter.value": v,
                                      "tl-state.data": {**STATE, "row_filter": v}}, "row-filter.value")
      for name, v in (("list", ["Tensor"]), ("dict", {"a": 1}), ("number", 1e300), ("bad regex", "/(/"),
                      ("long", "/" + "a|" * 5000 + "/"), ("nothing kept", "-NC"), ("nul", "\x00/\x00/"),
                      ("catastrophic", "/(a+)+$/"))],
    *[(f"tl-size width {v!r}", UPDATE, {"url.search": "?trace=t0", "tl-size.data": {"width": v}}, "tl-size.data")
      for v in (INF, -INF, NAN, "1e400", 1e300, [1])],
    ("relayout garbage", UPDATE, {"url.search": "?trace=t0", "tl-state.data": STATE,
                                  "tl-relayout.data": {"xaxis.range": ["a", INF]}}, "tl-relayout.data"),
    *[(f"cmp-size width {v!r}", "cmp-graph-a.figure",
       {"cmp-pair.data": {"a": "t0", "b": "t0"}, "cmp-size.data": {"width": v}}, "cmp-size.data")
      for v in (INF, "1e400")],
    ("compare pair unhashable", "cmp-graph-a.figure", {"cmp-pair.data": {"a": ["t0"], "b": {}}}, "cmp-pair.data"),
    ("compare pickers unhashable", "cmp-pair.data", {"cmp-a.value": ["t0"], "cmp-b.value": {"x": 1},
                                                     "cmp-by.value": [1]}, "cmp-a.value"),
    # a followed recording's line (this trace is not followed: the poll says nothing and stops), the live trigger
    *[(f"live poll {name}", "live-status.children", values, "live-tick.n_intervals") for name, values in [
        ("garbage", {"live-tick.n_intervals": "x", "url.search": "?trace=t0", "url.pathname": ["/"],
                     "live-gen.data": {"a": 1}, "live-page-gen.data": [INF]}),
        ("unknown trace", {"live-tick.n_intervals": 1, "url.search": "?trace=t9"}),
        ("huge", {"live-tick.n_intervals": 1e300, "url.search": "?trace=t0", "url.pathname": "/x" * 5000,
                  "live-page-gen.data": 2**70}),
        ("another host", {"live-tick.n_intervals": 1, "url.search": "?trace=t0", "url.pathname": "//evil.example/x",
                          "live-page-gen.data": -1}),
    ]],
    *[(f"live trigger {name}", UPDATE, {"url.search": "?trace=t0", "tl-state.data": st, "live-gen.data": gen},
       "live-gen.data") for name, st, gen in [
        ("no state", None, 3), ("whole garbage", {**STATE, "whole": "yes"}, [1]), ("state garbage", [1], INF)]],
    # the memory page: its graph, and the panel of a clicked cell
    *[(f"memory {name}", "mem-graph.figure", {"url.search": "?trace=t0", **values}, changed)
      for name, values, changed in [
          ("mem list", {"mem-mem.value": ["SBUF"]}, "mem-mem.value"),
          ("zoom garbage", {"mem-zoom.data": {"xaxis.range[0]": "a", "xaxis.range[1]": INF}}, "mem-zoom.data"),
          ("zoom huge", {"mem-zoom.data": {"xaxis.range": [1e300, -1e300]}}, "mem-zoom.data"),
          ("zoom not a dict", {"mem-zoom.data": [1, 2]}, "mem-zoom.data"),
          ("window garbage", {"mem-window.data": ["a", {}], "mem-mem.value": "PSUM"}, "mem-mem.value"),
          ("window reversed", {"mem-window.data": [10**15, -(10**15)], "mem-mem.value": "SBUF"}, "mem-mem.value"),
          ("unknown trace", {"url.search": "?trace=t9&mem=x"}, "url.search"),
      ]],
    *[(f"memory cell {name}", "mem-cell.children", {"url.search": "?trace=t0", "mem-mem.value": "SBUF", **values},
       "mem-graph.clickData") for name, values in [
          ("click garbage", {"mem-graph.clickData": {"points": [{"x": "nan", "y": INF}]}}),
          ("click not a dict", {"mem-graph.clickData": [1]}),
          ("top garbage", {"mem-graph.clickData": {"points": [{"x": 1e-7, "y": 1.0}]}, "mem-top.data": "x"}),
          ("top zero", {"mem-graph.clickData": {"points": [{"x": 1e-7, "y": 1.0}]}, "mem-top.data": 0}),
          ("window garbage", {"mem-graph.clickData": {"points": [{"x": 1e-7, "y": 1.0}]},
                              "mem-window.data": [[1], "x"]}),
      ]],
    # the call-tree page: the URL's window and root, the rows and root pickers
    *[(f"calltree {name}", "ct-graph.figure", values, changed) for name, values, changed in [
        ("window garbage", {"url.search": "?trace=t0&start=abc&end=1e999&rows=x&root=%00"}, "url.search"),
        ("window reversed", {"url.search": "?trace=t0&start=9000&end=-5"}, "url.search"),
        ("window huge", {"url.search": f"?trace=t0&start={-(2**70)}&end={2**70}"}, "url.search"),
        ("rows list", {"url.search": "?trace=t0", "ct-rows.value": ["merged"]}, "ct-rows.value"),
        ("root dict", {"url.search": "?trace=t0", "ct-root.value": {"a": 1}}, "ct-root.value"),
        ("root unknown", {"url.search": "?trace=t0", "ct-root.value": "no such root" * 50}, "ct-root.value"),
        ("steps garbage", {"url.search": "?trace=t0&steps=merged", "ct-steps.value": {"x": [1]}}, "ct-steps.value"),
        ("of garbage", {"url.search": "?trace=t0&of=%ff", "ct-of.value": [1]}, "ct-of.value"),
        ("of instructions", {"url.search": "?trace=t0&of=instructions&root=NeuronCore%200"}, "url.search"),
        ("of kernels", {"url.search": "?trace=t0&of=kernels&steps=merged&start=5&end=9"}, "url.search"),
        ("levels garbage", {"url.search": "?trace=t0&of=instructions&levels=%00,,x" + ",a" * 500,
                            "ct-levels.value": [{"x": 1}, None, 5]}, "ct-levels.value"),
        ("unknown trace", {"url.search": "?trace=t9&rows=merged"}, "url.search"),
    ]],
    *[(f"calltree frame {name}", "ct-frame.children", {"url.search": "?trace=t0", "ct-of.value": "spans", **values},
       "ct-graph.clickData") for name, values in [
        ("click garbage", {"ct-graph.clickData": {"points": [{"customdata": ["a", None, INF, "x", []]}]}}),
        ("click huge", {"ct-graph.clickData": {"points": [{"customdata": ["a" * 20000, "b", 2**70, 0, 0]}]}}),
        ("click not a dict", {"ct-graph.clickData": [1, 2]}),
        ("of garbage", {"ct-graph.clickData": {"points": [{"customdata": ["a", "b", 1, 2, 3]}]},
                        "ct-of.value": {"x": 1}}),
    ]],
]


def assert_answered(app: Any, output: str, values: dict[str, Any], changed: str | None) -> None:
    """The callback answered (200, or 204 for no update) and its logic caught the bad input itself (no banner)."""
    resp = post(app, output, values, changed)
    assert resp.status_code in (200, 204), resp.get_data(as_text=True)[:300]
    assert "app-error" not in resp.get_data(as_text=True), "the logic let an exception through"


@pytest.mark.parametrize("name, output, values, changed", CASES, ids=[c[0] for c in CASES])
def test_malformed_inputs_never_fail_the_request(app, name, output, values, changed):
    assert_answered(app, output, values, changed)


@pytest.fixture(scope="module")
def recording_app(tmp_path_factory):
    """An app serving a simulator recording: a trace with a memory map (the synthetic one has none)."""
    from tracer.sim import run_kernel

    path = tmp_path_factory.mktemp("fuzzrec") / "softmax.trace"
    run_kernel("softmax", {"rows": 512, "cols": 256}, arch="trn1", trace_path=path)
    app = create_app([path])
    app.trnprof_registry.open("t0")
    yield app
    app.trnprof_registry.close()


@pytest.fixture(scope="module")
def live_app(tmp_path_factory):
    """An app following a recording still being written (profiler.live)."""
    from tests.unit.test_live import rows
    from tracer import TraceWriter
    from tracer import schema as ts

    path = tmp_path_factory.mktemp("fuzzlive") / "live.trace"
    writer = TraceWriter(path, background_flush=False)
    writer.append(ts.INSTRUCTION.name, rows(0, 50))
    writer.flush()
    app = create_app([path])
    app.trnprof_registry.open("t0")
    writer.append(ts.INSTRUCTION.name, rows(50, 60))   # new rows: a poll starts a read
    writer.flush()
    yield app
    app.trnprof_registry.close()
    writer.close(complete=False)


LIVE_CASES = [c for c in CASES if c[0].startswith("live ")]


@pytest.mark.parametrize("name, output, values, changed", LIVE_CASES, ids=[c[0] for c in LIVE_CASES])
def test_malformed_inputs_on_a_followed_recording(live_app, name, output, values, changed):
    assert_answered(live_app, output, values, changed)


def test_the_poll_of_a_followed_recording_reports_it(live_app):
    resp = post(live_app, "live-status.children", {"live-tick.n_intervals": 1, "url.search": "?trace=t0",
                                                    "url.pathname": "/summary", "live-gen.data": 0,
                                                    "live-page-gen.data": 0}, "live-tick.n_intervals")
    out = resp.get_json()["response"]
    assert "● recording: " in json.dumps(out["live-status"]["children"], ensure_ascii=False)
    assert out["live-status"]["className"] == "live-status live-recording"
    assert out["live-tick"]["disabled"] is False
    # a page drawn from an older read links to itself, on this server whatever path the browser claims
    def link(pathname: str) -> str:
        resp = post(live_app, "live-status.children", {"live-tick.n_intervals": 2, "url.search": "?trace=t0",
                                                       "url.pathname": pathname, "live-page-gen.data": -1},
                    "live-tick.n_intervals")
        return json.dumps(resp.get_json()["response"]["live-status"]["children"])

    assert '"href": "/summary?trace=t0"' in link("/summary")
    assert "href" not in link("//evil.example/x")       # (taken for the timeline, which redraws by itself)


MEMORY_CASES = [c for c in CASES if c[0].startswith("memory ")]
CALLTREE_CASES = [c for c in CASES if c[0].startswith("calltree ")]


@pytest.fixture(scope="module")
def spans_app(tmp_path_factory):
    """An app serving a real PyTorch trace: nested spans for the call-tree page (the synthetic trace has none)."""
    import shutil
    from pathlib import Path

    src = tmp_path_factory.mktemp("fuzzspans") / "rank0.json.gz"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "pytorch" / "sampled_rank-0.json.gz", src)
    app = create_app([src])
    app.trnprof_registry.open("t0")
    yield app
    app.trnprof_registry.close()


@pytest.mark.parametrize("name, output, values, changed", CALLTREE_CASES, ids=[c[0] for c in CALLTREE_CASES])
def test_malformed_inputs_on_a_call_tree_with_spans(spans_app, name, output, values, changed):
    assert_answered(spans_app, output, values, changed)


@pytest.mark.parametrize("name, output, values, changed", MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_malformed_inputs_on_a_recordings_memory_page(recording_app, name, output, values, changed):
    assert_answered(recording_app, output, values, changed)


def test_a_recordings_memory_page_answers_a_real_click(recording_app):
    resp = post(recording_app, "mem-cell.children", {"url.search": "?trace=t0", "mem-mem.value": "SBUF",
                                                     "mem-graph.clickData": {"points": [{"x": 4e-6, "y": 1.0}]}},
                "mem-graph.clickData")
    assert resp.status_code == 200 and "mem-cell-table" in resp.get_data(as_text=True)


def _click(point: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    return {"tl-click.data": {"points": [{"curveNumber": 0, **point}]}, "tl-view.data": view,
            "tl-state.data": STATE, "url.search": "?trace=t0"}


@pytest.mark.parametrize("point", [{"x": 1e300, "y": 0}, {"x": "nan", "y": 0}, {"x": "1e400", "y": 0},
                                   {"x": 0.0, "y": "inf"}, {"x": 0.0, "y": 1e300}, {"x": [1], "y": 0},
                                   {"y": 0}, {"x": None, "y": None}])
def test_malformed_clicks_select_nothing(app, point):
    resp = post(app, CLICK, _click(point, _view(app)), "tl-click.data")
    assert resp.status_code == 204


@pytest.mark.parametrize("change", [{"res": 1e20}, {"res": "x"}, {"rows": [[999999]]}, {"rows": [["a"]]},
                                   {"rows": [5]}, {"rows": 5}, {"origin": 1e30}, {"origin": "x"}, {"origin": INF}])
def test_malformed_views_under_a_click_select_nothing(app, change):
    resp = post(app, CLICK, _click({"x": 1e-6, "y": 0}, {**_view(app), **change}), "tl-click.data")
    assert resp.status_code == 204


@pytest.mark.parametrize("selected, needle", [
    ({"table": "Metadata", "id": 1}, "Details are shown for timeline events"),
    ({"table": "DmaQueuesInfo", "id": 1}, "Details are shown"), ({"table": "Flow", "id": 1}, "Details are shown"),
    ({"table": "Counter", "id": 1}, "Details are shown"), ({"table": "lod", "id": 1}, "Details are shown"),
    ({"table": "track", "id": 1}, "Details are shown"), ({"table": "counter_lod", "id": 1}, "Details are shown"),
    ({"table": "trnprof_info", "id": 1}, "Details are shown"), ({"table": "nope", "id": 1}, "Details are shown"),
    ({"table": ["Instruction"], "id": 1}, "Details are shown"),
    ({"table": "Instruction"}, "no Instruction id"), ({"table": "Instruction", "id": INF}, "no Instruction id"),
    ({"table": "Instruction", "id": "7"}, "no Instruction id"),
    ({"table": "Instruction", "id": 10**15}, "has no row with id"),
])
def test_details_of_what_is_not_an_event_is_one_line(app, selected, needle):
    resp = post(app, DETAILS, {"tl-selected.data": selected, "tl-view.data": None, "url.search": "?trace=t0"})
    assert resp.status_code == 200
    body = resp.get_data(as_text=True)
    assert needle in body and "/tmp" not in body and ".duckdb" not in body, body[:300]


DECORATE = "tl-shapes.data"        # the outline, arrows and markers of a new selection or markers
REDECORATE = "tl-shapes.data@"     # ... again after a figure drawn without them
MARKERS = "tl-markers.data"


@pytest.mark.parametrize("view", [{"origin": "x", "rows": [[0]]}, {"origin": 0, "rows": 5},
                                  {"origin": 0, "rows": [[0]], "groups": 5}, {"origin": 1e30, "rows": [[0]]}])
def test_the_outline_ignores_a_malformed_view(app, view):
    """Nothing drawn for rows or an origin that are not valid; malformed groups only lose the separators."""
    selected = {"table": "Instruction", "id": 0, "start_ns": 0, "end_ns": 5, "track_id": 0}
    resp = post(app, DECORATE, {"tl-selected.data": selected, "tl-view.data": view, "tl-state.data": STATE,
                                "url.search": "?trace=t0"}, "tl-selected.data")
    assert resp.status_code == (200 if view.get("groups") == 5 else 204), resp.get_data(as_text=True)[:300]
    assert "app-error" not in resp.get_data(as_text=True)


@pytest.mark.parametrize("selected, markers", [
    ({"table": "Instruction", "id": "x"}, None), ({"table": 5, "id": 1}, [1, 2]), ("junk", "1,2"),
    ({"table": "Instruction", "id": 10**15, "track_id": 0, "start_ns": 0, "end_ns": 1}, [INF, "a", None, 3]),
    (None, {"a": 1}), (None, list(range(1000))),
])
def test_malformed_selections_and_markers_draw_what_is_valid(app, selected, markers):
    resp = post(app, DECORATE, {"tl-selected.data": selected, "tl-markers.data": markers, "tl-view.data": _view(app),
                                "tl-state.data": STATE, "url.search": "?trace=t0"}, "tl-selected.data")
    assert resp.status_code == 200 and "app-error" not in resp.get_data(as_text=True)
    shapes = resp.get_json()["response"]["tl-shapes"]["data"]["shapes"]
    assert not any(sh.get("name") in ("waited for", "waited on it") for sh in shapes)   # no such event's flows
    assert sum(1 for sh in shapes if str(sh.get("name", "")).startswith("M")) <= 16


@pytest.mark.parametrize("add", [{"x": "a"}, {"x": INF}, {"x": 1e300}, [1], None, {"y": 1}])
def test_malformed_marker_requests_add_nothing(app, add):
    resp = post(app, MARKERS, {"tl-marker-add.data": add, "tl-markers.data": [5], "tl-view.data": _view(app)},
                "tl-marker-add.data")
    assert resp.status_code == 204


def test_markers_are_added_removed_and_cleared_through_the_callback(app):
    view = _view(app)
    added = post(app, MARKERS, {"tl-marker-add.data": {"x": 2e-6, "seq": 1}, "tl-markers.data": [5],
                                "tl-view.data": view}, "tl-marker-add.data")
    assert added.get_json()["response"]["tl-markers"]["data"] == [5, view["origin"] + 2_000]
    cleared = post(app, MARKERS, {"tl-markers-clear.n_clicks": 1, "tl-markers.data": [5, 9]},
                   "tl-markers-clear.n_clicks")
    assert cleared.get_json()["response"]["tl-markers"]["data"] == []


def test_a_figure_drawn_without_the_latest_selection_gets_it_again(app):
    """A figure whose request began before the selection (its state names none) is followed by the outline; one
    that has it (the state names it) is left alone."""
    view = _view(app)
    selected = {"table": "Instruction", "id": 0, "start_ns": 0, "end_ns": 5, "track_id": 0}
    behind = post(app, REDECORATE, {"tl-view.data": view, "tl-selected.data": selected, "tl-markers.data": [7],
                                    "tl-state.data": {**STATE, "selected": None, "markers": []},
                                    "url.search": "?trace=t0"}, "tl-view.data")
    assert behind.status_code == 200
    names = [sh.get("name") for sh in behind.get_json()["response"]["tl-shapes"]["data"]["shapes"]]
    assert "M1" in names
    current = post(app, REDECORATE, {"tl-view.data": view, "tl-selected.data": selected, "tl-markers.data": [7],
                                     "tl-state.data": {**STATE, "selected": ["Instruction", 0], "markers": [7]},
                                     "url.search": "?trace=t0"}, "tl-view.data")
    assert current.status_code == 204


@pytest.mark.parametrize("rng, state", [
    ({"range": {"x": [0, 1e300]}}, STATE), ({"range": {"x": [0, "inf"]}}, STATE),
    ({"range": {"x": ["a", 1]}}, STATE), ({"range": {"x": [0, 1e-3]}}, {**STATE, "origin": "x"}),
    ({"range": {"x": [0, 1e-3]}}, {**STATE, "origin": 1e30}), ({"range": {"x": [0, 1e-3]}}, "x"),
])
def test_malformed_selections_are_ignored(app, rng, state):
    resp = post(app, SELECTION, {"tl-range.data": rng, "tl-state.data": state, "url.search": "?trace=t0"},
                "tl-range.data")
    assert resp.status_code in (200, 204)
    assert "app-error" not in resp.get_data(as_text=True)


def test_a_reversed_view_is_summarised_in_order(app):
    from profiler.figures.timefmt import format_duration

    t0, _t1 = app.trnprof_registry.open("t0").time_range
    state = {**STATE, "origin": t0, "view": [t0 + 20_000, t0 + 5]}
    resp = post(app, SELECTION, {"tl-summarize.n_clicks": 1, "tl-state.data": state, "url.search": "?trace=t0"})
    assert resp.status_code == 200
    def find(node: Any, ident: str) -> Any:
        if isinstance(node, dict):
            if node.get("props", {}).get("id") == ident:
                return node
            return next((f for v in node.values() if (f := find(v, ident)) is not None), None)
        if isinstance(node, list):
            return next((f for v in node if (f := find(v, ident)) is not None), None)
        return None

    card = find(resp.get_json()["response"], "sel-duration")
    assert card["props"]["children"][0]["props"]["children"] == format_duration(19_995)


@pytest.mark.parametrize("values", [
    {"search-results.data": [{"start_ns": 1}], "search-index.data": 0},
    {"search-results.data": [{"table": "Instruction", "id": 1, "start_ns": "a", "end_ns": 2}]},
    {"search-results.data": [5], "search-index.data": "x"},
    {"search-results.data": {"a": 1}},
])
def test_malformed_search_matches_step_nowhere(app, values):
    resp = post(app, "search-index.data", {"search-next.n_clicks": 1, **values}, "search-next.n_clicks")
    assert resp.status_code == 204


def test_a_links_search_lists_its_matches_without_replacing_its_selection(app):
    """A URL with a search and a range or selected event of its own (a link to a view): the search runs once the
    first figure is drawn and lists its matches, quietly; the first ▶ still goes to the first match. A URL with
    only a search (the source page's links) selects the first match at once."""
    from dashboard import search_logic as srch

    auto = {"tl-figure-drawn.data": {"seq": 1}, "search-auto.data": "MATMUL"}
    linked = post(app, "search-results.data", {**auto, "url.search": "?trace=t0&select=Instruction%3A3"},
                  "tl-figure-drawn.data").get_json()["response"]
    assert linked["search-index"]["data"] == srch.QUIET and linked["search-results"]["data"]
    assert linked["search-last"]["data"] == "MATMUL" and linked["search-auto"]["data"] == ""
    plain = post(app, "search-results.data", {**auto, "url.search": "?trace=t0"}, "tl-figure-drawn.data")
    assert plain.get_json()["response"]["search-index"]["data"] == srch.FRESH
    matches = linked["search-results"]["data"]
    quiet = post(app, "search-index.data", {"search-results.data": matches, "search-index.data": srch.QUIET},
                 "search-results.data")
    assert quiet.status_code == 204                     # listed, nothing selected
    first = post(app, "search-index.data", {"search-next.n_clicks": 1, "search-results.data": matches,
                                            "search-index.data": srch.QUIET}, "search-next.n_clicks")
    out = first.get_json()["response"]
    assert out["search-index"]["data"] == 0 and out["tl-selected"]["data"]["id"] == matches[0]["id"]
    assert srch.link_keeps_its_view({"start": "1", "end": "2"}) and srch.link_keeps_its_view({"select": "x:1"})
    assert not srch.link_keeps_its_view({"start": "1"}) and not srch.link_keeps_its_view({"search": "a"})


@pytest.mark.parametrize("clicks", [["a"], [None], [1e300], [True, "x"], [[1]]])
def test_malformed_jump_clicks(app, clicks):
    ident = {"type": "tl-jump", "index": "Instruction:1:10:20:0"}
    name = '{"index":["ALL"],"type":"tl-jump"}.n_clicks'
    key = json.dumps(ident, separators=(",", ":"), sort_keys=True) + ".n_clicks"
    resp = post(app, "tl-selected.data@", {name: [(ident, c) for c in clicks]}, key)
    assert resp.status_code in (200, 204)
    assert "app-error" not in resp.get_data(as_text=True)


@pytest.mark.parametrize("index", [INF, -INF, 1e300, -1, "x", [0], True, 10**6])
def test_malformed_example_choices(app, index):
    resp = post(app, "sql-query.value", {"sql-example.value": index})
    assert resp.status_code in (200, 204) and "SELECT" not in resp.get_data(as_text=True)


@pytest.mark.parametrize("query", [12345, ["SELECT 1"], {}, True, 1.5])
def test_sql_console_refuses_non_text_queries_in_one_line(app, query):
    resp = post(app, "sql-grid.rowData", {"sql-run.n_clicks": 1, "sql-query.value": query,
                                          "sql-limit.value": INF, "sql-timeout.value": "x",
                                          "url.search": "?trace=t0"}, "sql-run.n_clicks")
    assert resp.status_code == 200
    assert "The query must be text" in resp.get_data(as_text=True)


@pytest.mark.parametrize("pathname", [["x"], {"a": 1}, 5, None, "/" + "x" * 5000])
def test_the_router_answers_any_pathname(app, pathname):
    resp = post(app, "page-content.children", {"url.pathname": pathname, "url.search": "?trace=t0"})
    assert resp.status_code == 200
    assert "No page at" in resp.get_data(as_text=True)


@pytest.mark.parametrize("query", [
    "colour=%3Cscript%3E&dma=1&critical=yes&levels=-3", "levels=" + "9" * 1990, "levels=5&colour=layer",
    "select=Instruction%3A" + "9" * 1900, "select=%3A%3A%3A", "select=Flow%3A1", "markers=" + "9" * 1990,
    "markers=" + ",".join(["1"] * 500), "markers=a,b,-,--5", "start=5&end=2&markers=3&select=Instruction%3A0",
    "levels=%C2%B2&select=Instruction%3A%C2%B2&markers=%C2%B2", "levels=%D9%A3",
])
def test_the_timeline_page_opens_whatever_its_url_options_say(app, query):
    """Hostile or malformed view options in a link: the page renders, with the defaults where they are invalid."""
    resp = post(app, "page-content.children", {"url.pathname": "/", "url.search": f"?trace=t0&{query}"})
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    out = resp.get_json()["response"]
    assert out["app-error"]["children"] is None            # no error banner

    def find(node, ident):
        if isinstance(node, dict):
            if node.get("props", {}).get("id") == ident:
                return node["props"]
            return next((f for v in node.values() if (f := find(v, ident)) is not None), None)
        if isinstance(node, list):
            return next((f for v in node if (f := find(v, ident)) is not None), None)
        return None

    colour = find(out["page-content"], "colour-by")["value"]
    assert colour == ("layer" if "colour=layer" in query else "opcode")     # anything else: the default
    assert find(out["page-content"], "span-levels")["value"] in ("all", 4)
    markers = find(out["page-content"], "tl-markers")["data"]
    assert isinstance(markers, list) and len(markers) <= 16 and all(isinstance(t, int) for t in markers)


# -- the safety net ---------------------------------------------------------------------------------------------
def test_an_unexpected_error_is_one_line_in_the_banner_and_a_traceback_in_the_log(app, monkeypatch, caplog):
    from dashboard import search_logic

    def broken(trace, text):
        raise RuntimeError("boom at /srv/secret/cache/x.duckdb\nsecond line")

    monkeypatch.setattr(search_logic, "run_search", broken)
    resp = post(app, "search-results.data", {"search-go.n_clicks": 1, "search-input.value": "x",
                                             "url.search": "?trace=t0"}, "search-go.n_clicks")
    assert resp.status_code == 200
    banner = resp.get_json()["sideUpdate"]["app-error"]["children"]
    assert "RuntimeError" in banner and "boom" in banner and "/srv/secret" not in banner and "\n" not in banner
    assert "server log" in banner and "x.duckdb" in banner
    logged = [r for r in caplog.records if r.exc_info and "callback" in r.getMessage()]
    assert logged and "search-results.data" in logged[0].getMessage()


def test_a_malformed_callback_request_is_a_one_line_400(app):
    client = app.server.test_client()
    for body in ({"output": "no-such.children", "outputs": {"id": "x", "property": "y"}, "inputs": [],
                  "changedPropIds": []}, {"inputs": 5}, [1, 2]):
        resp = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
        assert resp.status_code == 400, resp.get_data(as_text=True)[:200]
        assert resp.get_data(as_text=True).count("\n") == 1


def test_the_trace_picker_keeps_the_other_query_values(tmp_path):
    """The header's picker sets ``trace`` and keeps the rest of the page's query (the compare page's b, a
    timeline view's start and end); rendering a page gives back its own query unchanged, its selected event
    included."""
    from dashboard.app import query_values, with_trace

    assert query_values(with_trace({"trace": "t0", "b": "t1"}, "t2")) == {"trace": "t2", "b": "t1"}
    assert with_trace(None, "t1") == "?trace=t1" and with_trace(["junk"], "t1") == "?trace=t1"
    a = write_kernel_trace(tmp_path / "a.trace", iterations=5)
    b = write_kernel_trace(tmp_path / "b.trace", iterations=6)
    app = create_app([a, b])
    try:
        resp = post(app, "url.search", {"trace-dropdown.value": "t1",
                                         "url-query.data": {"trace": "t0", "b": "t0", "start": "5"}},
                    "trace-dropdown.value")
        assert query_values(resp.get_json()["response"]["url"]["search"]) == {"trace": "t1", "b": "t0", "start": "5"}
        same = post(app, "url.search", {"trace-dropdown.value": "t0", "url-query.data": {"trace": "t0", "b": "t1"}},
                    "trace-dropdown.value")
        assert query_values(same.get_json()["response"]["url"]["search"]) == {"trace": "t0", "b": "t1"}
        # a selected event belongs to its trace: kept when a page renders its own trace (named or the default),
        # dropped when the picker switches to another
        for query in ({"trace": "t0", "select": "Instruction:3"}, {"select": "Instruction:3"}):
            kept = post(app, "url.search", {"trace-dropdown.value": "t0", "url-query.data": query},
                        "trace-dropdown.value")
            assert query_values(kept.get_json()["response"]["url"]["search"]) == {"trace": "t0",
                                                                                  "select": "Instruction:3"}
        switched = post(app, "url.search", {"trace-dropdown.value": "t1",
                                            "url-query.data": {"trace": "t0", "select": "Instruction:3"}},
                        "trace-dropdown.value")
        assert query_values(switched.get_json()["response"]["url"]["search"]) == {"trace": "t1"}
    finally:
        app.trnprof_registry.close()


def test_a_click_on_a_query_row_through_the_callback_selects_the_result_row(app):
    resp = post(app, CLICK, {"url.search": "?trace=t0&query=" + quote("SELECT 5 AS start_ts, 9 AS end_ts"),
                             "tl-click.data": {"points": [{"curveNumber": 0, "x": 7e-9, "y": 0}]},
                             "tl-view.data": {"rows": [[-1], [0]], "origin": 0, "res": 1}, "tl-state.data": STATE},
                "tl-click.data")
    assert resp.status_code == 200
    assert resp.get_json()["response"]["tl-selected"]["data"] == {"table": "query", "id": 0, "track_id": -1,
                                                                 "start_ns": 5, "end_ns": 9}
    details = post(app, DETAILS, {"url.search": "?trace=t0&query=" + quote("SELECT 5 AS start_ts, 9 AS end_ts"),
                                  "tl-selected.data": {"table": "query", "id": 0}}, "tl-selected.data")
    assert "query row 0" in json.dumps(details.get_json())


def test_what_led_here_through_the_callback(app):
    resp = post(app, "details-chain.children", {"url.search": "?trace=t0", "details-chain-go.n_clicks": 1,
                                                 "tl-selected.data": {"table": "Instruction", "id": 20}},
                "details-chain-go.n_clicks")
    assert resp.status_code == 200 and "steps over" in json.dumps(resp.get_json())
    missing = post(app, "details-chain.children", {"url.search": "?trace=t0", "details-chain-go.n_clicks": 1,
                                                    "tl-selected.data": {"table": "Instruction", "id": 10**12}},
                   "details-chain-go.n_clicks")
    assert "no row with id" in json.dumps(missing.get_json())
